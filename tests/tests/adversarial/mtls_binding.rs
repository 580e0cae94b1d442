//! With mTLS for executors, any certificate from the admin's CA used to authorize every group:
//! the holder of one executor's certificate could register as any other app (and receive its
//! runs) or report results for its runs. `executor_cert_names` binds certificates to groups by
//! the names in their subject alternative names.

use std::path::Path;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use xjob_admin::config::TlsClientAuth;
use xjob_admin::{Config, RunningAdmin};
use xjob_executor::Executor;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;
use xjob_proto::pb::registry_client::RegistryClient;
use xjob_tests::{TestCa, TestCluster, harness, ok_handler};

const WAIT: Duration = Duration::from_secs(10);
const BOUND_APP: &str = "billing";
const UNLISTED_APP: &str = "reports";

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

/// Opens a session registering `app` over `channel`; returns how the admin answers first.
async fn register(channel: Channel, app: &str) -> anyhow::Result<Result<(), tonic::Status>> {
    let register = pb::Register {
        app_name: app.to_string(),
        address: "https://127.0.0.1:9".to_string(),
        handlers: vec!["ok".to_string()],
        protocol_version: xjob_proto::PROTOCOL_VERSION,
        ..Default::default()
    };
    let (outbound_tx, outbound_rx) = mpsc::channel(1);
    outbound_tx
        .send(pb::ExecutorMessage {
            kind: Some(pb::executor_message::Kind::Register(register)),
        })
        .await?;
    let mut inbound = match RegistryClient::new(channel)
        .session(ReceiverStream::new(outbound_rx))
        .await
    {
        Ok(response) => response.into_inner(),
        Err(status) => return Ok(Err(status)),
    };
    let first = tokio::time::timeout(WAIT, inbound.message()).await?;
    drop(outbound_tx);
    Ok(first.map(drop))
}

#[tokio::test]
async fn a_certificate_from_the_ca_acts_only_for_the_groups_it_is_bound_to() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let ca = TestCa::new(dir.path(), "main")?;
    let (admin_cert, admin_key) = ca.issue("admin")?;
    let (billing_cert, billing_key) = ca.issue_named("billing-exec", &["billing-exec.internal"])?;
    let (other_cert, other_key) = ca.issue_named("other-exec", &["other-exec.internal"])?;
    let mut config = Config::for_tests(dir.path().join("admin-data"));
    config.tls_cert = Some(admin_cert);
    config.tls_key = Some(admin_key);
    config.tls_ca = Some(ca.ca_path());
    config.tls_client_auth = TlsClientAuth::Executors;
    config.executor_cert_names = [(
        BOUND_APP.to_string(),
        vec!["billing-exec.internal".to_string()],
    )]
    .into_iter()
    .collect();
    let admin: RunningAdmin = xjob_admin::app::start(config.validate()?).await?;
    let api = tls_channel(&admin.url(), &ca.ca_path(), None)?;
    let client = JobAdminClient::new(api);
    let group_id = harness::client::create_group(&client, BOUND_APP, BOUND_APP).await?;
    harness::client::create_group(&client, UNLISTED_APP, UNLISTED_APP).await?;

    // The bound certificate's executor registers and runs its group's job.
    let good = Executor::builder()
        .app_name(BOUND_APP)
        .admin_addrs([admin.url()])
        .bind("127.0.0.1:0")
        .log_dir(dir.path().join("logs"))
        .shutdown_grace(Duration::from_secs(1))
        .tls(&billing_cert, &billing_key)
        .tls_ca(ca.ca_path())
        .handler("ok", ok_handler)
        .start()
        .await?;
    good.wait_registered(WAIT).await?;
    let job = TestCluster::job(group_id, "ok", pb::ScheduleType::None, "");
    let job_id = harness::client::create_job(&client, job).await?.id;
    let log_id = harness::client::trigger(&client, job_id, None).await?;
    let log = harness::client::wait_log_final(&client, log_id, WAIT).await?;
    assert_eq!(log.status, pb::RunStatus::Success as i32, "{log:?}");

    // Another certificate of the same CA cannot register as that app, nor report its results.
    let other = tls_channel(
        &admin.url(),
        &ca.ca_path(),
        Some((other_cert.as_path(), other_key.as_path())),
    )?;
    let refused = register(other.clone(), BOUND_APP)
        .await?
        .expect_err("another certificate cannot act for the bound app");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let forged = pb::CallbackRequest {
        results: vec![pb::RunResult {
            log_id,
            status: pb::RunStatus::Failed as i32,
            code: 500,
            message: "forged".to_string(),
            ..Default::default()
        }],
    };
    let refused = RegistryClient::new(other)
        .callback(forged)
        .await
        .expect_err("another certificate cannot report for the bound app");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");

    // An app the binding does not list is refused to every certificate.
    let bound = tls_channel(
        &admin.url(),
        &ca.ca_path(),
        Some((billing_cert.as_path(), billing_key.as_path())),
    )?;
    let refused = register(bound, UNLISTED_APP)
        .await?
        .expect_err("an unlisted app is refused");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let log = harness::client::wait_log_final(&client, log_id, WAIT).await?;
    assert_eq!(log.status, pb::RunStatus::Success as i32, "{log:?}");

    good.shutdown().await;
    admin.shutdown().await;
    Ok(())
}

#[test]
fn a_binding_without_client_certificates_or_with_a_bad_name_is_refused_at_start() {
    let mut config = Config::for_tests(std::env::temp_dir());
    config.executor_cert_names = [(
        BOUND_APP.to_string(),
        vec!["billing-exec.internal".to_string()],
    )]
    .into_iter()
    .collect();
    let refused = config
        .clone()
        .validate()
        .expect_err("needs tls_client_auth");
    assert!(
        refused.to_string().contains("executor_cert_names"),
        "{refused}"
    );
    config.executor_cert_names = [(BOUND_APP.to_string(), vec!["not a name!".to_string()])]
        .into_iter()
        .collect();
    let refused = config.validate().expect_err("a bad name");
    assert!(
        refused.to_string().contains("executor_cert_names"),
        "{refused}"
    );
}
