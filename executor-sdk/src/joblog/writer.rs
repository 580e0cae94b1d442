//! The run-log writer: one background thread that creates and appends run log files for the
//! lines a run leaves behind when it ends (its end line, and the start line of a run whose
//! handler logged nothing), so creating the file never delays the runs that start next.
//!
//! Each log comes with what to do once its lines are in its file: the runner hands over the
//! run's result that way, so no admin hears of a finished run before its log is on disk (the
//! admin's check of stranded runs takes an executor with no log of a run for one that never saw
//! it). A process killed outright (kill -9, a crash) loses the lines still queued here together
//! with their results: such a run looks as if the kill had come while it ran.
//!
//! A log handed to the writer is registered in `unwritten` until its lines are in its file:
//! `JobLogStore::read` writes such a log at once, on the reader's thread
//! ([`LogWriter::write_now`]), so a read that says a run is over was answered from the file.
//!
//! The thread gives way to runs about to start ([`PendingStarts`]): woken by a log, it waits
//! (boundedly) until the runs queued to start now have started, then writes all that is
//! queued by then.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use super::pending_starts::{HoldBack, MAX_HOLD_BACK, PendingStarts};
use crate::id_hash::IdMap;

/// A run's log as the writer sees it: lines that may wait in memory for its file. The run
/// log (`joblog::RunLog`) is one; the writer names no type of the file above it.
pub(super) trait PendingLines: Send + Sync + 'static {
    /// The run's log id, which names its log among the unwritten ones.
    fn log_id(&self) -> i64;
    fn path(&self) -> &Path;
    /// Writes the waiting lines, creating the file if need be.
    fn write_pending(&self);
    /// Whether no line waits any more.
    fn is_written(&self) -> bool;
}

/// Logs whose lines wait in memory, by log id: keyed by path, registering a run hashed its
/// path's components on the start path of every run.
type Unwritten<L> = Arc<Mutex<IdMap<Arc<L>>>>;

/// What to do once a log's lines are written (or failed to be): report the run's result.
pub(super) type Then = Box<dyn FnOnce() + Send>;

enum Job<L> {
    Write {
        log: Arc<L>,
        then: Then,
    },
    /// Answered once every job queued before it is done.
    Barrier(tokio::sync::oneshot::Sender<()>),
}

#[derive(Debug)]
pub(super) struct LogWriter<L> {
    unwritten: Unwritten<L>,
    /// Started by the first log handed over; `None` if the thread could not be started (the
    /// lines are then written by the caller).
    sender: OnceLock<Option<Sender<Job<L>>>>,
    /// Set by a simulated crash: what is queued is dropped, neither written nor reported.
    abandoned: Arc<AtomicBool>,
    /// Runs queued to start now: the thread waits for them before each log.
    pub(super) starts: Arc<PendingStarts>,
    /// Longest the thread waits for them at a time.
    pub(super) hold_back_bound: Duration,
    #[cfg(test)]
    pub(super) gate: Arc<gate::Gate>,
}

impl<L: PendingLines> std::fmt::Debug for Job<L> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Write { log, .. } => write!(formatter, "Write({})", log.path().display()),
            Self::Barrier(_) => formatter.write_str("Barrier"),
        }
    }
}

impl<L> Default for LogWriter<L> {
    fn default() -> Self {
        Self {
            unwritten: Arc::default(),
            sender: OnceLock::new(),
            abandoned: Arc::default(),
            starts: Arc::default(),
            hold_back_bound: MAX_HOLD_BACK,
            #[cfg(test)]
            gate: Arc::default(),
        }
    }
}

impl<L: PendingLines> LogWriter<L> {
    /// A writer without a thread: every log is written on the caller's thread (tests whose
    /// clock is paused cannot wait for another thread).
    #[cfg(test)]
    pub(super) fn inline() -> Self {
        let writer = Self::default();
        let _ = writer.sender.set(None);
        writer
    }

    /// Registers `log`, whose pending lines are readable from now on.
    pub(super) fn register(&self, log: &Arc<L>) {
        lock(&self.unwritten).insert(log.log_id(), Arc::clone(log));
    }

    /// Queues a registered `log` for writing, then `then`; its lines reach the file in the
    /// order appended, and `then` runs after they did.
    pub(super) fn submit(&self, log: Arc<L>, then: Then) {
        if self.abandoned.load(Ordering::SeqCst) {
            return;
        }
        #[cfg(test)]
        self.gate.submitted();
        let sender = self.sender.get_or_init(|| self.start());
        let unsent = match sender {
            Some(sender) => sender
                .send(Job::Write { log, then })
                .err()
                .map(|error| error.0),
            None => Some(Job::Write { log, then }),
        };
        if let Some(Job::Write { log, then }) = unsent {
            write_and_forget(&self.unwritten, &log);
            then();
        }
    }

    /// The registered log of run `log_id` at `path`, if its lines are not all written yet.
    pub(super) fn unwritten(&self, log_id: i64, path: &Path) -> Option<Arc<L>> {
        let unwritten = lock(&self.unwritten);
        unwritten
            .get(&log_id)
            .filter(|log| log.path() == path)
            .cloned()
    }

    /// Writes `log` now, on the caller's thread (a reader that must answer from the file).
    pub(super) fn write_now(&self, log: &Arc<L>) {
        write_and_forget(&self.unwritten, log);
    }

    /// Waits until everything handed over before is written and reported (at shutdown).
    pub(super) async fn drain(&self) {
        let Some(Some(sender)) = self.sender.get() else {
            return;
        };
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        if sender.send(Job::Barrier(done_tx)).is_ok() {
            let _ = done_rx.await;
        }
    }

    /// Drops what is queued without writing or reporting it, as a killed process would.
    pub(super) fn abandon(&self) {
        self.abandoned.store(true, Ordering::SeqCst);
    }

    fn start(&self) -> Option<Sender<Job<L>>> {
        let (sender, receiver) = mpsc::channel::<Job<L>>();
        let unwritten = Arc::clone(&self.unwritten);
        let abandoned = Arc::clone(&self.abandoned);
        let starts = Arc::clone(&self.starts);
        let hold_back_bound = self.hold_back_bound;
        #[cfg(test)]
        let gate = Arc::clone(&self.gate);
        // Ends when the store (and so the sender) is dropped, after writing what it holds.
        let spawned = std::thread::Builder::new()
            .name("xjob-log-writer".to_owned())
            .spawn(move || {
                let mut hold_back = HoldBack::default();
                // Waits for the starts once per batch, then writes everything queued by then:
                // a wait before every log would let runs that keep arriving hold the writer
                // back log by log, and it would fall ever further behind.
                while let Ok(first) = receiver.recv() {
                    let mut waited = false;
                    let mut next = Some(first);
                    while let Some(job) = next {
                        #[cfg(test)]
                        gate.pass();
                        match job {
                            Job::Write { log, then } => {
                                if !waited {
                                    starts.wait_for_starts(hold_back_bound, &mut hold_back);
                                    waited = true;
                                }
                                if !abandoned.load(Ordering::SeqCst) {
                                    write_and_forget(&unwritten, &log);
                                    then();
                                }
                            }
                            Job::Barrier(done_tx) => {
                                let _ = done_tx.send(());
                            }
                        }
                        next = receiver.try_recv().ok();
                    }
                }
            });
        match spawned {
            Ok(_) => Some(sender),
            Err(error) => {
                tracing::warn!(%error, "failed to start the run log writer, writing inline");
                None
            }
        }
    }
}

/// Writes the pending lines of `log`, then unregisters it unless a line came in meanwhile:
/// from then on readers find them all in the file.
fn write_and_forget<L: PendingLines>(unwritten: &Unwritten<L>, log: &Arc<L>) {
    log.write_pending();
    let mut unwritten = lock(unwritten);
    let registered = unwritten
        .get(&log.log_id())
        .is_some_and(|registered| Arc::ptr_eq(registered, log));
    if registered && log.is_written() {
        unwritten.remove(&log.log_id());
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A test hook: holds the writer thread before each job it takes, and counts the logs handed
/// over, so a test can see what is reported while lines wait.
#[cfg(test)]
pub(crate) mod gate {
    use std::sync::{Condvar, Mutex};

    use super::lock;

    #[derive(Debug, Default)]
    struct State {
        paused: bool,
        /// Jobs the paused writer may still take.
        permits: usize,
    }

    #[derive(Debug)]
    pub(crate) struct Gate {
        state: Mutex<State>,
        changed: Condvar,
        submitted: tokio::sync::watch::Sender<usize>,
    }

    impl Default for Gate {
        fn default() -> Self {
            Self {
                state: Mutex::default(),
                changed: Condvar::new(),
                submitted: tokio::sync::watch::Sender::new(0),
            }
        }
    }

    impl Gate {
        /// Holds the writer before its next job.
        pub(crate) fn pause(&self) {
            lock(&self.state).paused = true;
        }

        /// Lets the paused writer take `count` more jobs.
        pub(crate) fn permit(&self, count: usize) {
            lock(&self.state).permits += count;
            self.changed.notify_all();
        }

        pub(crate) fn resume(&self) {
            lock(&self.state).paused = false;
            self.changed.notify_all();
        }

        /// How many logs were handed to the writer so far.
        pub(crate) fn submissions(&self) -> tokio::sync::watch::Receiver<usize> {
            self.submitted.subscribe()
        }

        pub(super) fn submitted(&self) {
            self.submitted.send_modify(|count| *count += 1);
        }

        /// Called by the writer thread before each job.
        pub(super) fn pass(&self) {
            let mut state = lock(&self.state);
            while state.paused && state.permits == 0 {
                state = self
                    .changed
                    .wait(state)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            if state.paused {
                state.permits -= 1;
            }
        }
    }
}
