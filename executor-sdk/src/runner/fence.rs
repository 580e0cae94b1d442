//! Fences: log ids this executor refuses from one admin node, set by another admin that takes
//! over runs that node claimed and may still send.
//!
//! An admin whose liveness lock was released (it died, or lost its database session) may have
//! claimed runs and not sent them yet. A survivor asks every executor that could have received
//! such a run (`ReadLog` with `fence_node`): an executor that never saw it answers so and, in
//! the same step, refuses it from then on when it comes from that node at that epoch or an
//! earlier one. Once every executor said so, the survivor sends the run itself, with no wait
//! for the other node's lease: a late send by that node is refused here, so the run starts once.
//!
//! Fences live in memory for as long as a finished run is remembered as a duplicate: a send
//! that late would be judged by the admin's lost-run rules anyway.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;
use xjob_proto::pb;

const FENCE_TTL: Duration = Duration::from_secs(10 * 60);
/// Most fences kept; the oldest go first.
const FENCE_CAP: usize = 100_000;

/// Whom a fenced log id is refused from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fenced {
    node: String,
    /// That node's epochs up to this one are refused (a restarted admin of the same node, at a
    /// later epoch, takes its runs over legitimately).
    epoch: i64,
}

/// The fences set by admins, by log id.
#[derive(Default)]
pub(super) struct Fences {
    /// Usually one sender; more when a run changed hands again (each fenced node stays so).
    by_log_id: HashMap<i64, Vec<Fenced>>,
    order: VecDeque<(Instant, i64)>,
}

impl Fences {
    /// Refuses `log_id` from `node` at `epoch` or earlier from now on.
    pub(super) fn insert(&mut self, log_id: i64, node: &str, epoch: i64, now: Instant) {
        self.prune(now);
        let fenced = Fenced {
            node: node.to_string(),
            epoch,
        };
        match self.by_log_id.entry(log_id) {
            Entry::Occupied(mut senders) => {
                if !senders.get().contains(&fenced) {
                    senders.get_mut().push(fenced);
                }
            }
            Entry::Vacant(vacant) => {
                vacant.insert(vec![fenced]);
                self.order.push_back((now, log_id));
            }
        }
        while self.order.len() > FENCE_CAP {
            if let Some((_, oldest)) = self.order.pop_front() {
                self.by_log_id.remove(&oldest);
            }
        }
    }

    /// Whether `request` comes from a sender fenced for its log id. A run that names no sender
    /// (an admin that predates fences) is refused too: it cannot show it is not the fenced one.
    pub(super) fn refuses(&self, request: &pb::RunRequest) -> bool {
        let Some(senders) = self.by_log_id.get(&request.log_id) else {
            return false;
        };
        request.sender_node.is_empty()
            || senders.iter().any(|fenced| {
                request.sender_node == fenced.node && request.sender_epoch <= fenced.epoch
            })
    }

    fn prune(&mut self, now: Instant) {
        while let Some(&(set_at, log_id)) = self.order.front() {
            if now.duration_since(set_at) < FENCE_TTL {
                break;
            }
            self.order.pop_front();
            self.by_log_id.remove(&log_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(log_id: i64, sender_node: &str, sender_epoch: i64) -> pb::RunRequest {
        pb::RunRequest {
            log_id,
            sender_node: sender_node.to_string(),
            sender_epoch,
            ..Default::default()
        }
    }

    #[test]
    fn a_fenced_run_is_refused_from_the_fenced_node_up_to_its_epoch_only() {
        let mut fences = Fences::default();
        fences.insert(7, "admin-a", 3, Instant::now());
        assert!(fences.refuses(&run(7, "admin-a", 3)));
        assert!(fences.refuses(&run(7, "admin-a", 2)), "an older epoch");
        assert!(fences.refuses(&run(7, "", 0)), "no sender named");
        assert!(!fences.refuses(&run(7, "admin-a", 4)), "the node restarted");
        assert!(
            !fences.refuses(&run(7, "admin-b", 1)),
            "the admin taking over"
        );
        assert!(!fences.refuses(&run(8, "admin-a", 3)), "another run");
        fences.insert(7, "admin-b", 1, Instant::now());
        assert!(fences.refuses(&run(7, "admin-b", 1)), "taken over again");
        assert!(
            fences.refuses(&run(7, "admin-a", 3)),
            "the first fence stays"
        );
    }

    #[test]
    fn fences_expire_and_are_capped() {
        let start = Instant::now();
        let mut fences = Fences::default();
        fences.insert(1, "a", 1, start);
        fences.insert(2, "a", 1, start + FENCE_TTL);
        assert!(!fences.refuses(&run(1, "a", 1)), "expired");
        assert!(fences.refuses(&run(2, "a", 1)));
        for log_id in 0..(FENCE_CAP as i64 + 5) {
            fences.insert(100 + log_id, "a", 1, start + FENCE_TTL);
        }
        assert_eq!(fences.by_log_id.len(), FENCE_CAP);
        assert!(!fences.refuses(&run(2, "a", 1)), "the oldest went first");
    }
}
