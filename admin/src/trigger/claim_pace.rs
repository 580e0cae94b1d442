//! How long a claim takes per fire, so the ring hands a large second over early enough.
//!
//! The ring hands each second's fires to the trigger `BASE_LEAD_MS` before the second starts,
//! and the trigger claims them (one database write for the whole second) before sending each at
//! its instant. That lead covers a claim of a few thousand fires; a burst of 10 000 fires due
//! in one second (W4) takes PostgreSQL about 40 µs per row, 400 ms, so with a fixed lead the
//! whole burst left 200 ms late. The ring therefore asks for a lead sized to the second it is
//! about to hand over: the base plus what claiming that many fires took lately, capped so a
//! second is never handed over before the one ahead of it.
//!
//! ```text
//! claim of n fires took t ─▶ observe(n, t) ─▶ µs per fire (smoothed, large claims only)
//! ring: next second holds m fires ─▶ lead_ms(m) = BASE + m × µs per fire (≤ MAX) ─▶ wake
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The lead every second gets: covers a claim's round trip and a small second's rows.
pub const BASE_LEAD_MS: i64 = 200;
/// The most a second is handed over early: below a second, so the ring's seconds stay in order
/// (each is handed over after the one before it), and claimed runs wait little unsent.
pub const MAX_LEAD_MS: i64 = 800;
/// Claims smaller than this say more about the round trip than the cost per row: not sampled.
const MIN_SAMPLE_FIRES: usize = 500;
/// The cost assumed before any large claim was seen (between SQLite's and PostgreSQL's).
const INITIAL_NS_PER_FIRE: u64 = 25_000;

/// The smoothed cost of claiming one fire, in nanoseconds.
#[derive(Debug)]
pub struct ClaimPace {
    ns_per_fire: AtomicU64,
}

impl Default for ClaimPace {
    fn default() -> ClaimPace {
        ClaimPace {
            ns_per_fire: AtomicU64::new(INITIAL_NS_PER_FIRE),
        }
    }
}

impl ClaimPace {
    /// A claim of `fires` fires took `took`; large claims move the estimate a quarter of the way
    /// toward what they cost (one slow claim does not double every lead after it).
    pub fn observe(&self, fires: usize, took: Duration) {
        if fires < MIN_SAMPLE_FIRES {
            return;
        }
        let sample = u64::try_from(took.as_nanos() / fires as u128).unwrap_or(u64::MAX);
        let _ = self
            .ns_per_fire
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                Some(old - old / 4 + sample / 4)
            });
    }

    /// How long before its second the ring should hand over a second of `fires` fires.
    pub fn lead_ms(&self, fires: usize) -> i64 {
        let ns = self.ns_per_fire.load(Ordering::Acquire) as u128 * fires as u128;
        let claim_ms = i64::try_from(ns / 1_000_000).unwrap_or(i64::MAX);
        BASE_LEAD_MS.saturating_add(claim_ms).min(MAX_LEAD_MS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_second_gets_the_base_lead() {
        let pace = ClaimPace::default();
        assert_eq!(pace.lead_ms(0), BASE_LEAD_MS);
        assert_eq!(pace.lead_ms(100), BASE_LEAD_MS + 2);
    }

    #[test]
    fn a_large_second_gets_the_time_its_claim_is_expected_to_take() {
        let pace = ClaimPace::default();
        // Claims of 10 000 fires taking 400 ms: 40 µs per fire.
        for _ in 0..30 {
            pace.observe(10_000, Duration::from_millis(400));
        }
        let lead = pace.lead_ms(10_000);
        assert!((595..=600).contains(&lead), "lead {lead} ms");
        let half = pace.lead_ms(5_000);
        assert!((395..=400).contains(&half), "lead {half} ms");
    }

    #[test]
    fn the_lead_is_capped_below_a_second() {
        let pace = ClaimPace::default();
        pace.observe(1_000, Duration::from_secs(30));
        assert_eq!(pace.lead_ms(100_000), MAX_LEAD_MS);
    }

    #[test]
    fn small_claims_do_not_move_the_estimate() {
        let pace = ClaimPace::default();
        let before = pace.lead_ms(10_000);
        // 10 fires in 20 ms is a round trip, not 2 ms per row.
        pace.observe(10, Duration::from_millis(20));
        assert_eq!(pace.lead_ms(10_000), before);
    }

    #[test]
    fn one_slow_claim_moves_the_estimate_a_quarter_of_the_way() {
        let pace = ClaimPace::default();
        // 25 µs assumed; one claim at 125 µs per fire: 25 + (125 - 25) / 4 = 50 µs.
        pace.observe(1_000, Duration::from_millis(125));
        assert_eq!(pace.lead_ms(10_000), BASE_LEAD_MS + 500);
    }
}
