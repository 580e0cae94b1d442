//! The admin's client side of `ExecutorService`: Run, Kill and ReadLog calls, and the
//! classification of their failures.
//!
//! A failure before the request left (bad address, connection refused) is *not delivered*: the
//! run failed and may be retried. A deadline after sending is *maybe delivered*: the run stays
//! RUNNING with an explanatory message and is resolved by the callback or the lost-run monitor,
//! never re-sent blindly.

use tonic::metadata::MetadataValue;
use xjob_proto::pb;
use xjob_proto::pb::executor_service_client::ExecutorServiceClient;

use super::pool::PoolKind;
use super::route::{self, Probe, ProbeVerdict, RouteError};
use super::{FireTarget, Trigger, failed_record};
use crate::error::Error;
use crate::model::{BlockStrategy, GlueType, Job, RouteStrategy, RunLog, TriggerType, now_ms};
use crate::store::{DispatchOutcome, DispatchRecord};

/// XXL-JOB's trigger codes.
const TRIGGER_ACCEPTED: i32 = 200;
pub(super) const TRIGGER_FAILED: i32 = 500;
const TRIGGER_UNKNOWN: i32 = 0;

/// Where a run goes and what the route has to say about it.
struct Routed {
    address: String,
    /// Appended to the strategy name, e.g. ` (shard 1/3)`.
    note: String,
    /// FAILOVER/BUSYOVER probe transcript (`; probes: …`), appended to the message.
    transcript: String,
}

/// A slice of a run's log file read through its executor.
#[derive(Debug, Clone, PartialEq)]
pub struct RunLogChunk {
    pub from_line: i32,
    pub to_line: i32,
    pub content: String,
    pub is_end: bool,
}

impl Trigger {
    /// Routes and sends one claimed run that holds a pool slot; never fails, the outcome is the
    /// record.
    pub(super) async fn dispatch_one(
        &self,
        run: &RunLog,
        target: &FireTarget,
        pool: PoolKind,
    ) -> DispatchRecord {
        let (job, group) = (&target.job, &target.group);
        let routed = match self.choose_address(run, target).await {
            Ok(routed) => routed,
            Err(message) => return failed_record(run.id, message, ""),
        };
        let address = routed.address;
        let route = format!("route {}{}, {pool} pool", job.route_strategy, routed.note);
        let request = run_request(run, job);
        match self.send_run(&address, &group.access_token, request).await {
            Ok(response) if response.accepted => DispatchRecord {
                log_id: run.id,
                outcome: DispatchOutcome::Accepted,
                trigger_code: TRIGGER_ACCEPTED,
                trigger_msg: format!("{route}: accepted by {address}{}", routed.transcript),
                executor_address: address,
                finished_ms: now_ms(),
            },
            Ok(response) => failed_record(
                run.id,
                format!(
                    "{route}: executor {address} refused the run: {}{}",
                    response.message, routed.transcript
                ),
                &address,
            ),
            Err(status) if maybe_delivered(&status) => DispatchRecord {
                log_id: run.id,
                outcome: DispatchOutcome::Accepted,
                trigger_code: TRIGGER_UNKNOWN,
                trigger_msg: format!(
                    "{route}: dispatch to {address} ended with {}: {}; the run may have been \
                     delivered{}",
                    status.code(),
                    status.message(),
                    routed.transcript
                ),
                executor_address: address,
                finished_ms: now_ms(),
            },
            Err(status) => failed_record(
                run.id,
                format!(
                    "{route}: dispatch to {address} failed: {}: {}{}",
                    status.code(),
                    status.message(),
                    routed.transcript
                ),
                &address,
            ),
        }
    }

    /// Applies the job's route strategy to the fire's address list; the error is the trigger
    /// message of a run no executor can take.
    async fn choose_address(&self, run: &RunLog, target: &FireTarget) -> Result<Routed, String> {
        let (job, group, addresses) = (&target.job, &target.group, &target.addresses);
        if addresses.is_empty() {
            return Err(format!(
                "no online executor for app '{}' (group {}); route {}",
                group.app_name, group.id, job.route_strategy
            ));
        }
        match job.route_strategy {
            RouteStrategy::ShardingBroadcast => {
                let address = route::shard_address(addresses, run.shard_index)
                    .ok_or_else(|| RouteError::NoAddress.to_string())?;
                Ok(Routed {
                    address: address.to_string(),
                    note: format!(" (shard {}/{})", run.shard_index, run.shard_total),
                    transcript: String::new(),
                })
            }
            RouteStrategy::Failover | RouteStrategy::Busyover => {
                self.probe_in_order(job, &group.access_token, addresses)
                    .await
            }
            strategy => {
                let address = self
                    .routes
                    .pick(strategy, job.id, addresses, now_ms())
                    .map_err(|error| format!("route {strategy}: {error}"))?;
                Ok(Routed {
                    address: address.to_string(),
                    note: String::new(),
                    transcript: String::new(),
                })
            }
        }
    }

    /// FAILOVER (`Beat`) and BUSYOVER (`IdleBeat`): probes each address in order until one
    /// passes; the transcript of every probe goes into the trigger message either way.
    async fn probe_in_order(
        &self,
        job: &Job,
        token: &str,
        addresses: &[String],
    ) -> Result<Routed, String> {
        let mut probes = Vec::with_capacity(addresses.len());
        for address in addresses {
            let verdict = self.probe(job, token, address).await;
            let passed = verdict == ProbeVerdict::Pass;
            probes.push(Probe {
                address: address.clone(),
                verdict,
            });
            if passed {
                break;
            }
        }
        let transcript = route::probe_transcript(&probes);
        match route::choose_probed(&probes) {
            Some(address) => Ok(Routed {
                address: address.to_string(),
                note: String::new(),
                transcript: format!("; probes: {transcript}"),
            }),
            None if job.route_strategy == RouteStrategy::Busyover => Err(format!(
                "route BUSYOVER: no executor is idle for job {}; probes: {transcript}",
                job.id
            )),
            None => Err(format!(
                "route FAILOVER: no executor answered; probes: {transcript}"
            )),
        }
    }

    /// One probe with a short deadline: `Beat` for FAILOVER, `IdleBeat(job)` for BUSYOVER.
    async fn probe(&self, job: &Job, token: &str, address: &str) -> ProbeVerdict {
        let mut client = match self.client(address) {
            Ok(client) => client,
            Err(status) => return ProbeVerdict::Error(status.message().to_string()),
        };
        let described = |status: tonic::Status| {
            ProbeVerdict::Error(format!("{}: {}", status.code(), status.message()))
        };
        if job.route_strategy == RouteStrategy::Failover {
            let request = match self.probe_request(pb::BeatRequest {}, token) {
                Ok(request) => request,
                Err(status) => return described(status),
            };
            return match client.beat(request).await {
                Ok(_) => ProbeVerdict::Pass,
                Err(status) => described(status),
            };
        }
        let request = match self.probe_request(pb::IdleBeatRequest { job_id: job.id }, token) {
            Ok(request) => request,
            Err(status) => return described(status),
        };
        match client.idle_beat(request).await {
            Ok(response) if response.get_ref().idle => ProbeVerdict::Pass,
            Ok(response) => ProbeVerdict::Busy(response.into_inner().reason),
            Err(status) => described(status),
        }
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

    /// Sends the run through the executor's batching queue (see `batcher`).
    async fn send_run(
        &self,
        address: &str,
        token: &str,
        request: pb::RunRequest,
    ) -> Result<pb::RunResponse, tonic::Status> {
        let channel = self
            .clients
            .channel(address)
            .map_err(tonic::Status::invalid_argument)?;
        self.batcher.run(address, channel, token, request).await
    }

    fn client(
        &self,
        address: &str,
    ) -> Result<ExecutorServiceClient<tonic::transport::Channel>, tonic::Status> {
        let channel = self
            .clients
            .channel(address)
            .map_err(tonic::Status::invalid_argument)?;
        Ok(ExecutorServiceClient::new(channel))
    }

    /// Asks the run's executor to stop the job's runs; returns (killed, message).
    pub async fn kill_run(&self, run: &RunLog, job: &Job) -> Result<(bool, String), Error> {
        if run.executor_address.is_empty() {
            return Err(Error::FailedPrecondition(format!(
                "log {} has no executor",
                run.id
            )));
        }
        let token = self.group_token(job.group_id).await?;
        let mut client = self.client(&run.executor_address)?;
        let request = pb::KillRequest {
            job_id: run.job_id,
            log_id: run.id,
        };
        let response = client
            .kill(authorized(request, &token)?)
            .await
            .map_err(|status| executor_unavailable(&run.executor_address, status))?
            .into_inner();
        Ok((response.killed, response.message))
    }

    /// Reads the run's log file through its executor.
    pub async fn read_run_log(&self, run: &RunLog, from_line: i32) -> Result<RunLogChunk, Error> {
        if run.executor_address.is_empty() {
            return Ok(RunLogChunk {
                from_line,
                to_line: from_line - 1,
                content: format!(
                    "run {} never reached an executor: {}",
                    run.id, run.trigger_msg
                ),
                is_end: true,
            });
        }
        let token = self.group_token(run.group_id).await?;
        let mut client = self.client(&run.executor_address)?;
        let request = pb::ReadLogRequest {
            log_id: run.id,
            log_date_ms: run.trigger_time_ms,
            from_line,
        };
        let response = client
            .read_log(authorized(request, &token)?)
            .await
            .map_err(|status| executor_unavailable(&run.executor_address, status))?
            .into_inner();
        Ok(RunLogChunk {
            from_line: response.from_line,
            to_line: response.to_line,
            content: response.content,
            is_end: response.is_end,
        })
    }

    async fn group_token(&self, group_id: i64) -> Result<String, Error> {
        Ok(self
            .store
            .get_group(group_id)
            .await?
            .map(|group| group.access_token)
            .unwrap_or_default())
    }
}

impl From<tonic::Status> for Error {
    fn from(status: tonic::Status) -> Error {
        Error::Unavailable(status.message().to_string())
    }
}

fn executor_unavailable(address: &str, status: tonic::Status) -> Error {
    Error::Unavailable(format!(
        "executor {address}: {}: {}",
        status.code(),
        status.message()
    ))
}

/// Deadline or cancellation after the request may have reached the executor.
fn maybe_delivered(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        tonic::Code::DeadlineExceeded | tonic::Code::Cancelled
    )
}

/// Wraps a message with the group's bearer token when one is configured.
pub(super) fn authorized<T>(message: T, token: &str) -> Result<tonic::Request<T>, tonic::Status> {
    let mut request = tonic::Request::new(message);
    if !token.is_empty() {
        let value = MetadataValue::try_from(format!("Bearer {token}"))
            .map_err(|_| tonic::Status::invalid_argument("access token is not valid metadata"))?;
        request.metadata_mut().insert("authorization", value);
    }
    Ok(request)
}

/// The `RunRequest` for a claimed run of `job`.
fn run_request(run: &RunLog, job: &Job) -> pb::RunRequest {
    pb::RunRequest {
        job_id: job.id,
        log_id: run.id,
        handler: if run.handler.is_empty() {
            job.handler.clone()
        } else {
            run.handler.clone()
        },
        params: run.params.clone(),
        block_strategy: block_strategy_to_pb(job.block_strategy) as i32,
        timeout_ms: job.timeout_ms,
        log_date_ms: run.trigger_time_ms,
        glue_type: glue_type_to_pb(job.glue_type) as i32,
        glue_source: job.glue_source.clone(),
        glue_updated_ms: job.glue_updated_ms,
        shard_index: run.shard_index,
        shard_total: run.shard_total,
        scheduled_at_ms: run.scheduled_at_ms,
        attempt: run.attempt,
        trigger_type: trigger_type_to_pb(run.trigger_type) as i32,
    }
}

fn block_strategy_to_pb(strategy: BlockStrategy) -> pb::BlockStrategy {
    match strategy {
        BlockStrategy::SerialExecution => pb::BlockStrategy::SerialExecution,
        BlockStrategy::DiscardLater => pb::BlockStrategy::DiscardLater,
        BlockStrategy::CoverEarly => pb::BlockStrategy::CoverEarly,
    }
}

fn glue_type_to_pb(glue: GlueType) -> pb::GlueType {
    match glue {
        GlueType::Bean => pb::GlueType::Bean,
        GlueType::Shell => pb::GlueType::Shell,
        GlueType::Python => pb::GlueType::Python,
        GlueType::NodeJs => pb::GlueType::Nodejs,
        GlueType::Php => pb::GlueType::Php,
        GlueType::PowerShell => pb::GlueType::Powershell,
    }
}

fn trigger_type_to_pb(trigger_type: TriggerType) -> pb::TriggerType {
    match trigger_type {
        TriggerType::Cron => pb::TriggerType::Cron,
        TriggerType::Manual => pb::TriggerType::Manual,
        TriggerType::Retry => pb::TriggerType::Retry,
        TriggerType::Parent => pb::TriggerType::Parent,
        TriggerType::Api => pb::TriggerType::Api,
        TriggerType::Misfire => pb::TriggerType::Misfire,
    }
}
