//! All SQL of the admin. The only module that imports `sqlx`.
//!
//! `Store` is chosen by URL (`sqlite://…`, `postgres://…`, `mysql://…`/`mariadb://…`). Most
//! methods run one implementation written once over the `Dialect` trait (`shared/`, forwarded
//! by `shared!`); the few whose SQL genuinely differs per database are forwarded by `delegate!`
//! to the backend modules. Rows are mapped to `model` types here; callers never see a database
//! type.
//!
//! The schedule round (`run_schedule_round`) is the one place that holds the schedule lock: it
//! reads due jobs, lets the caller's pure planning closure decide, then writes the fires and the
//! next fire times in the same transaction.

mod batch_json;
#[cfg(test)]
pub(crate) mod conformance;
mod dialect;
mod driver;
mod error;
pub mod liveness;
mod log_storage;
mod mysql;
mod pooled;
mod postgres;
mod round;
mod shared;
mod sql;
mod sqlite;
pub mod writer_gate;
pub mod xxl_source;

pub use error::{StoreError, StoreResult};
pub use log_storage::LogStorage;
pub use round::{JobScheduleUpdate, RoundPlan};
pub use shared::overlap::Parked;

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::overlap::Overlap;
use crate::model::{
    AlarmStatus, ApiToken, AuditEntry, Backfill, BackfillProgress, Calendar, ConsoleSession,
    ExecutorInfo, GlueEdit, GlueVersion, Group, GroupId, Job, JobId, JobStatus, LogFilter, LogId,
    NewRun, NodeIdentity, Role, RunLog, RunStatus, User, Workflow, WorkflowId,
};

/// Filters of `ListJobs`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobFilter {
    pub group_id: Option<GroupId>,
    /// Only jobs of these groups (a caller's grants); `None` = every group.
    pub group_ids: Option<Vec<GroupId>>,
    pub status: Option<JobStatus>,
    pub name: Option<String>,
    pub handler: Option<String>,
    pub author: Option<String>,
    /// `None` = by id.
    pub order: Option<crate::model::ListOrder>,
    pub offset: i64,
    pub limit: i64,
}

/// A run a callback reports on, with what the callback is checked against.
#[derive(Debug, Clone, PartialEq)]
pub struct CallbackTarget {
    pub log_id: LogId,
    pub status: RunStatus,
    /// Where the run was dispatched; empty until its dispatch is recorded.
    pub executor_address: String,
    pub app_name: String,
    pub access_token: String,
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
    pub log_id: LogId,
    pub outcome: DispatchOutcome,
    pub trigger_code: i32,
    pub trigger_msg: String,
    pub executor_address: String,
    pub finished_ms: i64,
    /// The run's trace id when it is traced (sampled), else empty: written on the row.
    pub trace_id: String,
}

/// A result reported by an executor.
#[derive(Debug, Clone, PartialEq)]
pub struct RunCompletion {
    pub log_id: LogId,
    pub status: RunStatus,
    pub handle_code: i32,
    pub handle_msg: String,
    pub finished_ms: i64,
}

/// The store, one variant per backend.
#[derive(Clone)]
pub enum Store {
    Sqlite(sqlite::SqliteStore),
    Postgres(postgres::PgStore),
    Mysql(mysql::MySqlStore),
}

impl Store {
    /// Connects to the database named by `url` and runs its embedded migrations.
    pub async fn connect(url: &str) -> StoreResult<Store> {
        if url.starts_with("sqlite:") {
            Ok(Store::Sqlite(sqlite::SqliteStore::connect(url).await?))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Store::Postgres(postgres::PgStore::connect(url).await?))
        } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            Ok(Store::Mysql(
                mysql::MySqlStore::connect(&url.replacen("mariadb://", "mysql://", 1)).await?,
            ))
        } else {
            Err(StoreError::InvalidUrl(format!(
                "'{url}' names no known backend; expected sqlite://PATH, postgres://… or mysql://…"
            )))
        }
    }
}

impl Store {
    /// Creates a new, uniquely named database on the PostgreSQL or MySQL server of `base_url`
    /// and returns its URL (test suites and benchmarks use one per run).
    pub async fn create_scratch_database(base_url: &str) -> StoreResult<String> {
        if base_url.starts_with("postgres") {
            postgres::create_scratch_database(base_url).await
        } else if base_url.starts_with("mysql") || base_url.starts_with("mariadb") {
            mysql::create_scratch_database(&base_url.replacen("mariadb://", "mysql://", 1)).await
        } else {
            Err(StoreError::InvalidUrl(format!(
                "'{base_url}' is not a database server URL"
            )))
        }
    }
}

/// Forwards each listed method to the backend of the current variant.
/// What a store call returns, as far as `xjob_database_errors_total` is concerned.
trait Outcome {
    fn count_error(&self);
}

impl Outcome for () {
    fn count_error(&self) {}
}

impl<T> Outcome for StoreResult<T> {
    /// Counts the database's own failures, not a refused write (`Conflict`), which callers
    /// expect.
    fn count_error(&self) {
        if let Err(StoreError::Unavailable(_) | StoreError::Corrupt(_) | StoreError::Schema(_)) =
            self
        {
            crate::metrics::database_errors().inc();
        }
    }
}

fn count_error(result: &impl Outcome) {
    result.count_error();
}

impl Store {
    /// `complete_runs_folding` with no dispatch outcome to fold in.
    pub async fn complete_runs(&self, completions: &[RunCompletion]) -> StoreResult<Vec<LogId>> {
        self.complete_runs_folding(completions, &[]).await
    }
}

macro_rules! delegate {
    ($( $(#[$meta:meta])* fn $name:ident(&self $(, $arg:ident : $ty:ty)* ) -> $ret:ty; )*) => {
        impl Store {
            $(
                $(#[$meta])*
                pub async fn $name(&self $(, $arg: $ty)*) -> $ret {
                    let result = match self {
                        Store::Sqlite(backend) => backend.$name($($arg),*).await,
                        Store::Postgres(backend) => backend.$name($($arg),*).await,
                        Store::Mysql(backend) => backend.$name($($arg),*).await,
                    };
                    count_error(&result);
                    result
                }
            )*
        }
    };
}

/// Forwards each listed method to its one implementation in `shared::MODULE`, run on the
/// pools of the current backend.
macro_rules! shared {
    ($( $(#[$meta:meta])* fn $name:ident(&self $(, $arg:ident : $ty:ty)* ) -> $ret:ty => $module:ident; )*) => {
        impl Store {
            $(
                $(#[$meta])*
                pub async fn $name(&self $(, $arg: $ty)*) -> $ret {
                    let result = match self {
                        Store::Sqlite(backend) => shared::$module::$name(backend.pools() $(, $arg)*).await,
                        Store::Postgres(backend) => shared::$module::$name(backend.pools() $(, $arg)*).await,
                        Store::Mysql(backend) => shared::$module::$name(backend.pools() $(, $arg)*).await,
                    };
                    count_error(&result);
                    result
                }
            )*
        }
    };
}

shared! {
    // ---- users, API tokens, group grants, audit (`auth/`)
    /// Inserts a user (no grants) and returns it with its id; a taken name is a conflict.
    fn insert_user(&self, user: &User) -> StoreResult<User> => auth;
    /// Deletes a user with its tokens and grants; false when it did not exist.
    fn delete_user(&self, id: i64) -> StoreResult<bool> => auth;
    fn count_users(&self) -> StoreResult<i64> => auth;
    /// A user with its grants.
    fn get_user(&self, id: i64) -> StoreResult<Option<User>> => auth;
    /// Every user with its grants, by id.
    fn list_users(&self) -> StoreResult<Vec<User>> => auth;
    /// A user by name, with its grants (console login).
    fn user_by_name(&self, name: &str) -> StoreResult<Option<User>> => auth;
    /// Changes a user's role (the caller checked that the user exists).
    fn set_user_role(&self, id: i64, role: Role) -> StoreResult<()> => auth;
    /// Replaces a user's password hash and ends all of that user's console sessions.
    fn set_user_password(&self, id: i64, password_hash: &str) -> StoreResult<()> => auth;
    // ---- web console sessions
    fn insert_console_session(&self, session: &ConsoleSession) -> StoreResult<()> => console;
    /// The session whose cookie hashes to `token_hash`, expired or not.
    fn console_session(&self, token_hash: &str) -> StoreResult<Option<ConsoleSession>> => console;
    fn delete_console_session(&self, token_hash: &str) -> StoreResult<()> => console;
    /// Deletes expired sessions; returns how many.
    fn prune_console_sessions(&self, now_ms: i64) -> StoreResult<u64> => console;
    fn grant_group(&self, user_id: i64, group_id: GroupId) -> StoreResult<()> => auth;
    /// False when there was no such grant.
    fn revoke_group(&self, user_id: i64, group_id: GroupId) -> StoreResult<bool> => auth;
    /// Stores a token by hash and returns it with its id.
    fn insert_token(&self, token: &ApiToken) -> StoreResult<ApiToken> => auth;
    fn token_by_hash(&self, token_hash: &str) -> StoreResult<Option<ApiToken>> => auth;
    fn list_tokens(&self, user_id: i64) -> StoreResult<Vec<ApiToken>> => auth;
    /// Marks a token revoked; returns its user id, `None` when it does not exist.
    fn revoke_token(&self, id: i64, now_ms: i64) -> StoreResult<Option<i64>> => auth;
    /// Appends an audit entry.
    fn insert_audit(&self, entry: &AuditEntry) -> StoreResult<()> => audit;
    /// A page of audit entries, newest first.
    fn list_audit(&self, offset: i64, limit: i64) -> StoreResult<Vec<AuditEntry>> => audit;
    /// Deletes at most `limit` audit entries older than `before_ms`; returns how many.
    fn prune_audit(&self, before_ms: i64, limit: i64) -> StoreResult<u64> => audit;
    // ---- groups
    /// Inserts a group and returns it with its id.
    fn insert_group(&self, group: &Group) -> StoreResult<Group> => groups;
    /// Replaces a group's editable fields; false when it does not exist.
    fn update_group(&self, group: &Group) -> StoreResult<bool> => groups;
    /// Deletes a group; false when it did not exist.
    fn delete_group(&self, id: GroupId) -> StoreResult<bool> => groups;
    fn get_group(&self, id: GroupId) -> StoreResult<Option<Group>> => groups;
    /// The groups of `ids` that exist, by id.
    fn get_groups(&self, ids: &[GroupId]) -> StoreResult<HashMap<GroupId, Arc<Group>>> => groups;
    fn get_group_by_app(&self, app_name: &str) -> StoreResult<Option<Group>> => groups;
    /// Groups whose app name contains `app_name_filter`, by id.
    fn list_groups(&self, app_name_filter: &str, offset: i64, limit: i64) -> StoreResult<Vec<Group>> => groups;
    /// The app name of every group, sorted (the online-executors gauge reports each).
    fn group_app_names(&self) -> StoreResult<Vec<String>> => groups;
    /// Every distinct group access token that is set.
    fn group_access_tokens(&self) -> StoreResult<Vec<String>> => groups;
    /// Number of jobs in a group.
    fn count_jobs_in_group(&self, group_id: GroupId) -> StoreResult<i64> => groups;

    // ---- calendars (`model::calendar`)
    /// A name taken already is `StoreError::Conflict`.
    fn insert_calendar(&self, calendar: &Calendar) -> StoreResult<()> => calendars;
    /// False when no calendar has its name.
    fn update_calendar(&self, calendar: &Calendar) -> StoreResult<bool> => calendars;
    fn delete_calendar(&self, name: &str) -> StoreResult<bool> => calendars;
    fn get_calendar(&self, name: &str) -> StoreResult<Option<Calendar>> => calendars;
    fn list_calendars(&self) -> StoreResult<Vec<Calendar>> => calendars;
    /// Ids of the jobs naming the calendar, ascending.
    fn jobs_using_calendar(&self, name: &str) -> StoreResult<Vec<JobId>> => calendars;
    // ---- jobs
    /// Inserts a job and returns it with its id.
    fn insert_job(&self, job: &Job) -> StoreResult<Job> => jobs;
    /// Replaces a job's editable fields (not its scheduling state, which only `set_job_schedule`
    /// and the schedule round write); false when it does not exist.
    fn update_job(&self, job: &Job) -> StoreResult<bool> => jobs;
    /// Deletes a job and its log rows; false when it did not exist.
    fn delete_job(&self, id: JobId) -> StoreResult<bool> => jobs;
    fn get_job(&self, id: JobId) -> StoreResult<Option<Job>> => jobs;
    fn get_jobs(&self, ids: &[JobId]) -> StoreResult<HashMap<JobId, Arc<Job>>> => jobs;
    fn list_jobs(&self, filter: &JobFilter) -> StoreResult<Vec<Job>> => jobs;
    /// How many jobs match `filter` (its page ignored).
    fn count_matching_jobs(&self, filter: &JobFilter) -> StoreResult<i64> => jobs;
    /// Ids among `ids` with no job.
    fn missing_job_ids(&self, ids: &[JobId]) -> StoreResult<Vec<JobId>> => jobs;
    /// Sets status and fire times (StartJob/StopJob); false when the job does not exist.
    fn set_job_schedule(&self, update: JobScheduleUpdate) -> StoreResult<bool> => jobs;
    /// Number of jobs.
    fn count_jobs(&self) -> StoreResult<i64> => jobs;
    // ---- glue versions (script jobs' source history)
    /// Sets a job's glue source and remark, saves them as a version (on the first edit, the
    /// replaced source too) and keeps the latest 30; false when the job does not exist.
    fn save_glue(&self, edit: &GlueEdit) -> StoreResult<bool> => glue;
    /// A job's saved glue versions, newest first.
    fn list_glue_versions(&self, job_id: JobId) -> StoreResult<Vec<GlueVersion>> => glue;
    fn get_glue_version(&self, id: i64) -> StoreResult<Option<GlueVersion>> => glue;
    // ---- workflows (graphs of jobs)
    /// Inserts a workflow and returns it with its id.
    fn insert_workflow(&self, workflow: &Workflow) -> StoreResult<Workflow> => workflows;
    /// Replaces a workflow's group, name, graph, schedule and params; false when it does not exist.
    fn update_workflow(&self, workflow: &Workflow) -> StoreResult<bool> => workflows;
    /// Deletes a workflow; false when it did not exist.
    fn delete_workflow(&self, id: WorkflowId) -> StoreResult<bool> => workflows;
    fn get_workflow(&self, id: WorkflowId) -> StoreResult<Option<Workflow>> => workflows;
    /// Workflows by id of the groups `group_ids` (`None` = every group), a page at a time.
    fn list_workflows(&self, group_ids: Option<&[GroupId]>, offset: i64, limit: i64) -> StoreResult<Vec<Workflow>> => workflows;
    // ---- workflow runs (a node starts once: its (run, node) key is written with its run)
    /// Writes a RUNNING workflow run, no node started yet; returns its id.
    fn insert_workflow_run(&self, run: &crate::model::workflow_run::NewWorkflowRun) -> StoreResult<i64> => workflow_runs;
    /// Starts a node with its run, once; `None` when the node started (or was skipped) before,
    /// or the run is no longer RUNNING at `generation`.
    fn start_workflow_node(&self, run_id: i64, generation: i64, key: &str, new_run: &NewRun, now_ms: i64) -> StoreResult<Option<LogId>> => workflow_runs;
    /// Marks a waiting node SKIPPED; false when it has started or been skipped before, or the
    /// run is no longer RUNNING at `generation`.
    fn skip_workflow_node(&self, run_id: i64, generation: i64, key: &str, now_ms: i64) -> StoreResult<bool> => workflow_runs;
    /// Records the end of the node running `log_id`; false when it is not running it any more.
    fn finish_workflow_node(&self, run_id: i64, log_id: LogId, state: crate::model::workflow_run::NodeState, now_ms: i64) -> StoreResult<bool> => workflow_runs;
    /// Ends a RUNNING workflow run; false when it ended before (or, given one, the run moved
    /// past `generation`).
    fn finish_workflow_run(&self, run_id: i64, status: crate::model::workflow_run::WorkflowRunStatus, generation: Option<i64>, now_ms: i64) -> StoreResult<bool> => workflow_runs;
    /// Retries or skips a node of a RUNNING or FAILED run as planned, once; false when the
    /// node or the run moved on since the plan was read.
    fn reopen_workflow_node(&self, reopen: &crate::model::workflow_reopen::Reopen) -> StoreResult<bool> => workflow_runs;
    /// A workflow run with its started and skipped nodes.
    fn get_workflow_run(&self, run_id: i64) -> StoreResult<Option<crate::model::workflow_run::WorkflowRun>> => workflow_runs;
    /// A workflow's runs, newest first, with their nodes.
    fn list_workflow_runs(&self, workflow_id: WorkflowId, offset: i64, limit: i64) -> StoreResult<Vec<crate::model::workflow_run::WorkflowRun>> => workflow_runs;
    /// Ids of the RUNNING workflow runs, newest first (the periodic re-advance).
    fn running_workflow_runs(&self, limit: i64) -> StoreResult<Vec<i64>> => workflow_runs;
    /// `(log id, run id, node key)` of the RUNNING workflow nodes running one of `log_ids`.
    fn running_workflow_nodes(&self, log_ids: &[LogId]) -> StoreResult<Vec<(LogId, i64, String)>> => workflow_runs;
    // ---- workflow schedules (each occurrence starts one run: its (workflow, time) key)
    /// Scheduled workflows whose next occurrence is at or before `now_ms`, soonest first.
    fn due_workflows(&self, now_ms: i64, limit: i64) -> StoreResult<Vec<Workflow>> => workflow_schedule;
    /// Moves a workflow's next occurrence from `due_ms` to `next_ms` with the occurrence's run;
    /// `None` when another claim came first.
    fn claim_workflow_occurrence(&self, workflow_id: i64, due_ms: i64, next_ms: i64, run: Option<&crate::model::workflow_run::NewWorkflowRun>) -> StoreResult<Option<crate::model::workflow_schedule::OccurrenceClaim>> => workflow_schedule;
    /// Starts the oldest WAITING scheduled run of each workflow (at most `limit`) with no
    /// scheduled run RUNNING; the ids started.
    fn start_waiting_workflow_runs(&self, limit: i64) -> StoreResult<Vec<i64>> => workflow_schedule;
    // ---- XXL-JOB import (`xjob import-xxl-job`)
    /// `(XXL-JOB job id, xjob job id)` of every job imported from `source`.
    fn xxl_imported_jobs(&self, source: &str) -> StoreResult<Vec<(i64, JobId)>> => xxl_import;
    /// Inserts an imported job with its glue versions and its import record, in one transaction.
    fn import_xxl_job(&self, import: &XxlJobImport) -> StoreResult<Job> => xxl_import;
    // ---- broadcast (SHARDING_BROADCAST shard rows)
    /// Sets `shard_total` on a RUNNING shard-0 run still at 1 and inserts the other shards
    /// already claimed (RUNNING, trigger time `now_ms`; a `fire_key` already present is skipped) => broadcast;
    /// returns every run to dispatch ordered by shard, or nothing when it was expanded before.
    fn expand_broadcast(&self, log_id: LogId, shard_total: i32, shards: &[NewRun], now_ms: i64) -> StoreResult<Vec<RunLog>> => broadcast;
    // ---- schedule
    /// The database's clock in epoch milliseconds: every time a node lease is written with or
    /// judged against (`register_node`, `renew_node`, the adoptions, `live_peers`) is read here,
    /// so admins agree on leases whatever their own clocks say.
    fn database_now_ms(&self) -> StoreResult<i64> => schedule;
    /// Creates or re-registers an admin node; returns its new epoch.
    fn register_node(&self, node_id: &str, now_ms: i64, lease_ms: i64) -> StoreResult<i64> => schedule;
    /// Extends a node's lease; false when another start took its epoch.
    fn renew_node(&self, node: &NodeIdentity, lease_until_ms: i64) -> StoreResult<bool> => schedule;
    /// Other nodes whose lease holds at `now_ms`, with their epoch (the liveness watch's list).
    fn live_peers(&self, node_id: &str, now_ms: i64) -> StoreResult<Vec<(String, i64)>> => schedule;
    /// Locks, reads jobs due before `window_end_ms`, applies `plan`, writes, commits. Returns
    /// the jobs read and the id of each planned run by position, aligned with
    /// `RoundPlan::new_runs`: `None` where its `fire_key` existed already (written before, by
    /// this admin or another), so that fire is not dispatched again.
    fn run_schedule_round(
        &self,
        window_end_ms: i64,
        limit: i64,
        plan: &mut (dyn FnMut(Vec<Job>) -> RoundPlan + Send)
    ) -> StoreResult<(usize, Vec<Option<LogId>>)> => schedule;
    // ---- partitions (`model::partition`; servers only, `None`/0 on SQLite)
    /// Marks this node active, takes free partitions up to its share (over the nodes marked
    /// active within `active_within_ms`) or releases those above it; returns the partitions it
    /// owns afterwards. `None` on SQLite, whose one scanning admin plans every job.
    fn rebalance_partitions(&self, node: &NodeIdentity, active_within_ms: i64) -> StoreResult<Option<Vec<i64>>> => partitions;
    /// Every partition row with its owner `(node, epoch)`, by number; none on SQLite.
    fn partition_owners(&self) -> StoreResult<Vec<crate::model::partition::PartitionRow>> => partitions;
    /// Releases every partition of this node (a clean stop).
    fn release_partitions(&self, node: &NodeIdentity) -> StoreResult<u64> => partitions;
    /// Frees the partitions of a node found dead at epochs up to `dead.epoch`.
    fn free_partitions_of(&self, dead: &NodeIdentity) -> StoreResult<u64> => partitions;
    /// `run_schedule_round` over the jobs of `partitions` this node/epoch still owns, locking
    /// their rows (and the schedule lock shared, so an older admin's round excludes it).
    fn run_partition_round(
        &self,
        node: &NodeIdentity,
        partitions: &[i64],
        window_end_ms: i64,
        limit: i64,
        plan: &mut (dyn FnMut(Vec<Job>) -> RoundPlan + Send)
    ) -> StoreResult<(usize, Vec<Option<LogId>>)> => partitions;
    // ---- monitor (the reads; follow-up claims and writes lock per dialect)
    /// Ids of PENDING runs of this node/epoch whose `dispatch_at_ms` (> 0) has come.
    fn due_delayed_runs(&self, node: &NodeIdentity, now_ms: i64, limit: i64) -> StoreResult<Vec<LogId>> => monitor;
    /// RUNNING runs that reached an executor (an address is recorded), oldest first.
    fn running_runs(&self, limit: i64) -> StoreResult<Vec<RunLog>> => monitor;
    /// Marks a RUNNING run LOST (handle code 500); false when it finished meanwhile.
    fn mark_lost(&self, log_id: LogId, message: &str, now_ms: i64) -> StoreResult<bool> => monitor;
    /// Addresses of executors whose session another admin holds (heartbeat after the given ms).
    fn live_addresses_of_other_nodes(&self, node_id: &str, heartbeat_after_ms: i64) -> StoreResult<Vec<String>> => monitor;
    // ---- claims, skips, the end of a follow-up claim
    /// Marks PENDING runs owned by this node/epoch as dispatching; returns those it claimed.
    fn claim_runs(&self, ids: &[LogId], node: &NodeIdentity, now_ms: i64) -> StoreResult<Vec<RunLog>> => claims;
    /// `claim_runs` of runs named with their jobs, returning only the ids claimed, for callers
    /// that hold the rest of each run already (the scan's own fires).
    fn claim_run_ids(&self, runs: &[(LogId, JobId)], node: &NodeIdentity, now_ms: i64) -> StoreResult<Vec<LogId>> => claims;
    /// Puts runs among `ids` that this node/epoch claimed but never sent (RUNNING, no address)
    /// back to PENDING; returns how many. For claims whose answer was lost (the connection
    /// dropped as it committed): the caller knows it sent none of them. Only rows carrying one
    /// of those claims' trigger times (`claim_times_ms`) are theirs: a run this node made its
    /// own since by another way (released, taken over) may be on its way to an executor.
    fn unclaim_unsent_runs(&self, ids: &[LogId], node: &NodeIdentity, claim_times_ms: &[i64]) -> StoreResult<u64> => claims;
    /// Ids among `ids` still RUNNING, unsent and owned by this node/epoch.
    fn owned_unsent_runs(&self, ids: &[LogId], node: &NodeIdentity) -> StoreResult<Vec<LogId>> => claims;
    /// Marks PENDING runs skipped with a reason (misfire at recovery).
    fn skip_runs(&self, ids: &[LogId], reason: &str, now_ms: i64) -> StoreResult<()> => claims;
    /// Marks a job's planned (PENDING, scheduled) fires skipped: the job was stopped or rescheduled.
    fn skip_planned_fires(&self, job_id: JobId, reason: &str, now_ms: i64) -> StoreResult<Vec<RunLog>> => claims;
    /// Ends the follow-up of claimed runs that need nothing written but their `alarm_status`,
    /// only of those still claimed by this node/epoch; returns how many it ended.
    fn finish_followups(&self, node: &NodeIdentity, log_ids: &[LogId], alarm_status: AlarmStatus) -> StoreResult<u64> => claims;
    // ---- follow-ups
    /// Writes one follow-up (retry row, child runs, final `alarm_status`, FIX_DELAY release) in
    /// one transaction, fenced by the claim: only while the run is still claimed (`alarm_status`
    /// -1) by `claim_node`/`claim_epoch`. Otherwise (another admin adopted the claim, or the
    /// follow-up was written already) it writes nothing and returns `fenced_off`.
    fn write_followup(&self, write: &FollowupWrite) -> StoreResult<FollowupWritten> => followups;
    /// Records the outcome of an alarm the follow-up queued (`alarm_status` 4, see
    /// `monitor::alarm_queue`): 2 sent or 3 failed, with `alarm_delivery`; false when the run no
    /// longer waits for it.
    fn record_alarm_delivery(&self, log_id: LogId, alarm_status: AlarmStatus, alarm_delivery: &str) -> StoreResult<bool> => followups;
    // ---- overlap policies (`model::overlap`)
    /// The job's RUNNING runs older than `before`, with their executors, and its WAITING runs.
    fn overlap_state(&self, job_id: JobId, before: LogId) -> StoreResult<Overlap> => overlap;
    /// Turns this node's claimed, unsent run WAITING with `message`, unless the job already
    /// has `max_waiting` waiting runs (0 = no bound).
    fn park_run(&self, log_id: LogId, job_id: JobId, node: &NodeIdentity, claimed_at_ms: i64, max_waiting: i64, message: &str) -> StoreResult<Parked> => overlap;
    /// Releases the oldest WAITING run of each job (at most `limit` jobs) with no RUNNING run
    /// left, as this node's claimed, unsent run; returns them to send.
    fn release_waiting(&self, node: &NodeIdentity, now_ms: i64, limit: i64) -> StoreResult<Vec<RunLog>> => overlap;
    // ---- adoption of gone admins' rows
    /// Takes over PENDING runs of dead nodes and of this node's older epochs.
    fn adopt_orphan_runs(&self, node: &NodeIdentity, now_ms: i64) -> StoreResult<Vec<RunLog>> => adoption;
    /// Takes over the PENDING runs of a node seen dead by its liveness lock (epochs up to
    /// `dead.epoch`), before its lease lapses.
    fn adopt_pending_of(&self, dead: &NodeIdentity, node: &NodeIdentity) -> StoreResult<Vec<RunLog>> => adoption;
    /// Takes over follow-up claims left unfinished: this node's own (an earlier epoch, or a
    /// write that failed; only its single follow-up task claims, so none is in progress when it
    /// calls this) and those of dead nodes.
    fn adopt_stale_followups(&self, node: &NodeIdentity, now_ms: i64) -> StoreResult<Vec<RunLog>> => adoption;
    /// RUNNING runs whose dispatch was never recorded (no address) by an admin that is gone: an
    /// earlier epoch of this node (at once: that process is over), or a dead node (only runs it
    /// claimed before `claimed_before_ms`, as its last Run calls may still be in flight).
    fn stranded_dispatches(&self, node: &NodeIdentity, now_ms: i64, claimed_before_ms: i64) -> StoreResult<Vec<RunLog>> => adoption;
    /// Takes over stranded runs among `ids` that no executor holds (fenced: still RUNNING, no
    /// address, owner's lease lapsed by `lease_now_ms`, the database's clock); the owner becomes
    /// this node/epoch, the trigger time `now_ms`.
    fn adopt_stranded(&self, ids: &[LogId], node: &NodeIdentity, now_ms: i64, lease_now_ms: i64) -> StoreResult<Vec<RunLog>> => adoption;
    /// RUNNING runs with no address (claimed, dispatch never recorded) owned by `dead` at its
    /// epoch or an earlier one: a node whose liveness lock was released, whose runs survivors
    /// take over through the executors' fence (`monitor::stranded`), oldest first.
    fn claimed_unsent_of(&self, dead: &NodeIdentity, limit: i64) -> StoreResult<Vec<RunLog>> => adoption;
    /// Takes over runs among `ids` still RUNNING, with no address and owned by `dead` (at its
    /// epoch or earlier), which every executor that could hold them fenced against `dead`:
    /// the owner becomes this node/epoch, the trigger time `now_ms`. No lease is judged: a
    /// late send by `dead` is refused by the executors.
    fn adopt_fenced(&self, ids: &[LogId], dead: &NodeIdentity, node: &NodeIdentity, now_ms: i64) -> StoreResult<Vec<RunLog>> => adoption;
    /// Marks stranded runs this node took over and will not send SKIPPED with `reason`.
    fn skip_adopted_stranded(&self, ids: &[LogId], node: &NodeIdentity, reason: &str, now_ms: i64) -> StoreResult<u64> => adoption;
    // ---- logs
    /// Inserts runs (manual triggers, retries); returns their ids in order.
    fn insert_runs(&self, runs: &[NewRun]) -> StoreResult<Vec<LogId>> => logs;
    /// Writes a new backfill; returns it with its id.
    fn insert_backfill(&self, backfill: &Backfill) -> StoreResult<Backfill> => backfills;
    fn get_backfill(&self, id: i64) -> StoreResult<Option<Backfill>> => backfills;
    /// The job's backfills, newest first (at most 200).
    fn list_backfills(&self, job_id: JobId) -> StoreResult<Vec<Backfill>> => backfills;
    /// How a backfill's created runs stand.
    fn backfill_progress(&self, id: i64) -> StoreResult<BackfillProgress> => backfills;
    fn backfills_progress(&self, ids: &[i64]) -> StoreResult<HashMap<i64, BackfillProgress>> => backfills;
    /// Cancels a RUNNING backfill; false when none by that id is running.
    fn cancel_backfill(&self, id: i64, now_ms: i64) -> StoreResult<bool> => backfills;
    /// Takes over RUNNING backfills of gone admins (and of this node's earlier epochs).
    fn adopt_backfills(&self, node: &NodeIdentity, now_ms: i64) -> StoreResult<u64> => backfills;
    /// The RUNNING backfills this node owns at its epoch.
    fn owned_backfills(&self, node: &NodeIdentity) -> StoreResult<Vec<Backfill>> => backfills;
    /// Writes the next occurrences' runs, their links and the cursor at once, fenced by owner
    /// and the `created` count read; `None` when the fence held.
    fn create_backfill_runs(&self, backfill: &Backfill, node: &NodeIdentity, runs: &[NewRun], now_ms: i64) -> StoreResult<Option<Vec<LogId>>> => backfills;
    /// Marks an owned backfill DONE (no occurrence left to create, none unfinished).
    fn finish_backfill(&self, id: i64, node: &NodeIdentity, now_ms: i64) -> StoreResult<bool> => backfills;
    /// (occurrence, log id) of each created run, in occurrence order.
    fn backfill_runs(&self, id: i64) -> StoreResult<Vec<(i64, LogId)>> => backfills;
    fn get_log(&self, id: LogId) -> StoreResult<Option<RunLog>> => logs;
    /// The job's RUNNING runs recorded as sent ahead (`model::SENT_AHEAD_NOTE`) to an executor
    /// that took them, whose instant is after `after_ms`: those an executor may still hold.
    fn held_runs(&self, job_id: JobId, after_ms: i64) -> StoreResult<Vec<RunLog>> => logs;
    /// Ids among `ids` that name no run (never written, or deleted since).
    fn missing_log_ids(&self, ids: &[LogId]) -> StoreResult<Vec<LogId>> => logs;
    fn list_logs(&self, filter: &LogFilter) -> StoreResult<Vec<RunLog>> => logs;
    /// How many runs match `filter` (its page ignored).
    fn count_matching_logs(&self, filter: &LogFilter) -> StoreResult<i64> => logs;
    /// How many runs match `filter`, counting no further than `limit + 1` (a cost that does
    /// not grow with the table).
    fn count_matching_logs_up_to(&self, filter: &LogFilter, limit: i64) -> StoreResult<i64> => logs;
    // ---- operations data (daily report, log clean-up, callback tokens)
    /// Recounts the runs triggered in `[day_start_ms, day_end_ms)` into the report row of that
    /// day (running = PENDING/RUNNING/WAITING, success = SUCCESS, failed = the rest but SKIPPED).
    fn refresh_log_report(&self, day_start_ms: i64, day_end_ms: i64, now_ms: i64) -> StoreResult<DayCounts> => report;
    /// The counts `refresh_log_report` would store for `[day_start_ms, day_end_ms)`, read from
    /// the log rows now, without writing (the dashboard's "today").
    fn count_log_day(&self, day_start_ms: i64, day_end_ms: i64) -> StoreResult<DayCounts> => report;
    /// The same counts per job (with its group and latest failed run), in one statement: the
    /// dashboard's "today" tiles and failing-jobs card, which must agree, add these up.
    fn count_log_day_by_job(&self, day_start_ms: i64, day_end_ms: i64) -> StoreResult<Vec<JobDayCounts>> => report;
    /// Report rows whose day starts in `[from_day_ms, to_day_ms]`, oldest first.
    /// First attempts of a group's fires scheduled in `[from_ms, to_ms)`, counted by final status
    /// and reason class (`overloaded`, `misfire`, or empty), for the benchmark harness.
    fn run_outcomes(&self, group_id: GroupId, from_ms: i64, to_ms: i64) -> StoreResult<Vec<OutcomeCount>> => report;
    fn list_log_report(&self, from_day_ms: i64, to_day_ms: i64) -> StoreResult<Vec<DayCounts>> => report;
    /// Id of the `n`-th newest run (by id) of the group/job filter; `None` when there are fewer.
    fn nth_newest_log_id(&self, group_id: Option<GroupId>, job_id: Option<JobId>, n: i64) -> StoreResult<Option<LogId>> => report;
    /// Deletes at most `limit` finished runs the clean-up selects (never PENDING or RUNNING ones);
    /// returns how many it deleted.
    fn delete_logs_batch(&self, cleanup: &LogCleanup, limit: i64) -> StoreResult<u64> => report;
    /// `(log id, access token)` for each of `log_ids` whose group has a token.
    fn log_group_tokens(&self, log_ids: &[LogId]) -> StoreResult<Vec<(LogId, String)>> => registry;
    /// What a callback for each existing run of `log_ids` is checked against.
    fn callback_targets(&self, log_ids: &[LogId]) -> StoreResult<Vec<CallbackTarget>> => registry;
    // ---- cluster (shared registry: every admin routes over the live rows of all admins)
    /// Registry rows of every owner whose heartbeat is after `heartbeat_after_ms`, by app and
    /// address.
    fn list_live_registry(&self, heartbeat_after_ms: i64) -> StoreResult<Vec<ExecutorInfo>> => registry;
    /// Deletes registry rows whose heartbeat is before `heartbeat_before_ms` (their owner died
    /// or lost its executor); returns how many.
    fn delete_stale_registry(&self, heartbeat_before_ms: i64) -> StoreResult<u64> => registry;
    // ---- registry
    /// Inserts or refreshes a live executor row owned by `ExecutorInfo::admin_node`.
    fn upsert_registry(&self, executor: &ExecutorInfo) -> StoreResult<()> => registry;
    fn delete_registry(&self, executor_id: &str) -> StoreResult<()> => registry;
    /// Registry rows owned by a node (at start: the sessions of this node's previous life).
    fn list_registry_of_node(&self, node_id: &str) -> StoreResult<Vec<ExecutorInfo>> => registry;
}

delegate! {
    /// Closes the connection pool.
    fn close(&self) -> ();
    /// SQLite: returns up to `max_pages` free pages to the file system (the file shrinks) and
    /// answers how many it freed; PostgreSQL and MySQL: nothing to do, 0.
    fn reclaim_space(&self, max_pages: i64) -> StoreResult<i64>;
    /// How many run rows the log table holds and the bytes it takes, for sizing (tests and
    /// docs/operations.md): see [`LogStorage`].
    fn log_storage(&self) -> StoreResult<LogStorage>;

    /// Moves the run id sequence so the next run's id is above `past`, never lowering it (the
    /// XXL-JOB import: run ids then never repeat an XXL-JOB log id, which its executors name
    /// their log files by).
    fn raise_log_ids_past(&self, past: i64) -> StoreResult<()>;

    // ---- logs (the batched writes differ per dialect)
    /// Records dispatch outcomes of `node`'s runs in one transaction. A FAILED or SKIPPED
    /// outcome (the run was not sent) is written only on a run `node` (and its epoch) still
    /// owns: one another admin took over meanwhile, and may have sent, is that admin's.
    fn record_dispatches(&self, node: &NodeIdentity, records: &[DispatchRecord]) -> StoreResult<()>;
    /// Applies executor results to runs not yet final; returns the ids of the runs this call
    /// finished (rows that were PENDING or RUNNING); a repeated or late result changes nothing.
    /// A run that becomes SUCCESS is marked as needing no follow-up (`alarm_status` 1) when its
    /// job has no child jobs and is not FIX_DELAY. The accepted dispatch outcomes in `accepted`
    /// (trigger code, message, address, trace id) are written on the runs this call finishes,
    /// in the same row update; the caller records the others itself (`trigger::recorder`).
    fn complete_runs_folding(&self, completions: &[RunCompletion], accepted: &[DispatchRecord]) -> StoreResult<Vec<LogId>>;

    // ---- follow-up claim (MySQL reads each final status on its own, see mysql/monitor.rs)
    /// Claims up to `limit` finished runs not followed up yet (`alarm_status` 0 → -1, owner =
    /// this node/epoch), oldest first.
    fn claim_followups(&self, node: &NodeIdentity, limit: i64) -> StoreResult<Vec<RunLog>>;
}

/// What the follow-up of one finished run writes, in one transaction.
///
/// The write is fenced by the claim: it happens only while the run is still claimed by
/// `claim_node`/`claim_epoch`. An admin that stalled after claiming, whose claim another admin
/// adopted (and maybe completed) meanwhile, writes nothing on resuming: no second child run, no
/// retry, no FIX_DELAY release, and the `alarm_status` stays as the adopter left it.
#[derive(Debug, Clone, PartialEq)]
pub struct FollowupWrite {
    pub log_id: LogId,
    /// The node that claimed the run (`claim_followups` / `adopt_stale_followups`).
    pub claim_node: String,
    /// That node's epoch at the claim.
    pub claim_epoch: i64,
    /// Nothing to alarm, alarm sent or alarm failed: a final status, never `Claimed`.
    pub alarm_status: AlarmStatus,
    /// Where the alarm went (`alarm_delivery`), empty when none was due.
    pub alarm_delivery: String,
    /// The next attempt, when the retry policy allows one (skipped if its fire_key exists).
    pub retry: Option<NewRun>,
    /// Runs of the child jobs to start (PENDING, dispatched by the follow-up loop).
    pub children: Vec<NewRun>,
    /// A broadcast shard: `children` are written only when every shard of the fire succeeded
    /// and this follow-up wins the fire's once-only claim.
    pub children_need_all_shards: bool,
    /// FIX_DELAY: the job's next fire, set only while no other run of the fire is open.
    pub fix_delay_release: Option<FixDelayRelease>,
}

/// A FIX_DELAY job's next fire after the final outcome of its fire at `scheduled_at_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixDelayRelease {
    pub job_id: JobId,
    pub scheduled_at_ms: i64,
    pub next_fire_ms: i64,
    /// The `trigger_next_ms` a job waiting for its fire's completion holds (compare-and-set).
    pub awaiting_ms: i64,
}

/// What a follow-up wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FollowupWritten {
    pub retry_id: Option<LogId>,
    pub child_ids: Vec<LogId>,
    /// Whether the FIX_DELAY job got its next fire time from this follow-up.
    pub released: bool,
    /// The claim was lost (adopted by another admin or another epoch, or the follow-up was
    /// written before): nothing was written, the other fields are empty.
    pub fenced_off: bool,
}

impl FollowupWritten {
    /// The result of a write refused by the claim fence.
    pub fn fenced_off() -> FollowupWritten {
        FollowupWritten {
            fenced_off: true,
            ..FollowupWritten::default()
        }
    }
}

/// One job `xjob import-xxl-job` writes: the job (status and fire times set), its glue
/// versions, and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct XxlJobImport {
    /// The XXL-JOB database (`host:port/database`).
    pub source: String,
    pub xxl_job_id: i64,
    pub job: Job,
    /// Saved versions, oldest first (their `id` and `job_id` are ignored).
    pub glue_versions: Vec<GlueVersion>,
    /// The xjob job an earlier import created for this XXL-JOB job, deleted since: its record
    /// is replaced.
    pub replaces: Option<JobId>,
    pub now_ms: i64,
}

/// Runs counted by status (`SUCCESS`, `FAILED`, `SKIPPED`, `LOST`, `PENDING`, `RUNNING` as
/// stored) and the class of their trigger message (`overloaded`, `misfire`, or empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeCount {
    pub status: String,
    pub reason: String,
    pub runs: i64,
}

/// One day's run counts in the report table (`xjob_log_report`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DayCounts {
    /// Start of the day in the admin's zone, epoch ms.
    pub day_ms: i64,
    pub running: i64,
    pub success: i64,
    /// Every final status but SUCCESS and SKIPPED (LOST included).
    pub failed: i64,
    pub lost: i64,
    pub skipped: i64,
    /// First attempts of scheduled fires (CRON, MISFIRE) sent more than 1 s after their time.
    pub late_fires: i64,
    /// The latest of those sends, in ms after its scheduled time (0 when none was late).
    pub max_lateness_ms: i64,
}

impl DayCounts {
    /// Adds another set of counts of the same day (late fires add up, the latest is the max).
    pub fn add(&mut self, other: &DayCounts) {
        self.running += other.running;
        self.success += other.success;
        self.failed += other.failed;
        self.lost += other.lost;
        self.skipped += other.skipped;
        self.late_fires += other.late_fires;
        self.max_lateness_ms = self.max_lateness_ms.max(other.max_lateness_ms);
    }
}

/// One job's runs of a day, counted as [`DayCounts`] (`day_ms` is the day's start).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobDayCounts {
    pub group_id: GroupId,
    pub job_id: JobId,
    pub counts: DayCounts,
    /// Trigger time of its latest run counted in `failed`; 0 when none failed.
    pub last_failed_ms: i64,
}

/// Which finished runs a clean-up deletes; every condition set must hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogCleanup {
    pub group_id: Option<GroupId>,
    pub job_id: Option<JobId>,
    /// Runs aged (trigger time, else scheduled time) before this instant.
    pub older_than_ms: Option<i64>,
    /// Runs with an id below this one (the oldest of those kept by "keep latest N").
    pub below_id: Option<LogId>,
}
