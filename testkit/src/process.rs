//! Processes a test or a benchmark starts, and the processes it watches die: children killed
//! when dropped (a failing test leaves nothing running), signals through nix's safe wrapper
//! (the workspace forbids unsafe code), and a pid's death awaited with a deadline, never
//! checked once right after a signal (delivery is asynchronous).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::errno::Errno;
pub use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::wait_until;

/// A child process that is killed (SIGKILL) and reaped when dropped.
pub struct ChildProcess {
    pub name: String,
    child: Child,
}

impl ChildProcess {
    /// Starts `command` with stdin and stdout closed (stderr stays the caller's).
    pub fn spawn(name: &str, command: &mut Command) -> anyhow::Result<ChildProcess> {
        ChildProcess::spawn_with_stdout(name, command, Stdio::null())
    }

    /// Starts `command` with stdin closed and stdout sent to `stdout`.
    pub fn spawn_with_stdout(
        name: &str,
        command: &mut Command,
        stdout: Stdio,
    ) -> anyhow::Result<ChildProcess> {
        let child = command
            .stdin(Stdio::null())
            .stdout(stdout)
            .spawn()
            .map_err(|error| anyhow::anyhow!("cannot start {name}: {error}"))?;
        Ok(ChildProcess {
            name: name.to_string(),
            child,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends `signal` (SIGSTOP, SIGCONT, SIGTERM…) to the process.
    pub fn signal(&self, signal: Signal) -> anyhow::Result<()> {
        self::signal(self.pid(), signal)
    }

    /// SIGKILL and reap: no shutdown code runs in the process, and it is gone on return.
    pub fn kill_now(&mut self) -> anyhow::Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }

    /// SIGTERM, without waiting: a group of processes is asked at once, then waited for, so
    /// stopping it takes as long as its slowest member, not the sum.
    pub fn ask_to_exit(&mut self) -> anyhow::Result<()> {
        if self.child.try_wait()?.is_some() {
            return Ok(());
        }
        // A stopped process only acts on SIGTERM once it runs again.
        let _ = self.signal(Signal::SIGCONT);
        let _ = self.signal(Signal::SIGTERM);
        Ok(())
    }

    /// Waits for the exit until `deadline`, then SIGKILL.
    pub fn wait_exit(&mut self, deadline: Instant) -> anyhow::Result<()> {
        while Instant::now() < deadline {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{} did not exit after SIGTERM; killing it", self.name);
        self.kill_now()
    }
}

/// Asks every process to exit (SIGTERM), then waits for all of them up to `timeout`.
pub fn terminate_all<'a>(
    processes: impl IntoIterator<Item = &'a mut ChildProcess>,
    timeout: Duration,
) -> anyhow::Result<()> {
    let mut processes: Vec<&mut ChildProcess> = processes.into_iter().collect();
    for process in processes.iter_mut() {
        process.ask_to_exit()?;
    }
    let deadline = Instant::now() + timeout;
    for process in processes {
        process.wait_exit(deadline)?;
    }
    Ok(())
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Sends `signal` to the process `pid`.
pub fn signal(pid: u32, signal: Signal) -> anyhow::Result<()> {
    let raw = i32::try_from(pid).map_err(|_| anyhow::anyhow!("pid {pid} out of range"))?;
    nix::sys::signal::kill(Pid::from_raw(raw), signal)
        .map_err(|error| anyhow::anyhow!("kill -{signal} {pid}: {error}"))
}

/// Whether the process is gone: no such process, or a zombie (dead, waiting to be reaped by
/// whoever adopted it).
pub fn is_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, fields)| fields.starts_with('Z')),
        Err(_) => nix::sys::signal::kill(Pid::from_raw(pid), None) == Err(Errno::ESRCH),
    }
}

/// Waits until the process `pid` is gone (see [`is_gone`]).
pub async fn wait_gone(pid: i32, timeout: Duration) -> anyhow::Result<()> {
    wait_until(
        timeout,
        &format!("process {pid} to be gone"),
        || async move { is_gone(pid).then_some(()) },
    )
    .await
}

/// Waits until the file at `path` holds a pid (a script wrote `echo $$ > path`), and returns it.
pub async fn read_pid(path: &Path, timeout: Duration) -> anyhow::Result<i32> {
    let what = format!("a pid in {}", path.display());
    wait_until(timeout, &what, || async {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|text| text.trim().parse().ok())
    })
    .await
}
