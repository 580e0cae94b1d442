//! All SQL of the admin. The only module that imports `sqlx`.
//!
//! `Store` is chosen by URL (`sqlite://…` today; PostgreSQL and MySQL slot in as further
//! variants) and every backend exposes the same methods, which `delegate!` forwards. Rows are
//! mapped to `model` types here; callers never see a database type.
//!
//! The schedule round (`run_schedule_round`) is the one place that holds the schedule lock: it
//! reads due jobs, lets the caller's pure planning closure decide, then writes the fires and the
//! next fire times in the same transaction.

mod sqlite;

use thiserror::Error;

use crate::model::{ExecutorInfo, Group, Job, JobStatus, LogFilter, NewRun, RunLog, RunStatus};

/// Errors of the store, named after what a caller can do about them.
#[derive(Debug, Error)]
pub enum StoreError {
    /// A unique constraint refused the write.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The database could not be reached or answered with an error.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// A stored value could not be read back into a domain type.
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// The URL names no supported backend or is malformed.
    #[error("invalid database url: {0}")]
    InvalidUrl(String),
    /// Migrations failed.
    #[error("migration failed: {0}")]
    Migrate(#[source] sqlx::migrate::MigrateError),
    /// The schema is missing something the admin needs (e.g. the schedule lock row).
    #[error("schema problem: {0}")]
    Schema(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Filters of `ListJobs`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobFilter {
    pub group_id: Option<i64>,
    pub status: Option<JobStatus>,
    pub name: Option<String>,
    pub handler: Option<String>,
    pub author: Option<String>,
    pub offset: i64,
    pub limit: i64,
}

/// New scheduling state of one job, written by the schedule round.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobScheduleUpdate {
    pub job_id: i64,
    pub trigger_last_ms: i64,
    pub trigger_next_ms: i64,
    pub status: JobStatus,
}

/// What a schedule round decided: fires to record and next fire times to write.
#[derive(Debug, Clone, Default)]
pub struct RoundPlan {
    pub new_runs: Vec<NewRun>,
    pub job_updates: Vec<JobScheduleUpdate>,
}

/// A run the round inserted (fires already present by `fire_key` are left out).
#[derive(Debug, Clone, PartialEq)]
pub struct InsertedRun {
    pub log_id: i64,
    pub fire_key: String,
}

/// How a dispatch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DispatchOutcome {
    /// The executor accepted the run (or may have: a deadline after sending); it stays RUNNING.
    Accepted,
    /// Not delivered or refused: the run is FAILED.
    Failed,
    /// Deliberately not run (its job was stopped after the fire was planned): SKIPPED.
    Skipped,
}

/// Outcome of dispatching one run, recorded on its log row.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchRecord {
    pub log_id: i64,
    pub outcome: DispatchOutcome,
    pub trigger_code: i32,
    pub trigger_msg: String,
    pub executor_address: String,
    pub finished_ms: i64,
}

/// A result reported by an executor.
#[derive(Debug, Clone, PartialEq)]
pub struct RunCompletion {
    pub log_id: i64,
    pub status: RunStatus,
    pub handle_code: i32,
    pub handle_msg: String,
    pub finished_ms: i64,
}

/// The store, one variant per backend.
#[derive(Clone)]
pub enum Store {
    Sqlite(sqlite::SqliteStore),
}

impl Store {
    /// Connects to the database named by `url` and runs its embedded migrations.
    pub async fn connect(url: &str) -> StoreResult<Store> {
        if url.starts_with("sqlite:") {
            let store = sqlite::SqliteStore::connect(url).await?;
            Ok(Store::Sqlite(store))
        } else if url.starts_with("postgres") || url.starts_with("mysql") {
            Err(StoreError::InvalidUrl(format!(
                "{} is not supported yet; use sqlite://PATH",
                url.split(':').next().unwrap_or_default()
            )))
        } else {
            Err(StoreError::InvalidUrl(format!(
                "'{url}' names no known backend; expected sqlite://PATH"
            )))
        }
    }
}

/// Forwards each listed method to the backend of the current variant.
macro_rules! delegate {
    ($( $(#[$meta:meta])* fn $name:ident(&self $(, $arg:ident : $ty:ty)* ) -> $ret:ty; )*) => {
        impl Store {
            $(
                $(#[$meta])*
                pub async fn $name(&self $(, $arg: $ty)*) -> $ret {
                    match self {
                        Store::Sqlite(backend) => backend.$name($($arg),*).await,
                    }
                }
            )*
        }
    };
}

delegate! {
    /// Closes the connection pool.
    fn close(&self) -> ();

    // ---- groups
    /// Inserts a group and returns it with its id.
    fn insert_group(&self, group: &Group) -> StoreResult<Group>;
    /// Replaces a group's editable fields; false when it does not exist.
    fn update_group(&self, group: &Group) -> StoreResult<bool>;
    /// Deletes a group; false when it did not exist.
    fn delete_group(&self, id: i64) -> StoreResult<bool>;
    fn get_group(&self, id: i64) -> StoreResult<Option<Group>>;
    fn get_group_by_app(&self, app_name: &str) -> StoreResult<Option<Group>>;
    /// Groups whose app name contains `app_name_filter`, by id.
    fn list_groups(&self, app_name_filter: &str, offset: i64, limit: i64) -> StoreResult<Vec<Group>>;
    /// Number of jobs in a group.
    fn count_jobs_in_group(&self, group_id: i64) -> StoreResult<i64>;

    // ---- jobs
    /// Inserts a job and returns it with its id.
    fn insert_job(&self, job: &Job) -> StoreResult<Job>;
    /// Replaces a job's editable fields (not its scheduling state, which only `set_job_schedule`
    /// and the schedule round write); false when it does not exist.
    fn update_job(&self, job: &Job) -> StoreResult<bool>;
    /// Deletes a job and its log rows; false when it did not exist.
    fn delete_job(&self, id: i64) -> StoreResult<bool>;
    fn get_job(&self, id: i64) -> StoreResult<Option<Job>>;
    fn get_jobs(&self, ids: &[i64]) -> StoreResult<Vec<Job>>;
    fn list_jobs(&self, filter: &JobFilter) -> StoreResult<Vec<Job>>;
    /// Ids among `ids` with no job.
    fn missing_job_ids(&self, ids: &[i64]) -> StoreResult<Vec<i64>>;
    /// Sets status and fire times (StartJob/StopJob); false when the job does not exist.
    fn set_job_schedule(&self, update: JobScheduleUpdate) -> StoreResult<bool>;
    /// Number of jobs.
    fn count_jobs(&self) -> StoreResult<i64>;

    // ---- schedule
    /// Creates or re-registers an admin node; returns its new epoch.
    fn register_node(&self, node_id: &str, now_ms: i64, lease_ms: i64) -> StoreResult<i64>;
    /// Extends a node's lease; false when another start took its epoch.
    fn renew_node(&self, node_id: &str, epoch: i64, lease_until_ms: i64) -> StoreResult<bool>;
    /// Locks, reads jobs due before `window_end_ms`, applies `plan`, writes, commits.
    fn run_schedule_round(
        &self,
        window_end_ms: i64,
        limit: i64,
        plan: &mut (dyn FnMut(Vec<Job>) -> RoundPlan + Send)
    ) -> StoreResult<(usize, Vec<InsertedRun>)>;
    /// Takes over PENDING runs of dead nodes and of this node's older epochs.
    fn adopt_orphan_runs(&self, node_id: &str, epoch: i64, now_ms: i64) -> StoreResult<Vec<RunLog>>;
    /// Marks PENDING runs owned by this node/epoch as dispatching; returns those it claimed.
    fn claim_runs(&self, ids: &[i64], node_id: &str, epoch: i64, now_ms: i64) -> StoreResult<Vec<RunLog>>;
    /// Marks PENDING runs skipped with a reason (misfire at recovery).
    fn skip_runs(&self, ids: &[i64], reason: &str, now_ms: i64) -> StoreResult<()>;
    /// Marks a job's planned (PENDING, scheduled) fires skipped: the job was stopped or rescheduled.
    fn skip_planned_fires(&self, job_id: i64, reason: &str, now_ms: i64) -> StoreResult<u64>;

    // ---- logs
    /// Inserts runs (manual triggers, retries); returns their ids in order.
    fn insert_runs(&self, runs: &[NewRun]) -> StoreResult<Vec<i64>>;
    /// Records dispatch outcomes in one transaction.
    fn record_dispatches(&self, records: &[DispatchRecord]) -> StoreResult<()>;
    /// Applies executor results to runs not yet final; returns the runs that changed.
    fn complete_runs(&self, completions: &[RunCompletion]) -> StoreResult<Vec<RunLog>>;
    fn get_log(&self, id: i64) -> StoreResult<Option<RunLog>>;
    fn list_logs(&self, filter: &LogFilter) -> StoreResult<Vec<RunLog>>;

    // ---- registry
    /// Inserts or refreshes a live executor row owned by `ExecutorInfo::admin_node`.
    fn upsert_registry(&self, executor: &ExecutorInfo) -> StoreResult<()>;
    fn delete_registry(&self, executor_id: &str) -> StoreResult<()>;
    /// Registry rows owned by a node (at start: the sessions of this node's previous life).
    fn list_registry_of_node(&self, node_id: &str) -> StoreResult<Vec<ExecutorInfo>>;
}
