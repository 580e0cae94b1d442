//! Where the executor stands with the admins, shared by the connection loop that changes it and
//! the server that reports it (a file of its own so neither imports the other).

/// Where the executor stands with the admins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SessionState {
    /// Not registered: connecting, or reconnecting after a lost session.
    Connecting,
    /// Registered with the admin at `admin`.
    Registered { executor_id: String, admin: String },
    /// The last admin that answered refused the registration (`message` says why); retrying
    /// continues, and the state stays until a registration succeeds.
    Refused { admin: String, message: String },
    /// Deregistered or stopped for good.
    Stopped,
}
