//! Server-side request forgery through `TriggerJob`'s address override: the admin dials the
//! addresses a trigger names, so a caller could make it connect to any `host:port` it can reach
//! (an internal service, a metadata endpoint). Only addresses of the job's own group are accepted,
//! unless an admin asks and `trigger_any_address` is set; a refused override dials nothing and
//! writes nothing. A canary listener counts every connection the admin opens to it.

use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use xjob_proto::pb;
use xjob_tests::{TestCluster, ok_handler};

use crate::attacker::WAIT;

const APP: &str = "ssrf-app";

/// A loopback listener standing for an internal service: reports every accepted connection.
struct Canary {
    address: String,
    dialed: mpsc::UnboundedReceiver<()>,
    task: JoinHandle<()>,
}

impl Canary {
    async fn start() -> anyhow::Result<Canary> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = format!("http://{}", listener.local_addr()?);
        let (dialed_tx, dialed) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
                if dialed_tx.send(()).is_err() {
                    break;
                }
            }
        });
        Ok(Canary {
            address,
            dialed,
            task,
        })
    }

    fn was_dialed(&mut self) -> bool {
        self.dialed.try_recv().is_ok()
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn trigger_on(job_id: i64, addresses: Vec<String>) -> pb::TriggerJobRequest {
    pb::TriggerJobRequest {
        id: job_id,
        params: Some("DB_PASSWORD=not-for-the-canary".to_string()),
        addresses,
    }
}

#[tokio::test]
async fn an_address_override_outside_the_group_dials_nothing() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP).await?;
    let executor = cluster.executor(APP).handler("ok", ok_handler);
    let own_address = cluster.start_executor(executor).await?;
    let job = TestCluster::job(group_id, "ok", pb::ScheduleType::None, "");
    let job_id = cluster.create_job(job).await?.id;
    let mut canary = Canary::start().await?;
    let mut client = cluster.client();

    // Even the open laptop mode (every permission) may not name a foreign address: the flag is
    // off. Alone or hidden behind the group's own address, it is refused whole.
    for addresses in [
        vec![canary.address.clone()],
        vec![own_address.clone(), canary.address.clone()],
    ] {
        let refused = client
            .trigger_job(trigger_on(job_id, addresses))
            .await
            .expect_err("a foreign address");
        assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
        assert!(
            refused.message().contains("trigger.any_address"),
            "{refused:?}"
        );
    }
    assert!(cluster.logs(job_id).await?.is_empty(), "no run was written");

    // The group's own address is accepted and its run completes: by then any dial the refused
    // triggers could have started would have reached the canary.
    let allowed = client
        .trigger_job(trigger_on(job_id, vec![own_address.clone()]))
        .await?
        .into_inner()
        .log_ids;
    assert_eq!(allowed.len(), 1);
    let finished = cluster.wait_log_final(allowed[0], WAIT).await?;
    assert_eq!(
        finished.status,
        pb::RunStatus::Success as i32,
        "{finished:?}"
    );
    assert_eq!(finished.executor_address, own_address);
    assert!(!canary.was_dialed(), "the admin connected to the canary");
    cluster.shutdown().await;
    Ok(())
}

/// The canary does see the admin's dials when an admin may name any address: the refusal above
/// is what kept it quiet.
#[tokio::test]
async fn trigger_any_address_lets_an_admin_dial_the_canary() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder()
        .configure(|config| {
            config.trigger_any_address = true;
            config.executor_timeout = Duration::from_secs(1);
        })
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    let executor = cluster.executor(APP).handler("ok", ok_handler);
    cluster.start_executor(executor).await?;
    let job = TestCluster::job(group_id, "ok", pb::ScheduleType::None, "");
    let job_id = cluster.create_job(job).await?.id;
    let mut canary = Canary::start().await?;

    let log_ids = cluster
        .client()
        .trigger_job(trigger_on(job_id, vec![canary.address.clone()]))
        .await?
        .into_inner()
        .log_ids;
    assert_eq!(log_ids.len(), 1);
    tokio::time::timeout(WAIT, canary.dialed.recv())
        .await?
        .ok_or_else(|| anyhow::anyhow!("canary stopped"))?;
    // The canary speaks no gRPC: the run fails, it does not hang.
    let finished = cluster.wait_log_final(log_ids[0], WAIT).await?;
    assert_ne!(finished.status, pb::RunStatus::Success as i32);
    cluster.shutdown().await;
    Ok(())
}
