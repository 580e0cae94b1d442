//! Who is alive: the executors with an open `Registry.Session` on this admin, plus the live
//! registry rows of the other admins, so every admin routes over the whole cluster.
//!
//! ```text
//! Session stream ──Register──▶ Registry::register ──▶ routing sees it at once
//!                ──Heartbeat─▶ Registry::heartbeat (running log ids, lease renewed)
//!                ──ends──────▶ Registry::remove    ──▶ gone from routing at once
//! reaper ── every second ────▶ Registry::expire    (no heartbeat within the lease; `leases`)
//! refresh ─ every second ────▶ Registry::replace_peers (other admins' rows of xjob_registry)
//! ```
//! Own sessions are authoritative for this admin (they carry the running log ids the lost-run
//! monitor judges by); the `xjob_registry` table mirrors them for the other admins. Rows of
//! other admins are a routing view only: an executor whose admin died keeps its row, and stays
//! routable, until its heartbeat is older than the executor lease (it reconnects to another
//! admin well before that); then any admin deletes the row (`refresh`).
//!
//! Routing and `ListExecutors` see the union, one entry per app and address.
//!
//! Whenever an executor leaves (its session ended or was replaced, its lease expired, or it
//! left the other admins' rows), the registry publishes its address on a broadcast channel
//! ([`Registry::removals`]); the executor client follows it to drop its cached connection.

pub mod cert_binding;
pub mod clock_offset;
pub mod leases;
pub mod limits;
pub mod refresh;
pub mod session_calls;
pub mod stream;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use tokio::sync::broadcast;

use crate::config::Config;
use crate::model::{ExecutorInfo, ExecutorProtocol, NodeIdentity, SharedClock, sorted_log_ids};
use crate::store::Store;

/// What the registry's tasks (executor sessions, the refresh of the other admins' rows) work
/// with: the registry, its table, and this node.
pub struct RegistryContext {
    pub config: Arc<Config>,
    pub store: Store,
    pub registry: Arc<Registry>,
    pub node: NodeIdentity,
    pub clock: SharedClock,
    /// Where the refresh loop reports its rounds.
    pub health: Arc<crate::health::Health>,
    /// One token per open session of this admin, by executor id: cancelled when a newer session
    /// of the same app and address replaces it, which ends the old stream.
    pub superseded: std::sync::Mutex<HashMap<String, tokio_util::sync::CancellationToken>>,
    /// The peer IP each open session of this admin came from, by executor id: a registration
    /// from another IP cannot take over a live session's address.
    pub session_peers: std::sync::Mutex<HashMap<String, Option<std::net::IpAddr>>>,
    /// The access token each open session of this admin presented, by executor id: checked
    /// again each registry refresh, so a group token changed through any admin closes the
    /// sessions that no longer hold it.
    pub session_tokens: std::sync::Mutex<HashMap<String, Option<String>>>,
    /// Sessions open on this admin, for `max_sessions` and `max_sessions_per_peer`.
    pub session_counts: Arc<limits::SessionCounts>,
}

/// Removals a slow follower may lag behind before it is told it missed some.
const REMOVALS_BACKLOG: usize = 1024;

/// Live executors by app name: this admin's sessions and the other admins' rows.
pub struct Registry {
    executors: RwLock<HashMap<String, Vec<ExecutorInfo>>>,
    /// Live rows of the other admins, as last read from the table.
    peers: RwLock<Vec<ExecutorInfo>>,
    /// Addresses of executors that left.
    removals: broadcast::Sender<String>,
    /// This admin's sessions in session dispatch, by address: where their calls go.
    pub session_lines: session_calls::SessionLines,
    /// Clock offsets of this admin's sessions that can hold runs sent ahead.
    pub clocks: clock_offset::ExecutorClocks,
}

impl Default for Registry {
    fn default() -> Registry {
        Registry {
            executors: RwLock::default(),
            peers: RwLock::default(),
            removals: broadcast::channel(REMOVALS_BACKLOG).0,
            session_lines: Default::default(),
            clocks: Default::default(),
        }
    }
}

impl Registry {
    /// The addresses of executors that leave from now on.
    pub fn removals(&self) -> broadcast::Receiver<String> {
        self.removals.subscribe()
    }

    fn publish_removal(&self, address: &str) {
        // No follower (tests without an executor client) is fine.
        let _ = self.removals.send(address.to_string());
    }

    /// Adds an executor; an older session with the same app and address is replaced and
    /// returned (its stream is stale: the executor restarted or reconnected).
    pub fn register(&self, mut executor: ExecutorInfo) -> Option<ExecutorInfo> {
        executor.running_log_ids = sorted_log_ids(std::mem::take(&mut executor.running_log_ids));
        let mut executors = self.write();
        let entries = executors.entry(executor.app_name.clone()).or_default();
        let replaced = entries
            .iter()
            .position(|entry| entry.address == executor.address)
            .map(|index| entries.remove(index));
        entries.push(executor);
        drop(executors);
        if let Some(replaced) = &replaced {
            self.publish_removal(&replaced.address);
        }
        replaced
    }

    /// Removes one session; returns it if it was still registered.
    pub fn remove(&self, executor_id: &str) -> Option<ExecutorInfo> {
        let removed = {
            let mut executors = self.write();
            executors.values_mut().find_map(|entries| {
                entries
                    .iter()
                    .position(|entry| entry.executor_id == executor_id)
                    .map(|index| entries.remove(index))
            })
        };
        if let Some(removed) = &removed {
            self.publish_removal(&removed.address);
        }
        removed
    }

    /// Records a heartbeat; false when the session is no longer registered.
    pub fn heartbeat(&self, executor_id: &str, running_log_ids: Vec<i64>, now_ms: i64) -> bool {
        // Sorted before the lock: under a result backlog the list is long.
        let running_log_ids = sorted_log_ids(running_log_ids);
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

    /// Removes sessions whose last heartbeat is older than their lease (`lease_ms`, or
    /// `xxl_lease_ms` for XXL-JOB executors, whose heartbeats are registry calls every 30 s);
    /// returns them.
    pub fn expire(&self, now_ms: i64, lease_ms: i64, xxl_lease_ms: i64) -> Vec<ExecutorInfo> {
        let mut expired = Vec::new();
        let mut executors = self.write();
        let lease_of = |entry: &ExecutorInfo| match entry.protocol {
            ExecutorProtocol::Grpc | ExecutorProtocol::GrpcSession => lease_ms,
            ExecutorProtocol::XxlJobHttp => xxl_lease_ms,
        };
        for entries in executors.values_mut() {
            let (dead, alive): (Vec<_>, Vec<_>) = entries
                .drain(..)
                .partition(|entry| now_ms - entry.last_heartbeat_ms > lease_of(entry));
            *entries = alive;
            expired.extend(dead);
        }
        drop(executors);
        for executor in &expired {
            self.publish_removal(&executor.address);
        }
        expired
    }

    /// The XXL-JOB executor registered at `address` (trailing `/` ignored) with this admin or
    /// another one, if any: the executor client sends its calls over XXL-JOB's HTTP API
    /// instead of gRPC.
    pub fn xxl_executor(&self, address: &str) -> Option<ExecutorInfo> {
        let address = address.trim_end_matches('/');
        let is_it = |entry: &&ExecutorInfo| {
            entry.protocol == ExecutorProtocol::XxlJobHttp
                && entry.address.trim_end_matches('/') == address
        };
        let own = self
            .read()
            .values()
            .flat_map(|entries| entries.iter())
            .find(is_it)
            .cloned();
        own.or_else(|| self.peers_read().iter().find(is_it).cloned())
    }

    /// Replaces the other admins' rows with a fresh read of the table; returns the addresses
    /// that left routing altogether (their cached channels can go).
    pub fn replace_peers(&self, peers: Vec<ExecutorInfo>) -> Vec<String> {
        let before = self.routable_addresses();
        *self.peers_write() = peers;
        let after = self.routable_addresses();
        let gone: Vec<String> = before
            .into_iter()
            .filter(|address| !after.contains(address))
            .collect();
        for address in &gone {
            self.publish_removal(address);
        }
        gone
    }

    /// Sorted, de-duplicated addresses of an app's live executors, this admin's sessions and
    /// the other admins' rows together (the route input).
    pub fn online_addresses(&self, app_name: &str) -> Vec<String> {
        self.addresses_of_apps(|app| app == app_name)
    }

    /// The sessions this admin holds, of apps whose name contains `app_filter` (all when
    /// empty), by app and address. The lost-run monitor judges runs by these alone: only they
    /// carry running log ids.
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

    /// The id of this admin's session of `app_name` at `address`, if it holds one. Looked up in
    /// place: [`Registry::list`] clones each session with its heartbeat's run list (hundreds of
    /// thousands of ids under a result backlog), and the callback check asks this for every
    /// result it is sent.
    pub fn session_at(&self, app_name: &str, address: &str) -> Option<String> {
        self.read()
            .get(app_name)?
            .iter()
            .find(|entry| entry.address == address)
            .map(|entry| entry.executor_id.clone())
    }

    /// Every live executor of the cluster (this admin's sessions and the other admins' rows)
    /// of apps whose name contains `app_filter`, one per app and address, by app and address;
    /// `admin_node` names the admin holding its session (`ListExecutors`).
    pub fn list_with_peers(&self, app_filter: &str) -> Vec<ExecutorInfo> {
        self.list_with_peers_unsorted(
            |app| app_filter.is_empty() || app.contains(app_filter),
            true,
        )
        .into_values()
        .collect()
    }

    /// Number of live executors in the cluster (distinct app and address).
    pub fn count(&self) -> usize {
        self.list_with_peers_unsorted(|_| true, true).len()
    }

    /// One entry per (app, address): this admin's session wins, else the freshest peer row
    /// (during a handover the dead admin's row and the new admin's row name the same address).
    fn list_with_peers_unsorted(
        &self,
        app_matches: impl Fn(&str) -> bool,
        include_remote_sessions: bool,
    ) -> BTreeMap<(String, String), ExecutorInfo> {
        let mut merged: BTreeMap<(String, String), ExecutorInfo> = BTreeMap::new();
        for peer in self.peers_read().iter() {
            if !app_matches(&peer.app_name) {
                continue;
            }
            // Another admin holds its session: only that admin can send it calls.
            if !include_remote_sessions && peer.protocol == ExecutorProtocol::GrpcSession {
                continue;
            }
            let key = (peer.app_name.clone(), peer.address.clone());
            let fresher = merged
                .get(&key)
                .is_none_or(|kept| kept.last_heartbeat_ms < peer.last_heartbeat_ms);
            if fresher {
                merged.insert(key, peer.clone());
            }
        }
        for (app, entries) in self.read().iter() {
            if !app_matches(app) {
                continue;
            }
            for entry in entries {
                merged.insert((app.clone(), entry.address.clone()), entry.clone());
            }
        }
        merged
    }

    fn routable_addresses(&self) -> Vec<String> {
        self.addresses_of_apps(|_| true)
    }

    /// Sorted, de-duplicated addresses of the live executors of the apps `app_matches` accepts
    /// (an executor serving two apps is listed once). An executor in session dispatch is
    /// routable only on the admin holding its session: no other admin can reach it.
    fn addresses_of_apps(&self, app_matches: impl Fn(&str) -> bool) -> Vec<String> {
        let mut addresses: Vec<String> = self
            .list_with_peers_unsorted(app_matches, false)
            .into_values()
            .map(|executor| executor.address)
            .collect();
        addresses.sort();
        addresses.dedup();
        addresses
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

    fn peers_read(&self) -> std::sync::RwLockReadGuard<'_, Vec<ExecutorInfo>> {
        // Replaced whole, never half-written.
        self.peers
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn peers_write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<ExecutorInfo>> {
        self.peers
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn executor(id: &str, app: &str, address: &str, heartbeat_ms: i64) -> ExecutorInfo {
        peer(id, app, address, heartbeat_ms, "n1")
    }

    fn peer(id: &str, app: &str, address: &str, heartbeat_ms: i64, node: &str) -> ExecutorInfo {
        ExecutorInfo {
            executor_id: id.to_string(),
            app_name: app.to_string(),
            address: address.to_string(),
            handlers: vec![],
            registered_ms: 0,
            last_heartbeat_ms: heartbeat_ms,
            admin_node: node.to_string(),
            running_log_ids: vec![],
            protocol: Default::default(),
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
    fn xxl_job_executors_are_found_among_own_sessions_and_other_admins_rows() {
        let registry = Registry::default();
        registry.register(ExecutorInfo {
            protocol: ExecutorProtocol::XxlJobHttp,
            ..executor("x1", "app", "http://h:1", 0)
        });
        registry.register(executor("g1", "app", "http://h:2", 0));
        registry.replace_peers(vec![ExecutorInfo {
            protocol: ExecutorProtocol::XxlJobHttp,
            ..peer("x3", "app", "http://h:3", 0, "n2")
        }]);
        assert_eq!(
            registry.xxl_executor("http://h:1/").map(|e| e.executor_id),
            Some("x1".to_string())
        );
        assert!(
            registry.xxl_executor("http://h:2").is_none(),
            "a gRPC session"
        );
        assert_eq!(
            registry.xxl_executor("http://h:3").map(|e| e.admin_node),
            Some("n2".to_string())
        );
        // Each protocol expires by its own lease.
        let expired = registry.expire(10_000, 5_000, 20_000);
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].executor_id, "g1");
    }

    #[test]
    fn the_session_at_an_address_is_found_by_exact_app_and_address() {
        let registry = Registry::default();
        registry.register(executor("a1", "app", "http://h:1", 0));
        registry.register(executor("b1", "app-b", "http://h:1", 0));
        assert_eq!(
            registry.session_at("app", "http://h:1").as_deref(),
            Some("a1")
        );
        assert_eq!(
            registry.session_at("app-b", "http://h:1").as_deref(),
            Some("b1")
        );
        assert_eq!(registry.session_at("ap", "http://h:1"), None);
        assert_eq!(registry.session_at("app", "http://h:2"), None);
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
        let expired = registry.expire(10_000, 5_000, 5_000);
        assert_eq!(expired.len(), 1);
        assert_eq!(registry.online_addresses("app"), vec!["http://h:2"]);
        assert!(registry.heartbeat("b", vec![7], 10_500));
        assert_eq!(registry.list("")[0].running_log_ids, vec![7]);
    }

    #[test]
    fn routing_merges_other_admins_rows_sorted_and_de_duplicated() {
        let registry = Registry::default();
        registry.register(executor("own", "app", "http://h:2", 5_000));
        let left = registry.replace_peers(vec![
            peer("n2-1", "app", "http://h:3", 5_000, "n2"),
            peer("n2-2", "app", "http://h:2", 4_000, "n2"),
            peer("n3-1", "other", "http://h:9", 5_000, "n3"),
            peer("n3-2", "app", "http://h:1", 5_000, "n3"),
        ]);
        assert!(left.is_empty());
        assert_eq!(
            registry.online_addresses("app"),
            vec!["http://h:1", "http://h:2", "http://h:3"]
        );
        // Own sessions stay the lost-run monitor's view; the merged list names each holder.
        assert_eq!(registry.list("").len(), 1);
        let merged = registry.list_with_peers("app");
        let holders: Vec<(&str, &str)> = merged
            .iter()
            .map(|e| (e.address.as_str(), e.admin_node.as_str()))
            .collect();
        assert_eq!(
            holders,
            vec![
                ("http://h:1", "n3"),
                ("http://h:2", "n1"),
                ("http://h:3", "n2")
            ]
        );
        assert_eq!(registry.count(), 4);
    }

    #[test]
    fn a_handed_over_executor_is_listed_once_with_its_freshest_row() {
        let registry = Registry::default();
        registry.replace_peers(vec![
            peer("dead-1", "app", "http://h:1", 1_000, "dead"),
            peer("new-1", "app", "http://h:1", 3_000, "n2"),
        ]);
        let merged = registry.list_with_peers("");
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].admin_node, "n2");
        assert_eq!(registry.online_addresses("app"), vec!["http://h:1"]);
    }

    #[test]
    fn peers_leave_routing_when_the_table_drops_them() {
        let registry = Registry::default();
        registry.register(executor("own", "app", "http://h:1", 9_000));
        registry.replace_peers(vec![
            peer("n2-1", "app", "http://h:1", 1_000, "n2"),
            peer("n2-2", "app", "http://h:2", 1_000, "n2"),
            peer("n2-3", "app", "http://h:3", 9_000, "n2"),
        ]);
        // h:1 is still an own session, so only h:2 leaves routing.
        let left = registry.replace_peers(vec![peer("n2-3", "app", "http://h:3", 9_500, "n2")]);
        assert_eq!(left, vec!["http://h:2"]);
        assert_eq!(
            registry.online_addresses("app"),
            vec!["http://h:1", "http://h:3"]
        );
        let left = registry.replace_peers(Vec::new());
        assert_eq!(left, vec!["http://h:3"]);
        assert_eq!(registry.online_addresses("app"), vec!["http://h:1"]);
    }
}
