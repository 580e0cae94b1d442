//! The `TestCluster` builder and the alarm hook tests count with (waiting is `xjob-testkit`'s).

pub mod alarm;
pub mod cluster;
