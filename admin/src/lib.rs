//! The xjob admin (scheduling center): decides when and where jobs fire, tracks executors,
//! records every run. `app::start`/`app::run` embed it (tests do); `main.rs` is the `xjob` CLI.
//!
//! Imports point downward: `api` / `monitor` → `schedule` → `trigger` → `executor` / `callback`
//! / `maintenance` → `registry` / `error` → `store` → `model`. Only `store` speaks SQL; only
//! `model` is imported by the store; `metrics` is a leaf every layer calls to count what
//! happens. A fire is one `model::Fire` from the scan's plan to the executor's `RunRequest`, and
//! enters the trigger through `Trigger::dispatch` alone (docs/architecture.md, "The fire path").
//! `import_xxl` (the `xjob import-xxl-job` command) sits beside `api`: it maps XXL-JOB's rows
//! with `model`'s validation and writes through `store`.

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
