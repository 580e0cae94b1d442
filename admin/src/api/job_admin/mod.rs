//! `JobAdmin`: the management API behind the CLI, the console, grpcurl and automation.
//!
//! One service, its handlers by concept: `groups`, `jobs` (definitions and their schedule
//! state), `runs` (trigger, logs, kill, read log), `schedule` (preview), `operations`
//! (dashboard, log clean-up, executors). This file holds the service and the thin `JobAdmin`
//! shell that maps each RPC to its handler.
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
mod workflow_runs;
mod workflows;
mod write_locks;

use std::sync::Arc;

use tonic::{Request, Response, Status};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::convert::{executor_to_pb, job_to_pb, log_to_pb, required, user_to_pb};
use crate::auth::{Authenticator, Caller, Permission, Scope};
use crate::context::AdminContext;
use crate::error::Error;
use crate::model::validate::JobLimits;
use crate::model::{GroupId, JobId, LogId};
use crate::store::Store;
use crate::store::writer_gate::api_write;

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
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageGroups, Scope::Any)?;
        let wire_group = required(request.into_inner().group, "group")?;
        let group = api_write(self.create_group_checked(wire_group)).await?;
        self.audit(
            &caller,
            "CreateGroup",
            group_object(GroupId(group.id)),
            group_summary(&group),
        )
        .await;
        reply(Ok(pb::CreateGroupResponse { group: Some(group) }))
    }

    async fn update_group(
        &self,
        request: Request<pb::UpdateGroupRequest>,
    ) -> RpcResult<pb::UpdateGroupResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageGroups, Scope::Any)?;
        let wire_group = required(request.into_inner().group, "group")?;
        let (group, token_changed) = api_write(self.update_group_checked(wire_group)).await?;
        let summary = format!(
            "{}{}",
            group_summary(&group),
            if token_changed {
                ", access token changed"
            } else {
                ""
            }
        );
        self.audit(
            &caller,
            "UpdateGroup",
            group_object(GroupId(group.id)),
            summary,
        )
        .await;
        reply(Ok(pb::UpdateGroupResponse { group: Some(group) }))
    }

    async fn delete_group(
        &self,
        request: Request<pb::DeleteGroupRequest>,
    ) -> RpcResult<pb::DeleteGroupResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageGroups, Scope::Any)?;
        let id = GroupId(request.into_inner().id);
        api_write(self.delete_group_checked(id)).await?;
        self.audit(&caller, "DeleteGroup", group_object(id), String::new())
            .await;
        reply(Ok(pb::DeleteGroupResponse {}))
    }

    async fn get_group(
        &self,
        request: Request<pb::GetGroupRequest>,
    ) -> RpcResult<pb::GetGroupResponse> {
        let caller = self.caller(&request).await?;
        let group = self
            .visible_group(&caller, GroupId(request.into_inner().id))
            .await?;
        reply(Ok(pb::GetGroupResponse {
            group: Some(self.group_masked(group)),
        }))
    }

    async fn list_groups(
        &self,
        request: Request<pb::ListGroupsRequest>,
    ) -> RpcResult<pb::ListGroupsResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::Read, Scope::Any)?;
        let mut page = self
            .list_groups_page(request.into_inner(), caller.readable_groups())
            .await?;
        page.groups
            .retain(|group| caller.may_read(GroupId(group.id)));
        reply(Ok(page))
    }

    async fn create_job(
        &self,
        request: Request<pb::CreateJobRequest>,
    ) -> RpcResult<pb::CreateJobResponse> {
        let caller = self.caller(&request).await?;
        let wire_job = required(request.into_inner().job, "job")?;
        caller.require(
            Permission::Operate,
            Scope::Group(GroupId(wire_job.group_id)),
        )?;
        self.check_child_links(&caller, &job_ids(&wire_job.child_job_ids), &[])
            .await?;
        let job = api_write(self.create_job_checked(wire_job)).await?;
        self.audit(&caller, "CreateJob", job_object(job.id), job_summary(&job))
            .await;
        reply(Ok(pb::CreateJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn update_job(
        &self,
        request: Request<pb::UpdateJobRequest>,
    ) -> RpcResult<pb::UpdateJobResponse> {
        let caller = self.caller(&request).await?;
        let wire_job = required(request.into_inner().job, "job")?;
        // Both the group the job is in and the one it moves to.
        let current = self.visible_job(&caller, JobId(wire_job.id)).await?;
        caller.require(Permission::Operate, Scope::Group(current.group_id))?;
        caller.require(
            Permission::Operate,
            Scope::Group(GroupId(wire_job.group_id)),
        )?;
        let wanted = job_ids(&wire_job.child_job_ids);
        self.check_child_links(&caller, &wanted, &current.child_job_ids)
            .await?;
        let job = api_write(self.update_job_checked(wire_job)).await?;
        self.audit(&caller, "UpdateJob", job_object(job.id), job_summary(&job))
            .await;
        reply(Ok(pb::UpdateJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn delete_job(
        &self,
        request: Request<pb::DeleteJobRequest>,
    ) -> RpcResult<pb::DeleteJobResponse> {
        let caller = self.caller(&request).await?;
        let id = JobId(request.into_inner().id);
        let job = self.visible_job(&caller, id).await?;
        caller.require(Permission::Operate, Scope::Group(job.group_id))?;
        api_write(self.delete_job_checked(id)).await?;
        self.audit(&caller, "DeleteJob", job_object(id), job_summary(&job))
            .await;
        reply(Ok(pb::DeleteJobResponse {}))
    }

    async fn get_job(&self, request: Request<pb::GetJobRequest>) -> RpcResult<pb::GetJobResponse> {
        let caller = self.caller(&request).await?;
        let job = self
            .visible_job(&caller, JobId(request.into_inner().id))
            .await?;
        reply(Ok(pb::GetJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn list_jobs(
        &self,
        request: Request<pb::ListJobsRequest>,
    ) -> RpcResult<pb::ListJobsResponse> {
        let caller = self.caller(&request).await?;
        let request = request.into_inner();
        caller.require(Permission::Read, group_scope(request.group_id))?;
        let mut page = self
            .list_jobs_page(request, caller.readable_groups())
            .await?;
        page.jobs
            .retain(|job| caller.may_read(GroupId(job.group_id)));
        reply(Ok(page))
    }

    async fn start_job(
        &self,
        request: Request<pb::StartJobRequest>,
    ) -> RpcResult<pb::StartJobResponse> {
        let caller = self.caller(&request).await?;
        let id = JobId(request.into_inner().id);
        self.require_in_job(&caller, Permission::Operate, id)
            .await?;
        let job = api_write(self.start_job_checked(id)).await?;
        self.audit(&caller, "StartJob", job_object(id), String::new())
            .await;
        reply(Ok(pb::StartJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn stop_job(
        &self,
        request: Request<pb::StopJobRequest>,
    ) -> RpcResult<pb::StopJobResponse> {
        let caller = self.caller(&request).await?;
        let id = JobId(request.into_inner().id);
        self.require_in_job(&caller, Permission::Operate, id)
            .await?;
        let job = api_write(self.stop_job_checked(id)).await?;
        self.audit(&caller, "StopJob", job_object(id), String::new())
            .await;
        reply(Ok(pb::StopJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn trigger_job(
        &self,
        request: Request<pb::TriggerJobRequest>,
    ) -> RpcResult<pb::TriggerJobResponse> {
        let caller = self.caller(&request).await?;
        // A caller's W3C trace context makes the run part of the caller's trace (only read
        // when tracing is on; a malformed header is ignored).
        let caller_trace = crate::telemetry::tracer()
            .and_then(|_| request.metadata().get("traceparent"))
            .and_then(|value| value.to_str().ok())
            .and_then(crate::telemetry::parse_traceparent)
            .map(|context| crate::telemetry::traceparent(&context))
            .unwrap_or_default();
        let request = request.into_inner();
        let job = self.visible_job(&caller, JobId(request.id)).await?;
        caller.require(Permission::Operate, Scope::Group(job.group_id))?;
        self.check_override_addresses(&caller, &job, &request.addresses)
            .await?;
        let summary = trigger_summary(&request);
        let log_ids = api_write(self.trigger_job_checked(request, caller_trace)).await?;
        let summary = format!("{summary}, log ids {log_ids:?}");
        self.audit(&caller, "TriggerJob", job_object(job.id), summary)
            .await;
        reply(Ok(pb::TriggerJobResponse { log_ids }))
    }

    async fn preview_schedule(
        &self,
        request: Request<pb::PreviewScheduleRequest>,
    ) -> RpcResult<pb::PreviewScheduleResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::Read, Scope::Any)?;
        reply(self.preview(request.into_inner()).await)
    }

    async fn list_logs(
        &self,
        request: Request<pb::ListLogsRequest>,
    ) -> RpcResult<pb::ListLogsResponse> {
        let caller = self.caller(&request).await?;
        let request = request.into_inner();
        caller.require(Permission::Read, group_scope(request.group_id))?;
        let mut page = self
            .list_logs_page(request, caller.readable_groups())
            .await?;
        page.logs
            .retain(|log| caller.may_read(GroupId(log.group_id)));
        reply(Ok(page))
    }

    async fn get_log(&self, request: Request<pb::GetLogRequest>) -> RpcResult<pb::GetLogResponse> {
        let caller = self.caller(&request).await?;
        let run = self
            .visible_log(&caller, LogId(request.into_inner().id))
            .await?;
        reply(Ok(pb::GetLogResponse {
            log: Some(log_to_pb(run)),
        }))
    }

    async fn kill_run(
        &self,
        request: Request<pb::KillRunRequest>,
    ) -> RpcResult<pb::KillRunResponse> {
        let caller = self.caller(&request).await?;
        let log_id = LogId(request.into_inner().log_id);
        let run = self.visible_log(&caller, log_id).await?;
        caller.require(Permission::Operate, Scope::Group(run.group_id))?;
        let killed = self.kill_run_checked(log_id).await?;
        let summary = format!("killed {}", killed.killed);
        self.audit(&caller, "KillRun", format!("log:{log_id}"), summary)
            .await;
        reply(Ok(killed))
    }

    async fn read_run_log(
        &self,
        request: Request<pb::ReadRunLogRequest>,
    ) -> RpcResult<pb::ReadRunLogResponse> {
        let caller = self.caller(&request).await?;
        let request = request.into_inner();
        self.visible_log(&caller, LogId(request.log_id)).await?;
        reply(self.read_run_log_checked(request).await)
    }

    async fn update_glue(
        &self,
        request: Request<pb::UpdateGlueRequest>,
    ) -> RpcResult<pb::UpdateGlueResponse> {
        let caller = self.caller(&request).await?;
        let request = request.into_inner();
        let job_id = JobId(request.job_id);
        self.require_in_job(&caller, Permission::Operate, job_id)
            .await?;
        let summary = format!("remark '{}'", short(&request.glue_remark));
        let updated = crate::api::glue::update_glue(self.store(), request).await?;
        self.audit(&caller, "UpdateGlue", job_object(job_id), summary)
            .await;
        reply(Ok(updated))
    }

    async fn list_glue_versions(
        &self,
        request: Request<pb::ListGlueVersionsRequest>,
    ) -> RpcResult<pb::ListGlueVersionsResponse> {
        let caller = self.caller(&request).await?;
        let request = request.into_inner();
        self.require_in_job(&caller, Permission::Read, JobId(request.job_id))
            .await?;
        reply(crate::api::glue::list_glue_versions(self.store(), request).await)
    }

    async fn get_glue_version(
        &self,
        request: Request<pb::GetGlueVersionRequest>,
    ) -> RpcResult<pb::GetGlueVersionResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::Read, Scope::Any)?;
        let id = request.get_ref().id;
        let answer = crate::api::glue::get_glue_version(self.store(), request.into_inner()).await?;
        // The version names its job only once read; nothing is returned before the check, and
        // a version of a job the caller cannot see is answered as a missing version.
        let job_id = JobId(answer.version.as_ref().map_or(0, |version| version.job_id));
        if self.visible_job(&caller, job_id).await.is_err() {
            return Err(Error::NotFound(format!("glue version {id} not found")).into());
        }
        reply(Ok(answer))
    }

    async fn clear_logs(
        &self,
        request: Request<pb::ClearLogsRequest>,
    ) -> RpcResult<pb::ClearLogsResponse> {
        let caller = self.caller(&request).await?;
        let request = request.into_inner();
        let scope = match (request.group_id, request.job_id) {
            (0, 0) => Scope::AllGroups,
            (0, job_id) => Scope::Group(self.visible_job(&caller, JobId(job_id)).await?.group_id),
            (group_id, _) => Scope::Group(GroupId(group_id)),
        };
        caller.require(Permission::Operate, scope)?;
        if request.group_id != 0 && request.job_id != 0 {
            // A job of another group named with a granted group would widen the grant.
            let job = self.visible_job(&caller, JobId(request.job_id)).await?;
            caller.require(Permission::Operate, Scope::Group(job.group_id))?;
        }
        let summary = format!(
            "group {} job {} mode {}",
            request.group_id, request.job_id, request.mode
        );
        let cleared = self.clear_logs_checked(request).await?;
        let summary = format!("{summary}: {} deleted", cleared.deleted);
        self.audit(&caller, "ClearLogs", String::new(), summary)
            .await;
        reply(Ok(cleared))
    }

    async fn list_executors(
        &self,
        request: Request<pb::ListExecutorsRequest>,
    ) -> RpcResult<pb::ListExecutorsResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::Read, Scope::Any)?;
        let executors = self
            .ctx
            .registry
            .list_with_peers(&request.into_inner().app_name);
        let readable_apps = self.readable_app_names(&caller).await?;
        let executors = executors
            .into_iter()
            .filter(|executor| {
                readable_apps
                    .as_ref()
                    .is_none_or(|apps| apps.contains(&executor.app_name))
            })
            .map(executor_to_pb)
            .collect();
        reply(Ok(pb::ListExecutorsResponse { executors }))
    }

    async fn get_dashboard(
        &self,
        request: Request<pb::GetDashboardRequest>,
    ) -> RpcResult<pb::GetDashboardResponse> {
        let caller = self.caller(&request).await?;
        // Totals only (no group's objects): any authenticated caller.
        caller.require(Permission::Read, Scope::Any)?;
        let visible = caller.readable_groups();
        reply(self.dashboard(request.into_inner(), visible).await)
    }

    async fn create_user(
        &self,
        request: Request<pb::CreateUserRequest>,
    ) -> RpcResult<pb::CreateUserResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        reply(
            self.create_user_checked(&caller, request.into_inner())
                .await,
        )
    }

    async fn list_users(
        &self,
        request: Request<pb::ListUsersRequest>,
    ) -> RpcResult<pb::ListUsersResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        reply(self.list_users_all().await)
    }

    async fn delete_user(
        &self,
        request: Request<pb::DeleteUserRequest>,
    ) -> RpcResult<pb::DeleteUserResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        reply(
            self.delete_user_checked(&caller, request.into_inner().id)
                .await,
        )
    }

    async fn create_token(
        &self,
        request: Request<pb::CreateTokenRequest>,
    ) -> RpcResult<pb::CreateTokenResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        reply(
            self.create_token_checked(&caller, request.into_inner())
                .await,
        )
    }

    async fn list_tokens(
        &self,
        request: Request<pb::ListTokensRequest>,
    ) -> RpcResult<pb::ListTokensResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        reply(self.list_tokens_of(request.into_inner().user_id).await)
    }

    async fn revoke_token(
        &self,
        request: Request<pb::RevokeTokenRequest>,
    ) -> RpcResult<pb::RevokeTokenResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        reply(
            self.revoke_token_checked(&caller, request.into_inner().id)
                .await,
        )
    }

    async fn set_user_role(
        &self,
        request: Request<pb::SetUserRoleRequest>,
    ) -> RpcResult<pb::SetUserRoleResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        reply(self.set_role_checked(&caller, request.into_inner()).await)
    }

    async fn change_password(
        &self,
        request: Request<pb::ChangePasswordRequest>,
    ) -> RpcResult<pb::ChangePasswordResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ChangeOwnPassword, Scope::Any)?;
        reply(
            self.change_own_password(&caller, request.into_inner())
                .await,
        )
    }

    async fn reset_password(
        &self,
        request: Request<pb::ResetPasswordRequest>,
    ) -> RpcResult<pb::ResetPasswordResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        reply(
            self.reset_password_checked(&caller, request.into_inner())
                .await,
        )
    }

    async fn grant_group(
        &self,
        request: Request<pb::GrantGroupRequest>,
    ) -> RpcResult<pb::GrantGroupResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        let request = request.into_inner();
        let user = self
            .set_grant(&caller, request.user_id, GroupId(request.group_id), true)
            .await;
        reply(user.map(|user| pb::GrantGroupResponse { user: Some(user) }))
    }

    async fn revoke_group(
        &self,
        request: Request<pb::RevokeGroupRequest>,
    ) -> RpcResult<pb::RevokeGroupResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        let request = request.into_inner();
        let user = self
            .set_grant(&caller, request.user_id, GroupId(request.group_id), false)
            .await;
        reply(user.map(|user| pb::RevokeGroupResponse { user: Some(user) }))
    }

    async fn who_am_i(&self, request: Request<pb::WhoAmIRequest>) -> RpcResult<pb::WhoAmIResponse> {
        let caller = self.caller(&request).await?;
        reply(Ok(match caller {
            Caller::Open => pb::WhoAmIResponse {
                user: None,
                open: true,
            },
            Caller::User(user) => pb::WhoAmIResponse {
                user: Some(user_to_pb(user)),
                open: false,
            },
        }))
    }

    async fn list_audit(
        &self,
        request: Request<pb::ListAuditRequest>,
    ) -> RpcResult<pb::ListAuditResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ReadAudit, Scope::Any)?;
        reply(self.list_audit_page(request.into_inner()).await)
    }

    async fn backfill_job(
        &self,
        request: Request<pb::BackfillJobRequest>,
    ) -> RpcResult<pb::BackfillJobResponse> {
        let caller = self.caller(&request).await?;
        let backfill = self.backfill_job_checked(&caller, request.into_inner());
        reply(backfill.await.map(|backfill| pb::BackfillJobResponse {
            backfill: Some(backfill),
        }))
    }

    async fn get_backfill(
        &self,
        request: Request<pb::GetBackfillRequest>,
    ) -> RpcResult<pb::GetBackfillResponse> {
        let caller = self.caller(&request).await?;
        let found = self
            .visible_backfill(&caller, request.into_inner().id)
            .await;
        reply(found.map(|(_, backfill)| pb::GetBackfillResponse {
            backfill: Some(backfill),
        }))
    }

    async fn list_backfills(
        &self,
        request: Request<pb::ListBackfillsRequest>,
    ) -> RpcResult<pb::ListBackfillsResponse> {
        let caller = self.caller(&request).await?;
        let job_id = JobId(request.into_inner().job_id);
        let backfills = self.list_backfills_checked(&caller, job_id).await;
        reply(backfills.map(|backfills| pb::ListBackfillsResponse { backfills }))
    }

    async fn cancel_backfill(
        &self,
        request: Request<pb::CancelBackfillRequest>,
    ) -> RpcResult<pb::CancelBackfillResponse> {
        let caller = self.caller(&request).await?;
        let cancelled = self.cancel_backfill_checked(&caller, request.into_inner().id);
        reply(cancelled.await.map(|backfill| pb::CancelBackfillResponse {
            backfill: Some(backfill),
        }))
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
}
