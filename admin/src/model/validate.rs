//! Pure validation of jobs and groups as the admin API receives them (XXL-JOB's checks on job
//! add/update, plus xjob's own limits). No I/O: whatever needs the database (the group exists,
//! child jobs exist, app names are unique) is checked by the API handler after these pass.
//!
//! Every error names the field, prefixed as the caller asks (`job.schedule_conf`, or just
//! `schedule_conf` for `PreviewSchedule`). Parts the contract defines but xjob never runs
//! (`GLUE_TYPE_GROOVY`, refused while converting off the wire) are `Unimplemented`, not
//! `InvalidArgument`.

use std::collections::{HashMap, HashSet};

use chrono_tz::Tz;

use crate::model::cron::CronExpr;
use crate::model::parse_time_zone;
use crate::model::{AddressType, GlueType, Group, Job, ScheduleType};

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
    require_non_negative(job.timeout_ms, &field("timeout_ms"))?;
    require_non_negative(i64::from(job.fail_retry_count), &field("fail_retry_count"))?;
    validate_retry_backoff(job, prefix)?;
    check_params_size(&job.params, limits.max_params_bytes, &field("params"))?;
    if job.id != 0 && job.child_job_ids.contains(&job.id) {
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
pub fn dedup_child_ids(ids: &[i64]) -> Vec<i64> {
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
pub struct ChildCycle {
    pub cycle: Vec<i64>,
    pub through_child: i64,
}

/// Finds a cycle reachable from `start` through child links (`children[id]`, a missing id has
/// no children); `None` when the graph below `start` is acyclic. Depth-first, iterative, so
/// long chains cannot overflow the stack.
pub fn find_child_cycle(start: i64, children: &HashMap<i64, Vec<i64>>) -> Option<ChildCycle> {
    let no_children = Vec::new();
    let children_of = |id: i64| children.get(&id).unwrap_or(&no_children);
    let mut finished: HashSet<i64> = HashSet::new();
    // The current path and, per entry, the index of the next child to visit.
    let mut path: Vec<(i64, usize)> = vec![(start, 0)];
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
            let mut cycle: Vec<i64> = path[position..].iter().map(|(id, _)| *id).collect();
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
pub fn child_cycle_error(job_id: i64, found: &ChildCycle, field: &str) -> Refusal {
    let path = found
        .cycle
        .iter()
        .map(i64::to_string)
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

/// Checks each of `addresses` with [`validate_executor_address`], naming `field[i]`.
pub fn validate_executor_addresses(addresses: &[String], field: &str) -> Result<(), Refusal> {
    for (index, address) in addresses.iter().enumerate() {
        validate_executor_address(address, &format!("{field}[{index}]"))?;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BlockStrategy, JobStatus, MisfireStrategy, RetryBackoff, RouteStrategy};

    const LIMITS: JobLimits = JobLimits {
        max_params_bytes: 65536,
        default_time_zone: chrono_tz::UTC,
    };

    fn job() -> Job {
        Job {
            id: 0,
            group_id: 1,
            name: "nightly report".into(),
            author: String::new(),
            alarm_email: String::new(),
            alarm_on_every_failure: false,
            schedule_type: ScheduleType::Cron,
            schedule_conf: "0 0 1 * * ?".into(),
            time_zone: String::new(),
            misfire_strategy: MisfireStrategy::DoNothing,
            route_strategy: RouteStrategy::First,
            handler: "demoHandler".into(),
            params: String::new(),
            block_strategy: BlockStrategy::SerialExecution,
            timeout_ms: 0,
            fail_retry_count: 0,
            retry_backoff: RetryBackoff::default(),
            glue_type: GlueType::Bean,
            glue_source: String::new(),
            glue_remark: String::new(),
            glue_updated_ms: 0,
            child_job_ids: Vec::new(),
            status: JobStatus::Stopped,
            trigger_last_ms: 0,
            trigger_next_ms: 0,
            created_ms: 0,
            updated_ms: 0,
        }
    }

    fn invalid_message(job: Job) -> String {
        match validate_job(&job, &LIMITS, "job") {
            Err(Refusal::InvalidArgument(message)) => message,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    fn group(address_type: AddressType, addresses: &[&str]) -> Group {
        Group {
            id: 0,
            app_name: "demo-app".into(),
            title: "Demo".into(),
            address_type,
            addresses: addresses
                .iter()
                .map(|address| address.to_string())
                .collect(),
            access_token: String::new(),
            updated_ms: 0,
        }
    }

    #[test]
    fn a_complete_bean_job_passes() {
        assert!(validate_job(&job(), &LIMITS, "job").is_ok());
        let fix_rate = Job {
            schedule_type: ScheduleType::FixRate,
            schedule_conf: "30".into(),
            ..job()
        };
        assert!(validate_job(&fix_rate, &LIMITS, "job").is_ok());
        let none = Job {
            schedule_type: ScheduleType::None,
            schedule_conf: String::new(),
            ..job()
        };
        assert!(validate_job(&none, &LIMITS, "job").is_ok());
    }

    #[test]
    fn schedule_errors_name_the_field() {
        let message = invalid_message(Job {
            schedule_conf: "0 0 25 * * ?".into(),
            ..job()
        });
        assert!(
            message.starts_with("job.schedule_conf: invalid cron '0 0 25 * * ?': "),
            "{message}"
        );
        for conf in ["0", "-3", "1.5", "ten"] {
            let fix_rate = Job {
                schedule_type: ScheduleType::FixRate,
                schedule_conf: conf.into(),
                ..job()
            };
            assert!(invalid_message(fix_rate).starts_with("job.schedule_conf: "));
        }
        let fix_delay = Job {
            schedule_type: ScheduleType::FixDelay,
            schedule_conf: "5".into(),
            ..job()
        };
        assert!(validate_job(&fix_delay, &LIMITS, "job").is_ok());
        let bad_delay = Job {
            schedule_type: ScheduleType::FixDelay,
            schedule_conf: "0".into(),
            ..job()
        };
        assert!(invalid_message(bad_delay).starts_with("job.schedule_conf: "));
        assert!(
            validate_schedule(ScheduleType::Cron, "bad", "").is_err_and(|error| error
                .to_string()
                .starts_with("schedule_conf: invalid cron 'bad'"))
        );
    }

    #[test]
    fn zones_default_when_empty_and_must_be_known() {
        assert_eq!(
            resolve_time_zone("", chrono_tz::UTC, "time_zone").ok(),
            Some(chrono_tz::UTC)
        );
        assert_eq!(
            resolve_time_zone("Asia/Shanghai", chrono_tz::UTC, "time_zone").ok(),
            Some(chrono_tz::Asia::Shanghai)
        );
        let message = invalid_message(Job {
            time_zone: "Mars/Base".into(),
            ..job()
        });
        assert_eq!(message, "job.time_zone: unknown time zone 'Mars/Base'");
    }

    #[test]
    fn field_rules_name_the_field() {
        assert_eq!(
            invalid_message(Job {
                name: " ".into(),
                ..job()
            }),
            "job.name: required"
        );
        assert_eq!(
            invalid_message(Job {
                handler: String::new(),
                ..job()
            }),
            "job.handler: required for GLUE_TYPE_BEAN"
        );
        assert_eq!(
            invalid_message(Job {
                timeout_ms: -1,
                ..job()
            }),
            "job.timeout_ms: must be >= 0, got -1"
        );
        assert_eq!(
            invalid_message(Job {
                fail_retry_count: -2,
                ..job()
            }),
            "job.fail_retry_count: must be >= 0, got -2"
        );
        let backoff = RetryBackoff {
            initial_delay_ms: -5,
            ..RetryBackoff::default()
        };
        assert_eq!(
            invalid_message(Job {
                retry_backoff: backoff,
                ..job()
            }),
            "job.retry_backoff.initial_delay_ms: must be >= 0, got -5"
        );
        let backoff = RetryBackoff {
            factor: f64::NAN,
            ..RetryBackoff::default()
        };
        assert!(
            invalid_message(Job {
                retry_backoff: backoff,
                ..job()
            })
            .starts_with("job.retry_backoff.factor: ")
        );
        assert_eq!(
            invalid_message(Job {
                params: "x".repeat(70000),
                ..job()
            }),
            "job.params: 70000 bytes exceeds the limit of 65536"
        );
        assert_eq!(
            invalid_message(Job {
                id: 9,
                child_job_ids: vec![3, 9],
                ..job()
            }),
            "job.child_job_ids: job 9 cannot be its own child"
        );
    }

    #[test]
    fn script_glue_needs_a_source_but_no_handler() {
        let shell = Job {
            glue_type: GlueType::Shell,
            handler: String::new(),
            ..job()
        };
        let with_source = Job {
            glue_source: "echo hello".into(),
            ..shell.clone()
        };
        assert_eq!(
            invalid_message(shell),
            "job.glue_source: required for GLUE_SHELL (the script to run)"
        );
        assert!(validate_job(&with_source, &LIMITS, "job").is_ok());
    }

    #[test]
    fn child_ids_are_deduplicated_in_order() {
        assert_eq!(dedup_child_ids(&[3, 1, 3, 2, 1]), vec![3, 1, 2]);
    }

    #[test]
    fn groups_check_app_name_title_and_manual_addresses() {
        assert!(validate_group(&group(AddressType::Auto, &[]), "group").is_ok());
        assert!(validate_group(&group(AddressType::Manual, &["https://a:1"]), "group").is_ok());
        let short = Group {
            app_name: "abc".into(),
            ..group(AddressType::Auto, &[])
        };
        assert_eq!(
            validate_group(&short, "group").map_err(|error| error.to_string()),
            Err("group.app_name: 'abc' must be 4-64 characters, has 3".to_string())
        );
        let spaced = Group {
            app_name: "my app".into(),
            ..group(AddressType::Auto, &[])
        };
        assert!(validate_group(&spaced, "group").is_err_and(|error| {
            error
                .to_string()
                .starts_with("group.app_name: 'my app' may contain only")
        }));
        let untitled = Group {
            title: String::new(),
            ..group(AddressType::Auto, &[])
        };
        assert_eq!(
            validate_group(&untitled, "group").map_err(|error| error.to_string()),
            Err("group.title: required".to_string())
        );
        assert_eq!(
            validate_group(&group(AddressType::Manual, &[]), "group").map_err(|e| e.to_string()),
            Err("group.addresses: a MANUAL group needs at least one address".to_string())
        );
        assert_eq!(
            validate_group(&group(AddressType::Manual, &["http://a:1", "a:2"]), "group")
                .map_err(|error| error.to_string()),
            Err("group.addresses[1]: 'a:2' must start with http:// or https://".to_string())
        );
    }

    #[test]
    fn executor_addresses_need_a_scheme_a_host_and_a_valid_port() {
        for good in [
            "http://127.0.0.1:9999",
            "https://orders-1.svc.local:443/",
            "http://[::1]:8080",
            "http://executor_a",
        ] {
            assert!(validate_executor_address(good, "a").is_ok(), "{good}");
        }
        for (bad, why) in [
            ("a", "must start with http:// or https://"),
            ("http://", "has no valid host"),
            ("http://a b:1", "has no valid host"),
            ("http://a:1/path", "must have no path"),
            ("http://a:0", "has an invalid port"),
            ("http://a:70000", "has an invalid port"),
            ("http://a:", "has an invalid port"),
            ("http://[::1", "has no valid host"),
            ("http://:9999", "has no valid host"),
            ("http://a\u{0}b:1", "has no valid host"),
        ] {
            let error = validate_executor_address(bad, "addresses[0]")
                .expect_err(bad)
                .to_string();
            assert!(error.starts_with("addresses[0]: "), "{error}");
            assert!(error.contains(why), "{bad}: {error}");
        }
    }

    #[test]
    fn oversized_text_fields_are_refused_without_echoing_them() {
        let limits = JobLimits {
            max_params_bytes: 64 * 1024,
            default_time_zone: chrono_tz::UTC,
        };
        let huge = "x".repeat(4 * 1024 * 1024);
        let base = job();
        for (field, job) in [
            (
                "job.name",
                Job {
                    name: huge.clone(),
                    ..base.clone()
                },
            ),
            (
                "job.author",
                Job {
                    author: huge.clone(),
                    ..base.clone()
                },
            ),
            (
                "job.handler",
                Job {
                    handler: huge.clone(),
                    ..base.clone()
                },
            ),
            (
                "job.schedule_conf",
                Job {
                    schedule_conf: huge.clone(),
                    ..base.clone()
                },
            ),
        ] {
            let message = validate_job(&job, &limits, "job")
                .expect_err(field)
                .to_string();
            assert!(message.starts_with(field), "{message}");
            assert!(message.contains("exceeds the limit"), "{message}");
            assert!(message.len() < 200, "{message}");
        }
        assert!(validate_job(&base, &limits, "job").is_ok());
    }

    #[test]
    fn oversized_groups_are_refused_without_echoing_them() {
        let mut huge_app = group(AddressType::Auto, &[]);
        huge_app.app_name = "a".repeat(1024 * 1024);
        let message = validate_group(&huge_app, "group")
            .expect_err("app")
            .to_string();
        assert!(message.starts_with("group.app_name"), "{message}");
        assert!(message.len() < 300, "{message}");

        let many: Vec<String> = (0..1001).map(|i| format!("http://h{i}:1")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let message = validate_group(&group(AddressType::Manual, &refs), "group")
            .expect_err("too many addresses")
            .to_string();
        assert!(
            message.contains("1001 addresses exceeds the limit of 1000"),
            "{message}"
        );
    }

    /// `PreviewSchedule` validates a schedule without a job around it: a megabyte expression or
    /// zone once came back whole in the refusal, and the client saw a broken HTTP/2 stream.
    #[test]
    fn a_huge_schedule_or_zone_is_not_echoed_whole() {
        let huge_cron = format!("0 * * * * ? {}", "9".repeat(1024 * 1024));
        for schedule_type in [ScheduleType::Cron, ScheduleType::FixRate] {
            let error = validate_schedule(schedule_type, &huge_cron, "").expect_err("too long");
            assert!(error.to_string().starts_with("schedule_conf: "), "{error}");
            assert!(error.to_string().len() < 200, "{error}");
        }
        let huge_zone = "Z".repeat(1024 * 1024);
        let error = resolve_time_zone(&huge_zone, chrono_tz::UTC, "time_zone").expect_err("zone");
        assert!(error.to_string().len() < 200, "{error}");
    }

    #[test]
    fn a_huge_bad_address_is_not_echoed_whole() {
        let huge = format!("ftp://{}", "x".repeat(100_000));
        let error = validate_executor_address(&huge, "a").expect_err("too long");
        assert!(error.to_string().len() < 200, "{error}");
    }

    #[test]
    fn update_keeps_status_fire_times_and_creation_time() {
        let existing = Job {
            id: 4,
            status: JobStatus::Running,
            trigger_last_ms: 1_000,
            trigger_next_ms: 2_000,
            created_ms: 100,
            glue_updated_ms: 100,
            ..job()
        };
        let incoming = Job {
            name: "renamed".into(),
            status: JobStatus::Stopped,
            trigger_next_ms: 0,
            created_ms: 0,
            ..existing.clone()
        };
        let merged = merge_job_update(&existing, incoming, 5_000).expect("same glue type");
        assert_eq!(merged.name, "renamed");
        assert_eq!(merged.status, JobStatus::Running);
        assert_eq!(merged.trigger_next_ms, 2_000);
        assert_eq!(merged.created_ms, 100);
        assert_eq!(merged.updated_ms, 5_000);
        assert_eq!(merged.glue_updated_ms, 100);

        let edited = Job {
            glue_remark: "v2".into(),
            ..existing.clone()
        };
        let merged = merge_job_update(&existing, edited, 6_000).expect("same glue type");
        assert_eq!(merged.glue_updated_ms, 6_000);
    }

    #[test]
    fn update_refuses_a_glue_type_change() {
        let shell = Job {
            glue_type: GlueType::Shell,
            ..job()
        };
        let error = merge_job_update(&job(), shell, 5_000).expect_err("glue type changed");
        assert!(matches!(error, Refusal::InvalidArgument(_)));
        assert!(
            error
                .to_string()
                .starts_with("job.glue_type: cannot change")
        );
    }

    fn graph(edges: &[(i64, &[i64])]) -> HashMap<i64, Vec<i64>> {
        edges
            .iter()
            .map(|(id, children)| (*id, children.to_vec()))
            .collect()
    }

    #[test]
    fn child_cycles_are_found_with_their_path() {
        let two_cycle = graph(&[(3, &[5]), (5, &[3])]);
        let found = find_child_cycle(3, &two_cycle).expect("3 -> 5 -> 3");
        assert_eq!(found.cycle, vec![3, 5, 3]);
        assert_eq!(
            child_cycle_error(3, &found, "job.child_job_ids").to_string(),
            "job.child_job_ids: cycle 3 -> 5 -> 3"
        );

        let long = graph(&[
            (1, &[2, 4]),
            (2, &[3]),
            (3, &[]),
            (4, &[5]),
            (5, &[6]),
            (6, &[1]),
        ]);
        let found = find_child_cycle(1, &long).expect("1 -> 4 -> 5 -> 6 -> 1");
        assert_eq!(found.cycle, vec![1, 4, 5, 6, 1]);

        let downstream = graph(&[(0, &[7]), (7, &[8]), (8, &[9]), (9, &[8])]);
        let found = find_child_cycle(0, &downstream).expect("8 -> 9 -> 8");
        assert_eq!(found.cycle, vec![8, 9, 8]);
        assert_eq!(found.through_child, 7);
        assert_eq!(
            child_cycle_error(0, &found, "job.child_job_ids").to_string(),
            "job.child_job_ids: cycle 8 -> 9 -> 8 (reached through child 7)"
        );
    }

    #[test]
    fn shared_children_and_dangling_ids_are_not_cycles() {
        // A diamond: 1 -> {2, 3} -> 4; 4 lists a deleted job 99.
        let diamond = graph(&[(1, &[2, 3]), (2, &[4]), (3, &[4]), (4, &[99])]);
        assert_eq!(find_child_cycle(1, &diamond), None);
        assert_eq!(find_child_cycle(1, &HashMap::new()), None);
        let chain: HashMap<i64, Vec<i64>> = (1..10_000).map(|id| (id, vec![id + 1])).collect();
        assert_eq!(find_child_cycle(1, &chain), None);
    }

    #[test]
    fn access_tokens_must_be_visible_ascii() {
        let with_token = |token: &str| Group {
            access_token: token.to_string(),
            ..group(AddressType::Auto, &[])
        };
        assert!(validate_group(&with_token(""), "group").is_ok());
        assert!(validate_group(&with_token("s3cret-Token_1.~"), "group").is_ok());
        for bad in ["has space", "new\nline", "caf\u{e9}"] {
            assert!(
                validate_group(&with_token(bad), "group")
                    .is_err_and(|error| error.to_string().starts_with("group.access_token: ")),
                "{bad:?}"
            );
        }
        assert!(validate_group(&with_token(&"x".repeat(257)), "group").is_err());
    }
}
