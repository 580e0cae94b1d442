//! Jobs, one module per concept: `list.rs` (the filtered, paged list and its bulk actions),
//! `editor.rs` (the form for create, edit and copy, the state card and the trigger form, the
//! schedule preview), `glue.rs` (a script job's source and versions) and `actions.rs` (what
//! the forms post: create, update, start, stop, delete, trigger, save a script). What they
//! share is here: loading a job, a new job's defaults, and the enums' choices.

pub mod actions;
pub mod backfill;
pub mod editor;
pub mod glue;
pub mod list;

use axum::http::StatusCode;
use axum::response::Response;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::html::{self, Choice};
use super::super::i18n::t;
use super::super::session::Viewer;
use super::super::shared::{Console, request};
use super::status_page;

pub fn label(name: Result<&str, prost::UnknownEnumValue>, prefix: &str) -> String {
    name.map(|name| html::enum_label(name, prefix))
        .unwrap_or_else(|_| "?".to_string())
}

/// A new job's defaults: a cron job every minute, XXL-JOB's strategies.
pub fn new_job(group_id: i64) -> pb::Job {
    pb::Job {
        group_id,
        schedule_type: pb::ScheduleType::Cron as i32,
        schedule_conf: "0 * * * * ?".to_string(),
        misfire_strategy: pb::MisfireStrategy::DoNothing as i32,
        route_strategy: pb::RouteStrategy::First as i32,
        block_strategy: pb::BlockStrategy::SerialExecution as i32,
        glue_type: pb::GlueType::Bean as i32,
        ..Default::default()
    }
}

pub async fn load(console: &Console, viewer: &Viewer, id: i64) -> Result<pb::Job, Response> {
    let answer = console
        .api()
        .get_job(request(&viewer.caller, pb::GetJobRequest { id }))
        .await;
    match answer {
        Ok(answer) => answer.into_inner().job.ok_or_else(|| {
            let lang = viewer.lang;
            super::error_page(lang, StatusCode::NOT_FOUND, t(lang, "error.job_not_found"))
        }),
        Err(status) => Err(status_page(viewer.lang, &status)),
    }
}

/// The choices of one of the job's enums, from the enum (so a new strategy shows up by itself).
pub fn choices(prefix: &str, name_of: fn(i32) -> Option<&'static str>) -> Vec<Choice> {
    // GROOVY is offered too: the admin takes it for a group that routes to XXL-JOB executors
    // only, and its refusal names the reason otherwise.
    html::enum_choices(prefix, name_of, &[])
}

pub fn schedule_types() -> Vec<Choice> {
    choices("SCHEDULE_TYPE_", |value| {
        pb::ScheduleType::try_from(value)
            .ok()
            .map(|kind| kind.as_str_name())
    })
}

pub fn misfire_strategies() -> Vec<Choice> {
    choices("MISFIRE_STRATEGY_", |value| {
        pb::MisfireStrategy::try_from(value)
            .ok()
            .map(|kind| kind.as_str_name())
    })
}

pub fn catch_up_modes() -> Vec<Choice> {
    choices("CATCH_UP_MODE_", |value| {
        pb::CatchUpMode::try_from(value)
            .ok()
            .map(|kind| kind.as_str_name())
    })
}

pub fn calendar_modes() -> Vec<Choice> {
    choices("CALENDAR_MODE_", |value| {
        pb::CalendarMode::try_from(value)
            .ok()
            .map(|kind| kind.as_str_name())
    })
}

pub fn dst_gap_policies() -> Vec<Choice> {
    choices("DST_GAP_POLICY_", |value| {
        pb::DstGapPolicy::try_from(value)
            .ok()
            .map(|kind| kind.as_str_name())
    })
}

pub fn dst_overlap_policies() -> Vec<Choice> {
    choices("DST_OVERLAP_POLICY_", |value| {
        pb::DstOverlapPolicy::try_from(value)
            .ok()
            .map(|kind| kind.as_str_name())
    })
}

pub fn overlap_policies() -> Vec<Choice> {
    choices("OVERLAP_POLICY_", |value| {
        pb::OverlapPolicy::try_from(value)
            .ok()
            .map(|kind| kind.as_str_name())
    })
}

pub fn route_strategies() -> Vec<Choice> {
    choices("ROUTE_STRATEGY_", |value| {
        pb::RouteStrategy::try_from(value)
            .ok()
            .map(|kind| kind.as_str_name())
    })
}

pub fn block_strategies() -> Vec<Choice> {
    choices("BLOCK_STRATEGY_", |value| {
        pb::BlockStrategy::try_from(value)
            .ok()
            .map(|kind| kind.as_str_name())
    })
}

pub fn glue_types() -> Vec<Choice> {
    choices("GLUE_TYPE_", |value| {
        pb::GlueType::try_from(value)
            .ok()
            .map(|kind| kind.as_str_name())
    })
}

/// Whether the viewer may change `job` (a new job: any group it operates).
pub fn editable(viewer: &Viewer, job: &pb::Job) -> bool {
    if job.id == 0 {
        viewer.can_operate_any()
    } else {
        viewer.can_operate(job.group_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_lists_come_from_the_enums() {
        let routes: Vec<String> = route_strategies()
            .into_iter()
            .map(|(value, _)| value)
            .collect();
        assert_eq!(routes.first().map(String::as_str), Some("FIRST"));
        assert!(routes.contains(&"SHARDING_BROADCAST".to_string()));
        let glues: Vec<String> = glue_types().into_iter().map(|(value, _)| value).collect();
        assert!(glues.contains(&"SHELL".to_string()));
        assert!(glues.contains(&"GROOVY".to_string()), "{glues:?}");
        assert!(!glues.iter().any(|value| value.contains("UNSPECIFIED")));
    }
}
