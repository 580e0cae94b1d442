//! Schedule preview: the next fire times of a schedule, without a job, with the job's
//! daylight-saving policy, and when each is sent once the job's jitter holds it back.

use xjob_proto::pb;

use super::JobAdminService;
use super::RpcResult;
use super::reply;
use crate::api::calendar_convert::calendar_mode_from_pb;
use crate::api::convert::{pb_schedule_type, preview_count};
use crate::api::policy_convert::dst_from_pb;
use crate::auth::Permission;
use crate::auth::Scope;
use crate::error::Error;
use crate::model::calendar::validate_calendar;
use crate::model::jitter::dispatch_time;
use crate::model::next_fire::next_fire_after;
use crate::model::validate::validate_calendar_name;
use crate::model::validate::{resolve_time_zone, validate_schedule};
use crate::model::validate::{validate_dst, validate_jitter};
use crate::model::{JobId, ScheduleType, TriggerType};
use crate::wire::schedule_type_to_pb;
use tonic::Request;

impl JobAdminService {
    pub(super) async fn preview(
        &self,
        request: pb::PreviewScheduleRequest,
    ) -> Result<pb::PreviewScheduleResponse, Error> {
        let schedule_type = pb_schedule_type(request.schedule_type, "schedule_type")?;
        let conf = request.schedule_conf.trim();
        validate_schedule(schedule_type, conf, "")?;
        let default_zone = self.limits().default_time_zone;
        let zone = resolve_time_zone(&request.time_zone, default_zone, "time_zone")?;
        let count = preview_count(request.count)?;
        validate_jitter(request.jitter_max_ms, "jitter_max_ms")?;
        let dst = dst_from_pb(request.dst_gap_policy, request.dst_overlap_policy, "")?;
        validate_dst(schedule_type, dst, "")?;
        if request.job_id < 0 {
            return Err(Error::invalid(
                "job_id",
                format!("must be >= 0, got {}", request.job_id),
            ));
        }
        let from_ms = match request.from_ms {
            0 => self.ctx.clock.now_ms(),
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
            let next = next_fire_after(schedule_type, conf, zone, dst, cursor)
                .map_err(|message| Error::invalid("schedule_conf", message))?;
            let Some(next) = next else { break };
            fire_times.push(next);
            cursor = next;
        }
        let skip_reasons = self.calendar_skips(&request, &fire_times).await?;
        let job_id = JobId(request.job_id);
        let dispatch_times_ms = fire_times
            .iter()
            .map(|&at| dispatch_time(job_id, TriggerType::Cron, 0, at, request.jitter_max_ms))
            .collect();
        Ok(pb::PreviewScheduleResponse {
            fire_times_ms: fire_times,
            dispatch_times_ms,
            skip_reasons,
        })
    }

    /// Aligned with `fire_times`: why the request's calendar skips each fire (empty when it
    /// runs); no calendar, no reasons.
    async fn calendar_skips(
        &self,
        request: &pb::PreviewScheduleRequest,
        fire_times: &[i64],
    ) -> Result<Vec<String>, Error> {
        let name = request.calendar.trim();
        let mode = calendar_mode_from_pb(request.calendar_mode, "calendar_mode")?;
        if name.is_empty() {
            return Ok(Vec::new());
        }
        validate_calendar_name(name, "calendar")?;
        let Some(stored) = self.store().get_calendar(name).await? else {
            return Err(Error::NotFound(format!(
                "calendar: calendar '{name}' not found"
            )));
        };
        let compiled = validate_calendar(&stored, self.limits().default_time_zone, "calendar")?;
        Ok(fire_times
            .iter()
            .map(|&at| compiled.skip_reason(mode, at).unwrap_or_default())
            .collect())
    }
}

/// The `JobAdmin` RPCs of this concept, called by the shell in `mod.rs`.
impl JobAdminService {
    pub(super) async fn preview_schedule_rpc(
        &self,
        request: Request<pb::PreviewScheduleRequest>,
    ) -> RpcResult<pb::PreviewScheduleResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::Read, Scope::Any)?;
        let mut request = request.into_inner();
        if request.workflow_id != 0 {
            let id = crate::model::WorkflowId(request.workflow_id);
            let workflow = self.visible_workflow(&caller, id).await?;
            let schedule = workflow.schedule;
            if schedule.schedule_type == ScheduleType::None {
                let message = format!("workflow {id} has no schedule");
                return Err(Error::FailedPrecondition(message).into());
            }
            request.schedule_type = schedule_type_to_pb(schedule.schedule_type) as i32;
            request.schedule_conf = schedule.schedule_conf;
            request.time_zone = schedule.time_zone;
        }
        reply(self.preview(request).await)
    }
}
