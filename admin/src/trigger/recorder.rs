//! Writes dispatch outcomes of scheduled fires in batches: one transaction per burst instead of
//! one per fire. A write that fails is retried, never dropped. A run's admission slot is freed
//! only once its outcome is written, so the bound on outstanding runs covers this queue too.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::admission::Slot;
use crate::health::{Health, Loop};
use crate::store::{DispatchRecord, Store};

/// One dispatch outcome to write, with the admission slot of its run.
#[derive(Debug)]
pub struct Outcome {
    pub record: DispatchRecord,
    pub slot: Option<Arc<Slot>>,
}

/// Most records written in one transaction.
const BATCH: usize = 1000;

/// Runs until the channel closes (every sender dropped) or `cancel` fires and the queue is empty.
pub async fn run_recorder(
    store: Store,
    mut records_rx: mpsc::UnboundedReceiver<Outcome>,
    health: Arc<Health>,
    cancel: CancellationToken,
) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut slots = Vec::with_capacity(BATCH);
    loop {
        let first = tokio::select! {
            record = records_rx.recv() => record,
            _ = cancel.cancelled() => records_rx.try_recv().ok(),
        };
        let Some(first) = first else { break };
        let mut next = Some(first);
        while let Some(outcome) = next.take() {
            batch.push(outcome.record);
            slots.extend(outcome.slot);
            if batch.len() < BATCH {
                next = records_rx.try_recv().ok();
            }
        }
        write_with_retry(&store, &batch, &health, &cancel).await;
        batch.clear();
        // Written: these runs are no longer outstanding.
        slots.clear();
    }
}

async fn write_with_retry(
    store: &Store,
    batch: &[DispatchRecord],
    health: &Health,
    cancel: &CancellationToken,
) {
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
