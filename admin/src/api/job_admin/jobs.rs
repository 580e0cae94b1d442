//! Job definitions and their schedule state: create, update (re-scheduling a running job),
//! delete, list, start, stop; child links never form a cycle.

use std::collections::HashMap;

use xjob_proto::pb;

use super::JobAdminService;
use super::RpcResult;
use super::group_scope;
use super::job_ids;
use super::job_object;
use super::job_summary;
use super::reply;
use super::short;
use super::write_locks::adds_child_links;
use crate::api::convert::required;
use crate::api::convert::{Page, job_filter, job_from_pb, job_to_pb};
use crate::auth::Permission;
use crate::auth::Scope;
use crate::error::Error;
use crate::model::glue::groovy_refusal;
use crate::model::next_fire::{AWAITING_COMPLETION_MS, SCHEDULE_CHANGE_DELAY_MS, next_fire_after};
use crate::model::validate::{
    child_cycle_error, dedup_child_ids, find_child_cycle, merge_job_update, resolve_time_zone,
    validate_job,
};
use crate::model::{GlueType, Group, GroupId, Job, JobId, JobStatus, ScheduleType};
use crate::store::writer_gate::api_write;
use crate::store::{JobFilter, JobScheduleUpdate};
use crate::trigger::route::is_supported;
use tonic::Request;

impl JobAdminService {
    /// Validates a job for create/update: pure rules first, then its group and child jobs.
    pub(super) async fn check_job(&self, job: &mut Job) -> Result<(), Error> {
        validate_job(job, &self.limits(), "job")?;
        if !is_supported(job.route_strategy) {
            let message = format!(
                "job.route_strategy: {} is not implemented yet",
                job.route_strategy
            );
            return Err(Error::Unimplemented(message));
        }
        let Some(group) = self.store().get_group(job.group_id).await? else {
            let message = format!("job.group_id: group {} not found", job.group_id);
            return Err(Error::NotFound(message));
        };
        if job.glue_type == GlueType::Groovy {
            self.check_groovy_routing(&group)?;
        }
        if !job.calendar.is_empty() && self.store().get_calendar(&job.calendar).await?.is_none() {
            let message = format!("job.calendar: calendar '{}' not found", job.calendar);
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

    /// `GLUE_GROOVY` only for a group whose runs go to XXL-JOB executors alone (`groovy_refusal`);
    /// `FAILED_PRECONDITION` otherwise: the job is valid, the group is not ready for it.
    fn check_groovy_routing(&self, group: &Group) -> Result<(), Error> {
        let registered: Vec<_> = self
            .ctx
            .registry
            .list_with_peers(&group.app_name)
            .into_iter()
            .filter(|executor| executor.app_name == group.app_name)
            .collect();
        match groovy_refusal(group, &registered) {
            Some(why) => Err(Error::FailedPrecondition(format!("job.glue_type: {why}"))),
            None => Ok(()),
        }
    }

    /// Refuses children from which the job (or any job) is reachable from itself: loads the
    /// child graph below the job level by level, with the job's new children in place of its
    /// stored ones, then searches it.
    pub(super) async fn check_child_cycles(&self, job: &Job) -> Result<(), Error> {
        let mut children: HashMap<JobId, Vec<JobId>> = HashMap::new();
        children.insert(job.id, job.child_job_ids.clone());
        let mut frontier = job.child_job_ids.clone();
        while !frontier.is_empty() {
            frontier.retain(|id| !children.contains_key(id));
            frontier.sort_unstable();
            frontier.dedup();
            let loaded = self.store().get_jobs(&frontier).await?;
            frontier.clear();
            for (id, loaded_job) in loaded {
                frontier.extend(&loaded_job.child_job_ids);
                children.insert(id, loaded_job.child_job_ids.clone());
            }
        }
        match find_child_cycle(job.id, &children) {
            Some(found) => Err(child_cycle_error(job.id, &found, "job.child_job_ids").into()),
            None => Ok(()),
        }
    }

    /// Next fire of `job` strictly after `from_ms`, in its zone; `None` when it never fires.
    pub(super) fn next_fire(&self, job: &Job, from_ms: i64) -> Result<Option<i64>, Error> {
        let default_zone = self.limits().default_time_zone;
        let zone = resolve_time_zone(&job.time_zone, default_zone, "job.time_zone")?;
        next_fire_after(
            job.schedule_type,
            &job.schedule_conf,
            zone,
            job.policy.dst,
            from_ms,
        )
        .map_err(|message| Error::invalid("job.schedule_conf", message))
    }

    /// Fires already planned in the pre-read window belong to the old schedule: record them
    /// as skipped so they are never dispatched.
    pub(super) async fn skip_planned_fires(&self, job_id: JobId, why: &str) -> Result<(), Error> {
        let reason = format!("job {job_id} was {why} after this fire was planned");
        let skipped = self
            .store()
            .skip_planned_fires(job_id, &reason, self.ctx.clock.now_ms())
            .await?;
        if !skipped.is_empty() {
            tracing::info!(
                job_id = job_id.0,
                skipped = skipped.len(),
                "planned fires skipped"
            );
        }
        crate::metrics::dispatched(crate::metrics::Dispatch::Skipped, skipped.len() as u64);
        for run in &skipped {
            crate::telemetry::record_unsent(run.into(), "skipped", &reason);
        }
        Ok(())
    }

    pub(super) async fn write_schedule(&self, job: &Job) -> Result<(), Error> {
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

    pub(super) async fn create_job_checked(&self, wire_job: pb::Job) -> Result<Job, Error> {
        let mut job = job_from_pb(wire_job, "job")?;
        job.id = JobId(0);
        let _child_links = if job.child_job_ids.is_empty() {
            None
        } else {
            Some(self.job_writes.child_links().await)
        };
        self.check_job(&mut job).await?;
        let now = self.ctx.clock.now_ms();
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

    pub(super) async fn update_job_checked(&self, wire_job: pb::Job) -> Result<Job, Error> {
        let incoming = job_from_pb(wire_job, "job")?;
        let _this_job = self.job_writes.job(incoming.id).await;
        let existing = self.load_job(incoming.id).await?;
        let now = self.ctx.clock.now_ms();
        let mut updated = merge_job_update(&existing, incoming, now)?;
        let _child_links = if adds_child_links(&existing.child_job_ids, &updated.child_job_ids) {
            Some(self.job_writes.child_links().await)
        } else {
            None
        };
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
                    tracing::info!(
                        job_id = updated.id.0,
                        "new schedule never fires; job stopped"
                    );
                    updated.status = JobStatus::Stopped;
                    updated.trigger_next_ms = 0;
                }
            }
        }
        if !self.store().update_job(&updated).await? {
            return Err(Error::NotFound(format!("job {} not found", updated.id)));
        }
        // A run already sent ahead carries the job as it was: it does not start.
        self.ctx.trigger.cancel_held(updated.id).await;
        if reschedule {
            self.write_schedule(&updated).await?;
            self.skip_planned_fires(updated.id, "rescheduled").await?;
            self.ctx.schedule_wake.notify_one();
        }
        Ok(updated)
    }

    pub(super) async fn delete_job_checked(&self, id: JobId) -> Result<(), Error> {
        // The delete takes the job's rows, which say which of its runs were sent ahead: they
        // are read first, and cancelled once the job is gone.
        let held = self.ctx.trigger.recorded_held(id).await;
        if !self.store().delete_job(id).await? {
            return Err(Error::NotFound(format!("job {id} not found")));
        }
        self.ctx.trigger.cancel_held_recorded(id, held).await;
        Ok(())
    }

    /// `visible`: the caller's groups (`None` = all); the database filters by them, so a page
    /// holds only what the caller may see and is still full.
    pub(super) async fn list_jobs_page(
        &self,
        request: pb::ListJobsRequest,
        visible: Option<Vec<GroupId>>,
    ) -> Result<pb::ListJobsResponse, Error> {
        let page = Page::from_request(
            request.page_size,
            &request.page_token,
            self.ctx.config.max_page_size,
        )?;
        let filter = JobFilter {
            group_ids: visible,
            ..job_filter(request, page)?
        };
        let jobs = self.store().list_jobs(&filter).await?;
        let total_size = self.store().count_matching_jobs(&filter).await?;
        Ok(pb::ListJobsResponse {
            next_page_token: page.next_token(jobs.len()),
            jobs: jobs.into_iter().map(job_to_pb).collect(),
            total_size,
        })
    }

    pub(super) async fn start_job_checked(&self, id: JobId) -> Result<Job, Error> {
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
            .next_fire(&job, self.ctx.clock.now_ms() + SCHEDULE_CHANGE_DELAY_MS)?
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

    pub(super) async fn stop_job_checked(&self, id: JobId) -> Result<Job, Error> {
        let job = self.load_job(id).await?;
        let stopped = Job {
            status: JobStatus::Stopped,
            trigger_next_ms: 0,
            ..job
        };
        self.write_schedule(&stopped).await?;
        self.skip_planned_fires(stopped.id, "stopped").await?;
        // Runs sent ahead and still held on their executors never start either, whichever
        // admin sent them.
        self.ctx.trigger.cancel_held(stopped.id).await;
        Ok(stopped)
    }
}

/// The `JobAdmin` RPCs of this concept, called by the shell in `mod.rs`.
impl JobAdminService {
    pub(super) async fn create_job_rpc(
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

    pub(super) async fn update_job_rpc(
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

    pub(super) async fn delete_job_rpc(
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

    pub(super) async fn get_job_rpc(
        &self,
        request: Request<pb::GetJobRequest>,
    ) -> RpcResult<pb::GetJobResponse> {
        let caller = self.caller(&request).await?;
        let job = self
            .visible_job(&caller, JobId(request.into_inner().id))
            .await?;
        reply(Ok(pb::GetJobResponse {
            job: Some(job_to_pb(job)),
        }))
    }

    pub(super) async fn list_jobs_rpc(
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

    pub(super) async fn start_job_rpc(
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

    pub(super) async fn stop_job_rpc(
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

    pub(super) async fn update_glue_rpc(
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

    pub(super) async fn list_glue_versions_rpc(
        &self,
        request: Request<pb::ListGlueVersionsRequest>,
    ) -> RpcResult<pb::ListGlueVersionsResponse> {
        let caller = self.caller(&request).await?;
        let request = request.into_inner();
        self.require_in_job(&caller, Permission::Read, JobId(request.job_id))
            .await?;
        reply(crate::api::glue::list_glue_versions(self.store(), request).await)
    }

    pub(super) async fn get_glue_version_rpc(
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
}
