//! Pure validation of jobs and groups as the admin API receives them (XXL-JOB's checks on job
//! add/update, plus xjob's own limits). No I/O: whatever needs the database (the group exists,
//! child jobs exist, app names are unique) is checked by the API handler after these pass.
//!
//! Every error names the field, prefixed as the caller asks (`job.schedule_conf`, or just
//! `schedule_conf` for `PreviewSchedule`). Whether a `GLUE_GROOVY` job's group routes to
//! XXL-JOB executors alone needs the registry: `model::glue::groovy_refusal`, asked by the API.

use std::collections::{HashMap, HashSet};

use chrono_tz::Tz;

use crate::model::catch_up::MAX_CATCH_UP_WINDOW_MS;
use crate::model::cron::CronExpr;
use crate::model::jitter::MAX_JITTER_MS;
use crate::model::parse_time_zone;
use crate::model::{
    AddressType, DstGapPolicy, DstPolicy, GlueType, Group, Job, JobId, ScheduleType,
};

/// Why a job or group was refused (the API answers INVALID_ARGUMENT or UNIMPLEMENTED).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A field is malformed; the message names it.
    #[error("{0}")]
    InvalidArgument(String),
    /// A part of the contract this release does not run yet.
    #[error("{0}")]
    Unimplemented(String),
}

impl Refusal {
    pub fn invalid(field: &str, message: impl std::fmt::Display) -> Refusal {
        Refusal::InvalidArgument(format!("{field}: {message}"))
    }
}

/// Shortest accepted app name, in characters (the wire contract's, which executors check too).
pub const APP_NAME_MIN_CHARS: usize = xjob_proto::APP_NAME_MIN_CHARS;
/// Longest accepted app name, in characters.
pub const APP_NAME_MAX_CHARS: usize = xjob_proto::APP_NAME_MAX_CHARS;
/// Longest accepted group access token, in characters.
pub const ACCESS_TOKEN_MAX_CHARS: usize = 256;
/// Largest FIX_RATE / FIX_DELAY interval, in seconds (keeps every fire time far from overflow).
pub const MAX_INTERVAL_SECONDS: i64 = i32::MAX as i64;

/// Longest accepted text of each free-text field, in bytes. XXL-JOB's column sizes are the
/// floor; a limit keeps one careless or hostile call from making every list answer huge.
pub mod text_limits {
    pub const JOB_NAME: usize = 255;
    pub const AUTHOR: usize = 64;
    pub const ALARM_EMAIL: usize = 1024;
    pub const SCHEDULE_CONF: usize = 256;
    pub const TIME_ZONE: usize = 64;
    pub const HANDLER: usize = 255;
    pub const GLUE_SOURCE: usize = 1024 * 1024;
    pub const GLUE_REMARK: usize = 255;
    pub const GROUP_TITLE: usize = 255;
    /// Addresses of one MANUAL group.
    pub const GROUP_ADDRESSES: usize = 1000;
}

/// Limits a job is checked against, taken from the admin's configuration.
#[derive(Debug, Clone, Copy)]
pub struct JobLimits {
    pub max_params_bytes: usize,
    /// Zone of jobs whose `time_zone` is empty.
    pub default_time_zone: Tz,
}

/// Checks every field of a job that can be checked without the database.
pub fn validate_job(job: &Job, limits: &JobLimits, prefix: &str) -> Result<(), Refusal> {
    let field = |name: &str| field_name(prefix, name);
    check_job_text_lengths(job, prefix)?;
    if job.name.trim().is_empty() {
        return Err(Refusal::invalid(&field("name"), "required"));
    }
    validate_schedule(job.schedule_type, &job.schedule_conf, prefix)?;
    resolve_time_zone(
        &job.time_zone,
        limits.default_time_zone,
        &field("time_zone"),
    )?;
    validate_glue(job, prefix)?;
    validate_jitter(job.policy.jitter_max_ms, &field("jitter_max_ms"))?;
    validate_catch_up_window(job.policy.catch_up_window_ms, &field("catch_up_window_ms"))?;
    if !job.calendar.is_empty() {
        validate_calendar_name(&job.calendar, &field("calendar"))?;
    }
    validate_dst(job.schedule_type, job.policy.dst, prefix)?;
    require_non_negative(job.timeout_ms, &field("timeout_ms"))?;
    require_non_negative(i64::from(job.fail_retry_count), &field("fail_retry_count"))?;
    validate_retry_backoff(job, prefix)?;
    check_params_size(&job.params, limits.max_params_bytes, &field("params"))?;
    if job.id != JobId(0) && job.child_job_ids.contains(&job.id) {
        return Err(Refusal::invalid(
            &field("child_job_ids"),
            format!("job {} cannot be its own child", job.id),
        ));
    }
    Ok(())
}

/// Applies an update onto the stored job: editable fields come from `incoming`; status, fire
/// times and creation time stay. The glue type cannot change after creation (XXL-JOB edits glue
/// only in its IDE); an edited glue source or remark stamps `glue_updated_ms`.
pub fn merge_job_update(existing: &Job, incoming: Job, now_ms: i64) -> Result<Job, Refusal> {
    if incoming.glue_type != existing.glue_type {
        return Err(Refusal::invalid(
            "job.glue_type",
            format!(
                "cannot change after creation (is {}, got {})",
                existing.glue_type, incoming.glue_type
            ),
        ));
    }
    let glue_changed = incoming.glue_source != existing.glue_source
        || incoming.glue_remark != existing.glue_remark;
    Ok(Job {
        id: existing.id,
        status: existing.status,
        trigger_last_ms: existing.trigger_last_ms,
        trigger_next_ms: existing.trigger_next_ms,
        created_ms: existing.created_ms,
        glue_updated_ms: if glue_changed {
            now_ms
        } else {
            existing.glue_updated_ms
        },
        updated_ms: now_ms,
        ..incoming
    })
}

/// Checks a schedule type and its configuration: a Quartz cron for CRON, whole seconds ≥ 1 for
/// FIX_RATE, anything for NONE. The length comes first, as for a stored job: the errors below
/// quote the expression, and `PreviewSchedule` (which stores nothing) must not echo a huge one.
pub fn validate_schedule(
    schedule_type: ScheduleType,
    schedule_conf: &str,
    prefix: &str,
) -> Result<(), Refusal> {
    let conf_field = field_name(prefix, "schedule_conf");
    check_text_len(schedule_conf, text_limits::SCHEDULE_CONF, &conf_field)?;
    match schedule_type {
        ScheduleType::None => Ok(()),
        ScheduleType::Cron => match CronExpr::parse(schedule_conf) {
            Ok(_) => Ok(()),
            Err(error) => Err(Refusal::invalid(
                &conf_field,
                format!("invalid cron '{schedule_conf}': {error}"),
            )),
        },
        ScheduleType::FixRate | ScheduleType::FixDelay => {
            parse_interval_seconds(schedule_conf, &conf_field).map(|_| ())
        }
    }
}

/// Parses a FIX_RATE / FIX_DELAY interval: a whole number of seconds in 1..=`MAX_INTERVAL_SECONDS`.
pub fn parse_interval_seconds(schedule_conf: &str, field: &str) -> Result<i64, Refusal> {
    let seconds = schedule_conf.trim().parse::<i64>().map_err(|_| {
        Refusal::invalid(
            field,
            format!("'{schedule_conf}' is not a whole number of seconds"),
        )
    })?;
    if !(1..=MAX_INTERVAL_SECONDS).contains(&seconds) {
        return Err(Refusal::invalid(
            field,
            format!("{seconds} seconds is out of range 1-{MAX_INTERVAL_SECONDS}"),
        ));
    }
    Ok(seconds)
}

/// Returns the zone a job's schedule runs in: `default` when `name` is empty, else the IANA zone.
pub fn resolve_time_zone(name: &str, default: Tz, field: &str) -> Result<Tz, Refusal> {
    if name.trim().is_empty() {
        return Ok(default);
    }
    parse_time_zone(name).map_err(|_| {
        let shown = short_prefix(name);
        Refusal::invalid(field, format!("unknown time zone '{shown}'"))
    })
}

/// Refuses params larger than `limit` bytes.
pub fn check_params_size(params: &str, limit: usize, field: &str) -> Result<(), Refusal> {
    if params.len() > limit {
        return Err(Refusal::invalid(
            field,
            format!("{} bytes exceeds the limit of {limit}", params.len()),
        ));
    }
    Ok(())
}

/// Removes repeated child ids, keeping the first occurrence of each.
pub fn dedup_child_ids(ids: &[JobId]) -> Vec<JobId> {
    let mut unique = Vec::with_capacity(ids.len());
    for id in ids {
        if !unique.contains(id) {
            unique.push(*id);
        }
    }
    unique
}

/// A cycle of child jobs: `cycle` starts and ends with the same job; `through_child` is the
/// child of the checked job the walk took to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildCycle<Id = JobId> {
    pub cycle: Vec<Id>,
    pub through_child: Id,
}

/// Finds a cycle reachable from `start` through child links (`children[id]`, a missing id has
/// no children); `None` when the graph below `start` is acyclic. Depth-first, iterative, so
/// long chains cannot overflow the stack. Generic over the id: the XXL-JOB import checks
/// XXL-JOB's own job ids before any of them is an xjob job.
pub fn find_child_cycle<Id: Copy + Eq + std::hash::Hash>(
    start: Id,
    children: &HashMap<Id, Vec<Id>>,
) -> Option<ChildCycle<Id>> {
    let no_children = Vec::new();
    let children_of = |id: Id| children.get(&id).unwrap_or(&no_children);
    let mut finished: HashSet<Id> = HashSet::new();
    // The current path and, per entry, the index of the next child to visit.
    let mut path: Vec<(Id, usize)> = vec![(start, 0)];
    while let Some((node, next_child)) = path.last().copied() {
        let Some(&child) = children_of(node).get(next_child) else {
            finished.insert(node);
            path.pop();
            continue;
        };
        if let Some(last) = path.last_mut() {
            last.1 += 1;
        }
        if let Some(position) = path.iter().position(|(id, _)| *id == child) {
            let mut cycle: Vec<Id> = path[position..].iter().map(|(id, _)| *id).collect();
            cycle.push(child);
            let through_child = path.get(1).map_or(child, |(id, _)| *id);
            return Some(ChildCycle {
                cycle,
                through_child,
            });
        }
        if !finished.contains(&child) {
            path.push((child, 0));
        }
    }
    None
}

/// The `InvalidArgument` for a cycle found below job `job_id`:
/// `job.child_job_ids: cycle 3 -> 5 -> 3`.
pub fn child_cycle_error<Id: Copy + PartialEq + std::fmt::Display>(
    job_id: Id,
    found: &ChildCycle<Id>,
    field: &str,
) -> Refusal {
    let path = found
        .cycle
        .iter()
        .map(Id::to_string)
        .collect::<Vec<_>>()
        .join(" -> ");
    if found.cycle.first() == Some(&job_id) {
        Refusal::invalid(field, format!("cycle {path}"))
    } else {
        let through = found.through_child;
        Refusal::invalid(
            field,
            format!("cycle {path} (reached through child {through})"),
        )
    }
}

/// Checks every free-text field of a job against its [`text_limits`] (before anything quotes a
/// value in an error).
fn check_job_text_lengths(job: &Job, prefix: &str) -> Result<(), Refusal> {
    use text_limits as limit;
    let fields: [(&str, &str, usize); 8] = [
        ("name", &job.name, limit::JOB_NAME),
        ("author", &job.author, limit::AUTHOR),
        ("alarm_email", &job.alarm_email, limit::ALARM_EMAIL),
        ("schedule_conf", &job.schedule_conf, limit::SCHEDULE_CONF),
        ("time_zone", &job.time_zone, limit::TIME_ZONE),
        ("handler", &job.handler, limit::HANDLER),
        ("glue_source", &job.glue_source, limit::GLUE_SOURCE),
        ("glue_remark", &job.glue_remark, limit::GLUE_REMARK),
    ];
    for (name, value, max) in fields {
        check_text_len(value, max, &field_name(prefix, name))?;
    }
    Ok(())
}

/// `INVALID_ARGUMENT` naming `field` when `value` is longer than `max` bytes; the value itself is
/// not echoed.
pub fn check_text_len(value: &str, max: usize, field: &str) -> Result<(), Refusal> {
    if value.len() > max {
        return Err(Refusal::invalid(
            field,
            format!("{} bytes exceeds the limit of {max}", value.len()),
        ));
    }
    Ok(())
}

/// Checks a group's app name, title and addresses.
pub fn validate_group(group: &Group, prefix: &str) -> Result<(), Refusal> {
    validate_app_name(&group.app_name, &field_name(prefix, "app_name"))?;
    check_text_len(
        &group.title,
        text_limits::GROUP_TITLE,
        &field_name(prefix, "title"),
    )?;
    if group.title.trim().is_empty() {
        return Err(Refusal::invalid(&field_name(prefix, "title"), "required"));
    }
    if group.address_type == AddressType::Manual {
        validate_manual_addresses(&group.addresses, &field_name(prefix, "addresses"))?;
    }
    validate_access_token(&group.access_token, &field_name(prefix, "access_token"))
}

/// Checks an access token: it travels as `authorization: Bearer <token>`, so it must be
/// visible ASCII without spaces, and at most [`ACCESS_TOKEN_MAX_CHARS`] long. Empty = none.
pub fn validate_access_token(token: &str, field: &str) -> Result<(), Refusal> {
    if token.len() > ACCESS_TOKEN_MAX_CHARS {
        let message = format!(
            "{} characters exceeds the limit of {ACCESS_TOKEN_MAX_CHARS}",
            token.len()
        );
        return Err(Refusal::invalid(field, message));
    }
    if !token.bytes().all(|byte| byte.is_ascii_graphic()) {
        return Err(Refusal::invalid(
            field,
            "may contain only visible ASCII characters (no spaces)",
        ));
    }
    Ok(())
}

/// Checks an app name: 4-64 characters of `[A-Za-z0-9_.-]`.
pub fn validate_app_name(app_name: &str, field: &str) -> Result<(), Refusal> {
    let length = app_name.chars().count();
    // Echoed cut and escaped: a status message travels in an HTTP/2 trailer, which a 100 KB
    // name would overflow (the client would see RESOURCE_EXHAUSTED instead of this error).
    let shown: String = app_name.chars().take(APP_NAME_MAX_CHARS).collect();
    let shown = shown.escape_debug();
    let more = if length > APP_NAME_MAX_CHARS {
        "…"
    } else {
        ""
    };
    if !(APP_NAME_MIN_CHARS..=APP_NAME_MAX_CHARS).contains(&length) {
        return Err(Refusal::invalid(
            field,
            format!(
                "'{shown}{more}' must be {APP_NAME_MIN_CHARS}-{APP_NAME_MAX_CHARS} characters, \
                 has {length}"
            ),
        ));
    }
    if !app_name.chars().all(xjob_proto::is_app_name_char) {
        return Err(Refusal::invalid(
            field,
            format!("'{shown}' may contain only letters, digits, '_', '.' and '-'"),
        ));
    }
    Ok(())
}

fn validate_manual_addresses(addresses: &[String], field: &str) -> Result<(), Refusal> {
    if addresses.is_empty() {
        return Err(Refusal::invalid(
            field,
            "a MANUAL group needs at least one address",
        ));
    }
    if addresses.len() > text_limits::GROUP_ADDRESSES {
        return Err(Refusal::invalid(
            field,
            format!(
                "{} addresses exceeds the limit of {}",
                addresses.len(),
                text_limits::GROUP_ADDRESSES
            ),
        ));
    }
    validate_executor_addresses(addresses, field)
}

/// Checks each of a MANUAL group's (or a run's) `addresses` with [`validate_executor_address`],
/// naming `field[i]`. An address may be written `xxl-job+http://HOST:PORT` for an XXL-JOB
/// executor (see [`xxl_listed_address`]).
pub fn validate_executor_addresses(addresses: &[String], field: &str) -> Result<(), Refusal> {
    for (index, address) in addresses.iter().enumerate() {
        let address = xxl_listed_address(address).unwrap_or(address);
        validate_executor_address(address, &format!("{field}[{index}]"))?;
    }
    Ok(())
}

/// How a MANUAL group lists an XXL-JOB executor: its HTTP address behind this prefix.
pub const XXL_ADDRESS_PREFIX: &str = "xxl-job+";

/// The HTTP address of an XXL-JOB executor a group lists as `xxl-job+http://HOST:PORT` (XXL-JOB
/// executors serve plain HTTP); `None` for every other address (those are gRPC, unless an XXL-JOB executor registered there).
pub fn xxl_listed_address(address: &str) -> Option<&str> {
    address
        .strip_prefix(XXL_ADDRESS_PREFIX)
        .filter(|http| http.starts_with("http://"))
}

/// Longest executor address accepted (XXL-JOB's registry column holds 255 characters).
const MAX_ADDRESS_LEN: usize = 255;

/// Checks that `address` is an executor URL the admin can dial: `http://` or `https://`, a
/// host of letters, digits, `.`, `-`, `_` (or a bracketed IPv6 literal), an optional port from 1
/// to 65535, and no path but an optional trailing `/`.
pub fn validate_executor_address(address: &str, field: &str) -> Result<(), Refusal> {
    let shown = short_prefix(address);
    if address.len() > MAX_ADDRESS_LEN {
        return Err(Refusal::invalid(
            field,
            format!("'{shown}' is longer than {MAX_ADDRESS_LEN} bytes"),
        ));
    }
    let Some(rest) = address
        .strip_prefix("http://")
        .or_else(|| address.strip_prefix("https://"))
    else {
        return Err(Refusal::invalid(
            field,
            format!("'{shown}' must start with http:// or https://"),
        ));
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.contains(['/', '?', '#']) {
        return Err(Refusal::invalid(
            field,
            format!("'{shown}' must have no path (expected http://HOST:PORT)"),
        ));
    }
    let (host, port) = split_host_port(authority);
    let host_ok = !host.is_empty()
        && (is_bracketed_ipv6(host)
            || host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')));
    if !host_ok {
        return Err(Refusal::invalid(
            field,
            format!("'{shown}' has no valid host (expected http://HOST:PORT)"),
        ));
    }
    if let Some(port) = port
        && !matches!(port.parse::<u16>(), Ok(1..))
    {
        return Err(Refusal::invalid(
            field,
            format!("'{shown}' has an invalid port (expected 1 to 65535)"),
        ));
    }
    Ok(())
}

/// `host:port` → (`host`, `Some(port)`); an IPv6 literal keeps its brackets.
fn split_host_port(authority: &str) -> (&str, Option<&str>) {
    if authority.starts_with('[') {
        return match authority.find(']') {
            Some(end) => {
                let (host, rest) = authority.split_at(end + 1);
                (host, rest.strip_prefix(':'))
            }
            None => (authority, None),
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    }
}

fn is_bracketed_ipv6(host: &str) -> bool {
    host.strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .is_some_and(|inner| inner.parse::<std::net::Ipv6Addr>().is_ok())
}

/// At most 64 characters of a caller's value, for error messages: a huge bad value must not
/// come back whole in the answer.
pub fn short_prefix(value: &str) -> String {
    const SHOWN: usize = 64;
    match value.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}…", &value[..cut]),
        None => value.to_string(),
    }
}

fn validate_glue(job: &Job, prefix: &str) -> Result<(), Refusal> {
    match job.glue_type {
        GlueType::Bean if job.handler.trim().is_empty() => Err(Refusal::invalid(
            &field_name(prefix, "handler"),
            "required for GLUE_TYPE_BEAN",
        )),
        GlueType::Bean => Ok(()),
        // A script job runs its source on an executor that enables the language; the handler
        // name is not used.
        script if job.glue_source.trim().is_empty() => Err(Refusal::invalid(
            &field_name(prefix, "glue_source"),
            format!("required for {script} (the script to run)"),
        )),
        _ => Ok(()),
    }
}

fn validate_retry_backoff(job: &Job, prefix: &str) -> Result<(), Refusal> {
    let backoff = &job.retry_backoff;
    let field = |name: &str| field_name(prefix, &format!("retry_backoff.{name}"));
    require_non_negative(backoff.initial_delay_ms, &field("initial_delay_ms"))?;
    require_non_negative(backoff.max_delay_ms, &field("max_delay_ms"))?;
    if !backoff.factor.is_finite() || backoff.factor < 0.0 {
        return Err(Refusal::invalid(
            &field("factor"),
            format!("must be a finite number >= 0, got {}", backoff.factor),
        ));
    }
    Ok(())
}

fn require_non_negative(value: i64, field: &str) -> Result<(), Refusal> {
    if value < 0 {
        return Err(Refusal::invalid(
            field,
            format!("must be >= 0, got {value}"),
        ));
    }
    Ok(())
}

/// Joins a field prefix and a field name: `("job", "name")` → `job.name`, `("", "name")` → `name`.
pub fn field_name(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// Checks a job's `jitter_max_ms`.
pub fn validate_jitter(max_ms: i64, field: &str) -> Result<(), Refusal> {
    if (0..=MAX_JITTER_MS).contains(&max_ms) {
        Ok(())
    } else {
        Err(Refusal::invalid(
            field,
            format!("must be between 0 and {MAX_JITTER_MS} ms (an hour), got {max_ms}"),
        ))
    }
}

/// Checks a job's `catch_up_window_ms`.
pub fn validate_catch_up_window(window_ms: i64, field: &str) -> Result<(), Refusal> {
    if (0..=MAX_CATCH_UP_WINDOW_MS).contains(&window_ms) {
        Ok(())
    } else {
        Err(Refusal::invalid(
            field,
            format!(
                "must be between 0 (off) and {MAX_CATCH_UP_WINDOW_MS} ms (a day), got {window_ms}"
            ),
        ))
    }
}

/// Longest calendar name.
pub const MAX_CALENDAR_NAME: usize = 64;

/// A calendar name: 1 to 64 letters, digits, `_`, `-` or `.` (it appears in URLs and CLI
/// arguments unquoted).
pub fn validate_calendar_name(name: &str, field: &str) -> Result<(), Refusal> {
    if name.is_empty() {
        return Err(Refusal::invalid(field, "required"));
    }
    if name.chars().count() > MAX_CALENDAR_NAME {
        return Err(Refusal::invalid(
            field,
            format!("at most {MAX_CALENDAR_NAME} characters"),
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return Err(Refusal::invalid(
            field,
            format!("'{bad}' not allowed (letters, digits, '_', '-', '.')"),
        ));
    }
    Ok(())
}

/// Checks a job's daylight-saving policy: it shapes CRON schedules only, so a FIX_RATE,
/// FIX_DELAY or NONE job that sets it is refused rather than left to believe it applies. A CRON
/// job in UTC or another zone without daylight saving may set it; it then never comes into play.
pub fn validate_dst(
    schedule_type: ScheduleType,
    dst: DstPolicy,
    prefix: &str,
) -> Result<(), Refusal> {
    if schedule_type == ScheduleType::Cron || dst.is_default() {
        return Ok(());
    }
    let (name, value) = if dst.gap != DstGapPolicy::default() {
        ("dst_gap_policy", dst.gap.as_str())
    } else {
        ("dst_overlap_policy", dst.overlap.as_str())
    };
    Err(Refusal::invalid(
        &field_name(prefix, name),
        format!(
            "{value} applies to CRON schedules only (local times a zone skips or repeats); \
             a {schedule_type} schedule has none, leave it unset"
        ),
    ))
}

#[cfg(test)]
mod tests;
