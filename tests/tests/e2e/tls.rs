//! TLS and mTLS (docs/security.md, "TLS and mTLS") with certificates made in the test: a TLS
//! admin refuses plaintext clients and clients that do not trust its CA; with
//! `tls_client_auth = "executors"` only executors holding a certificate from the admin's CA
//! register or report, while API clients need none; an admin and an SDK executor run a job end
//! to end over mTLS; replaced certificate files are served to new connections. (An executor
//! reachable from the network refusing to start open is in the adversarial suite.)

use std::path::Path;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use xjob_admin::config::TlsClientAuth;
use xjob_admin::{Config, RunningAdmin};
use xjob_executor::{Executor, ExecutorBuilder};
use xjob_proto::pb;
use xjob_proto::pb::executor_service_client::ExecutorServiceClient;
use xjob_proto::pb::job_admin_client::JobAdminClient;
use xjob_proto::pb::registry_client::RegistryClient;
use xjob_tests::{TestCa, TestCluster, harness, ok_handler, wait_until};

const WAIT: Duration = Duration::from_secs(10);
const APP: &str = "tls-app";

async fn start_admin(dir: &Path, change: impl FnOnce(&mut Config)) -> anyhow::Result<RunningAdmin> {
    let mut config = Config::for_tests(dir.join("admin-data"));
    config.tls_reload_interval = Duration::from_millis(200);
    change(&mut config);
    Ok(xjob_admin::app::start(config.validate()?).await?)
}

/// A channel to `url` trusting `ca`, presenting `identity` when given; connected lazily, every
/// call bounded.
fn tls_channel(url: &str, ca: &Path, identity: Option<(&Path, &Path)>) -> anyhow::Result<Channel> {
    let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(std::fs::read(ca)?));
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(
            std::fs::read(cert)?,
            std::fs::read(key)?,
        ));
    }
    Ok(Endpoint::from_shared(url.to_string())?
        .tls_config(tls)?
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(5))
        .connect_lazy())
}

async fn list_groups(channel: Channel) -> Result<usize, tonic::Status> {
    let response = JobAdminClient::new(channel)
        .list_groups(pb::ListGroupsRequest::default())
        .await?;
    Ok(response.into_inner().groups.len())
}

fn executor(admin: &RunningAdmin, dir: &Path, name: &str) -> ExecutorBuilder {
    Executor::builder()
        .app_name(APP)
        .admin_addrs([admin.url()])
        .bind("127.0.0.1:0")
        .log_dir(dir.join(format!("logs-{name}")))
        .shutdown_grace(Duration::from_secs(1))
        .handler("ok", ok_handler)
}

#[tokio::test]
async fn tls_admin_refuses_plaintext_and_untrusting_clients() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let ca = TestCa::new(dir.path(), "main")?;
    let other = TestCa::new(dir.path(), "other")?;
    let (cert, key) = ca.issue("admin")?;
    let admin = start_admin(dir.path(), |config| {
        config.tls_cert = Some(cert.clone());
        config.tls_key = Some(key.clone());
    })
    .await?;
    assert!(admin.url().starts_with("https://"), "{}", admin.url());

    let trusted = tls_channel(&admin.url(), &ca.ca_path(), None)?;
    assert_eq!(list_groups(trusted.clone()).await?, 0);

    let plaintext = Endpoint::from_shared(format!("http://{}", admin.local_addr()))?
        .timeout(Duration::from_secs(5))
        .connect_lazy();
    let refused = list_groups(plaintext).await.expect_err("plaintext client");
    assert_ne!(refused.code(), tonic::Code::Ok);

    let untrusting = tls_channel(&admin.url(), &other.ca_path(), None)?;
    let refused = list_groups(untrusting)
        .await
        .expect_err("client of another CA");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");

    // The trusted client was never disturbed.
    assert_eq!(list_groups(trusted).await?, 0);
    admin.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn mtls_executor_runs_a_job_and_executors_without_a_valid_certificate_are_refused()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let ca = TestCa::new(dir.path(), "main")?;
    let rogue_ca = TestCa::new(dir.path(), "rogue")?;
    let (admin_cert, admin_key) = ca.issue("admin")?;
    let (exec_cert, exec_key) = ca.issue("executor")?;
    let (rogue_cert, rogue_key) = rogue_ca.issue("executor")?;
    let admin = start_admin(dir.path(), |config| {
        config.tls_cert = Some(admin_cert.clone());
        config.tls_key = Some(admin_key.clone());
        config.tls_ca = Some(ca.ca_path());
        config.tls_client_auth = TlsClientAuth::Executors;
    })
    .await?;
    // API clients need no certificate in "executors" mode.
    let api = tls_channel(&admin.url(), &ca.ca_path(), None)?;
    let client = JobAdminClient::new(api.clone());
    let group_id = harness::client::create_group(&client, APP, APP).await?;

    let good = executor(&admin, dir.path(), "good")
        .tls(&exec_cert, &exec_key)
        .tls_ca(ca.ca_path())
        .require_client_cert(true)
        .start()
        .await?;
    good.wait_registered(WAIT).await?;
    assert!(good.address().starts_with("https://"), "{}", good.address());

    // A job fires and completes: admin -> executor and executor -> admin, both over mTLS.
    let job = TestCluster::job(group_id, "ok", pb::ScheduleType::None, "");
    let job_id = harness::client::create_job(&client, job).await?.id;
    let log_id = harness::client::trigger(&client, job_id, None).await?;
    let log = harness::client::wait_log_final(&client, log_id, WAIT).await?;
    assert_eq!(log.status, pb::RunStatus::Success as i32, "{log:?}");

    // An executor whose certificate another CA signed, and one with none: never registered.
    let rogue = executor(&admin, dir.path(), "rogue")
        .tls(&rogue_cert, &rogue_key)
        .tls_ca(ca.ca_path())
        .start()
        .await?;
    let anonymous = executor(&admin, dir.path(), "anonymous")
        .tls_ca(ca.ca_path())
        .start()
        .await?;
    assert!(rogue.wait_registered(Duration::from_secs(2)).await.is_err());
    assert!(
        anonymous
            .wait_registered(Duration::from_secs(1))
            .await
            .is_err()
    );
    rogue.shutdown().await;
    anonymous.shutdown().await;

    // A forged callback without a client certificate is refused before anything is read.
    let callback = RegistryClient::new(api.clone())
        .callback(pb::CallbackRequest {
            results: vec![pb::RunResult {
                log_id,
                ..Default::default()
            }],
        })
        .await
        .expect_err("callback without certificate");
    assert_eq!(
        callback.code(),
        tonic::Code::Unauthenticated,
        "{callback:?}"
    );
    let (_tx, rx) = mpsc::channel::<pb::ExecutorMessage>(1);
    let session = RegistryClient::new(api.clone())
        .session(ReceiverStream::new(rx))
        .await
        .expect_err("session without certificate");
    assert_eq!(session.code(), tonic::Code::Unauthenticated, "{session:?}");

    // Direct calls to the executor: without a certificate of the CA, no TLS session at all.
    let run = pb::RunRequest {
        job_id,
        log_id: 999_999,
        handler: "ok".to_string(),
        ..Default::default()
    };
    for identity in [None, Some((rogue_cert.as_path(), rogue_key.as_path()))] {
        let channel = tls_channel(good.address(), &ca.ca_path(), identity)?;
        // (With TLS 1.3 the client may finish its side of the handshake before the server
        // rejects the certificate, so the code is UNAVAILABLE or UNKNOWN: never an answer.)
        let refused = ExecutorServiceClient::new(channel)
            .run(run.clone())
            .await
            .expect_err("direct Run without a valid certificate");
        assert_ne!(refused.code(), tonic::Code::Ok);
    }
    // The admin's own identity is accepted (it is what the admin presents).
    let channel = tls_channel(
        good.address(),
        &ca.ca_path(),
        Some((admin_cert.as_path(), admin_key.as_path())),
    )?;
    ExecutorServiceClient::new(channel)
        .beat(pb::BeatRequest {})
        .await?;

    good.shutdown().await;
    admin.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn replaced_certificate_files_are_served_to_new_connections() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let old_ca = TestCa::new(dir.path(), "old")?;
    let new_ca = TestCa::new(dir.path(), "new")?;
    let (cert, key) = old_ca.issue("admin")?;
    let admin = start_admin(dir.path(), |config| {
        config.tls_cert = Some(cert.clone());
        config.tls_key = Some(key.clone());
    })
    .await?;
    let url = admin.url();
    let open = tls_channel(&url, &old_ca.ca_path(), None)?;
    list_groups(open.clone()).await?;
    let refused = list_groups(tls_channel(&url, &new_ca.ca_path(), None)?).await;
    assert!(
        refused.is_err(),
        "the new CA's clients do not trust the old certificate"
    );

    new_ca.issue_into("admin", &cert, &key)?;
    wait_until(WAIT, "new connections to get the new certificate", || {
        let channel = tls_channel(&url, &new_ca.ca_path(), None);
        async move { list_groups(channel.ok()?).await.ok() }
    })
    .await?;
    let stale = list_groups(tls_channel(&url, &old_ca.ca_path(), None)?).await;
    assert!(
        stale.is_err(),
        "a new connection no longer gets the old certificate"
    );
    // The connection made before the reload keeps working.
    list_groups(open).await?;
    admin.shutdown().await;
    Ok(())
}
