//! The per-job alarm rate limit: at most `max` alarms of one job within a sliding window, so a
//! job failing every second cannot flood a mailbox or a chat channel.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Sliding-window counters per job, in memory (per admin: each admin follows up its own runs).
pub struct RateLimit {
    max: u32,
    window_ms: i64,
    sent: Mutex<HashMap<i64, VecDeque<i64>>>,
}

impl RateLimit {
    /// `max` 0 = no limit.
    pub fn new(max: u32, window_ms: i64) -> RateLimit {
        RateLimit {
            max,
            window_ms,
            sent: Mutex::default(),
        }
    }

    /// Whether an alarm of `job_id` may go out at `now_ms`; counts it when it may.
    pub fn allow(&self, job_id: i64, now_ms: i64) -> bool {
        if self.max == 0 {
            return true;
        }
        let mut sent = self
            .sent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Forget jobs whose window emptied, so the map holds only recently alarming jobs.
        sent.retain(|_, times| {
            while times
                .front()
                .is_some_and(|&at| at <= now_ms - self.window_ms)
            {
                times.pop_front();
            }
            !times.is_empty()
        });
        let times = sent.entry(job_id).or_default();
        if times.len() >= self.max as usize {
            return false;
        }
        times.push_back(now_ms);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flapping_job_is_held_back_until_its_window_slides() {
        let limit = RateLimit::new(2, 60_000);
        assert!(limit.allow(1, 0));
        assert!(limit.allow(1, 10_000));
        assert!(!limit.allow(1, 20_000), "third alarm within the window");
        assert!(
            limit.allow(2, 20_000),
            "other jobs are counted on their own"
        );
        assert!(limit.allow(1, 60_001), "the first alarm left the window");
        assert!(!limit.allow(1, 60_002));
    }

    #[test]
    fn zero_means_no_limit() {
        let limit = RateLimit::new(0, 60_000);
        assert!((0..100).all(|at| limit.allow(1, at)));
    }
}
