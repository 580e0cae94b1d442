//! The randomized fault campaign (`--workload campaign`): a cluster under W1-style load (N jobs
//! firing every second) while faults drawn from a seed hit it one after another — admins and
//! executors killed (-9) and restarted or stopped and resumed, the database restarted, its
//! connections cut or slowed, executors' links slowed or partitioned — then a checker holds
//! every planned occurrence against the executors' own records and the run rows.
//!
//! - `plan`: which faults, when, from the seed;
//! - `proxy`: the user-space proxy each disturbable link goes through;
//! - `disk`: the small file system the SQLite database lives on, for the full disk;
//! - `cluster`: the processes and links;
//! - `inject`: applying and healing one fault;
//! - `checker`: the verdict per occurrence;
//! - `backfill`: the backfill run under the same faults, and its verdict;
//! - `overlap`: jobs under overlap policies whose runs outlast their period, and their verdict;
//! - `workflows`: workflows started again and again under the faults, and their verdict;
//! - `report`: the timeline, the table, the JSON line.

pub mod backfill;
pub mod checker;
pub mod cluster;
pub mod disk;
pub mod inject;
pub mod options;
pub mod overlap;
pub mod plan;
pub mod proxy;
pub mod report;
pub mod starts;
pub mod workflows;

use std::net::SocketAddr;
use std::time::Duration;

use xjob_admin::store::Store;

use crate::args::Args;
use crate::clock::now_ms;
use crate::database::Backend;
use crate::grpc;
use crate::metrics::PeriodicGrid;
use crate::plan::Plan;
use crate::run::{open_database, read_records, run_log_dir, sleep_until_ms};
use cluster::{Cluster, Executor};
use plan::FaultKind;

/// The admin's misfire threshold (its default): a first start later than this is late.
const MISFIRE_THRESHOLD_MS: i64 = 5_000;

/// What this machine and cluster allow beyond the faults every cluster offers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Means {
    /// The database can be stopped and started (a server started here, or --database-ctl).
    pub restartable: bool,
    /// The SQLite database is on a small file system the harness can fill.
    pub small_disk: bool,
}

/// The fault kinds this cluster offers: the faults on the database's link need a server; its
/// restart needs a way to stop and start it; the full disk needs the database on a small file
/// system (SQLite).
pub fn offered_kinds(backend: Backend, means: Means, only: &[FaultKind]) -> Vec<FaultKind> {
    let mut kinds = FaultKind::ALWAYS.to_vec();
    if backend != Backend::Sqlite {
        kinds.extend(FaultKind::NETWORKED_DATABASE);
        if means.restartable {
            kinds.push(FaultKind::RestartDatabase);
        }
    } else if means.small_disk {
        kinds.push(FaultKind::FillDisk);
    }
    if !only.is_empty() {
        kinds.retain(|kind| only.contains(kind));
    }
    kinds
}

/// Whether a kind is wanted (every kind when --faults is not given).
fn wanted(only: &[FaultKind], kinds: &[FaultKind]) -> bool {
    only.is_empty() || kinds.iter().any(|kind| only.contains(kind))
}

/// The small file system for a SQLite database, when the full disk is wanted and possible.
fn small_disk(
    args: &Args,
    backend: Backend,
    scratch: &std::path::Path,
) -> anyhow::Result<Option<disk::SmallDisk>> {
    let only = &args.campaign.faults;
    if backend != Backend::Sqlite
        || args.database_url.is_some()
        || !wanted(only, &[FaultKind::FillDisk])
    {
        return Ok(None);
    }
    if let Some(why) = disk::SmallDisk::unavailable() {
        eprintln!("campaign: no full-disk faults: {why}");
        return Ok(None);
    }
    // Several times what a 30-minute campaign at 100 jobs a second writes (about 100 MB).
    disk::SmallDisk::mount(&scratch.join("disk"), SMALL_DISK_MB).map(Some)
}

/// The size of the SQLite database's file system.
const SMALL_DISK_MB: u64 = 384;

/// Runs the campaign; fails when an occurrence was lost or run twice.
pub async fn run(args: &Args, plan: &Plan) -> anyhow::Result<()> {
    let options = &args.campaign;
    let seed = options.seed.unwrap_or_else(|| now_ms() as u64);
    eprintln!("campaign seed: {seed} (replay with --seed {seed})");
    let scratch = tempfile::tempdir()?;
    let disk = small_disk(args, plan.backend, scratch.path())?;
    let database_dir = disk.as_ref().map_or(scratch.path(), |disk| disk.path());
    let database = open_database(args, plan, database_dir).await?;
    let store = Store::connect(&database.url)
        .await
        .map_err(|error| anyhow::anyhow!("cannot open or migrate the database: {error}"))?;
    let means = Means {
        restartable: database.restartable(),
        small_disk: disk.is_some(),
    };
    let kinds = offered_kinds(plan.backend, means, &options.faults);
    let (admins, database_link) =
        cluster::start_admins(scratch.path(), plan.admins, &database.url, plan.timing).await?;
    let urls: Vec<String> = admins.iter().map(crate::admins::Admin::url).collect();
    for url in urls.iter().rev() {
        grpc::connect(url, Duration::from_secs(60)).await?;
    }
    let mut client = grpc::connect(&urls[0], Duration::from_secs(30)).await?;
    let group_id = grpc::create_group(&mut client).await?;
    let run_logs = run_log_dir()?;
    let addresses = admin_addresses(&urls)?;
    let mut executors = Vec::new();
    for index in 0..plan.executors {
        let dirs = (scratch.path(), run_logs.path());
        executors.push(Executor::start(index, &addresses, dirs).await?);
    }
    let mut cluster = Cluster {
        admins,
        executors,
        database_link,
        database,
        disk,
    };
    grpc::wait_for_executors(&mut client, plan.executors).await?;

    let spec = grpc::JobSpec {
        group_id,
        count: plan.shape.jobs,
        cron: Box::new(|_| "* * * * * ?".into()),
        // A run lost with its executor is not retried: a retry would run the occurrence again
        // and hide a duplicate among retries.
        retries: 0,
    };
    let job_ids = grpc::create_jobs(&client, &spec).await?;
    // Never started: it runs only what its backfill creates.
    let backfill_job = grpc::create_job(&mut client, group_id, "backfill", "* * * * * ?").await?;
    let overlap_jobs = overlap::create(&mut client, group_id, options.overlap).await?;
    let workflow_setup = workflows::create(&mut client, group_id, options.workflows).await?;
    let mut started: Vec<i64> = job_ids.clone();
    started.extend(overlap_jobs.iter().map(|job| job.id));
    let first_fire_ms = grpc::start_jobs(&client, &started).await?;
    let watcher = overlap::Watcher::start(store.clone(), &overlap_jobs);
    let window_start_ms = first_fire_ms + args.warmup as i64 * 1000;
    let window_end_ms = window_start_ms + args.duration as i64 * 1000;
    let faults = plan::draw(&plan::Shape {
        seed,
        admins: plan.admins,
        executors: plan.executors,
        kinds,
        window: Duration::from_secs(args.duration),
        settle: Duration::from_secs(options.settle),
        gap: fault_gap(&options.fault_gap),
    });
    eprintln!(
        "campaign: {} jobs every second on {} admin(s) ({:?}) and {} executors, {} s window, \
         {} faults planned",
        plan.shape.jobs,
        plan.admins,
        plan.backend,
        plan.executors,
        args.duration,
        faults.len()
    );

    sleep_until_ms(window_start_ms, "warm-up").await;
    let backfill_range = backfill::range(window_start_ms, options.backfill);
    let backfill_id = if options.backfill > 0 {
        Some(backfill::start(&urls, backfill_job, backfill_range).await?)
    } else {
        None
    };
    // Started until the faults stop, so the last runs end within the settle time and drain.
    let (starts, starter) = workflows::start_repeatedly(
        urls.clone(),
        workflow_setup.workflow_ids.clone(),
        window_end_ms - options.settle as i64 * 1000,
    );
    let mut timeline = Vec::new();
    for fault in faults {
        crate::disrupt::sleep_until_ms(window_start_ms + fault.at.as_millis() as i64).await;
        eprintln!("fault: {fault}");
        timeline.push(inject::inject(&mut cluster, fault).await);
    }
    sleep_until_ms(window_end_ms + args.drain as i64 * 1000, "window and drain").await;
    starter.abort();
    let most_waiting = watcher.stop();
    cluster.stop_processes()?;

    let mut records = read_records(scratch.path(), plan.executors)?;
    let ends = overlap::read_ends(scratch.path(), plan.executors)?;
    let rows = crate::disrupt::all_rows(&store, group_id).await?;
    let overlap_job_ids: Vec<i64> = overlap_jobs.iter().map(|job| job.id).collect();
    let overlap_rows = overlap::rows(&store, group_id, &overlap_job_ids).await?;
    let backfill_rows = overlap::rows(&store, group_id, &[backfill_job]).await?;
    let all_starts = starts::read_starts(scratch.path(), plan.executors)?;
    let overlap_verdicts = overlap::check(
        &overlap_jobs,
        (window_start_ms, window_end_ms),
        &overlap::Seen {
            records: &records,
            ends: &ends,
            rows: &overlap_rows,
            most_waiting: &most_waiting,
        },
    );
    if overlap_verdicts
        .iter()
        .any(overlap::Verdict::failed_campaign)
    {
        eprint!(
            "overlap jobs' occurrences started more than once:\n{}",
            starts::twice_started(&all_starts, &overlap_job_ids, window_start_ms)
        );
    }
    // The overlap jobs' runs are not the every-second jobs' (they would be off their schedule).
    let workflow_records: Vec<_> = (records.iter())
        .filter(|record| workflow_setup.job_ids.contains(&record.0))
        .copied()
        .collect();
    // Nor are the workflows' nodes' runs (checked on their own above).
    records.retain(|record| {
        !overlap_jobs.iter().any(|job| job.id == record.0)
            && !workflow_setup.job_ids.contains(&record.0)
    });
    let backfill_end = match backfill_id {
        Some(id) => Some(
            store
                .get_backfill(id)
                .await
                .map_err(|error| anyhow::anyhow!("cannot read the backfill: {error}"))?
                .ok_or_else(|| anyhow::anyhow!("backfill {id} is gone"))?,
        ),
        None => None,
    };
    let workflow_runs = workflows::runs(&store, &workflow_setup).await?;
    store.close().await;
    let kills_ms: Vec<i64> = (timeline.iter())
        .filter(|happened| {
            matches!(
                happened.fault.kind,
                FaultKind::KillAdmin | FaultKind::KillExecutor
            )
        })
        .map(|happened| happened.injected_ms)
        .collect();
    let workflow_verdict = options.workflows.then(|| {
        let seen = (workflow_records.as_slice(), rows.as_slice());
        workflows::check(&workflow_setup, &workflow_runs, seen, &starts, &kills_ms)
    });
    let backfill_verdict = backfill_end.map(|end| {
        let planned: Vec<i64> = (backfill_range.0..=backfill_range.1)
            .step_by(1000)
            .collect();
        let mut verdict = backfill::check(
            backfill_job,
            &planned,
            backfill::End::from(&end),
            &records,
            &rows,
        );
        backfill::explain_duplicates(
            &mut verdict,
            backfill_job,
            &backfill_rows,
            &all_starts,
            window_start_ms,
        );
        verdict
    });
    let grid = PeriodicGrid::new(&job_ids, 1, |_| 0);
    let verdict = checker::check(
        (window_start_ms, window_end_ms),
        grid.points(window_start_ms, window_end_ms),
        &records,
        &rows,
        MISFIRE_THRESHOLD_MS,
    );
    let verdicts = (
        verdict,
        backfill_verdict,
        overlap_verdicts,
        workflow_verdict,
    );
    finish(args, plan, seed, &timeline, verdicts, window_start_ms)
}

/// Prints the timeline and the table, appends the JSON line, fails on a loss or a duplicate.
fn finish(
    args: &Args,
    plan: &Plan,
    seed: u64,
    timeline: &[inject::Happened],
    (verdict, backfill, overlap, workflows): (
        checker::Verdict,
        Option<backfill::Verdict>,
        Vec<overlap::Verdict>,
        Option<workflows::Verdict>,
    ),
    window_start_ms: i64,
) -> anyhow::Result<()> {
    eprint!("{}", report::timeline_text(timeline, window_start_ms));
    eprint!(
        "{}",
        report::verdict_text(&verdict, window_start_ms, MISFIRE_THRESHOLD_MS)
    );
    if let Some(backfill) = &backfill {
        eprint!("{}", backfill::text(backfill, window_start_ms));
    }
    if !overlap.is_empty() {
        eprint!("{}", overlap::text(&overlap));
    }
    if let Some(workflows) = &workflows {
        eprint!("{}", workflows::text(workflows));
    }
    let failed = verdict.failed_campaign()
        || workflows
            .as_ref()
            .is_some_and(workflows::Verdict::failed_campaign)
        || backfill
            .as_ref()
            .is_some_and(backfill::Verdict::failed_campaign)
        || overlap.iter().any(overlap::Verdict::failed_campaign);
    let line = report::CampaignLine {
        workload: "campaign",
        seed,
        database: format!("{:?}", plan.backend),
        admins: plan.admins,
        executors: plan.executors,
        jobs: plan.shape.jobs,
        duration_s: args.duration,
        faults: timeline.len(),
        faults_by_kind: report::CampaignLine::faults_by_kind(timeline),
        fault_errors: timeline.iter().filter(|h| h.error.is_some()).count(),
        verdict,
        backfill,
        overlap,
        workflows,
        misfire_threshold_ms: MISFIRE_THRESHOLD_MS,
        commit: env!("XJOB_BENCH_COMMIT").to_string(),
    };
    let json = serde_json::to_string(&line)?;
    #[allow(clippy::print_stdout)]
    {
        println!("{json}");
    }
    crate::run::append(&args.results, &json)?;
    eprintln!("campaign seed: {seed}");
    let (backfill_lost, backfill_duplicated) = line
        .backfill
        .as_ref()
        .map_or((0, 0), |backfill| (backfill.lost, backfill.duplicated));
    let overlap_failed: Vec<&str> = line
        .overlap
        .iter()
        .filter(|verdict| verdict.failed_campaign())
        .map(|verdict| verdict.policy.as_str())
        .collect();
    let workflows_failed = line
        .workflows
        .as_ref()
        .is_some_and(workflows::Verdict::failed_campaign);
    anyhow::ensure!(
        !failed,
        "campaign with seed {seed}: {} occurrences lost, {} duplicated; backfill: {} lost, {} \
         duplicated; overlap policies failed: {overlap_failed:?}; workflows failed: \
         {workflows_failed} (timeline and tables above)",
        line.verdict.lost,
        line.verdict.duplicated,
        backfill_lost,
        backfill_duplicated
    );
    Ok(())
}

fn admin_addresses(urls: &[String]) -> anyhow::Result<Vec<SocketAddr>> {
    urls.iter()
        .map(|url| {
            url.trim_start_matches("http://")
                .parse()
                .map_err(|error| anyhow::anyhow!("admin address {url}: {error}"))
        })
        .collect()
}

fn fault_gap(values: &[u64]) -> (Duration, Duration) {
    let min = values.first().copied().unwrap_or(2);
    let max = values.get(1).copied().unwrap_or(min).max(min);
    (Duration::from_secs(min), Duration::from_secs(max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cluster_offers_the_faults_it_has_the_means_for() {
        let bare = Means::default();
        let sqlite = offered_kinds(Backend::Sqlite, bare, &[]);
        assert_eq!(sqlite, FaultKind::ALWAYS.to_vec());
        let all = Means {
            restartable: true,
            small_disk: true,
        };
        let postgres = offered_kinds(Backend::Postgres, all, &[]);
        assert!(postgres.contains(&FaultKind::RestartDatabase));
        assert!(postgres.contains(&FaultKind::DropDatabaseConnections));
        assert!(postgres.contains(&FaultKind::LossyDatabaseLink));
        assert!(
            !postgres.contains(&FaultKind::FillDisk),
            "a server's disk is not ours"
        );
        let sqlite = offered_kinds(Backend::Sqlite, all, &[]);
        assert!(sqlite.contains(&FaultKind::FillDisk));
        assert!(sqlite.contains(&FaultKind::LossyExecutorLink));
        assert!(!sqlite.contains(&FaultKind::LossyDatabaseLink));
        let external = offered_kinds(Backend::Mariadb, bare, &[]);
        assert!(!external.contains(&FaultKind::RestartDatabase));
        let only = offered_kinds(Backend::Sqlite, all, &[FaultKind::KillAdmin]);
        assert_eq!(only, vec![FaultKind::KillAdmin]);
    }
}
