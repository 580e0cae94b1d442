//! The admin's client of `ExecutorService`: one cached channel per executor address
//! (`channels`), the `Run` batching queue (`batcher`), the route probes (`Beat`, `IdleBeat`) and
//! the operator calls (`Kill`, `ReadLog`). The trigger sends runs through it; the API kills runs
//! and reads their logs through it.
//!
//! It forgets an executor's channel when the registry publishes that the executor left
//! ([`follow_removals`]), so a restarted executor on the same address gets a fresh connection.

mod batcher;
mod bearer;
mod channels;
pub mod log_chunk;
mod session;
pub mod xxl;

use std::time::Duration;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use xjob_proto::pb;
use xjob_proto::pb::executor_service_client::ExecutorServiceClient;

use crate::error::Error;
use crate::model::ExecutorInfo;
use crate::model::{JobId, LogId, NodeIdentity};
use crate::registry::Registry;
use batcher::RunBatcher;
use bearer::authorized;
use channels::ExecutorChannels;
use log_chunk::RunLogChunk;
use xxl::{XxlClient, XxlTarget};

/// Longest a FAILOVER `Beat` or BUSYOVER `IdleBeat` probe waits for its answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// What an `IdleBeat` probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Idleness {
    Idle,
    /// Busy with the job; the executor's reason.
    Busy(String),
}

/// Calls to executors, by address, with the group's access token.
pub struct ExecutorClient {
    channels: ExecutorChannels,
    batcher: RunBatcher,
    /// Bounds a session-dispatch call as the channel's timeout bounds a dialed one.
    request_timeout: Duration,
    probe_timeout: Duration,
    /// Presented to executors of groups without their own token (`executor_token`).
    default_token: String,
    /// Which addresses are XXL-JOB executors (`with_registry`); their calls go over HTTP.
    registry: Option<std::sync::Arc<Registry>>,
    xxl: XxlClient,
}

impl ExecutorClient {
    /// `request_timeout` bounds every call; probes wait at most a second of it. `tls` is used
    /// for executors whose address is `https://`.
    pub fn new(request_timeout: Duration, tls: xjob_tls::ClientTls) -> ExecutorClient {
        ExecutorClient {
            channels: ExecutorChannels::new(request_timeout, tls),
            batcher: RunBatcher::default(),
            request_timeout,
            probe_timeout: request_timeout.min(PROBE_TIMEOUT),
            default_token: String::new(),
            registry: None,
            xxl: XxlClient::new(request_timeout, request_timeout.min(PROBE_TIMEOUT)),
        }
    }

    /// Sends batched runs from tasks of `tasks` (the admin's batcher stage), so shutdown waits
    /// for them and stops the queues once the dispatches are drained.
    pub fn with_batcher_tasks(mut self, tasks: crate::lifecycle::Tasks) -> ExecutorClient {
        self.batcher = RunBatcher::with_tasks(tasks);
        self
    }

    /// Looks executors up in `registry`: an address registered by an XXL-JOB executor is
    /// called over XXL-JOB's HTTP API, a `session://` address down its executor's session
    /// (`session`), every other over a dialed gRPC channel.
    pub fn with_registry(mut self, registry: std::sync::Arc<Registry>) -> ExecutorClient {
        self.registry = Some(registry);
        self
    }

    /// The XXL-JOB executor at `address`, if it is one: registered there, or named so by a
    /// MANUAL group's `xxl-job+http://HOST:PORT` address. The group's list is all a MANUAL
    /// group knows of an executor, and an XXL-JOB executor's `http://` address looks just like
    /// a gRPC executor's, so the prefix is what tells the two apart before anything registers.
    fn xxl_executor(&self, address: &str) -> Option<ExecutorInfo> {
        if let Some(http) = crate::model::validate::xxl_listed_address(address) {
            return Some(ExecutorInfo {
                executor_id: String::new(),
                app_name: String::new(),
                address: http.to_string(),
                handlers: Vec::new(),
                registered_ms: 0,
                last_heartbeat_ms: 0,
                admin_node: String::new(),
                running_log_ids: Vec::new(),
                protocol: crate::model::ExecutorProtocol::XxlJobHttp,
            });
        }
        self.registry.as_ref()?.xxl_executor(address)
    }

    /// Presents `token` (the cluster-wide `executor_token`) to executors of groups that have
    /// no access token of their own.
    pub fn with_default_token(mut self, token: String) -> ExecutorClient {
        self.default_token = token;
        self
    }

    /// The token a call presents: the group's, else the cluster-wide one.
    fn token<'a>(&'a self, group_token: &'a str) -> &'a str {
        if group_token.is_empty() {
            &self.default_token
        } else {
            group_token
        }
    }

    /// Forgets everything cached for an executor that left.
    pub fn forget(&self, address: &str) {
        self.channels.evict(address);
        self.batcher.evict(address);
    }

    /// Whether a run to `address` goes in a `RunBatch` (see `batcher`).
    pub fn batches(&self, address: &str) -> bool {
        !crate::registry::session_calls::is_session_address(address)
            && self.xxl_executor(address).is_none()
            && self.batcher.batches(address)
    }

    /// The session line of an executor in session dispatch (see `session::line`).
    fn session_line(
        &self,
        address: &str,
    ) -> Option<Result<std::sync::Arc<crate::registry::session_calls::SessionLine>, tonic::Status>>
    {
        session::line(self.registry.as_ref(), address)
    }

    /// Sends one run through the executor's batching queue (see `batcher`).
    pub async fn run(
        &self,
        address: &str,
        token: &str,
        request: pb::RunRequest,
    ) -> Result<pb::RunResponse, tonic::Status> {
        if let Some(executor) = self.xxl_executor(address) {
            let target = xxl_target(&executor, self.token(token));
            return self.xxl.run(target, &request).await;
        }
        if let Some(line) = self.session_line(address) {
            return session::run(&*line?, request, self.request_timeout).await;
        }
        let channel = self
            .channels
            .channel(address)
            .map_err(tonic::Status::invalid_argument)?;
        self.batcher
            .run(address, channel, self.token(token), request)
            .await
    }

    /// FAILOVER's probe: whether the executor answers at all, within the probe timeout.
    pub async fn beat(&self, address: &str, token: &str) -> Result<(), tonic::Status> {
        if let Some(executor) = self.xxl_executor(address) {
            return self
                .xxl
                .beat(xxl_target(&executor, self.token(token)))
                .await;
        }
        if let Some(line) = self.session_line(address) {
            return session::beat(&*line?, self.probe_timeout).await;
        }
        let request = self.probe_request(pb::BeatRequest {}, self.token(token))?;
        self.client(address)?.beat(request).await.map(|_| ())
    }

    /// BUSYOVER's probe: whether the executor is idle for `job`, within the probe timeout.
    pub async fn idle_beat(
        &self,
        address: &str,
        token: &str,
        job: JobId,
    ) -> Result<Idleness, tonic::Status> {
        if let Some(executor) = self.xxl_executor(address) {
            let target = xxl_target(&executor, self.token(token));
            return Ok(match self.xxl.idle_beat(target, job.0).await? {
                None => Idleness::Idle,
                Some(reason) => Idleness::Busy(reason),
            });
        }
        let response = if let Some(line) = self.session_line(address) {
            session::idle_beat(&*line?, job.0, self.probe_timeout).await?
        } else {
            let request =
                self.probe_request(pb::IdleBeatRequest { job_id: job.0 }, self.token(token))?;
            self.client(address)?.idle_beat(request).await?.into_inner()
        };
        Ok(if response.idle {
            Idleness::Idle
        } else {
            Idleness::Busy(response.reason)
        })
    }

    /// Asks the executor to stop a run of `job`; returns (killed, message).
    pub async fn kill(
        &self,
        address: &str,
        token: &str,
        job: JobId,
        log: LogId,
    ) -> Result<(bool, String), Error> {
        if let Some(executor) = self.xxl_executor(address) {
            // XXL-JOB kills by job: the job's running run and whatever is queued behind it.
            let target = xxl_target(&executor, self.token(token));
            return self
                .xxl
                .kill(target, job.0)
                .await
                .map_err(|status| Error::executor(address, status));
        }
        let request = pb::KillRequest {
            job_id: job.0,
            log_id: log.0,
            held_only: false,
        };
        let response = self.send_kill(address, token, request).await?;
        Ok((response.killed, response.message))
    }

    /// Cancels run `log` of `job` if its executor still holds it (sent ahead, not started):
    /// it never starts and reports KILLED. A run that started is left alone. Returns whether
    /// the executor cancelled it. Only executors that declared they can hold runs get this.
    pub async fn cancel_held(
        &self,
        address: &str,
        token: &str,
        job: JobId,
        log: LogId,
    ) -> Result<bool, Error> {
        let request = pb::KillRequest {
            job_id: job.0,
            log_id: log.0,
            held_only: true,
        };
        Ok(self.send_kill(address, token, request).await?.killed)
    }

    /// One `Kill` call, down the executor's session or over its dialed channel.
    async fn send_kill(
        &self,
        address: &str,
        token: &str,
        request: pb::KillRequest,
    ) -> Result<pb::KillResponse, Error> {
        let response = if let Some(line) = self.session_line(address) {
            let line = line.map_err(|status| Error::executor(address, status))?;
            session::kill(&line, request, self.request_timeout)
                .await
                .map_err(|status| Error::executor(address, status))?
        } else {
            self.client(address)?
                .kill(authorized(request, self.token(token))?)
                .await
                .map_err(|status| Error::executor(address, status))?
                .into_inner()
        };
        Ok(response)
    }

    /// Reads a run's log file from `from_line` (the file is named by the run's trigger day).
    pub async fn read_log(
        &self,
        address: &str,
        token: &str,
        log: LogId,
        log_date_ms: i64,
        from_line: i32,
    ) -> Result<RunLogChunk, Error> {
        self.read_log_fenced(address, token, log, log_date_ms, from_line, None)
            .await
    }

    /// Reads a run's log from its first line, as the stranded-run probe does, and asks the
    /// executor to refuse the run from `fence` (node and epoch) from now on if it never
    /// received it (`RunLogChunk::fenced` says it did). XXL-JOB executors do not fence.
    pub async fn read_log_fencing(
        &self,
        address: &str,
        token: &str,
        log: LogId,
        log_date_ms: i64,
        fence: &NodeIdentity,
    ) -> Result<RunLogChunk, Error> {
        self.read_log_fenced(address, token, log, log_date_ms, 1, Some(fence))
            .await
    }

    async fn read_log_fenced(
        &self,
        address: &str,
        token: &str,
        log: LogId,
        log_date_ms: i64,
        from_line: i32,
        fence: Option<&NodeIdentity>,
    ) -> Result<RunLogChunk, Error> {
        if let Some(executor) = self.xxl_executor(address) {
            let target = xxl_target(&executor, self.token(token));
            return self
                .xxl
                .read_log(target, log.0, log_date_ms, from_line)
                .await
                .map_err(|status| Error::executor(address, status));
        }
        let request = pb::ReadLogRequest {
            log_id: log.0,
            log_date_ms,
            from_line,
            fence_node: fence.map(|node| node.node_id.clone()).unwrap_or_default(),
            fence_epoch: fence.map_or(0, |node| node.epoch),
        };
        let response = if let Some(line) = self.session_line(address) {
            let line = line.map_err(|status| Error::executor(address, status))?;
            session::read_log(&line, request, self.request_timeout)
                .await
                .map_err(|status| Error::executor(address, status))?
        } else {
            self.client(address)?
                .read_log(authorized(request, self.token(token))?)
                .await
                .map_err(|status| Error::executor(address, status))?
                .into_inner()
        };
        Ok(RunLogChunk {
            from_line: response.from_line,
            to_line: response.to_line,
            content: response.content,
            is_end: response.is_end,
            fenced: response.fenced,
        })
    }

    fn client(
        &self,
        address: &str,
    ) -> Result<ExecutorServiceClient<tonic::transport::Channel>, tonic::Status> {
        let channel = self
            .channels
            .channel(address)
            .map_err(tonic::Status::invalid_argument)?;
        Ok(ExecutorServiceClient::new(channel))
    }

    fn probe_request<T>(
        &self,
        message: T,
        token: &str,
    ) -> Result<tonic::Request<T>, tonic::Status> {
        let mut request = authorized(message, token)?;
        request.set_timeout(self.probe_timeout);
        Ok(request)
    }
}

/// Forgets each executor the registry reports gone, until cancelled. A receiver that fell
/// behind forgets every channel (they reconnect lazily) rather than keep a stale one.
pub async fn follow_removals(
    client: std::sync::Arc<ExecutorClient>,
    mut removals: broadcast::Receiver<String>,
    cancel: CancellationToken,
) {
    loop {
        let removal = tokio::select! {
            _ = cancel.cancelled() => break,
            removal = removals.recv() => removal,
        };
        match removal {
            Ok(address) => client.forget(&address),
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::debug!(missed, "executor removals missed; forgetting every channel");
                client.channels.clear();
                client.batcher.clear();
            }
            Err(broadcast::error::RecvError::Closed) => break,
        }
    }
}

/// How an XXL-JOB executor is called: at the address it registered, with the group's token.
fn xxl_target<'a>(executor: &'a ExecutorInfo, token: &'a str) -> XxlTarget<'a> {
    XxlTarget {
        address: &executor.address,
        token,
        app_name: &executor.app_name,
    }
}
