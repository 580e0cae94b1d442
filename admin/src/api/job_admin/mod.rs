//! `JobAdmin`: the management API behind the CLI, the console, grpcurl and automation.
//!
//! One service, its handlers by concept: `groups`, `jobs` (definitions and their schedule
//! state), `runs` (trigger, logs, kill, read log), `schedule` (preview), `operations`
//! (dashboard, log clean-up, executors), `users`, `backfills`, `calendars`, `workflows`. This
//! file holds the service and the thin `JobAdmin` shell that hands each RPC to its concept's
//! `…_rpc` method (authorization, the checked change, the audit row, the reply).
//!
//! Every handler is a thin shell over pure parts:
//!
//! ```text
//! request ─convert─▶ model ─validate (pure, then store lookups)─▶ store / trigger ─convert─▶ response
//! ```
//!
//! Nothing is written until every check passed. Errors name the request field
//! (`job.schedule_conf: …`), missing ids are `NOT_FOUND`, state conflicts are
//! `FAILED_PRECONDITION`, and contract parts this release does not run yet are `UNIMPLEMENTED`.
//! A job whose schedule starts or changes gets its next fire at ≥ now + 5 s, outside the scan's
//! pre-read window, and the scan is woken to pick it up. Child links never form a cycle: a
//! create or update whose children would lead back to a job is refused with the path.
//!
//! Access: every RPC starts with one authorization step (`access.rs`): the caller is resolved
//! from its bearer token (`auth::Authenticator`), then one permission is required in one scope
//! (the object's group, found before anything is written); list answers keep only the groups
//! the caller may read. Every successful change is recorded in the audit trail. Group access
//! tokens are only returned by the calls that set them (create/update); reads show a mask.

mod access;
mod backfills;
mod calendars;
mod groups;
mod ids;
mod jobs;
mod operations;
mod runs;
mod schedule;
mod summaries;
mod users;
use ids::{group_object, group_scope, job_ids, job_object};
use summaries::{group_summary, job_summary, short, trigger_summary};
mod workflow_nodes;
mod workflow_runs;
mod workflows;
mod write_locks;

use std::sync::Arc;

use tonic::{Request, Response, Status};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use crate::auth::Authenticator;
use crate::context::AdminContext;
use crate::error::Error;
use crate::model::validate::JobLimits;
use crate::store::Store;

type RpcResult<T> = Result<Response<T>, Status>;

/// Wraps a handler's outcome as a gRPC reply.
fn reply<T>(result: Result<T, Error>) -> RpcResult<T> {
    result.map(Response::new).map_err(Status::from)
}

/// The `JobAdmin` gRPC service.
pub struct JobAdminService {
    ctx: Arc<AdminContext>,
    /// Which job edits wait for each other (same job; added child links).
    job_writes: write_locks::JobWriteLocks,
    /// Resolves callers from their tokens (see `auth`).
    auth: Authenticator,
}

impl JobAdminService {
    pub fn new(ctx: Arc<AdminContext>) -> Self {
        let auth = Authenticator::new(
            ctx.store.clone(),
            std::sync::Arc::clone(&ctx.clock),
            crate::auth::startup::open_without_users(&ctx.config),
        );
        JobAdminService {
            ctx,
            job_writes: write_locks::JobWriteLocks::default(),
            auth,
        }
    }

    /// Resolves callers (the console asks it whether it runs open).
    pub fn authenticator(&self) -> &Authenticator {
        &self.auth
    }

    /// The configuration of the admin this service belongs to.
    pub fn config(&self) -> &crate::config::Config {
        &self.ctx.config
    }

    pub(super) fn store(&self) -> &Store {
        &self.ctx.store
    }

    pub(super) fn limits(&self) -> JobLimits {
        JobLimits {
            max_params_bytes: self.ctx.config.max_params_bytes,
            default_time_zone: self.ctx.config.default_time_zone(),
        }
    }
}

/// Status codes: UNAUTHENTICATED (no valid token), PERMISSION_DENIED (permission named),
/// INVALID_ARGUMENT (field named), NOT_FOUND (id), ALREADY_EXISTS (app name),
/// FAILED_PRECONDITION (state), UNIMPLEMENTED (later releases), UNAVAILABLE (database).
#[tonic::async_trait]
impl JobAdmin for JobAdminService {
    async fn create_group(
        &self,
        request: Request<pb::CreateGroupRequest>,
    ) -> RpcResult<pb::CreateGroupResponse> {
        self.create_group_rpc(request).await
    }

    async fn update_group(
        &self,
        request: Request<pb::UpdateGroupRequest>,
    ) -> RpcResult<pb::UpdateGroupResponse> {
        self.update_group_rpc(request).await
    }

    async fn delete_group(
        &self,
        request: Request<pb::DeleteGroupRequest>,
    ) -> RpcResult<pb::DeleteGroupResponse> {
        self.delete_group_rpc(request).await
    }

    async fn get_group(
        &self,
        request: Request<pb::GetGroupRequest>,
    ) -> RpcResult<pb::GetGroupResponse> {
        self.get_group_rpc(request).await
    }

    async fn list_groups(
        &self,
        request: Request<pb::ListGroupsRequest>,
    ) -> RpcResult<pb::ListGroupsResponse> {
        self.list_groups_rpc(request).await
    }

    async fn create_job(
        &self,
        request: Request<pb::CreateJobRequest>,
    ) -> RpcResult<pb::CreateJobResponse> {
        self.create_job_rpc(request).await
    }

    async fn update_job(
        &self,
        request: Request<pb::UpdateJobRequest>,
    ) -> RpcResult<pb::UpdateJobResponse> {
        self.update_job_rpc(request).await
    }

    async fn delete_job(
        &self,
        request: Request<pb::DeleteJobRequest>,
    ) -> RpcResult<pb::DeleteJobResponse> {
        self.delete_job_rpc(request).await
    }

    async fn get_job(&self, request: Request<pb::GetJobRequest>) -> RpcResult<pb::GetJobResponse> {
        self.get_job_rpc(request).await
    }

    async fn list_jobs(
        &self,
        request: Request<pb::ListJobsRequest>,
    ) -> RpcResult<pb::ListJobsResponse> {
        self.list_jobs_rpc(request).await
    }

    async fn start_job(
        &self,
        request: Request<pb::StartJobRequest>,
    ) -> RpcResult<pb::StartJobResponse> {
        self.start_job_rpc(request).await
    }

    async fn stop_job(
        &self,
        request: Request<pb::StopJobRequest>,
    ) -> RpcResult<pb::StopJobResponse> {
        self.stop_job_rpc(request).await
    }

    async fn trigger_job(
        &self,
        request: Request<pb::TriggerJobRequest>,
    ) -> RpcResult<pb::TriggerJobResponse> {
        self.trigger_job_rpc(request).await
    }

    async fn preview_schedule(
        &self,
        request: Request<pb::PreviewScheduleRequest>,
    ) -> RpcResult<pb::PreviewScheduleResponse> {
        self.preview_schedule_rpc(request).await
    }

    async fn list_logs(
        &self,
        request: Request<pb::ListLogsRequest>,
    ) -> RpcResult<pb::ListLogsResponse> {
        self.list_logs_rpc(request).await
    }

    async fn get_log(&self, request: Request<pb::GetLogRequest>) -> RpcResult<pb::GetLogResponse> {
        self.get_log_rpc(request).await
    }

    async fn kill_run(
        &self,
        request: Request<pb::KillRunRequest>,
    ) -> RpcResult<pb::KillRunResponse> {
        self.kill_run_rpc(request).await
    }

    async fn read_run_log(
        &self,
        request: Request<pb::ReadRunLogRequest>,
    ) -> RpcResult<pb::ReadRunLogResponse> {
        self.read_run_log_rpc(request).await
    }

    async fn update_glue(
        &self,
        request: Request<pb::UpdateGlueRequest>,
    ) -> RpcResult<pb::UpdateGlueResponse> {
        self.update_glue_rpc(request).await
    }

    async fn list_glue_versions(
        &self,
        request: Request<pb::ListGlueVersionsRequest>,
    ) -> RpcResult<pb::ListGlueVersionsResponse> {
        self.list_glue_versions_rpc(request).await
    }

    async fn get_glue_version(
        &self,
        request: Request<pb::GetGlueVersionRequest>,
    ) -> RpcResult<pb::GetGlueVersionResponse> {
        self.get_glue_version_rpc(request).await
    }

    async fn clear_logs(
        &self,
        request: Request<pb::ClearLogsRequest>,
    ) -> RpcResult<pb::ClearLogsResponse> {
        self.clear_logs_rpc(request).await
    }

    async fn list_executors(
        &self,
        request: Request<pb::ListExecutorsRequest>,
    ) -> RpcResult<pb::ListExecutorsResponse> {
        self.list_executors_rpc(request).await
    }

    async fn get_dashboard(
        &self,
        request: Request<pb::GetDashboardRequest>,
    ) -> RpcResult<pb::GetDashboardResponse> {
        self.get_dashboard_rpc(request).await
    }

    async fn create_user(
        &self,
        request: Request<pb::CreateUserRequest>,
    ) -> RpcResult<pb::CreateUserResponse> {
        self.create_user_rpc(request).await
    }

    async fn list_users(
        &self,
        request: Request<pb::ListUsersRequest>,
    ) -> RpcResult<pb::ListUsersResponse> {
        self.list_users_rpc(request).await
    }

    async fn delete_user(
        &self,
        request: Request<pb::DeleteUserRequest>,
    ) -> RpcResult<pb::DeleteUserResponse> {
        self.delete_user_rpc(request).await
    }

    async fn create_token(
        &self,
        request: Request<pb::CreateTokenRequest>,
    ) -> RpcResult<pb::CreateTokenResponse> {
        self.create_token_rpc(request).await
    }

    async fn list_tokens(
        &self,
        request: Request<pb::ListTokensRequest>,
    ) -> RpcResult<pb::ListTokensResponse> {
        self.list_tokens_rpc(request).await
    }

    async fn revoke_token(
        &self,
        request: Request<pb::RevokeTokenRequest>,
    ) -> RpcResult<pb::RevokeTokenResponse> {
        self.revoke_token_rpc(request).await
    }

    async fn set_user_role(
        &self,
        request: Request<pb::SetUserRoleRequest>,
    ) -> RpcResult<pb::SetUserRoleResponse> {
        self.set_user_role_rpc(request).await
    }

    async fn change_password(
        &self,
        request: Request<pb::ChangePasswordRequest>,
    ) -> RpcResult<pb::ChangePasswordResponse> {
        self.change_password_rpc(request).await
    }

    async fn reset_password(
        &self,
        request: Request<pb::ResetPasswordRequest>,
    ) -> RpcResult<pb::ResetPasswordResponse> {
        self.reset_password_rpc(request).await
    }

    async fn grant_group(
        &self,
        request: Request<pb::GrantGroupRequest>,
    ) -> RpcResult<pb::GrantGroupResponse> {
        self.grant_group_rpc(request).await
    }

    async fn revoke_group(
        &self,
        request: Request<pb::RevokeGroupRequest>,
    ) -> RpcResult<pb::RevokeGroupResponse> {
        self.revoke_group_rpc(request).await
    }

    async fn who_am_i(&self, request: Request<pb::WhoAmIRequest>) -> RpcResult<pb::WhoAmIResponse> {
        self.who_am_i_rpc(request).await
    }

    async fn list_audit(
        &self,
        request: Request<pb::ListAuditRequest>,
    ) -> RpcResult<pb::ListAuditResponse> {
        self.list_audit_rpc(request).await
    }

    async fn backfill_job(
        &self,
        request: Request<pb::BackfillJobRequest>,
    ) -> RpcResult<pb::BackfillJobResponse> {
        self.backfill_job_rpc(request).await
    }

    async fn get_backfill(
        &self,
        request: Request<pb::GetBackfillRequest>,
    ) -> RpcResult<pb::GetBackfillResponse> {
        self.get_backfill_rpc(request).await
    }

    async fn list_backfills(
        &self,
        request: Request<pb::ListBackfillsRequest>,
    ) -> RpcResult<pb::ListBackfillsResponse> {
        self.list_backfills_rpc(request).await
    }

    async fn cancel_backfill(
        &self,
        request: Request<pb::CancelBackfillRequest>,
    ) -> RpcResult<pb::CancelBackfillResponse> {
        self.cancel_backfill_rpc(request).await
    }

    async fn create_calendar(
        &self,
        request: Request<pb::CreateCalendarRequest>,
    ) -> RpcResult<pb::CreateCalendarResponse> {
        self.create_calendar_rpc(request).await
    }

    async fn update_calendar(
        &self,
        request: Request<pb::UpdateCalendarRequest>,
    ) -> RpcResult<pb::UpdateCalendarResponse> {
        self.update_calendar_rpc(request).await
    }

    async fn delete_calendar(
        &self,
        request: Request<pb::DeleteCalendarRequest>,
    ) -> RpcResult<pb::DeleteCalendarResponse> {
        self.delete_calendar_rpc(request).await
    }

    async fn get_calendar(
        &self,
        request: Request<pb::GetCalendarRequest>,
    ) -> RpcResult<pb::GetCalendarResponse> {
        self.get_calendar_rpc(request).await
    }

    async fn list_calendars(
        &self,
        request: Request<pb::ListCalendarsRequest>,
    ) -> RpcResult<pb::ListCalendarsResponse> {
        self.list_calendars_rpc(request).await
    }

    async fn create_workflow(
        &self,
        r: Request<pb::CreateWorkflowRequest>,
    ) -> RpcResult<pb::CreateWorkflowResponse> {
        self.create_workflow_rpc(r).await
    }

    async fn update_workflow(
        &self,
        r: Request<pb::UpdateWorkflowRequest>,
    ) -> RpcResult<pb::UpdateWorkflowResponse> {
        self.update_workflow_rpc(r).await
    }

    async fn get_workflow(
        &self,
        r: Request<pb::GetWorkflowRequest>,
    ) -> RpcResult<pb::GetWorkflowResponse> {
        self.get_workflow_rpc(r).await
    }

    async fn list_workflows(
        &self,
        r: Request<pb::ListWorkflowsRequest>,
    ) -> RpcResult<pb::ListWorkflowsResponse> {
        self.list_workflows_rpc(r).await
    }

    async fn delete_workflow(
        &self,
        r: Request<pb::DeleteWorkflowRequest>,
    ) -> RpcResult<pb::DeleteWorkflowResponse> {
        self.delete_workflow_rpc(r).await
    }

    async fn start_workflow(
        &self,
        r: Request<pb::StartWorkflowRequest>,
    ) -> RpcResult<pb::StartWorkflowResponse> {
        self.start_workflow_rpc(r).await
    }

    async fn get_workflow_run(
        &self,
        r: Request<pb::GetWorkflowRunRequest>,
    ) -> RpcResult<pb::GetWorkflowRunResponse> {
        self.get_workflow_run_rpc(r).await
    }

    async fn list_workflow_runs(
        &self,
        r: Request<pb::ListWorkflowRunsRequest>,
    ) -> RpcResult<pb::ListWorkflowRunsResponse> {
        self.list_workflow_runs_rpc(r).await
    }

    async fn cancel_workflow_run(
        &self,
        r: Request<pb::CancelWorkflowRunRequest>,
    ) -> RpcResult<pb::CancelWorkflowRunResponse> {
        self.cancel_workflow_run_rpc(r).await
    }

    async fn retry_workflow_node(
        &self,
        r: Request<pb::RetryWorkflowNodeRequest>,
    ) -> RpcResult<pb::RetryWorkflowNodeResponse> {
        self.retry_workflow_node_rpc(r).await
    }

    async fn skip_workflow_node(
        &self,
        r: Request<pb::SkipWorkflowNodeRequest>,
    ) -> RpcResult<pb::SkipWorkflowNodeResponse> {
        self.skip_workflow_node_rpc(r).await
    }
}
