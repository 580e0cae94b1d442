//! A run's log as its executor hands it back, a slice at a time: what the gRPC and the XXL-JOB
//! clients both read, below both.

/// A slice of a run's log file read through its executor.
#[derive(Debug, Clone, PartialEq)]
pub struct RunLogChunk {
    pub from_line: i32,
    pub to_line: i32,
    pub content: String,
    pub is_end: bool,
    /// The executor never received the run and now refuses it from the node a fencing read
    /// named (`ExecutorClient::read_log_fencing`); false from executors that do not fence.
    pub fenced: bool,
}
