//! The `TestCluster` builder and the one way tests wait.

pub mod cluster;
pub mod wait;
