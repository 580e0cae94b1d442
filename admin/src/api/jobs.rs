//! `JobAdmin`: the management API behind the CLI, the console, grpcurl and automation.
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

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::Mutex;
use tonic::{Request, Response, Status};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::convert::{
    Page, clear_request, dashboard_to_pb, executor_to_pb, group_from_pb, group_to_pb, job_filter,
    job_from_pb, job_to_pb, log_filter, log_to_pb, pb_schedule_type, preview_count, required,
};
use crate::context::AdminContext;
use crate::error::Error;
use crate::maintenance::{cleanup, report};
use crate::model::validate::{
    JobLimits, check_params_size, child_cycle_error, dedup_child_ids, find_child_cycle,
    merge_job_update, resolve_time_zone, validate_executor_addresses, validate_group, validate_job,
    validate_schedule,
};
use crate::model::{
    AddressType, Group, Job, JobStatus, RunLog, RunStatus, ScheduleType, TriggerType, now_ms,
};
use crate::schedule::plan::AWAITING_COMPLETION_MS;
use crate::schedule::plan::next_fire_after;
use crate::store::{JobScheduleUpdate, Store};
use crate::trigger::route::is_supported;

/// Delay between a start or schedule change and the earliest fire it may produce (XXL-JOB:
/// "takes effect after 5 s", so the fire never lands inside the scan's current pre-read window).
pub const SCHEDULE_CHANGE_DELAY_MS: i64 = 5_000;

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

    fn store(&self) -> &Store {
        &self.ctx.store
    }

    fn limits(&self) -> JobLimits {
        JobLimits {
            max_params_bytes: self.ctx.config.max_params_bytes,
            default_time_zone: self.ctx.config.default_time_zone(),
        }
    }

    async fn load_group(&self, id: i64) -> Result<Group, Error> {
        let group = self.store().get_group(id).await?;
        group.ok_or_else(|| Error::NotFound(format!("group {id} not found")))
    }

    async fn load_job(&self, id: i64) -> Result<Job, Error> {
        let job = self.store().get_job(id).await?;
        job.ok_or_else(|| Error::NotFound(format!("job {id} not found")))
    }

    async fn load_log(&self, id: i64) -> Result<RunLog, Error> {
        let run = self.store().get_log(id).await?;
        run.ok_or_else(|| Error::NotFound(format!("log {id} not found")))
    }

    /// Converts a group to the wire with the addresses of its live executors.
    fn group_with_online(&self, group: Group) -> pb::Group {
        let online = self.ctx.registry.online_addresses(&group.app_name);
        group_to_pb(group, online)
    }

    /// Validates a group for create/update; app names are unique.
    async fn check_group(&self, group: &mut Group) -> Result<(), Error> {
        validate_group(group, "group")?;
        if group.address_type == AddressType::Auto {
            // Addresses of an AUTO group come from the registry; typed ones would only mislead.
            group.addresses.clear();
        }
        if let Some(existing) = self.store().get_group_by_app(&group.app_name).await?
            && existing.id != group.id
        {
            let message = format!("group.app_name: '{}' already exists", group.app_name);
            return Err(Error::AlreadyExists(message));
        }
        Ok(())
    }

    /// Validates a job for create/update: pure rules first, then its group and child jobs.
    async fn check_job(&self, job: &mut Job) -> Result<(), Error> {
        validate_job(job, &self.limits(), "job")?;
        if !is_supported(job.route_strategy) {
            let message = format!(
                "job.route_strategy: {} is not implemented yet",
                job.route_strategy
            );
            return Err(Error::Unimplemented(message));
        }
        if self.store().get_group(job.group_id).await?.is_none() {
            let message = format!("job.group_id: group {} not found", job.group_id);
            return Err(Error::NotFound(message));
        }
        job.child_job_ids = dedup_child_ids(&job.child_job_ids);
        let missing = self.store().missing_job_ids(&job.child_job_ids).await?;
        if let Some(first_missing) = missing.first() {
            let message = format!("job.child_job_ids: job {first_missing} not found");
            return Err(Error::NotFound(message));
        }
        self.check_child_cycles(job).await
    }

    /// Refuses children from which the job (or any job) is reachable from itself: loads the
    /// child graph below the job level by level, with the job's new children in place of its
    /// stored ones, then searches it.
    async fn check_child_cycles(&self, job: &Job) -> Result<(), Error> {
        let mut children: HashMap<i64, Vec<i64>> = HashMap::new();
        children.insert(job.id, job.child_job_ids.clone());
        let mut frontier = job.child_job_ids.clone();
        while !frontier.is_empty() {
            frontier.retain(|id| !children.contains_key(id));
            frontier.sort_unstable();
            frontier.dedup();
            let loaded = self.store().get_jobs(&frontier).await?;
            frontier.clear();
            for loaded_job in loaded {
                frontier.extend(&loaded_job.child_job_ids);
                children.insert(loaded_job.id, loaded_job.child_job_ids);
            }
        }
        match find_child_cycle(job.id, &children) {
            Some(found) => Err(child_cycle_error(job.id, &found, "job.child_job_ids")),
            None => Ok(()),
        }
    }

    /// Next fire of `job` strictly after `from_ms`, in its zone; `None` when it never fires.
    fn next_fire(&self, job: &Job, from_ms: i64) -> Result<Option<i64>, Error> {
        let default_zone = self.limits().default_time_zone;
        let zone = resolve_time_zone(&job.time_zone, default_zone, "job.time_zone")?;
        next_fire_after(job.schedule_type, &job.schedule_conf, zone, from_ms)
            .map_err(|message| Error::invalid("job.schedule_conf", message))
    }

    /// Fires already planned in the pre-read window belong to the old schedule: record them
    /// as skipped so they are never dispatched.
    async fn skip_planned_fires(&self, job_id: i64, why: &str) -> Result<(), Error> {
        let reason = format!("job {job_id} was {why} after this fire was planned");
        let skipped = self
            .store()
            .skip_planned_fires(job_id, &reason, now_ms())
            .await?;
        if skipped > 0 {
            tracing::info!(job_id, skipped, "planned fires skipped");
        }
        Ok(())
    }

    async fn write_schedule(&self, job: &Job) -> Result<(), Error> {
        let update = JobScheduleUpdate {
            job_id: job.id,
            trigger_last_ms: job.trigger_last_ms,
            trigger_next_ms: job.trigger_next_ms,
            status: job.status,
        };
        if !self.store().set_job_schedule(update).await? {
            return Err(Error::NotFound(format!("job {} not found", job.id)));
        }
        Ok(())
    }

    // ---- groups

    async fn create_group_checked(&self, wire_group: pb::Group) -> Result<pb::Group, Error> {
        let mut group = group_from_pb(wire_group, "group")?;
        group.id = 0;
        self.check_group(&mut group).await?;
        group.updated_ms = now_ms();
        let created = self.store().insert_group(&group).await?;
        Ok(self.group_with_online(created))
    }

    async fn update_group_checked(&self, wire_group: pb::Group) -> Result<pb::Group, Error> {
        let mut group = group_from_pb(wire_group, "group")?;
        let existing = self.load_group(group.id).await?;
        if group.app_name != existing.app_name {
            let message = format!("cannot change (is '{}')", existing.app_name);
            return Err(Error::invalid("group.app_name", message));
        }
        self.check_group(&mut group).await?;
        group.updated_ms = now_ms();
        if !self.store().update_group(&group).await? {
            return Err(Error::NotFound(format!("group {} not found", group.id)));
        }
        Ok(self.group_with_online(group))
    }

    async fn delete_group_checked(&self, id: i64) -> Result<(), Error> {
        let job_count = self.store().count_jobs_in_group(id).await?;
        if job_count > 0 {
            let message = format!("group {id} is used by {job_count} job(s); delete them first");
            return Err(Error::FailedPrecondition(message));
        }
        if !self.store().delete_group(id).await? {
            return Err(Error::NotFound(format!("group {id} not found")));
        }
        Ok(())
    }

    async fn list_groups_page(
        &self,
        request: pb::ListGroupsRequest,
    ) -> Result<pb::ListGroupsResponse, Error> {
        let page = Page::from_request(request.page_size, &request.page_token)?;
        let groups = self
            .store()
            .list_groups(&request.app_name, page.offset, page.limit)
            .await?;
        Ok(pb::ListGroupsResponse {
            next_page_token: page.next_token(groups.len()),
            groups: groups
                .into_iter()
                .map(|group| self.group_with_online(group))
                .collect(),
        })
    }

    // ---- jobs

    async fn create_job_checked(&self, wire_job: pb::Job) -> Result<Job, Error> {
        let mut job = job_from_pb(wire_job, "job")?;
        job.id = 0;
        let _job_writes = self.job_writes.lock().await;
        self.check_job(&mut job).await?;
        let now = now_ms();
        let new_job = Job {
            status: JobStatus::Stopped,
            trigger_last_ms: 0,
            trigger_next_ms: 0,
            glue_updated_ms: now,
            created_ms: now,
            updated_ms: now,
            ..job
        };
        Ok(self.store().insert_job(&new_job).await?)
    }

    async fn update_job_checked(&self, wire_job: pb::Job) -> Result<Job, Error> {
        let incoming = job_from_pb(wire_job, "job")?;
        let _job_writes = self.job_writes.lock().await;
        let existing = self.load_job(incoming.id).await?;
        let now = now_ms();
        let mut updated = merge_job_update(&existing, incoming, now)?;
        self.check_job(&mut updated).await?;
        // A FIX_DELAY fire still running keeps the job parked: its completion sets the next
        // fire, so rescheduling now would let the job overlap itself.
        let awaiting_completion = existing.trigger_next_ms == AWAITING_COMPLETION_MS;
        let reschedule = existing.status == JobStatus::Running
            && updated.schedule_differs(&existing)
            && !awaiting_completion;
        if reschedule {
            match self.next_fire(&updated, now + SCHEDULE_CHANGE_DELAY_MS)? {
                Some(next) => updated.trigger_next_ms = next,
                None => {
                    tracing::info!(job_id = updated.id, "new schedule never fires; job stopped");
                    updated.status = JobStatus::Stopped;
                    updated.trigger_next_ms = 0;
                }
            }
        }
        if !self.store().update_job(&updated).await? {
            return Err(Error::NotFound(format!("job {} not found", updated.id)));
        }
        if reschedule {
            self.write_schedule(&updated).await?;
            self.skip_planned_fires(updated.id, "rescheduled").await?;
            self.ctx.schedule_wake.notify_one();
        }
        Ok(updated)
    }

    async fn delete_job_checked(&self, id: i64) -> Result<(), Error> {
        if !self.store().delete_job(id).await? {
            return Err(Error::NotFound(format!("job {id} not found")));
        }
        Ok(())
    }

    async fn list_jobs_page(
        &self,
        request: pb::ListJobsRequest,
    ) -> Result<pb::ListJobsResponse, Error> {
        let page = Page::from_request(request.page_size, &request.page_token)?;
        let jobs = self.store().list_jobs(&job_filter(request, page)?).await?;
        Ok(pb::ListJobsResponse {
            next_page_token: page.next_token(jobs.len()),
            jobs: jobs.into_iter().map(job_to_pb).collect(),
        })
    }

    async fn start_job_checked(&self, id: i64) -> Result<Job, Error> {
        let job = self.load_job(id).await?;
        if job.schedule_type == ScheduleType::None {
            return Err(Error::FailedPrecondition(format!(
                "job {id} has schedule type NONE and cannot be started"
            )));
        }
        if job.status == JobStatus::Running {
            // Starting a running job changes nothing: recomputing its next fire would shift its
            // phase, and for a FIX_DELAY job with a run in flight, let it overlap itself.
            return Ok(job);
        }
        let no_future_fire =
            || Error::FailedPrecondition(format!("job {id} has no future fire time"));
        let next = self
            .next_fire(&job, now_ms() + SCHEDULE_CHANGE_DELAY_MS)?
            .ok_or_else(no_future_fire)?;
        let started = Job {
            status: JobStatus::Running,
            trigger_next_ms: next,
            ..job
        };
        self.write_schedule(&started).await?;
        self.ctx.schedule_wake.notify_one();
        Ok(started)
    }

    async fn stop_job_checked(&self, id: i64) -> Result<Job, Error> {
        let job = self.load_job(id).await?;
        let stopped = Job {
            status: JobStatus::Stopped,
            trigger_next_ms: 0,
            ..job
        };
        self.write_schedule(&stopped).await?;
        self.skip_planned_fires(stopped.id, "stopped").await?;
        Ok(stopped)
    }

    async fn trigger_job_checked(&self, request: pb::TriggerJobRequest) -> Result<Vec<i64>, Error> {
        let job = self.load_job(request.id).await?;
        if let Some(params) = &request.params {
            check_params_size(params, self.ctx.config.max_params_bytes, "params")?;
        }
        validate_executor_addresses(&request.addresses, "addresses")?;
        let trigger = &self.ctx.trigger;
        trigger
            .trigger_job(&job, TriggerType::Manual, request.params, request.addresses)
            .await
    }

    fn preview(&self, request: pb::PreviewScheduleRequest) -> Result<Vec<i64>, Error> {
        let schedule_type = pb_schedule_type(request.schedule_type, "schedule_type")?;
        let conf = request.schedule_conf.trim();
        validate_schedule(schedule_type, conf, "")?;
        let default_zone = self.limits().default_time_zone;
        let zone = resolve_time_zone(&request.time_zone, default_zone, "time_zone")?;
        let count = preview_count(request.count)?;
        let from_ms = match request.from_ms {
            0 => now_ms(),
            from if from < 0 => {
                return Err(Error::invalid(
                    "from_ms",
                    format!("must be >= 0, got {from}"),
                ));
            }
            from => from,
        };
        let mut fire_times = Vec::with_capacity(count);
        let mut cursor = from_ms;
        while fire_times.len() < count {
            let next = next_fire_after(schedule_type, conf, zone, cursor)
                .map_err(|message| Error::invalid("schedule_conf", message))?;
            let Some(next) = next else { break };
            fire_times.push(next);
            cursor = next;
        }
        Ok(fire_times)
    }

    // ---- runs

    async fn list_logs_page(
        &self,
        request: pb::ListLogsRequest,
    ) -> Result<pb::ListLogsResponse, Error> {
        let page = Page::from_request(request.page_size, &request.page_token)?;
        let logs = self.store().list_logs(&log_filter(&request, page)?).await?;
        Ok(pb::ListLogsResponse {
            next_page_token: page.next_token(logs.len()),
            logs: logs.into_iter().map(log_to_pb).collect(),
        })
    }

    async fn kill_run_checked(&self, log_id: i64) -> Result<pb::KillRunResponse, Error> {
        let run = self.load_log(log_id).await?;
        if run.status != RunStatus::Running {
            return Err(Error::FailedPrecondition(format!(
                "log {log_id} is not running (status {})",
                run.status
            )));
        }
        let job = self.load_job(run.job_id).await?;
        let (killed, message) = self.ctx.trigger.kill_run(&run, &job).await?;
        Ok(pb::KillRunResponse { killed, message })
    }

    async fn read_run_log_checked(
        &self,
        request: pb::ReadRunLogRequest,
    ) -> Result<pb::ReadRunLogResponse, Error> {
        if request.from_line < 0 {
            let message = format!("must be >= 0, got {}", request.from_line);
            return Err(Error::invalid("from_line", message));
        }
        let run = self.load_log(request.log_id).await?;
        let chunk = self
            .ctx
            .trigger
            .read_run_log(&run, request.from_line.max(1))
            .await?;
        Ok(pb::ReadRunLogResponse {
            from_line: chunk.from_line,
            to_line: chunk.to_line,
            content: chunk.content,
            is_end: chunk.is_end,
        })
    }

    /// Job count, online executors, and run counts per day of the range from the report rows.
    async fn dashboard(
        &self,
        request: pb::GetDashboardRequest,
    ) -> Result<pb::GetDashboardResponse, Error> {
        let zone = self.ctx.config.default_time_zone();
        let days = report::dashboard_days(zone, request.from_ms, request.to_ms, now_ms())?;
        let online_executors = i64::try_from(self.ctx.registry.count()).unwrap_or(i64::MAX);
        let dashboard = report::dashboard(self.store(), &days, online_executors).await?;
        Ok(dashboard_to_pb(dashboard))
    }

    async fn clear_logs_checked(
        &self,
        request: pb::ClearLogsRequest,
    ) -> Result<pb::ClearLogsResponse, Error> {
        let request = clear_request(&request)?;
        let zone = self.ctx.config.default_time_zone();
        let deleted = cleanup::clear_logs(self.store(), zone, request, now_ms()).await?;
        Ok(pb::ClearLogsResponse {
            deleted: i64::try_from(deleted).unwrap_or(i64::MAX),
        })
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
        let group = self.create_group_checked(wire_group).await;
        reply(group.map(|group| pb::CreateGroupResponse { group: Some(group) }))
    }

    async fn update_group(
        &self,
        request: Request<pb::UpdateGroupRequest>,
    ) -> RpcResult<pb::UpdateGroupResponse> {
        let wire_group = required(request.into_inner().group, "group")?;
        let group = self.update_group_checked(wire_group).await;
        reply(group.map(|group| pb::UpdateGroupResponse { group: Some(group) }))
    }

    async fn delete_group(
        &self,
        request: Request<pb::DeleteGroupRequest>,
    ) -> RpcResult<pb::DeleteGroupResponse> {
        let deleted = self.delete_group_checked(request.into_inner().id).await;
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
        let job = self.create_job_checked(wire_job).await;
        reply(job.map(|job| pb::CreateJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn update_job(
        &self,
        request: Request<pb::UpdateJobRequest>,
    ) -> RpcResult<pb::UpdateJobResponse> {
        let wire_job = required(request.into_inner().job, "job")?;
        let job = self.update_job_checked(wire_job).await;
        reply(job.map(|job| pb::UpdateJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn delete_job(
        &self,
        request: Request<pb::DeleteJobRequest>,
    ) -> RpcResult<pb::DeleteJobResponse> {
        let deleted = self.delete_job_checked(request.into_inner().id).await;
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
        let job = self.start_job_checked(request.into_inner().id).await;
        reply(job.map(|job| pb::StartJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn stop_job(
        &self,
        request: Request<pb::StopJobRequest>,
    ) -> RpcResult<pb::StopJobResponse> {
        let job = self.stop_job_checked(request.into_inner().id).await;
        reply(job.map(|job| pb::StopJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn trigger_job(
        &self,
        request: Request<pb::TriggerJobRequest>,
    ) -> RpcResult<pb::TriggerJobResponse> {
        let log_ids = self.trigger_job_checked(request.into_inner()).await;
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
