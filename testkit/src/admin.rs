//! The admin as a real process: `xjob serve` with its own node id, port, data directory and
//! configuration, killed with SIGKILL and restarted the same way (same node id: a new epoch),
//! paused with SIGSTOP and resumed, and killed when dropped so a failing test leaves nothing
//! running. The caller says where the binary is (`CARGO_BIN_EXE_xjob` in the admin's tests,
//! next to the benchmark's own binary in a benchmark run).

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nix::sys::signal::Signal;
use tonic::transport::Channel;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;

use crate::process::ChildProcess;
use crate::wait_until;

/// Where an admin's stdout and stderr go.
#[derive(Debug, Clone)]
pub enum AdminOutput {
    /// stdout dropped, stderr shared with the caller (warnings show in a failing test).
    Quiet,
    /// Both appended to this file, across restarts (read back with [`tail`]).
    AppendTo(PathBuf),
}

/// How one admin process is started; kept so it restarts the same way.
#[derive(Debug, Clone)]
pub struct AdminSpec {
    /// The `xjob` binary.
    pub binary: PathBuf,
    pub node_id: String,
    pub port: u16,
    pub data_dir: PathBuf,
    /// None: the admin's default, a SQLite file in the data directory.
    pub database_url: Option<String>,
    pub config_file: PathBuf,
    /// The admin's `RUST_LOG`.
    pub log_filter: String,
    pub output: AdminOutput,
    /// More environment for the process (the fault campaign's test hooks), on every start.
    pub env: Vec<(String, String)>,
}

impl AdminSpec {
    /// `http://127.0.0.1:PORT`, what clients and executors dial.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spawn(&self) -> anyhow::Result<ChildProcess> {
        std::fs::create_dir_all(&self.data_dir)?;
        let mut command = Command::new(&self.binary);
        command
            .args(["serve", "--node-id", &self.node_id, "--listen"])
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--config")
            .arg(&self.config_file)
            .env("RUST_LOG", &self.log_filter)
            .env("NO_COLOR", "1")
            .envs(self.env.iter().map(|(name, value)| (name, value)));
        if let Some(url) = &self.database_url {
            command.arg("--database-url").arg(url);
        }
        match &self.output {
            AdminOutput::Quiet => ChildProcess::spawn(&self.node_id, &mut command),
            AdminOutput::AppendTo(path) => {
                let log = OpenOptions::new().create(true).append(true).open(path)?;
                command.stderr(log.try_clone()?);
                ChildProcess::spawn_with_stdout(&self.node_id, &mut command, log.into())
            }
        }
    }
}

/// A running admin process.
pub struct AdminProcess {
    pub spec: AdminSpec,
    process: ChildProcess,
    paused: bool,
}

impl AdminProcess {
    /// Starts `xjob serve` as the spec says (it serves once [`connect_admin`] succeeds).
    pub fn spawn(spec: AdminSpec) -> anyhow::Result<AdminProcess> {
        let process = spec.spawn()?;
        Ok(AdminProcess {
            spec,
            process,
            paused: false,
        })
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// SIGKILL and reap: no shutdown code runs, the fires planned in its memory die with it.
    pub fn kill_9(&mut self) -> anyhow::Result<()> {
        self.process.kill_now()?;
        self.paused = false;
        Ok(())
    }

    /// A new process with the same spec (same node id: a new epoch), killing the old one
    /// first if it still runs.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        if self.process.is_running() {
            self.kill_9()?;
        }
        self.process = self.spec.spawn()?;
        Ok(())
    }

    /// SIGSTOP: the process freezes mid-instruction, holding whatever it held (connections,
    /// an open transaction), as in a long GC pause or a VM migration.
    pub fn pause(&mut self) -> anyhow::Result<()> {
        self.process.signal(Signal::SIGSTOP)?;
        self.paused = true;
        Ok(())
    }

    /// SIGCONT: the process resumes where it stopped, unaware time passed.
    pub fn resume(&mut self) -> anyhow::Result<()> {
        self.process.signal(Signal::SIGCONT)?;
        self.paused = false;
        Ok(())
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// The last `lines` lines of its log (printed when a test fails); empty when its output is
    /// not kept.
    pub fn log_tail(&self, lines: usize) -> String {
        match &self.spec.output {
            AdminOutput::Quiet => String::new(),
            AdminOutput::AppendTo(path) => tail(path, lines),
        }
    }

    /// The process, for stopping it with others (`process::terminate_all` resumes a paused
    /// one first).
    pub fn process_mut(&mut self) -> &mut ChildProcess {
        self.paused = false;
        &mut self.process
    }
}

impl Drop for AdminProcess {
    fn drop(&mut self) {
        // A stopped process cannot be reaped until it runs again.
        if self.paused {
            let _ = self.process.signal(Signal::SIGCONT);
        }
    }
}

/// A `JobAdmin` client of the admin at `url`, once it answers `ListGroups` (it serves and its
/// database is up).
pub async fn connect_admin(
    url: &str,
    timeout: Duration,
) -> anyhow::Result<JobAdminClient<Channel>> {
    let what = format!("the admin at {url} to serve");
    wait_until(timeout, &what, || async {
        let mut client = JobAdminClient::connect(url.to_string()).await.ok()?;
        client
            .list_groups(pb::ListGroupsRequest::default())
            .await
            .ok()?;
        Some(client)
    })
    .await
}

/// The last `lines` lines of a log file (printed when a test fails).
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let kept: Vec<&str> = text.lines().collect();
    kept[kept.len().saturating_sub(lines)..].join("\n")
}
