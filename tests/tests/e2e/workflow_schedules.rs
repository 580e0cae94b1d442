//! Workflow schedules on a real admin and executor: a two-node workflow A → B on an every-2-s
//! schedule starts one run per occurrence by itself (marked CRON, with the occurrence it stands
//! for and the workflow's params), and each run runs A, then B; a bad cron or zone is refused
//! naming the field, and the workflow's preview lists its next occurrences; occurrences missed
//! while the admin is down follow the workflow's misfire strategy.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tonic::Code;
use xjob_admin::model::now_ms;
use xjob_executor::{JobContext, JobError, JobOutput};
use xjob_proto::pb;
use xjob_tests::{HandlerFuture, TestCluster, wait_until};

const APP: &str = "workflow-schedule-app";

/// `(job id, params, started, finished)` of each run the handler served.
type Seen = Arc<Mutex<Vec<(i64, String, i64, i64)>>>;

fn recording(seen: Seen) -> impl Fn(JobContext) -> HandlerFuture + Send + Sync + 'static {
    move |ctx: JobContext| {
        let seen = Arc::clone(&seen);
        Box::pin(async move {
            let started = now_ms();
            // Long enough that B starting before A ended would show.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut seen = seen.lock().map_err(|_| JobError::new("poisoned"))?;
            seen.push((ctx.job_id(), ctx.params().to_string(), started, now_ms()));
            Ok(JobOutput::message("done"))
        })
    }
}

fn chain(group_id: i64, a: i64, b: i64) -> pb::Workflow {
    let node = |key: &str, job_id| pb::WorkflowNode {
        key: key.to_string(),
        job_id,
        fan_in: pb::WorkflowFanIn::AllSuccess as i32,
    };
    pb::Workflow {
        group_id,
        name: "every two seconds".to_string(),
        nodes: vec![node("a", a), node("b", b)],
        edges: vec![pb::WorkflowEdge {
            from: "a".to_string(),
            to: "b".to_string(),
            condition: pb::WorkflowEdgeCondition::OnSuccess as i32,
        }],
        schedule_type: pb::ScheduleType::FixRate as i32,
        schedule_conf: "2".to_string(),
        params: "scheduled=yes".to_string(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_scheduled_workflow_starts_a_run_at_each_occurrence() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder()
        .configure(|config| config.followup_interval = Duration::from_millis(50))
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    let seen: Seen = Arc::default();
    let executor = cluster
        .executor(APP)
        .handler("record", recording(Arc::clone(&seen)));
    cluster.start_executor(executor).await?;
    let mut ids = Vec::new();
    for name in ["a", "b"] {
        let job = pb::Job {
            name: name.to_string(),
            ..TestCluster::job(group_id, "record", pb::ScheduleType::None, "")
        };
        ids.push(cluster.create_job(job).await?.id);
    }
    let mut client = cluster.client();
    let request = pb::CreateWorkflowRequest {
        workflow: Some(chain(group_id, ids[0], ids[1])),
    };
    let created = client.create_workflow(request).await?.into_inner();
    let workflow = created.workflow.ok_or_else(|| anyhow::anyhow!("none"))?;
    assert!(workflow.next_fire_ms > now_ms() - 1_000, "{workflow:?}");

    // Two scheduled runs ended, each with both nodes done.
    let list = pb::ListWorkflowRunsRequest {
        workflow_id: workflow.id,
        ..Default::default()
    };
    let ended = wait_until(Duration::from_secs(30), "two scheduled runs", || {
        let mut client = client.clone();
        let list = list.clone();
        async move {
            let runs = client
                .list_workflow_runs(list)
                .await
                .ok()?
                .into_inner()
                .runs;
            let done: Vec<pb::WorkflowRun> = (runs.into_iter())
                .filter(|run| run.state == pb::WorkflowRunState::Succeeded as i32)
                .collect();
            (done.len() >= 2).then_some(done)
        }
    })
    .await?;
    // Stop the schedule, so what is counted below stays put.
    let mut stopped = workflow.clone();
    stopped.schedule_type = pb::ScheduleType::None as i32;
    let request = pb::UpdateWorkflowRequest {
        workflow: Some(stopped),
    };
    let updated = client.update_workflow(request).await?.into_inner().workflow;
    assert_eq!(updated.map(|w| w.next_fire_ms), Some(0));

    for run in &ended {
        assert_eq!(run.trigger_type, pb::TriggerType::Cron as i32, "{run:?}");
        assert_eq!(run.params, "scheduled=yes", "{run:?}");
        assert_eq!(
            (run.scheduled_at_ms - workflow.next_fire_ms) % 2_000,
            0,
            "on the schedule's phase: {run:?}"
        );
    }
    let mut times: Vec<i64> = ended.iter().map(|run| run.scheduled_at_ms).collect();
    times.dedup();
    assert_eq!(
        times.len(),
        ended.len(),
        "one run per occurrence: {times:?}"
    );

    // Each run ran A, then B (after A ended), with the workflow's params.
    for run in &ended {
        let request = pb::GetWorkflowRunRequest { id: run.id };
        let full = client.get_workflow_run(request).await?.into_inner().run;
        let full = full.ok_or_else(|| anyhow::anyhow!("no run {}", run.id))?;
        let log_of = |key: &str| {
            let node = full.nodes.iter().find(|node| node.key == key);
            node.map(|node| node.log_id).unwrap_or_default()
        };
        let (a, b) = (
            cluster.get_log(log_of("a")).await?,
            cluster.get_log(log_of("b")).await?,
        );
        assert!(b.trigger_time_ms >= a.handle_time_ms, "B before A ended");
        assert!(a.params.starts_with("scheduled=yes"), "{a:?}");
    }
    let seen = seen.lock().map(|seen| seen.clone()).unwrap_or_default();
    for job_id in &ids {
        let runs = seen.iter().filter(|(id, ..)| id == job_id).count();
        assert!(runs >= ended.len(), "job {job_id} ran {runs} times");
    }
    Ok(())
}

#[tokio::test]
async fn bad_workflow_schedules_are_refused_and_previews_list_occurrences() -> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP).await?;
    let job = TestCluster::job(group_id, "record", pb::ScheduleType::None, "");
    let job_id = cluster.create_job(job).await?.id;
    let mut client = cluster.client();
    let refusal = |workflow: pb::Workflow| {
        let mut client = client.clone();
        async move {
            let request = pb::CreateWorkflowRequest {
                workflow: Some(workflow),
            };
            let status = client.create_workflow(request).await.expect_err("refused");
            assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
            status.message().to_string()
        }
    };
    let mut bad_cron = chain(group_id, job_id, job_id);
    bad_cron.schedule_type = pb::ScheduleType::Cron as i32;
    bad_cron.schedule_conf = "every day".to_string();
    let message = refusal(bad_cron).await;
    assert!(
        message.starts_with("workflow.schedule_conf: invalid cron 'every day'"),
        "{message}"
    );
    let mut bad_zone = chain(group_id, job_id, job_id);
    bad_zone.time_zone = "Mars/Olympus".to_string();
    let message = refusal(bad_zone).await;
    assert_eq!(
        message,
        "workflow.time_zone: unknown time zone 'Mars/Olympus'"
    );

    let mut nightly = chain(group_id, job_id, job_id);
    nightly.schedule_type = pb::ScheduleType::Cron as i32;
    nightly.schedule_conf = "0 30 2 * * ?".to_string();
    nightly.time_zone = "Asia/Tokyo".to_string();
    let request = pb::CreateWorkflowRequest {
        workflow: Some(nightly),
    };
    let created = client.create_workflow(request).await?.into_inner().workflow;
    let created = created.ok_or_else(|| anyhow::anyhow!("none"))?;
    let preview = pb::PreviewScheduleRequest {
        workflow_id: created.id,
        count: 3,
        ..Default::default()
    };
    let times = client.preview_schedule(preview).await?.into_inner();
    let times = times.fire_times_ms;
    assert_eq!(times.len(), 3);
    assert_eq!(
        times[0], created.next_fire_ms,
        "the preview starts at the next run"
    );
    // 02:30 in Tokyo (UTC+9, no daylight saving) is 17:30 UTC, every day.
    for time in &times {
        assert_eq!(time.rem_euclid(86_400_000), 63_000_000, "{times:?}");
    }
    let unscheduled = chain(group_id, job_id, job_id);
    let request = pb::CreateWorkflowRequest {
        workflow: Some(pb::Workflow {
            schedule_type: pb::ScheduleType::None as i32,
            ..unscheduled
        }),
    };
    let plain = client.create_workflow(request).await?.into_inner().workflow;
    let preview = pb::PreviewScheduleRequest {
        workflow_id: plain.map(|w| w.id).unwrap_or_default(),
        ..Default::default()
    };
    let status = client.preview_schedule(preview).await.expect_err("refused");
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    Ok(())
}

/// The admin is down across several occurrences: a FIRE_ONCE_NOW workflow gets one MISFIRE run
/// for the gap (standing for the first missed occurrence) and a DO_NOTHING one none; both then
/// go on with scheduled runs on their phase.
#[tokio::test]
async fn occurrences_missed_while_the_admin_is_down_follow_the_misfire_strategy()
-> anyhow::Result<()> {
    let mut cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP).await?;
    // No executor: the node runs fail, which changes nothing about when runs start.
    let job = TestCluster::job(group_id, "record", pb::ScheduleType::None, "");
    let job_id = cluster.create_job(job).await?.id;
    let mut ids = Vec::new();
    for misfire in [
        pb::MisfireStrategy::FireOnceNow,
        pb::MisfireStrategy::DoNothing,
    ] {
        let workflow = pb::Workflow {
            misfire_strategy: misfire as i32,
            ..chain(group_id, job_id, job_id)
        };
        let request = pb::CreateWorkflowRequest {
            workflow: Some(workflow),
        };
        let created = cluster
            .client()
            .create_workflow(request)
            .await?
            .into_inner();
        ids.push(created.workflow.map(|w| w.id).unwrap_or_default());
    }
    let runs_of = |client: pb::job_admin_client::JobAdminClient<tonic::transport::Channel>,
                   workflow_id: i64| async move {
        let mut client = client;
        let list = pb::ListWorkflowRunsRequest {
            workflow_id,
            page_size: 1000,
            page_token: String::new(),
        };
        let runs = client
            .list_workflow_runs(list)
            .await
            .ok()?
            .into_inner()
            .runs;
        Some(runs)
    };
    // Both have started a scheduled run before the admin goes.
    for id in &ids {
        wait_until(Duration::from_secs(20), "a first scheduled run", || {
            let client = cluster.client();
            async move { runs_of(client, *id).await.filter(|runs| !runs.is_empty()) }
        })
        .await?;
    }
    let down_from = now_ms();
    cluster.restart_admin_after(Duration::from_secs(9)).await?;
    let up_from = now_ms();

    // Each goes on: a run scheduled after the restart.
    let mut after = Vec::new();
    for id in &ids {
        let runs = wait_until(Duration::from_secs(20), "a run after the restart", || {
            let client = cluster.client();
            async move {
                let runs = runs_of(client, *id).await?;
                let later = runs.iter().any(|run| {
                    run.trigger_type == pb::TriggerType::Cron as i32
                        && run.scheduled_at_ms >= up_from
                });
                later.then_some(runs)
            }
        })
        .await?;
        after.push(runs);
    }
    let times_of = |runs: &[pb::WorkflowRun], trigger: pb::TriggerType| -> Vec<i64> {
        let mut times: Vec<i64> = (runs.iter())
            .filter(|run| run.trigger_type == trigger as i32)
            .map(|run| run.scheduled_at_ms)
            .collect();
        times.sort_unstable();
        times
    };
    for (runs, misfires) in after.iter().zip([1, 0]) {
        let cron = times_of(runs, pb::TriggerType::Cron);
        // On the schedule's phase throughout, and with a hole where the admin was down: the
        // missed occurrences were not started late as scheduled runs.
        assert!(
            cron.iter().all(|at| (at - cron[0]) % 2_000 == 0),
            "{cron:?}"
        );
        let (before, resumed) = (cron.windows(2))
            .map(|pair| (pair[0], pair[1]))
            .max_by_key(|(from, to)| to - from)
            .unwrap_or_default();
        assert!(
            resumed - before >= 6_000,
            "a gap over the downtime ({down_from}..{up_from}): {cron:?}"
        );
        let misfired = times_of(runs, pb::TriggerType::Misfire);
        assert_eq!(misfired.len(), misfires, "{runs:?}");
        if let Some(first_missed) = misfired.first() {
            assert_eq!(
                *first_missed,
                before + 2_000,
                "the one run stands for the first missed occurrence: {cron:?}"
            );
        }
    }
    Ok(())
}

/// A node that takes 2.5 s: a workflow on an every-second schedule always finds its previous
/// scheduled run going.
fn slow(ctx: JobContext) -> HandlerFuture {
    let _ = ctx;
    Box::pin(async move {
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        Ok(JobOutput::message("slow done"))
    })
}

/// A one-node workflow of `job_id` every second under `overlap`.
async fn every_second(
    cluster: &TestCluster,
    group_id: i64,
    job_id: i64,
    overlap: pb::OverlapPolicy,
) -> anyhow::Result<pb::Workflow> {
    let workflow = pb::Workflow {
        group_id,
        name: format!("overlap {}", overlap.as_str_name()),
        nodes: vec![pb::WorkflowNode {
            key: "slow".to_string(),
            job_id,
            fan_in: pb::WorkflowFanIn::AllSuccess as i32,
        }],
        schedule_type: pb::ScheduleType::FixRate as i32,
        schedule_conf: "1".to_string(),
        overlap_policy: overlap as i32,
        ..Default::default()
    };
    let request = pb::CreateWorkflowRequest {
        workflow: Some(workflow),
    };
    let created = cluster
        .client()
        .create_workflow(request)
        .await?
        .into_inner();
    let created = created.workflow.ok_or_else(|| anyhow::anyhow!("none"))?;
    assert_eq!(created.overlap_policy, overlap as i32, "{created:?}");
    Ok(created)
}

/// Waits until `enough` holds of the workflow's runs, then takes the schedule off and waits for
/// the runs going to end; returns every run, oldest first.
async fn runs_until(
    cluster: &TestCluster,
    workflow: &pb::Workflow,
    what: &str,
    enough: impl Fn(&[pb::WorkflowRun]) -> bool,
) -> anyhow::Result<Vec<pb::WorkflowRun>> {
    let list = pb::ListWorkflowRunsRequest {
        workflow_id: workflow.id,
        page_size: 1000,
        page_token: String::new(),
    };
    let list_runs = || {
        let (mut client, list) = (cluster.client(), list.clone());
        async move {
            Some(
                client
                    .list_workflow_runs(list)
                    .await
                    .ok()?
                    .into_inner()
                    .runs,
            )
        }
    };
    wait_until(Duration::from_secs(40), what, || async {
        list_runs().await.filter(|runs| enough(runs))
    })
    .await?;
    let off = pb::Workflow {
        schedule_type: pb::ScheduleType::None as i32,
        ..workflow.clone()
    };
    let request = pb::UpdateWorkflowRequest {
        workflow: Some(off),
    };
    cluster.client().update_workflow(request).await?;
    let going = [
        pb::WorkflowRunState::Running as i32,
        pb::WorkflowRunState::Waiting as i32,
    ];
    let mut runs = wait_until(Duration::from_secs(30), "the runs to end", || async {
        list_runs()
            .await
            .filter(|runs| runs.iter().all(|run| !going.contains(&run.state)))
    })
    .await?;
    runs.sort_by_key(|run| run.id);
    Ok(runs)
}

fn in_state(runs: &[pb::WorkflowRun], state: pb::WorkflowRunState) -> Vec<&pb::WorkflowRun> {
    (runs.iter())
        .filter(|run| run.state == state as i32)
        .collect()
}

/// Overlap policies on a real admin and executor, with a node slower than the schedule: under
/// SKIP the occurrences that find a run going are SKIPPED runs naming it (no node started), and
/// the runs that ran never overlapped; under CANCEL_OTHER each occurrence cancels the run going
/// (its reason names the new run, its node run is killed on the executor) and starts.
#[tokio::test]
async fn skip_and_cancel_other_decide_occurrences_while_a_run_is_going() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder()
        .configure(|config| config.followup_interval = Duration::from_millis(50))
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    let executor = cluster.executor(APP).handler("slow", slow);
    cluster.start_executor(executor).await?;
    let job = TestCluster::job(group_id, "slow", pb::ScheduleType::None, "");
    let job_id = cluster.create_job(job).await?.id;

    let skip = every_second(&cluster, group_id, job_id, pb::OverlapPolicy::Skip).await?;
    let runs = runs_until(&cluster, &skip, "two runs that ran and skips", |runs| {
        let done = in_state(runs, pb::WorkflowRunState::Succeeded).len();
        done >= 2 && in_state(runs, pb::WorkflowRunState::Skipped).len() >= 2
    })
    .await?;
    let ran = in_state(&runs, pb::WorkflowRunState::Succeeded);
    assert_eq!(
        ran.len() + in_state(&runs, pb::WorkflowRunState::Skipped).len(),
        runs.len(),
        "{runs:#?}"
    );
    for pair in ran.windows(2) {
        // A run's created_ms is its admin round's start, which may precede the end it then
        // reads by a few ms; an overlap would start 1.5 s before the end (2.5 s node, 1 s
        // schedule).
        assert!(
            pair[1].created_ms >= pair[0].finished_ms - 500,
            "runs never overlap under SKIP: {pair:#?}"
        );
    }
    let mut client = cluster.client();
    for skipped in in_state(&runs, pb::WorkflowRunState::Skipped) {
        let going = ran.iter().find(|run| {
            skipped.reason
                == format!(
                    "scheduled run {} of this workflow was still running (overlap policy SKIP)",
                    run.id
                )
        });
        let going = going.ok_or_else(|| anyhow::anyhow!("names no run that ran: {skipped:?}"))?;
        assert!(
            going.created_ms <= skipped.created_ms && skipped.created_ms <= going.finished_ms,
            "the run named was going: {going:?} {skipped:?}"
        );
        assert_eq!(skipped.finished_ms, skipped.created_ms, "{skipped:?}");
        let request = pb::GetWorkflowRunRequest { id: skipped.id };
        let full = client.get_workflow_run(request).await?.into_inner().run;
        let full = full.ok_or_else(|| anyhow::anyhow!("no run {}", skipped.id))?;
        assert!(
            full.nodes.iter().all(|node| node.log_id == 0),
            "a skipped occurrence starts no node: {full:?}"
        );
    }

    let cancel = every_second(&cluster, group_id, job_id, pb::OverlapPolicy::CancelOther).await?;
    let runs = runs_until(&cluster, &cancel, "two cancelled runs", |runs| {
        in_state(runs, pb::WorkflowRunState::Cancelled).len() >= 2
    })
    .await?;
    for cancelled in in_state(&runs, pb::WorkflowRunState::Cancelled) {
        let by = runs.iter().find(|run| {
            run.id > cancelled.id
                && cancelled
                    .reason
                    .starts_with(&format!("cancelled by scheduled run {} ", run.id))
        });
        assert!(by.is_some(), "the reason names a later run: {cancelled:?}");
        let request = pb::GetWorkflowRunRequest { id: cancelled.id };
        let full = client.get_workflow_run(request).await?.into_inner().run;
        let full = full.ok_or_else(|| anyhow::anyhow!("no run {}", cancelled.id))?;
        let log_id = full
            .nodes
            .first()
            .map(|node| node.log_id)
            .unwrap_or_default();
        if log_id == 0 {
            continue; // cancelled before its node started
        }
        let log = wait_until(Duration::from_secs(10), "the node run to end", || async {
            let log = cluster.get_log(log_id).await.ok()?;
            (log.status != pb::RunStatus::Running as i32).then_some(log)
        })
        .await?;
        assert!(
            log.status == pb::RunStatus::Killed as i32
                || log.status == pb::RunStatus::Success as i32,
            "a cancelled run's node run is killed (or had ended): {log:?}"
        );
    }
    assert!(
        runs.iter().any(|run| {
            run.state == pb::WorkflowRunState::Cancelled as i32
                && run.finished_ms - run.created_ms < 2_500
        }),
        "a run was cut short: {runs:#?}"
    );
    Ok(())
}

/// BUFFER_ONE on a real admin and executor, with a node slower than the schedule: an occurrence
/// that finds a run going waits and starts right after it (its node never overlaps the one
/// before), and one that finds a run waiting already is SKIPPED naming it.
#[tokio::test]
async fn buffer_one_runs_the_next_occurrence_after_the_run_going() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder()
        .configure(|config| config.followup_interval = Duration::from_millis(50))
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    let executor = cluster.executor(APP).handler("slow", slow);
    cluster.start_executor(executor).await?;
    let job = TestCluster::job(group_id, "slow", pb::ScheduleType::None, "");
    let job_id = cluster.create_job(job).await?.id;
    let buffered = every_second(&cluster, group_id, job_id, pb::OverlapPolicy::BufferOne).await?;
    let runs = runs_until(
        &cluster,
        &buffered,
        "three runs that ran and a skip",
        |runs| {
            let done = in_state(runs, pb::WorkflowRunState::Succeeded).len();
            done >= 3 && !in_state(runs, pb::WorkflowRunState::Skipped).is_empty()
        },
    )
    .await?;
    let ran = in_state(&runs, pb::WorkflowRunState::Succeeded);
    let skipped = in_state(&runs, pb::WorkflowRunState::Skipped);
    assert_eq!(ran.len() + skipped.len(), runs.len(), "{runs:#?}");
    let mut client = cluster.client();
    let mut nodes = Vec::new();
    for run in &ran {
        let request = pb::GetWorkflowRunRequest { id: run.id };
        let full = client.get_workflow_run(request).await?.into_inner().run;
        let full = full.ok_or_else(|| anyhow::anyhow!("no run {}", run.id))?;
        let log_id = full
            .nodes
            .first()
            .map(|node| node.log_id)
            .unwrap_or_default();
        nodes.push(cluster.get_log(log_id).await?);
    }
    for pair in nodes.windows(2) {
        assert!(
            pair[1].trigger_time_ms >= pair[0].handle_time_ms,
            "a buffered run's node starts after the one before ended: {pair:#?}"
        );
    }
    assert!(
        ran.windows(2)
            .any(|pair| pair[1].created_ms < pair[0].finished_ms),
        "some occurrence waited for the run going: {ran:#?}"
    );
    for skip in &skipped {
        let named = ran.iter().any(|run| {
            run.id < skip.id
                && skip.reason
                    == format!(
                        "scheduled run {} of this workflow already waits (overlap policy \
                         BUFFER_ONE)",
                        run.id
                    )
        });
        assert!(named, "the skip names the run waiting: {skip:?}");
    }
    Ok(())
}

/// BUFFER_ALL on a real admin and executor, with a node slower than the schedule: every
/// occurrence gets a run (one each, none SKIPPED, several waiting at once), and the runs go one
/// at a time in occurrence order, each node started after the run before it ended.
#[tokio::test]
async fn buffer_all_runs_every_occurrence_in_order_one_at_a_time() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder()
        .configure(|config| config.followup_interval = Duration::from_millis(50))
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    let executor = cluster.executor(APP).handler("slow", slow);
    cluster.start_executor(executor).await?;
    let job = TestCluster::job(group_id, "slow", pb::ScheduleType::None, "");
    let job_id = cluster.create_job(job).await?.id;
    let buffered = every_second(&cluster, group_id, job_id, pb::OverlapPolicy::BufferAll).await?;
    // Four occurrences (about 4 s) while each run takes 2.5 s: two or more wait at once. The
    // schedule then goes off, and the waiting runs drain one by one (about 3 s each).
    let mut runs = runs_until(&cluster, &buffered, "four occurrences", |runs| {
        runs.len() >= 4
    })
    .await?;
    runs.sort_by_key(|run| run.scheduled_at_ms);
    assert_eq!(
        in_state(&runs, pb::WorkflowRunState::Succeeded).len(),
        runs.len(),
        "every occurrence ran, none SKIPPED: {runs:#?}"
    );
    assert_eq!(runs[0].scheduled_at_ms, buffered.next_fire_ms, "{runs:#?}");
    for pair in runs.windows(2) {
        assert_eq!(
            pair[1].scheduled_at_ms - pair[0].scheduled_at_ms,
            1_000,
            "one run per occurrence, none missing: {runs:#?}"
        );
        assert!(pair[0].id < pair[1].id, "written in occurrence order");
    }
    assert!(
        runs.iter()
            .all(|run| run.trigger_type == pb::TriggerType::Cron as i32),
        "{runs:#?}"
    );
    // Occurrences came faster than runs ended, so two waited at once behind a run going
    // (BUFFER_ONE would have skipped the second).
    assert!(
        (runs.windows(3)).any(|three| three[2].created_ms < three[0].finished_ms),
        "two occurrences waited at once: {runs:#?}"
    );

    // Each run's one node ran once, after the previous run had ended: one at a time, in order.
    let mut client = cluster.client();
    let mut node_logs = Vec::new();
    let mut previous: Option<&pb::WorkflowRun> = None;
    for run in &runs {
        let request = pb::GetWorkflowRunRequest { id: run.id };
        let full = client.get_workflow_run(request).await?.into_inner().run;
        let full = full.ok_or_else(|| anyhow::anyhow!("no run {}", run.id))?;
        let [node] = full.nodes.as_slice() else {
            anyhow::bail!("one node: {full:?}");
        };
        assert_eq!(node.run_status, pb::RunStatus::Success as i32, "{full:?}");
        if let Some(before) = previous {
            assert!(
                node.started_ms >= before.finished_ms,
                "run {} started its node before run {} ended: {full:?} {before:?}",
                run.id,
                before.id
            );
        }
        assert!(run.finished_ms >= node.ended_ms, "{full:?}");
        node_logs.push(node.log_id);
        previous = Some(run);
    }
    let mut logs: Vec<i64> = cluster
        .logs(job_id)
        .await?
        .iter()
        .map(|log| log.id)
        .collect();
    logs.sort_unstable();
    node_logs.sort_unstable();
    assert_eq!(logs, node_logs, "one node run per workflow run, no other");
    Ok(())
}
