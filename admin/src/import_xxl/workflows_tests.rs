//! Tests of `--children-as-workflows` through the whole plan (`plan::build`), in a file of
//! their own: `workflows` sits below `plan`, which calls it.

use std::collections::{HashMap, HashSet};

use super::mapping::MapOptions;
use super::plan::{Existing, JobAction, Plan, build};
use super::workflows::{WorkflowAction, WorkflowDraft, WorkflowItem, workflow_name};
use crate::model::validate::JobLimits;
use crate::model::workflow::MAX_WORKFLOW_NAME_BYTES;
use crate::model::{
    EdgeCondition, GroupId, JobId, JobStatus, MisfireStrategy, ScheduleType, WorkflowId,
};
use crate::store::xxl_source::XxlJobRow;
use crate::store::xxl_source::{XxlGroupRow, XxlSnapshot};

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

fn plan_of(jobs: Vec<XxlJobRow>, existing: &Existing) -> Plan {
    let snapshot = XxlSnapshot {
        layout: "test".into(),
        groups: vec![XxlGroupRow {
            id: 1,
            app_name: "app-one".into(),
            title: "app-one".into(),
            address_type: 0,
            address_list: String::new(),
            access_token: String::new(),
        }],
        jobs,
        glue_versions: Vec::new(),
        max_log_id: 0,
    };
    let options = MapOptions {
        limits: JobLimits {
            max_params_bytes: 1024,
            default_time_zone: chrono_tz::UTC,
        },
        time_zone: String::new(),
        import_stopped: false,
        children_as_workflows: true,
        now_ms: 1_700_000_000_000,
    };
    build(&snapshot, existing, &options, "h:3306/x")
}

fn edges(item: &WorkflowItem) -> Vec<String> {
    match &item.action {
        WorkflowAction::Create(draft) => (draft.edges.iter())
            .map(|(from, to)| format!("{from}>{to}"))
            .collect(),
        other => panic!("not created: {other:?} {:?}", item.reasons),
    }
}

fn children(plan: &Plan, xxl_id: i64) -> Vec<i64> {
    let item = plan.jobs.iter().find(|item| item.xxl_id == xxl_id);
    match item.map(|item| &item.action) {
        Some(JobAction::Create(new)) => new.xxl_children.clone(),
        other => panic!("job {xxl_id} is not created: {other:?}"),
    }
}

#[test]
fn a_chain_and_a_fan_out_become_one_workflow_each_without_child_links() {
    // Chain 1 -> 2 -> 3; tree 10 -> {11, 12}, 11 -> 13; job 20 has no link.
    let rows = vec![
        job(1, "2"),
        job(2, "3"),
        job(3, ""),
        job(10, "11,12"),
        job(11, "13"),
        job(12, ""),
        job(13, ""),
        job(20, ""),
    ];
    let plan = plan_of(rows, &Existing::default());
    let items = plan.workflows.as_ref().expect("workflows planned");
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(items[0].name, "job 1 (XXL-JOB job 1)");
    assert_eq!(edges(&items[0]), ["job-1>job-2", "job-2>job-3"]);
    assert_eq!(
        edges(&items[1]),
        ["job-10>job-11", "job-10>job-12", "job-11>job-13"]
    );
    for id in [1, 2, 10, 11] {
        assert!(children(&plan, id).is_empty(), "job {id} keeps child links");
    }
    let text = plan.render();
    assert!(
        text.contains("create  workflow 'job 1 (XXL-JOB job 1)' from job 1: 3 nodes"),
        "{text}"
    );
    assert!(text.contains("workflows 2 to create, 0 existing, 0 chains"));
}

#[test]
fn a_job_reached_by_two_paths_is_one_node_per_path_and_shared_children_go_in_both() {
    // Diamond 1 -> {2, 3} -> 4; roots 5 and 6 share child 7.
    let rows = vec![
        job(1, "2,3"),
        job(2, "4"),
        job(3, "4"),
        job(4, ""),
        job(5, "7"),
        job(6, "7"),
        job(7, ""),
    ];
    let plan = plan_of(rows, &Existing::default());
    let items = plan.workflows.as_ref().expect("workflows planned");
    assert_eq!(
        edges(&items[0]),
        ["job-1>job-2", "job-1>job-3", "job-2>job-4", "job-3>job-4-2"]
    );
    let roots: Vec<Option<i64>> = items.iter().map(|item| item.root).collect();
    assert_eq!(roots, [Some(1), Some(5), Some(6)]);
    assert_eq!(edges(&items[1]), ["job-5>job-7"]);
    assert_eq!(edges(&items[2]), ["job-6>job-7"]);
}

#[test]
fn a_cycle_keeps_its_chain_as_child_links_and_names_the_cycle() {
    // 1 -> 2 -> 3 -> 2 (a cycle below root 1), 1 -> 4; beside it a clean chain 8 -> 9.
    let rows = vec![
        job(1, "2,4"),
        job(2, "3"),
        job(3, "2"),
        job(4, ""),
        job(8, "9"),
        job(9, ""),
    ];
    let plan = plan_of(rows, &Existing::default());
    let items = plan.workflows.as_ref().expect("workflows planned");
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(items[0].action, WorkflowAction::KeepLinks);
    assert_eq!(items[0].chain, [1, 2, 3, 4]);
    assert!(
        items[0].reasons[0].contains("cycle 2 -> 3 -> 2"),
        "{:?}",
        items[0].reasons
    );
    assert_eq!(edges(&items[1]), ["job-8>job-9"]);
    let text = plan.render();
    assert!(
        text.contains("links   chain of jobs 1,2,3,4 kept as child links"),
        "{text}"
    );
    assert!(text.contains("1 chains kept as child links"), "{text}");
}

#[test]
fn a_second_import_finds_its_workflows_and_spares_jobs_with_child_links() {
    let rows = || vec![job(1, "2"), job(2, ""), job(5, "6"), job(6, "")];
    let existing = Existing {
        imported: HashMap::from([
            (1, JobId(101)),
            (2, JobId(102)),
            (5, JobId(105)),
            (6, JobId(106)),
        ]),
        present: HashSet::from([JobId(101), JobId(102), JobId(105), JobId(106)]),
        linked: HashSet::from([JobId(105)]),
        workflows_by_name: HashMap::from([("job 1 (XXL-JOB job 1)".into(), WorkflowId(7))]),
        ..Existing::default()
    };
    let plan = plan_of(rows(), &existing);
    let items = plan.workflows.as_ref().expect("workflows planned");
    assert_eq!(items[0].action, WorkflowAction::Exists(WorkflowId(7)));
    assert_eq!(items[1].action, WorkflowAction::KeepLinks);
    assert!(items[1].reasons[0].contains("xjob job 105 with its child links"));
    // Without the workflow of job 1, and its jobs without links, it is made again.
    let existing = Existing {
        workflows_by_name: HashMap::new(),
        ..existing
    };
    let plan = plan_of(rows(), &existing);
    let items = plan.workflows.as_ref().expect("workflows planned");
    assert_eq!(edges(&items[0]), ["job-1>job-2"]);
}

#[test]
fn a_draft_resolves_to_a_valid_workflow_and_long_names_are_cut() {
    let draft = WorkflowDraft {
        xxl_group_id: 1,
        nodes: vec![("job-1".into(), 1), ("job-2".into(), 2)],
        edges: vec![("job-1".into(), "job-2".into())],
        schedule: Default::default(),
    };
    let ids = HashMap::from([(1, JobId(11)), (2, JobId(12))]);
    let workflow = draft
        .resolve(
            "w",
            GroupId(3),
            |id| ids.get(&id).copied(),
            5,
            chrono_tz::UTC,
        )
        .expect("valid");
    assert_eq!(workflow.nodes[1].job_id, JobId(12));
    assert_eq!(workflow.edges[0].condition, EdgeCondition::OnSuccess);
    assert!(
        draft
            .resolve("w", GroupId(3), |_| None, 5, chrono_tz::UTC)
            .unwrap_err()
            .contains("job 1 unresolved")
    );
    let mut row = job(42, "");
    row.job_desc = "é".repeat(300);
    let name = workflow_name(&row);
    assert!(name.len() <= MAX_WORKFLOW_NAME_BYTES && name.ends_with("(XXL-JOB job 42)"));
}

fn created_job(plan: &Plan, xxl_id: i64) -> &crate::model::Job {
    let item = plan.jobs.iter().find(|item| item.xxl_id == xxl_id);
    match item.map(|item| &item.action) {
        Some(JobAction::Create(new)) => &new.job,
        other => panic!("job {xxl_id} is not created: {other:?}"),
    }
}

fn draft(item: &WorkflowItem) -> &WorkflowDraft {
    match &item.action {
        WorkflowAction::Create(draft) => draft,
        other => panic!("not created: {other:?}"),
    }
}

#[test]
fn a_running_cron_root_gives_its_schedule_to_the_workflow_and_runs_alone_only_by_hand() {
    // Running root 1 (cron, Berlin, FIRE_ONCE_NOW) -> 2 -> 3; the children have schedules of
    // their own in XXL-JOB too, which they keep.
    let mut root = job(1, "2");
    root.trigger_status = 1;
    root.schedule_type = "CRON".into();
    root.schedule_conf = "0 0 3 * * ?".into();
    root.misfire_strategy = "FIRE_ONCE_NOW".into();
    root.executor_param = "day=today".into();
    let mut child = job(2, "3");
    child.trigger_status = 1;
    let plan = plan_of(vec![root, child, job(3, "")], &Existing::default());
    let items = plan.workflows.as_ref().expect("workflows planned");
    let schedule = &draft(&items[0]).schedule;
    assert_eq!(schedule.schedule_type, ScheduleType::Cron);
    assert_eq!(schedule.schedule_conf, "0 0 3 * * ?");
    assert_eq!(schedule.misfire, MisfireStrategy::FireOnceNow);
    assert_eq!(schedule.time_zone, "", "the admin's zone, as the job had");
    let root = created_job(&plan, 1);
    assert_eq!(root.schedule_type, ScheduleType::None);
    assert_eq!(root.status, JobStatus::Stopped);
    assert_eq!(root.trigger_next_ms, 0);
    assert_eq!(
        root.params, "day=today",
        "the root keeps its params for its node"
    );
    let child = created_job(&plan, 2);
    assert_eq!(
        (child.schedule_type, child.status),
        (ScheduleType::FixRate, JobStatus::Running),
        "only the root's schedule moves"
    );
    let text = plan.render();
    assert!(
        text.contains(
            "2 edges (job-1 -> job-2, job-2 -> job-3), schedule CRON '0 0 3 * * ?' zone the \
             admin's misfire FIRE_ONCE_NOW"
        ),
        "{text}"
    );
    assert!(
        text.contains("job 1's schedule moves to the workflow"),
        "{text}"
    );
    // Resolved, the workflow has its first time and no params of its own.
    let ids = HashMap::from([(1, JobId(11)), (2, JobId(12)), (3, JobId(13))]);
    let now_ms = 1_700_000_000_000; // 2023-11-14 22:13:20 UTC
    let workflow = draft(&items[0])
        .resolve(
            "w",
            GroupId(1),
            |id| ids.get(&id).copied(),
            now_ms,
            chrono_tz::UTC,
        )
        .expect("valid");
    assert_eq!(
        workflow.schedule.next_fire_ms, 1_700_017_200_000,
        "03:00 next day"
    );
    assert_eq!(workflow.params, "");
}

#[test]
fn a_fix_delay_stopped_or_unscheduled_root_keeps_its_schedule_and_the_plan_says_why() {
    let mut delay = job(1, "2");
    delay.trigger_status = 1;
    delay.schedule_type = "FIX_DELAY".into();
    let mut none = job(5, "6");
    none.schedule_type = "NONE".into();
    none.schedule_conf = String::new();
    // job(8) is stopped in XXL-JOB (trigger_status 0): imported stopped.
    let rows = vec![delay, job(2, ""), none, job(6, ""), job(8, "9"), job(9, "")];
    let plan = plan_of(rows, &Existing::default());
    let items = plan.workflows.as_ref().expect("workflows planned");
    for item in items {
        assert_eq!(draft(item).schedule.schedule_type, ScheduleType::None);
    }
    let root = created_job(&plan, 1);
    assert_eq!(
        (root.schedule_type, root.status),
        (ScheduleType::FixDelay, JobStatus::Running)
    );
    assert_eq!(created_job(&plan, 8).schedule_type, ScheduleType::FixRate);
    let text = plan.render();
    assert!(text.contains("job-1 -> job-2), no schedule"), "{text}");
    assert!(
        text.contains("job 1 keeps its schedule: its schedule is FIX_DELAY"),
        "{text}"
    );
    assert!(
        text.contains("job 5 keeps its schedule: it has no schedule"),
        "{text}"
    );
    assert!(
        text.contains("job 8 keeps its schedule: it is created stopped"),
        "{text}"
    );
}
