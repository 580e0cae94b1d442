//! Operations data: the dashboard and its daily report, `ClearLogs`' nine modes, retention of
//! log rows, and child-job cycles refused by the API.
//!
//! Runs of the past are written through the admin's own `Store` on the cluster's database file
//! (insert, claim at a back-dated instant, complete), as they would have been written then.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use xjob_admin::model::{
    GroupId, JobId, LogId, NewRun, NodeIdentity, RunStatus, TriggerType, now_ms,
};
use xjob_admin::store::{RunCompletion, Store};
use xjob_executor::{JobContext, JobError, JobOutput, JobResult};
use xjob_proto::pb;
use xjob_tests::{TestCluster, ok_handler, wait_until};

const APP: &str = "ops-app";
const OTHER_APP: &str = "ops-other";
const DAY_MS: i64 = 24 * 60 * 60 * 1000;
const WAIT: Duration = Duration::from_secs(10);
/// Node id the seeded runs are written under (no admin has it, so none adopts them).
const SEED_NODE: &str = "seed";

async fn failing_handler(_ctx: JobContext) -> JobResult {
    Err(JobError::new("failed on purpose"))
}

/// Holds every run of the `block` handler until `open` is called.
#[derive(Clone)]
struct Gate(Arc<Semaphore>);

impl Gate {
    fn new() -> Gate {
        Gate(Arc::new(Semaphore::new(0)))
    }

    fn open(&self) {
        self.0.add_permits(Semaphore::MAX_PERMITS / 2);
    }

    fn handler(
        &self,
    ) -> impl Fn(
        JobContext,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = JobResult> + Send>>
    + Send
    + Sync
    + 'static {
        let semaphore = Arc::clone(&self.0);
        move |_ctx: JobContext| {
            let semaphore = Arc::clone(&semaphore);
            Box::pin(async move {
                let _permit = semaphore
                    .acquire()
                    .await
                    .map_err(|_| JobError::new("gate closed"))?;
                Ok(JobOutput::message("released"))
            })
        }
    }
}

/// Start of today in the admin's zone (the test config's zone is UTC).
fn today_start_ms() -> i64 {
    let now = now_ms();
    now - now.rem_euclid(DAY_MS)
}

/// Opens the cluster's database file: the same store the admin writes.
async fn open_store(cluster: &TestCluster) -> anyhow::Result<Store> {
    let url = format!("sqlite://{}", cluster.data_dir().join("xjob.db").display());
    Ok(Store::connect(&url).await?)
}

fn new_run(job: &pb::Job, status: RunStatus, scheduled_at_ms: i64) -> NewRun {
    NewRun {
        job_id: JobId(job.id),
        group_id: GroupId(job.group_id),
        fire_key: None,
        status,
        trigger_type: TriggerType::Api,
        scheduled_at_ms,
        handler: job.handler.clone(),
        params: String::new(),
        shard_index: 0,
        shard_total: 1,
        attempt: 0,
        trigger_msg: String::new(),
        owner_node: SEED_NODE.to_string(),
        epoch: 1,
        dispatch_at_ms: 0,
        trace_id: String::new(),
    }
}

/// Writes a run of `job` dispatched at `trigger_ms` that ended with `status`; returns its id.
async fn seed_dispatched(
    store: &Store,
    job: &pb::Job,
    status: RunStatus,
    trigger_ms: i64,
) -> anyhow::Result<LogId> {
    let ids = store
        .insert_runs(&[new_run(job, RunStatus::Pending, trigger_ms)])
        .await?;
    let log_id = *ids.first().ok_or_else(|| anyhow::anyhow!("no id"))?;
    let ids = [log_id];
    if status == RunStatus::Skipped {
        store.skip_runs(&ids, "seeded", trigger_ms).await?;
        return Ok(log_id);
    }
    store
        .claim_runs(&ids, &NodeIdentity::new(SEED_NODE, 1), trigger_ms)
        .await?;
    let completion = RunCompletion {
        log_id,
        status,
        handle_code: if status == RunStatus::Success {
            200
        } else {
            500
        },
        handle_msg: "seeded".to_string(),
        finished_ms: trigger_ms + 1000,
    };
    let changed = store.complete_runs(&[completion]).await?;
    anyhow::ensure!(changed.len() == 1, "seeded run {log_id} not completed");
    Ok(log_id)
}

/// Writes a run of `job` scheduled at `scheduled_ms` and never dispatched (SKIPPED, no trigger
/// time); returns its id.
async fn seed_undispatched(
    store: &Store,
    job: &pb::Job,
    scheduled_ms: i64,
) -> anyhow::Result<LogId> {
    let ids = store
        .insert_runs(&[new_run(job, RunStatus::Skipped, scheduled_ms)])
        .await?;
    ids.first().copied().ok_or_else(|| anyhow::anyhow!("no id"))
}

async fn create_group(cluster: &TestCluster, app_name: &str) -> anyhow::Result<i64> {
    cluster.create_group(app_name).await
}

async fn create_job(
    cluster: &TestCluster,
    group_id: i64,
    handler: &str,
    children: Vec<i64>,
) -> anyhow::Result<pb::Job> {
    let job = pb::Job {
        child_job_ids: children,
        ..TestCluster::job(group_id, handler, pb::ScheduleType::None, "")
    };
    cluster.create_job(job).await
}

async fn dashboard(
    cluster: &TestCluster,
    from_ms: i64,
    to_ms: i64,
) -> Option<pb::GetDashboardResponse> {
    let request = pb::GetDashboardRequest { from_ms, to_ms };
    let response = cluster.client().get_dashboard(request).await.ok()?;
    Some(response.into_inner())
}

/// `(day_ms, running, success, failed)` of each day of a dashboard.
fn day_rows(dashboard: &pb::GetDashboardResponse) -> Vec<(i64, i64, i64, i64)> {
    dashboard
        .days
        .iter()
        .map(|day| (day.day_ms, day.running, day.success, day.failed))
        .collect()
}

/// Waits until the dashboard over `[from_ms, to_ms]` shows exactly `expected` days.
async fn wait_for_days(
    cluster: &TestCluster,
    from_ms: i64,
    to_ms: i64,
    expected: &[(i64, i64, i64, i64)],
) -> anyhow::Result<pb::GetDashboardResponse> {
    wait_until(WAIT, &format!("dashboard days {expected:?}"), || async {
        let shown = dashboard(cluster, from_ms, to_ms).await?;
        (day_rows(&shown) == expected).then_some(shown)
    })
    .await
}

#[tokio::test]
async fn dashboard_counts_runs_per_day_and_online_executors() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder()
        .configure(|config| config.report_interval = Duration::from_millis(200))
        .start()
        .await?;
    let group_id = create_group(&cluster, APP).await?;
    let gate = Gate::new();
    for _ in 0..3 {
        let executor = cluster
            .executor(APP)
            .handler("ok", ok_handler)
            .handler("fail", failing_handler)
            .handler("block", gate.handler());
        cluster.start_executor(executor).await?;
    }
    let ok_job = create_job(&cluster, group_id, "ok", vec![]).await?;
    let failing_job = create_job(&cluster, group_id, "fail", vec![]).await?;
    let blocked_job = create_job(&cluster, group_id, "block", vec![]).await?;

    for job_id in [ok_job.id, ok_job.id, failing_job.id] {
        let log_id = cluster.trigger(job_id, None).await?;
        cluster.wait_log_final(log_id, WAIT).await?;
    }
    let blocked_log = cluster.trigger(blocked_job.id, None).await?;

    let today = today_start_ms();
    let mut expected: Vec<(i64, i64, i64, i64)> = (1..=6)
        .rev()
        .map(|back| (today - back * DAY_MS, 0, 0, 0))
        .collect();
    expected.push((today, 1, 2, 1));
    let shown = wait_for_days(&cluster, 0, 0, &expected).await?;
    assert_eq!(shown.job_count, 3);
    assert_eq!(shown.online_executors, 3);
    assert_eq!((shown.total_runs, shown.success_runs), (4, 2));

    gate.open();
    cluster.wait_log_final(blocked_log, WAIT).await?;
    let today_only = wait_for_days(&cluster, today, today, &[(today, 0, 3, 1)]).await?;
    assert_eq!((today_only.total_runs, today_only.success_runs), (4, 3));

    let reversed = cluster
        .client()
        .get_dashboard(pb::GetDashboardRequest {
            from_ms: today + 1,
            to_ms: today,
        })
        .await
        .expect_err("a reversed range is refused");
    assert_eq!(reversed.code(), tonic::Code::InvalidArgument);
    assert!(
        reversed.message().starts_with("from_ms: "),
        "{}",
        reversed.message()
    );
    cluster.shutdown().await;
    Ok(())
}

/// Today's counts come from the runs when asked, not from the report row (refreshed here once
/// an hour): a run that just ended is counted at once, as the runs list shows it.
#[tokio::test]
async fn dashboard_counts_today_when_asked() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder()
        .configure(|config| config.report_interval = Duration::from_secs(3600))
        .start()
        .await?;
    let group_id = create_group(&cluster, APP).await?;
    let executor = cluster
        .executor(APP)
        .handler("ok", ok_handler)
        .handler("fail", failing_handler);
    cluster.start_executor(executor).await?;
    let ok_job = create_job(&cluster, group_id, "ok", vec![]).await?;
    let failing_job = create_job(&cluster, group_id, "fail", vec![]).await?;
    for job_id in [ok_job.id, failing_job.id, failing_job.id] {
        let log_id = cluster.trigger(job_id, None).await?;
        cluster.wait_log_final(log_id, WAIT).await?;
    }
    let today = today_start_ms();
    let shown = dashboard(&cluster, today, today)
        .await
        .ok_or_else(|| anyhow::anyhow!("no dashboard"))?;
    assert_eq!(day_rows(&shown), vec![(today, 0, 1, 2)]);
    cluster.shutdown().await;
    Ok(())
}

/// The dashboard names every background loop of the admin that answers, with its last
/// successful round, and says the schedule is serving while they make progress.
#[tokio::test]
async fn dashboard_shows_each_loop_and_serving() -> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let started_ms = now_ms();
    let shown = wait_until(WAIT, "the registry refresh and scan to report", || async {
        let response = cluster
            .client()
            .get_dashboard(pb::GetDashboardRequest::default())
            .await
            .ok()?
            .into_inner();
        let reported = |name: &str| {
            response
                .loops
                .iter()
                .any(|state| state.name == name && state.last_success_ms >= started_ms)
        };
        (reported("scan") && reported("registry_refresh")).then_some(response)
    })
    .await?;
    let names: Vec<&str> = shown
        .loops
        .iter()
        .map(|state| state.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "scan",
            "claim",
            "recorder",
            "followup",
            "lost_runs",
            "registry_refresh",
            "lease_renewal",
            "adoption"
        ]
    );
    assert!(shown.serving);
    assert!(
        shown
            .loops
            .iter()
            .all(|state| state.healthy && state.last_error.is_empty()),
        "{:?}",
        shown.loops
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn report_rows_refresh_for_today_and_two_previous_days() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder()
        .configure(|config| config.report_interval = Duration::from_millis(200))
        .start()
        .await?;
    let group_id = create_group(&cluster, APP).await?;
    let gate = Gate::new();
    let executor = cluster.executor(APP).handler("block", gate.handler());
    cluster.start_executor(executor).await?;
    let job = create_job(&cluster, group_id, "block", vec![]).await?;
    let store = open_store(&cluster).await?;
    let today = today_start_ms();
    let at = |days_back: i64| today - days_back * DAY_MS + (now_ms() - today) / 2;

    // Three days ago: its row was written back then and is frozen from now on.
    seed_dispatched(&store, &job, RunStatus::Success, at(3)).await?;
    seed_dispatched(&store, &job, RunStatus::Success, at(3)).await?;
    seed_dispatched(&store, &job, RunStatus::Failed, at(3)).await?;
    let three_days_ago = today - 3 * DAY_MS;
    store
        .refresh_log_report(three_days_ago, three_days_ago + DAY_MS, now_ms())
        .await?;
    seed_dispatched(&store, &job, RunStatus::Failed, at(3)).await?;

    for _ in 0..3 {
        seed_dispatched(&store, &job, RunStatus::Success, at(2)).await?;
    }
    for status in [
        RunStatus::Success,
        RunStatus::Timeout,
        RunStatus::Killed,
        RunStatus::Lost,
        RunStatus::Skipped,
    ] {
        seed_dispatched(&store, &job, status, at(1)).await?;
    }
    seed_dispatched(&store, &job, RunStatus::Success, at(0)).await?;
    seed_dispatched(&store, &job, RunStatus::Success, at(0)).await?;
    seed_dispatched(&store, &job, RunStatus::Failed, at(0)).await?;
    seed_undispatched(&store, &job, at(0)).await?;
    let running_log = cluster.trigger(job.id, None).await?;

    let expected = [
        (three_days_ago, 0, 2, 1),
        (today - 2 * DAY_MS, 0, 3, 0),
        (today - DAY_MS, 0, 1, 3),
        (today, 1, 2, 1),
    ];
    wait_for_days(&cluster, three_days_ago, now_ms(), &expected).await?;

    // The next refreshes follow new results on the recent days, and still leave day -3 alone.
    seed_dispatched(&store, &job, RunStatus::Failed, at(2)).await?;
    seed_dispatched(&store, &job, RunStatus::Success, at(3)).await?;
    gate.open();
    cluster.wait_log_final(running_log, WAIT).await?;
    let expected = [
        (three_days_ago, 0, 2, 1),
        (today - 2 * DAY_MS, 0, 3, 1),
        (today - DAY_MS, 0, 1, 3),
        (today, 0, 3, 1),
    ];
    wait_for_days(&cluster, three_days_ago, now_ms(), &expected).await?;
    store.close().await;
    cluster.shutdown().await;
    Ok(())
}

/// Ids of every log of the cluster (at most 1000).
async fn all_log_ids(cluster: &TestCluster) -> anyhow::Result<BTreeSet<LogId>> {
    let request = pb::ListLogsRequest {
        page_size: 1000,
        ..Default::default()
    };
    let logs = cluster.client().list_logs(request).await?.into_inner().logs;
    Ok(logs.iter().map(|log| LogId(log.id)).collect())
}

async fn clear(
    cluster: &TestCluster,
    group_id: i64,
    job_id: i64,
    mode: pb::ClearLogsMode,
) -> anyhow::Result<i64> {
    let request = pb::ClearLogsRequest {
        group_id,
        job_id,
        mode: mode as i32,
    };
    Ok(cluster
        .client()
        .clear_logs(request)
        .await?
        .into_inner()
        .deleted)
}

async fn log_exists(cluster: &TestCluster, id: LogId) -> anyhow::Result<bool> {
    match cluster
        .client()
        .get_log(pb::GetLogRequest { id: id.0 })
        .await
    {
        Ok(_) => Ok(true),
        Err(status) if status.code() == tonic::Code::NotFound => Ok(false),
        Err(status) => Err(status.into()),
    }
}

/// Whether a job has exactly `count` logs (probed by page offsets `count - 1` and `count`).
async fn job_has_exactly(cluster: &TestCluster, job_id: i64, count: i64) -> anyhow::Result<bool> {
    let at_offset = |offset: i64| {
        let mut client = cluster.client();
        async move {
            let request = pb::ListLogsRequest {
                job_id,
                page_size: 1,
                page_token: offset.to_string(),
                ..Default::default()
            };
            anyhow::Ok(
                !client
                    .list_logs(request)
                    .await?
                    .into_inner()
                    .logs
                    .is_empty(),
            )
        }
    };
    let enough = count == 0 || at_offset(count - 1).await?;
    Ok(enough && !at_offset(count).await?)
}

#[tokio::test]
async fn clear_logs_modes_delete_only_what_they_name() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder()
        .configure(|config| config.log_retention_days = 0)
        .start()
        .await?;
    let group_one = create_group(&cluster, APP).await?;
    let group_two = create_group(&cluster, OTHER_APP).await?;
    let gate = Gate::new();
    let executor = cluster.executor(APP).handler("block", gate.handler());
    cluster.start_executor(executor).await?;
    let job_a = create_job(&cluster, group_one, "block", vec![]).await?;
    let job_b = create_job(&cluster, group_one, "ok", vec![]).await?;
    let job_c = create_job(&cluster, group_two, "ok", vec![]).await?;
    let running_a = cluster.trigger(job_a.id, None).await?;

    // Per job, runs aged 400, 200, 100, 45 and 10 days, dispatched or never dispatched.
    let store = open_store(&cluster).await?;
    let now = now_ms();
    let mut aged = std::collections::BTreeMap::new();
    for job in [&job_a, &job_b, &job_c] {
        for (age_days, dispatched) in [
            (400, true),
            (200, false),
            (100, true),
            (45, false),
            (10, true),
        ] {
            let at = now - age_days * DAY_MS;
            let id = if dispatched {
                seed_dispatched(&store, job, RunStatus::Failed, at).await?
            } else {
                seed_undispatched(&store, job, at).await?
            };
            aged.insert((job.id, age_days), id);
        }
    }
    let ids = |pairs: &[(i64, i64)]| -> BTreeSet<LogId> {
        pairs
            .iter()
            .filter_map(|pair| aged.get(pair).copied())
            .collect()
    };
    let (a, b, c) = (job_a.id, job_b.id, job_c.id);
    let unspecified = cluster
        .client()
        .clear_logs(pb::ClearLogsRequest::default())
        .await
        .expect_err("a mode is required");
    assert_eq!(unspecified.code(), tonic::Code::InvalidArgument);

    use pb::ClearLogsMode as Mode;
    assert_eq!(clear(&cluster, 0, a, Mode::OlderThanOneYear).await?, 1);
    assert_eq!(
        clear(&cluster, group_one, 0, Mode::OlderThanSixMonths).await?,
        3
    );
    assert_eq!(clear(&cluster, 0, 0, Mode::OlderThanThreeMonths).await?, 5);
    assert_eq!(
        clear(&cluster, group_two, 0, Mode::OlderThanOneMonth).await?,
        1
    );
    let mut remaining = ids(&[(a, 45), (a, 10), (b, 45), (b, 10), (c, 10)]);
    remaining.insert(LogId(running_a));
    assert_eq!(all_log_ids(&cluster).await?, remaining);
    assert_eq!(clear(&cluster, 0, b, Mode::All).await?, 2);
    let mut remaining = ids(&[(a, 45), (a, 10), (c, 10)]);
    remaining.insert(LogId(running_a));
    assert_eq!(all_log_ids(&cluster).await?, remaining);

    // Keep-latest modes: 100 003 more finished runs of job b, newest last.
    let bulk_runs: Vec<NewRun> = (0..100_003)
        .map(|_| new_run(&job_b, RunStatus::Skipped, now))
        .collect();
    let bulk = store.insert_runs(&bulk_runs).await?;
    assert_eq!(clear(&cluster, 0, b, Mode::KeepLatest100000).await?, 3);
    assert!(job_has_exactly(&cluster, b, 100_000).await?);
    assert!(!log_exists(&cluster, bulk[2]).await? && log_exists(&cluster, bulk[3]).await?);
    assert_eq!(clear(&cluster, 0, b, Mode::KeepLatest30000).await?, 70_000);
    assert!(job_has_exactly(&cluster, b, 30_000).await?);
    assert!(
        !log_exists(&cluster, bulk[70_002]).await? && log_exists(&cluster, bulk[70_003]).await?
    );
    // Group one keeps its newest 10 000 (all job b's); job a's finished runs go, its running one stays.
    assert_eq!(
        clear(&cluster, group_one, 0, Mode::KeepLatest10000).await?,
        20_002
    );
    assert!(job_has_exactly(&cluster, b, 10_000).await?);
    assert!(
        !log_exists(&cluster, bulk[90_002]).await? && log_exists(&cluster, bulk[90_003]).await?
    );
    assert!(
        job_has_exactly(&cluster, a, 1).await? && log_exists(&cluster, LogId(running_a)).await?
    );
    assert!(job_has_exactly(&cluster, c, 1).await?);
    assert_eq!(clear(&cluster, 0, 0, Mode::KeepLatest1000).await?, 9_001);
    assert!(job_has_exactly(&cluster, b, 1_000).await?);
    assert!(
        job_has_exactly(&cluster, c, 0).await?,
        "job c's last finished run went too"
    );
    assert_eq!(clear(&cluster, 0, 0, Mode::All).await?, 1_000);
    assert_eq!(
        all_log_ids(&cluster).await?,
        BTreeSet::from([LogId(running_a)])
    );

    gate.open();
    cluster.wait_log_final(running_a, WAIT).await?;
    assert_eq!(clear(&cluster, 0, 0, Mode::All).await?, 1);
    assert!(all_log_ids(&cluster).await?.is_empty());
    store.close().await;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn retention_deletes_only_old_rows() -> anyhow::Result<()> {
    let cluster = TestCluster::builder()
        .configure(|config| {
            config.retention_interval = Duration::from_millis(200);
            config.log_retention_days = 30;
        })
        .start()
        .await?;
    let group_id = create_group(&cluster, APP).await?;
    let job = create_job(&cluster, group_id, "ok", vec![]).await?;
    let store = open_store(&cluster).await?;
    let now = now_ms();
    // Day 30 back starts the kept range (admin zone): older runs expire.
    let old = [
        seed_dispatched(&store, &job, RunStatus::Success, now - 45 * DAY_MS).await?,
        seed_dispatched(&store, &job, RunStatus::Failed, now - 32 * DAY_MS).await?,
        seed_undispatched(&store, &job, now - 60 * DAY_MS).await?,
    ];
    let young = [
        seed_dispatched(&store, &job, RunStatus::Success, now - 28 * DAY_MS).await?,
        seed_dispatched(&store, &job, RunStatus::Failed, now - DAY_MS).await?,
        seed_undispatched(&store, &job, now - 5 * DAY_MS).await?,
        seed_dispatched(&store, &job, RunStatus::Success, now).await?,
    ];
    wait_until(WAIT, "old runs deleted by retention", || async {
        let ids = all_log_ids(&cluster).await.ok()?;
        old.iter().all(|id| !ids.contains(id)).then_some(())
    })
    .await?;
    // Young rows would have gone in the same batch as the old ones.
    assert_eq!(all_log_ids(&cluster).await?, BTreeSet::from(young));
    store.close().await;
    cluster.shutdown().await;
    Ok(())
}

fn invalid_message(
    result: Result<tonic::Response<pb::UpdateJobResponse>, tonic::Status>,
) -> String {
    match result {
        Err(status) if status.code() == tonic::Code::InvalidArgument => {
            status.message().to_string()
        }
        Err(status) => format!("unexpected status {status:?}"),
        Ok(_) => "accepted".to_string(),
    }
}

#[tokio::test]
async fn child_cycles_are_rejected_on_create_and_update() -> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let group_id = create_group(&cluster, APP).await?;
    let job_a = create_job(&cluster, group_id, "ok", vec![]).await?;
    let job_b = create_job(&cluster, group_id, "ok", vec![job_a.id]).await?;
    let job_c = create_job(&cluster, group_id, "ok", vec![job_b.id]).await?;
    let (a, b, c) = (job_a.id, job_b.id, job_c.id);
    let update = |job: &pb::Job, children: Vec<i64>| {
        let mut client = cluster.client();
        let job = pb::Job {
            child_job_ids: children,
            ..job.clone()
        };
        async move {
            client
                .update_job(pb::UpdateJobRequest { job: Some(job) })
                .await
        }
    };

    // c -> b -> a: making c a child of a closes the loop.
    assert_eq!(
        invalid_message(update(&job_a, vec![c]).await),
        format!("job.child_job_ids: cycle {a} -> {c} -> {b} -> {a}")
    );
    assert_eq!(
        invalid_message(update(&job_b, vec![a, c]).await),
        format!("job.child_job_ids: cycle {b} -> {c} -> {b}")
    );
    assert_eq!(
        invalid_message(update(&job_a, vec![a]).await),
        format!("job.child_job_ids: job {a} cannot be its own child")
    );
    let stored_a = cluster
        .client()
        .get_job(pb::GetJobRequest { id: a })
        .await?
        .into_inner()
        .job;
    assert_eq!(stored_a.map(|job| job.child_job_ids), Some(vec![]));
    // Shared children are no cycle: d -> {a, b}, b -> a.
    let job_d = create_job(&cluster, group_id, "ok", vec![a, b]).await?;
    assert!(update(&job_c, vec![b, job_d.id]).await.is_ok());

    // A loop already in the database (written before this check existed) is refused as a child.
    let store = open_store(&cluster).await?;
    let job_x = create_job(&cluster, group_id, "ok", vec![]).await?;
    let job_y = create_job(&cluster, group_id, "ok", vec![job_x.id]).await?;
    let mut stored_x = store
        .get_job(JobId(job_x.id))
        .await?
        .ok_or_else(|| anyhow::anyhow!("no x"))?;
    stored_x.child_job_ids = vec![JobId(job_y.id)];
    store.update_job(&stored_x).await?;
    let refused = cluster
        .client()
        .create_job(pb::CreateJobRequest {
            job: Some(pb::Job {
                child_job_ids: vec![job_y.id],
                ..TestCluster::job(group_id, "ok", pb::ScheduleType::None, "")
            }),
        })
        .await
        .expect_err("a child leading into a loop is refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        refused.message(),
        format!(
            "job.child_job_ids: cycle {y} -> {x} -> {y} (reached through child {y})",
            x = job_x.id,
            y = job_y.id
        )
    );
    store.close().await;
    cluster.shutdown().await;
    Ok(())
}

/// Two edits sent at once, each linking its job to the other, close a cycle together: one of
/// them must be refused. Renames of different jobs sent at once all land (that they do not wait
/// for each other is `write_locks`' unit test).
#[tokio::test]
async fn concurrent_edits_never_close_a_cycle_and_renames_all_land() -> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let group_id = create_group(&cluster, APP).await?;
    let link = |job: &pb::Job, child: i64| {
        let mut client = cluster.client();
        let job = pb::Job {
            child_job_ids: vec![child],
            ..job.clone()
        };
        async move {
            client
                .update_job(pb::UpdateJobRequest { job: Some(job) })
                .await
        }
    };
    for _ in 0..10 {
        let job_a = create_job(&cluster, group_id, "ok", vec![]).await?;
        let job_b = create_job(&cluster, group_id, "ok", vec![]).await?;
        let (a_to_b, b_to_a) = tokio::join!(link(&job_a, job_b.id), link(&job_b, job_a.id));
        let accepted = usize::from(a_to_b.is_ok()) + usize::from(b_to_a.is_ok());
        assert_eq!(accepted, 1, "a -> b: {a_to_b:?}, b -> a: {b_to_a:?}");
    }

    let mut jobs = Vec::new();
    for _ in 0..16 {
        jobs.push(create_job(&cluster, group_id, "ok", vec![]).await?);
    }
    let mut renames = tokio::task::JoinSet::new();
    for job in &jobs {
        let mut client = cluster.client();
        let job = pb::Job {
            name: format!("renamed {}", job.id),
            ..job.clone()
        };
        renames.spawn(async move {
            client
                .update_job(pb::UpdateJobRequest { job: Some(job) })
                .await
        });
    }
    while let Some(renamed) = renames.join_next().await {
        let job = renamed??
            .into_inner()
            .job
            .ok_or_else(|| anyhow::anyhow!("no job"))?;
        assert_eq!(job.name, format!("renamed {}", job.id));
    }
    cluster.shutdown().await;
    Ok(())
}
