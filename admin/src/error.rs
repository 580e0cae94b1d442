//! The admin's error type and the one table mapping it to gRPC status codes.
//! Internal details (database errors) are logged once here and never sent to clients.

use thiserror::Error;

use crate::store::StoreError;

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
    /// A dependency (database, executor) could not be reached.
    #[error("{0}")]
    Unavailable(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    pub fn invalid(field: &str, message: impl std::fmt::Display) -> Error {
        Error::InvalidArgument(format!("{field}: {message}"))
    }
}

impl From<StoreError> for Error {
    fn from(error: StoreError) -> Error {
        match error {
            StoreError::Conflict(message) => Error::AlreadyExists(message),
            StoreError::Unavailable(source) => {
                tracing::warn!(error = %source, "database unavailable");
                Error::Unavailable("database unavailable".to_string())
            }
            other => {
                tracing::error!(error = %other, "store error");
                Error::Internal("store error".to_string())
            }
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
            Error::Unavailable(_) => tonic::Status::unavailable(message),
            Error::Internal(_) => tonic::Status::internal(message),
        }
    }
}
