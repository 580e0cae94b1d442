//! The admin's configuration: one typed struct, read from an optional TOML file, then `XJOB_*`
//! environment variables, then command-line flags (each later source wins). `validate()` gives
//! precise messages; `Config::for_tests()` gives short intervals for the test suite.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

pub mod alarm;
mod parse;

pub use parse::{ConfigError, parse_duration};
use parse::{duration_text, invalid, parse_bool, parse_field};

/// Everything the admin can be configured with. Durations are written like `500ms`, `5s`, `2m`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address the gRPC server binds (`--listen`, `XJOB_LISTEN`).
    pub listen: SocketAddr,
    /// Directory for the embedded database (`--data-dir`, `XJOB_DATA_DIR`).
    pub data_dir: PathBuf,
    /// `sqlite://PATH`, `postgres://USER:PASS@HOST:PORT/DB` or `mysql://USER:PASS@HOST:PORT/DB`;
    /// empty = `sqlite://{data_dir}/xjob.db` (`--database-url`, `XJOB_DATABASE_URL`).
    pub database_url: String,
    /// This admin's id in the cluster; must be stable across restarts (`XJOB_NODE_ID`).
    /// Empty = derived from `listen`.
    pub node_id: String,
    /// IANA zone used for cron jobs whose `time_zone` is empty; empty = the machine's zone.
    pub time_zone: String,
    /// How far ahead the scan reads due jobs (XXL-JOB: 5 s).
    #[serde(with = "duration_text")]
    pub pre_read: Duration,
    /// A fire later than this is a misfire and follows the job's misfire strategy.
    #[serde(with = "duration_text")]
    pub misfire_threshold: Duration,
    /// Most jobs one scan reads.
    pub pre_read_count: i64,
    /// Most jobs one transaction of a scan reads and writes: a scan of `pre_read_count` jobs is
    /// written in transactions of at most this many, so a write waiting for the database (an
    /// API call on SQLite's single writer) waits for one of them, not for the whole scan.
    pub scan_chunk_jobs: i64,
    /// Interval executors send heartbeats at.
    #[serde(with = "duration_text")]
    pub heartbeat_interval: Duration,
    /// An executor silent for this long leaves routing.
    #[serde(with = "duration_text")]
    pub executor_lease: Duration,
    /// How often the admin pings an idle connection (HTTP/2 PING). A peer that stops answering
    /// (a stopped process, a paused VM, a cut cable) loses its connection, and an executor its
    /// `Session`, after `keepalive_interval + keepalive_timeout` instead of a whole lease.
    #[serde(with = "duration_text")]
    pub keepalive_interval: Duration,
    /// How long a ping may go unanswered before the connection is closed.
    #[serde(with = "duration_text")]
    pub keepalive_timeout: Duration,
    /// Time an executor has to send `Register` after opening its session.
    #[serde(with = "duration_text")]
    pub handshake_timeout: Duration,
    /// Deadline of each admin -> executor call (XXL-JOB: 3 s).
    #[serde(with = "duration_text")]
    pub executor_timeout: Duration,
    /// Lease of this admin's node row; other admins adopt its pending fires once it lapses.
    #[serde(with = "duration_text")]
    pub node_lease: Duration,
    /// Whether this admin holds a liveness lock for its node and watches the other admins'
    /// (`schedule::liveness`), so a dead admin's planned fires are taken over within a fraction
    /// of a second instead of after its lease. Off only to measure the difference, or while
    /// older admins that take no lock share the database (they are judged by their lease anyway).
    pub liveness_locks: bool,
    /// Largest accepted job or trigger params, in bytes.
    pub max_params_bytes: usize,
    /// Dispatches in flight at once in the fast trigger pool.
    pub fast_pool_size: usize,
    /// Dispatches in flight at once in the slow pool (jobs with > 10 dispatches slower than
    /// 500 ms in the current minute).
    pub slow_pool_size: usize,
    /// How long a fire waits for a pool slot before it is recorded as failed `overloaded`.
    #[serde(with = "duration_text")]
    pub pool_wait: Duration,
    /// Most runs this admin holds claimed and not yet recorded as sent (admission control).
    /// Scheduled fires beyond it are skipped at once with the reason, like a misfire, instead
    /// of queueing behind a backlog that would only grow.
    pub max_unsent_runs: usize,
    /// Send ahead: how many milliseconds before its time a scheduled run may be sent to an
    /// executor that can hold it (it declared so, and its clock offset is known and stable);
    /// the executor starts it on its own timer. 0 (the default) sends every run at its instant.
    pub send_ahead_ms: u64,
    /// How often finished runs are followed up (retries, alarms, child jobs, FIX_DELAY).
    #[serde(with = "duration_text")]
    pub followup_interval: Duration,
    /// How often the daily report rows (today and the 2 previous days) are refreshed.
    #[serde(with = "duration_text")]
    pub report_interval: Duration,
    /// How often log rows older than `log_retention_days` are deleted.
    #[serde(with = "duration_text")]
    pub retention_interval: Duration,
    /// Days of run logs kept; below 3 disables the clean-up (as XXL-JOB does).
    pub log_retention_days: u32,
    /// Age of run logs kept, as a duration (`6h`, `90m`); when set (not 0) it replaces
    /// `log_retention_days`, for installations that fire too often to keep whole days.
    #[serde(with = "duration_text")]
    pub log_retention: Duration,
    /// Newest finished runs kept per job (XXL-JOB's "keep the latest N" clean-up, applied
    /// continuously); 0 keeps all.
    pub log_keep_per_job: u32,
    /// Also start an in-process demo executor with sample jobs (`--demo`).
    pub demo: bool,
    /// Serve JobAdmin without authentication on a non-loopback listener while no user exists
    /// (`--insecure-open-admin-api`, `XJOB_INSECURE_OPEN_ADMIN_API`). Never in production.
    pub insecure_open_admin_api: bool,
    /// With no users yet, creates the user `admin` whose API token is this secret
    /// (`XJOB_BOOTSTRAP_TOKEN`; at least 24 characters). Empty = none.
    pub bootstrap_token: String,
    /// Lets admins trigger a job on addresses outside its group (TriggerJob's address
    /// override); operators are always limited to the group's addresses.
    pub trigger_any_address: bool,
    /// Ties an executor's session and callbacks to the peer IP it registered from: a second
    /// process cannot take over a live session's address, nor finish its runs. Turn off only
    /// when executors reach the admin through a proxy that changes their source address between
    /// connections (`XJOB_EXECUTOR_PEER_CHECK`); group access tokens are then the only check.
    pub executor_peer_check: bool,
    /// Accept executor sessions and callbacks for groups without an access token on a
    /// non-loopback listener (`XJOB_INSECURE_OPEN_REGISTRY`). Off: such groups' executors are
    /// refused until the group has a token.
    pub insecure_open_registry: bool,
    /// Cluster-wide executor token (`XJOB_EXECUTOR_TOKEN`): groups without their own access
    /// token use it, on sessions, callbacks and the admin's calls to executors. Empty = none.
    pub executor_token: String,

    // ---- TLS (docs/security.md, "TLS and mTLS")
    /// PEM certificate chain served on `listen`; unset = plaintext (`XJOB_TLS_CERT`).
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `tls_cert` (`XJOB_TLS_KEY`).
    pub tls_key: Option<PathBuf>,
    /// PEM CA bundle: verifies executors' client certificates (mTLS) and the server certificates
    /// of executors reached over `https://` (`XJOB_TLS_CA`).
    pub tls_ca: Option<PathBuf>,
    /// Client certificates asked of callers: `none`, `executors` (a certificate from `tls_ca`
    /// is required for `Registry.Session` and `Registry.Callback`; other callers may have none)
    /// or `all` (the TLS handshake fails without one) (`XJOB_TLS_CLIENT_AUTH`).
    pub tls_client_auth: TlsClientAuth,
    /// Binds executors' client certificates to groups: app name → the names (DNS names or IP
    /// addresses in the certificate's subject alternative names) a certificate must carry to
    /// register or report results for that app. Empty = any certificate from `tls_ca` serves
    /// every group. Once set, apps not listed are refused. Needs `tls_client_auth`.
    pub executor_cert_names: std::collections::BTreeMap<String, Vec<String>>,
    /// Certificate the admin presents when it calls executors; unset = `tls_cert`.
    pub tls_client_cert: Option<PathBuf>,
    /// Key of `tls_client_cert`; unset = `tls_key`.
    pub tls_client_key: Option<PathBuf>,
    /// How often the certificate files are checked for changes (they are also reloaded on
    /// `SIGHUP`).
    #[serde(with = "duration_text")]
    pub tls_reload_interval: Duration,

    // ---- Limits (docs/security.md, "Limits")
    /// Largest request message accepted, in bytes (`OUT_OF_RANGE` beyond, as gRPC decoders say).
    pub max_request_bytes: usize,
    /// Deadline of every unary call served (a client's shorter `grpc-timeout` wins).
    #[serde(with = "duration_text")]
    pub request_timeout: Duration,
    /// HTTP/2 streams one connection may have open at once (advertised in SETTINGS).
    pub max_concurrent_streams: u32,
    /// Executor sessions open at once on this admin.
    pub max_sessions: usize,
    /// Executor sessions open at once from one peer IP address.
    pub max_sessions_per_peer: usize,
    /// Largest page a list call answers (`ListJobs`, `ListLogs`, `ListGroups`); a larger
    /// `page_size` is capped to it.
    pub max_page_size: usize,
    /// Handlers one executor may announce at registration.
    pub max_handlers_per_registration: usize,
    /// Messages per second one session may send (heartbeats are one per interval); a session
    /// above it is closed with `RESOURCE_EXHAUSTED`.
    pub session_message_rate: u32,
    /// Idle time after which the kernel probes a silent TCP peer (0 = off).
    #[serde(with = "duration_text")]
    pub tcp_keepalive: Duration,
    /// Time a new connection has to send its first bytes (and finish its TLS handshake).
    #[serde(with = "duration_text")]
    pub connection_handshake_timeout: Duration,
    /// Connections open at once on the gRPC port (handshaking or served); more are closed at
    /// accept. Keep it below the process's open-file limit.
    pub max_connections: usize,
    /// Connections open at once on the gRPC port from one IP address; more are closed at
    /// accept. Above `max_sessions_per_peer`: each executor holds a connection.
    pub max_connections_per_address: usize,
    /// Age after which a connection is asked to close (HTTP/2 GOAWAY): idle connections go,
    /// calls and sessions in progress finish first; 0 = never.
    #[serde(with = "duration_text")]
    pub max_connection_age: Duration,

    // ---- Traces (docs/observability.md)
    /// OTLP/gRPC endpoint traces are exported to, e.g. `http://127.0.0.1:4317`; empty = the
    /// standard `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT` variables
    /// decide, and with neither set nothing is traced (docs/observability.md).
    pub otlp_endpoint: String,

    // ---- Metrics and alarms (docs/observability.md)
    /// Address serving Prometheus metrics on `GET /metrics` (plain HTTP/1.1); unset = no
    /// metrics endpoint (`--metrics-listen`, `XJOB_METRICS_LISTEN`). Bind it to loopback or a
    /// private network: it has no authentication.
    pub metrics_listen: Option<SocketAddr>,
    /// Address serving the web console (HTTP/1.1; HTTPS with the admin's `tls_cert`); unset =
    /// no console (`--http-listen`, `XJOB_HTTP_LISTEN`; `xjob serve --demo` defaults it to
    /// 127.0.0.1:8081). See docs/console.md.
    pub http_listen: Option<SocketAddr>,
    /// Host names (`name` for any port, or `name:port`) the console and `/metrics` answer
    /// besides the address a request arrived on (and `localhost` on loopback), e.g. the name
    /// of a reverse proxy in front of them (`XJOB_HTTP_ALLOWED_HOSTS`, comma-separated). Any
    /// other `Host` is refused, so a page on another site cannot reach them by DNS rebinding.
    pub http_allowed_hosts: Vec<String>,
    /// Link to a run's trace in the console, `{trace_id}` replaced by the run's trace id, e.g.
    /// `http://127.0.0.1:16686/trace/{trace_id}` (Jaeger's UI); empty = the id is shown alone.
    pub console_trace_url: String,
    /// Alarm delivery: SMTP server, webhook, retries and the per-job rate limit.
    pub alarm: alarm::AlarmConfig,

    // ---- XXL-JOB executors (docs/xxl-job-compat.md)
    /// Address serving XXL-JOB's executor-facing API (`api/registry`, `api/registryRemove`,
    /// `api/callback`, plain HTTP/1.1) so unmodified `xxl-job-core` executors can register;
    /// unset = off (`--xxl-job-compat-listen`, `XJOB_XXL_JOB_COMPAT_LISTEN`).
    pub xxl_job_compat_listen: Option<SocketAddr>,
    /// An XXL-JOB executor without a registry call for this long leaves routing (XXL-JOB: 90 s,
    /// three missed 30 s registry calls) (`XJOB_XXL_JOB_COMPAT_LEASE`).
    #[serde(with = "duration_text")]
    pub xxl_job_compat_lease: Duration,
}

/// XXL-JOB executors call `api/registry` this often (fixed in `xxl-job-core`).
const XXL_JOB_REGISTRY_INTERVAL: Duration = Duration::from_secs(30);

/// Which callers must present a client certificate (`tls_client_auth`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsClientAuth {
    #[default]
    None,
    Executors,
    All,
}

impl std::str::FromStr for TlsClientAuth {
    type Err = String;

    fn from_str(text: &str) -> Result<TlsClientAuth, String> {
        match text {
            "none" => Ok(TlsClientAuth::None),
            "executors" => Ok(TlsClientAuth::Executors),
            "all" => Ok(TlsClientAuth::All),
            _ => Err("expected none, executors or all".to_string()),
        }
    }
}

/// The longest send-ahead lead: long enough for any burst, and well inside the default
/// `pre_read` (5 s), since a run can leave only once the scan has planned it.
const MAX_SEND_AHEAD_MS: u64 = 3000;

impl Default for Config {
    fn default() -> Config {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("./xjob-data"),
            database_url: String::new(),
            node_id: String::new(),
            time_zone: String::new(),
            pre_read: Duration::from_secs(5),
            misfire_threshold: Duration::from_secs(5),
            pre_read_count: 6000,
            scan_chunk_jobs: 1000,
            heartbeat_interval: Duration::from_secs(10),
            executor_lease: Duration::from_secs(30),
            keepalive_interval: Duration::from_secs(2),
            keepalive_timeout: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(10),
            executor_timeout: Duration::from_secs(3),
            node_lease: Duration::from_secs(10),
            liveness_locks: true,
            max_params_bytes: 64 * 1024,
            fast_pool_size: 256,
            slow_pool_size: 64,
            pool_wait: Duration::from_secs(1),
            max_unsent_runs: 20_000,
            send_ahead_ms: 0,
            followup_interval: Duration::from_millis(200),
            report_interval: Duration::from_secs(60),
            retention_interval: Duration::from_secs(3600),
            log_retention_days: 30,
            log_retention: Duration::ZERO,
            log_keep_per_job: 0,
            demo: false,
            insecure_open_admin_api: false,
            bootstrap_token: String::new(),
            trigger_any_address: false,
            executor_peer_check: true,
            insecure_open_registry: false,
            executor_token: String::new(),
            tls_cert: None,
            tls_key: None,
            tls_ca: None,
            tls_client_auth: TlsClientAuth::None,
            executor_cert_names: Default::default(),
            tls_client_cert: None,
            tls_client_key: None,
            tls_reload_interval: Duration::from_secs(2),
            max_request_bytes: 4 * 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            max_concurrent_streams: 256,
            max_sessions: 10_000,
            max_sessions_per_peer: 256,
            max_page_size: 1_000,
            max_handlers_per_registration: 1_000,
            session_message_rate: 20,
            tcp_keepalive: Duration::from_secs(30),
            connection_handshake_timeout: Duration::from_secs(10),
            max_connections: 4_096,
            max_connections_per_address: 512,
            max_connection_age: Duration::from_secs(600),
            otlp_endpoint: String::new(),
            metrics_listen: None,
            http_listen: None,
            http_allowed_hosts: Vec::new(),
            console_trace_url: String::new(),
            alarm: alarm::AlarmConfig::default(),
            xxl_job_compat_listen: None,
            xxl_job_compat_lease: Duration::from_secs(90),
        }
    }
}

impl Config {
    /// Short intervals for tests: fast heartbeats and leases, a port picked by the OS.
    pub fn for_tests(data_dir: PathBuf) -> Config {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir,
            heartbeat_interval: Duration::from_millis(500),
            executor_lease: Duration::from_secs(3),
            handshake_timeout: Duration::from_secs(2),
            node_lease: Duration::from_secs(3),
            time_zone: "UTC".to_string(),
            ..Config::default()
        }
    }

    /// Parses a TOML document.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|error| ConfigError {
            field: "file",
            message: error.to_string(),
        })
    }

    /// Applies `XJOB_*` variables from `lookup` (the process environment in `main`).
    pub fn apply_env(
        &mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        if let Some(value) = lookup("XJOB_LISTEN") {
            self.listen = parse_field("listen", &value)?;
        }
        if let Some(value) = lookup("XJOB_DATA_DIR") {
            self.data_dir = PathBuf::from(value);
        }
        if let Some(value) = lookup("XJOB_DATABASE_URL") {
            self.database_url = value;
        }
        if let Some(value) = lookup("XJOB_NODE_ID") {
            self.node_id = value;
        }
        if let Some(value) = lookup("XJOB_TIME_ZONE") {
            self.time_zone = value;
        }
        if let Some(value) = lookup("XJOB_LOG_RETENTION_DAYS") {
            self.log_retention_days = parse_field("log_retention_days", &value)?;
        }
        if let Some(value) = lookup("XJOB_LOG_RETENTION") {
            self.log_retention =
                parse_duration(&value).map_err(|message| invalid("log_retention", message))?;
        }
        if let Some(value) = lookup("XJOB_LOG_KEEP_PER_JOB") {
            self.log_keep_per_job = parse_field("log_keep_per_job", &value)?;
        }
        for (key, slot) in [
            ("XJOB_TLS_CERT", &mut self.tls_cert),
            ("XJOB_TLS_KEY", &mut self.tls_key),
            ("XJOB_TLS_CA", &mut self.tls_ca),
        ] {
            if let Some(value) = lookup(key) {
                *slot = (!value.is_empty()).then(|| PathBuf::from(value));
            }
        }
        if let Some(value) = lookup("XJOB_TLS_CLIENT_AUTH") {
            self.tls_client_auth = parse_field("tls_client_auth", &value)?;
        }
        if let Some(value) = lookup("XJOB_METRICS_LISTEN") {
            self.metrics_listen = if value.is_empty() {
                None
            } else {
                Some(parse_field("metrics_listen", &value)?)
            };
        }
        if let Some(value) = lookup("XJOB_XXL_JOB_COMPAT_LISTEN") {
            self.xxl_job_compat_listen = if value.is_empty() {
                None
            } else {
                Some(parse_field("xxl_job_compat_listen", &value)?)
            };
        }
        if let Some(value) = lookup("XJOB_XXL_JOB_COMPAT_LEASE") {
            self.xxl_job_compat_lease = parse_duration(&value)
                .map_err(|message| invalid("xxl_job_compat_lease", message))?;
        }
        if let Some(value) = lookup("XJOB_HTTP_LISTEN") {
            self.http_listen = if value.is_empty() {
                None
            } else {
                Some(parse_field("http_listen", &value)?)
            };
        }
        if let Some(value) = lookup("XJOB_HTTP_ALLOWED_HOSTS") {
            self.http_allowed_hosts = value
                .split(',')
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .map(str::to_string)
                .collect();
        }
        if let Some(value) = lookup("XJOB_CONSOLE_TRACE_URL") {
            self.console_trace_url = value;
        }
        self.alarm.apply_env(&lookup)?;
        if let Some(value) = lookup("XJOB_DEMO") {
            self.demo = parse_bool("XJOB_DEMO", &value)?;
        }
        if let Some(value) = lookup("XJOB_INSECURE_OPEN_ADMIN_API") {
            self.insecure_open_admin_api = parse_bool("XJOB_INSECURE_OPEN_ADMIN_API", &value)?;
        }
        if let Some(value) = lookup("XJOB_BOOTSTRAP_TOKEN") {
            self.bootstrap_token = value;
        }
        if let Some(value) = lookup("XJOB_EXECUTOR_PEER_CHECK") {
            self.executor_peer_check = parse_bool("XJOB_EXECUTOR_PEER_CHECK", &value)?;
        }
        if let Some(value) = lookup("XJOB_INSECURE_OPEN_REGISTRY") {
            self.insecure_open_registry = parse_bool("XJOB_INSECURE_OPEN_REGISTRY", &value)?;
        }
        if let Some(value) = lookup("XJOB_EXECUTOR_TOKEN") {
            self.executor_token = value;
        }
        if let Some(value) = lookup("XJOB_TRIGGER_ANY_ADDRESS") {
            self.trigger_any_address = parse_bool("XJOB_TRIGGER_ANY_ADDRESS", &value)?;
        }
        Ok(())
    }

    /// Checks every field and fills derived defaults (database URL, node id, time zone).
    pub fn validate(mut self) -> Result<Config, ConfigError> {
        if self.database_url.is_empty() {
            self.database_url = format!("sqlite://{}", self.data_dir.join("xjob.db").display());
        }
        if self.node_id.is_empty() {
            self.node_id = format!("admin-{}", self.listen);
        }
        if self.time_zone.is_empty() {
            self.time_zone = machine_time_zone();
        }
        if crate::model::parse_time_zone(&self.time_zone).is_err() {
            return Err(invalid(
                "time_zone",
                format!("unknown time zone '{}'", self.time_zone),
            ));
        }
        if self.pre_read < Duration::from_secs(1) {
            return Err(invalid("pre_read", "must be at least 1s"));
        }
        if self.pre_read_count < 1 {
            return Err(invalid("pre_read_count", "must be at least 1"));
        }
        if self.scan_chunk_jobs < 1 {
            return Err(invalid("scan_chunk_jobs", "must be at least 1"));
        }
        if self.heartbeat_interval.is_zero() || self.executor_lease <= self.heartbeat_interval {
            return Err(invalid(
                "executor_lease",
                "must be longer than heartbeat_interval",
            ));
        }
        if self.keepalive_interval.is_zero() {
            return Err(invalid("keepalive_interval", "must be longer than 0"));
        }
        if self.keepalive_timeout.is_zero() {
            return Err(invalid("keepalive_timeout", "must be longer than 0"));
        }
        if self.max_unsent_runs == 0 {
            return Err(invalid("max_unsent_runs", "must be at least 1"));
        }
        if self.send_ahead_ms > MAX_SEND_AHEAD_MS {
            return Err(invalid("send_ahead_ms", "must be at most 3000"));
        }
        if self.xxl_job_compat_lease <= XXL_JOB_REGISTRY_INTERVAL {
            return Err(invalid(
                "xxl_job_compat_lease",
                "must be longer than 30s, the interval of XXL-JOB executors' registry calls",
            ));
        }
        if self.fast_pool_size == 0 {
            return Err(invalid("fast_pool_size", "must be at least 1"));
        }
        if self.slow_pool_size == 0 {
            return Err(invalid("slow_pool_size", "must be at least 1"));
        }
        if self.followup_interval.is_zero()
            || self.report_interval.is_zero()
            || self.retention_interval.is_zero()
        {
            return Err(invalid(
                "followup_interval",
                "intervals must be longer than 0",
            ));
        }
        if !self.log_retention.is_zero() && self.log_retention < Duration::from_secs(1) {
            return Err(invalid(
                "log_retention",
                "must be 0 (use log_retention_days) or at least 1s",
            ));
        }
        if self.max_params_bytes == 0 {
            return Err(invalid("max_params_bytes", "must be at least 1"));
        }
        self.allowed_hosts()?;
        self.validate_tls()?;
        self.validate_limits()?;
        self.alarm.validate()?;
        Ok(self)
    }

    fn validate_tls(&self) -> Result<(), ConfigError> {
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err(invalid("tls_cert", "tls_cert and tls_key go together"));
        }
        if self.tls_client_cert.is_some() != self.tls_client_key.is_some() {
            return Err(invalid(
                "tls_client_cert",
                "tls_client_cert and tls_client_key go together",
            ));
        }
        if self.tls_client_auth != TlsClientAuth::None {
            if self.tls_cert.is_none() {
                return Err(invalid(
                    "tls_client_auth",
                    "client certificates need TLS: set tls_cert and tls_key",
                ));
            }
            if self.tls_ca.is_none() {
                return Err(invalid(
                    "tls_client_auth",
                    "client certificates are checked against tls_ca: set it",
                ));
            }
        }
        self.check_executor_cert_names()?;
        if self.demo && self.tls_cert.is_some() {
            return Err(invalid(
                "demo",
                "the demo executor speaks plaintext: run --demo without tls_cert",
            ));
        }
        if self.tls_reload_interval < Duration::from_millis(100) {
            return Err(invalid("tls_reload_interval", "must be at least 100ms"));
        }
        Ok(())
    }

    fn validate_limits(&self) -> Result<(), ConfigError> {
        let positive = [
            ("max_request_bytes", self.max_request_bytes),
            (
                "max_concurrent_streams",
                self.max_concurrent_streams as usize,
            ),
            ("max_sessions", self.max_sessions),
            ("max_sessions_per_peer", self.max_sessions_per_peer),
            ("max_connections", self.max_connections),
            (
                "max_connections_per_address",
                self.max_connections_per_address,
            ),
            ("max_page_size", self.max_page_size),
            (
                "max_handlers_per_registration",
                self.max_handlers_per_registration,
            ),
            ("session_message_rate", self.session_message_rate as usize),
        ];
        for (field, value) in positive {
            if value == 0 {
                return Err(invalid(field, "must be at least 1"));
            }
        }
        if self.request_timeout.is_zero() {
            return Err(invalid("request_timeout", "must be longer than 0"));
        }
        if self.connection_handshake_timeout.is_zero() {
            return Err(invalid(
                "connection_handshake_timeout",
                "must be longer than 0",
            ));
        }
        Ok(())
    }

    /// The `Host` names the console and `/metrics` answer (`http_allowed_hosts`), parsed.
    pub fn allowed_hosts(&self) -> Result<xjob_metrics_http::AllowedHosts, ConfigError> {
        xjob_metrics_http::AllowedHosts::new(&self.http_allowed_hosts)
            .map_err(|message| invalid("http_allowed_hosts", message))
    }

    /// The server's TLS files, when TLS is on.
    pub fn server_tls(&self) -> Option<xjob_tls::ServerTlsFiles> {
        let (cert, key) = (self.tls_cert.clone()?, self.tls_key.clone()?);
        Some(xjob_tls::ServerTlsFiles {
            cert,
            key,
            client_ca: self.tls_ca.clone(),
            client_auth: match self.tls_client_auth {
                TlsClientAuth::None => xjob_tls::ClientAuth::None,
                TlsClientAuth::Executors => xjob_tls::ClientAuth::Optional,
                TlsClientAuth::All => xjob_tls::ClientAuth::Required,
            },
        })
    }

    /// The accept loop's settings, the same on every listener (gRPC, console, XXL-JOB
    /// compatibility): keepalive, handshake deadline, and the connection bounds per client
    /// address and in total (each listener counts its own); `on_refused` counts a refusal.
    pub fn listen_options(&self, on_refused: fn(xjob_tls::Refusal)) -> xjob_tls::ListenOptions {
        xjob_tls::ListenOptions {
            tcp_keepalive: (!self.tcp_keepalive.is_zero()).then_some(self.tcp_keepalive),
            handshake_timeout: self.connection_handshake_timeout,
            max_connections: self.max_connections,
            max_connections_per_address: self.max_connections_per_address,
            on_refused: Some(on_refused),
        }
    }

    /// What the admin trusts and presents when it calls executors over `https://`.
    pub fn executor_client_tls(&self) -> xjob_tls::ClientTls {
        xjob_tls::ClientTls {
            ca: self.tls_ca.clone(),
            cert: self
                .tls_client_cert
                .clone()
                .or_else(|| self.tls_cert.clone()),
            key: self.tls_client_key.clone().or_else(|| self.tls_key.clone()),
        }
    }

    /// Default zone for cron evaluation as a parsed zone.
    /// Whether executors of a group without an access token may register and report: on a
    /// loopback listener, or when the operator opted out (`insecure_open_registry`).
    pub fn tokenless_executors_allowed(&self) -> bool {
        self.listen.ip().is_loopback() || self.insecure_open_registry
    }

    /// `executor_cert_names` needs client certificates, and each name must be matchable.
    fn check_executor_cert_names(&self) -> Result<(), ConfigError> {
        if self.executor_cert_names.is_empty() {
            return Ok(());
        }
        if self.tls_client_auth == TlsClientAuth::None {
            return Err(invalid(
                "executor_cert_names",
                "binds client certificates to groups: set tls_client_auth = \"executors\" or \"all\"",
            ));
        }
        for (app_name, names) in &self.executor_cert_names {
            if names.is_empty() {
                return Err(invalid(
                    "executor_cert_names",
                    format!("app '{app_name}': list at least one certificate name"),
                ));
            }
            if let Some(bad) = names
                .iter()
                .find(|name| !xjob_tls::is_certificate_name(name))
            {
                return Err(invalid(
                    "executor_cert_names",
                    format!("app '{app_name}': '{bad}' is neither a DNS name nor an IP address"),
                ));
            }
        }
        Ok(())
    }

    /// The token executors of a group must hold: the group's own, else the cluster-wide
    /// `executor_token` (empty: none).
    pub fn executor_token_for<'a>(&'a self, group_token: &'a str) -> &'a str {
        if group_token.is_empty() {
            &self.executor_token
        } else {
            group_token
        }
    }

    pub fn default_time_zone(&self) -> chrono_tz::Tz {
        crate::model::parse_time_zone(&self.time_zone).unwrap_or(chrono_tz::UTC)
    }
}

/// The machine's IANA zone: `TZ`, else the `/etc/localtime` link target, else UTC.
fn machine_time_zone() -> String {
    if let Ok(zone) = std::env::var("TZ")
        && crate::model::parse_time_zone(zone.trim_start_matches(':')).is_ok()
    {
        return zone.trim_start_matches(':').to_string();
    }
    std::fs::read_link("/etc/localtime")
        .ok()
        .and_then(|target| {
            let text = target.to_string_lossy().into_owned();
            text.split_once("zoneinfo/")
                .map(|(_, zone)| zone.to_string())
        })
        .filter(|zone| crate::model::parse_time_zone(zone).is_ok())
        .unwrap_or_else(|| "UTC".to_string())
}

#[cfg(test)]
mod tests;
