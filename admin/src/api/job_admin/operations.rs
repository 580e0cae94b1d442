//! Operations: the dashboard's counts and the run-log clean-up.

use xjob_proto::pb;

use super::JobAdminService;
use crate::api::convert::{clear_request, dashboard_to_pb, loop_health_to_pb};
use crate::error::Error;
use crate::maintenance::{cleanup, report};

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
