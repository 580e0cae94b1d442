//! `xjob-executor`, a ready-made xjob executor, configured by a TOML file and `XJOB_*`
//! environment variables, that runs jobs without any Rust: `command` handlers (a program per
//! run), `http` handlers (a request to the app next to it per run) and, where enabled, script
//! (GLUE) jobs.
//!
//! ```text
//! config file ─▶ + XJOB_* env ─▶ validate (errors name the key) ─▶ executor (SDK)
//!     ─▶ register with the admins ─▶ run jobs ─SIGTERM/SIGINT─▶ graceful stop:
//!        NOT_SERVING, deregister, runs finish within shutdown_grace, results flushed
//! ```

pub mod config;
pub mod executor;
pub mod http;
