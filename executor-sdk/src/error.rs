//! The crate's one error type, returned by the builder, `start`/`run` and `wait_registered`.
//!
//! Refusals of a run (unknown handler, discard-later, duplicate log id) are not errors of this
//! type: they are answered to the admin as `accepted=false` with a message.

use std::path::PathBuf;
use std::time::Duration;

/// Errors of the executor SDK.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A builder setting is missing or invalid; `field` names the setting.
    #[error("invalid executor config: {field}: {message}")]
    InvalidConfig {
        /// The builder setting at fault, e.g. `admin_addrs`.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The executor server could not bind its listen address.
    #[error("failed to bind executor server on {address}")]
    Bind {
        /// The address given to `bind`.
        address: String,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The log directory (or its `callbacklogs/` spool) could not be created.
    #[error("log directory {path} is not usable")]
    LogDir {
        /// The directory that failed.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A gRPC transport failure.
    #[error("grpc transport error")]
    Transport(#[from] tonic::transport::Error),
    /// No admin answered `Registered` within the given time.
    #[error("executor not registered with any admin within {0:?}")]
    RegistrationTimeout(Duration),
    /// No admin accepted the registration in time, and the last one that answered refused it
    /// (a wrong or missing access token, most often).
    #[error("admin {admin} refused the registration: {message}")]
    RegistrationRefused {
        /// The admin that refused.
        admin: String,
        /// Its reason.
        message: String,
    },
    /// The executor has stopped (shut down or crashed).
    #[error("executor stopped")]
    Stopped,
}
