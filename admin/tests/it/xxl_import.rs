//! `xjob import-xxl-job` with the real binary, from a real MariaDB holding XXL-JOB's tables
//! into a fresh SQLite xjob database. The tables are written here from XXL-JOB's documented
//! schema (column names as XXL-JOB names them; its DDL file is not vendored), filled with a
//! representative installation: CRON / FIX_RATE / NONE jobs, every route and block strategy,
//! misfire, BEAN and GLUE_SHELL / GLUE_PYTHON jobs with saved versions, child links, alarm
//! e-mail, running and stopped jobs, and jobs it cannot import (bad cron, unknown route,
//! GLUE_GROOVY, a parent of one of those, a missing child, a job of an unmappable group).
//!
//! Checked: a dry run prints the plan and writes nothing; the import creates exactly what the
//! plan says, field by field; a real admin on the imported database lists it over gRPC and
//! fires a running imported job; a second import (the admin still running) creates nothing; a job deleted in xjob is made
//! again; what is skipped is listed with its reason and the exit status is 2. The 3.5 layout
//! (`name` columns, per-group `access_token`) is read too, with `--import-stopped` and
//! `--job-time-zone`. Needs `XJOB_TEST_MYSQL_URL`; each test drops its database, also when an
//! assertion fails.

use crate::common;

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::{Connection, Executor, MySqlConnection};
use xjob_admin::model::{
    AddressType, BlockStrategy, EdgeCondition, GlueType, Job, JobStatus, MisfireStrategy,
    RouteStrategy, ScheduleType,
};
use xjob_admin::store::{JobFilter, Store};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;
use xjob_testkit::{ChildProcess, free_port, wait_until};

const XJOB: &str = env!("CARGO_BIN_EXE_xjob");
const EXIT_WITHIN: Duration = Duration::from_secs(60);

/// Which release's column names the fixture uses.
#[derive(Clone, Copy, PartialEq)]
enum Layout {
    /// 2.3 to 3.4: `title`, `job_desc`, no per-group token.
    V3,
    /// 3.5: `name` for both, `access_token` per group.
    V35,
}

/// A scratch MariaDB database holding XXL-JOB's tables; dropped by `drop_database`.
struct XxlDatabase {
    base_url: String,
    name: String,
}

impl XxlDatabase {
    async fn create(base_url: &str, layout: Layout) -> anyhow::Result<XxlDatabase> {
        let name = format!(
            "xxl_import_{}_{:08x}",
            std::process::id(),
            fastrand::u32(..)
        );
        let mut conn = MySqlConnection::connect(base_url).await?;
        conn.execute(format!("CREATE DATABASE {name} CHARACTER SET utf8mb4").as_str())
            .await?;
        conn.close().await?;
        let database = XxlDatabase {
            base_url: base_url.to_string(),
            name,
        };
        if let Err(error) = database.create_tables(layout).await {
            database.drop_database().await;
            return Err(error);
        }
        Ok(database)
    }

    fn url(&self) -> String {
        let (server, _) = self
            .base_url
            .rsplit_once('/')
            .unwrap_or((&self.base_url, ""));
        format!("{server}/{}", self.name)
    }

    async fn connect(&self) -> anyhow::Result<MySqlConnection> {
        Ok(MySqlConnection::connect(&self.url()).await?)
    }

    async fn create_tables(&self, layout: Layout) -> anyhow::Result<()> {
        let (title, job_desc, token) = match layout {
            Layout::V3 => ("title", "job_desc", ""),
            Layout::V35 => ("name", "name", "access_token VARCHAR(255) NULL,"),
        };
        let mut conn = self.connect().await?;
        conn.execute(
            format!(
                "CREATE TABLE xxl_job_group (
                    id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
                    app_name VARCHAR(64) NOT NULL,
                    {title} VARCHAR(64) NOT NULL,
                    address_type TINYINT NOT NULL DEFAULT 0,
                    address_list TEXT NULL,
                    {token}
                    update_time DATETIME NULL,
                    UNIQUE KEY i_app_name (app_name)
                ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4"
            )
            .as_str(),
        )
        .await?;
        conn.execute(
            format!(
                "CREATE TABLE xxl_job_info (
                    id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
                    job_group INT NOT NULL,
                    {job_desc} VARCHAR(255) NOT NULL,
                    add_time DATETIME NULL,
                    update_time DATETIME NULL,
                    author VARCHAR(64) NULL,
                    alarm_email VARCHAR(255) NULL,
                    schedule_type VARCHAR(50) NOT NULL DEFAULT 'NONE',
                    schedule_conf VARCHAR(128) NULL,
                    misfire_strategy VARCHAR(50) NOT NULL DEFAULT 'DO_NOTHING',
                    executor_route_strategy VARCHAR(50) NULL,
                    executor_handler VARCHAR(255) NULL,
                    executor_param VARCHAR(512) NULL,
                    executor_block_strategy VARCHAR(50) NULL,
                    executor_timeout INT NOT NULL DEFAULT 0,
                    executor_fail_retry_count INT NOT NULL DEFAULT 0,
                    glue_type VARCHAR(50) NOT NULL,
                    glue_source MEDIUMTEXT NULL,
                    glue_remark VARCHAR(128) NULL,
                    glue_updatetime DATETIME NULL,
                    child_jobid VARCHAR(255) NULL,
                    trigger_status TINYINT NOT NULL DEFAULT 0,
                    trigger_last_time BIGINT NOT NULL DEFAULT 0,
                    trigger_next_time BIGINT NOT NULL DEFAULT 0
                ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4"
            )
            .as_str(),
        )
        .await?;
        conn.execute(
            "CREATE TABLE xxl_job_logglue (
                id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
                job_id INT NOT NULL,
                glue_type VARCHAR(50) NULL,
                glue_source MEDIUMTEXT NULL,
                glue_remark VARCHAR(128) NOT NULL,
                add_time DATETIME NULL,
                update_time DATETIME NULL
            ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4",
        )
        .await?;
        // Only its ids matter to the import (xjob's run ids must start above them).
        conn.execute(
            "CREATE TABLE xxl_job_log (
                id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
                job_group INT NOT NULL,
                job_id INT NOT NULL
            ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4",
        )
        .await?;
        conn.close().await?;
        Ok(())
    }

    async fn drop_database(&self) {
        match MySqlConnection::connect(&self.base_url).await {
            Ok(mut conn) => {
                let drop = format!("DROP DATABASE IF EXISTS {}", self.name);
                if let Err(error) = conn.execute(drop.as_str()).await {
                    eprintln!("could not drop {}: {error}", self.name);
                }
                let _ = conn.close().await;
            }
            Err(error) => eprintln!("could not drop {}: {error}", self.name),
        }
    }
}

/// One `xxl_job_info` row of the fixture (columns left out take XXL-JOB's defaults / NULL).
struct XxlJob {
    id: i64,
    group: i64,
    desc: &'static str,
    schedule: (&'static str, &'static str),
    misfire: &'static str,
    route: &'static str,
    block: Option<&'static str>,
    glue: &'static str,
    handler: &'static str,
    children: &'static str,
    running: bool,
}

fn bean(id: i64, desc: &'static str, route: &'static str) -> XxlJob {
    XxlJob {
        id,
        group: 1,
        desc,
        schedule: ("CRON", "0 */5 * * * ?"),
        misfire: "DO_NOTHING",
        route,
        block: Some("SERIAL_EXECUTION"),
        glue: "BEAN",
        handler: "demoJobHandler",
        children: "",
        running: false,
    }
}

/// The representative installation (3.x layout).
fn fixture_jobs() -> Vec<XxlJob> {
    vec![
        XxlJob {
            misfire: "FIRE_ONCE_NOW",
            children: "2,3,",
            running: true,
            schedule: ("CRON", "0 0 2 * * ?"),
            ..bean(1, "cron first", "FIRST")
        },
        XxlJob {
            schedule: ("FIX_RATE", "1"),
            block: Some("DISCARD_LATER"),
            running: true,
            ..bean(2, "rate last", "LAST")
        },
        XxlJob {
            schedule: ("NONE", ""),
            block: Some("COVER_EARLY"),
            ..bean(3, "none round", "ROUND")
        },
        bean(4, "random", "RANDOM"),
        bean(5, "hash", "CONSISTENT_HASH"),
        bean(6, "lfu", "LEAST_FREQUENTLY_USED"),
        bean(7, "lru", "LEAST_RECENTLY_USED"),
        XxlJob {
            group: 2,
            ..bean(8, "failover", "FAILOVER")
        },
        bean(9, "busyover", "BUSYOVER"),
        bean(10, "broadcast", "SHARDING_BROADCAST"),
        XxlJob {
            schedule: ("FIX_RATE", "60"),
            glue: "GLUE_SHELL",
            handler: "",
            running: true,
            ..bean(11, "shell script", "FIRST")
        },
        XxlJob {
            glue: "GLUE_PYTHON",
            handler: "",
            ..bean(12, "python script", "ROUND")
        },
        XxlJob {
            schedule: ("CRON", "0 0 25 * * ?"),
            ..bean(13, "bad cron", "FIRST")
        },
        bean(14, "unknown route", "NEAREST"),
        XxlJob {
            glue: "GLUE_GROOVY",
            handler: "",
            ..bean(15, "groovy", "FIRST")
        },
        XxlJob {
            children: "13",
            ..bean(16, "parent of bad cron", "FIRST")
        },
        XxlJob {
            children: "99",
            ..bean(17, "missing child", "FIRST")
        },
        XxlJob {
            group: 3,
            ..bean(18, "in bad group", "FIRST")
        },
        XxlJob {
            misfire: "",
            block: None,
            ..bean(19, "empty enums", "FIRST")
        },
    ]
}

/// Glue versions saved for the script jobs: (job, source, remark, saved at).
const GLUE_VERSIONS: &[(i64, &str, &str, &str)] = &[
    (11, "echo v1", "first version", "2025-01-01 10:00:00"),
    (11, "echo v2", "second version", "2025-02-01 10:00:00"),
    (11, "echo v3", "third version", "2025-03-01 10:00:00"),
    (12, "print('v1')", "python first", "2025-01-05 10:00:00"),
    (12, "print('v2')", "python second", "2025-01-06 10:00:00"),
];

/// XXL-JOB's last run log id in the fixture: xjob's run ids must start above it.
const XXL_LAST_LOG_ID: i64 = 70_000;

async fn fill_v3_at(url: &str) -> anyhow::Result<()> {
    let mut conn = MySqlConnection::connect(url).await?;
    conn.execute(
        format!("INSERT INTO xxl_job_log (id, job_group, job_id) VALUES (12, 1, 1), ({XXL_LAST_LOG_ID}, 1, 1)")
            .as_str(),
    )
    .await?;
    let groups: [(i64, &str, &str, i64, Option<&str>); 3] = [
        (
            1,
            "xxl-job-executor-sample",
            "Sample",
            0,
            Some("http://10.0.0.9:9999/"),
        ),
        (
            2,
            "billing-executor",
            "Billing",
            1,
            Some("http://10.0.0.5:9999/,http://10.0.0.6:9999/"),
        ),
        (3, "bad-group", "Bad", 7, None),
    ];
    for (id, app_name, title, address_type, addresses) in groups {
        sqlx::query(
            "INSERT INTO xxl_job_group (id, app_name, title, address_type, address_list, \
             update_time) VALUES (?, ?, ?, ?, ?, NOW())",
        )
        .bind(id)
        .bind(app_name)
        .bind(title)
        .bind(address_type)
        .bind(addresses)
        .execute(&mut conn)
        .await?;
    }
    for job in fixture_jobs() {
        let script = job.glue.starts_with("GLUE_");
        let last_source = GLUE_VERSIONS
            .iter()
            .rev()
            .find(|version| version.0 == job.id)
            .map(|version| version.1)
            .unwrap_or("println 'hi'");
        sqlx::query(
            "INSERT INTO xxl_job_info (id, job_group, job_desc, add_time, update_time, author, \
             alarm_email, schedule_type, schedule_conf, misfire_strategy, \
             executor_route_strategy, executor_handler, executor_param, \
             executor_block_strategy, executor_timeout, executor_fail_retry_count, glue_type, \
             glue_source, glue_remark, glue_updatetime, child_jobid, trigger_status) \
             VALUES (?, ?, ?, NOW(), NOW(), 'ops', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, \
             '2025-03-01 10:00:00', ?, ?)",
        )
        .bind(job.id)
        .bind(job.group)
        .bind(job.desc)
        .bind(if job.id == 1 {
            "ops@example.com,dev@example.com"
        } else {
            ""
        })
        .bind(job.schedule.0)
        .bind(job.schedule.1)
        .bind(job.misfire)
        .bind(job.route)
        .bind(job.handler)
        .bind(format!("param-{}", job.id))
        .bind(job.block)
        .bind(if job.id == 1 { 90 } else { 0 })
        .bind(if job.id == 1 { 2 } else { 0 })
        .bind(job.glue)
        .bind(if script { last_source } else { "" })
        .bind(if script { "latest" } else { "" })
        .bind(job.children)
        .bind(i32::from(job.running))
        .execute(&mut conn)
        .await?;
    }
    for (job_id, source, remark, saved) in GLUE_VERSIONS {
        sqlx::query(
            "INSERT INTO xxl_job_logglue (job_id, glue_type, glue_source, glue_remark, \
             add_time, update_time) VALUES (?, NULL, ?, ?, ?, ?)",
        )
        .bind(job_id)
        .bind(source)
        .bind(remark)
        .bind(saved)
        .bind(saved)
        .execute(&mut conn)
        .await?;
    }
    conn.close().await?;
    Ok(())
}

/// Runs `xjob import-xxl-job` to its end (bounded); returns (exit code, stdout).
fn import(from: &str, data_dir: &std::path::Path, flags: &[&str]) -> anyhow::Result<(i32, String)> {
    let mut command = Command::new(XJOB);
    command
        .args(["import-xxl-job", "--from", from, "--data-dir"])
        .arg(data_dir)
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .env_remove("XJOB_CONFIG")
        .env_remove("XJOB_DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command.args(flags);
    let mut child = command.spawn()?;
    let deadline = Instant::now() + EXIT_WITHIN;
    loop {
        if let Some(status) = child.try_wait()? {
            let output = child.wait_with_output()?;
            let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
            let stderr = String::from_utf8_lossy(&output.stderr);
            eprintln!("--- import {flags:?} stdout:\n{stdout}--- stderr:\n{stderr}");
            let code = status
                .code()
                .ok_or_else(|| anyhow::anyhow!("import ended by a signal"))?;
            return Ok((code, stdout));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("import did not exit within {EXIT_WITHIN:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

async fn xjob_store(data_dir: &std::path::Path) -> anyhow::Result<Store> {
    let url = format!("sqlite://{}", data_dir.join("xjob.db").display());
    Ok(Store::connect(&url).await?)
}

async fn all_jobs(store: &Store) -> anyhow::Result<Vec<Job>> {
    let filter = JobFilter {
        limit: 1000,
        ..JobFilter::default()
    };
    Ok(store.list_jobs(&filter).await?)
}

fn by_name<'a>(jobs: &'a [Job], name: &str) -> anyhow::Result<&'a Job> {
    jobs.iter()
        .find(|job| job.name == name)
        .ok_or_else(|| anyhow::anyhow!("job '{name}' was not imported"))
}

/// The lines of the item `start` (e.g. "skip    job 13 ") and its indented details.
fn entry<'a>(stdout: &'a str, start: &str) -> String {
    let mut lines = stdout
        .lines()
        .skip_while(|line| !line.trim_start().starts_with(start));
    let mut text: Vec<&'a str> = lines.next().into_iter().collect();
    text.extend(lines.take_while(|line| line.starts_with("          ")));
    text.join("\n")
}

#[tokio::test]
async fn imports_an_xxl_job_installation_once_listing_what_it_skips() -> anyhow::Result<()> {
    let Some(base_url) = common::cluster::env_or_skip("XJOB_TEST_MYSQL_URL", "MariaDB") else {
        return Ok(());
    };
    let database = XxlDatabase::create(&base_url, Layout::V3).await?;
    let url = database.url();
    let outcome = tokio::spawn(async move {
        fill_v3_at(&url).await?;
        check_import(&url).await
    })
    .await;
    database.drop_database().await;
    finish(outcome)
}

/// The outcome of a check run in its own task (so the database is dropped even when an
/// assertion panicked), the panic carried on.
fn finish(outcome: Result<anyhow::Result<()>, tokio::task::JoinError>) -> anyhow::Result<()> {
    match outcome {
        Ok(result) => result,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(error) => Err(error.into()),
    }
}

async fn check_import(from: &str) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;

    // Dry run: the whole plan, nothing written.
    let (code, plan) = import(from, dir.path(), &["--dry-run"])?;
    assert_eq!(code, 2, "something is skipped: exit status 2");
    assert!(plan.contains("2.3-3.4"), "layout named: {plan}");
    assert!(
        plan.contains("create  group 1 xxl-job-executor-sample (AUTO)"),
        "{plan}"
    );
    assert!(
        plan.contains("create  group 2 billing-executor (MANUAL xxl-job+http://10.0.0.5:9999/"),
        "{plan}"
    );
    assert!(
        plan.contains("create  job 1 'cron first' CRON '0 0 2 * * ?' FIRST"),
        "{plan}"
    );
    assert!(
        plan.contains(
            "plan: groups 2 to create, 0 existing, 1 skipped; jobs 13 to create, 0 \
                       existing, 6 skipped"
        ),
        "{plan}"
    );
    assert!(plan.contains("dry run: nothing was written"));
    let store = xjob_store(dir.path()).await?;
    assert!(
        all_jobs(&store).await?.is_empty(),
        "a dry run writes no job"
    );
    assert!(
        store.list_groups("", 0, 100).await?.is_empty(),
        "nor a group"
    );
    store.close().await;

    // Unmappable items, each with its reason.
    for (start, reason) in [
        ("skip    group 3 ", "address_type 7 is neither"),
        (
            "skip    job 13 ",
            "job.schedule_conf: invalid cron '0 0 25 * * ?'",
        ),
        (
            "skip    job 14 ",
            "executor_route_strategy 'NEAREST' is not one xjob knows",
        ),
        ("skip    job 15 ", "GLUE_GROOVY"),
        ("skip    job 16 ", "child job 13 is not imported"),
        ("skip    job 17 ", "child job 99 does not exist in XXL-JOB"),
        ("skip    job 18 ", "its group bad-group is not imported"),
    ] {
        let shown = entry(&plan, start);
        assert!(
            shown.contains(reason),
            "'{start}' lists '{reason}': {shown}"
        );
    }

    // The import.
    let before_ms = xjob_admin::model::now_ms();
    let (code, output) = import(from, dir.path(), &[])?;
    assert_eq!(code, 2);
    assert!(
        output.contains("done: created 2 groups and 13 jobs"),
        "{output}"
    );
    let store = xjob_store(dir.path()).await?;
    let checked = check_imported(&store, before_ms).await;
    store.close().await;
    let first_ids = checked?;

    // An admin serves what was imported, and a running imported job fires. It keeps running
    // through the next import (the import needs no stopped admin).
    let port = free_port()?;
    let mut serve = Command::new(XJOB);
    serve
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir.path())
        .env("RUST_LOG", "warn")
        .env_remove("XJOB_CONFIG")
        .env_remove("XJOB_DATABASE_URL")
        .env_remove("XJOB_BOOTSTRAP_TOKEN");
    let _admin = ChildProcess::spawn("xxl-import-admin", &mut serve)?;
    check_served(&format!("http://127.0.0.1:{port}")).await?;

    // Again: nothing new.
    let (code, output) = import(from, dir.path(), &[])?;
    assert_eq!(code, 2);
    assert!(
        output.contains(
            "groups 0 to create, 2 existing, 1 skipped; jobs 0 to create, 13 \
                         existing, 6 skipped"
        ),
        "{output}"
    );
    let store = xjob_store(dir.path()).await?;
    let jobs = all_jobs(&store).await?;
    let ids: HashSet<i64> = jobs.iter().map(|job| job.id.0).collect();
    assert_eq!(ids, first_ids, "the second import created nothing");
    assert_eq!(store.list_groups("", 0, 100).await?.len(), 2);
    let shell = by_name(&jobs, "shell script")?.id;
    assert_eq!(store.list_glue_versions(shell).await?.len(), 3);

    // A job deleted in xjob since is made again, alone.
    let busyover = by_name(&jobs, "busyover")?.id;
    assert!(store.delete_job(busyover).await?);
    store.close().await;
    let (code, output) = import(from, dir.path(), &[])?;
    assert_eq!(code, 2);
    assert!(
        output.contains("jobs 1 to create, 12 existing, 6 skipped"),
        "{output}"
    );
    assert!(output.contains("created job 9 -> xjob job"), "{output}");
    let store = xjob_store(dir.path()).await?;
    let count = all_jobs(&store).await?.len();
    store.close().await;
    assert_eq!(count, 13);
    Ok(())
}

/// Over gRPC: the imported jobs and glue versions are listed, and the running FIX_RATE job
/// (1 s) gets scheduled runs (they fail for want of an executor, which is fine here).
async fn check_served(url: &str) -> anyhow::Result<()> {
    let mut client = wait_until(Duration::from_secs(20), "the admin to serve", || {
        let url = url.to_string();
        async move {
            let mut client = JobAdminClient::connect(url).await.ok()?;
            client
                .list_groups(pb::ListGroupsRequest::default())
                .await
                .ok()?;
            Some(client)
        }
    })
    .await?;
    let request = pb::ListJobsRequest {
        page_size: 100,
        ..Default::default()
    };
    let jobs = client.list_jobs(request).await?.into_inner().jobs;
    assert_eq!(jobs.len(), 13);
    let id_of = |name: &str| {
        jobs.iter()
            .find(|job| job.name == name)
            .map(|job| job.id)
            .ok_or_else(|| anyhow::anyhow!("'{name}' not listed"))
    };
    let first = client
        .get_job(pb::GetJobRequest {
            id: id_of("cron first")?,
        })
        .await?
        .into_inner()
        .job
        .ok_or_else(|| anyhow::anyhow!("no job"))?;
    assert_eq!(first.timeout_ms, 90_000);
    assert_eq!(first.child_job_ids.len(), 2);
    let versions = client
        .list_glue_versions(pb::ListGlueVersionsRequest {
            job_id: id_of("shell script")?,
        })
        .await?
        .into_inner()
        .versions;
    assert_eq!(versions.len(), 3);
    let rate = id_of("rate last")?;
    let runs = wait_until(Duration::from_secs(30), "the imported job to fire", || {
        let mut client = client.clone();
        async move {
            let request = pb::ListLogsRequest {
                job_id: rate,
                page_size: 10,
                ..Default::default()
            };
            let logs = client.list_logs(request).await.ok()?.into_inner().logs;
            (!logs.is_empty()).then_some(logs)
        }
    })
    .await?;
    assert!(
        runs.iter()
            .all(|run| run.trigger_type == pb::TriggerType::Cron as i32),
        "scheduled fires: {runs:?}"
    );
    // Run ids never repeat one of XXL-JOB's log ids (its executors name log files by them).
    assert!(
        runs.iter().all(|run| run.id > XXL_LAST_LOG_ID),
        "run ids above XXL-JOB's last log id: {runs:?}"
    );
    Ok(())
}

/// Checks what the first import wrote; returns the ids of the jobs it created.
async fn check_imported(store: &Store, before_ms: i64) -> anyhow::Result<HashSet<i64>> {
    let groups = store.list_groups("", 0, 100).await?;
    assert_eq!(groups.len(), 2);
    let sample = store
        .get_group_by_app("xxl-job-executor-sample")
        .await?
        .ok_or_else(|| anyhow::anyhow!("sample group missing"))?;
    assert_eq!(sample.title, "Sample");
    assert_eq!(sample.address_type, AddressType::Auto);
    assert!(sample.addresses.is_empty());
    let billing = store
        .get_group_by_app("billing-executor")
        .await?
        .ok_or_else(|| anyhow::anyhow!("billing group missing"))?;
    assert_eq!(billing.address_type, AddressType::Manual);
    assert_eq!(
        billing.addresses,
        vec![
            "xxl-job+http://10.0.0.5:9999/",
            "xxl-job+http://10.0.0.6:9999/"
        ],
        "a MANUAL group's XXL-JOB executors keep being called over their own protocol"
    );

    let jobs = all_jobs(store).await?;
    assert_eq!(jobs.len(), 13);
    let first = by_name(&jobs, "cron first")?;
    assert_eq!(first.group_id, sample.id);
    assert_eq!(first.author, "ops");
    assert_eq!(first.alarm_email, "ops@example.com,dev@example.com");
    assert_eq!(first.schedule_type, ScheduleType::Cron);
    assert_eq!(first.schedule_conf, "0 0 2 * * ?");
    assert_eq!(first.misfire_strategy, MisfireStrategy::FireOnceNow);
    assert_eq!(first.route_strategy, RouteStrategy::First);
    assert_eq!(first.block_strategy, BlockStrategy::SerialExecution);
    assert_eq!(first.handler, "demoJobHandler");
    assert_eq!(first.params, "param-1");
    assert_eq!(first.timeout_ms, 90_000, "seconds become milliseconds");
    assert_eq!(first.fail_retry_count, 2);
    assert_eq!(first.glue_type, GlueType::Bean);
    assert_eq!(first.status, JobStatus::Running);
    assert!(
        first.trigger_next_ms >= before_ms + 5_000,
        "starts like StartJob"
    );
    let children = [
        by_name(&jobs, "rate last")?.id,
        by_name(&jobs, "none round")?.id,
    ];
    assert_eq!(
        first.child_job_ids, children,
        "child links point at xjob ids"
    );

    let rate = by_name(&jobs, "rate last")?;
    assert_eq!(
        (rate.schedule_type, rate.schedule_conf.as_str()),
        (ScheduleType::FixRate, "1")
    );
    assert_eq!(rate.status, JobStatus::Running);
    assert_eq!(rate.block_strategy, BlockStrategy::DiscardLater);
    let none = by_name(&jobs, "none round")?;
    assert_eq!(
        (none.schedule_type, none.status),
        (ScheduleType::None, JobStatus::Stopped)
    );
    assert_eq!(none.block_strategy, BlockStrategy::CoverEarly);
    let stopped = by_name(&jobs, "random")?;
    assert_eq!(
        (stopped.status, stopped.trigger_next_ms),
        (JobStatus::Stopped, 0)
    );
    assert_eq!(by_name(&jobs, "failover")?.group_id, billing.id);
    let defaults = by_name(&jobs, "empty enums")?;
    assert_eq!(defaults.misfire_strategy, MisfireStrategy::DoNothing);
    assert_eq!(defaults.block_strategy, BlockStrategy::SerialExecution);

    let routes: HashSet<RouteStrategy> = jobs.iter().map(|job| job.route_strategy).collect();
    assert_eq!(
        routes.len(),
        RouteStrategy::ALL.len(),
        "every route strategy"
    );
    let blocks: HashSet<BlockStrategy> = jobs.iter().map(|job| job.block_strategy).collect();
    assert_eq!(
        blocks.len(),
        BlockStrategy::ALL.len(),
        "every block strategy"
    );

    let shell = by_name(&jobs, "shell script")?;
    assert_eq!(shell.glue_type, GlueType::Shell);
    assert_eq!(shell.glue_source, "echo v3");
    assert_eq!(shell.status, JobStatus::Running);
    let versions = store.list_glue_versions(shell.id).await?;
    let remarks: Vec<&str> = versions.iter().map(|v| v.glue_remark.as_str()).collect();
    assert_eq!(
        remarks,
        ["third version", "second version", "first version"],
        "newest first"
    );
    assert!(versions.iter().all(|v| v.glue_type == GlueType::Shell));
    assert!(versions[0].created_ms > versions[2].created_ms);
    let python = by_name(&jobs, "python script")?;
    assert_eq!(python.glue_type, GlueType::Python);
    assert_eq!(store.list_glue_versions(python.id).await?.len(), 2);
    Ok(jobs.iter().map(|job| job.id.0).collect())
}

#[tokio::test]
async fn reads_the_3_5_layout_with_per_group_tokens() -> anyhow::Result<()> {
    let Some(base_url) = common::cluster::env_or_skip("XJOB_TEST_MYSQL_URL", "MariaDB") else {
        return Ok(());
    };
    let database = XxlDatabase::create(&base_url, Layout::V35).await?;
    let url = database.url();
    let outcome = tokio::spawn(async move {
        let mut conn = MySqlConnection::connect(&url).await?;
        conn.execute(
            "INSERT INTO xxl_job_group (id, app_name, name, address_type, access_token) \
             VALUES (1, 'orders-executor', 'Orders', 0, 'orders-token')",
        )
        .await?;
        conn.execute(
            "INSERT INTO xxl_job_info (id, job_group, name, author, schedule_type, \
             schedule_conf, executor_route_strategy, executor_handler, \
             executor_block_strategy, glue_type, trigger_status) VALUES \
             (1, 1, 'sync orders', 'ops', 'FIX_RATE', '10', 'ROUND', 'syncHandler', \
             'SERIAL_EXECUTION', 'BEAN', 1)",
        )
        .await?;
        conn.close().await?;
        let dir = tempfile::tempdir()?;
        let flags = ["--import-stopped", "--job-time-zone", "Asia/Shanghai"];
        let (code, output) = import(&url, dir.path(), &flags)?;
        assert_eq!(code, 0, "nothing skipped: exit status 0");
        assert!(output.contains("3.5+"), "{output}");
        let store = xjob_store(dir.path()).await?;
        let group = store.get_group_by_app("orders-executor").await?;
        let jobs = all_jobs(&store).await?;
        store.close().await;
        let group = group.ok_or_else(|| anyhow::anyhow!("group missing"))?;
        assert_eq!(
            (group.title.as_str(), group.access_token.as_str()),
            ("Orders", "orders-token")
        );
        let job = by_name(&jobs, "sync orders")?;
        assert_eq!(job.status, JobStatus::Stopped, "--import-stopped");
        assert_eq!(job.time_zone, "Asia/Shanghai");
        anyhow::Ok(())
    })
    .await;
    database.drop_database().await;
    finish(outcome)
}

// ---------------------------------------------------------------------------------------------
// The import record on every backend xjob runs on

mod record {
    use xjob_admin::model::{
        AddressType, GlueType, GlueVersion, Group, GroupId, Job, JobId, JobStatus, ScheduleType,
    };
    use xjob_admin::store::{Store, StoreError, XxlJobImport};

    const SOURCE: &str = "xxl-db:3306/xxl_job";

    fn import_of(group_id: GroupId, replaces: Option<JobId>) -> XxlJobImport {
        let job = Job {
            author: "ops".into(),
            schedule_type: ScheduleType::FixRate,
            schedule_conf: "60".into(),
            glue_type: GlueType::Shell,
            glue_source: "echo 2".into(),
            glue_remark: "v2".into(),
            glue_updated_ms: 20,
            status: JobStatus::Running,
            trigger_next_ms: 5_000,
            created_ms: 30,
            updated_ms: 30,
            ..Job::new(group_id, "imported")
        };
        let version = |n: i64| GlueVersion {
            id: 0,
            job_id: JobId(0),
            glue_type: GlueType::Shell,
            glue_source: format!("echo {n}"),
            glue_remark: format!("v{n}"),
            created_ms: n * 10,
        };
        XxlJobImport {
            source: SOURCE.into(),
            xxl_job_id: 7,
            job,
            glue_versions: vec![version(1), version(2)],
            replaces,
            now_ms: 30,
        }
    }

    async fn check_backend(store: &Store) -> anyhow::Result<()> {
        let group = store
            .insert_group(&Group {
                id: GroupId(0),
                app_name: "imported-app".into(),
                title: "imported".into(),
                address_type: AddressType::Auto,
                addresses: Vec::new(),
                access_token: String::new(),
                updated_ms: 1,
            })
            .await?;
        let job = store.import_xxl_job(&import_of(group.id, None)).await?;
        assert_eq!(store.xxl_imported_jobs(SOURCE).await?, vec![(7, job.id)]);
        assert!(store.xxl_imported_jobs("other:3306/x").await?.is_empty());
        let stored = store.get_job(job.id).await?;
        let stored = stored.ok_or_else(|| anyhow::anyhow!("job not stored"))?;
        assert_eq!(
            (stored.status, stored.trigger_next_ms),
            (JobStatus::Running, 5_000)
        );
        let versions = store.list_glue_versions(job.id).await?;
        let remarks: Vec<&str> = versions.iter().map(|v| v.glue_remark.as_str()).collect();
        assert_eq!(remarks, ["v2", "v1"]);
        assert_eq!(versions[1].created_ms, 10);

        // A second record for the same XXL-JOB job is refused whole: no second job.
        match store.import_xxl_job(&import_of(group.id, None)).await {
            Err(StoreError::Conflict(_)) => {}
            other => anyhow::bail!("expected a conflict, got {other:?}"),
        }
        assert_eq!(store.count_jobs().await?, 1);

        // The job deleted in xjob: the next import replaces its record.
        assert!(store.delete_job(job.id).await?);
        let again = store
            .import_xxl_job(&import_of(group.id, Some(job.id)))
            .await?;
        assert_ne!(again.id, job.id);
        assert_eq!(store.xxl_imported_jobs(SOURCE).await?, vec![(7, again.id)]);
        assert_eq!(store.list_glue_versions(again.id).await?.len(), 2);
        Ok(())
    }

    #[tokio::test]
    async fn import_record_on_sqlite() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let url = format!("sqlite://{}", dir.path().join("xjob.db").display());
        let store = Store::connect(&url).await?;
        let result = check_backend(&store).await;
        store.close().await;
        result
    }

    #[tokio::test]
    async fn import_record_on_database_servers() -> anyhow::Result<()> {
        for variable in ["XJOB_TEST_POSTGRES_URL", "XJOB_TEST_MYSQL_URL"] {
            let Ok(base_url) = std::env::var(variable) else {
                eprintln!("skipped the {variable} server: the variable is not set");
                continue;
            };
            let url = Store::create_scratch_database(&base_url).await?;
            let store = Store::connect(&url).await?;
            let checked = store.clone();
            let outcome = tokio::spawn(async move { check_backend(&checked).await }).await;
            store.close().await;
            super::drop_scratch_database(&base_url, &url).await;
            super::finish(outcome)?;
        }
        Ok(())
    }
}

/// Drops a database `Store::create_scratch_database` made on `base_url`'s server.
async fn drop_scratch_database(base_url: &str, scratch_url: &str) {
    let name = scratch_url
        .rsplit('/')
        .next()
        .and_then(|tail| tail.split('?').next())
        .unwrap_or_default()
        .to_string();
    if !name.starts_with("xjob_test_") {
        eprintln!("not dropping '{name}': not a scratch database");
        return;
    }
    let dropped = if base_url.starts_with("postgres") {
        // A closed pool's server processes may still be ending: FORCE waits them out.
        let statement = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
        match sqlx::PgConnection::connect(base_url).await {
            Ok(mut conn) => conn.execute(statement.as_str()).await.map(|_| ()),
            Err(error) => Err(error),
        }
    } else {
        let statement = format!("DROP DATABASE IF EXISTS {name}");
        match MySqlConnection::connect(base_url).await {
            Ok(mut conn) => conn.execute(statement.as_str()).await.map(|_| ()),
            Err(error) => Err(error),
        }
    };
    if let Err(error) = dropped {
        eprintln!("could not drop {name}: {error}");
    }
}

/// Runs `xjob import-xxl-job --from from` and returns its exit code and stderr.
fn import_error(from: &str) -> anyhow::Result<(i32, String)> {
    let dir = tempfile::tempdir()?;
    let output = Command::new(XJOB)
        .args(["import-xxl-job", "--dry-run", "--from", from, "--data-dir"])
        .arg(dir.path())
        .env("NO_COLOR", "1")
        .env_remove("XJOB_CONFIG")
        .env_remove("XJOB_DATABASE_URL")
        .stdin(Stdio::null())
        .output()?;
    let code = output.status.code().unwrap_or(-1);
    Ok((code, String::from_utf8_lossy(&output.stderr).into_owned()))
}

#[test]
fn an_unreachable_or_non_mysql_source_is_named_at_once() -> anyhow::Result<()> {
    // A closed port: refused at once, said so (it used to be "pool timed out" after 10 s).
    let port = free_port()?;
    let started = Instant::now();
    let (code, stderr) = import_error(&format!("mysql://root:pw@127.0.0.1:{port}/xxl_job"))?;
    let took = started.elapsed();
    eprintln!("closed port answered in {took:?}: {stderr}");
    assert_ne!(code, 0);
    assert!(
        stderr.contains(&format!(
            "cannot connect to the XXL-JOB database at 127.0.0.1:{port}/xxl_job"
        )),
        "{stderr}"
    );
    assert!(stderr.to_lowercase().contains("refused"), "{stderr}");
    assert!(
        !stderr.contains("pw"),
        "the password stays out of messages: {stderr}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // A PostgreSQL URL is not read as MySQL.
    let (code, stderr) = import_error("postgres://xjob:pw@127.0.0.1:5432/xxl_job")?;
    assert_ne!(code, 0);
    assert!(stderr.contains("is not a MySQL URL"), "{stderr}");
    Ok(())
}

/// `--children-as-workflows` on a dump with a chain (1 -> 2 -> 3), a fan-out tree (10 -> 11,
/// 12; 11 -> 13), a cycle below a root (20 -> 21, 23; 21 -> 22 -> 21) and a job with no link
/// (30): the dry run lists the workflows, with the schedule each gets, and writes none; the
/// import saves one workflow per tree, over the imported jobs, which keep no child links; a
/// running root's cron moves to its workflow (with its first time) and the root is created
/// without a schedule; the cycle is named and its chain imported as child links; a second
/// import creates nothing.
#[tokio::test]
async fn imports_child_chains_as_workflows_once() -> anyhow::Result<()> {
    let Some(base_url) = common::cluster::env_or_skip("XJOB_TEST_MYSQL_URL", "MariaDB") else {
        return Ok(());
    };
    let database = XxlDatabase::create(&base_url, Layout::V3).await?;
    let url = database.url();
    let outcome = tokio::spawn(async move {
        fill_chains(&url).await?;
        check_chains_as_workflows(&url).await
    })
    .await;
    database.drop_database().await;
    finish(outcome)
}

async fn fill_chains(url: &str) -> anyhow::Result<()> {
    let mut conn = MySqlConnection::connect(url).await?;
    conn.execute(
        "INSERT INTO xxl_job_group (id, app_name, title, address_type, address_list) \
         VALUES (1, 'chain-executor', 'Chains', 0, NULL)",
    )
    .await?;
    let jobs: [(i64, &str, &str, bool); 12] = [
        (1, "nightly export", "2", true),
        (2, "compress", "3", false),
        (3, "upload", "", false),
        (10, "fan out", "11,12,", true),
        (11, "left", "13", false),
        (12, "right", "", false),
        (13, "left leaf", "", false),
        (20, "cyclic root", "21,23", false),
        (21, "ping", "22", false),
        (22, "pong", "21", false),
        (23, "beside the cycle", "", false),
        (30, "alone", "", true),
    ];
    for (id, desc, children, running) in jobs {
        sqlx::query(
            "INSERT INTO xxl_job_info (id, job_group, job_desc, schedule_type, schedule_conf, \
             misfire_strategy, executor_route_strategy, executor_handler, \
             executor_block_strategy, glue_type, child_jobid, trigger_status) \
             VALUES (?, 1, ?, 'CRON', '0 0 3 * * ?', 'DO_NOTHING', 'FIRST', 'demoJobHandler', \
             'SERIAL_EXECUTION', 'BEAN', ?, ?)",
        )
        .bind(id)
        .bind(desc)
        .bind(children)
        .bind(i32::from(running))
        .execute(&mut conn)
        .await?;
    }
    conn.close().await?;
    Ok(())
}

async fn check_chains_as_workflows(from: &str) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let flags = ["--children-as-workflows"];
    let (code, plan) = import(from, dir.path(), &["--children-as-workflows", "--dry-run"])?;
    assert_eq!(code, 2, "the jobs on the cycle are skipped: exit status 2");
    let chain = entry(&plan, "create  workflow 'nightly export (XXL-JOB job 1)'");
    assert!(
        chain.contains("from job 1: 3 nodes, 2 edges (job-1 -> job-2, job-2 -> job-3)"),
        "{plan}"
    );
    assert!(
        chain.contains("schedule CRON '0 0 3 * * ?' zone the admin's misfire DO_NOTHING"),
        "{chain}"
    );
    assert!(
        chain.contains("job 1's schedule moves to the workflow"),
        "{chain}"
    );
    assert!(
        plan.contains(
            "create  workflow 'fan out (XXL-JOB job 10)' from job 10: 4 nodes, 3 edges \
             (job-10 -> job-11, job-10 -> job-12, job-11 -> job-13), schedule CRON"
        ),
        "{plan}"
    );
    let cycle = entry(&plan, "links   chain of jobs 20,21,22,23");
    assert!(cycle.contains("cycle 21 -> 22 -> 21"), "{plan}");
    assert!(
        entry(&plan, "create  job 1 ").contains("child links to 2 become workflow edges"),
        "{plan}"
    );
    assert!(
        plan.contains("workflows 2 to create, 0 existing, 1 chains kept as child links"),
        "{plan}"
    );
    let store = xjob_store(dir.path()).await?;
    assert!(
        store.list_workflows(None, 0, 10).await?.is_empty(),
        "dry run"
    );
    store.close().await;

    let (code, out) = import(from, dir.path(), &flags)?;
    assert_eq!(code, 2);
    assert!(out.contains("created 2 workflows"), "{out}");
    let store = xjob_store(dir.path()).await?;
    let jobs = all_jobs(&store).await?;
    let id = |name: &str| by_name(&jobs, name).map(|job| job.id);
    let workflows = store.list_workflows(None, 0, 10).await?;
    assert_eq!(workflows.len(), 2, "{workflows:?}");
    let nightly = &workflows[0];
    assert_eq!(nightly.name, "nightly export (XXL-JOB job 1)");
    assert_eq!(nightly.group_id, by_name(&jobs, "upload")?.group_id);
    let node_jobs: Vec<_> = nightly.nodes.iter().map(|node| node.job_id).collect();
    assert_eq!(
        node_jobs,
        [id("nightly export")?, id("compress")?, id("upload")?]
    );
    assert!(
        (nightly.edges.iter()).all(|edge| edge.condition == EdgeCondition::OnSuccess),
        "{nightly:?}"
    );
    assert_eq!(workflows[1].nodes.len(), 4);
    for name in ["nightly export", "compress", "fan out", "left"] {
        assert!(by_name(&jobs, name)?.child_job_ids.is_empty(), "{name}");
    }
    // The root's cron is the workflow's: each 03:00 runs the chain, as in XXL-JOB.
    assert_eq!(nightly.schedule.schedule_type, ScheduleType::Cron);
    assert_eq!(nightly.schedule.schedule_conf, "0 0 3 * * ?");
    assert_eq!(nightly.schedule.misfire, MisfireStrategy::DoNothing);
    assert!(nightly.schedule.next_fire_ms > 0, "{nightly:?}");
    assert!(
        nightly.params.is_empty(),
        "each node runs with its job's params"
    );
    let root = by_name(&jobs, "nightly export")?;
    assert_eq!(
        (root.schedule_type, root.status, root.trigger_next_ms),
        (ScheduleType::None, JobStatus::Stopped, 0),
        "the root no longer fires alone"
    );
    let alone = by_name(&jobs, "alone")?;
    assert_eq!(
        (alone.schedule_type, alone.status),
        (ScheduleType::Cron, JobStatus::Running),
        "a job with no link keeps its schedule"
    );
    // The cycle's chain: as without the option, the jobs on the cycle and their parent are
    // skipped, the rest is imported.
    assert!(by_name(&jobs, "beside the cycle").is_ok());
    for name in ["cyclic root", "ping", "pong"] {
        assert!(by_name(&jobs, name).is_err(), "{name} is skipped");
    }
    store.close().await;

    let (code, again) = import(from, dir.path(), &flags)?;
    assert_eq!(code, 2);
    assert!(
        again.contains(
            "exists  workflow 'nightly export (XXL-JOB job 1)' from job 1 -> xjob workflow"
        ),
        "{again}"
    );
    assert!(again.contains("created 0 groups and 0 jobs"), "{again}");
    assert!(again.contains("created 0 workflows"), "{again}");
    let store = xjob_store(dir.path()).await?;
    assert_eq!(store.list_workflows(None, 0, 10).await?.len(), 2);
    store.close().await;
    Ok(())
}
