//! Glue versions in the store, on every backend: SQLite always, PostgreSQL and MariaDB/MySQL
//! when `XJOB_TEST_POSTGRES_URL` / `XJOB_TEST_MYSQL_URL` name a server (each run gets a scratch
//! database there). Saving stamps the job, keeps the latest 30 versions of that job only, and
//! reads back newest first.

use xjob_admin::model::glue::GLUE_VERSIONS_KEPT;
use xjob_admin::model::{
    AddressType, BlockStrategy, GlueEdit, GlueType, Group, GroupId, Job, JobId, JobStatus,
    MisfireStrategy, RetryBackoff, RouteStrategy, ScheduleType,
};
use xjob_admin::store::Store;

fn group() -> Group {
    Group {
        id: GroupId(0),
        app_name: "glue-app".into(),
        title: "glue".into(),
        address_type: AddressType::Auto,
        addresses: Vec::new(),
        access_token: String::new(),
        updated_ms: 1,
    }
}

fn shell_job(group_id: GroupId, name: &str) -> Job {
    Job {
        id: JobId(0),
        group_id,
        name: name.into(),
        author: "tests".into(),
        alarm_email: String::new(),
        alarm_on_every_failure: false,
        schedule_type: ScheduleType::None,
        schedule_conf: String::new(),
        time_zone: String::new(),
        misfire_strategy: MisfireStrategy::DoNothing,
        route_strategy: RouteStrategy::First,
        handler: String::new(),
        params: String::new(),
        block_strategy: BlockStrategy::SerialExecution,
        timeout_ms: 0,
        fail_retry_count: 0,
        retry_backoff: RetryBackoff::default(),
        glue_type: GlueType::Shell,
        glue_source: "echo 0".into(),
        glue_remark: "created".into(),
        glue_updated_ms: 1,
        child_job_ids: Vec::new(),
        policy: Default::default(),
        status: JobStatus::Stopped,
        trigger_last_ms: 0,
        trigger_next_ms: 0,
        created_ms: 1,
        updated_ms: 1,
    }
}

fn edit(job_id: JobId, n: i64) -> GlueEdit {
    GlueEdit {
        job_id,
        glue_type: GlueType::Shell,
        glue_source: format!("echo {n}"),
        glue_remark: format!("edit {n}"),
        now_ms: 1_000 + n,
    }
}

async fn check_backend(store: &Store) -> anyhow::Result<()> {
    let group = store.insert_group(&group()).await?;
    let job = store.insert_job(&shell_job(group.id, "edited")).await?;
    let other = store.insert_job(&shell_job(group.id, "other")).await?;
    assert!(store.save_glue(&edit(other.id, 0)).await?);

    for n in 1..=GLUE_VERSIONS_KEPT + 3 {
        assert!(store.save_glue(&edit(job.id, n)).await?);
    }
    let stored = store
        .get_job(job.id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("job gone"))?;
    let last = GLUE_VERSIONS_KEPT + 3;
    assert_eq!(stored.glue_source, format!("echo {last}"));
    assert_eq!(stored.glue_remark, format!("edit {last}"));
    assert_eq!(stored.glue_updated_ms, 1_000 + last);

    let versions = store.list_glue_versions(job.id).await?;
    assert_eq!(versions.len() as i64, GLUE_VERSIONS_KEPT);
    assert_eq!(versions[0].glue_remark, format!("edit {last}"));
    assert_eq!(versions[29].glue_remark, "edit 4");
    assert!(versions.windows(2).all(|pair| pair[0].id > pair[1].id));
    let newest = store
        .get_glue_version(versions[0].id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("version gone"))?;
    assert_eq!(newest.glue_source, format!("echo {last}"));
    assert_eq!(newest.glue_type, GlueType::Shell);
    assert_eq!(newest.created_ms, 1_000 + last);

    // Another job's history is untouched by the trimming: its first edit kept the source it
    // was created with, then the edit.
    let other_versions = store.list_glue_versions(other.id).await?;
    let remarks: Vec<&str> = other_versions
        .iter()
        .map(|version| version.glue_remark.as_str())
        .collect();
    assert_eq!(remarks, ["edit 0", "created"]);
    assert_eq!(other_versions[1].glue_source, "echo 0");
    assert_eq!(other_versions[1].created_ms, 1);
    // A missing job is reported, not created.
    assert!(!store.save_glue(&edit(JobId(job.id.0 + 1_000), 1)).await?);
    assert!(store.get_glue_version(-1).await?.is_none());
    // Deleting the job deletes its versions.
    assert!(store.delete_job(job.id).await?);
    assert!(store.list_glue_versions(job.id).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn glue_versions_on_sqlite() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("xjob.db").display());
    let store = Store::connect(&url).await?;
    check_backend(&store).await?;
    store.close().await;
    Ok(())
}

#[tokio::test]
async fn glue_versions_on_database_servers() -> anyhow::Result<()> {
    for variable in ["XJOB_TEST_POSTGRES_URL", "XJOB_TEST_MYSQL_URL"] {
        let Ok(base_url) = std::env::var(variable) else {
            eprintln!("skipped the {variable} server: the variable is not set");
            continue;
        };
        let url = Store::create_scratch_database(&base_url).await?;
        let store = Store::connect(&url).await?;
        check_backend(&store).await?;
        store.close().await;
    }
    Ok(())
}
