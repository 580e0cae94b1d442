//! The admin's integration tests, as one test binary: linking the admin (and sqlx's three
//! drivers) once instead of once per file. One module per subject; a test is named by its module,
//! e.g. `cargo test -p xjob-admin --test it cli::` runs the CLI's tests.
//!
//! The timing scenarios (`cluster`, `faults`, `retention_size`) hold `common::ONE_AT_A_TIME`, so
//! they run one at a time whatever the harness's thread count.

mod common;

mod auth_process;
mod cli;
mod cluster;
mod console_browser;
mod console_forms;
mod docs;
mod faults;
mod glue_versions;
mod grpcurl;
mod partitions;
mod process;
mod retention_size;
mod tls_reload;
mod tracing;
mod workflow_schedules;
mod xxl_import;
