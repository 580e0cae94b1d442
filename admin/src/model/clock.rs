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

/// Names a file holding a signed number of milliseconds that this admin adds to the system
/// clock, re-read every [`OFFSET_POLL`]: the fault campaign steps one admin's clock with it
/// (`xjob-bench --workload campaign`). A test hook: only the harness sets it; unset, the admin
/// runs on the plain system clock.
pub const OFFSET_FILE_VARIABLE: &str = "XJOB_TEST_CLOCK_OFFSET_FILE";
/// How often the offset file is re-read.
const OFFSET_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// The system clock moved by an offset another thread keeps up to date.
#[derive(Debug, Default)]
pub struct OffsetClock {
    offset_ms: Arc<AtomicI64>,
}

impl Clock for OffsetClock {
    fn now_ms(&self) -> i64 {
        super::now_ms() + self.offset_ms.load(Ordering::SeqCst)
    }
}

/// The admin's clock: the system clock, stepped by the offset file when
/// [`OFFSET_FILE_VARIABLE`] names one.
pub fn from_environment() -> SharedClock {
    let Some(path) = std::env::var_os(OFFSET_FILE_VARIABLE) else {
        return system_clock();
    };
    let path = std::path::PathBuf::from(path);
    let offset_ms = Arc::new(AtomicI64::new(read_offset(&path)));
    tracing::warn!(file = %path.display(), offset_ms = offset_ms.load(Ordering::SeqCst),
        "the clock follows a test offset file; never set {OFFSET_FILE_VARIABLE} in production");
    let followed = Arc::clone(&offset_ms);
    let follow = move || {
        loop {
            std::thread::sleep(OFFSET_POLL);
            let now = read_offset(&path);
            if followed.swap(now, Ordering::SeqCst) != now {
                tracing::warn!(offset_ms = now, "clock stepped by the test offset file");
            }
        }
    };
    if let Err(error) = std::thread::Builder::new()
        .name("clock-offset".into())
        .spawn(follow)
    {
        tracing::error!(%error, "cannot follow the clock offset file; the offset stays as read");
    }
    Arc::new(OffsetClock { offset_ms })
}

/// The file's offset; a missing, empty or unreadable file is no offset.
fn read_offset(path: &std::path::Path) -> i64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_file_steps_the_clock_and_anything_unreadable_is_no_step() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("offset");
        assert_eq!(read_offset(&path), 0, "missing");
        std::fs::write(&path, "-30000\n").expect("write");
        assert_eq!(read_offset(&path), -30_000);
        std::fs::write(&path, "soon").expect("write");
        assert_eq!(read_offset(&path), 0, "unreadable");
        let clock = OffsetClock::default();
        clock.offset_ms.store(60_000, Ordering::SeqCst);
        let stepped = clock.now_ms() - super::super::now_ms();
        assert!((59_000..=60_000).contains(&stepped), "{stepped}");
    }
}
