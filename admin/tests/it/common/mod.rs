//! Helpers for process-level tests: the real `xjob` binary as a child process (SIGKILL,
//! SIGSTOP/SIGCONT, restart), free loopback ports and waiting with deadlines, all from the
//! workspace's `xjob-testkit`. Cargo builds the binary for the tests of this package and
//! passes its path in `CARGO_BIN_EXE_xjob`.

#![allow(dead_code)]

pub mod cluster;
pub mod ledger;

use std::path::PathBuf;
use std::time::Duration;

use tonic::transport::Channel;
use xjob_proto::pb::job_admin_client::JobAdminClient;
pub use xjob_testkit::{AdminOutput, AdminProcess, AdminSpec, free_port, wait_until};

/// Held by each timing scenario (cluster, faults, retention): they measure timing on a 2-core
/// machine, so they run one at a time, whatever the test harness's thread count.
pub static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The admin binary Cargo built for these tests.
pub fn xjob_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_xjob"))
}

/// Connects a `JobAdmin` client once the admin serves (a loaded machine may take a while to
/// start it and migrate its database).
pub async fn connect(url: &str) -> anyhow::Result<JobAdminClient<Channel>> {
    xjob_testkit::connect_admin(url, Duration::from_secs(30)).await
}
