//! The 60-slot time ring: fires planned by the scan wait here for their second.
//!
//! A plain data structure, guarded by one mutex in `schedule/mod.rs`, so a push and a drain
//! never race (XXL-JOB's ring could lose a fire added to a bucket being removed). Entries keep
//! their exact `scheduled_at_ms`. A drain takes every slot from the one after the last drained
//! second up to now (at least the current and 2 previous, XXL-JOB's catch-up), and
//! de-duplicates by log id. A push for a second already drained is handed back for immediate
//! dispatch instead of waiting a whole turn of the ring.

use crate::model::Fire;

/// What the ring holds: something due at an instant, with an id to de-duplicate by.
pub trait Timed {
    fn due_at_ms(&self) -> i64;
    fn id(&self) -> i64;
}

impl Timed for Fire {
    fn due_at_ms(&self) -> i64 {
        self.scheduled_at_ms
    }

    fn id(&self) -> i64 {
        self.log_id.0
    }
}

const SLOTS: i64 = 60;
/// Seconds looked back when nothing was drained yet (XXL-JOB's 2-tick catch-up).
const CATCH_UP: i64 = 2;

/// The ring of 60 one-second slots (of fires; tests use plain entries).
#[derive(Debug)]
pub struct Ring<T = Fire> {
    slots: Vec<Vec<T>>,
    last_drained_second: Option<i64>,
    len: usize,
}

impl<T> Default for Ring<T> {
    fn default() -> Ring<T> {
        Ring {
            slots: std::iter::repeat_with(Vec::new)
                .take(SLOTS as usize)
                .collect(),
            last_drained_second: None,
            len: 0,
        }
    }
}

fn slot_of(second: i64) -> usize {
    second.rem_euclid(SLOTS) as usize
}

impl<T: Timed> Ring<T> {
    /// Adds a fire; returns it back when its second was already drained (dispatch it now).
    pub fn push(&mut self, entry: T) -> Option<T> {
        let second = entry.due_at_ms().div_euclid(1000);
        if self
            .last_drained_second
            .is_some_and(|drained| second <= drained)
        {
            return Some(entry);
        }
        self.slots[slot_of(second)].push(entry);
        self.len += 1;
        None
    }

    /// Removes and returns the fires due at or before `now_ms`, oldest second first.
    pub fn drain_due(&mut self, now_ms: i64) -> Vec<T> {
        let now_second = now_ms.div_euclid(1000);
        let first = match self.last_drained_second {
            Some(drained) => (drained + 1).max(now_second - SLOTS + 1),
            None => now_second - CATCH_UP,
        };
        let mut due = Vec::new();
        for second in first..=now_second {
            let slot = &mut self.slots[slot_of(second)];
            // A slot can hold a later turn's fire only if a push came > 60 s early; keep it.
            let (ready, later): (Vec<_>, Vec<_>) = slot
                .drain(..)
                .partition(|entry| entry.due_at_ms().div_euclid(1000) <= now_second);
            *slot = later;
            due.extend(ready);
        }
        self.len -= due.len();
        if self
            .last_drained_second
            .is_none_or(|drained| now_second > drained)
        {
            self.last_drained_second = Some(now_second);
        }
        let before = due.len();
        let mut seen = std::collections::HashSet::with_capacity(due.len());
        due.retain(|entry| seen.insert(entry.id()));
        if due.len() < before {
            tracing::warn!(duplicates = before - due.len(), "ring found repeated fires");
        }
        due.sort_by_key(|entry| entry.due_at_ms());
        due
    }

    /// How many fires wait for the second starting at `second_ms` (the ring's lead for that
    /// second depends on it: `trigger::claim_pace`).
    pub fn count_in_second(&self, second_ms: i64) -> usize {
        let second = second_ms.div_euclid(1000);
        self.slots[slot_of(second)]
            .iter()
            .filter(|entry| entry.due_at_ms().div_euclid(1000) == second)
            .count()
    }

    /// Number of fires waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000_000;

    #[derive(Debug, Clone, PartialEq)]
    struct Entry {
        log_id: i64,
        at: i64,
    }

    impl Timed for Entry {
        fn due_at_ms(&self) -> i64 {
            self.at
        }

        fn id(&self) -> i64 {
            self.log_id
        }
    }

    fn entry(log_id: i64, at: i64) -> Entry {
        Entry { log_id, at }
    }

    #[test]
    fn entries_come_out_in_their_second_only() {
        let mut ring = Ring::<Entry>::default();
        assert_eq!(ring.push(entry(1, T0 + 1000)), None);
        assert_eq!(ring.push(entry(2, T0 + 2000)), None);
        assert!(ring.drain_due(T0 + 500).is_empty());
        assert_eq!(ring.drain_due(T0 + 1001), vec![entry(1, T0 + 1000)]);
        assert_eq!(ring.len(), 1);
        assert_eq!(ring.drain_due(T0 + 2003), vec![entry(2, T0 + 2000)]);
        assert!(ring.is_empty());
    }

    #[test]
    fn a_late_tick_catches_up_on_skipped_seconds() {
        let mut ring = Ring::<Entry>::default();
        ring.drain_due(T0);
        for (id, offset) in [(1, 1000), (2, 2000), (3, 3000), (4, 4000)] {
            ring.push(entry(id, T0 + offset));
        }
        // The ring task stalled for 3 s: everything up to now comes out, in order.
        let ids: Vec<i64> = ring.drain_due(T0 + 3500).iter().map(|e| e.log_id).collect();
        assert_eq!(ids, vec![1, 2, 3]);
    }

    #[test]
    fn first_drain_looks_two_seconds_back() {
        let mut ring = Ring::<Entry>::default();
        ring.push(entry(1, T0 - 2000));
        ring.push(entry(2, T0 - 3000));
        let ids: Vec<i64> = ring.drain_due(T0).iter().map(|e| e.log_id).collect();
        assert_eq!(ids, vec![1]);
    }

    #[test]
    fn a_second_is_counted_without_the_fires_of_a_later_turn() {
        let mut ring = Ring::default();
        ring.push(entry(1, T0));
        ring.push(entry(2, T0 + 999));
        ring.push(entry(3, T0 + 1_000));
        // Same slot, one turn later (pushed more than a minute early).
        ring.push(entry(4, T0 + 60_000));
        assert_eq!(ring.count_in_second(T0), 2);
        assert_eq!(ring.count_in_second(T0 + 1_000), 1);
        assert_eq!(ring.count_in_second(T0 + 2_000), 0);
        assert_eq!(ring.count_in_second(T0 + 60_000), 1);
    }

    #[test]
    fn duplicates_are_dropped() {
        let mut ring = Ring::<Entry>::default();
        ring.push(entry(9, T0 + 1000));
        ring.push(entry(9, T0 + 1000));
        assert_eq!(ring.drain_due(T0 + 1000).len(), 1);
    }

    #[test]
    fn a_push_for_a_drained_second_is_returned_for_immediate_dispatch() {
        let mut ring = Ring::<Entry>::default();
        ring.drain_due(T0 + 5000);
        assert_eq!(ring.push(entry(1, T0 + 5000)), Some(entry(1, T0 + 5000)));
        assert_eq!(ring.push(entry(2, T0 + 6000)), None);
    }

    #[test]
    fn an_entry_a_full_turn_ahead_waits_for_its_own_turn() {
        let mut ring = Ring::<Entry>::default();
        ring.drain_due(T0);
        ring.push(entry(1, T0 + 61_000));
        assert!(ring.drain_due(T0 + 1000).is_empty());
        assert_eq!(ring.drain_due(T0 + 61_000).len(), 1);
    }
}
