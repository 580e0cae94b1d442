//! Cross-crate test harness for xjob: a real admin (gRPC on loopback, a real SQLite file) and
//! real executors built with the SDK, in one process. Tests wait on events with deadlines
//! through `wait_until`; nothing sleeps and hopes.

pub mod harness;

pub use harness::cluster::{TestCluster, TestClusterBuilder};
pub use harness::wait::wait_until;

/// The executor conformance suite (tests/tests/executor_conformance.rs).
pub mod conformance;
