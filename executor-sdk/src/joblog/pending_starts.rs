//! Runs queued to start now and not started yet, which the log writer gives way to.
//!
//! At the start of a second, thousands of held runs are released at once and the job tasks
//! start them one after another. The log writer, busy with the previous runs' end lines, then
//! takes a core's worth of CPU from those starts (about a third of the executor's CPU in the
//! burst, measured): every start waits longer. So the runner takes a [`StartTicket`] for each
//! run it queues on an idle job (one that starts it at once) and drops it when the run starts
//! (or is dropped unstarted); the writer, woken by a log, waits while any ticket is out, then
//! writes all that is queued by then (`writer`). Results are reported
//! after their lines are written, so they wait too: a few tens of milliseconds, once a second.
//!
//! The wait is bounded: a run that does not start soon (an overloaded runtime) holds the writer
//! at most [`MAX_HOLD_BACK`]. After a wait that ran out, the writer does not wait again until
//! the count has fallen to zero once, so tickets that stay out cannot slow every write.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Longest the writer waits for pending starts at a time.
pub(crate) const MAX_HOLD_BACK: Duration = Duration::from_millis(100);

#[derive(Debug, Default)]
pub(crate) struct PendingStarts {
    count: AtomicUsize,
    /// How many times the count fell to zero; the lock the writer waits under.
    zeros: Mutex<u64>,
    fell_to_zero: Condvar,
    /// Counted (under `zeros`) as a writer is about to wait: a test acts once it waits.
    #[cfg(test)]
    waits: AtomicUsize,
}

/// One run queued to start now; dropped when it starts or is dropped unstarted.
#[derive(Debug)]
pub(crate) struct StartTicket(Arc<PendingStarts>);

impl Drop for StartTicket {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Under the lock: a writer that saw the count above zero under it is waiting by
            // now, and hears this.
            *self.0.lock_zeros() += 1;
            self.0.fell_to_zero.notify_all();
        }
    }
}

/// What the writer remembers between waits: the wait that ran out, by the zero count then.
#[derive(Debug, Default)]
pub(crate) struct HoldBack {
    gave_up_at: Option<u64>,
}

impl PendingStarts {
    pub(crate) fn ticket(self: &Arc<Self>) -> StartTicket {
        self.count.fetch_add(1, Ordering::AcqRel);
        StartTicket(Arc::clone(self))
    }

    /// Waits until no ticket is out, at most `bound`; returns whether it waited at all. Does
    /// not wait while the tickets of a wait that ran out (in `hold_back`) are still out.
    pub(crate) fn wait_for_starts(&self, bound: Duration, hold_back: &mut HoldBack) -> bool {
        if self.count.load(Ordering::Acquire) == 0 {
            return false;
        }
        let mut zeros = self.lock_zeros();
        if hold_back.gave_up_at == Some(*zeros) {
            return false;
        }
        let deadline = Instant::now() + bound;
        #[cfg(test)]
        self.waits.fetch_add(1, Ordering::AcqRel);
        while self.count.load(Ordering::Acquire) > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                hold_back.gave_up_at = Some(*zeros);
                break;
            }
            zeros = self
                .fell_to_zero
                .wait_timeout(zeros, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }

    /// How many waits began (a test hook).
    #[cfg(test)]
    pub(crate) fn waits(&self) -> usize {
        self.waits.load(Ordering::Acquire)
    }

    fn lock_zeros(&self) -> MutexGuard<'_, u64> {
        self.zeros.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(30);

    /// Drops `tickets` on another thread once a writer waits under the lock (it releases the
    /// lock only inside the wait, so the drop's wake-up cannot come before it).
    fn drop_once_waiting(
        starts: &Arc<PendingStarts>,
        tickets: Vec<StartTicket>,
    ) -> std::thread::JoinHandle<()> {
        let starts = Arc::clone(starts);
        std::thread::spawn(move || {
            let deadline = Instant::now() + LONG;
            while starts.waits() == 0 && Instant::now() < deadline {
                std::thread::yield_now();
            }
            drop(tickets);
        })
    }

    #[test]
    fn without_tickets_out_the_writer_does_not_wait() {
        let starts = Arc::new(PendingStarts::default());
        drop(starts.ticket());
        assert!(!starts.wait_for_starts(LONG, &mut HoldBack::default()));
    }

    #[test]
    fn the_wait_ends_when_the_last_ticket_is_dropped() {
        let starts = Arc::new(PendingStarts::default());
        let dropper = drop_once_waiting(&starts, vec![starts.ticket(), starts.ticket()]);
        let started = Instant::now();
        assert!(
            starts.wait_for_starts(LONG, &mut HoldBack::default()),
            "it waited"
        );
        assert!(
            started.elapsed() < LONG,
            "woken by the last ticket, not the bound"
        );
        assert_eq!(starts.count.load(Ordering::Acquire), 0);
        dropper.join().expect("the dropper ends");
    }

    #[test]
    fn a_wait_that_ran_out_is_not_repeated_until_the_count_falls_to_zero() {
        let starts = Arc::new(PendingStarts::default());
        let stuck = starts.ticket();
        let mut hold_back = HoldBack::default();
        let bound = Duration::from_millis(20);
        let started = Instant::now();
        assert!(starts.wait_for_starts(bound, &mut hold_back), "waited");
        assert!(started.elapsed() >= bound, "waited out the bound");
        // More tickets while the stuck one is out: the writer goes on at once.
        let more = starts.ticket();
        assert!(!starts.wait_for_starts(LONG, &mut hold_back), "not again");
        drop((stuck, more));
        // A new burst after the count fell to zero is waited for again.
        let next = starts.ticket();
        let started = Instant::now();
        assert!(
            starts.wait_for_starts(bound, &mut hold_back),
            "waited again"
        );
        assert!(started.elapsed() >= bound);
        drop(next);
    }
}
