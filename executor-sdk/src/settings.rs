//! The executor's settings once validated: what the builder (`builder.rs`) produces and
//! `RunningExecutor` (`running.rs`) starts from.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::admins::Admins;
use crate::handler_registry::HandlerRegistry;

/// Validated settings, consumed by `RunningExecutor::launch`.
pub(crate) struct ExecutorSettings {
    pub(crate) app_name: String,
    pub(crate) admins: Admins,
    pub(crate) bind: String,
    pub(crate) advertise_address_opt: Option<String>,
    pub(crate) auth_header_opt: Option<tonic::metadata::AsciiMetadataValue>,
    pub(crate) log_dir: PathBuf,
    pub(crate) labels: HashMap<String, String>,
    pub(crate) shutdown_grace: Duration,
    pub(crate) runner_idle_timeout: Duration,
    pub(crate) kill_grace: Duration,
    pub(crate) log_retention_days: u32,
    pub(crate) callback_flush_timeout: Duration,
    pub(crate) handlers: HandlerRegistry,
    pub(crate) server_tls_opt: Option<xjob_tls::ServerTlsFiles>,
    pub(crate) insecure_open_network: bool,
    /// Empty: the standard OTEL variables decide whether traces are exported.
    /// Where `/metrics` is served; None = not served.
    pub(crate) metrics_listen_opt: Option<String>,
    pub(crate) otlp_endpoint: String,
    /// Session dispatch: no port is opened; the admin's calls come down the session.
    pub(crate) session_dispatch: bool,
}
