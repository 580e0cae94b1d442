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

use super::Trigger;
use super::route::RouteError;
use crate::error::Error;
use crate::model::{
    AddressType, BlockStrategy, GlueType, Group, Job, JobStatus, RunLog, TriggerType, now_ms,
};
use crate::store::{DispatchOutcome, DispatchRecord};

/// XXL-JOB's trigger codes.
const TRIGGER_ACCEPTED: i32 = 200;
const TRIGGER_FAILED: i32 = 500;
const TRIGGER_UNKNOWN: i32 = 0;

/// A slice of a run's log file read through its executor.
#[derive(Debug, Clone, PartialEq)]
pub struct RunLogChunk {
    pub from_line: i32,
    pub to_line: i32,
    pub content: String,
    pub is_end: bool,
}

impl Trigger {
    /// Routes and sends one claimed run; never fails, the outcome is the record.
    pub(super) async fn dispatch_one(
        &self,
        run: &RunLog,
        job: Option<&Job>,
        group: Option<&Group>,
        address_override: &[String],
    ) -> DispatchRecord {
        let failed = |message: String, address: &str| DispatchRecord {
            log_id: run.id,
            outcome: DispatchOutcome::Failed,
            trigger_code: TRIGGER_FAILED,
            trigger_msg: message,
            executor_address: address.to_string(),
            finished_ms: now_ms(),
        };
        let Some(job) = job else {
            return failed(format!("job {} no longer exists", run.job_id), "");
        };
        if job.status == JobStatus::Stopped
            && matches!(run.trigger_type, TriggerType::Cron | TriggerType::Misfire)
        {
            // Planned before the job was stopped: a stopped job fires no more.
            return DispatchRecord {
                outcome: DispatchOutcome::Skipped,
                trigger_msg: format!("job {} was stopped after this fire was planned", job.id),
                ..failed(String::new(), "")
            };
        }
        let Some(group) = group else {
            return failed(
                format!("group {} of job {} not found", job.group_id, job.id),
                "",
            );
        };
        let addresses = self.candidate_addresses(group, address_override);
        let address = match self.routes.pick(job.route_strategy, job.id, &addresses) {
            Ok(address) => address.to_string(),
            Err(RouteError::NoAddress) => {
                return failed(
                    format!(
                        "no online executor for app '{}' (group {}); route {}",
                        group.app_name, group.id, job.route_strategy
                    ),
                    "",
                );
            }
            Err(error) => return failed(error.to_string(), ""),
        };
        let request = run_request(run, job);
        match self.send_run(&address, &group.access_token, request).await {
            Ok(response) if response.accepted => DispatchRecord {
                log_id: run.id,
                outcome: DispatchOutcome::Accepted,
                trigger_code: TRIGGER_ACCEPTED,
                trigger_msg: format!("route {}: accepted by {address}", job.route_strategy),
                executor_address: address,
                finished_ms: now_ms(),
            },
            Ok(response) => failed(
                format!("executor {address} refused the run: {}", response.message),
                &address,
            ),
            Err(status) if maybe_delivered(&status) => DispatchRecord {
                log_id: run.id,
                outcome: DispatchOutcome::Accepted,
                trigger_code: TRIGGER_UNKNOWN,
                trigger_msg: format!(
                    "dispatch to {address} ended with {}: {}; the run may have been delivered",
                    status.code(),
                    status.message()
                ),
                executor_address: address,
                finished_ms: now_ms(),
            },
            Err(status) => failed(
                format!(
                    "dispatch to {address} failed: {}: {}",
                    status.code(),
                    status.message()
                ),
                &address,
            ),
        }
    }

    fn candidate_addresses(&self, group: &Group, address_override: &[String]) -> Vec<String> {
        if !address_override.is_empty() {
            return address_override.to_vec();
        }
        match group.address_type {
            AddressType::Manual => group.addresses.clone(),
            AddressType::Auto => self.registry.online_addresses(&group.app_name),
        }
    }

    async fn send_run(
        &self,
        address: &str,
        token: &str,
        request: pb::RunRequest,
    ) -> Result<pb::RunResponse, tonic::Status> {
        let mut client = self.client(address)?;
        let response = client.run(authorized(request, token)?).await?;
        Ok(response.into_inner())
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
fn authorized<T>(message: T, token: &str) -> Result<tonic::Request<T>, tonic::Status> {
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
