//! Admission control: how many runs this admin holds claimed and not yet recorded as sent.
//!
//! A claimed run costs memory (its dispatch task, its record) and work still to do (routing,
//! the `Run` call, the outcome's write). If fires were claimed faster than they are sent and
//! recorded, that backlog would grow without end, and every later fire would wait behind it
//! (issue 11: millions of claimed runs never sent, a full core, gigabytes of memory). So the
//! scheduled fires of a round are admitted only while fewer than `max_unsent_runs` runs are
//! outstanding; the rest are recorded SKIPPED at once with the reason, like a misfire, and the
//! job fires again at its next time.
//!
//! ```text
//! Written fires ─▶ Admission::admit(n) ─▶ k slots ─▶ claim the k earliest ─▶ send ─▶ record
//!                                     └─▶ n - k: SKIPPED "overloaded: …"       (slot freed
//!                                                                                after the write)
//! ```
//! Retries, child runs and runs taken over from a dead admin are counted but never refused
//! (`force`): they are few and were promised already. A manual `TriggerJob` waits for its own
//! outcome and is not counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The count of outstanding runs and its bound.
#[derive(Debug)]
pub struct Admission {
    outstanding: Arc<AtomicUsize>,
    max: usize,
}

/// One admitted run; frees its place when dropped (after its outcome was written).
#[derive(Debug)]
pub struct Slot {
    outstanding: Arc<AtomicUsize>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.outstanding.fetch_sub(1, Ordering::AcqRel);
        crate::metrics::unsent_runs().dec();
    }
}

impl Admission {
    pub fn new(max: usize) -> Admission {
        crate::metrics::set_max_unsent_runs(max);
        Admission {
            outstanding: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// Up to `wanted` slots, as many as the bound leaves free now.
    pub fn admit(&self, wanted: usize) -> Vec<Slot> {
        let mut current = self.outstanding.load(Ordering::Acquire);
        loop {
            let granted = wanted.min(self.max.saturating_sub(current));
            if granted == 0 {
                return Vec::new();
            }
            match self.outstanding.compare_exchange_weak(
                current,
                current + granted,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return self.slots(granted),
                Err(actual) => current = actual,
            }
        }
    }

    /// `count` slots whatever the bound (runs that must go anyway are still counted).
    pub fn force(&self, count: usize) -> Vec<Slot> {
        self.outstanding.fetch_add(count, Ordering::AcqRel);
        self.slots(count)
    }

    /// Runs claimed (or about to be) whose outcome is not written yet.
    pub fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::Acquire)
    }

    pub fn max(&self) -> usize {
        self.max
    }

    fn slots(&self, count: usize) -> Vec<Slot> {
        crate::metrics::unsent_runs().inc_by(i64::try_from(count).unwrap_or(i64::MAX));
        (0..count)
            .map(|_| Slot {
                outstanding: Arc::clone(&self.outstanding),
            })
            .collect()
    }
}

/// The trigger message of a fire skipped because too many runs were outstanding.
pub fn overloaded_reason(max: usize) -> String {
    format!(
        "overloaded: this admin already holds {max} claimed runs not yet sent and recorded \
         (max_unsent_runs); the fire is skipped like a misfire and the job fires again at its \
         next time"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_up_to_the_bound_and_frees_places_as_slots_drop() {
        let admission = Admission::new(5);
        let first = admission.admit(3);
        assert_eq!(first.len(), 3);
        let second = admission.admit(4);
        assert_eq!(second.len(), 2, "only 2 places left");
        assert!(admission.admit(1).is_empty());
        assert_eq!(admission.outstanding(), 5);
        drop(first);
        assert_eq!(admission.outstanding(), 2);
        let forced = admission.force(10);
        assert_eq!(admission.outstanding(), 12);
        assert!(admission.admit(1).is_empty(), "forced runs count too");
        drop(forced);
        drop(second);
        assert_eq!(admission.outstanding(), 0);
        assert_eq!(admission.admit(9).len(), 5);
    }
}
