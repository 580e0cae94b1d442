//! Writes dispatch outcomes of scheduled fires in batches: one transaction per burst instead of
//! one per fire. A write that fails is retried, never dropped. A run's admission slot is freed
//! only once its outcome is written or held (below), so the bound on outstanding runs covers
//! this queue too.
//!
//! An accepted outcome (the executor took the run) is *held* for up to [`HOLD`] first: a fast
//! run's result usually arrives meanwhile, and the result write (`callback::apply_results`)
//! then takes the outcome out of [`HeldOutcomes`] and writes both in one row update, instead of
//! two updates of the same row (on PostgreSQL two row versions, two sets of index entries).
//! Outcomes still held after [`HOLD`] are written here as before. Holding changes nothing for
//! a crash: an outcome in this queue was never durable before it was written either (a run
//! claimed but never recorded is found by the lost-run monitor, `monitor::stranded`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::admission::Slot;
use crate::health::{Health, Loop};
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

/// Accepted outcomes waiting for their run's result, by log id; shared by the recorder and the
/// result write.
#[derive(Debug, Clone, Default)]
pub struct HeldOutcomes {
    held: Arc<Mutex<HashMap<i64, DispatchRecord>>>,
}

impl HeldOutcomes {
    /// Takes the held outcomes of `log_ids` (whoever takes one writes it).
    pub fn take(&self, log_ids: impl IntoIterator<Item = i64>) -> Vec<DispatchRecord> {
        let mut held = self.lock();
        if held.is_empty() {
            return Vec::new();
        }
        log_ids
            .into_iter()
            .filter_map(|log_id| held.remove(&log_id))
            .collect()
    }

    /// Holds `record` unless too many are held already; gives it back then.
    fn hold(&self, record: DispatchRecord) -> Option<DispatchRecord> {
        let mut held = self.lock();
        if held.len() >= MAX_HELD {
            return Some(record);
        }
        held.insert(record.log_id, record);
        None
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, DispatchRecord>> {
        // A panic while holding the lock leaves a map that is still consistent.
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Runs until the channel closes (every sender dropped) or `cancel` fires and the queue is
/// empty; outcomes still held are written before it returns.
pub async fn run_recorder(
    store: Store,
    mut records_rx: mpsc::UnboundedReceiver<Outcome>,
    held: HeldOutcomes,
    health: Arc<Health>,
    cancel: CancellationToken,
) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut slots = Vec::with_capacity(BATCH);
    // Log ids held, with when each is due to be written here, oldest first.
    let mut due: VecDeque<(Instant, i64)> = VecDeque::new();
    loop {
        let next_due = due.front().map(|(at, _)| *at);
        let first = tokio::select! {
            record = records_rx.recv() => record,
            _ = cancel.cancelled() => records_rx.try_recv().ok(),
            () = sleep_until_opt(next_due) => {
                let now = Instant::now();
                let mut ids = Vec::new();
                while due.front().is_some_and(|(at, _)| *at <= now) {
                    ids.extend(due.pop_front().map(|(_, id)| id));
                }
                batch.extend(held.take(ids));
                write_with_retry(&store, &batch, &health, &cancel).await;
                batch.clear();
                continue;
            }
        };
        let Some(first) = first else { break };
        let mut next = Some(first);
        while let Some(outcome) = next.take() {
            if outcome.record.outcome == DispatchOutcome::Accepted && !cancel.is_cancelled() {
                let log_id = outcome.record.log_id;
                match held.hold(outcome.record) {
                    None => due.push_back((Instant::now() + HOLD, log_id)),
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
        }
        batch.clear();
        // Written (or held): these runs are no longer outstanding.
        slots.clear();
    }
    // Shutdown: whatever is still held is written now.
    let rest = held.take(due.into_iter().map(|(_, id)| id));
    if !rest.is_empty() {
        write_with_retry(&store, &rest, &health, &cancel).await;
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
    store: &Store,
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
        match store.record_dispatches(batch).await {
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
