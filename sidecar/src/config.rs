//! The sidecar's configuration: a TOML file, then `XJOB_*` environment variables on top.
//!
//! Every table refuses keys it does not know (`deny_unknown_fields`), so a typo is a startup
//! error naming the key, never a setting silently ignored. Nothing is reloaded while running.
//!
//! Environment variables (each replaces the file's value):
//! `XJOB_APP_NAME`, `XJOB_ADMIN_ADDRS` (comma-separated), `XJOB_ACCESS_TOKEN`, `XJOB_BIND`,
//! `XJOB_ADVERTISE_ADDRESS`, `XJOB_LOG_DIR`, `XJOB_APP_URL`, `XJOB_SHUTDOWN_GRACE`,
//! `XJOB_GLUE_ENABLED` (comma-separated languages; empty = none), `XJOB_METRICS_LISTEN`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// Every environment variable the sidecar reads for its settings (the deploy check compares
/// manifests against this list).
pub const ENV_VARS: [&str; 11] = [
    "XJOB_CONFIG",
    "XJOB_APP_NAME",
    "XJOB_ADMIN_ADDRS",
    "XJOB_ACCESS_TOKEN",
    "XJOB_BIND",
    "XJOB_ADVERTISE_ADDRESS",
    "XJOB_LOG_DIR",
    "XJOB_APP_URL",
    "XJOB_SHUTDOWN_GRACE",
    "XJOB_GLUE_ENABLED",
    "XJOB_METRICS_LISTEN",
];

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The executor group's app name (required).
    #[serde(default)]
    pub app_name: String,
    /// Admin addresses, `http://host:port`, tried in order (required).
    #[serde(default)]
    pub admin_addrs: Vec<String>,
    /// Token the group requires; empty = none.
    #[serde(default)]
    pub access_token: String,
    /// Listen address of the executor's gRPC server.
    #[serde(default = "default_bind")]
    pub bind: String,
    /// Address the admins dial; empty = derived from the bound socket.
    #[serde(default)]
    pub advertise_address: String,
    /// Run logs, spooled results and glue scripts.
    #[serde(default = "default_log_dir")]
    pub log_dir: PathBuf,
    /// Base URL of the app next to the sidecar; relative `http` handler URLs are joined to it.
    #[serde(default)]
    pub app_url: String,
    /// How long a graceful shutdown (SIGTERM) lets running jobs finish.
    #[serde(default = "default_shutdown_grace", deserialize_with = "duration")]
    pub shutdown_grace: Duration,
    /// How long a killed or timed-out run may take to stop before it is aborted.
    #[serde(default = "default_kill_grace", deserialize_with = "duration")]
    pub kill_grace: Duration,
    /// Days of run logs kept (cleanup is off below 3).
    #[serde(default = "default_log_retention_days")]
    pub log_retention_days: u32,
    /// Labels announced at registration.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Script (GLUE) jobs; off unless languages are listed.
    #[serde(default)]
    pub glue: GlueConfig,
    /// Handlers by name (the job's `handler`).
    #[serde(default)]
    pub handlers: BTreeMap<String, HandlerConfig>,
    /// TLS of the executor's server and of its calls to `https://` admins.
    #[serde(default)]
    pub tls: TlsConfig,
    /// Address serving Prometheus metrics on `GET /metrics` (plain HTTP, no authentication);
    /// empty = off.
    #[serde(default)]
    pub metrics_listen: String,
    /// Serve on a non-loopback `bind` with neither `access_token` nor mTLS: anyone who reaches
    /// the port can run the handlers. Refused at startup unless set.
    #[serde(default)]
    pub insecure_open_network: bool,
    /// How the admin reaches the sidecar: `dial` (default: the admin dials `advertise_address`)
    /// or `session` (no port is opened; runs, kills and log reads come down the sidecar's own
    /// session, for a sidecar the admin cannot reach).
    #[serde(default)]
    pub dispatch: Dispatch,
}

/// `dispatch`: who opens the connection the admin's calls travel on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dispatch {
    /// The admin dials the sidecar's port.
    #[default]
    Dial,
    /// The calls travel down the sidecar's session to the admin; no port is opened.
    Session,
}

impl Dispatch {
    fn parse(value: &str) -> Option<Dispatch> {
        match value.trim() {
            "dial" => Some(Dispatch::Dial),
            "session" => Some(Dispatch::Session),
            _ => None,
        }
    }
}

/// `[tls]`: PEM files; every key optional (docs/security.md, "TLS and mTLS").
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The executor's certificate chain and key: its server speaks TLS (`https://`).
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// CA that signs the admins' certificates (server and client).
    pub ca: Option<PathBuf>,
    /// Certificate and key presented to admins that require mTLS; default `cert`/`key`.
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    /// Only callers with a certificate from `ca` may call the executor (mTLS).
    #[serde(default)]
    pub require_client_cert: bool,
}

/// `[glue]`: which script languages run here, and with which interpreter.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlueConfig {
    /// Languages allowed: `shell`, `python`, `nodejs`, `php`, `powershell`.
    #[serde(default)]
    pub enabled: Vec<GlueLanguage>,
    /// Interpreter programs by language (default: bash, python3, node, php, pwsh on the PATH).
    #[serde(default)]
    pub interpreters: BTreeMap<GlueLanguage, String>,
    /// Extra environment variables for scripts.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// A script language, as written in the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GlueLanguage {
    Shell,
    Python,
    Nodejs,
    Php,
    Powershell,
}

impl GlueLanguage {
    /// Every language, in the config's spelling.
    pub const ALL: [GlueLanguage; 5] = [
        GlueLanguage::Shell,
        GlueLanguage::Python,
        GlueLanguage::Nodejs,
        GlueLanguage::Php,
        GlueLanguage::Powershell,
    ];

    /// The config spelling (`shell`).
    pub fn name(self) -> &'static str {
        match self {
            GlueLanguage::Shell => "shell",
            GlueLanguage::Python => "python",
            GlueLanguage::Nodejs => "nodejs",
            GlueLanguage::Php => "php",
            GlueLanguage::Powershell => "powershell",
        }
    }

    fn parse(name: &str) -> Option<GlueLanguage> {
        GlueLanguage::ALL
            .into_iter()
            .find(|language| language.name() == name)
    }
}

/// `[handlers.NAME]`: one handler, by kind.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum HandlerConfig {
    /// Runs a program per run.
    Command(CommandConfig),
    /// Calls the app over HTTP per run.
    Http(HttpConfig),
}

/// A `command` handler.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandConfig {
    /// Program and leading arguments; the run's params are appended, split on whitespace.
    pub argv: Vec<String>,
    /// Directory the program starts in.
    #[serde(default)]
    pub working_dir: Option<PathBuf>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Stops the program after this long (besides the job's own timeout); absent = none.
    #[serde(default, deserialize_with = "optional_duration")]
    pub timeout: Option<Duration>,
}

/// An `http` handler.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// `GET`, `POST`, `PUT`, `PATCH` or `DELETE`.
    #[serde(default = "default_method")]
    pub method: String,
    /// `http://host:port/path`, or a path joined to `app_url`.
    pub url: String,
    /// Request headers; values may hold placeholders.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Request body template; see `http::PLACEHOLDERS`.
    #[serde(default)]
    pub body: String,
    /// Cancels the request after this long (besides the job's own timeout); absent = none.
    #[serde(default, deserialize_with = "optional_duration")]
    pub timeout: Option<Duration>,
}

fn default_bind() -> String {
    "127.0.0.1:9999".to_owned()
}

fn default_log_dir() -> PathBuf {
    PathBuf::from("./xjob-executor-logs")
}

fn default_shutdown_grace() -> Duration {
    Duration::from_secs(30)
}

fn default_kill_grace() -> Duration {
    Duration::from_secs(2)
}

fn default_log_retention_days() -> u32 {
    30
}

fn default_method() -> String {
    "POST".to_owned()
}

/// A config error, naming the key at fault.
#[derive(Debug)]
pub struct ConfigError {
    /// The key or variable at fault; empty for file syntax errors, whose message names it.
    pub key: String,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.key.is_empty() {
            formatter.write_str(&self.message)
        } else {
            write!(formatter, "config key {}: {}", self.key, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

fn config_error(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.into(),
        message: message.into(),
    }
}

impl Config {
    /// Parses the file's text; unknown keys and wrong types are errors naming the key.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|error| {
            let message = error.message().to_owned();
            let location = error
                .span()
                .and_then(|span| line_of(text, span.start))
                .map(|line| format!(" (line {line})"))
                .unwrap_or_default();
            // The message names the key (unknown field `x`, invalid type for `y`).
            config_error("", format!("{message}{location}"))
        })
    }

    /// Applies the `XJOB_*` variables `lookup` finds.
    pub fn apply_env(
        &mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        if let Some(value) = lookup("XJOB_APP_NAME") {
            self.app_name = value;
        }
        if let Some(value) = lookup("XJOB_ADMIN_ADDRS") {
            self.admin_addrs = split_list(&value);
        }
        if let Some(value) = lookup("XJOB_ACCESS_TOKEN") {
            self.access_token = value;
        }
        if let Some(value) = lookup("XJOB_BIND") {
            self.bind = value;
        }
        if let Some(value) = lookup("XJOB_ADVERTISE_ADDRESS") {
            self.advertise_address = value;
        }
        if let Some(value) = lookup("XJOB_LOG_DIR") {
            self.log_dir = PathBuf::from(value);
        }
        if let Some(value) = lookup("XJOB_APP_URL") {
            self.app_url = value;
        }
        if let Some(value) = lookup("XJOB_SHUTDOWN_GRACE") {
            self.shutdown_grace = parse_duration(&value)
                .map_err(|message| config_error("XJOB_SHUTDOWN_GRACE", message))?;
        }
        if let Some(value) = lookup("XJOB_DISPATCH") {
            self.dispatch = Dispatch::parse(&value).ok_or_else(|| {
                config_error(
                    "XJOB_DISPATCH",
                    format!("unknown dispatch {value:?}, expected \"dial\" or \"session\""),
                )
            })?;
        }
        if let Some(value) = lookup("XJOB_METRICS_LISTEN") {
            self.metrics_listen = value;
        }
        if let Some(value) = lookup("XJOB_GLUE_ENABLED") {
            self.glue.enabled = split_list(&value)
                .iter()
                .map(|name| {
                    GlueLanguage::parse(name)
                        .ok_or_else(|| config_error("XJOB_GLUE_ENABLED", unknown_language(name)))
                })
                .collect::<Result<_, _>>()?;
        }
        Ok(())
    }

    /// Checks what serde cannot: required keys, handler settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.app_name.trim().is_empty() {
            return Err(config_error("app_name", "required (or XJOB_APP_NAME)"));
        }
        if self.admin_addrs.is_empty() {
            return Err(config_error(
                "admin_addrs",
                "at least one admin address is required (or XJOB_ADMIN_ADDRS)",
            ));
        }
        for (name, handler) in &self.handlers {
            let key = |field: &str| format!("handlers.{name}.{field}");
            match handler {
                HandlerConfig::Command(command) => {
                    if command.argv.is_empty() {
                        return Err(config_error(key("argv"), "must name a program"));
                    }
                }
                HandlerConfig::Http(http) => {
                    crate::http::HttpTarget::parse(&http.method, &self.app_url, &http.url)
                        .map_err(|(field, message)| config_error(key(field), message))?;
                }
            }
        }
        Ok(())
    }
}

fn unknown_language(name: &str) -> String {
    let known: Vec<&str> = GlueLanguage::ALL.iter().map(|l| l.name()).collect();
    format!("unknown glue language {name:?}, expected one of {known:?}")
}

fn split_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

fn line_of(text: &str, offset: usize) -> Option<usize> {
    text.get(..offset)
        .map(|before| before.matches('\n').count() + 1)
}

/// Parses `"500ms"`, `"30s"`, `"5m"`, `"1h"` (a whole number and a unit).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like \"500ms\", \"30s\", \"5m\""))?;
    let unit_ms = match unit.trim() {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?} (use ms, s, m or h)"
            ));
        }
    };
    number
        .checked_mul(unit_ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{text:?} is too long"))
}

fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    parse_duration(&text).map_err(serde::de::Error::custom)
}

fn optional_duration<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Duration>, D::Error> {
    duration(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "app_name = \"orders\"\nadmin_addrs = [\"http://127.0.0.1:8080\"]\n";

    fn load(text: &str) -> Result<Config, ConfigError> {
        let config = Config::from_toml(text)?;
        config.validate()?;
        Ok(config)
    }

    #[test]
    fn durations_take_a_unit() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("30").is_err());
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn unknown_keys_are_errors_naming_the_key() {
        let error = load(&format!("{MINIMAL}bnid = \"0.0.0.0:1\"\n")).expect_err("typo");
        assert!(error.to_string().contains("bnid"), "{error}");
        let error = load(&format!(
            "{MINIMAL}[handlers.a]\nkind = \"command\"\nargv = [\"true\"]\ntimout = \"1s\"\n"
        ))
        .expect_err("typo in a handler");
        assert!(error.to_string().contains("timout"), "{error}");
        let error = load(&format!("{MINIMAL}[handlers.a]\nkind = \"ftp\"\n")).expect_err("kind");
        assert!(error.to_string().contains("ftp"), "{error}");
    }

    #[test]
    fn handler_settings_are_checked_with_their_key() {
        let error = load(&format!(
            "{MINIMAL}[handlers.report]\nkind = \"http\"\nurl = \"/jobs/report\"\n"
        ))
        .expect_err("relative url without app_url");
        assert_eq!(error.key, "handlers.report.url");
        let error = load(&format!(
            "{MINIMAL}[handlers.report]\nkind = \"http\"\nmethod = \"FETCH\"\nurl = \"http://a:1/\"\n"
        ))
        .expect_err("method");
        assert_eq!(error.key, "handlers.report.method");
        let error = load(&format!(
            "{MINIMAL}[handlers.report]\nkind = \"http\"\nurl = \"https://a/\"\n"
        ))
        .expect_err("https");
        assert_eq!(error.key, "handlers.report.url");
        let error = load(&format!(
            "{MINIMAL}[handlers.x]\nkind = \"command\"\nargv = []\n"
        ))
        .expect_err("argv");
        assert_eq!(error.key, "handlers.x.argv");
    }

    #[test]
    fn environment_overrides_the_file() {
        let mut config = Config::from_toml(MINIMAL).expect("config");
        let env: BTreeMap<&str, &str> = [
            ("XJOB_ADMIN_ADDRS", "http://a:1, http://b:2"),
            ("XJOB_GLUE_ENABLED", "shell,python"),
            ("XJOB_SHUTDOWN_GRACE", "7s"),
            ("XJOB_METRICS_LISTEN", "0.0.0.0:9465"),
        ]
        .into();
        config
            .apply_env(|key| env.get(key).map(|value| (*value).to_owned()))
            .expect("env");
        assert_eq!(config.admin_addrs, ["http://a:1", "http://b:2"]);
        assert_eq!(
            config.glue.enabled,
            [GlueLanguage::Shell, GlueLanguage::Python]
        );
        assert_eq!(config.shutdown_grace, Duration::from_secs(7));
        assert_eq!(config.metrics_listen, "0.0.0.0:9465");
        let error = config
            .apply_env(|key| (key == "XJOB_GLUE_ENABLED").then(|| "groovy".to_owned()))
            .expect_err("groovy");
        assert_eq!(error.key, "XJOB_GLUE_ENABLED");
    }

    #[test]
    fn dispatch_is_read_from_the_file_and_the_environment() {
        assert_eq!(load(MINIMAL).expect("minimal").dispatch, Dispatch::Dial);
        let mut config = load(&format!("{MINIMAL}dispatch = \"session\"\n")).expect("session");
        assert_eq!(config.dispatch, Dispatch::Session);
        assert!(load(&format!("{MINIMAL}dispatch = \"push\"\n")).is_err());
        config
            .apply_env(|key| (key == "XJOB_DISPATCH").then(|| "dial".to_owned()))
            .expect("env");
        assert_eq!(config.dispatch, Dispatch::Dial);
        let error = config
            .apply_env(|key| (key == "XJOB_DISPATCH").then(|| "push".to_owned()))
            .expect_err("push");
        assert_eq!(error.key, "XJOB_DISPATCH");
    }

    #[test]
    fn tls_table_and_open_network_opt_out_are_read() {
        let config = load(&format!(
            "{MINIMAL}insecure_open_network = true\n[tls]\ncert = \"e.pem\"\nkey = \"e.key\"\nca = \"ca.pem\"\nrequire_client_cert = true\n"
        ))
        .expect("config");
        assert!(config.insecure_open_network);
        assert_eq!(config.tls.cert, Some(PathBuf::from("e.pem")));
        assert_eq!(config.tls.ca, Some(PathBuf::from("ca.pem")));
        assert!(config.tls.require_client_cert);
        assert_eq!(config.bind, "127.0.0.1:9999");
        assert!(load(&format!("{MINIMAL}[tls]\ncertificate = \"x\"\n")).is_err());
    }
}
