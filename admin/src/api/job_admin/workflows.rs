//! Workflows: create, update, get, list, delete. Access follows the workflow's group like a
//! job's; a node runs its job when the workflow starts, so whoever puts a job in a workflow
//! must be allowed to run it (`jobs.operate` in the job's group), as with child links.

use tonic::{Request, Status};
use xjob_proto::pb;

use super::{JobAdminService, RpcResult, group_scope, reply};
use crate::api::convert::{Page, required};
use crate::api::workflow_convert::{workflow_from_pb, workflow_to_pb};
use crate::auth::{Caller, Permission, Scope};
use crate::error::Error;
use crate::model::workflow_schedule::validate_workflow_schedule;
use crate::model::{ScheduleType, Workflow, WorkflowId, validate_workflow};
use crate::store::writer_gate::api_write;

pub(super) fn workflow_object(id: WorkflowId) -> String {
    format!("workflow:{id}")
}

fn workflow_summary(workflow: &Workflow) -> String {
    let name: String = workflow.name.chars().take(64).collect();
    format!(
        "name '{name}', group {}, {} node(s), {} edge(s)",
        workflow.group_id,
        workflow.nodes.len(),
        workflow.edges.len()
    )
}

impl JobAdminService {
    /// Workflow `id`, if the caller may read its group; else the same `NOT_FOUND` as for none.
    pub(super) async fn visible_workflow(
        &self,
        caller: &Caller,
        id: WorkflowId,
    ) -> Result<Workflow, Error> {
        let workflow = self.store().get_workflow(id).await?;
        match workflow {
            Some(workflow) if caller.may_read(workflow.group_id) => Ok(workflow),
            _ => Err(Error::NotFound(format!("workflow {id} not found"))),
        }
    }

    /// A saved schedule's first occurrence after now; 0 without a schedule.
    fn first_occurrence(&self, workflow: &Workflow) -> i64 {
        if workflow.schedule.schedule_type == ScheduleType::None {
            return 0;
        }
        let default_zone = self.limits().default_time_zone;
        (workflow.schedule).next_after(default_zone, self.ctx.clock.now_ms())
    }

    /// The pure rules, then the group and every node's job: a missing job (or one in a group
    /// the caller cannot read) is `NOT_FOUND` naming the node; a job the caller may not run is
    /// `PERMISSION_DENIED`.
    async fn check_workflow(&self, caller: &Caller, workflow: &Workflow) -> Result<(), Status> {
        validate_workflow(workflow).map_err(Error::from)?;
        let default_zone = self.limits().default_time_zone;
        validate_workflow_schedule(&workflow.schedule, &workflow.params, default_zone)
            .map_err(Error::from)?;
        if self
            .store()
            .get_group(workflow.group_id)
            .await
            .map_err(Error::from)?
            .is_none()
        {
            let message = format!("workflow.group_id: group {} not found", workflow.group_id);
            return Err(Error::NotFound(message).into());
        }
        let jobs = (self.store().get_jobs(&workflow.job_ids()).await).map_err(Error::from)?;
        for (index, node) in workflow.nodes.iter().enumerate() {
            let job = jobs
                .get(&node.job_id)
                .filter(|job| caller.may_read(job.group_id));
            let Some(job) = job else {
                let message = format!(
                    "workflow.nodes[{index}].job_id: job {} not found",
                    node.job_id
                );
                return Err(Error::NotFound(message).into());
            };
            caller.require(Permission::Operate, Scope::Group(job.group_id))?;
        }
        Ok(())
    }

    pub(super) async fn create_workflow_rpc(
        &self,
        request: Request<pb::CreateWorkflowRequest>,
    ) -> RpcResult<pb::CreateWorkflowResponse> {
        let caller = self.caller(&request).await?;
        let wire = required(request.into_inner().workflow, "workflow")?;
        let mut workflow = workflow_from_pb(wire)?;
        caller.require(Permission::Operate, Scope::Group(workflow.group_id))?;
        self.check_workflow(&caller, &workflow).await?;
        workflow.name = workflow.name.trim().to_string();
        workflow.updated_ms = self.ctx.clock.now_ms();
        workflow.schedule.next_fire_ms = self.first_occurrence(&workflow);
        let created = api_write(self.store().insert_workflow(&workflow))
            .await
            .map_err(Error::from)?;
        let summary = workflow_summary(&created);
        self.audit(
            &caller,
            "CreateWorkflow",
            workflow_object(created.id),
            summary,
        )
        .await;
        reply(Ok(pb::CreateWorkflowResponse {
            workflow: Some(workflow_to_pb(created)),
        }))
    }

    pub(super) async fn update_workflow_rpc(
        &self,
        request: Request<pb::UpdateWorkflowRequest>,
    ) -> RpcResult<pb::UpdateWorkflowResponse> {
        let caller = self.caller(&request).await?;
        let wire = required(request.into_inner().workflow, "workflow")?;
        let mut workflow = workflow_from_pb(wire)?;
        // Both the group it is in and the one it moves to.
        let current = self.visible_workflow(&caller, workflow.id).await?;
        caller.require(Permission::Operate, Scope::Group(current.group_id))?;
        caller.require(Permission::Operate, Scope::Group(workflow.group_id))?;
        self.check_workflow(&caller, &workflow).await?;
        workflow.name = workflow.name.trim().to_string();
        workflow.updated_ms = self.ctx.clock.now_ms();
        // Same times: the next occurrence stays (a FIX_RATE schedule does not restart on a
        // rename); changed: it counts from now.
        workflow.schedule.next_fire_ms = if current.schedule.same_times(&workflow.schedule) {
            current.schedule.next_fire_ms
        } else {
            self.first_occurrence(&workflow)
        };
        let updated = api_write(self.store().update_workflow(&workflow))
            .await
            .map_err(Error::from)?;
        if !updated {
            return Err(Error::NotFound(format!("workflow {} not found", workflow.id)).into());
        }
        let summary = workflow_summary(&workflow);
        self.audit(
            &caller,
            "UpdateWorkflow",
            workflow_object(workflow.id),
            summary,
        )
        .await;
        reply(Ok(pb::UpdateWorkflowResponse {
            workflow: Some(workflow_to_pb(workflow)),
        }))
    }

    pub(super) async fn get_workflow_rpc(
        &self,
        request: Request<pb::GetWorkflowRequest>,
    ) -> RpcResult<pb::GetWorkflowResponse> {
        let caller = self.caller(&request).await?;
        let id = WorkflowId(request.into_inner().id);
        let workflow = self.visible_workflow(&caller, id).await?;
        reply(Ok(pb::GetWorkflowResponse {
            workflow: Some(workflow_to_pb(workflow)),
        }))
    }

    pub(super) async fn list_workflows_rpc(
        &self,
        request: Request<pb::ListWorkflowsRequest>,
    ) -> RpcResult<pb::ListWorkflowsResponse> {
        let caller = self.caller(&request).await?;
        let request = request.into_inner();
        caller.require(Permission::Read, group_scope(request.group_id))?;
        let page = Page::from_request(
            request.page_size,
            &request.page_token,
            self.ctx.config.max_page_size,
        )?;
        // One group asked for (the caller may read it: checked above), else the caller's.
        let groups = match request.group_id {
            0 => caller.readable_groups(),
            group_id => Some(vec![crate::model::GroupId(group_id)]),
        };
        let workflows = self
            .store()
            .list_workflows(groups.as_deref(), page.offset, page.limit)
            .await
            .map_err(Error::from)?;
        reply(Ok(pb::ListWorkflowsResponse {
            next_page_token: page.next_token(workflows.len()),
            workflows: workflows.into_iter().map(workflow_to_pb).collect(),
        }))
    }

    pub(super) async fn delete_workflow_rpc(
        &self,
        request: Request<pb::DeleteWorkflowRequest>,
    ) -> RpcResult<pb::DeleteWorkflowResponse> {
        let caller = self.caller(&request).await?;
        let id = WorkflowId(request.into_inner().id);
        let workflow = self.visible_workflow(&caller, id).await?;
        caller.require(Permission::Operate, Scope::Group(workflow.group_id))?;
        api_write(self.store().delete_workflow(id))
            .await
            .map_err(Error::from)?;
        let summary = workflow_summary(&workflow);
        self.audit(&caller, "DeleteWorkflow", workflow_object(id), summary)
            .await;
        reply(Ok(pb::DeleteWorkflowResponse {}))
    }
}
