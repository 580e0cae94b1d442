//! The XXL-JOB listener (`xxl_job_compat_listen`) attacked two ways:
//! - with gRPC on loopback and the XXL-JOB listener on a network address, a forged callback for
//!   a group without an access token finished a RUNNING run: callbacks were judged by the gRPC
//!   listener's loopback-ness. Now both calls are judged by the listener they arrive on;
//! - a web page posted `text/plain` JSON from its own origin to a loopback listener, registered
//!   an address of its choosing for a token-less group (and got its runs) and failed runs by
//!   guessing ids. Now the listener wants `application/json`, refuses foreign origins, and
//!   never accepts a browser context for a group without a token.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use xjob_proto::pb;
use xjob_tests::{TestCluster, held_handler, wait_until};

use crate::support::{post, xxl_ok};

const WAIT: Duration = Duration::from_secs(10);
const JSON: (&str, &str) = ("Content-Type", "application/json;charset=UTF-8");

/// An admin (gRPC on loopback) whose XXL-JOB listener binds `compat`; the loopback address to
/// reach that listener on.
async fn cluster_with_compat(compat: SocketAddr) -> anyhow::Result<(TestCluster, SocketAddr)> {
    let cluster = TestCluster::builder()
        .configure(move |config| config.xxl_job_compat_listen = Some(compat))
        .start()
        .await?;
    let bound = cluster
        .xxl_compat_addr()
        .ok_or_else(|| anyhow::anyhow!("no XXL-JOB listener"))?;
    Ok((cluster, SocketAddr::from(([127, 0, 0, 1], bound.port()))))
}

fn registration(app: &str, address: &str) -> String {
    format!(r#"{{"registryGroup":"EXECUTOR","registryKey":"{app}","registryValue":"{address}"}}"#)
}

fn forged_result(log_id: i64) -> String {
    format!(r#"[{{"logId":{log_id},"logDateTim":0,"handleCode":200,"handleMsg":"forged"}}]"#)
}

async fn executors_of(cluster: &TestCluster, app: &str) -> anyhow::Result<Vec<pb::Executor>> {
    let request = pb::ListExecutorsRequest {
        app_name: app.to_string(),
    };
    let listed = cluster.client().list_executors(request).await?;
    Ok(listed.into_inner().executors)
}

/// A RUNNING run of a token-less group, held by its (xjob) executor until `gate` opens.
async fn running_run(
    cluster: &mut TestCluster,
    app: &str,
    gate: &Arc<Semaphore>,
) -> anyhow::Result<i64> {
    let group_id = cluster.create_group(app).await?;
    let executor = cluster
        .executor(app)
        .handler("held", held_handler(Arc::clone(gate)));
    cluster.start_executor(executor).await?;
    let job = TestCluster::job(group_id, "held", pb::ScheduleType::None, "");
    let job_id = cluster.create_job(job).await?.id;
    let log_id = cluster.trigger(job_id, None).await?;
    let running = pb::RunStatus::Running as i32;
    wait_until(WAIT, "the run to be dispatched", || async {
        let log = cluster.get_log(log_id).await.ok()?;
        (log.status == running && !log.executor_address.is_empty()).then_some(())
    })
    .await?;
    Ok(log_id)
}

#[tokio::test]
async fn a_network_xxl_listener_refuses_callbacks_of_tokenless_groups() -> anyhow::Result<()> {
    let (mut cluster, compat) = cluster_with_compat(SocketAddr::from(([0, 0, 0, 0], 0))).await?;
    let gate = Arc::new(Semaphore::new(0));
    let log_id = running_run(&mut cluster, "compat-forged", &gate).await?;

    // Registration on that listener was refused already; the callback now is too.
    let answer = post(
        compat,
        "/api/registry",
        &[JSON],
        &registration("compat-forged", "http://127.0.0.1:9"),
    )
    .await?;
    assert!(!xxl_ok(&answer), "{answer}");
    let answer = post(compat, "/api/callback", &[JSON], &forged_result(log_id)).await?;
    assert!(!xxl_ok(&answer), "the forged callback is refused: {answer}");
    assert_eq!(
        cluster.get_log(log_id).await?.status,
        pb::RunStatus::Running as i32
    );

    // The real executor's result (over gRPC, on loopback) still finishes the run.
    gate.add_permits(1);
    let finished = cluster.wait_log_final(log_id, WAIT).await?;
    assert_eq!(finished.status, pb::RunStatus::Success as i32);
    assert_eq!(finished.handle_msg, "released");
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn web_pages_cannot_use_a_loopback_xxl_listener() -> anyhow::Result<()> {
    let (mut cluster, compat) = cluster_with_compat(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let gate = Arc::new(Semaphore::new(0));
    let log_id = running_run(&mut cluster, "compat-web", &gate).await?;
    let body = registration("compat-web", "http://127.0.0.1:9");
    let own_origin = format!("http://{compat}");

    let attempts: [(&str, Vec<(&str, &str)>); 5] = [
        // What a page can send without a CORS preflight.
        (
            "text/plain",
            vec![
                ("Content-Type", "text/plain;charset=UTF-8"),
                ("Origin", "http://evil.example"),
            ],
        ),
        ("no content type", vec![]),
        (
            "a foreign origin",
            vec![JSON, ("Origin", "http://evil.example")],
        ),
        (
            "a browser context",
            vec![
                JSON,
                ("Sec-Fetch-Site", "cross-site"),
                ("Sec-Fetch-Mode", "no-cors"),
            ],
        ),
        (
            "the listener's own origin",
            vec![JSON, ("Origin", own_origin.as_str())],
        ),
    ];
    for (what, headers) in &attempts {
        let answer = post(compat, "/api/registry", headers, &body).await?;
        assert!(
            !xxl_ok(&answer),
            "registration with {what} is refused: {answer}"
        );
        let answer = post(compat, "/api/callback", headers, &forged_result(log_id)).await?;
        assert!(
            !xxl_ok(&answer),
            "callback with {what} is refused: {answer}"
        );
    }
    let registered = executors_of(&cluster, "compat-web").await?;
    assert!(
        registered
            .iter()
            .all(|executor| executor.address != "http://127.0.0.1:9"),
        "{registered:?}"
    );
    assert_eq!(
        cluster.get_log(log_id).await?.status,
        pb::RunStatus::Running as i32
    );

    // An XXL-JOB executor (JSON, no browser headers) still registers on loopback.
    let answer = post(compat, "/api/registry", &[JSON], &body).await?;
    assert!(xxl_ok(&answer), "{answer}");
    let registered = executors_of(&cluster, "compat-web").await?;
    assert!(
        registered
            .iter()
            .any(|executor| executor.address == "http://127.0.0.1:9"),
        "{registered:?}"
    );
    gate.add_permits(1);
    cluster.wait_log_final(log_id, WAIT).await?;
    cluster.shutdown().await;
    Ok(())
}
