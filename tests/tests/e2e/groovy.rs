//! `GLUE_GROOVY` jobs: Java source only an XXL-JOB executor (a JVM) runs. The admin takes one
//! only for a group whose runs go to XXL-JOB executors alone, and otherwise names the group and
//! the address that is not one. (Runs on real xxl-job-core executors: `xxl_job_compat.rs`.)

use tonic::Code;
use xjob_proto::pb;
use xjob_tests::{TestCluster, ok_handler};

const GROOVY_SOURCE: &str = "public class Hello {}";

fn groovy_job(group_id: i64) -> pb::Job {
    pb::Job {
        glue_type: pb::GlueType::Groovy as i32,
        glue_source: GROOVY_SOURCE.into(),
        handler: String::new(),
        ..TestCluster::job(group_id, "", pb::ScheduleType::None, "")
    }
}

async fn manual_group(cluster: &TestCluster, app: &str, addresses: &[&str]) -> anyhow::Result<i64> {
    let group = pb::Group {
        app_name: app.into(),
        title: app.into(),
        address_type: pb::AddressType::Manual as i32,
        addresses: addresses
            .iter()
            .map(|address| address.to_string())
            .collect(),
        ..Default::default()
    };
    cluster
        .client()
        .create_group(pb::CreateGroupRequest { group: Some(group) })
        .await?
        .into_inner()
        .group
        .map(|group| group.id)
        .ok_or_else(|| anyhow::anyhow!("no group returned"))
}

/// The status `CreateJob` answers for `job`; `Ok` when it was created.
async fn create(cluster: &TestCluster, job: pb::Job) -> Result<pb::Job, tonic::Status> {
    cluster
        .client()
        .create_job(pb::CreateJobRequest { job: Some(job) })
        .await
        .map(|response| response.into_inner().job.unwrap_or_default())
}

#[tokio::test]
async fn groovy_is_taken_only_for_groups_of_xxl_job_executors() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder().start().await?;

    // A MANUAL group listing only XXL-JOB executors takes it.
    let xxl = manual_group(
        &cluster,
        "groovy-xxl",
        &[
            "xxl-job+http://127.0.0.1:9991",
            "xxl-job+http://127.0.0.1:9992/",
        ],
    )
    .await?;
    let created = create(&cluster, groovy_job(xxl)).await?;
    assert_eq!(created.glue_type, pb::GlueType::Groovy as i32);
    assert_eq!(created.glue_source, GROOVY_SOURCE);

    // One gRPC address in the list: refused, naming it.
    let mixed = manual_group(
        &cluster,
        "groovy-mixed",
        &["xxl-job+http://127.0.0.1:9991", "http://127.0.0.1:9993"],
    )
    .await?;
    let refused = create(&cluster, groovy_job(mixed))
        .await
        .expect_err("a gRPC address cannot run Groovy");
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(
        refused
            .message()
            .starts_with("job.glue_type: GLUE_GROOVY runs only on XXL-JOB executors")
            && refused.message().contains("'http://127.0.0.1:9993'"),
        "{refused:?}"
    );

    // An AUTO group with nothing registered cannot show where its runs go.
    let auto = cluster.create_group("groovy-auto").await?;
    let refused = create(&cluster, groovy_job(auto))
        .await
        .expect_err("nothing registered");
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(
        refused.message().contains("has no executor registered"),
        "{refused:?}"
    );

    // With an xjob executor registered, it is refused and the executor named.
    let address = cluster
        .start_executor(cluster.executor("groovy-auto").handler("ok", ok_handler))
        .await?;
    let refused = create(&cluster, groovy_job(auto))
        .await
        .expect_err("an xjob executor cannot run Groovy");
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(
        refused
            .message()
            .contains(&format!("xjob executor registered at '{address}'")),
        "{refused:?}"
    );

    // Nothing was written for the refused ones.
    let jobs = cluster
        .client()
        .list_jobs(pb::ListJobsRequest::default())
        .await?
        .into_inner()
        .jobs;
    assert_eq!(jobs.len(), 1, "{jobs:#?}");
    cluster.shutdown().await;
    Ok(())
}
