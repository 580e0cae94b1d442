//! Direct calls to an executor, with no admin involved: an executor that holds its group's
//! access token refuses `Beat`, `Run`, `Kill` and `ReadLog` without it (so nobody who reaches its
//! port runs a handler with params of their choosing or reads other runs' logs), and an executor
//! bound to a network address refuses to start with neither a token nor mTLS.

use xjob_executor::{Executor, JobContext, JobOutput, JobResult};
use xjob_proto::pb;
use xjob_proto::pb::executor_service_client::ExecutorServiceClient;
use xjob_tests::{TestCluster, ok_handler};

use crate::attacker::{WAIT, group_with_token, with_token};

const APP: &str = "called-app";
const TOKEN: &str = "s3cret-token";
/// A line only the run's log holds: what a `ReadLog` without the token must not return.
const SECRET_LINE: &str = "DB_PASSWORD=only-in-this-log";

async fn logs_a_secret(ctx: JobContext) -> JobResult {
    ctx.log(SECRET_LINE);
    Ok(JobOutput::message("done"))
}

#[tokio::test]
async fn wrong_or_missing_token_is_rejected_by_the_executor_service() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder().start().await?;
    let group_id = group_with_token(&cluster, APP, TOKEN).await?;
    let executor = cluster
        .executor(APP)
        .access_token(TOKEN)
        .handler("secret", logs_a_secret);
    let address = cluster.start_executor(executor).await?;

    // The admin presents the group token: a triggered run goes through and writes its log.
    let job = TestCluster::job(group_id, "secret", pb::ScheduleType::None, "");
    let job_id = cluster.create_job(job).await?.id;
    let log_id = cluster.trigger(job_id, None).await?;
    let finished = cluster.wait_log_final(log_id, WAIT).await?;
    assert_eq!(
        finished.status,
        pb::RunStatus::Success as i32,
        "{finished:?}"
    );
    assert_eq!(finished.trigger_code, 200);

    let mut executor_client = ExecutorServiceClient::connect(address).await?;
    let read_log = || pb::ReadLogRequest {
        log_id,
        log_date_ms: finished.trigger_time_ms,
        from_line: 1,
        ..Default::default()
    };
    for token in [None, Some("wrong-token")] {
        let refused = executor_client
            .beat(with_token(pb::BeatRequest {}, token)?)
            .await
            .expect_err("the executor checks the token");
        assert_eq!(refused.code(), tonic::Code::Unauthenticated);
        let run = pb::RunRequest {
            job_id,
            log_id: log_id + 1000,
            handler: "secret".to_string(),
            params: "chosen by the caller".to_string(),
            ..Default::default()
        };
        let refused = executor_client
            .run(with_token(run, token)?)
            .await
            .expect_err("runs need the token too");
        assert_eq!(refused.code(), tonic::Code::Unauthenticated);
        let kill = pb::KillRequest {
            job_id,
            log_id,
            held_only: false,
        };
        let refused = executor_client
            .kill(with_token(kill, token)?)
            .await
            .expect_err("kills need the token too");
        assert_eq!(refused.code(), tonic::Code::Unauthenticated);
        let refused = executor_client
            .read_log(with_token(read_log(), token)?)
            .await
            .expect_err("another run's log needs the token too");
        assert_eq!(refused.code(), tonic::Code::Unauthenticated);
        assert!(!refused.message().contains(SECRET_LINE), "{refused:?}");
    }

    // The refusals were not for want of a log: with the token it is there.
    let read = executor_client
        .read_log(with_token(read_log(), Some(TOKEN))?)
        .await?
        .into_inner();
    assert!(read.content.contains(SECRET_LINE), "{read:?}");
    let runs = cluster.logs(job_id).await?;
    assert_eq!(runs.len(), 1, "the refused Run started nothing: {runs:?}");
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn executor_on_a_network_address_refuses_to_start_without_token_or_mtls() -> anyhow::Result<()>
{
    let dir = tempfile::tempdir()?;
    let unreachable_admin = xjob_testkit::unused_address()?;
    let builder = |name: &str| {
        Executor::builder()
            .app_name(APP)
            .admin_addrs([unreachable_admin.clone()])
            .bind("0.0.0.0:0")
            .log_dir(dir.path().join(name))
            .handler("ok", ok_handler)
    };
    let refused = builder("open")
        .start()
        .await
        .expect_err("open executor on 0.0.0.0");
    let message = refused.to_string();
    assert!(message.contains("bind"), "{message}");
    assert!(message.contains("access_token"), "{message}");
    assert!(message.contains("insecure_open_network"), "{message}");

    let opted_out = builder("opted-out")
        .insecure_open_network(true)
        .start()
        .await?;
    opted_out.shutdown().await;

    // With a token it starts, and a direct Run without the token is refused.
    let secured = builder("secured").access_token("s3cret").start().await?;
    let local = format!("http://127.0.0.1:{}", secured.local_addr().port());
    let refused = ExecutorServiceClient::connect(local)
        .await?
        .run(pb::RunRequest {
            job_id: 1,
            log_id: 1,
            handler: "ok".to_string(),
            ..Default::default()
        })
        .await
        .expect_err("Run without token");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    secured.shutdown().await;
    Ok(())
}
