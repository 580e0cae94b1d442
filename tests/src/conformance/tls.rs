//! The TLS scenario: an admin serving TLS that requires executors' client certificates, and an
//! executor serving its own port over TLS that requires the admin's (mTLS both ways), all with
//! certificates made in the test.

use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
use xjob_proto::pb;
use xjob_proto::pb::executor_service_client::ExecutorServiceClient;

use super::admin::{AdminProcess, AdminTls, free_port};
use super::world::{REGISTER_BOUND, RUN_BOUND, TOKEN, World, expect_status, with_token};
use crate::TestCa;

/// Over TLS with client certificates both ways (the admin's `tls_client_auth = "executors"`,
/// the executor's `XJOB_TLS_REQUIRE_CLIENT_CERT`): the executor registers at an `https://` admin
/// trusting the test CA, registers an `https://` address, runs a job dispatched over TLS and
/// reports it, and its log reads through the admin; its port refuses plaintext and TLS callers
/// without a client certificate, and answers one with a certificate from the CA.
pub async fn tls(world: &mut World) -> anyhow::Result<()> {
    let name = world.app_name("tls-files");
    let dir = world.work_dir.join(name);
    std::fs::create_dir_all(&dir)?;
    let ca = TestCa::new(&dir, "conformance")?;
    let (cert, key) = ca.issue("admin")?;
    let admin_tls = AdminTls {
        cert,
        key,
        ca: ca.ca_path(),
    };
    let binary = world.admin.binary().to_path_buf();
    let admin =
        AdminProcess::start_with(&binary, &dir.join("admin"), free_port()?, Some(admin_tls))
            .await?;
    let client = admin.client().await?;
    // The world's helpers drive the TLS admin for this scenario; the plain one comes back after
    // (the TLS admin is SIGKILLed when dropped).
    let plain_admin = std::mem::replace(&mut world.admin, admin);
    let plain_client = std::mem::replace(&mut world.client, client);
    let outcome = over_tls(world, &ca).await;
    world.stop_executors().await;
    world.admin = plain_admin;
    world.client = plain_client;
    outcome
}

async fn over_tls(world: &mut World, ca: &TestCa) -> anyhow::Result<()> {
    let (cert, key) = ca.issue("executor")?;
    let app = world.app_name("tls");
    let group = world.create_group(&app).await?;
    let port = free_port()?;
    let env = [
        ("XJOB_TLS_CERT", cert.display().to_string()),
        ("XJOB_TLS_KEY", key.display().to_string()),
        ("XJOB_TLS_CA", ca.ca_path().display().to_string()),
        ("XJOB_TLS_REQUIRE_CLIENT_CERT", "1".to_string()),
    ]
    .map(|(name, value)| (name.to_string(), value));
    let admin_url = world.admin.url();
    let index = world.spawn_executor_env(&app, TOKEN, port, &admin_url, env.to_vec())?;
    let address = world.executors[index].address();
    if world.command.session {
        return session_over_tls(world, &app, group, port, &address).await;
    }
    anyhow::ensure!(address.starts_with("https://"), "{address}");
    world.wait_listed(&app, &address, REGISTER_BOUND).await?;
    let job_id = world.create_job(World::job(group, "log")).await?;
    let log_id = world.trigger_one(job_id, "3").await?;
    let log = world.wait_final(log_id, RUN_BOUND).await?;
    expect_status(&log, pb::RunStatus::Success, 200)?;
    let (content, _) = world.read_log(log_id).await?;
    anyhow::ensure!(
        content.contains("line 3"),
        "ReadRunLog over TLS:\n{content}"
    );

    let plaintext = format!("http://127.0.0.1:{port}");
    anyhow::ensure!(
        beat(Endpoint::from_shared(plaintext)?).await.is_err(),
        "the executor's TLS port answered a plaintext call"
    );
    let trusting =
        ClientTlsConfig::new().ca_certificate(Certificate::from_pem(std::fs::read(ca.ca_path())?));
    let https = Endpoint::from_shared(address.clone())?;
    anyhow::ensure!(
        beat(https.clone().tls_config(trusting.clone())?)
            .await
            .is_err(),
        "the executor answered a TLS caller without a client certificate"
    );
    let (client_cert, client_key) = ca.issue("caller")?;
    let identity = Identity::from_pem(std::fs::read(client_cert)?, std::fs::read(client_key)?);
    beat(https.tls_config(trusting.identity(identity))?)
        .await
        .map_err(|error| anyhow::anyhow!("Beat with a client certificate from the CA: {error}"))?;
    Ok(())
}

/// Session dispatch over TLS: the run and its log read travel down the session the executor
/// opened to the TLS admin (covered by the admin's certificate), and the executor's port stays
/// closed.
async fn session_over_tls(
    world: &mut World,
    app: &str,
    group: i64,
    port: u16,
    address: &str,
) -> anyhow::Result<()> {
    world.wait_listed(app, address, REGISTER_BOUND).await?;
    let job_id = world.create_job(World::job(group, "log")).await?;
    let log_id = world.trigger_one(job_id, "3").await?;
    let log = world.wait_final(log_id, RUN_BOUND).await?;
    expect_status(&log, pb::RunStatus::Success, 200)?;
    let (content, _) = world.read_log(log_id).await?;
    anyhow::ensure!(
        content.contains("line 3"),
        "ReadRunLog down a TLS session:\n{content}"
    );
    anyhow::ensure!(
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err(),
        "an executor in session dispatch opened its port {port}"
    );
    Ok(())
}

/// `Beat` with the suite's token through `endpoint`, bounded.
async fn beat(endpoint: Endpoint) -> anyhow::Result<()> {
    let channel = endpoint
        .connect_timeout(std::time::Duration::from_secs(3))
        .timeout(std::time::Duration::from_secs(5))
        .connect()
        .await?;
    ExecutorServiceClient::new(channel)
        .beat(with_token(pb::BeatRequest {})?)
        .await?;
    Ok(())
}
