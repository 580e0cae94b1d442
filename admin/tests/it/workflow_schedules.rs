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

/// The admin process is killed (SIGKILL) while scheduled runs of a BUFFER_ALL workflow wait
/// behind the run going, that run's node ends while no admin runs, and the admin restarts on
/// the same database: the restarted admin learns the end, then starts the waiting runs one at a
/// time, oldest first, each once; every occurrence has one run, every run ran its node once,
/// and none is lost (all SUCCEEDED).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiting_workflow_runs_start_once_after_an_admin_kill() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::postgres_or_shared_sqlite().await? else {
        return Ok(());
    };
    let mut cluster = Cluster::start(database, 1, 0, Timing::default()).await?;
    let outcome = waiting_runs_across_a_kill(&mut cluster).await;
    cluster.finish(outcome).await
}

/// `(log id, started ms, ended ms)` of each node run the slow handler served; 0 while going.
type Spans = Arc<Mutex<Vec<(i64, i64, i64)>>>;

fn spans_of(spans: &Spans) -> Vec<(i64, i64, i64)> {
    spans.lock().map(|spans| spans.clone()).unwrap_or_default()
}

async fn waiting_runs_across_a_kill(cluster: &mut Cluster) -> anyhow::Result<()> {
    // A node of 2 s on an every-second schedule: runs pile up WAITING.
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

    let mut client = cluster.client().await?;
    let job = pb::Job {
        group_id: cluster.group_id,
        name: "slow".into(),
        schedule_type: pb::ScheduleType::None as i32,
        route_strategy: pb::RouteStrategy::First as i32,
        handler: "slow".into(),
        block_strategy: pb::BlockStrategy::SerialExecution as i32,
        glue_type: pb::GlueType::Bean as i32,
        misfire_strategy: pb::MisfireStrategy::DoNothing as i32,
        ..Default::default()
    };
    let created = client
        .create_job(pb::CreateJobRequest { job: Some(job) })
        .await?;
    let job_id = created
        .into_inner()
        .job
        .map(|job| job.id)
        .unwrap_or_default();
    let workflow = pb::Workflow {
        group_id: cluster.group_id,
        name: "buffered every second".into(),
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
    let created = client.create_workflow(request).await?.into_inner().workflow;
    let mut workflow = created.ok_or_else(|| anyhow::anyhow!("no workflow"))?;
    let list = pb::ListWorkflowRunsRequest {
        workflow_id: workflow.id,
        page_size: 1000,
        page_token: String::new(),
    };
    let in_state = |runs: &[pb::WorkflowRun], state: pb::WorkflowRunState| {
        runs.iter().filter(|run| run.state == state as i32).count()
    };

    // Two runs wait behind the one going: kill the admin there, with no shutdown code run.
    wait_until(Duration::from_secs(20), "two runs waiting", || {
        let (mut client, list) = (client.clone(), list.clone());
        async move {
            let runs = client
                .list_workflow_runs(list)
                .await
                .ok()?
                .into_inner()
                .runs;
            (in_state(&runs, pb::WorkflowRunState::Waiting) >= 2).then_some(())
        }
    })
    .await?;
    cluster.admins[0].kill_9()?;
    // What the dead admin left, read from the database.
    let left = cluster
        .store
        .list_workflow_runs(WorkflowId(workflow.id), 0, 1000)
        .await?;
    let mut left_waiting: Vec<i64> = (left.iter())
        .filter(|run| run.status == WorkflowRunStatus::Waiting)
        .map(|run| run.id)
        .collect();
    left_waiting.sort_unstable();
    let left_running = (left.iter())
        .filter(|run| run.status == WorkflowRunStatus::Running)
        .count();
    // (Two waited a moment ago; the one going may have ended since, and one of them started.)
    anyhow::ensure!(
        !left_waiting.is_empty() && left_running <= 1,
        "runs left by the killed admin: {left:?}"
    );
    // The node going ends while no admin runs (its result waits in the executor).
    wait_until(Duration::from_secs(10), "the node going to end", || async {
        let spans = spans_of(&spans);
        (!spans.is_empty() && spans.iter().all(|span| span.2 > 0)).then_some(())
    })
    .await?;
    let restarted_ms = now_ms();
    cluster.admins[0].restart()?;
    let mut client = connect(&cluster.admins[0].spec.url()).await?;
    // The restarted admin goes on with the schedule: its first occurrence waits behind the
    // runs left (the ones missed while it was down are started late, or dropped past the
    // misfire threshold).
    let left_ids: Vec<i64> = left.iter().map(|run| run.id).collect();
    wait_until(
        Duration::from_secs(15),
        "a run of the restarted admin",
        || {
            let (mut client, list) = (client.clone(), list.clone());
            let left_ids = &left_ids;
            async move {
                let runs = client
                    .list_workflow_runs(list)
                    .await
                    .ok()?
                    .into_inner()
                    .runs;
                runs.iter()
                    .any(|run| !left_ids.contains(&run.id))
                    .then_some(())
            }
        },
    )
    .await?;
    // The schedule off, so what is counted below stays put.
    workflow.schedule_type = pb::ScheduleType::None as i32;
    let request = pb::UpdateWorkflowRequest {
        workflow: Some(workflow.clone()),
    };
    client.update_workflow(request).await?;
    let mut runs = wait_until(Duration::from_secs(40), "every run to end", || {
        let (mut client, list) = (client.clone(), list.clone());
        async move {
            let runs = client
                .list_workflow_runs(list)
                .await
                .ok()?
                .into_inner()
                .runs;
            let going = in_state(&runs, pb::WorkflowRunState::Running)
                + in_state(&runs, pb::WorkflowRunState::Waiting);
            (going == 0).then_some(runs)
        }
    })
    .await?;
    runs.sort_by_key(|run| run.scheduled_at_ms);
    let times: Vec<i64> = runs.iter().map(|run| run.scheduled_at_ms).collect();
    eprintln!(
        "{} runs for occurrences {times:?}; waiting at the kill: {left_waiting:?}",
        runs.len()
    );

    // None lost: every run the dead admin left is there and ran, as did every later one.
    for run in &left {
        anyhow::ensure!(
            runs.iter().any(|after| after.id == run.id),
            "run {} is gone",
            run.id
        );
    }
    for run in &runs {
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

    // One at a time, in order, each run's one node run once; the waiting ones after the
    // restart.
    let mut node_logs = Vec::new();
    let mut previous: Option<&pb::WorkflowRun> = None;
    for run in &runs {
        let request = pb::GetWorkflowRunRequest { id: run.id };
        let full = client.get_workflow_run(request).await?.into_inner().run;
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
    let rows = cluster.rows().await?;
    let mut logs: Vec<i64> = (rows.iter())
        .filter(|row| row.job_id.0 == job_id)
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
