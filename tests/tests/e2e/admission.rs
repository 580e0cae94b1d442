//! Admission control end to end (issue 11, item 2): an admin whose dispatches cannot keep up
//! holds at most `max_unsent_runs` runs claimed and not yet recorded as sent; every fire beyond
//! that is recorded SKIPPED with the reason at once, and API writes stay fast meanwhile.
//!
//! The overload comes from a black hole: a MANUAL group whose one address accepts connections
//! and never answers, so every `Run` waits the whole executor timeout, while 40 jobs fire every
//! second. Unbounded, the admin would hold about 40 × 2 s = 80 runs unsent, a backlog that only
//! grows with more jobs; the bound is 10. When the load drops, the admin recovers on its own.

use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use xjob_executor::{JobContext, JobOutput, JobResult};
use xjob_proto::pb;
use xjob_tests::{TestCluster, wait_until};

const BOUND: usize = 10;
const JOBS: usize = 40;

/// `xjob_fires_total{outcome="overloaded"}` in this process's metrics registry (shared with the
/// other tests of this binary, so only its growth is checked).
fn overloaded_fires_counted() -> f64 {
    metric(r#"xjob_fires_total{outcome="overloaded"}"#)
}

/// One series of this process's metrics registry.
fn metric(series: &str) -> f64 {
    xjob_admin::metrics::render()
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn an_overloaded_admin_holds_at_most_the_bound_and_skips_the_rest_with_a_reason()
-> anyhow::Result<()> {
    let mut cluster = TestCluster::builder()
        .configure(|config| {
            config.max_unsent_runs = BOUND;
            config.executor_timeout = Duration::from_secs(2);
        })
        .start()
        .await?;
    // A loopback listener that accepts and never answers: each Run waits the full timeout.
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = format!("http://{}", listener.local_addr()?);
    let hole = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let group = pb::Group {
        app_name: "admission-app".into(),
        title: "black hole".into(),
        address_type: pb::AddressType::Manual as i32,
        addresses: vec![address],
        ..Default::default()
    };
    let mut client = cluster.client();
    let counted_before = overloaded_fires_counted();
    let dispatches = r#"xjob_dispatches_total{outcome="overloaded"}"#;
    let dispatches_before = metric(dispatches);
    let group_id = client
        .create_group(pb::CreateGroupRequest { group: Some(group) })
        .await?
        .into_inner()
        .group
        .map(|group| group.id)
        .ok_or_else(|| anyhow::anyhow!("no group returned"))?;
    let mut job_ids = Vec::new();
    for _ in 0..JOBS {
        let mut job = TestCluster::job(group_id, "ok", pb::ScheduleType::Cron, "* * * * * ?");
        job.route_strategy = pb::RouteStrategy::Round as i32;
        let id = cluster.create_job(job).await?.id;
        cluster.start_job(id).await?;
        job_ids.push(id);
    }

    // Fires start 5 s after StartJob; watch the unsent runs for 8 s of overload, with an API
    // write (UpdateJob, then StopJob) in the middle.
    let watch_until = Instant::now() + Duration::from_secs(14);
    let mut most_unsent = 0;
    let mut most_unsent_metric: f64 = 0.0;
    let mut samples = 0;
    let mut write_latencies = Vec::new();
    let mut wrote = false;
    while Instant::now() < watch_until {
        let running = client
            .list_logs(pb::ListLogsRequest {
                group_id,
                status: pb::RunStatus::Running as i32,
                page_size: 1000,
                ..Default::default()
            })
            .await?
            .into_inner()
            .logs;
        let unsent = running
            .iter()
            .filter(|log| log.executor_address.is_empty())
            .count();
        most_unsent = most_unsent.max(unsent);
        most_unsent_metric = most_unsent_metric.max(metric("xjob_unsent_runs"));
        samples += 1;
        if !wrote && Instant::now() + Duration::from_secs(4) > watch_until {
            wrote = true;
            let job = cluster
                .client()
                .get_job(pb::GetJobRequest { id: job_ids[0] })
                .await?;
            let mut job = job
                .into_inner()
                .job
                .ok_or_else(|| anyhow::anyhow!("no job"))?;
            job.name = "renamed under overload".into();
            let started = Instant::now();
            client
                .update_job(pb::UpdateJobRequest { job: Some(job) })
                .await?;
            write_latencies.push(started.elapsed());
            let started = Instant::now();
            client
                .stop_job(pb::StopJobRequest { id: job_ids[1] })
                .await?;
            write_latencies.push(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for id in &job_ids {
        client.stop_job(pb::StopJobRequest { id: *id }).await?;
    }
    let mut overloaded = 0;
    for id in &job_ids {
        overloaded += cluster
            .logs_with_status(*id, pb::RunStatus::Skipped)
            .await?
            .iter()
            .filter(|log| log.trigger_msg.starts_with("overloaded: "))
            .count();
    }
    eprintln!(
        "admission: {samples} samples, at most {most_unsent} runs claimed and unsent (bound \
         {BOUND}); {overloaded} fires skipped as overloaded; API writes took {write_latencies:?}"
    );
    assert!(samples > 20, "too few samples: {samples}");
    assert!(
        most_unsent <= BOUND,
        "{most_unsent} runs claimed and unsent, bound {BOUND}"
    );
    assert!(most_unsent > 0, "the overload never showed");
    assert!(
        overloaded > 0,
        "no fire was skipped with the overload reason"
    );
    // The gauge showed the bound reached (other admins of this process only add to it), and
    // each skipped fire was counted as an overloaded dispatch.
    assert!(
        most_unsent_metric >= BOUND as f64,
        "xjob_unsent_runs reached {most_unsent_metric}, bound {BOUND}"
    );
    assert!(metric(dispatches) - dispatches_before >= overloaded as f64);
    let counted = overloaded_fires_counted() - counted_before;
    assert!(
        counted >= overloaded as f64,
        "{overloaded} fires skipped as overloaded, {counted} counted in xjob_fires_total"
    );
    for latency in &write_latencies {
        assert!(
            *latency < Duration::from_secs(1),
            "an API write took {latency:?} under overload"
        );
    }

    // The load drops (the jobs above are stopped): the admin recovers on its own. Once the
    // black hole's runs have timed out and freed their places, a job on a real executor fires
    // every second again, none of its fires refused.
    let executor = cluster.executor("recovered-app").handler("ok", ok_handler);
    cluster.start_executor(executor).await?;
    let healthy_group = cluster.create_group("recovered-app").await?;
    let job = TestCluster::job(healthy_group, "ok", pb::ScheduleType::Cron, "* * * * * ?");
    let job_id = cluster.create_job(job).await?.id;
    cluster.start_job(job_id).await?;
    wait_until(
        Duration::from_secs(25),
        "3 fires after the overload",
        || async {
            let done = cluster
                .logs_with_status(job_id, pb::RunStatus::Success)
                .await
                .ok()?;
            (done.len() >= 3).then_some(())
        },
    )
    .await?;
    let refused = cluster
        .logs_with_status(job_id, pb::RunStatus::Skipped)
        .await?;
    assert!(
        refused
            .iter()
            .all(|log| !log.trigger_msg.starts_with("overloaded: ")),
        "fires refused after the load dropped: {refused:?}"
    );
    hole.abort();
    cluster.shutdown().await;
    Ok(())
}

async fn ok_handler(_ctx: JobContext) -> JobResult {
    Ok(JobOutput::message("done"))
}
