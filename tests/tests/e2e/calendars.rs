//! Calendars (docs/scheduling.md#calendars) on a real admin and a real executor over loopback
//! gRPC: a job that runs only inside a calendar holding the even seconds runs on those alone,
//! every odd second gets a SKIPPED run naming the calendar, the preview says the same before
//! the job starts, and bad calendars and references are refused with the field named.

use std::collections::HashSet;
use std::time::Duration;

use tonic::Code;
use xjob_executor::{JobContext, JobOutput, JobResult};
use xjob_proto::pb;
use xjob_tests::{TestCluster, wait_until};

const APP: &str = "calendars-app";

async fn ok_handler(_ctx: JobContext) -> JobResult {
    Ok(JobOutput::message("done"))
}

fn calendar(name: &str, rules: &[&str]) -> pb::Calendar {
    pb::Calendar {
        name: name.to_string(),
        rules: rules.iter().map(|rule| rule.to_string()).collect(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_job_runs_only_inside_its_calendar_and_every_other_fire_is_skipped_naming_it()
-> anyhow::Result<()> {
    let mut cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP).await?;
    let executor = cluster.executor(APP).handler("ok", ok_handler);
    cluster.start_executor(executor).await?;
    let mut client = cluster.client();

    // Refusals name the field and what is wrong.
    let bad = calendar("bad", &["2026-12-25", "weekly mon 17:00-09:00"]);
    let refused = client
        .create_calendar(pb::CreateCalendarRequest {
            calendar: Some(bad),
        })
        .await
        .expect_err("a window ending before it starts");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(
        refused
            .message()
            .starts_with("calendar.rules[1]: time window '17:00-09:00' must end after it starts"),
        "{}",
        refused.message()
    );
    let unnamed = client
        .create_calendar(pb::CreateCalendarRequest {
            calendar: Some(calendar("a b", &[])),
        })
        .await
        .expect_err("a space in the name");
    assert_eq!(unnamed.code(), Code::InvalidArgument);
    assert!(
        unnamed
            .message()
            .starts_with("calendar.name: ' ' not allowed")
    );

    let even = calendar("even-seconds", &["cron */2 * * * * ?"]);
    client
        .create_calendar(pb::CreateCalendarRequest {
            calendar: Some(even),
        })
        .await?;

    let mut job = TestCluster::job(group_id, "ok", pb::ScheduleType::Cron, "* * * * * ?");
    job.calendar = "missing".into();
    let missing = cluster
        .create_job(job.clone())
        .await
        .expect_err("unknown calendar");
    assert!(
        missing
            .to_string()
            .contains("job.calendar: calendar 'missing' not found"),
        "{missing}"
    );
    job.calendar = "even-seconds".into();
    job.calendar_mode = pb::CalendarMode::Only as i32;
    let job = cluster.create_job(job).await?;
    assert_eq!(
        (job.calendar.as_str(), job.calendar_mode),
        ("even-seconds", pb::CalendarMode::Only as i32),
        "stored and returned"
    );

    // The preview marks the odd seconds as skipped, with the message their runs will carry.
    let preview = client
        .preview_schedule(pb::PreviewScheduleRequest {
            schedule_type: pb::ScheduleType::Cron as i32,
            schedule_conf: "* * * * * ?".into(),
            count: 6,
            calendar: "even-seconds".into(),
            calendar_mode: pb::CalendarMode::Only as i32,
            ..Default::default()
        })
        .await?
        .into_inner();
    assert_eq!(preview.skip_reasons.len(), preview.fire_times_ms.len());
    for (at, reason) in preview.fire_times_ms.iter().zip(&preview.skip_reasons) {
        let odd = (at / 1000) % 2 == 1;
        assert_eq!(!reason.is_empty(), odd, "fire {at}: '{reason}'");
    }

    cluster.start_job(job.id).await?;
    let logs = wait_until(
        Duration::from_secs(30),
        "4 runs and 4 calendar skips",
        || async {
            let logs = cluster.logs(job.id).await.ok()?;
            let ran = logs
                .iter()
                .filter(|log| log.status == pb::RunStatus::Success as i32)
                .count();
            let skipped = logs
                .iter()
                .filter(|log| log.trigger_msg.contains("calendar 'even-seconds'"))
                .count();
            (ran >= 4 && skipped >= 4).then_some(logs)
        },
    )
    .await?;
    for log in &logs {
        let odd = (log.scheduled_at_ms / 1000) % 2 == 1;
        if odd {
            assert_eq!(log.status, pb::RunStatus::Skipped as i32, "{log:?}");
            assert!(
                log.trigger_msg.contains("outside the calendar"),
                "{}",
                log.trigger_msg
            );
        } else {
            assert_ne!(log.status, pb::RunStatus::Skipped as i32, "{log:?}");
        }
    }
    let scheduled: HashSet<i64> = logs.iter().map(|log| log.scheduled_at_ms).collect();
    assert_eq!(scheduled.len(), logs.len(), "one row per occurrence");

    // In use: the delete is refused, naming the job.
    let in_use = client
        .delete_calendar(pb::DeleteCalendarRequest {
            name: "even-seconds".into(),
        })
        .await
        .expect_err("used by a job");
    assert_eq!(in_use.code(), Code::FailedPrecondition);
    assert_eq!(
        in_use.message(),
        format!(
            "calendar 'even-seconds' is used by 1 job(s) ({}); change their calendar first",
            job.id
        )
    );
    cluster.shutdown().await;
    Ok(())
}
