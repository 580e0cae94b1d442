//! Operations: the dashboard's counts and the run-log clean-up.

use xjob_proto::pb;

use super::JobAdminService;
use super::RpcResult;
use super::reply;
use crate::api::convert::executor_to_pb;
use crate::api::convert::{clear_request, dashboard_to_pb, loop_health_to_pb};
use crate::auth::Permission;
use crate::auth::Scope;
use crate::error::Error;
use crate::maintenance::{cleanup, report};
use crate::model::GroupId;
use crate::model::JobId;
use tonic::Request;

impl JobAdminService {
    /// Job count, online executors, and run counts per day of the range from the report rows.
    pub(super) async fn dashboard(
        &self,
        request: pb::GetDashboardRequest,
        visible: Option<Vec<crate::model::GroupId>>,
    ) -> Result<pb::GetDashboardResponse, Error> {
        let zone = self.ctx.config.default_time_zone();
        let now_ms = self.ctx.clock.now_ms();
        let days = report::dashboard_days(zone, request.from_ms, request.to_ms, now_ms)?;
        let online_executors = i64::try_from(self.ctx.registry.count()).unwrap_or(i64::MAX);
        let dashboard = report::dashboard(
            self.store(),
            zone,
            &days,
            online_executors,
            now_ms,
            visible.as_deref(),
        )
        .await?;
        let mut response = dashboard_to_pb(dashboard);
        // This admin's own loops: in a cluster each admin answers for itself.
        response.serving = self.ctx.health.verdict().serving;
        response.loops = self
            .ctx
            .health
            .snapshot()
            .into_iter()
            .map(loop_health_to_pb)
            .collect();
        Ok(response)
    }

    pub(super) async fn clear_logs_checked(
        &self,
        request: pb::ClearLogsRequest,
    ) -> Result<pb::ClearLogsResponse, Error> {
        let request = clear_request(&request)?;
        let zone = self.ctx.config.default_time_zone();
        let deleted =
            cleanup::clear_logs(self.store(), zone, request, self.ctx.clock.now_ms()).await?;
        Ok(pb::ClearLogsResponse {
            deleted: i64::try_from(deleted).unwrap_or(i64::MAX),
        })
    }
}

/// The `JobAdmin` RPCs of this concept, called by the shell in `mod.rs`.
impl JobAdminService {
    pub(super) async fn clear_logs_rpc(
        &self,
        request: Request<pb::ClearLogsRequest>,
    ) -> RpcResult<pb::ClearLogsResponse> {
        let caller = self.caller(&request).await?;
        let request = request.into_inner();
        let scope = match (request.group_id, request.job_id) {
            (0, 0) => Scope::AllGroups,
            (0, job_id) => Scope::Group(self.visible_job(&caller, JobId(job_id)).await?.group_id),
            (group_id, _) => Scope::Group(GroupId(group_id)),
        };
        caller.require(Permission::Operate, scope)?;
        if request.group_id != 0 && request.job_id != 0 {
            // A job of another group named with a granted group would widen the grant.
            let job = self.visible_job(&caller, JobId(request.job_id)).await?;
            caller.require(Permission::Operate, Scope::Group(job.group_id))?;
        }
        let summary = format!(
            "group {} job {} mode {}",
            request.group_id, request.job_id, request.mode
        );
        let cleared = self.clear_logs_checked(request).await?;
        let summary = format!("{summary}: {} deleted", cleared.deleted);
        self.audit(&caller, "ClearLogs", String::new(), summary)
            .await;
        reply(Ok(cleared))
    }

    pub(super) async fn list_executors_rpc(
        &self,
        request: Request<pb::ListExecutorsRequest>,
    ) -> RpcResult<pb::ListExecutorsResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::Read, Scope::Any)?;
        let executors = self
            .ctx
            .registry
            .list_with_peers(&request.into_inner().app_name);
        let readable_apps = self.readable_app_names(&caller).await?;
        let executors = executors
            .into_iter()
            .filter(|executor| {
                readable_apps
                    .as_ref()
                    .is_none_or(|apps| apps.contains(&executor.app_name))
            })
            .map(executor_to_pb)
            .collect();
        reply(Ok(pb::ListExecutorsResponse { executors }))
    }

    pub(super) async fn get_dashboard_rpc(
        &self,
        request: Request<pb::GetDashboardRequest>,
    ) -> RpcResult<pb::GetDashboardResponse> {
        let caller = self.caller(&request).await?;
        // Totals only (no group's objects): any authenticated caller.
        caller.require(Permission::Read, Scope::Any)?;
        let visible = caller.readable_groups();
        reply(self.dashboard(request.into_inner(), visible).await)
    }
}
