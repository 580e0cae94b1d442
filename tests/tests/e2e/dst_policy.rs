//! A job's daylight-saving policy (docs/scheduling.md) on a real admin: PreviewSchedule shows
//! the occurrences each policy gives around Europe/Berlin's 2027 transitions (the preview is
//! computed from a given instant, so nothing waits for a real clock change), the job stores and
//! returns the policy, and misplaced or unknown values are refused naming the field.

use chrono::TimeZone;
use chrono_tz::Europe::Berlin;
use tonic::Code;
use xjob_proto::pb;
use xjob_tests::TestCluster;

const DAILY_0230: &str = "0 30 2 * * ?";

/// `ms` as Berlin wall time with its abbreviation.
fn berlin(ms: i64) -> String {
    let t = Berlin
        .timestamp_millis_opt(ms)
        .single()
        .expect("an instant");
    t.format("%Y-%m-%d %H:%M %Z").to_string()
}

/// Epoch ms of an unambiguous Berlin wall time.
fn berlin_ms(wall: &str) -> i64 {
    let naive = chrono::NaiveDateTime::parse_from_str(wall, "%Y-%m-%d %H:%M").expect("a wall time");
    Berlin
        .from_local_datetime(&naive)
        .single()
        .expect("unambiguous")
        .timestamp_millis()
}

async fn preview(
    cluster: &TestCluster,
    from: &str,
    gap: pb::DstGapPolicy,
    overlap: pb::DstOverlapPolicy,
) -> Result<Vec<String>, tonic::Status> {
    let answer = cluster
        .client()
        .preview_schedule(pb::PreviewScheduleRequest {
            schedule_type: pb::ScheduleType::Cron as i32,
            schedule_conf: DAILY_0230.into(),
            time_zone: "Europe/Berlin".into(),
            count: 3,
            from_ms: berlin_ms(from),
            dst_gap_policy: gap as i32,
            dst_overlap_policy: overlap as i32,
            ..Default::default()
        })
        .await?
        .into_inner();
    Ok(answer.fire_times_ms.into_iter().map(berlin).collect())
}

/// 2027-03-28 02:00 CET jumps to 03:00 CEST; 2027-10-31 03:00 CEST falls back to 02:00 CET.
#[tokio::test]
async fn the_preview_shows_each_dst_policy_around_berlins_transitions() -> anyhow::Result<()> {
    use pb::DstGapPolicy as Gap;
    use pb::DstOverlapPolicy as Overlap;
    let cluster = TestCluster::builder().start().await?;
    let spring = "2027-03-27 12:00";
    // UNSPECIFIED is the default: the time inside the gap runs when the gap ends.
    for gap in [Gap::Unspecified, Gap::NextValidTime] {
        assert_eq!(
            preview(&cluster, spring, gap, Overlap::Unspecified).await?,
            [
                "2027-03-28 03:00 CEST",
                "2027-03-29 02:30 CEST",
                "2027-03-30 02:30 CEST"
            ]
        );
    }
    assert_eq!(
        preview(&cluster, spring, Gap::Skip, Overlap::First).await?,
        [
            "2027-03-29 02:30 CEST",
            "2027-03-30 02:30 CEST",
            "2027-03-31 02:30 CEST"
        ]
    );

    let autumn = "2027-10-30 12:00";
    for overlap in [Overlap::Unspecified, Overlap::First] {
        assert_eq!(
            preview(&cluster, autumn, Gap::Unspecified, overlap).await?,
            [
                "2027-10-31 02:30 CEST",
                "2027-11-01 02:30 CET",
                "2027-11-02 02:30 CET"
            ]
        );
    }
    assert_eq!(
        preview(&cluster, autumn, Gap::Unspecified, Overlap::Second).await?,
        [
            "2027-10-31 02:30 CET",
            "2027-11-01 02:30 CET",
            "2027-11-02 02:30 CET"
        ]
    );
    assert_eq!(
        preview(&cluster, autumn, Gap::Unspecified, Overlap::Both).await?,
        [
            "2027-10-31 02:30 CEST",
            "2027-10-31 02:30 CET",
            "2027-11-01 02:30 CET"
        ]
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_job_keeps_its_dst_policy_and_misplaced_values_are_refused() -> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group("dst-app").await?;
    let mut job = TestCluster::job(group_id, "ok", pb::ScheduleType::Cron, DAILY_0230);
    job.time_zone = "Europe/Berlin".into();
    job.dst_gap_policy = pb::DstGapPolicy::Skip as i32;
    job.dst_overlap_policy = pb::DstOverlapPolicy::Both as i32;
    let created = cluster.create_job(job).await?;
    assert_eq!(created.dst_gap_policy, pb::DstGapPolicy::Skip as i32);
    assert_eq!(
        created.dst_overlap_policy,
        pb::DstOverlapPolicy::Both as i32
    );

    // A job that sets nothing reads back the defaults by name.
    let plain = TestCluster::job(group_id, "ok", pb::ScheduleType::Cron, DAILY_0230);
    let plain = cluster.create_job(plain).await?;
    assert_eq!(plain.dst_gap_policy, pb::DstGapPolicy::NextValidTime as i32);
    assert_eq!(plain.dst_overlap_policy, pb::DstOverlapPolicy::First as i32);

    // An update changes it.
    let mut edited = created.clone();
    edited.dst_overlap_policy = pb::DstOverlapPolicy::Second as i32;
    let updated = cluster
        .client()
        .update_job(pb::UpdateJobRequest { job: Some(edited) })
        .await?
        .into_inner()
        .job
        .expect("the job");
    assert_eq!(
        updated.dst_overlap_policy,
        pb::DstOverlapPolicy::Second as i32
    );
    assert_eq!(updated.dst_gap_policy, pb::DstGapPolicy::Skip as i32);

    // A FIX_RATE job has no local times: a policy on it is refused, naming the field.
    let mut rate = TestCluster::job(group_id, "ok", pb::ScheduleType::FixRate, "60");
    rate.dst_gap_policy = pb::DstGapPolicy::Skip as i32;
    let refused = cluster.create_job(rate).await.expect_err("refused");
    let status = refused.downcast_ref::<tonic::Status>().expect("a status");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        status.message(),
        "job.dst_gap_policy: SKIP applies to CRON schedules only (local times a zone skips or \
         repeats); a FIX_RATE schedule has none, leave it unset"
    );
    // An unknown value, in a job or a preview, is refused with the known ones.
    let mut unknown = TestCluster::job(group_id, "ok", pb::ScheduleType::Cron, DAILY_0230);
    unknown.dst_overlap_policy = 9;
    let refused = cluster.create_job(unknown).await.expect_err("refused");
    let status = refused.downcast_ref::<tonic::Status>().expect("a status");
    assert_eq!(
        status.message(),
        "job.dst_overlap_policy: unknown value 9 (FIRST = 1, SECOND = 2, BOTH = 3)"
    );
    let refused = cluster
        .client()
        .preview_schedule(pb::PreviewScheduleRequest {
            schedule_type: pb::ScheduleType::Cron as i32,
            schedule_conf: DAILY_0230.into(),
            dst_gap_policy: 7,
            ..Default::default()
        })
        .await
        .expect_err("refused");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(
        refused.message(),
        "dst_gap_policy: unknown value 7 (NEXT_VALID_TIME = 1, SKIP = 2)"
    );
    cluster.shutdown().await;
    Ok(())
}
