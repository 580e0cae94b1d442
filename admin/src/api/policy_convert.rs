//! A job's schedule policy (`model::SchedulePolicy`: jitter, ...) on and off the wire. Kept
//! apart from `convert.rs` so each policy adds its fields here.

use xjob_proto::pb;

use crate::error::Error;
use crate::model::SchedulePolicy;

/// The policy fields of a job off the wire (`prefix` names the fields in errors; the values are
/// checked by `model::validate`).
pub fn policy_from_pb(job: &pb::Job, _prefix: &str) -> Result<SchedulePolicy, Error> {
    Ok(SchedulePolicy {
        jitter_max_ms: job.jitter_max_ms,
    })
}

/// Writes the policy fields of a job onto its wire form.
pub fn policy_to_pb(policy: &SchedulePolicy, job: &mut pb::Job) {
    job.jitter_max_ms = policy.jitter_max_ms;
}
