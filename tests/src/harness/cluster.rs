//! `TestCluster`: one admin on a temporary SQLite file plus executors, all on loopback.
//!
//! ```text
//! let cluster = TestCluster::builder().start().await?;
//! let executor = cluster.executor("app").handler("echo", echo).start().await?;
//! let group = cluster.create_group("app").await?;
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tonic::transport::Channel;
use xjob_admin::monitor::{Alarm, LogAlarm};
use xjob_admin::{Config, RunningAdmin};
use xjob_executor::{Executor, ExecutorBuilder, RunningExecutor};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;

use super::client;

/// A change applied to the admin configuration before start.
type ConfigChange = Box<dyn FnOnce(&mut Config) + Send>;

/// Builds a `TestCluster`.
pub struct TestClusterBuilder {
    data_dir: Option<tempfile::TempDir>,
    node_id: String,
    configure: Vec<ConfigChange>,
    alarm: Arc<dyn Alarm>,
}

impl TestClusterBuilder {
    /// Uses `alarm` as the admin's alarm hook (kept across admin restarts), e.g. to count alarms.
    pub fn alarm(mut self, alarm: Arc<dyn Alarm>) -> Self {
        self.alarm = alarm;
        self
    }

    /// Changes the admin configuration before it starts.
    pub fn configure(mut self, change: impl FnOnce(&mut Config) + Send + 'static) -> Self {
        self.configure.push(Box::new(change));
        self
    }

    /// Starts the admin and connects a JobAdmin client.
    pub async fn start(self) -> anyhow::Result<TestCluster> {
        let data_dir = match self.data_dir {
            Some(dir) => dir,
            None => tempfile::tempdir()?,
        };
        let admin = start_admin(
            data_dir.path().to_path_buf(),
            &self.node_id,
            self.configure,
            Arc::clone(&self.alarm),
        )
        .await?;
        let client = JobAdminClient::connect(admin.url()).await?;
        let listen = admin.local_addr();
        Ok(TestCluster {
            admin: Some(admin),
            listen,
            data_dir,
            node_id: self.node_id,
            client,
            executors: Vec::new(),
            alarm: self.alarm,
        })
    }
}

async fn start_admin(
    data_dir: PathBuf,
    node_id: &str,
    configure: Vec<ConfigChange>,
    alarm: Arc<dyn Alarm>,
) -> anyhow::Result<RunningAdmin> {
    let mut config = Config::for_tests(data_dir);
    config.node_id = node_id.to_string();
    for change in configure {
        change(&mut config);
    }
    Ok(xjob_admin::app::start_with(config.validate()?, alarm).await?)
}

/// A running admin with its data dir, a client, and the executors started through it.
pub struct TestCluster {
    admin: Option<RunningAdmin>,
    listen: std::net::SocketAddr,
    data_dir: tempfile::TempDir,
    node_id: String,
    client: JobAdminClient<Channel>,
    executors: Vec<RunningExecutor>,
    alarm: Arc<dyn Alarm>,
}

impl TestCluster {
    pub fn builder() -> TestClusterBuilder {
        TestClusterBuilder {
            data_dir: None,
            node_id: "test-admin".to_string(),
            configure: Vec::new(),
            alarm: Arc::new(LogAlarm),
        }
    }

    /// The admin's `http://127.0.0.1:port`.
    pub fn admin_url(&self) -> String {
        self.admin
            .as_ref()
            .map(RunningAdmin::url)
            .unwrap_or_default()
    }

    /// The admin's bound `/metrics` address, when `metrics_listen` was configured.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.admin.as_ref().and_then(RunningAdmin::metrics_addr)
    }

    /// The admin's bound web console address, when `http_listen` was configured.
    pub fn console_addr(&self) -> Option<std::net::SocketAddr> {
        self.admin.as_ref().and_then(RunningAdmin::console_addr)
    }

    /// The admin's bound XXL-JOB compatibility address, when `xxl_job_compat_listen` was
    /// configured.
    pub fn xxl_compat_addr(&self) -> Option<std::net::SocketAddr> {
        self.admin.as_ref().and_then(RunningAdmin::xxl_compat_addr)
    }

    /// A JobAdmin client (cheap clone of one channel).
    pub fn client(&self) -> JobAdminClient<Channel> {
        self.client.clone()
    }

    /// The admin's data directory (the SQLite file lives there).
    pub fn data_dir(&self) -> PathBuf {
        self.data_dir.path().to_path_buf()
    }

    /// An executor builder pointed at this admin, bound to a free loopback port, logging into
    /// the cluster's data dir.
    pub fn executor(&self, app_name: &str) -> ExecutorBuilder {
        let log_dir = self
            .data_dir
            .path()
            .join(format!("executor-logs-{app_name}-{}", self.executors.len()));
        Executor::builder()
            .app_name(app_name)
            .admin_addrs([self.admin_url()])
            .bind("127.0.0.1:0")
            .log_dir(log_dir)
            .shutdown_grace(Duration::from_secs(1))
    }

    /// Starts an executor and waits until the admin lists it.
    pub async fn start_executor(&mut self, builder: ExecutorBuilder) -> anyhow::Result<String> {
        let executor = builder.start().await?;
        executor.wait_registered(Duration::from_secs(5)).await?;
        let address = executor.address().to_string();
        self.executors.push(executor);
        Ok(address)
    }

    /// Takes an executor out of the cluster's care (to crash or stop it in a test).
    pub fn take_executor(&mut self, address: &str) -> Option<RunningExecutor> {
        let index = self
            .executors
            .iter()
            .position(|executor| executor.address() == address)?;
        Some(self.executors.remove(index))
    }

    /// Creates an AUTO group for `app_name`; returns its id.
    pub async fn create_group(&self, app_name: &str) -> anyhow::Result<i64> {
        let title = format!("{app_name} executors");
        client::create_group(&self.client, app_name, &title).await
    }

    /// A valid BEAN job of `group_id` (stopped), ready to customise before `create_job`.
    pub fn job(
        group_id: i64,
        handler: &str,
        schedule_type: pb::ScheduleType,
        conf: &str,
    ) -> pb::Job {
        pb::Job {
            group_id,
            name: format!("{handler} job"),
            author: "tests".to_string(),
            schedule_type: schedule_type as i32,
            schedule_conf: conf.to_string(),
            misfire_strategy: pb::MisfireStrategy::DoNothing as i32,
            route_strategy: pb::RouteStrategy::First as i32,
            handler: handler.to_string(),
            block_strategy: pb::BlockStrategy::SerialExecution as i32,
            glue_type: pb::GlueType::Bean as i32,
            ..Default::default()
        }
    }

    /// Creates a job; returns it as stored.
    pub async fn create_job(&self, job: pb::Job) -> anyhow::Result<pb::Job> {
        client::create_job(&self.client, job).await
    }

    /// Starts a job; returns it with its first fire time.
    pub async fn start_job(&self, id: i64) -> anyhow::Result<pb::Job> {
        let response = self.client().start_job(pb::StartJobRequest { id }).await?;
        response
            .into_inner()
            .job
            .ok_or_else(|| anyhow::anyhow!("no job returned"))
    }

    /// Triggers a job once (`TriggerJob`), with `params` instead of the job's own when given;
    /// returns the first log id (a sharded job has one per shard: see `trigger_on`).
    pub async fn trigger(&self, job_id: i64, params: Option<&str>) -> anyhow::Result<i64> {
        client::trigger(&self.client, job_id, params).await
    }

    /// Triggers a job once on `addresses` (empty: the job's route); returns every log id.
    pub async fn trigger_on(
        &self,
        job_id: i64,
        addresses: Vec<String>,
    ) -> anyhow::Result<Vec<i64>> {
        let request = pb::TriggerJobRequest {
            id: job_id,
            params: None,
            addresses,
        };
        Ok(self
            .client()
            .trigger_job(request)
            .await?
            .into_inner()
            .log_ids)
    }

    /// One log as it is now.
    pub async fn get_log(&self, id: i64) -> anyhow::Result<pb::Log> {
        self.client()
            .get_log(pb::GetLogRequest { id })
            .await?
            .into_inner()
            .log
            .ok_or_else(|| anyhow::anyhow!("log {id} not found"))
    }

    /// Every log of a job (newest first).
    pub async fn logs(&self, job_id: i64) -> anyhow::Result<Vec<pb::Log>> {
        let request = pb::ListLogsRequest {
            job_id,
            page_size: 1000,
            ..Default::default()
        };
        Ok(self.client().list_logs(request).await?.into_inner().logs)
    }

    /// Logs of a job with the given status.
    pub async fn logs_with_status(
        &self,
        job_id: i64,
        status: pb::RunStatus,
    ) -> anyhow::Result<Vec<pb::Log>> {
        Ok(self
            .logs(job_id)
            .await?
            .into_iter()
            .filter(|log| log.status == status as i32)
            .collect())
    }

    /// Waits until a log is final (not PENDING/RUNNING); returns it.
    pub async fn wait_log_final(&self, log_id: i64, timeout: Duration) -> anyhow::Result<pb::Log> {
        client::wait_log_final(&self.client, log_id, timeout).await
    }

    /// Stops the admin gracefully and starts a new one on the same data dir and node id.
    pub async fn restart_admin(&mut self) -> anyhow::Result<()> {
        self.restart_admin_after(Duration::ZERO).await
    }

    /// Like `restart_admin`, with the new admin starting `downtime` after the old one began to
    /// stop (fires come due meanwhile).
    pub async fn restart_admin_after(&mut self, downtime: Duration) -> anyhow::Result<()> {
        let restart_at = tokio::time::Instant::now() + downtime;
        if let Some(admin) = self.admin.take() {
            admin.shutdown().await;
        }
        tokio::time::sleep_until(restart_at).await;
        // Same port, so executors reconnect to the restarted admin on their own.
        let listen = self.listen;
        let change: ConfigChange = Box::new(move |config| config.listen = listen);
        let admin = start_admin(
            self.data_dir.path().to_path_buf(),
            &self.node_id,
            vec![change],
            Arc::clone(&self.alarm),
        )
        .await?;
        self.client = JobAdminClient::connect(admin.url()).await?;
        self.admin = Some(admin);
        Ok(())
    }

    /// Stops executors, then the admin.
    pub async fn shutdown(mut self) {
        for executor in self.executors.drain(..) {
            executor.shutdown().await;
        }
        if let Some(admin) = self.admin.take() {
            admin.shutdown().await;
        }
    }
}
