//! Job handlers: the user's async functions, and their output and error types (the name →
//! handler table the runner looks them up in is `handler_registry.rs`).
//!
//! A handler is any `Fn(JobContext) -> impl Future<Output = JobResult>`; it is boxed once at
//! registration so the runner can store handlers of different types in one map.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::context::JobContext;

/// What a handler returns: an output on success, an error on failure.
pub type JobResult = Result<JobOutput, JobError>;

/// The successful outcome of a run; its message is reported to the admin (handle message).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobOutput {
    message: String,
}

impl JobOutput {
    /// Returns an output carrying `message` as the run's handle message.
    pub fn message(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// Returns the handle message (empty by default).
    pub fn as_message(&self) -> &str {
        &self.message
    }
}

impl From<String> for JobOutput {
    fn from(message: String) -> Self {
        Self { message }
    }
}

impl From<&str> for JobOutput {
    fn from(message: &str) -> Self {
        Self::message(message)
    }
}

/// A failed run; its text is reported to the admin as the handle message (code 500).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobError {
    message: String,
}

impl JobError {
    /// Returns an error with the given text.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// Converts any error into a `JobError`, keeping its chain of sources in the text
    /// (`outer: inner: root`).
    pub fn from_error<E: std::error::Error>(error: E) -> Self {
        Self::from_error_chain(&error)
    }

    fn from_error_chain(error: &dyn std::error::Error) -> Self {
        let mut message = error.to_string();
        let mut source_opt = error.source();
        while let Some(source) = source_opt {
            message.push_str(": ");
            message.push_str(&source.to_string());
            source_opt = source.source();
        }
        Self { message }
    }

    /// Returns the error text.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.message)
    }
}

impl std::error::Error for JobError {}

impl From<String> for JobError {
    fn from(message: String) -> Self {
        Self { message }
    }
}

impl From<&str> for JobError {
    fn from(message: &str) -> Self {
        Self::new(message)
    }
}

impl From<std::io::Error> for JobError {
    fn from(error: std::io::Error) -> Self {
        Self::from_error_chain(&error)
    }
}

impl From<Box<dyn std::error::Error + Send + Sync>> for JobError {
    fn from(error: Box<dyn std::error::Error + Send + Sync>) -> Self {
        Self::from_error_chain(error.as_ref())
    }
}

/// The boxed future a registered handler returns.
pub(crate) type JobFuture = Pin<Box<dyn Future<Output = JobResult> + Send + 'static>>;

/// A registered handler, type-erased.
pub(crate) type HandlerFn = Arc<dyn Fn(JobContext) -> JobFuture + Send + Sync + 'static>;

/// Boxes a user function into a [`HandlerFn`].
pub(crate) fn boxed_handler<F, Fut>(handler: F) -> HandlerFn
where
    F: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = JobResult> + Send + 'static,
{
    Arc::new(move |context| Box::pin(handler(context)) as JobFuture)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer failed")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn job_error_from_error_keeps_the_source_chain() {
        let error = Outer(std::io::Error::other("disk full"));
        assert_eq!(
            JobError::from_error(error).message(),
            "outer failed: disk full"
        );
    }

    #[test]
    fn job_output_and_error_conversions() {
        assert_eq!(JobOutput::default().as_message(), "");
        assert_eq!(JobOutput::message("done").as_message(), "done");
        assert_eq!(JobError::from("bad").to_string(), "bad");
        assert_eq!(JobError::from(String::from("worse")).message(), "worse");
    }
}
