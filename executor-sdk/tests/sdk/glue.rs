//! Script (GLUE) runs and the command handler's own settings, over real gRPC: scripts cached
//! per job and version under `{log_dir}/gluesource/`, older versions removed, types not enabled
//! (and GROOVY) refused with the reason; `CommandSpec`'s working dir, environment and timeout.

use std::time::Duration;

use xjob_executor::CommandSpec;

use super::command::{has_line, read_whole_log, start_executor, submit};
use super::*;

fn glue_request(
    job_id: i64,
    log_id: i64,
    glue_type: pb::GlueType,
    version: i64,
    source: &str,
) -> pb::RunRequest {
    pb::RunRequest {
        glue_type: glue_type as i32,
        glue_source: source.to_owned(),
        glue_updated_ms: version,
        ..run_request(job_id, log_id, "", "first second")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_glue_is_cached_per_version_and_old_versions_are_removed() {
    let mut admin = AdminHandle::start().await;
    let log_dir = tempfile::tempdir().expect("tempdir");
    let executor = start_executor(&admin, log_dir.path(), |builder| {
        builder.glue_interpreter(pb::GlueType::Shell, "sh")
    })
    .await;
    let mut client = client(executor.address()).await;
    let scripts = log_dir.path().join("gluesource");

    let v1 = "echo \"v1 args=$* job=$XJOB_JOB_ID\"";
    submit(
        &mut client,
        glue_request(5, 51, pb::GlueType::Shell, 100, v1),
    )
    .await;
    let result = admin.wait_for_result(51).await;
    assert_eq!(result.status, pb::RunStatus::Success as i32, "{result:?}");
    let log = read_whole_log(&mut client, 51).await;
    assert!(has_line(&log, "v1 args=first second job=5"), "{log}");
    assert!(scripts.join("5_100.sh").is_file());

    // Same version stamp: the stored file is reused, whatever the request carries.
    submit(
        &mut client,
        glue_request(5, 52, pb::GlueType::Shell, 100, "echo other"),
    )
    .await;
    admin.wait_for_result(52).await;
    assert!(has_line(
        &read_whole_log(&mut client, 52).await,
        "v1 args=first second job=5"
    ));

    // A new version is written, and the job's older one removed.
    submit(
        &mut client,
        glue_request(5, 53, pb::GlueType::Shell, 200, "echo v2; exit 4"),
    )
    .await;
    let result = admin.wait_for_result(53).await;
    assert_eq!(
        (result.status, result.message.as_str()),
        (pb::RunStatus::Failed as i32, "command exited with status 4")
    );
    assert!(has_line(&read_whole_log(&mut client, 53).await, "v2"));
    assert!(scripts.join("5_200.sh").is_file());
    assert!(!scripts.join("5_100.sh").exists());
    executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glue_types_not_enabled_and_groovy_are_refused_with_the_reason() {
    let admin = AdminHandle::start().await;
    let log_dir = tempfile::tempdir().expect("tempdir");
    let executor = start_executor(&admin, log_dir.path(), |builder| {
        builder.enable_glue(pb::GlueType::Shell)
    })
    .await;
    let mut client = client(executor.address()).await;
    let python = glue_request(6, 61, pb::GlueType::Python, 1, "print(1)");
    let response = client.run(python).await.expect("run").into_inner();
    assert!(!response.accepted);
    assert_eq!(
        response.message,
        "glue type GLUE_TYPE_PYTHON is not enabled on this executor"
    );
    let groovy = glue_request(6, 62, pb::GlueType::Groovy, 1, "println 1");
    let response = client.run(groovy).await.expect("run").into_inner();
    assert!(!response.accepted);
    assert!(
        response.message.contains("not JVMs"),
        "{}",
        response.message
    );
    executor.shutdown().await;

    let refused = Executor::builder()
        .app_name("scripts")
        .admin_addrs([admin.address.clone()])
        .enable_glue(pb::GlueType::Groovy)
        .start()
        .await
        .expect_err("groovy cannot be enabled");
    assert!(
        matches!(
            refused,
            xjob_executor::Error::InvalidConfig { field: "glue", .. }
        ),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_spec_sets_dir_env_and_a_timeout_of_its_own() {
    let mut admin = AdminHandle::start().await;
    let log_dir = tempfile::tempdir().expect("tempdir");
    let work_dir = tempfile::tempdir().expect("tempdir");
    let spec = CommandSpec::new(["sh", "-c", "pwd; echo \"greeting=$GREETING\"; sleep 30"])
        .working_dir(work_dir.path())
        .env("GREETING", "hello")
        .timeout(Duration::from_millis(300));
    let executor = start_executor(&admin, log_dir.path(), |builder| {
        builder.command("slow", spec)
    })
    .await;
    let mut client = client(executor.address()).await;
    submit(&mut client, run_request(7, 71, "slow", "")).await;
    let result = admin.wait_for_result(71).await;
    assert_eq!(
        (result.status, result.message.as_str()),
        (
            pb::RunStatus::Failed as i32,
            "command timed out after 300ms (handler timeout)"
        )
    );
    let log = read_whole_log(&mut client, 71).await;
    let dir = work_dir.path().canonicalize().expect("canonical dir");
    assert!(has_line(&log, &dir.display().to_string()), "{log}");
    assert!(has_line(&log, "greeting=hello"), "{log}");
    executor.shutdown().await;
}
