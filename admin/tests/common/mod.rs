//! Helpers for process-level tests: the real `xjob` binary as a child process (SIGKILL,
//! SIGSTOP/SIGCONT, restart), free loopback ports, and waiting on conditions with deadlines.
//! Cargo builds the binary for the tests of this package and passes its path in
//! `CARGO_BIN_EXE_xjob`.

#![allow(dead_code)]

pub mod cluster;
pub mod ledger;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;

/// How one admin process is started; kept so it can be restarted the same way.
#[derive(Debug, Clone)]
pub struct AdminSpec {
    pub node_id: String,
    pub port: u16,
    pub data_dir: PathBuf,
    pub database_url: String,
    pub config_file: PathBuf,
    /// stdout and stderr of every start are appended here.
    pub log_file: PathBuf,
}

impl AdminSpec {
    /// `http://127.0.0.1:PORT`, what clients and executors dial.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// A spawned admin process, killed when dropped so a failing test leaves nothing running.
pub struct AdminProcess {
    pub spec: AdminSpec,
    child: Child,
    stopped: bool,
}

impl AdminProcess {
    /// Starts `xjob serve` with the spec's node id, port, database and config file.
    pub fn spawn(spec: AdminSpec) -> anyhow::Result<AdminProcess> {
        let child = spawn_child(&spec)?;
        Ok(AdminProcess {
            spec,
            child,
            stopped: false,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL: no shutdown code runs, the ring's in-memory fires are lost with the process.
    pub fn kill_9(&mut self) -> anyhow::Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }

    /// SIGKILL, then a new process with the same spec (same node id: a new epoch).
    pub fn restart_after_kill(&mut self) -> anyhow::Result<()> {
        self.kill_9()?;
        self.child = spawn_child(&self.spec)?;
        Ok(())
    }

    /// SIGSTOP: the process freezes mid-instruction, holding whatever it held (connections,
    /// an open transaction), as in a long GC pause or a VM migration.
    pub fn pause(&mut self) -> anyhow::Result<()> {
        signal(self.pid(), "STOP")?;
        self.stopped = true;
        Ok(())
    }

    /// SIGCONT: the process resumes where it stopped, unaware time passed.
    pub fn resume(&mut self) -> anyhow::Result<()> {
        signal(self.pid(), "CONT")?;
        self.stopped = false;
        Ok(())
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for AdminProcess {
    fn drop(&mut self) {
        if self.stopped {
            let _ = signal(self.pid(), "CONT");
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_child(spec: &AdminSpec) -> anyhow::Result<Child> {
    std::fs::create_dir_all(&spec.data_dir)?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&spec.log_file)?;
    let child = Command::new(env!("CARGO_BIN_EXE_xjob"))
        .args(["serve", "--node-id", &spec.node_id, "--listen"])
        .arg(format!("127.0.0.1:{}", spec.port))
        .arg("--data-dir")
        .arg(&spec.data_dir)
        .arg("--database-url")
        .arg(&spec.database_url)
        .arg("--config")
        .arg(&spec.config_file)
        .env("RUST_LOG", "info,sqlx=warn,h2=warn,tower=warn,hyper=warn")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    Ok(child)
}

/// Sends a signal by name through `kill(1)` (this crate forbids unsafe code, so no libc).
pub fn signal(pid: u32, name: &str) -> anyhow::Result<()> {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()?;
    anyhow::ensure!(status.success(), "kill -{name} {pid} failed: {status}");
    Ok(())
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Polls `condition` every 20 ms until it returns `Some(value)`; errors after `timeout` naming
/// `what`, so a failing test says which event never happened.
pub async fn wait_until<T, F, Fut>(
    timeout: Duration,
    what: &str,
    mut condition: F,
) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = condition().await {
            return Ok(value);
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Connects a `JobAdmin` client once the admin answers.
pub async fn connect(url: &str) -> anyhow::Result<JobAdminClient<tonic::transport::Channel>> {
    wait_until(
        Duration::from_secs(30),
        "the admin to accept connections",
        || async {
            let mut client = JobAdminClient::connect(url.to_string()).await.ok()?;
            client
                .list_groups(pb::ListGroupsRequest::default())
                .await
                .ok()?;
            Some(client)
        },
    )
    .await
}

/// The last `lines` lines of an admin's log (printed when a test fails).
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let kept: Vec<&str> = text.lines().collect();
    kept[kept.len().saturating_sub(lines)..].join("\n")
}
