//! A job's schedule policy (`model::SchedulePolicy`: jitter, catch-up, ...) on and off the
//! wire. Kept apart from `convert.rs` so each policy adds its fields here.

use xjob_proto::pb;

use crate::error::Error;
use crate::model::{CatchUpMode, OverlapPolicy, SchedulePolicy};

/// The policy fields of a job off the wire (`prefix` names the fields in errors; the values are
/// checked by `model::validate`).
pub fn policy_from_pb(job: &pb::Job, prefix: &str) -> Result<SchedulePolicy, Error> {
    Ok(SchedulePolicy {
        jitter_max_ms: job.jitter_max_ms,
        catch_up_window_ms: job.catch_up_window_ms,
        catch_up_mode: catch_up_mode_from_pb(job.catch_up_mode, prefix)?,
        overlap_policy: overlap_policy_from_pb(job.overlap_policy, prefix)?,
    })
}

/// Writes the policy fields of a job onto its wire form.
pub fn policy_to_pb(policy: &SchedulePolicy, job: &mut pb::Job) {
    job.jitter_max_ms = policy.jitter_max_ms;
    job.catch_up_window_ms = policy.catch_up_window_ms;
    job.catch_up_mode = match policy.catch_up_mode {
        CatchUpMode::Latest => pb::CatchUpMode::Latest,
        CatchUpMode::All => pb::CatchUpMode::All,
    } as i32;
    job.overlap_policy = overlap_policy_to_pb(policy.overlap_policy) as i32;
}

/// The wire value of an overlap policy.
pub fn overlap_policy_to_pb(policy: OverlapPolicy) -> pb::OverlapPolicy {
    match policy {
        OverlapPolicy::AllowAll => pb::OverlapPolicy::AllowAll,
        OverlapPolicy::Skip => pb::OverlapPolicy::Skip,
        OverlapPolicy::BufferOne => pb::OverlapPolicy::BufferOne,
        OverlapPolicy::BufferAll => pb::OverlapPolicy::BufferAll,
        OverlapPolicy::CancelOther => pb::OverlapPolicy::CancelOther,
    }
}

/// UNSPECIFIED is ALLOW_ALL (today's behaviour), so a client that never heard of overlap
/// policies need not set one.
fn overlap_policy_from_pb(value: i32, prefix: &str) -> Result<OverlapPolicy, Error> {
    match pb::OverlapPolicy::try_from(value) {
        Ok(pb::OverlapPolicy::Unspecified | pb::OverlapPolicy::AllowAll) => {
            Ok(OverlapPolicy::AllowAll)
        }
        Ok(pb::OverlapPolicy::Skip) => Ok(OverlapPolicy::Skip),
        Ok(pb::OverlapPolicy::BufferOne) => Ok(OverlapPolicy::BufferOne),
        Ok(pb::OverlapPolicy::BufferAll) => Ok(OverlapPolicy::BufferAll),
        Ok(pb::OverlapPolicy::CancelOther) => Ok(OverlapPolicy::CancelOther),
        Err(_) => Err(Error::invalid(
            &crate::model::validate::field_name(prefix, "overlap_policy"),
            format!(
                "unknown value {value} (ALLOW_ALL = 1, SKIP = 2, BUFFER_ONE = 3, BUFFER_ALL = 4, \
                 CANCEL_OTHER = 5)"
            ),
        )),
    }
}

/// UNSPECIFIED is LATEST, so a client that never heard of catch-up need not set it.
fn catch_up_mode_from_pb(value: i32, prefix: &str) -> Result<CatchUpMode, Error> {
    match pb::CatchUpMode::try_from(value) {
        Ok(pb::CatchUpMode::Unspecified | pb::CatchUpMode::Latest) => Ok(CatchUpMode::Latest),
        Ok(pb::CatchUpMode::All) => Ok(CatchUpMode::All),
        Err(_) => Err(Error::invalid(
            &crate::model::validate::field_name(prefix, "catch_up_mode"),
            format!("unknown value {value} (LATEST = 1, ALL = 2)"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_policies_round_trip_and_unset_is_allow_all() {
        for policy in OverlapPolicy::ALL {
            let mut job = pb::Job::default();
            policy_to_pb(
                &SchedulePolicy {
                    overlap_policy: *policy,
                    ..SchedulePolicy::default()
                },
                &mut job,
            );
            let back = policy_from_pb(&job, "job").expect("known policy");
            assert_eq!(back.overlap_policy, *policy);
        }
        let unset = policy_from_pb(&pb::Job::default(), "job").expect("unset");
        assert_eq!(unset.overlap_policy, OverlapPolicy::AllowAll);
    }

    #[test]
    fn an_unknown_overlap_policy_is_refused_naming_the_field() {
        let job = pb::Job {
            overlap_policy: 9,
            ..pb::Job::default()
        };
        match policy_from_pb(&job, "job") {
            Err(Error::InvalidArgument(message)) => assert_eq!(
                message,
                "job.overlap_policy: unknown value 9 (ALLOW_ALL = 1, SKIP = 2, BUFFER_ONE = 3, \
                 BUFFER_ALL = 4, CANCEL_OTHER = 5)"
            ),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}
