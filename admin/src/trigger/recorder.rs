//! Writes dispatch outcomes of scheduled fires in batches: one transaction per burst instead of
//! one per fire. A write that fails is retried, never dropped.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use crate::health::{Health, Loop};
use crate::store::{DispatchRecord, Store};

/// Most records written in one transaction.
const BATCH: usize = 1000;

/// Runs until the channel closes (every sender dropped) or `cancel` fires and the queue is empty.
pub async fn run_recorder(
    store: Store,
    mut records_rx: mpsc::UnboundedReceiver<DispatchRecord>,
    health: Arc<Health>,
    cancel: CancellationToken,
) {
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        let first = tokio::select! {
            record = records_rx.recv() => record,
            _ = cancel.cancelled() => records_rx.try_recv().ok(),
        };
        let Some(first) = first else { break };
        batch.push(first);
        while batch.len() < BATCH {
            match records_rx.try_recv() {
                Ok(record) => batch.push(record),
                Err(_) => break,
            }
        }
        write_with_retry(&store, &batch, &health, &cancel).await;
        batch.clear();
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
