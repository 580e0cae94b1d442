//! A run planned to go ahead whose executor can no longer hold it when it is routed (its clock
//! offset became unknown while the run waited for a pool slot): it gives the slot back while
//! it waits for its instant, the wait ends at shutdown (the run stays claimed and unsent), and
//! at its instant it is routed again and sent to start at once.
//!
//! The trigger here has one fast pool slot, held by the test while the run is judged able to go
//! ahead; the offset is dropped before the slot is handed over, so the run finds it unknown
//! only once routed.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::pool::PoolPermit;
use super::{Claimed, Target, Trigger, TriggerParts};
use crate::config::Config;
use crate::executor::ExecutorClient;
use crate::lifecycle::Tasks;
use crate::model::{
    AddressType, LogId, SENT_AHEAD_NOTE, SharedClock, TriggerType, UnwrittenFire, system_clock,
};
use crate::registry::Registry;
use crate::registry::clock_offset::ClockSample;
use crate::store::conformance::{group, job};
use crate::store::{DispatchOutcome, DispatchRecord, Store};

const EXECUTOR_ID: &str = "executor-1";
const LEAD_MS: u64 = 1_000;

pub(super) struct Setup {
    pub(super) trigger: Arc<Trigger>,
    registry: Arc<Registry>,
    pub(super) tasks: Tasks,
    pub(super) claimed: Claimed,
    pub(super) target: Target,
    address: String,
    pub(super) store: Store,
    _dir: tempfile::TempDir,
}

/// A trigger sending runs `LEAD_MS` ahead, with one fast pool slot, and a claimed run of a
/// job whose one address (nobody listens there) has a known clock offset, due in `in_ms`.
pub(super) async fn setup(in_ms: i64) -> Setup {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::connect(&format!(
        "sqlite://{}",
        dir.path().join("wait.db").display()
    ))
    .await
    .expect("store");
    let address = xjob_testkit::net::unused_address().expect("a free port");
    let mut manual = group("app");
    manual.address_type = AddressType::Manual;
    manual.addresses = vec![address.clone()];
    let group = store.insert_group(&manual).await.expect("group");
    let job = store
        .insert_job(&job(group.id, i64::MAX / 2))
        .await
        .expect("job");
    let clock: SharedClock = system_clock();
    let mut config = Config::for_tests(dir.path().to_path_buf());
    config.send_ahead_ms = LEAD_MS;
    config.fast_pool_size = 1;
    config.slow_pool_size = 1;
    config.pool_wait = Duration::from_secs(10);
    // Neither lateness nor the lease is the question here (nothing renews the lease).
    config.misfire_threshold = Duration::from_secs(600);
    config.node_lease = Duration::from_secs(600);
    let registry = Arc::new(Registry::default());
    registry.clocks.open(&address, EXECUTOR_ID);
    for _ in 0..crate::registry::clock_offset::MIN_SAMPLES {
        let sample = ClockSample {
            offset_ms: 0,
            round_trip_ms: 1,
        };
        registry.clocks.add(&address, EXECUTOR_ID, sample);
    }
    assert_eq!(registry.clocks.offset_ms(&address), Some(0), "offset known");
    let (recorder_tx, _outcomes) = tokio::sync::mpsc::unbounded_channel();
    let tasks = Tasks::default();
    let trigger = Arc::new(Trigger::new(
        TriggerParts {
            store: store.clone(),
            registry: Arc::clone(&registry),
            executors: Arc::new(ExecutorClient::new(
                Duration::from_secs(2),
                config.executor_client_tls(),
            )),
            node: crate::model::NodeIdentity::new("n1", 1),
            clock: Arc::clone(&clock),
            lease_start: std::time::Instant::now(),
            recorder_tx,
            held: Default::default(),
            tasks: tasks.clone(),
        },
        &config,
    ));
    let instant_ms = clock.now_ms() + in_ms;
    let fire =
        UnwrittenFire::scheduled(Arc::new(job), instant_ms, TriggerType::Cron).written(LogId(1));
    let claimed = Claimed {
        fire,
        trigger_time_ms: clock.now_ms(),
        slot: None,
        released: false,
        claimed_at: trigger.lease_mark(),
    };
    let target = Target {
        group: Arc::new(group),
        addresses: vec![address.clone()].into(),
    };
    Setup {
        trigger,
        registry,
        tasks,
        claimed,
        target,
        address,
        store,
        _dir: dir,
    }
}

impl Setup {
    async fn slot(&self) -> PoolPermit {
        let now = self.trigger.now_ms();
        self.trigger
            .pools
            .acquire(self.claimed.fire.job_id(), now)
            .await
            .expect("a pool slot")
    }

    /// Starts the run's dispatch while the test holds the only slot; once it waits for the
    /// slot (past the check that it can go ahead), the executor's offset is forgotten and the
    /// slot handed over.
    async fn dispatch_after_the_offset_is_lost(&self) -> JoinHandle<Option<DispatchRecord>> {
        let blocker = self.slot().await;
        let dispatch = {
            let (trigger, claimed, target) = (
                Arc::clone(&self.trigger),
                self.claimed.clone(),
                self.target.clone(),
            );
            tokio::spawn(async move { trigger.dispatch_in_pool(&claimed, &target).await })
        };
        // On this single-threaded runtime the dispatch runs, without any I/O, up to its wait
        // for the slot.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!dispatch.is_finished());
        assert!(
            self.trigger
                .can_send_ahead(&self.claimed.fire, &self.target),
            "judged able to go ahead"
        );
        self.registry.clocks.close(&self.address, EXECUTOR_ID);
        drop(blocker);
        dispatch
    }
}

#[tokio::test]
async fn a_run_that_can_no_longer_go_ahead_waits_without_its_slot_and_stops_at_shutdown() {
    let setup = setup(3_000).await;
    let dispatch = setup.dispatch_after_the_offset_is_lost().await;
    // The slot went to the run, which found its executor's offset unknown: it gives the slot
    // back while it waits for its instant.
    let slot = tokio::time::timeout(Duration::from_secs(1), setup.slot())
        .await
        .expect("the waiting run holds no pool slot");
    drop(slot);
    assert!(!dispatch.is_finished(), "it waits for its instant");
    setup.tasks.stopping().cancel();
    let ended = tokio::time::timeout(Duration::from_secs(1), dispatch)
        .await
        .expect("the wait ends at shutdown")
        .expect("dispatch task");
    assert_eq!(ended, None, "stays claimed and unsent");
    assert!(
        setup.trigger.now_ms() < setup.claimed.fire.scheduled_at_ms,
        "ended before its instant"
    );
    assert!(
        setup
            .trigger
            .sent_ahead
            .take(setup.claimed.fire.job_id(), 0)
            .is_empty(),
        "nothing was sent ahead"
    );
    setup.store.close().await;
}

#[tokio::test]
async fn a_run_that_can_no_longer_go_ahead_is_sent_at_its_instant_to_start_at_once() {
    let setup = setup(800).await;
    let dispatch = setup.dispatch_after_the_offset_is_lost().await;
    let record = tokio::time::timeout(Duration::from_secs(10), dispatch)
        .await
        .expect("sent")
        .expect("dispatch task")
        .expect("a record");
    assert!(
        record.finished_ms >= setup.claimed.fire.scheduled_at_ms,
        "sent at its instant: {record:?}"
    );
    // Nobody listens at the address: the run failed, and was not sent to be held.
    assert_eq!(record.outcome, DispatchOutcome::Failed, "{record:?}");
    assert!(
        record.trigger_msg.contains(&setup.address)
            && !record.trigger_msg.contains(SENT_AHEAD_NOTE),
        "{record:?}"
    );
    setup.store.close().await;
}
