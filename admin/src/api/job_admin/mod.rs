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
//! Security note: there is no user authentication yet, and `GetGroup`/`ListGroups` return each
//! group's `access_token` (the console needs it to show and edit it). Until user auth lands this
//! API must only be reachable from trusted networks (network policy, firewall, private
//! listener); executors only need `Registry`, which checks the tokens.

mod groups;
mod jobs;
mod operations;
mod runs;
mod schedule;

use std::sync::Arc;

use tokio::sync::Mutex;
use tonic::{Request, Response, Status};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::convert::{executor_to_pb, job_to_pb, log_to_pb, required};
use crate::context::AdminContext;
use crate::error::Error;
use crate::model::validate::JobLimits;
use crate::model::{Group, Job, RunLog};
use crate::store::Store;
use crate::store::writer_gate::api_write;

pub use jobs::SCHEDULE_CHANGE_DELAY_MS;

type RpcResult<T> = Result<Response<T>, Status>;

/// Wraps a handler's outcome as a gRPC reply.
fn reply<T>(result: Result<T, Error>) -> RpcResult<T> {
    result.map(Response::new).map_err(Status::from)
}

/// The `JobAdmin` gRPC service.
pub struct JobAdminService {
    ctx: Arc<AdminContext>,
    /// Held from the child-cycle check of a create/update to its write, so two concurrent
    /// edits on this admin cannot each pass the check and together close a cycle.
    job_writes: Mutex<()>,
}

impl JobAdminService {
    pub fn new(ctx: Arc<AdminContext>) -> Self {
        JobAdminService {
            ctx,
            job_writes: Mutex::new(()),
        }
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

    pub(super) async fn load_group(&self, id: i64) -> Result<Group, Error> {
        let group = self.store().get_group(id).await?;
        group.ok_or_else(|| Error::NotFound(format!("group {id} not found")))
    }

    pub(super) async fn load_job(&self, id: i64) -> Result<Job, Error> {
        let job = self.store().get_job(id).await?;
        job.ok_or_else(|| Error::NotFound(format!("job {id} not found")))
    }

    pub(super) async fn load_log(&self, id: i64) -> Result<RunLog, Error> {
        let run = self.store().get_log(id).await?;
        run.ok_or_else(|| Error::NotFound(format!("log {id} not found")))
    }
}

/// Status codes: INVALID_ARGUMENT (field named), NOT_FOUND (id), ALREADY_EXISTS (app name),
/// FAILED_PRECONDITION (state), UNIMPLEMENTED (later releases), UNAVAILABLE (database).
#[tonic::async_trait]
impl JobAdmin for JobAdminService {
    async fn create_group(
        &self,
        request: Request<pb::CreateGroupRequest>,
    ) -> RpcResult<pb::CreateGroupResponse> {
        let wire_group = required(request.into_inner().group, "group")?;
        let group = api_write(self.create_group_checked(wire_group)).await;
        reply(group.map(|group| pb::CreateGroupResponse { group: Some(group) }))
    }

    async fn update_group(
        &self,
        request: Request<pb::UpdateGroupRequest>,
    ) -> RpcResult<pb::UpdateGroupResponse> {
        let wire_group = required(request.into_inner().group, "group")?;
        let group = api_write(self.update_group_checked(wire_group)).await;
        reply(group.map(|group| pb::UpdateGroupResponse { group: Some(group) }))
    }

    async fn delete_group(
        &self,
        request: Request<pb::DeleteGroupRequest>,
    ) -> RpcResult<pb::DeleteGroupResponse> {
        let deleted = api_write(self.delete_group_checked(request.into_inner().id)).await;
        reply(deleted.map(|()| pb::DeleteGroupResponse {}))
    }

    async fn get_group(
        &self,
        request: Request<pb::GetGroupRequest>,
    ) -> RpcResult<pb::GetGroupResponse> {
        let group = self.load_group(request.into_inner().id).await;
        reply(group.map(|group| pb::GetGroupResponse {
            group: Some(self.group_with_online(group)),
        }))
    }

    async fn list_groups(
        &self,
        request: Request<pb::ListGroupsRequest>,
    ) -> RpcResult<pb::ListGroupsResponse> {
        reply(self.list_groups_page(request.into_inner()).await)
    }

    async fn create_job(
        &self,
        request: Request<pb::CreateJobRequest>,
    ) -> RpcResult<pb::CreateJobResponse> {
        let wire_job = required(request.into_inner().job, "job")?;
        let job = api_write(self.create_job_checked(wire_job)).await;
        reply(job.map(|job| pb::CreateJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn update_job(
        &self,
        request: Request<pb::UpdateJobRequest>,
    ) -> RpcResult<pb::UpdateJobResponse> {
        let wire_job = required(request.into_inner().job, "job")?;
        let job = api_write(self.update_job_checked(wire_job)).await;
        reply(job.map(|job| pb::UpdateJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn delete_job(
        &self,
        request: Request<pb::DeleteJobRequest>,
    ) -> RpcResult<pb::DeleteJobResponse> {
        let deleted = api_write(self.delete_job_checked(request.into_inner().id)).await;
        reply(deleted.map(|()| pb::DeleteJobResponse {}))
    }

    async fn get_job(&self, request: Request<pb::GetJobRequest>) -> RpcResult<pb::GetJobResponse> {
        let job = self.load_job(request.into_inner().id).await;
        reply(job.map(|job| pb::GetJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn list_jobs(
        &self,
        request: Request<pb::ListJobsRequest>,
    ) -> RpcResult<pb::ListJobsResponse> {
        reply(self.list_jobs_page(request.into_inner()).await)
    }

    async fn start_job(
        &self,
        request: Request<pb::StartJobRequest>,
    ) -> RpcResult<pb::StartJobResponse> {
        let job = api_write(self.start_job_checked(request.into_inner().id)).await;
        reply(job.map(|job| pb::StartJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn stop_job(
        &self,
        request: Request<pb::StopJobRequest>,
    ) -> RpcResult<pb::StopJobResponse> {
        let job = api_write(self.stop_job_checked(request.into_inner().id)).await;
        reply(job.map(|job| pb::StopJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn trigger_job(
        &self,
        request: Request<pb::TriggerJobRequest>,
    ) -> RpcResult<pb::TriggerJobResponse> {
        let log_ids = api_write(self.trigger_job_checked(request.into_inner())).await;
        reply(log_ids.map(|log_ids| pb::TriggerJobResponse { log_ids }))
    }

    async fn preview_schedule(
        &self,
        request: Request<pb::PreviewScheduleRequest>,
    ) -> RpcResult<pb::PreviewScheduleResponse> {
        let fire_times = self.preview(request.into_inner());
        reply(fire_times.map(|fire_times_ms| pb::PreviewScheduleResponse { fire_times_ms }))
    }

    async fn list_logs(
        &self,
        request: Request<pb::ListLogsRequest>,
    ) -> RpcResult<pb::ListLogsResponse> {
        reply(self.list_logs_page(request.into_inner()).await)
    }

    async fn get_log(&self, request: Request<pb::GetLogRequest>) -> RpcResult<pb::GetLogResponse> {
        let run = self.load_log(request.into_inner().id).await;
        reply(run.map(|run| pb::GetLogResponse {
            log: Some(log_to_pb(run)),
        }))
    }

    async fn kill_run(
        &self,
        request: Request<pb::KillRunRequest>,
    ) -> RpcResult<pb::KillRunResponse> {
        reply(self.kill_run_checked(request.into_inner().log_id).await)
    }

    async fn read_run_log(
        &self,
        request: Request<pb::ReadRunLogRequest>,
    ) -> RpcResult<pb::ReadRunLogResponse> {
        reply(self.read_run_log_checked(request.into_inner()).await)
    }

    async fn update_glue(
        &self,
        request: Request<pb::UpdateGlueRequest>,
    ) -> RpcResult<pb::UpdateGlueResponse> {
        reply(crate::api::glue::update_glue(self.store(), request.into_inner()).await)
    }

    async fn list_glue_versions(
        &self,
        request: Request<pb::ListGlueVersionsRequest>,
    ) -> RpcResult<pb::ListGlueVersionsResponse> {
        reply(crate::api::glue::list_glue_versions(self.store(), request.into_inner()).await)
    }

    async fn get_glue_version(
        &self,
        request: Request<pb::GetGlueVersionRequest>,
    ) -> RpcResult<pb::GetGlueVersionResponse> {
        reply(crate::api::glue::get_glue_version(self.store(), request.into_inner()).await)
    }

    async fn clear_logs(
        &self,
        request: Request<pb::ClearLogsRequest>,
    ) -> RpcResult<pb::ClearLogsResponse> {
        reply(self.clear_logs_checked(request.into_inner()).await)
    }

    async fn list_executors(
        &self,
        request: Request<pb::ListExecutorsRequest>,
    ) -> RpcResult<pb::ListExecutorsResponse> {
        let executors = self
            .ctx
            .registry
            .list_with_peers(&request.into_inner().app_name);
        let executors = executors.into_iter().map(executor_to_pb).collect();
        reply(Ok(pb::ListExecutorsResponse { executors }))
    }

    async fn get_dashboard(
        &self,
        request: Request<pb::GetDashboardRequest>,
    ) -> RpcResult<pb::GetDashboardResponse> {
        reply(self.dashboard(request.into_inner()).await)
    }
}
