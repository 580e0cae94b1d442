//! Workflow schedules across admin processes: two `xjob` admins share one database and both run
//! the workflow schedule loop; a workflow on an every-second schedule gets exactly one run per
//! occurrence (no occurrence twice, none skipped), and each run's nodes ran once. And an admin
//! killed (SIGKILL) while scheduled runs wait under BUFFER_ALL, then restarted on the same
//! database: each waiting run starts once, in turn, none lost.
//!
//! Databases as in `cluster`: PostgreSQL when `XJOB_TEST_POSTGRES_URL` is set, MariaDB in a
//! second scenario when `XJOB_TEST_MYSQL_URL` is set, else one SQLite file shared by the two.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::cluster::{APP, Cluster, Database, Timing, now_ms};
use common::{ONE_AT_A_TIME, connect, wait_until};
use xjob_admin::model::WorkflowId;
use xjob_admin::model::workflow_run::WorkflowRunStatus;
use xjob_executor::{Executor, JobContext, JobOutput, JobResult};
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

/// The admin process is killed (SIGKILL) while scheduled runs of two BUFFER_ALL workflows wait
/// behind the run going, those runs' nodes end while no admin runs, and the admin restarts on
/// the same database. One workflow's schedule was taken off just before the kill, so only the
/// database tells the restarted admin its runs wait; the other's schedule goes on, and the
/// restarted admin's occurrences wait behind the runs left. For both: the restarted admin
/// learns the ends, then starts the waiting runs one at a time, oldest first, each once; every
/// occurrence has one run, every run ran its node once, and none is lost (all SUCCEEDED).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiting_workflow_runs_start_once_after_an_admin_kill() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::postgres_or_shared_sqlite().await? else {
        return Ok(());
    };
    waiting_runs_across_a_kill(database).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiting_workflow_runs_on_mariadb_start_once_after_an_admin_kill() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::mariadb().await? else {
        return Ok(());
    };
    waiting_runs_across_a_kill(database).await
}

async fn waiting_runs_across_a_kill(database: Database) -> anyhow::Result<()> {
    let mut cluster = Cluster::start(database, 1, 0, Timing::default()).await?;
    let outcome = kill_while_runs_wait(&mut cluster).await;
    cluster.finish(outcome).await
}

/// `(log id, started ms, ended ms)` of each node run the slow handler served; 0 while going.
type Spans = Arc<Mutex<Vec<(i64, i64, i64)>>>;

fn spans_of(spans: &Spans) -> Vec<(i64, i64, i64)> {
    spans.lock().map(|spans| spans.clone()).unwrap_or_default()
}

type Client = pb::job_admin_client::JobAdminClient<tonic::transport::Channel>;

/// Every run of the workflow, as the API lists them.
async fn runs_of(client: &Client, workflow_id: i64) -> Option<Vec<pb::WorkflowRun>> {
    let list = pb::ListWorkflowRunsRequest {
        workflow_id,
        page_size: 1000,
        page_token: String::new(),
    };
    let response = client.clone().list_workflow_runs(list).await.ok()?;
    Some(response.into_inner().runs)
}

fn count_in(runs: &[pb::WorkflowRun], state: pb::WorkflowRunState) -> usize {
    runs.iter().filter(|run| run.state == state as i32).count()
}

/// Takes the workflow's schedule off.
async fn schedule_off(client: &Client, workflow: &pb::Workflow) -> anyhow::Result<()> {
    let off = pb::Workflow {
        schedule_type: pb::ScheduleType::None as i32,
        ..workflow.clone()
    };
    let request = pb::UpdateWorkflowRequest {
        workflow: Some(off),
    };
    client.clone().update_workflow(request).await?;
    Ok(())
}

async fn kill_while_runs_wait(cluster: &mut Cluster) -> anyhow::Result<()> {
    // Nodes of 2 s on every-second schedules: runs pile up WAITING.
    let spans: Spans = Arc::default();
    let served = Arc::clone(&spans);
    let executor = Executor::builder()
        .app_name(APP)
        .admin_addrs(vec![cluster.admins[0].spec.url()])
        .bind("127.0.0.1:0")
        .log_dir(cluster.dir.path().join("slow-executor"))
        .handler("slow", move |ctx: JobContext| {
            let served = Arc::clone(&served);
            async move {
                let started = now_ms();
                if let Ok(mut spans) = served.lock() {
                    spans.push((ctx.log_id(), started, 0));
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
                if let Ok(mut spans) = served.lock()
                    && let Some(span) = spans.iter_mut().find(|span| span.0 == ctx.log_id())
                {
                    span.2 = now_ms();
                }
                JobResult::Ok(JobOutput::default())
            }
        })
        .start()
        .await?;
    executor.wait_registered(Duration::from_secs(20)).await?;
    cluster.executors.push(executor);

    // Two workflows of a job each (the executor runs one job's runs one at a time).
    let client = cluster.client().await?;
    let mut workflows = Vec::new();
    let mut job_ids = Vec::new();
    for name in ["off before the kill", "on across the kill"] {
        let job = pb::Job {
            group_id: cluster.group_id,
            name: name.into(),
            schedule_type: pb::ScheduleType::None as i32,
            route_strategy: pb::RouteStrategy::First as i32,
            handler: "slow".into(),
            block_strategy: pb::BlockStrategy::SerialExecution as i32,
            glue_type: pb::GlueType::Bean as i32,
            misfire_strategy: pb::MisfireStrategy::DoNothing as i32,
            ..Default::default()
        };
        let request = pb::CreateJobRequest { job: Some(job) };
        let job = client.clone().create_job(request).await?.into_inner().job;
        let job_id = job.map(|job| job.id).unwrap_or_default();
        let workflow = pb::Workflow {
            group_id: cluster.group_id,
            name: name.into(),
            nodes: vec![pb::WorkflowNode {
                key: "slow".into(),
                job_id,
                fan_in: pb::WorkflowFanIn::AllSuccess as i32,
            }],
            schedule_type: pb::ScheduleType::FixRate as i32,
            schedule_conf: "1".into(),
            overlap_policy: pb::OverlapPolicy::BufferAll as i32,
            ..Default::default()
        };
        let request = pb::CreateWorkflowRequest {
            workflow: Some(workflow),
        };
        let created = client.clone().create_workflow(request).await?;
        let created = created.into_inner().workflow;
        workflows.push(created.ok_or_else(|| anyhow::anyhow!("no workflow"))?);
        job_ids.push(job_id);
    }
    let (off, on) = (&workflows[0], &workflows[1]);

    // Two runs of each wait behind the one going: the first's schedule off, then the admin
    // killed there, with no shutdown code run.
    wait_until(
        Duration::from_secs(20),
        "two runs waiting in each",
        || async {
            for workflow in &workflows {
                let runs = runs_of(&client, workflow.id).await?;
                if count_in(&runs, pb::WorkflowRunState::Waiting) < 2 {
                    return None;
                }
            }
            Some(())
        },
    )
    .await?;
    schedule_off(&client, off).await?;
    cluster.admins[0].kill_9()?;
    // What the dead admin left, read from the database.
    let mut left = Vec::new();
    for workflow in &workflows {
        let runs = cluster
            .store
            .list_workflow_runs(WorkflowId(workflow.id), 0, 1000)
            .await?;
        let mut waiting: Vec<i64> = (runs.iter())
            .filter(|run| run.status == WorkflowRunStatus::Waiting)
            .map(|run| run.id)
            .collect();
        waiting.sort_unstable();
        let running = (runs.iter())
            .filter(|run| run.status == WorkflowRunStatus::Running)
            .count();
        // (Two waited a moment ago; the run going may have ended since, and one of them
        // started.)
        anyhow::ensure!(
            !waiting.is_empty() && running <= 1,
            "runs left by the killed admin: {runs:?}"
        );
        let ids: Vec<i64> = runs.iter().map(|run| run.id).collect();
        left.push((ids, waiting));
    }
    // The nodes going end while no admin runs (their results wait in the executor).
    wait_until(
        Duration::from_secs(10),
        "the nodes going to end",
        || async {
            let spans = spans_of(&spans);
            (!spans.is_empty() && spans.iter().all(|span| span.2 > 0)).then_some(())
        },
    )
    .await?;
    let restarted_ms = now_ms();
    cluster.admins[0].restart()?;
    let client = connect(&cluster.admins[0].spec.url()).await?;
    // The restarted admin goes on with the second schedule: an occurrence of its own (one
    // missed while it was down, started late, or the next) waits behind the runs left.
    let left_on = &left[1].0;
    wait_until(
        Duration::from_secs(15),
        "a run of the restarted admin",
        || async {
            let runs = runs_of(&client, on.id).await?;
            (runs.iter().any(|run| !left_on.contains(&run.id))).then_some(())
        },
    )
    .await?;
    // That schedule off too, so what is counted below stays put.
    schedule_off(&client, on).await?;
    let mut all_runs = Vec::new();
    for workflow in &workflows {
        let runs = wait_until(Duration::from_secs(40), "every run to end", || async {
            let runs = runs_of(&client, workflow.id).await?;
            let going = count_in(&runs, pb::WorkflowRunState::Running)
                + count_in(&runs, pb::WorkflowRunState::Waiting);
            (going == 0).then_some(runs)
        })
        .await?;
        all_runs.push(runs);
    }

    let mut node_logs = Vec::new();
    for ((runs, (left_ids, left_waiting)), workflow) in
        all_runs.iter_mut().zip(&left).zip(&workflows)
    {
        runs.sort_by_key(|run| run.scheduled_at_ms);
        let times: Vec<i64> = runs.iter().map(|run| run.scheduled_at_ms).collect();
        eprintln!(
            "workflow '{}': {} runs for occurrences {times:?}; waiting at the kill: \
             {left_waiting:?}",
            workflow.name,
            runs.len()
        );
        // None lost: every run the dead admin left is there and ran, as did every later one.
        for id in left_ids {
            anyhow::ensure!(runs.iter().any(|run| run.id == *id), "run {id} is gone");
        }
        if workflow.id == off.id {
            anyhow::ensure!(
                runs.len() == left_ids.len(),
                "no run after the kill: {runs:?}"
            );
        }
        for run in runs.iter() {
            anyhow::ensure!(
                run.state == pb::WorkflowRunState::Succeeded as i32
                    && run.trigger_type == pb::TriggerType::Cron as i32,
                "{run:?}"
            );
        }
        // One run per occurrence, on the schedule's phase, written in occurrence order.
        let mut per_occurrence: BTreeMap<i64, usize> = BTreeMap::new();
        for time in &times {
            *per_occurrence.entry(*time).or_default() += 1;
        }
        anyhow::ensure!(
            per_occurrence.values().all(|count| *count == 1),
            "an occurrence ran twice: {per_occurrence:?}"
        );
        anyhow::ensure!(
            times.iter().all(|time| (time - times[0]) % 1_000 == 0),
            "{times:?}"
        );
        anyhow::ensure!(
            runs.windows(2).all(|pair| pair[0].id < pair[1].id),
            "{runs:?}"
        );
        // One at a time, in order, each run's one node; the runs left waiting started by the
        // restarted admin.
        let mut previous: Option<&pb::WorkflowRun> = None;
        for run in runs.iter() {
            let request = pb::GetWorkflowRunRequest { id: run.id };
            let full = client.clone().get_workflow_run(request).await?;
            let full = full.into_inner().run;
            let full = full.ok_or_else(|| anyhow::anyhow!("no run {}", run.id))?;
            let [node] = full.nodes.as_slice() else {
                anyhow::bail!("one node: {full:?}");
            };
            if let Some(before) = previous {
                anyhow::ensure!(
                    node.started_ms >= before.finished_ms,
                    "run {} started its node before run {} ended: {full:?} {before:?}",
                    run.id,
                    before.id
                );
            }
            if left_waiting.contains(&run.id) {
                anyhow::ensure!(
                    node.started_ms >= restarted_ms,
                    "a run left waiting started before the restart: {full:?}"
                );
            }
            node_logs.push(node.log_id);
            previous = Some(run);
        }
    }
    // Each node run once: no log row but the runs' nodes', and the executor ran each once.
    let rows = cluster.rows().await?;
    let mut logs: Vec<i64> = (rows.iter())
        .filter(|row| job_ids.contains(&row.job_id.0))
        .map(|row| row.id.0)
        .collect();
    logs.sort_unstable();
    node_logs.sort_unstable();
    anyhow::ensure!(
        logs == node_logs,
        "one node run per workflow run, no other: {logs:?} {node_logs:?}"
    );
    let mut served: Vec<i64> = spans_of(&spans).iter().map(|span| span.0).collect();
    served.sort_unstable();
    anyhow::ensure!(
        served == node_logs,
        "the executor ran each node run once: {served:?} {node_logs:?}"
    );
    Ok(())
}
