//! Typed ids: a job id, a run (log row) id and a group id are all `i64` in the database, and
//! nothing but these types keeps one from being passed where another is meant. The model's
//! structs hold them, the store decodes them at the row and binds the plain `i64`s itself, and
//! the API converts at the wire (`api/convert.rs`), whose messages keep plain integers.

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
