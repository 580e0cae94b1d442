//! Each executor's clock offset, measured over its session as NTP does, for send-ahead: a run
//! sent early carries its start in the executor's clock (`RunRequest.start_at_ms`).
//!
//! ```text
//! admin ──ClockProbe{t0}──────────────────────────▶ executor (receives at t1)
//! admin ◀─ClockEcho{t0, t1, t2}── (answers at t2) ── executor; the admin notes t3
//! offset = ((t1 - t0) + (t2 - t3)) / 2      round trip = (t3 - t0) - (t2 - t1)
//! ```
//! The admin probes at registration and after each heartbeat. Whatever the path's asymmetry,
//! the true offset lies within half the round trip of a sample's offset, so every sample is an
//! interval; the estimate is the offset of the fastest round trip in the window. It is
//! *unknown* until [`MIN_SAMPLES`] agreeing samples came in, and *unstable* (treated as
//! unknown) when a sample's interval does not meet the others' (the executor's clock stepped,
//! or runs fast or slow): the window restarts from that sample. An estimate whose best round
//! trip is slower than [`MAX_ROUND_TRIP_MS`] is too loose to start a run on time by.

use std::collections::VecDeque;

/// Samples kept: about a minute of heartbeats at the default interval.
const WINDOW: usize = 8;
/// Agreeing samples needed before the offset is used.
pub const MIN_SAMPLES: usize = 3;
/// How far apart two samples' intervals may be and still agree: clocks are read in whole
/// milliseconds, and a run starts on a millisecond timer.
const SLACK_MS: i64 = 2;
/// The best round trip above which the offset is too uncertain to send ahead by.
const MAX_ROUND_TRIP_MS: i64 = 200;

/// One probe's answer: the executor's clock minus the admin's, within `round_trip_ms / 2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockSample {
    pub offset_ms: i64,
    pub round_trip_ms: i64,
}

impl ClockSample {
    /// The sample of one probe: sent at `t0` and answered at `t3` (admin's clock), received at
    /// `t1` and answered at `t2` (executor's clock). `None` when the times cannot be right (a
    /// negative round trip, or an executor that claims to have answered before it received).
    pub fn from_times(t0: i64, t1: i64, t2: i64, t3: i64) -> Option<ClockSample> {
        let round_trip_ms = (t3 - t0) - (t2 - t1);
        if t3 < t0 || t2 < t1 || round_trip_ms < 0 {
            return None;
        }
        Some(ClockSample {
            offset_ms: ((t1 - t0) + (t2 - t3)).div_euclid(2),
            round_trip_ms,
        })
    }

    /// The offsets this sample allows: within half its round trip of its own.
    fn bounds(&self) -> (i64, i64) {
        let half = (self.round_trip_ms + 1) / 2 + SLACK_MS;
        (self.offset_ms - half, self.offset_ms + half)
    }
}

/// The estimate of one executor's offset from its recent samples.
#[derive(Debug, Default)]
pub struct OffsetEstimate {
    samples: VecDeque<ClockSample>,
}

impl OffsetEstimate {
    /// Adds a sample. One that contradicts the window (no offset fits them all) restarts it:
    /// the clock moved, and only samples taken since say where it is now.
    pub fn add(&mut self, sample: ClockSample) {
        if !self.agrees(&sample) {
            self.samples.clear();
        }
        self.samples.push_back(sample);
        while self.samples.len() > WINDOW {
            self.samples.pop_front();
        }
    }

    /// Whether one offset fits `sample` and every sample of the window.
    fn agrees(&self, sample: &ClockSample) -> bool {
        let (mut low, mut high) = sample.bounds();
        for kept in &self.samples {
            let (kept_low, kept_high) = kept.bounds();
            low = low.max(kept_low);
            high = high.min(kept_high);
        }
        low <= high
    }

    /// The offset to schedule by (executor's clock minus the admin's), or `None` while it is
    /// unknown or unstable: fewer than [`MIN_SAMPLES`] agreeing samples, or none fast enough.
    pub fn offset_ms(&self) -> Option<i64> {
        if self.samples.len() < MIN_SAMPLES {
            return None;
        }
        let best = self.samples.iter().min_by_key(|s| s.round_trip_ms)?;
        (best.round_trip_ms <= MAX_ROUND_TRIP_MS).then_some(best.offset_ms)
    }

    /// Whether more samples are needed before the offset can be used (the admin then probes
    /// again at once instead of waiting for the next heartbeat).
    pub fn wants_samples(&self) -> bool {
        self.samples.len() < MIN_SAMPLES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(offset_ms: i64, round_trip_ms: i64) -> ClockSample {
        ClockSample {
            offset_ms,
            round_trip_ms,
        }
    }

    #[test]
    fn a_symmetric_probe_measures_the_offset_exactly() {
        // The executor runs 500 ms ahead; 10 ms each way, 2 ms to answer.
        let got = ClockSample::from_times(1_000, 1_510, 1_512, 1_022).unwrap();
        assert_eq!(got, sample(500, 20));
    }

    #[test]
    fn an_asymmetric_path_errs_by_at_most_half_the_round_trip() {
        // True offset -300 ms; 30 ms out, 2 ms back.
        let got = ClockSample::from_times(1_000, 730, 730, 1_032).unwrap();
        assert_eq!(got.round_trip_ms, 32);
        assert!((got.offset_ms - -300).abs() <= got.round_trip_ms / 2);
    }

    #[test]
    fn impossible_times_are_no_sample() {
        assert_eq!(ClockSample::from_times(1_000, 5, 4, 1_010), None);
        assert_eq!(ClockSample::from_times(1_000, 5, 6, 999), None);
        // The executor claims it held the probe longer than the whole round trip.
        assert_eq!(ClockSample::from_times(1_000, 0, 100, 1_010), None);
    }

    #[test]
    fn the_offset_is_unknown_until_enough_samples_agree() {
        let mut estimate = OffsetEstimate::default();
        for _ in 1..MIN_SAMPLES {
            estimate.add(sample(40, 6));
            assert_eq!(estimate.offset_ms(), None);
            assert!(estimate.wants_samples());
        }
        estimate.add(sample(42, 4));
        assert!(!estimate.wants_samples());
        // The fastest round trip's offset.
        assert_eq!(estimate.offset_ms(), Some(42));
    }

    #[test]
    fn a_clock_step_makes_the_offset_unknown_until_it_settles_again() {
        let mut estimate = OffsetEstimate::default();
        for _ in 0..WINDOW {
            estimate.add(sample(40, 6));
        }
        assert_eq!(estimate.offset_ms(), Some(40));
        // The executor's clock stepped 1 s forward.
        estimate.add(sample(1_040, 6));
        assert_eq!(estimate.offset_ms(), None);
        estimate.add(sample(1_041, 6));
        assert_eq!(estimate.offset_ms(), None);
        estimate.add(sample(1_039, 8));
        assert_eq!(estimate.offset_ms(), Some(1_040));
    }

    #[test]
    fn a_wandering_clock_never_becomes_stable() {
        let mut estimate = OffsetEstimate::default();
        for step in 0..20 {
            // 30 ms apart each time, on 4 ms round trips: no offset fits two in a row.
            estimate.add(sample(step * 30, 4));
            assert_eq!(estimate.offset_ms(), None, "step {step}");
        }
    }

    #[test]
    fn only_sessions_that_can_hold_runs_get_an_offset() {
        let clocks = ExecutorClocks::default();
        // Never opened: the executor did not declare it can hold runs.
        assert!(!clocks.add("http://a:1", "e1", sample(5, 2)));
        assert_eq!(clocks.offset_ms("http://a:1"), None);
        clocks.open("http://a:1", "e1");
        let mut wants_more = true;
        for _ in 0..MIN_SAMPLES {
            wants_more = clocks.add("http://a:1", "e1", sample(5, 2));
        }
        assert!(!wants_more);
        assert_eq!(clocks.offset_ms("http://a:1"), Some(5));
        // A newer session of the address starts unknown; the old one's end leaves it alone.
        clocks.open("http://a:1", "e2");
        assert_eq!(clocks.offset_ms("http://a:1"), None);
        assert!(!clocks.add("http://a:1", "e1", sample(5, 2)));
        clocks.close("http://a:1", "e1");
        assert!(clocks.add("http://a:1", "e2", sample(7, 2)));
        clocks.close("http://a:1", "e2");
        assert_eq!(clocks.offset_ms("http://a:1"), None);
    }

    #[test]
    fn slow_round_trips_agree_widely_but_are_too_loose_to_use() {
        let mut estimate = OffsetEstimate::default();
        for offset in [0, 150, -150, 80] {
            estimate.add(sample(offset, 400));
        }
        assert!(!estimate.wants_samples());
        assert_eq!(estimate.offset_ms(), None);
        // One fast sample inside every interval makes it usable.
        estimate.add(sample(10, 4));
        assert_eq!(estimate.offset_ms(), Some(10));
    }
}

/// The clocks of this admin's sessions that can hold runs, by address: only those may be sent
/// runs ahead, and only while their offset is known and stable.
#[derive(Debug, Default)]
pub struct ExecutorClocks {
    by_address: std::sync::Mutex<std::collections::HashMap<String, SessionClock>>,
}

#[derive(Debug)]
struct SessionClock {
    executor_id: String,
    estimate: OffsetEstimate,
}

impl ExecutorClocks {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, SessionClock>> {
        self.by_address
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A session that declared it can hold runs opened: its offset is unknown until sampled.
    pub fn open(&self, address: &str, executor_id: &str) {
        let clock = SessionClock {
            executor_id: executor_id.to_string(),
            estimate: OffsetEstimate::default(),
        };
        self.lock().insert(address.to_string(), clock);
    }

    /// The session ended: nothing more is sent ahead to it (a newer session of the same
    /// address keeps its own entry).
    pub fn close(&self, address: &str, executor_id: &str) {
        let mut clocks = self.lock();
        if clocks
            .get(address)
            .is_some_and(|clock| clock.executor_id == executor_id)
        {
            clocks.remove(address);
        }
    }

    /// Adds a sample to the session's estimate; returns whether it wants more at once.
    pub fn add(&self, address: &str, executor_id: &str, sample: ClockSample) -> bool {
        let mut clocks = self.lock();
        match clocks.get_mut(address) {
            Some(clock) if clock.executor_id == executor_id => {
                clock.estimate.add(sample);
                clock.estimate.wants_samples()
            }
            _ => false,
        }
    }

    /// The executor's offset when runs may be sent ahead to it: it can hold them and its
    /// offset is known and stable.
    pub fn offset_ms(&self, address: &str) -> Option<i64> {
        self.lock()
            .get(address)
            .and_then(|clock| clock.estimate.offset_ms())
    }
}
