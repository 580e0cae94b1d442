//! A live executor as the registry sees it.

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
    pub running_log_ids: Vec<i64>,
}
