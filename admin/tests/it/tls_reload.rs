//! Certificate reload in the real `xjob` process: replaced certificate files are loaded on
//! `SIGHUP` (the file poll is set to an hour, so only the signal can explain the change) and
//! served to new connections, while the process keeps running.

use std::path::Path;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;
use xjob_testkit::{AdminOutput, AdminProcess, AdminSpec, Signal, free_port, signal, wait_until};

/// Writes a new CA to `ca_path` and a server certificate it signs to `cert`/`key`.
fn issue(ca_path: &Path, cert: &Path, key: &Path, name: &str) -> anyhow::Result<()> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("{name} CA"));
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()])?;
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key_pair = KeyPair::generate()?;
    let certificate = params.signed_by(&key_pair, &*ca)?;
    std::fs::write(ca_path, ca.pem())?;
    std::fs::write(key, key_pair.serialize_pem())?;
    std::fs::write(cert, certificate.pem())?;
    Ok(())
}

/// One call on a new TLS connection trusting `ca`: does the admin's certificate chain to it?
async fn trusted_by(url: &str, ca: &Path) -> bool {
    let Ok(pem) = std::fs::read(ca) else {
        return false;
    };
    let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem));
    let Ok(endpoint) = Endpoint::from_shared(url.to_string()).and_then(|e| e.tls_config(tls))
    else {
        return false;
    };
    let channel = endpoint.timeout(Duration::from_secs(3)).connect_lazy();
    JobAdminClient::new(channel)
        .list_groups(pb::ListGroupsRequest::default())
        .await
        .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_certificates_for_new_connections() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (cert, key) = (dir.path().join("admin.pem"), dir.path().join("admin.key"));
    let (old_ca, new_ca) = (dir.path().join("old-ca.pem"), dir.path().join("new-ca.pem"));
    issue(&old_ca, &cert, &key, "old")?;
    let config_file = dir.path().join("admin.toml");
    std::fs::write(
        &config_file,
        format!(
            "time_zone = \"UTC\"\ntls_cert = {:?}\ntls_key = {:?}\ntls_reload_interval = \"1h\"\n",
            cert.display().to_string(),
            key.display().to_string()
        ),
    )?;
    let port = free_port()?;
    let admin = AdminProcess::spawn(AdminSpec {
        binary: env!("CARGO_BIN_EXE_xjob").into(),
        node_id: "tls-reload-admin".into(),
        port,
        data_dir: dir.path().join("data"),
        database_url: None,
        config_file,
        log_filter: "warn".into(),
        output: AdminOutput::Quiet,
        env: Vec::new(),
    })?;
    let url = format!("https://127.0.0.1:{port}");
    wait_until(Duration::from_secs(20), "the TLS admin to serve", || {
        let url = url.clone();
        let old_ca = old_ca.clone();
        async move { trusted_by(&url, &old_ca).await.then_some(()) }
    })
    .await?;

    issue(&new_ca, &cert, &key, "new")?;
    assert!(
        trusted_by(&url, &old_ca).await,
        "no reload before the signal (the file poll is an hour)"
    );
    signal(admin.pid(), Signal::SIGHUP)?;
    wait_until(
        Duration::from_secs(10),
        "the new certificate after SIGHUP",
        || {
            let url = url.clone();
            let new_ca = new_ca.clone();
            async move { trusted_by(&url, &new_ca).await.then_some(()) }
        },
    )
    .await?;
    assert!(
        !trusted_by(&url, &old_ca).await,
        "old certificate still served"
    );
    drop(admin);
    Ok(())
}
