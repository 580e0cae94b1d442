//! Calendars: create, update, delete (refused while jobs name it), get, list. Calendars are
//! shared by every group, so changing one is an admin's call (`groups.manage`, like groups);
//! any authenticated caller may read them (a job form lists them).
//!
//! A change marks the scan's calendar cache stale (`AdminContext::calendars_changed`) and
//! wakes the scan, so this admin's next round decides fires by the new rules.

use std::sync::atomic::Ordering;

use tonic::Request;
use xjob_proto::pb;

use super::{JobAdminService, RpcResult, reply};
use crate::api::calendar_convert::{calendar_from_pb, calendar_to_pb};
use crate::api::convert::required;
use crate::auth::{Permission, Scope};
use crate::error::Error;
use crate::model::Calendar;
use crate::model::calendar::validate_calendar;
use crate::model::validate::validate_calendar_name;
use crate::store::writer_gate::api_write;

impl JobAdminService {
    pub(super) async fn create_calendar_rpc(
        &self,
        request: Request<pb::CreateCalendarRequest>,
    ) -> RpcResult<pb::CreateCalendarResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageGroups, Scope::Any)?;
        let wire = required(request.into_inner().calendar, "calendar")?;
        let calendar = api_write(self.create_calendar_checked(wire)).await?;
        self.calendars_changed();
        let summary = calendar_summary(&calendar);
        self.audit(&caller, "CreateCalendar", object(&calendar.name), summary)
            .await;
        reply(Ok(pb::CreateCalendarResponse {
            calendar: Some(calendar_to_pb(calendar, Vec::new())),
        }))
    }

    pub(super) async fn update_calendar_rpc(
        &self,
        request: Request<pb::UpdateCalendarRequest>,
    ) -> RpcResult<pb::UpdateCalendarResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageGroups, Scope::Any)?;
        let wire = required(request.into_inner().calendar, "calendar")?;
        let calendar = api_write(self.update_calendar_checked(wire)).await?;
        self.calendars_changed();
        let summary = calendar_summary(&calendar);
        self.audit(&caller, "UpdateCalendar", object(&calendar.name), summary)
            .await;
        let job_ids = self.calendar_job_ids(&calendar.name).await?;
        reply(Ok(pb::UpdateCalendarResponse {
            calendar: Some(calendar_to_pb(calendar, job_ids)),
        }))
    }

    pub(super) async fn delete_calendar_rpc(
        &self,
        request: Request<pb::DeleteCalendarRequest>,
    ) -> RpcResult<pb::DeleteCalendarResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageGroups, Scope::Any)?;
        let name = request.into_inner().name.trim().to_string();
        api_write(self.delete_calendar_checked(&name)).await?;
        self.calendars_changed();
        self.audit(&caller, "DeleteCalendar", object(&name), String::new())
            .await;
        reply(Ok(pb::DeleteCalendarResponse {}))
    }

    pub(super) async fn get_calendar_rpc(
        &self,
        request: Request<pb::GetCalendarRequest>,
    ) -> RpcResult<pb::GetCalendarResponse> {
        self.caller(&request).await?;
        let name = request.into_inner().name.trim().to_string();
        let calendar = self.load_calendar(&name).await?;
        let job_ids = self.calendar_job_ids(&name).await?;
        reply(Ok(pb::GetCalendarResponse {
            calendar: Some(calendar_to_pb(calendar, job_ids)),
        }))
    }

    pub(super) async fn list_calendars_rpc(
        &self,
        request: Request<pb::ListCalendarsRequest>,
    ) -> RpcResult<pb::ListCalendarsResponse> {
        self.caller(&request).await?;
        let calendars = self.store().list_calendars().await.map_err(Error::from)?;
        reply(Ok(pb::ListCalendarsResponse {
            calendars: calendars
                .into_iter()
                .map(|calendar| calendar_to_pb(calendar, Vec::new()))
                .collect(),
        }))
    }

    /// The calendar named `name` (`NOT_FOUND` naming it when there is none).
    pub(super) async fn load_calendar(&self, name: &str) -> Result<Calendar, Error> {
        validate_calendar_name(name, "name")?;
        let calendar = self.store().get_calendar(name).await?;
        calendar.ok_or_else(|| Error::NotFound(format!("calendar '{name}' not found")))
    }

    async fn calendar_job_ids(&self, name: &str) -> Result<Vec<i64>, Error> {
        let ids = self.store().jobs_using_calendar(name).await?;
        Ok(ids.into_iter().map(|id| id.0).collect())
    }

    fn calendars_changed(&self) {
        self.ctx.calendars_changed.store(true, Ordering::Release);
        self.ctx.schedule_wake.notify_one();
    }

    async fn create_calendar_checked(&self, wire: pb::Calendar) -> Result<Calendar, Error> {
        let mut calendar = calendar_from_pb(wire);
        validate_calendar(&calendar, self.limits().default_time_zone, "calendar")?;
        if self.store().get_calendar(&calendar.name).await?.is_some() {
            let message = format!("calendar.name: '{}' already exists", calendar.name);
            return Err(Error::AlreadyExists(message));
        }
        let now = self.ctx.clock.now_ms();
        calendar.created_ms = now;
        calendar.updated_ms = now;
        self.store().insert_calendar(&calendar).await?;
        Ok(calendar)
    }

    async fn update_calendar_checked(&self, wire: pb::Calendar) -> Result<Calendar, Error> {
        let mut calendar = calendar_from_pb(wire);
        validate_calendar(&calendar, self.limits().default_time_zone, "calendar")?;
        let existing = self.load_calendar(&calendar.name).await?;
        calendar.created_ms = existing.created_ms;
        calendar.updated_ms = self.ctx.clock.now_ms();
        if !self.store().update_calendar(&calendar).await? {
            return Err(Error::NotFound(format!(
                "calendar '{}' not found",
                calendar.name
            )));
        }
        Ok(calendar)
    }

    async fn delete_calendar_checked(&self, name: &str) -> Result<(), Error> {
        self.load_calendar(name).await?;
        let users = self.store().jobs_using_calendar(name).await?;
        if !users.is_empty() {
            let shown: Vec<String> = users.iter().take(20).map(|id| id.to_string()).collect();
            let more = if users.len() > 20 { ", ..." } else { "" };
            return Err(Error::FailedPrecondition(format!(
                "calendar '{name}' is used by {} job(s) ({}{more}); change their calendar first",
                users.len(),
                shown.join(", ")
            )));
        }
        if !self.store().delete_calendar(name).await? {
            return Err(Error::NotFound(format!("calendar '{name}' not found")));
        }
        Ok(())
    }
}

fn object(name: &str) -> String {
    format!("calendar:{name}")
}

fn calendar_summary(calendar: &Calendar) -> String {
    let zone = if calendar.time_zone.is_empty() {
        "the admin's zone"
    } else {
        calendar.time_zone.as_str()
    };
    format!("{} rule(s), in {zone}", calendar.rules.len())
}
