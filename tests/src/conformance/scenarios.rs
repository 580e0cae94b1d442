//! The scenarios, each an async function over a `World`: it starts the executors it needs
//! (fresh app name, fresh ports), acts through the admin's API and awaits events with bounds.
//! The runner stops its executors afterwards, whatever the outcome.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tonic::Code;
use xjob_proto::pb;
use xjob_proto::pb::executor_service_client::ExecutorServiceClient;

use super::batch_split::callback_batch_split;
use super::parity::{command, glue, log_format};
use super::tls::tls;
use super::traces::tracing;
use super::world::{HANDLERS, REGISTER_BOUND, RUN_BOUND, TOKEN, World, expect_status, with_token};
use crate::wait_until;

type Outcome<'a> = Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send + 'a>>;

/// One named scenario.
pub struct Scenario {
    pub name: &'static str,
    pub run: for<'a> fn(&'a mut World) -> Outcome<'a>,
}

macro_rules! scenario {
    ($name:ident) => {
        Scenario {
            name: stringify!($name),
            run: |world| Box::pin($name(world)),
        }
    };
}

/// Scenarios that call the executor's own port directly, which an executor in session
/// dispatch does not open (its calls are covered through the admin by the others).
pub fn needs_port(name: &str) -> bool {
    name == "direct_calls"
}

/// Every scenario, in the order they run.
pub fn all() -> Vec<Scenario> {
    vec![
        scenario!(registers),
        scenario!(cron_success),
        scenario!(failure_retries),
        scenario!(callback_too_large),
        scenario!(callback_batch_split),
        scenario!(read_log),
        scenario!(log_format),
        scenario!(command),
        scenario!(tls),
        scenario!(tracing),
        scenario!(glue),
        scenario!(direct_calls),
        scenario!(kill),
        scenario!(timeout),
        scenario!(serial),
        scenario!(discard_later),
        scenario!(cover_early),
        scenario!(sharding),
        scenario!(lost_run),
        scenario!(admin_outage),
        scenario!(admin_failover),
        scenario!(wrong_token),
        scenario!(stream_drop),
        scenario!(graceful_stop),
    ]
}

/// Registers with its handlers, appears in `ListExecutors`, and heartbeats.
async fn registers(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("registers");
    world.create_group(&app).await?;
    let index = world.start_executor(&app).await?;
    let address = world.executors[index].address();
    let listed = world.wait_listed(&app, &address, REGISTER_BOUND).await?;
    let handlers: BTreeSet<&str> = listed.handlers.iter().map(String::as_str).collect();
    for handler in HANDLERS {
        anyhow::ensure!(
            handlers.contains(handler),
            "handler '{handler}' not registered: {handlers:?}"
        );
    }
    let registered_ms = listed.registered_ms;
    wait_until(
        Duration::from_secs(5),
        "a heartbeat after Register",
        || async {
            let listed = world.wait_listed(&app, &address, RUN_BOUND).await.ok()?;
            (listed.last_heartbeat_ms > registered_ms).then_some(())
        },
    )
    .await
}

/// A cron job fires on the executor, which reports success with its handler's message.
async fn cron_success(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("cron");
    let group = world.create_group(&app).await?;
    world.start_executor(&app).await?;
    let job = pb::Job {
        schedule_type: pb::ScheduleType::Cron as i32,
        schedule_conf: "* * * * * ?".to_string(),
        params: "cron-params".to_string(),
        ..World::job(group, "succeed")
    };
    let job_id = world.create_job(job).await?;
    world
        .client
        .start_job(pb::StartJobRequest { id: job_id })
        .await?;
    // StartJob puts the first fire 5 s ahead.
    let first = wait_until(Duration::from_secs(20), "the first cron run", || async {
        world.logs(job_id).await.ok()?.into_iter().next()
    })
    .await?;
    let log = world.wait_final(first.id, RUN_BOUND).await?;
    world
        .client
        .stop_job(pb::StopJobRequest { id: job_id })
        .await?;
    expect_status(&log, pb::RunStatus::Success, 200)?;
    anyhow::ensure!(
        log.trigger_type == pb::TriggerType::Cron as i32,
        "trigger type {}",
        log.trigger_type
    );
    anyhow::ensure!(
        log.handle_msg.contains("params=cron-params") && log.handle_msg.contains("shard=0/1"),
        "handle_msg '{}' should echo params and shard",
        log.handle_msg
    );
    Ok(())
}

/// A failing handler's message is stored, and the run is retried `fail_retry_count` times.
async fn failure_retries(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("fail");
    let group = world.create_group(&app).await?;
    world.start_executor(&app).await?;
    let job = pb::Job {
        fail_retry_count: 2,
        ..World::job(group, "fail")
    };
    let job_id = world.create_job(job).await?;
    world.trigger_one(job_id, "boom").await?;
    let logs = wait_until(RUN_BOUND, "three failed attempts", || async {
        let logs = world.logs(job_id).await.ok()?;
        (logs.len() == 3 && logs.iter().all(super::world::is_final)).then_some(logs)
    })
    .await?;
    for (attempt, log) in logs.iter().enumerate() {
        expect_status(log, pb::RunStatus::Failed, 500)?;
        anyhow::ensure!(
            log.trigger_code == 200 && log.handle_msg.contains("boom"),
            "attempt {attempt}: trigger_code {}, handle_msg '{}' should name the params",
            log.trigger_code,
            log.handle_msg
        );
        anyhow::ensure!(log.attempt == attempt as i32, "attempt {}", log.attempt);
        let expected = if attempt == 0 {
            pb::TriggerType::Manual
        } else {
            pb::TriggerType::Retry
        };
        anyhow::ensure!(
            log.trigger_type == expected as i32,
            "attempt {attempt} has trigger type {}",
            log.trigger_type
        );
    }
    // No fourth attempt.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let count = world.logs(job_id).await?.len();
    anyhow::ensure!(count == 3, "{count} runs after 2 retries");
    Ok(())
}

/// A run result larger than the admin takes (refused OUT_OF_RANGE) is not retried unchanged for
/// ever: the executor sends it again smaller, its message cut, and the run ends FAILED with the
/// start of its message. (Splitting a refused batch of several results, the same rule one level
/// up: `callback_batch_split`.)
async fn callback_too_large(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("toolarge");
    let group = world.create_group(&app).await?;
    world.start_executor(&app).await?;
    let job_id = world.create_job(World::job(group, "fail")).await?;
    // The trigger (params plus a few bytes of framing) fits; the result cannot: its message is
    // "failed on purpose: " + params, beside a log id, status, code and three timestamps.
    let params = "z".repeat(super::admin::MAX_REQUEST_BYTES - 16);
    let log_id = world.trigger_one(job_id, &params).await?;
    let log = world.wait_final(log_id, RUN_BOUND).await?;
    expect_status(&log, pb::RunStatus::Failed, 500)?;
    let message = &log.handle_msg;
    anyhow::ensure!(
        message.contains("failed on purpose: zzz")
            && message.ends_with("...")
            && message.len() < params.len(),
        "handle_msg of {} bytes should be the start of the refused one, cut: '{}…'",
        message.len(),
        message.chars().take(60).collect::<String>()
    );
    Ok(())
}

/// `ReadRunLog` returns the lines the handler wrote, and `is_end` once it finished.
async fn read_log(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("readlog");
    let group = world.create_group(&app).await?;
    world.start_executor(&app).await?;
    let job_id = world.create_job(World::job(group, "log")).await?;
    let log_id = world.trigger_one(job_id, "5").await?;
    let log = world.wait_final(log_id, RUN_BOUND).await?;
    expect_status(&log, pb::RunStatus::Success, 200)?;
    let (content, is_end) = world.read_log(log_id).await?;
    for line in 1..=5 {
        anyhow::ensure!(
            content.contains(&format!("line {line}")),
            "ReadRunLog lacks 'line {line}':\n{content}"
        );
    }
    anyhow::ensure!(is_end, "is_end false for a finished run:\n{content}");
    // Reading past the end returns nothing new.
    let lines = content.lines().count() as i32;
    let past = world
        .client
        .read_run_log(pb::ReadRunLogRequest {
            log_id,
            from_line: lines + 1,
        })
        .await?
        .into_inner();
    anyhow::ensure!(
        past.content.is_empty() && past.to_line == lines && past.is_end,
        "reading from line {} gave to_line {}, is_end {}, content '{}'",
        lines + 1,
        past.to_line,
        past.is_end,
        past.content
    );
    Ok(())
}

/// `KillRun` ends a long run KILLED and its handler stops.
async fn kill(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("kill");
    let group = world.create_group(&app).await?;
    world.start_executor(&app).await?;
    let job_id = world.create_job(World::job(group, "sleep")).await?;
    let log_id = world.trigger_one(job_id, "60000").await?;
    world.wait_running_with(log_id, "tick").await?;
    let answer = world
        .client
        .kill_run(pb::KillRunRequest { log_id })
        .await?
        .into_inner();
    anyhow::ensure!(
        answer.killed,
        "KillRun answered killed=false: {}",
        answer.message
    );
    let log = world.wait_final(log_id, RUN_BOUND).await?;
    expect_status(&log, pb::RunStatus::Killed, 500)?;
    world.assert_log_stopped(log_id).await
}

/// A job's `timeout_ms` ends a long run TIMEOUT (502) and its handler stops.
async fn timeout(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("timeout");
    let group = world.create_group(&app).await?;
    world.start_executor(&app).await?;
    let job = pb::Job {
        timeout_ms: 1000,
        ..World::job(group, "sleep")
    };
    let job_id = world.create_job(job).await?;
    let log_id = world.trigger_one(job_id, "60000").await?;
    let log = world.wait_final(log_id, RUN_BOUND).await?;
    expect_status(&log, pb::RunStatus::Timeout, 502)?;
    world.assert_log_stopped(log_id).await
}

/// SERIAL_EXECUTION: a second run waits for the first; both succeed, one after the other.
async fn serial(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("serial");
    let group = world.create_group(&app).await?;
    world.start_executor(&app).await?;
    let job_id = world.create_job(World::job(group, "sleep")).await?;
    let first = world.trigger_one(job_id, "800").await?;
    let second = world.trigger_one(job_id, "800").await?;
    let first = world.wait_final(first, RUN_BOUND).await?;
    let second = world.wait_final(second, RUN_BOUND).await?;
    expect_status(&first, pb::RunStatus::Success, 200)?;
    expect_status(&second, pb::RunStatus::Success, 200)?;
    let gap = (second.handle_time_ms - first.handle_time_ms).abs();
    anyhow::ensure!(
        gap >= 700,
        "the runs finished {gap} ms apart; queued behind each other they take >= 800 ms"
    );
    Ok(())
}

/// DISCARD_LATER: a run arriving while one runs is refused (FAILED, trigger code 500).
async fn discard_later(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("discard");
    let group = world.create_group(&app).await?;
    world.start_executor(&app).await?;
    let job = pb::Job {
        block_strategy: pb::BlockStrategy::DiscardLater as i32,
        ..World::job(group, "sleep")
    };
    let job_id = world.create_job(job).await?;
    let first = world.trigger_one(job_id, "1500").await?;
    world.wait_running_with(first, "sleeping").await?;
    let second = world.trigger_one(job_id, "100").await?;
    let second = world.wait_final(second, RUN_BOUND).await?;
    anyhow::ensure!(
        second.status == pb::RunStatus::Failed as i32 && second.trigger_code == 500,
        "the later run should be refused: {} trigger_code {} '{}'",
        super::world::status_name(second.status),
        second.trigger_code,
        second.trigger_msg
    );
    let first = world.wait_final(first, RUN_BOUND).await?;
    expect_status(&first, pb::RunStatus::Success, 200)
}

/// COVER_EARLY: a new run kills the running one (KILLED), then runs.
async fn cover_early(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("cover");
    let group = world.create_group(&app).await?;
    world.start_executor(&app).await?;
    let job = pb::Job {
        block_strategy: pb::BlockStrategy::CoverEarly as i32,
        ..World::job(group, "sleep")
    };
    let job_id = world.create_job(job).await?;
    let first = world.trigger_one(job_id, "60000").await?;
    world.wait_running_with(first, "tick").await?;
    let second = world.trigger_one(job_id, "100").await?;
    let first_log = world.wait_final(first, RUN_BOUND).await?;
    expect_status(&first_log, pb::RunStatus::Killed, 500)?;
    let second = world.wait_final(second, RUN_BOUND).await?;
    expect_status(&second, pb::RunStatus::Success, 200)?;
    world.assert_log_stopped(first).await
}

/// SHARDING_BROADCAST over two executor processes: shard 0/2 and 1/2, one on each.
async fn sharding(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("sharding");
    let group = world.create_group(&app).await?;
    world.start_executor(&app).await?;
    world.start_executor(&app).await?;
    let job = pb::Job {
        route_strategy: pb::RouteStrategy::ShardingBroadcast as i32,
        ..World::job(group, "succeed")
    };
    let job_id = world.create_job(job).await?;
    let ids = world.trigger(job_id, "shards").await?;
    anyhow::ensure!(ids.len() == 2, "a broadcast over 2 executors made {ids:?}");
    let mut seen = BTreeSet::new();
    let mut addresses = BTreeSet::new();
    for id in ids {
        let log = world.wait_final(id, RUN_BOUND).await?;
        expect_status(&log, pb::RunStatus::Success, 200)?;
        let shard = format!("shard={}/{}", log.shard_index, log.shard_total);
        anyhow::ensure!(
            log.handle_msg.contains(&shard),
            "run {} is {shard} but the handler saw '{}'",
            log.id,
            log.handle_msg
        );
        seen.insert(shard);
        addresses.insert(log.executor_address.clone());
    }
    anyhow::ensure!(
        seen == BTreeSet::from(["shard=0/2".to_string(), "shard=1/2".to_string()]),
        "shards {seen:?}"
    );
    anyhow::ensure!(addresses.len() == 2, "shards ran on {addresses:?}");
    Ok(())
}

/// A run the executor stops listing (SIGKILL, restarted on the same port) becomes LOST.
async fn lost_run(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("lost");
    let group = world.create_group(&app).await?;
    let index = world.start_executor(&app).await?;
    let address = world.executors[index].address();
    let job_id = world.create_job(World::job(group, "sleep")).await?;
    let log_id = world.trigger_one(job_id, "60000").await?;
    world.wait_running_with(log_id, "tick").await?;
    wait_until(RUN_BOUND, "the heartbeat to list the run", || async {
        let listed = world.wait_listed(&app, &address, RUN_BOUND).await.ok()?;
        listed.running_log_ids.contains(&log_id).then_some(())
    })
    .await?;
    world.executors[index].kill_9().await?;
    let port = world.executors[index].env.port;
    let restarted = world.spawn_executor_on(&app, TOKEN, port)?;
    world
        .wait_listed(&app, &world.executors[restarted].address(), REGISTER_BOUND)
        .await?;
    let log = world.wait_final(log_id, Duration::from_secs(20)).await?;
    expect_status(&log, pb::RunStatus::Lost, 500)?;
    anyhow::ensure!(
        log.handle_msg.starts_with("run lost:"),
        "handle_msg '{}'",
        log.handle_msg
    );
    Ok(())
}

/// A result that finishes while the admin is down arrives once it is back, exactly once.
async fn admin_outage(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("outage");
    let group = world.create_group(&app).await?;
    let index = world.start_executor(&app).await?;
    let address = world.executors[index].address();
    let job_id = world.create_job(World::job(group, "sleep")).await?;
    let log_id = world.trigger_one(job_id, "1500").await?;
    world.wait_running_with(log_id, "sleeping").await?;
    world.admin.kill_9().await?;
    // The run ends (1.5 s) while the admin is down; its callback must wait for the admin.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    world.admin.restart().await?;
    world.client = world.admin.client().await?;
    world.wait_listed(&app, &address, REGISTER_BOUND).await?;
    let log = world.wait_final(log_id, Duration::from_secs(30)).await?;
    expect_status(&log, pb::RunStatus::Success, 200)?;
    anyhow::ensure!(
        log.handle_msg.contains("slept"),
        "handle_msg '{}'",
        log.handle_msg
    );
    let runs = world.logs(job_id).await?;
    anyhow::ensure!(runs.len() == 1, "{} runs for one trigger", runs.len());
    Ok(())
}

/// With a dead admin first in `XJOB_ADMIN_ADDR`, the executor fails over to the live one for
/// its session and its results.
async fn admin_failover(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("failover");
    let group = world.create_group(&app).await?;
    // A port nothing listens on: connections to it are refused at once.
    let dead = format!("http://127.0.0.1:{}", super::admin::free_port()?);
    let admins = format!("{dead},{}", world.admin.url());
    let port = super::admin::free_port()?;
    let index = world.spawn_executor_with(&app, TOKEN, port, &admins)?;
    let address = world.executors[index].address();
    world.wait_listed(&app, &address, REGISTER_BOUND).await?;
    let job_id = world.create_job(World::job(group, "succeed")).await?;
    let log_id = world.trigger_one(job_id, "failover").await?;
    let log = world.wait_final(log_id, RUN_BOUND).await?;
    expect_status(&log, pb::RunStatus::Success, 200)
}

/// A session with the wrong token is refused; the executor refuses calls without its token.
async fn wrong_token(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("token");
    world.create_group(&app).await?;
    let index = world.spawn_executor(&app, "not-the-token")?;
    let address = world.executors[index].address();
    // The executor serves ExecutorService with its own token (wrong for the group, but its own);
    // in session dispatch it has no port, and only the refusal below applies.
    if world.command.session {
        // No port to wait on: wait until the executor has heard the refusal and said so.
        let executor = &world.executors[index];
        wait_until(REGISTER_BOUND, "the executor to report the refusal", || {
            let output = executor.output_tail(200).to_lowercase();
            async move {
                (output.contains("refused") || output.contains("unauthenticated")).then_some(())
            }
        })
        .await?;
    } else {
        beats_with_its_own_token(&address).await?;
    }
    // The session is refused: it never appears, over 4 heartbeat intervals of trying.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let online = world.online(&app).await?;
    anyhow::ensure!(
        online.is_empty(),
        "an executor with the wrong token is online: {online:?}"
    );
    Ok(())
}

/// The executor's port refuses a `Beat` without a token and answers one with its own token.
async fn beats_with_its_own_token(address: &str) -> anyhow::Result<()> {
    let mut client = wait_until(REGISTER_BOUND, "the executor to listen", || async {
        ExecutorServiceClient::connect(address.to_string())
            .await
            .ok()
    })
    .await?;
    let without = client.beat(pb::BeatRequest {}).await;
    anyhow::ensure!(
        matches!(&without, Err(status) if status.code() == Code::Unauthenticated),
        "Beat without a token: {without:?}"
    );
    let mut request = tonic::Request::new(pb::BeatRequest {});
    request
        .metadata_mut()
        .insert("authorization", "Bearer not-the-token".parse()?);
    client
        .beat(request)
        .await
        .map_err(|status| anyhow::anyhow!("Beat with the executor's token: {status}"))?;
    Ok(())
}

/// A session that ends without Deregister (SIGKILL) leaves routing at once.
async fn stream_drop(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("drop");
    let group = world.create_group(&app).await?;
    let index = world.start_executor(&app).await?;
    let address = world.executors[index].address();
    world.executors[index].kill_9().await?;
    // Well under the 2 s lease: the stream's end, not a missed heartbeat, removes it.
    world
        .wait_unlisted(&app, &address, Duration::from_millis(1500))
        .await?;
    let job_id = world.create_job(World::job(group, "succeed")).await?;
    let log_id = world.trigger_one(job_id, "").await?;
    let log = world.wait_final(log_id, RUN_BOUND).await?;
    anyhow::ensure!(
        log.status == pb::RunStatus::Failed as i32
            && log.trigger_code == 500
            && log.trigger_msg.contains("no online executor"),
        "a run after the drop: {} '{}'",
        super::world::status_name(log.status),
        log.trigger_msg
    );
    Ok(())
}

/// SIGTERM: the executor deregisters, reports its run, and exits with status 0.
async fn graceful_stop(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("stop");
    let group = world.create_group(&app).await?;
    let index = world.start_executor(&app).await?;
    let address = world.executors[index].address();
    let job_id = world.create_job(World::job(group, "sleep")).await?;
    let log_id = world.trigger_one(job_id, "300").await?;
    world.wait_running_with(log_id, "sleeping").await?;
    let status = world.executors[index]
        .terminate(Duration::from_secs(15))
        .await?;
    anyhow::ensure!(status.success(), "exit status after SIGTERM: {status}");
    world
        .wait_unlisted(&app, &address, Duration::from_millis(500))
        .await?;
    let log = world.wait_final(log_id, RUN_BOUND).await?;
    anyhow::ensure!(
        [pb::RunStatus::Success as i32, pb::RunStatus::Killed as i32].contains(&log.status),
        "the run in flight at SIGTERM ended {} '{}' (expected SUCCESS or KILLED)",
        super::world::status_name(log.status),
        log.handle_msg
    );
    Ok(())
}

/// A BEAN run of job `job_id` as the admin would send it.
fn run_request(job_id: i64, log_id: i64, handler: &str, params: &str) -> pb::RunRequest {
    pb::RunRequest {
        job_id,
        log_id,
        handler: handler.to_string(),
        params: params.to_string(),
        block_strategy: pb::BlockStrategy::SerialExecution as i32,
        log_date_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_millis() as i64)
            .unwrap_or_default(),
        glue_type: pb::GlueType::Bean as i32,
        shard_total: 1,
        trigger_type: pb::TriggerType::Manual as i32,
        ..Default::default()
    }
}

/// ExecutorService called directly, as the admin would: refusals (duplicate log id, unknown
/// handler, other glue types), IdleBeat, RunBatch (or UNIMPLEMENTED), ReadLog of a running and
/// of an unknown run, Kill with and without runs, and the heartbeat's running list (a run is
/// listed while it runs and leaves the list once its result is acknowledged).
async fn direct_calls(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("direct");
    world.create_group(&app).await?;
    let index = world.start_executor(&app).await?;
    let address = world.executors[index].address();
    let mut client = ExecutorServiceClient::connect(address.clone()).await?;
    // Ids far above the admin's, so nothing the admin knows is touched; their results are
    // acknowledged (and ignored) by the admin's Callback.
    let (job, other_job) = (7_000_000_001, 7_000_000_002);
    let long_run = run_request(job, 8_000_000_001, "sleep", "60000");

    client.beat(with_token(pb::BeatRequest {})?).await?;
    let idle = client
        .idle_beat(with_token(pb::IdleBeatRequest { job_id: job })?)
        .await?
        .into_inner();
    anyhow::ensure!(idle.idle, "IdleBeat of a job never run: {idle:?}");
    let first = client
        .run(with_token(long_run.clone())?)
        .await?
        .into_inner();
    anyhow::ensure!(first.accepted, "Run refused: {}", first.message);
    let again = client
        .run(with_token(long_run.clone())?)
        .await?
        .into_inner();
    anyhow::ensure!(!again.accepted, "a duplicate log id was accepted");
    let busy = client
        .idle_beat(with_token(pb::IdleBeatRequest { job_id: job })?)
        .await?
        .into_inner();
    anyhow::ensure!(!busy.idle, "IdleBeat says idle while a run of the job runs");
    let shell = pb::RunRequest {
        glue_type: pb::GlueType::Shell as i32,
        ..run_request(other_job, 8_000_000_002, "succeed", "")
    };
    let shell = client.run(with_token(shell)?).await?.into_inner();
    anyhow::ensure!(!shell.accepted, "a GLUE_TYPE_SHELL run was accepted");
    let unknown = run_request(other_job, 8_000_000_003, "no-such-handler", "");
    let unknown = client.run(with_token(unknown)?).await?.into_inner();
    anyhow::ensure!(
        !unknown.accepted,
        "a run of an unknown handler was accepted"
    );

    let batch = pb::RunBatchRequest {
        runs: vec![
            run_request(other_job, 8_000_000_004, "no-such-handler", ""),
            run_request(other_job, 8_000_000_005, "succeed", "batched"),
        ],
    };
    match client.run_batch(with_token(batch)?).await {
        Ok(answer) => {
            let results = answer.into_inner().results;
            anyhow::ensure!(
                results.len() == 2 && !results[0].accepted && results[1].accepted,
                "RunBatch should answer [refused, accepted]: {results:?}"
            );
        }
        Err(status) if status.code() == Code::Unimplemented => {}
        Err(status) => anyhow::bail!("RunBatch: {status}"),
    }

    let read = |from_line: i32, log_id: i64| pb::ReadLogRequest {
        log_id,
        log_date_ms: long_run.log_date_ms,
        from_line,
        ..Default::default()
    };
    wait_until(
        RUN_BOUND,
        "ReadLog to show the running handler's line",
        || {
            let mut client = client.clone();
            async move {
                let page = client
                    .read_log(with_token(read(1, long_run.log_id)).ok()?)
                    .await
                    .ok()?;
                let page = page.into_inner();
                (page.content.contains("sleeping") && !page.is_end).then_some(())
            }
        },
    )
    .await?;
    let missing = client
        .read_log(with_token(read(1, 8_000_000_999))?)
        .await?
        .into_inner();
    anyhow::ensure!(
        missing.to_line == 0 && missing.is_end,
        "ReadLog of an unknown run: to_line {}, is_end {}",
        missing.to_line,
        missing.is_end
    );
    wait_until(
        RUN_BOUND,
        "the heartbeat to list the running run",
        || async {
            let listed = world.wait_listed(&app, &address, RUN_BOUND).await.ok()?;
            listed
                .running_log_ids
                .contains(&long_run.log_id)
                .then_some(())
        },
    )
    .await?;

    let kill = pb::KillRequest {
        job_id: job,
        log_id: long_run.log_id,
        held_only: false,
    };
    let killed = client.kill(with_token(kill)?).await?.into_inner();
    anyhow::ensure!(killed.killed, "Kill of a running job: {killed:?}");
    wait_until(RUN_BOUND, "the killed job to be idle", || {
        let mut client = client.clone();
        async move {
            let idle = client
                .idle_beat(with_token(pb::IdleBeatRequest { job_id: job }).ok()?)
                .await
                .ok()?;
            idle.into_inner().idle.then_some(())
        }
    })
    .await?;
    let nothing = client.kill(with_token(kill)?).await?.into_inner();
    anyhow::ensure!(!nothing.killed, "Kill of an idle job answered killed=true");
    wait_until(
        RUN_BOUND,
        "the acknowledged run to leave the heartbeat's list",
        || async {
            let listed = world.wait_listed(&app, &address, RUN_BOUND).await.ok()?;
            (!listed.running_log_ids.contains(&long_run.log_id)).then_some(())
        },
    )
    .await?;
    let page = client
        .read_log(with_token(read(1, long_run.log_id))?)
        .await?
        .into_inner();
    anyhow::ensure!(page.is_end, "ReadLog of the killed run: is_end false");
    Ok(())
}
