//! Alarms that reach a person: the admin's `Notifier` mails a real SMTP server (Python's
//! aiosmtpd, started here) and POSTs to a webhook served by this test (plain http, and https
//! with a test CA made by the openssl CLI), retries a failing webhook, holds a flapping job back with its rate limit, and records each delivery on the run
//! (`Log.alarm_delivery`).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::crypto::ring::default_provider;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use xjob_admin::config::alarm::{AlarmConfig, SmtpSecurity};
use xjob_admin::model::system_clock;
use xjob_admin::monitor::Notifier;
use xjob_executor::{JobContext, JobError, JobResult};
use xjob_proto::pb;
use xjob_testkit::{ChildProcess, free_port};
use xjob_tests::{TestCluster, wait_until};

async fn fails(_ctx: JobContext) -> JobResult {
    Err(JobError::new("failing on purpose"))
}

async fn succeeds(_ctx: JobContext) -> JobResult {
    Ok(Default::default())
}

/// A webhook receiver: answers each POST with the next status of `statuses` (then 200) and
/// keeps the bodies.
struct Hook {
    url: String,
    bodies: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Hook {
    async fn start(statuses: Vec<u16>) -> anyhow::Result<Hook> {
        Hook::serve(statuses, None).await
    }

    /// Serves `http://127.0.0.1:port/hook`, or `https://localhost:port/hook` with `tls`.
    async fn serve(statuses: Vec<u16>, tls: Option<TlsAcceptor>) -> anyhow::Result<Hook> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let url = match tls {
            Some(_) => format!("https://localhost:{port}/hook"),
            None => format!("http://127.0.0.1:{port}/hook"),
        };
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&bodies);
        let task = tokio::spawn(async move {
            let mut statuses = statuses.into_iter();
            while let Ok((stream, _)) = listener.accept().await {
                let mut stream: Box<dyn Stream> = match &tls {
                    Some(acceptor) => match acceptor.accept(stream).await {
                        Ok(stream) => Box::new(stream),
                        Err(_) => continue,
                    },
                    None => Box::new(stream),
                };
                let Ok(body) = read_request(&mut stream).await else {
                    continue;
                };
                if let Ok(mut seen) = seen.lock() {
                    seen.push(body);
                }
                let status = statuses.next().unwrap_or(200);
                let answer = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
                let _ = stream.write_all(answer.as_bytes()).await;
                let _ = stream.shutdown().await;
            }
        });
        Ok(Hook { url, bodies, task })
    }

    fn bodies(&self) -> Vec<String> {
        self.bodies.lock().map(|b| b.clone()).unwrap_or_default()
    }
}

impl Drop for Hook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A plain or TLS connection of the webhook receiver.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// Reads one HTTP/1.1 request with a `content-length` body; returns the body.
async fn read_request(stream: &mut Box<dyn Stream>) -> anyhow::Result<String> {
    let mut data = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer)).await??;
        anyhow::ensure!(read > 0, "connection closed mid-request");
        data.extend_from_slice(&buffer[..read]);
        let text = String::from_utf8_lossy(&data).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length: usize = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .unwrap_or(0);
            if body.len() >= length {
                anyhow::ensure!(head.starts_with("POST /hook "), "request: {head:.80}");
                return Ok(body.to_string());
            }
        }
    }
}

fn alarm_config() -> AlarmConfig {
    AlarmConfig {
        attempts: 3,
        retry_delay: Duration::from_millis(50),
        timeout: Duration::from_secs(5),
        link_base: "http://console.test/logs/".to_string(),
        max_per_job: 0,
        ..AlarmConfig::default()
    }
}

async fn cluster_with(config: AlarmConfig) -> anyhow::Result<TestCluster> {
    let notifier = Notifier::new(&config, system_clock()).map_err(anyhow::Error::msg)?;
    TestCluster::builder()
        .configure(|config| config.followup_interval = Duration::from_millis(50))
        .alarm(Arc::new(notifier))
        .start()
        .await
}

/// A job whose runs fail (no retries, so each failure alarms), alarming `emails`.
async fn failing_job(cluster: &mut TestCluster, app: &str, emails: &str) -> anyhow::Result<i64> {
    let group_id = cluster.create_group(app).await?;
    cluster
        .start_executor(cluster.executor(app).handler("fail", fails))
        .await?;
    let job = cluster
        .create_job(pb::Job {
            alarm_email: emails.to_string(),
            // Alarms show times in the job's zone.
            time_zone: "Europe/Berlin".to_string(),
            ..TestCluster::job(group_id, "fail", pb::ScheduleType::None, "")
        })
        .await?;
    Ok(job.id)
}

/// The run's `alarm_delivery` once its follow-up wrote it.
async fn delivery_of(cluster: &TestCluster, log_id: i64) -> anyhow::Result<String> {
    wait_until(
        Duration::from_secs(20),
        &format!("alarm delivery of run {log_id}"),
        || async {
            let log = cluster.get_log(log_id).await.ok()?;
            let delivered =
                !log.alarm_delivery.is_empty() && log.alarm_delivery != "queued for delivery";
            delivered.then_some(log.alarm_delivery)
        },
    )
    .await
}

#[tokio::test]
async fn webhook_is_retried_and_carries_the_run() -> anyhow::Result<()> {
    let hook = Hook::start(vec![500]).await?;
    let mut cluster = cluster_with(AlarmConfig {
        webhook_url: hook.url.clone(),
        ..alarm_config()
    })
    .await?;
    let job_id = failing_job(&mut cluster, "alarm-webhook-app", "").await?;
    let log_id = cluster.trigger(job_id, None).await?;
    let delivery = delivery_of(&cluster, log_id).await?;
    assert_eq!(delivery, "webhook: sent (HTTP 200)");
    let bodies = hook.bodies();
    assert_eq!(bodies.len(), 2, "one refused POST, then the retry");
    let alarm: serde_json::Value = serde_json::from_str(&bodies[1])?;
    assert_eq!(alarm["job_id"], job_id);
    assert_eq!(alarm["log_id"], log_id);
    assert_eq!(alarm["status"], "FAILED");
    assert_eq!(alarm["attempt"], 0);
    assert_eq!(alarm["link"], format!("http://console.test/logs/{log_id}"));
    assert_eq!(alarm["app_name"], "alarm-webhook-app");
    let at = alarm["scheduled_at"].as_str().unwrap_or_default();
    assert!(at.ends_with(" (Europe/Berlin)"), "scheduled_at: {at}");
    assert!(alarm["trace_id"].is_string());
    let message = alarm["message"].as_str().unwrap_or_default();
    assert!(message.contains("failing on purpose"), "message: {message}");
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_flapping_job_is_rate_limited() -> anyhow::Result<()> {
    let hook = Hook::start(vec![]).await?;
    let mut cluster = cluster_with(AlarmConfig {
        webhook_url: hook.url.clone(),
        max_per_job: 2,
        rate_window: Duration::from_secs(600),
        ..alarm_config()
    })
    .await?;
    let job_id = failing_job(&mut cluster, "alarm-rate-app", "").await?;
    let rate_limited = r#"xjob_alarms_total{result="rate_limited"}"#;
    let before = counter(rate_limited);
    let mut deliveries = Vec::new();
    for _ in 0..4 {
        let log_id = cluster.trigger(job_id, None).await?;
        deliveries.push(delivery_of(&cluster, log_id).await?);
    }
    let sent = deliveries
        .iter()
        .filter(|d| d.starts_with("webhook: sent"))
        .count();
    let held = deliveries
        .iter()
        .filter(|d| d.starts_with("rate limited"))
        .count();
    assert_eq!((sent, held), (2, 2), "deliveries: {deliveries:?}");
    assert_eq!(hook.bodies().len(), 2);
    // Each held-back alarm is counted once, as rate-limited (no other test here rate-limits):
    // not as a failed delivery, which an alert watches.
    assert_eq!(counter(rate_limited) - before, 2.0);
    cluster.shutdown().await;
    Ok(())
}

/// A series of this process' admin metrics (shared by the tests of this binary).
fn counter(series: &str) -> f64 {
    xjob_admin::metrics::render()
        .lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Whether `python3 -m aiosmtpd` can run here; outside CI a missing module skips the test.
fn aiosmtpd_available() -> anyhow::Result<bool> {
    let importable = std::process::Command::new("python3")
        .args(["-c", "import aiosmtpd"])
        .status()
        .map(|status| status.success())
        .unwrap_or(false);
    if importable {
        return Ok(true);
    }
    if std::env::var_os("CI").is_some() {
        anyhow::bail!("python3 -m aiosmtpd is not importable; CI installs it (.ci/sidecar.sh)");
    }
    eprintln!("skipped: python3 -m aiosmtpd is not importable (pip install aiosmtpd)");
    Ok(false)
}

/// The messages aiosmtpd's Mailbox handler stored in `maildir`.
fn mails(maildir: &Path) -> Vec<String> {
    std::fs::read_dir(maildir.join("new"))
        .map(|entries| {
            entries
                .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path()).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The aiosmtpd server an alarm is mailed through.
enum SmtpServer<'a> {
    /// `python3 -m aiosmtpd` with these extra flags (TLS certificates).
    Cli(&'a [&'a str]),
    /// aiosmtpd through its Python API, requiring AUTH (PLAIN or LOGIN, offered without TLS:
    /// `auth_require_tls=False`, loopback only) with this user and password before MAIL.
    Auth { user: &'a str, password: &'a str },
}

/// aiosmtpd's Controller with an authenticator: argv is port, maildir, user, password.
const AUTH_SERVER: &str = r#"
import sys, threading
from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Mailbox
from aiosmtpd.smtp import AuthResult, LoginPassword
port, maildir, user, password = sys.argv[1:5]
def authenticator(server, session, envelope, mechanism, auth_data):
    ok = (isinstance(auth_data, LoginPassword)
          and auth_data.login == user.encode() and auth_data.password == password.encode())
    # handled=False: aiosmtpd itself answers a failure (535).
    return AuthResult(success=ok, handled=False)
Controller(Mailbox(maildir), hostname="127.0.0.1", port=int(port),
           authenticator=authenticator, auth_required=True, auth_require_tls=False).start()
threading.Event().wait()
"#;

impl SmtpServer<'_> {
    fn spawn(&self, port: u16, maildir: &Path) -> anyhow::Result<ChildProcess> {
        let mut command = std::process::Command::new("python3");
        match self {
            SmtpServer::Cli(flags) => command
                .args(["-m", "aiosmtpd", "-n", "-l"])
                .arg(format!("127.0.0.1:{port}"))
                .args(*flags)
                .args(["-c", "aiosmtpd.handlers.Mailbox"])
                .arg(maildir),
            SmtpServer::Auth { user, password } => command
                .args(["-c", AUTH_SERVER, &port.to_string()])
                .arg(maildir)
                .args([user, password]),
        };
        ChildProcess::spawn("aiosmtpd", &mut command)
    }
}

/// Mails one alarm through aiosmtpd started with `server_args` (TLS flags) and checks it
/// arrived; `configure` sets the admin's SMTP security.
async fn email_through(
    app: &str,
    server_args: &[&str],
    configure: impl FnOnce(&mut AlarmConfig),
) -> anyhow::Result<()> {
    email_outcome(app, SmtpServer::Cli(server_args), configure, true)
        .await
        .map(drop)
}

/// Mails one alarm through `server`; with `delivered` true checks it arrived, with false checks
/// the alarm failed and nothing arrived. Returns the run's `alarm_delivery`.
async fn email_outcome(
    app: &str,
    server: SmtpServer<'_>,
    configure: impl FnOnce(&mut AlarmConfig),
    delivered: bool,
) -> anyhow::Result<String> {
    let scratch = tempfile::tempdir()?;
    let maildir = scratch.path().join("maildir");
    let port = free_port()?;
    let _smtp = server.spawn(port, &maildir)?;
    wait_until(Duration::from_secs(20), "aiosmtpd listening", || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
    })
    .await?;
    let mut config = alarm_config();
    config.smtp.host = "localhost".to_string();
    config.smtp.port = port;
    config.smtp.from = "xjob <xjob@example.test>".to_string();
    configure(&mut config);
    let mut cluster = cluster_with(config).await?;
    let job_id = failing_job(&mut cluster, app, "ops@example.test, dev@example.test").await?;
    let log_id = cluster.trigger(job_id, None).await?;
    let delivery = delivery_of(&cluster, log_id).await?;
    if !delivered {
        assert!(
            delivery.starts_with("email: failed after 1 attempt(s)"),
            "{delivery}"
        );
        assert!(mails(&maildir).is_empty(), "nothing may arrive");
        cluster.shutdown().await;
        return Ok(delivery);
    }
    assert_eq!(delivery, "email: sent to 2 recipient(s)");
    let mails = wait_until(
        Duration::from_secs(10),
        "the mail in the maildir",
        || async {
            let mails = mails(&maildir);
            (!mails.is_empty()).then_some(mails)
        },
    )
    .await?;
    assert_eq!(mails.len(), 1, "one message to both recipients");
    let mail = &mails[0];
    assert!(
        mail.contains(&format!("Subject: [xjob] {app}: job {job_id} ")),
        "{mail}"
    );
    // The group, the time in the job's zone and the run's link.
    assert!(mail.contains(&format!("of {app} (")), "{mail}");
    assert!(mail.contains(" (Europe/Berlin)"), "{mail}");
    assert!(
        mail.contains(&format!("http://console.test/logs/{log_id}")),
        "{mail}"
    );
    assert!(mail.contains("ops@example.test") && mail.contains("dev@example.test"));
    assert!(mail.contains(&format!("Run (log id): {log_id}")), "{mail}");
    assert!(mail.contains("failing on purpose"), "{mail}");
    cluster.shutdown().await;
    Ok(delivery)
}

#[tokio::test]
async fn email_reaches_a_real_smtp_server() -> anyhow::Result<()> {
    if !aiosmtpd_available()? {
        return Ok(());
    }
    // A relay without TLS (loopback only in production).
    email_through("alarm-email-app", &[], |config| {
        config.smtp.security = SmtpSecurity::None;
    })
    .await
}

#[tokio::test]
async fn email_authenticates_with_the_configured_user_and_password() -> anyhow::Result<()> {
    if !aiosmtpd_available()? {
        return Ok(());
    }
    // The server refuses MAIL before a successful AUTH, so a mail that arrives authenticated.
    let server = || SmtpServer::Auth {
        user: "xjob",
        password: "s3cret",
    };
    let auth = |password: &'static str| {
        move |config: &mut AlarmConfig| {
            config.smtp.security = SmtpSecurity::None;
            config.smtp.username = "xjob".to_string();
            config.smtp.password = password.to_string();
            config.attempts = 1;
        }
    };
    email_outcome("alarm-auth-app", server(), auth("s3cret"), true).await?;
    let refused = email_outcome("alarm-bad-auth-app", server(), auth("wrong"), false).await?;
    assert!(
        refused.contains("535"),
        "the server's answer to a wrong password is recorded: {refused}"
    );
    Ok(())
}

#[tokio::test]
async fn email_over_starttls_and_smtps_checks_the_server_certificate() -> anyhow::Result<()> {
    if !aiosmtpd_available()? {
        return Ok(());
    }
    let certificates = tempfile::tempdir()?;
    if test_certificates(certificates.path())?.is_none() {
        return Ok(());
    }
    let file = |name: &str| {
        certificates
            .path()
            .join(name)
            .to_string_lossy()
            .into_owned()
    };
    let (cert, key, ca) = (file("leaf.pem"), file("leaf.key"), file("ca.pem"));
    // STARTTLS, required by the server before MAIL.
    email_through(
        "alarm-starttls-app",
        &["--tlscert", &cert, "--tlskey", &key],
        |config| {
            config.smtp.security = SmtpSecurity::Starttls;
            config.smtp.ca_file = ca.clone();
        },
    )
    .await?;
    // TLS from the first byte (SMTPS).
    email_through(
        "alarm-smtps-app",
        &["--smtpscert", &cert, "--smtpskey", &key],
        |config| {
            config.smtp.security = SmtpSecurity::Tls;
            config.smtp.ca_file = ca.clone();
        },
    )
    .await?;
    // Without the test CA the server's certificate does not verify: no mail leaves (aiosmtpd
    // prints the refused handshake to stderr).
    email_outcome(
        "alarm-untrusted-smtp-app",
        SmtpServer::Cli(&["--tlscert", &cert, "--tlskey", &key]),
        |config| {
            config.smtp.security = SmtpSecurity::Starttls;
            config.attempts = 1;
        },
        false,
    )
    .await?;
    Ok(())
}

/// A test CA and a `localhost` certificate it signed, made with the openssl CLI; `None` (with
/// the reason printed) when openssl is missing outside CI.
fn test_certificates(dir: &Path) -> anyhow::Result<Option<()>> {
    let openssl = |args: &[&str]| {
        std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map(|status| status.success())
    };
    match openssl(&["version"]) {
        Ok(true) => {}
        _ if std::env::var_os("CI").is_some() => anyhow::bail!("openssl CLI missing in CI"),
        _ => {
            eprintln!("skipped: the openssl CLI is not installed (it makes the test CA)");
            return Ok(None);
        }
    }
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )?;
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let steps: [Vec<&str>; 3] = [
        [
            &["req", "-x509"][..],
            &ec,
            &["-keyout", "ca.key", "-out", "ca.pem"],
            &["-days", "2", "-subj", "/CN=xjob test CA"],
        ]
        .concat(),
        [
            &["req"][..],
            &ec,
            &["-keyout", "leaf.key", "-out", "leaf.csr"],
            &["-subj", "/CN=localhost"],
        ]
        .concat(),
        vec![
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
        ],
    ];
    for step in steps {
        anyhow::ensure!(openssl(&step)?, "openssl {step:?} failed");
    }
    Ok(Some(()))
}

#[tokio::test]
async fn https_webhook_checks_the_server_certificate() -> anyhow::Result<()> {
    let scratch = tempfile::tempdir()?;
    if test_certificates(scratch.path())?.is_none() {
        return Ok(());
    }
    let chain = CertificateDer::pem_file_iter(scratch.path().join("leaf.pem"))?
        .collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(scratch.path().join("leaf.key"))?;
    let server = ServerConfig::builder_with_provider(Arc::new(default_provider()))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    let hook = Hook::serve(vec![], Some(TlsAcceptor::from(Arc::new(server)))).await?;
    let ca_file = scratch.path().join("ca.pem").to_string_lossy().into_owned();

    // Trusting the test CA: delivered over TLS.
    let mut cluster = cluster_with(AlarmConfig {
        webhook_url: hook.url.clone(),
        webhook_ca_file: ca_file,
        ..alarm_config()
    })
    .await?;
    let job_id = failing_job(&mut cluster, "alarm-https-app", "").await?;
    let log_id = cluster.trigger(job_id, None).await?;
    assert_eq!(
        delivery_of(&cluster, log_id).await?,
        "webhook: sent (HTTP 200)"
    );
    assert_eq!(hook.bodies().len(), 1);
    cluster.shutdown().await;

    // With the built-in roots only, the test CA's certificate is refused: nothing arrives.
    let mut cluster = cluster_with(AlarmConfig {
        webhook_url: hook.url.clone(),
        attempts: 1,
        ..alarm_config()
    })
    .await?;
    let job_id = failing_job(&mut cluster, "alarm-https-untrusted-app", "").await?;
    let log_id = cluster.trigger(job_id, None).await?;
    let delivery = delivery_of(&cluster, log_id).await?;
    assert!(
        delivery.starts_with("webhook: failed after 1 attempt(s): TLS with localhost"),
        "{delivery}"
    );
    assert_eq!(
        hook.bodies().len(),
        1,
        "no request over an untrusted connection"
    );
    cluster.shutdown().await;
    Ok(())
}

/// An SMTP server that accepts connections and never says a word (no greeting): each delivery
/// attempt waits for its full timeout. It keeps every connection open until dropped.
struct MuteSmtp {
    port: u16,
    accepted: Arc<Mutex<Vec<tokio::net::TcpStream>>>,
    task: tokio::task::JoinHandle<()>,
}

impl MuteSmtp {
    async fn start() -> anyhow::Result<MuteSmtp> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let held = Arc::clone(&accepted);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                if let Ok(mut held) = held.lock() {
                    held.push(stream);
                }
            }
        });
        Ok(MuteSmtp {
            port,
            accepted,
            task,
        })
    }

    fn connections(&self) -> usize {
        self.accepted.lock().map(|held| held.len()).unwrap_or(0)
    }
}

impl Drop for MuteSmtp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test]
async fn a_hung_smtp_server_holds_up_no_retry_and_no_fire() -> anyhow::Result<()> {
    let smtp = MuteSmtp::start().await?;
    let mut config = AlarmConfig {
        attempts: 3,
        timeout: Duration::from_secs(10),
        retry_delay: Duration::from_secs(1),
        ..alarm_config()
    };
    config.smtp.host = "127.0.0.1".to_string();
    config.smtp.port = smtp.port;
    config.smtp.security = SmtpSecurity::None;
    let mut cluster = cluster_with(config).await?;
    let app = "alarm-hung-smtp-app";
    let group_id = cluster.create_group(app).await?;
    cluster
        .start_executor(
            cluster
                .executor(app)
                .handler("fail", fails)
                .handler("ok", succeeds),
        )
        .await?;
    // Alarms on every failure, retried once after 1 s: the first failure's alarm hangs on the
    // mute server for ~33 s (3 attempts × 10 s + pauses) while the retry is due after 1 s.
    let failing = cluster
        .create_job(pb::Job {
            alarm_email: "ops@example.test".to_string(),
            alarm_on_every_failure: true,
            fail_retry_count: 1,
            retry_backoff: Some(pb::RetryBackoff {
                initial_delay_ms: 1000,
                factor: 1.0,
                max_delay_ms: 0,
            }),
            ..TestCluster::job(group_id, "fail", pb::ScheduleType::None, "")
        })
        .await?;
    let every_second = cluster
        .create_job(TestCluster::job(
            group_id,
            "ok",
            pb::ScheduleType::FixRate,
            "1",
        ))
        .await?;
    cluster.start_job(every_second.id).await?;

    let first = cluster.trigger(failing.id, None).await?;
    let first = cluster
        .wait_log_final(first, Duration::from_secs(10))
        .await?;
    let retry = wait_until(Duration::from_secs(10), "the retry's dispatch", || async {
        let logs = cluster.logs(failing.id).await.ok()?;
        logs.into_iter()
            .find(|log| log.attempt == 1 && log.trigger_time_ms > 0)
    })
    .await?;
    // The backoff starts when the follow-up sees the failure (within a round of 50 ms).
    let late_by = retry.trigger_time_ms - first.handle_time_ms - 1000;
    eprintln!("the retry came {late_by} ms after its 1 s delay");
    assert!(
        late_by < 2000,
        "the retry came {late_by} ms after its 1 s delay (the alarm's ~33 s used to hold it)"
    );
    let retry = cluster
        .wait_log_final(retry.id, Duration::from_secs(10))
        .await?;
    assert!(smtp.connections() >= 1, "the alarm went to the mute server");
    // Its alarm waits for delivery meanwhile; the run says so.
    assert_eq!(
        cluster.get_log(first.id).await?.alarm_delivery,
        "queued for delivery"
    );

    // The every-second job kept firing while both alarms hung (a few more fires after the
    // retry ended: none waits for the alarm).
    let fires_before = cluster.logs(every_second.id).await?.len();
    wait_until(Duration::from_secs(10), "three more fires", || async {
        let fires = cluster.logs(every_second.id).await.ok()?.len();
        (fires >= fires_before + 3).then_some(())
    })
    .await?;
    assert!(
        cluster.get_log(retry.id).await?.alarm_delivery == "queued for delivery",
        "the test ended before the alarms gave up; it proves nothing otherwise"
    );
    cluster.shutdown().await;
    Ok(())
}
