//! Writes dispatch outcomes of scheduled fires in batches: one transaction per burst instead of
//! one per fire. A write that fails is retried, never dropped. A run's admission slot is freed
//! only once its outcome is written or held (below), so the bound on outstanding runs covers
//! this queue too.
//!
//! An accepted outcome (the executor took the run) is *held* for up to [`HOLD`] first: a fast
//! run's result usually arrives meanwhile, and the result write (`callback::apply_results`)
//! then takes the outcome out of [`HeldOutcomes`] and writes both in one row update, instead of
//! two updates of the same row (on PostgreSQL two row versions, two sets of index entries).
//! Outcomes still held after [`HOLD`] are written here as before. The outcome of a run sent
//! ahead is never held (its result comes at its instant at the earliest). Holding changes
//! nothing for a crash: an outcome in this queue was never durable before it was written
//! either (a run claimed but never recorded is found by the lost-run monitor,
//! `monitor::stranded`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::admission::Slot;
use crate::health::{Health, Loop};
use crate::lifecycle::Tasks;
use crate::model::{LogId, NodeIdentity, RunLog, RunStatus, SENT_AHEAD_NOTE};
use crate::store::{DispatchOutcome, DispatchRecord, Store};

/// One dispatch outcome to write, with the admission slot of its run.
#[derive(Debug)]
pub struct Outcome {
    pub record: DispatchRecord,
    pub slot: Option<Arc<Slot>>,
}

/// Most records written in one transaction.
const BATCH: usize = 1000;
/// How long an accepted outcome waits for its run's result before it is written on its own.
/// The SDK executor reports a result within a few milliseconds of a no-op run (5 ms batching
/// window); the outcome's trigger code and address show up at most this much later.
pub const HOLD: Duration = Duration::from_millis(250);
/// Most outcomes held at once (a bound on memory: about 2.5 s of 10 000 fires/s); past it
/// accepted outcomes are written at once.
const MAX_HELD: usize = 25_000;

/// How long a result that found no held outcome is remembered: its outcome, on its way to the
/// recorder, is then written at once instead of held (see [`HeldOutcomes::take`]).
const EARLY_RESULT_MEMORY: Duration = Duration::from_secs(2);

/// Accepted outcomes waiting for their run's result, by log id; shared by the recorder and the
/// result write.
#[derive(Debug, Clone, Default)]
pub struct HeldOutcomes {
    inner: Arc<Mutex<Held>>,
}

#[derive(Debug, Default)]
struct Held {
    outcomes: HashMap<LogId, DispatchRecord>,
    /// Runs whose result was written before their outcome reached the recorder (an executor
    /// may report back before the admin has read the answer to its Run call), with when.
    early_results: HashSet<LogId>,
    early_order: VecDeque<(Instant, LogId)>,
}

impl Held {
    fn note_early_result(&mut self, log_id: LogId, now: Instant) {
        if self.early_results.len() < MAX_HELD && self.early_results.insert(log_id) {
            self.early_order.push_back((now, log_id));
        }
    }

    fn forget_old_early_results(&mut self, now: Instant) {
        while let Some(&(at, log_id)) = self.early_order.front() {
            if now.duration_since(at) < EARLY_RESULT_MEMORY {
                break;
            }
            self.early_order.pop_front();
            self.early_results.remove(&log_id);
        }
    }
}

impl HeldOutcomes {
    /// Takes the held outcomes of `log_ids` (whoever takes one writes it). A run with no held
    /// outcome is remembered for a while: if its outcome turns up after all, the recorder writes
    /// it at once, so the finished run shows its executor without waiting for [`HOLD`].
    pub fn take(&self, log_ids: impl IntoIterator<Item = LogId>) -> Vec<DispatchRecord> {
        let now = Instant::now();
        let mut held = self.lock();
        held.forget_old_early_results(now);
        let mut taken = Vec::new();
        for log_id in log_ids {
            match held.outcomes.remove(&log_id) {
                Some(record) => taken.push(record),
                None => held.note_early_result(log_id, now),
            }
        }
        taken
    }

    /// Holds `record` unless too many are held already or its run's result came first; gives
    /// it back then.
    fn hold(&self, record: DispatchRecord) -> Option<DispatchRecord> {
        let mut held = self.lock();
        if held.early_results.remove(&record.log_id) || held.outcomes.len() >= MAX_HELD {
            return Some(record);
        }
        held.outcomes.insert(record.log_id, record);
        None
    }

    /// `run` as its row will read once its held outcome is written: a RUNNING row without an
    /// address whose accepted outcome is held here gets that outcome's executor, trigger code,
    /// message and trace (a kill, a log read, the runs list; `Trigger::with_held_outcome`).
    /// Any other row is returned as it is.
    pub fn overlay(&self, mut run: RunLog) -> RunLog {
        if run.status != RunStatus::Running || !run.executor_address.is_empty() {
            return run;
        }
        if let Some(record) = self.lock().outcomes.get(&run.id) {
            run.executor_address = record.executor_address.clone();
            run.trigger_code = record.trigger_code;
            run.trigger_msg = record.trigger_msg.clone();
            run.trace_id = record.trace_id.clone();
        }
        run
    }

    /// Takes whatever is still held for `log_ids` (the recorder's due list), without noting
    /// anything: these outcomes are written now whatever their results do.
    fn take_due(&self, log_ids: impl IntoIterator<Item = LogId>) -> Vec<DispatchRecord> {
        let mut held = self.lock();
        log_ids
            .into_iter()
            .filter_map(|log_id| held.outcomes.remove(&log_id))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        // A panic while holding the lock leaves maps that are still consistent.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Where the outcomes go: this node's runs in the store (an outcome of a run not sent is
/// written only while the run is still this node's, `Store::record_dispatches`).
#[derive(Clone)]
pub struct OutcomeStore {
    pub store: Store,
    pub node: NodeIdentity,
}

/// Runs until the channel closes (every sender dropped) or its stage (`tasks`, the recorder's)
/// is told to stop and the queue is empty; outcomes still held are written before it returns.
pub async fn run_recorder(
    store: OutcomeStore,
    mut records_rx: mpsc::UnboundedReceiver<Outcome>,
    held: HeldOutcomes,
    health: Arc<Health>,
    tasks: Tasks,
) {
    let cancel = tasks.stopping().clone();
    let mut batch = Vec::with_capacity(BATCH);
    let mut slots = Vec::with_capacity(BATCH);
    // Log ids held, with when each is due to be written here, oldest first.
    let mut due: VecDeque<(Instant, LogId)> = VecDeque::new();
    // The write of outcomes that fell due, in flight beside the loop: new outcomes are still
    // taken (and their admission slots freed) while it waits for a busy writer. Run inline,
    // a slow due write held back every slot behind it, and the bound on unsent runs refused
    // fires although nothing was waiting to be sent. The loop waits for it before it returns.
    let mut due_write: Option<DueWrite> = None;
    loop {
        let next_due = if due_write.is_none() {
            due.front().map(|(at, _)| *at)
        } else {
            None
        };
        let first = tokio::select! {
            record = records_rx.recv() => record,
            _ = cancel.cancelled() => records_rx.try_recv().ok(),
            () = finish(&mut due_write) => {
                due_write = None;
                continue;
            }
            () = sleep_until_opt(next_due) => {
                let now = Instant::now();
                let mut ids = Vec::new();
                while due.front().is_some_and(|(at, _)| *at <= now) {
                    ids.extend(due.pop_front().map(|(_, id)| id));
                }
                let records = held.take_due(ids);
                let (store, health, cancel) = (store.clone(), health.clone(), cancel.clone());
                // A task of its own, not a future polled here: while this loop awaits its own
                // write below, a future of this task would sit unpolled holding the writer it
                // may have taken, and the two writes would wait for each other for ever.
                due_write = Some(tasks.spawn(async move {
                    write_with_retry(&store, &records, &health, &cancel).await;
                }));
                continue;
            }
        };
        let Some(first) = first else { break };
        let mut next = Some(first);
        while let Some(outcome) = next.take() {
            if outcome.record.outcome == DispatchOutcome::Accepted
                && !cancel.is_cancelled()
                && !sent_ahead(&outcome.record)
            {
                let log_id = outcome.record.log_id;
                match held.hold(outcome.record) {
                    None => {
                        // Held for its run's result: waiting on purpose, not on the database.
                        crate::metrics::recorder_backlog().dec();
                        due.push_back((Instant::now() + HOLD, log_id));
                    }
                    Some(record) => batch.push(record),
                }
            } else {
                batch.push(outcome.record);
            }
            // Sent and either held or about to be written: no longer outstanding once this
            // round's batch is written.
            slots.extend(outcome.slot);
            if batch.len() < BATCH && slots.len() < BATCH {
                next = records_rx.try_recv().ok();
            }
        }
        if !batch.is_empty() {
            write_with_retry(&store, &batch, &health, &cancel).await;
            crate::metrics::recorder_backlog().dec_by(batch.len() as i64);
        }
        batch.clear();
        // Written (or held): these runs are no longer outstanding.
        slots.clear();
    }
    // Shutdown: the due write in flight ends, and whatever is still held is written now.
    if let Some(write) = due_write.take() {
        finished(write.await);
    }
    let rest = held.take_due(due.into_iter().map(|(_, id)| id));
    if !rest.is_empty() {
        write_with_retry(&store, &rest, &health, &cancel).await;
    }
}

/// Whether the outcome is of a run sent ahead: its result cannot come before its instant, so
/// holding the outcome saves no write, and its row is what tells every admin that the run may
/// be held on its executor (a stop or an edit through any admin cancels it from there). It is
/// written at once.
fn sent_ahead(record: &DispatchRecord) -> bool {
    record.trigger_msg.contains(SENT_AHEAD_NOTE)
}

/// The task writing held outcomes that fell due.
type DueWrite = tokio::task::JoinHandle<()>;

/// Waits for the due write in flight, or forever without one.
async fn finish(write: &mut Option<DueWrite>) {
    match write {
        Some(write) => finished(write.await),
        None => std::future::pending().await,
    }
}

/// A due write that panicked lost its outcomes' trigger codes (the runs themselves are in the
/// log table); said once here, the recorder goes on.
fn finished(joined: Result<(), tokio::task::JoinError>) {
    if let Err(error) = joined {
        tracing::error!(%error, "writing due dispatch outcomes ended abnormally");
    }
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn write_with_retry(
    store: &OutcomeStore,
    batch: &[DispatchRecord],
    health: &Health,
    cancel: &CancellationToken,
) {
    if batch.is_empty() {
        return;
    }
    let mut delay = Duration::from_millis(50);
    let mut failures: u32 = 0;
    loop {
        match store.store.record_dispatches(&store.node, batch).await {
            Ok(()) => {
                health.succeeded(Loop::Recorder);
                return;
            }
            Err(error) => {
                health.failed(Loop::Recorder, &error);
                failures += 1;
                // The first failure and every tenth retry are warnings; health says the rest.
                if failures % 10 == 1 {
                    tracing::warn!(%error, records = batch.len(), failures,
                        "writing dispatch outcomes failed; retrying");
                } else {
                    tracing::debug!(%error, records = batch.len(), failures,
                        "writing dispatch outcomes failed; retrying");
                }
                if cancel.is_cancelled() && delay >= Duration::from_secs(1) {
                    tracing::error!(
                        records = batch.len(),
                        "giving up on dispatch outcomes at shutdown"
                    );
                    return;
                }
                tokio::time::sleep(delay).await;
                // At most a second apart: once the database is back, the outcomes (and health)
                // follow within a second.
                delay = (delay * 2).min(Duration::from_secs(1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepted(log_id: i64) -> DispatchRecord {
        DispatchRecord {
            log_id: LogId(log_id),
            outcome: DispatchOutcome::Accepted,
            trigger_code: 200,
            trigger_msg: String::new(),
            executor_address: "http://127.0.0.1:1".into(),
            finished_ms: 0,
            trace_id: String::new(),
        }
    }

    /// A write of outcomes that fell due may wait long for the writer (here: for a database
    /// that fails every write); the outcomes arriving meanwhile are still taken and their
    /// admission slots freed, so the bound on unsent runs counts unsent runs only.
    #[tokio::test]
    async fn slots_are_freed_while_a_due_write_waits_for_the_database() {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("recorder.db").display());
        let store = Store::connect(&url).await.expect("store opens");
        store.close().await;
        let health = Arc::new(Health::new(crate::model::system_clock()));
        let held = HeldOutcomes::default();
        let admission = super::super::admission::Admission::new(10);
        let (records_tx, records_rx) = mpsc::unbounded_channel();
        let tasks = Tasks::default();
        let store = OutcomeStore {
            store,
            node: crate::model::NodeIdentity::new("n1", 1),
        };
        let recorder = tokio::spawn(run_recorder(
            store,
            records_rx,
            held.clone(),
            Arc::clone(&health),
            tasks.clone(),
        ));
        let send = |log_id: i64| {
            let slot = admission.admit(1).pop().map(Arc::new);
            assert!(slot.is_some(), "admitted");
            records_tx
                .send(Outcome {
                    record: accepted(log_id),
                    slot,
                })
                .expect("recorder listens");
        };
        send(1);
        let deadline = Instant::now() + Duration::from_secs(5);
        // The held outcome falls due after HOLD, and its write starts failing.
        while health
            .snapshot()
            .iter()
            .all(|state| state.last_error.is_empty())
        {
            assert!(Instant::now() < deadline, "the due write never ran");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        send(2);
        while admission.outstanding() > 0 {
            assert!(
                Instant::now() < deadline,
                "run 2's slot still taken while the due write waits"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            held.take([LogId(2)]).len(),
            1,
            "run 2's outcome is held for its result"
        );
        tasks.stopping().cancel();
        tokio::time::timeout(Duration::from_secs(10), recorder)
            .await
            .expect("the recorder gives up at shutdown within its bound")
            .expect("recorder task");
    }

    #[test]
    fn an_outcome_held_before_its_result_is_taken_by_the_result_write() {
        let held = HeldOutcomes::default();
        assert!(held.hold(accepted(1)).is_none(), "held");
        let taken = held.take([LogId(1)]);
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].log_id, LogId(1));
        assert!(held.take_due([LogId(1)]).is_empty(), "taken once only");
    }

    /// While its outcome is held, a run's row names no executor; read through this admin, it
    /// reads as it will once written. Rows the outcome does not belong to are left alone.
    #[test]
    fn a_running_row_reads_its_held_outcome_until_the_outcome_is_taken() {
        let held = HeldOutcomes::default();
        let row = |id: i64, status: RunStatus, address: &str| RunLog {
            id: LogId(id),
            job_id: crate::model::JobId(7),
            group_id: crate::model::GroupId(1),
            fire_key: None,
            status,
            trigger_type: crate::model::TriggerType::Cron,
            scheduled_at_ms: 0,
            trigger_time_ms: 0,
            trigger_code: 0,
            trigger_msg: String::new(),
            handle_time_ms: 0,
            handle_code: 0,
            handle_msg: String::new(),
            executor_address: address.to_string(),
            handler: String::new(),
            params: String::new(),
            shard_index: 0,
            shard_total: 1,
            attempt: 0,
            trace_id: String::new(),
            owner_node: String::new(),
            epoch: 0,
            dispatch_at_ms: 0,
            alarm_delivery: String::new(),
        };
        assert!(held.hold(accepted(1)).is_none(), "held");
        let seen = held.overlay(row(1, RunStatus::Running, ""));
        assert_eq!(
            (seen.executor_address.as_str(), seen.trigger_code),
            ("http://127.0.0.1:1", 200)
        );
        let finished = held.overlay(row(1, RunStatus::Success, ""));
        assert_eq!(
            finished.executor_address, "",
            "a finished row says what it says"
        );
        let recorded = held.overlay(row(1, RunStatus::Running, "http://b:2"));
        assert_eq!(
            recorded.executor_address, "http://b:2",
            "a written address stands"
        );
        let other = held.overlay(row(2, RunStatus::Running, ""));
        assert_eq!(other.executor_address, "", "no outcome held for it");
        assert_eq!(held.take([LogId(1)]).len(), 1, "still held after the reads");
        let after = held.overlay(row(1, RunStatus::Running, ""));
        assert_eq!(
            after.executor_address, "",
            "taken: the row is read as it is"
        );
    }

    #[test]
    fn an_outcome_arriving_after_its_result_is_written_at_once() {
        let held = HeldOutcomes::default();
        assert!(held.take([LogId(7)]).is_empty(), "nothing held yet");
        let back = held.hold(accepted(7));
        assert_eq!(back.map(|record| record.log_id), Some(LogId(7)), "not held");
        // Remembered once: a later outcome of the same run (a resend) is held as usual.
        assert!(held.hold(accepted(7)).is_none());
    }

    #[test]
    fn an_early_result_is_forgotten_after_a_while() {
        let held = HeldOutcomes::default();
        held.take([LogId(9)]);
        let later = Instant::now() + EARLY_RESULT_MEMORY;
        held.lock().forget_old_early_results(later);
        assert!(held.hold(accepted(9)).is_none(), "forgotten, so held");
    }
}
