//! A user's hand on one node of a workflow run: retry a failed node, skip a failed or waiting
//! one (`model::workflow_reopen` decides; docs/scheduling.md, "Retry or skip a node"). Both
//! need `jobs.operate` in the workflow's group. The write is one conditional transaction, so
//! of two racing retries one is recorded and the other is refused naming the node's new state;
//! the follow-up loop's advance, woken here, then starts the node through its (run, node) key.

use tonic::{Request, Status};
use xjob_proto::pb;

use super::workflow_runs::run_object;
use super::{JobAdminService, RpcResult};
use crate::api::workflow_convert::workflow_run_to_pb;
use crate::auth::{Caller, Permission, Scope};
use crate::error::Error;
use crate::model::workflow_reopen::{NodeAction, ReopenRefusal, plan_reopen};
use crate::store::writer_gate::api_write;

impl JobAdminService {
    pub(super) async fn retry_workflow_node_rpc(
        &self,
        request: Request<pb::RetryWorkflowNodeRequest>,
    ) -> RpcResult<pb::RetryWorkflowNodeResponse> {
        let caller = self.caller(&request).await?;
        let request = request.into_inner();
        let run = self
            .reopen_node(&caller, request.id, &request.node, NodeAction::Retry)
            .await?;
        Ok(tonic::Response::new(pb::RetryWorkflowNodeResponse {
            run: Some(run),
        }))
    }

    pub(super) async fn skip_workflow_node_rpc(
        &self,
        request: Request<pb::SkipWorkflowNodeRequest>,
    ) -> RpcResult<pb::SkipWorkflowNodeResponse> {
        let caller = self.caller(&request).await?;
        let request = request.into_inner();
        let run = self
            .reopen_node(&caller, request.id, &request.node, NodeAction::Skip)
            .await?;
        Ok(tonic::Response::new(pb::SkipWorkflowNodeResponse {
            run: Some(run),
        }))
    }

    /// Plans and writes `action` on node `key` of run `id`; returns the run as it then stands.
    /// A write refused because the node moved on meanwhile is planned again on a fresh read,
    /// whose refusal names the node's new state.
    async fn reopen_node(
        &self,
        caller: &Caller,
        id: i64,
        key: &str,
        action: NodeAction,
    ) -> Result<pb::WorkflowRun, Status> {
        if key.is_empty() {
            return Err(Error::invalid("node", "must name a node of the run").into());
        }
        for _ in 0..2 {
            let run = self.visible_workflow_run(caller, id).await?;
            caller.require(Permission::Operate, Scope::Group(run.graph.group_id))?;
            let now = self.ctx.clock.now_ms();
            let plan = match plan_reopen(&run, key, action, caller.actor(), now) {
                Ok(plan) => plan,
                Err(ReopenRefusal::NoNode(message)) => return Err(Error::NotFound(message).into()),
                Err(ReopenRefusal::Refused(message)) => {
                    return Err(Error::FailedPrecondition(message).into());
                }
            };
            let written = api_write(self.store().reopen_workflow_node(&plan))
                .await
                .map_err(Error::from)?;
            if !written {
                continue;
            }
            // The advance starts a retried node and decides what waits again, this round.
            self.ctx.workflow_wake.notify_one();
            let call = match action {
                NodeAction::Retry => "RetryWorkflowNode",
                NodeAction::Skip => "SkipWorkflowNode",
            };
            let summary = format!("node {key}; {} node(s) below wait again", plan.reset.len());
            self.audit(caller, call, run_object(id), summary).await;
            let run = self.visible_workflow_run(caller, id).await?;
            let logs = self.node_logs(&run).await?;
            return Ok(workflow_run_to_pb(run, &logs, true));
        }
        let message = format!("node '{key}' of workflow run {id} is changing; try again");
        Err(Error::FailedPrecondition(message).into())
    }
}
