//! The import plan: what `xjob import-xxl-job` creates, finds already there, or skips (with
//! every reason), decided from the XXL-JOB rows and what xjob holds, without writing anything.
//! `--dry-run` prints it; a real run prints it, then carries it out.
//!
//! Jobs are all-or-nothing: a job is created only with its group and every child link, so a
//! job whose child is skipped is skipped too (with that reason), and the next import, once the
//! child is fixed in XXL-JOB, creates both. XXL-JOB allows cycles between different jobs' child
//! links; xjob refuses them, so every job on a cycle is skipped. Jobs are created children
//! first, so each child link points at an xjob job that exists.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use super::mapping::{MapOptions, map_glue_versions, map_group, map_job};
use super::workflows::{self, Found, Imported, WorkflowItem};
use crate::model::validate::{find_child_cycle, short_prefix};
use crate::model::{GlueType, GlueVersion, Group, GroupId, Job, JobId, JobStatus, WorkflowId};
use crate::store::xxl_source::{XxlGlueRow, XxlJobRow, XxlSnapshot};

/// What xjob already holds that the plan depends on.
#[derive(Debug, Clone, Default)]
pub struct Existing {
    /// xjob group id by app name (app names are unique in both systems).
    pub groups_by_app: HashMap<String, GroupId>,
    /// xjob job id by XXL-JOB job id, from the import record of this source.
    pub imported: HashMap<i64, JobId>,
    /// Which xjob jobs of `imported` still exist.
    pub present: HashSet<JobId>,
    /// Which of `present` have child links in xjob.
    pub linked: HashSet<JobId>,
    /// xjob workflows by name (`--children-as-workflows` matches its own by name).
    pub workflows_by_name: HashMap<String, WorkflowId>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum GroupAction {
    Create(Group),
    /// An xjob group with this app name exists: jobs go into it, it is left as it is.
    Exists(GroupId),
    Skip,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GroupItem {
    pub xxl_id: i64,
    pub app_name: String,
    pub action: GroupAction,
    /// Why it is skipped.
    pub reasons: Vec<String>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum JobAction {
    Create(Box<NewJob>),
    /// Imported before; that xjob job is left as it is.
    Exists(JobId),
    Skip,
}

/// A job to create: group and child links are resolved to xjob ids when it is written.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    pub job: Job,
    pub xxl_group_id: i64,
    pub xxl_children: Vec<i64>,
    pub glue_versions: Vec<GlueVersion>,
    /// The xjob job an earlier import made for it, deleted since.
    pub replaces: Option<JobId>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JobItem {
    pub xxl_id: i64,
    pub name: String,
    pub action: JobAction,
    pub reasons: Vec<String>,
    pub notes: Vec<String>,
}

impl JobItem {
    fn skip(&mut self, reason: String) {
        self.action = JobAction::Skip;
        self.reasons.push(reason);
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub source: String,
    pub layout: String,
    pub groups: Vec<GroupItem>,
    pub jobs: Vec<JobItem>,
    /// Indexes into `jobs` of the jobs to create, children before parents.
    pub order: Vec<usize>,
    /// With `--children-as-workflows`: the workflows made of child links (else `None`).
    pub workflows: Option<Vec<WorkflowItem>>,
}

/// Counts of one kind of item.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub create: usize,
    pub exists: usize,
    pub skip: usize,
}

impl Plan {
    pub fn group_tally(&self) -> Tally {
        let mut tally = Tally::default();
        for item in &self.groups {
            match item.action {
                GroupAction::Create(_) => tally.create += 1,
                GroupAction::Exists(_) => tally.exists += 1,
                GroupAction::Skip => tally.skip += 1,
            }
        }
        tally
    }

    pub fn job_tally(&self) -> Tally {
        let mut tally = Tally::default();
        for item in &self.jobs {
            match item.action {
                JobAction::Create(_) => tally.create += 1,
                JobAction::Exists(_) => tally.exists += 1,
                JobAction::Skip => tally.skip += 1,
            }
        }
        tally
    }

    /// Whether anything is left out.
    pub fn skipped(&self) -> usize {
        self.group_tally().skip + self.job_tally().skip
    }

    /// The plan as printed: one line per item, reasons and notes indented below it.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "XXL-JOB database {}, schema {}",
            self.source, self.layout
        );
        let _ = writeln!(out, "groups:");
        for item in &self.groups {
            let what = match &item.action {
                GroupAction::Create(group) => format!(
                    "create  group {} {} ({}{})",
                    item.xxl_id,
                    item.app_name,
                    group.address_type,
                    if group.addresses.is_empty() {
                        String::new()
                    } else {
                        format!(" {}", group.addresses.join(","))
                    }
                ),
                GroupAction::Exists(id) => format!(
                    "exists  group {} {} -> xjob group {id} (left as it is)",
                    item.xxl_id, item.app_name
                ),
                GroupAction::Skip => format!("skip    group {} {}", item.xxl_id, item.app_name),
            };
            let _ = writeln!(out, "  {what}");
            write_details(&mut out, &item.reasons, &item.notes);
        }
        let _ = writeln!(out, "jobs:");
        for item in &self.jobs {
            let name = short_prefix(&item.name);
            let what = match &item.action {
                JobAction::Create(new) => {
                    format!("create  job {} '{name}' {}", item.xxl_id, describe(new))
                }
                JobAction::Exists(id) => format!(
                    "exists  job {} '{name}' -> xjob job {id} (left as it is)",
                    item.xxl_id
                ),
                JobAction::Skip => format!("skip    job {} '{name}'", item.xxl_id),
            };
            let _ = writeln!(out, "  {what}");
            write_details(&mut out, &item.reasons, &item.notes);
        }
        if let Some(items) = &self.workflows {
            workflows::render(items, &mut out);
        }
        let (groups, jobs) = (self.group_tally(), self.job_tally());
        let _ = write!(
            out,
            "plan: groups {} to create, {} existing, {} skipped; jobs {} to create, {} existing, \
             {} skipped",
            groups.create, groups.exists, groups.skip, jobs.create, jobs.exists, jobs.skip
        );
        if let Some(items) = &self.workflows {
            let (create, exists, links) = workflows::tally(items);
            let _ = write!(
                out,
                "; workflows {create} to create, {exists} existing, {links} chains kept as child \
                 links"
            );
        }
        let _ = writeln!(out);
        out
    }
}

fn write_details(out: &mut String, reasons: &[String], notes: &[String]) {
    for reason in reasons {
        let _ = writeln!(out, "          reason: {reason}");
    }
    for note in notes {
        let _ = writeln!(out, "          note: {note}");
    }
}

fn describe(new: &NewJob) -> String {
    let job = &new.job;
    let mut text = format!(
        "{} '{}' {} {} {}",
        job.schedule_type, job.schedule_conf, job.route_strategy, job.block_strategy, job.glue_type
    );
    if job.glue_type == GlueType::Bean {
        let _ = write!(text, " {}", short_prefix(&job.handler));
    }
    let _ = write!(
        text,
        ", {}",
        match job.status {
            JobStatus::Running => "running",
            JobStatus::Stopped => "stopped",
        }
    );
    if !new.glue_versions.is_empty() {
        let _ = write!(text, ", {} glue versions", new.glue_versions.len());
    }
    if !new.xxl_children.is_empty() {
        let children: Vec<String> = new.xxl_children.iter().map(i64::to_string).collect();
        let _ = write!(text, ", children {}", children.join(","));
    }
    if let Some(old) = new.replaces {
        let _ = write!(text, " (its earlier import, xjob job {old}, was deleted)");
    }
    text
}

/// Decides the plan.
pub fn build(
    snapshot: &XxlSnapshot,
    existing: &Existing,
    options: &MapOptions,
    source: &str,
) -> Plan {
    let groups: Vec<GroupItem> = snapshot
        .groups
        .iter()
        .map(|row| {
            let app_name = row.app_name.trim().to_string();
            let mut item = GroupItem {
                xxl_id: row.id,
                app_name: app_name.clone(),
                action: GroupAction::Skip,
                reasons: Vec::new(),
                notes: Vec::new(),
            };
            if let Some(id) = existing.groups_by_app.get(&app_name) {
                item.action = GroupAction::Exists(*id);
                return item;
            }
            match map_group(row, options.now_ms) {
                Ok(mapped) => {
                    item.action = GroupAction::Create(mapped.group);
                    item.notes = mapped.notes;
                }
                Err(reasons) => item.reasons = reasons,
            }
            item
        })
        .collect();
    let mut glue_by_job: HashMap<i64, Vec<&XxlGlueRow>> = HashMap::new();
    for row in &snapshot.glue_versions {
        glue_by_job.entry(row.job_id).or_default().push(row);
    }
    let mut jobs: Vec<JobItem> = snapshot
        .jobs
        .iter()
        .map(|row| {
            let mut item = JobItem {
                xxl_id: row.id,
                name: row.job_desc.trim().to_string(),
                action: JobAction::Skip,
                reasons: Vec::new(),
                notes: Vec::new(),
            };
            let replaces = existing.imported.get(&row.id).copied();
            if let Some(job_id) = replaces
                && existing.present.contains(&job_id)
            {
                item.action = JobAction::Exists(job_id);
                return item;
            }
            let mapped = match map_job(row, options) {
                Ok(mapped) => mapped,
                Err(reasons) => {
                    item.reasons = reasons;
                    return item;
                }
            };
            item.notes = mapped.notes;
            match groups.iter().find(|group| group.xxl_id == row.job_group) {
                None => {
                    item.skip(format!(
                        "its group {} does not exist in XXL-JOB",
                        row.job_group
                    ));
                    return item;
                }
                Some(group) if group.action == GroupAction::Skip => {
                    item.skip(format!("its group {} is not imported", group.app_name));
                    return item;
                }
                Some(_) => {}
            }
            let saved = glue_by_job.get(&row.id).map(Vec::as_slice).unwrap_or(&[]);
            let glue_type = mapped.job.glue_type;
            let glue_versions = if glue_type == GlueType::Bean {
                if !saved.is_empty() {
                    item.notes.push(format!(
                        "{} saved glue versions of this BEAN job are not imported",
                        saved.len()
                    ));
                }
                Vec::new()
            } else {
                map_glue_versions(saved, glue_type, mapped.job.glue_updated_ms)
            };
            item.action = JobAction::Create(Box::new(NewJob {
                job: mapped.job,
                xxl_group_id: mapped.xxl_group_id,
                xxl_children: mapped.xxl_children,
                glue_versions,
                replaces,
            }));
            item
        })
        .collect();
    skip_unresolved_children(&mut jobs);
    skip_cycles(&mut jobs);
    let workflows = (options.children_as_workflows)
        .then(|| plan_workflows(&snapshot.jobs, &mut jobs, existing));
    let order = creation_order(&jobs);
    Plan {
        source: source.to_string(),
        layout: snapshot.layout.clone(),
        groups,
        jobs,
        order,
        workflows,
    }
}

/// `--children-as-workflows`: the workflows, and the jobs whose child links become their
/// edges created without those links.
fn plan_workflows(
    rows: &[XxlJobRow],
    jobs: &mut [JobItem],
    existing: &Existing,
) -> Vec<WorkflowItem> {
    let imported: HashMap<i64, Imported> = (jobs.iter())
        .map(|item| {
            let imported = match item.action {
                JobAction::Create(_) => Imported::Create,
                JobAction::Exists(id) => Imported::Exists(id),
                JobAction::Skip => Imported::Skip,
            };
            (item.xxl_id, imported)
        })
        .collect();
    let found = Found {
        linked: &existing.linked,
        workflows_by_name: &existing.workflows_by_name,
    };
    let (mut items, as_edges) = workflows::plan(rows, &imported, found);
    for item in &mut items {
        move_root_schedule(item, jobs);
    }
    for item in jobs.iter_mut() {
        if let JobAction::Create(new) = &mut item.action
            && as_edges.contains(&item.xxl_id)
            && !new.xxl_children.is_empty()
        {
            let links: Vec<String> = new.xxl_children.iter().map(i64::to_string).collect();
            item.notes.push(format!(
                "its child links to {} become workflow edges (--children-as-workflows)",
                links.join(",")
            ));
            new.xxl_children.clear();
        }
    }
    items
}

/// Gives a workflow to create its root's schedule (`workflows::take_root_schedule`); the
/// workflow's and the root's notes say where the schedule went.
fn move_root_schedule(item: &mut WorkflowItem, jobs: &mut [JobItem]) {
    let (workflows::WorkflowAction::Create(draft), Some(root)) = (&mut item.action, item.root)
    else {
        return;
    };
    let Some(job) = jobs.iter_mut().find(|job| job.xxl_id == root) else {
        return;
    };
    let note = match &mut job.action {
        JobAction::Create(new) => match workflows::take_root_schedule(draft, &mut new.job) {
            Ok(()) => {
                job.notes.push(format!(
                    "its schedule moves to workflow '{}' (--children-as-workflows); it is \
                     created without one",
                    short_prefix(&item.name)
                ));
                format!(
                    "job {root}'s schedule moves to the workflow, so each time runs the whole \
                     chain; job {root} is created without a schedule (stopped, it can still be \
                     triggered alone)"
                )
            }
            Err(why) => format!("job {root} keeps its schedule: {why}"),
        },
        _ => format!(
            "job {root} was imported before and keeps its schedule, which starts it alone; \
             start the workflow to run the chain, or move the schedule to it by hand"
        ),
    };
    item.notes.push(note);
}

/// Children of each job to create, by XXL-JOB id.
fn children_of(item: &JobItem) -> &[i64] {
    match &item.action {
        JobAction::Create(new) => &new.xxl_children,
        _ => &[],
    }
}

/// Skips jobs with a child that does not exist or is skipped, until none is left (a skip can
/// make its parents' children unresolved in turn).
fn skip_unresolved_children(jobs: &mut [JobItem]) {
    let index: HashMap<i64, usize> = jobs
        .iter()
        .enumerate()
        .map(|(at, item)| (item.xxl_id, at))
        .collect();
    loop {
        let mut skips: Vec<(usize, String)> = Vec::new();
        for (at, item) in jobs.iter().enumerate() {
            let problem = children_of(item)
                .iter()
                .find_map(|child| match index.get(child) {
                    None => Some(format!("child job {child} does not exist in XXL-JOB")),
                    Some(&child_at) if jobs[child_at].action == JobAction::Skip => {
                        Some(format!("child job {child} is not imported (see its entry)"))
                    }
                    Some(_) => None,
                });
            if let Some(problem) = problem {
                skips.push((at, problem));
            }
        }
        if skips.is_empty() {
            return;
        }
        for (at, reason) in skips {
            jobs[at].skip(reason);
        }
    }
}

/// Skips every job on a cycle of child links among the jobs to create (xjob refuses cycles),
/// then their parents. Jobs already in xjob cannot lead back to a new one.
fn skip_cycles(jobs: &mut [JobItem]) {
    loop {
        let graph: HashMap<i64, Vec<i64>> = jobs
            .iter()
            .filter(|item| matches!(item.action, JobAction::Create(_)))
            .map(|item| (item.xxl_id, children_of(item).to_vec()))
            .collect();
        let mut starts: Vec<i64> = graph.keys().copied().collect();
        starts.sort_unstable();
        let Some(found) = starts
            .into_iter()
            .find_map(|start| find_child_cycle(start, &graph))
        else {
            return;
        };
        let path: Vec<String> = found.cycle.iter().map(i64::to_string).collect();
        let reason = format!(
            "child links form a cycle {} (XXL-JOB job ids); xjob refuses cycles: remove one \
             link in XXL-JOB",
            path.join(" -> ")
        );
        let on_cycle: HashSet<i64> = found.cycle.iter().copied().collect();
        for item in jobs.iter_mut() {
            if on_cycle.contains(&item.xxl_id) {
                item.skip(reason.clone());
            }
        }
        skip_unresolved_children(jobs);
    }
}

/// Indexes of the jobs to create, each after all of its children (depth-first post-order; the
/// graph is acyclic once `skip_cycles` ran).
fn creation_order(jobs: &[JobItem]) -> Vec<usize> {
    let index: HashMap<i64, usize> = jobs
        .iter()
        .enumerate()
        .map(|(at, item)| (item.xxl_id, at))
        .collect();
    let mut order = Vec::new();
    let mut placed: HashSet<usize> = HashSet::new();
    for start in 0..jobs.len() {
        if !matches!(jobs[start].action, JobAction::Create(_)) || placed.contains(&start) {
            continue;
        }
        // (job, next child to visit); iterative so long chains cannot overflow the stack.
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        while let Some((at, next)) = stack.last().copied() {
            let children = children_of(&jobs[at]);
            match children.get(next) {
                Some(child) => {
                    if let Some(last) = stack.last_mut() {
                        last.1 += 1;
                    }
                    if let Some(&child_at) = index.get(child)
                        && matches!(jobs[child_at].action, JobAction::Create(_))
                        && !placed.contains(&child_at)
                        && !stack.iter().any(|(on_path, _)| *on_path == child_at)
                    {
                        stack.push((child_at, 0));
                    }
                }
                None => {
                    stack.pop();
                    if placed.insert(at) {
                        order.push(at);
                    }
                }
            }
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::validate::JobLimits;
    use crate::store::xxl_source::{XxlGroupRow, XxlJobRow};

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

    fn group(id: i64, app_name: &str) -> XxlGroupRow {
        XxlGroupRow {
            id,
            app_name: app_name.into(),
            title: app_name.into(),
            address_type: 0,
            address_list: String::new(),
            access_token: String::new(),
        }
    }

    fn job(id: i64, children: &str) -> XxlJobRow {
        XxlJobRow {
            id,
            job_group: 1,
            job_desc: format!("job {id}"),
            schedule_type: "FIX_RATE".into(),
            schedule_conf: "60".into(),
            executor_route_strategy: "FIRST".into(),
            executor_handler: "h".into(),
            glue_type: "BEAN".into(),
            child_jobid: children.into(),
            ..XxlJobRow::default()
        }
    }

    fn snapshot(jobs: Vec<XxlJobRow>) -> XxlSnapshot {
        XxlSnapshot {
            layout: "test".into(),
            groups: vec![group(1, "app-one"), group(2, "x")],
            jobs,
            glue_versions: Vec::new(),
            max_log_id: 0,
        }
    }

    fn actions(plan: &Plan) -> Vec<(i64, &'static str)> {
        plan.jobs
            .iter()
            .map(|item| {
                let action = match item.action {
                    JobAction::Create(_) => "create",
                    JobAction::Exists(_) => "exists",
                    JobAction::Skip => "skip",
                };
                (item.xxl_id, action)
            })
            .collect()
    }

    #[test]
    fn children_are_created_first_and_skips_propagate_to_parents() {
        let mut bad = job(4, "");
        bad.schedule_conf = "zero".into();
        let plan = build(
            &snapshot(vec![
                job(1, "2"),
                job(2, "3"),
                job(3, ""),
                bad,
                job(5, "4"),
                job(6, "99"),
            ]),
            &Existing::default(),
            &options(),
            "h:3306/x",
        );
        assert_eq!(
            actions(&plan),
            vec![
                (1, "create"),
                (2, "create"),
                (3, "create"),
                (4, "skip"),
                (5, "skip"),
                (6, "skip")
            ]
        );
        let ids: Vec<i64> = plan.order.iter().map(|at| plan.jobs[*at].xxl_id).collect();
        assert_eq!(ids, vec![3, 2, 1]);
        assert!(plan.jobs[4].reasons[0].contains("child job 4 is not imported"));
        assert!(plan.jobs[5].reasons[0].contains("child job 99 does not exist"));
        assert_eq!(plan.skipped(), 3 + 1, "group 'x' has a too short app name");
    }

    #[test]
    fn a_cycle_skips_its_jobs_and_their_parents_only() {
        let plan = build(
            &snapshot(vec![job(1, "2"), job(2, "3"), job(3, "2"), job(4, "")]),
            &Existing::default(),
            &options(),
            "h:3306/x",
        );
        assert_eq!(
            actions(&plan),
            vec![(1, "skip"), (2, "skip"), (3, "skip"), (4, "create")]
        );
        assert!(
            plan.jobs[1].reasons[0].contains("cycle 2 -> 3 -> 2"),
            "{:?}",
            plan.jobs[1]
        );
        assert!(plan.jobs[0].reasons[0].contains("child job 2 is not imported"));
    }

    #[test]
    fn imported_jobs_and_known_apps_are_found_a_deleted_import_is_made_again() {
        let existing = Existing {
            groups_by_app: HashMap::from([("app-one".to_string(), GroupId(40))]),
            imported: HashMap::from([(1, JobId(100)), (2, JobId(101))]),
            present: HashSet::from([JobId(100)]),
            ..Existing::default()
        };
        let plan = build(
            &snapshot(vec![job(1, ""), job(2, "1")]),
            &existing,
            &options(),
            "h:3306/x",
        );
        assert_eq!(plan.groups[0].action, GroupAction::Exists(GroupId(40)));
        assert_eq!(actions(&plan), vec![(1, "exists"), (2, "create")]);
        let JobAction::Create(new) = &plan.jobs[1].action else {
            panic!("job 2 is created again");
        };
        assert_eq!(new.replaces, Some(JobId(101)));
        let text = plan.render();
        assert!(
            text.contains("exists  job 1 'job 1' -> xjob job 100"),
            "{text}"
        );
        assert!(
            text.contains("jobs 1 to create, 1 existing, 0 skipped"),
            "{text}"
        );
    }

    #[test]
    fn a_job_of_a_missing_or_skipped_group_is_skipped() {
        let mut orphan = job(1, "");
        orphan.job_group = 9;
        let mut in_bad_group = job(2, "");
        in_bad_group.job_group = 2;
        let plan = build(
            &snapshot(vec![orphan, in_bad_group]),
            &Existing::default(),
            &options(),
            "h:3306/x",
        );
        assert_eq!(actions(&plan), vec![(1, "skip"), (2, "skip")]);
        assert!(plan.jobs[0].reasons[0].contains("group 9 does not exist"));
        assert!(plan.jobs[1].reasons[0].contains("group x is not imported"));
    }
}
