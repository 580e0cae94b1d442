//! Coalesces `Run` calls: runs dispatched at the same moment to the same executor go out as one
//! `RunBatch` call, so a burst of N fires costs a handful of RPCs instead of N.
//!
//! ```text
//! ExecutorClient::run ─▶ RunBatcher::run(address, token, request) ─▶ queue of (address, token)
//!   queue task: takes the first waiting run, waits for one of MAX_IN_FLIGHT call slots, then
//!   takes every run queued meanwhile (≤ MAX_BATCH) ─▶ one run: Run, several: RunBatch
//!   ─▶ each caller gets the answer for its own run
//! ```
//! Under light load a run finds a free slot at once and goes out alone, as a plain `Run`: no
//! added latency. Under load, runs gather while the slots are busy. An executor that answers
//! `RunBatch` with UNIMPLEMENTED (one written from `proto/` without it) is remembered and gets
//! one `Run` per run from then on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{Semaphore, mpsc, oneshot};
use tonic::transport::Channel;
use xjob_proto::pb;
use xjob_proto::pb::executor_service_client::ExecutorServiceClient;

use super::bearer::authorized;
use crate::lifecycle::Tasks;

/// Most runs in one `RunBatch` call.
const MAX_BATCH: usize = 512;
/// Calls in flight at once per executor queue; runs queue up behind them and form the batches.
const MAX_IN_FLIGHT: usize = 4;

type RunAnswer = Result<pb::RunResponse, tonic::Status>;

/// A run waiting in an executor's queue, and where its answer goes.
struct QueuedRun {
    request: pb::RunRequest,
    reply: oneshot::Sender<RunAnswer>,
}

/// Identifies one queue: runs share a call only when they go to the same executor with the same
/// access token.
#[derive(Clone, PartialEq, Eq, Hash)]
struct QueueKey {
    address: String,
    token: String,
}

/// The per-executor queues and what is known about each executor's `RunBatch` support.
#[derive(Default)]
pub struct RunBatcher {
    queues: Mutex<HashMap<QueueKey, mpsc::UnboundedSender<QueuedRun>>>,
    support: Arc<BatchSupport>,
    /// The batcher stage: the queue tasks and their calls run there. Once it is told to stop,
    /// each queue sends what it holds and ends, and later runs go out one by one.
    tasks: Tasks,
}

impl RunBatcher {
    /// Runs the queues as tasks of `tasks` (the admin's batcher stage).
    pub fn with_tasks(tasks: Tasks) -> RunBatcher {
        RunBatcher {
            tasks,
            ..RunBatcher::default()
        }
    }

    /// Whether a run to `address` goes through the `RunBatch` queue (false once the executor
    /// answered UNIMPLEMENTED); the dispatch span records it.
    pub fn batches(&self, address: &str) -> bool {
        self.support.batches(address)
    }

    /// Sends one run to the executor at `address` (over `channel`) and returns its answer.
    pub async fn run(
        &self,
        address: &str,
        channel: Channel,
        token: &str,
        request: pb::RunRequest,
    ) -> RunAnswer {
        if !self.support.batches(address) || self.tasks.is_stopping() {
            return send_one(ExecutorServiceClient::new(channel), token, request).await;
        }
        let (reply, answer) = oneshot::channel();
        let queued = QueuedRun { request, reply };
        let key = QueueKey {
            address: address.to_string(),
            token: token.to_string(),
        };
        if let Err(mpsc::error::SendError(queued)) = self.queue(&key, channel.clone()).send(queued)
        {
            // The queue task is gone (it only ends when its queue is dropped): send on our own.
            return send_one(ExecutorServiceClient::new(channel), token, queued.request).await;
        }
        answer.await.unwrap_or_else(|_| {
            // The queue task was dropped with the call in flight (runtime shutdown).
            Err(tonic::Status::cancelled(
                "dispatch stopped while the run was being sent",
            ))
        })
    }

    /// Drops the queues of an executor that left; runs already queued are still sent.
    pub fn evict(&self, address: &str) {
        self.lock_queues().retain(|key, _| key.address != address);
        self.support.forget(address);
    }

    /// Drops every queue (runs already queued are still sent) and what is known of support.
    pub fn clear(&self) {
        self.lock_queues().clear();
        self.support.lock().clear();
    }

    fn queue(&self, key: &QueueKey, channel: Channel) -> mpsc::UnboundedSender<QueuedRun> {
        let mut queues = self.lock_queues();
        if let Some(sender) = queues.get(key).filter(|sender| !sender.is_closed()) {
            return sender.clone();
        }
        let (sender, receiver) = mpsc::unbounded_channel();
        let queue = ExecutorQueue {
            client: ExecutorServiceClient::new(channel),
            key: key.clone(),
            support: Arc::clone(&self.support),
        };
        self.tasks.spawn(queue.serve(receiver, self.tasks.clone()));
        queues.insert(key.clone(), sender.clone());
        sender
    }

    fn lock_queues(&self) -> MutexGuard<'_, HashMap<QueueKey, mpsc::UnboundedSender<QueuedRun>>> {
        // Map operations only; a poisoned lock holds consistent data.
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What is known about each executor's `RunBatch`; an address not listed has not been asked.
#[derive(Default)]
struct BatchSupport {
    known: Mutex<HashMap<String, bool>>,
}

impl BatchSupport {
    /// False only for an executor that answered UNIMPLEMENTED.
    fn batches(&self, address: &str) -> bool {
        self.lock().get(address).copied().unwrap_or(true)
    }

    /// Whether the executor has answered a `RunBatch` already.
    fn confirmed(&self, address: &str) -> bool {
        self.lock().get(address).copied().unwrap_or(false)
    }

    fn record(&self, address: &str, supported: bool) {
        self.lock().insert(address.to_string(), supported);
    }

    fn forget(&self, address: &str) {
        self.lock().remove(address);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, bool>> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The task behind one queue: forms batches and sends them, at most MAX_IN_FLIGHT at a time.
struct ExecutorQueue {
    client: ExecutorServiceClient<Channel>,
    key: QueueKey,
    support: Arc<BatchSupport>,
}

impl ExecutorQueue {
    /// Ends when its queue is dropped, or once its stage is told to stop and the runs queued
    /// by then are sent.
    async fn serve(self, mut receiver: mpsc::UnboundedReceiver<QueuedRun>, tasks: Tasks) {
        let this = Arc::new(self);
        let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
        let mut taking = true;
        loop {
            let first = tokio::select! {
                first = receiver.recv() => first,
                _ = tasks.stopping().cancelled(), if taking => {
                    // No new runs; those already queued are still received and sent.
                    receiver.close();
                    taking = false;
                    continue;
                }
            };
            let Some(first) = first else { break };
            // The semaphore is never closed; `Err` cannot happen, and would only mean no limit.
            let slot = Arc::clone(&slots).acquire_owned().await.ok();
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match receiver.try_recv() {
                    Ok(queued) => batch.push(queued),
                    Err(_) => break,
                }
            }
            let this = Arc::clone(&this);
            tasks.spawn(async move {
                this.send(batch).await;
                drop(slot);
            });
        }
    }

    async fn send(&self, batch: Vec<QueuedRun>) {
        let address = &self.key.address;
        if batch.len() == 1 || !self.support.batches(address) {
            self.send_each(batch).await;
            return;
        }
        let (requests, replies): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .map(|queued| (queued.request, queued.reply))
            .unzip();
        // Until the executor has answered one RunBatch, keep the runs to resend them one by one
        // should it not know the call.
        let kept = (!self.support.confirmed(address)).then(|| requests.clone());
        let answer = match authorized(pb::RunBatchRequest { runs: requests }, &self.key.token) {
            Ok(request) => self.client.clone().run_batch(request).await,
            Err(status) => Err(status),
        };
        match (answer, kept) {
            (Ok(response), _) => {
                self.support.record(address, true);
                answer_each(replies, response.into_inner().results);
            }
            (Err(status), Some(requests)) if status.code() == tonic::Code::Unimplemented => {
                tracing::info!(%address,
                    "executor does not implement RunBatch; sending one Run per run");
                self.support.record(address, false);
                let batch = requests
                    .into_iter()
                    .zip(replies)
                    .map(|(request, reply)| QueuedRun { request, reply })
                    .collect();
                self.send_each(batch).await;
            }
            (Err(status), _) => {
                for reply in replies {
                    let _ = reply.send(Err(status.clone()));
                }
            }
        }
    }

    async fn send_each(&self, batch: Vec<QueuedRun>) {
        let mut sends = tokio::task::JoinSet::new();
        for queued in batch {
            let client = self.client.clone();
            let token = self.key.token.clone();
            sends.spawn(async move {
                let answer = send_one(client, &token, queued.request).await;
                let _ = queued.reply.send(answer);
            });
        }
        while sends.join_next().await.is_some() {}
    }
}

/// Hands every caller its result; runs the executor did not answer for may have been enqueued.
fn answer_each(replies: Vec<oneshot::Sender<RunAnswer>>, results: Vec<pb::RunResponse>) {
    let sent = replies.len();
    let answered = results.len();
    let mut results = results.into_iter();
    for reply in replies {
        let answer = results.next().ok_or_else(|| {
            tonic::Status::cancelled(format!(
                "executor answered {answered} of {sent} runs in the batch"
            ))
        });
        let _ = reply.send(answer);
    }
}

async fn send_one(
    mut client: ExecutorServiceClient<Channel>,
    token: &str,
    request: pb::RunRequest,
) -> RunAnswer {
    let response = client.run(authorized(request, token)?).await?;
    Ok(response.into_inner())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::net::TcpListener;
    use tokio_stream::wrappers::TcpListenerStream;
    use tokio_util::sync::CancellationToken;
    use xjob_proto::pb::executor_service_server::{ExecutorService, ExecutorServiceServer};

    use super::*;

    /// An executor on loopback that counts its calls and answers each run with its log id, so
    /// every caller can check it got the answer for its own run.
    #[derive(Clone, Default)]
    struct CountingExecutor {
        runs: Arc<AtomicUsize>,
        batches: Arc<AtomicUsize>,
        batched_runs: Arc<AtomicUsize>,
        knows_run_batch: bool,
    }

    fn answer(run: &pb::RunRequest) -> pb::RunResponse {
        pb::RunResponse {
            accepted: run.log_id % 2 == 0,
            message: run.log_id.to_string(),
            fenced: false,
        }
    }

    #[tonic::async_trait]
    impl ExecutorService for CountingExecutor {
        async fn beat(
            &self,
            _: tonic::Request<pb::BeatRequest>,
        ) -> Result<tonic::Response<pb::BeatResponse>, tonic::Status> {
            Ok(tonic::Response::new(pb::BeatResponse {}))
        }

        async fn idle_beat(
            &self,
            _: tonic::Request<pb::IdleBeatRequest>,
        ) -> Result<tonic::Response<pb::IdleBeatResponse>, tonic::Status> {
            Err(tonic::Status::unimplemented("not used"))
        }

        async fn run(
            &self,
            request: tonic::Request<pb::RunRequest>,
        ) -> Result<tonic::Response<pb::RunResponse>, tonic::Status> {
            self.runs.fetch_add(1, Ordering::SeqCst);
            // Slow enough that concurrent callers pile up behind the in-flight slots.
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            Ok(tonic::Response::new(answer(request.get_ref())))
        }

        async fn run_batch(
            &self,
            request: tonic::Request<pb::RunBatchRequest>,
        ) -> Result<tonic::Response<pb::RunBatchResponse>, tonic::Status> {
            if !self.knows_run_batch {
                return Err(tonic::Status::unimplemented("RunBatch"));
            }
            self.batches.fetch_add(1, Ordering::SeqCst);
            let runs = request.into_inner().runs;
            self.batched_runs.fetch_add(runs.len(), Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            let results = runs.iter().map(answer).collect();
            Ok(tonic::Response::new(pb::RunBatchResponse { results }))
        }

        async fn kill(
            &self,
            _: tonic::Request<pb::KillRequest>,
        ) -> Result<tonic::Response<pb::KillResponse>, tonic::Status> {
            Err(tonic::Status::unimplemented("not used"))
        }

        async fn read_log(
            &self,
            _: tonic::Request<pb::ReadLogRequest>,
        ) -> Result<tonic::Response<pb::ReadLogResponse>, tonic::Status> {
            Err(tonic::Status::unimplemented("not used"))
        }
    }

    async fn serve(executor: CountingExecutor, stop: CancellationToken) -> String {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let address = format!("http://{}", listener.local_addr().expect("local address"));
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(ExecutorServiceServer::new(executor))
                .serve_with_incoming_shutdown(
                    TcpListenerStream::new(listener),
                    stop.cancelled_owned(),
                ),
        );
        address
    }

    /// Sends `count` runs at once through one batcher; checks every caller got its own answer.
    async fn send_concurrently(address: &str, count: i64) {
        let batcher = Arc::new(RunBatcher::default());
        let channel = Channel::from_shared(address.to_string())
            .expect("valid address")
            .connect_lazy();
        let mut calls = tokio::task::JoinSet::new();
        for log_id in 0..count {
            let (batcher, channel, address) =
                (Arc::clone(&batcher), channel.clone(), address.to_string());
            calls.spawn(async move {
                let request = pb::RunRequest {
                    log_id,
                    ..Default::default()
                };
                (log_id, batcher.run(&address, channel, "", request).await)
            });
        }
        while let Some(joined) = calls.join_next().await {
            let (log_id, answer) = joined.expect("call task");
            let response = answer.expect("run answered");
            assert_eq!(
                response.message,
                log_id.to_string(),
                "answer of another run"
            );
            assert_eq!(response.accepted, log_id % 2 == 0);
        }
    }

    #[tokio::test]
    async fn concurrent_runs_to_one_executor_share_run_batch_calls() {
        let stop = CancellationToken::new();
        let executor = CountingExecutor {
            knows_run_batch: true,
            ..Default::default()
        };
        let address = serve(executor.clone(), stop.clone()).await;
        send_concurrently(&address, 200).await;
        let (runs, batches) = (
            executor.runs.load(Ordering::SeqCst),
            executor.batches.load(Ordering::SeqCst),
        );
        assert_eq!(runs + executor.batched_runs.load(Ordering::SeqCst), 200);
        assert!(
            runs + batches <= 50,
            "200 concurrent runs took {runs} Run and {batches} RunBatch calls"
        );
        stop.cancel();
    }

    #[tokio::test]
    async fn an_executor_without_run_batch_gets_one_run_call_per_run() {
        let stop = CancellationToken::new();
        let executor = CountingExecutor::default();
        let address = serve(executor.clone(), stop.clone()).await;
        send_concurrently(&address, 100).await;
        assert_eq!(executor.runs.load(Ordering::SeqCst), 100);
        assert_eq!(executor.batched_runs.load(Ordering::SeqCst), 0);
        stop.cancel();
    }
}
