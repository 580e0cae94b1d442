//! Exponential backoff with jitter, shared by reconnects and callback retries:
//! 100 ms doubling up to 5 s, each delay spread ±20 % so many executors do not retry in step.

use std::time::Duration;

const INITIAL_DELAY: Duration = Duration::from_millis(100);
const MAX_DELAY: Duration = Duration::from_secs(5);

/// The delays between attempts; `reset` after a success.
#[derive(Debug)]
pub(crate) struct Backoff {
    current: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            current: INITIAL_DELAY,
        }
    }
}

impl Backoff {
    /// Returns the next delay (jittered) and doubles the base up to the cap.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let base = self.current;
        self.current = (self.current * 2).min(MAX_DELAY);
        let jitter = 0.8 + fastrand::f64() * 0.4;
        base.mul_f64(jitter).min(MAX_DELAY)
    }

    /// Starts again from the initial delay.
    pub(crate) fn reset(&mut self) {
        self.current = INITIAL_DELAY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_and_reset() {
        let mut backoff = Backoff::default();
        let first = backoff.next_delay();
        assert!(first >= Duration::from_millis(80) && first <= Duration::from_millis(120));
        let second = backoff.next_delay();
        assert!(second >= Duration::from_millis(160) && second <= Duration::from_millis(240));
        for _ in 0..20 {
            assert!(backoff.next_delay() <= MAX_DELAY);
        }
        assert!(backoff.next_delay() >= MAX_DELAY.mul_f64(0.8));
        backoff.reset();
        assert!(backoff.next_delay() <= Duration::from_millis(120));
    }
}
