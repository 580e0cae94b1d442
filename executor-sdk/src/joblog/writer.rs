//! The run-log writer: one background thread that creates and appends run log files for the
//! lines a run leaves behind when it ends (its end line, and the start line of a run whose
//! handler logged nothing), so creating the file never delays the runs that start next.
//!
//! A log handed to the writer is registered in `unwritten` until its lines are in its file:
//! meanwhile `JobLogStore::read` serves the file followed by the lines still in memory, with
//! the same numbering as once they are written. The runner reports a run's result without
//! waiting for the writer, so a process killed outright (kill -9, a crash) can lose the start
//! and end lines of the runs it finished in its last moments; a graceful shutdown writes them
//! all ([`LogWriter::flush`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use super::RunLog;

/// Logs whose lines wait in memory, by file path.
type Unwritten = Arc<Mutex<HashMap<PathBuf, Arc<RunLog>>>>;

#[derive(Debug, Default)]
pub(super) struct LogWriter {
    unwritten: Unwritten,
    /// Started by the first log handed over; `None` if the thread could not be started (the
    /// lines are then written by the caller).
    sender: OnceLock<Option<Sender<Arc<RunLog>>>>,
}

impl LogWriter {
    /// Registers `log`, whose pending lines are readable from now on.
    pub(super) fn register(&self, log: &Arc<RunLog>) {
        lock(&self.unwritten).insert(log.path().to_path_buf(), Arc::clone(log));
    }

    /// Queues a registered `log` for writing; its lines reach the file in the order appended.
    pub(super) fn submit(&self, log: Arc<RunLog>) {
        let sender = self.sender.get_or_init(|| self.start());
        let unsent = match sender {
            Some(sender) => sender.send(log).err().map(|error| error.0),
            None => Some(log),
        };
        if let Some(log) = unsent {
            write_and_forget(&self.unwritten, &log);
        }
    }

    /// The registered log of `path`, if its lines are not all written yet.
    pub(super) fn unwritten(&self, path: &Path) -> Option<Arc<RunLog>> {
        lock(&self.unwritten).get(path).cloned()
    }

    /// Writes every registered log now, on the caller's thread (at shutdown).
    pub(super) fn flush(&self) {
        let logs: Vec<Arc<RunLog>> = lock(&self.unwritten).values().cloned().collect();
        for log in logs {
            write_and_forget(&self.unwritten, &log);
        }
    }

    fn start(&self) -> Option<Sender<Arc<RunLog>>> {
        let (sender, receiver) = mpsc::channel::<Arc<RunLog>>();
        let unwritten = Arc::clone(&self.unwritten);
        // Ends when the store (and so the sender) is dropped, after writing what it holds.
        let spawned = std::thread::Builder::new()
            .name("xjob-log-writer".to_owned())
            .spawn(move || {
                for log in receiver {
                    write_and_forget(&unwritten, &log);
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
fn write_and_forget(unwritten: &Unwritten, log: &Arc<RunLog>) {
    log.write_pending();
    let mut unwritten = lock(unwritten);
    let registered = unwritten
        .get(log.path())
        .is_some_and(|registered| Arc::ptr_eq(registered, log));
    if registered && log.is_written() {
        unwritten.remove(log.path());
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
