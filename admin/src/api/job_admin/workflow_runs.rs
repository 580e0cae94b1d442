//! Workflow runs: start, get, list, cancel. Reading a run needs read access to its workflow's
//! group; starting and cancelling need `jobs.operate` there, and starting also in the group
//! of every node's job (a start runs them all), as for saving the workflow.

use std::collections::HashMap;

use tonic::Request;
use xjob_proto::pb;

use super::workflows::workflow_object;
use super::{JobAdminService, RpcResult, reply};
use crate::api::convert::Page;
use crate::api::workflow_convert::workflow_run_to_pb;
use crate::auth::{Caller, Permission, Scope};
use crate::error::Error;
use crate::model::workflow_run::{NewWorkflowRun, NodeState, WorkflowRun, WorkflowRunStatus};
use crate::model::{LogId, RunLog, RunStatus, WorkflowId};
use crate::store::writer_gate::api_write;

/// The most bytes of params a run takes (each node's run gets them, plus its parents'
/// results).
const MAX_PARAMS_BYTES: usize = 64 * 1024;

pub(super) fn run_object(id: i64) -> String {
    format!("workflow_run:{id}")
}

impl JobAdminService {
    /// Workflow run `id`, if the caller may read its group; else `NOT_FOUND` as for none.
    pub(super) async fn visible_workflow_run(
        &self,
        caller: &Caller,
        id: i64,
    ) -> Result<WorkflowRun, Error> {
        match self.store().get_workflow_run(id).await? {
            Some(run) if caller.may_read(run.graph.group_id) => Ok(run),
            _ => Err(Error::NotFound(format!("workflow run {id} not found"))),
        }
    }

    /// The runs of a workflow run's started nodes, by log id.
    pub(super) async fn node_logs(
        &self,
        run: &WorkflowRun,
    ) -> Result<HashMap<LogId, RunLog>, Error> {
        let mut logs = HashMap::new();
        for node in run.nodes.iter().filter(|node| node.log_id.0 > 0) {
            if let Some(log) = self.store().get_log(node.log_id).await? {
                logs.insert(node.log_id, log);
            }
        }
        Ok(logs)
    }

    pub(super) async fn start_workflow_rpc(
        &self,
        request: Request<pb::StartWorkflowRequest>,
    ) -> RpcResult<pb::StartWorkflowResponse> {
        let caller = self.caller(&request).await?;
        let request = request.into_inner();
        if request.params.len() > MAX_PARAMS_BYTES {
            let message = format!(
                "at most {MAX_PARAMS_BYTES} bytes, got {}",
                request.params.len()
            );
            return Err(Error::invalid("params", message).into());
        }
        let workflow_id = WorkflowId(request.workflow_id);
        let workflow = self.visible_workflow(&caller, workflow_id).await?;
        caller.require(Permission::Operate, Scope::Group(workflow.group_id))?;
        let jobs = self
            .store()
            .get_jobs(&workflow.job_ids())
            .await
            .map_err(Error::from)?;
        for job in jobs.values() {
            caller.require(Permission::Operate, Scope::Group(job.group_id))?;
        }
        // The run's span: every node's run is traced under it (the row keeps its context).
        let trace = crate::telemetry::WorkflowRunTrace::plan(workflow_id.0, &workflow.name);
        // Params given replace the workflow's own; none given, its own (which may be none).
        let params = if request.params.is_empty() {
            workflow.params.clone()
        } else {
            request.params
        };
        let new_run = NewWorkflowRun {
            graph: workflow,
            params,
            created_ms: self.ctx.clock.now_ms(),
            traceparent: crate::telemetry::traceparent_of(trace.as_ref()),
            trigger_type: crate::model::TriggerType::Manual,
            scheduled_at_ms: 0,
        };
        let inserted = api_write(self.store().insert_workflow_run(&new_run)).await;
        let run_id = inserted.map_err(Error::from)?;
        if let Some(trace) = trace {
            trace.record(run_id);
        }
        // The follow-up loop advances it: its roots become PENDING runs due at once, which
        // the same round sends. Should this admin die first, any admin's periodic advance of
        // the RUNNING runs starts them.
        self.ctx.workflow_wake.notify_one();
        let summary = format!("run {run_id}");
        self.audit(
            &caller,
            "StartWorkflow",
            workflow_object(workflow_id),
            summary,
        )
        .await;
        reply(Ok(pb::StartWorkflowResponse {
            workflow_run_id: run_id,
        }))
    }

    pub(super) async fn get_workflow_run_rpc(
        &self,
        request: Request<pb::GetWorkflowRunRequest>,
    ) -> RpcResult<pb::GetWorkflowRunResponse> {
        let caller = self.caller(&request).await?;
        let run = self
            .visible_workflow_run(&caller, request.into_inner().id)
            .await?;
        let logs = self.node_logs(&run).await?;
        reply(Ok(pb::GetWorkflowRunResponse {
            run: Some(workflow_run_to_pb(run, &logs, true)),
        }))
    }

    pub(super) async fn list_workflow_runs_rpc(
        &self,
        request: Request<pb::ListWorkflowRunsRequest>,
    ) -> RpcResult<pb::ListWorkflowRunsResponse> {
        let caller = self.caller(&request).await?;
        let request = request.into_inner();
        let workflow_id = WorkflowId(request.workflow_id);
        self.visible_workflow(&caller, workflow_id).await?;
        let page = Page::from_request(
            request.page_size,
            &request.page_token,
            self.ctx.config.max_page_size,
        )?;
        let runs = self
            .store()
            .list_workflow_runs(workflow_id, page.offset, page.limit)
            .await
            .map_err(Error::from)?;
        let none = HashMap::new();
        reply(Ok(pb::ListWorkflowRunsResponse {
            next_page_token: page.next_token(runs.len()),
            runs: (runs.into_iter())
                .map(|run| workflow_run_to_pb(run, &none, false))
                .collect(),
        }))
    }

    /// Ends the run CANCELLED first (so no node starts after this), then kills the runs of
    /// its running nodes through KillRun's path. A node run not sent yet, or whose kill
    /// fails, ends on its own; its end changes nothing in the cancelled run.
    pub(super) async fn cancel_workflow_run_rpc(
        &self,
        request: Request<pb::CancelWorkflowRunRequest>,
    ) -> RpcResult<pb::CancelWorkflowRunResponse> {
        let caller = self.caller(&request).await?;
        let id = request.into_inner().id;
        let run = self.visible_workflow_run(&caller, id).await?;
        caller.require(Permission::Operate, Scope::Group(run.graph.group_id))?;
        let now = self.ctx.clock.now_ms();
        let cancel = self
            .store()
            .finish_workflow_run(id, WorkflowRunStatus::Cancelled, None, now);
        if !api_write(cancel).await.map_err(Error::from)? {
            let message = format!("workflow run {id} has ended");
            return Err(Error::FailedPrecondition(message).into());
        }
        let mut killed = 0;
        let running = run
            .nodes
            .iter()
            .filter(|node| node.state == NodeState::Running);
        for node in running {
            let Some(log) = self
                .store()
                .get_log(node.log_id)
                .await
                .map_err(Error::from)?
            else {
                continue;
            };
            // Where this admin sent it, if the row does not say so yet (`recorder`).
            let log = self.ctx.trigger.with_held_outcome(log);
            if log.status != RunStatus::Running || log.executor_address.is_empty() {
                continue;
            }
            match self.kill_run_checked(log.id).await {
                Ok(answer) if answer.killed => killed += 1,
                Ok(answer) => tracing::info!(log_id = log.id.0, message = %answer.message,
                    "workflow node's run not killed"),
                Err(error) => tracing::warn!(log_id = log.id.0, %error,
                    "killing a cancelled workflow's node run failed"),
            }
        }
        let summary = format!("killed {killed} node run(s)");
        self.audit(&caller, "CancelWorkflowRun", run_object(id), summary)
            .await;
        let run = self.visible_workflow_run(&caller, id).await?;
        let logs = self.node_logs(&run).await?;
        reply(Ok(pb::CancelWorkflowRunResponse {
            run: Some(workflow_run_to_pb(run, &logs, true)),
            killed,
        }))
    }
}
