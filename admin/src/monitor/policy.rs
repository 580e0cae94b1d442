//! Pure follow-up decisions for one finished run: retry (and when), alarm, child jobs, and a
//! FIX_DELAY job's next fire. No I/O; `now` and the node are arguments.
//!
//! | final status | retry | alarm | children | FIX_DELAY next fire |
//! |---|---|---|---|---|
//! | SUCCESS | – | – | yes (scheduled broadcast: once all shards succeeded) | `finished + delay` |
//! | FAILED, TIMEOUT, KILLED, LOST | while `attempt < fail_retry_count` | final failure (or every one with `alarm_on_every_failure`) | – | `finished + delay` when no retry follows |
//! | SKIPPED | – | – | – | `now + delay` |
//!
//! A retry is a new PENDING row: same job, scheduled time, params, handler and shard, the next
//! attempt number, trigger type RETRY, `fire_key` `job:scheduled:shard:attempt` when the failed
//! run had one; it is dispatched once its backoff delay has passed. The FIX_DELAY release only
//! concerns runs of the schedule (they carry a `fire_key`); manual and child runs leave the
//! schedule alone.

use std::sync::Arc;

use crate::model::next_fire::{AWAITING_COMPLETION_MS, next_fire_after};
use crate::model::{
    Fire, Job, JobId, NewRun, NodeIdentity, RetryBackoff, RunLog, RunStatus, ScheduleType,
    TriggerType, UnwrittenFire,
};
use crate::store::FixDelayRelease;

/// Longest single retry delay, whatever the job says (keeps `now + delay` far from overflow).
const MAX_RETRY_DELAY_MS: i64 = 30 * 24 * 3600 * 1000;

/// Which child jobs the follow-up starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Children {
    None,
    /// Start these jobs now (the run succeeded).
    Now(Vec<JobId>),
    /// A broadcast shard succeeded: start these jobs once every shard of the fire succeeded.
    WhenAllShardsSucceeded(Vec<JobId>),
}

/// What the follow-up does with one finished run.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub retry: Option<NewRun>,
    pub alarm: bool,
    pub children: Children,
    pub fix_delay_release: Option<FixDelayRelease>,
}

impl Decision {
    /// Nothing to write but the end of the follow-up.
    pub fn nothing() -> Decision {
        Decision {
            retry: None,
            alarm: false,
            children: Children::None,
            fix_delay_release: None,
        }
    }
}

/// Delay before retrying a run whose attempt `failed_attempt` (0 = the first) failed:
/// `initial * factor^failed_attempt` capped at `max_delay_ms` (factor ≤ 1 = fixed delay,
/// initial 0 = at once, max 0 = no cap).
pub fn retry_delay_ms(backoff: &RetryBackoff, failed_attempt: i32) -> i64 {
    if backoff.initial_delay_ms <= 0 {
        return 0;
    }
    let factor = if backoff.factor > 1.0 {
        backoff.factor
    } else {
        1.0
    };
    let delay = backoff.initial_delay_ms as f64 * factor.powi(failed_attempt.max(0));
    let capped = if backoff.max_delay_ms > 0 {
        delay.min(backoff.max_delay_ms as f64)
    } else {
        delay
    };
    // `as` saturates (and maps NaN to 0), so a huge factor cannot overflow.
    (capped as i64).clamp(0, MAX_RETRY_DELAY_MS)
}

/// Decides the follow-up of `run` (final) of `job` (None when the job was deleted).
pub fn decide(run: &RunLog, job: Option<&Job>, now_ms: i64, node: &NodeIdentity) -> Decision {
    let Some(job) = job else {
        return Decision::nothing();
    };
    let finished_ms = if run.handle_time_ms > 0 {
        run.handle_time_ms
    } else {
        now_ms
    };
    match run.status {
        RunStatus::Success => Decision {
            children: children_of(run, job),
            fix_delay_release: fix_delay_release(run, job, finished_ms),
            ..Decision::nothing()
        },
        RunStatus::Failed | RunStatus::Timeout | RunStatus::Killed | RunStatus::Lost => {
            let retry =
                (run.attempt < job.fail_retry_count).then(|| retry_run(run, job, now_ms, node));
            Decision {
                alarm: retry.is_none() || job.alarm_on_every_failure,
                fix_delay_release: match retry {
                    Some(_) => None,
                    None => fix_delay_release(run, job, finished_ms),
                },
                retry,
                children: Children::None,
            }
        }
        RunStatus::Skipped => Decision {
            fix_delay_release: fix_delay_release(run, job, now_ms),
            ..Decision::nothing()
        },
        RunStatus::Pending | RunStatus::Running | RunStatus::Waiting => Decision::nothing(),
    }
}

/// Child jobs start once per fire. A broadcast fire is identified by its job and scheduled time,
/// so its shards wait for each other; a manual broadcast (no scheduled time) has no such
/// identity, so its shard 0 alone starts the children, once, without waiting for the others.
fn children_of(run: &RunLog, job: &Job) -> Children {
    let children: Vec<JobId> = job.child_job_ids.clone();
    if children.is_empty() {
        Children::None
    } else if run.shard_total <= 1 {
        Children::Now(children)
    } else if run.scheduled_at_ms > 0 {
        Children::WhenAllShardsSucceeded(children)
    } else if run.shard_index == 0 {
        Children::Now(children)
    } else {
        Children::None
    }
}

/// The next attempt of a failed run: the same fire, one attempt later.
fn retry_run(run: &RunLog, job: &Job, now_ms: i64, node: &NodeIdentity) -> NewRun {
    let failed = Fire::from_run(run, Arc::new(job.clone()));
    NewRun {
        // Never 0: 0 means "dispatched by the scan or at once by its creator".
        dispatch_at_ms: (now_ms + retry_delay_ms(&job.retry_backoff, run.attempt)).max(1),
        ..failed.next_attempt().row(node, RunStatus::Pending, "")
    }
}

/// A run of `child` started by a parent's success: the child's own handler and params,
/// "scheduled" (like a manual run) for the instant the parent's success started it.
pub fn child_run(child: &Job, now_ms: i64, node: &NodeIdentity) -> NewRun {
    let fire = UnwrittenFire::requested(Arc::new(child.clone()), TriggerType::Parent, None, now_ms);
    NewRun {
        dispatch_at_ms: now_ms.max(1),
        ..fire.row(node, RunStatus::Pending, "")
    }
}

/// FIX_DELAY: the fire's final outcome lets the schedule continue `delay` after `finished_ms`.
fn fix_delay_release(run: &RunLog, job: &Job, finished_ms: i64) -> Option<FixDelayRelease> {
    if job.schedule_type != ScheduleType::FixDelay || run.fire_key.is_none() {
        return None;
    }
    // The zone does not matter for a delay.
    match next_fire_after(
        job.schedule_type,
        &job.schedule_conf,
        chrono_tz::UTC,
        job.policy.dst,
        finished_ms,
    ) {
        Ok(Some(next_fire_ms)) => Some(FixDelayRelease {
            job_id: job.id,
            scheduled_at_ms: run.scheduled_at_ms,
            next_fire_ms,
            awaiting_ms: AWAITING_COMPLETION_MS,
        }),
        Ok(None) | Err(_) => {
            tracing::warn!(job_id = job.id.0, schedule = %job.schedule_conf,
                "fix delay job has no valid delay; it stays waiting");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::JobStatus;
    use crate::model::{GroupId, LogId};

    const NOW: i64 = 1_800_000_000_000;

    fn node() -> NodeIdentity {
        NodeIdentity {
            node_id: "n1".into(),
            epoch: 4,
        }
    }

    fn job(fail_retry_count: i32) -> Job {
        Job {
            id: JobId(7),
            handler: "current-handler".into(),
            params: "current-params".into(),
            fail_retry_count,
            retry_backoff: RetryBackoff {
                initial_delay_ms: 1000,
                factor: 2.0,
                max_delay_ms: 3000,
            },
            status: JobStatus::Running,
            ..Job::new(GroupId(2), "j")
        }
    }

    fn run(status: RunStatus, attempt: i32) -> RunLog {
        RunLog {
            id: LogId(100),
            job_id: JobId(7),
            group_id: GroupId(2),
            fire_key: Some(format!("7:{}:2:{attempt}", NOW - 60_000)),
            status,
            trigger_type: TriggerType::Cron,
            scheduled_at_ms: NOW - 60_000,
            trigger_time_ms: NOW - 59_000,
            trigger_code: 200,
            trigger_msg: String::new(),
            handle_time_ms: NOW - 1_000,
            handle_code: 500,
            handle_msg: String::new(),
            executor_address: "http://e:1".into(),
            handler: "original-handler".into(),
            params: "original-params".into(),
            shard_index: 2,
            shard_total: 3,
            attempt,
            trace_id: String::new(),
            owner_node: "n0".into(),
            epoch: 1,
            dispatch_at_ms: 0,
            alarm_delivery: String::new(),
        }
    }

    #[test]
    fn backoff_is_fixed_exponential_capped_or_immediate() {
        let fixed = RetryBackoff {
            initial_delay_ms: 500,
            factor: 1.0,
            max_delay_ms: 0,
        };
        assert_eq!(
            (0..4)
                .map(|a| retry_delay_ms(&fixed, a))
                .collect::<Vec<_>>(),
            [500, 500, 500, 500]
        );
        let below_one = RetryBackoff {
            factor: 0.5,
            ..fixed
        };
        assert_eq!(retry_delay_ms(&below_one, 3), 500, "factor <= 1 is fixed");
        let exponential = RetryBackoff {
            initial_delay_ms: 200,
            factor: 3.0,
            max_delay_ms: 5_000,
        };
        assert_eq!(
            (0..5)
                .map(|a| retry_delay_ms(&exponential, a))
                .collect::<Vec<_>>(),
            [200, 600, 1_800, 5_000, 5_000]
        );
        let uncapped = RetryBackoff {
            max_delay_ms: 0,
            ..exponential
        };
        assert_eq!(retry_delay_ms(&uncapped, 3), 5_400);
        assert_eq!(
            retry_delay_ms(&RetryBackoff::default(), 9),
            0,
            "0 = at once"
        );
        let absurd = RetryBackoff {
            initial_delay_ms: i64::MAX,
            factor: f64::MAX,
            max_delay_ms: 0,
        };
        assert_eq!(retry_delay_ms(&absurd, 1000), MAX_RETRY_DELAY_MS);
        let not_a_number = RetryBackoff {
            factor: f64::NAN,
            ..fixed
        };
        assert_eq!(retry_delay_ms(&not_a_number, 2), 500);
    }

    #[test]
    fn a_failure_with_retries_left_retries_the_same_fire_and_does_not_alarm() {
        let decision = decide(&run(RunStatus::Failed, 1), Some(&job(3)), NOW, &node());
        let retry = decision.retry.expect("a retry");
        assert_eq!(retry.attempt, 2);
        assert_eq!(retry.trigger_type, TriggerType::Retry);
        assert_eq!(retry.scheduled_at_ms, NOW - 60_000);
        assert_eq!(retry.params, "original-params");
        assert_eq!(retry.handler, "original-handler");
        assert_eq!((retry.shard_index, retry.shard_total), (2, 3));
        assert_eq!(
            retry.fire_key.as_deref(),
            Some(&*format!("7:{}:2:2", NOW - 60_000))
        );
        assert_eq!(retry.status, RunStatus::Pending);
        assert_eq!((retry.owner_node.as_str(), retry.epoch), ("n1", 4));
        // Second failure (attempt 1): 1000 * 2^1.
        assert_eq!(retry.dispatch_at_ms, NOW + 2_000);
        assert!(!decision.alarm);
    }

    #[test]
    fn every_kind_of_failure_retries_and_the_last_one_alarms() {
        for status in [
            RunStatus::Failed,
            RunStatus::Timeout,
            RunStatus::Killed,
            RunStatus::Lost,
        ] {
            let first = decide(&run(status, 0), Some(&job(1)), NOW, &node());
            assert!(first.retry.is_some(), "{status} is retried");
            assert!(!first.alarm, "{status}: no alarm while a retry follows");
            let last = decide(&run(status, 1), Some(&job(1)), NOW, &node());
            assert!(last.retry.is_none(), "{status}: retries used up");
            assert!(last.alarm, "{status}: the final failure alarms");
        }
    }

    #[test]
    fn alarm_on_every_failure_alarms_while_retrying() {
        let mut every = job(2);
        every.alarm_on_every_failure = true;
        let decision = decide(&run(RunStatus::Failed, 0), Some(&every), NOW, &node());
        assert!(decision.retry.is_some());
        assert!(decision.alarm);
    }

    #[test]
    fn a_manual_run_retries_without_a_fire_key() {
        let mut manual = run(RunStatus::Failed, 0);
        manual.fire_key = None;
        manual.scheduled_at_ms = 0;
        let decision = decide(&manual, Some(&job(1)), NOW, &node());
        let retry = decision.retry.expect("a retry");
        assert_eq!(retry.fire_key, None);
        assert_eq!(retry.dispatch_at_ms, NOW + 1_000);
    }

    #[test]
    fn a_retry_without_delay_is_due_at_once() {
        let mut immediate = job(1);
        immediate.retry_backoff = RetryBackoff::default();
        let decision = decide(&run(RunStatus::Failed, 0), Some(&immediate), NOW, &node());
        assert_eq!(decision.retry.map(|retry| retry.dispatch_at_ms), Some(NOW));
    }

    #[test]
    fn success_starts_children_once_per_run_or_once_per_broadcast_fire() {
        let mut parent = job(0);
        parent.child_job_ids = vec![JobId(8), JobId(9)];
        let mut single = run(RunStatus::Success, 0);
        single.shard_index = 0;
        single.shard_total = 1;
        let decision = decide(&single, Some(&parent), NOW, &node());
        assert_eq!(decision.children, Children::Now(vec![JobId(8), JobId(9)]));
        assert!(decision.retry.is_none() && !decision.alarm);
        let shard = decide(&run(RunStatus::Success, 0), Some(&parent), NOW, &node());
        assert_eq!(
            shard.children,
            Children::WhenAllShardsSucceeded(vec![JobId(8), JobId(9)])
        );
        // A manual broadcast has no fire identity: shard 0 alone starts the children.
        let mut manual_shard = run(RunStatus::Success, 0);
        manual_shard.scheduled_at_ms = 0;
        manual_shard.fire_key = None;
        let other_shard = decide(&manual_shard, Some(&parent), NOW, &node());
        assert_eq!(other_shard.children, Children::None);
        manual_shard.shard_index = 0;
        let first_shard = decide(&manual_shard, Some(&parent), NOW, &node());
        assert_eq!(
            first_shard.children,
            Children::Now(vec![JobId(8), JobId(9)])
        );
        let failed = decide(&run(RunStatus::Failed, 0), Some(&parent), NOW, &node());
        assert_eq!(
            failed.children,
            Children::None,
            "only success starts children"
        );
    }

    #[test]
    fn fix_delay_continues_after_the_final_outcome_only() {
        let mut delayed = job(1);
        delayed.schedule_type = ScheduleType::FixDelay;
        delayed.schedule_conf = "5".into();
        let finished = run(RunStatus::Success, 0).handle_time_ms;
        let success = decide(&run(RunStatus::Success, 0), Some(&delayed), NOW, &node());
        let release = success.fix_delay_release.expect("released");
        assert_eq!(release.next_fire_ms, finished + 5_000);
        assert_eq!(release.scheduled_at_ms, NOW - 60_000);
        assert_eq!(release.awaiting_ms, AWAITING_COMPLETION_MS);

        let retried = decide(&run(RunStatus::Failed, 0), Some(&delayed), NOW, &node());
        assert!(retried.retry.is_some());
        assert_eq!(retried.fix_delay_release, None, "waits for the retry");
        let last = decide(&run(RunStatus::Failed, 1), Some(&delayed), NOW, &node());
        assert!(
            last.fix_delay_release.is_some(),
            "the last failure releases"
        );

        let skipped = decide(&run(RunStatus::Skipped, 0), Some(&delayed), NOW, &node());
        assert_eq!(
            skipped
                .fix_delay_release
                .map(|release| release.next_fire_ms),
            Some(NOW + 5_000)
        );

        let mut manual = run(RunStatus::Success, 0);
        manual.fire_key = None;
        let manual = decide(&manual, Some(&delayed), NOW, &node());
        assert_eq!(
            manual.fix_delay_release, None,
            "manual runs leave the schedule alone"
        );
    }

    #[test]
    fn a_deleted_job_gets_no_follow_up() {
        let decision = decide(&run(RunStatus::Failed, 0), None, NOW, &node());
        assert_eq!(decision, Decision::nothing());
    }
}
