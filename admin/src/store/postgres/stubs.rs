//! STUB: generated placeholder for the postgres backend; every method is replaced by real SQL.

use super::PgStore;
use crate::model::*;
use crate::store::*;

#[allow(unused_variables)]
impl PgStore {
    pub async fn close(&self) {
        self.pool.close().await;
    }

    pub async fn insert_group(&self, group: &Group) -> StoreResult<Group> {
        Err(StoreError::Schema("postgres backend: insert_group is not written yet".to_string()))
    }

    pub async fn update_group(&self, group: &Group) -> StoreResult<bool> {
        Err(StoreError::Schema("postgres backend: update_group is not written yet".to_string()))
    }

    pub async fn delete_group(&self, id: i64) -> StoreResult<bool> {
        Err(StoreError::Schema("postgres backend: delete_group is not written yet".to_string()))
    }

    pub async fn get_group(&self, id: i64) -> StoreResult<Option<Group>> {
        Err(StoreError::Schema("postgres backend: get_group is not written yet".to_string()))
    }

    pub async fn get_group_by_app(&self, app_name: &str) -> StoreResult<Option<Group>> {
        Err(StoreError::Schema("postgres backend: get_group_by_app is not written yet".to_string()))
    }

    pub async fn list_groups(&self, app_name_filter: &str, offset: i64, limit: i64) -> StoreResult<Vec<Group>> {
        Err(StoreError::Schema("postgres backend: list_groups is not written yet".to_string()))
    }

    pub async fn count_jobs_in_group(&self, group_id: i64) -> StoreResult<i64> {
        Err(StoreError::Schema("postgres backend: count_jobs_in_group is not written yet".to_string()))
    }

    pub async fn insert_job(&self, job: &Job) -> StoreResult<Job> {
        Err(StoreError::Schema("postgres backend: insert_job is not written yet".to_string()))
    }

    pub async fn update_job(&self, job: &Job) -> StoreResult<bool> {
        Err(StoreError::Schema("postgres backend: update_job is not written yet".to_string()))
    }

    pub async fn delete_job(&self, id: i64) -> StoreResult<bool> {
        Err(StoreError::Schema("postgres backend: delete_job is not written yet".to_string()))
    }

    pub async fn get_job(&self, id: i64) -> StoreResult<Option<Job>> {
        Err(StoreError::Schema("postgres backend: get_job is not written yet".to_string()))
    }

    pub async fn get_jobs(&self, ids: &[i64]) -> StoreResult<Vec<Job>> {
        Err(StoreError::Schema("postgres backend: get_jobs is not written yet".to_string()))
    }

    pub async fn list_jobs(&self, filter: &JobFilter) -> StoreResult<Vec<Job>> {
        Err(StoreError::Schema("postgres backend: list_jobs is not written yet".to_string()))
    }

    pub async fn missing_job_ids(&self, ids: &[i64]) -> StoreResult<Vec<i64>> {
        Err(StoreError::Schema("postgres backend: missing_job_ids is not written yet".to_string()))
    }

    pub async fn set_job_schedule(&self, update: JobScheduleUpdate) -> StoreResult<bool> {
        Err(StoreError::Schema("postgres backend: set_job_schedule is not written yet".to_string()))
    }

    pub async fn count_jobs(&self) -> StoreResult<i64> {
        Err(StoreError::Schema("postgres backend: count_jobs is not written yet".to_string()))
    }

    pub async fn register_node(&self, node_id: &str, now_ms: i64, lease_ms: i64) -> StoreResult<i64> {
        Err(StoreError::Schema("postgres backend: register_node is not written yet".to_string()))
    }

    pub async fn renew_node(&self, node_id: &str, epoch: i64, lease_until_ms: i64) -> StoreResult<bool> {
        Err(StoreError::Schema("postgres backend: renew_node is not written yet".to_string()))
    }

    pub async fn adopt_orphan_runs(&self, node_id: &str, epoch: i64, now_ms: i64) -> StoreResult<Vec<RunLog>> {
        Err(StoreError::Schema("postgres backend: adopt_orphan_runs is not written yet".to_string()))
    }

    pub async fn claim_runs(&self, ids: &[i64], node_id: &str, epoch: i64, now_ms: i64) -> StoreResult<Vec<RunLog>> {
        Err(StoreError::Schema("postgres backend: claim_runs is not written yet".to_string()))
    }

    pub async fn skip_runs(&self, ids: &[i64], reason: &str, now_ms: i64) -> StoreResult<()> {
        Err(StoreError::Schema("postgres backend: skip_runs is not written yet".to_string()))
    }

    pub async fn skip_planned_fires(&self, job_id: i64, reason: &str, now_ms: i64) -> StoreResult<u64> {
        Err(StoreError::Schema("postgres backend: skip_planned_fires is not written yet".to_string()))
    }

    pub async fn insert_runs(&self, runs: &[NewRun]) -> StoreResult<Vec<i64>> {
        Err(StoreError::Schema("postgres backend: insert_runs is not written yet".to_string()))
    }

    pub async fn record_dispatches(&self, records: &[DispatchRecord]) -> StoreResult<()> {
        Err(StoreError::Schema("postgres backend: record_dispatches is not written yet".to_string()))
    }

    pub async fn complete_runs(&self, completions: &[RunCompletion]) -> StoreResult<Vec<RunLog>> {
        Err(StoreError::Schema("postgres backend: complete_runs is not written yet".to_string()))
    }

    pub async fn get_log(&self, id: i64) -> StoreResult<Option<RunLog>> {
        Err(StoreError::Schema("postgres backend: get_log is not written yet".to_string()))
    }

    pub async fn list_logs(&self, filter: &LogFilter) -> StoreResult<Vec<RunLog>> {
        Err(StoreError::Schema("postgres backend: list_logs is not written yet".to_string()))
    }

    pub async fn expand_broadcast(&self, log_id: i64, shard_total: i32, shards: &[NewRun], now_ms: i64) -> StoreResult<Vec<RunLog>> {
        Err(StoreError::Schema("postgres backend: expand_broadcast is not written yet".to_string()))
    }

    pub async fn refresh_log_report(&self, day_start_ms: i64, day_end_ms: i64, now_ms: i64) -> StoreResult<DayCounts> {
        Err(StoreError::Schema("postgres backend: refresh_log_report is not written yet".to_string()))
    }

    pub async fn list_log_report(&self, from_day_ms: i64, to_day_ms: i64) -> StoreResult<Vec<DayCounts>> {
        Err(StoreError::Schema("postgres backend: list_log_report is not written yet".to_string()))
    }

    pub async fn nth_newest_log_id(&self, group_id: Option<i64>, job_id: Option<i64>, n: i64) -> StoreResult<Option<i64>> {
        Err(StoreError::Schema("postgres backend: nth_newest_log_id is not written yet".to_string()))
    }

    pub async fn delete_logs_batch(&self, cleanup: &LogCleanup, limit: i64) -> StoreResult<u64> {
        Err(StoreError::Schema("postgres backend: delete_logs_batch is not written yet".to_string()))
    }

    pub async fn log_group_tokens(&self, log_ids: &[i64]) -> StoreResult<Vec<(i64, String)>> {
        Err(StoreError::Schema("postgres backend: log_group_tokens is not written yet".to_string()))
    }

    pub async fn upsert_registry(&self, executor: &ExecutorInfo) -> StoreResult<()> {
        Err(StoreError::Schema("postgres backend: upsert_registry is not written yet".to_string()))
    }

    pub async fn delete_registry(&self, executor_id: &str) -> StoreResult<()> {
        Err(StoreError::Schema("postgres backend: delete_registry is not written yet".to_string()))
    }

    pub async fn list_registry_of_node(&self, node_id: &str) -> StoreResult<Vec<ExecutorInfo>> {
        Err(StoreError::Schema("postgres backend: list_registry_of_node is not written yet".to_string()))
    }

    pub async fn claim_followups(&self, node_id: &str, epoch: i64, limit: i64) -> StoreResult<Vec<RunLog>> {
        Err(StoreError::Schema("postgres backend: claim_followups is not written yet".to_string()))
    }

    pub async fn adopt_stale_followups(&self, node_id: &str, epoch: i64, now_ms: i64) -> StoreResult<Vec<RunLog>> {
        Err(StoreError::Schema("postgres backend: adopt_stale_followups is not written yet".to_string()))
    }

    pub async fn write_followup(&self, write: &FollowupWrite) -> StoreResult<FollowupWritten> {
        Err(StoreError::Schema("postgres backend: write_followup is not written yet".to_string()))
    }

    pub async fn finish_followups(&self, log_ids: &[i64], alarm_status: i32) -> StoreResult<()> {
        Err(StoreError::Schema("postgres backend: finish_followups is not written yet".to_string()))
    }

    pub async fn due_delayed_runs(&self, node_id: &str, epoch: i64, now_ms: i64, limit: i64) -> StoreResult<Vec<i64>> {
        Err(StoreError::Schema("postgres backend: due_delayed_runs is not written yet".to_string()))
    }

    pub async fn running_runs(&self, limit: i64) -> StoreResult<Vec<RunLog>> {
        Err(StoreError::Schema("postgres backend: running_runs is not written yet".to_string()))
    }

    pub async fn stranded_dispatches(&self, node_id: &str, epoch: i64, now_ms: i64, claimed_before_ms: i64) -> StoreResult<Vec<RunLog>> {
        Err(StoreError::Schema("postgres backend: stranded_dispatches is not written yet".to_string()))
    }

    pub async fn mark_lost(&self, log_id: i64, message: &str, now_ms: i64) -> StoreResult<bool> {
        Err(StoreError::Schema("postgres backend: mark_lost is not written yet".to_string()))
    }

    pub async fn live_addresses_of_other_nodes(&self, node_id: &str, heartbeat_after_ms: i64) -> StoreResult<Vec<String>> {
        Err(StoreError::Schema("postgres backend: live_addresses_of_other_nodes is not written yet".to_string()))
    }

    pub async fn run_schedule_round(
        &self,
        window_end_ms: i64,
        limit: i64,
        plan: &mut (dyn FnMut(Vec<Job>) -> RoundPlan + Send),
    ) -> StoreResult<(usize, Vec<InsertedRun>)> {
        Err(StoreError::Schema("postgres backend: run_schedule_round is not written yet".to_string()))
    }
}
