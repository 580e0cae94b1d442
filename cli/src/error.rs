//! What went wrong, as one line on stderr and an exit code a script can test:
//! 0 done, 1 the admin said no (any gRPC status), 2 usage (clap's code for bad flags too),
//! 3 the admin cannot be reached.

use tonic::{Code, Status};

pub const EXIT_OK: i32 = 0;
pub const EXIT_REFUSED: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_UNREACHABLE: i32 = 3;

#[derive(Debug)]
pub enum CliError {
    /// The command line is wrong (and the admin was not asked).
    Usage(String),
    /// The admin answered with an error status.
    Server {
        status: Status,
        hint: Option<String>,
    },
    /// No connection to the admin.
    Connect(String),
    /// Something else failed after the admin answered (e.g. writing the output).
    Failed(String),
}

impl From<Status> for CliError {
    fn from(status: Status) -> CliError {
        if let Some(cause) = transport_cause(&status) {
            return CliError::Connect(format!("the connection to the admin failed: {cause}"));
        }
        // The client's own channel gives up a call this way when the connection drops (e.g. a
        // TLS admin that refused the certificate after the handshake); the admin never does.
        if status.code() == Code::Cancelled {
            return CliError::Connect(format!(
                "the connection to the admin was closed during the call ({})",
                first_line(status.message())
            ));
        }
        CliError::Server { status, hint: None }
    }
}

impl From<std::io::Error> for CliError {
    fn from(error: std::io::Error) -> CliError {
        CliError::Failed(format!("cannot write the output: {error}"))
    }
}

impl CliError {
    /// Adds what to do about an `UNAUTHENTICATED` answer, which depends on whether a token was
    /// sent at all.
    pub fn with_token_hint(self, token_given: bool) -> CliError {
        match self {
            CliError::Server { status, hint: None } if status.code() == Code::Unauthenticated => {
                let hint = if token_given {
                    "the token sent with --token or XJOB_TOKEN was refused"
                } else {
                    "pass --token or set XJOB_TOKEN; xjob user create prints one"
                };
                CliError::Server {
                    status,
                    hint: Some(hint.to_string()),
                }
            }
            other => other,
        }
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => EXIT_USAGE,
            CliError::Server { .. } | CliError::Failed(_) => EXIT_REFUSED,
            CliError::Connect(_) => EXIT_UNREACHABLE,
        }
    }

    /// The one line printed on stderr.
    pub fn message(&self) -> String {
        match self {
            CliError::Usage(message) => format!("usage: {message}"),
            CliError::Server { status, hint } => {
                // The admin's INVALID_ARGUMENT messages start with the field they name
                // (`job.schedule_conf: invalid cron …`): kept as they are, after the code.
                let mut line = format!(
                    "{}: {}",
                    code_words(status.code()),
                    short_message(status.message())
                );
                if let Some(hint) = hint {
                    line.push_str(&format!(" ({hint})"));
                }
                line
            }
            CliError::Connect(message) | CliError::Failed(message) => message.clone(),
        }
    }

    /// Prints the message and returns the exit code. A closed stdout (`| head`) is not an error.
    pub fn report(&self) -> i32 {
        if let CliError::Failed(message) = self
            && message.contains("Broken pipe")
        {
            return EXIT_OK;
        }
        eprintln!("xjob: {}", self.message());
        self.exit_code()
    }
}

/// The transport error (connection refused or reset, TLS alert) behind a status the client's
/// channel made, rather than the admin; `None` for the admin's own answers.
fn transport_cause(status: &Status) -> Option<String> {
    let mut source = std::error::Error::source(status);
    while let Some(cause) = source {
        if cause.is::<tonic::transport::Error>() {
            return Some(error_chain(cause));
        }
        source = cause.source();
    }
    None
}

fn code_words(code: Code) -> &'static str {
    match code {
        Code::InvalidArgument => "invalid argument",
        Code::NotFound => "not found",
        Code::AlreadyExists => "already exists",
        Code::PermissionDenied => "permission denied",
        Code::Unauthenticated => "unauthenticated",
        Code::FailedPrecondition => "refused",
        Code::Unimplemented => "not implemented",
        Code::Unavailable => "unavailable",
        Code::DeadlineExceeded => "timed out",
        Code::ResourceExhausted => "resource exhausted",
        Code::Aborted => "aborted",
        Code::Cancelled => "cancelled",
        Code::Internal => "internal error",
        _ => "error",
    }
}

fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or("")
}

/// The status message on one line, bounded (a message may quote a long value back).
fn short_message(message: &str) -> String {
    let line = message.split_whitespace().collect::<Vec<_>>().join(" ");
    const MAX: usize = 400;
    if line.chars().count() <= MAX {
        return line;
    }
    let cut: String = line.chars().take(MAX).collect();
    format!("{cut}…")
}

/// An error with its causes, `outer: inner: root` (tonic's transport errors say little alone).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
