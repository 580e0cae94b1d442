//! The cluster harness: admin processes sharing one database (a scratch PostgreSQL or MariaDB
//! database, or one SQLite file), executors of the SDK in the test process that record each run
//! they get, the test's own connection to the database to read the log rows, and the probes of
//! the admins' gRPC surface (ListExecutors, health, reflection).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;
use xjob_admin::model::{GroupId, LogFilter, RunLog, RunStatus};
use xjob_admin::store::Store;
use xjob_executor::{Executor, JobContext, JobOutput, JobResult, RunningExecutor};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;
use xjob_testkit::planned::busiest_owner;

use super::ledger::Ledger;
use super::{AdminOutput, AdminProcess, AdminSpec, connect, free_port, wait_until, xjob_binary};

/// The app every executor of the harness registers as.
pub const APP: &str = "cluster-app";

/// `fail_retry_count` of every job the harness creates.
pub const JOB_RETRIES: i32 = 1;

// ---------------------------------------------------------------------------------------------
// Databases

/// The database the admins share.
pub struct Database {
    pub url: String,
    pub label: &'static str,
    /// Holds the SQLite file's directory while the test runs.
    _dir: Option<tempfile::TempDir>,
}

impl Database {
    /// A scratch PostgreSQL database, or a shared SQLite file when no server is configured.
    pub async fn postgres_or_shared_sqlite() -> anyhow::Result<Option<Database>> {
        if std::env::var("XJOB_TEST_POSTGRES_URL").is_ok() {
            return Database::postgres().await;
        }
        eprintln!(
            "XJOB_TEST_POSTGRES_URL is not set: running on one SQLite file shared by the admin \
             processes (.ci/run sets it to run this on PostgreSQL)"
        );
        Database::sqlite()
    }

    /// One SQLite file in a scratch directory, shared by the admin processes.
    pub fn sqlite() -> anyhow::Result<Option<Database>> {
        let dir = tempfile::tempdir()?;
        let url = format!("sqlite://{}", dir.path().join("shared.db").display());
        Ok(Some(Database {
            url,
            label: "sqlite (shared file)",
            _dir: Some(dir),
        }))
    }

    /// A SQLite file at `path` (a directory the test prepared, e.g. on a small file system).
    pub fn sqlite_file(path: &std::path::Path, label: &'static str) -> Database {
        Database {
            url: format!("sqlite://{}", path.display()),
            label,
            _dir: None,
        }
    }

    pub async fn postgres() -> anyhow::Result<Option<Database>> {
        Database::server("XJOB_TEST_POSTGRES_URL", "postgresql").await
    }

    pub async fn mariadb() -> anyhow::Result<Option<Database>> {
        Database::server("XJOB_TEST_MYSQL_URL", "mariadb").await
    }

    async fn server(variable: &str, label: &'static str) -> anyhow::Result<Option<Database>> {
        let Some(base_url) = env_or_skip(variable, label) else {
            return Ok(None);
        };
        let url = Store::create_scratch_database(&base_url).await?;
        Ok(Some(Database {
            url,
            label,
            _dir: None,
        }))
    }
}

/// The variable's value, or `None` after saying visibly why the test is skipped.
pub fn env_or_skip(variable: &str, what: &str) -> Option<String> {
    match std::env::var(variable) {
        Ok(value) if !value.is_empty() => Some(value),
        _ => {
            eprintln!("skipped: {variable} is not set ({what} is needed; .ci/run sets it)");
            None
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The cluster

/// Leases and thresholds the admins run with. The executor lease is three node leases, as in
/// the defaults (30 s / 10 s), so a stall of two node leases does not take executors out.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub heartbeat_interval: Duration,
    pub executor_lease: Duration,
    pub node_lease: Duration,
    pub misfire_threshold: Duration,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            heartbeat_interval: Duration::from_millis(500),
            executor_lease: Duration::from_secs(6),
            node_lease: Duration::from_secs(2),
            misfire_threshold: Duration::from_secs(5),
        }
    }
}

impl Timing {
    pub fn config_toml(&self) -> String {
        format!(
            "time_zone = \"UTC\"\nheartbeat_interval = \"{}ms\"\nexecutor_lease = \"{}ms\"\n\
             node_lease = \"{}ms\"\nmisfire_threshold = \"{}ms\"\nhandshake_timeout = \"2s\"\n",
            self.heartbeat_interval.as_millis(),
            self.executor_lease.as_millis(),
            self.node_lease.as_millis(),
            self.misfire_threshold.as_millis(),
        )
    }
}

/// What a handler saw: `(job_id, scheduled_at_ms)` per run.
pub type Records = Arc<Mutex<Vec<(i64, i64)>>>;

/// A range of scheduled seconds `[start_ms, end_ms)`, both on second boundaries.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub start_ms: i64,
    pub end_ms: i64,
}

/// Admin processes, executors, and the test's own connection to the shared database.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub database: Database,
    pub timing: Timing,
    pub admins: Vec<AdminProcess>,
    pub executors: Vec<RunningExecutor>,
    pub records: Records,
    pub store: Store,
    pub group_id: i64,
    pub job_ids: Vec<i64>,
    /// `fail_retry_count` of the jobs `create_jobs` creates (`JOB_RETRIES` unless changed).
    pub retries: i32,
    /// Per `kill_lock_holder_and_restart`: the victim and the PENDING fires it owned.
    pub kills: Vec<(String, HashSet<i64>)>,
}

impl Cluster {
    /// Migrates the database once (admins starting together would race to), starts the admins
    /// and the executors, and creates the group.
    pub async fn start(
        database: Database,
        admin_count: usize,
        executor_count: usize,
        timing: Timing,
    ) -> anyhow::Result<Cluster> {
        Cluster::start_configured(database, admin_count, executor_count, timing, "").await
    }

    /// As [`Cluster::start`], with `extra_toml` (more configuration keys) appended to the
    /// admins' configuration file.
    pub async fn start_configured(
        database: Database,
        admin_count: usize,
        executor_count: usize,
        timing: Timing,
        extra_toml: &str,
    ) -> anyhow::Result<Cluster> {
        let no_env = |_: &std::path::Path, _: usize| Vec::new();
        Cluster::start_with_env(
            database,
            admin_count,
            executor_count,
            timing,
            extra_toml,
            no_env,
        )
        .await
    }

    /// As [`Cluster::start_configured`], each admin (numbered from 1) with the environment
    /// `env` gives it, from the cluster's scratch directory.
    pub async fn start_with_env(
        database: Database,
        admin_count: usize,
        executor_count: usize,
        timing: Timing,
        extra_toml: &str,
        env: impl Fn(&std::path::Path, usize) -> Vec<(String, String)>,
    ) -> anyhow::Result<Cluster> {
        let dir = tempfile::tempdir()?;
        let store = Store::connect(&database.url).await?;
        let config_file = dir.path().join("admin.toml");
        std::fs::write(&config_file, timing.config_toml() + extra_toml)?;
        let mut admins = Vec::with_capacity(admin_count);
        for index in 1..=admin_count {
            let spec = AdminSpec {
                binary: xjob_binary(),
                node_id: format!("admin-{index}"),
                port: free_port()?,
                data_dir: dir.path().join(format!("admin-{index}")),
                database_url: Some(database.url.clone()),
                config_file: config_file.clone(),
                log_filter: "info,sqlx=warn,h2=warn,tower=warn,hyper=warn".into(),
                output: AdminOutput::AppendTo(dir.path().join(format!("admin-{index}.log"))),
                env: env(dir.path(), index),
            };
            admins.push(AdminProcess::spawn(spec)?);
        }
        let mut cluster = Cluster {
            dir,
            database,
            timing,
            admins,
            executors: Vec::new(),
            records: Arc::new(Mutex::new(Vec::new())),
            store,
            group_id: 0,
            job_ids: Vec::new(),
            retries: JOB_RETRIES,
            kills: Vec::new(),
        };
        for admin in &cluster.admins {
            connect(&admin.spec.url()).await?;
        }
        cluster.group_id = cluster.create_group().await?;
        for index in 0..executor_count {
            cluster.start_executor(index).await?;
        }
        eprintln!(
            "cluster on {}: {admin_count} admins, {executor_count} executors",
            cluster.database.label
        );
        Ok(cluster)
    }

    pub async fn client(&self) -> anyhow::Result<JobAdminClient<Channel>> {
        // Any admin serves the API; the first one that answers is used.
        for admin in &self.admins {
            if let Ok(client) = JobAdminClient::connect(admin.spec.url()).await {
                return Ok(client);
            }
        }
        anyhow::bail!("no admin accepts connections")
    }

    pub async fn create_group(&self) -> anyhow::Result<i64> {
        let group = pb::Group {
            app_name: APP.into(),
            title: "cluster test".into(),
            address_type: pb::AddressType::Auto as i32,
            ..Default::default()
        };
        let created = self
            .client()
            .await?
            .create_group(pb::CreateGroupRequest { group: Some(group) })
            .await?
            .into_inner()
            .group;
        created
            .map(|group| group.id)
            .ok_or_else(|| anyhow::anyhow!("CreateGroup returned no group"))
    }

    /// An executor listing every admin, starting from a different one each (so sessions are
    /// spread over the admins and a dead admin's executors move on to the next).
    pub async fn start_executor(&mut self, index: usize) -> anyhow::Result<()> {
        let mut admin_urls: Vec<String> = self.admins.iter().map(|a| a.spec.url()).collect();
        let first = index % admin_urls.len();
        admin_urls.rotate_left(first);
        let records = Arc::clone(&self.records);
        let executor = Executor::builder()
            .app_name(APP)
            .admin_addrs(admin_urls)
            .bind("127.0.0.1:0")
            .log_dir(self.dir.path().join(format!("executor-{index}")))
            .handler("record", move |ctx: JobContext| {
                if let Ok(mut records) = records.lock() {
                    records.push((ctx.job_id(), ctx.scheduled_at_ms()));
                }
                async { JobResult::Ok(JobOutput::default()) }
            })
            .start()
            .await?;
        executor.wait_registered(Duration::from_secs(20)).await?;
        self.executors.push(executor);
        Ok(())
    }

    /// Creates `count` jobs firing every second and starts them.
    pub async fn create_jobs(
        &mut self,
        count: usize,
        misfire: pb::MisfireStrategy,
    ) -> anyhow::Result<()> {
        let mut client = self.client().await?;
        for index in 0..count {
            let job = pb::Job {
                group_id: self.group_id,
                name: format!("every second {index}"),
                schedule_type: pb::ScheduleType::Cron as i32,
                schedule_conf: "* * * * * ?".into(),
                misfire_strategy: misfire as i32,
                route_strategy: pb::RouteStrategy::Round as i32,
                // A run lost with the admin that was sending it is retried at once (a new
                // attempt with the same scheduled time): the ledger counts it across attempts.
                fail_retry_count: self.retries,
                handler: "record".into(),
                block_strategy: pb::BlockStrategy::SerialExecution as i32,
                glue_type: pb::GlueType::Bean as i32,
                ..Default::default()
            };
            let created = client
                .create_job(pb::CreateJobRequest { job: Some(job) })
                .await?
                .into_inner()
                .job
                .ok_or_else(|| anyhow::anyhow!("CreateJob returned no job"))?;
            client
                .start_job(pb::StartJobRequest { id: created.id })
                .await?;
            self.job_ids.push(created.id);
        }
        Ok(())
    }

    /// The window starting `lead_ms` from now (started jobs first fire ≥ 5 s after StartJob)
    /// and lasting `length_ms`.
    pub fn window_from_now(&self, lead_ms: i64, length_ms: i64) -> Window {
        let start_ms = ceil_second(now_ms() + lead_ms);
        Window {
            start_ms,
            end_ms: start_ms + length_ms,
        }
    }

    pub async fn wait_until_ms(&self, instant_ms: i64) -> anyhow::Result<()> {
        let wait = Duration::from_millis((instant_ms - now_ms()).max(0) as u64);
        tokio::time::sleep(wait).await;
        Ok(())
    }

    /// Until the window's last second has passed, plus time for its runs to be dispatched.
    pub async fn wait_past(&self, window: &Window) -> anyhow::Result<()> {
        self.wait_until_ms(window.end_ms + 1_000).await
    }

    /// Waits until every (job, second) of the window has a final log row, then returns the
    /// ledger of handler records and rows.
    pub async fn settled_ledger(&self, window: &Window) -> anyhow::Result<Ledger> {
        let deadline = Duration::from_secs(30);
        let settled = wait_until(deadline, "every fire of the window to settle", || async {
            let rows = self.rows().await.ok()?;
            let ledger = Ledger::new(
                window,
                &self.job_ids,
                &self.records_snapshot(),
                &rows,
                self.retries,
            );
            ledger.settled().then_some(ledger)
        })
        .await;
        match settled {
            Ok(ledger) => Ok(ledger),
            Err(error) => {
                let rows = self.rows().await?;
                let ledger = Ledger::new(
                    window,
                    &self.job_ids,
                    &self.records_snapshot(),
                    &rows,
                    self.retries,
                );
                ledger.print("unsettled");
                Err(error)
            }
        }
    }

    pub fn records_snapshot(&self) -> Vec<(i64, i64)> {
        self.records
            .lock()
            .map(|records| records.clone())
            .unwrap_or_default()
    }

    /// Every log row of the group, read in pages (de-duplicated by id: rows inserted while
    /// reading shift the pages).
    pub async fn rows(&self) -> anyhow::Result<Vec<RunLog>> {
        const PAGE: i64 = 5_000;
        let mut by_id = BTreeMap::new();
        let mut offset = 0;
        loop {
            let filter = LogFilter {
                group_id: Some(GroupId(self.group_id)),
                offset,
                limit: PAGE,
                ..LogFilter::default()
            };
            let page = self.store.list_logs(&filter).await?;
            let full = page.len() as i64 == PAGE;
            for row in page {
                by_id.insert(row.id, row);
            }
            if !full {
                break;
            }
            offset += PAGE;
        }
        Ok(by_id.into_values().collect())
    }

    /// The admin owning the most planned (PENDING) fires, and their ids: the one that last
    /// wrote a schedule round under the lock.
    pub async fn lock_holder(&self) -> anyhow::Result<(usize, HashSet<i64>)> {
        let filter = LogFilter {
            group_id: Some(GroupId(self.group_id)),
            status: Some(RunStatus::Pending),
            limit: 100_000,
            ..LogFilter::default()
        };
        let pending = self.store.list_logs(&filter).await?;
        let nodes: Vec<&str> = self
            .admins
            .iter()
            .map(|admin| admin.spec.node_id.as_str())
            .collect();
        let planned = pending
            .iter()
            .map(|row| (row.owner_node.as_str(), row.id.0));
        // Nobody owning a planned fire: any admin will do, and it owns none.
        Ok(busiest_owner(planned, &nodes).unwrap_or_default())
    }

    /// How many of `owned` another admin than `node` has taken over (claimed or skipped).
    pub async fn adopted_from(&self, node: &str, owned: &HashSet<i64>) -> anyhow::Result<usize> {
        let rows = self.rows().await?;
        Ok(rows
            .iter()
            .filter(|row| owned.contains(&row.id.0) && row.owner_node != node)
            .count())
    }

    /// SIGKILLs the lock holder, waits for a survivor to dispatch one of its planned fires, and
    /// restarts it; returns the takeover time (None when it owned no planned fire).
    pub async fn kill_lock_holder_and_restart(&mut self) -> anyhow::Result<Option<Duration>> {
        let (victim, owned) = self.lock_holder().await?;
        let node = self.admins[victim].spec.node_id.clone();
        let killed_ms = now_ms();
        self.admins[victim].kill_9()?;
        let takeover = if owned.is_empty() {
            None
        } else {
            let deadline = self.timing.node_lease * 3 + Duration::from_secs(10);
            let first_ms = wait_until(
                deadline,
                "a survivor to dispatch a fire of the killed admin",
                || self.first_takeover_ms(&node, &owned, killed_ms),
            )
            .await?;
            Some(Duration::from_millis((first_ms - killed_ms).max(0) as u64))
        };
        self.admins[victim].restart()?;
        connect(&self.admins[victim].spec.url()).await?;
        self.kills.push((node, owned));
        Ok(takeover)
    }

    /// Per kill, how late the survivors dispatched the victim's planned fires: the largest
    /// trigger time (when the run left: its second, or later) minus scheduled time among those
    /// another admin dispatched, so 0 when all left on their second; kills whose fires no
    /// survivor dispatched are left out.
    pub async fn adopted_delays_ms(&self) -> anyhow::Result<Vec<i64>> {
        let rows = self.rows().await?;
        Ok(self
            .kills
            .iter()
            .filter_map(|(node, owned)| {
                rows.iter()
                    .filter(|row| owned.contains(&row.id.0) && &row.owner_node != node)
                    .filter(|row| !matches!(row.status, RunStatus::Pending | RunStatus::Skipped))
                    .map(|row| row.trigger_time_ms - row.scheduled_at_ms)
                    .max()
            })
            .collect())
    }

    /// The earliest dispatch by another admin of a fire `node` owned when it was killed.
    pub async fn first_takeover_ms(
        &self,
        node: &str,
        owned: &HashSet<i64>,
        killed_ms: i64,
    ) -> Option<i64> {
        let filter = LogFilter {
            group_id: Some(GroupId(self.group_id)),
            from_ms: Some(killed_ms),
            limit: 100_000,
            ..LogFilter::default()
        };
        let rows = self.store.list_logs(&filter).await.ok()?;
        rows.iter()
            .filter(|row| owned.contains(&row.id.0) && row.owner_node != node)
            .filter(|row| row.status != RunStatus::Pending && row.status != RunStatus::Skipped)
            .map(|row| row.trigger_time_ms)
            .min()
    }

    /// At least two admins planned some of the window's fires: the schedule really was shared.
    /// (Not all three: whichever admin takes the lock first in a second plans that second for
    /// everyone, and on a loaded machine one admin can lose every race of a short window.)
    pub async fn assert_admins_shared_the_schedule(&self, window: &Window) -> anyhow::Result<()> {
        let rows = self.rows().await?;
        let mut per_node: BTreeMap<&str, usize> = BTreeMap::new();
        for row in rows
            .iter()
            .filter(|row| window.contains(row.scheduled_at_ms))
        {
            *per_node.entry(row.owner_node.as_str()).or_default() += 1;
        }
        eprintln!("fires per admin: {per_node:?}");
        anyhow::ensure!(
            per_node.len() >= 2,
            "one admin planned every fire of the window: {per_node:?}"
        );
        Ok(())
    }

    /// Waits until every admin's gRPC health (overall and JobAdmin) says `serving`.
    pub async fn wait_health_everywhere(&self, serving: bool) -> anyhow::Result<()> {
        let wanted = if serving {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        for admin in &self.admins {
            let url = admin.spec.url();
            let what = format!("{} to report {wanted:?}", admin.spec.node_id);
            wait_until(Duration::from_secs(15), &what, || async {
                let overall = health_of(&url, "").await?;
                let api = health_of(&url, "xjob.v1.JobAdmin").await?;
                (overall == wanted && api == wanted).then_some(())
            })
            .await?;
        }
        Ok(())
    }

    /// Stops PostgreSQL with `ctl` for `outage` under load, then starts it again: every admin
    /// must report NOT_SERVING (with reflection still answering) while it is away, and SERVING
    /// once it is back.
    pub async fn cut_database(&self, ctl: &str, outage: Duration) -> anyhow::Result<()> {
        // Flushed first, so the stop is quick and the outage is the one asked for.
        run_shell(&format!("{ctl} checkpoint"))?;
        let stopped_ms = now_ms();
        run_shell(&format!("{ctl} stop"))?;
        let stop_ms = now_ms() - stopped_ms;
        let health = self.wait_health_everywhere(false).await;
        let reflection = reflection_lists(&self.admins[0].spec.url(), "xjob.v1.JobAdmin").await;
        let elapsed = Duration::from_millis((now_ms() - stopped_ms).max(0) as u64);
        tokio::time::sleep(outage.saturating_sub(elapsed)).await;
        // Started again whatever the checks found, so later tests have their server.
        run_shell(&format!("{ctl} start"))?;
        let started_ms = now_ms();
        health?;
        anyhow::ensure!(
            reflection == Some(true),
            "reflection did not list xjob.v1.JobAdmin during the outage: {reflection:?}"
        );
        self.wait_health_everywhere(true).await?;
        eprintln!(
            "postgresql down {} ms (stopping took {stop_ms} ms); every admin serving again {} ms \
             after it came back",
            started_ms - stopped_ms,
            now_ms() - started_ms
        );
        Ok(())
    }

    /// Stops the executors and admins; on failure prints the end of every admin's log first.
    pub async fn finish(self, outcome: anyhow::Result<()>) -> anyhow::Result<()> {
        if outcome.is_err() {
            for admin in &self.admins {
                eprintln!(
                    "---- {} (last lines of its log, without per-run lines)\n{}",
                    admin.spec.node_id,
                    admin.log_tail(40)
                );
            }
        }
        for executor in self.executors {
            executor.shutdown().await;
        }
        drop(self.admins);
        self.store.close().await;
        if outcome.is_err() {
            // Kept for a look at the full logs; a passing test leaves nothing behind.
            eprintln!("admin logs kept in {}", self.dir.keep().display());
        }
        outcome
    }
}

/// `(address, admin_node)` of every executor an admin lists for the test app, sorted; None when
/// it does not answer.
pub async fn list_executors(url: &str) -> Option<Vec<(String, String)>> {
    let mut client = JobAdminClient::connect(url.to_string()).await.ok()?;
    let request = pb::ListExecutorsRequest {
        app_name: APP.to_string(),
    };
    let executors = client
        .list_executors(request)
        .await
        .ok()?
        .into_inner()
        .executors;
    let mut listed: Vec<(String, String)> = executors
        .into_iter()
        .map(|executor| (executor.address, executor.admin_node))
        .collect();
    listed.sort();
    Some(listed)
}

/// Whether server reflection (v1) lists `service`; None when it does not answer.
pub async fn reflection_lists(url: &str, service: &str) -> Option<bool> {
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    let channel = Channel::from_shared(url.to_string())
        .ok()?
        .connect()
        .await
        .ok()?;
    let request = tonic_reflection::pb::v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut client = ServerReflectionClient::new(channel);
    let call = client.server_reflection_info(tokio_stream::iter(vec![request]));
    let mut responses = tokio::time::timeout(Duration::from_secs(2), call)
        .await
        .ok()?
        .ok()?
        .into_inner();
    let response = responses.message().await.ok()??;
    match response.message_response? {
        MessageResponse::ListServicesResponse(list) => {
            Some(list.service.iter().any(|listed| listed.name == service))
        }
        _ => Some(false),
    }
}

/// The health status an admin reports for `service`, or None when it does not answer.
pub async fn health_of(url: &str, service: &str) -> Option<ServingStatus> {
    let channel = Channel::from_shared(url.to_string())
        .ok()?
        .connect()
        .await
        .ok()?;
    let mut client = tonic_health::pb::health_client::HealthClient::new(channel);
    let request = tonic_health::pb::HealthCheckRequest {
        service: service.to_string(),
    };
    let response = tokio::time::timeout(Duration::from_secs(2), client.check(request))
        .await
        .ok()?
        .ok()?;
    ServingStatus::try_from(response.into_inner().status).ok()
}

impl Window {
    pub fn contains(&self, instant_ms: i64) -> bool {
        instant_ms >= self.start_ms && instant_ms < self.end_ms
    }
}

pub fn run_shell(command: &str) -> anyhow::Result<()> {
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdout(std::process::Stdio::null())
        .status()?;
    anyhow::ensure!(status.success(), "`{command}` failed: {status}");
    Ok(())
}

pub fn now_ms() -> i64 {
    xjob_admin::model::now_ms()
}

pub fn ceil_second(ms: i64) -> i64 {
    (ms + 999).div_euclid(1_000) * 1_000
}
