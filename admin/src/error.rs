//! The admin's error type and the one table between it and gRPC status codes, both ways:
//! `Error → Status` for the answers the admin gives, `Status → Error` for the answers executors
//! give it. Internal details (database errors) are logged once here and never sent to clients;
//! the error keeps its cause as `source` for the log.

use thiserror::Error;

use crate::model::validate::Refusal;
use crate::store::StoreError;

/// The cause an error keeps for the log.
pub type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Errors a request can end with, named after what the caller can do.
#[derive(Debug, Error)]
pub enum Error {
    /// The request is malformed; the message names the field.
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    NotFound(String),
    /// The request conflicts with the current state (e.g. deleting a group that has jobs).
    #[error("{0}")]
    FailedPrecondition(String),
    #[error("{0}")]
    AlreadyExists(String),
    /// Part of the contract a later release implements.
    #[error("{0}")]
    Unimplemented(String),
    #[error("{0}")]
    Unauthenticated(String),
    /// A dependency (database, executor, the listen port) could not be reached or used.
    #[error("{message}")]
    Unavailable {
        message: String,
        #[source]
        source: Option<Source>,
    },
    #[error("internal error: {message}")]
    Internal {
        message: String,
        #[source]
        source: Option<Source>,
    },
}

impl Error {
    pub fn invalid(field: &str, message: impl std::fmt::Display) -> Error {
        Error::InvalidArgument(format!("{field}: {message}"))
    }

    /// A dependency failed with `source`; `message` is what the caller is told.
    pub fn unavailable(message: impl Into<String>, source: impl Into<Source>) -> Error {
        Error::Unavailable {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// A failure of the admin itself with `source`; `message` is what the caller is told.
    pub fn internal(message: impl Into<String>, source: impl Into<Source>) -> Error {
        Error::Internal {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// An executor at `address` answered a call with `status`.
    pub fn executor(address: &str, status: tonic::Status) -> Error {
        Error::Unavailable {
            message: format!(
                "executor {address}: {}: {}",
                status.code(),
                status.message()
            ),
            source: Some(Box::new(status)),
        }
    }
}

impl From<StoreError> for Error {
    fn from(error: StoreError) -> Error {
        match error {
            StoreError::Conflict(message) => Error::AlreadyExists(message),
            StoreError::Unavailable(_) => {
                tracing::warn!(%error, "database unavailable");
                Error::unavailable("database unavailable", error)
            }
            other => {
                tracing::error!(error = %other, "store error");
                Error::internal("store error", other)
            }
        }
    }
}

impl From<Refusal> for Error {
    fn from(refusal: Refusal) -> Error {
        match refusal {
            Refusal::InvalidArgument(message) => Error::InvalidArgument(message),
            Refusal::Unimplemented(message) => Error::Unimplemented(message),
        }
    }
}

/// A call to an executor failed before it reached the executor (a bad address, a token that is
/// not valid metadata) or with the executor's own status.
impl From<tonic::Status> for Error {
    fn from(status: tonic::Status) -> Error {
        Error::Unavailable {
            message: status.message().to_string(),
            source: Some(Box::new(status)),
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(error: Error) -> tonic::Status {
        let message = error.to_string();
        match error {
            Error::InvalidArgument(_) => tonic::Status::invalid_argument(message),
            Error::NotFound(_) => tonic::Status::not_found(message),
            Error::FailedPrecondition(_) => tonic::Status::failed_precondition(message),
            Error::AlreadyExists(_) => tonic::Status::already_exists(message),
            Error::Unimplemented(_) => tonic::Status::unimplemented(message),
            Error::Unauthenticated(_) => tonic::Status::unauthenticated(message),
            Error::Unavailable { .. } => tonic::Status::unavailable(message),
            Error::Internal { .. } => tonic::Status::internal(message),
        }
    }
}
