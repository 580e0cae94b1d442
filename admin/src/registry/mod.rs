//! Who is alive: the executors with an open `Registry.Session` on this admin.
//!
//! ```text
//! Session stream ──Register──▶ Registry::register ──▶ routing sees it at once
//!                ──Heartbeat─▶ Registry::heartbeat (running log ids, lease renewed)
//!                ──ends──────▶ Registry::remove    ──▶ gone from routing at once
//! reaper ── every second ────▶ Registry::expire    (no heartbeat within the lease)
//! ```
//! The in-memory view is authoritative for routing on this admin; the `xjob_registry` table
//! mirrors it for other admins and the console.

pub mod stream;

use std::collections::HashMap;
use std::sync::RwLock;

use crate::model::ExecutorInfo;

/// Live executors by app name.
#[derive(Default)]
pub struct Registry {
    executors: RwLock<HashMap<String, Vec<ExecutorInfo>>>,
}

impl Registry {
    /// Adds an executor; an older session with the same app and address is replaced and
    /// returned (its stream is stale: the executor restarted or reconnected).
    pub fn register(&self, executor: ExecutorInfo) -> Option<ExecutorInfo> {
        let mut executors = self.write();
        let entries = executors.entry(executor.app_name.clone()).or_default();
        let replaced = entries
            .iter()
            .position(|entry| entry.address == executor.address)
            .map(|index| entries.remove(index));
        entries.push(executor);
        replaced
    }

    /// Removes one session; returns it if it was still registered.
    pub fn remove(&self, executor_id: &str) -> Option<ExecutorInfo> {
        let mut executors = self.write();
        for entries in executors.values_mut() {
            if let Some(index) = entries
                .iter()
                .position(|entry| entry.executor_id == executor_id)
            {
                return Some(entries.remove(index));
            }
        }
        None
    }

    /// Records a heartbeat; false when the session is no longer registered.
    pub fn heartbeat(&self, executor_id: &str, running_log_ids: Vec<i64>, now_ms: i64) -> bool {
        let mut executors = self.write();
        for entries in executors.values_mut() {
            if let Some(entry) = entries
                .iter_mut()
                .find(|entry| entry.executor_id == executor_id)
            {
                entry.last_heartbeat_ms = now_ms;
                entry.running_log_ids = running_log_ids;
                return true;
            }
        }
        false
    }

    /// Removes executors whose last heartbeat is older than `lease_ms`; returns them.
    pub fn expire(&self, now_ms: i64, lease_ms: i64) -> Vec<ExecutorInfo> {
        let mut expired = Vec::new();
        let mut executors = self.write();
        for entries in executors.values_mut() {
            let (dead, alive): (Vec<_>, Vec<_>) = entries
                .drain(..)
                .partition(|entry| now_ms - entry.last_heartbeat_ms > lease_ms);
            *entries = alive;
            expired.extend(dead);
        }
        expired
    }

    /// Sorted, de-duplicated addresses of an app's live executors (the route input).
    pub fn online_addresses(&self, app_name: &str) -> Vec<String> {
        let executors = self.read();
        let mut addresses: Vec<String> = executors
            .get(app_name)
            .map(|entries| entries.iter().map(|entry| entry.address.clone()).collect())
            .unwrap_or_default();
        addresses.sort();
        addresses.dedup();
        addresses
    }

    /// Executors of apps whose name contains `app_filter` (all when empty), by app and address.
    pub fn list(&self, app_filter: &str) -> Vec<ExecutorInfo> {
        let executors = self.read();
        let mut listed: Vec<ExecutorInfo> = executors
            .iter()
            .filter(|(app, _)| app_filter.is_empty() || app.contains(app_filter))
            .flat_map(|(_, entries)| entries.iter().cloned())
            .collect();
        listed.sort_by(|a, b| (&a.app_name, &a.address).cmp(&(&b.app_name, &b.address)));
        listed
    }

    /// Number of live executors.
    pub fn count(&self) -> usize {
        self.read().values().map(Vec::len).sum()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Vec<ExecutorInfo>>> {
        // A panic while holding the lock cannot leave the map half-updated (every mutation is a
        // single Vec operation), so a poisoned lock is still safe to use.
        self.executors
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Vec<ExecutorInfo>>> {
        self.executors
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn executor(id: &str, app: &str, address: &str, heartbeat_ms: i64) -> ExecutorInfo {
        ExecutorInfo {
            executor_id: id.to_string(),
            app_name: app.to_string(),
            address: address.to_string(),
            handlers: vec![],
            registered_ms: 0,
            last_heartbeat_ms: heartbeat_ms,
            admin_node: "n1".to_string(),
            running_log_ids: vec![],
        }
    }

    #[test]
    fn addresses_are_sorted_and_removal_is_immediate() {
        let registry = Registry::default();
        registry.register(executor("b", "app", "http://h:2", 0));
        registry.register(executor("a", "app", "http://h:1", 0));
        assert_eq!(
            registry.online_addresses("app"),
            vec!["http://h:1", "http://h:2"]
        );
        assert!(registry.remove("a").is_some());
        assert_eq!(registry.online_addresses("app"), vec!["http://h:2"]);
        assert!(registry.remove("a").is_none());
    }

    #[test]
    fn re_registration_replaces_the_stale_session() {
        let registry = Registry::default();
        registry.register(executor("old", "app", "http://h:1", 0));
        let replaced = registry.register(executor("new", "app", "http://h:1", 0));
        assert_eq!(replaced.map(|e| e.executor_id), Some("old".to_string()));
        assert_eq!(registry.count(), 1);
    }

    #[test]
    fn silent_executors_expire_after_the_lease() {
        let registry = Registry::default();
        registry.register(executor("a", "app", "http://h:1", 1_000));
        registry.register(executor("b", "app", "http://h:2", 9_000));
        let expired = registry.expire(10_000, 5_000);
        assert_eq!(expired.len(), 1);
        assert_eq!(registry.online_addresses("app"), vec!["http://h:2"]);
        assert!(registry.heartbeat("b", vec![7], 10_500));
        assert_eq!(registry.list("")[0].running_log_ids, vec![7]);
    }
}
