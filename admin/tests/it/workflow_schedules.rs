//! Workflow schedules across admin processes: two `xjob` admins share one database and both run
//! the workflow schedule loop; a workflow on an every-second schedule gets exactly one run per
//! occurrence (no occurrence twice, none skipped), and each run's nodes ran once.
//!
//! Databases as in `cluster`: PostgreSQL when `XJOB_TEST_POSTGRES_URL` is set, MariaDB in a
//! second scenario when `XJOB_TEST_MYSQL_URL` is set, else one SQLite file shared by the two.

use crate::common;

use std::time::Duration;

use common::ONE_AT_A_TIME;
use common::cluster::{Cluster, Database, Timing, now_ms};
use common::wait_until;
use xjob_proto::pb;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_admins_start_each_workflow_occurrence_once() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::postgres_or_shared_sqlite().await? else {
        return Ok(());
    };
    each_occurrence_once(database).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_admins_on_mariadb_start_each_workflow_occurrence_once() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::mariadb().await? else {
        return Ok(());
    };
    each_occurrence_once(database).await
}

async fn each_occurrence_once(database: Database) -> anyhow::Result<()> {
    let cluster = Cluster::start(database, 2, 1, Timing::default()).await?;
    let outcome = scenario(&cluster).await;
    cluster.finish(outcome).await
}

async fn scenario(cluster: &Cluster) -> anyhow::Result<()> {
    let mut client = cluster.client().await?;
    let mut job_ids = Vec::new();
    for name in ["first", "second"] {
        let job = pb::Job {
            group_id: cluster.group_id,
            name: name.into(),
            schedule_type: pb::ScheduleType::None as i32,
            route_strategy: pb::RouteStrategy::First as i32,
            handler: "record".into(),
            block_strategy: pb::BlockStrategy::SerialExecution as i32,
            glue_type: pb::GlueType::Bean as i32,
            misfire_strategy: pb::MisfireStrategy::DoNothing as i32,
            ..Default::default()
        };
        let created = client
            .create_job(pb::CreateJobRequest { job: Some(job) })
            .await?;
        let created = created.into_inner().job;
        job_ids.push(created.map(|job| job.id).unwrap_or_default());
    }
    let node = |key: &str, job_id: i64| pb::WorkflowNode {
        key: key.into(),
        job_id,
        fan_in: pb::WorkflowFanIn::AllSuccess as i32,
    };
    let workflow = pb::Workflow {
        group_id: cluster.group_id,
        name: "every second".into(),
        nodes: vec![node("a", job_ids[0]), node("b", job_ids[1])],
        edges: vec![pb::WorkflowEdge {
            from: "a".into(),
            to: "b".into(),
            condition: pb::WorkflowEdgeCondition::OnSuccess as i32,
        }],
        schedule_type: pb::ScheduleType::FixRate as i32,
        schedule_conf: "1".into(),
        ..Default::default()
    };
    let request = pb::CreateWorkflowRequest {
        workflow: Some(workflow),
    };
    let created = client.create_workflow(request).await?.into_inner().workflow;
    let mut workflow = created.ok_or_else(|| anyhow::anyhow!("no workflow"))?;
    let first_ms = workflow.next_fire_ms;

    // Let both admins compete for about eight occurrences, then take the schedule off.
    tokio::time::sleep(Duration::from_millis((first_ms - now_ms()).max(0) as u64)).await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    workflow.schedule_type = pb::ScheduleType::None as i32;
    let request = pb::UpdateWorkflowRequest {
        workflow: Some(workflow.clone()),
    };
    client.update_workflow(request).await?;

    let list = pb::ListWorkflowRunsRequest {
        workflow_id: workflow.id,
        page_size: 1000,
        page_token: String::new(),
    };
    let runs = wait_until(Duration::from_secs(30), "every run to end", || {
        let mut client = client.clone();
        let list = list.clone();
        async move {
            let runs = client
                .list_workflow_runs(list)
                .await
                .ok()?
                .into_inner()
                .runs;
            let running = pb::WorkflowRunState::Running as i32;
            runs.iter().all(|run| run.state != running).then_some(runs)
        }
    })
    .await?;
    let mut times: Vec<i64> = runs.iter().map(|run| run.scheduled_at_ms).collect();
    times.sort_unstable();
    eprintln!("{} scheduled runs: {times:?}", runs.len());
    anyhow::ensure!(runs.len() >= 6, "too few runs: {times:?}");
    anyhow::ensure!(times[0] == first_ms, "the first occurrence ran: {times:?}");
    for pair in times.windows(2) {
        // Each occurrence once, and none missed while both admins were up.
        anyhow::ensure!(
            pair[1] - pair[0] == 1_000,
            "not one run per second: {times:?}"
        );
    }
    for run in &runs {
        anyhow::ensure!(
            run.state == pb::WorkflowRunState::Succeeded as i32
                && run.trigger_type == pb::TriggerType::Cron as i32,
            "{run:?}"
        );
    }
    // Each node's job ran once per run.
    let records = cluster.records_snapshot();
    for job_id in &job_ids {
        let ran = records.iter().filter(|(id, _)| id == job_id).count();
        anyhow::ensure!(
            ran == runs.len(),
            "job {job_id} ran {ran} times for {} runs",
            runs.len()
        );
    }
    Ok(())
}
