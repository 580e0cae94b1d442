//! A job's schedule policy (`model::SchedulePolicy`: jitter, catch-up, ...) on and off the
//! wire. Kept apart from `convert.rs` so each policy adds its fields here.

use xjob_proto::pb;

use crate::error::Error;
use crate::model::{
    CatchUpMode, DstGapPolicy, DstOverlapPolicy, DstPolicy, OverlapPolicy, SchedulePolicy,
};

/// The policy fields of a job off the wire (`prefix` names the fields in errors; the values are
/// checked by `model::validate`).
pub fn policy_from_pb(job: &pb::Job, prefix: &str) -> Result<SchedulePolicy, Error> {
    Ok(SchedulePolicy {
        jitter_max_ms: job.jitter_max_ms,
        catch_up_window_ms: job.catch_up_window_ms,
        catch_up_mode: catch_up_mode_from_pb(job.catch_up_mode, prefix)?,
        dst: dst_from_pb(job.dst_gap_policy, job.dst_overlap_policy, prefix)?,
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
    job.dst_gap_policy = match policy.dst.gap {
        DstGapPolicy::NextValidTime => pb::DstGapPolicy::NextValidTime,
        DstGapPolicy::Skip => pb::DstGapPolicy::Skip,
    } as i32;
    job.dst_overlap_policy = match policy.dst.overlap {
        DstOverlapPolicy::First => pb::DstOverlapPolicy::First,
        DstOverlapPolicy::Second => pb::DstOverlapPolicy::Second,
        DstOverlapPolicy::Both => pb::DstOverlapPolicy::Both,
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
pub fn overlap_policy_from_pb(value: i32, prefix: &str) -> Result<OverlapPolicy, Error> {
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

/// A job's (or a preview's) daylight-saving policy off the wire. UNSPECIFIED is the default
/// of each half, so a client that never heard of the policy keeps today's behaviour.
pub fn dst_from_pb(gap: i32, overlap: i32, prefix: &str) -> Result<DstPolicy, Error> {
    let field = |name| crate::model::validate::field_name(prefix, name);
    let gap = match pb::DstGapPolicy::try_from(gap) {
        Ok(pb::DstGapPolicy::Unspecified | pb::DstGapPolicy::NextValidTime) => {
            DstGapPolicy::NextValidTime
        }
        Ok(pb::DstGapPolicy::Skip) => DstGapPolicy::Skip,
        Err(_) => {
            return Err(Error::invalid(
                &field("dst_gap_policy"),
                format!("unknown value {gap} (NEXT_VALID_TIME = 1, SKIP = 2)"),
            ));
        }
    };
    let overlap = match pb::DstOverlapPolicy::try_from(overlap) {
        Ok(pb::DstOverlapPolicy::Unspecified | pb::DstOverlapPolicy::First) => {
            DstOverlapPolicy::First
        }
        Ok(pb::DstOverlapPolicy::Second) => DstOverlapPolicy::Second,
        Ok(pb::DstOverlapPolicy::Both) => DstOverlapPolicy::Both,
        Err(_) => {
            return Err(Error::invalid(
                &field("dst_overlap_policy"),
                format!("unknown value {overlap} (FIRST = 1, SECOND = 2, BOTH = 3)"),
            ));
        }
    };
    Ok(DstPolicy { gap, overlap })
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
