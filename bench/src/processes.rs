//! The processes a benchmark run starts (admin, executors), killed when dropped so nothing
//! outlives the run, and their CPU and memory read from `/proc`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A child process that is stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Managed {
    pub name: String,
    child: Child,
}

impl Managed {
    pub fn spawn(name: &str, command: &mut Command) -> anyhow::Result<Managed> {
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|error| anyhow::anyhow!("cannot start {name}: {error}"))?;
        Ok(Managed {
            name: name.to_string(),
            child,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM and wait up to `timeout` for a clean exit, then SIGKILL.
    pub fn terminate(&mut self, timeout: std::time::Duration) -> anyhow::Result<()> {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status();
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        tracing::warn!(process = %self.name, "did not exit after SIGTERM; killing it");
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for Managed {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A binary built next to the running one (`target/<profile>/NAME`).
pub fn sibling_binary(name: &str) -> anyhow::Result<PathBuf> {
    let current = std::env::current_exe()?;
    let dir = current
        .parent()
        .ok_or_else(|| anyhow::anyhow!("no parent dir of {}", current.display()))?;
    let path = dir.join(name);
    if !path.exists() {
        anyhow::bail!(
            "{} not found: build it first (cargo build --release --workspace --bins)",
            path.display()
        );
    }
    Ok(path)
}

/// user + system CPU seconds of a process (from /proc/PID/stat).
pub fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let Some(after) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
        return 0.0;
    };
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |index: usize| {
        fields
            .get(index)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of stat; index 11 and 12 after the state field.
    (ticks(11) + ticks(12)) / clock_ticks_per_second()
}

fn clock_ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100.0)
}

/// A `/proc/PID/status` memory field in MiB (`VmHWM` = peak RSS, `VmRSS` = current).
pub fn memory_mb(pid: u32, field: &str) -> f64 {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return 0.0;
    };
    status
        .lines()
        .find(|line| line.starts_with(field))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// A free loopback port (bound then released).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Machine description for the context fields.
pub fn machine() -> (usize, String) {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, model)| model.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string());
    (cores, model)
}

/// The git commit of the working tree, if any.
pub fn git_commit(dir: &Path) -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(dir)
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|text| text.trim().to_string())
        .unwrap_or_default()
}
