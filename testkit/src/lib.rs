//! What xjob's tests and its benchmark share, so each piece exists once:
//!
//! - [`wait_until`]: the one way to wait for an event, polled with a deadline and a message
//!   naming the event when it never comes;
//! - [`net`]: free loopback ports, addresses nobody listens on, and a proxy that adds latency;
//! - [`process`]: child processes killed when dropped, signals, and awaiting a pid's death;
//! - [`admin`]: the `xjob serve` binary as a child process, restarted the same way;
//! - [`misfire`]: which scheduled seconds a misfire row of the scan stands for;
//! - [`planned`]: which admin owns the most planned fires (the schedule lock's holder);
//! - [`jaeger`]: a real Jaeger for the trace tests, and the spans read back from it;
//! - [`docs`]: the user docs' code blocks, markers, links, anchors and shell commands, for the
//!   docs checks.
//!
//! It depends on neither the admin nor the SDK, so both can use it in their own tests.

pub mod admin;
pub mod docs;
pub mod jaeger;
pub mod misfire;
pub mod net;
pub mod planned;
pub mod process;
mod wait;

pub use admin::{AdminOutput, AdminProcess, AdminSpec, connect_admin};
pub use net::{LatencyProxy, free_port, unused_address};
pub use process::{ChildProcess, Signal, is_gone, read_pid, signal, wait_gone};
pub use wait::wait_until;
