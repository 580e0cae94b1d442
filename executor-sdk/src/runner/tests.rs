//! Runner scenarios driven through `Runner` directly, with a real results channel and handlers
//! that report their start and their end (drop) as events. Time is paused: sleeps and timeouts
//! advance a virtual clock, so timing assertions are exact and tests are fast.

use tokio::sync::mpsc;

use super::*;
use crate::callback::Unreported;
use crate::context::JobContext;
use crate::handler::{JobError, JobOutput, boxed_handler};
use crate::handler_registry::HandlerRegistry;
use crate::runner::execution::now_ms;

#[derive(Debug, PartialEq, Eq)]
enum Event {
    Started(i64),
    /// The handler's future was dropped: it returned, panicked or was aborted.
    Gone(i64),
}

struct GoneGuard {
    log_id: i64,
    events_tx: mpsc::UnboundedSender<Event>,
}

impl Drop for GoneGuard {
    fn drop(&mut self) {
        let _ = self.events_tx.send(Event::Gone(self.log_id));
    }
}

/// A handler whose behaviour is its params: `ok:msg`, `fail:msg`, `panic:msg`, `sleep:ms`,
/// `wait-cancel` (returns once cancelled) or `ignore-cancel` (sleeps an hour regardless).
fn scripted_handler(events_tx: mpsc::UnboundedSender<Event>) -> HandlerFn {
    boxed_handler(move |context: JobContext| {
        let events_tx = events_tx.clone();
        async move {
            let _gone = GoneGuard {
                log_id: context.log_id(),
                events_tx: events_tx.clone(),
            };
            let _ = events_tx.send(Event::Started(context.log_id()));
            let params = context.params().to_owned();
            let (verb, argument) = params.split_once(':').unwrap_or((params.as_str(), ""));
            match verb {
                "ok" => Ok(JobOutput::message(argument)),
                "fail" => Err(JobError::new(argument)),
                "panic" => panic!("{argument}"),
                "sleep" => {
                    let millis = argument.parse().map_err(JobError::from_error)?;
                    tokio::time::sleep(Duration::from_millis(millis)).await;
                    Ok(JobOutput::message("slept"))
                }
                "wait-cancel" => {
                    context.cancelled().await;
                    Ok(JobOutput::message("saw cancel"))
                }
                "ignore-cancel" => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(JobOutput::default())
                }
                _ => Err(JobError::new("unknown verb")),
            }
        }
    })
}

const KILL_GRACE: Duration = Duration::from_secs(2);

struct Harness {
    runner: Runner,
    results_rx: mpsc::UnboundedReceiver<pb::RunResult>,
    events_rx: mpsc::UnboundedReceiver<Event>,
    joblog: JobLogStore,
    unreported: Unreported,
    _log_dir: tempfile::TempDir,
}

impl Harness {
    /// Its run logs are written inline: the clock of these tests is paused, and a test whose
    /// clock is paused cannot wait for the log writer's thread.
    fn new() -> Self {
        Self::with_joblog(|root| JobLogStore::inline(root))
    }

    fn with_joblog(make_joblog: impl FnOnce(&std::path::Path) -> JobLogStore) -> Self {
        Self::with_handler(make_joblog, scripted_handler)
    }

    /// A harness whose handler "scripted" is `make_handler`'s, given the events' sender.
    fn with_handler(
        make_joblog: impl FnOnce(&std::path::Path) -> JobLogStore,
        make_handler: impl FnOnce(mpsc::UnboundedSender<Event>) -> HandlerFn,
    ) -> Self {
        let log_dir = tempfile::tempdir().expect("tempdir");
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (results_tx, results_rx) = mpsc::unbounded_channel();
        let mut handlers = HandlerRegistry::default();
        assert!(handlers.insert("scripted".to_owned(), make_handler(events_tx)));
        let config = RunnerConfig {
            idle_timeout: Duration::from_secs(90),
            kill_grace: KILL_GRACE,
        };
        let joblog = make_joblog(log_dir.path());
        let unreported = Unreported::default();
        let runner = Runner::new(
            handlers,
            joblog.clone(),
            ResultsSender::new(results_tx, unreported.clone(), Arc::default()),
            config,
        );
        Self {
            runner,
            results_rx,
            events_rx,
            joblog,
            unreported,
            _log_dir: log_dir,
        }
    }

    async fn next_result(&mut self) -> pb::RunResult {
        tokio::time::timeout(Duration::from_secs(60), self.results_rx.recv())
            .await
            .expect("a result within 60 s")
            .expect("results channel open")
    }

    async fn next_event(&mut self) -> Event {
        tokio::time::timeout(Duration::from_secs(60), self.events_rx.recv())
            .await
            .expect("an event within 60 s")
            .expect("events channel open")
    }
}

fn run_request(job_id: i64, log_id: i64, params: &str) -> pb::RunRequest {
    pb::RunRequest {
        job_id,
        log_id,
        handler: "scripted".to_owned(),
        params: params.to_owned(),
        block_strategy: pb::BlockStrategy::SerialExecution as i32,
        glue_type: pb::GlueType::Bean as i32,
        log_date_ms: now_ms(),
        shard_total: 1,
        ..Default::default()
    }
}

fn with_strategy(mut request: pb::RunRequest, strategy: pb::BlockStrategy) -> pb::RunRequest {
    request.block_strategy = strategy as i32;
    request
}

fn assert_result(
    result: &pb::RunResult,
    log_id: i64,
    status: pb::RunStatus,
    code: i32,
    message: &str,
) {
    assert_eq!(
        (
            result.log_id,
            result.status,
            result.code,
            result.message.as_str()
        ),
        (log_id, status as i32, code, message),
        "unexpected result {result:?}"
    );
}

/// `result` reports run `log_id` KILLED before its handler started (a kill or a held-only
/// cancel that came before the run's start).
fn assert_stopped_before_start(result: &pb::RunResult, log_id: i64) {
    assert_eq!(
        (
            result.log_id,
            result.status,
            result.message.starts_with("cancelled before start")
        ),
        (log_id, pb::RunStatus::Killed as i32, true),
        "unexpected result {result:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn serial_runs_execute_one_at_a_time_in_order() {
    let mut harness = Harness::new();
    for log_id in 1..=3 {
        harness
            .runner
            .submit(run_request(1, log_id, "sleep:100"))
            .expect("accepted");
    }
    assert_eq!(harness.runner.queued_count(), 3);
    assert_eq!(harness.next_event().await, Event::Started(1));
    // Heartbeats list queued runs too: they are as alive as the running one.
    assert_eq!(harness.runner.running_log_ids(), vec![1, 2, 3]);
    assert_eq!(harness.runner.queued_count(), 2);
    assert!(harness.runner.is_job_busy(1));
    for expected in [
        Event::Gone(1),
        Event::Started(2),
        Event::Gone(2),
        Event::Started(3),
        Event::Gone(3),
    ] {
        assert_eq!(harness.next_event().await, expected);
    }
    for log_id in 1..=3 {
        let result = harness.next_result().await;
        assert_result(&result, log_id, pb::RunStatus::Success, 200, "slept");
        assert!(result.started_at_ms > 0 && result.finished_at_ms >= result.started_at_ms);
    }
    assert!(!harness.runner.is_job_busy(1));
    assert!(harness.runner.running_log_ids().is_empty());
}

#[tokio::test(start_paused = true)]
async fn discard_later_refuses_while_the_job_is_running() {
    let mut harness = Harness::new();
    harness
        .runner
        .submit(run_request(1, 1, "wait-cancel"))
        .expect("accepted");
    assert_eq!(harness.next_event().await, Event::Started(1));
    let refusal = harness
        .runner
        .submit(with_strategy(
            run_request(1, 2, "ok:"),
            pb::BlockStrategy::DiscardLater,
        ))
        .expect_err("refused");
    assert_eq!(refusal, Refusal::DiscardLater { job_id: 1 });
    assert_eq!(
        refusal.to_string(),
        "block strategy DISCARD_LATER: job 1 is running or queued"
    );
    // Another, idle job is not affected.
    harness
        .runner
        .submit(with_strategy(
            run_request(2, 3, "ok:other"),
            pb::BlockStrategy::DiscardLater,
        ))
        .expect("idle job accepts");
    assert_result(
        &harness.next_result().await,
        3,
        pb::RunStatus::Success,
        200,
        "other",
    );
    assert!(harness.runner.kill_job(1));
    assert_result(
        &harness.next_result().await,
        1,
        pb::RunStatus::Killed,
        500,
        "killed by admin",
    );
}

#[tokio::test(start_paused = true)]
async fn cover_early_kills_running_and_queued_runs_then_runs_the_new_one() {
    let mut harness = Harness::new();
    harness
        .runner
        .submit(run_request(1, 1, "wait-cancel"))
        .expect("accepted");
    assert_eq!(harness.next_event().await, Event::Started(1));
    harness
        .runner
        .submit(run_request(1, 2, "ok:queued"))
        .expect("queued");
    harness
        .runner
        .submit(with_strategy(
            run_request(1, 3, "ok:done"),
            pb::BlockStrategy::CoverEarly,
        ))
        .expect("accepted");
    let replaced = "block strategy COVER_EARLY: replaced by log 3";
    assert_result(
        &harness.next_result().await,
        2,
        pb::RunStatus::Killed,
        500,
        replaced,
    );
    assert_result(
        &harness.next_result().await,
        1,
        pb::RunStatus::Killed,
        500,
        replaced,
    );
    assert_result(
        &harness.next_result().await,
        3,
        pb::RunStatus::Success,
        200,
        "done",
    );
    for expected in [Event::Gone(1), Event::Started(3), Event::Gone(3)] {
        assert_eq!(harness.next_event().await, expected);
    }
}

#[tokio::test(start_paused = true)]
async fn timeout_reports_timeout_and_the_next_run_waits_for_the_handler_to_end() {
    let mut harness = Harness::new();
    let mut slow = run_request(1, 1, "ignore-cancel");
    slow.timeout_ms = 1000;
    let submitted_at = Instant::now();
    harness.runner.submit(slow).expect("accepted");
    harness
        .runner
        .submit(run_request(1, 2, "ok:next"))
        .expect("queued");
    assert_eq!(harness.next_event().await, Event::Started(1));
    assert_eq!(harness.next_event().await, Event::Gone(1));
    // The handler ignored cancellation: it was aborted only after the kill grace.
    assert!(submitted_at.elapsed() >= Duration::from_millis(1000) + KILL_GRACE);
    assert_eq!(harness.next_event().await, Event::Started(2));
    let timed_out = harness.next_result().await;
    assert_result(
        &timed_out,
        1,
        pb::RunStatus::Timeout,
        502,
        "job execute timeout after 1000 ms",
    );
    assert_result(
        &harness.next_result().await,
        2,
        pb::RunStatus::Success,
        200,
        "next",
    );
}

#[tokio::test(start_paused = true)]
async fn cooperative_handler_ends_at_the_timeout_without_waiting_for_the_grace() {
    let mut harness = Harness::new();
    let mut request = run_request(1, 1, "wait-cancel");
    request.timeout_ms = 500;
    let submitted_at = Instant::now();
    harness.runner.submit(request).expect("accepted");
    let result = harness.next_result().await;
    assert_result(
        &result,
        1,
        pb::RunStatus::Timeout,
        502,
        "job execute timeout after 500 ms",
    );
    assert!(submitted_at.elapsed() < Duration::from_millis(500) + KILL_GRACE);
}

#[tokio::test(start_paused = true)]
async fn kill_stops_the_running_and_every_queued_run() {
    let mut harness = Harness::new();
    harness
        .runner
        .submit(run_request(1, 1, "wait-cancel"))
        .expect("accepted");
    harness
        .runner
        .submit(run_request(1, 2, "ok:"))
        .expect("queued");
    assert_eq!(harness.next_event().await, Event::Started(1));
    assert!(harness.runner.kill_job(1));
    assert_result(
        &harness.next_result().await,
        2,
        pb::RunStatus::Killed,
        500,
        "killed by admin",
    );
    assert_result(
        &harness.next_result().await,
        1,
        pb::RunStatus::Killed,
        500,
        "killed by admin",
    );
    assert_eq!(harness.next_event().await, Event::Gone(1));
    assert!(!harness.runner.is_job_busy(1));
    assert!(!harness.runner.kill_job(1), "nothing left to kill");
    assert!(!harness.runner.kill_job(42), "unknown job");
}

#[tokio::test(start_paused = true)]
async fn panicking_or_failing_handler_reports_failed_and_the_queue_goes_on() {
    let mut harness = Harness::new();
    harness
        .runner
        .submit(run_request(1, 1, "panic:boom"))
        .expect("accepted");
    harness
        .runner
        .submit(run_request(1, 2, "fail:bad input"))
        .expect("queued");
    harness
        .runner
        .submit(run_request(1, 3, "ok:fine"))
        .expect("queued");
    assert_result(
        &harness.next_result().await,
        1,
        pb::RunStatus::Failed,
        500,
        "handler panicked: boom",
    );
    assert_result(
        &harness.next_result().await,
        2,
        pb::RunStatus::Failed,
        500,
        "bad input",
    );
    assert_result(
        &harness.next_result().await,
        3,
        pb::RunStatus::Success,
        200,
        "fine",
    );
}

#[tokio::test(start_paused = true)]
async fn duplicate_log_id_is_refused_while_active_and_recently_finished() {
    let mut harness = Harness::new();
    harness
        .runner
        .submit(run_request(1, 7, "sleep:100"))
        .expect("accepted");
    let duplicate = harness
        .runner
        .submit(run_request(2, 7, "ok:"))
        .expect_err("duplicate");
    assert_eq!(
        duplicate.to_string(),
        "duplicate run: log_id 7 already queued or running"
    );
    assert!(harness.runner.is_log_active(7));
    harness.next_result().await;
    assert!(!harness.runner.is_log_active(7));
    assert_eq!(
        harness.runner.submit(run_request(1, 7, "ok:")),
        Err(Refusal::Duplicate { log_id: 7 })
    );
    tokio::time::advance(RECENT_RUN_TTL - Duration::from_secs(1)).await;
    assert_eq!(
        harness.runner.submit(run_request(1, 7, "ok:")),
        Err(Refusal::Duplicate { log_id: 7 }),
        "remembered for the ttl"
    );
    tokio::time::advance(RECENT_RUN_TTL + Duration::from_secs(2)).await;
    harness
        .runner
        .submit(run_request(1, 7, "ok:again"))
        .expect("forgotten after twice the ttl at most");
    assert_result(
        &harness.next_result().await,
        7,
        pb::RunStatus::Success,
        200,
        "again",
    );
}

#[tokio::test(start_paused = true)]
async fn unknown_handler_and_disabled_glue_types_are_refused() {
    let harness = Harness::new();
    let mut unknown = run_request(1, 1, "");
    unknown.handler = "nope".to_owned();
    assert_eq!(
        harness
            .runner
            .submit(unknown)
            .map_err(|refusal| refusal.to_string()),
        Err("job handler [nope] not found".to_owned())
    );
    let mut shell = run_request(1, 2, "");
    shell.glue_type = pb::GlueType::Shell as i32;
    assert_eq!(
        harness
            .runner
            .submit(shell)
            .map_err(|refusal| refusal.to_string()),
        Err("glue type GLUE_TYPE_SHELL is not enabled on this executor".to_owned())
    );
    assert!(!harness.runner.is_job_busy(1));
}

#[tokio::test(start_paused = true)]
async fn idle_job_task_ends_after_the_idle_timeout() {
    let mut harness = Harness::new();
    harness
        .runner
        .submit(run_request(1, 1, "ok:"))
        .expect("accepted");
    harness.next_result().await;
    assert_eq!(harness.runner.job_task_count(), 1);
    tokio::time::sleep(Duration::from_secs(89)).await;
    assert_eq!(harness.runner.job_task_count(), 1);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(harness.runner.job_task_count(), 0);
    // A new run starts a new task.
    harness
        .runner
        .submit(run_request(1, 2, "ok:back"))
        .expect("accepted");
    assert_result(
        &harness.next_result().await,
        2,
        pb::RunStatus::Success,
        200,
        "back",
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_kills_queued_runs_and_runs_that_outlive_the_grace() {
    let mut harness = Harness::new();
    harness
        .runner
        .submit(run_request(1, 1, "ignore-cancel"))
        .expect("accepted");
    harness
        .runner
        .submit(run_request(1, 2, "ok:"))
        .expect("queued");
    harness
        .runner
        .submit(run_request(2, 3, "sleep:500"))
        .expect("accepted");
    assert_eq!(harness.next_event().await, Event::Started(1));
    harness.runner.shutdown(Duration::from_secs(1)).await;
    let mut results = Vec::new();
    while let Ok(result) = harness.results_rx.try_recv() {
        results.push(result);
    }
    results.sort_by_key(|result| result.log_id);
    assert_eq!(results.len(), 3, "{results:?}");
    let late = "executor shut down before the run finished";
    assert_result(&results[0], 1, pb::RunStatus::Killed, 500, late);
    assert_result(
        &results[1],
        2,
        pb::RunStatus::Killed,
        500,
        "executor is shutting down",
    );
    assert_result(&results[2], 3, pb::RunStatus::Success, 200, "slept");
    assert_eq!(
        harness.runner.submit(run_request(3, 4, "ok:")),
        Err(Refusal::ShuttingDown)
    );
    assert_eq!(harness.runner.job_task_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn run_log_has_start_handler_and_end_lines() {
    let mut harness = Harness::new();
    let request = run_request(1, 5, "ok:logged");
    let log_date_ms = request.log_date_ms;
    harness.runner.submit(request).expect("accepted");
    harness.next_result().await;
    // The result follows the end line: the disk holds it by then (a handler that logged
    // nothing: in its second's shared file).
    let text = harness
        .joblog
        .on_disk(5, log_date_ms)
        .expect("lines on disk");
    let read = harness.joblog.read(5, log_date_ms, 1, false);
    assert!(read.is_end);
    assert_eq!(read.content, text, "ReadLog returns what is on disk");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0]
            .contains("run start: job_id=1 log_id=5 handler=scripted params=ok:logged shard=0/1")
    );
    assert!(lines[1].contains("run end: status=RUN_STATUS_SUCCESS code=200 message=logged"));
}

/// A run's result waits for the log writer: no admin hears of a run before its log is in the
/// file, and a kill while the writer is behind loses the result with the lines (the run then
/// looks as if the kill had come while it ran). Real log writer thread, real files, real clock.
#[tokio::test]
async fn a_result_is_reported_only_once_its_log_is_on_disk() {
    let mut harness = Harness::with_joblog(|root| JobLogStore::new(root));
    let joblog = harness.joblog.clone();
    let gate = joblog.writer_gate();
    gate.pause();
    let mut submissions = gate.submissions();
    let first = run_request(1, 5, "ok:first");
    let second = run_request(1, 6, "ok:second");
    let (first_date_ms, second_date_ms) = (first.log_date_ms, second.log_date_ms);
    harness.runner.submit(first).expect("accepted");
    harness.runner.submit(second).expect("accepted");
    // One job, so the second run starts only once the job task is done with the first.
    for expected in [Event::Started(5), Event::Gone(5), Event::Started(6)] {
        assert_eq!(harness.next_event().await, expected);
    }
    let handed_over =
        tokio::time::timeout(Duration::from_secs(60), submissions.wait_for(|n| *n >= 2));
    drop(
        handed_over
            .await
            .expect("both logs handed over within 60 s")
            .expect("gate open"),
    );
    assert!(
        harness.results_rx.try_recv().is_err(),
        "no result while the writer holds the run's lines"
    );
    assert!(
        joblog.on_disk(5, first_date_ms).is_none() && joblog.on_disk(6, second_date_ms).is_none(),
        "nothing written yet"
    );
    // Over here, and still listed in heartbeats until a result is accepted.
    assert!(!harness.runner.is_log_active(5) && !harness.runner.is_log_active(6));
    let mut unreported = harness.unreported.log_ids();
    unreported.sort_unstable();
    assert_eq!(unreported, vec![5, 6]);

    gate.permit(1);
    let result = harness.next_result().await;
    assert_result(&result, 5, pb::RunStatus::Success, 200, "first");
    let text = joblog
        .on_disk(5, first_date_ms)
        .expect("lines on disk when its result came");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[1].contains("run end: status=RUN_STATUS_SUCCESS code=200 message=first"));

    // A crash (kill -9) while the writer holds the second run's lines.
    joblog.abandon();
    gate.resume();
    tokio::time::timeout(Duration::from_secs(60), joblog.drain())
        .await
        .expect("the writer drains within 60 s");
    assert!(
        harness.results_rx.try_recv().is_err(),
        "the second run's result died with its lines"
    );
    assert_eq!(joblog.on_disk(6, second_date_ms), None);
    harness.runner.shutdown(Duration::from_secs(1)).await;
}

/// A run sent ahead, `ahead_ms` before its start (wall clock: held runs start by it).
fn held_request(job_id: i64, log_id: i64, ahead_ms: i64) -> pb::RunRequest {
    pb::RunRequest {
        start_at_ms: now_ms() + ahead_ms,
        ..run_request(job_id, log_id, "ok:done")
    }
}

// Real time: the hold timer reads the wall clock, which paused time does not move.
#[tokio::test]
async fn a_held_run_starts_at_its_start_and_is_listed_meanwhile() {
    let mut harness = Harness::new();
    let request = held_request(1, 1, 300);
    let start_at_ms = request.start_at_ms;
    harness.runner.submit(request).expect("accepted");
    assert_eq!(harness.runner.running_log_ids(), vec![1]);
    assert_eq!(
        harness.runner.submit(held_request(1, 1, 300)),
        Err(Refusal::Duplicate { log_id: 1 })
    );
    assert_eq!(harness.next_event().await, Event::Started(1));
    assert!(
        now_ms() >= start_at_ms,
        "started {} ms early",
        start_at_ms - now_ms()
    );
    assert_result(
        &harness.next_result().await,
        1,
        pb::RunStatus::Success,
        200,
        "done",
    );
}

#[tokio::test]
async fn a_kill_or_a_held_only_cancel_keeps_a_held_run_from_starting() {
    let mut harness = Harness::new();
    harness
        .runner
        .submit(held_request(1, 1, 60_000))
        .expect("accepted");
    harness
        .runner
        .submit(held_request(2, 2, 60_000))
        .expect("accepted");
    assert!(harness.runner.kill_job(1));
    assert_stopped_before_start(&harness.next_result().await, 1);
    assert!(harness.runner.cancel_held(2, 2));
    assert_stopped_before_start(&harness.next_result().await, 2);
    assert!(harness.runner.running_log_ids().is_empty());
    // A cancel that overtook its run: the run is refused when it comes.
    assert!(!harness.runner.cancel_held(3, 3));
    assert_eq!(
        harness.runner.submit(held_request(3, 3, 60_000)),
        Err(Refusal::Duplicate { log_id: 3 })
    );
    assert!(
        harness.events_rx.try_recv().is_err(),
        "a cancelled handler ran"
    );
}

/// Held runs due at the same start all start before the first of them is written up (retired,
/// its result handed on): at a second's burst a start waits for the other starts only. On this
/// test's single-threaded runtime, without the job task's yield after the handler, the second
/// run started only once the first was retired.
#[tokio::test]
async fn held_runs_due_together_all_start_before_any_is_written_up() {
    const BURST: [i64; 3] = [1, 2, 3];
    let runner_slot: Arc<std::sync::OnceLock<Runner>> = Arc::default();
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel();
    let probe = {
        let runner_slot = Arc::clone(&runner_slot);
        move |_events_tx| {
            boxed_handler(move |context: JobContext| {
                let runner_slot = Arc::clone(&runner_slot);
                let seen_tx = seen_tx.clone();
                async move {
                    // The runs of the burst still active as this one starts.
                    let runner = runner_slot.get().expect("runner set before any run");
                    let active: Vec<i64> = BURST
                        .into_iter()
                        .filter(|log_id| runner.is_log_active(*log_id))
                        .collect();
                    let _ = seen_tx.send((context.log_id(), active));
                    Ok(JobOutput::default())
                }
            })
        }
    };
    let mut harness = Harness::with_handler(|root| JobLogStore::inline(root), probe);
    assert!(runner_slot.set(harness.runner.clone()).is_ok());
    let start_at_ms = now_ms() + 200;
    for log_id in BURST {
        let request = pb::RunRequest {
            start_at_ms,
            ..run_request(log_id, log_id, "")
        };
        harness.runner.submit(request).expect("accepted");
    }
    for _ in BURST {
        let (log_id, active) = tokio::time::timeout(Duration::from_secs(60), seen_rx.recv())
            .await
            .expect("a start within 60 s")
            .expect("probe channel open");
        assert_eq!(
            active,
            BURST.to_vec(),
            "run {log_id} started after a run of its burst was written up"
        );
    }
    for _ in BURST {
        assert_eq!(
            harness.next_result().await.status,
            pb::RunStatus::Success as i32
        );
    }
}

/// The log writer gives way to runs queued to start: the lines of a run that ended wait until
/// a run queued on an idle job has started (at a second's burst the writer otherwise took a
/// core from the starts). Real writer thread and files; this test's runtime has one thread, so
/// the queued run cannot start while the test blocks it.
#[tokio::test]
async fn the_log_writer_waits_for_a_queued_run_to_start() {
    let long = Duration::from_secs(60);
    let mut harness = Harness::with_joblog(|root| JobLogStore::with_hold_back(root, long));
    let joblog = harness.joblog.clone();
    let gate = joblog.writer_gate();
    gate.pause();
    let mut submissions = gate.submissions();
    let ended = run_request(1, 7, "ok:ended");
    let ended_date_ms = ended.log_date_ms;
    harness.runner.submit(ended).expect("accepted");
    let handed_over = tokio::time::timeout(long, submissions.wait_for(|n| *n >= 1));
    drop(
        handed_over
            .await
            .expect("its log handed over within 60 s")
            .expect("gate open"),
    );
    // Queued on another (idle) job; it starts once this task yields.
    harness
        .runner
        .submit(run_request(2, 8, "ok:queued"))
        .expect("accepted");
    gate.resume();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while joblog.writer_waits_for_starts() == 0 && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert_eq!(joblog.writer_waits_for_starts(), 1, "the writer waits");
    assert!(
        harness.results_rx.try_recv().is_err(),
        "no result while the queued run has not started"
    );
    assert_eq!(
        joblog.on_disk(7, ended_date_ms),
        None,
        "nothing written yet"
    );

    assert_eq!(harness.next_event().await, Event::Started(7));
    assert_eq!(harness.next_event().await, Event::Gone(7));
    assert_eq!(harness.next_event().await, Event::Started(8));
    let mut results = [harness.next_result().await, harness.next_result().await];
    results.sort_by_key(|result| result.log_id);
    assert_result(&results[0], 7, pb::RunStatus::Success, 200, "ended");
    assert_result(&results[1], 8, pb::RunStatus::Success, 200, "queued");
    assert!(joblog.on_disk(7, ended_date_ms).is_some(), "written");
    harness.runner.shutdown(Duration::from_secs(1)).await;
}

/// A held run whose start is `start_at_ms` (several runs can share one start).
fn held_request_at(job_id: i64, log_id: i64, params: &str, start_at_ms: i64) -> pb::RunRequest {
    pb::RunRequest {
        start_at_ms,
        ..run_request(job_id, log_id, params)
    }
}

fn held_log_ids(runner: &Runner) -> Vec<i64> {
    runner.shared.lock().held.log_ids().collect()
}

/// Whether the job task of `job_id` has taken its run from the queue.
fn job_took_its_run(runner: &Runner, job_id: i64) -> bool {
    runner
        .shared
        .lock()
        .jobs
        .get(&job_id)
        .is_some_and(|slot| slot.running_opt.is_some())
}

/// A held run of an idle job is queued shortly before its start and waits for it in its job
/// task: its handler starts at its start, not when it was queued. The release is called here
/// with a clock 10 ms before the start while the real start is 300 ms away, so a job task
/// that did not wait would start the handler about 290 ms early.
#[tokio::test]
async fn a_held_run_queued_before_its_start_starts_at_its_start() {
    let (started_tx, mut started_rx) = mpsc::unbounded_channel();
    let recorder = move |_events_tx| {
        boxed_handler(move |_context: JobContext| {
            let started_tx = started_tx.clone();
            async move {
                let _ = started_tx.send(now_ms());
                Ok(JobOutput::default())
            }
        })
    };
    let mut harness = Harness::with_handler(|root| JobLogStore::inline(root), recorder);
    let start_at_ms = now_ms() + 300;
    let request = held_request_at(1, 1, "", start_at_ms);
    harness.runner.submit(request).expect("accepted");
    harness.runner.release_due(start_at_ms - 10);
    assert!(held_log_ids(&harness.runner).is_empty(), "no longer held");
    assert!(harness.runner.is_job_busy(1), "queued on its job");
    let started_ms = tokio::time::timeout(Duration::from_secs(60), started_rx.recv())
        .await
        .expect("a start within 60 s")
        .expect("open");
    assert!(
        started_ms >= start_at_ms,
        "started {} ms early",
        start_at_ms - started_ms
    );
    assert_eq!(
        harness.next_result().await.status,
        pb::RunStatus::Success as i32
    );
}

/// Queued shortly before its start, a run is still held as far as the admin knows: a
/// held-only cancel or a kill stops it unstarted, whether its job task has taken it from the
/// queue yet or not. A held run of a busy job is not queued early: it waits for its start, so
/// its job's block strategy applies then.
#[tokio::test]
async fn a_run_queued_before_its_start_is_cancelled_or_killed_unstarted() {
    let mut harness = Harness::new();
    harness
        .runner
        .submit(run_request(4, 40, "wait-cancel"))
        .expect("accepted");
    assert_eq!(harness.next_event().await, Event::Started(40));
    let start_at_ms = now_ms() + 60_000;
    for (job_id, log_id) in [(1, 1), (2, 2), (3, 3), (4, 4)] {
        let request = held_request_at(job_id, log_id, "ok:ran", start_at_ms);
        harness.runner.submit(request).expect("accepted");
    }
    // This test's runtime has one thread: the job tasks take nothing until it awaits.
    harness.runner.release_due(start_at_ms - 10);
    assert_eq!(held_log_ids(&harness.runner), vec![4], "job 4 is busy");

    // Naming no job (as a hand-made request may): found by looking through every job.
    assert!(harness.runner.cancel_held(0, 1), "cancelled in its queue");
    assert_stopped_before_start(&harness.next_result().await, 1);

    let deadline = Instant::now() + Duration::from_secs(10);
    while !(job_took_its_run(&harness.runner, 2) && job_took_its_run(&harness.runner, 3)) {
        assert!(Instant::now() < deadline, "the job tasks take their runs");
        tokio::task::yield_now().await;
    }
    assert!(harness.runner.cancel_held(2, 2), "cancelled while waiting");
    assert_stopped_before_start(&harness.next_result().await, 2);
    assert!(harness.runner.kill_job(3), "killed while waiting");
    assert_result(
        &harness.next_result().await,
        3,
        pb::RunStatus::Killed,
        500,
        "killed by admin",
    );
    assert!(harness.runner.cancel_held(4, 4), "job 4's run, still held");
    assert_eq!(harness.next_result().await.log_id, 4);
    assert_eq!(harness.runner.running_log_ids(), vec![40]);
    assert!(
        harness.events_rx.try_recv().is_err(),
        "a cancelled handler ran"
    );
    harness.runner.shutdown(Duration::from_secs(1)).await;
}

/// However fast runs finish, the last `RECENT_RUN_CAP` of them are remembered, and memory stays
/// bounded: ids older than two generations are forgotten.
#[test]
fn recent_runs_keep_the_last_cap_of_ids_and_forget_older_ones() {
    let now = Instant::now();
    let mut recent = RecentRuns::default();
    let cap = RECENT_RUN_CAP as i64;
    let finished = 2 * cap + 5;
    for log_id in 0..finished {
        recent.insert(log_id, now);
    }
    for log_id in (finished - cap)..finished {
        assert!(recent.contains(log_id, now), "{log_id} is among the last");
    }
    assert!(!recent.contains(0, now), "the first id is forgotten");
    assert!(recent.current.len() + recent.previous.len() <= 2 * RECENT_RUN_CAP);
}
