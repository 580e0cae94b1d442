//! XXL-JOB rows → xjob groups and jobs: every enum and field, pure. A row that cannot be
//! mapped comes back with every reason found (not just the first), so one pass over the plan
//! shows all that must be fixed in XXL-JOB before the next import.
//!
//! Rules, where XXL-JOB itself is lenient: an empty misfire strategy is `DO_NOTHING` and an
//! empty block strategy `SERIAL_EXECUTION` (XXL-JOB's own defaults for NULL); any other unknown
//! name is refused rather than guessed. A job is then checked by the same `validate_job` and
//! route check the `CreateJob` API runs, so an imported job is exactly as valid as one created
//! by hand.

use chrono_tz::Tz;

use crate::model::glue::GLUE_VERSIONS_KEPT;
use crate::model::line_ends::to_lf;
use crate::model::next_fire::{SCHEDULE_CHANGE_DELAY_MS, next_fire_after};
use crate::model::validate::{JobLimits, resolve_time_zone, validate_group, validate_job};
use crate::model::{
    AddressType, BlockStrategy, GlueType, GlueVersion, Group, GroupId, Job, JobId, JobStatus,
    MisfireStrategy, RetryBackoff, RouteStrategy, ScheduleType,
};
use crate::store::xxl_source::{XxlGlueRow, XxlGroupRow, XxlJobRow};
use crate::trigger::route::is_supported;

/// What every mapping needs besides the row.
#[derive(Debug, Clone)]
pub struct MapOptions {
    pub limits: JobLimits,
    /// IANA zone given to imported jobs; empty = the admin's default zone (XXL-JOB evaluates
    /// cron in its JVM's zone).
    pub time_zone: String,
    /// Import running jobs stopped too (started later with `StartJob`, once XXL-JOB's admin no
    /// longer schedules them and their executors are online).
    pub import_stopped: bool,
    /// Make each tree of child links a workflow instead of child links (`import_xxl::workflows`).
    pub children_as_workflows: bool,
    pub now_ms: i64,
}

/// A group ready to insert, with remarks for the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct MappedGroup {
    pub group: Group,
    pub notes: Vec<String>,
}

/// A job ready to insert once its group and children are known: `group_id` and
/// `child_job_ids` are still unset (0 / empty).
#[derive(Debug, Clone, PartialEq)]
pub struct MappedJob {
    pub job: Job,
    pub xxl_group_id: i64,
    /// XXL-JOB ids of its child jobs (deduplicated, without the job itself).
    pub xxl_children: Vec<i64>,
    pub notes: Vec<String>,
}

/// Maps one `xxl_job_group` row.
pub fn map_group(row: &XxlGroupRow, now_ms: i64) -> Result<MappedGroup, Vec<String>> {
    let address_type = match row.address_type {
        0 => AddressType::Auto,
        1 => AddressType::Manual,
        other => {
            return Err(vec![format!(
                "address_type {other} is neither 0 (automatic registration) nor 1 (manual list)"
            )]);
        }
    };
    let addresses = match address_type {
        // An automatic group's list is only XXL-JOB's cache of its registry.
        AddressType::Auto => Vec::new(),
        // The listed executors are XXL-JOB executors (HTTP): the prefix routes them over
        // XXL-JOB's protocol instead of gRPC.
        AddressType::Manual => split_list(&row.address_list)
            .into_iter()
            .map(|address| as_xxl_address(&address))
            .collect(),
    };
    let group = Group {
        id: GroupId(0),
        app_name: row.app_name.trim().to_string(),
        title: row.title.trim().to_string(),
        address_type,
        addresses,
        access_token: row.access_token.trim().to_string(),
        updated_ms: now_ms,
    };
    validate_group(&group, "group").map_err(|refusal| vec![refusal.to_string()])?;
    Ok(MappedGroup {
        group,
        notes: Vec::new(),
    })
}

/// Maps one `xxl_job_info` row.
pub fn map_job(row: &XxlJobRow, options: &MapOptions) -> Result<MappedJob, Vec<String>> {
    let mut reasons = Vec::new();
    let mut notes = Vec::new();
    let schedule_type = map_schedule_type(&row.schedule_type).map_err(|r| reasons.push(r));
    let misfire_strategy = map_misfire(&row.misfire_strategy).map_err(|r| reasons.push(r));
    let route_strategy = map_route(&row.executor_route_strategy).map_err(|r| reasons.push(r));
    let block_strategy = map_block(&row.executor_block_strategy).map_err(|r| reasons.push(r));
    let glue_type = map_glue_type(&row.glue_type).map_err(|r| reasons.push(r));
    let running = map_trigger_status(row.trigger_status).map_err(|r| reasons.push(r));
    let children = parse_child_ids(&row.child_jobid).map_err(|r| reasons.push(r));
    let retries = i32::try_from(row.executor_fail_retry_count).map_err(|_| {
        reasons.push(format!(
            "executor_fail_retry_count {} is out of range",
            row.executor_fail_retry_count
        ))
    });
    let (
        Ok(schedule_type),
        Ok(misfire_strategy),
        Ok(route_strategy),
        Ok(block_strategy),
        Ok(glue_type),
        Ok(running),
        Ok(mut xxl_children),
        Ok(fail_retry_count),
    ) = (
        schedule_type,
        misfire_strategy,
        route_strategy,
        block_strategy,
        glue_type,
        running,
        children,
        retries,
    )
    else {
        return Err(reasons);
    };
    if xxl_children.contains(&row.id) {
        // XXL-JOB never triggers a job as its own child; xjob refuses the link.
        xxl_children.retain(|id| *id != row.id);
        notes.push("its link to itself as a child is left out (XXL-JOB ignores it too)".into());
    }
    let mut job = Job {
        id: JobId(0),
        group_id: GroupId(0),
        name: row.job_desc.trim().to_string(),
        author: row.author.trim().to_string(),
        alarm_email: row.alarm_email.trim().to_string(),
        alarm_on_every_failure: false,
        schedule_type,
        schedule_conf: row.schedule_conf.trim().to_string(),
        time_zone: options.time_zone.clone(),
        misfire_strategy,
        route_strategy,
        handler: row.executor_handler.trim().to_string(),
        params: row.executor_param.clone(),
        block_strategy,
        timeout_ms: row.executor_timeout.saturating_mul(1000),
        fail_retry_count,
        retry_backoff: RetryBackoff::default(),
        glue_type,
        glue_source: row.glue_source.clone(),
        glue_remark: row.glue_remark.clone(),
        glue_updated_ms: if row.glue_updated_ms > 0 {
            row.glue_updated_ms
        } else {
            options.now_ms
        },
        child_job_ids: Vec::new(),
        policy: Default::default(),
        // XXL-JOB has no calendars: an imported job runs every occurrence, as it did there.
        calendar: String::new(),
        calendar_mode: Default::default(),
        status: JobStatus::Stopped,
        trigger_last_ms: 0,
        trigger_next_ms: 0,
        created_ms: options.now_ms,
        updated_ms: options.now_ms,
    };
    job.normalize_line_ends();
    validate_job(&job, &options.limits, "job").map_err(|refusal| vec![refusal.to_string()])?;
    if !is_supported(job.route_strategy) {
        // CreateJob's check too: a strategy named in the contract but not run by this release.
        return Err(vec![format!(
            "executor_route_strategy {} is not implemented by this xjob release",
            job.route_strategy
        )]);
    }
    if running && options.import_stopped {
        notes.push("running in XXL-JOB: imported stopped (--import-stopped)".into());
    } else if running {
        start(&mut job, options, &mut notes)?;
    }
    Ok(MappedJob {
        job,
        xxl_group_id: row.job_group,
        xxl_children,
        notes,
    })
}

/// A running XXL-JOB job stays running: its next fire is computed like `StartJob` does.
fn start(job: &mut Job, options: &MapOptions, notes: &mut Vec<String>) -> Result<(), Vec<String>> {
    if job.schedule_type == ScheduleType::None {
        notes.push("running in XXL-JOB but its schedule type is NONE: imported stopped".into());
        return Ok(());
    }
    let zone: Tz = resolve_time_zone(
        &job.time_zone,
        options.limits.default_time_zone,
        "job.time_zone",
    )
    .map_err(|refusal| vec![refusal.to_string()])?;
    let from_ms = options.now_ms + SCHEDULE_CHANGE_DELAY_MS;
    match next_fire_after(
        job.schedule_type,
        &job.schedule_conf,
        zone,
        job.policy.dst,
        from_ms,
    ) {
        Ok(Some(next)) => {
            job.status = JobStatus::Running;
            job.trigger_next_ms = next;
        }
        Ok(None) => notes.push("its schedule never fires again: imported stopped".into()),
        Err(message) => return Err(vec![format!("job.schedule_conf: {message}")]),
    }
    Ok(())
}

/// The saved versions of a job's glue source to import, oldest first: the latest
/// [`GLUE_VERSIONS_KEPT`] (xjob keeps as many as XXL-JOB), typed as the job.
pub fn map_glue_versions(
    rows: &[&XxlGlueRow],
    glue_type: GlueType,
    fallback_ms: i64,
) -> Vec<GlueVersion> {
    let mut rows: Vec<&XxlGlueRow> = rows.to_vec();
    rows.sort_by_key(|row| row.id);
    let keep = usize::try_from(GLUE_VERSIONS_KEPT).unwrap_or(usize::MAX);
    let skip = rows.len().saturating_sub(keep);
    rows.into_iter()
        .skip(skip)
        .map(|row| GlueVersion {
            id: 0,
            job_id: JobId(0),
            glue_type,
            glue_source: to_lf(&row.glue_source),
            glue_remark: row.glue_remark.clone(),
            created_ms: if row.saved_ms > 0 {
                row.saved_ms
            } else {
                fallback_ms
            },
        })
        .collect()
}

pub fn map_schedule_type(name: &str) -> Result<ScheduleType, String> {
    // FIX_DELAY exists in XXL-JOB's code only commented out; a row holding it is taken at its
    // word, xjob runs it.
    ScheduleType::parse(name.trim())
        .ok_or_else(|| unknown("schedule_type", name, "NONE, CRON, FIX_RATE"))
}

pub fn map_misfire(name: &str) -> Result<MisfireStrategy, String> {
    match name.trim() {
        "" => Ok(MisfireStrategy::DoNothing),
        name => MisfireStrategy::parse(name)
            .ok_or_else(|| unknown("misfire_strategy", name, "DO_NOTHING, FIRE_ONCE_NOW")),
    }
}

pub fn map_route(name: &str) -> Result<RouteStrategy, String> {
    match name.trim() {
        "" => Err("executor_route_strategy is empty (XXL-JOB could not run it either)".into()),
        name => RouteStrategy::parse(name).ok_or_else(|| {
            unknown(
                "executor_route_strategy",
                name,
                "FIRST, LAST, ROUND, RANDOM, CONSISTENT_HASH, LEAST_FREQUENTLY_USED, \
                 LEAST_RECENTLY_USED, FAILOVER, BUSYOVER, SHARDING_BROADCAST",
            )
        }),
    }
}

pub fn map_block(name: &str) -> Result<BlockStrategy, String> {
    match name.trim() {
        "" => Ok(BlockStrategy::SerialExecution),
        name => BlockStrategy::parse(name).ok_or_else(|| {
            unknown(
                "executor_block_strategy",
                name,
                "SERIAL_EXECUTION, DISCARD_LATER, COVER_EARLY",
            )
        }),
    }
}

pub fn map_glue_type(name: &str) -> Result<GlueType, String> {
    match name.trim() {
        "GLUE_GROOVY" => Err(
            "glue_type GLUE_GROOVY (Java compiled inside XXL-JOB's executor) is not imported: \
             xjob takes it only for a group whose executors are all XXL-JOB executors, so create \
             it with CreateJob once they are registered, or move the code into a BEAN handler"
                .into(),
        ),
        "GLUE_PYTHON2" => Err(
            "glue_type GLUE_PYTHON2: xjob's GLUE_PYTHON runs python3; port \
                               the script to Python 3 and switch the job to GLUE_PYTHON"
                .into(),
        ),
        name => GlueType::parse(name).ok_or_else(|| {
            unknown(
                "glue_type",
                name,
                "BEAN, GLUE_SHELL, GLUE_PYTHON, GLUE_NODEJS, GLUE_PHP, GLUE_POWERSHELL",
            )
        }),
    }
}

/// `trigger_status`: 1 running, 0 stopped.
pub fn map_trigger_status(value: i64) -> Result<bool, String> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(format!(
            "trigger_status {other} is neither 0 (stopped) nor 1 (running)"
        )),
    }
}

/// `child_jobid` ("3,5," as XXL-JOB stores it) → ids, repeats and blanks removed.
pub fn parse_child_ids(text: &str) -> Result<Vec<i64>, String> {
    let mut ids = Vec::new();
    for item in split_list(text) {
        let id = item
            .parse::<i64>()
            .ok()
            .filter(|id| *id > 0)
            .ok_or_else(|| {
                let shown = crate::model::validate::short_prefix(&item);
                format!("child_jobid '{shown}' is not a job id")
            })?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// A comma-separated list, items trimmed, empty items dropped.
/// An XXL-JOB group's listed address as a MANUAL xjob group lists an XXL-JOB executor
/// (`xxl-job+http://…`). Other forms are kept as written, for validation to name.
fn as_xxl_address(address: &str) -> String {
    use crate::model::validate::{XXL_ADDRESS_PREFIX, xxl_listed_address};
    if xxl_listed_address(address).is_none() && address.starts_with("http://") {
        format!("{XXL_ADDRESS_PREFIX}{address}")
    } else {
        address.to_string()
    }
}

fn split_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_string)
        .collect()
}

fn unknown(field: &str, value: &str, known: &str) -> String {
    let shown = crate::model::validate::short_prefix(value.trim());
    format!("{field} '{shown}' is not one xjob knows ({known})")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> MapOptions {
        MapOptions {
            limits: JobLimits {
                max_params_bytes: 1024,
                default_time_zone: chrono_tz::UTC,
            },
            time_zone: String::new(),
            import_stopped: false,
            children_as_workflows: false,
            now_ms: 1_700_000_000_000,
        }
    }

    fn bean_row() -> XxlJobRow {
        XxlJobRow {
            id: 7,
            job_group: 1,
            job_desc: "nightly report".into(),
            author: "ops".into(),
            alarm_email: "a@example.com,b@example.com".into(),
            schedule_type: "CRON".into(),
            schedule_conf: "0 0 2 * * ?".into(),
            misfire_strategy: "FIRE_ONCE_NOW".into(),
            executor_route_strategy: "CONSISTENT_HASH".into(),
            executor_handler: "reportHandler".into(),
            executor_param: "--full".into(),
            executor_block_strategy: "DISCARD_LATER".into(),
            executor_timeout: 90,
            executor_fail_retry_count: 3,
            glue_type: "BEAN".into(),
            child_jobid: "8, 9,8,".into(),
            trigger_status: 1,
            ..XxlJobRow::default()
        }
    }

    #[test]
    fn every_xxl_enum_name_maps_to_the_same_xjob_name() {
        for name in ["NONE", "CRON", "FIX_RATE"] {
            assert_eq!(map_schedule_type(name).map(|t| t.as_str()), Ok(name));
        }
        for name in ["DO_NOTHING", "FIRE_ONCE_NOW"] {
            assert_eq!(map_misfire(name).map(|m| m.as_str()), Ok(name));
        }
        let routes = [
            "FIRST",
            "LAST",
            "ROUND",
            "RANDOM",
            "CONSISTENT_HASH",
            "LEAST_FREQUENTLY_USED",
            "LEAST_RECENTLY_USED",
            "FAILOVER",
            "BUSYOVER",
            "SHARDING_BROADCAST",
        ];
        for name in routes {
            assert_eq!(map_route(name).map(|r| r.as_str()), Ok(name));
        }
        for name in ["SERIAL_EXECUTION", "DISCARD_LATER", "COVER_EARLY"] {
            assert_eq!(map_block(name).map(|b| b.as_str()), Ok(name));
        }
        let glues = [
            "BEAN",
            "GLUE_SHELL",
            "GLUE_PYTHON",
            "GLUE_NODEJS",
            "GLUE_PHP",
            "GLUE_POWERSHELL",
        ];
        for name in glues {
            assert_eq!(map_glue_type(name).map(|g| g.as_str()), Ok(name));
        }
    }

    #[test]
    fn empty_misfire_and_block_take_xxl_jobs_defaults_unknown_names_are_refused() {
        assert_eq!(map_misfire(""), Ok(MisfireStrategy::DoNothing));
        assert_eq!(map_block(" "), Ok(BlockStrategy::SerialExecution));
        assert!(map_misfire("FIRE_TWICE").is_err());
        assert!(map_block("CONCURRENT_EXECUTION").is_err());
        assert!(map_route("").is_err());
        assert!(map_route("first").is_err(), "names are case-sensitive");
        assert!(map_schedule_type("").is_err());
        let groovy = map_glue_type("GLUE_GROOVY").unwrap_err();
        assert!(groovy.contains("BEAN handler"), "{groovy}");
        let python2 = map_glue_type("GLUE_PYTHON2").unwrap_err();
        assert!(python2.contains("python3"), "{python2}");
        assert!(
            map_glue_type("GLUE_COBOL")
                .unwrap_err()
                .contains("GLUE_COBOL")
        );
    }

    #[test]
    fn child_ids_are_parsed_deduplicated_and_checked() {
        assert_eq!(parse_child_ids(""), Ok(vec![]));
        assert_eq!(parse_child_ids("3,5,,3, 6,"), Ok(vec![3, 5, 6]));
        assert!(parse_child_ids("3,abc").unwrap_err().contains("'abc'"));
        assert!(parse_child_ids("0").is_err());
    }

    #[test]
    fn a_running_bean_job_maps_field_by_field_and_gets_its_next_fire() {
        let mapped = map_job(&bean_row(), &options()).expect("maps");
        let job = &mapped.job;
        assert_eq!(job.name, "nightly report");
        assert_eq!(job.author, "ops");
        assert_eq!(job.alarm_email, "a@example.com,b@example.com");
        assert_eq!(job.schedule_type, ScheduleType::Cron);
        assert_eq!(job.misfire_strategy, MisfireStrategy::FireOnceNow);
        assert_eq!(job.route_strategy, RouteStrategy::ConsistentHash);
        assert_eq!(job.block_strategy, BlockStrategy::DiscardLater);
        assert_eq!(
            job.timeout_ms, 90_000,
            "XXL-JOB seconds become milliseconds"
        );
        assert_eq!(job.fail_retry_count, 3);
        assert_eq!(job.handler, "reportHandler");
        assert_eq!(job.params, "--full");
        assert_eq!(mapped.xxl_group_id, 1);
        assert_eq!(mapped.xxl_children, vec![8, 9]);
        assert_eq!(job.status, JobStatus::Running);
        assert!(job.trigger_next_ms >= options().now_ms + SCHEDULE_CHANGE_DELAY_MS);
        assert_eq!(job.trigger_next_ms % 1000, 0);
    }

    #[test]
    fn scripts_params_and_glue_versions_are_imported_with_lf_line_ends() {
        let row = XxlJobRow {
            glue_type: "GLUE_SHELL".into(),
            executor_handler: String::new(),
            glue_source: "if true; then\r\n  echo ok\r\nfi\r".into(),
            executor_param: "a\r\nb".into(),
            ..bean_row()
        };
        let job = map_job(&row, &options()).expect("maps").job;
        assert_eq!(job.glue_source, "if true; then\n  echo ok\nfi\n");
        assert_eq!(job.params, "a\nb");
        let version = XxlGlueRow {
            id: 1,
            job_id: 7,
            glue_type: "GLUE_SHELL".into(),
            glue_source: "echo old\r\n".into(),
            glue_remark: "v1".into(),
            saved_ms: 1000,
        };
        let versions = map_glue_versions(&[&version], GlueType::Shell, 99);
        assert_eq!(versions[0].glue_source, "echo old\n");
    }

    #[test]
    fn stopped_jobs_stay_stopped_and_a_running_none_job_is_noted() {
        let row = XxlJobRow {
            trigger_status: 0,
            ..bean_row()
        };
        let job = map_job(&row, &options()).expect("maps").job;
        assert_eq!((job.status, job.trigger_next_ms), (JobStatus::Stopped, 0));
        let row = XxlJobRow {
            schedule_type: "NONE".into(),
            schedule_conf: String::new(),
            ..bean_row()
        };
        let mapped = map_job(&row, &options()).expect("maps");
        assert_eq!(mapped.job.status, JobStatus::Stopped);
        assert!(mapped.notes[0].contains("NONE"), "{:?}", mapped.notes);
    }

    #[test]
    fn import_stopped_keeps_running_jobs_stopped_with_a_note() {
        let options = MapOptions {
            import_stopped: true,
            ..options()
        };
        let mapped = map_job(&bean_row(), &options).expect("maps");
        assert_eq!(mapped.job.status, JobStatus::Stopped);
        assert_eq!(mapped.job.trigger_next_ms, 0);
        assert!(
            mapped.notes[0].contains("--import-stopped"),
            "{:?}",
            mapped.notes
        );
    }

    #[test]
    fn every_problem_of_a_row_is_listed_and_validation_is_the_apis() {
        let row = XxlJobRow {
            misfire_strategy: "SOMETIMES".into(),
            executor_route_strategy: "NEAREST".into(),
            glue_type: "GLUE_GROOVY".into(),
            child_jobid: "x".into(),
            trigger_status: 5,
            ..bean_row()
        };
        let reasons = map_job(&row, &options()).unwrap_err();
        assert_eq!(reasons.len(), 5, "{reasons:?}");
        let row = XxlJobRow {
            schedule_conf: "0 0 25 * * ?".into(),
            ..bean_row()
        };
        let reasons = map_job(&row, &options()).unwrap_err();
        assert!(
            reasons[0].starts_with("job.schedule_conf: invalid cron"),
            "{reasons:?}"
        );
        let row = XxlJobRow {
            executor_handler: String::new(),
            ..bean_row()
        };
        let reasons = map_job(&row, &options()).unwrap_err();
        assert!(reasons[0].starts_with("job.handler"), "{reasons:?}");
    }

    #[test]
    fn a_self_link_is_left_out_with_a_note() {
        let row = XxlJobRow {
            child_jobid: "7,8".into(),
            ..bean_row()
        };
        let mapped = map_job(&row, &options()).expect("maps");
        assert_eq!(mapped.xxl_children, vec![8]);
        assert_eq!(mapped.notes.len(), 1);
    }

    #[test]
    fn groups_map_their_address_type_and_manual_list() {
        let row = XxlGroupRow {
            id: 2,
            app_name: "billing-executor".into(),
            title: "Billing".into(),
            address_type: 1,
            address_list: "http://10.0.0.5:9999/,http://10.0.0.6:9999/".into(),
            access_token: String::new(),
        };
        let group = map_group(&row, 5).expect("maps").group;
        assert_eq!(group.address_type, AddressType::Manual);
        assert_eq!(
            group.addresses,
            [
                "xxl-job+http://10.0.0.5:9999/",
                "xxl-job+http://10.0.0.6:9999/"
            ],
            "listed XXL-JOB executors are routed over their own protocol"
        );
        let auto = XxlGroupRow {
            address_type: 0,
            ..row.clone()
        };
        let group = map_group(&auto, 5).expect("maps").group;
        assert_eq!(group.address_type, AddressType::Auto);
        assert!(group.addresses.is_empty(), "an AUTO list is only a cache");
        let odd = XxlGroupRow {
            address_type: 3,
            ..row.clone()
        };
        assert!(map_group(&odd, 5).unwrap_err()[0].contains("address_type 3"));
        let short = XxlGroupRow {
            app_name: "ab".into(),
            ..row
        };
        assert!(map_group(&short, 5).unwrap_err()[0].starts_with("group.app_name"));
    }

    #[test]
    fn glue_versions_keep_the_latest_thirty_oldest_first() {
        let rows: Vec<XxlGlueRow> = (1..=35)
            .map(|id| XxlGlueRow {
                id,
                job_id: 7,
                glue_type: "GLUE_SHELL".into(),
                glue_source: format!("echo {id}"),
                glue_remark: format!("v{id}"),
                saved_ms: if id == 35 { 0 } else { id * 1000 },
            })
            .collect();
        let refs: Vec<&XxlGlueRow> = rows.iter().rev().collect();
        let versions = map_glue_versions(&refs, GlueType::Shell, 99);
        assert_eq!(versions.len(), 30);
        assert_eq!(versions[0].glue_remark, "v6");
        assert_eq!(versions[29].glue_remark, "v35");
        assert_eq!(versions[29].created_ms, 99);
    }
}
