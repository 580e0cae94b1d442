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

mod admins;
mod auth;
mod backoff;
mod builder;
mod callback;
mod connection;
mod context;
mod error;
mod handler;
mod joblog;
mod runner;
mod running;
mod server;

pub use builder::{Executor, ExecutorBuilder};
pub use context::JobContext;
pub use error::Error;
pub use handler::{JobError, JobOutput, JobResult};
pub use running::RunningExecutor;
pub use tokio_util::sync::CancellationToken;
pub use xjob_proto::pb;
