use super::*;

#[test]
fn boolean_variables_take_every_spelling_and_refuse_the_rest() {
    for yes in ["TRUE", "true", "On", "1", "yes", " YES "] {
        assert_eq!(parse_bool("XJOB_DEMO", yes).ok(), Some(true), "{yes}");
    }
    for no in ["FALSE", "false", "off", "0", "No"] {
        assert_eq!(parse_bool("XJOB_DEMO", no).ok(), Some(false), "{no}");
    }
    for bad in ["", "maybe", "2", "enabled"] {
        let refused = parse_bool("XJOB_DEMO", bad).expect_err(bad);
        assert_eq!(refused.field, "XJOB_DEMO");
    }
    let mut config = Config::default();
    let refused = config
        .apply_env(|key| (key == "XJOB_EXECUTOR_PEER_CHECK").then(|| "ture".to_string()))
        .expect_err("a typo is refused");
    assert!(
        refused.to_string().contains("XJOB_EXECUTOR_PEER_CHECK"),
        "{refused}"
    );
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

#[test]
fn allowed_hosts_come_from_a_comma_list_and_are_checked() {
    let mut config = Config::default();
    config
        .apply_env(|key| {
            (key == "XJOB_HTTP_ALLOWED_HOSTS").then(|| "xjob.example, proxy:8443".to_string())
        })
        .expect("env applies");
    assert_eq!(config.http_allowed_hosts, ["xjob.example", "proxy:8443"]);
    config.http_allowed_hosts.push("not a name".to_string());
    let error = config.validate().expect_err("a space is no host name");
    assert_eq!(error.field, "http_allowed_hosts");
}

#[test]
fn xxl_job_compat_is_off_by_default_and_its_lease_outlasts_the_registry_interval() {
    assert!(Config::default().xxl_job_compat_listen.is_none());
    let mut config = Config::default();
    config
        .apply_env(|key| match key {
            "XJOB_XXL_JOB_COMPAT_LISTEN" => Some("127.0.0.1:8081".to_string()),
            "XJOB_XXL_JOB_COMPAT_LEASE" => Some("30s".to_string()),
            _ => None,
        })
        .expect("env applies");
    assert_eq!(config.xxl_job_compat_listen.map(|a| a.port()), Some(8081));
    let error = config
        .validate()
        .expect_err("30 s is XXL-JOB's registry interval");
    assert_eq!(error.field, "xxl_job_compat_lease");
}

#[test]
fn send_ahead_is_off_by_default_and_bounded() {
    assert_eq!(Config::default().send_ahead_ms, 0);
    let config = Config::from_toml("send_ahead_ms = 1000\n")
        .and_then(Config::validate)
        .expect("a 1 s lead is valid");
    assert_eq!(config.send_ahead_ms, 1000);
    let error = Config::from_toml("send_ahead_ms = 3001\n")
        .and_then(Config::validate)
        .expect_err("past the bound");
    assert_eq!(error.field, "send_ahead_ms");
}
