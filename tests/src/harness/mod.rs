//! The `TestCluster` builder, the JobAdmin calls it makes (usable on any channel), the alarm
//! hook tests count with and the handlers scenarios share (waiting is `xjob-testkit`'s).

pub mod alarm;
pub mod certs;
pub mod client;
pub mod cluster;
pub mod handlers;
