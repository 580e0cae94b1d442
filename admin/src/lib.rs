//! The xjob admin (scheduling center): decides when and where jobs fire, tracks executors,
//! records every run. `app::start`/`app::run` embed it (tests do); `main.rs` is the `xjob` CLI.
//!
//! Imports point down, floor by floor: a module names `crate::x` only when `x` sits on a lower
//! floor, so two modules on one floor never import each other (`layering.rs` holds every
//! `crate::` path to this map on each `cargo test`; its `FLOORS` table is this list):
//!
//! ```text
//! 10  app                                 wiring, startup and shutdown order
//!  9  console  xxl_compat                 the console, XXL-JOB's HTTP; both over api
//!  8  api  monitor  import_xxl  demo      gRPC services, follow-up/lost/alarm loops, the import
//!  7  schedule  callback  context         the scan, executors' results, the shared handle bag
//!  6  trigger                             claim, pools, route, the one RunRequest, recorder
//!  5  executor                            the ExecutorService client
//!  4  registry                            executor sessions
//!  3  auth  health  maintenance  wire     callers, loop health, retention, protobuf enums
//!  2  error                               the one error table
//!  1  store  config  telemetry            all SQL, the settings (with `[alarm]`), tracing
//!  0  model  metrics  lifecycle           domain types and pure rules; counters; task stages
//! ```
//!
//! Only `store` speaks SQL; `model` imports nothing of the admin, and neither do `metrics` and
//! `lifecycle` (the stages every task is spawned in, and the order they stop in).
//! A fire is one `model::Fire` from the scan's plan to the executor's `RunRequest`, and enters
//! the trigger through `Trigger::dispatch` alone (docs/architecture.md, "The fire path").

pub mod api;
pub mod app;
pub mod auth;
pub mod callback;
pub mod config;
pub mod console;
pub mod context;
#[cfg(feature = "demo")]
pub mod demo;
pub mod error;
pub mod executor;
pub mod health;
pub mod import_xxl;
#[cfg(test)]
mod layering;
pub mod lifecycle;
pub mod maintenance;
pub mod metrics;
pub mod model;
pub mod monitor;
pub mod registry;
pub mod schedule;
pub mod store;
pub mod telemetry;
pub mod trigger;
pub mod wire;
pub mod xxl_compat;

pub use app::{RunningAdmin, run, start};
pub use config::Config;
pub use error::Error;
