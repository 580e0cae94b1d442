//! The documented grpcurl commands (docs/grpcurl.md, docs/security.md "grpcurl"),
//! run with the real grpcurl binary against the real `xjob` process:
//!
//! - plaintext on loopback: `list` (server reflection), `grpc.health.v1.Health/Check` and the
//!   README's `CreateGroup` / `CreateJob` / `ListJobs` with their JSON as written there;
//! - server TLS: `-cacert` works (with `-H "authorization: Bearer …"` once a user exists); no
//!   CA, another CA or `-plaintext` fail;
//! - mTLS (`tls_client_auth = "all"`): `-cert`/`-key` work, a call without them fails; an SDK
//!   executor with `require_client_cert` answers health to the admin's own pair;
//! - API tokens: with a user made by `xjob user create`, `-H "authorization: Bearer …"` works and
//!   a call without it is `UNAUTHENTICATED`.
//!
//! grpcurl is built by `.ci/grpcurl.sh` and found through `XJOB_GRPCURL_BIN`. Without it each
//! test says so and passes outside CI; in CI (`CI` set) it fails.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use serde_json::Value;
use xjob_executor::{Executor, JobContext, JobOutput, JobResult};
use xjob_testkit::{AdminOutput, AdminProcess, AdminSpec, free_port, wait_until};

const XJOB: &str = env!("CARGO_BIN_EXE_xjob");
/// How long an admin (or executor) may take to serve on a loaded machine.
const START_WITHIN: Duration = Duration::from_secs(30);
/// Bound on one grpcurl or `xjob user create` process, beyond grpcurl's own `-max-time`.
const COMMAND_WITHIN: Duration = Duration::from_secs(30);

/// The grpcurl binary, or why the test cannot run.
fn grpcurl_binary() -> Result<PathBuf, String> {
    match std::env::var("XJOB_GRPCURL_BIN") {
        Ok(path) if Path::new(&path).is_file() => Ok(PathBuf::from(path)),
        Ok(path) => Err(format!("XJOB_GRPCURL_BIN={path} is not a file")),
        Err(_) => Err("XJOB_GRPCURL_BIN is not set (build grpcurl with .ci/grpcurl.sh)".into()),
    }
}

/// The grpcurl binary; `None` (after saying why) when the test should pass without running.
fn grpcurl_or_skip(test: &str) -> anyhow::Result<Option<Grpcurl>> {
    match grpcurl_binary() {
        Ok(binary) => Ok(Some(Grpcurl { binary })),
        Err(reason) if std::env::var_os("CI").is_some() => {
            anyhow::bail!("the grpcurl test {test} cannot run in CI: {reason}")
        }
        Err(reason) => {
            eprintln!("skipping the grpcurl test {test}: {reason}");
            Ok(None)
        }
    }
}

/// What one command printed and whether it succeeded.
#[derive(Debug)]
struct Outcome {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Outcome {
    /// stdout as JSON (grpcurl prints one message per call here).
    fn json(&self) -> anyhow::Result<Value> {
        serde_json::from_str(&self.stdout)
            .map_err(|error| anyhow::anyhow!("grpcurl printed no JSON ({error}): {self:?}"))
    }
}

/// Runs `command` to its end, bounded by [`COMMAND_WITHIN`] (killed past it).
async fn run(command: &mut tokio::process::Command) -> anyhow::Result<Outcome> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(COMMAND_WITHIN, command.output())
        .await
        .map_err(|_| anyhow::anyhow!("{command:?} did not exit within {COMMAND_WITHIN:?}"))??;
    Ok(Outcome {
        ok: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// The grpcurl binary and how the tests call it.
struct Grpcurl {
    binary: PathBuf,
}

impl Grpcurl {
    /// `grpcurl ARGS…`: the arguments exactly as a user types them (flags, `-d` JSON, address,
    /// method), plus time bounds so a hung server fails the test instead of stalling it.
    async fn call(&self, args: &[&str]) -> anyhow::Result<Outcome> {
        let mut command = tokio::process::Command::new(&self.binary);
        command
            .args(["-connect-timeout", "5", "-max-time", "15"])
            .args(args)
            // Loopback only: never through a proxy a CI machine may configure.
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy");
        run(&mut command).await
    }

    /// Waits until `Health/Check` over `flags` answers SERVING: the admin runs and its schedule
    /// loops make progress (health needs no token, so this works on every admin here).
    async fn wait_serving(&self, flags: &[&str], address: &str) -> anyhow::Result<()> {
        let last = std::sync::Mutex::new(None);
        let what = format!("grpcurl {flags:?} {address} to see SERVING");
        let waited = wait_until(START_WITHIN, &what, || async {
            let mut args = flags.to_vec();
            args.extend([address, "grpc.health.v1.Health/Check"]);
            let outcome = self.call(&args).await.ok()?;
            if outcome.stdout.contains("\"SERVING\"") {
                return Some(());
            }
            if let Ok(mut last) = last.lock() {
                *last = Some(outcome);
            }
            // Each poll is a process: poll gently while the server starts.
            tokio::time::sleep(Duration::from_millis(200)).await;
            None
        })
        .await;
        // A server that never serves: say what grpcurl last printed.
        waited.map_err(|error| {
            let last = last.into_inner().ok().flatten();
            anyhow::anyhow!("{error}; last answer: {last:?}")
        })
    }
}

/// Asserts that `outcome` failed, and says what it printed when it did not.
fn assert_refused(outcome: &Outcome, what: &str) {
    assert!(!outcome.ok, "{what} must fail: {outcome:?}");
}

/// Asserts that grpcurl got no connection at all (TLS refused it), not a gRPC status: the
/// server was serving the same calls to a client with the right flags just before.
fn assert_not_connected(outcome: &Outcome, what: &str) {
    assert_refused(outcome, what);
    assert!(
        outcome.stderr.contains("Failed to dial target host"),
        "{what} must fail in the TLS handshake: {outcome:?}"
    );
}

/// A CA and the leaf certificates it signs, as PEM files in one directory. Leaves name
/// `127.0.0.1` (what grpcurl dials) and allow server and client use, so one pair can serve and
/// present, as docs/security.md's `openssl` recipe makes them.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
    dir: PathBuf,
    name: String,
}

impl Ca {
    fn new(dir: &Path, name: &str) -> anyhow::Result<Ca> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{name} test CA"));
        let ca = Ca {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate()?)?,
            dir: dir.to_path_buf(),
            name: name.to_string(),
        };
        std::fs::write(ca.pem(), ca.issuer.pem())?;
        Ok(ca)
    }

    /// The CA certificate's file (grpcurl's `-cacert`).
    fn pem(&self) -> PathBuf {
        self.dir.join(format!("{}-ca.pem", self.name))
    }

    /// A certificate for `who`: its (certificate, key) files.
    fn issue(&self, who: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()])?;
        params.distinguished_name.push(DnType::CommonName, who);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key_pair = KeyPair::generate()?;
        let certificate = params.signed_by(&key_pair, &*self.issuer)?;
        let cert = self.dir.join(format!("{}-{who}.pem", self.name));
        let key = self.dir.join(format!("{}-{who}.key", self.name));
        std::fs::write(&key, key_pair.serialize_pem())?;
        std::fs::write(&cert, certificate.pem())?;
        Ok((cert, key))
    }
}

/// `xjob serve` on a free loopback port with `config` (TOML) and its own data directory in
/// `dir`; its output goes to `dir/admin.log`, printed when a test fails.
fn spawn_admin(dir: &Path, name: &str, config: &str) -> anyhow::Result<AdminProcess> {
    let config_file = dir.join(format!("{name}.toml"));
    std::fs::write(&config_file, format!("time_zone = \"UTC\"\n{config}"))?;
    AdminProcess::spawn(AdminSpec {
        binary: XJOB.into(),
        node_id: name.into(),
        port: free_port()?,
        data_dir: dir.join(format!("{name}-data")),
        database_url: None,
        config_file,
        log_filter: "warn".into(),
        output: AdminOutput::AppendTo(dir.join(format!("{name}.log"))),
        env: Vec::new(),
    })
}

/// README: `xjob user create --role admin NAME` against the database of the admin that
/// [`spawn_admin`] starts as `admin` in `dir`, before it starts; returns the token it prints
/// once on stdout.
async fn create_admin_user(dir: &Path, admin: &str, name: &str) -> anyhow::Result<String> {
    let mut create = tokio::process::Command::new(XJOB);
    create
        .args(["user", "create", "--role", "admin", name, "--data-dir"])
        .arg(dir.join(format!("{admin}-data")))
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1");
    let created = run(&mut create).await?;
    anyhow::ensure!(created.ok, "xjob user create: {created:?}");
    let token = created.stdout.trim().to_string();
    anyhow::ensure!(token.starts_with("xjob_"), "not a token: {created:?}");
    Ok(token)
}

/// `127.0.0.1:PORT`, the address as grpcurl takes it.
fn address(admin: &AdminProcess) -> String {
    format!("127.0.0.1:{}", admin.spec.port)
}

/// A TOML string value for a path.
fn toml_path(path: &Path) -> String {
    format!("{:?}", path.display().to_string())
}

fn path_arg(path: &Path) -> anyhow::Result<&str> {
    path.to_str()
        .ok_or_else(|| anyhow::anyhow!("not UTF-8: {}", path.display()))
}

/// Runs `body`; on failure adds the admin's last log lines to the error.
async fn with_log<T>(
    admin: &AdminProcess,
    body: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    body.await
        .map_err(|error| anyhow::anyhow!("{error:#}\nadmin log:\n{}", admin.log_tail(30)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_loopback_list_health_and_the_readme_calls() -> anyhow::Result<()> {
    let Some(grpcurl) = grpcurl_or_skip("plaintext_loopback")? else {
        return Ok(());
    };
    let dir = tempfile::tempdir()?;
    let admin = spawn_admin(dir.path(), "plain", "")?;
    let addr = address(&admin);
    let addr = addr.as_str();
    with_log(&admin, async {
        grpcurl.wait_serving(&["-plaintext"], addr).await?;

        // Server reflection: every service of the contract, and reflection itself.
        let list = grpcurl.call(&["-plaintext", addr, "list"]).await?;
        assert!(list.ok, "{list:?}");
        let services: Vec<&str> = list.stdout.lines().collect();
        for service in [
            "grpc.health.v1.Health",
            "xjob.v1.JobAdmin",
            "xjob.v1.Registry",
            "xjob.v1.ExecutorService",
        ] {
            assert!(services.contains(&service), "{service} in {services:?}");
        }
        assert!(
            services.iter().any(|s| s.starts_with("grpc.reflection.")),
            "{services:?}"
        );
        // `describe`, as the README suggests.
        let described = grpcurl
            .call(&["-plaintext", addr, "describe", "xjob.v1.Job"])
            .await?;
        assert!(
            described.ok && described.stdout.contains("message Job {"),
            "{described:?}"
        );

        // Health of the whole server and of JobAdmin, as README and operations.md write it.
        let health = grpcurl
            .call(&["-plaintext", addr, "grpc.health.v1.Health/Check"])
            .await?;
        assert_eq!(health.json()?["status"], "SERVING", "{health:?}");
        let health = grpcurl
            .call(&[
                "-plaintext",
                "-d",
                r#"{"service": "xjob.v1.JobAdmin"}"#,
                addr,
                "grpc.health.v1.Health/Check",
            ])
            .await?;
        assert_eq!(health.json()?["status"], "SERVING", "{health:?}");

        // Open on loopback while no user exists.
        let me = grpcurl
            .call(&["-plaintext", addr, "xjob.v1.JobAdmin/WhoAmI"])
            .await?;
        assert_eq!(me.json()?["open"], true, "{me:?}");

        // The README's CreateGroup and CreateJob, their JSON as written there.
        let group = grpcurl
            .call(&[
                "-plaintext",
                "-d",
                r#"{"group": {"appName": "orders-sync", "title": "Order sync executors", "addressType": "ADDRESS_TYPE_AUTO"}}"#,
                addr,
                "xjob.v1.JobAdmin/CreateGroup",
            ])
            .await?;
        let group_id = group.json()?["group"]["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow::anyhow!("no group id: {group:?}"))?;
        let again = grpcurl
            .call(&[
                "-plaintext",
                "-d",
                r#"{"group": {"appName": "orders-sync", "title": "Order sync executors", "addressType": "ADDRESS_TYPE_AUTO"}}"#,
                addr,
                "xjob.v1.JobAdmin/CreateGroup",
            ])
            .await?;
        assert_refused(&again, "a second CreateGroup orders-sync");
        assert!(
            again.stderr.contains("Code: AlreadyExists")
                && again
                    .stderr
                    .contains("group.app_name: 'orders-sync' already exists"),
            "{again:?}"
        );
        let job_json = format!(
            r#"{{"job": {{
  "groupId": {group_id},
  "name": "hello every minute",
  "author": "me",
  "scheduleType": "SCHEDULE_TYPE_CRON",
  "scheduleConf": "0 * * * * ?",
  "timeZone": "Europe/Berlin",
  "misfireStrategy": "MISFIRE_STRATEGY_DO_NOTHING",
  "routeStrategy": "ROUTE_STRATEGY_ROUND",
  "blockStrategy": "BLOCK_STRATEGY_SERIAL_EXECUTION",
  "glueType": "GLUE_TYPE_BEAN",
  "handler": "demoHello",
  "params": "grpcurl"
}}}}"#
        );
        let job = grpcurl
            .call(&["-plaintext", "-d", &job_json, addr, "xjob.v1.JobAdmin/CreateJob"])
            .await?;
        assert_eq!(
            job.json()?["job"]["status"],
            "JOB_STATUS_STOPPED",
            "{job:?}"
        );

        let filter = format!(r#"{{"groupId": {group_id}}}"#);
        let jobs = grpcurl
            .call(&["-plaintext", "-d", &filter, addr, "xjob.v1.JobAdmin/ListJobs"])
            .await?;
        let jobs = jobs.json()?;
        let names: Vec<&str> = jobs["jobs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|job| job["name"].as_str())
            .collect();
        assert_eq!(names, ["hello every minute"], "{jobs}");
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_admin_answers_grpcurl_with_cacert_only() -> anyhow::Result<()> {
    let Some(grpcurl) = grpcurl_or_skip("tls")? else {
        return Ok(());
    };
    let dir = tempfile::tempdir()?;
    let ca = Ca::new(dir.path(), "main")?;
    let other = Ca::new(dir.path(), "other")?;
    let (cert, key) = ca.issue("admin")?;
    let token = create_admin_user(dir.path(), "tls", "tina").await?;
    let admin = spawn_admin(
        dir.path(),
        "tls",
        &format!(
            "tls_cert = {}\ntls_key = {}\n",
            toml_path(&cert),
            toml_path(&key)
        ),
    )?;
    let addr = address(&admin);
    let addr = addr.as_str();
    let ca_pem = ca.pem();
    let ca_pem = path_arg(&ca_pem)?;
    with_log(&admin, async {
        grpcurl.wait_serving(&["-cacert", ca_pem], addr).await?;

        // docs/security.md: `grpcurl -cacert ca.pem admin.example:8080 list`.
        let list = grpcurl.call(&["-cacert", ca_pem, addr, "list"]).await?;
        assert!(
            list.ok && list.stdout.lines().any(|s| s == "xjob.v1.JobAdmin"),
            "{list:?}"
        );
        // docs/security.md: the API token over TLS, as with -plaintext.
        let bearer = format!("authorization: Bearer {token}");
        let me = grpcurl
            .call(&[
                "-cacert",
                ca_pem,
                "-H",
                &bearer,
                addr,
                "xjob.v1.JobAdmin/WhoAmI",
            ])
            .await?;
        assert_eq!(me.json()?["user"]["name"], "tina", "{me:?}");
        let anonymous = grpcurl
            .call(&["-cacert", ca_pem, addr, "xjob.v1.JobAdmin/ListGroups"])
            .await?;
        assert_refused(&anonymous, "ListGroups over TLS without a token");
        assert!(
            anonymous.stderr.contains("Code: Unauthenticated"),
            "{anonymous:?}"
        );

        // Without the CA the system's roots do not know the admin's certificate.
        let no_ca = grpcurl.call(&[addr, "list"]).await?;
        assert_not_connected(&no_ca, "grpcurl without -cacert");
        assert!(no_ca.stderr.contains("x509"), "{no_ca:?}");
        let other_pem = other.pem();
        let wrong_ca = grpcurl
            .call(&["-cacert", path_arg(&other_pem)?, addr, "list"])
            .await?;
        assert_not_connected(&wrong_ca, "grpcurl trusting another CA");
        let plaintext = grpcurl.call(&["-plaintext", addr, "list"]).await?;
        assert_not_connected(&plaintext, "grpcurl -plaintext against a TLS admin");
        Ok(())
    })
    .await
}

async fn ok_handler(_ctx: JobContext) -> JobResult {
    Ok(JobOutput::message("done"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mtls_admin_and_executor_answer_grpcurl_with_a_client_certificate() -> anyhow::Result<()> {
    let Some(grpcurl) = grpcurl_or_skip("mtls")? else {
        return Ok(());
    };
    let dir = tempfile::tempdir()?;
    let ca = Ca::new(dir.path(), "main")?;
    let (admin_cert, admin_key) = ca.issue("admin")?;
    let (client_cert, client_key) = ca.issue("client")?;
    let admin = spawn_admin(
        dir.path(),
        "mtls",
        &format!(
            "tls_cert = {}\ntls_key = {}\ntls_ca = {}\ntls_client_auth = \"all\"\n",
            toml_path(&admin_cert),
            toml_path(&admin_key),
            toml_path(&ca.pem())
        ),
    )?;
    let addr = address(&admin);
    let addr = addr.as_str();
    let ca_pem = ca.pem();
    let ca_pem = path_arg(&ca_pem)?;
    let with_client = [
        "-cacert",
        ca_pem,
        "-cert",
        path_arg(&client_cert)?,
        "-key",
        path_arg(&client_key)?,
    ];
    with_log(&admin, async {
        grpcurl.wait_serving(&with_client, addr).await?;

        // docs/security.md: `grpcurl -cacert ca.pem -cert client.pem -key client.key … ListGroups`.
        let mut args = with_client.to_vec();
        args.extend([addr, "xjob.v1.JobAdmin/ListGroups"]);
        let groups = grpcurl.call(&args).await?;
        assert!(groups.ok, "{groups:?}");
        let mut args = with_client.to_vec();
        args.extend([addr, "list"]);
        let list = grpcurl.call(&args).await?;
        assert!(
            list.ok && list.stdout.lines().any(|s| s == "xjob.v1.JobAdmin"),
            "{list:?}"
        );

        // "all": no TLS session without a client certificate, whatever the call.
        let anonymous = grpcurl
            .call(&["-cacert", ca_pem, addr, "xjob.v1.JobAdmin/ListGroups"])
            .await?;
        assert_not_connected(
            &anonymous,
            "grpcurl without -cert/-key against tls_client_auth=all",
        );
        let anonymous = grpcurl
            .call(&["-cacert", ca_pem, addr, "grpc.health.v1.Health/Check"])
            .await?;
        assert_not_connected(&anonymous, "a health check without -cert/-key");

        // docs/security.md: an executor with require_client_cert, the admin's own pair as the
        // client certificate. Executors serve no reflection, so grpcurl takes the health
        // service's schema from a protoset it first wrote from the admin's reflection.
        let protoset = dir.path().join("health.protoset");
        let mut args = with_client.to_vec();
        args.extend(["-protoset-out", path_arg(&protoset)?]);
        args.extend([addr, "describe", "grpc.health.v1.Health"]);
        let described = grpcurl.call(&args).await?;
        assert!(described.ok && protoset.is_file(), "{described:?}");
        let executor = Executor::builder()
            .app_name("grpcurl-app")
            .admin_addrs([format!("https://{addr}")])
            .bind("127.0.0.1:0")
            .log_dir(dir.path().join("executor-logs"))
            .shutdown_grace(Duration::from_secs(1))
            .handler("ok", ok_handler)
            .tls(&admin_cert, &admin_key)
            .tls_ca(ca.pem())
            .require_client_cert(true)
            .start()
            .await?;
        let executor_addr = executor
            .address()
            .strip_prefix("https://")
            .ok_or_else(|| anyhow::anyhow!("not https: {}", executor.address()))?
            .to_string();
        let with_admin_pair = [
            "-protoset",
            path_arg(&protoset)?,
            "-cacert",
            ca_pem,
            "-cert",
            path_arg(&admin_cert)?,
            "-key",
            path_arg(&admin_key)?,
        ];
        grpcurl
            .wait_serving(&with_admin_pair, &executor_addr)
            .await?;
        let anonymous = grpcurl
            .call(&[
                "-protoset",
                path_arg(&protoset)?,
                "-cacert",
                ca_pem,
                &executor_addr,
                "grpc.health.v1.Health/Check",
            ])
            .await?;
        assert_not_connected(&anonymous, "an executor health check without -cert/-key");
        executor.shutdown().await;
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_token_from_xjob_user_create_authenticates_grpcurl() -> anyhow::Result<()> {
    let Some(grpcurl) = grpcurl_or_skip("bearer_token")? else {
        return Ok(());
    };
    let dir = tempfile::tempdir()?;
    let token = create_admin_user(dir.path(), "auth", "alice").await?;
    let admin = spawn_admin(dir.path(), "auth", "")?;
    let addr = address(&admin);
    let addr = addr.as_str();
    with_log(&admin, async {
        grpcurl.wait_serving(&["-plaintext"], addr).await?;
        let bearer = format!("authorization: Bearer {token}");

        // README and docs/security.md: `grpcurl -plaintext -H "authorization: Bearer $XJOB_TOKEN"
        // 127.0.0.1:8080 xjob.v1.JobAdmin/WhoAmI`.
        let me = grpcurl
            .call(&["-plaintext", "-H", &bearer, addr, "xjob.v1.JobAdmin/WhoAmI"])
            .await?;
        let me = me.json()?;
        assert_eq!(me["user"]["name"], "alice", "{me}");
        assert_eq!(me["user"]["role"], "admin", "{me}");
        let jobs = grpcurl
            .call(&[
                "-plaintext",
                "-H",
                &bearer,
                addr,
                "xjob.v1.JobAdmin/ListJobs",
            ])
            .await?;
        assert!(jobs.ok, "{jobs:?}");

        // Without the header, or with a token nobody holds: UNAUTHENTICATED.
        let anonymous = grpcurl
            .call(&["-plaintext", addr, "xjob.v1.JobAdmin/ListJobs"])
            .await?;
        assert_refused(&anonymous, "ListJobs without a token");
        assert!(
            anonymous.stderr.contains("Code: Unauthenticated"),
            "{anonymous:?}"
        );
        let forged = format!("authorization: Bearer xjob_{}", "0".repeat(64));
        let forged = grpcurl
            .call(&["-plaintext", "-H", &forged, addr, "xjob.v1.JobAdmin/WhoAmI"])
            .await?;
        assert_refused(&forged, "WhoAmI with an unknown token");
        assert!(
            forged.stderr.contains("Code: Unauthenticated"),
            "{forged:?}"
        );
        // Health and reflection stay open (they hold no data).
        let list = grpcurl.call(&["-plaintext", addr, "list"]).await?;
        assert!(list.ok, "{list:?}");
        Ok(())
    })
    .await
}
