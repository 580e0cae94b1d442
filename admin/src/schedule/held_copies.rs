//! One fire handed to the same admin twice while its claim keeps failing is sent once.
//!
//! This is how the fault campaign found runs sent twice on PostgreSQL with three admins: after
//! a database restart a fire this admin held came back to it from a peer that had taken it
//! over; both copies' claims failed and both retried, and the second retry put the run the
//! first had just claimed (and was sending) back to PENDING and sent it again (`in_hand`).
//! Here the two copies are handed over on purpose, the claims fail because the run table is
//! renamed away (every statement on runs fails at once, like an unreachable database), and
//! the dispatch outcomes are read straight from the trigger, before anything records them:
//! two outcomes for one run is the duplicate. Runs on every store backend (the store
//! conformance suite's databases: SQLite always, PostgreSQL and MariaDB when their URLs are set).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, mpsc};

use super::{Scheduler, SchedulerParts};
use crate::config::Config;
use crate::executor::ExecutorClient;
use crate::health::Health;
use crate::lifecycle::{Lifecycle, Stage};
use crate::model::{
    AddressType, Fire, MisfireStrategy, NodeIdentity, RunStatus, SharedClock, TriggerType,
    UnwrittenFire, system_clock,
};
use crate::registry::Registry;
use crate::store::Store;
use crate::store::conformance::{fresh_stores, group, job, rename_table};
use crate::trigger::recorder::{HeldOutcomes, Outcome};
use crate::trigger::{Trigger, TriggerParts};

const RUNS: &str = "xjob_log";
const RUNS_AWAY: &str = "xjob_log_away";

#[tokio::test]
async fn a_fire_handed_back_while_its_claim_retries_is_sent_once() {
    for (backend, store, _dir) in fresh_stores().await {
        let lifecycle = Lifecycle::new();
        let (scheduler, mut outcomes) = scheduler(&store, &lifecycle).await;
        let fire = written_fire(&store, &scheduler.node).await;

        rename_table(&store, RUNS, RUNS_AWAY).await;
        scheduler.schedule_fires(vec![fire.clone()]);
        wait_for_failed_claim(&scheduler, backend).await;
        // The copy comes back a moment later (from the peer that took the fire over), so the
        // two copies' retries do not fall on the same instants: the first copy's claim and
        // send are done before the second copy's retry starts, as in the campaign.
        tokio::time::sleep(Duration::from_millis(700)).await;
        scheduler.schedule_fires(vec![fire.clone()]);
        // Both copies (without `in_hand`) fail at least once more before the database heals.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        rename_table(&store, RUNS_AWAY, RUNS).await;

        let first = tokio::time::timeout(Duration::from_secs(20), outcomes.recv())
            .await
            .unwrap_or_else(|_| panic!("{backend}: the fire was never sent once healed"))
            .expect("the trigger holds the sender");
        assert_eq!(first.record.log_id, fire.log_id, "{backend}");
        // A second copy retries at most 2 s apart (`retry_unclaimed`); 6 s covers its next
        // rounds with room for a loaded machine.
        let second = tokio::time::timeout(Duration::from_secs(6), outcomes.recv()).await;
        if let Ok(Some(again)) = second {
            panic!(
                "{backend}: run {} was sent twice (outcomes {:?} then {:?})",
                fire.log_id.0, first.record, again.record
            );
        }
        let row = store.get_log(fire.log_id).await.expect("get").expect("row");
        assert_eq!(
            row.status,
            RunStatus::Running,
            "{backend}: claimed once, sent"
        );
        lifecycle.shutdown().await;
        store.close().await;
    }
}

/// A scheduler over `store` whose trigger sends to a closed port, and the receiver of its
/// dispatch outcomes (nothing records them, so a claimed run stays unsent in the database).
async fn scheduler(
    store: &Store,
    lifecycle: &Lifecycle,
) -> (Arc<Scheduler>, mpsc::UnboundedReceiver<Outcome>) {
    let clock: SharedClock = system_clock();
    let mut config = Config::for_tests(std::env::temp_dir());
    // Late is not the question here: no retry may skip the fire as a misfire. Nor the lease:
    // nothing renews it here, and a lapsed lease holds every send (`Trigger::send_allowed`).
    config.misfire_threshold = Duration::from_secs(600);
    config.node_lease = Duration::from_secs(600);
    let config = Arc::new(config);
    let now = clock.now_ms();
    let lease_start = std::time::Instant::now();
    let epoch = store
        .register_node("n1", now, config.node_lease.as_millis() as i64)
        .await
        .expect("node");
    let node = NodeIdentity::new("n1", epoch);
    let (recorder_tx, outcomes) = mpsc::unbounded_channel();
    let trigger = Arc::new(Trigger::new(
        TriggerParts {
            store: store.clone(),
            registry: Arc::new(Registry::default()),
            executors: Arc::new(ExecutorClient::new(
                Duration::from_secs(2),
                config.executor_client_tls(),
            )),
            node: node.clone(),
            clock: Arc::clone(&clock),
            lease_start,
            recorder_tx,
            held: HeldOutcomes::default(),
            tasks: lifecycle.stage(Stage::Dispatch).clone(),
        },
        &config,
    ));
    let scheduler = Scheduler::new(
        SchedulerParts {
            store: store.clone(),
            trigger,
            node,
            wake: Arc::new(Notify::new()),
            clock: Arc::clone(&clock),
            tasks: lifecycle.stage(Stage::Dispatch).clone(),
            health: Arc::new(Health::new(clock)),
            calendars_changed: Arc::default(),
        },
        config,
    );
    (Arc::new(scheduler), outcomes)
}

/// A PENDING fire of this node, due now, of a job whose group lists one closed port.
async fn written_fire(store: &Store, node: &NodeIdentity) -> Fire {
    let mut manual = group("app");
    manual.address_type = AddressType::Manual;
    manual.addresses = vec![xjob_testkit::net::unused_address().expect("a free port")];
    let group = store.insert_group(&manual).await.expect("group");
    let mut fixture = job(group.id, i64::MAX / 2);
    fixture.misfire_strategy = MisfireStrategy::DoNothing;
    fixture.fail_retry_count = 0;
    let job = store.insert_job(&fixture).await.expect("job");
    let now = system_clock().now_ms();
    let unwritten = UnwrittenFire::scheduled(Arc::new(job), now, TriggerType::Cron);
    let ids = store
        .insert_runs(&[unwritten.row(node, RunStatus::Pending, "")])
        .await
        .expect("insert");
    unwritten.written(ids[0])
}

/// Waits until a claim failed (the first copy is in its retry loop).
async fn wait_for_failed_claim(scheduler: &Scheduler, backend: &str) {
    let failed = || {
        scheduler
            .health
            .snapshot()
            .iter()
            .any(|status| status.name == "claim" && !status.last_error.is_empty())
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !failed() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{backend}: the claim did not fail with the run table away"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
