//! A live executor as the registry sees it.

use super::LogId;

/// How the admin talks to an executor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ExecutorProtocol {
    /// An xjob executor: a `Registry.Session` stream, `ExecutorService` over gRPC.
    #[default]
    Grpc,
    /// An unmodified XXL-JOB executor (`xxl-job-core`): registry calls to the compatibility
    /// listener, runs sent to its embedded HTTP server (`xxl_compat`). It does not list its
    /// running runs, so the lost-run monitor judges its runs by its registration alone.
    XxlJobHttp,
    /// An xjob executor in session dispatch: it opens no port; runs, kills, probes and log
    /// reads travel down its own `Registry.Session` stream (`registry::session_calls`), so only
    /// the admin holding that stream can reach it.
    GrpcSession,
}

impl ExecutorProtocol {
    /// Reads a stored name back (`as_str`).
    pub fn parse(name: &str) -> Option<ExecutorProtocol> {
        match name {
            "grpc" => Some(ExecutorProtocol::Grpc),
            "xxl-job-http" => Some(ExecutorProtocol::XxlJobHttp),
            "grpc-session" => Some(ExecutorProtocol::GrpcSession),
            _ => None,
        }
    }

    /// The name `ListExecutors` and the registry table show.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutorProtocol::Grpc => "grpc",
            ExecutorProtocol::XxlJobHttp => "xxl-job-http",
            ExecutorProtocol::GrpcSession => "grpc-session",
        }
    }
}

/// One executor with an open session (or a registry row owned by another admin).
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutorInfo {
    pub executor_id: String,
    pub app_name: String,
    pub address: String,
    pub handlers: Vec<String>,
    pub registered_ms: i64,
    pub last_heartbeat_ms: i64,
    /// Node id of the admin holding the session.
    pub admin_node: String,
    /// The runs the session's last heartbeat listed; the registry keeps them sorted ascending
    /// without repeats ([`sorted_log_ids`]), so [`ExecutorInfo::lists`] is a binary search.
    pub running_log_ids: Vec<i64>,
    pub protocol: ExecutorProtocol,
}

impl ExecutorInfo {
    /// Whether the session's last heartbeat listed `log_id`. A heartbeat lists every run its
    /// executor holds or has no result accepted for yet: under a result backlog that is hundreds
    /// of thousands, and the lost-run monitor asks about each of up to 10 000 runs per check.
    /// A linear search made that check quadratic: seconds of CPU every few seconds, just when
    /// the admin was already behind.
    pub fn lists(&self, log_id: LogId) -> bool {
        self.running_log_ids.binary_search(&log_id.0).is_ok()
    }
}

/// A heartbeat's log ids as [`ExecutorInfo::running_log_ids`] keeps them: sorted, no repeats.
pub fn sorted_log_ids(mut log_ids: Vec<i64>) -> Vec<i64> {
    log_ids.sort_unstable();
    log_ids.dedup();
    log_ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heartbeat_list_in_any_order_is_searched_once_sorted() {
        let session = ExecutorInfo {
            executor_id: "e".into(),
            app_name: "app".into(),
            address: "http://127.0.0.1:1".into(),
            handlers: vec![],
            registered_ms: 0,
            last_heartbeat_ms: 0,
            admin_node: "n".into(),
            running_log_ids: sorted_log_ids(vec![90, 3, 70_000, 3, -1]),
            protocol: ExecutorProtocol::Grpc,
        };
        assert_eq!(session.running_log_ids, vec![-1, 3, 90, 70_000]);
        for listed in [-1, 3, 90, 70_000] {
            assert!(session.lists(LogId(listed)), "{listed} listed");
        }
        for absent in [0, 4, 89, 91, 70_001] {
            assert!(!session.lists(LogId(absent)), "{absent} not listed");
        }
    }
}
