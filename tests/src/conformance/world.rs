//! What a scenario works with: the admin process and its client, the executor command, and
//! small helpers over the JobAdmin API (groups, jobs, triggers, waiting on run states, logs).

use std::path::PathBuf;
use std::time::Duration;

use tonic::transport::Channel;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;

use super::admin::{AdminProcess, free_port};
use super::executor::{ExecutorCommand, ExecutorEnv, ExecutorProcess};
use crate::wait_until;

/// The access token every group of the suite carries, so every scenario checks tokens too.
pub const TOKEN: &str = "conformance-token";

/// Handlers every executor app under test serves.
pub const HANDLERS: [&str; 5] = ["succeed", "fail", "sleep", "log", "command"];

/// How long an executor may take to start and register.
pub const REGISTER_BOUND: Duration = Duration::from_secs(30);

/// How long a short run may take from trigger to result.
pub const RUN_BOUND: Duration = Duration::from_secs(15);

pub struct World {
    pub admin: AdminProcess,
    pub client: JobAdminClient<Channel>,
    pub command: ExecutorCommand,
    pub work_dir: PathBuf,
    pub repo_root: PathBuf,
    /// Executors started by the running scenario (output shown if it fails).
    pub executors: Vec<ExecutorProcess>,
    sequence: u32,
}

impl World {
    pub fn new(
        admin: AdminProcess,
        client: JobAdminClient<Channel>,
        command: ExecutorCommand,
        work_dir: PathBuf,
        repo_root: PathBuf,
    ) -> Self {
        World {
            admin,
            client,
            command,
            work_dir,
            repo_root,
            executors: Vec::new(),
            sequence: 0,
        }
    }

    /// A fresh app name for a scenario (4-64 characters of `A-Za-z0-9_.-`).
    pub fn app_name(&mut self, scenario: &str) -> String {
        self.sequence += 1;
        format!("conf-{scenario}-{}", self.sequence)
    }

    /// Creates an AUTO group with the suite's token; returns its id.
    pub async fn create_group(&mut self, app_name: &str) -> anyhow::Result<i64> {
        let group = pb::Group {
            app_name: app_name.to_string(),
            title: app_name.to_string(),
            address_type: pb::AddressType::Auto as i32,
            access_token: TOKEN.to_string(),
            ..Default::default()
        };
        let response = self
            .client
            .create_group(pb::CreateGroupRequest { group: Some(group) })
            .await?;
        Ok(response
            .into_inner()
            .group
            .map(|group| group.id)
            .unwrap_or_default())
    }

    /// Starts an executor process of `app_name` with `token` on a free port; returns its index
    /// in `executors`. Does not wait for registration.
    pub fn spawn_executor(&mut self, app_name: &str, token: &str) -> anyhow::Result<usize> {
        let port = free_port()?;
        self.spawn_executor_on(app_name, token, port)
    }

    /// Like `spawn_executor` on a given port (to restart an executor where it was).
    pub fn spawn_executor_on(
        &mut self,
        app_name: &str,
        token: &str,
        port: u16,
    ) -> anyhow::Result<usize> {
        let admin_addrs = self.admin.url();
        self.spawn_executor_with(app_name, token, port, &admin_addrs)
    }

    /// Like `spawn_executor_on` with a given admin list (`XJOB_ADMIN_ADDR`).
    pub fn spawn_executor_with(
        &mut self,
        app_name: &str,
        token: &str,
        port: u16,
        admin_addrs: &str,
    ) -> anyhow::Result<usize> {
        self.spawn_executor_env(app_name, token, port, admin_addrs, Vec::new())
    }

    /// Like `spawn_executor_with` with more environment variables.
    pub fn spawn_executor_env(
        &mut self,
        app_name: &str,
        token: &str,
        port: u16,
        admin_addrs: &str,
        extra_env: Vec<(String, String)>,
    ) -> anyhow::Result<usize> {
        let env = ExecutorEnv {
            admin_addrs: admin_addrs.to_string(),
            app_name: app_name.to_string(),
            port,
            access_token: token.to_string(),
            log_dir: self.work_dir.join(format!("logs-{app_name}-{port}")),
            output: self
                .work_dir
                .join(format!("executor-{app_name}-{port}.out")),
            work_dir: self.repo_root.clone(),
            extra_env,
            session: self.command.session,
        };
        self.executors
            .push(ExecutorProcess::spawn(&self.command, env)?);
        Ok(self.executors.len() - 1)
    }

    /// Starts an executor with the suite's token and waits until the admin lists it; returns
    /// its index.
    pub async fn start_executor(&mut self, app_name: &str) -> anyhow::Result<usize> {
        let index = self.spawn_executor(app_name, TOKEN)?;
        let address = self.executors[index].address();
        self.wait_listed(app_name, &address, REGISTER_BOUND).await?;
        Ok(index)
    }

    /// The admin's live sessions of exactly `app_name`.
    pub async fn online(&self, app_name: &str) -> anyhow::Result<Vec<pb::Executor>> {
        let request = pb::ListExecutorsRequest {
            app_name: app_name.to_string(),
        };
        let executors = self.client.clone().list_executors(request).await?;
        Ok(executors
            .into_inner()
            .executors
            .into_iter()
            .filter(|executor| executor.app_name == app_name)
            .collect())
    }

    /// Waits until `address` has a live session for `app_name`; returns it.
    pub async fn wait_listed(
        &self,
        app_name: &str,
        address: &str,
        bound: Duration,
    ) -> anyhow::Result<pb::Executor> {
        wait_until(
            bound,
            &format!("{address} to register as {app_name}"),
            || async {
                self.online(app_name)
                    .await
                    .ok()?
                    .into_iter()
                    .find(|executor| executor.address == address)
            },
        )
        .await
    }

    /// Waits until `address` has no live session for `app_name`.
    pub async fn wait_unlisted(
        &self,
        app_name: &str,
        address: &str,
        bound: Duration,
    ) -> anyhow::Result<()> {
        wait_until(bound, &format!("{address} to leave routing"), || async {
            let online = self.online(app_name).await.ok()?;
            (!online.iter().any(|executor| executor.address == address)).then_some(())
        })
        .await
    }

    /// A stopped BEAN job of `group_id` with no schedule (triggered by hand).
    pub fn job(group_id: i64, handler: &str) -> pb::Job {
        pb::Job {
            group_id,
            name: format!("conformance {handler}"),
            author: "conformance".to_string(),
            schedule_type: pb::ScheduleType::None as i32,
            misfire_strategy: pb::MisfireStrategy::DoNothing as i32,
            route_strategy: pb::RouteStrategy::First as i32,
            handler: handler.to_string(),
            block_strategy: pb::BlockStrategy::SerialExecution as i32,
            glue_type: pb::GlueType::Bean as i32,
            ..Default::default()
        }
    }

    /// Creates a job; returns its id.
    pub async fn create_job(&mut self, job: pb::Job) -> anyhow::Result<i64> {
        let response = self
            .client
            .create_job(pb::CreateJobRequest { job: Some(job) })
            .await?;
        Ok(response
            .into_inner()
            .job
            .map(|job| job.id)
            .unwrap_or_default())
    }

    /// Triggers a job by hand with `params`; returns the new log ids.
    pub async fn trigger(&mut self, job_id: i64, params: &str) -> anyhow::Result<Vec<i64>> {
        let request = pb::TriggerJobRequest {
            id: job_id,
            params: Some(params.to_string()),
            addresses: Vec::new(),
        };
        Ok(self.client.trigger_job(request).await?.into_inner().log_ids)
    }

    /// Triggers a job that makes one run; returns its log id.
    pub async fn trigger_one(&mut self, job_id: i64, params: &str) -> anyhow::Result<i64> {
        let ids = self.trigger(job_id, params).await?;
        match ids.as_slice() {
            [id] => Ok(*id),
            _ => anyhow::bail!("expected one run, the trigger made {ids:?}"),
        }
    }

    pub async fn get_log(&self, log_id: i64) -> anyhow::Result<pb::Log> {
        let response = self
            .client
            .clone()
            .get_log(pb::GetLogRequest { id: log_id })
            .await?;
        response
            .into_inner()
            .log
            .ok_or_else(|| anyhow::anyhow!("log {log_id}: empty answer"))
    }

    /// Every run of a job, oldest first.
    pub async fn logs(&self, job_id: i64) -> anyhow::Result<Vec<pb::Log>> {
        let request = pb::ListLogsRequest {
            job_id,
            page_size: 1000,
            ..Default::default()
        };
        let mut logs = self
            .client
            .clone()
            .list_logs(request)
            .await?
            .into_inner()
            .logs;
        logs.reverse();
        Ok(logs)
    }

    /// Waits until a run is final (not PENDING or RUNNING); returns it.
    pub async fn wait_final(&self, log_id: i64, bound: Duration) -> anyhow::Result<pb::Log> {
        wait_until(bound, &format!("run {log_id} to finish"), || async {
            let log = self.get_log(log_id).await.ok()?;
            is_final(&log).then_some(log)
        })
        .await
    }

    /// Waits until a run is RUNNING on its executor and has logged a line containing `marker`
    /// (so its handler has really started).
    pub async fn wait_running_with(&self, log_id: i64, marker: &str) -> anyhow::Result<()> {
        wait_until(
            RUN_BOUND,
            &format!("run {log_id} to run and log '{marker}'"),
            || async {
                let log = self.get_log(log_id).await.ok()?;
                if log.status != pb::RunStatus::Running as i32 || log.trigger_code != 200 {
                    return None;
                }
                let (content, _) = self.read_log(log_id).await.ok()?;
                content.contains(marker).then_some(())
            },
        )
        .await
    }

    /// Reads a run's whole log through the admin (`ReadRunLog`, paging until nothing is left);
    /// returns the content and the last page's `is_end`.
    pub async fn read_log(&self, log_id: i64) -> anyhow::Result<(String, bool)> {
        let mut content = String::new();
        let mut from_line = 1;
        loop {
            let request = pb::ReadRunLogRequest { log_id, from_line };
            let page = self
                .client
                .clone()
                .read_run_log(request)
                .await?
                .into_inner();
            content.push_str(&page.content);
            if page.to_line < page.from_line || page.is_end {
                return Ok((content, page.is_end));
            }
            from_line = page.to_line + 1;
        }
    }

    /// Checks that a finished run's handler really stopped: its log stops growing.
    pub async fn assert_log_stopped(&self, log_id: i64) -> anyhow::Result<()> {
        let (before, _) = self.read_log(log_id).await?;
        // Absence of new lines can only be observed over a window: 6 ticks of the handler.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let (after, is_end) = self.read_log(log_id).await?;
        anyhow::ensure!(
            before.lines().count() == after.lines().count(),
            "run {log_id}'s handler kept logging after its run ended:\n{after}"
        );
        anyhow::ensure!(
            is_end,
            "ReadRunLog of finished run {log_id}: is_end is false"
        );
        Ok(())
    }

    /// Stops the scenario's executors gracefully (SIGKILL after a bound).
    pub async fn stop_executors(&mut self) {
        for mut executor in self.executors.drain(..) {
            if executor.terminate(Duration::from_secs(10)).await.is_err() {
                let _ = executor.kill_9().await;
            }
        }
    }
}

pub fn is_final(log: &pb::Log) -> bool {
    ![pb::RunStatus::Pending as i32, pb::RunStatus::Running as i32].contains(&log.status)
}

pub fn status_name(status: i32) -> &'static str {
    pb::RunStatus::try_from(status)
        .map(|status| status.as_str_name())
        .unwrap_or("?")
}

/// Fails unless `log` ended with `status` and `handle_code`.
pub fn expect_status(log: &pb::Log, status: pb::RunStatus, code: i32) -> anyhow::Result<()> {
    anyhow::ensure!(
        log.status == status as i32 && log.handle_code == code,
        "run {} ended {} / handle_code {} (expected {} / {code}); trigger_msg '{}', handle_msg '{}'",
        log.id,
        status_name(log.status),
        log.handle_code,
        status.as_str_name(),
        log.trigger_msg,
        log.handle_msg
    );
    Ok(())
}

/// `authorization: Bearer <TOKEN>` on a direct call to the executor.
pub fn with_token<T>(message: T) -> anyhow::Result<tonic::Request<T>> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse()?);
    Ok(request)
}
