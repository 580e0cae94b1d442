use super::*;
use crate::model::{GroupId, JobStatus, RetryBackoff};

const LIMITS: JobLimits = JobLimits {
    max_params_bytes: 65536,
    default_time_zone: chrono_tz::UTC,
};

fn job() -> Job {
    Job {
        schedule_conf: "0 0 1 * * ?".into(),
        handler: "demoHandler".into(),
        ..Job::new(GroupId(1), "nightly report")
    }
}

fn invalid_message(job: Job) -> String {
    match validate_job(&job, &LIMITS, "job") {
        Err(Refusal::InvalidArgument(message)) => message,
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

fn group(address_type: AddressType, addresses: &[&str]) -> Group {
    Group {
        id: GroupId(0),
        app_name: "demo-app".into(),
        title: "Demo".into(),
        address_type,
        addresses: addresses
            .iter()
            .map(|address| address.to_string())
            .collect(),
        access_token: String::new(),
        updated_ms: 0,
    }
}

#[test]
fn a_complete_bean_job_passes() {
    assert!(validate_job(&job(), &LIMITS, "job").is_ok());
    let fix_rate = Job {
        schedule_type: ScheduleType::FixRate,
        schedule_conf: "30".into(),
        ..job()
    };
    assert!(validate_job(&fix_rate, &LIMITS, "job").is_ok());
    let none = Job {
        schedule_type: ScheduleType::None,
        schedule_conf: String::new(),
        ..job()
    };
    assert!(validate_job(&none, &LIMITS, "job").is_ok());
}

#[test]
fn schedule_errors_name_the_field() {
    let message = invalid_message(Job {
        schedule_conf: "0 0 25 * * ?".into(),
        ..job()
    });
    assert!(
        message.starts_with("job.schedule_conf: invalid cron '0 0 25 * * ?': "),
        "{message}"
    );
    for conf in ["0", "-3", "1.5", "ten"] {
        let fix_rate = Job {
            schedule_type: ScheduleType::FixRate,
            schedule_conf: conf.into(),
            ..job()
        };
        assert!(invalid_message(fix_rate).starts_with("job.schedule_conf: "));
    }
    let fix_delay = Job {
        schedule_type: ScheduleType::FixDelay,
        schedule_conf: "5".into(),
        ..job()
    };
    assert!(validate_job(&fix_delay, &LIMITS, "job").is_ok());
    let bad_delay = Job {
        schedule_type: ScheduleType::FixDelay,
        schedule_conf: "0".into(),
        ..job()
    };
    assert!(invalid_message(bad_delay).starts_with("job.schedule_conf: "));
    assert!(
        validate_schedule(ScheduleType::Cron, "bad", "").is_err_and(|error| error
            .to_string()
            .starts_with("schedule_conf: invalid cron 'bad'"))
    );
}

#[test]
fn zones_default_when_empty_and_must_be_known() {
    assert_eq!(
        resolve_time_zone("", chrono_tz::UTC, "time_zone").ok(),
        Some(chrono_tz::UTC)
    );
    assert_eq!(
        resolve_time_zone("Asia/Shanghai", chrono_tz::UTC, "time_zone").ok(),
        Some(chrono_tz::Asia::Shanghai)
    );
    let message = invalid_message(Job {
        time_zone: "Mars/Base".into(),
        ..job()
    });
    assert_eq!(message, "job.time_zone: unknown time zone 'Mars/Base'");
}

#[test]
fn field_rules_name_the_field() {
    assert_eq!(
        invalid_message(Job {
            name: " ".into(),
            ..job()
        }),
        "job.name: required"
    );
    assert_eq!(
        invalid_message(Job {
            handler: String::new(),
            ..job()
        }),
        "job.handler: required for GLUE_TYPE_BEAN"
    );
    assert_eq!(
        invalid_message(Job {
            timeout_ms: -1,
            ..job()
        }),
        "job.timeout_ms: must be >= 0, got -1"
    );
    assert_eq!(
        invalid_message(Job {
            fail_retry_count: -2,
            ..job()
        }),
        "job.fail_retry_count: must be >= 0, got -2"
    );
    let backoff = RetryBackoff {
        initial_delay_ms: -5,
        ..RetryBackoff::default()
    };
    assert_eq!(
        invalid_message(Job {
            retry_backoff: backoff,
            ..job()
        }),
        "job.retry_backoff.initial_delay_ms: must be >= 0, got -5"
    );
    let backoff = RetryBackoff {
        factor: f64::NAN,
        ..RetryBackoff::default()
    };
    assert!(
        invalid_message(Job {
            retry_backoff: backoff,
            ..job()
        })
        .starts_with("job.retry_backoff.factor: ")
    );
    assert_eq!(
        invalid_message(Job {
            params: "x".repeat(70000),
            ..job()
        }),
        "job.params: 70000 bytes exceeds the limit of 65536"
    );
    assert_eq!(
        invalid_message(Job {
            id: JobId(9),
            child_job_ids: vec![JobId(3), JobId(9)],
            ..job()
        }),
        "job.child_job_ids: job 9 cannot be its own child"
    );
}

#[test]
fn script_glue_needs_a_source_but_no_handler() {
    let shell = Job {
        glue_type: GlueType::Shell,
        handler: String::new(),
        ..job()
    };
    let with_source = Job {
        glue_source: "echo hello".into(),
        ..shell.clone()
    };
    assert_eq!(
        invalid_message(shell),
        "job.glue_source: required for GLUE_SHELL (the script to run)"
    );
    assert!(validate_job(&with_source, &LIMITS, "job").is_ok());
}

#[test]
fn child_ids_are_deduplicated_in_order() {
    assert_eq!(
        dedup_child_ids(&[3, 1, 3, 2, 1].map(JobId)),
        [3, 1, 2].map(JobId)
    );
}

#[test]
fn groups_check_app_name_title_and_manual_addresses() {
    assert!(validate_group(&group(AddressType::Auto, &[]), "group").is_ok());
    assert!(validate_group(&group(AddressType::Manual, &["https://a:1"]), "group").is_ok());
    let short = Group {
        app_name: "abc".into(),
        ..group(AddressType::Auto, &[])
    };
    assert_eq!(
        validate_group(&short, "group").map_err(|error| error.to_string()),
        Err("group.app_name: 'abc' must be 4-64 characters, has 3".to_string())
    );
    let spaced = Group {
        app_name: "my app".into(),
        ..group(AddressType::Auto, &[])
    };
    assert!(validate_group(&spaced, "group").is_err_and(|error| {
        error
            .to_string()
            .starts_with("group.app_name: 'my app' may contain only")
    }));
    let untitled = Group {
        title: String::new(),
        ..group(AddressType::Auto, &[])
    };
    assert_eq!(
        validate_group(&untitled, "group").map_err(|error| error.to_string()),
        Err("group.title: required".to_string())
    );
    assert_eq!(
        validate_group(&group(AddressType::Manual, &[]), "group").map_err(|e| e.to_string()),
        Err("group.addresses: a MANUAL group needs at least one address".to_string())
    );
    assert_eq!(
        validate_group(&group(AddressType::Manual, &["http://a:1", "a:2"]), "group")
            .map_err(|error| error.to_string()),
        Err("group.addresses[1]: 'a:2' must start with http:// or https://".to_string())
    );
}

#[test]
fn executor_addresses_need_a_scheme_a_host_and_a_valid_port() {
    for good in [
        "http://127.0.0.1:9999",
        "https://orders-1.svc.local:443/",
        "http://[::1]:8080",
        "http://executor_a",
    ] {
        assert!(validate_executor_address(good, "a").is_ok(), "{good}");
    }
    for (bad, why) in [
        ("a", "must start with http:// or https://"),
        ("http://", "has no valid host"),
        ("http://a b:1", "has no valid host"),
        ("http://a:1/path", "must have no path"),
        ("http://a:0", "has an invalid port"),
        ("http://a:70000", "has an invalid port"),
        ("http://a:", "has an invalid port"),
        ("http://[::1", "has no valid host"),
        ("http://:9999", "has no valid host"),
        ("http://a\u{0}b:1", "has no valid host"),
    ] {
        let error = validate_executor_address(bad, "addresses[0]")
            .expect_err(bad)
            .to_string();
        assert!(error.starts_with("addresses[0]: "), "{error}");
        assert!(error.contains(why), "{bad}: {error}");
    }
}

#[test]
fn oversized_text_fields_are_refused_without_echoing_them() {
    let limits = JobLimits {
        max_params_bytes: 64 * 1024,
        default_time_zone: chrono_tz::UTC,
    };
    let huge = "x".repeat(4 * 1024 * 1024);
    let base = job();
    for (field, job) in [
        (
            "job.name",
            Job {
                name: huge.clone(),
                ..base.clone()
            },
        ),
        (
            "job.author",
            Job {
                author: huge.clone(),
                ..base.clone()
            },
        ),
        (
            "job.handler",
            Job {
                handler: huge.clone(),
                ..base.clone()
            },
        ),
        (
            "job.schedule_conf",
            Job {
                schedule_conf: huge.clone(),
                ..base.clone()
            },
        ),
    ] {
        let message = validate_job(&job, &limits, "job")
            .expect_err(field)
            .to_string();
        assert!(message.starts_with(field), "{message}");
        assert!(message.contains("exceeds the limit"), "{message}");
        assert!(message.len() < 200, "{message}");
    }
    assert!(validate_job(&base, &limits, "job").is_ok());
}

#[test]
fn oversized_groups_are_refused_without_echoing_them() {
    let mut huge_app = group(AddressType::Auto, &[]);
    huge_app.app_name = "a".repeat(1024 * 1024);
    let message = validate_group(&huge_app, "group")
        .expect_err("app")
        .to_string();
    assert!(message.starts_with("group.app_name"), "{message}");
    assert!(message.len() < 300, "{message}");

    let many: Vec<String> = (0..1001).map(|i| format!("http://h{i}:1")).collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let message = validate_group(&group(AddressType::Manual, &refs), "group")
        .expect_err("too many addresses")
        .to_string();
    assert!(
        message.contains("1001 addresses exceeds the limit of 1000"),
        "{message}"
    );
}

/// `PreviewSchedule` validates a schedule without a job around it: a megabyte expression or
/// zone once came back whole in the refusal, and the client saw a broken HTTP/2 stream.
#[test]
fn a_huge_schedule_or_zone_is_not_echoed_whole() {
    let huge_cron = format!("0 * * * * ? {}", "9".repeat(1024 * 1024));
    for schedule_type in [ScheduleType::Cron, ScheduleType::FixRate] {
        let error = validate_schedule(schedule_type, &huge_cron, "").expect_err("too long");
        assert!(error.to_string().starts_with("schedule_conf: "), "{error}");
        assert!(error.to_string().len() < 200, "{error}");
    }
    let huge_zone = "Z".repeat(1024 * 1024);
    let error = resolve_time_zone(&huge_zone, chrono_tz::UTC, "time_zone").expect_err("zone");
    assert!(error.to_string().len() < 200, "{error}");
}

#[test]
fn a_huge_bad_address_is_not_echoed_whole() {
    let huge = format!("ftp://{}", "x".repeat(100_000));
    let error = validate_executor_address(&huge, "a").expect_err("too long");
    assert!(error.to_string().len() < 200, "{error}");
}

#[test]
fn update_keeps_status_fire_times_and_creation_time() {
    let existing = Job {
        id: JobId(4),
        status: JobStatus::Running,
        trigger_last_ms: 1_000,
        trigger_next_ms: 2_000,
        created_ms: 100,
        glue_updated_ms: 100,
        ..job()
    };
    let incoming = Job {
        name: "renamed".into(),
        status: JobStatus::Stopped,
        trigger_next_ms: 0,
        created_ms: 0,
        ..existing.clone()
    };
    let merged = merge_job_update(&existing, incoming, 5_000).expect("same glue type");
    assert_eq!(merged.name, "renamed");
    assert_eq!(merged.status, JobStatus::Running);
    assert_eq!(merged.trigger_next_ms, 2_000);
    assert_eq!(merged.created_ms, 100);
    assert_eq!(merged.updated_ms, 5_000);
    assert_eq!(merged.glue_updated_ms, 100);

    let edited = Job {
        glue_remark: "v2".into(),
        ..existing.clone()
    };
    let merged = merge_job_update(&existing, edited, 6_000).expect("same glue type");
    assert_eq!(merged.glue_updated_ms, 6_000);
}

#[test]
fn update_refuses_a_glue_type_change() {
    let shell = Job {
        glue_type: GlueType::Shell,
        ..job()
    };
    let error = merge_job_update(&job(), shell, 5_000).expect_err("glue type changed");
    assert!(matches!(error, Refusal::InvalidArgument(_)));
    assert!(
        error
            .to_string()
            .starts_with("job.glue_type: cannot change")
    );
}

fn graph(edges: &[(i64, &[i64])]) -> HashMap<i64, Vec<i64>> {
    edges
        .iter()
        .map(|(id, children)| (*id, children.to_vec()))
        .collect()
}

#[test]
fn child_cycles_are_found_with_their_path() {
    let two_cycle = graph(&[(3, &[5]), (5, &[3])]);
    let found = find_child_cycle(3, &two_cycle).expect("3 -> 5 -> 3");
    assert_eq!(found.cycle, vec![3, 5, 3]);
    assert_eq!(
        child_cycle_error(3, &found, "job.child_job_ids").to_string(),
        "job.child_job_ids: cycle 3 -> 5 -> 3"
    );

    let long = graph(&[
        (1, &[2, 4]),
        (2, &[3]),
        (3, &[]),
        (4, &[5]),
        (5, &[6]),
        (6, &[1]),
    ]);
    let found = find_child_cycle(1, &long).expect("1 -> 4 -> 5 -> 6 -> 1");
    assert_eq!(found.cycle, vec![1, 4, 5, 6, 1]);

    let downstream = graph(&[(0, &[7]), (7, &[8]), (8, &[9]), (9, &[8])]);
    let found = find_child_cycle(0, &downstream).expect("8 -> 9 -> 8");
    assert_eq!(found.cycle, vec![8, 9, 8]);
    assert_eq!(found.through_child, 7);
    assert_eq!(
        child_cycle_error(0, &found, "job.child_job_ids").to_string(),
        "job.child_job_ids: cycle 8 -> 9 -> 8 (reached through child 7)"
    );
}

#[test]
fn shared_children_and_dangling_ids_are_not_cycles() {
    // A diamond: 1 -> {2, 3} -> 4; 4 lists a deleted job 99.
    let diamond = graph(&[(1, &[2, 3]), (2, &[4]), (3, &[4]), (4, &[99])]);
    assert_eq!(find_child_cycle(1, &diamond), None);
    assert_eq!(find_child_cycle(1, &HashMap::new()), None);
    let chain: HashMap<i64, Vec<i64>> = (1..10_000).map(|id| (id, vec![id + 1])).collect();
    assert_eq!(find_child_cycle(1, &chain), None);
}

#[test]
fn access_tokens_must_be_visible_ascii() {
    let with_token = |token: &str| Group {
        access_token: token.to_string(),
        ..group(AddressType::Auto, &[])
    };
    assert!(validate_group(&with_token(""), "group").is_ok());
    assert!(validate_group(&with_token("s3cret-Token_1.~"), "group").is_ok());
    for bad in ["has space", "new\nline", "caf\u{e9}"] {
        assert!(
            validate_group(&with_token(bad), "group")
                .is_err_and(|error| error.to_string().starts_with("group.access_token: ")),
            "{bad:?}"
        );
    }
    assert!(validate_group(&with_token(&"x".repeat(257)), "group").is_err());
}

#[test]
fn a_manual_group_may_list_an_xxl_job_executor_behind_its_prefix() {
    let listed = group(
        AddressType::Manual,
        &["http://a:1", "xxl-job+http://10.0.0.5:9999/"],
    );
    assert!(validate_group(&listed, "group").is_ok());
    assert_eq!(
        xxl_listed_address("xxl-job+http://10.0.0.5:9999/"),
        Some("http://10.0.0.5:9999/")
    );
    assert_eq!(xxl_listed_address("http://10.0.0.5:9999"), None);
    assert_eq!(xxl_listed_address("xxl-job+https://a:1"), None);
    assert_eq!(
        validate_executor_addresses(&["xxl-job+http://a b:1".to_string()], "addresses")
            .map_err(|error| error.to_string()),
        Err(
            "addresses[0]: 'http://a b:1' has no valid host (expected http://HOST:PORT)"
                .to_string()
        )
    );
}

#[test]
fn a_dst_policy_is_for_cron_schedules_only() {
    use crate::model::{DstGapPolicy, DstOverlapPolicy, DstPolicy};
    let skip_gap = DstPolicy {
        gap: DstGapPolicy::Skip,
        ..DstPolicy::default()
    };
    let mut cron = job();
    cron.policy.dst = skip_gap;
    assert_eq!(validate_job(&cron, &LIMITS, "job"), Ok(()));
    // In UTC (or any zone) the policy is accepted; it just never comes into play there.
    cron.time_zone = "UTC".into();
    assert_eq!(validate_job(&cron, &LIMITS, "job"), Ok(()));

    let mut rate = job();
    rate.schedule_type = ScheduleType::FixRate;
    rate.schedule_conf = "60".into();
    rate.policy.dst = skip_gap;
    assert_eq!(
        invalid_message(rate.clone()),
        "job.dst_gap_policy: SKIP applies to CRON schedules only (local times a zone skips or \
         repeats); a FIX_RATE schedule has none, leave it unset"
    );
    rate.policy.dst = DstPolicy {
        overlap: DstOverlapPolicy::Both,
        ..DstPolicy::default()
    };
    assert!(invalid_message(rate.clone()).starts_with("job.dst_overlap_policy: BOTH applies"));
    // The defaults are what every schedule does: nothing to refuse.
    rate.policy.dst = DstPolicy::default();
    assert_eq!(validate_job(&rate, &LIMITS, "job"), Ok(()));
}
