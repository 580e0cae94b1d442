//! The admin under test: the real `xjob` binary on a free loopback port with a temporary data
//! dir and short timings, killed with SIGKILL when dropped so a failing scenario leaves nothing.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;

use crate::wait_until;

/// Heartbeat interval the admin asks executors for: short, so lost runs show within seconds.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(500);

/// The largest request the admin takes (`max_request_bytes`): far above anything the scenarios
/// send but one, and below the SDKs' 50 000-character cap on a run's message, so that a run
/// result can be larger than the admin takes (the `callback_too_large` scenario).
pub const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// The admin configuration the suite runs with. The executor lease is longer than the SDKs'
/// reconnect backoff cap (5 s): an executor reconnecting after an admin restart (the
/// `admin_outage` scenario) may wait that long between attempts, and a shorter lease marked its
/// finished run LOST before its session and callback came back.
fn config() -> String {
    format!(
        "heartbeat_interval = \"500ms\"\nexecutor_lease = \"6s\"\nnode_lease = \"2s\"\n\
         time_zone = \"UTC\"\nmax_request_bytes = {MAX_REQUEST_BYTES}\n"
    )
}

/// The admin's TLS: its certificate and key, and the CA that signs them and the executors'.
#[derive(Debug, Clone)]
pub struct AdminTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

impl AdminTls {
    /// Configuration lines: TLS on its port, client certificates required of executors (mTLS
    /// for sessions and callbacks), the CA trusted for executors' own ports.
    fn config(&self) -> String {
        format!(
            "tls_cert = {:?}\ntls_key = {:?}\ntls_ca = {:?}\ntls_client_auth = \"executors\"\n",
            self.cert, self.key, self.ca
        )
    }
}

/// A running `xjob serve`.
pub struct AdminProcess {
    child: Option<Child>,
    binary: PathBuf,
    data_dir: PathBuf,
    port: u16,
    tls_opt: Option<AdminTls>,
}

impl AdminProcess {
    /// Starts the admin and waits until it answers `ListGroups`.
    pub async fn start(binary: &Path, data_dir: &Path, port: u16) -> anyhow::Result<Self> {
        Self::start_with(binary, data_dir, port, None).await
    }

    /// Like `start`, serving TLS when `tls_opt` is given.
    pub async fn start_with(
        binary: &Path,
        data_dir: &Path,
        port: u16,
        tls_opt: Option<AdminTls>,
    ) -> anyhow::Result<Self> {
        Self::start_with_config(binary, data_dir, port, tls_opt, "").await
    }

    /// Like `start_with`, with more configuration lines (e.g. `otlp_endpoint`).
    pub async fn start_with_config(
        binary: &Path,
        data_dir: &Path,
        port: u16,
        tls_opt: Option<AdminTls>,
        extra_config: &str,
    ) -> anyhow::Result<Self> {
        std::fs::create_dir_all(data_dir)?;
        let tls_config = tls_opt.as_ref().map(AdminTls::config).unwrap_or_default();
        std::fs::write(
            data_dir.join("admin.toml"),
            config() + &tls_config + extra_config,
        )?;
        let mut admin = AdminProcess {
            child: None,
            binary: binary.to_path_buf(),
            data_dir: data_dir.to_path_buf(),
            port,
            tls_opt,
        };
        admin.spawn().await?;
        Ok(admin)
    }

    /// The binary it runs.
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// `http://127.0.0.1:port` (`https://` with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls_opt.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// Its process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// SIGKILL, as a crash: nothing of the admin's shutdown runs.
    pub async fn kill_9(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill().await?;
        }
        Ok(())
    }

    /// Starts it again on the same port and data dir (after `kill_9`).
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.kill_9().await?;
        self.spawn().await
    }

    /// A client, once the admin answers.
    pub async fn client(&self) -> anyhow::Result<JobAdminClient<Channel>> {
        let url = self.url();
        let ca_opt = match &self.tls_opt {
            Some(tls) => Some(std::fs::read(&tls.ca)?),
            None => None,
        };
        wait_until(Duration::from_secs(20), "the admin to answer", || {
            let (url, ca_opt) = (url.clone(), ca_opt.clone());
            async move {
                let mut endpoint = Endpoint::from_shared(url).ok()?;
                if let Some(ca) = ca_opt {
                    let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca));
                    endpoint = endpoint.tls_config(tls).ok()?;
                }
                let mut client = JobAdminClient::new(endpoint.connect().await.ok()?);
                client
                    .list_groups(pb::ListGroupsRequest::default())
                    .await
                    .ok()?;
                Some(client)
            }
        })
        .await
    }

    async fn spawn(&mut self) -> anyhow::Result<()> {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.data_dir.join("admin.stderr.log"))?;
        let child = Command::new(&self.binary)
            .args(["serve", "--node-id", "conformance-admin", "--listen"])
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--config")
            .arg(self.data_dir.join("admin.toml"))
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()?;
        self.child = Some(child);
        self.client().await?;
        Ok(())
    }
}

/// A free loopback port (bound, then released for the process to take).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
