//! The shared handles every service of the admin works with, built once in `app.rs`.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::config::Config;
use crate::registry::Registry;
use crate::store::Store;
use crate::trigger::Trigger;

/// Handles shared by the gRPC services and background tasks.
pub struct AdminContext {
    pub config: Arc<Config>,
    pub store: Store,
    pub registry: Arc<Registry>,
    pub trigger: Arc<Trigger>,
    /// Wakes the schedule scan early (a job was started or its schedule changed).
    pub schedule_wake: Arc<Notify>,
    /// This admin's node id and epoch.
    pub node: crate::trigger::NodeIdentity,
}
