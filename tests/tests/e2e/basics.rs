//! The foundation: cron fires, manual triggers, run logs, stop, bad input, sessions, restart.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use xjob_executor::{JobContext, JobError, JobOutput, JobResult};
use xjob_proto::pb;
use xjob_tests::{HandlerFuture, TestCluster, wait_until};

const APP: &str = "e2e-app";

async fn ok_handler(ctx: JobContext) -> JobResult {
    ctx.log(format!("ran with params '{}'", ctx.params()));
    Ok(JobOutput::message("done"))
}

/// Records `(log_id, params)` of every run it starts.
fn recording_handler(
    seen: Arc<Mutex<Vec<(i64, String)>>>,
) -> impl Fn(JobContext) -> HandlerFuture + Send + Sync + 'static {
    move |ctx: JobContext| {
        let seen = Arc::clone(&seen);
        Box::pin(async move {
            seen.lock()
                .map_err(|_| JobError::new("poisoned"))?
                .push((ctx.log_id(), ctx.params().to_string()));
            ctx.log(format!("handler saw params={}", ctx.params()));
            ctx.log("second line from the handler");
            Ok(JobOutput::message("recorded"))
        })
    }
}

async fn cluster_with_executor() -> anyhow::Result<(TestCluster, i64, String)> {
    let mut cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP).await?;
    let executor = cluster.executor(APP).handler("ok", ok_handler);
    let address = cluster.start_executor(executor).await?;
    Ok((cluster, group_id, address))
}

#[tokio::test]
async fn every_second_cron_fires_three_times_within_four_seconds_on_whole_seconds()
-> anyhow::Result<()> {
    let (cluster, group_id, _) = cluster_with_executor().await?;
    let job = cluster
        .create_job(TestCluster::job(
            group_id,
            "ok",
            pb::ScheduleType::Cron,
            "*/1 * * * * ?",
        ))
        .await?;
    let started = cluster.start_job(job.id).await?;
    let first_fire_ms = started.next_fire_ms;
    assert!(
        first_fire_ms > 0 && first_fire_ms % 1000 == 0,
        "first fire on a whole second"
    );

    // Fires at first, first+1 s, first+2 s, first+3 s are all within 4 s of the first one.
    let wait_for =
        Duration::from_millis((first_fire_ms - xjob_admin::model::now_ms()).max(0) as u64)
            + Duration::from_secs(4);
    let successes = wait_until(wait_for, "3 successful fires", || async {
        let logs = cluster
            .logs_with_status(job.id, pb::RunStatus::Success)
            .await
            .ok()?;
        (logs.len() >= 3).then_some(logs)
    })
    .await?;

    let scheduled: HashSet<i64> = successes.iter().map(|log| log.scheduled_at_ms).collect();
    assert_eq!(
        scheduled.len(),
        successes.len(),
        "each fire has its own scheduled second"
    );
    for log in &successes {
        assert_eq!(
            log.scheduled_at_ms % 1000,
            0,
            "scheduled_at_ms {} is a whole second",
            log.scheduled_at_ms
        );
        assert!(log.scheduled_at_ms >= first_fire_ms);
        assert_eq!(log.handle_code, 200);
        assert_eq!(log.trigger_code, 200);
        assert_eq!(log.trigger_type, pb::TriggerType::Cron as i32);
    }
    cluster.shutdown().await;
    Ok(())
}

/// A scan is written in transactions of `scan_chunk_jobs` jobs; together they must still read
/// every job due in the window, in one round. 60 jobs share one fire time more than the
/// 5 s pre-read away when started, so no start's wake-up reads them; the round that first
/// sees that time in its window must read all 60, 2 per transaction. Were a round to stop after
/// its first chunk, 2 jobs a second would be read, and most would come into view after their
/// time had passed by more than the misfire threshold and be skipped.
#[tokio::test]
async fn a_scan_in_small_transactions_still_fires_every_due_job_on_time() -> anyhow::Result<()> {
    const JOBS: usize = 60;
    let mut cluster = TestCluster::builder()
        .configure(|config| config.scan_chunk_jobs = 2)
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    let executor = cluster.executor(APP).handler("ok", ok_handler);
    cluster.start_executor(executor).await?;
    // Starts just after a tens-of-seconds mark, so the next one is more than 5 s away even
    // after the jobs were created and started.
    let into_ten_s = xjob_admin::model::now_ms() % 10_000;
    if into_ten_s > 1_000 {
        tokio::time::sleep(Duration::from_millis((10_100 - into_ten_s) as u64)).await;
    }
    let mut fire_times = HashSet::new();
    let mut job_ids = Vec::new();
    for _ in 0..JOBS {
        let job = TestCluster::job(group_id, "ok", pb::ScheduleType::Cron, "*/10 * * * * ?");
        let id = cluster.create_job(job).await?.id;
        fire_times.insert(cluster.start_job(id).await?.next_fire_ms);
        job_ids.push(id);
    }
    assert_eq!(fire_times.len(), 1, "all jobs share one fire time");
    let fire_ms = fire_times.into_iter().next().unwrap_or_default();
    let ahead_ms = fire_ms - xjob_admin::model::now_ms();
    assert!(
        ahead_ms > 5_000,
        "the fire time must be beyond the pre-read when the jobs are started ({ahead_ms} ms ahead)"
    );

    let wait_for = Duration::from_millis(ahead_ms as u64) + Duration::from_secs(15);
    wait_until(wait_for, "every job's first fire finished", || async {
        for id in &job_ids {
            let first_done = cluster.logs(*id).await.ok()?.iter().any(|log| {
                log.scheduled_at_ms == fire_ms
                    && log.status != pb::RunStatus::Pending as i32
                    && log.status != pb::RunStatus::Running as i32
            });
            if !first_done {
                return None;
            }
        }
        Some(())
    })
    .await?;
    for id in &job_ids {
        let first: Vec<pb::Log> = cluster
            .logs(*id)
            .await?
            .into_iter()
            .filter(|log| log.scheduled_at_ms == fire_ms)
            .collect();
        assert_eq!(first.len(), 1, "job {id}: one row for its fire: {first:?}");
        assert_eq!(
            first[0].status,
            pb::RunStatus::Success as i32,
            "job {id}: its fire at {fire_ms} did not run: {:?}",
            first[0]
        );
    }
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn manual_trigger_delivers_params_and_handler_log_lines_come_back() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP).await?;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let executor = cluster
        .executor(APP)
        .handler("record", recording_handler(Arc::clone(&seen)));
    cluster.start_executor(executor).await?;
    let job = cluster
        .create_job(TestCluster::job(
            group_id,
            "record",
            pb::ScheduleType::None,
            "",
        ))
        .await?;

    let request = pb::TriggerJobRequest {
        id: job.id,
        params: Some("order-42".into()),
        addresses: vec![],
    };
    let log_ids = cluster
        .client()
        .trigger_job(request)
        .await?
        .into_inner()
        .log_ids;
    assert_eq!(log_ids.len(), 1);
    let log = cluster
        .wait_log_final(log_ids[0], Duration::from_secs(5))
        .await?;
    assert_eq!(log.status, pb::RunStatus::Success as i32);
    assert_eq!(log.trigger_type, pb::TriggerType::Manual as i32);
    assert_eq!(log.params, "order-42");
    assert_eq!(
        seen.lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .clone(),
        vec![(log_ids[0], "order-42".to_string())]
    );

    let chunk = cluster
        .client()
        .read_run_log(pb::ReadRunLogRequest {
            log_id: log_ids[0],
            from_line: 1,
        })
        .await?
        .into_inner();
    assert!(
        chunk.content.contains("handler saw params=order-42"),
        "log was: {}",
        chunk.content
    );
    assert!(chunk.content.contains("second line from the handler"));
    assert!(chunk.to_line >= 2);
    // Rolling read: from after the last line there is nothing new, and the run is over.
    let rest = cluster
        .client()
        .read_run_log(pb::ReadRunLogRequest {
            log_id: log_ids[0],
            from_line: chunk.to_line + 1,
        })
        .await?
        .into_inner();
    assert!(rest.content.is_empty());
    assert!(rest.is_end);
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn stop_job_stops_firing() -> anyhow::Result<()> {
    let (cluster, group_id, _) = cluster_with_executor().await?;
    let job = cluster
        .create_job(TestCluster::job(
            group_id,
            "ok",
            pb::ScheduleType::Cron,
            "*/1 * * * * ?",
        ))
        .await?;
    cluster.start_job(job.id).await?;
    wait_until(
        Duration::from_secs(10),
        "a first successful fire",
        || async {
            let logs = cluster
                .logs_with_status(job.id, pb::RunStatus::Success)
                .await
                .ok()?;
            (!logs.is_empty()).then_some(())
        },
    )
    .await?;

    let stopped = cluster
        .client()
        .stop_job(pb::StopJobRequest { id: job.id })
        .await?
        .into_inner()
        .job;
    let stopped = stopped.ok_or_else(|| anyhow::anyhow!("no job"))?;
    assert_eq!(stopped.status, pb::JobStatus::Stopped as i32);
    assert_eq!(stopped.next_fire_ms, 0);
    let dispatched = |logs: &[pb::Log]| {
        let not_dispatched = [pb::RunStatus::Skipped as i32, pb::RunStatus::Pending as i32];
        logs.iter()
            .filter(|log| !not_dispatched.contains(&log.status))
            .count()
    };
    let logs_at_stop = cluster.logs(job.id).await?;
    assert!(
        logs_at_stop
            .iter()
            .all(|log| log.status != pb::RunStatus::Pending as i32),
        "StopJob skips the fires already planned"
    );
    let dispatched_at_stop = dispatched(&logs_at_stop);

    // Fires already planned in the pre-read window are skipped, never dispatched. Watching a
    // span longer than that window is the only way to show that nothing fires any more.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let logs = cluster.logs(job.id).await?;
    assert_eq!(
        dispatched(&logs),
        dispatched_at_stop,
        "no run after StopJob"
    );
    assert!(
        logs.iter()
            .all(|log| log.status != pb::RunStatus::Pending as i32)
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn invalid_cron_is_rejected_and_nothing_is_written() -> anyhow::Result<()> {
    let (cluster, group_id, _) = cluster_with_executor().await?;
    let job = TestCluster::job(group_id, "ok", pb::ScheduleType::Cron, "61 * * * * ?");
    let error = cluster
        .client()
        .create_job(pb::CreateJobRequest { job: Some(job) })
        .await
        .expect_err("a bad cron must be refused");
    assert_eq!(error.code(), tonic::Code::InvalidArgument);
    assert!(
        error.message().contains("schedule_conf"),
        "message names the field: {}",
        error.message()
    );
    let listed = cluster
        .client()
        .list_jobs(pb::ListJobsRequest::default())
        .await?
        .into_inner()
        .jobs;
    assert!(listed.is_empty(), "no job was written");
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn unknown_handler_gives_a_failed_log_with_the_reason() -> anyhow::Result<()> {
    let (cluster, group_id, _) = cluster_with_executor().await?;
    let job = cluster
        .create_job(TestCluster::job(
            group_id,
            "noSuchHandler",
            pb::ScheduleType::None,
            "",
        ))
        .await?;
    let request = pb::TriggerJobRequest {
        id: job.id,
        params: None,
        addresses: vec![],
    };
    let log_ids = cluster
        .client()
        .trigger_job(request)
        .await?
        .into_inner()
        .log_ids;
    let log = cluster
        .wait_log_final(log_ids[0], Duration::from_secs(5))
        .await?;
    assert_eq!(log.status, pb::RunStatus::Failed as i32);
    assert_eq!(log.trigger_code, 500);
    assert!(
        log.trigger_msg.contains("noSuchHandler"),
        "reason names the handler: {}",
        log.trigger_msg
    );
    assert!(
        log.trigger_msg.contains("not found"),
        "reason: {}",
        log.trigger_msg
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_dropped_executor_stream_leaves_routing_at_once() -> anyhow::Result<()> {
    let (mut cluster, group_id, address) = cluster_with_executor().await?;
    let listed = cluster
        .client()
        .list_executors(pb::ListExecutorsRequest::default())
        .await?
        .into_inner();
    assert_eq!(listed.executors.len(), 1);

    let executor = cluster
        .take_executor(&address)
        .ok_or_else(|| anyhow::anyhow!("executor"))?;
    executor.crash();
    // "At once": well under one heartbeat interval, and far below the lease.
    let client = cluster.client();
    wait_until(
        Duration::from_millis(400),
        "the executor to leave ListExecutors",
        || {
            let mut client = client.clone();
            async move {
                let listed = client
                    .list_executors(pb::ListExecutorsRequest::default())
                    .await
                    .ok()?
                    .into_inner();
                listed.executors.is_empty().then_some(())
            }
        },
    )
    .await?;

    let job = cluster
        .create_job(TestCluster::job(group_id, "ok", pb::ScheduleType::None, ""))
        .await?;
    let request = pb::TriggerJobRequest {
        id: job.id,
        params: None,
        addresses: vec![],
    };
    let log_ids = cluster
        .client()
        .trigger_job(request)
        .await?
        .into_inner()
        .log_ids;
    let log = cluster
        .wait_log_final(log_ids[0], Duration::from_secs(5))
        .await?;
    assert_eq!(log.status, pb::RunStatus::Failed as i32);
    assert!(
        log.trigger_msg.contains("no online executor"),
        "reason: {}",
        log.trigger_msg
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_restarted_admin_continues_the_schedule_without_duplicates() -> anyhow::Result<()> {
    let (mut cluster, group_id, _) = cluster_with_executor().await?;
    let job = cluster
        .create_job(TestCluster::job(
            group_id,
            "ok",
            pb::ScheduleType::Cron,
            "*/1 * * * * ?",
        ))
        .await?;
    cluster.start_job(job.id).await?;
    wait_until(
        Duration::from_secs(10),
        "2 fires before the restart",
        || async {
            let logs = cluster
                .logs_with_status(job.id, pb::RunStatus::Success)
                .await
                .ok()?;
            (logs.len() >= 2).then_some(())
        },
    )
    .await?;

    cluster.restart_admin().await?;
    let before_restart = cluster
        .logs_with_status(job.id, pb::RunStatus::Success)
        .await?
        .len();
    wait_until(
        Duration::from_secs(10),
        "3 more fires after the restart",
        || async {
            let logs = cluster
                .logs_with_status(job.id, pb::RunStatus::Success)
                .await
                .ok()?;
            (logs.len() >= before_restart + 3).then_some(())
        },
    )
    .await?;

    let logs = cluster.logs(job.id).await?;
    let ran: Vec<i64> = logs
        .iter()
        .filter(|log| log.status != pb::RunStatus::Skipped as i32)
        .map(|log| log.scheduled_at_ms)
        .collect();
    let distinct: HashSet<i64> = ran.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        ran.len(),
        "no scheduled second ran twice: {ran:?}"
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn invalid_job_input_is_refused_naming_the_field_and_nothing_is_written() -> anyhow::Result<()>
{
    let (cluster, group_id, _) = cluster_with_executor().await?;
    let valid = TestCluster::job(group_id, "ok", pb::ScheduleType::Cron, "0 * * * * ?");
    type Mutation = Box<dyn Fn(&mut pb::Job)>;
    let cases: Vec<(&str, Mutation, tonic::Code, &str)> = vec![
        (
            "invalid cron",
            Box::new(|job| job.schedule_conf = "0 0 25 * * ?".into()),
            tonic::Code::InvalidArgument,
            "schedule_conf",
        ),
        (
            "unknown zone",
            Box::new(|job| job.time_zone = "Mars/Olympus".into()),
            tonic::Code::InvalidArgument,
            "time_zone",
        ),
        (
            "unspecified enum",
            Box::new(|job| job.route_strategy = 0),
            tonic::Code::InvalidArgument,
            "route_strategy",
        ),
        (
            "unknown enum value",
            Box::new(|job| job.block_strategy = 99),
            tonic::Code::InvalidArgument,
            "block_strategy",
        ),
        (
            "empty BEAN handler",
            Box::new(|job| job.handler = String::new()),
            tonic::Code::InvalidArgument,
            "handler",
        ),
        (
            "unknown group",
            Box::new(|job| job.group_id = 9999),
            tonic::Code::NotFound,
            "group_id",
        ),
        (
            "negative timeout",
            Box::new(|job| job.timeout_ms = -1),
            tonic::Code::InvalidArgument,
            "timeout_ms",
        ),
        (
            "oversized params",
            Box::new(|job| job.params = "x".repeat(64 * 1024 + 1)),
            tonic::Code::InvalidArgument,
            "params",
        ),
        (
            "missing child job",
            Box::new(|job| job.child_job_ids = vec![4242]),
            tonic::Code::NotFound,
            "child_job_ids",
        ),
    ];
    for (name, mutate, code, field) in cases {
        let mut job = valid.clone();
        mutate(&mut job);
        let error = cluster
            .client()
            .create_job(pb::CreateJobRequest { job: Some(job) })
            .await
            .expect_err(name);
        assert_eq!(error.code(), code, "{name}: {}", error.message());
        assert!(
            error.message().contains(field),
            "{name}: '{}' names {field}",
            error.message()
        );
    }
    let listed = cluster
        .client()
        .list_jobs(pb::ListJobsRequest::default())
        .await?
        .into_inner()
        .jobs;
    assert!(listed.is_empty(), "no invalid job was written");
    // The valid job itself is accepted, so each case failed for its own reason.
    let job = cluster.create_job(valid).await?;

    // A manual trigger's address override is checked like a MANUAL group's addresses.
    for (addresses, why) in [
        (vec!["a"], "must start with http:// or https://"),
        (
            vec!["http://127.0.0.1:1", "http://a b:1"],
            "has no valid host",
        ),
        (vec!["http://127.0.0.1:0"], "has an invalid port"),
    ] {
        let error = cluster
            .client()
            .trigger_job(pb::TriggerJobRequest {
                id: job.id,
                params: None,
                addresses: addresses.iter().map(|a| a.to_string()).collect(),
            })
            .await
            .expect_err("a bad address override");
        assert_eq!(error.code(), tonic::Code::InvalidArgument, "{addresses:?}");
        assert!(
            error.message().starts_with("addresses[") && error.message().contains(why),
            "{addresses:?}: {}",
            error.message()
        );
    }
    assert!(cluster.logs(job.id).await?.is_empty(), "no run was written");
    cluster.shutdown().await;
    Ok(())
}

/// Opens a raw `Registry.Session`, sends `messages`, and returns the status it ends with.
async fn session_outcome(
    admin_url: &str,
    messages: Vec<pb::ExecutorMessage>,
    keep_open: bool,
) -> anyhow::Result<tonic::Status> {
    use pb::registry_client::RegistryClient;
    let mut client = RegistryClient::connect(admin_url.to_string()).await?;
    let (outbound_tx, outbound_rx) = tokio::sync::mpsc::channel(8);
    for message in messages {
        outbound_tx.send(message).await?;
    }
    let request_stream = tokio_stream::wrappers::ReceiverStream::new(outbound_rx);
    let mut inbound = client.session(request_stream).await?.into_inner();
    // Keeping the sender alive means the admin sees no end of stream: only its own rules end it.
    let _sender = keep_open.then_some(outbound_tx);
    loop {
        match tokio::time::timeout(Duration::from_secs(5), inbound.message()).await? {
            Ok(Some(_)) => continue,
            Ok(None) => anyhow::bail!("stream ended without a status"),
            Err(status) => return Ok(status),
        }
    }
}

fn register(protocol_version: u32) -> pb::ExecutorMessage {
    pb::ExecutorMessage {
        kind: Some(pb::executor_message::Kind::Register(pb::Register {
            app_name: APP.to_string(),
            address: "http://127.0.0.1:1".to_string(),
            handlers: vec!["ok".to_string()],
            protocol_version,
            ..Default::default()
        })),
    }
}

#[tokio::test]
async fn malformed_sessions_end_with_a_clear_status_and_leave_no_executor_behind()
-> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let url = cluster.admin_url();
    let heartbeat = pb::ExecutorMessage {
        kind: Some(pb::executor_message::Kind::Heartbeat(
            pb::Heartbeat::default(),
        )),
    };

    let status = session_outcome(&url, vec![heartbeat.clone()], true).await?;
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status.message().contains("first message"),
        "{}",
        status.message()
    );

    let status =
        session_outcome(&url, vec![register(xjob_proto::PROTOCOL_VERSION + 1)], true).await?;
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert!(
        status.message().contains("protocol_version"),
        "{}",
        status.message()
    );

    let status = session_outcome(&url, vec![], true).await?;
    assert_eq!(
        status.code(),
        tonic::Code::DeadlineExceeded,
        "no Register within the handshake timeout"
    );

    let mut no_address = register(xjob_proto::PROTOCOL_VERSION);
    if let Some(pb::executor_message::Kind::Register(register)) = &mut no_address.kind {
        register.address = "not a url".to_string();
    }
    let status = session_outcome(&url, vec![no_address], true).await?;
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status.message().contains("register.address"),
        "{}",
        status.message()
    );

    // Registration is validated as strictly as CreateGroup: names no group can have and
    // addresses nobody can dial are refused, naming the field.
    let long_name = "a".repeat(100_000);
    let refused = [
        ("a", "http://127.0.0.1:1", "register.app_name"),
        (
            long_name.as_str(),
            "http://127.0.0.1:1",
            "register.app_name",
        ),
        ("héllo-app", "http://127.0.0.1:1", "register.app_name"),
        ("nul\0name", "http://127.0.0.1:1", "register.app_name"),
        (APP, "http://", "register.address"),
        (APP, "http://a b", "register.address"),
        (APP, "http://host:0", "register.address"),
    ];
    for (app_name, address, field) in refused {
        let mut bad = register(xjob_proto::PROTOCOL_VERSION);
        if let Some(pb::executor_message::Kind::Register(register)) = &mut bad.kind {
            register.app_name = app_name.to_string();
            register.address = address.to_string();
        }
        let status = session_outcome(&url, vec![bad], true).await?;
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{address}");
        assert!(
            status.message().starts_with(&format!("{field}: ")),
            "{}",
            status.message()
        );
    }

    // Out of order: a valid Register, then a second one.
    let twice = vec![
        register(xjob_proto::PROTOCOL_VERSION),
        register(xjob_proto::PROTOCOL_VERSION),
    ];
    let status = session_outcome(&url, twice, true).await?;
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status.message().contains("first message"),
        "{}",
        status.message()
    );

    let client = cluster.client();
    wait_until(
        Duration::from_secs(2),
        "no executor left registered",
        || {
            let mut client = client.clone();
            async move {
                let listed = client
                    .list_executors(pb::ListExecutorsRequest::default())
                    .await
                    .ok()?
                    .into_inner();
                listed.executors.is_empty().then_some(())
            }
        },
    )
    .await?;
    let store = xjob_admin::store::Store::connect(&format!(
        "sqlite://{}",
        cluster.data_dir().join("xjob.db").display()
    ))
    .await?;
    let rows = store.list_registry_of_node("test-admin").await?;
    assert!(rows.is_empty(), "registry rows left behind: {rows:?}");
    store.close().await;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_callback_for_log_ids_that_name_no_run_says_so_and_writes_nothing() -> anyhow::Result<()>
{
    let (cluster, group_id, _) = cluster_with_executor().await?;
    let job = cluster
        .create_job(TestCluster::job(group_id, "ok", pb::ScheduleType::None, ""))
        .await?;
    let log_id = cluster.trigger(job.id, None).await?;
    let finished = cluster
        .wait_log_final(log_id, Duration::from_secs(10))
        .await?;
    assert_eq!(finished.status, pb::RunStatus::Success as i32);

    let result = |log_id: i64| pb::RunResult {
        log_id,
        status: pb::RunStatus::Failed as i32,
        code: 500,
        message: "late and forged".to_string(),
        ..Default::default()
    };
    let mut registry = pb::registry_client::RegistryClient::connect(cluster.admin_url()).await?;
    let answer = registry
        .callback(pb::CallbackRequest {
            results: vec![result(log_id), result(987_654_321), result(-5)],
        })
        .await?
        .into_inner();
    assert_eq!(answer.accepted_log_ids, vec![log_id, 987_654_321, -5]);
    assert_eq!(answer.unknown_log_ids, vec![987_654_321, -5]);
    // The repeat for the finished run changed nothing either.
    let after = cluster.get_log(log_id).await?;
    assert_eq!(after.status, pb::RunStatus::Success as i32, "{after:?}");
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_second_session_for_the_same_address_closes_the_first() -> anyhow::Result<()> {
    use pb::registry_client::RegistryClient;
    let cluster = TestCluster::builder().start().await?;
    let url = cluster.admin_url();
    // The first session registers and stays open.
    let mut first_client = RegistryClient::connect(url.clone()).await?;
    let (first_tx, first_rx) = tokio::sync::mpsc::channel(8);
    first_tx
        .send(register(xjob_proto::PROTOCOL_VERSION))
        .await?;
    let mut first = first_client
        .session(tokio_stream::wrappers::ReceiverStream::new(first_rx))
        .await?
        .into_inner();
    let registered = tokio::time::timeout(Duration::from_secs(5), first.message()).await??;
    assert!(registered.is_some(), "the first session is registered");

    // The same app and address registers again (the executor reconnected).
    let mut second_client = RegistryClient::connect(url).await?;
    let (second_tx, second_rx) = tokio::sync::mpsc::channel(8);
    second_tx
        .send(register(xjob_proto::PROTOCOL_VERSION))
        .await?;
    let mut second = second_client
        .session(tokio_stream::wrappers::ReceiverStream::new(second_rx))
        .await?
        .into_inner();
    let registered = tokio::time::timeout(Duration::from_secs(5), second.message()).await??;
    assert!(registered.is_some(), "the second session is registered");

    // The first stream ends with ABORTED; the second one stays the only session.
    let ended = loop {
        match tokio::time::timeout(Duration::from_secs(5), first.message()).await? {
            Ok(Some(_)) => continue,
            Ok(None) => anyhow::bail!("the first stream ended without a status"),
            Err(status) => break status,
        }
    };
    assert_eq!(ended.code(), tonic::Code::Aborted, "{ended:?}");
    assert!(ended.message().contains("newer session"), "{ended:?}");
    let listed = cluster
        .client()
        .list_executors(pb::ListExecutorsRequest::default())
        .await?
        .into_inner()
        .executors;
    assert_eq!(listed.len(), 1, "{listed:?}");
    drop((first_tx, second_tx));
    cluster.shutdown().await;
    Ok(())
}
