//! The admin's clock: the loops that decide by time (scan, ring, recovery, follow-up, lost-run
//! monitor, trigger) read it through [`Clock`], so a test can hold time still or move it.
//! Waiting still uses tokio's timer; only the decisions read this clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// A source of "now" in epoch milliseconds.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now_ms(&self) -> i64;
}

/// The shared handle every component holds.
pub type SharedClock = Arc<dyn Clock>;

/// Wall-clock time (the admin clock every stored time uses).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        super::now_ms()
    }
}

/// A clock that moves only when told to (tests).
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: AtomicI64,
}

impl ManualClock {
    pub fn at(now_ms: i64) -> ManualClock {
        ManualClock {
            now_ms: AtomicI64::new(now_ms),
        }
    }

    pub fn set(&self, now_ms: i64) {
        self.now_ms.store(now_ms, Ordering::SeqCst);
    }

    pub fn advance(&self, by_ms: i64) {
        self.now_ms.fetch_add(by_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}

/// The system clock as a shared handle.
pub fn system_clock() -> SharedClock {
    Arc::new(SystemClock)
}
