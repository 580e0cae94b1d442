//! One measured run of a workload: start the database, the admins and the executors, plan the
//! jobs, wait out the window (disrupting the cluster in the failover workloads), read what the
//! executors recorded and print the JSON line. The campaign and the scale-out steps run it too.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use xjob_admin::store::Store;

use crate::admins::Admin;
use crate::args::{Args, Workload};
use crate::clock::now_ms;
use crate::database::{Backend, Database};
use crate::disrupt::{Kind, Restart, Target};
use crate::failover::Disruption;
use crate::metrics::{Figures, PeriodicGrid, Record};
use crate::plan::Plan;
use crate::processes::{ChildProcess, cpu_seconds, free_port, memory_mb, sibling_binary};
use crate::report::{FailoverLine, RecoveryLine, ResultLine, TakeoverLine, rounded};
use crate::{admins, cpu_cap, disrupt, failover, grpc, metrics, processes, report, sizing};

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

/// What a caller running several workloads in a row (S1) needs of one run.
pub(crate) struct RunOutcome {
    /// Fires of the window whose handler started at most `--on-time-ms` after their second.
    pub(crate) on_time: u64,
}

/// One run of a workload; with `cpu_cap` every admin process is confined to it once its jobs are started.
pub(crate) async fn run(
    args: &Args,
    plan: &Plan,
    cpu_cap: Option<&mut cpu_cap::CpuCap>,
) -> anyhow::Result<RunOutcome> {
    let scratch = tempfile::tempdir()?;
    // Declared before the processes that use it, so it is stopped after them.
    let mut database = open_database(args, plan, scratch.path()).await?;
    let store = migrate(&database, args, plan).await?;
    let mut admins = admins::spawn_admins(
        scratch.path(),
        plan.admins,
        &database.url,
        plan.timing,
        false,
    )?;
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
    // Capped once the jobs are started, before the warm-up: creating and starting thousands of
    // jobs through an admin held to a few percent of a core took minutes, and the cap is about
    // scheduling.
    if let Some(cap) = cpu_cap {
        for admin in &admins {
            cap.confine(admin.node_id(), admin.pid())?;
        }
    }
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
    check_loss(args, &figures, failover.as_ref())?;
    Ok(RunOutcome {
        on_time: metrics::on_time(&records, window.start_ms, window.end_ms, args.on_time_ms),
    })
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
                    .run_outcomes(
                        xjob_admin::model::GroupId(group_id),
                        window.start_ms,
                        window.end_ms,
                    )
                    .await
            }
            None => {
                let own = Store::connect(url).await?;
                let counts = own
                    .run_outcomes(
                        xjob_admin::model::GroupId(group_id),
                        window.start_ms,
                        window.end_ms,
                    )
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
pub(crate) async fn open_database(
    args: &Args,
    plan: &Plan,
    scratch: &Path,
) -> anyhow::Result<Database> {
    let database = match (&args.database_url, plan.backend) {
        (Some(url), _) => Database::external(url, args.database_ctl.clone()).await?,
        (None, Backend::Sqlite) => Database::sqlite(scratch),
        (None, backend) => Database::start(backend, &args.db_settings)?,
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
        for (index, disruption) in events.disruptions.iter().enumerate() {
            eprintln!(
                "disruption {}: {} ms into its second; takeover {:?} ms, of which waiting for \
                 the first adopted fire's own second {:?} ms",
                index + 1,
                disruption.at_ms.rem_euclid(1000),
                failover::takeover_ms(rows, disruption),
                failover::first_adopted_fire_ms(rows, disruption)
            );
        }
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
pub(crate) fn run_log_dir() -> anyhow::Result<tempfile::TempDir> {
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
pub(crate) async fn sleep_until_ms(target_ms: i64, phase: &str) {
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

pub(crate) fn read_records(dir: &Path, executors: usize) -> anyhow::Result<Vec<Record>> {
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

const TAKEOVER_DEF: &str = "kill/stop of the admin owning the most undispatched fires (PENDING, \
                            or claimed with no address) -> first dispatch (claim time on the row) \
                            by another admin of one of those fires";
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
        db_settings: args.db_settings.clone(),
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
        commit: env!("XJOB_BENCH_COMMIT").to_string(),
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

pub(crate) fn append(path: &Path, line: &str) -> anyhow::Result<()> {
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
