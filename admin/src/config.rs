//! The admin's configuration: one typed struct, read from an optional TOML file, then `XJOB_*`
//! environment variables, then command-line flags (each later source wins). `validate()` gives
//! precise messages; `Config::for_tests()` gives short intervals for the test suite.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

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
}

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
            heartbeat_interval: Duration::from_secs(10),
            executor_lease: Duration::from_secs(30),
            keepalive_interval: Duration::from_secs(2),
            keepalive_timeout: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(10),
            executor_timeout: Duration::from_secs(3),
            node_lease: Duration::from_secs(10),
            max_params_bytes: 64 * 1024,
            fast_pool_size: 256,
            slow_pool_size: 64,
            pool_wait: Duration::from_secs(1),
            max_unsent_runs: 5_000,
            followup_interval: Duration::from_millis(200),
            report_interval: Duration::from_secs(60),
            retention_interval: Duration::from_secs(3600),
            log_retention_days: 30,
            log_retention: Duration::ZERO,
            log_keep_per_job: 0,
            demo: false,
        }
    }
}

/// A configuration problem, naming the field.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {field}: {message}")]
pub struct ConfigError {
    pub field: &'static str,
    pub message: String,
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
        if let Some(value) = lookup("XJOB_DEMO") {
            self.demo = matches!(value.as_str(), "1" | "true" | "yes");
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
        Ok(self)
    }

    /// Default zone for cron evaluation as a parsed zone.
    pub fn default_time_zone(&self) -> chrono_tz::Tz {
        crate::model::parse_time_zone(&self.time_zone).unwrap_or(chrono_tz::UTC)
    }
}

fn invalid(field: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field,
        message: message.into(),
    }
}

fn parse_field<T: std::str::FromStr>(field: &'static str, value: &str) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    value
        .parse()
        .map_err(|error: T::Err| invalid(field, format!("'{value}': {error}")))
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

/// Parses `250ms`, `5s`, `2m`, `1h` (a bare number is seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split_at = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split_at);
    let value: u64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration like 5s"))?;
    let millis = match unit {
        "ms" => value,
        "" | "s" => value * 1000,
        "m" => value * 60_000,
        "h" => value * 3_600_000,
        _ => {
            return Err(format!(
                "'{text}': unknown unit '{unit}' (use ms, s, m or h)"
            ));
        }
    };
    Ok(Duration::from_millis(millis))
}

mod duration_text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(deserializer)?;
        super::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("5 parsecs").is_err());
    }

    #[test]
    fn toml_overrides_defaults_and_validate_fills_derived_fields() {
        let config = Config::from_toml("listen = \"127.0.0.1:9000\"\npre_read = \"3s\"\n")
            .and_then(Config::validate)
            .expect("valid config");
        assert_eq!(config.listen.port(), 9000);
        assert_eq!(config.pre_read, Duration::from_secs(3));
        assert_eq!(config.node_id, "admin-127.0.0.1:9000");
        assert!(config.database_url.ends_with("xjob.db"));
    }

    #[test]
    fn unknown_fields_and_zones_are_rejected() {
        assert!(Config::from_toml("lisen = \"x\"").is_err());
        let error = Config {
            time_zone: "Mars/Base".into(),
            ..Config::default()
        }
        .validate()
        .expect_err("bad zone");
        assert_eq!(error.field, "time_zone");
    }

    #[test]
    fn env_overrides_apply() {
        let mut config = Config::default();
        config
            .apply_env(|key| (key == "XJOB_LISTEN").then(|| "127.0.0.1:7000".to_string()))
            .expect("env applies");
        assert_eq!(config.listen.port(), 7000);
    }
}
