//! The `TestCluster` builder, the alarm hook tests count with and the handlers scenarios share
//! (waiting is `xjob-testkit`'s).

pub mod alarm;
pub mod certs;
pub mod cluster;
pub mod handlers;
