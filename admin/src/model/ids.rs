//! Typed ids: a job id, a run (log row) id and a group id are all `i64` in the database, and
//! nothing but these types keeps one from being passed where another is meant. The store takes
//! lists of them and binds the plain `i64`s itself; a caller holding raw ids from a model struct
//! (`Job::child_job_ids`, `RunLog::id`) wraps them at the call (`typed_ids`, `LogId(run.id)`).

use std::fmt;

macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub i64);

        impl From<i64> for $name {
            fn from(id: i64) -> $name {
                $name(id)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_type!(
    /// A job's id (`xjob_job.id`).
    JobId
);
id_type!(
    /// A run's id (`xjob_log.id`): one attempt of one shard of one fire.
    LogId
);
id_type!(
    /// An executor group's id (`xjob_group.id`).
    GroupId
);

/// The raw ids of typed ones, for the store's binds.
pub fn raw_ids<T: Copy + Into<i64>>(ids: &[T]) -> Vec<i64> {
    ids.iter().map(|&id| id.into()).collect()
}

/// Typed ids of raw ones, for store calls from code that holds model structs' `i64` fields.
pub fn typed_ids<T: From<i64>>(ids: &[i64]) -> Vec<T> {
    ids.iter().map(|&id| T::from(id)).collect()
}

impl From<JobId> for i64 {
    fn from(id: JobId) -> i64 {
        id.0
    }
}

impl From<LogId> for i64 {
    fn from(id: LogId) -> i64 {
        id.0
    }
}

impl From<GroupId> for i64 {
    fn from(id: GroupId) -> i64 {
        id.0
    }
}
