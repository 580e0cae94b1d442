//! TOML configuration and `XJOB_*` variables, for the admin and for the sidecar executor: a
//! file or a variable of any content is read into a config or refused with an error naming what
//! is wrong; nothing panics, whatever the durations, numbers, addresses or tables say. (Reading
//! files named in the config, such as certificates, comes later, at start.)

use xjob_admin::config::Config as AdminConfig;
use xjob_sidecar::config::Config as SidecarConfig;

use super::{Budget, Gen, run_cases};

/// A valid admin file touching every kind of value: addresses, durations, numbers, booleans,
/// paths, an enum, and the nested alarm table.
const ADMIN_VALID: &str = r#"listen = "127.0.0.1:8080"
data_dir = "/tmp/xjob-fuzz"
database_url = "sqlite:///tmp/xjob-fuzz/xjob.db"
node_id = "admin-1"
time_zone = "Europe/Berlin"
pre_read = "5s"
misfire_threshold = "5s"
pre_read_count = 6000
scan_chunk_jobs = 1000
heartbeat_interval = "1s"
executor_lease = "30s"
keepalive_interval = "2s"
keepalive_timeout = "5s"
executor_timeout = "3s"
node_lease = "10s"
liveness_locks = true
max_params_bytes = 65536
fast_pool_size = 200
slow_pool_size = 100
pool_wait = "100ms"
log_retention_days = 30
log_retention = "168h"
insecure_open_admin_api = false
trigger_any_address = false
executor_peer_check = true
executor_token = "cluster-secret"
tls_client_auth = "none"
max_request_bytes = 4194304
request_timeout = "30s"
max_concurrent_streams = 256
max_page_size = 1000
session_message_rate = 20
metrics_listen = "127.0.0.1:9100"
http_listen = "127.0.0.1:8081"
xxl_job_compat_listen = "127.0.0.1:8082"
xxl_job_compat_lease = "90s"
[alarm]
webhook_url = "https://hooks.example/xjob"
max_per_job = 5
rate_window = "10m"
attempts = 3
retry_delay = "2s"
timeout = "5s"
"#;

/// The sidecar's example file in `deploy/sidecar/`, with the script (glue) table filled.
const SIDECAR_VALID: &str = r#"app_name = "demo-app"
admin_addrs = ["http://127.0.0.1:8080", "https://admin-2:8080"]
access_token = "secret"
bind = "127.0.0.1:9999"
advertise_address = "http://127.0.0.1:9999"
log_dir = "./xjob-executor-logs"
log_retention_days = 30
shutdown_grace = "30s"
kill_grace = "2s"
app_url = "http://127.0.0.1:8000"
[labels]
zone = "example"
[handlers.report]
kind = "http"
method = "POST"
url = "/jobs/report"
headers = { "content-type" = "application/json", "x-xjob-log-id" = "{log_id}" }
body = '''{"params": {params_json}, "log_id": {log_id}}'''
timeout = "10m"
[handlers.greet]
kind = "command"
argv = ["echo", "hello"]
env = { GREETING_STYLE = "plain" }
timeout = "1m"
[glue]
enabled = ["shell", "python"]
[tls]
require_client_cert = false
"#;

const TOML_DICTIONARY: &[&str] = &[
    "=",
    "\"",
    "'",
    "'''",
    "\"\"\"",
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    ",",
    ".",
    "#",
    "\n",
    "true",
    "false",
    "\"\"",
    "[]",
    "{}",
    "0s",
    "1ms",
    "500ms",
    "1m",
    "2h",
    "7d",
    "1w",
    "5",
    "5 s",
    "-5s",
    "18446744073709551615s",
    "99999999999999999999h",
    "1.5s",
    "s",
    "ms",
    "\"0.0.0.0:0\"",
    "\"[::1]:8080\"",
    "\"127.0.0.1:99999\"",
    "\"host:80\"",
    "\"all\"",
    "\"none\"",
    "\"bogus\"",
    "1979-05-27T07:32:00Z",
    "inf",
    "nan",
    "+1",
    "0x1F",
    "0o7",
    "0b1",
    "1e3",
    "\\u0000",
    "\\",
    "listen",
    "time_zone",
    "alarm",
    "handlers",
    "kind",
    "argv",
    "tls",
    "glue",
    "enabled",
    "\"Mars/Olympus\"",
    "\"http\"",
    "\"command\"",
    "\"GET\"",
    "\"\\n\"",
    "\"unknown\"",
];

/// Values for `XJOB_*` variables: what an operator's environment might hold, and worse.
const ENV_DICTIONARY: &[&str] = &[
    "",
    " ",
    "1",
    "0",
    "true",
    "TRUE",
    "yes",
    "on",
    "off",
    "5s",
    "0s",
    "-1s",
    "9999999999999d",
    "127.0.0.1:0",
    "0.0.0.0:8080",
    "[::]:1",
    "host",
    "http://a:1,http://b:2",
    ",",
    "UTC",
    "Europe/Berlin",
    "Mars/Olympus",
    "executors",
    "all",
    "none",
    "shell,python,node,php",
    "cobol",
];

fn make_text(rng: &mut Gen, valid: &str) -> String {
    match rng.below(5) {
        0 => String::from_utf8_lossy(&rng.bytes(256)).into_owned(),
        1 => rng.string(120, TOML_DICTIONARY),
        _ => rng.mutate(valid, &['=', '"', '[', ']', '{', '}', ','], TOML_DICTIONARY),
    }
}

/// Random `XJOB_*` values: each variable set with a chance, to a dictionary or random value.
fn make_env(rng: &mut Gen) -> Vec<(String, String)> {
    (0..rng.below(6))
        .map(|_| {
            let value = if rng.chance(2) {
                rng.pick(ENV_DICTIONARY).to_string()
            } else {
                rng.string(24, ENV_DICTIONARY)
            };
            (String::new(), value)
        })
        .collect()
}

/// An environment lookup that answers every variable from `values` (cycling), so every
/// variable a config reads gets a fuzzed value.
fn lookup(values: &[(String, String)]) -> impl Fn(&str) -> Option<String> + '_ {
    move |name: &str| {
        if values.is_empty() {
            return None;
        }
        let index = name.bytes().map(usize::from).sum::<usize>() % values.len();
        Some(values[index].1.clone())
    }
}

#[derive(Debug)]
struct Case {
    text: String,
    env: Vec<(String, String)>,
}

fn check_admin(case: &Case) -> Result<(), String> {
    let mut config = match AdminConfig::from_toml(&case.text) {
        Ok(config) => config,
        Err(error) => return clean(&error.to_string()),
    };
    if let Err(error) = config.apply_env(lookup(&case.env)) {
        return clean(&error.to_string());
    }
    match config.validate() {
        Ok(_) => Ok(()),
        Err(error) => clean(&error.to_string()),
    }
}

fn check_sidecar(case: &Case) -> Result<(), String> {
    let mut config = match SidecarConfig::from_toml(&case.text) {
        Ok(config) => config,
        Err(error) => return clean(&error.to_string()),
    };
    if let Err(error) = config.apply_env(lookup(&case.env)) {
        return clean(&error.to_string());
    }
    match config.validate() {
        Ok(()) => Ok(()),
        Err(error) => clean(&error.to_string()),
    }
}

/// An error must say something.
fn clean(message: &str) -> Result<(), String> {
    if message.trim().is_empty() {
        return Err("an error without a message".to_string());
    }
    Ok(())
}

#[test]
fn admin_config_files_and_variables_load_or_refuse_cleanly() {
    // The valid file itself loads: mutations start from something the parser accepts.
    let valid = Case {
        text: ADMIN_VALID.to_string(),
        env: Vec::new(),
    };
    let loaded = AdminConfig::from_toml(&valid.text).map(AdminConfig::validate);
    assert!(matches!(loaded, Ok(Ok(_))), "{loaded:?}");
    let budget = Budget::for_target("admin-config", 5000);
    let make = |rng: &mut Gen| Case {
        text: make_text(rng, ADMIN_VALID),
        env: make_env(rng),
    };
    run_cases("admin-config", budget, make, check_admin);
}

#[test]
fn sidecar_config_files_and_variables_load_or_refuse_cleanly() {
    let loaded = SidecarConfig::from_toml(SIDECAR_VALID).map(|config| config.validate());
    assert!(matches!(loaded, Ok(Ok(()))), "{loaded:?}");
    let budget = Budget::for_target("sidecar-config", 5000);
    let make = |rng: &mut Gen| Case {
        text: make_text(rng, SIDECAR_VALID),
        env: make_env(rng),
    };
    run_cases("sidecar-config", budget, make, check_sidecar);
}

/// The duration syntax both configs share (`500ms`, `5s`, `2m`, `7d`): a value or an error,
/// never an overflow.
#[test]
fn duration_texts_parse_or_refuse_cleanly() {
    let budget = Budget::for_target("durations", 20000);
    let make = |rng: &mut Gen| {
        if rng.chance(2) {
            let valid = rng
                .pick(&["500ms", "5s", "2m", "3h", "7d", "1w", "90s"])
                .to_string();
            rng.mutate(&valid, &[], TOML_DICTIONARY)
        } else {
            rng.string(24, &["ms", "s", "m", "h", "d", "w", " ", "-", "."])
        }
    };
    for known in REGRESSIONS {
        check_duration(known).unwrap_or_else(|error| panic!("{known}: {error}"));
    }
    run_cases("durations", budget, make, |text: &String| {
        check_duration(text)
    });
}

/// Inputs that once failed, checked on every run: a number of hours past `u64` milliseconds
/// overflowed (a panic in a debug build, a wrong duration in a release build).
const REGRESSIONS: &[&str] = &[
    "9223372036854775808",
    "18446744073709551615h",
    "5124095576030432h",
];

fn check_duration(text: &str) -> Result<(), String> {
    if let Err(message) = xjob_admin::config::parse_duration(text) {
        clean(&message)?;
    }
    if let Err(message) = xjob_sidecar::config::parse_duration(text) {
        clean(&message)?;
    }
    Ok(())
}
