//! The jobs and groups of claimed fires, each read with one query however many fires there are.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::Error;
use crate::model::{Group, GroupId, Job, JobId};
use crate::store::Store;

/// The jobs of `ids` that exist, by id (one query).
pub async fn jobs(store: &Store, ids: &[JobId]) -> Result<HashMap<JobId, Arc<Job>>, Error> {
    let ids = distinct(ids);
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    Ok(store
        .get_jobs(&ids)
        .await?
        .into_iter()
        .map(|job| (JobId(job.id), Arc::new(job)))
        .collect())
}

/// The groups of `ids` that exist, by id (one query).
pub async fn groups(store: &Store, ids: &[GroupId]) -> Result<HashMap<GroupId, Arc<Group>>, Error> {
    let ids = distinct(ids);
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    Ok(store
        .get_groups(&ids)
        .await?
        .into_iter()
        .map(|group| (GroupId(group.id), Arc::new(group)))
        .collect())
}

fn distinct<T: Copy + Ord>(ids: &[T]) -> Vec<T> {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    ids
}
