//! The executor under test: any command line, started in its own process group with the
//! suite's environment (XJOB_ADMIN_ADDR, XJOB_APP_NAME, XJOB_EXECUTOR_PORT, XJOB_ACCESS_TOKEN,
//! XJOB_LOG_DIR), signalled as a group so wrappers (`sh`, `npm`) take their children along.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// One executor implementation: a label for the table and the command that starts it.
#[derive(Debug, Clone)]
pub struct ExecutorCommand {
    pub name: String,
    pub command: String,
    /// Session dispatch: the executor is started with `XJOB_DISPATCH=session`, opens no port
    /// and registers as `session://APP-PORT`; the admin's calls travel down its session.
    pub session: bool,
}

impl ExecutorCommand {
    /// Parses `XJOB_CONFORMANCE_EXECUTOR`: entries separated by `;` or newlines, each
    /// `name=command` or a bare command (named after its first word). `rust` alone stands for
    /// the Rust SDK's example at `rust_example` in both dispatch modes (`rust` and
    /// `rust-session`); a name ending in `@session` (`python@session=…`) runs that executor in
    /// session dispatch, named `NAME-session` in the table.
    pub fn parse_list(spec: &str, rust_example: &Path) -> Vec<ExecutorCommand> {
        spec.split([';', '\n'])
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .flat_map(|entry| {
                if entry == "rust" {
                    return Self::rust_both(rust_example);
                }
                vec![Self::parse_entry(entry)]
            })
            .collect()
    }

    /// The Rust example in dial mode, then in session dispatch.
    pub fn rust_both(binary: &Path) -> Vec<ExecutorCommand> {
        let session = ExecutorCommand {
            name: "rust-session".to_string(),
            session: true,
            ..Self::rust(binary)
        };
        vec![Self::rust(binary), session]
    }

    fn parse_entry(entry: &str) -> ExecutorCommand {
        let parsed = Self::parse_plain(entry);
        match parsed.name.strip_suffix("@session") {
            Some(name) => ExecutorCommand {
                name: format!("{name}-session"),
                session: true,
                ..parsed
            },
            None => parsed,
        }
    }

    fn parse_plain(entry: &str) -> ExecutorCommand {
        match entry.split_once('=') {
            Some((name, command)) if !name.contains(char::is_whitespace) && !name.is_empty() => {
                ExecutorCommand {
                    name: name.to_string(),
                    command: command.trim().to_string(),
                    session: false,
                }
            }
            _ => ExecutorCommand {
                name: entry
                    .split_whitespace()
                    .next()
                    .unwrap_or("executor")
                    .to_string(),
                command: entry.to_string(),
                session: false,
            },
        }
    }

    /// The Rust SDK's conformance example.
    pub fn rust(binary: &Path) -> ExecutorCommand {
        ExecutorCommand {
            name: "rust".to_string(),
            command: format!("'{}'", binary.display()),
            session: false,
        }
    }
}

/// What an executor process is started with.
#[derive(Debug, Clone)]
pub struct ExecutorEnv {
    pub admin_addrs: String,
    pub app_name: String,
    pub port: u16,
    pub access_token: String,
    pub log_dir: PathBuf,
    /// Where its stdout and stderr go (shown when a scenario fails).
    pub output: PathBuf,
    /// Working directory of the command (the repository root).
    pub work_dir: PathBuf,
    /// More variables (TLS: `XJOB_TLS_CERT`, `XJOB_TLS_KEY`, `XJOB_TLS_CA`,
    /// `XJOB_TLS_REQUIRE_CLIENT_CERT`).
    pub extra_env: Vec<(String, String)>,
    /// Session dispatch (`XJOB_DISPATCH=session`).
    pub session: bool,
}

/// A started executor process (its process group), SIGKILLed when dropped.
pub struct ExecutorProcess {
    child: Child,
    pgid: Pid,
    pub env: ExecutorEnv,
}

impl ExecutorProcess {
    pub fn spawn(command: &ExecutorCommand, env: ExecutorEnv) -> anyhow::Result<Self> {
        std::fs::create_dir_all(&env.log_dir)?;
        let output = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&env.output)?;
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("exec {}", command.command))
            .current_dir(&env.work_dir)
            .env("XJOB_ADMIN_ADDR", &env.admin_addrs)
            .env("XJOB_APP_NAME", &env.app_name)
            .env("XJOB_EXECUTOR_PORT", env.port.to_string())
            .env("XJOB_ACCESS_TOKEN", &env.access_token)
            .env("XJOB_LOG_DIR", &env.log_dir)
            .env(
                "XJOB_DISPATCH",
                if env.session { "session" } else { "dial" },
            )
            .envs(env.extra_env.iter().map(|(key, value)| (key, value)))
            .stdin(Stdio::null())
            .stdout(output.try_clone()?)
            .stderr(output)
            .process_group(0)
            .spawn()?;
        let pid = child
            .id()
            .ok_or_else(|| anyhow::anyhow!("the executor exited at once"))?;
        let pgid = Pid::from_raw(i32::try_from(pid)?);
        Ok(ExecutorProcess { child, pgid, env })
    }

    /// The address it registers: `http://127.0.0.1:port`, `https://` when it serves TLS;
    /// `session://APP-PORT` in session dispatch (the port is then only a unique name).
    pub fn address(&self) -> String {
        if self.env.session {
            return format!("session://{}-{}", self.env.app_name, self.env.port);
        }
        let tls = self
            .env
            .extra_env
            .iter()
            .any(|(key, _)| key == "XJOB_TLS_CERT");
        let scheme = if tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.env.port)
    }

    /// SIGKILL to the whole group, as a crash; waits for the process to be gone.
    pub async fn kill_9(&mut self) -> anyhow::Result<()> {
        let _ = killpg(self.pgid, Signal::SIGKILL);
        self.child.wait().await?;
        Ok(())
    }

    /// SIGTERM to the group; waits up to `bound` for the process to exit.
    pub async fn terminate(&mut self, bound: Duration) -> anyhow::Result<ExitStatus> {
        killpg(self.pgid, Signal::SIGTERM)?;
        match tokio::time::timeout(bound, self.child.wait()).await {
            Ok(status) => Ok(status?),
            Err(_) => anyhow::bail!("the executor did not exit within {bound:?} of SIGTERM"),
        }
    }

    /// The last `lines` lines of its output, for failure messages.
    pub fn output_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.env.output).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for ExecutorProcess {
    fn drop(&mut self) {
        let _ = killpg(self.pgid, Signal::SIGKILL);
    }
}
