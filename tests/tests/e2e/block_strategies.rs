//! Block strategies through the admin, three executors online and the FIRST route so every run
//! of a job lands on the same executor: SERIAL_EXECUTION queues runs and runs them one after
//! another in order; DISCARD_LATER refuses a run while one is running (a trigger failure,
//! retried and alarmed like any failure); COVER_EARLY stops the running and queued runs
//! (reported KILLED with the reason) before the new run starts.
//!
//! The handler records what it saw in a watch channel and holds "hold" runs until the test
//! releases them (or they are cancelled), so every step waits on an event, not on time.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, watch};
use xjob_executor::{JobContext, JobError, JobOutput, JobResult};
use xjob_proto::pb;
use xjob_tests::{CountingAlarm, TestCluster, wait_until};

const APP: &str = "block-app";
const HANDLER: &str = "record";
/// Params that make the handler hold the run until released or cancelled.
const HOLD: &str = "hold";
/// Params that make the handler return at once.
const QUICK: &str = "quick";
const DEADLINE: Duration = Duration::from_secs(10);

/// What the handler saw, in the order it saw it (all executors share one record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    Started(i64),
    Finished(i64),
    Cancelled(i64),
}

/// The handlers' shared record and the gate that releases held runs.
#[derive(Clone)]
struct Probe {
    events: Arc<watch::Sender<Vec<Event>>>,
    gate: Arc<Semaphore>,
}

impl Probe {
    fn new() -> Self {
        Self {
            events: Arc::new(watch::Sender::new(Vec::new())),
            gate: Arc::new(Semaphore::new(0)),
        }
    }

    fn record(&self, event: Event) {
        self.events.send_modify(|events| events.push(event));
    }

    fn events(&self) -> Vec<Event> {
        self.events.borrow().clone()
    }

    /// Waits until the record satisfies `done`; returns it.
    async fn wait_for(
        &self,
        what: &str,
        done: impl FnMut(&Vec<Event>) -> bool,
    ) -> anyhow::Result<Vec<Event>> {
        let mut events = self.events.subscribe();
        match tokio::time::timeout(DEADLINE, events.wait_for(done)).await {
            Ok(Ok(seen)) => Ok(seen.clone()),
            Ok(Err(_)) => anyhow::bail!("event record closed while waiting for {what}"),
            Err(_) => anyhow::bail!(
                "timed out after {DEADLINE:?} waiting for {what}; seen {:?}",
                self.events()
            ),
        }
    }

    async fn wait_started(&self, log_id: i64) -> anyhow::Result<Vec<Event>> {
        let what = format!("log {log_id} to start");
        self.wait_for(&what, |events| events.contains(&Event::Started(log_id)))
            .await
    }

    /// One run: "hold" waits for a gate permit or its cancellation, anything else returns.
    async fn run(self, ctx: JobContext) -> JobResult {
        let log_id = ctx.log_id();
        self.record(Event::Started(log_id));
        if ctx.params() == HOLD {
            tokio::select! {
                permit = self.gate.acquire() => {
                    permit.map_err(JobError::from_error)?.forget();
                }
                () = ctx.cancelled() => {
                    self.record(Event::Cancelled(log_id));
                    return Err(JobError::new("stopped while held"));
                }
            }
        }
        self.record(Event::Finished(log_id));
        Ok(JobOutput::message(format!("log {log_id} done")))
    }
}

/// A cluster with three executors serving the recording handler; returns the cluster, the
/// group id and the address the FIRST route picks (the lowest of the sorted list).
async fn three_executors(
    cluster: &mut TestCluster,
    probe: &Probe,
) -> anyhow::Result<(i64, String)> {
    let group_id = cluster.create_group(APP).await?;
    let mut addresses = Vec::new();
    for _ in 0..3 {
        let probe = probe.clone();
        let builder = cluster.executor(APP).handler(HANDLER, move |ctx| {
            let probe = probe.clone();
            async move { probe.run(ctx).await }
        });
        addresses.push(cluster.start_executor(builder).await?);
    }
    let first = addresses
        .into_iter()
        .min()
        .ok_or_else(|| anyhow::anyhow!("no executor"))?;
    Ok((group_id, first))
}

fn job(group_id: i64, strategy: pb::BlockStrategy) -> pb::Job {
    pb::Job {
        name: format!("{strategy:?} job"),
        block_strategy: strategy as i32,
        route_strategy: pb::RouteStrategy::First as i32,
        ..TestCluster::job(group_id, HANDLER, pb::ScheduleType::None, "")
    }
}

/// Asserts the run was accepted by `address` and is still open there (running or queued).
async fn assert_accepted_and_open(
    cluster: &TestCluster,
    log_id: i64,
    address: &str,
) -> anyhow::Result<()> {
    let log = cluster.get_log(log_id).await?;
    assert_eq!(log.trigger_code, 200, "{log:?}");
    assert_eq!(log.status, pb::RunStatus::Running as i32, "{log:?}");
    assert_eq!(log.executor_address, address);
    Ok(())
}

#[tokio::test]
async fn serial_execution_runs_one_after_another_in_order() -> anyhow::Result<()> {
    let probe = Probe::new();
    let mut cluster = TestCluster::builder().start().await?;
    let (group_id, first) = three_executors(&mut cluster, &probe).await?;
    let job = cluster
        .create_job(job(group_id, pb::BlockStrategy::SerialExecution))
        .await?;

    let one = cluster.trigger(job.id, Some(HOLD)).await?;
    probe.wait_started(one).await?;
    let two = cluster.trigger(job.id, Some(HOLD)).await?;
    let three = cluster.trigger(job.id, Some(HOLD)).await?;
    // Both later runs were accepted by the same executor and wait behind the first.
    for log_id in [one, two, three] {
        assert_accepted_and_open(&cluster, log_id, &first).await?;
    }
    assert_eq!(probe.events(), vec![Event::Started(one)]);

    probe.gate.add_permits(3);
    let events = probe
        .wait_for("three runs to finish", |events| events.len() >= 6)
        .await?;
    let expected = vec![
        Event::Started(one),
        Event::Finished(one),
        Event::Started(two),
        Event::Finished(two),
        Event::Started(three),
        Event::Finished(three),
    ];
    assert_eq!(events, expected, "one at a time, in trigger order");
    let mut previous_end = 0;
    for log_id in [one, two, three] {
        let log = cluster.wait_log_final(log_id, DEADLINE).await?;
        assert_eq!(log.status, pb::RunStatus::Success as i32, "{log:?}");
        assert_eq!(log.executor_address, first);
        assert!(log.handle_time_ms >= previous_end, "finished in order");
        previous_end = log.handle_time_ms;
    }
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn discard_later_refuses_a_trigger_while_running_then_retries_and_alarms_once()
-> anyhow::Result<()> {
    let probe = Probe::new();
    let alarm = Arc::new(CountingAlarm::default());
    let mut cluster = TestCluster::builder()
        .configure(|config| config.followup_interval = Duration::from_millis(50))
        .alarm(Arc::clone(&alarm) as _)
        .start()
        .await?;
    let (group_id, first) = three_executors(&mut cluster, &probe).await?;
    let job = cluster
        .create_job(pb::Job {
            fail_retry_count: 1,
            retry_backoff: Some(pb::RetryBackoff {
                initial_delay_ms: 200,
                factor: 1.0,
                max_delay_ms: 0,
            }),
            ..job(group_id, pb::BlockStrategy::DiscardLater)
        })
        .await?;

    let running = cluster.trigger(job.id, Some(HOLD)).await?;
    probe.wait_started(running).await?;
    let refused = cluster.trigger(job.id, Some(QUICK)).await?;
    let refused_log = cluster.wait_log_final(refused, DEADLINE).await?;
    assert_refused(&refused_log, &first);
    assert_eq!(refused_log.trigger_type, pb::TriggerType::Manual as i32);

    // The refusal is a failure like any other: retried after the backoff, still refused (the
    // first run still holds), and the final failure raises the alarm.
    let retry = wait_until(DEADLINE, "the refused run's retry to fail", || async {
        let logs = cluster.logs(job.id).await.ok()?;
        let open = [pb::RunStatus::Pending as i32, pb::RunStatus::Running as i32];
        logs.into_iter()
            .find(|log| log.attempt == 1 && !open.contains(&log.status))
    })
    .await?;
    assert_refused(&retry, &first);
    assert_eq!(retry.trigger_type, pb::TriggerType::Retry as i32);
    assert_eq!(retry.params, QUICK);
    assert!(retry.trigger_time_ms >= refused_log.handle_time_ms + 200);
    let raised = wait_until(DEADLINE, "the final alarm", || async {
        let raised = alarm.of_job(job.id);
        (!raised.is_empty()).then_some(raised)
    })
    .await?;
    let alarmed: Vec<i64> = raised.iter().map(|alarm| alarm.log_id).collect();
    assert_eq!(alarmed, vec![retry.id], "one alarm, for the final failure");

    // The running run was never disturbed and the refused runs never reached the handler.
    assert_eq!(probe.events(), vec![Event::Started(running)]);
    assert_accepted_and_open(&cluster, running, &first).await?;
    probe.gate.add_permits(1);
    let log = cluster.wait_log_final(running, DEADLINE).await?;
    assert_eq!(log.status, pb::RunStatus::Success as i32, "{log:?}");
    assert_eq!(
        probe.events(),
        vec![Event::Started(running), Event::Finished(running)]
    );
    assert_eq!(cluster.logs(job.id).await?.len(), 3);
    assert_eq!(alarm.of_job(job.id).len(), 1);
    cluster.shutdown().await;
    Ok(())
}

/// A DISCARD_LATER refusal: FAILED at trigger time, code 500, the executor's reason.
fn assert_refused(log: &pb::Log, address: &str) {
    assert_eq!(log.status, pb::RunStatus::Failed as i32, "{log:?}");
    assert_eq!(log.trigger_code, 500, "{log:?}");
    assert!(
        log.trigger_msg.contains("DISCARD_LATER"),
        "the reason names the strategy: {}",
        log.trigger_msg
    );
    assert_eq!(log.executor_address, address);
}

#[tokio::test]
async fn cover_early_kills_the_running_and_queued_runs_then_the_new_run_succeeds()
-> anyhow::Result<()> {
    let probe = Probe::new();
    let mut cluster = TestCluster::builder().start().await?;
    let (group_id, first) = three_executors(&mut cluster, &probe).await?;
    let job = cluster
        .create_job(job(group_id, pb::BlockStrategy::SerialExecution))
        .await?;

    // A running run and a queued one (SERIAL), then the job switches to COVER_EARLY.
    let running = cluster.trigger(job.id, Some(HOLD)).await?;
    probe.wait_started(running).await?;
    let queued = cluster.trigger(job.id, Some(HOLD)).await?;
    assert_accepted_and_open(&cluster, queued, &first).await?;
    let covering = pb::Job {
        block_strategy: pb::BlockStrategy::CoverEarly as i32,
        ..job.clone()
    };
    cluster
        .client()
        .update_job(pb::UpdateJobRequest {
            job: Some(covering),
        })
        .await?;

    let cover = cluster.trigger(job.id, Some(QUICK)).await?;
    let reason = format!("block strategy COVER_EARLY: replaced by log {cover}");
    for log_id in [running, queued] {
        let log = cluster.wait_log_final(log_id, DEADLINE).await?;
        assert_eq!(log.status, pb::RunStatus::Killed as i32, "{log:?}");
        assert_eq!(log.handle_msg, reason);
        assert_eq!(log.executor_address, first);
    }
    let log = cluster.wait_log_final(cover, DEADLINE).await?;
    assert_eq!(log.status, pb::RunStatus::Success as i32, "{log:?}");
    assert_eq!(log.executor_address, first);
    // The new run started only after the running one had stopped; the queued one never ran.
    let events = probe
        .wait_for("the covering run to finish", |events| {
            events.contains(&Event::Finished(cover))
        })
        .await?;
    let expected = vec![
        Event::Started(running),
        Event::Cancelled(running),
        Event::Started(cover),
        Event::Finished(cover),
    ];
    assert_eq!(events, expected);
    cluster.shutdown().await;
    Ok(())
}
