//! `xjob-bench`: runs one workload of `shared/BENCH.md` against real processes on loopback —
//! one or several `xjob` admins sharing a database (an SQLite file, or a PostgreSQL / MariaDB
//! server the harness starts or is given), remote `xjob-bench-executor`s with a recording
//! no-op handler — then stops everything it started and prints one JSON line of metrics (also
//! appended to the results file). The failover workloads kill or stall the admin holding the
//! schedule lock (F1, F2) or restart the database (F3) during the window.
//!
//! ```text
//! cargo build --release --workspace --bins
//! target/release/xjob-bench --workload W1 --jobs 1000 --warmup 10 --duration 60
//! target/release/xjob-bench --workload F1 --database postgres --kills 5
//! ```

mod admins;
mod campaign;
mod database;
mod disrupt;
mod failover;
mod grpc;
mod metrics;
mod processes;
mod report;
mod sizing;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Parser, ValueEnum};
use xjob_admin::store::Store;

use admins::{Admin, Timing};
use database::{Backend, Database};
use disrupt::{Kind, Restart, Target};
use failover::Disruption;
use metrics::{Figures, PeriodicGrid, Record};
use processes::{ChildProcess, cpu_seconds, free_port, memory_mb, sibling_binary};
use report::{FailoverLine, RecoveryLine, ResultLine, TakeoverLine, rounded};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Workload {
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
}

impl Workload {
    fn is_failover(self) -> bool {
        matches!(self, Workload::F1 | Workload::F2 | Workload::F3)
    }
}

#[derive(Parser, Debug)]
#[command(about = "Benchmarks xjob with real processes on loopback (see shared/BENCH.md)")]
struct Args {
    #[arg(long, value_enum, ignore_case = true, default_value = "w1")]
    workload: Workload,
    /// Number of jobs (defaults: W1 100, W2 1000, W3 300, W4 1000, F* 2000).
    #[arg(long)]
    jobs: Option<usize>,
    /// Period in seconds of the W2 and F* jobs, phases spread over it; must divide 60
    /// (defaults: W2 10, F* 2, so 2000 jobs make 1000 fires/s).
    #[arg(long)]
    period: Option<i64>,
    /// Seconds of warm-up after the first common fire.
    #[arg(long, default_value_t = 10)]
    warmup: u64,
    /// Seconds of the measurement window.
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// Seconds to wait after the window for late fires.
    #[arg(long, default_value_t = 5)]
    drain: u64,
    /// Database backend: sqlite (a file in the scratch directory), or a postgres / mariadb
    /// server the harness starts on a free loopback port (default: sqlite; F3: postgres).
    #[arg(long, value_enum, ignore_case = true)]
    database: Option<Backend>,
    /// An already running PostgreSQL or MySQL/MariaDB server (postgres://… or mysql://…);
    /// the run gets a new scratch database on it (left there afterwards).
    #[arg(long)]
    database_url: Option<String>,
    /// With --database-url, for F3: a command taking start|stop|checkpoint that controls
    /// that server (like XJOB_TEST_POSTGRES_CTL of .ci/databases.sh).
    #[arg(long)]
    database_ctl: Option<String>,
    /// Admin processes sharing the database (default: 1; F*: 3).
    #[arg(long)]
    admins: Option<usize>,
    /// Executor processes, each listing every admin (default: 1; F*: 2).
    #[arg(long)]
    executors: Option<usize>,
    /// F1: kills of the lock holder; F2: stalls of it.
    #[arg(long, default_value_t = 5)]
    kills: usize,
    /// F1/F2: seconds between one disruption settling and the next.
    #[arg(long, default_value_t = 3)]
    kill_spacing: u64,
    /// F3: seconds the database stays down.
    #[arg(long, default_value_t = 5)]
    outage: u64,
    /// The admins' node lease in ms (default: the admin's 10 s; F2 and F3: 2000, as the
    /// cluster tests, so a stall of two leases fits the window).
    #[arg(long)]
    node_lease_ms: Option<u64>,
    /// Run the admins without their liveness locks (`liveness_locks = false`): a killed admin
    /// is then taken over only once its lease lapses (the "before" of F1).
    #[arg(long)]
    no_liveness_locks: bool,
    /// The admins' `log_retention` in seconds; with it the database's size is sampled every
    /// `--size-every` seconds and printed as a curve (default: the admin's retention, no curve).
    #[arg(long)]
    log_retention_s: Option<u64>,
    /// The admins' `retention_interval` in seconds, with --log-retention-s.
    #[arg(long, default_value_t = 5)]
    retention_interval_s: u64,
    /// Seconds between two samples of the database's size, with --log-retention-s.
    #[arg(long, default_value_t = 10)]
    size_every: u64,
    /// File the JSON line is appended to.
    #[arg(long, default_value = "bench-results.jsonl")]
    results: PathBuf,
    /// Jobs renamed (`GetJob` + `UpdateJob`, 16 at a time) a third into the window, while the
    /// load runs; the latencies of the writes are printed (0: none).
    #[arg(long, default_value_t = 0)]
    api_writes: usize,
    /// With --api-writes: stop the jobs (`StopJob`) instead of renaming them, as a script
    /// cleaning up would (issue 11's fault 2). A stopped job's later fires are not planned,
    /// so the harness counts them missed: read the run for the API's figures.
    #[arg(long)]
    api_stops: bool,
    /// The admins' `max_unsent_runs` (admission control; default: the admin's).
    #[arg(long)]
    max_unsent_runs: Option<usize>,
    /// Exit with an error when any fire was lost (missed and not recorded as a misfire),
    /// duplicated or off the grid (CI smoke run).
    #[arg(long)]
    fail_on_loss: bool,
    #[command(flatten)]
    campaign: campaign::Options,
}

/// How the jobs of a workload are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    jobs: usize,
    period_s: i64,
    /// Phases spread over the period (W2, F*), or all jobs on the same second.
    spread: bool,
}

impl Shape {
    fn phase(&self, index: usize) -> i64 {
        if self.spread {
            index as i64 % self.period_s
        } else {
            0
        }
    }

    fn cron(&self, index: usize) -> String {
        let phase = self.phase(index);
        match self.period_s {
            1 => "* * * * * ?".into(),
            60 => format!("{phase} * * * * ?"),
            period => format!("{phase}/{period} * * * * ?"),
        }
    }

    fn fires_per_second(&self) -> f64 {
        self.jobs as f64 / self.period_s as f64
    }
}

/// Everything a run needs that depends on the workload's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    shape: Shape,
    admins: usize,
    executors: usize,
    backend: Backend,
    timing: Timing,
}

fn plan(args: &Args) -> anyhow::Result<Plan> {
    let failover = args.workload.is_failover();
    let jobs = |default: usize| args.jobs.unwrap_or(default);
    let spread_period = |default: i64| -> anyhow::Result<i64> {
        let period = args.period.unwrap_or(default);
        anyhow::ensure!(
            period > 0 && 60 % period == 0,
            "--period must divide 60 (cron seconds repeat every minute), not {period}"
        );
        Ok(period)
    };
    let shape = match args.workload {
        Workload::W1 => Shape {
            jobs: jobs(100),
            period_s: 1,
            spread: false,
        },
        Workload::Campaign => Shape {
            jobs: jobs(20),
            period_s: 1,
            spread: false,
        },
        Workload::W3 => Shape {
            jobs: jobs(300),
            period_s: 1,
            spread: false,
        },
        Workload::W4 => Shape {
            jobs: jobs(1000),
            period_s: 60,
            spread: false,
        },
        Workload::W2 => Shape {
            jobs: jobs(1000),
            period_s: spread_period(10)?,
            spread: true,
        },
        Workload::F1 | Workload::F2 | Workload::F3 => Shape {
            jobs: jobs(2000),
            period_s: spread_period(2)?,
            spread: true,
        },
    };
    let backend = backend(args)?;
    let campaign = args.workload == Workload::Campaign;
    // A campaign on a server runs the three-admin cluster; SQLite's is one admin.
    let cluster = failover || (campaign && backend != Backend::Sqlite);
    let admins = args.admins.unwrap_or(if cluster { 3 } else { 1 });
    anyhow::ensure!(admins >= 1, "--admins must be at least 1");
    anyhow::ensure!(
        !matches!(args.workload, Workload::F1 | Workload::F2) || admins >= 2,
        "{:?} needs a survivor: --admins 2 or more",
        args.workload
    );
    let executors = args
        .executors
        .unwrap_or(if failover || campaign { 2 } else { 1 });
    anyhow::ensure!(executors >= 1, "--executors must be at least 1");
    // F1 runs with the admin's default lease: a kill is noticed by the liveness lock.
    let short_lease = matches!(
        args.workload,
        Workload::F2 | Workload::F3 | Workload::Campaign
    );
    let node_lease_ms = args.node_lease_ms.or(short_lease.then_some(2000));
    Ok(Plan {
        shape,
        admins,
        executors,
        backend,
        timing: Timing {
            node_lease: node_lease_ms.map(Duration::from_millis),
            max_unsent_runs: args.max_unsent_runs,
            no_liveness_locks: args.no_liveness_locks,
            retention: args.log_retention_s.map(|retention| {
                (
                    Duration::from_secs(retention),
                    Duration::from_secs(args.retention_interval_s.max(1)),
                )
            }),
        },
    })
}

/// The backend from --database and --database-url, which must agree.
fn backend(args: &Args) -> anyhow::Result<Backend> {
    let backend = match (&args.database_url, args.database) {
        (Some(url), given) => {
            let of_url = Backend::of_url(url)?;
            anyhow::ensure!(
                given.is_none_or(|given| given == of_url),
                "--database {given:?} does not match --database-url (a {of_url:?} server)"
            );
            of_url
        }
        (None, Some(given)) => given,
        (None, None) if args.workload == Workload::F3 => Backend::Postgres,
        (None, None) => Backend::Sqlite,
    };
    anyhow::ensure!(
        args.workload != Workload::F3 || backend == Backend::Postgres,
        "F3 restarts a PostgreSQL server: use --database postgres (or a postgres:// \
         --database-url with --database-ctl)"
    );
    Ok(backend)
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Warnings only: sqlx reports at INFO every pooled connection the F3 restart cuts.
    tracing_subscriber::fmt()
        .with_target(false)
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .init();
    let args = Args::parse();
    let plan = plan(&args)?;
    // On Ctrl-C or SIGTERM the run is dropped where it waits: every process and server it
    // started is stopped, and the scratch directories are deleted.
    let outcome = async {
        match args.workload {
            Workload::Campaign => campaign::run(&args, &plan).await,
            _ => run(&args, &plan).await,
        }
    };
    tokio::select! {
        outcome = outcome => outcome,
        () = interrupted() => anyhow::bail!("interrupted; everything the run started was stopped"),
    }
}

async fn interrupted() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

/// What happened to the cluster during the window.
#[derive(Default)]
struct Events {
    disruptions: Vec<Disruption>,
    restart: Option<Restart>,
}

/// The window in scheduled time, `[start_ms, end_ms)`.
#[derive(Debug, Clone, Copy)]
struct Window {
    start_ms: i64,
    end_ms: i64,
}

async fn run(args: &Args, plan: &Plan) -> anyhow::Result<()> {
    let scratch = tempfile::tempdir()?;
    // Declared before the processes that use it, so it is stopped after them.
    let mut database = open_database(args, plan, scratch.path()).await?;
    let store = migrate(&database, args, plan).await?;
    let mut admins = admins::spawn_admins(scratch.path(), plan.admins, &database.url, plan.timing)?;
    let urls: Vec<String> = admins.iter().map(Admin::url).collect();
    for url in urls.iter().rev() {
        grpc::connect(url, Duration::from_secs(60)).await?;
    }
    let mut client = grpc::connect(&urls[0], Duration::from_secs(30)).await?;
    let group_id = grpc::create_group(&mut client).await?;
    // The executors' run logs (a file per run): on a tmpfs when there is one, in a directory
    // deleted when the run ends, also when an executor was killed before it cleaned up.
    let run_logs = run_log_dir()?;
    let mut executors = spawn_executors(scratch.path(), run_logs.path(), &urls, plan.executors)?;
    grpc::wait_for_executors(&mut client, plan.executors).await?;

    eprintln!(
        "creating {} jobs ({:.0} fires/s) on {} admin(s), {:?}",
        plan.shape.jobs,
        plan.shape.fires_per_second(),
        plan.admins,
        plan.backend
    );
    let shape = plan.shape;
    let spec = grpc::JobSpec {
        group_id,
        count: shape.jobs,
        cron: Box::new(move |index| shape.cron(index)),
        retries: if args.workload.is_failover() { 1 } else { 0 },
    };
    let job_ids = grpc::create_jobs(&client, &spec).await?;
    let first_fire_ms = grpc::start_jobs(&client, &job_ids).await?;
    let start_ms = first_fire_ms + args.warmup as i64 * 1000;
    let window = Window {
        start_ms,
        end_ms: start_ms + args.duration as i64 * 1000,
    };

    let sizes = plan.timing.retention.map(|_| {
        let url = database.url.clone();
        let sqlite_file = (plan.backend == Backend::Sqlite).then(|| scratch.path().join("xjob.db"));
        let every = Duration::from_secs(args.size_every.max(1));
        let end_ms = window.end_ms;
        tokio::spawn(async move {
            let store = Store::connect(&url).await?;
            let samples =
                sizing::sample_until(&store, sqlite_file.as_deref(), first_fire_ms, end_ms, every)
                    .await;
            store.close().await;
            anyhow::Ok(samples)
        })
    });
    sleep_until_ms(window.start_ms, "warm-up").await;
    let before = Usage::read(&admins, &executors, &database);
    let api_probe = (args.api_writes > 0).then(|| {
        let client = client.clone();
        let kind = if args.api_stops {
            grpc::ApiWrite::Stop
        } else {
            grpc::ApiWrite::Rename
        };
        let ids: Vec<i64> = job_ids.iter().copied().take(args.api_writes).collect();
        let at_ms = window.start_ms + (window.end_ms - window.start_ms) / 3;
        tokio::spawn(async move {
            sleep_until_ms(at_ms, "window (API writes next)").await;
            (kind, grpc::write_jobs(&client, &ids, 16, kind).await)
        })
    });
    let events = disrupt(
        args,
        plan,
        &mut admins,
        &mut database,
        store.as_ref(),
        group_id,
        window,
    )
    .await?;
    sleep_until_ms(window.end_ms, "window").await;
    if let Some(probe) = api_probe {
        let (kind, writes) = probe.await?;
        report_api_writes(kind, &writes);
    }
    let after = Usage::read(&admins, &executors, &database);
    let peaks = Peaks::read(&admins, &executors, &database);
    if let Some(sizes) = sizes {
        sizing::print_curve(&sizes.await??);
    }
    sleep_until_ms(window.end_ms + args.drain as i64 * 1000, "drain").await;

    // Executors first: they write their records when they exit.
    let stopping_ms = now_ms();
    processes::terminate_all(&mut executors, Duration::from_secs(20))?;
    eprintln!("executors stopped in {} ms", now_ms() - stopping_ms);
    let stopping_ms = now_ms();
    processes::terminate_all(
        admins.iter_mut().map(Admin::process_mut),
        Duration::from_secs(20),
    )?;
    eprintln!("admins stopped in {} ms", now_ms() - stopping_ms);
    let records = read_records(scratch.path(), plan.executors)?;
    let grid = PeriodicGrid::new(&job_ids, shape.period_s, |index| shape.phase(index));
    let figures = metrics::compute(&records, &grid, window.start_ms, window.end_ms);
    let failover = match &store {
        Some(store) => {
            let reading_ms = now_ms();
            let rows = disrupt::all_rows(store, group_id).await?;
            eprintln!(
                "read {} log rows in {} ms",
                rows.len(),
                now_ms() - reading_ms
            );
            Some(FailoverFigures::compute(
                &rows, &events, &grid, &records, window,
            ))
        }
        None => None,
    };
    let outcomes = read_outcomes(
        store.as_ref(),
        &database.url,
        group_id,
        window,
        figures.expected,
    )
    .await;
    if let Some(store) = store {
        store.close().await;
    }
    let db_measured = database.measured();
    let stopping_ms = now_ms();
    database.stop();
    if db_measured {
        eprintln!("database stopped in {} ms", now_ms() - stopping_ms);
    }

    let line = json_line(
        args,
        plan,
        &figures,
        &before.delta(&after, db_measured),
        &peaks,
        failover.as_ref(),
        outcomes,
    )?;
    // The JSON line on stdout is this tool's output (progress goes to stderr).
    #[allow(clippy::print_stdout)]
    {
        println!("{line}");
    }
    append(&args.results, &line)?;
    check_loss(args, &figures, failover.as_ref())
}

/// What the log rows say became of the window's fires (`report::outcomes`), read once every
/// admin has stopped; None (and a warning) when the database cannot be read.
async fn read_outcomes(
    store: Option<&Store>,
    url: &str,
    group_id: i64,
    window: Window,
    expected: u64,
) -> Option<std::collections::BTreeMap<String, i64>> {
    let read = async {
        match store {
            Some(store) => {
                store
                    .run_outcomes(group_id, window.start_ms, window.end_ms)
                    .await
            }
            None => {
                let own = Store::connect(url).await?;
                let counts = own
                    .run_outcomes(group_id, window.start_ms, window.end_ms)
                    .await;
                own.close().await;
                counts
            }
        }
    };
    match read.await {
        Ok(counts) => {
            let outcomes = report::outcomes(&counts, expected);
            eprintln!("outcomes of the window's fires (first attempts, by log row): {outcomes:?}");
            Some(outcomes)
        }
        Err(error) => {
            eprintln!("warning: could not count the log rows by status: {error}");
            None
        }
    }
}

/// Prints the latencies of the API writes made under load, and how many failed.
fn report_api_writes(kind: grpc::ApiWrite, writes: &grpc::ApiWrites) {
    let latencies = &writes.latencies_ms;
    let at = |quantile: f64| {
        let index = ((latencies.len() as f64 * quantile).ceil() as usize).saturating_sub(1);
        latencies.get(index).copied().unwrap_or(0.0)
    };
    eprintln!(
        "API writes under load: {} {} calls, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms, all \
         answered {:.1} s after the first was sent",
        latencies.len(),
        kind.call(),
        at(0.5),
        at(0.99),
        latencies.last().copied().unwrap_or(0.0),
        writes.total_s
    );
    if let Some(first) = writes.failures.first() {
        eprintln!(
            "API writes under load: {} failed; the first: {first}",
            writes.failures.len()
        );
    }
}

/// The run's database: an SQLite file, a server started here, or a scratch database on the
/// server of --database-url.
async fn open_database(args: &Args, plan: &Plan, scratch: &Path) -> anyhow::Result<Database> {
    let database = match (&args.database_url, plan.backend) {
        (Some(url), _) => Database::external(url, args.database_ctl.clone()).await?,
        (None, Backend::Sqlite) => Database::sqlite(scratch),
        (None, backend) => Database::start(backend)?,
    };
    anyhow::ensure!(
        args.workload != Workload::F3 || database.ctl.is_some(),
        "F3 restarts the database: pass --database-ctl with --database-url"
    );
    Ok(database)
}

/// Migrates the database once before the admins start (several admins starting together
/// would race to); returns the harness's own connection when the workload reads the log rows
/// (the failover figures).
async fn migrate(database: &Database, args: &Args, plan: &Plan) -> anyhow::Result<Option<Store>> {
    let keep = args.workload.is_failover();
    if !keep && plan.admins == 1 && plan.backend == Backend::Sqlite {
        // A lone admin on its own file migrates it itself, as before multi-admin runs.
        return Ok(None);
    }
    let store = Store::connect(&database.url)
        .await
        .map_err(|error| anyhow::anyhow!("cannot open or migrate the database: {error}"))?;
    if keep {
        Ok(Some(store))
    } else {
        store.close().await;
        Ok(None)
    }
}

/// Runs the workload's disruptions during the window (none for W*).
async fn disrupt(
    args: &Args,
    plan: &Plan,
    admins: &mut [Admin],
    database: &mut Database,
    store: Option<&Store>,
    group_id: i64,
    window: Window,
) -> anyhow::Result<Events> {
    let kind = match args.workload {
        Workload::F1 => Kind::Kill,
        Workload::F2 => Kind::Stall,
        Workload::F3 => {
            let outage = Duration::from_secs(args.outage);
            // Centered on the window, so the outage and the recovery both fall inside it.
            let at_ms = window.start_ms
                + ((window.end_ms - window.start_ms) - outage.as_millis() as i64).max(0) / 2;
            let restart = disrupt::restart_database(database, at_ms, outage).await?;
            return Ok(Events {
                restart: Some(restart),
                ..Events::default()
            });
        }
        _ => return Ok(Events::default()),
    };
    let store = store.ok_or_else(|| anyhow::anyhow!("failover runs read the log rows"))?;
    let mut target = Target {
        store,
        group_id,
        admins,
        node_lease: plan.timing.node_lease(),
        count: args.kills,
        spacing: Duration::from_secs(args.kill_spacing),
        window_end_ms: window.end_ms,
    };
    Ok(Events {
        disruptions: disrupt::disrupt_lock_holders(&mut target, kind).await?,
        restart: None,
    })
}

/// The failover figures, from the log rows once every admin has stopped.
struct FailoverFigures {
    takeover_ms: Vec<Option<i64>>,
    adopted_delay_ms: Vec<Option<i64>>,
    misfired: u64,
    /// Stop issued → start returned (F3).
    outage_ms: Option<i64>,
    recovery_ms: Option<i64>,
}

impl FailoverFigures {
    fn compute(
        rows: &[failover::LogRow],
        events: &Events,
        grid: &PeriodicGrid,
        records: &[Record],
        window: Window,
    ) -> FailoverFigures {
        FailoverFigures {
            takeover_ms: events
                .disruptions
                .iter()
                .map(|disruption| failover::takeover_ms(rows, disruption))
                .collect(),
            adopted_delay_ms: events
                .disruptions
                .iter()
                .map(|disruption| failover::adopted_delay_ms(rows, disruption))
                .collect(),
            misfired: failover::misfired(grid, records, rows, window.start_ms, window.end_ms),
            outage_ms: events
                .restart
                .map(|restart| restart.restarted_ms - restart.stopped_ms),
            recovery_ms: events
                .restart
                .and_then(|restart| failover::recovery_ms(records, restart.restarted_ms)),
        }
    }
}

/// Fires that were neither delivered nor recorded as misfires.
fn lost(figures: &Figures, failover: Option<&FailoverFigures>) -> u64 {
    figures
        .missed
        .saturating_sub(failover.map_or(0, |failover| failover.misfired))
}

fn check_loss(
    args: &Args,
    figures: &Figures,
    failover: Option<&FailoverFigures>,
) -> anyhow::Result<()> {
    let lost = lost(figures, failover);
    if args.fail_on_loss && (lost > 0 || figures.duplicates > 0 || figures.off_grid > 0) {
        anyhow::bail!(
            "{lost} lost, {} duplicate and {} off-grid fires",
            figures.duplicates,
            figures.off_grid
        );
    }
    Ok(())
}

/// Executor `i` lists every admin, starting at admin `i`.
fn spawn_executors(
    dir: &Path,
    run_logs: &Path,
    admin_urls: &[String],
    count: usize,
) -> anyhow::Result<Vec<ChildProcess>> {
    let binary = sibling_binary("xjob-bench-executor")?;
    (0..count)
        .map(|index| {
            let bind = format!("127.0.0.1:{}", free_port()?);
            let records = dir.join(format!("records-{index}.txt"));
            let mut command = Command::new(&binary);
            command
                .arg(admins::rotated_urls(admin_urls, index).join(","))
                .arg(bind)
                .arg(records)
                .env("XJOB_BENCH_RUN_LOGS", run_logs)
                .env("RUST_LOG", "warn");
            ChildProcess::spawn(&format!("executor-{index}"), &mut command)
        })
        .collect()
}

/// A new directory for the executors' run logs, on `/dev/shm` when there is one. Each run
/// writes its own file; on a disk's file system, after earlier runs deleted millions of them,
/// creating a file cost more executor CPU than everything else a run does (ext4's inode
/// allocator skipping recently deleted inodes), and the benchmark measures the scheduler, not
/// the disk. Deleted when dropped: a tmpfs holds only so many files (an hour at 1 000 runs/s
/// is 3.6 million), and leftovers of earlier runs would make the executors' log writes fail.
fn run_log_dir() -> anyhow::Result<tempfile::TempDir> {
    let shm = Path::new("/dev/shm");
    let builder = &mut tempfile::Builder::new();
    builder.prefix("xjob-bench-run-logs-");
    Ok(if shm.is_dir() {
        builder.tempdir_in(shm)?
    } else {
        builder.tempdir()?
    })
}

/// Sleeps until `target_ms`, printing the time left every 5 s on stderr.
async fn sleep_until_ms(target_ms: i64, phase: &str) {
    loop {
        let left = target_ms - now_ms();
        if left <= 0 {
            return;
        }
        eprintln!("{phase}: {} s left", (left + 999) / 1000);
        tokio::time::sleep(Duration::from_millis(left.min(5000) as u64)).await;
    }
}

/// CPU seconds used so far by each group of processes.
struct Usage {
    admin_cpu_s: f64,
    executor_cpu_s: f64,
    db_cpu_s: f64,
}

impl Usage {
    fn read(admins: &[Admin], executors: &[ChildProcess], database: &Database) -> Usage {
        Usage {
            admin_cpu_s: admins.iter().map(Admin::cpu_s).sum(),
            executor_cpu_s: executors.iter().map(|e| cpu_seconds(e.pid())).sum(),
            db_cpu_s: database.cpu_s(),
        }
    }

    /// CPU over the window; the database's is None when the harness cannot see its processes.
    fn delta(&self, after: &Usage, db_measured: bool) -> WindowCpu {
        WindowCpu {
            admin_s: after.admin_cpu_s - self.admin_cpu_s,
            executor_s: after.executor_cpu_s - self.executor_cpu_s,
            db_s: db_measured.then_some(after.db_cpu_s - self.db_cpu_s),
        }
    }
}

struct WindowCpu {
    admin_s: f64,
    executor_s: f64,
    db_s: Option<f64>,
}

/// Memory at the window's end: peak RSS of the largest admin and executor, the database's
/// resident size now.
struct Peaks {
    admin_mb: f64,
    executor_mb: f64,
    db_mb: Option<f64>,
}

impl Peaks {
    fn read(admins: &[Admin], executors: &[ChildProcess], database: &Database) -> Peaks {
        Peaks {
            admin_mb: admins.iter().map(Admin::peak_rss_mb).fold(0.0, f64::max),
            executor_mb: executors
                .iter()
                .map(|e| memory_mb(e.pid(), "VmHWM"))
                .fold(0.0, f64::max),
            db_mb: database.measured().then(|| database.rss_mb()),
        }
    }
}

fn read_records(dir: &Path, executors: usize) -> anyhow::Result<Vec<Record>> {
    let mut records = Vec::new();
    for index in 0..executors {
        let path = dir.join(format!("records-{index}.txt"));
        let text = std::fs::read_to_string(&path).map_err(|error| {
            anyhow::anyhow!(
                "{}: {error} (did the executor exit cleanly?)",
                path.display()
            )
        })?;
        for line in text.lines() {
            let mut fields = line.split_whitespace().map(str::parse::<i64>);
            if let (Some(Ok(job)), Some(Ok(scheduled)), Some(Ok(start))) =
                (fields.next(), fields.next(), fields.next())
            {
                records.push((job, scheduled, start));
            }
        }
    }
    Ok(records)
}

const TAKEOVER_DEF: &str = "kill/stop of the admin owning the most PENDING fires -> first \
                            dispatch (claim time on the row) by another admin of one of those fires";
const ADOPTED_DELAY_DEF: &str = "per kill/stop, the latest dispatch (trigger time) by another \
                                 admin of a fire the victim had planned, minus its scheduled time";
const RECOVERY_DEF: &str = "database start returned -> first handler start after it";

fn json_line(
    args: &Args,
    plan: &Plan,
    figures: &Figures,
    cpu: &WindowCpu,
    peaks: &Peaks,
    failover: Option<&FailoverFigures>,
    outcomes: Option<std::collections::BTreeMap<String, i64>>,
) -> anyhow::Result<String> {
    let (cores, model) = processes::machine();
    // The embedded SQLite's work is the admins'; an external server's processes are not ours.
    let (db_cpu_s, db_rss_mb) = match plan.backend {
        Backend::Sqlite => (Some(0.0), Some(0.0)),
        _ => (cpu.db_s, peaks.db_mb),
    };
    let line = ResultLine {
        workload: format!("{:?}", args.workload),
        n: plan.shape.jobs,
        duration_s: args.duration,
        warmup_s: args.warmup,
        admins: plan.admins,
        executors: plan.executors,
        database: format!("{:?}", plan.backend),
        figures: Figures {
            throughput_fps: rounded(figures.throughput_fps, 1),
            ..figures.clone()
        },
        admin_cpu_s: rounded(cpu.admin_s, 2),
        executor_cpu_s: rounded(cpu.executor_s, 2),
        db_cpu_s: db_cpu_s.map(|seconds| rounded(seconds, 2)),
        admin_cpu_us_per_fire: report::per_fire_us(Some(cpu.admin_s), figures.delivered),
        executor_cpu_us_per_fire: report::per_fire_us(Some(cpu.executor_s), figures.delivered),
        // SQLite's work is inside the admin's figure.
        db_cpu_us_per_fire: match plan.backend {
            Backend::Sqlite => None,
            _ => report::per_fire_us(cpu.db_s, figures.delivered),
        },
        admin_peak_rss_mb: rounded(peaks.admin_mb, 1),
        executor_peak_rss_mb: rounded(peaks.executor_mb, 1),
        db_rss_mb: db_rss_mb.map(|mb| rounded(mb, 1)),
        outcomes,
        liveness_locks: !plan.timing.no_liveness_locks,
        period_s: plan.shape.period_s,
        node_lease_ms: plan.timing.node_lease().as_millis(),
        failover: failover.map(|failover| failover_line(args, figures, failover)),
        version: env!("CARGO_PKG_VERSION"),
        commit: processes::git_commit(Path::new(env!("CARGO_MANIFEST_DIR"))),
        cores,
        cpu: model,
    };
    eprintln!(
        "CPU per delivered fire: admin {} µs, executor {} µs, database {} µs",
        shown(line.admin_cpu_us_per_fire),
        shown(line.executor_cpu_us_per_fire),
        shown(line.db_cpu_us_per_fire)
    );
    line.to_json()
}

fn shown(value: Option<f64>) -> String {
    value.map_or_else(|| "–".to_string(), |value| format!("{value:.1}"))
}

fn failover_line(args: &Args, figures: &Figures, failover: &FailoverFigures) -> FailoverLine {
    let takeover = matches!(args.workload, Workload::F1 | Workload::F2).then(|| {
        let (median, max) = failover::median_and_max(&failover.takeover_ms);
        TakeoverLine {
            kills: failover.takeover_ms.len(),
            takeover_ms: failover.takeover_ms.clone(),
            takeover_median_ms: median,
            takeover_max_ms: max,
            takeover_def: TAKEOVER_DEF,
            adopted_delay_max_ms: failover.adopted_delay_ms.iter().flatten().copied().max(),
            adopted_delay_ms: failover.adopted_delay_ms.clone(),
            adopted_delay_def: ADOPTED_DELAY_DEF,
        }
    });
    let recovery = (args.workload == Workload::F3).then_some(RecoveryLine {
        outage_s: args.outage,
        outage_ms: failover.outage_ms,
        recovery_ms: failover.recovery_ms,
        recovery_def: RECOVERY_DEF,
    });
    FailoverLine {
        misfired: failover.misfired,
        lost: lost(figures, Some(failover)),
        takeover,
        recovery,
    }
}

fn append(path: &Path, line: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    writeln!(file, "{line}")?;
    Ok(())
}

#[cfg(test)]
mod tests;
