//! The admin processes of a run (`xjob serve`, one or several sharing the database): started
//! with their own node id, port and data directory, killed (SIGKILL) and restarted with the
//! same node id, paused (SIGSTOP) and resumed, and measured across restarts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use xjob_testkit::{AdminOutput, AdminProcess, AdminSpec};

use crate::processes::{self, ChildProcess, sibling_binary};

/// Leases and intervals written to the admins' configuration file. `None` keeps the admin's
/// default (the W workloads run with the defaults, as before).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timing {
    pub node_lease: Option<Duration>,
    /// `max_unsent_runs` (admission control), when not the admin's default.
    pub max_unsent_runs: Option<usize>,
    /// `send_ahead_ms`, when not the admin's default (0: every run sent at its instant).
    pub send_ahead_ms: Option<u64>,
    /// `log_retention` and `retention_interval` (off: the admin's defaults).
    pub retention: Option<(Duration, Duration)>,
    /// The admins run without their liveness locks (`liveness_locks = false`): a dead admin is
    /// then noticed by its lease alone, as before the locks existed.
    pub no_liveness_locks: bool,
}

impl Timing {
    /// The TOML the admins read. With a short node lease the executors heartbeat every 500 ms
    /// and their lease is three node leases (at least 6 s), as in the cluster tests, so a
    /// stalled admin does not take its executors out of routing.
    pub fn config_toml(&self) -> String {
        let mut toml = "time_zone = \"UTC\"\n".to_string();
        if let Some(lease) = self.node_lease {
            let executor_lease = (lease * 3).max(Duration::from_secs(6));
            toml.push_str(&format!(
                "node_lease = \"{}ms\"\nheartbeat_interval = \"500ms\"\n\
                 executor_lease = \"{}ms\"\nhandshake_timeout = \"2s\"\n",
                lease.as_millis(),
                executor_lease.as_millis()
            ));
        }
        if self.no_liveness_locks {
            toml.push_str("liveness_locks = false\n");
        }
        if let Some(bound) = self.max_unsent_runs {
            toml.push_str(&format!("max_unsent_runs = {bound}\n"));
        }
        if let Some(lead_ms) = self.send_ahead_ms {
            toml.push_str(&format!("send_ahead_ms = {lead_ms}\n"));
        }
        if let Some((retention, interval)) = self.retention {
            toml.push_str(&format!(
                "log_retention = \"{}s\"\nretention_interval = \"{}s\"\n",
                retention.as_secs(),
                interval.as_secs()
            ));
        }
        toml
    }

    /// The node lease the admins run with (the admin's default is 10 s).
    pub fn node_lease(&self) -> Duration {
        self.node_lease.unwrap_or(Duration::from_secs(10))
    }
}

/// The clock offset file's name in an admin's data directory.
const CLOCK_OFFSET_FILE: &str = "clock-offset-ms";

/// One admin of the run, measured across its restarts.
pub struct Admin {
    process: AdminProcess,
    /// CPU seconds and peak RSS of its earlier, killed processes.
    retired_cpu_s: f64,
    retired_peak_rss_mb: f64,
}

impl Admin {
    pub fn node_id(&self) -> &str {
        &self.process.spec.node_id
    }

    /// `http://127.0.0.1:PORT`, what clients and executors dial.
    pub fn url(&self) -> String {
        self.process.spec.url()
    }

    /// The file whose milliseconds this admin adds to its clock, when started with the clock
    /// hook (`spawn_admins`).
    pub fn clock_offset_file(&self) -> PathBuf {
        self.process.spec.data_dir.join(CLOCK_OFFSET_FILE)
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// SIGKILL: no shutdown code runs; the fires planned in its memory die with it.
    pub fn kill_9(&mut self) -> anyhow::Result<()> {
        self.retire_measurements();
        self.process.kill_9()
    }

    /// A new process with the same node id, port and data directory.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        if self.process.is_running() {
            self.retire_measurements();
        }
        self.process.restart()
    }

    /// SIGSTOP: frozen with whatever it holds, as in a long GC pause or a VM migration.
    pub fn pause(&mut self) -> anyhow::Result<()> {
        self.process.pause()
    }

    /// SIGCONT: it resumes unaware that time passed.
    pub fn resume(&mut self) -> anyhow::Result<()> {
        self.process.resume()
    }

    /// CPU seconds of every process this admin ran as.
    pub fn cpu_s(&self) -> f64 {
        self.retired_cpu_s + processes::cpu_seconds(self.pid())
    }

    /// Peak RSS of the largest of its processes.
    pub fn peak_rss_mb(&self) -> f64 {
        self.retired_peak_rss_mb
            .max(processes::memory_mb(self.pid(), "VmHWM"))
    }

    fn retire_measurements(&mut self) {
        self.retired_cpu_s += processes::cpu_seconds(self.pid());
        self.retired_peak_rss_mb = self.peak_rss_mb();
    }

    /// The process, for stopping it with the others (`processes::terminate_all`; a paused
    /// admin is resumed there first).
    pub fn process_mut(&mut self) -> &mut ChildProcess {
        self.process.process_mut()
    }
}

/// Starts `count` admins on `database_url`, named `bench-admin-1…N`. With
/// `XJOB_BENCH_ADMIN_LOG` set (a `RUST_LOG` filter) each admin's output is kept in
/// `NODE_ID.log` in the current directory, across its restarts. With `clock_hook`, each admin's
/// clock follows the offset file [`Admin::clock_offset_file`] (the campaign's clock step).
pub fn spawn_admins(
    dir: &Path,
    count: usize,
    database_url: &str,
    timing: Timing,
    clock_hook: bool,
) -> anyhow::Result<Vec<Admin>> {
    let config_file = dir.join("admin.toml");
    std::fs::write(&config_file, timing.config_toml())?;
    let binary = sibling_binary("xjob")?;
    let log_filter = std::env::var("XJOB_BENCH_ADMIN_LOG").ok();
    (1..=count)
        .map(|index| {
            let node_id = format!("bench-admin-{index}");
            let output = match log_filter {
                Some(_) => AdminOutput::AppendTo(PathBuf::from(format!("{node_id}.log"))),
                None => AdminOutput::Quiet,
            };
            let data_dir = dir.join(format!("admin-{index}-data"));
            let env = if clock_hook {
                let file = data_dir.join(CLOCK_OFFSET_FILE);
                vec![(
                    "XJOB_TEST_CLOCK_OFFSET_FILE".to_string(),
                    file.display().to_string(),
                )]
            } else {
                Vec::new()
            };
            let spec = AdminSpec {
                binary: binary.clone(),
                port: processes::free_port()?,
                data_dir,
                database_url: Some(database_url.to_string()),
                config_file: config_file.clone(),
                log_filter: log_filter.clone().unwrap_or_else(|| "warn".into()),
                output,
                node_id,
                env,
            };
            Ok(Admin {
                process: AdminProcess::spawn(spec)?,
                retired_cpu_s: 0.0,
                retired_peak_rss_mb: 0.0,
            })
        })
        .collect()
}

/// Every admin's address, rotated to start at admin `first % len`: executor `i` connects to
/// admin `i` first, so sessions spread over the admins, and moves on down the list when its
/// admin dies.
pub fn rotated_urls(urls: &[String], first: usize) -> Vec<String> {
    let mut rotated = urls.to_vec();
    if !rotated.is_empty() {
        let len = rotated.len();
        rotated.rotate_left(first % len);
    }
    rotated
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executors_start_at_different_admins() {
        let urls: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        assert_eq!(rotated_urls(&urls, 0), ["a", "b", "c"]);
        assert_eq!(rotated_urls(&urls, 1), ["b", "c", "a"]);
        assert_eq!(rotated_urls(&urls, 4), ["b", "c", "a"]);
        assert!(rotated_urls(&[], 3).is_empty());
    }

    #[test]
    fn a_short_lease_shortens_executor_heartbeats() {
        assert_eq!(Timing::default().config_toml(), "time_zone = \"UTC\"\n");
        let short = Timing {
            node_lease: Some(Duration::from_secs(2)),
            ..Timing::default()
        };
        let toml = short.config_toml();
        assert!(toml.contains("node_lease = \"2000ms\""));
        assert!(toml.contains("executor_lease = \"6000ms\""));
        assert_eq!(Timing::default().node_lease(), Duration::from_secs(10));
    }

    #[test]
    fn a_retention_is_written_in_seconds() {
        let timing = Timing {
            retention: Some((Duration::from_secs(60), Duration::from_secs(5))),
            ..Timing::default()
        };
        let toml = timing.config_toml();
        assert!(toml.contains("log_retention = \"60s\"\nretention_interval = \"5s\"\n"));
    }
}
