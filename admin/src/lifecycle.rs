//! Every task the admin runs belongs to one named stage, and the stages stop in the order of
//! one table ([`SHUTDOWN`]). A stage is a token (its tasks stop waiting and retrying when it is
//! cancelled) and a tracker (shutdown waits, bounded, for its tasks to end):
//!
//! ```text
//! Loops     servers, executor sessions, scan, ring, monitors   cancelled, then awaited
//! Console   the web console's connections and session pruning  cancelled, then awaited
//! Dispatch  claims and sends already under way                 drained, then cancelled
//! Batcher   the per-executor RunBatch queues                   cancelled, then awaited
//! Recorder  writes the dispatch outcomes                       cancelled (it flushes), awaited
//! ```
//!
//! The order is the point: nothing new is fired once the loops stop; the dispatches under way
//! finish before the queues they send through close; the recorder writes what they recorded
//! last, and the database pool closes after it (`app.rs`).

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The stages, in the order they stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Loops,
    Console,
    Dispatch,
    Batcher,
    Recorder,
}

/// How a stage is told to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Its token is cancelled at once; its tasks end their round and return.
    Cancel,
    /// Its tasks get the whole bound to finish what they hold; only the ones still running
    /// then are cancelled (they give up retrying), and get [`AFTER_DRAIN`] more.
    Drain,
}

/// Stop order: each stage, how it is stopped, and how long shutdown waits for it.
const SHUTDOWN: [(Stage, Ending, Duration); 5] = [
    (Stage::Loops, Ending::Cancel, Duration::from_secs(10)),
    (Stage::Console, Ending::Cancel, Duration::from_secs(5)),
    (Stage::Dispatch, Ending::Drain, Duration::from_secs(5)),
    (Stage::Batcher, Ending::Cancel, Duration::from_secs(2)),
    (Stage::Recorder, Ending::Cancel, Duration::from_secs(10)),
];

/// How long a drained stage's cancelled tasks get to return.
const AFTER_DRAIN: Duration = Duration::from_secs(1);

/// One stage's handle: where its tasks are spawned, and the token that tells them to stop.
/// A default `Tasks` belongs to no lifecycle (tests, tools): it is never cancelled.
#[derive(Clone, Default)]
pub struct Tasks {
    tracker: TaskTracker,
    cancel: CancellationToken,
}

impl Tasks {
    /// Runs `task` as one of this stage's tasks; shutdown waits for it.
    pub fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tracker.spawn(task)
    }

    /// Cancelled when this stage is told to stop: loops and retries select on it.
    pub fn stopping(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Whether this stage has been told to stop.
    pub fn is_stopping(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Tells the stage to stop and waits up to `bound` for its tasks; false if some still run.
    async fn stop(&self, ending: Ending, bound: Duration) -> bool {
        self.tracker.close();
        match ending {
            Ending::Cancel => {
                self.cancel.cancel();
                tokio::time::timeout(bound, self.tracker.wait())
                    .await
                    .is_ok()
            }
            Ending::Drain => {
                if tokio::time::timeout(bound, self.tracker.wait())
                    .await
                    .is_ok()
                {
                    return true;
                }
                self.cancel.cancel();
                tokio::time::timeout(AFTER_DRAIN, self.tracker.wait())
                    .await
                    .is_ok()
            }
        }
    }

    fn running(&self) -> usize {
        self.tracker.len()
    }
}

/// The admin's stages; [`Lifecycle::shutdown`] stops them in [`SHUTDOWN`] order.
#[derive(Default)]
pub struct Lifecycle {
    loops: Tasks,
    console: Tasks,
    dispatch: Tasks,
    batcher: Tasks,
    recorder: Tasks,
}

impl Lifecycle {
    pub fn new() -> Lifecycle {
        Lifecycle::default()
    }

    /// The handle of one stage, to spawn its tasks and hand its token to them.
    pub fn stage(&self, stage: Stage) -> &Tasks {
        match stage {
            Stage::Loops => &self.loops,
            Stage::Console => &self.console,
            Stage::Dispatch => &self.dispatch,
            Stage::Batcher => &self.batcher,
            Stage::Recorder => &self.recorder,
        }
    }

    /// Stops every stage in order, each within its bound; a stage that overruns is logged and
    /// the next one stops all the same (shutdown is bounded).
    pub async fn shutdown(&self) {
        for (stage, ending, bound) in SHUTDOWN {
            let tasks = self.stage(stage);
            if !tasks.stop(ending, bound).await {
                tracing::warn!(?stage, still_running = tasks.running(), bound = ?bound,
                    "tasks did not stop within their bound");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn the_table_names_every_stage_once() {
        let stages = [
            Stage::Loops,
            Stage::Console,
            Stage::Dispatch,
            Stage::Batcher,
            Stage::Recorder,
        ];
        for stage in stages {
            let count = SHUTDOWN.iter().filter(|(s, _, _)| *s == stage).count();
            assert_eq!(count, 1, "{stage:?} is in SHUTDOWN {count} times");
        }
    }

    /// Each stage's task records when it ends; the stages must end in table order, a drained
    /// stage's task finishing its work un-cancelled.
    #[tokio::test]
    async fn stages_stop_in_table_order_and_a_drained_stage_finishes_its_work() {
        let lifecycle = Lifecycle::new();
        let ended = Arc::new(Mutex::new(Vec::new()));
        for (stage, _, _) in SHUTDOWN {
            let tasks = lifecycle.stage(stage).clone();
            let ended = Arc::clone(&ended);
            lifecycle.stage(stage).spawn(async move {
                let cancelled = match stage {
                    // Work in hand: ends by itself, told nothing.
                    Stage::Dispatch => {
                        tokio::task::yield_now().await;
                        tasks.is_stopping()
                    }
                    _ => {
                        tasks.stopping().cancelled().await;
                        true
                    }
                };
                ended.lock().expect("lock").push((stage, cancelled));
            });
        }
        tokio::time::timeout(Duration::from_secs(5), lifecycle.shutdown())
            .await
            .expect("shutdown is bounded");
        let ended = ended.lock().expect("lock").clone();
        // The dispatch task may end before shutdown starts; the others end in order.
        let order: Vec<Stage> = ended
            .iter()
            .filter(|(stage, _)| *stage != Stage::Dispatch)
            .map(|(stage, _)| *stage)
            .collect();
        assert_eq!(
            order,
            [
                Stage::Loops,
                Stage::Console,
                Stage::Batcher,
                Stage::Recorder
            ]
        );
        assert!(ended.contains(&(Stage::Dispatch, false)), "{ended:?}");
    }

    /// A dispatch still retrying when its bound runs out is cancelled, and then ends.
    #[tokio::test]
    async fn a_drained_stage_still_running_at_its_bound_is_cancelled() {
        let tasks = Tasks::default();
        let retrying = tasks.clone();
        tasks.spawn(async move { retrying.stopping().cancelled().await });
        let stopped = tasks.stop(Ending::Drain, Duration::from_millis(50)).await;
        assert!(stopped, "the retrying task ended once cancelled");
        assert!(tasks.is_stopping());
    }
}
