//! A run claimed before this node's lease lapsed may have been taken over during the lapse by
//! another admin (as a stranded run), and sent by it. Once the lease holds again the run must
//! not go out unchecked: it is sent only if its row is still this node's and unsent.
//!
//! The lease is moved by hand here (these tests are inside the trigger): a lapse is the lease's
//! end put behind the lease clock, its end a renewal; nothing sleeps.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{LeaseMark, Trigger, TriggerParts};
use crate::config::Config;
use crate::executor::ExecutorClient;
use crate::lifecycle::Tasks;
use crate::model::{LogId, NewRun, NodeIdentity, RunStatus, system_clock};
use crate::registry::Registry;
use crate::store::Store;
use crate::store::conformance::{fire, group, job};

struct Setup {
    trigger: Arc<Trigger>,
    store: Store,
    run: LogId,
    _dir: tempfile::TempDir,
}

/// A trigger of node "owner" whose lease holds, and a RUNNING unsent run of that node.
async fn setup() -> Setup {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("lease.db").display());
    let store = Store::connect(&url).await.expect("store");
    let group = store.insert_group(&group("app")).await.expect("group");
    let job = store.insert_job(&job(group.id, 0)).await.expect("job");
    // In the database the owner's lease ended at 1 s: another admin may take its runs over.
    let epoch = store.register_node("owner", 0, 1_000).await.expect("node");
    let owner = NodeIdentity::new("owner", epoch);
    let run = NewRun {
        status: RunStatus::Running,
        ..fire(&job, 2_000, &owner.node_id, owner.epoch)
    };
    let run = store.insert_runs(&[run]).await.expect("run")[0];
    let mut config = Config::for_tests(dir.path().to_path_buf());
    config.node_lease = Duration::from_secs(60);
    let (recorder_tx, _outcomes) = tokio::sync::mpsc::unbounded_channel();
    let trigger = Arc::new(Trigger::new(
        TriggerParts {
            store: store.clone(),
            registry: Arc::new(Registry::default()),
            executors: Arc::new(ExecutorClient::new(
                Duration::from_secs(2),
                config.executor_client_tls(),
            )),
            node: owner,
            clock: system_clock(),
            lease_start: Instant::now(),
            recorder_tx,
            held: Default::default(),
            tasks: Tasks::default(),
        },
        &config,
    ));
    Setup {
        trigger,
        store,
        run,
        _dir: dir,
    }
}

impl Setup {
    /// The lease lapses (as when the database was away longer than a lease)…
    fn lapse(&self) {
        let now = self.trigger.lease_clock_ms();
        self.trigger.lease_until_ms.store(now - 1, Ordering::SeqCst);
    }

    /// …and a renewal lands after it.
    fn renew(&self) {
        self.trigger.lease_renewed(Instant::now());
    }

    /// Another admin takes the run over as stranded while the lease is lapsed.
    async fn take_over(&self) {
        let adopter_epoch = self
            .store
            .register_node("adopter", 0, 100_000)
            .await
            .expect("node");
        let adopter = NodeIdentity::new("adopter", adopter_epoch);
        let adopted = self
            .store
            .adopt_stranded(&[self.run], &adopter, 5_000, 5_000)
            .await
            .expect("adopt");
        assert_eq!(adopted.len(), 1, "the other admin took the run over");
    }

    async fn send_allowed(&self, since: LeaseMark) -> Option<LeaseMark> {
        let asked = self.trigger.send_allowed(self.run, since);
        tokio::time::timeout(Duration::from_secs(30), asked)
            .await
            .expect("answered while the lease holds")
    }
}

#[tokio::test]
async fn a_run_taken_over_during_a_lapse_is_not_sent_once_the_lease_holds_again() {
    let setup = setup().await;
    let claimed_at = setup.trigger.lease_mark();
    setup.lapse();
    setup.take_over().await;
    setup.renew();
    assert!(
        setup.trigger.lease_held_since(setup.trigger.lease_mark()),
        "the lease holds again"
    );
    assert_eq!(
        setup.send_allowed(claimed_at).await,
        None,
        "the run is the other admin's to send"
    );
}

#[tokio::test]
async fn a_run_claimed_before_a_lapse_is_sent_once_its_row_shows_it_still_this_nodes() {
    let setup = setup().await;
    let claimed_at = setup.trigger.lease_mark();
    setup.lapse();
    setup.renew();
    let allowed = setup
        .send_allowed(claimed_at)
        .await
        .expect("still this node's run");
    // Known this node's from the check on: a later look needs no other read.
    assert_ne!(allowed, claimed_at);
    assert!(setup.trigger.lease_held_since(allowed));
}

#[tokio::test]
async fn a_run_claimed_after_the_lapse_ended_goes_without_a_check() {
    let setup = setup().await;
    setup.lapse();
    setup.renew();
    let claimed_at = setup.trigger.lease_mark();
    // Taken over in the database (not possible while the lease holds, but it shows that no
    // read is made): the run claimed after the lapse is sent on the lease alone.
    setup.take_over().await;
    assert_eq!(setup.send_allowed(claimed_at).await, Some(claimed_at));
}
