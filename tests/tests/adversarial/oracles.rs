//! Existence oracles: an outsider must not learn which ids exist, or in which group, from how
//! a refusal reads. A viewer of group A asks about objects of group B and about ids that do not
//! exist, and gets the same answer for both; an unauthenticated `Registry.Callback` gets the
//! same answer for a run of a group with an access token as for a log id that names no run.

use tonic::{Code, Status};
use xjob_proto::pb;
use xjob_proto::pb::registry_client::RegistryClient;
use xjob_tests::TestCluster;

use crate::support::{authed, create_group, create_user, grant};

const MISSING: i64 = 999_999;

/// Objects of group B (job, run) and a viewer granted only group A.
struct Fixture {
    cluster: TestCluster,
    viewer: String,
    group_b: i64,
    job_b: i64,
    log_b: i64,
}

async fn fixture() -> anyhow::Result<Fixture> {
    let cluster = TestCluster::builder().start().await?;
    let mut client = cluster.client();
    let group_a = create_group(&mut client, "oracle-a", "").await?;
    let group_b = create_group(&mut client, "oracle-b", "oracle-b-secret").await?;
    let job = TestCluster::job(group_b, "ok", pb::ScheduleType::None, "");
    let job_b = cluster.create_job(job).await?.id;
    // No executor: the run is recorded (and fails) at once, which is all a log id needs.
    let log_b = cluster.trigger(job_b, None).await?;
    let (_, admin) = create_user(&mut client, None, "root", "admin").await?;
    let (viewer_id, viewer) = create_user(&mut client, Some(&admin), "vera", "viewer").await?;
    grant(&mut client, &admin, viewer_id, group_a).await?;
    Ok(Fixture {
        cluster,
        viewer,
        group_b,
        job_b,
        log_b,
    })
}

/// What a refusal tells: its code and its message with the id asked about blanked out.
fn shape(outcome: Result<(), Status>, id: i64) -> (Option<Code>, String) {
    match outcome {
        Ok(()) => (None, String::new()),
        Err(status) => (
            Some(status.code()),
            status.message().replace(&id.to_string(), "N"),
        ),
    }
}

/// Calls that name one object by id, made as the viewer with `id` (a job, run or group id).
async fn ask(fx: &Fixture, call: &str, id: i64) -> Result<(), Status> {
    let mut client = fx.cluster.client();
    let token = Some(fx.viewer.as_str());
    match call {
        "GetJob" => client
            .get_job(authed(pb::GetJobRequest { id }, token))
            .await
            .map(drop),
        "TriggerJob" => {
            let request = pb::TriggerJobRequest {
                id,
                ..Default::default()
            };
            client.trigger_job(authed(request, token)).await.map(drop)
        }
        "StartJob" => client
            .start_job(authed(pb::StartJobRequest { id }, token))
            .await
            .map(drop),
        "DeleteJob" => client
            .delete_job(authed(pb::DeleteJobRequest { id }, token))
            .await
            .map(drop),
        "UpdateJob" => {
            let mut job = TestCluster::job(fx.group_b, "ok", pb::ScheduleType::None, "");
            job.id = id;
            let request = pb::UpdateJobRequest { job: Some(job) };
            client.update_job(authed(request, token)).await.map(drop)
        }
        "ListGlueVersions" => client
            .list_glue_versions(authed(pb::ListGlueVersionsRequest { job_id: id }, token))
            .await
            .map(drop),
        "GetLog" => client
            .get_log(authed(pb::GetLogRequest { id }, token))
            .await
            .map(drop),
        "KillRun" => client
            .kill_run(authed(pb::KillRunRequest { log_id: id }, token))
            .await
            .map(drop),
        "ReadRunLog" => {
            let request = pb::ReadRunLogRequest {
                log_id: id,
                from_line: 1,
            };
            client.read_run_log(authed(request, token)).await.map(drop)
        }
        "GetGroup" => client
            .get_group(authed(pb::GetGroupRequest { id }, token))
            .await
            .map(drop),
        other => panic!("unknown call {other}"),
    }
}

#[tokio::test]
async fn a_foreign_id_answers_like_a_missing_one() -> anyhow::Result<()> {
    let fx = fixture().await?;
    let cases = [
        ("GetJob", fx.job_b),
        ("TriggerJob", fx.job_b),
        ("StartJob", fx.job_b),
        ("DeleteJob", fx.job_b),
        ("UpdateJob", fx.job_b),
        ("ListGlueVersions", fx.job_b),
        ("GetLog", fx.log_b),
        ("KillRun", fx.log_b),
        ("ReadRunLog", fx.log_b),
        ("GetGroup", fx.group_b),
    ];
    let mut mismatches = Vec::new();
    for (call, foreign) in cases {
        let foreign_shape = shape(ask(&fx, call, foreign).await, foreign);
        let missing_shape = shape(ask(&fx, call, MISSING).await, MISSING);
        let leaks_group = foreign_shape.1.contains(&format!("group {}", fx.group_b));
        if foreign_shape != missing_shape || foreign_shape.0.is_none() || leaks_group {
            mismatches.push(format!(
                "{call}: foreign {foreign_shape:?} vs missing {missing_shape:?}"
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    fx.cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn an_unauthenticated_callback_cannot_tell_unknown_log_ids_from_foreign_ones()
-> anyhow::Result<()> {
    let fx = fixture().await?;
    let mut registry = RegistryClient::connect(fx.cluster.admin_url()).await?;
    let answer_for = |log_id: i64| {
        let request = pb::CallbackRequest {
            results: vec![pb::RunResult {
                log_id,
                status: pb::RunStatus::Success as i32,
                code: 200,
                message: "forged".to_string(),
                ..Default::default()
            }],
        };
        let mut registry = registry.clone();
        async move { registry.callback(request).await.map(drop) }
    };
    let foreign = shape(answer_for(fx.log_b).await, fx.log_b);
    let missing = shape(answer_for(MISSING).await, MISSING);
    assert_eq!(foreign, missing);
    assert_eq!(foreign.0, Some(Code::Unauthenticated), "{foreign:?}");

    // The group's own executor (holding its token) still learns that an id names no run, so
    // it can forget a result for a run that was deleted.
    let mut request = tonic::Request::new(pb::CallbackRequest {
        results: vec![pb::RunResult {
            log_id: MISSING,
            status: pb::RunStatus::Success as i32,
            code: 200,
            ..Default::default()
        }],
    });
    request
        .metadata_mut()
        .insert("authorization", "Bearer oracle-b-secret".parse()?);
    let answer = registry.callback(request).await?.into_inner();
    assert_eq!(answer.unknown_log_ids, vec![MISSING]);
    fx.cluster.shutdown().await;
    Ok(())
}
