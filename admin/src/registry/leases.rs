//! An executor stays routable while its lease holds: a session restored at start gets one lease
//! to reconnect ([`restore_sessions`]), and one whose heartbeats stopped is taken out of routing
//! once its lease runs out ([`run_reaper`]).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Registry, RegistryContext};
use crate::model::{ExecutorInfo, SharedClock};

/// Keeps routing to the executors this node served before it restarted, for one lease: they are
/// most likely alive and reconnecting, and fires recovered at start should not fail meanwhile.
/// Each entry is replaced as soon as its executor registers again, and expires otherwise.
pub fn restore_sessions(
    registry: &Registry,
    previous_sessions: Vec<ExecutorInfo>,
    clock: &SharedClock,
) {
    let now = clock.now_ms();
    for executor in previous_sessions {
        tracing::info!(app = %executor.app_name, address = %executor.address,
            "routing to an executor of this node's previous run until it reconnects");
        registry.register(ExecutorInfo {
            last_heartbeat_ms: now,
            ..executor
        });
    }
}

/// Takes executors whose heartbeats stopped out of routing, each second until cancelled.
pub async fn run_reaper(sessions: Arc<RegistryContext>, cancel: CancellationToken) {
    let lease_ms = sessions.config.executor_lease.as_millis() as i64;
    let xxl_lease_ms = sessions.config.xxl_job_compat_lease.as_millis() as i64;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        // The registry publishes the removals to the executor client.
        for expired in sessions
            .registry
            .expire(sessions.clock.now_ms(), lease_ms, xxl_lease_ms)
        {
            tracing::warn!(app = %expired.app_name, address = %expired.address, "executor lease expired");
            let _ = sessions.store.delete_registry(&expired.executor_id).await;
        }
    }
}
