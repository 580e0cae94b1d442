//! JobAdmin calls tests make again and again, over any channel: `TestCluster` uses them on its
//! plaintext loopback channel, the TLS scenarios on channels of their own.

use std::time::Duration;

use tonic::transport::Channel;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;
use xjob_testkit::wait_until;

/// Creates an AUTO group for `app_name` titled `title`; returns its id.
pub async fn create_group(
    client: &JobAdminClient<Channel>,
    app_name: &str,
    title: &str,
) -> anyhow::Result<i64> {
    let group = pb::Group {
        app_name: app_name.to_string(),
        title: title.to_string(),
        address_type: pb::AddressType::Auto as i32,
        ..Default::default()
    };
    let response = client
        .clone()
        .create_group(pb::CreateGroupRequest { group: Some(group) })
        .await?;
    response
        .into_inner()
        .group
        .map(|group| group.id)
        .ok_or_else(|| anyhow::anyhow!("no group returned"))
}

/// Creates a job; returns it as stored.
pub async fn create_job(client: &JobAdminClient<Channel>, job: pb::Job) -> anyhow::Result<pb::Job> {
    let response = client
        .clone()
        .create_job(pb::CreateJobRequest { job: Some(job) })
        .await?;
    response
        .into_inner()
        .job
        .ok_or_else(|| anyhow::anyhow!("no job returned"))
}

/// Triggers a job once (`TriggerJob`), with `params` instead of the job's own when given;
/// returns the first log id (a sharded job has one per shard).
pub async fn trigger(
    client: &JobAdminClient<Channel>,
    job_id: i64,
    params: Option<&str>,
) -> anyhow::Result<i64> {
    let request = pb::TriggerJobRequest {
        id: job_id,
        params: params.map(str::to_string),
        addresses: vec![],
    };
    let log_ids = client
        .clone()
        .trigger_job(request)
        .await?
        .into_inner()
        .log_ids;
    log_ids
        .first()
        .copied()
        .ok_or_else(|| anyhow::anyhow!("TriggerJob returned no log id"))
}

/// Waits until a log is final (not PENDING/RUNNING); returns it.
pub async fn wait_log_final(
    client: &JobAdminClient<Channel>,
    log_id: i64,
    timeout: Duration,
) -> anyhow::Result<pb::Log> {
    wait_until(timeout, &format!("log {log_id} to finish"), || {
        let mut client = client.clone();
        async move {
            let log = client
                .get_log(pb::GetLogRequest { id: log_id })
                .await
                .ok()?
                .into_inner()
                .log?;
            let running = [pb::RunStatus::Pending as i32, pb::RunStatus::Running as i32];
            (!running.contains(&log.status)).then_some(log)
        }
    })
    .await
}
