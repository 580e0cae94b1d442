//! Ids and scopes off the wire, and the names audit rows give the objects they touch.

use crate::auth::Scope;
use crate::model::{GroupId, JobId};

/// A list filter on one group needs that group; no filter lists what the caller may read.
pub(super) fn group_scope(group_id: i64) -> Scope {
    if group_id == 0 {
        Scope::Any
    } else {
        Scope::Group(GroupId(group_id))
    }
}

pub(super) fn group_object(id: GroupId) -> String {
    format!("group:{id}")
}

pub(super) fn job_object(id: JobId) -> String {
    format!("job:{id}")
}

/// Job ids off the wire.
pub(super) fn job_ids(ids: &[i64]) -> Vec<JobId> {
    ids.iter().copied().map(JobId).collect()
}
