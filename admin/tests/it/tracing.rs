//! Traces against a real Jaeger: Jaeger v2 (in-memory storage, OTLP/gRPC receiver, query HTTP
//! API) on free loopback ports, the real `xjob` binary exporting to it (its TOML's
//! `otlp_endpoint`), and an SDK executor in the test process (the builder's `otlp_endpoint`).
//! Runs are fired, both processes stop gracefully (which flushes their spans), and the traces
//! are read back from Jaeger's `/api/traces/{id}`.
//!
//! Jaeger is built by `.ci/jaeger.sh` and found through `XJOB_JAEGER_BIN`. Without it the test
//! says so and passes outside CI; in CI (`CI` set) it fails.

use std::time::{Duration, Instant};

use crate::common::ONE_AT_A_TIME;
use crate::common::cluster::{Cluster, Database, Timing};
use xjob_executor::{Executor, JobContext, JobError, JobOutput, JobResult};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;
use xjob_testkit::jaeger::{self, Jaeger, Span as JaegerSpan, same_id};
use xjob_testkit::{AdminOutput, AdminProcess, AdminSpec, connect_admin, free_port, wait_until};

const APP: &str = "traced-app";
/// A caller's trace context sent with TriggerJob (the run must join this trace).
const CALLER_TRACE: &str = "5b8aa5a2d2c872e8321cf37308d69df2";
const CALLER_SPAN: &str = "051581bf3cb55c13";

/// The spans of trace `trace_id`, once Jaeger has at least `at_least` of them.
async fn trace_spans(
    jaeger: &Jaeger,
    trace_id: &str,
    at_least: usize,
) -> anyhow::Result<Vec<JaegerSpan>> {
    wait_until(
        Duration::from_secs(30),
        &format!("{at_least} spans of trace {trace_id} in Jaeger"),
        || async {
            let spans = jaeger.trace(trace_id).await.ok()?;
            (spans.len() >= at_least).then_some(spans)
        },
    )
    .await
}

/// The `fire` span of the admin that names `log_id`, searched among the admin's traces (a run
/// that never reached an executor has no trace id on its row).
async fn fire_span_of(jaeger: &Jaeger, log_id: i64, since: Instant) -> anyhow::Result<JaegerSpan> {
    let since_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .saturating_sub(since.elapsed() + Duration::from_secs(60))
        .as_micros();
    let query = format!("service=xjob-admin&operation=fire&limit=1000&start={since_us}");
    wait_until(
        Duration::from_secs(30),
        &format!("the fire span of log {log_id} in Jaeger"),
        || async {
            let spans = jaeger.search(&query).await.ok()?;
            spans.into_iter().find(|span| span.log_id() == Some(log_id))
        },
    )
    .await
}

fn span<'a>(spans: &'a [JaegerSpan], name: &str) -> &'a JaegerSpan {
    let found: Vec<&JaegerSpan> = spans.iter().filter(|span| span.name == name).collect();
    assert_eq!(found.len(), 1, "one `{name}` span expected in {spans:#?}");
    found[0]
}

/// Asserts the chain fire → dispatch → run → handler → callback → complete and the service of
/// each span; returns the `fire` span.
fn assert_run_chain(spans: &[JaegerSpan], log_id: i64) -> &JaegerSpan {
    let chain = [
        ("fire", "xjob-admin"),
        ("dispatch", "xjob-admin"),
        ("run", APP),
        ("handler", APP),
        ("callback", APP),
        ("complete", "xjob-admin"),
    ];
    for window in chain.windows(2) {
        let (parent, child) = (span(spans, window[0].0), span(spans, window[1].0));
        assert_eq!(
            child.parent.as_deref(),
            Some(parent.span_id.as_str()),
            "`{}` must be a child of `{}` (log {log_id})",
            child.name,
            parent.name
        );
    }
    for (name, service) in chain {
        assert_eq!(span(spans, name).service, service, "service of `{name}`");
    }
    let fire = span(spans, "fire");
    assert_eq!(
        fire.tags
            .get("xjob.log_id")
            .and_then(serde_json::Value::as_i64),
        Some(log_id),
        "the fire span names its log id: {fire:#?}"
    );
    fire
}

/// A manual-only job of `flaky` with one retry, starting `children` on success.
async fn create_job(
    client: &mut JobAdminClient<tonic::transport::Channel>,
    group_id: i64,
    children: Vec<i64>,
) -> anyhow::Result<i64> {
    create_job_on(client, group_id, children, pb::ScheduleType::None, "").await
}

/// Like [`create_job`], on a schedule.
async fn create_job_on(
    client: &mut JobAdminClient<tonic::transport::Channel>,
    group_id: i64,
    children: Vec<i64>,
    schedule_type: pb::ScheduleType,
    schedule_conf: &str,
) -> anyhow::Result<i64> {
    let job = pb::Job {
        group_id,
        name: "traced job".into(),
        schedule_type: schedule_type as i32,
        schedule_conf: schedule_conf.into(),
        misfire_strategy: pb::MisfireStrategy::DoNothing as i32,
        route_strategy: pb::RouteStrategy::First as i32,
        handler: "flaky".into(),
        block_strategy: pb::BlockStrategy::SerialExecution as i32,
        glue_type: pb::GlueType::Bean as i32,
        fail_retry_count: 1,
        child_job_ids: children,
        ..Default::default()
    };
    let created = client
        .create_job(pb::CreateJobRequest { job: Some(job) })
        .await?
        .into_inner()
        .job;
    created
        .map(|job| job.id)
        .ok_or_else(|| anyhow::anyhow!("CreateJob returned no job"))
}

/// A manual-only GLUE_SHELL job printing the `TRACEPARENT` it is given.
async fn create_glue_job(
    client: &mut JobAdminClient<tonic::transport::Channel>,
    group_id: i64,
) -> anyhow::Result<i64> {
    let job = pb::Job {
        group_id,
        name: "traced script".into(),
        schedule_type: pb::ScheduleType::None as i32,
        misfire_strategy: pb::MisfireStrategy::DoNothing as i32,
        route_strategy: pb::RouteStrategy::First as i32,
        block_strategy: pb::BlockStrategy::SerialExecution as i32,
        glue_type: pb::GlueType::Shell as i32,
        glue_source: "echo \"TRACEPARENT=$TRACEPARENT\"\n".into(),
        ..Default::default()
    };
    let created = client
        .create_job(pb::CreateJobRequest { job: Some(job) })
        .await?
        .into_inner()
        .job;
    created
        .map(|job| job.id)
        .ok_or_else(|| anyhow::anyhow!("CreateJob returned no job"))
}

/// The runs of `job_id` (up to 100); `None` when the admin does not answer.
async fn logs_of(
    mut client: JobAdminClient<tonic::transport::Channel>,
    job_id: i64,
) -> Option<Vec<pb::Log>> {
    let logs = client
        .list_logs(pb::ListLogsRequest {
            job_id,
            page_size: 100,
            ..Default::default()
        })
        .await
        .ok()?
        .into_inner()
        .logs;
    Some(logs)
}

/// Starts a FIX_RATE job (every second), waits until the scan has planned fires of it, then
/// stops it: its planned fires are recorded SKIPPED with the reason. Returns one such run.
async fn skipped_by_stop(
    client: &mut JobAdminClient<tonic::transport::Channel>,
    group_id: i64,
) -> anyhow::Result<pb::Log> {
    let job_id =
        create_job_on(client, group_id, Vec::new(), pb::ScheduleType::FixRate, "1").await?;
    client.start_job(pb::StartJobRequest { id: job_id }).await?;
    let reader = client.clone();
    let logs_with = |status: pb::RunStatus| {
        let logs = logs_of(reader.clone(), job_id);
        async move {
            logs.await?
                .into_iter()
                .find(|log| log.status == status as i32)
        }
    };
    // The scan plans each fire up to 5 s ahead of its time; FIX_RATE 1 s keeps several planned.
    wait_until(Duration::from_secs(30), "a planned fire", || {
        logs_with(pb::RunStatus::Pending)
    })
    .await?;
    client.stop_job(pb::StopJobRequest { id: job_id }).await?;
    wait_until(
        Duration::from_secs(10),
        "a fire skipped by the stop",
        || logs_with(pb::RunStatus::Skipped),
    )
    .await
}

/// A handler that fails the first attempt of a run whose params say `retry`.
async fn flaky(ctx: JobContext) -> JobResult {
    if ctx.params() == "retry" && ctx.attempt() == 0 {
        return Err(JobError::new("first attempt fails on purpose"));
    }
    Ok(JobOutput::message(format!("attempt {} ok", ctx.attempt())))
}

async fn final_logs(
    client: &mut JobAdminClient<tonic::transport::Channel>,
    job_id: i64,
    count: usize,
) -> anyhow::Result<Vec<pb::Log>> {
    let open = [pb::RunStatus::Pending as i32, pb::RunStatus::Running as i32];
    wait_until(
        Duration::from_secs(30),
        &format!("{count} finished runs of job {job_id}"),
        || {
            let logs = logs_of(client.clone(), job_id);
            async move {
                let logs = logs.await?;
                (logs.len() >= count && logs.iter().all(|log| !open.contains(&log.status)))
                    .then_some(logs)
            }
        },
    )
    .await
}

/// Runs workflow a → b, each node a `flaky` job, with params `retry`: node a fails its first
/// attempt and its job retries it. Returns the node runs (a's two attempts, then b's) and the
/// workflow run's id.
async fn workflow_run(
    client: &mut JobAdminClient<tonic::transport::Channel>,
    group_id: i64,
) -> anyhow::Result<(Vec<pb::Log>, i64)> {
    let (a, b) = (
        create_job(client, group_id, Vec::new()).await?,
        create_job(client, group_id, Vec::new()).await?,
    );
    let node = |key: &str, job_id| pb::WorkflowNode {
        key: key.into(),
        job_id,
        fan_in: pb::WorkflowFanIn::AllSuccess as i32,
    };
    let workflow = pb::Workflow {
        group_id,
        name: "traced workflow".into(),
        nodes: vec![node("a", a), node("b", b)],
        edges: vec![pb::WorkflowEdge {
            from: "a".into(),
            to: "b".into(),
            condition: pb::WorkflowEdgeCondition::OnSuccess as i32,
        }],
        ..Default::default()
    };
    let created = client
        .create_workflow(pb::CreateWorkflowRequest {
            workflow: Some(workflow),
        })
        .await?
        .into_inner()
        .workflow
        .ok_or_else(|| anyhow::anyhow!("no workflow"))?;
    let run_id = client
        .start_workflow(pb::StartWorkflowRequest {
            workflow_id: created.id,
            params: "retry".into(),
        })
        .await?
        .into_inner()
        .workflow_run_id;
    let mut runs = final_logs(client, a, 2).await?;
    runs.sort_by_key(|log| log.attempt);
    runs.extend(final_logs(client, b, 1).await?);
    Ok((runs, run_id))
}

/// Every node run of the workflow run (both attempts of a, then b) is in one trace, its `fire`
/// span a child of the one `workflow_run` span at the trace's root.
async fn assert_workflow_trace(
    jaeger: &Jaeger,
    node_runs: &[pb::Log],
    workflow_run_id: i64,
) -> anyhow::Result<()> {
    let trace_id = &node_runs[0].trace_id;
    assert_eq!(trace_id.len(), 32, "{node_runs:#?}");
    for log in node_runs {
        assert_eq!(
            &log.trace_id, trace_id,
            "one trace per workflow run: {node_runs:#?}"
        );
    }
    // The workflow run span, and a `fire` → ... → `complete` chain per node run.
    let spans = trace_spans(jaeger, trace_id, 1 + 6 * node_runs.len()).await?;
    eprintln!("trace of workflow run {workflow_run_id}:\n{}", tree(&spans));
    let root = span(&spans, "workflow_run");
    assert_eq!(root.parent, None, "{root:#?}");
    assert_eq!(
        root.tags
            .get("xjob.workflow_run_id")
            .and_then(serde_json::Value::as_i64),
        Some(workflow_run_id),
        "{root:#?}"
    );
    let fires: Vec<&JaegerSpan> = spans.iter().filter(|span| span.name == "fire").collect();
    assert_eq!(fires.len(), node_runs.len(), "{spans:#?}");
    for fire in fires {
        assert!(
            (fire.parent.as_deref()).is_some_and(|parent| same_id(parent, &root.span_id)),
            "each node run's fire span hangs under the workflow run's: {fire:#?} {root:#?}"
        );
    }
    Ok(())
}

/// Renders a trace as an indented tree (printed for docs/observability.md).
fn tree(spans: &[JaegerSpan]) -> String {
    fn walk(spans: &[JaegerSpan], node: &JaegerSpan, depth: usize, out: &mut String) {
        let mut tags: Vec<String> = node
            .tags
            .iter()
            .filter(|(key, _)| key.starts_with("xjob.") || key.as_str() == "error")
            .map(|(key, value)| format!("{}={value}", key.trim_start_matches("xjob.")))
            .collect();
        tags.sort();
        out.push_str(&format!(
            "{}{} [{}] {:.1} ms  {}\n",
            "  ".repeat(depth),
            node.name,
            node.service,
            node.duration_us as f64 / 1000.0,
            tags.join(" ")
        ));
        for child in spans
            .iter()
            .filter(|span| span.parent.as_deref() == Some(node.span_id.as_str()))
        {
            walk(spans, child, depth + 1, out);
        }
    }
    let mut out = String::new();
    for root in spans.iter().filter(|span| {
        span.parent
            .as_deref()
            .is_none_or(|parent| !spans.iter().any(|other| other.span_id == parent))
    }) {
        walk(spans, root, 0, &mut out);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_run_is_one_trace_across_admin_and_executor_in_jaeger() -> anyhow::Result<()> {
    let jaeger_binary = match jaeger::binary() {
        Ok(binary) => binary,
        Err(reason) if std::env::var_os("CI").is_some() => {
            anyhow::bail!("the Jaeger test cannot run in CI: {reason}")
        }
        Err(reason) => {
            eprintln!("skipping the Jaeger trace test: {reason}");
            return Ok(());
        }
    };
    let started = Instant::now();
    let dir = tempfile::tempdir()?;
    let jaeger = Jaeger::start(&jaeger_binary, dir.path()).await?;
    let otlp = jaeger.otlp_endpoint.clone();

    let port = free_port()?;
    let url = format!("http://127.0.0.1:{port}");
    let config_file = dir.path().join("admin.toml");
    let admin_log = dir.path().join("admin.log");
    std::fs::write(
        &config_file,
        format!(
            "heartbeat_interval = \"500ms\"\nexecutor_lease = \"3s\"\nnode_lease = \"2s\"\n\
             followup_interval = \"100ms\"\notlp_endpoint = \"{otlp}\"\n"
        ),
    )?;
    let mut admin = AdminProcess::spawn(AdminSpec {
        binary: env!("CARGO_BIN_EXE_xjob").into(),
        node_id: "traced-admin".into(),
        port,
        data_dir: dir.path().join("admin"),
        database_url: None,
        config_file,
        // The follow-up's info lines show that a run's log lines carry its trace id.
        log_filter: "warn,xjob_admin::monitor::followup=info".into(),
        output: AdminOutput::AppendTo(admin_log.clone()),
        env: Vec::new(),
    })?;
    let mut client = connect_admin(&url, Duration::from_secs(20)).await?;
    let executor = Executor::builder()
        .app_name(APP)
        .admin_addrs([url.clone()])
        .bind("127.0.0.1:0")
        .log_dir(dir.path().join("executor-logs"))
        .otlp_endpoint(otlp.clone())
        .enable_glue(xjob_executor::GlueType::Shell)
        .handler("flaky", flaky)
        .start()
        .await?;
    executor.wait_registered(Duration::from_secs(10)).await?;

    let group = client
        .create_group(pb::CreateGroupRequest {
            group: Some(pb::Group {
                app_name: APP.into(),
                title: "traced".into(),
                address_type: pb::AddressType::Auto as i32,
                ..Default::default()
            }),
        })
        .await?
        .into_inner()
        .group
        .map(|group| group.id)
        .unwrap_or_default();
    let job_id = create_job(&mut client, group, Vec::new()).await?;
    // A parent whose success starts a child job: the child's trace links to the parent's.
    let child_id = create_job(&mut client, group, Vec::new()).await?;
    let parent_id = create_job(&mut client, group, vec![child_id]).await?;

    // A run that fails, then its retry; then a run asked for inside a caller's trace.
    client
        .trigger_job(pb::TriggerJobRequest {
            id: job_id,
            params: Some("retry".into()),
            ..Default::default()
        })
        .await?;
    final_logs(&mut client, job_id, 2).await?;
    let mut request = tonic::Request::new(pb::TriggerJobRequest {
        id: job_id,
        ..Default::default()
    });
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01").parse()?,
    );
    client.trigger_job(request).await?;
    let logs = final_logs(&mut client, job_id, 3).await?;
    client
        .trigger_job(pb::TriggerJobRequest {
            id: parent_id,
            ..Default::default()
        })
        .await?;
    let parent = final_logs(&mut client, parent_id, 1).await?.remove(0);
    let child = final_logs(&mut client, child_id, 1).await?.remove(0);
    // A script run: its spans name the script type, the script sees the run's TRACEPARENT.
    let glue_id = create_glue_job(&mut client, group).await?;
    client
        .trigger_job(pb::TriggerJobRequest {
            id: glue_id,
            ..Default::default()
        })
        .await?;
    let glue = final_logs(&mut client, glue_id, 1).await?.remove(0);
    let glue_log = client
        .read_run_log(pb::ReadRunLogRequest {
            log_id: glue.id,
            from_line: 1,
        })
        .await?
        .into_inner()
        .content;
    // A run that never reaches an executor (a planned fire of a job stopped meanwhile).
    let skipped = skipped_by_stop(&mut client, group).await?;
    // A workflow run a → b whose node a fails its first attempt and is retried.
    let (node_runs, workflow_run_id) = workflow_run(&mut client, group).await?;

    // Graceful stops flush what the batch exporters still hold.
    executor.shutdown().await;
    admin.process_mut().ask_to_exit()?;
    admin
        .process_mut()
        .wait_exit(Instant::now() + Duration::from_secs(15))?;

    let by_attempt = |attempt: i32, params: &str| {
        logs.iter()
            .find(|log| log.attempt == attempt && log.params == params)
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("no run of attempt {attempt} in {logs:#?}"))
    };
    let (first, retry, joined) = (
        by_attempt(0, "retry")?,
        by_attempt(1, "retry")?,
        by_attempt(0, "")?,
    );
    for log in [&first, &retry, &joined] {
        assert_eq!(
            log.trace_id.len(),
            32,
            "log {} has a trace id: {log:#?}",
            log.id
        );
    }
    assert_ne!(
        first.trace_id, retry.trace_id,
        "a retry is a trace of its own"
    );
    assert_eq!(
        joined.trace_id, CALLER_TRACE,
        "TriggerJob's traceparent is joined"
    );

    let first_spans = trace_spans(&jaeger, &first.trace_id, 6).await?;
    eprintln!(
        "trace of a failed run (log {}):\n{}",
        first.id,
        tree(&first_spans)
    );
    assert_run_chain(&first_spans, first.id);
    assert_eq!(
        span(&first_spans, "run").tags.get("error"),
        Some(&serde_json::Value::Bool(true)),
        "the failed run's span has an error status"
    );

    let retry_spans = trace_spans(&jaeger, &retry.trace_id, 6).await?;
    eprintln!(
        "trace of its retry (log {}):\n{}",
        retry.id,
        tree(&retry_spans)
    );
    let retry_fire = assert_run_chain(&retry_spans, retry.id);
    let first_fire = span(&first_spans, "fire");
    assert!(
        retry_fire
            .links
            .iter()
            .any(|(trace, span)| same_id(trace, &first.trace_id)
                && same_id(span, &first_fire.span_id)),
        "the retry's fire span links to the first attempt's fire span, which its trace holds: \
         {retry_fire:#?} {first_fire:#?}"
    );

    let joined_spans = trace_spans(&jaeger, &joined.trace_id, 6).await?;
    let joined_fire = assert_run_chain(&joined_spans, joined.id);
    assert_eq!(
        joined_fire
            .parent
            .as_deref()
            .map(|parent| same_id(parent, CALLER_SPAN)),
        Some(true),
        "the run hangs under the caller's span: {joined_fire:#?}"
    );
    let child_spans = trace_spans(&jaeger, &child.trace_id, 6).await?;
    let child_fire = assert_run_chain(&child_spans, child.id);
    assert_ne!(
        child.trace_id, parent.trace_id,
        "a child run is a trace of its own"
    );
    let parent_spans = trace_spans(&jaeger, &parent.trace_id, 6).await?;
    let parent_fire = span(&parent_spans, "fire");
    assert!(
        child_fire
            .links
            .iter()
            .any(|(trace, span)| same_id(trace, &parent.trace_id)
                && same_id(span, &parent_fire.span_id)),
        "the child's fire span links to its parent run's fire span: {child_fire:#?}"
    );

    // The script run: named by its type, its trace id in the run log, TRACEPARENT in the script.
    let glue_spans = trace_spans(&jaeger, &glue.trace_id, 6).await?;
    assert_run_chain(&glue_spans, glue.id);
    assert_eq!(
        span(&glue_spans, "run")
            .tags
            .get("xjob.handler")
            .and_then(serde_json::Value::as_str),
        Some("glue:bash"),
        "a script run's span names its type: {glue_spans:#?}"
    );
    assert!(
        glue_log.contains(&format!("trace_id={}", glue.trace_id)),
        "the run log's start line names the trace: {glue_log}"
    );
    let handler_span = &span(&glue_spans, "handler").span_id;
    let traceparent_line = glue_log
        .lines()
        .find_map(|line| {
            line.split_once("TRACEPARENT=")
                .map(|(_, value)| value.trim())
        })
        .ok_or_else(|| anyhow::anyhow!("the script printed no TRACEPARENT: {glue_log}"))?;
    assert!(
        traceparent_line.starts_with(&format!("00-{}-", glue.trace_id))
            && traceparent_line.contains(handler_span.trim_start_matches('0')),
        "the script's TRACEPARENT is the run's handler span: {traceparent_line} vs {handler_span}"
    );

    // The admin's log line for the retried run carries the run's trace id.
    let admin_lines = std::fs::read_to_string(&admin_log)?;
    assert!(
        admin_lines
            .lines()
            .any(|line| line.contains("failed run will be retried")
                && line.contains(&format!("trace_id={}", first.trace_id))),
        "the follow-up's line names the run's trace: {admin_lines}"
    );
    // The skipped run's `fire` span ends with an error status and the reason its row records.
    let skipped_fire = fire_span_of(&jaeger, skipped.id, started).await?;
    assert_eq!(
        skipped_fire.tags.get("error"),
        Some(&serde_json::Value::Bool(true)),
        "a skipped run's span has an error status: {skipped_fire:#?}"
    );
    assert!(
        skipped
            .trigger_msg
            .contains("was stopped after this fire was planned"),
        "{skipped:#?}"
    );
    assert_eq!(
        skipped_fire
            .tags
            .get("otel.status_description")
            .and_then(serde_json::Value::as_str),
        Some(skipped.trigger_msg.as_str()),
        "the span's status carries the reason: {skipped_fire:#?}"
    );
    assert_eq!(
        skipped_fire
            .tags
            .get("xjob.outcome")
            .and_then(serde_json::Value::as_str),
        Some("skipped")
    );
    assert_workflow_trace(&jaeger, &node_runs, workflow_run_id).await?;
    eprintln!("Jaeger trace test took {:?}", started.elapsed());
    Ok(())
}

/// Two admins on one SQLite file both try each occurrence of every-second workflow schedules;
/// one claim wins. Only the winner's run is traced: Jaeger holds exactly one `workflow_run`
/// span per workflow run in the store (a losing admin exports none, not even an empty one),
/// named by its run id, with the run's node `fire` span as its child.
///
/// To make the admins contend for the same occurrences (their one-second ticks have their own
/// phases), both are frozen with SIGSTOP past an occurrence and resumed together: each then
/// ticks at once and tries the same due workflows.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_admins_trace_each_scheduled_workflow_run_once() -> anyhow::Result<()> {
    let jaeger_binary = match jaeger::binary() {
        Ok(binary) => binary,
        Err(reason) if std::env::var_os("CI").is_some() => {
            anyhow::bail!("the Jaeger test cannot run in CI: {reason}")
        }
        Err(reason) => {
            eprintln!("skipping the Jaeger workflow schedule test: {reason}");
            return Ok(());
        }
    };
    let _serial = ONE_AT_A_TIME.lock().await;
    let started = Instant::now();
    let dir = tempfile::tempdir()?;
    let jaeger = Jaeger::start(&jaeger_binary, dir.path()).await?;
    let extra = format!("otlp_endpoint = \"{}\"\n", jaeger.otlp_endpoint);
    let database = Database::sqlite()?.ok_or_else(|| anyhow::anyhow!("no SQLite"))?;
    let mut cluster = Cluster::start_configured(database, 2, 1, Timing::default(), &extra).await?;
    let outcome = scheduled_workflow_traces(&mut cluster, &jaeger, started).await;
    cluster.finish(outcome).await
}

async fn scheduled_workflow_traces(
    cluster: &mut Cluster,
    jaeger: &Jaeger,
    started: Instant,
) -> anyhow::Result<()> {
    let mut client = cluster.client().await?;
    let mut workflows = Vec::new();
    for index in 0..4 {
        let job = pb::Job {
            group_id: cluster.group_id,
            name: format!("node {index}"),
            schedule_type: pb::ScheduleType::None as i32,
            route_strategy: pb::RouteStrategy::First as i32,
            handler: "record".into(),
            block_strategy: pb::BlockStrategy::SerialExecution as i32,
            glue_type: pb::GlueType::Bean as i32,
            misfire_strategy: pb::MisfireStrategy::DoNothing as i32,
            ..Default::default()
        };
        let job = client.create_job(pb::CreateJobRequest { job: Some(job) });
        let job_id = job
            .await?
            .into_inner()
            .job
            .map(|job| job.id)
            .unwrap_or_default();
        let workflow = pb::Workflow {
            group_id: cluster.group_id,
            name: format!("every second {index}"),
            nodes: vec![pb::WorkflowNode {
                key: "a".into(),
                job_id,
                fan_in: pb::WorkflowFanIn::AllSuccess as i32,
            }],
            schedule_type: pb::ScheduleType::FixRate as i32,
            schedule_conf: "1".into(),
            ..Default::default()
        };
        let request = pb::CreateWorkflowRequest {
            workflow: Some(workflow),
        };
        let created = client.create_workflow(request).await?.into_inner().workflow;
        workflows.push(created.ok_or_else(|| anyhow::anyhow!("no workflow"))?);
    }
    // Freeze both admins past an occurrence (under the node lease and the misfire threshold),
    // then resume them together, a few times.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        for admin in &mut cluster.admins {
            admin.pause()?;
        }
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        for admin in &mut cluster.admins {
            admin.resume()?;
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    for workflow in &workflows {
        let mut off = workflow.clone();
        off.schedule_type = pb::ScheduleType::None as i32;
        let request = pb::UpdateWorkflowRequest {
            workflow: Some(off),
        };
        client.update_workflow(request).await?;
    }
    let mut runs = Vec::new();
    for workflow in &workflows {
        let list = pb::ListWorkflowRunsRequest {
            workflow_id: workflow.id,
            page_size: 1000,
            page_token: String::new(),
        };
        let ended = wait_until(Duration::from_secs(30), "every run to end", || {
            let (mut client, list) = (client.clone(), list.clone());
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
        runs.extend(ended);
    }
    anyhow::ensure!(runs.len() >= 8, "too few scheduled runs: {runs:#?}");
    // Graceful stops flush the spans the batch exporters hold.
    for admin in &mut cluster.admins {
        admin.process_mut().ask_to_exit()?;
    }
    for admin in &mut cluster.admins {
        admin
            .process_mut()
            .wait_exit(Instant::now() + Duration::from_secs(15))?;
    }

    let since_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .saturating_sub(started.elapsed() + Duration::from_secs(60))
        .as_micros();
    let query = format!("service=xjob-admin&operation=workflow_run&limit=10000&start={since_us}");
    let ours = |span: &JaegerSpan| {
        let workflow_id = span
            .tags
            .get("xjob.workflow_id")
            .and_then(serde_json::Value::as_i64);
        span.name == "workflow_run" && workflows.iter().any(|w| Some(w.id) == workflow_id)
    };
    // The admins exited, so every span was received; wait only for Jaeger to show them all.
    let spans = wait_until(
        Duration::from_secs(30),
        &format!("{} workflow_run spans in Jaeger", runs.len()),
        || async {
            let spans = jaeger.search(&query).await.ok()?;
            (spans.iter().filter(|span| ours(span)).count() >= runs.len()).then_some(spans)
        },
    )
    .await?;
    let roots: Vec<&JaegerSpan> = spans.iter().filter(|span| ours(span)).collect();
    let empty = roots
        .iter()
        .filter(|span| !span.tags.contains_key("xjob.workflow_run_id"))
        .count();
    assert_eq!(
        (roots.len(), empty),
        (runs.len(), 0),
        "one workflow_run span per run, none empty (an admin that lost the claim exports none)"
    );
    let mut named: Vec<i64> = roots
        .iter()
        .filter_map(|span| span.tags.get("xjob.workflow_run_id")?.as_i64())
        .collect();
    let mut run_ids: Vec<i64> = runs.iter().map(|run| run.id).collect();
    named.sort_unstable();
    run_ids.sort_unstable();
    assert_eq!(named, run_ids, "each run's span names it");
    for root in roots {
        assert_eq!(root.parent, None, "{root:#?}");
        let children = spans
            .iter()
            .filter(|span| {
                span.name == "fire"
                    && span.trace_id == root.trace_id
                    && span
                        .parent
                        .as_deref()
                        .is_some_and(|p| same_id(p, &root.span_id))
            })
            .count();
        assert_eq!(
            children, 1,
            "the run's node fire span hangs under it: {root:#?}"
        );
    }
    eprintln!("{} scheduled workflow runs, one span each", runs.len());
    Ok(())
}
