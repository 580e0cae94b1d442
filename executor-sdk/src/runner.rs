//! The runner: one queue per job id, drained by one tokio task per job, one run at a time.
//!
//! ```text
//! server Run ──submit──▶ JobSlot{queue, running} ──job task (polls the handler)──▶ RunResult ─▶ callback
//!            refusals: shutting down, duplicate log id, glue disabled, unknown handler, DISCARD_LATER
//! server Kill / COVER_EARLY ──▶ drop queued runs (KILLED at once) + stop the running one
//! ```
//!
//! A running run is stopped by cancelling its token (the handler sees it through
//! `JobContext::cancelled`), waiting `kill_grace` for the handler to return, then dropping its
//! future: the next queued run never starts while a stopped handler is still alive. The job task
//! polls the handler itself (no task per run) and catches its panic as a FAILED result, so a
//! panic never kills the queue.
//! A job task ends after `idle_timeout` without work, and its slot goes with it.
//!
//! A run sent ahead (`start_at_ms` in the future) is accepted at once and held by one timer
//! task for all held runs (`hold`). Shortly before its start (`hold::START_EARLY`) it is queued
//! on its job if the job is idle, and its job task waits for the start on a timer of its own;
//! on a busy job it stays held until its start and is queued then as if it had just arrived.

use std::collections::VecDeque;
use std::collections::hash_map::Entry;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use xjob_proto::pb;

use crate::callback::ResultsSender;
use crate::handler::HandlerFn;
use crate::handler_registry::HandlerRegistry;
use crate::id_hash::{IdMap, IdSet};
use crate::joblog::{JobLogStore, StartTicket};
use execution::{StopReason, StopSignal, execute_run, run_result};

const RECENT_RUN_TTL: Duration = Duration::from_secs(10 * 60);
/// Most finished log ids remembered for duplicate detection.
const RECENT_RUN_CAP: usize = 100_000;

/// Timing settings of the runner.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunnerConfig {
    /// A job task without work for this long ends.
    pub(crate) idle_timeout: Duration,
    /// How long a cancelled handler may take to return before it is dropped.
    pub(crate) kill_grace: Duration,
}

/// Why a run was not accepted; the text is the `RunResponse.message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    ShuttingDown,
    Duplicate {
        log_id: i64,
    },
    /// Another admin took the run over from its sender and fenced the sender here
    /// (`fence`).
    Fenced {
        log_id: i64,
    },
    GlueDisabled {
        glue_type: String,
    },
    GlueUnsupported {
        glue_type: String,
    },
    HandlerNotFound {
        handler: String,
    },
    DiscardLater {
        job_id: i64,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ShuttingDown => write!(formatter, "executor is shutting down"),
            Self::Duplicate { log_id } => write!(
                formatter,
                "duplicate run: log_id {log_id} already queued or running"
            ),
            Self::Fenced { log_id } => write!(
                formatter,
                "fenced run: another admin took log_id {log_id} over from its sender"
            ),
            Self::GlueDisabled { glue_type } => write!(
                formatter,
                "glue type {glue_type} is not enabled on this executor"
            ),
            Self::GlueUnsupported { glue_type } if glue_type == "GLUE_TYPE_GROOVY" => {
                formatter.write_str(crate::glue::GROOVY_UNSUPPORTED)
            }
            Self::GlueUnsupported { glue_type } => {
                write!(formatter, "glue type {glue_type} is not supported")
            }
            Self::HandlerNotFound { handler } => {
                write!(formatter, "job handler [{handler}] not found")
            }
            Self::DiscardLater { job_id } => write!(
                formatter,
                "block strategy DISCARD_LATER: job {job_id} is running or queued"
            ),
        }
    }
}

struct QueuedRun {
    request: pb::RunRequest,
    handler: HandlerFn,
    /// Out while the run is queued on an idle job, to start at once: the log writer waits for
    /// it (`joblog::pending_starts`). Dropped when the run starts, or with the run.
    start_ticket: Option<StartTicket>,
    /// A held run queued before its start: the start (executor clock, epoch ms) its job task
    /// waits for.
    start_gate: Option<i64>,
}

impl QueuedRun {
    fn new(request: pb::RunRequest, handler: HandlerFn) -> Self {
        Self {
            request,
            handler,
            start_ticket: None,
            start_gate: None,
        }
    }
}

struct RunningRun {
    log_id: i64,
    stop: Arc<StopSignal>,
    /// Taken from its queue before its start, waiting for it: still held as far as the admin
    /// knows, so a held-only cancel stops it.
    waits_for_start: bool,
}

struct JobSlot {
    queue: VecDeque<QueuedRun>,
    running_opt: Option<RunningRun>,
    wake: Arc<Notify>,
    // Used by `abort_all`, which exists for the `test-crash` feature alone.
    #[cfg_attr(not(feature = "test-crash"), allow(dead_code))]
    task_abort: AbortHandle,
}

impl JobSlot {
    fn is_busy(&self) -> bool {
        self.running_opt.is_some() || !self.queue.is_empty()
    }
}

/// Log ids finished recently, still refused as duplicates: each for at least
/// [`RECENT_RUN_TTL`] or until [`RECENT_RUN_CAP`] more have finished, whichever comes first,
/// and for at most twice either. Two generations of ids: finishing a run is one insert, and a
/// generation is forgotten whole when the next one fills or ages, instead of each id being
/// queued in order and taken out one by one (at 10 000 runs a second that bookkeeping was a
/// visible share of the executor's start burst).
struct RecentRuns {
    current: IdSet,
    previous: IdSet,
    /// When `current` began.
    current_since: Instant,
}

impl Default for RecentRuns {
    fn default() -> Self {
        Self {
            current: IdSet::default(),
            previous: IdSet::default(),
            current_since: Instant::now(),
        }
    }
}

impl RecentRuns {
    fn insert(&mut self, log_id: i64, now: Instant) {
        self.rotate_if_due(now);
        self.current.insert(log_id);
    }

    fn contains(&mut self, log_id: i64, now: Instant) -> bool {
        self.rotate_if_due(now);
        self.current.contains(&log_id) || self.previous.contains(&log_id)
    }

    /// Starts a new generation once the current one is full or old, forgetting the one before
    /// it (its table is cleared and reused, not freed).
    fn rotate_if_due(&mut self, now: Instant) {
        let age = now.duration_since(self.current_since);
        if self.current.len() < RECENT_RUN_CAP && age < RECENT_RUN_TTL {
            return;
        }
        std::mem::swap(&mut self.current, &mut self.previous);
        self.current.clear();
        self.current_since = now;
        // Every id of a generation came in before it was a lifetime old (each insert rotates
        // first), so one idle past two lifetimes holds only ids older than one.
        if age >= 2 * RECENT_RUN_TTL {
            self.previous.clear();
        }
    }
}

/// A held run queued before its start, found by a held-only cancel.
enum EarlyRun {
    /// Still in its job's queue: taken out.
    Queued(Box<pb::RunRequest>),
    /// Taken by its job task, which waits for its start: stopped before it.
    Stopped,
}

/// Runs a COVER_EARLY placement dropped from their job's queue, and why.
struct Displaced {
    dropped: Vec<pb::RunRequest>,
    reason: StopReason,
}

#[derive(Default)]
struct State {
    jobs: IdMap<JobSlot>,
    /// Runs sent ahead, waiting for their start.
    held: hold::Held<QueuedRun>,
    /// Log ids queued or running here.
    active_log_ids: IdSet,
    recent: RecentRuns,
    /// Log ids refused from a sender another admin took them over from.
    fences: fence::Fences,
    closed: bool,
}

impl State {
    /// Forgets a run that is over (finished or dropped from its queue).
    fn retire(&mut self, log_id: i64) {
        self.active_log_ids.remove(&log_id);
        self.recent.insert(log_id, Instant::now());
    }

    /// Drops the job's queued runs and stops its running one; returns the dropped requests and
    /// how many runs were stopped in all.
    fn stop_job(&mut self, job_id: i64, reason: &StopReason) -> (Vec<pb::RunRequest>, usize) {
        let Some(slot) = self.jobs.get_mut(&job_id) else {
            return (Vec::new(), 0);
        };
        let dropped: Vec<pb::RunRequest> = slot.queue.drain(..).map(|run| run.request).collect();
        crate::metrics::queued().dec_by(dropped.len() as i64);
        let mut stopped = dropped.len();
        if let Some(running) = &slot.running_opt {
            running.stop.stop(reason.clone());
            stopped += 1;
        }
        for request in &dropped {
            self.retire(request.log_id);
        }
        (dropped, stopped)
    }

    /// Stops run `log_id` if it was queued before its start and has not started. Looks in
    /// the slot of `job_id` (the job the admin names), and through every slot only when that
    /// one does not have the run (a caller that named no job or another one), so a cancel
    /// costs one lookup however many jobs this executor runs.
    fn stop_waiting(&mut self, job_id: i64, log_id: i64, reason: &StopReason) -> Option<EarlyRun> {
        if let Some(slot) = self.jobs.get_mut(&job_id)
            && let Some(found) = slot.stop_waiting(log_id, reason)
        {
            return found;
        }
        self.jobs
            .values_mut()
            .find_map(|slot| slot.stop_waiting(log_id, reason))
            .flatten()
    }
}

impl JobSlot {
    /// `None` when run `log_id` is not this job's; `Some(None)` when it is, but started or
    /// queued without a start to wait for (not stoppable as unstarted).
    fn stop_waiting(&mut self, log_id: i64, reason: &StopReason) -> Option<Option<EarlyRun>> {
        if let Some(running) = &self.running_opt
            && running.log_id == log_id
        {
            let stopped = running.waits_for_start && running.stop.stop_before_start(reason.clone());
            return Some(stopped.then_some(EarlyRun::Stopped));
        }
        let position = self
            .queue
            .iter()
            .position(|queued| queued.request.log_id == log_id)?;
        if self.queue[position].start_gate.is_none() {
            return Some(None);
        }
        let run = self.queue.remove(position)?;
        crate::metrics::queued().dec();
        Some(Some(EarlyRun::Queued(Box::new(run.request))))
    }
}

struct Shared {
    state: Mutex<State>,
    handlers: HandlerRegistry,
    joblog: JobLogStore,
    results: ResultsSender,
    config: RunnerConfig,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    /// Wakes the hold task: a run was held that may start before what it waits for.
    hold_wake: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Returns the handler of a run: its BEAN handler by name, or the runner of its glue type
    /// when the executor enabled that type.
    fn handler_for(&self, request: &pb::RunRequest) -> Result<HandlerFn, Refusal> {
        match pb::GlueType::try_from(request.glue_type) {
            Ok(pb::GlueType::Bean | pb::GlueType::Unspecified) => {
                self.handlers.get(&request.handler).ok_or_else(|| {
                    let handler = request.handler.clone();
                    Refusal::HandlerNotFound { handler }
                })
            }
            Ok(glue_type) if crate::glue::languages::language_of(glue_type).is_none() => {
                let glue_type = glue_type.as_str_name().to_owned();
                Err(Refusal::GlueUnsupported { glue_type })
            }
            Ok(glue_type) => self.handlers.glue(glue_type).ok_or_else(|| {
                let glue_type = glue_type.as_str_name().to_owned();
                Refusal::GlueDisabled { glue_type }
            }),
            Err(_) => {
                let glue_type = request.glue_type.to_string();
                Err(Refusal::GlueUnsupported { glue_type })
            }
        }
    }

    /// Reports runs dropped from a queue: a line in their log file, then a result.
    fn report_dropped(&self, dropped: Vec<pb::RunRequest>, reason: &StopReason) {
        for request in dropped {
            if let Ok(log) = self.joblog.create(request.log_id, request.log_date_ms) {
                log.append(&format!("run not started: {}", reason.message));
            }
            let outcome = (reason.status, reason.code, reason.message.as_str());
            let result = run_result(request.log_id, request.log_date_ms, outcome, 0);
            // A closed channel means the executor crashed or stopped: nothing left to report to.
            self.results.send(result);
        }
    }
}

/// The runner; cheap to clone, shared by the server, the connection and the lifecycle.
#[derive(Clone)]
pub(crate) struct Runner {
    shared: Arc<Shared>,
}

impl fmt::Debug for Runner {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Runner")
            .field("handlers", &self.shared.handlers)
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl Runner {
    pub(crate) fn new(
        handlers: HandlerRegistry,
        joblog: JobLogStore,
        results: ResultsSender,
        config: RunnerConfig,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                handlers,
                joblog,
                results,
                config,
                tracker: TaskTracker::new(),
                shutdown: CancellationToken::new(),
                hold_wake: Notify::new(),
            }),
        }
    }

    /// Enqueues a run, applying the job's block strategy, or says why it is refused.
    pub(crate) fn submit(&self, request: pb::RunRequest) -> Result<(), Refusal> {
        let traces = self.shared.results.traces();
        let mut run_trace = traces.run_span(&request);
        let outcome = self.enqueue(request, &mut run_trace);
        if let Err(refusal) = &outcome {
            traces.refused(run_trace, &refusal.to_string());
        }
        outcome
    }

    /// `submit` without the tracing: an accepted run's `run` span is taken from `run_trace`
    /// and registered before the run is queued, so its handler always finds it.
    fn enqueue(
        &self,
        request: pb::RunRequest,
        run_trace: &mut Option<opentelemetry::Context>,
    ) -> Result<(), Refusal> {
        let log_id = request.log_id;
        let mut state = self.shared.lock();
        if state.closed {
            return Err(Refusal::ShuttingDown);
        }
        if state.active_log_ids.contains(&log_id) || state.recent.contains(log_id, Instant::now()) {
            return Err(Refusal::Duplicate { log_id });
        }
        if state.fences.refuses(&request) {
            return Err(Refusal::Fenced { log_id });
        }
        let handler = self.shared.handler_for(&request)?;
        if request.start_at_ms > execution::now_ms() {
            self.shared
                .results
                .traces()
                .accepted(log_id, run_trace.take());
            self.hold(state, QueuedRun::new(request, handler));
            return Ok(());
        }
        self.place(state, QueuedRun::new(request, handler), run_trace)
    }

    /// Queues a run on its job's slot, applying its block strategy; the slot's task is started
    /// if it has none. Consumes the lock: runs dropped by COVER_EARLY are reported after it.
    fn place(
        &self,
        mut state: MutexGuard<'_, State>,
        run: QueuedRun,
        run_trace: &mut Option<opentelemetry::Context>,
    ) -> Result<(), Refusal> {
        let displaced = self.place_locked(&mut state, run, run_trace)?;
        drop(state);
        if let Some(displaced) = displaced {
            self.shared
                .report_dropped(displaced.dropped, &displaced.reason);
        }
        Ok(())
    }

    /// `place` under a lock the caller keeps: what COVER_EARLY dropped is returned, to report
    /// once the lock is released.
    fn place_locked(
        &self,
        state: &mut State,
        run: QueuedRun,
        run_trace: &mut Option<opentelemetry::Context>,
    ) -> Result<Option<Displaced>, Refusal> {
        let QueuedRun {
            request,
            handler,
            start_gate,
            ..
        } = run;
        let (job_id, log_id) = (request.job_id, request.log_id);
        let strategy = pb::BlockStrategy::try_from(request.block_strategy)
            .unwrap_or(pb::BlockStrategy::Unspecified);
        let busy = state.jobs.get(&job_id).is_some_and(JobSlot::is_busy);
        let mut displaced = None;
        match strategy {
            pb::BlockStrategy::DiscardLater if busy => {
                return Err(Refusal::DiscardLater { job_id });
            }
            pb::BlockStrategy::CoverEarly if busy => {
                // Built only here: a message per placed run was a measurable share of a
                // second's burst of starts.
                let reason = StopReason::killed(format!(
                    "block strategy COVER_EARLY: replaced by log {log_id}"
                ));
                let (dropped, _) = state.stop_job(job_id, &reason);
                displaced = Some(Displaced { dropped, reason });
            }
            _ => {}
        }
        state.active_log_ids.insert(log_id);
        let slot = match state.jobs.entry(job_id) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => {
                let wake = Arc::new(Notify::new());
                let task = self.shared.tracker.spawn(job_loop(
                    Arc::clone(&self.shared),
                    job_id,
                    Arc::clone(&wake),
                ));
                entry.insert(JobSlot {
                    queue: VecDeque::new(),
                    running_opt: None,
                    wake,
                    task_abort: task.abort_handle(),
                })
            }
        };
        self.shared
            .results
            .traces()
            .accepted(log_id, run_trace.take());
        // An idle slot starts the run at once (a new slot is idle); behind a busy one it waits.
        let start_ticket = (!slot.is_busy()).then(|| self.shared.joblog.start_ticket());
        slot.queue.push_back(QueuedRun {
            request,
            handler,
            start_ticket,
            start_gate,
        });
        crate::metrics::queued().inc();
        slot.wake.notify_one();
        Ok(displaced)
    }

    /// Holds a run sent ahead until its start; starts the hold task with the first one.
    fn hold(&self, mut state: MutexGuard<'_, State>, run: QueuedRun) {
        state.active_log_ids.insert(run.request.log_id);
        let (start_at_ms, log_id) = (run.request.start_at_ms, run.request.log_id);
        state.held.insert(start_at_ms, log_id, run);
        let start_task = !std::mem::replace(&mut state.held.task_started, true);
        drop(state);
        if start_task {
            self.shared.tracker.spawn(hold_loop(self.clone()));
        }
        self.shared.hold_wake.notify_one();
    }

    /// Queues the held runs whose start has come, as if they had just arrived, and those of
    /// idle jobs whose start is less than `hold::START_EARLY` away, to wait for it in their job
    /// task (a run of a busy job stays held until its start: its block strategy applies then).
    /// A block strategy that refuses a run at its start (DISCARD_LATER) reports it FAILED: the
    /// admin recorded it as accepted when it was sent.
    fn release_due(&self, now_ms: i64) {
        let mut displaced = Vec::new();
        let mut refused = Vec::new();
        let early_ms = i64::try_from(hold::START_EARLY.as_millis()).unwrap_or(0);
        {
            // Taken and queued under one lock, all of a second's runs at once: a kill in
            // between would find a run nowhere, and a lock per run let the job tasks that
            // start them contend with the release for it.
            let mut state = self.shared.lock();
            for key in state.held.keys_until(now_ms.saturating_add(early_ms)) {
                let (start_at_ms, _) = key;
                let early = start_at_ms > now_ms;
                let job_busy = |state: &State, run: &QueuedRun| {
                    let job_id = run.request.job_id;
                    state.jobs.get(&job_id).is_some_and(JobSlot::is_busy)
                };
                if early && state.held.get(&key).is_none_or(|run| job_busy(&state, run)) {
                    continue;
                }
                let Some(mut run) = state.held.remove(&key) else {
                    continue;
                };
                if early {
                    run.start_gate = Some(start_at_ms);
                }
                let (log_id, log_date_ms) = (run.request.log_id, run.request.log_date_ms);
                // Still counted active: the duplicate check passed when it was held; its span
                // was registered then.
                match self.place_locked(&mut state, run, &mut None) {
                    Ok(dropped) => displaced.extend(dropped),
                    Err(refusal) => {
                        state.retire(log_id);
                        refused.push((log_id, log_date_ms, refusal));
                    }
                }
            }
        }
        for Displaced { dropped, reason } in displaced {
            self.shared.report_dropped(dropped, &reason);
        }
        for (log_id, log_date_ms, refusal) in refused {
            let reason = StopReason::refused(format!("at its start: {refusal}"));
            let request = pb::RunRequest {
                log_id,
                log_date_ms,
                ..Default::default()
            };
            self.shared.report_dropped(vec![request], &reason);
        }
    }

    /// Stops every running, queued and held run of a job (each reported KILLED); returns
    /// whether anything was stopped.
    pub(crate) fn kill_job(&self, job_id: i64) -> bool {
        let reason = StopReason::killed("killed by admin");
        let (dropped, stopped) = self.shared.lock().stop_job(job_id, &reason);
        self.shared.report_dropped(dropped, &reason);
        let held = self.take_held(|held| held.take_where(|run| run.request.job_id == job_id));
        let cancelled = held.len();
        self.report_cancelled(held, "killed by admin");
        stopped + cancelled > 0
    }

    /// Cancels run `log_id` if it is held (it never starts; KILLED). A run that is not here
    /// yet is remembered as done, so if it arrives after the cancel (the two raced) it is
    /// refused as a duplicate. Returns whether a held run was cancelled.
    pub(crate) fn cancel_held(&self, job_id: i64, log_id: i64) -> bool {
        const WHY: &str = "its job was stopped, edited or deleted";
        let held = self.take_held(|held| held.take_log(log_id).into_iter().collect());
        if !held.is_empty() {
            self.report_cancelled(held, WHY);
            return true;
        }
        let mut state = self.shared.lock();
        if !state.active_log_ids.contains(&log_id) {
            state.recent.insert(log_id, Instant::now());
            return false;
        }
        // Queued shortly before its start: not started yet, so still held for the admin.
        let reason = StopReason::killed(format!("cancelled before start: {WHY}"));
        match state.stop_waiting(job_id, log_id, &reason) {
            Some(EarlyRun::Queued(request)) => {
                state.retire(log_id);
                drop(state);
                self.shared.report_dropped(vec![*request], &reason);
                true
            }
            // Its job task reports it, not started.
            Some(EarlyRun::Stopped) => true,
            None => false,
        }
    }

    /// Takes held runs out and forgets them as active.
    fn take_held(
        &self,
        take: impl FnOnce(&mut hold::Held<QueuedRun>) -> Vec<QueuedRun>,
    ) -> Vec<pb::RunRequest> {
        let mut state = self.shared.lock();
        let runs = take(&mut state.held);
        runs.into_iter()
            .map(|run| {
                state.retire(run.request.log_id);
                run.request
            })
            .collect()
    }

    /// Reports held runs that never start: KILLED, "cancelled before start".
    fn report_cancelled(&self, held: Vec<pb::RunRequest>, why: &str) {
        if held.is_empty() {
            return;
        }
        let reason = StopReason::killed(format!("cancelled before start: {why}"));
        self.shared.report_dropped(held, &reason);
    }

    /// Returns whether the job has a running or queued run here.
    pub(crate) fn is_job_busy(&self, job_id: i64) -> bool {
        self.shared
            .lock()
            .jobs
            .get(&job_id)
            .is_some_and(JobSlot::is_busy)
    }

    /// Fences `log_id` against `node` at `epoch` and earlier (see `fence`) unless this executor
    /// holds the run or finished it lately; true when it fenced. Under the runner's lock, as
    /// `submit` checks it: a run either arrived before (not fenced, and the caller reads its
    /// log) or is refused after. A run finished longer ago has its log file, which the caller
    /// reads as well.
    pub(crate) fn fence(&self, log_id: i64, node: &str, epoch: i64) -> bool {
        let mut state = self.shared.lock();
        let now = Instant::now();
        if state.active_log_ids.contains(&log_id) || state.recent.contains(log_id, now) {
            return false;
        }
        state.fences.insert(log_id, node, epoch, now);
        true
    }

    /// Returns whether the run is queued or running here.
    pub(crate) fn is_log_active(&self, log_id: i64) -> bool {
        self.shared.lock().active_log_ids.contains(&log_id)
    }

    /// Returns the log ids running or queued now, sorted (sent in heartbeats: a queued run is as
    /// alive as a running one, and the admin must not take it for lost).
    pub(crate) fn running_log_ids(&self) -> Vec<i64> {
        let state = self.shared.lock();
        let mut log_ids: Vec<i64> = state
            .jobs
            .values()
            .flat_map(|slot| {
                let running = slot.running_opt.as_ref().map(|running| running.log_id);
                running
                    .into_iter()
                    .chain(slot.queue.iter().map(|queued| queued.request.log_id))
            })
            .chain(state.held.log_ids())
            .collect();
        log_ids.sort_unstable();
        log_ids
    }

    /// Returns how many runs wait behind running ones.
    pub(crate) fn queued_count(&self) -> u32 {
        let state = self.shared.lock();
        let queued: usize = state.jobs.values().map(|slot| slot.queue.len()).sum();
        u32::try_from(queued).unwrap_or(u32::MAX)
    }

    /// Returns how many job tasks are alive (tests watch idle tasks end).
    #[cfg(test)]
    pub(crate) fn job_task_count(&self) -> usize {
        self.shared.lock().jobs.len()
    }

    /// Graceful stop: refuses new runs, reports queued runs KILLED, waits up to `grace` for the
    /// running handlers, then stops the rest (KILLED) and waits for their tasks to end.
    pub(crate) async fn shutdown(&self, grace: Duration) {
        let reason = StopReason::killed("executor is shutting down");
        let dropped = {
            let mut state = self.shared.lock();
            state.closed = true;
            let job_ids: Vec<i64> = state.jobs.keys().copied().collect();
            let mut dropped = Vec::new();
            for job_id in job_ids {
                let Some(slot) = state.jobs.get_mut(&job_id) else {
                    continue;
                };
                let queued: Vec<pb::RunRequest> =
                    slot.queue.drain(..).map(|run| run.request).collect();
                crate::metrics::queued().dec_by(queued.len() as i64);
                for request in &queued {
                    state.retire(request.log_id);
                }
                dropped.extend(queued);
            }
            // Held runs never start: reported as queued ones are.
            let held: Vec<pb::RunRequest> = state
                .held
                .take_all()
                .into_iter()
                .map(|run| run.request)
                .collect();
            for request in &held {
                state.retire(request.log_id);
            }
            dropped.extend(held);
            dropped
        };
        self.shared.report_dropped(dropped, &reason);
        self.shared.shutdown.cancel();
        self.shared.tracker.close();
        if tokio::time::timeout(grace, self.shared.tracker.wait())
            .await
            .is_err()
        {
            let late_reason = StopReason::killed("executor shut down before the run finished");
            for slot in self.shared.lock().jobs.values() {
                if let Some(running) = &slot.running_opt {
                    running.stop.stop(late_reason.clone());
                }
            }
            self.shared.tracker.wait().await;
        }
    }

    /// Crash stop: aborts every job task and handler at once, reporting nothing.
    #[cfg_attr(not(feature = "test-crash"), allow(dead_code))]
    pub(crate) fn abort_all(&self) {
        let mut state = self.shared.lock();
        state.closed = true;
        for (_, slot) in state.jobs.drain() {
            crate::metrics::queued().dec_by(slot.queue.len() as i64);
            slot.task_abort.abort();
        }
        state.active_log_ids.clear();
        state.held.take_all();
        self.shared.shutdown.cancel();
        self.shared.tracker.close();
    }
}

/// The hold task: queues held runs as their start comes, sleeping until the earliest (at most
/// `hold::MAX_NAP`, to follow a step of the wall clock); ends at shutdown.
async fn hold_loop(runner: Runner) {
    let shared = Arc::clone(&runner.shared);
    loop {
        let now_ms = execution::now_ms();
        runner.release_due(now_ms);
        let nap = shared.lock().held.nap(execution::now_us());
        tokio::select! {
            () = shared.hold_wake.notified() => {}
            () = shared.shutdown.cancelled() => return,
            () = tokio::time::sleep(nap) => {}
        }
    }
}

/// The job task: runs queued runs one by one; ends when idle for `idle_timeout` or at shutdown.
async fn job_loop(shared: Arc<Shared>, job_id: i64, wake: Arc<Notify>) {
    loop {
        let next_opt = {
            let mut state = shared.lock();
            let Some(slot) = state.jobs.get_mut(&job_id) else {
                return;
            };
            slot.queue.pop_front().map(|run| {
                crate::metrics::queued().dec();
                let stop = Arc::new(StopSignal::default());
                let log_id = run.request.log_id;
                let stop_for_slot = Arc::clone(&stop);
                slot.running_opt = Some(RunningRun {
                    log_id,
                    stop: stop_for_slot,
                    waits_for_start: run.start_gate.is_some(),
                });
                (run, stop)
            })
        };
        if let Some((run, stop)) = next_opt {
            let QueuedRun {
                request,
                handler,
                start_ticket,
                start_gate,
            } = run;
            // Built before a run queued early waits: off the second's burst of starts.
            let start_line = execution::start_line(&request);
            if let Some(start_at_ms) = start_gate {
                wait_for_start(&shared, &stop, start_at_ms).await;
            }
            if let Err(reason) = stop.start() {
                drop(start_ticket);
                report_not_started(&shared, job_id, request, &reason);
                continue;
            }
            // Started: the log writer need not wait for it any more.
            drop(start_ticket);
            let log_id = request.log_id;
            let kill_grace = shared.config.kill_grace;
            let handler_trace = shared.results.traces().handler_span(log_id);
            let ended = execute_run(
                &shared.joblog,
                kill_grace,
                request,
                start_line,
                handler,
                &stop,
                handler_trace,
            )
            .await;
            // The rest of this run's bookkeeping waits until the runs woken with it have
            // started: at a second's burst of held runs every start on a worker thread
            // otherwise waited for the results of the runs before it.
            tokio::task::yield_now().await;
            // Listed in heartbeats as unreported from before it stops being active, so no
            // heartbeat leaves it out while the log writer holds its result.
            shared.results.expect(log_id);
            {
                let mut state = shared.lock();
                if let Some(slot) = state.jobs.get_mut(&job_id) {
                    slot.running_opt = None;
                }
                state.retire(log_id);
            }
            // The result is reported once the end line (and the start line of a handler that
            // logged nothing) is in the file: an admin that heard of the run finds its log on
            // disk whatever happens to this process after. Written off this task, which starts
            // the job's next run.
            let execution::Ended {
                result,
                log,
                end_line,
            } = ended;
            let reporter = Arc::clone(&shared);
            shared.joblog.append_later(&log, end_line, move || {
                // A closed channel means the executor crashed or stopped: nothing to report to.
                reporter.results.send(result);
            });
            continue;
        }
        let may_end = tokio::select! {
            () = wake.notified() => false,
            () = shared.shutdown.cancelled() => true,
            () = tokio::time::sleep(shared.config.idle_timeout) => true,
        };
        if may_end {
            let mut state = shared.lock();
            if !state.jobs.get(&job_id).is_some_and(JobSlot::is_busy) {
                state.jobs.remove(&job_id);
                tracing::debug!(job_id, "job task ended");
                return;
            }
        }
    }
}

/// Waits for the start of a run queued before it (see `hold::START_EARLY`), on this task's own
/// timer: a second's runs start without taking the runner's lock. Ends early when the run is
/// stopped or the executor shuts down. The wait is short, so a step of the wall clock during it
/// is not followed (the hold task follows steps while runs are held).
async fn wait_for_start(shared: &Shared, stop: &StopSignal, start_at_ms: i64) {
    let until_start = start_at_ms
        .saturating_mul(1_000)
        .saturating_sub(execution::now_us());
    let Ok(until_start) = u64::try_from(until_start) else {
        return;
    };
    tokio::select! {
        () = tokio::time::sleep(Duration::from_micros(until_start)) => {}
        () = stop.stopped() => {}
        () = shared.shutdown.cancelled() => {
            stop.stop(StopReason::killed("executor is shutting down"));
        }
    }
}

/// A run taken from its queue and stopped before its handler started: its slot is free again
/// and it is reported as a dropped run is.
fn report_not_started(shared: &Shared, job_id: i64, request: pb::RunRequest, reason: &StopReason) {
    {
        let mut state = shared.lock();
        if let Some(slot) = state.jobs.get_mut(&job_id) {
            slot.running_opt = None;
        }
        state.retire(request.log_id);
    }
    shared.report_dropped(vec![request], reason);
}

pub(crate) mod execution;
mod fence;
mod hold;
#[cfg(test)]
mod tests;
