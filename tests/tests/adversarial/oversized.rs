//! Oversized input, as a careless or hostile client sends it: a request over `max_request_bytes`
//! is `OUT_OF_RANGE` before it is decoded; a field over its documented maximum is
//! `INVALID_ARGUMENT` naming the field, with an answer that never echoes the value (a 1 MB value
//! quoted in the status would overflow HTTP/2's header limits and reach the client as a broken
//! stream); list pages are capped. Nothing refused is written.

use xjob_proto::pb;
use xjob_tests::TestCluster;

use crate::attacker::normal_client_works;

const APP: &str = "oversized-app";
/// Longest refusal message accepted: names the field and the limit, quotes at most a prefix.
const SHORT_MESSAGE: usize = 300;
/// One megabyte of one character: far over every text limit, well under the request limit.
fn megabyte(c: char) -> String {
    c.to_string().repeat(1024 * 1024)
}

fn assert_refused_naming(result: Result<(), tonic::Status>, field: &str) {
    let refused = result.expect_err(field);
    assert_eq!(
        refused.code(),
        tonic::Code::InvalidArgument,
        "{field}: {refused:?}"
    );
    let message = refused.message();
    assert!(message.starts_with(field), "{field}: {message:.200}");
    assert!(
        message.len() < SHORT_MESSAGE,
        "{field}: the refusal echoes {} bytes",
        message.len()
    );
}

#[tokio::test]
async fn oversized_request_is_refused_with_out_of_range_and_pages_are_capped() -> anyhow::Result<()>
{
    let cluster = TestCluster::builder()
        .configure(|config| {
            config.max_request_bytes = 16 * 1024;
            config.max_page_size = 2;
        })
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    for extra in ["oversized-app-2", "oversized-app-3"] {
        cluster.create_group(extra).await?;
    }
    let page = cluster
        .client()
        .list_groups(pb::ListGroupsRequest {
            page_size: 1000,
            ..Default::default()
        })
        .await?
        .into_inner();
    assert_eq!(page.groups.len(), 2, "page capped at max_page_size");
    assert!(
        !page.next_page_token.is_empty(),
        "the rest is on the next page"
    );
    let mut job = TestCluster::job(group_id, "h", pb::ScheduleType::None, "");
    job.glue_source = "x".repeat(32 * 1024);
    let refused = cluster
        .client()
        .create_job(pb::CreateJobRequest { job: Some(job) })
        .await
        .expect_err("oversized request");
    assert_eq!(refused.code(), tonic::Code::OutOfRange, "{refused:?}");
    normal_client_works(&cluster).await?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn megabyte_fields_are_refused_naming_the_field_without_echoing_it() -> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP).await?;
    let valid = TestCluster::job(group_id, "ok", pb::ScheduleType::Cron, "0 * * * * ?");
    let mut client = cluster.client();

    type Mutation = fn(&mut pb::Job);
    let job_cases: [(&str, Mutation); 5] = [
        ("job.name", |job| job.name = megabyte('n')),
        ("job.author", |job| job.author = megabyte('a')),
        ("job.handler", |job| job.handler = megabyte('h')),
        // A cron expression is quoted in its errors: a huge one must not be.
        ("job.schedule_conf", |job| {
            job.schedule_conf = format!("0 * * * * ? {}", megabyte('9'))
        }),
        ("job.params", |job| job.params = megabyte('p')),
    ];
    for (field, mutate) in job_cases {
        let mut job = valid.clone();
        mutate(&mut job);
        let created = client
            .create_job(pb::CreateJobRequest { job: Some(job) })
            .await;
        assert_refused_naming(created.map(drop), field);
    }

    let group = |app_name: String, addresses: Vec<String>| pb::Group {
        app_name,
        title: "oversized".to_string(),
        address_type: if addresses.is_empty() {
            pb::AddressType::Auto as i32
        } else {
            pb::AddressType::Manual as i32
        },
        addresses,
        ..Default::default()
    };
    let huge_app = group(megabyte('a'), Vec::new());
    let created = client
        .create_group(pb::CreateGroupRequest {
            group: Some(huge_app),
        })
        .await;
    assert_refused_naming(created.map(drop), "group.app_name");
    // 50 000 addresses in a MANUAL group (the list the admin would dial on every fire).
    let many = (0..50_000)
        .map(|port| format!("http://10.0.0.1:{}", 1 + port % 60_000))
        .collect();
    let crowded = group("crowded-app".to_string(), many);
    let created = client
        .create_group(pb::CreateGroupRequest {
            group: Some(crowded),
        })
        .await;
    assert_refused_naming(created.map(drop), "group.addresses");

    let preview = client
        .preview_schedule(pb::PreviewScheduleRequest {
            schedule_type: pb::ScheduleType::Cron as i32,
            schedule_conf: megabyte('*'),
            ..Default::default()
        })
        .await;
    assert_refused_naming(preview.map(drop), "schedule_conf");
    let preview = client
        .preview_schedule(pb::PreviewScheduleRequest {
            schedule_type: pb::ScheduleType::Cron as i32,
            schedule_conf: "0 * * * * ?".to_string(),
            time_zone: megabyte('Z'),
            ..Default::default()
        })
        .await;
    assert_refused_naming(preview.map(drop), "time_zone");

    // Nothing refused was written, and the admin still answers normally.
    let job = cluster.create_job(valid).await?;
    let trigger = client
        .trigger_job(pb::TriggerJobRequest {
            id: job.id,
            params: Some(megabyte('p')),
            addresses: Vec::new(),
        })
        .await;
    assert_refused_naming(trigger.map(drop), "params");
    assert!(cluster.logs(job.id).await?.is_empty(), "no run was written");
    let jobs = client
        .list_jobs(pb::ListJobsRequest::default())
        .await?
        .into_inner()
        .jobs;
    assert_eq!(jobs.len(), 1, "only the valid job: {} jobs", jobs.len());
    let groups = client
        .list_groups(pb::ListGroupsRequest::default())
        .await?
        .into_inner()
        .groups;
    assert_eq!(groups.len(), 1, "only the valid group");
    normal_client_works(&cluster).await?;
    cluster.shutdown().await;
    Ok(())
}
