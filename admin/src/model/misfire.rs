//! The misfire rule for a fire found late *after* it was planned: its claim failed until too
//! late, its admin stopped before sending it (adopted PENDING fires, stranded runs), or its turn
//! in an overloaded trigger came too late. One rule for all of them, so the admin never sends
//! a fire in one place that it would skip in another. (The scan's own branch A, a fire whose
//! time passed before it was planned at all, is `schedule::plan`.)

use super::{Fire, MisfireStrategy, RunLog, Shard, TriggerType};

/// What the rule needs to know of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LateRun {
    pub trigger_type: TriggerType,
    pub attempt: i32,
    pub shard: Shard,
    pub scheduled_at_ms: i64,
    /// How long the job's jitter holds the fire back (`model::jitter`): lateness counts from
    /// the scheduled time plus this, so a fire sent at its jittered time is not a misfire.
    pub jitter_ms: i64,
    /// The job's catch-up window (`model::catch_up`): when set, a fire late by no more than the
    /// window plus the threshold still goes, whatever the misfire strategy, and one later than
    /// that is skipped. 0 = the misfire strategy decides.
    pub catch_up_window_ms: i64,
}

impl From<&Fire> for LateRun {
    fn from(fire: &Fire) -> LateRun {
        LateRun {
            trigger_type: fire.trigger_type,
            attempt: fire.attempt,
            shard: fire.shard,
            scheduled_at_ms: fire.scheduled_at_ms,
            jitter_ms: super::jitter::dispatch_time(
                fire.job.id,
                fire.trigger_type,
                fire.attempt,
                fire.scheduled_at_ms,
                fire.job.policy.jitter_max_ms,
            ) - fire.scheduled_at_ms,
            catch_up_window_ms: fire.job.policy.catch_up_window_ms,
        }
    }
}

impl From<&RunLog> for LateRun {
    fn from(run: &RunLog) -> LateRun {
        LateRun {
            trigger_type: run.trigger_type,
            attempt: run.attempt,
            shard: Shard {
                index: run.shard_index,
                total: run.shard_total,
            },
            scheduled_at_ms: run.scheduled_at_ms,
            // The scan wrote a jittered fire's send time into its row.
            jitter_ms: if run.trigger_type == TriggerType::Cron && run.attempt == 0 {
                (run.dispatch_at_ms - run.scheduled_at_ms).max(0)
            } else {
                0
            },
            // A run read back alone does not carry its job's policy: the misfire strategy
            // decides for it.
            catch_up_window_ms: 0,
        }
    }
}

/// How late `run` is, when its job's misfire `strategy` skips it at `now_ms`; `None` when it is
/// to be sent. Only `DO_NOTHING` skips, and only a first attempt the schedule made (a cron or
/// fixed-rate/delay fire, or FIRE_ONCE_NOW's misfire run) found more than `threshold_ms` after
/// its time. A manual, API or child run still runs when late, a retry keeps its backoff, and
/// the shards of an expanded broadcast go whole (the fire was already under way: skipping some
/// would leave a partial broadcast). A job with a catch-up window skips by the window instead
/// (see [`LateRun::catch_up_window_ms`]).
pub fn skipped_as_misfire(
    run: LateRun,
    strategy: MisfireStrategy,
    now_ms: i64,
    threshold_ms: i64,
) -> Option<i64> {
    let late_ms = now_ms - run.scheduled_at_ms.saturating_add(run.jitter_ms);
    let (skips, allowed_ms) = if run.catch_up_window_ms > 0 {
        (true, threshold_ms.saturating_add(run.catch_up_window_ms))
    } else {
        (strategy == MisfireStrategy::DoNothing, threshold_ms)
    };
    (skips
        && matches!(run.trigger_type, TriggerType::Cron | TriggerType::Misfire)
        && run.attempt == 0
        && run.shard == Shard::ONLY
        && run.scheduled_at_ms > 0
        && late_ms > allowed_ms)
        .then_some(late_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;
    const THRESHOLD: i64 = 5_000;

    fn cron(late_ms: i64) -> LateRun {
        LateRun {
            trigger_type: TriggerType::Cron,
            attempt: 0,
            shard: Shard::ONLY,
            scheduled_at_ms: NOW - late_ms,
            jitter_ms: 0,
            catch_up_window_ms: 0,
        }
    }

    fn skipped(run: LateRun, strategy: MisfireStrategy) -> Option<i64> {
        skipped_as_misfire(run, strategy, NOW, THRESHOLD)
    }

    #[test]
    fn do_nothing_skips_a_scheduled_first_attempt_found_past_the_threshold() {
        let do_nothing = MisfireStrategy::DoNothing;
        assert_eq!(skipped(cron(9_000), do_nothing), Some(9_000));
        assert_eq!(
            skipped(
                LateRun {
                    trigger_type: TriggerType::Misfire,
                    ..cron(9_000)
                },
                do_nothing
            ),
            Some(9_000)
        );
        // At the threshold or under it, the fire goes.
        assert_eq!(skipped(cron(THRESHOLD), do_nothing), None);
        assert_eq!(skipped(cron(1_000), do_nothing), None);
        // FIRE_ONCE_NOW sends a late fire.
        assert_eq!(skipped(cron(60_000), MisfireStrategy::FireOnceNow), None);
    }

    #[test]
    fn runs_that_were_asked_for_retried_or_broadcast_are_never_misfires() {
        let do_nothing = MisfireStrategy::DoNothing;
        for trigger_type in [
            TriggerType::Manual,
            TriggerType::Api,
            TriggerType::Parent,
            TriggerType::Retry,
        ] {
            let run = LateRun {
                trigger_type,
                ..cron(60_000)
            };
            assert_eq!(skipped(run, do_nothing), None, "{trigger_type:?}");
        }
        let retry = LateRun {
            attempt: 1,
            ..cron(60_000)
        };
        assert_eq!(skipped(retry, do_nothing), None);
        let shard = LateRun {
            shard: Shard { index: 1, total: 3 },
            ..cron(60_000)
        };
        assert_eq!(skipped(shard, do_nothing), None);
        let unscheduled = LateRun {
            scheduled_at_ms: 0,
            ..cron(0)
        };
        assert_eq!(skipped(unscheduled, do_nothing), None);
    }

    #[test]
    fn a_jittered_fire_is_late_only_past_its_jittered_time() {
        let do_nothing = MisfireStrategy::DoNothing;
        // Scheduled 40 s ago, held back 38 s by its jitter: 2 s late, it goes.
        let jittered = LateRun {
            jitter_ms: 38_000,
            ..cron(40_000)
        };
        assert_eq!(skipped(jittered, do_nothing), None);
        let too_late = LateRun {
            jitter_ms: 30_000,
            ..cron(40_000)
        };
        assert_eq!(skipped(too_late, do_nothing), Some(10_000));
    }

    #[test]
    fn a_catch_up_window_replaces_the_strategy() {
        let windowed = |late_ms| LateRun {
            catch_up_window_ms: 60_000,
            ..cron(late_ms)
        };
        // Inside window + threshold it goes, even for DO_NOTHING (a catch-up run).
        assert_eq!(skipped(windowed(64_000), MisfireStrategy::DoNothing), None);
        // Past it, it is skipped, even for FIRE_ONCE_NOW.
        assert_eq!(
            skipped(windowed(66_000), MisfireStrategy::FireOnceNow),
            Some(66_000)
        );
    }
}
