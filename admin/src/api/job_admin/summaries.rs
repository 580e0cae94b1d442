//! What audit rows say about the objects a call touched: short, and never a secret (an access
//! token, a job's params).

use xjob_proto::pb;

use crate::model::Job;

/// What an audit row says about a group (never its access token).
pub(super) fn group_summary(group: &pb::Group) -> String {
    format!(
        "app_name '{}', title '{}', address_type {}, {} address(es)",
        short(&group.app_name),
        short(&group.title),
        address_type_name(group.address_type),
        group.addresses.len()
    )
}

/// `AUTO` / `MANUAL` (what the console and the docs call them), not the wire number.
pub(super) fn address_type_name(address_type: i32) -> String {
    match pb::AddressType::try_from(address_type) {
        Ok(known) => known
            .as_str_name()
            .trim_start_matches("ADDRESS_TYPE_")
            .to_string(),
        Err(_) => format!("unknown ({address_type})"),
    }
}

/// What an audit row says about a job (never its params: they may hold secrets).
pub(super) fn job_summary(job: &Job) -> String {
    format!(
        "name '{}', group {}, handler '{}', schedule {} '{}', status {:?}",
        short(&job.name),
        job.group_id,
        short(&job.handler),
        job.schedule_type.as_str(),
        short(&job.schedule_conf),
        job.status
    )
}

pub(super) fn trigger_summary(request: &pb::TriggerJobRequest) -> String {
    format!(
        "params {}, addresses {:?}",
        if request.params.is_some() {
            "overridden"
        } else {
            "of the job"
        },
        request.addresses
    )
}

/// At most 64 characters of a value, for summaries.
pub(super) fn short(text: &str) -> String {
    let mut shown: String = text.chars().take(64).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    shown
}
