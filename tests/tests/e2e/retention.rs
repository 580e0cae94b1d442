//! Continuous log retention: by count per job (`log_keep_per_job`) and by an age shorter than a
//! day (`log_retention`), applied by the admin's own retention loop.

use std::time::Duration;

use xjob_executor::{JobContext, JobOutput, JobResult};
use xjob_proto::pb;
use xjob_tests::{TestCluster, wait_until};

const APP: &str = "retention-app";

async fn ok_handler(_ctx: JobContext) -> JobResult {
    Ok(JobOutput::message("ok"))
}

async fn run_once(cluster: &TestCluster, job_id: i64) -> anyhow::Result<i64> {
    let log_ids = cluster
        .client()
        .trigger_job(pb::TriggerJobRequest {
            id: job_id,
            params: None,
            addresses: vec![],
        })
        .await?
        .into_inner()
        .log_ids;
    let [log_id] = log_ids.as_slice() else {
        anyhow::bail!("expected one run, got {log_ids:?}");
    };
    let log = cluster
        .wait_log_final(*log_id, Duration::from_secs(10))
        .await?;
    anyhow::ensure!(log.status == pb::RunStatus::Success as i32, "{log:?}");
    Ok(*log_id)
}

async fn cluster_with(
    change: impl FnOnce(&mut xjob_admin::Config) + Send + 'static,
) -> anyhow::Result<(TestCluster, i64)> {
    let mut cluster = TestCluster::builder()
        .configure(move |config| {
            config.retention_interval = Duration::from_millis(200);
            change(config);
        })
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    let executor = cluster.executor(APP).handler("ok", ok_handler);
    cluster.start_executor(executor).await?;
    let job = cluster
        .create_job(TestCluster::job(group_id, "ok", pb::ScheduleType::None, ""))
        .await?;
    Ok((cluster, job.id))
}

#[tokio::test]
async fn each_job_keeps_only_its_newest_runs() -> anyhow::Result<()> {
    let (cluster, job_id) = cluster_with(|config| config.log_keep_per_job = 3).await?;
    let mut log_ids = Vec::new();
    for _ in 0..6 {
        log_ids.push(run_once(&cluster, job_id).await?);
    }
    let newest: Vec<i64> = log_ids[3..].to_vec();
    let kept = wait_until(
        Duration::from_secs(10),
        "the job's runs to shrink to its newest 3",
        || async {
            let logs = cluster.logs(job_id).await.ok()?;
            (logs.len() == 3).then_some(logs)
        },
    )
    .await?;
    let mut kept_ids: Vec<i64> = kept.iter().map(|log| log.id).collect();
    kept_ids.sort_unstable();
    assert_eq!(kept_ids, newest, "the newest runs are the ones kept");
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn runs_older_than_a_short_retention_are_deleted() -> anyhow::Result<()> {
    let (cluster, job_id) = cluster_with(|config| {
        config.log_retention = Duration::from_secs(1);
    })
    .await?;
    let log_id = run_once(&cluster, job_id).await?;
    wait_until(
        Duration::from_secs(10),
        "the run to expire after 1 s",
        || async {
            let logs = cluster.logs(job_id).await.ok()?;
            logs.iter().all(|log| log.id != log_id).then_some(())
        },
    )
    .await?;
    cluster.shutdown().await;
    Ok(())
}
