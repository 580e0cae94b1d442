//! Runs: trigger a job now, list and read runs, kill a running one, read its log through its
//! executor.

use std::sync::Arc;

use xjob_proto::pb;

use super::JobAdminService;
use super::RpcResult;
use super::group_scope;
use super::job_object;
use super::reply;
use super::trigger_summary;
use crate::api::convert::{Page, log_filter, log_to_pb};
use crate::auth::Permission;
use crate::auth::Scope;
use crate::error::Error;
use crate::model::line_ends::to_lf;
use crate::model::validate::{check_params_size, validate_executor_addresses};
use crate::model::{GroupId, JobId, LogFilter, LogId, RunStatus, TriggerType, UnwrittenFire};
use crate::store::writer_gate::api_write;
use crate::trigger::Fires;
use tonic::Request;

impl JobAdminService {
    pub(super) async fn trigger_job_checked(
        &self,
        request: pb::TriggerJobRequest,
        caller_trace: String,
    ) -> Result<Vec<i64>, Error> {
        let job = self.load_job(JobId(request.id)).await?;
        let params = request.params.as_deref().map(to_lf);
        if let Some(params) = &params {
            check_params_size(params, self.ctx.config.max_params_bytes, "params")?;
        }
        validate_executor_addresses(&request.addresses, "addresses")?;
        let fire = UnwrittenFire {
            trace_from: caller_trace,
            ..UnwrittenFire::requested(
                Arc::new(job),
                TriggerType::Manual,
                params,
                self.ctx.clock.now_ms(),
            )
        };
        let fires = Fires::Requested {
            fire,
            addresses: request.addresses,
        };
        let log_ids = self.ctx.trigger.dispatch(fires).await?;
        Ok(log_ids.into_iter().map(|id| id.0).collect())
    }

    /// `visible`: the caller's groups (`None` = all); the database filters by them, so a page
    /// holds only what the caller may see and is still full.
    pub(super) async fn list_logs_page(
        &self,
        request: pb::ListLogsRequest,
        visible: Option<Vec<GroupId>>,
    ) -> Result<pb::ListLogsResponse, Error> {
        let page = Page::from_request(
            request.page_size,
            &request.page_token,
            self.ctx.config.max_page_size,
        )?;
        let filter = LogFilter {
            group_ids: visible,
            ..log_filter(&request, page)?
        };
        if request.count_limit < 0 {
            let message = format!("must be >= 0 (0 = count all), got {}", request.count_limit);
            return Err(Error::invalid("count_limit", message));
        }
        let logs = self.store().list_logs(&filter).await?;
        let (total_size, total_capped) = match request.count_limit {
            0 => (self.store().count_matching_logs(&filter).await?, false),
            limit => {
                let counted = self
                    .store()
                    .count_matching_logs_up_to(&filter, limit)
                    .await?;
                (counted.min(limit), counted > limit)
            }
        };
        Ok(pb::ListLogsResponse {
            next_page_token: page.next_token(logs.len()),
            logs: logs
                .into_iter()
                .map(|run| log_to_pb(self.ctx.trigger.with_held_outcome(run)))
                .collect(),
            total_size,
            total_capped,
        })
    }

    pub(super) async fn kill_run_checked(
        &self,
        log_id: LogId,
    ) -> Result<pb::KillRunResponse, Error> {
        let run = self.load_log(log_id).await?;
        if run.status != RunStatus::Running {
            return Err(Error::FailedPrecondition(format!(
                "log {log_id} is not running (status {})",
                run.status
            )));
        }
        if run.executor_address.is_empty() {
            return Err(Error::FailedPrecondition(format!(
                "log {log_id} has no executor"
            )));
        }
        self.load_job(run.job_id).await?;
        let token = self.group_token(run.group_id).await?;
        let (killed, message) = self
            .ctx
            .executors
            .kill(&run.executor_address, &token, run.job_id, run.id)
            .await?;
        Ok(pb::KillRunResponse { killed, message })
    }

    /// The access token of a run's group (none when the group is gone).
    pub(super) async fn group_token(&self, group_id: GroupId) -> Result<String, Error> {
        let group = self.store().get_group(group_id).await?;
        Ok(group.map(|group| group.access_token).unwrap_or_default())
    }

    pub(super) async fn read_run_log_checked(
        &self,
        request: pb::ReadRunLogRequest,
    ) -> Result<pb::ReadRunLogResponse, Error> {
        if request.from_line < 0 {
            let message = format!("must be >= 0, got {}", request.from_line);
            return Err(Error::invalid("from_line", message));
        }
        let run = self.load_log(LogId(request.log_id)).await?;
        let from_line = request.from_line.max(1);
        if run.executor_address.is_empty() {
            return Ok(pb::ReadRunLogResponse {
                from_line,
                to_line: from_line - 1,
                content: format!(
                    "run {} never reached an executor: {}",
                    run.id, run.trigger_msg
                ),
                is_end: true,
            });
        }
        let token = self.group_token(run.group_id).await?;
        let chunk = self
            .ctx
            .executors
            .read_log(
                &run.executor_address,
                &token,
                run.id,
                run.trigger_time_ms,
                from_line,
            )
            .await?;
        Ok(pb::ReadRunLogResponse {
            from_line: chunk.from_line,
            to_line: chunk.to_line,
            content: chunk.content,
            is_end: chunk.is_end,
        })
    }
}

/// The `JobAdmin` RPCs of this concept, called by the shell in `mod.rs`.
impl JobAdminService {
    pub(super) async fn trigger_job_rpc(
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

    pub(super) async fn list_logs_rpc(
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

    pub(super) async fn get_log_rpc(
        &self,
        request: Request<pb::GetLogRequest>,
    ) -> RpcResult<pb::GetLogResponse> {
        let caller = self.caller(&request).await?;
        let run = self
            .visible_log(&caller, LogId(request.into_inner().id))
            .await?;
        reply(Ok(pb::GetLogResponse {
            log: Some(log_to_pb(run)),
        }))
    }

    pub(super) async fn kill_run_rpc(
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

    pub(super) async fn read_run_log_rpc(
        &self,
        request: Request<pb::ReadRunLogRequest>,
    ) -> RpcResult<pb::ReadRunLogResponse> {
        let caller = self.caller(&request).await?;
        let request = request.into_inner();
        self.visible_log(&caller, LogId(request.log_id)).await?;
        reply(self.read_run_log_checked(request).await)
    }
}
