//! API writes, and the admin's own urgent writes, go first on a single writer connection
//! (SQLite).
//!
//! SQLite has one writer connection per admin, and its pool hands it out in arrival order.
//! Under load the schedule round, the ring's claims, the recorder, the follow-up and every
//! executor's callbacks all queue for it, so an API write (`StopJob`, `UpdateJob`) arriving
//! behind them would wait for all of them. The gate lets background writers into the pool's
//! queue one at a time, and not at all while a write that goes first is waiting: such a write
//! waits for at most the write in progress and one background write already queued.
//!
//! Two kinds go first:
//! - API writes ([`api_write`]): a user is waiting for them.
//! - The admin's urgent writes ([`urgent_write`]): the lease renewal, the claims of the ring
//!   and the registry refresh (health is judged by it). Once offered writes exceed what the
//!   writer can do, the background queue grows without bound; a lease renewal waiting in it
//!   lets the lease lapse, and a lapsed lease stops every send (`Trigger::send_allowed`), so an
//!   overloaded admin delivered nothing at all. Results and dispatch outcomes can wait; the
//!   firing itself must not.
//!
//! Everything else is background.

use std::future::Future;

use tokio::sync::{Semaphore, SemaphorePermit, watch};

tokio::task_local! {
    static GOES_FIRST: ();
}

/// Runs `work` as an API write: its writes on a gated store go ahead of background writes.
pub async fn api_write<F: Future>(work: F) -> F::Output {
    GOES_FIRST.scope((), work).await
}

/// Runs `work`, a whole API call, as going first: its writes like [`api_write`], and its reads
/// on the connections kept for calls that go first (SQLite; `sql::Pools::read`).
pub async fn api_call<F: Future>(work: F) -> F::Output {
    GOES_FIRST.scope((), work).await
}

/// Whether the running task goes first (inside [`api_call`], [`api_write`] or
/// [`urgent_write`]).
pub fn goes_first() -> bool {
    GOES_FIRST.try_with(|_| ()).is_ok()
}

/// Runs `work` as one of the admin's urgent writes (lease renewal, claims, registry refresh):
/// ahead of background writes, like an API write.
pub async fn urgent_write<F: Future>(work: F) -> F::Output {
    GOES_FIRST.scope((), work).await
}

/// The turnstile in front of one writer pool.
#[derive(Debug)]
pub struct WriterGate {
    /// Writes that go first waiting for the writer.
    first_waiting: watch::Sender<usize>,
    /// One background writer at a time enters the pool's queue.
    background: Semaphore,
}

impl Default for WriterGate {
    fn default() -> Self {
        WriterGate {
            first_waiting: watch::Sender::new(0),
            background: Semaphore::new(1),
        }
    }
}

/// Counts an API write as waiting until dropped (also when its future is cancelled).
struct Waiting<'a>(&'a watch::Sender<usize>);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0
            .send_modify(|waiting| *waiting = waiting.saturating_sub(1));
    }
}

impl WriterGate {
    /// Runs `acquire` (the pool's acquire or begin) through the gate.
    pub async fn enter<T, Fut: Future<Output = T>>(&self, acquire: impl FnOnce() -> Fut) -> T {
        if goes_first() {
            self.first_waiting.send_modify(|waiting| *waiting += 1);
            let _waiting = Waiting(&self.first_waiting);
            return acquire().await;
        }
        let _turn = self.background_turn().await;
        acquire().await
    }

    async fn background_turn(&self) -> Option<SemaphorePermit<'_>> {
        let mut waiting = self.first_waiting.subscribe();
        loop {
            // The sender lives in `self`, so this cannot fail.
            let _ = waiting.wait_for(|count| *count == 0).await;
            // Never closed; `None` would only let the write through ungated.
            let permit = self.background.acquire().await.ok()?;
            if *self.first_waiting.borrow() == 0 {
                return Some(permit);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::sync::{Mutex, mpsc};

    use super::*;

    #[tokio::test]
    async fn an_api_write_overtakes_queued_background_writes() {
        assert_goes_first(Kind::Api).await;
    }

    #[tokio::test]
    async fn a_lease_renewal_or_claim_overtakes_queued_background_writes() {
        assert_goes_first(Kind::Urgent).await;
    }

    enum Kind {
        Api,
        Urgent,
    }

    /// A one-connection "pool": a fair mutex, as sqlx's pool is.
    async fn assert_goes_first(kind: Kind) {
        let gate = Arc::new(WriterGate::default());
        let writer = Arc::new(Mutex::new(()));
        let (order_tx, mut order_rx) = mpsc::unbounded_channel();
        // The writer is busy; ten background writes queue behind it.
        let busy = writer.clone().lock_owned().await;
        let mut tasks = Vec::new();
        for index in 0..10 {
            let (gate, writer, order) = (gate.clone(), writer.clone(), order_tx.clone());
            tasks.push(tokio::spawn(async move {
                let _conn = gate.enter(|| writer.lock()).await;
                let _ = order.send(format!("background {index}"));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (api_gate, api_writer, api_order) = (gate.clone(), writer.clone(), order_tx.clone());
        let first = async move {
            let _conn = api_gate.enter(|| api_writer.lock()).await;
            let _ = api_order.send("api".to_string());
        };
        tasks.push(match kind {
            Kind::Api => tokio::spawn(api_write(first)),
            Kind::Urgent => tokio::spawn(urgent_write(first)),
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(busy);
        for task in tasks {
            task.await.expect("task");
        }
        drop(order_tx);
        let mut order = Vec::new();
        while let Some(entry) = order_rx.recv().await {
            order.push(entry);
        }
        let api_at = order.iter().position(|entry| entry == "api");
        assert!(
            matches!(api_at, Some(0 | 1)),
            "the write that goes first waited behind the queue: {order:?}"
        );
    }
}
