//! The harness's calls to the admin API: waiting for an admin, creating the group and the
//! jobs, starting them.

use std::time::Duration;

use tonic::transport::Channel;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;
use xjob_testkit::wait_until;

/// How the jobs of a run are scheduled.
pub struct JobSpec {
    pub group_id: i64,
    pub count: usize,
    /// Cron expression of job `index`.
    pub cron: Box<dyn Fn(usize) -> String + Send + Sync>,
    /// Attempts after a failed one: a run lost with a killed admin is retried with the same
    /// scheduled time, so it is delivered (F workloads), as in the cluster tests.
    pub retries: i32,
}

/// A client of the admin at `url`, once it answers `ListGroups` (its database is up).
pub use xjob_testkit::connect_admin as connect;

pub async fn create_group(client: &mut JobAdminClient<Channel>) -> anyhow::Result<i64> {
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

/// Until the admin lists `count` executors (its own sessions and the other admins').
pub async fn wait_for_executors(
    client: &mut JobAdminClient<Channel>,
    count: usize,
) -> anyhow::Result<()> {
    let what = format!("{count} executors to register");
    wait_until(Duration::from_secs(30), &what, || {
        let mut client = client.clone();
        async move {
            let listed = client
                .list_executors(pb::ListExecutorsRequest::default())
                .await
                .ok()?
                .into_inner();
            (listed.executors.len() >= count).then_some(())
        }
    })
    .await
}

/// Creates the jobs with bounded concurrency; returns their ids in index order.
pub async fn create_jobs(
    client: &JobAdminClient<Channel>,
    spec: &JobSpec,
) -> anyhow::Result<Vec<i64>> {
    let mut ids = Vec::with_capacity(spec.count);
    for chunk_start in (0..spec.count).step_by(64) {
        let chunk_end = (chunk_start + 64).min(spec.count);
        let mut tasks = Vec::new();
        for index in chunk_start..chunk_end {
            let mut client = client.clone();
            let job = bench_job(spec.group_id, format!("bench-{index}"), (spec.cron)(index));
            let job = pb::Job {
                fail_retry_count: spec.retries,
                ..job
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

/// A job on the bench executors' `noop` handler, round robin, skipping misfires.
fn bench_job(group_id: i64, name: String, cron: String) -> pb::Job {
    pb::Job {
        group_id,
        name,
        schedule_type: pb::ScheduleType::Cron as i32,
        schedule_conf: cron,
        misfire_strategy: pb::MisfireStrategy::DoNothing as i32,
        route_strategy: pb::RouteStrategy::Round as i32,
        handler: "noop".into(),
        block_strategy: pb::BlockStrategy::SerialExecution as i32,
        glue_type: pb::GlueType::Bean as i32,
        ..Default::default()
    }
}

/// Creates one job (not started, no retries); returns its id.
pub async fn create_job(
    client: &mut JobAdminClient<Channel>,
    group_id: i64,
    name: &str,
    cron: &str,
) -> anyhow::Result<i64> {
    let job = bench_job(group_id, name.into(), cron.into());
    client
        .create_job(pb::CreateJobRequest { job: Some(job) })
        .await?
        .into_inner()
        .job
        .map(|job| job.id)
        .ok_or_else(|| anyhow::anyhow!("no job returned"))
}

/// Creates one job (not started, no retries) on the executors' handler `handler`; returns its
/// id.
pub async fn create_handler_job(
    client: &mut JobAdminClient<Channel>,
    group_id: i64,
    name: &str,
    handler: &str,
) -> anyhow::Result<i64> {
    let job = pb::Job {
        handler: handler.into(),
        ..bench_job(group_id, name.into(), "* * * * * ?".into())
    };
    client
        .create_job(pb::CreateJobRequest { job: Some(job) })
        .await?
        .into_inner()
        .job
        .map(|job| job.id)
        .ok_or_else(|| anyhow::anyhow!("no job returned"))
}

/// Creates one job (not started, no retries) on the executors' `slow` handler with `params`,
/// under an overlap policy; returns its id.
pub async fn create_slow_job(
    client: &mut JobAdminClient<Channel>,
    group_id: i64,
    (name, cron): (&str, &str),
    policy: pb::OverlapPolicy,
    params: &str,
) -> anyhow::Result<i64> {
    let job = pb::Job {
        handler: "slow".into(),
        params: params.into(),
        overlap_policy: policy as i32,
        ..bench_job(group_id, name.into(), cron.into())
    };
    client
        .create_job(pb::CreateJobRequest { job: Some(job) })
        .await?
        .into_inner()
        .job
        .map(|job| job.id)
        .ok_or_else(|| anyhow::anyhow!("no job returned"))
}

/// Starts a backfill of `job_id` over `[from_ms, to_ms]` through the first admin that takes
/// it, trying them in turn for up to `within` (a fault may have one down or paused). Before
/// asking, each try looks for the job's backfill: an earlier try's answer may have been lost
/// with its admin after the backfill was written, and a second one would run every
/// occurrence twice.
pub async fn start_backfill(
    urls: &[String],
    job_id: i64,
    (from_ms, to_ms): (i64, i64),
    max_concurrent: i32,
    within: Duration,
) -> anyhow::Result<pb::Backfill> {
    const TRY_FOR: Duration = Duration::from_secs(5);
    let deadline = tokio::time::Instant::now() + within;
    let mut errors = Vec::new();
    for url in urls.iter().cycle() {
        let attempt = async {
            let mut client = connect(url, TRY_FOR).await?;
            let listed = client
                .list_backfills(pb::ListBackfillsRequest { job_id })
                .await?
                .into_inner();
            if let Some(existing) = listed.backfills.into_iter().next() {
                return Ok(existing);
            }
            let request = pb::BackfillJobRequest {
                job_id,
                from_ms,
                to_ms,
                max_concurrent,
            };
            client
                .backfill_job(request)
                .await?
                .into_inner()
                .backfill
                .ok_or_else(|| anyhow::anyhow!("no backfill returned"))
        };
        match tokio::time::timeout(TRY_FOR * 2, attempt).await {
            Ok(Ok(backfill)) => return Ok(backfill),
            Ok(Err(error)) => errors.push(format!("{url}: {error:#}")),
            Err(_) => errors.push(format!("{url}: no answer within {:?}", TRY_FOR * 2)),
        }
        if tokio::time::Instant::now() >= deadline {
            break;
        }
    }
    anyhow::bail!("no admin started the backfill: {}", errors.join("; "))
}

/// Starts every job; returns the latest first fire time (all jobs are on their grid from then).
pub async fn start_jobs(client: &JobAdminClient<Channel>, job_ids: &[i64]) -> anyhow::Result<i64> {
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

/// An API write a script would send while the admin is under load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiWrite {
    /// `GetJob`, then `UpdateJob` with a new name: a write that leaves the schedule alone.
    Rename,
    /// `StopJob`, as a script cleaning up would send it (issue 11's fault 2).
    Stop,
}

impl ApiWrite {
    /// The call whose latency is measured.
    pub fn call(self) -> &'static str {
        match self {
            ApiWrite::Rename => "UpdateJob",
            ApiWrite::Stop => "StopJob",
        }
    }
}

/// Sends `kind` for each job, `concurrency` at a time; returns the latency of each call
/// answered (for a rename, of its `UpdateJob`), in ms, sorted, and the error of each call that
/// failed (an overloaded admin may answer a call with an error: that is a figure, not the end
/// of the run).
pub async fn write_jobs(
    client: &JobAdminClient<Channel>,
    job_ids: &[i64],
    concurrency: usize,
    kind: ApiWrite,
) -> ApiWrites {
    let mut writes = ApiWrites::default();
    let started_all = std::time::Instant::now();
    for chunk in job_ids.chunks(concurrency.max(1)) {
        let mut tasks = Vec::new();
        for &id in chunk {
            let client = client.clone();
            tasks.push(tokio::spawn(write_job(client, id, kind)));
        }
        for task in tasks {
            match task.await {
                Ok(Ok(latency)) => writes.latencies_ms.push(latency),
                Ok(Err(error)) => writes.failures.push(format!("{error:#}")),
                Err(error) => writes.failures.push(error.to_string()),
            }
        }
    }
    writes.total_s = started_all.elapsed().as_secs_f64();
    writes.latencies_ms.sort_by(f64::total_cmp);
    writes
}

/// One write; returns the measured call's latency in ms.
async fn write_job(
    mut client: JobAdminClient<Channel>,
    id: i64,
    kind: ApiWrite,
) -> anyhow::Result<f64> {
    match kind {
        ApiWrite::Rename => {
            let job = client
                .get_job(pb::GetJobRequest { id })
                .await?
                .into_inner()
                .job
                .ok_or_else(|| anyhow::anyhow!("no job returned"))?;
            let renamed = pb::Job {
                name: format!("{} (renamed)", job.name),
                ..job
            };
            let started = std::time::Instant::now();
            client
                .update_job(pb::UpdateJobRequest { job: Some(renamed) })
                .await?;
            Ok(started.elapsed().as_secs_f64() * 1000.0)
        }
        ApiWrite::Stop => {
            let started = std::time::Instant::now();
            client.stop_job(pb::StopJobRequest { id }).await?;
            Ok(started.elapsed().as_secs_f64() * 1000.0)
        }
    }
}

/// What the API writes under load came to.
#[derive(Debug, Default)]
pub struct ApiWrites {
    /// Latency of each measured call answered, in ms, sorted.
    pub latencies_ms: Vec<f64>,
    /// The error of each write that failed (for a rename, its `GetJob` or its `UpdateJob`).
    pub failures: Vec<String>,
    /// Seconds from the first write sent to the last answered.
    pub total_s: f64,
}
