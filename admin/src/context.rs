//! The shared handles every service of the admin works with, built once in `app.rs`.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::config::Config;
use crate::executor::ExecutorClient;
use crate::health::Health;
use crate::lifecycle::Tasks;
use crate::model::{NodeIdentity, SharedClock};
use crate::registry::{Registry, RegistryContext};
use crate::store::Store;
use crate::trigger::Trigger;

/// Handles shared by the gRPC services and background tasks.
pub struct AdminContext {
    pub config: Arc<Config>,
    pub store: Store,
    pub registry: Arc<Registry>,
    /// The registry's own handles, for executor sessions.
    pub sessions: Arc<RegistryContext>,
    pub trigger: Arc<Trigger>,
    /// Calls to executors that are not dispatches (kill, read log).
    pub executors: Arc<ExecutorClient>,
    /// Wakes the schedule scan early (a job was started or its schedule changed).
    pub schedule_wake: Arc<Notify>,
    /// Wakes the follow-up loop to advance the workflow runs at once (a run was started).
    pub workflow_wake: Arc<Notify>,
    /// This admin's node id and epoch.
    pub node: NodeIdentity,
    /// The clock the loops decide by.
    pub clock: SharedClock,
    /// The loops stage: tasks outliving a request (executor sessions) are spawned there, and
    /// retries give up when its token is cancelled at shutdown.
    pub tasks: Tasks,
    /// Each background loop's last round, for gRPC health and the dashboard.
    pub health: Arc<Health>,
    /// Set when a calendar is created, changed or deleted, so the scan reads them again.
    pub calendars_changed: Arc<std::sync::atomic::AtomicBool>,
}
