//! Backfills: start one (the job's occurrences in a range, run now in order), read its
//! progress, list a job's, cancel one. The runs are started by `monitor::backfill`; this file
//! only checks requests and writes the backfill row.

use xjob_proto::pb;

use super::JobAdminService;
use super::RpcResult;
use super::reply;
use crate::auth::{Caller, Permission, Scope};
use crate::error::Error;
use crate::model::backfill::{check_request, count_occurrences};
use crate::model::{Backfill, BackfillProgress, BackfillState, JobId, job_time_zone};
use crate::store::writer_gate::api_write;
use crate::wire::backfill_state_to_pb;
use tonic::Request;

/// The wire form of a backfill and how its runs stand.
pub(super) fn backfill_to_pb(backfill: Backfill, progress: BackfillProgress) -> pb::Backfill {
    pb::Backfill {
        id: backfill.id,
        job_id: backfill.job_id.0,
        from_ms: backfill.from_ms,
        to_ms: backfill.to_ms,
        max_concurrent: backfill.max_concurrent,
        state: backfill_state_to_pb(backfill.state) as i32,
        total: backfill.total,
        created: backfill.created,
        succeeded: progress.succeeded,
        failed: progress.failed,
        running: progress.running,
        cursor_ms: backfill.cursor_ms,
        created_by: backfill.created_by,
        created_ms: backfill.created_ms,
        updated_ms: backfill.updated_ms,
    }
}

impl JobAdminService {
    /// Checks the range against the job's schedule and writes the backfill, owned by this
    /// admin (its runner starts the runs within a tick).
    pub(super) async fn backfill_job_checked(
        &self,
        caller: &Caller,
        request: pb::BackfillJobRequest,
    ) -> Result<pb::Backfill, Error> {
        check_request(request.from_ms, request.to_ms, request.max_concurrent)
            .map_err(Error::InvalidArgument)?;
        let job = self.visible_job(caller, JobId(request.job_id)).await?;
        caller.require(Permission::Operate, Scope::Group(job.group_id))?;
        let zone = job_time_zone(&job, self.ctx.config.default_time_zone());
        let total = count_occurrences(&job, zone, request.from_ms, request.to_ms)
            .map_err(Error::InvalidArgument)?;
        let now = self.ctx.clock.now_ms();
        let backfill = Backfill {
            id: 0,
            job_id: job.id,
            from_ms: request.from_ms,
            to_ms: request.to_ms,
            max_concurrent: request.max_concurrent.max(1),
            state: BackfillState::Running,
            total,
            created: 0,
            cursor_ms: 0,
            owner_node: self.ctx.node.node_id.clone(),
            epoch: self.ctx.node.epoch,
            created_by: caller.actor().to_string(),
            created_ms: now,
            updated_ms: now,
        };
        let backfill = api_write(self.store().insert_backfill(&backfill)).await?;
        let summary = format!(
            "backfill {}: {} occurrences from {} to {}, {} at a time",
            backfill.id, total, backfill.from_ms, backfill.to_ms, backfill.max_concurrent
        );
        self.audit(caller, "BackfillJob", format!("job:{}", job.id), summary)
            .await;
        Ok(backfill_to_pb(backfill, BackfillProgress::default()))
    }

    /// Backfill `id` with its progress, if the caller may read its job.
    pub(super) async fn visible_backfill(
        &self,
        caller: &Caller,
        id: i64,
    ) -> Result<(Backfill, pb::Backfill), Error> {
        let not_found = || Error::NotFound(format!("backfill {id} not found"));
        let backfill = self.store().get_backfill(id).await?.ok_or_else(not_found)?;
        let job = self.store().get_job(backfill.job_id).await?;
        if !job.is_some_and(|job| caller.may_read(job.group_id)) {
            return Err(not_found());
        }
        let progress = self.store().backfill_progress(id).await?;
        Ok((backfill.clone(), backfill_to_pb(backfill, progress)))
    }

    pub(super) async fn list_backfills_checked(
        &self,
        caller: &Caller,
        job_id: JobId,
    ) -> Result<Vec<pb::Backfill>, Error> {
        self.visible_job(caller, job_id).await?;
        let backfills = self.store().list_backfills(job_id).await?;
        let ids: Vec<i64> = backfills.iter().map(|backfill| backfill.id).collect();
        let mut progress = self.store().backfills_progress(&ids).await?;
        Ok(backfills
            .into_iter()
            .map(|backfill| {
                let counts = progress.remove(&backfill.id).unwrap_or_default();
                backfill_to_pb(backfill, counts)
            })
            .collect())
    }

    /// Cancels a running backfill: no more of its runs start; the ones started finish (or
    /// are killed one by one with KillRun). Cancelling an ended backfill is
    /// FAILED_PRECONDITION.
    pub(super) async fn cancel_backfill_checked(
        &self,
        caller: &Caller,
        id: i64,
    ) -> Result<pb::Backfill, Error> {
        let (backfill, _) = self.visible_backfill(caller, id).await?;
        let job = self.load_job(backfill.job_id).await?;
        caller.require(Permission::Operate, Scope::Group(job.group_id))?;
        let now = self.ctx.clock.now_ms();
        if !api_write(self.store().cancel_backfill(id, now)).await? {
            return Err(Error::FailedPrecondition(format!(
                "backfill {id} is {} already; only a RUNNING backfill can be cancelled",
                backfill.state
            )));
        }
        self.audit(
            caller,
            "CancelBackfill",
            format!("job:{}", job.id),
            format!("backfill {id}"),
        )
        .await;
        Ok(self.visible_backfill(caller, id).await?.1)
    }
}

/// The `JobAdmin` RPCs of this concept, called by the shell in `mod.rs`.
impl JobAdminService {
    pub(super) async fn backfill_job_rpc(
        &self,
        request: Request<pb::BackfillJobRequest>,
    ) -> RpcResult<pb::BackfillJobResponse> {
        let caller = self.caller(&request).await?;
        let backfill = self.backfill_job_checked(&caller, request.into_inner());
        reply(backfill.await.map(|backfill| pb::BackfillJobResponse {
            backfill: Some(backfill),
        }))
    }

    pub(super) async fn get_backfill_rpc(
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

    pub(super) async fn list_backfills_rpc(
        &self,
        request: Request<pb::ListBackfillsRequest>,
    ) -> RpcResult<pb::ListBackfillsResponse> {
        let caller = self.caller(&request).await?;
        let job_id = JobId(request.into_inner().job_id);
        let backfills = self.list_backfills_checked(&caller, job_id).await;
        reply(backfills.map(|backfills| pb::ListBackfillsResponse { backfills }))
    }

    pub(super) async fn cancel_backfill_rpc(
        &self,
        request: Request<pb::CancelBackfillRequest>,
    ) -> RpcResult<pb::CancelBackfillResponse> {
        let caller = self.caller(&request).await?;
        let cancelled = self.cancel_backfill_checked(&caller, request.into_inner().id);
        reply(cancelled.await.map(|backfill| pb::CancelBackfillResponse {
            backfill: Some(backfill),
        }))
    }
}
