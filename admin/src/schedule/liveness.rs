//! Takeover within a fraction of a second: each admin holds its node's liveness lock
//! (`store::liveness`) for its whole life and watches the other nodes' locks several times a
//! second; a node whose lock it saw held and now finds free has died (its database session or
//! its lock file closed with its process), so its PENDING fires are adopted at once instead of
//! after its lease lapses.
//!
//! What this does not change, and why it stays safe:
//! - The adoption is the fenced one of the recovery sweep (`Store::adopt_pending_of`): a
//!   PENDING fire is claimed only by its current `(node, epoch)`, so even a node judged dead by
//!   mistake (alive, but its lock connection dropped: a database restart, a network cut) only
//!   loses the right to dispatch those fires; none is lost and none runs twice.
//! - Runs a dead admin claimed but had not sent yet are taken over without waiting for its
//!   lease only through the executors' fence (`monitor::fenced`): a lost
//!   lock connection does not stop a live owner from sending, so each executor that could have
//!   received such a run first refuses it from that owner; the rest wait for the lease. Its
//!   follow-up claims still wait for its lease.
//! - A stalled admin (`SIGSTOP`, a frozen VM) keeps its session and so its lock: the lease
//!   remains the guard against it, as before.
//! - A node whose lock was never seen held in its current epoch (an older admin that takes no
//!   lock, or one that could not take it) is judged by its lease alone.
//!
//! This admin's own lock: confirmed by a round trip every period; if its connection is gone
//! the lock is gone with it, so it is dropped and taken again (at most once a second) on a new
//! connection. Meanwhile others may adopt this node's PENDING fires, which is safe as said
//! above; its lease and everything else carry on unchanged.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::{Scheduler, recover_runs};
use crate::model::NodeIdentity;
use crate::store::Store;
use crate::store::liveness::NodeLock;

/// How often the other nodes' locks are checked (and this node's confirmed): a dead admin's
/// fires are adopted within about this much after its death, which costs two small queries
/// per period.
pub const WATCH_PERIOD: Duration = Duration::from_millis(150);
/// A round trip on the lock connection slower than this counts as a lost connection.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(1);
/// How often a lost own lock is taken again.
const REACQUIRE_EVERY: Duration = Duration::from_secs(1);
/// How long this node's own lock must have been held before it reports dead peers for their
/// claimed runs to be fenced: longer than a live peer needs to take its lock again after a
/// database restart (`REACQUIRE_EVERY` and a watch period).
const OWN_LOCK_STEADY: Duration = Duration::from_secs(2);
/// How long a start waits for its lock (another admin may be checking it at that instant, or
/// the previous process of this node id is still exiting).
const ACQUIRE_AT_START: Duration = Duration::from_secs(2);

/// Takes this node's lock at start, before its epoch is registered, so the lock covers the
/// whole epoch. Without it (a process with the same node id still runs, the database refused)
/// the admin runs anyway, judged by its lease alone, and the watch keeps trying.
pub async fn acquire_at_start(store: &Store, node_id: &str) -> Option<NodeLock> {
    let deadline = Instant::now() + ACQUIRE_AT_START;
    loop {
        match store.acquire_node_lock(node_id).await {
            Ok(Some(lock)) => return Some(lock),
            Ok(None) if Instant::now() < deadline => {}
            Ok(None) => {
                tracing::warn!(
                    node = node_id,
                    "the node's liveness lock is held by another \
                    process (is an admin with the same node id running?); other admins will \
                    judge this one by its lease"
                );
                return None;
            }
            Err(error) => {
                tracing::warn!(%error, "taking the node's liveness lock failed; retrying later");
                return None;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The watch loop: keeps this node's lock, adopts the PENDING fires of nodes found dead and
/// reports each such node on `dead_tx` (on every watch while its lock stays free, once this
/// node's own lock has held for `OWN_LOCK_STEADY`), for its claimed runs to be taken over
/// through the executors' fence (`monitor::fenced`).
pub async fn run_liveness(
    scheduler: Arc<Scheduler>,
    mut own: Option<NodeLock>,
    dead_tx: UnboundedSender<NodeIdentity>,
    cancel: CancellationToken,
) {
    let mut seen = SeenHeld::default();
    let mut next_acquire = Instant::now();
    let mut own_held_since = own.as_ref().map(|_| Instant::now());
    loop {
        own = keep_own_lock(&scheduler, own, &mut next_acquire).await;
        own_held_since = match (&own, own_held_since) {
            (None, _) => None,
            (Some(_), since) => Some(since.unwrap_or_else(Instant::now)),
        };
        // After a database restart every admin's lock is gone, the live ones' for a moment
        // only: an admin that lost its own lock lately reports nobody, so that a peer still
        // taking its lock again is not fenced. A dead one stays free.
        let report = reports_dead_peers(own_held_since, Instant::now()).then_some(&dead_tx);
        if let Err(error) = watch_peers(&scheduler, &mut seen, report).await {
            tracing::debug!(%error, "checking the other admins' liveness locks failed");
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(WATCH_PERIOD) => {}
        }
    }
}

/// Confirms the held lock, or takes it again once it was lost (rate-limited).
async fn keep_own_lock(
    scheduler: &Scheduler,
    own: Option<NodeLock>,
    next_acquire: &mut Instant,
) -> Option<NodeLock> {
    if let Some(mut lock) = own {
        match tokio::time::timeout(CONFIRM_TIMEOUT, lock.confirm()).await {
            Ok(Ok(())) => return Some(lock),
            Ok(Err(error)) => {
                tracing::warn!(%error, "the node's liveness lock connection is gone; other \
                    admins may take over this node's planned fires until it is taken again");
            }
            Err(_) => tracing::warn!("the node's liveness lock connection stopped answering"),
        }
        // Dropping it closes the connection (and with it any lock the server still holds).
        drop(lock);
    }
    if Instant::now() < *next_acquire {
        return None;
    }
    *next_acquire = Instant::now() + REACQUIRE_EVERY;
    match scheduler
        .store
        .acquire_node_lock(&scheduler.node.node_id)
        .await
    {
        Ok(Some(lock)) => {
            tracing::info!("the node's liveness lock is held again");
            Some(lock)
        }
        Ok(None) => None,
        Err(error) => {
            tracing::debug!(%error, "taking the node's liveness lock failed");
            None
        }
    }
}

/// Whether dead peers are reported for their claimed runs to be fenced: only once this node's
/// own lock, held since `own_held_since` (`None`: not held now), has held for
/// `OWN_LOCK_STEADY`.
fn reports_dead_peers(own_held_since: Option<Instant>, now: Instant) -> bool {
    own_held_since.is_some_and(|since| now.saturating_duration_since(since) >= OWN_LOCK_STEADY)
}

/// Per node, the epoch in which its lock was seen held: only for that epoch does a free lock
/// say the node died.
#[derive(Debug, Default)]
struct SeenHeld(HashMap<String, i64>);

impl SeenHeld {
    /// Records what one check found for a live-leased node at `epoch`; true when the node is
    /// dead (its lock, seen held in this epoch, is free now).
    fn observe(&mut self, node: &str, epoch: i64, held: bool) -> bool {
        if held {
            self.0.insert(node.to_string(), epoch);
            return false;
        }
        self.0.get(node) == Some(&epoch)
    }

    /// Forgets nodes no longer listed (their lease lapsed: the recovery sweep has them).
    fn keep_only(&mut self, listed: &[(String, i64)]) {
        self.0
            .retain(|node, _| listed.iter().any(|(listed, _)| listed == node));
    }
}

/// One check of every other live-leased node's lock; adopts the PENDING fires of those found
/// dead and hands them to the recovery path (ring, misfire rules) like the lease sweep does.
async fn watch_peers(
    scheduler: &Arc<Scheduler>,
    seen: &mut SeenHeld,
    report: Option<&UnboundedSender<NodeIdentity>>,
) -> crate::store::StoreResult<()> {
    let store = &scheduler.store;
    let node = &scheduler.node;
    let peers = store
        .live_peers(&node.node_id, store.database_now_ms().await?)
        .await?;
    seen.keep_only(&peers);
    if peers.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = peers.iter().map(|(name, _)| name.clone()).collect();
    let held = store.node_locks_held(&names).await?;
    for ((peer, epoch), held) in peers.iter().zip(held) {
        if !seen.observe(peer, *epoch, held) {
            continue;
        }
        let dead = NodeIdentity::new(peer, *epoch);
        // Its partitions first: the survivors' next rounds plan its jobs' next fires, and the
        // scan is woken for it rather than waiting out its idle pause.
        if store.free_partitions_of(&dead).await? > 0 {
            tracing::info!(dead = %peer, epoch, "freed the partitions of a dead admin");
            scheduler.wake.notify_one();
        }
        let runs = store.adopt_pending_of(&dead, node).await?;
        if !runs.is_empty() {
            tracing::info!(dead = %peer, epoch, fires = runs.len(),
                "took over the planned fires of an admin whose liveness lock was released");
            recover_runs(scheduler, runs).await;
        }
        // The runs it claimed and did not send: taken over elsewhere (a closed channel means
        // the admin is stopping).
        if let Some(report) = report {
            let _ = report.send(dead);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_peers_are_reported_only_once_the_own_lock_held_longer_than_a_peer_takes_to_retake_its_own()
     {
        assert!(OWN_LOCK_STEADY > REACQUIRE_EVERY + WATCH_PERIOD);
        let now = Instant::now();
        assert!(!reports_dead_peers(None, now), "own lock lost");
        assert!(!reports_dead_peers(Some(now), now), "just taken again");
        assert!(!reports_dead_peers(
            Some(now - OWN_LOCK_STEADY + Duration::from_millis(1)),
            now
        ));
        assert!(reports_dead_peers(Some(now - OWN_LOCK_STEADY), now));
    }

    #[test]
    fn a_free_lock_means_death_only_after_it_was_seen_held_in_the_same_epoch() {
        let mut seen = SeenHeld::default();
        assert!(
            !seen.observe("a", 1, false),
            "never seen held: the lease decides"
        );
        assert!(!seen.observe("a", 1, true));
        assert!(seen.observe("a", 1, false), "held, then free: dead");
        assert!(
            !seen.observe("a", 2, false),
            "a new epoch not seen held yet"
        );
        assert!(!seen.observe("a", 2, true));
        seen.keep_only(&[("b".to_string(), 1)]);
        assert!(
            !seen.observe("a", 2, false),
            "forgotten once its lease lapsed"
        );
    }
}
