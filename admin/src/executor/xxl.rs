//! The admin's client of an XXL-JOB executor's embedded HTTP server (`xxl-job-core`): every
//! call is `POST {address}/{method}` with a JSON body and the `XXL-JOB-ACCESS-TOKEN` header, and
//! the answer is `{code, msg, content}` (`data` from 3.3 on), code 200 meaning success.
//!
//! ```text
//! run   ─▶ /run (2.x to 3.2; /trigger on the lines that renamed it, tried when /run is unknown)
//! kill  ─▶ /kill {jobId}           (XXL-JOB kills by job: the running run and its queue)
//! log   ─▶ /log {logId, logDateTime, fromLineNum}
//! beat  ─▶ /beat   idleBeat ─▶ /idleBeat {jobId}
//! ```
//! Answers are turned into the same `tonic::Status` classes as gRPC calls, so the trigger
//! tells *not delivered* (no connection) from *maybe delivered* (deadline or broken connection
//! after the request was written) the same way for both kinds of executors.
//!
//! One HTTP/1.1 connection per call, as `xxl-job-core`'s own admin does: calls are rare (one per
//! run, probe, kill or log read) and the executor's server closes idle connections anyway.

use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;
use xjob_proto::pb;

use super::log_chunk::RunLogChunk;

/// Largest answer read (a log slice is the big one).
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// The header `xxl-job-core` checks its access token in.
pub const TOKEN_HEADER: &str = "XXL-JOB-ACCESS-TOKEN";
/// The header the 3.5 line also requires: the executor's app name.
pub const APPNAME_HEADER: &str = "XXL-JOB-APPNAME";

/// XXL-JOB's trigger parameters (the executor's `TriggerParam`).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TriggerParam {
    pub job_id: i64,
    pub executor_handler: String,
    pub executor_params: String,
    pub executor_block_strategy: String,
    /// Seconds; 0 = none.
    pub executor_timeout: i64,
    pub log_id: i64,
    pub log_date_time: i64,
    pub glue_type: String,
    pub glue_source: String,
    pub glue_updatetime: i64,
    pub broadcast_index: i32,
    pub broadcast_total: i32,
}

impl TriggerParam {
    /// The XXL-JOB form of the one `RunRequest` the trigger builds.
    pub fn of(request: &pb::RunRequest) -> TriggerParam {
        let block = pb::BlockStrategy::try_from(request.block_strategy)
            .unwrap_or(pb::BlockStrategy::SerialExecution);
        let glue = pb::GlueType::try_from(request.glue_type).unwrap_or(pb::GlueType::Unspecified);
        TriggerParam {
            job_id: request.job_id,
            executor_handler: request.handler.clone(),
            executor_params: request.params.clone(),
            executor_block_strategy: block_strategy_name(block).to_string(),
            // XXL-JOB counts whole seconds; a partial second is rounded up, never to "none".
            executor_timeout: (request.timeout_ms.max(0) + 999) / 1000,
            log_id: request.log_id,
            log_date_time: request.log_date_ms,
            glue_type: glue_type_name(glue).to_string(),
            glue_source: request.glue_source.clone(),
            glue_updatetime: request.glue_updated_ms,
            broadcast_index: request.shard_index,
            broadcast_total: request.shard_total.max(1),
        }
    }
}

fn block_strategy_name(strategy: pb::BlockStrategy) -> &'static str {
    match strategy {
        pb::BlockStrategy::DiscardLater => "DISCARD_LATER",
        pb::BlockStrategy::CoverEarly => "COVER_EARLY",
        pb::BlockStrategy::SerialExecution | pb::BlockStrategy::Unspecified => "SERIAL_EXECUTION",
    }
}

fn glue_type_name(glue: pb::GlueType) -> &'static str {
    match glue {
        pb::GlueType::Bean | pb::GlueType::Unspecified => "BEAN",
        pb::GlueType::Shell => "GLUE_SHELL",
        pb::GlueType::Python => "GLUE_PYTHON",
        pb::GlueType::Nodejs => "GLUE_NODEJS",
        pb::GlueType::Php => "GLUE_PHP",
        pb::GlueType::Powershell => "GLUE_POWERSHELL",
        pb::GlueType::Groovy => "GLUE_GROOVY",
    }
}

/// An executor's answer: `ReturnT` (`content`) before 3.3, `Response` (`data`) after.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Answer {
    #[serde(default)]
    pub code: i32,
    #[serde(default)]
    pub msg: Option<String>,
    #[serde(default)]
    pub content: Option<serde_json::Value>,
    #[serde(default)]
    pub data: Option<serde_json::Value>,
}

impl Answer {
    fn ok(&self) -> bool {
        self.code == 200
    }

    fn message(&self) -> String {
        self.msg.clone().unwrap_or_default()
    }

    fn payload(&self) -> Option<&serde_json::Value> {
        self.content
            .as_ref()
            .filter(|value| !value.is_null())
            .or(self.data.as_ref())
    }
}

/// The executor's `LogResult` (`isEnd` on the wire; `end` from some serializers).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LogResult {
    #[serde(default)]
    from_line_num: i32,
    #[serde(default)]
    to_line_num: i32,
    #[serde(default)]
    log_content: Option<String>,
    #[serde(default)]
    is_end: Option<bool>,
    #[serde(default)]
    end: Option<bool>,
}

/// Who is called and with what credentials.
#[derive(Debug, Clone, Copy)]
pub struct XxlTarget<'a> {
    pub address: &'a str,
    pub token: &'a str,
    pub app_name: &'a str,
}

/// Calls to XXL-JOB executors over HTTP/1.1.
#[derive(Debug, Clone)]
pub struct XxlClient {
    request_timeout: Duration,
    probe_timeout: Duration,
}

impl XxlClient {
    pub fn new(request_timeout: Duration, probe_timeout: Duration) -> XxlClient {
        XxlClient {
            request_timeout,
            probe_timeout,
        }
    }

    /// Sends a run; the executor queues it and answers at once (the result comes by callback).
    pub async fn run(
        &self,
        target: XxlTarget<'_>,
        request: &pb::RunRequest,
    ) -> Result<pb::RunResponse, tonic::Status> {
        let body = serde_json::to_vec(&TriggerParam::of(request))
            .map_err(|error| tonic::Status::internal(format!("trigger param: {error}")))?;
        let mut answer = self
            .post(target, "run", body.clone(), self.request_timeout)
            .await?;
        // A line that renamed `run` to `trigger` answers that it has no mapping for /run: the
        // run was not taken, so asking again under the new name sends it at most once.
        if !answer.ok() && answer.message().contains("uri-mapping") {
            answer = self
                .post(target, "trigger", body, self.request_timeout)
                .await?;
        }
        Ok(pb::RunResponse {
            accepted: answer.ok(),
            message: answer.message(),
            ..Default::default()
        })
    }

    /// FAILOVER's probe.
    pub async fn beat(&self, target: XxlTarget<'_>) -> Result<(), tonic::Status> {
        let answer = self
            .post(target, "beat", b"{}".to_vec(), self.probe_timeout)
            .await?;
        if answer.ok() {
            Ok(())
        } else {
            Err(tonic::Status::unavailable(answer.message()))
        }
    }

    /// BUSYOVER's probe: `Ok(None)` idle, `Ok(Some(reason))` busy with the job.
    pub async fn idle_beat(
        &self,
        target: XxlTarget<'_>,
        job_id: i64,
    ) -> Result<Option<String>, tonic::Status> {
        let body = serde_json::json!({ "jobId": job_id })
            .to_string()
            .into_bytes();
        let answer = self
            .post(target, "idleBeat", body, self.probe_timeout)
            .await?;
        Ok((!answer.ok()).then(|| answer.message()))
    }

    /// Kills the job's thread on the executor (its running run and queue); (killed, message).
    pub async fn kill(
        &self,
        target: XxlTarget<'_>,
        job_id: i64,
    ) -> Result<(bool, String), tonic::Status> {
        let body = serde_json::json!({ "jobId": job_id })
            .to_string()
            .into_bytes();
        let answer = self
            .post(target, "kill", body, self.request_timeout)
            .await?;
        let message = answer.message();
        // "already killed": there was nothing running for the job.
        let killed = answer.ok() && !message.contains("already killed");
        Ok((killed, message))
    }

    /// Reads a run's log from `from_line` (1-based).
    pub async fn read_log(
        &self,
        target: XxlTarget<'_>,
        log_id: i64,
        log_date_ms: i64,
        from_line: i32,
    ) -> Result<RunLogChunk, tonic::Status> {
        let body = serde_json::json!({
            "logId": log_id,
            "logDateTim": log_date_ms,
            "logDateTime": log_date_ms,
            "fromLineNum": from_line,
        })
        .to_string()
        .into_bytes();
        let answer = self.post(target, "log", body, self.request_timeout).await?;
        if !answer.ok() {
            return Err(tonic::Status::failed_precondition(format!(
                "executor could not read the log: {}",
                answer.message()
            )));
        }
        let result: LogResult = answer
            .payload()
            .cloned()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|error| tonic::Status::internal(format!("log answer: {error}")))?
            .unwrap_or_default();
        Ok(RunLogChunk {
            from_line: result.from_line_num,
            to_line: result.to_line_num,
            content: result.log_content.unwrap_or_default(),
            is_end: result.is_end.or(result.end).unwrap_or(false),
            fenced: false,
        })
    }

    /// One POST. A connection that cannot be made is UNAVAILABLE (nothing was sent); a deadline
    /// after connecting is DEADLINE_EXCEEDED and a broken connection CANCELLED (either may have
    /// delivered the request).
    async fn post(
        &self,
        target: XxlTarget<'_>,
        method: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Answer, tonic::Status> {
        let base = target.address.trim_end_matches('/');
        let uri: hyper::Uri = format!("{base}/{method}").parse().map_err(|_| {
            tonic::Status::invalid_argument(format!(
                "invalid XXL-JOB executor address '{}'",
                short(target.address)
            ))
        })?;
        if uri.scheme_str() != Some("http") {
            return Err(tonic::Status::invalid_argument(
                "XXL-JOB executors are reached over http:// only",
            ));
        }
        let authority = uri
            .authority()
            .ok_or_else(|| tonic::Status::invalid_argument("executor address has no host"))?
            .clone();
        let port = authority.port_u16().unwrap_or(80);
        let connect = TcpStream::connect((authority.host(), port));
        let stream = match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => {
                return Err(tonic::Status::unavailable(format!(
                    "cannot connect to {authority}: {error}"
                )));
            }
            Err(_) => {
                return Err(tonic::Status::unavailable(format!(
                    "no connection to {authority} within {timeout:?}"
                )));
            }
        };
        let _ = stream.set_nodelay(true);
        let mut request = hyper::Request::post(uri.path())
            .header(hyper::header::HOST, authority.as_str())
            .header(
                hyper::header::CONTENT_TYPE,
                "application/json;charset=UTF-8",
            );
        if !target.token.is_empty() {
            request = request.header(TOKEN_HEADER, target.token);
        }
        if !target.app_name.is_empty() {
            request = request.header(APPNAME_HEADER, target.app_name);
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|error| tonic::Status::invalid_argument(format!("request: {error}")))?;
        let exchange = async {
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
            let call = async {
                let response = sender.send_request(request).await;
                let result: Result<Result<Bytes, String>, hyper::Error> = match response {
                    Ok(response) => Ok(Limited::new(response.into_body(), MAX_ANSWER_BYTES)
                        .collect()
                        .await
                        .map(|collected| collected.to_bytes())
                        .map_err(|error| error.to_string())),
                    Err(error) => Err(error),
                };
                result
            };
            // The connection is driven here, beside the call, not by a task of its own: it
            // ends with the call (or with the timeout that drops both).
            tokio::pin!(call);
            tokio::select! {
                result = &mut call => result,
                // A connection that ends first fails the call, which then returns.
                _ = connection => call.await,
            }
        };
        let bytes = match tokio::time::timeout(timeout, exchange).await {
            Err(_) => {
                return Err(tonic::Status::deadline_exceeded(format!(
                    "{authority} did not answer /{method} within {timeout:?}"
                )));
            }
            Ok(Err(error)) => {
                return Err(tonic::Status::cancelled(format!(
                    "connection to {authority} broke during /{method}: {error}"
                )));
            }
            Ok(Ok(Err(error))) => {
                return Err(tonic::Status::cancelled(format!(
                    "reading the answer of {authority} to /{method}: {error}"
                )));
            }
            Ok(Ok(Ok(bytes))) => bytes,
        };
        serde_json::from_slice(&bytes).map_err(|_| {
            tonic::Status::unknown(format!(
                "{authority} answered /{method} with something that is not XXL-JOB JSON: {}",
                short(&String::from_utf8_lossy(&bytes))
            ))
        })
    }
}

/// A short prefix of a value from outside, for messages.
fn short(text: &str) -> String {
    text.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigger_params_carry_xxl_job_names_and_whole_seconds() {
        let request = pb::RunRequest {
            job_id: 7,
            log_id: 42,
            handler: "demo".into(),
            params: "a b".into(),
            block_strategy: pb::BlockStrategy::CoverEarly as i32,
            timeout_ms: 1_500,
            log_date_ms: 1_000,
            glue_type: pb::GlueType::Shell as i32,
            glue_source: "echo".into(),
            glue_updated_ms: 5,
            shard_index: 1,
            shard_total: 3,
            ..Default::default()
        };
        let json = serde_json::to_value(TriggerParam::of(&request)).unwrap();
        assert_eq!(json["jobId"], 7);
        assert_eq!(json["executorHandler"], "demo");
        assert_eq!(json["executorParams"], "a b");
        assert_eq!(json["executorBlockStrategy"], "COVER_EARLY");
        assert_eq!(json["executorTimeout"], 2);
        assert_eq!(json["logId"], 42);
        assert_eq!(json["logDateTime"], 1_000);
        assert_eq!(json["glueType"], "GLUE_SHELL");
        assert_eq!(json["glueUpdatetime"], 5);
        assert_eq!(json["broadcastIndex"], 1);
        assert_eq!(json["broadcastTotal"], 3);
    }

    #[test]
    fn answers_of_both_envelopes_are_read() {
        let old: Answer =
            serde_json::from_str(r#"{"code":200,"msg":null,"content":{"toLineNum":3}}"#).unwrap();
        assert!(old.ok());
        assert_eq!(old.payload().unwrap()["toLineNum"], 3);
        let new: Answer =
            serde_json::from_str(r#"{"code":500,"msg":"busy","data":{"toLineNum":4}}"#).unwrap();
        assert!(!new.ok());
        assert_eq!(new.message(), "busy");
        assert_eq!(new.payload().unwrap()["toLineNum"], 4);
    }
}
