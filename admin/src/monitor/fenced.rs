//! Runs a dead admin claimed but never sent, taken over before its lease lapses.
//!
//! The liveness watch (`schedule::liveness`) reports an admin whose liveness lock was released:
//! it died, or lost its database session. Either way its lease may hold for seconds yet, and a
//! live one may still send what it claimed. So its claimed, unsent runs are not simply taken:
//!
//! ```text
//! dead admin reported ─▶ store.claimed_unsent_of (its RUNNING rows with no address)
//!   ─▶ fencing probe of every candidate executor (ReadLog with fence_node: "never saw it, and
//!      from now on refused from that admin")
//!   ─▶ all fenced ─▶ stranded::send(TakeOver::Fenced): store.adopt_fenced, then sent
//!   ─▶ any may hold it, or could not be asked ─▶ left for the lease path (lost-run monitor)
//! ```
//! A late send by the reported admin is refused by every executor asked (it records nothing,
//! `Dispatched::TakenOver`), so the run starts once.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use super::lost::{StrandedProbes, probe_fencing, split_never_sent};
use super::stranded::{TakeOver, send};
use crate::context::AdminContext;
use crate::error::Error;
use crate::model::{NodeIdentity, RunLog};

/// Runs a fencing probe asks about, then takes over, at a time: the first of a dead admin's
/// runs leave after one batch's probes rather than after all of them.
const FENCED_BATCH: i64 = 200;

/// How often the runs of one dead admin are tried again while it is reported dead (runs an
/// executor could not be asked about, or held by an executor that was slow to answer).
const FENCED_RETRY: Duration = Duration::from_secs(1);

/// Takes over the runs `dead` claimed and never sent: an admin whose liveness lock was
/// released (`schedule::liveness`), so it died, or lost its database session and must not be
/// trusted to still send them. Its lease may hold for seconds yet; rather than wait for it,
/// every executor that could have received each run is asked with a fencing probe
/// (`ExecutorClient::read_log_fencing`). A run that all of them never received, and now refuse
/// from `dead`, is taken over and sent (oldest first, a batch at a time). A run any of them
/// may hold, or that one could not be asked about, stays `dead`'s: the lost-run monitor judges
/// it once the lease lapsed, as before.
pub async fn take_over_from_dead(ctx: &AdminContext, dead: &NodeIdentity) -> Result<(), Error> {
    // Reported a moment ago; a node whose lock is held again (it took it back after losing its
    // connection, or a new process of it started) sends its runs itself.
    let node_ids = [dead.node_id.clone()];
    if ctx.store.node_locks_held(&node_ids).await?.contains(&true) {
        return Ok(());
    }
    let mut skip = HashSet::new();
    loop {
        let runs: Vec<RunLog> = ctx
            .store
            .claimed_unsent_of(dead, FENCED_BATCH + skip.len() as i64)
            .await?
            .into_iter()
            .filter(|run| !skip.contains(&run.id))
            .collect();
        if runs.is_empty() {
            return Ok(());
        }
        let probes = probe_fencing(ctx, &runs, dead).await?;
        let sessions = ctx.registry.list("");
        let fenced_only = StrandedProbes {
            never_sent: probes.fenced,
            ..Default::default()
        };
        let (fenced, left) = split_never_sent(runs, &sessions, &fenced_only);
        skip.extend(left.iter().map(|run| run.id));
        if fenced.is_empty() {
            // Every run left may be held somewhere: the lease path judges those.
            return Ok(());
        }
        tracing::info!(dead = %dead.node_id, epoch = dead.epoch, runs = fenced.len(),
            "fenced the runs an admin whose liveness lock was released claimed; taking them over");
        send(ctx, fenced, TakeOver::Fenced { owner: dead }).await?;
    }
}

/// Takes over the claimed runs of the admins the liveness watch reports dead, as reported
/// (`take_over_from_dead`). A dead admin is reported on every watch while its lock stays free,
/// so each is tried at most once per `FENCED_RETRY`.
pub async fn run_fenced_takeovers(
    ctx: Arc<AdminContext>,
    mut dead_rx: UnboundedReceiver<NodeIdentity>,
    cancel: CancellationToken,
) {
    let mut tried: Vec<(NodeIdentity, Instant)> = Vec::new();
    loop {
        let dead = tokio::select! {
            _ = cancel.cancelled() => return,
            dead = dead_rx.recv() => match dead {
                Some(dead) => dead,
                None => return,
            },
        };
        tried.retain(|(_, at)| at.elapsed() < FENCED_RETRY);
        if tried.iter().any(|(node, _)| *node == dead) {
            continue;
        }
        tried.push((dead.clone(), Instant::now()));
        if let Err(error) = take_over_from_dead(&ctx, &dead).await {
            tracing::warn!(%error, dead = %dead.node_id,
                "taking over the claimed runs of a dead admin failed; its lease will free them");
        }
    }
}
