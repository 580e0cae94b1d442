//! The command line: which workload to run and its knobs.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use crate::campaign::options::Options as CampaignOptions;
use crate::database::Backend;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Workload {
    /// N jobs every second, all aligned.
    W1,
    /// N jobs every 10 s (--period), phases spread evenly.
    W2,
    /// 300 jobs every second (the long acceptance run; set --duration).
    W3,
    /// N jobs all at second 0 of every minute.
    W4,
    /// W2-style load on several admins; the schedule lock holder is killed (-9) and restarted.
    F1,
    /// As F1, but the lock holder is stopped (SIGSTOP) for two node leases, then resumed.
    F2,
    /// As F1 on PostgreSQL; the database is stopped and started again once mid-window.
    F3,
    /// N jobs every second (default 20) while faults drawn from --seed hit the cluster; a
    /// checker reports lost, duplicated, late and unaccounted occurrences.
    Campaign,
    /// Scale-out: W2-style load (2000 jobs every 2 s) run on 1, 2, then up to --admins (3)
    /// admins, each admin capped at --admin-cpu cores; reports the fires delivered on time
    /// per second for each admin count and their ratio.
    S1,
}

impl Workload {
    pub(crate) fn is_failover(self) -> bool {
        matches!(self, Workload::F1 | Workload::F2 | Workload::F3)
    }
}

#[derive(Parser, Debug)]
#[command(about = "Benchmarks xjob with real processes on loopback (see shared/BENCH.md)")]
pub(crate) struct Args {
    #[arg(long, value_enum, ignore_case = true, default_value = "w1")]
    pub(crate) workload: Workload,
    /// Number of jobs (defaults: W1 100, W2 1000, W3 300, W4 1000, F* 2000).
    #[arg(long)]
    pub(crate) jobs: Option<usize>,
    /// Period in seconds of the W2 and F* jobs, phases spread over it; must divide 60
    /// (defaults: W2 10, F* 2, so 2000 jobs make 1000 fires/s).
    #[arg(long)]
    pub(crate) period: Option<i64>,
    /// Seconds of warm-up after the first common fire.
    #[arg(long, default_value_t = 10)]
    pub(crate) warmup: u64,
    /// Seconds of the measurement window.
    #[arg(long, default_value_t = 60)]
    pub(crate) duration: u64,
    /// Seconds to wait after the window for late fires.
    #[arg(long, default_value_t = 5)]
    pub(crate) drain: u64,
    /// Database backend: sqlite (a file in the scratch directory), or a postgres / mariadb
    /// server the harness starts on a free loopback port (default: sqlite; F3: postgres).
    #[arg(long, value_enum, ignore_case = true)]
    pub(crate) database: Option<Backend>,
    /// An already running PostgreSQL or MySQL/MariaDB server (postgres://… or mysql://…);
    /// the run gets a new scratch database on it (left there afterwards).
    #[arg(long)]
    pub(crate) database_url: Option<String>,
    /// With --database-url, for F3: a command taking start|stop|checkpoint that controls
    /// that server (like XJOB_TEST_POSTGRES_CTL of .ci/databases.sh).
    #[arg(long)]
    pub(crate) database_ctl: Option<String>,
    /// A setting of the server the harness starts, NAME=VALUE (repeatable): `-c NAME=VALUE`
    /// for PostgreSQL, `--NAME=VALUE` for MariaDB. Unset, each runs with its defaults.
    #[arg(long = "db-setting", value_parser = crate::database::parse_setting)]
    pub(crate) db_settings: Vec<String>,
    /// Admin processes sharing the database (default: 1; F*: 3).
    #[arg(long)]
    pub(crate) admins: Option<usize>,
    /// Executor processes, each listing every admin (default: 1; F*: 2).
    #[arg(long)]
    pub(crate) executors: Option<usize>,
    /// F1: kills of the lock holder; F2: stalls of it.
    #[arg(long, default_value_t = 5)]
    pub(crate) kills: usize,
    /// F1/F2: seconds between one disruption settling and the next.
    #[arg(long, default_value_t = 3)]
    pub(crate) kill_spacing: u64,
    /// F3: seconds the database stays down.
    #[arg(long, default_value_t = 5)]
    pub(crate) outage: u64,
    /// The admins' node lease in ms (default: the admin's 10 s; F2 and F3: 2000, as the
    /// cluster tests, so a stall of two leases fits the window).
    #[arg(long)]
    pub(crate) node_lease_ms: Option<u64>,
    /// Run the admins without their liveness locks (`liveness_locks = false`): a killed admin
    /// is then taken over only once its lease lapses (the "before" of F1).
    #[arg(long)]
    pub(crate) no_liveness_locks: bool,
    /// The admins' `log_retention` in seconds; with it the database's size is sampled every
    /// `--size-every` seconds and printed as a curve (default: the admin's retention, no curve).
    #[arg(long)]
    pub(crate) log_retention_s: Option<u64>,
    /// The admins' `retention_interval` in seconds, with --log-retention-s.
    #[arg(long, default_value_t = 5)]
    pub(crate) retention_interval_s: u64,
    /// Seconds between two samples of the database's size, with --log-retention-s.
    #[arg(long, default_value_t = 10)]
    pub(crate) size_every: u64,
    /// File the JSON line is appended to.
    #[arg(long, default_value = "bench-results.jsonl")]
    pub(crate) results: PathBuf,
    /// Jobs renamed (`GetJob` + `UpdateJob`, 16 at a time) a third into the window, while the
    /// load runs; the latencies of the writes are printed (0: none).
    #[arg(long, default_value_t = 0)]
    pub(crate) api_writes: usize,
    /// With --api-writes: stop the jobs (`StopJob`) instead of renaming them, as a script
    /// cleaning up would (issue 11's fault 2). A stopped job's later fires are not planned,
    /// so the harness counts them missed: read the run for the API's figures.
    #[arg(long)]
    pub(crate) api_stops: bool,
    /// The admins' `max_unsent_runs` (admission control; default: the admin's).
    #[arg(long)]
    pub(crate) max_unsent_runs: Option<usize>,
    /// The admins' `send_ahead_ms`: runs leave up to this many milliseconds before their time
    /// and the executors start them on their own timers (default: the admin's, off).
    #[arg(long)]
    pub(crate) send_ahead_ms: Option<u64>,
    /// Exit with an error when any fire was lost (missed and not recorded as a misfire),
    /// duplicated or off the grid (CI smoke run).
    #[arg(long)]
    pub(crate) fail_on_loss: bool,
    /// S1: each admin's CPU quota in cores (a cgroup `cpu` limit; needs root).
    #[arg(long, default_value_t = 0.5)]
    pub(crate) admin_cpu: f64,
    /// S1: a fire counts as on time when it started at most this many ms after its second.
    #[arg(long, default_value_t = 1000)]
    pub(crate) on_time_ms: i64,
    #[command(flatten)]
    pub(crate) campaign: CampaignOptions,
}
