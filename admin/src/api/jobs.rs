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
//! pre-read window, and the scan is woken to pick it up.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::convert::{
    Page, executor_to_pb, group_from_pb, group_to_pb, job_from_pb, job_to_pb, log_to_pb,
    optional_filter, pb_job_status, pb_run_status, pb_schedule_type, required,
};
use crate::context::AdminContext;
use crate::error::Error;
use crate::model::validate::{
    JobLimits, check_params_size, dedup_child_ids, resolve_time_zone, validate_group, validate_job,
    validate_schedule,
};
use crate::model::{
    AddressType, Group, Job, JobStatus, LogFilter, RunLog, RunStatus, ScheduleType, TriggerType,
    now_ms,
};
use crate::schedule::plan::next_fire_after;
use crate::store::{JobFilter, JobScheduleUpdate};
use crate::trigger::route::is_supported;

/// Delay between a start or schedule change and the earliest fire it may produce (XXL-JOB:
/// "takes effect after 5 s", so the fire never lands inside the scan's current pre-read window).
pub const SCHEDULE_CHANGE_DELAY_MS: i64 = 5_000;
/// Fire times `PreviewSchedule` returns when the request leaves `count` at 0.
pub const DEFAULT_PREVIEW_COUNT: usize = 5;
/// Most fire times one `PreviewSchedule` returns.
pub const MAX_PREVIEW_COUNT: usize = 100;

type RpcResult<T> = Result<Response<T>, Status>;

/// The `JobAdmin` gRPC service.
pub struct JobAdminService {
    ctx: Arc<AdminContext>,
}

impl JobAdminService {
    pub fn new(ctx: Arc<AdminContext>) -> Self {
        JobAdminService { ctx }
    }

    fn limits(&self) -> JobLimits {
        JobLimits {
            max_params_bytes: self.ctx.config.max_params_bytes,
            default_time_zone: self.ctx.config.default_time_zone(),
        }
    }

    // ---- loading by id

    async fn load_group(&self, id: i64) -> Result<Group, Error> {
        let group = self.ctx.store.get_group(id).await?;
        group.ok_or_else(|| Error::NotFound(format!("group {id} not found")))
    }

    async fn load_job(&self, id: i64) -> Result<Job, Error> {
        let job = self.ctx.store.get_job(id).await?;
        job.ok_or_else(|| Error::NotFound(format!("job {id} not found")))
    }

    async fn load_log(&self, id: i64) -> Result<RunLog, Error> {
        let run = self.ctx.store.get_log(id).await?;
        run.ok_or_else(|| Error::NotFound(format!("log {id} not found")))
    }

    /// Converts a group to the wire with the addresses of its live executors.
    fn group_with_online(&self, group: Group) -> pb::Group {
        let online = self.ctx.registry.online_addresses(&group.app_name);
        group_to_pb(group, online)
    }

    // ---- checks that need the store

    /// Validates a group for create/update; app names are unique.
    async fn check_group(&self, group: &mut Group) -> Result<(), Error> {
        validate_group(group, "group")?;
        if group.address_type == AddressType::Auto {
            // Addresses of an AUTO group come from the registry; typed ones would only mislead.
            group.addresses.clear();
        }
        if let Some(existing) = self.ctx.store.get_group_by_app(&group.app_name).await?
            && existing.id != group.id
        {
            return Err(Error::AlreadyExists(format!(
                "group.app_name: '{}' already exists",
                group.app_name
            )));
        }
        Ok(())
    }

    /// Validates a job for create/update: pure rules first, then its group and child jobs.
    async fn check_job(&self, job: &mut Job) -> Result<(), Error> {
        validate_job(job, &self.limits(), "job")?;
        if !is_supported(job.route_strategy) {
            return Err(Error::Unimplemented(format!(
                "job.route_strategy: {} is not implemented yet",
                job.route_strategy
            )));
        }
        if self.ctx.store.get_group(job.group_id).await?.is_none() {
            return Err(Error::NotFound(format!(
                "job.group_id: group {} not found",
                job.group_id
            )));
        }
        job.child_job_ids = dedup_child_ids(&job.child_job_ids);
        let missing = self.ctx.store.missing_job_ids(&job.child_job_ids).await?;
        if let Some(first_missing) = missing.first() {
            return Err(Error::NotFound(format!(
                "job.child_job_ids: job {first_missing} not found"
            )));
        }
        Ok(())
    }

    /// Next fire of `job` strictly after `from_ms`, in its zone; `None` when it never fires.
    fn next_fire(&self, job: &Job, from_ms: i64) -> Result<Option<i64>, Error> {
        let zone = resolve_time_zone(
            &job.time_zone,
            self.limits().default_time_zone,
            "job.time_zone",
        )?;
        next_fire_after(job.schedule_type, &job.schedule_conf, zone, from_ms)
            .map_err(|message| Error::invalid("job.schedule_conf", message))
    }

    // ---- handlers with more than one step

    async fn create_job_checked(&self, wire_job: pb::Job) -> Result<Job, Error> {
        let mut job = job_from_pb(wire_job, "job")?;
        job.id = 0;
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
        Ok(self.ctx.store.insert_job(&new_job).await?)
    }

    async fn update_job_checked(&self, wire_job: pb::Job) -> Result<Job, Error> {
        let mut incoming = job_from_pb(wire_job, "job")?;
        let existing = self.load_job(incoming.id).await?;
        self.check_job(&mut incoming).await?;
        let now = now_ms();
        let mut updated = merge_update(&existing, incoming, now)?;
        let reschedule =
            existing.status == JobStatus::Running && updated.schedule_differs(&existing);
        if reschedule {
            match self.next_fire(&updated, now + SCHEDULE_CHANGE_DELAY_MS)? {
                Some(next) => updated.trigger_next_ms = next,
                None => {
                    tracing::info!(
                        job_id = updated.id,
                        "new schedule has no future fire; job stopped"
                    );
                    updated.status = JobStatus::Stopped;
                    updated.trigger_next_ms = 0;
                }
            }
        }
        if !self.ctx.store.update_job(&updated).await? {
            return Err(Error::NotFound(format!("job {} not found", updated.id)));
        }
        if reschedule {
            self.ctx.schedule_wake.notify_one();
        }
        Ok(updated)
    }

    async fn start_job_checked(&self, id: i64) -> Result<Job, Error> {
        let job = self.load_job(id).await?;
        if job.schedule_type == ScheduleType::None {
            return Err(Error::FailedPrecondition(format!(
                "job {id} has schedule type NONE and cannot be started"
            )));
        }
        let next = self
            .next_fire(&job, now_ms() + SCHEDULE_CHANGE_DELAY_MS)?
            .ok_or_else(|| {
                Error::FailedPrecondition(format!("job {id} has no future fire time"))
            })?;
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
        Ok(stopped)
    }

    async fn write_schedule(&self, job: &Job) -> Result<(), Error> {
        let update = JobScheduleUpdate {
            job_id: job.id,
            trigger_last_ms: job.trigger_last_ms,
            trigger_next_ms: job.trigger_next_ms,
            status: job.status,
        };
        if !self.ctx.store.set_job_schedule(update).await? {
            return Err(Error::NotFound(format!("job {} not found", job.id)));
        }
        Ok(())
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

    async fn kill_run_checked(&self, log_id: i64) -> Result<(bool, String), Error> {
        let run = self.load_log(log_id).await?;
        if run.status != RunStatus::Running {
            return Err(Error::FailedPrecondition(format!(
                "log {log_id} is not running (status {})",
                run.status
            )));
        }
        let job = self.load_job(run.job_id).await?;
        self.ctx.trigger.kill_run(&run, &job).await
    }
}

/// Applies an update onto the stored job: editable fields come from `incoming`; status, fire
/// times, creation time and glue type stay (glue type cannot change after creation).
pub fn merge_update(existing: &Job, incoming: Job, now_ms: i64) -> Result<Job, Error> {
    if incoming.glue_type != existing.glue_type {
        return Err(Error::invalid(
            "job.glue_type",
            format!(
                "cannot change after creation (is {}, got {})",
                existing.glue_type, incoming.glue_type
            ),
        ));
    }
    let glue_changed = incoming.glue_source != existing.glue_source
        || incoming.glue_remark != existing.glue_remark;
    Ok(Job {
        id: existing.id,
        status: existing.status,
        trigger_last_ms: existing.trigger_last_ms,
        trigger_next_ms: existing.trigger_next_ms,
        created_ms: existing.created_ms,
        glue_updated_ms: if glue_changed {
            now_ms
        } else {
            existing.glue_updated_ms
        },
        updated_ms: now_ms,
        ..incoming
    })
}

/// Reads `PreviewScheduleRequest.count`: 0 = the default, capped at the maximum.
pub fn preview_count(count: i32) -> Result<usize, Error> {
    match usize::try_from(count) {
        Err(_) => Err(Error::invalid(
            "count",
            format!("must be >= 0, got {count}"),
        )),
        Ok(0) => Ok(DEFAULT_PREVIEW_COUNT),
        Ok(count) => Ok(count.min(MAX_PREVIEW_COUNT)),
    }
}

/// A filter value where 0 means "any".
fn non_zero(value: i64) -> Option<i64> {
    (value != 0).then_some(value)
}

/// A substring filter where empty means "any".
fn non_empty(value: String) -> Option<String> {
    (!value.is_empty()).then_some(value)
}

fn job_filter(request: pb::ListJobsRequest, page: Page) -> Result<JobFilter, Error> {
    Ok(JobFilter {
        group_id: non_zero(request.group_id),
        status: optional_filter(request.status, "status", pb_job_status)?,
        name: non_empty(request.name),
        handler: non_empty(request.handler),
        author: non_empty(request.author),
        offset: page.offset,
        limit: page.limit,
    })
}

fn log_filter(request: &pb::ListLogsRequest, page: Page) -> Result<LogFilter, Error> {
    Ok(LogFilter {
        group_id: non_zero(request.group_id),
        job_id: non_zero(request.job_id),
        status: optional_filter(request.status, "status", pb_run_status)?,
        from_ms: non_zero(request.from_ms),
        to_ms: non_zero(request.to_ms),
        offset: page.offset,
        limit: page.limit,
    })
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
        let mut group = group_from_pb(wire_group, "group")?;
        group.id = 0;
        self.check_group(&mut group).await?;
        group.updated_ms = now_ms();
        let created = self
            .ctx
            .store
            .insert_group(&group)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(pb::CreateGroupResponse {
            group: Some(self.group_with_online(created)),
        }))
    }

    async fn update_group(
        &self,
        request: Request<pb::UpdateGroupRequest>,
    ) -> RpcResult<pb::UpdateGroupResponse> {
        let wire_group = required(request.into_inner().group, "group")?;
        let mut group = group_from_pb(wire_group, "group")?;
        let existing = self.load_group(group.id).await?;
        if group.app_name != existing.app_name {
            let message = format!("cannot change (is '{}')", existing.app_name);
            return Err(Error::invalid("group.app_name", message).into());
        }
        self.check_group(&mut group).await?;
        group.updated_ms = now_ms();
        if !self
            .ctx
            .store
            .update_group(&group)
            .await
            .map_err(Error::from)?
        {
            return Err(Error::NotFound(format!("group {} not found", group.id)).into());
        }
        Ok(Response::new(pb::UpdateGroupResponse {
            group: Some(self.group_with_online(group)),
        }))
    }

    async fn delete_group(
        &self,
        request: Request<pb::DeleteGroupRequest>,
    ) -> RpcResult<pb::DeleteGroupResponse> {
        let id = request.into_inner().id;
        let job_count = self
            .ctx
            .store
            .count_jobs_in_group(id)
            .await
            .map_err(Error::from)?;
        if job_count > 0 {
            let message = format!("group {id} is used by {job_count} job(s); delete them first");
            return Err(Error::FailedPrecondition(message).into());
        }
        if !self.ctx.store.delete_group(id).await.map_err(Error::from)? {
            return Err(Error::NotFound(format!("group {id} not found")).into());
        }
        Ok(Response::new(pb::DeleteGroupResponse {}))
    }

    async fn get_group(
        &self,
        request: Request<pb::GetGroupRequest>,
    ) -> RpcResult<pb::GetGroupResponse> {
        let group = self.load_group(request.into_inner().id).await?;
        Ok(Response::new(pb::GetGroupResponse {
            group: Some(self.group_with_online(group)),
        }))
    }

    async fn list_groups(
        &self,
        request: Request<pb::ListGroupsRequest>,
    ) -> RpcResult<pb::ListGroupsResponse> {
        let request = request.into_inner();
        let page = Page::from_request(request.page_size, &request.page_token)?;
        let store = &self.ctx.store;
        let groups = store
            .list_groups(&request.app_name, page.offset, page.limit)
            .await
            .map_err(Error::from)?;
        let next_page_token = page.next_token(groups.len());
        let groups = groups
            .into_iter()
            .map(|group| self.group_with_online(group))
            .collect();
        Ok(Response::new(pb::ListGroupsResponse {
            groups,
            next_page_token,
        }))
    }

    async fn create_job(
        &self,
        request: Request<pb::CreateJobRequest>,
    ) -> RpcResult<pb::CreateJobResponse> {
        let wire_job = required(request.into_inner().job, "job")?;
        let job = self.create_job_checked(wire_job).await?;
        Ok(Response::new(pb::CreateJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn update_job(
        &self,
        request: Request<pb::UpdateJobRequest>,
    ) -> RpcResult<pb::UpdateJobResponse> {
        let wire_job = required(request.into_inner().job, "job")?;
        let job = self.update_job_checked(wire_job).await?;
        Ok(Response::new(pb::UpdateJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn delete_job(
        &self,
        request: Request<pb::DeleteJobRequest>,
    ) -> RpcResult<pb::DeleteJobResponse> {
        let id = request.into_inner().id;
        if !self.ctx.store.delete_job(id).await.map_err(Error::from)? {
            return Err(Error::NotFound(format!("job {id} not found")).into());
        }
        Ok(Response::new(pb::DeleteJobResponse {}))
    }

    async fn get_job(&self, request: Request<pb::GetJobRequest>) -> RpcResult<pb::GetJobResponse> {
        let job = self.load_job(request.into_inner().id).await?;
        Ok(Response::new(pb::GetJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn list_jobs(
        &self,
        request: Request<pb::ListJobsRequest>,
    ) -> RpcResult<pb::ListJobsResponse> {
        let request = request.into_inner();
        let page = Page::from_request(request.page_size, &request.page_token)?;
        let filter = job_filter(request, page)?;
        let jobs = self
            .ctx
            .store
            .list_jobs(&filter)
            .await
            .map_err(Error::from)?;
        let next_page_token = page.next_token(jobs.len());
        let jobs = jobs.into_iter().map(job_to_pb).collect();
        Ok(Response::new(pb::ListJobsResponse {
            jobs,
            next_page_token,
        }))
    }

    async fn start_job(
        &self,
        request: Request<pb::StartJobRequest>,
    ) -> RpcResult<pb::StartJobResponse> {
        let job = self.start_job_checked(request.into_inner().id).await?;
        Ok(Response::new(pb::StartJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn stop_job(
        &self,
        request: Request<pb::StopJobRequest>,
    ) -> RpcResult<pb::StopJobResponse> {
        let job = self.stop_job_checked(request.into_inner().id).await?;
        Ok(Response::new(pb::StopJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    async fn trigger_job(
        &self,
        request: Request<pb::TriggerJobRequest>,
    ) -> RpcResult<pb::TriggerJobResponse> {
        let request = request.into_inner();
        let job = self.load_job(request.id).await?;
        if let Some(params) = &request.params {
            check_params_size(params, self.ctx.config.max_params_bytes, "params")?;
        }
        let trigger = &self.ctx.trigger;
        let log_ids = trigger
            .trigger_job(&job, TriggerType::Manual, request.params, request.addresses)
            .await?;
        Ok(Response::new(pb::TriggerJobResponse { log_ids }))
    }

    async fn preview_schedule(
        &self,
        request: Request<pb::PreviewScheduleRequest>,
    ) -> RpcResult<pb::PreviewScheduleResponse> {
        let fire_times_ms = self.preview(request.into_inner())?;
        Ok(Response::new(pb::PreviewScheduleResponse { fire_times_ms }))
    }

    async fn list_logs(
        &self,
        request: Request<pb::ListLogsRequest>,
    ) -> RpcResult<pb::ListLogsResponse> {
        let request = request.into_inner();
        let page = Page::from_request(request.page_size, &request.page_token)?;
        let filter = log_filter(&request, page)?;
        let logs = self
            .ctx
            .store
            .list_logs(&filter)
            .await
            .map_err(Error::from)?;
        let next_page_token = page.next_token(logs.len());
        let logs = logs.into_iter().map(log_to_pb).collect();
        Ok(Response::new(pb::ListLogsResponse {
            logs,
            next_page_token,
        }))
    }

    async fn get_log(&self, request: Request<pb::GetLogRequest>) -> RpcResult<pb::GetLogResponse> {
        let run = self.load_log(request.into_inner().id).await?;
        Ok(Response::new(pb::GetLogResponse {
            log: Some(log_to_pb(run)),
        }))
    }

    async fn kill_run(
        &self,
        request: Request<pb::KillRunRequest>,
    ) -> RpcResult<pb::KillRunResponse> {
        let (killed, message) = self.kill_run_checked(request.into_inner().log_id).await?;
        Ok(Response::new(pb::KillRunResponse { killed, message }))
    }

    async fn read_run_log(
        &self,
        request: Request<pb::ReadRunLogRequest>,
    ) -> RpcResult<pb::ReadRunLogResponse> {
        let request = request.into_inner();
        if request.from_line < 0 {
            let message = format!("must be >= 0, got {}", request.from_line);
            return Err(Error::invalid("from_line", message).into());
        }
        let run = self.load_log(request.log_id).await?;
        let chunk = self
            .ctx
            .trigger
            .read_run_log(&run, request.from_line.max(1))
            .await?;
        Ok(Response::new(pb::ReadRunLogResponse {
            from_line: chunk.from_line,
            to_line: chunk.to_line,
            content: chunk.content,
            is_end: chunk.is_end,
        }))
    }

    async fn clear_logs(
        &self,
        _request: Request<pb::ClearLogsRequest>,
    ) -> RpcResult<pb::ClearLogsResponse> {
        Err(Error::Unimplemented("ClearLogs is not implemented yet".to_string()).into())
    }

    async fn list_executors(
        &self,
        request: Request<pb::ListExecutorsRequest>,
    ) -> RpcResult<pb::ListExecutorsResponse> {
        let app_filter = request.into_inner().app_name;
        let executors = self
            .ctx
            .registry
            .list(&app_filter)
            .into_iter()
            .map(executor_to_pb)
            .collect();
        Ok(Response::new(pb::ListExecutorsResponse { executors }))
    }

    /// Job count and online executors; run totals and the per-day report come with the log
    /// report task in a later release (zeros and no days until then).
    async fn get_dashboard(
        &self,
        _request: Request<pb::GetDashboardRequest>,
    ) -> RpcResult<pb::GetDashboardResponse> {
        let job_count = self.ctx.store.count_jobs().await.map_err(Error::from)?;
        let online_executors = i64::try_from(self.ctx.registry.count()).unwrap_or(i64::MAX);
        Ok(Response::new(pb::GetDashboardResponse {
            job_count,
            online_executors,
            total_runs: 0,
            success_runs: 0,
            days: Vec::new(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::convert::run_status_to_pb;
    use crate::model::{BlockStrategy, GlueType, MisfireStrategy, RetryBackoff, RouteStrategy};

    fn stored_job() -> Job {
        Job {
            id: 4,
            group_id: 1,
            name: "nightly".into(),
            author: "ops".into(),
            alarm_email: String::new(),
            schedule_type: ScheduleType::Cron,
            schedule_conf: "0 0 1 * * ?".into(),
            time_zone: String::new(),
            misfire_strategy: MisfireStrategy::DoNothing,
            route_strategy: RouteStrategy::First,
            handler: "demoHandler".into(),
            params: String::new(),
            block_strategy: BlockStrategy::SerialExecution,
            timeout_ms: 0,
            fail_retry_count: 0,
            retry_backoff: RetryBackoff::default(),
            glue_type: GlueType::Bean,
            glue_source: String::new(),
            glue_remark: String::new(),
            glue_updated_ms: 100,
            child_job_ids: Vec::new(),
            status: JobStatus::Running,
            trigger_last_ms: 1_000,
            trigger_next_ms: 2_000,
            created_ms: 100,
            updated_ms: 100,
        }
    }

    #[test]
    fn update_keeps_status_fire_times_and_creation_time() {
        let existing = stored_job();
        let incoming = Job {
            name: "renamed".into(),
            status: JobStatus::Stopped,
            trigger_next_ms: 0,
            created_ms: 0,
            ..existing.clone()
        };
        let merged = merge_update(&existing, incoming, 5_000).expect("same glue type");
        assert_eq!(merged.name, "renamed");
        assert_eq!(merged.status, JobStatus::Running);
        assert_eq!(merged.trigger_next_ms, 2_000);
        assert_eq!(merged.created_ms, 100);
        assert_eq!(merged.updated_ms, 5_000);
        assert_eq!(merged.glue_updated_ms, 100);
    }

    #[test]
    fn update_refuses_a_glue_type_change_and_stamps_glue_edits() {
        let existing = stored_job();
        let shell = Job {
            glue_type: GlueType::Shell,
            ..existing.clone()
        };
        let error = merge_update(&existing, shell, 5_000).expect_err("glue type changed");
        assert!(matches!(error, Error::InvalidArgument(_)));
        assert!(
            error
                .to_string()
                .starts_with("job.glue_type: cannot change")
        );

        let edited = Job {
            glue_remark: "v2".into(),
            ..existing.clone()
        };
        let merged = merge_update(&existing, edited, 5_000).expect("same glue type");
        assert_eq!(merged.glue_updated_ms, 5_000);
    }

    #[test]
    fn preview_count_defaults_caps_and_refuses_negative() {
        assert_eq!(preview_count(0).ok(), Some(DEFAULT_PREVIEW_COUNT));
        assert_eq!(preview_count(7).ok(), Some(7));
        assert_eq!(preview_count(10_000).ok(), Some(MAX_PREVIEW_COUNT));
        let error = preview_count(-1).expect_err("negative");
        assert_eq!(error.to_string(), "count: must be >= 0, got -1");
    }

    #[test]
    fn list_filters_treat_zero_and_empty_as_any() {
        let page = Page {
            offset: 0,
            limit: 50,
        };
        let filter = job_filter(pb::ListJobsRequest::default(), page).expect("empty filter");
        assert_eq!(
            filter,
            JobFilter {
                offset: 0,
                limit: 50,
                ..JobFilter::default()
            }
        );
        let request = pb::ListJobsRequest {
            group_id: 3,
            status: pb::JobStatus::Running as i32,
            name: "night".into(),
            ..pb::ListJobsRequest::default()
        };
        let filter = job_filter(request, page).expect("filter");
        assert_eq!(filter.group_id, Some(3));
        assert_eq!(filter.status, Some(JobStatus::Running));
        assert_eq!(filter.name.as_deref(), Some("night"));

        let request = pb::ListLogsRequest {
            status: run_status_to_pb(RunStatus::Failed) as i32,
            job_id: 9,
            ..pb::ListLogsRequest::default()
        };
        let filter = log_filter(&request, page).expect("log filter");
        assert_eq!(filter.status, Some(RunStatus::Failed));
        assert_eq!(filter.job_id, Some(9));
        assert_eq!(filter.group_id, None);
        let bad = pb::ListLogsRequest {
            status: 77,
            ..pb::ListLogsRequest::default()
        };
        assert_eq!(
            log_filter(&bad, page).map_err(|error| error.to_string()),
            Err("status: unknown value 77".to_string())
        );
    }
}
