//! Calendars (`model::calendar`) and a job's calendar mode on and off the wire.

use xjob_proto::pb;

use crate::error::Error;
use crate::model::validate::field_name;
use crate::model::{Calendar, CalendarMode};

/// UNSPECIFIED is SKIP, so a client that sets only a calendar gets a blackout.
pub fn calendar_mode_from_pb(value: i32, field: &str) -> Result<CalendarMode, Error> {
    match pb::CalendarMode::try_from(value) {
        Ok(pb::CalendarMode::Unspecified | pb::CalendarMode::Skip) => Ok(CalendarMode::Skip),
        Ok(pb::CalendarMode::Only) => Ok(CalendarMode::Only),
        Err(_) => Err(Error::invalid(
            field,
            format!("unknown value {value} (SKIP = 1, ONLY = 2)"),
        )),
    }
}

pub fn calendar_mode_to_pb(mode: CalendarMode) -> pb::CalendarMode {
    match mode {
        CalendarMode::Skip => pb::CalendarMode::Skip,
        CalendarMode::Only => pb::CalendarMode::Only,
    }
}

/// A mode as a form sends it (`CALENDAR_MODE_ONLY` or `ONLY`); anything else is SKIP.
pub fn calendar_mode_from_name(name: &str) -> i32 {
    let name = name.trim().to_ascii_uppercase();
    let full = if name.starts_with("CALENDAR_MODE_") {
        name
    } else {
        format!("CALENDAR_MODE_{name}")
    };
    pb::CalendarMode::from_str_name(&full).unwrap_or(pb::CalendarMode::Skip) as i32
}

/// A calendar off the wire, trimmed; the output-only fields are left for the handler.
pub fn calendar_from_pb(calendar: pb::Calendar) -> Calendar {
    Calendar {
        name: calendar.name.trim().to_string(),
        time_zone: calendar.time_zone.trim().to_string(),
        rules: calendar
            .rules
            .iter()
            .map(|rule| rule.trim().to_string())
            .collect(),
        description: calendar.description,
        created_ms: 0,
        updated_ms: 0,
    }
}

pub fn calendar_to_pb(calendar: Calendar, job_ids: Vec<i64>) -> pb::Calendar {
    pb::Calendar {
        name: calendar.name,
        time_zone: calendar.time_zone,
        rules: calendar.rules,
        description: calendar.description,
        created_ms: calendar.created_ms,
        updated_ms: calendar.updated_ms,
        job_ids,
    }
}

/// The job's calendar mode field name under `prefix`.
pub fn mode_field(prefix: &str) -> String {
    field_name(prefix, "calendar_mode")
}
