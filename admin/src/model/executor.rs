//! A live executor as the registry sees it.

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
}

impl ExecutorProtocol {
    /// Reads a stored name back (`as_str`).
    pub fn parse(name: &str) -> Option<ExecutorProtocol> {
        match name {
            "grpc" => Some(ExecutorProtocol::Grpc),
            "xxl-job-http" => Some(ExecutorProtocol::XxlJobHttp),
            _ => None,
        }
    }

    /// The name `ListExecutors` and the registry table show.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutorProtocol::Grpc => "grpc",
            ExecutorProtocol::XxlJobHttp => "xxl-job-http",
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
    pub running_log_ids: Vec<i64>,
    pub protocol: ExecutorProtocol,
}
