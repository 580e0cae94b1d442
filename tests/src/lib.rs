//! Cross-crate test harness for xjob: a real admin (gRPC on loopback, a real SQLite file) and
//! real executors built with the SDK, in one process. Tests wait on events with deadlines
//! through `wait_until` (the workspace's `xjob-testkit`); nothing sleeps and hopes.

pub mod harness;

pub use harness::alarm::{CountingAlarm, Raised};
pub use harness::certs::TestCa;
pub use harness::cluster::{TestCluster, TestClusterBuilder};
pub use harness::handlers::{
    HandlerFuture, RunSpan, RunSpans, held_handler, ok_handler, sleeping_handler, spans_of,
};
pub use xjob_testkit::wait_until;

/// The executor conformance suite (tests/tests/executor_conformance.rs).
pub mod conformance;
