//! The safe default with the real `xjob` binary: a non-loopback listener with no users refuses
//! to start and says how to create the first admin; `xjob user create` prints a token once,
//! after which the same listener starts and every JobAdmin call needs that token.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tonic::Request;
use tonic::metadata::MetadataValue;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;
use xjob_testkit::{ChildProcess, free_port, wait_until};

const XJOB: &str = env!("CARGO_BIN_EXE_xjob");
const EXIT_WITHIN: Duration = Duration::from_secs(30);

fn serve_command(data_dir: &std::path::Path, listen: &str) -> Command {
    let mut command = Command::new(XJOB);
    command
        .args(["serve", "--listen", listen, "--data-dir"])
        .arg(data_dir)
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .env_remove("XJOB_BOOTSTRAP_TOKEN")
        .env_remove("XJOB_INSECURE_OPEN_ADMIN_API");
    command
}

/// Runs `command` to its end (bounded) and returns (success, stdout, stderr).
fn run_bounded(command: &mut Command) -> anyhow::Result<(bool, String, String)> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let deadline = Instant::now() + EXIT_WITHIN;
    loop {
        if let Some(status) = child.try_wait()? {
            let output = child.wait_with_output()?;
            return Ok((
                status.success(),
                String::from_utf8_lossy(&output.stdout).into_owned(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            ));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("{command:?} did not exit within {EXIT_WITHIN:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test]
async fn non_loopback_without_users_refuses_until_an_admin_is_created() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let port = free_port()?;
    let listen = format!("0.0.0.0:{port}");

    // No users, a listener on every interface: refused, naming the ways out.
    let (ok, _, stderr) = run_bounded(&mut serve_command(dir.path(), &listen))?;
    assert!(!ok, "xjob serve must refuse: {stderr}");
    assert!(
        stderr.contains("xjob user create --role admin NAME")
            && stderr.contains("XJOB_BOOTSTRAP_TOKEN"),
        "the refusal says how to create the first admin: {stderr}"
    );

    // The first admin, created against the same database; its token is printed once.
    let mut create = Command::new(XJOB);
    create
        .args(["user", "create", "--role", "admin", "alice", "--data-dir"])
        .arg(dir.path())
        .env("RUST_LOG", "warn");
    let (ok, stdout, stderr) = run_bounded(&mut create)?;
    assert!(ok, "xjob user create failed: {stderr}");
    let token = stdout.trim().to_string();
    assert!(token.starts_with("xjob_") && token.len() > 40, "{stdout}");
    // A second user with the same name is refused.
    let (ok, _, stderr) = run_bounded(&mut create)?;
    assert!(!ok && stderr.contains("already exists"), "{stderr}");

    // Now the same listener starts, and JobAdmin needs the token.
    let _admin = ChildProcess::spawn("auth-admin", &mut serve_command(dir.path(), &listen))?;
    let url = format!("http://127.0.0.1:{port}");
    // It serves once an unauthenticated call is answered, and refused.
    let (mut client, refused) = wait_until(Duration::from_secs(20), "the admin to serve", || {
        let url = url.clone();
        async move {
            let mut client = JobAdminClient::connect(url).await.ok()?;
            let refused = client.who_am_i(pb::WhoAmIRequest {}).await.err()?;
            Some((client, refused))
        }
    })
    .await?;
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    let mut request = Request::new(pb::WhoAmIRequest {});
    let bearer = MetadataValue::try_from(format!("Bearer {token}"))?;
    request
        .metadata_mut()
        .insert("authorization", bearer.clone());
    let me = client.who_am_i(request).await?.into_inner();
    let user = me.user.ok_or_else(|| anyhow::anyhow!("no user"))?;
    assert_eq!((user.name.as_str(), user.role.as_str()), ("alice", "admin"));
    assert!(!me.open);

    // The user made on the command line is in the audit trail, named by its token's prefix
    // only.
    let mut request = Request::new(pb::ListAuditRequest::default());
    request.metadata_mut().insert("authorization", bearer);
    let entries = client.list_audit(request).await?.into_inner().entries;
    let made = entries
        .iter()
        .find(|entry| entry.call == "CreateUser")
        .ok_or_else(|| anyhow::anyhow!("no CreateUser row: {entries:?}"))?;
    assert_eq!(made.actor, "(command line)");
    assert_eq!(made.object, format!("user:{}", user.id));
    assert!(
        made.summary.contains("name 'alice', role admin"),
        "{made:?}"
    );
    assert!(!made.summary.contains(&token), "{made:?}");
    Ok(())
}

#[test]
fn a_boolean_variable_that_is_not_a_boolean_stops_the_start() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut serve = serve_command(dir.path(), &format!("127.0.0.1:{}", free_port()?));
    serve.env("XJOB_EXECUTOR_PEER_CHECK", "ture");
    let (ok, _, stderr) = run_bounded(&mut serve)?;
    assert!(!ok, "a typo must not start the admin: {stderr}");
    assert!(
        stderr.contains("XJOB_EXECUTOR_PEER_CHECK") && stderr.contains("'ture' is not a boolean"),
        "{stderr}"
    );
    Ok(())
}

#[tokio::test]
async fn a_bootstrap_token_creates_the_first_admin() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let port = free_port()?;
    let listen = format!("0.0.0.0:{port}");

    // Too short to guard a fresh cluster: refused, nothing created.
    let mut short = serve_command(dir.path(), &listen);
    short.env("XJOB_BOOTSTRAP_TOKEN", "short");
    let (ok, _, stderr) = run_bounded(&mut short)?;
    assert!(!ok && stderr.contains("bootstrap_token"), "{stderr}");

    let token = "bootstrap-0123456789abcdef0123456789";
    let mut serve = serve_command(dir.path(), &listen);
    serve.env("XJOB_BOOTSTRAP_TOKEN", token);
    let _admin = ChildProcess::spawn("auth-bootstrap-admin", &mut serve)?;
    let url = format!("http://127.0.0.1:{port}");
    let mut client = wait_until(Duration::from_secs(20), "the admin to serve", || {
        let url = url.clone();
        async move { JobAdminClient::connect(url).await.ok() }
    })
    .await?;
    let mut request = Request::new(pb::WhoAmIRequest {});
    let bearer = MetadataValue::try_from(format!("Bearer {token}"))?;
    request.metadata_mut().insert("authorization", bearer);
    let me = client.who_am_i(request).await?.into_inner();
    let user = me.user.ok_or_else(|| anyhow::anyhow!("no user"))?;
    assert_eq!((user.name.as_str(), user.role.as_str()), ("admin", "admin"));
    Ok(())
}

/// Laptop mode (no users, no executor token, loopback): the start says that token-less groups
/// are open to every local process.
#[tokio::test]
async fn laptop_mode_says_that_any_local_process_can_register() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let log_path = dir.path().join("admin.log");
    let log = std::fs::File::create(&log_path)?;
    let mut serve = serve_command(dir.path(), &format!("127.0.0.1:{}", free_port()?));
    serve
        .env_remove("XJOB_EXECUTOR_TOKEN")
        .stderr(log.try_clone()?);
    let _admin = ChildProcess::spawn_with_stdout("laptop-admin", &mut serve, log.into())?;
    wait_until(
        Duration::from_secs(20),
        "the open-registry warning",
        || async {
            let text = std::fs::read_to_string(&log_path).ok()?;
            text.contains("any local process can register")
                .then_some(())
        },
    )
    .await?;
    Ok(())
}
