//! `Executor::builder()`: collects the executor's settings and handlers, validates them, and
//! hands them to `RunningExecutor` to start (`start`) or to run until a shutdown signal (`run`).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use crate::admins::Admins;
use crate::auth::{ClientAuth, bearer_value};
use crate::command::{CommandSpec, command_handler};
use crate::context::JobContext;
use crate::error::Error;
use crate::glue::GlueRunners;
use crate::glue::languages::language_of;
use crate::handler::{HandlerFn, JobResult, boxed_handler};
use crate::handler_registry::HandlerRegistry;
use crate::running::RunningExecutor;
use crate::settings::ExecutorSettings;
use xjob_proto::pb;

/// Entry point of the SDK: `Executor::builder()`.
#[derive(Debug)]
pub struct Executor;

impl Executor {
    /// Returns a builder with the defaults (bind `127.0.0.1:9999`, log dir
    /// `./xjob-executor-logs`, 5 s shutdown grace).
    pub fn builder() -> ExecutorBuilder {
        ExecutorBuilder::default()
    }
}

/// Builds and starts an executor.
#[derive(Debug)]
pub struct ExecutorBuilder {
    app_name: String,
    admin_addrs: Vec<String>,
    bind: String,
    advertise_address_opt: Option<String>,
    access_token_opt: Option<String>,
    log_dir: PathBuf,
    labels: HashMap<String, String>,
    shutdown_grace: Duration,
    runner_idle_timeout: Duration,
    kill_grace: Duration,
    log_retention_days: u32,
    callback_flush_timeout: Duration,
    handlers: HandlerRegistry,
    duplicate_handler_opt: Option<String>,
    /// Enabled glue types (wire values) and their interpreter programs.
    glue_interpreters: BTreeMap<i32, String>,
    glue_env: Vec<(String, String)>,
    invalid_glue_opt: Option<String>,
    tls: TlsSettings,
    insecure_open_network: bool,
    otlp_endpoint_opt: Option<String>,
    metrics_listen_opt: Option<String>,
    session_dispatch: bool,
}

/// TLS options of the builder (see [`ExecutorBuilder::tls`]).
#[derive(Debug, Default)]
struct TlsSettings {
    server_opt: Option<(PathBuf, PathBuf)>,
    ca_opt: Option<PathBuf>,
    client_opt: Option<(PathBuf, PathBuf)>,
    require_client_cert: bool,
}

impl Default for ExecutorBuilder {
    fn default() -> Self {
        Self {
            app_name: String::new(),
            admin_addrs: Vec::new(),
            bind: "127.0.0.1:9999".to_owned(),
            advertise_address_opt: None,
            access_token_opt: None,
            log_dir: PathBuf::from("./xjob-executor-logs"),
            labels: HashMap::new(),
            shutdown_grace: Duration::from_secs(5),
            runner_idle_timeout: Duration::from_secs(90),
            kill_grace: Duration::from_secs(2),
            log_retention_days: 30,
            callback_flush_timeout: Duration::from_secs(3),
            handlers: HandlerRegistry::default(),
            duplicate_handler_opt: None,
            glue_interpreters: BTreeMap::new(),
            glue_env: Vec::new(),
            invalid_glue_opt: None,
            tls: TlsSettings::default(),
            insecure_open_network: false,
            otlp_endpoint_opt: None,
            metrics_listen_opt: None,
            session_dispatch: false,
        }
    }
}

impl ExecutorBuilder {
    /// Serves Prometheus metrics on `GET /metrics` at `address` (e.g. `127.0.0.1:9465`; plain
    /// HTTP/1.1, no authentication: keep it on loopback or a private network). Off by default.
    pub fn metrics_listen(mut self, address: impl ToString) -> Self {
        self.metrics_listen_opt = Some(address.to_string());
        self
    }

    /// Session dispatch, for executors the admin cannot reach (behind NAT, serverless, a
    /// laptop): the executor opens no port, and the admin sends runs, kills, probes and log
    /// reads down the executor's own session stream. `bind`, the server TLS files and
    /// `insecure_open_network` are then unused; `advertise_address` may name the executor as
    /// `session://NAME` (by default the app name, process id and a random part).
    pub fn session_dispatch(mut self, enabled: bool) -> Self {
        self.session_dispatch = enabled;
        self
    }

    /// Sets the app name of the executor's group (required).
    pub fn app_name(mut self, app_name: impl Into<String>) -> Self {
        self.app_name = app_name.into();
        self
    }

    /// Sets the admin addresses (`http://host:port`), tried in order; the next one is used when
    /// one fails. At least one is required.
    pub fn admin_addrs<I>(mut self, admin_addrs: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.admin_addrs = admin_addrs.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the listen address (`"127.0.0.1:0"` or a `SocketAddr`); port 0 picks a free port.
    pub fn bind(mut self, bind: impl ToString) -> Self {
        self.bind = bind.to_string();
        self
    }

    /// Sets the address the admins dial (for NAT and containers); by default
    /// `http://{bound ip}:{bound port}`, with the outbound interface's IP when bound to all.
    pub fn advertise_address(mut self, address: impl Into<String>) -> Self {
        self.advertise_address_opt = Some(address.into());
        self
    }

    /// Sets the access token required on incoming calls and sent on outgoing ones.
    pub fn access_token(mut self, token: impl Into<String>) -> Self {
        self.access_token_opt = Some(token.into());
        self
    }

    /// Serves `ExecutorService` over TLS with this PEM certificate chain and key (reloaded when
    /// the files change or on `SIGHUP`); the default advertised address becomes `https://`.
    pub fn tls(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls.server_opt = Some((cert.into(), key.into()));
        self
    }

    /// Sets the PEM CA bundle that signs the admins' certificates (for `https://` admin
    /// addresses) and, with [`require_client_cert`](Self::require_client_cert), the admins'
    /// client certificates.
    pub fn tls_ca(mut self, ca: impl Into<PathBuf>) -> Self {
        self.tls.ca_opt = Some(ca.into());
        self
    }

    /// Sets the client certificate and key presented to admins that require mTLS; by default
    /// the [`tls`](Self::tls) certificate.
    pub fn tls_client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls.client_opt = Some((cert.into(), key.into()));
        self
    }

    /// Accepts only callers with a client certificate signed by [`tls_ca`](Self::tls_ca)
    /// (mTLS): only the admins can call `Run`, `Kill` and `ReadLog`.
    pub fn require_client_cert(mut self, required: bool) -> Self {
        self.tls.require_client_cert = required;
        self
    }

    /// Allows serving on a non-loopback address with neither an access token nor mTLS. Anyone
    /// who reaches the port can then run this executor's handlers with any params and read its
    /// run logs: only for networks where that is acceptable.
    pub fn insecure_open_network(mut self, open: bool) -> Self {
        self.insecure_open_network = open;
        self
    }

    /// Sets the run log directory (default `./xjob-executor-logs`).
    pub fn log_dir(mut self, log_dir: impl Into<PathBuf>) -> Self {
        self.log_dir = log_dir.into();
        self
    }

    /// Adds a label announced at registration.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Sets how long a graceful shutdown waits for running handlers (default 5 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Sets how long a job's task lives without work (default 90 s).
    pub fn runner_idle_timeout(mut self, idle_timeout: Duration) -> Self {
        self.runner_idle_timeout = idle_timeout;
        self
    }

    /// Sets how long a cancelled (killed, timed-out) handler may take to return before it is
    /// aborted (its future dropped; default 2 s).
    pub fn kill_grace(mut self, grace: Duration) -> Self {
        self.kill_grace = grace;
        self
    }

    /// Sets how many days of run logs are kept (default 30; cleanup is off below 3).
    pub fn log_retention_days(mut self, days: u32) -> Self {
        self.log_retention_days = days;
        self
    }

    /// Sets how long a graceful shutdown tries to deliver pending results before spooling them
    /// to `{log_dir}/callbacklogs/` (default 3 s).
    pub fn callback_flush_timeout(mut self, timeout: Duration) -> Self {
        self.callback_flush_timeout = timeout;
        self
    }

    /// Exports the executor's spans (`run`, `handler`, `callback`) over OTLP/gRPC to `endpoint`,
    /// e.g. `http://127.0.0.1:4317`. Without it, the standard `OTEL_EXPORTER_OTLP_ENDPOINT` /
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` variables decide, and with neither set nothing is
    /// traced. The service name is the app name unless `OTEL_SERVICE_NAME` says otherwise.
    pub fn otlp_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.otlp_endpoint_opt = Some(endpoint.into());
        self
    }

    /// Registers a BEAN handler under `name`: an `async fn(JobContext) -> JobResult` or a closure
    /// returning such a future. Names must be unique.
    pub fn handler<F, Fut>(self, name: impl Into<String>, handler: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = JobResult> + Send + 'static,
    {
        self.register(name.into(), boxed_handler(handler))
    }

    /// Registers the built-in `command` handler under `name`: each run executes `argv` followed
    /// by the run's params split on whitespace (when `argv` is empty, the params are the whole
    /// command line), with `XJOB_*` variables describing the run in its environment. Its stdout
    /// and stderr lines go to the run log as they arrive; exit status 0 is a success, anything
    /// else a failure ("command exited with status N").
    ///
    /// The command leads its own process group: a timeout, a kill, COVER_EARLY or shutdown sends
    /// SIGTERM to the whole group, then SIGKILL after half the `kill_grace`, so processes it
    /// started are stopped too. Unix only; elsewhere its runs fail with a clear message.
    ///
    /// ```no_run
    /// # use xjob_executor::Executor;
    /// let builder = Executor::builder()
    ///     .command_handler("backup", ["/usr/local/bin/backup.sh", "--quiet"])
    ///     .command_handler("command", Vec::<String>::new());
    /// ```
    pub fn command_handler<I>(self, name: impl Into<String>, argv: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.command(name, CommandSpec::new(argv))
    }

    /// Registers the built-in `command` handler under `name` with every setting of
    /// [`CommandSpec`] (working directory, extra environment, a timeout of its own); otherwise as
    /// [`command_handler`](Self::command_handler).
    pub fn command(self, name: impl Into<String>, spec: CommandSpec) -> Self {
        self.register(name.into(), command_handler(spec))
    }

    /// Enables script (GLUE) jobs of one language, run with its usual interpreter found on the
    /// `PATH`: `bash` (SHELL), `python3`, `node` (NODEJS), `php`, `pwsh` (POWERSHELL).
    ///
    /// Glue is off by default: a run of a type not enabled is refused with "glue type … is not
    /// enabled on this executor". Each run writes the job's script under
    /// `{log_dir}/gluesource/` (once per version), then runs it like the `command` handler:
    /// params as arguments, `XJOB_*` variables, its own process group, output into the run log,
    /// exit 0 = success, the same timeout, kill and COVER_EARLY stops. BEAN and GROOVY are not
    /// script types: enabling them is a config error.
    pub fn enable_glue(self, glue_type: pb::GlueType) -> Self {
        match language_of(glue_type) {
            Some(language) => self.glue_interpreter(glue_type, language.default_interpreter),
            None => self.glue_interpreter(glue_type, ""),
        }
    }

    /// Adds an environment variable for script (GLUE) runs, e.g. a `PATH` or `PYTHONPATH`, or an
    /// empty value to hide one of the executor's own variables from scripts (the `XJOB_*` run
    /// variables are set after these and win).
    pub fn glue_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.glue_env.push((key.into(), value.into()));
        self
    }

    /// Enables script (GLUE) jobs of one language, run with the given interpreter program (a
    /// path, or a name looked up on the `PATH`); see [`enable_glue`](Self::enable_glue).
    pub fn glue_interpreter(mut self, glue_type: pb::GlueType, program: impl Into<String>) -> Self {
        let program = program.into();
        if language_of(glue_type).is_none() {
            let reason = if glue_type == pb::GlueType::Groovy {
                crate::glue::GROOVY_UNSUPPORTED.to_owned()
            } else {
                format!("{} is not a script glue type", glue_type.as_str_name())
            };
            self.invalid_glue_opt.get_or_insert(reason);
        } else if program.trim().is_empty() {
            self.invalid_glue_opt.get_or_insert(format!(
                "{}: the interpreter program is empty",
                glue_type.as_str_name()
            ));
        } else {
            self.glue_interpreters.insert(glue_type as i32, program);
        }
        self
    }

    fn register(mut self, name: String, handler: HandlerFn) -> Self {
        if !self.handlers.insert(name.clone(), handler) {
            self.duplicate_handler_opt.get_or_insert(name);
        }
        self
    }

    /// Binds the server, starts serving, and registers with the admins in the background;
    /// returns once the server is bound.
    pub async fn start(self) -> Result<RunningExecutor, Error> {
        RunningExecutor::launch(self.into_settings()?).await
    }

    /// Makes every check [`start`](Self::start) makes, without binding, serving or connecting:
    /// the settings, the TLS files, and whether the bind address would be reachable from other
    /// machines without an access token or mTLS. A configuration this accepts is refused by
    /// `start` only for what happens at run time (the port is taken, a directory is not
    /// writable).
    pub async fn check(self) -> Result<(), Error> {
        crate::running::preflight(&self.into_settings()?).await
    }

    /// Starts the executor, waits for `shutdown`, then shuts down gracefully.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
        let running = self.start().await?;
        shutdown.await;
        running.shutdown().await;
        Ok(())
    }

    fn into_settings(self) -> Result<ExecutorSettings, Error> {
        let invalid = |field: &'static str, message: &str| Error::InvalidConfig {
            field,
            message: message.to_owned(),
        };
        if self.app_name.trim().is_empty() {
            return Err(invalid("app_name", "an app name is required"));
        }
        // The admin refuses to register any other name: refused here, it is not an executor
        // that starts, looks healthy and never gets a run.
        let length = self.app_name.chars().count();
        if !(xjob_proto::APP_NAME_MIN_CHARS..=xjob_proto::APP_NAME_MAX_CHARS).contains(&length) {
            return Err(Error::InvalidConfig {
                field: "app_name",
                message: format!(
                    "{:?} must be {}-{} characters, has {length}",
                    self.app_name,
                    xjob_proto::APP_NAME_MIN_CHARS,
                    xjob_proto::APP_NAME_MAX_CHARS
                ),
            });
        }
        if !self.app_name.chars().all(xjob_proto::is_app_name_char) {
            return Err(Error::InvalidConfig {
                field: "app_name",
                message: format!(
                    "{:?} may contain only letters, digits, '_', '.' and '-'",
                    self.app_name
                ),
            });
        }
        if let Some(name) = self.duplicate_handler_opt {
            return Err(Error::InvalidConfig {
                field: "handler",
                message: format!("handler name {name:?} is registered twice"),
            });
        }
        if self
            .handlers
            .names()
            .iter()
            .any(|name| name.trim().is_empty())
        {
            return Err(invalid("handler", "handler names must not be empty"));
        }
        if let Some(message) = self.invalid_glue_opt {
            return Err(Error::InvalidConfig {
                field: "glue",
                message,
            });
        }
        if self.bind.trim().is_empty() {
            return Err(invalid("bind", "a listen address is required"));
        }
        if self.log_dir.as_os_str().is_empty() {
            return Err(invalid("log_dir", "a log directory is required"));
        }
        let token_opt = self.access_token_opt.filter(|token| !token.is_empty());
        let header_opt = match &token_opt {
            Some(token) => Some(bearer_value(token).ok_or_else(|| {
                invalid(
                    "access_token",
                    "the token must be visible ascii without line breaks",
                )
            })?),
            None => None,
        };
        let server_tls_opt = self.tls.server_files()?;
        let client_tls = self.tls.client_files();
        client_tls.check().map_err(|error| Error::InvalidConfig {
            field: "tls",
            message: error.to_string(),
        })?;
        let admins = Admins::new(
            &self.admin_addrs,
            ClientAuth::new(header_opt.clone()),
            client_tls,
        )?;
        if self.session_dispatch {
            if let Some(address) = &self.advertise_address_opt
                && !address.starts_with(crate::session_dispatch::SESSION_SCHEME)
            {
                return Err(invalid(
                    "advertise_address",
                    "with session dispatch it must be session://NAME",
                ));
            }
        } else if let Some(address) = &self.advertise_address_opt
            && !(address.starts_with("http://") || address.starts_with("https://"))
        {
            return Err(invalid(
                "advertise_address",
                "must start with http:// or https://",
            ));
        }
        let mut handlers = self.handlers;
        handlers.set_glue(GlueRunners::new(
            &self.glue_interpreters,
            &self.glue_env,
            &self.log_dir,
        ));
        Ok(ExecutorSettings {
            app_name: self.app_name,
            admins,
            bind: self.bind,
            advertise_address_opt: self.advertise_address_opt,
            auth_header_opt: header_opt,
            log_dir: self.log_dir,
            labels: self.labels,
            shutdown_grace: self.shutdown_grace,
            runner_idle_timeout: self.runner_idle_timeout,
            kill_grace: self.kill_grace,
            log_retention_days: self.log_retention_days,
            callback_flush_timeout: self.callback_flush_timeout,
            handlers,
            server_tls_opt,
            insecure_open_network: self.insecure_open_network,
            otlp_endpoint: self.otlp_endpoint_opt.unwrap_or_default(),
            metrics_listen_opt: self.metrics_listen_opt,
            session_dispatch: self.session_dispatch,
        })
    }
}

impl TlsSettings {
    /// The server's files, checked for consistency (the files themselves are read at start).
    fn server_files(&self) -> Result<Option<xjob_tls::ServerTlsFiles>, Error> {
        let invalid = |message: &str| Error::InvalidConfig {
            field: "tls",
            message: message.to_owned(),
        };
        if self.require_client_cert && self.ca_opt.is_none() {
            return Err(invalid(
                "require_client_cert needs tls_ca (the CA that signs the admins' certificates)",
            ));
        }
        let Some((cert, key)) = &self.server_opt else {
            if self.require_client_cert {
                return Err(invalid(
                    "require_client_cert needs tls (the executor's own certificate and key)",
                ));
            }
            return Ok(None);
        };
        Ok(Some(xjob_tls::ServerTlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: self.ca_opt.clone(),
            client_auth: if self.require_client_cert {
                xjob_tls::ClientAuth::Required
            } else {
                xjob_tls::ClientAuth::None
            },
        }))
    }

    /// What the executor trusts and presents when it calls admins.
    fn client_files(&self) -> xjob_tls::ClientTls {
        let identity = self.client_opt.clone().or_else(|| self.server_opt.clone());
        xjob_tls::ClientTls {
            ca: self.ca_opt.clone(),
            cert: identity.as_ref().map(|(cert, _)| cert.clone()),
            key: identity.map(|(_, key)| key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::JobOutput;

    async fn noop(_context: JobContext) -> JobResult {
        Ok(JobOutput::default())
    }

    fn field_of(builder: ExecutorBuilder) -> &'static str {
        match builder.into_settings() {
            Err(Error::InvalidConfig { field, .. }) => field,
            Err(other) => panic!("unexpected error {other}"),
            Ok(_) => panic!("expected an invalid config"),
        }
    }

    #[test]
    fn invalid_settings_name_their_field() {
        let valid = || {
            Executor::builder()
                .app_name("orders")
                .admin_addrs(["http://127.0.0.1:1"])
        };
        assert!(valid().handler("a", noop).into_settings().is_ok());
        assert_eq!(
            field_of(Executor::builder().admin_addrs(["http://a:1"])),
            "app_name"
        );
        assert_eq!(field_of(valid().app_name("x")), "app_name");
        assert_eq!(field_of(valid().app_name("my app")), "app_name");
        assert_eq!(
            field_of(valid().admin_addrs(Vec::<String>::new())),
            "admin_addrs"
        );
        assert_eq!(
            field_of(valid().admin_addrs(["127.0.0.1:8080"])),
            "admin_addrs"
        );
        assert_eq!(
            field_of(valid().handler("a", noop).handler("a", noop)),
            "handler"
        );
        assert_eq!(field_of(valid().access_token("bad\ntoken")), "access_token");
        assert_eq!(
            field_of(valid().advertise_address("10.0.0.5:9999")),
            "advertise_address"
        );
        // Session dispatch names the executor session://NAME, never a dialable URL.
        assert_eq!(
            field_of(
                valid()
                    .session_dispatch(true)
                    .advertise_address("http://10.0.0.5:9999")
            ),
            "advertise_address"
        );
        assert!(
            valid()
                .handler("a", noop)
                .session_dispatch(true)
                .advertise_address("session://orders-laptop")
                .into_settings()
                .is_ok()
        );
    }
}
