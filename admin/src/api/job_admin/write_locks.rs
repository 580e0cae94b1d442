//! Which job edits on this admin wait for each other.
//!
//! - Two edits of the same job: the second merges its fields onto the first's result, and a
//!   reschedule's writes (definition, next fire, skipped planned fires) are not interleaved
//!   with another edit's.
//! - Two edits that add child links: otherwise each could pass the cycle check against the
//!   graph without the other's link, and together close a cycle.
//!
//! Everything else runs side by side. Under load every write waits for the single writer
//! (SQLite), so a script renaming jobs 16 at a time must not also wait for each rename before
//! it: one lock for all edits made each call wait for the writer once per edit queued ahead.

use crate::model::JobId;
use tokio::sync::{Mutex, MutexGuard};

/// Jobs share a lock when their ids are equal modulo this: enough that edits of different
/// jobs rarely wait for each other, few enough to keep them all for the admin's life.
const JOB_STRIPES: usize = 64;

#[derive(Debug)]
pub struct JobWriteLocks {
    per_job: Vec<Mutex<()>>,
    child_links: Mutex<()>,
}

impl Default for JobWriteLocks {
    fn default() -> Self {
        JobWriteLocks {
            per_job: (0..JOB_STRIPES).map(|_| Mutex::new(())).collect(),
            child_links: Mutex::new(()),
        }
    }
}

impl JobWriteLocks {
    /// Held for the whole edit of job `id`.
    pub async fn job(&self, id: JobId) -> MutexGuard<'_, ()> {
        // `rem_euclid` of a positive modulus is in 0..JOB_STRIPES, also for negative ids.
        let stripe = id.0.rem_euclid(JOB_STRIPES as i64) as usize;
        self.per_job[stripe].lock().await
    }

    /// Held from the cycle check of an edit that adds child links to its write. Taken after
    /// [`JobWriteLocks::job`], never before, so two edits cannot wait for each other.
    pub async fn child_links(&self) -> MutexGuard<'_, ()> {
        self.child_links.lock().await
    }
}

/// Whether `updated` links a child that `existing` did not: only such an edit can close a cycle.
pub fn adds_child_links(existing: &[JobId], updated: &[JobId]) -> bool {
    updated.iter().any(|child| !existing.contains(child))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_new_child_is_a_new_link() {
        assert!(!adds_child_links(&[], &[]));
        assert!(!adds_child_links(&[JobId(1), JobId(2)], &[JobId(2)]));
        assert!(!adds_child_links(
            &[JobId(1), JobId(2)],
            &[JobId(2), JobId(1)]
        ));
        assert!(adds_child_links(&[JobId(1)], &[JobId(1), JobId(3)]));
        assert!(adds_child_links(&[], &[JobId(7)]));
    }

    #[tokio::test]
    async fn edits_of_one_job_wait_for_each_other_and_others_do_not() {
        let locks = JobWriteLocks::default();
        let first = locks.job(JobId(5)).await;
        assert!(
            locks.per_job[5].try_lock().is_err(),
            "a second edit of job 5 went ahead"
        );
        let other = tokio::time::timeout(std::time::Duration::from_secs(1), locks.job(JobId(6)))
            .await
            .expect("an edit of job 6 waited for an edit of job 5");
        drop((first, other));
        let negative = locks.job(JobId(-1)).await;
        drop(negative);
    }
}
