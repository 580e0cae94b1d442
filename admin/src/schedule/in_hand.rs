//! The fires this admin holds: from the moment they reach the ring until their claim answered
//! (or, after a failed claim, until its retry ended).
//!
//! One fire can come to the same admin twice. After a database restart every admin's liveness
//! lock is gone at once, so each takes over the others' PENDING fires, and a fire this admin
//! already holds in its ring can come back to it from a peer that took it over a moment before
//! (the lease sweep does the same when leases lapsed while the database was away). Two copies
//! in one process break the claim's guarantee: when one copy's claim fails, its retry puts the
//! runs this node claimed but has not recorded as sent back to PENDING (for a claim that
//! committed although its answer was lost), and that also undoes the other copy's claim of a
//! run it is sending: the run is claimed and sent again. So a fire already held is not taken a
//! second time; the copy that holds it claims, sends or retries it.

use std::collections::HashSet;
use std::sync::Mutex;

use super::Timed;

/// The log ids of the fires held.
#[derive(Debug, Default)]
pub struct InHand(Mutex<HashSet<i64>>);

impl InHand {
    /// Takes the fires not held yet (each once) and holds them; drops the others.
    pub fn take<T: Timed>(&self, fires: Vec<T>) -> Vec<T> {
        let mut held = self.held();
        let before = fires.len();
        let taken: Vec<T> = fires
            .into_iter()
            .filter(|fire| held.insert(fire.id()))
            .collect();
        if taken.len() < before {
            tracing::debug!(
                dropped = before - taken.len(),
                "fires already held by this admin were handed to it again; the held copy sends them"
            );
        }
        taken
    }

    /// Lets go of fires whose claim answered (claimed, or left out by the fence) or whose
    /// retry ended.
    pub fn release(&self, log_ids: &[i64]) {
        let mut held = self.held();
        for id in log_ids {
            held.remove(id);
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashSet<i64>> {
        // A set of ids stays consistent whatever panicked while it was locked.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Entry(i64);

    impl Timed for Entry {
        fn due_at_ms(&self) -> i64 {
            0
        }

        fn id(&self) -> i64 {
            self.0
        }
    }

    #[test]
    fn a_fire_is_held_once_until_its_claim_answered() {
        let in_hand = InHand::default();
        assert_eq!(
            in_hand.take(vec![Entry(1), Entry(2), Entry(2)]),
            vec![Entry(1), Entry(2)],
            "each fire once"
        );
        assert_eq!(
            in_hand.take(vec![Entry(2), Entry(3)]),
            vec![Entry(3)],
            "fire 2 came back from a peer while its first copy is held: dropped"
        );
        in_hand.release(&[1, 2]);
        assert_eq!(
            in_hand.take(vec![Entry(1), Entry(3)]),
            vec![Entry(1)],
            "released, fire 1 may be taken again; fire 3 is still held"
        );
    }
}
