//! The xjob executor SDK: embed it in an app to run jobs scheduled by the xjob admin.
//!
//! ```text
//! Executor::builder() ─start()─▶ bind ─▶ server (ExecutorService) ─▶ runner ─▶ handlers
//!                                   └──▶ connection (Registry.Session: register, heartbeat)
//!                                   └──▶ callback (Registry.Callback: batch, retry, spool)
//! ```
//!
//! The executor binds its server first and registers second; on shutdown it deregisters first,
//! stops accepting runs, lets running handlers finish within a grace period, reports the rest
//! killed, flushes results and stops the server.
//!
//! Besides the app's own async handlers, `ExecutorBuilder::command_handler` registers the
//! built-in `command` handler: each run executes a program in its own process group, and a
//! timeout or kill stops the whole group (SIGTERM, then SIGKILL), not only the direct child.
//!
//! Script (GLUE) jobs run only in the languages the executor enables
//! (`ExecutorBuilder::enable_glue`), through the same process-group machinery.
//!
//! ```no_run
//! use xjob_executor::{Executor, JobContext, JobError, JobOutput, JobResult};
//!
//! async fn sync_orders(ctx: JobContext) -> JobResult {
//!     ctx.log(format!("syncing shard {}/{}", ctx.shard_index(), ctx.shard_total()));
//!     if ctx.params().is_empty() {
//!         return Err(JobError::new("no region given"));
//!     }
//!     Ok(JobOutput::message(format!("synced {}", ctx.params())))
//! }
//!
//! # async fn example() -> Result<(), xjob_executor::Error> {
//! Executor::builder()
//!     .app_name("orders")
//!     .admin_addrs(["http://127.0.0.1:8080"])
//!     .bind("0.0.0.0:9999")
//!     // Off loopback the executor must check its callers: the group's token (or mTLS).
//!     .access_token("the-group-token")
//!     .handler("syncOrders", sync_orders)
//!     .run(async {
//!         let _ = tokio::signal::ctrl_c().await;
//!     })
//!     .await
//! # }
//! ```

mod admins;
mod auth;
mod backoff;
mod builder;
mod callback;
mod command;
mod connection;
mod context;
mod error;
mod glue;
mod handler;
mod handler_registry;
mod id_hash;
mod joblog;
pub mod metrics;
mod runner;
mod running;
mod server;
mod session_dispatch;
mod session_state;
mod settings;
mod telemetry;

pub use builder::{Executor, ExecutorBuilder};
pub use command::CommandSpec;
pub use context::JobContext;
pub use error::Error;
pub use handler::{JobError, JobOutput, JobResult};
/// The OpenTelemetry API at the version the SDK traces with (`JobContext::trace_context`).
pub use opentelemetry;
pub use running::RunningExecutor;
pub use tokio_util::sync::CancellationToken;
/// The wire enums the builder and [`JobContext`] speak: which glue types run
/// ([`ExecutorBuilder::enable_glue`]) and why a run was fired ([`JobContext::trigger_type`]).
pub use xjob_proto::pb::{GlueType, TriggerType};
