//! `xjob-bench`: runs one workload of `shared/BENCH.md` against real processes on loopback —
//! the `xjob` admin (embedded SQLite), remote `xjob-bench-executor`s with a recording no-op
//! handler — then stops everything it started and prints one JSON line of metrics (also
//! appended to the results file).
//!
//! ```text
//! cargo build --release --workspace --bins
//! target/release/xjob-bench --workload W1 --jobs 1000 --warmup 10 --duration 60
//! ```

mod metrics;
mod processes;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Parser, ValueEnum};
use tonic::transport::Channel;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;

use metrics::{Figures, PeriodicGrid, Record};
use processes::{Managed, cpu_seconds, free_port, memory_mb, sibling_binary};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Workload {
    /// N jobs every second, all aligned.
    W1,
    /// N jobs every 10 s, phases spread evenly.
    W2,
    /// 300 jobs every second (the long acceptance run; set --duration).
    W3,
    /// N jobs all at second 0 of every minute.
    W4,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Database {
    Sqlite,
}

#[derive(Parser, Debug)]
#[command(about = "Benchmarks xjob with real processes on loopback (see shared/BENCH.md)")]
struct Args {
    #[arg(long, value_enum, ignore_case = true, default_value = "w1")]
    workload: Workload,
    /// Number of jobs (W3 uses 300 when not given).
    #[arg(long)]
    jobs: Option<usize>,
    /// Seconds of warm-up after the first common fire.
    #[arg(long, default_value_t = 10)]
    warmup: u64,
    /// Seconds of the measurement window.
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// Seconds to wait after the window for late fires.
    #[arg(long, default_value_t = 5)]
    drain: u64,
    #[arg(long, value_enum, ignore_case = true, default_value = "sqlite")]
    database: Database,
    /// Executor processes.
    #[arg(long, default_value_t = 1)]
    executors: usize,
    /// File the JSON line is appended to.
    #[arg(long, default_value = "bench-results.jsonl")]
    results: PathBuf,
    /// Exit with an error when any fire was missed, duplicated or off the grid (CI smoke run).
    #[arg(long)]
    fail_on_loss: bool,
}

struct Shape {
    jobs: usize,
    period_s: i64,
    cron: fn(usize) -> String,
    phase: fn(usize) -> i64,
}

fn shape(args: &Args) -> Shape {
    let jobs = |default: usize| args.jobs.unwrap_or(default);
    match args.workload {
        Workload::W1 => Shape {
            jobs: jobs(100),
            period_s: 1,
            cron: |_| "* * * * * ?".into(),
            phase: |_| 0,
        },
        Workload::W3 => Shape {
            jobs: jobs(300),
            period_s: 1,
            cron: |_| "* * * * * ?".into(),
            phase: |_| 0,
        },
        Workload::W2 => Shape {
            jobs: jobs(1000),
            period_s: 10,
            cron: |index| format!("{}/10 * * * * ?", index % 10),
            phase: |index| (index % 10) as i64,
        },
        Workload::W4 => Shape {
            jobs: jobs(1000),
            period_s: 60,
            cron: |_| "0 * * * * ?".into(),
            phase: |_| 0,
        },
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_target(false)
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let shape = shape(&args);
    let scratch = tempfile::tempdir()?;
    let port = free_port()?;
    let admin_url = format!("http://127.0.0.1:{port}");

    let mut admin = spawn_admin(scratch.path(), port)?;
    let mut client = connect(&admin_url).await?;
    let group_id = create_group(&mut client).await?;
    let mut executors = spawn_executors(scratch.path(), &admin_url, args.executors)?;
    wait_for_executors(&mut client, args.executors).await?;

    eprintln!("creating {} jobs", shape.jobs);
    let job_ids = create_jobs(&client, group_id, &shape).await?;
    let first_fire_ms = start_jobs(&client, &job_ids).await?;
    let window_start_ms = first_fire_ms + args.warmup as i64 * 1000;
    let window_end_ms = window_start_ms + args.duration as i64 * 1000;

    sleep_until_ms(window_start_ms, "warm-up").await;
    let cpu_before = cpu_of(&admin, &executors);
    sleep_until_ms(window_end_ms, "window").await;
    let cpu_after = cpu_of(&admin, &executors);
    let admin_peak_rss_mb = memory_mb(admin.pid(), "VmHWM");
    let executor_peak_rss_mb = executors
        .iter()
        .map(|e| memory_mb(e.pid(), "VmHWM"))
        .fold(0.0, f64::max);
    sleep_until_ms(window_end_ms + args.drain as i64 * 1000, "drain").await;

    for executor in &mut executors {
        executor.terminate(Duration::from_secs(20))?;
    }
    admin.terminate(Duration::from_secs(20))?;
    let records = read_records(scratch.path(), args.executors)?;
    let grid = PeriodicGrid::new(&job_ids, shape.period_s, shape.phase);
    let figures = metrics::compute(&records, &grid, window_start_ms, window_end_ms);
    let line = json_line(
        &args,
        &shape,
        &figures,
        (cpu_before, cpu_after),
        admin_peak_rss_mb,
        executor_peak_rss_mb,
    );
    // The JSON line on stdout is this tool's output (progress goes to stderr).
    #[allow(clippy::print_stdout)]
    {
        println!("{line}");
    }
    append(&args.results, &line)?;
    if args.fail_on_loss && (figures.missed > 0 || figures.duplicates > 0 || figures.off_grid > 0) {
        anyhow::bail!(
            "{} missed, {} duplicate and {} off-grid fires",
            figures.missed,
            figures.duplicates,
            figures.off_grid
        );
    }
    Ok(())
}

fn spawn_admin(dir: &Path, port: u16) -> anyhow::Result<Managed> {
    let config = dir.join("admin.toml");
    std::fs::write(&config, "time_zone = \"UTC\"\n")?;
    let mut command = Command::new(sibling_binary("xjob")?);
    command
        .args(["serve", "--node-id", "bench-admin-1", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data-dir")
        .arg(dir.join("admin-data"))
        .arg("--config")
        .arg(config)
        .env(
            "RUST_LOG",
            std::env::var("XJOB_BENCH_ADMIN_LOG").unwrap_or_else(|_| "warn".into()),
        );
    Managed::spawn("admin", &mut command)
}

fn spawn_executors(dir: &Path, admin_url: &str, count: usize) -> anyhow::Result<Vec<Managed>> {
    let binary = sibling_binary("xjob-bench-executor")?;
    (0..count)
        .map(|index| {
            let bind = format!("127.0.0.1:{}", free_port()?);
            let records = dir.join(format!("records-{index}.txt"));
            let mut command = Command::new(&binary);
            command
                .arg(admin_url)
                .arg(bind)
                .arg(records)
                .env("RUST_LOG", "warn");
            Managed::spawn(&format!("executor-{index}"), &mut command)
        })
        .collect()
}

async fn connect(url: &str) -> anyhow::Result<JobAdminClient<Channel>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(mut client) = JobAdminClient::connect(url.to_string()).await
            && client
                .list_groups(pb::ListGroupsRequest::default())
                .await
                .is_ok()
        {
            return Ok(client);
        }
        if Instant::now() > deadline {
            anyhow::bail!("admin at {url} did not come up");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn create_group(client: &mut JobAdminClient<Channel>) -> anyhow::Result<i64> {
    let group = pb::Group {
        app_name: "xjob-bench".into(),
        title: "benchmark executors".into(),
        address_type: pb::AddressType::Auto as i32,
        ..Default::default()
    };
    let created = client
        .create_group(pb::CreateGroupRequest { group: Some(group) })
        .await?
        .into_inner();
    created
        .group
        .map(|group| group.id)
        .ok_or_else(|| anyhow::anyhow!("no group returned"))
}

async fn wait_for_executors(
    client: &mut JobAdminClient<Channel>,
    count: usize,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed = client
            .list_executors(pb::ListExecutorsRequest::default())
            .await?
            .into_inner();
        if listed.executors.len() >= count {
            return Ok(());
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "only {} of {count} executors registered",
                listed.executors.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates the jobs with bounded concurrency; returns their ids in index order.
async fn create_jobs(
    client: &JobAdminClient<Channel>,
    group_id: i64,
    shape: &Shape,
) -> anyhow::Result<Vec<i64>> {
    let mut ids = Vec::with_capacity(shape.jobs);
    for chunk_start in (0..shape.jobs).step_by(64) {
        let chunk_end = (chunk_start + 64).min(shape.jobs);
        let mut tasks = Vec::new();
        for index in chunk_start..chunk_end {
            let mut client = client.clone();
            let job = pb::Job {
                group_id,
                name: format!("bench-{index}"),
                schedule_type: pb::ScheduleType::Cron as i32,
                schedule_conf: (shape.cron)(index),
                misfire_strategy: pb::MisfireStrategy::DoNothing as i32,
                route_strategy: pb::RouteStrategy::Round as i32,
                handler: "noop".into(),
                block_strategy: pb::BlockStrategy::SerialExecution as i32,
                glue_type: pb::GlueType::Bean as i32,
                ..Default::default()
            };
            tasks.push(tokio::spawn(async move {
                client
                    .create_job(pb::CreateJobRequest { job: Some(job) })
                    .await
            }));
        }
        for task in tasks {
            let job = task
                .await??
                .into_inner()
                .job
                .ok_or_else(|| anyhow::anyhow!("no job returned"))?;
            ids.push(job.id);
        }
    }
    Ok(ids)
}

/// Starts every job; returns the latest first fire time (all jobs are on their grid from then).
async fn start_jobs(client: &JobAdminClient<Channel>, job_ids: &[i64]) -> anyhow::Result<i64> {
    let mut first_fire_ms = 0;
    for chunk in job_ids.chunks(64) {
        let mut tasks = Vec::new();
        for &id in chunk {
            let mut client = client.clone();
            tasks.push(tokio::spawn(async move {
                client.start_job(pb::StartJobRequest { id }).await
            }));
        }
        for task in tasks {
            let job = task
                .await??
                .into_inner()
                .job
                .ok_or_else(|| anyhow::anyhow!("no job returned"))?;
            first_fire_ms = first_fire_ms.max(job.next_fire_ms);
        }
    }
    Ok(first_fire_ms)
}

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

fn cpu_of(admin: &Managed, executors: &[Managed]) -> (f64, f64) {
    let executor_cpu = executors
        .iter()
        .map(|executor| cpu_seconds(executor.pid()))
        .sum();
    (cpu_seconds(admin.pid()), executor_cpu)
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

fn json_line(
    args: &Args,
    shape: &Shape,
    figures: &Figures,
    (cpu_before, cpu_after): ((f64, f64), (f64, f64)),
    admin_peak_rss_mb: f64,
    executor_peak_rss_mb: f64,
) -> String {
    let (cores, model) = processes::machine();
    let commit = processes::git_commit(Path::new(env!("CARGO_MANIFEST_DIR")));
    format!(
        "{{\"workload\":\"{:?}\",\"n\":{},\"duration_s\":{},\"warmup_s\":{},\"admins\":1,\"executors\":{},\
         \"database\":\"{:?}\",\"expected\":{},\"delivered\":{},\"missed\":{},\"duplicates\":{},\
         \"off_grid\":{},\"throughput_fps\":{:.1},\"lateness_p50_ms\":{},\"lateness_p99_ms\":{},\
         \"lateness_max_ms\":{},\"admin_cpu_s\":{:.2},\"executor_cpu_s\":{:.2},\"db_cpu_s\":0,\
         \"admin_peak_rss_mb\":{:.1},\"executor_peak_rss_mb\":{:.1},\"db_rss_mb\":0,\
         \"version\":\"{}\",\"commit\":\"{}\",\"cores\":{},\"cpu\":\"{}\"}}",
        args.workload,
        shape.jobs,
        args.duration,
        args.warmup,
        args.executors,
        args.database,
        figures.expected,
        figures.delivered,
        figures.missed,
        figures.duplicates,
        figures.off_grid,
        figures.throughput_fps,
        figures.lateness_p50_ms,
        figures.lateness_p99_ms,
        figures.lateness_max_ms,
        cpu_after.0 - cpu_before.0,
        cpu_after.1 - cpu_before.1,
        admin_peak_rss_mb,
        executor_peak_rss_mb,
        env!("CARGO_PKG_VERSION"),
        commit,
        cores,
        model.replace('"', "'"),
    )
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
