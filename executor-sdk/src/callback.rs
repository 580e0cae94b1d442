//! Callbacks: run results travel from the runner through an mpsc to one task that batches them
//! (whatever arrives within 5 ms, or has arrived while the previous batch was on its way; up to
//! 1 000 results or 1 MiB), calls `Registry.Callback` on the admins in order, drops the log ids
//! the admin accepted and retries the rest with backoff. One batch is in flight at a time, so
//! the batch size sets the results per second: with batches of 100 an admin whose result write
//! took 50 ms took 2 000 results a second, while runs finished at 10 000.
//!
//! When no admin has taken a batch for `spool_after`, the unsent results are also written to
//! `{log_dir}/callbacklogs/` as a prost-encoded `CallbackRequest` (one `.pb` file per spill) and
//! kept in memory for retrying; a file is deleted once every result in it is accepted. Files
//! found at start are loaded and re-sent. On graceful shutdown the task flushes within a bound
//! and spools whatever is still unsent.
//!
//! Until an admin accepts its result, a finished run is still listed in heartbeats
//! ([`Unreported`]): the admin would otherwise take a run that ended while it could not persist
//! results (a database outage) for a lost one, and its retry would run the fire a second time.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prost::Message;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use xjob_proto::pb;

use crate::admins::{AdminClient, Admins};
use crate::backoff::Backoff;
use crate::id_hash::IdSet;
use crate::runner::execution::{cut_message, now_ms};
use crate::telemetry::RunTraces;

const MAX_BATCH: usize = 1000;
/// Encoded size a batch stays under (the admin takes requests up to 4 MiB by default; a result
/// carries a handle message of up to a few kB).
const MAX_BATCH_BYTES: usize = 1024 * 1024;
const BATCH_WINDOW: Duration = Duration::from_millis(5);
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
const SPOOL_EXTENSION: &str = "pb";

/// Settings of the callback task.
#[derive(Clone, Debug)]
pub(crate) struct CallbackConfig {
    /// `{log_dir}/callbacklogs`.
    pub(crate) spool_dir: PathBuf,
    /// How long batches may fail before their results are spooled to disk.
    pub(crate) spool_after: Duration,
    /// How long a graceful shutdown keeps trying before spooling the rest.
    pub(crate) flush_timeout: Duration,
    /// Ends the `callback` span of each result an admin accepts.
    pub(crate) traces: Arc<RunTraces>,
}

/// Log ids of finished runs whose result no admin has accepted yet; shared with the heartbeat.
#[derive(Clone, Debug, Default)]
pub(crate) struct Unreported {
    log_ids: Arc<Mutex<IdSet>>,
}

impl Unreported {
    /// The log ids, in no particular order.
    pub(crate) fn log_ids(&self) -> Vec<i64> {
        self.lock().iter().copied().collect()
    }

    fn insert(&self, log_id: i64) {
        self.lock().insert(log_id);
    }

    fn remove_all(&self, log_ids: &IdSet) {
        self.lock().retain(|log_id| !log_ids.contains(log_id));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, IdSet> {
        // Single inserts and removals: a poisoned set is still consistent.
        self.log_ids.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The runner's end of the results channel: a result counts as unreported (listed in
/// heartbeats) from the moment the runner hands it over, even while the callback task is busy
/// with an admin that does not answer.
#[derive(Clone, Debug)]
pub(crate) struct ResultsSender {
    results_tx: mpsc::UnboundedSender<pb::RunResult>,
    unreported: Unreported,
    traces: Arc<RunTraces>,
}

impl ResultsSender {
    pub(crate) fn new(
        results_tx: mpsc::UnboundedSender<pb::RunResult>,
        unreported: Unreported,
        traces: Arc<RunTraces>,
    ) -> Self {
        Self {
            results_tx,
            unreported,
            traces,
        }
    }

    /// The spans of this executor's runs.
    pub(crate) fn traces(&self) -> &RunTraces {
        &self.traces
    }

    /// Counts run `log_id` as unreported (listed in heartbeats) before its result is sent: the
    /// runner's log writer sends it once the run's log is written.
    pub(crate) fn expect(&self, log_id: i64) {
        self.unreported.insert(log_id);
    }

    /// Queues a result for the admins; false when the callback task is gone (the executor
    /// crashed or stopped: nothing is left to report to). Ends the run's spans and opens its
    /// `callback` span, whose context the result carries.
    pub(crate) fn send(&self, mut result: pb::RunResult) -> bool {
        crate::metrics::run_ended(result.status);
        self.traces.finished(&mut result);
        self.unreported.insert(result.log_id);
        self.results_tx.send(result).is_ok()
    }
}

struct SpoolFile {
    path: PathBuf,
    remaining_log_ids: IdSet,
}

/// Results not yet accepted by an admin, and the spool files holding some of them.
#[derive(Default)]
struct Backlog {
    pending: VecDeque<pb::RunResult>,
    spooled_log_ids: IdSet,
    spool_files: Vec<SpoolFile>,
    spool_sequence: u64,
    unreported: Unreported,
}

impl Backlog {
    /// Loads the spool files left by an earlier process.
    fn load(spool_dir: &Path, unreported: Unreported) -> Self {
        let mut backlog = Self {
            unreported,
            ..Self::default()
        };
        let Ok(entries) = std::fs::read_dir(spool_dir) else {
            return backlog;
        };
        for path in entries.flatten().map(|entry| entry.path()) {
            if path.extension().and_then(|ext| ext.to_str()) != Some(SPOOL_EXTENSION) {
                continue;
            }
            let decoded = std::fs::read(&path)
                .map_err(|error| error.to_string())
                .and_then(|bytes| {
                    pb::CallbackRequest::decode(bytes.as_slice()).map_err(|e| e.to_string())
                });
            match decoded {
                Ok(request) => {
                    let remaining_log_ids = request.results.iter().map(|r| r.log_id).collect();
                    for result in request.results {
                        backlog.spooled_log_ids.insert(result.log_id);
                        backlog.push(result);
                    }
                    tracing::info!(path = %path.display(), "re-sending spooled callbacks");
                    backlog.spool_files.push(SpoolFile {
                        path,
                        remaining_log_ids,
                    });
                }
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "unreadable callback spool file, left in place");
                }
            }
        }
        backlog
    }

    /// Queues a result to send; its run stays listed in heartbeats until it is accepted.
    fn push(&mut self, result: pb::RunResult) {
        self.unreported.insert(result.log_id);
        self.pending.push_back(result);
    }

    /// Removes accepted results; the unaccepted rest of the batch moves to the back, so a result
    /// an admin keeps refusing cannot block the ones behind it. Returns whether all were accepted.
    fn settle(&mut self, batch_len: usize, accepted_log_ids: &[i64]) -> bool {
        let accepted: IdSet = accepted_log_ids.iter().copied().collect();
        let batch: Vec<pb::RunResult> = self.pending.drain(..batch_len).collect();
        let mut all_accepted = true;
        for result in batch {
            if accepted.contains(&result.log_id) {
                continue;
            }
            all_accepted = false;
            self.pending.push_back(result);
        }
        for log_id in &accepted {
            self.spooled_log_ids.remove(log_id);
        }
        self.unreported.remove_all(&accepted);
        self.spool_files.retain_mut(|file| {
            file.remaining_log_ids.retain(|log_id| !accepted.contains(log_id));
            if !file.remaining_log_ids.is_empty() {
                return true;
            }
            if let Err(error) = std::fs::remove_file(&file.path) {
                tracing::warn!(path = %file.path.display(), %error, "failed to delete callback spool file");
            }
            false
        });
        all_accepted
    }

    /// Writes every pending result not yet on disk to a new spool file.
    fn spool_unspooled(&mut self, spool_dir: &Path) {
        let results: Vec<pb::RunResult> = self
            .pending
            .iter()
            .filter(|result| !self.spooled_log_ids.contains(&result.log_id))
            .cloned()
            .collect();
        if results.is_empty() {
            return;
        }
        self.spool_sequence += 1;
        let name = format!(
            "xjob-callback-{}-{}.{SPOOL_EXTENSION}",
            now_ms(),
            self.spool_sequence
        );
        let path = spool_dir.join(name);
        let log_ids: IdSet = results.iter().map(|result| result.log_id).collect();
        let bytes = pb::CallbackRequest { results }.encode_to_vec();
        // Write then rename, so a crash never leaves a half-written file to load.
        let temporary = path.with_extension("tmp");
        let written = std::fs::create_dir_all(spool_dir)
            .and_then(|()| std::fs::write(&temporary, &bytes))
            .and_then(|()| std::fs::rename(&temporary, &path));
        match written {
            Ok(()) => {
                tracing::warn!(path = %path.display(), count = log_ids.len(), "spooled callbacks no admin accepted");
                self.spooled_log_ids.extend(log_ids.iter().copied());
                self.spool_files.push(SpoolFile {
                    path,
                    remaining_log_ids: log_ids,
                });
            }
            Err(error) => {
                tracing::error!(path = %path.display(), %error, "failed to spool callbacks");
            }
        }
    }
}

/// What became of one batch.
#[derive(Debug, PartialEq)]
enum Sent {
    /// An admin answered; these log ids are durable there.
    Accepted(Vec<i64>),
    /// No admin took it, and one refused it as larger than it accepts (`max_request_bytes`).
    TooLarge,
    /// No admin answered, or none took it.
    NotTaken,
}

/// Sends one batch to the first admin that answers.
async fn send_batch(clients: &mut [(String, AdminClient)], batch: &[pb::RunResult]) -> Sent {
    let mut too_large = false;
    for (address, client) in clients.iter_mut() {
        let request = pb::CallbackRequest {
            results: batch.to_vec(),
        };
        match tokio::time::timeout(CALL_TIMEOUT, client.callback(request)).await {
            Ok(Ok(response)) => return Sent::Accepted(response.into_inner().accepted_log_ids),
            Ok(Err(status)) => {
                // gRPC servers answer OUT_OF_RANGE to a request over their decoding limit.
                too_large |= status.code() == tonic::Code::OutOfRange;
                tracing::debug!(admin = %address, code = ?status.code(), message = status.message(), "callback failed");
            }
            Err(_) => tracing::debug!(admin = %address, "callback timed out"),
        }
    }
    if too_large {
        Sent::TooLarge
    } else {
        Sent::NotTaken
    }
}

/// The encoded size batches stay under. An admin may take smaller requests than
/// [`MAX_BATCH_BYTES`] (its `max_request_bytes`): a batch it refuses as too large is sent again
/// as half, down to one result, and a single result still too large has its message halved, so
/// that no result is retried unchanged for ever.
#[derive(Debug)]
struct BatchBytes {
    max: usize,
}

impl Default for BatchBytes {
    fn default() -> Self {
        Self {
            max: MAX_BATCH_BYTES,
        }
    }
}

impl BatchBytes {
    /// After a refusal of the first `batch_len` results as too large; false when nothing is
    /// left to make smaller (an empty message refused: only a retry can help then).
    fn shrink(&mut self, pending: &mut VecDeque<pb::RunResult>, batch_len: usize) -> bool {
        if batch_len > 1 {
            let sent: usize = pending
                .iter()
                .take(batch_len)
                .map(Message::encoded_len)
                .sum();
            self.max = (sent / 2).max(1);
            tracing::warn!(
                max_bytes = self.max,
                "an admin refused a callback batch as too large; sending smaller batches"
            );
            return true;
        }
        let Some(result) = pending.front_mut() else {
            return false;
        };
        if result.message.is_empty() {
            return false;
        }
        // Below a few dozen characters the cut mark would be most of what is left.
        let keep = result.message.chars().count() / 2;
        result.message = if keep < 32 {
            String::new()
        } else {
            cut_message(&result.message, keep)
        };
        tracing::warn!(
            log_id = result.log_id,
            kept_chars = keep,
            "an admin refused a run result as too large; its message is cut"
        );
        true
    }
}

/// The callback task: runs until `flush` fires (graceful shutdown), then flushes and spools.
pub(crate) async fn callback_loop(
    admins: Admins,
    mut results_rx: mpsc::UnboundedReceiver<pb::RunResult>,
    config: CallbackConfig,
    flush: CancellationToken,
    unreported: Unreported,
) {
    let mut clients = admins.lazy_clients();
    let mut backlog = Backlog::load(&config.spool_dir, unreported);
    let mut backoff = Backoff::default();
    let mut batch_bytes = BatchBytes::default();
    let mut failing_since_opt: Option<Instant> = None;
    'deliver: loop {
        if backlog.pending.is_empty() {
            tokio::select! {
                received = results_rx.recv() => match received {
                    Some(result) => backlog.push(result),
                    None => break 'deliver,
                },
                () = flush.cancelled() => break 'deliver,
            }
            let window_end = Instant::now() + BATCH_WINDOW;
            while backlog.pending.len() < MAX_BATCH {
                match tokio::time::timeout_at(window_end, results_rx.recv()).await {
                    Ok(Some(result)) => backlog.push(result),
                    Ok(None) | Err(_) => break,
                }
            }
        }
        // Results that finished while the last batch was on its way go with this one.
        while backlog.pending.len() < MAX_BATCH {
            match results_rx.try_recv() {
                Ok(result) => backlog.push(result),
                Err(_) => break,
            }
        }
        let batch_len = batch_len(&backlog.pending, batch_bytes.max);
        let batch: Vec<pb::RunResult> = backlog.pending.iter().take(batch_len).cloned().collect();
        // A send in flight when shutdown starts is abandoned (the admin is idempotent per log
        // id), so the flush below keeps to its bound.
        let sent = tokio::select! {
            sent = send_batch(&mut clients, &batch) => sent,
            () = flush.cancelled() => break 'deliver,
        };
        let all_accepted = match sent {
            Sent::Accepted(accepted) => {
                config.traces.accepted_results(&accepted);
                backlog.settle(batch_len, &accepted)
            }
            Sent::TooLarge if batch_bytes.shrink(&mut backlog.pending, batch_len) => continue,
            Sent::TooLarge | Sent::NotTaken => false,
        };
        if all_accepted {
            backoff.reset();
            failing_since_opt = None;
            continue;
        }
        let failing_since = *failing_since_opt.get_or_insert_with(Instant::now);
        if failing_since.elapsed() >= config.spool_after {
            backlog.spool_unspooled(&config.spool_dir);
        }
        let retry_at = Instant::now() + backoff.next_delay();
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(retry_at) => break,
                () = flush.cancelled() => break 'deliver,
                received = results_rx.recv() => match received {
                    Some(result) => backlog.push(result),
                    None => break 'deliver,
                },
            }
        }
    }
    flush_backlog(
        &mut clients,
        &mut backlog,
        &mut results_rx,
        &config,
        &mut batch_bytes,
    )
    .await;
}

/// How many results from the front of `pending` make the next batch: up to [`MAX_BATCH`]
/// results and `max_bytes` encoded, at least one.
fn batch_len(pending: &VecDeque<pb::RunResult>, max_bytes: usize) -> usize {
    let mut bytes = 0;
    let mut len = 0;
    for result in pending.iter().take(MAX_BATCH) {
        bytes += result.encoded_len();
        if len > 0 && bytes > max_bytes {
            break;
        }
        len += 1;
    }
    len
}

/// Final delivery at shutdown: tries until `flush_timeout`, then spools the rest.
async fn flush_backlog(
    clients: &mut [(String, AdminClient)],
    backlog: &mut Backlog,
    results_rx: &mut mpsc::UnboundedReceiver<pb::RunResult>,
    config: &CallbackConfig,
    batch_bytes: &mut BatchBytes,
) {
    while let Ok(result) = results_rx.try_recv() {
        backlog.push(result);
    }
    let deadline = Instant::now() + config.flush_timeout;
    let mut backoff = Backoff::default();
    while !backlog.pending.is_empty() && Instant::now() < deadline {
        let batch_len = batch_len(&backlog.pending, batch_bytes.max);
        let batch: Vec<pb::RunResult> = backlog.pending.iter().take(batch_len).cloned().collect();
        let sent = tokio::time::timeout_at(deadline, send_batch(clients, &batch)).await;
        let all_accepted = match sent {
            Ok(Sent::Accepted(accepted)) => {
                config.traces.accepted_results(&accepted);
                backlog.settle(batch_len, &accepted)
            }
            Ok(Sent::TooLarge) if batch_bytes.shrink(&mut backlog.pending, batch_len) => continue,
            Ok(Sent::TooLarge | Sent::NotTaken) | Err(_) => false,
        };
        if !all_accepted {
            tokio::time::sleep_until((Instant::now() + backoff.next_delay()).min(deadline)).await;
        }
    }
    if !backlog.pending.is_empty() {
        backlog.spool_unspooled(&config.spool_dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(log_id: i64) -> pb::RunResult {
        pb::RunResult {
            log_id,
            status: pb::RunStatus::Success as i32,
            code: 200,
            message: format!("done {log_id}"),
            ..Default::default()
        }
    }

    #[test]
    fn a_batch_stops_at_its_count_or_its_size_and_holds_at_least_one_result() {
        let small: VecDeque<pb::RunResult> = (0..1500).map(result).collect();
        assert_eq!(batch_len(&small, MAX_BATCH_BYTES), MAX_BATCH);
        assert_eq!(
            batch_len(&small.iter().take(7).cloned().collect(), MAX_BATCH_BYTES),
            7
        );
        assert_eq!(batch_len(&VecDeque::new(), MAX_BATCH_BYTES), 0);
        let big = |log_id| pb::RunResult {
            message: "x".repeat(MAX_BATCH_BYTES / 3),
            ..result(log_id)
        };
        let large: VecDeque<pb::RunResult> = (0..5).map(big).collect();
        assert_eq!(
            batch_len(&large, MAX_BATCH_BYTES),
            2,
            "a third of the byte cap each, with their other fields"
        );
        let huge: VecDeque<pb::RunResult> = [pb::RunResult {
            message: "x".repeat(MAX_BATCH_BYTES * 2),
            ..result(1)
        }]
        .into();
        assert_eq!(
            batch_len(&huge, MAX_BATCH_BYTES),
            1,
            "one result alone goes whatever its size"
        );
    }

    #[test]
    fn spooled_results_reload_and_files_go_once_accepted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut backlog = Backlog::default();
        backlog.pending.extend([result(1), result(2)]);
        backlog.spool_unspooled(dir.path());
        backlog.spool_unspooled(dir.path());
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("dir").count(),
            1,
            "spooled once"
        );

        let unreported = Unreported::default();
        let mut reloaded = Backlog::load(dir.path(), unreported.clone());
        assert_eq!(reloaded.pending, VecDeque::from([result(1), result(2)]));
        assert!(!reloaded.settle(2, &[1]));
        assert_eq!(reloaded.pending, VecDeque::from([result(2)]));
        assert_eq!(unreported.log_ids(), vec![2], "listed until accepted");
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("dir").count(),
            1,
            "log 2 still unsent"
        );
        assert!(reloaded.settle(1, &[2]));
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
    }

    #[tokio::test]
    async fn results_no_admin_takes_are_spooled_after_the_delay_and_not_twice_at_flush() {
        let unused = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = format!("http://{}", unused.local_addr().expect("addr"));
        drop(unused);
        let admins = Admins::new(
            &[address],
            crate::auth::ClientAuth::new(None),
            xjob_tls::ClientTls::default(),
        )
        .expect("admins");
        let dir = tempfile::tempdir().expect("tempdir");
        let config = CallbackConfig {
            spool_dir: dir.path().join("callbacklogs"),
            spool_after: Duration::from_millis(200),
            flush_timeout: Duration::from_millis(100),
            traces: Arc::default(),
        };
        let (results_tx, results_rx) = mpsc::unbounded_channel();
        let flush = CancellationToken::new();
        let task = tokio::spawn(callback_loop(
            admins,
            results_rx,
            config.clone(),
            flush.clone(),
            Unreported::default(),
        ));
        results_tx.send(result(1)).expect("send");
        let spool_count =
            || std::fs::read_dir(&config.spool_dir).map_or(0, |entries| entries.count());
        let deadline = Instant::now() + Duration::from_secs(10);
        while spool_count() == 0 {
            assert!(Instant::now() < deadline, "no spool file within 10 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        flush.cancel();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("flush within its bound")
            .expect("callback task");
        assert_eq!(spool_count(), 1);
        let reloaded = Backlog::load(&config.spool_dir, Unreported::default());
        assert_eq!(reloaded.pending, VecDeque::from([result(1)]));
    }

    #[test]
    fn a_batch_refused_as_too_large_is_halved_and_a_lone_result_has_its_message_cut() {
        let mut limit = BatchBytes::default();
        let mut pending: VecDeque<pb::RunResult> = (0..100).map(result).collect();
        let sent = batch_len(&pending, limit.max);
        assert_eq!(sent, 100);
        let sent_bytes: usize = pending.iter().map(Message::encoded_len).sum();
        assert!(limit.shrink(&mut pending, sent));
        assert_eq!(limit.max, sent_bytes / 2);
        let next = batch_len(&pending, limit.max);
        assert!((45..=50).contains(&next), "about half: {next}");

        let mut lone: VecDeque<pb::RunResult> = [pb::RunResult {
            message: "é".repeat(1000),
            ..result(1)
        }]
        .into();
        assert!(limit.shrink(&mut lone, 1));
        assert_eq!(lone[0].message.chars().count(), 500 + 3, "half, marked");
        assert!(lone[0].message.ends_with("é..."));
        assert_eq!(lone[0].log_id, 1, "the rest of the result is kept");
        while !lone[0].message.is_empty() {
            assert!(
                limit.shrink(&mut lone, 1),
                "shrinks while there is a message"
            );
        }
        assert!(!limit.shrink(&mut lone, 1), "nothing left to cut");
    }

    #[test]
    fn finished_runs_stay_listed_until_their_result_is_accepted() {
        let unreported = Unreported::default();
        let mut backlog = Backlog {
            unreported: unreported.clone(),
            ..Backlog::default()
        };
        backlog.push(result(1));
        backlog.push(result(2));
        let mut listed = unreported.log_ids();
        listed.sort_unstable();
        assert_eq!(listed, vec![1, 2]);
        assert!(!backlog.settle(2, &[1]));
        assert_eq!(unreported.log_ids(), vec![2]);
        assert!(backlog.settle(1, &[2]));
        assert!(unreported.log_ids().is_empty());

        // Listed from the moment the runner hands the result over, before the callback task
        // (perhaps waiting on an admin that does not answer) takes it.
        let (results_tx, _results_rx) = mpsc::unbounded_channel();
        let sender = ResultsSender::new(results_tx, unreported.clone(), Arc::default());
        assert!(sender.send(result(3)));
        assert_eq!(unreported.log_ids(), vec![3]);
    }

    #[test]
    fn refused_results_move_behind_the_others() {
        let mut backlog = Backlog::default();
        backlog.pending.extend([result(1), result(2), result(3)]);
        assert!(!backlog.settle(2, &[2]));
        let order: Vec<i64> = backlog.pending.iter().map(|r| r.log_id).collect();
        assert_eq!(order, vec![3, 1]);
    }
}
