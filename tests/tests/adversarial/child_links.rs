//! An operator granted only group A links a job of group B as a child of its own job, so that
//! triggering its job runs B's job (on B's executor, with B's params) although `TriggerJob` on
//! B is refused to it. Adding a child link needs `jobs.operate` in the child's group, on
//! `CreateJob` and `UpdateJob` (the console's job form goes through the same calls).

use tonic::Code;
use xjob_proto::pb;
use xjob_tests::TestCluster;

use crate::support::{authed, create_user, grant};

struct Fixture {
    cluster: TestCluster,
    admin: String,
    operator: String,
    operator_id: i64,
    group_a: i64,
    group_b: i64,
    job_a: i64,
    job_b: i64,
}

fn job(group_id: i64, name: &str, children: Vec<i64>) -> pb::Job {
    let mut job = TestCluster::job(group_id, "ok", pb::ScheduleType::None, "");
    job.name = name.to_string();
    job.child_job_ids = children;
    job
}

/// Groups A and B with a job each; an admin and an operator granted only A.
async fn fixture() -> anyhow::Result<Fixture> {
    let cluster = TestCluster::builder().start().await?;
    let group_a = cluster.create_group("links-a").await?;
    let group_b = cluster.create_group("links-b").await?;
    let job_a = cluster.create_job(job(group_a, "a", vec![])).await?.id;
    let job_b = cluster.create_job(job(group_b, "b", vec![])).await?.id;
    let mut client = cluster.client();
    let (_, admin) = create_user(&mut client, None, "root", "admin").await?;
    let (operator_id, operator) =
        create_user(&mut client, Some(&admin), "otto", "operator").await?;
    grant(&mut client, &admin, operator_id, group_a).await?;
    Ok(Fixture {
        cluster,
        admin,
        operator,
        operator_id,
        group_a,
        group_b,
        job_a,
        job_b,
    })
}

async fn children_of(fx: &Fixture, id: i64) -> anyhow::Result<Vec<i64>> {
    let request = authed(pb::GetJobRequest { id }, Some(&fx.admin));
    let job = fx.cluster.client().get_job(request).await?.into_inner().job;
    Ok(job.map(|job| job.child_job_ids).unwrap_or_default())
}

#[tokio::test]
async fn an_operator_cannot_link_another_groups_job_as_a_child() -> anyhow::Result<()> {
    let fx = fixture().await?;
    let mut client = fx.cluster.client();

    // The direct way in is refused to this operator...
    let trigger = pb::TriggerJobRequest {
        id: fx.job_b,
        ..Default::default()
    };
    let direct = client
        .trigger_job(authed(trigger, Some(&fx.operator)))
        .await
        .expect_err("B is not the operator's");
    assert_ne!(direct.code(), Code::Ok);

    // ...and so is the child link, on create: answered as for a child that does not exist.
    let linked = job(fx.group_a, "parent", vec![fx.job_b]);
    let request = pb::CreateJobRequest { job: Some(linked) };
    let refused = client
        .create_job(authed(request, Some(&fx.operator)))
        .await
        .expect_err("linking B's job is refused");
    let missing = job(fx.group_a, "parent", vec![999_999]);
    let request = pb::CreateJobRequest { job: Some(missing) };
    let missing = client
        .create_job(authed(request, Some(&fx.operator)))
        .await
        .expect_err("a missing child is refused");
    assert_eq!(refused.code(), Code::NotFound, "{refused:?}");
    assert_eq!(refused.code(), missing.code());
    assert_eq!(
        refused.message().replace(&fx.job_b.to_string(), "N"),
        missing.message().replace("999999", "N"),
    );

    // On update: refused, and the job keeps no link.
    let updated = pb::Job {
        id: fx.job_a,
        ..job(fx.group_a, "a", vec![fx.job_b])
    };
    let request = pb::UpdateJobRequest { job: Some(updated) };
    let refused = client
        .update_job(authed(request, Some(&fx.operator)))
        .await
        .expect_err("adding B's job as a child is refused");
    assert_eq!(refused.code(), Code::NotFound, "{refused:?}");
    assert!(children_of(&fx, fx.job_a).await?.is_empty());
    fx.cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn links_need_operate_in_the_child_group_and_existing_links_stay() -> anyhow::Result<()> {
    let fx = fixture().await?;
    let mut client = fx.cluster.client();

    // An admin may link across groups; the operator may then still edit its own job, keeping
    // the link it did not add.
    let linked = pb::Job {
        id: fx.job_a,
        ..job(fx.group_a, "a", vec![fx.job_b])
    };
    let request = pb::UpdateJobRequest { job: Some(linked) };
    client.update_job(authed(request, Some(&fx.admin))).await?;
    let renamed = pb::Job {
        id: fx.job_a,
        ..job(fx.group_a, "a renamed", vec![fx.job_b])
    };
    let request = pb::UpdateJobRequest { job: Some(renamed) };
    client
        .update_job(authed(request, Some(&fx.operator)))
        .await?;
    assert_eq!(children_of(&fx, fx.job_a).await?, vec![fx.job_b]);

    // Granted B as well, the operator may link B's jobs.
    grant(&mut client, &fx.admin, fx.operator_id, fx.group_b).await?;
    let linked = job(fx.group_a, "parent", vec![fx.job_b]);
    let request = pb::CreateJobRequest { job: Some(linked) };
    let created = client
        .create_job(authed(request, Some(&fx.operator)))
        .await?
        .into_inner()
        .job
        .ok_or_else(|| anyhow::anyhow!("no job"))?;
    assert_eq!(created.child_job_ids, vec![fx.job_b]);
    assert_eq!(created.group_id, fx.group_a);
    fx.cluster.shutdown().await;
    Ok(())
}
