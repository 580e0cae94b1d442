//! The processes a benchmark run starts (admins, executors, database servers) and their CPU
//! and memory read from `/proc`. Starting, signalling and stopping them is the tests' own
//! `xjob_testkit::process` (children killed when dropped, so nothing outlives the run).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

pub use xjob_testkit::free_port;
pub use xjob_testkit::process::{ChildProcess, signal, terminate_all};

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

/// The fields of `/proc/PID/stat` after the command name, which may contain spaces: index 0 is
/// the state (field 3 of proc(5)), so field N of proc(5) is at index N - 3.
fn stat_fields(stat: &str) -> Vec<&str> {
    stat.rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default()
}

fn stat_ticks(fields: &[&str], field: usize) -> f64 {
    field
        .checked_sub(3)
        .and_then(|index| fields.get(index))
        .and_then(|value| value.parse::<f64>().ok())
        .unwrap_or(0.0)
}

fn read_stat(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()
}

/// user + system CPU seconds of a process, every thread included (proc(5) fields 14, 15).
pub fn cpu_seconds(pid: u32) -> f64 {
    let Some(stat) = read_stat(pid) else {
        return 0.0;
    };
    let fields = stat_fields(&stat);
    (stat_ticks(&fields, 14) + stat_ticks(&fields, 15)) / clock_ticks_per_second()
}

/// CPU seconds of a process plus those of its children that exited and were reaped (fields
/// 16, 17): a PostgreSQL backend's time stays counted after its connection closes.
pub fn cpu_seconds_with_reaped(pid: u32) -> f64 {
    let Some(stat) = read_stat(pid) else {
        return 0.0;
    };
    let fields = stat_fields(&stat);
    let ticks: f64 = [14, 15, 16, 17]
        .iter()
        .map(|&field| stat_ticks(&fields, field))
        .sum();
    ticks / clock_ticks_per_second()
}

/// The parent pid in a `/proc/PID/stat` line (field 4).
pub fn parent_pid(stat: &str) -> Option<u32> {
    stat_fields(stat).get(1).and_then(|ppid| ppid.parse().ok())
}

/// The live processes whose parent is `pid`.
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&child| read_stat(child).and_then(|stat| parent_pid(&stat)) == Some(pid))
        .collect()
}

fn clock_ticks_per_second() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// A `/proc/PID/status` memory field in MiB (`VmHWM` = peak RSS, `VmRSS` = current).
pub fn memory_mb(pid: u32, field: &str) -> f64 {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return 0.0;
    };
    kb_field_mb(&status, field)
}

/// Proportional set size in MiB: shared pages are split among the processes mapping them, so
/// the sum over a PostgreSQL server's processes counts its shared buffers once (their RSS
/// would count them once per backend). Falls back to VmRSS without `smaps_rollup`.
pub fn proportional_mb(pid: u32) -> f64 {
    match std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) {
        Ok(rollup) => kb_field_mb(&rollup, "Pss:"),
        Err(_) => memory_mb(pid, "VmRSS"),
    }
}

/// The first `FIELD  123 kB` line starting with `field`, in MiB (0 when absent).
fn kb_field_mb(text: &str, field: &str) -> f64 {
    text.lines()
        .find(|line| line.starts_with(field))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Runs `sh -c SCRIPT`; its output is kept for the error message.
pub fn run_shell(script: &str) -> anyhow::Result<()> {
    let output = Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| anyhow::anyhow!("cannot run `{script}`: {error}"))?;
    if !output.status.success() {
        anyhow::bail!(
            "`{script}` failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout).trim(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "4242 (postgres: xjob idle) S 4200 4200 4200 0 -1 4194560 1 0 0 0 \
                        250 50 30 20 20 0 1 0 100 1000 10";

    #[test]
    fn stat_fields_survive_spaces_in_the_command_name() {
        assert_eq!(parent_pid(STAT), Some(4200));
        let fields = stat_fields(STAT);
        assert_eq!(stat_ticks(&fields, 14), 250.0);
        assert_eq!(stat_ticks(&fields, 17), 20.0);
        assert_eq!(stat_ticks(&fields, 99), 0.0);
    }

    #[test]
    fn kb_fields_are_read_in_mebibytes() {
        let rollup = "Rss:                2048 kB\nPss:                1024 kB\n";
        assert_eq!(kb_field_mb(rollup, "Pss:"), 1.0);
        assert_eq!(kb_field_mb(rollup, "VmHWM"), 0.0);
    }
}
