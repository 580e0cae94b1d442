//! The xjob wire contract: generated protobuf messages, gRPC clients and servers, the protocol
//! version checked in the executor handshake, and the descriptor set served by reflection.
//!
//! Besides, the two small spellings every side shares: [`duration`] (`5s`, `2m` in flags and
//! configuration) and [`traceparent`] (the W3C header carried in `RunRequest`).
//!
//! Nothing else lives here: the admin, the command line and the executor SDK each depend on this
//! crate and never on each other.

pub mod duration;
pub mod traceparent;

/// Generated code of package `xjob.v1`.
pub mod pb {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("xjob.v1");
}

/// Protocol version an executor sends in `Register`; the admin refuses any other.
pub const PROTOCOL_VERSION: u32 = 1;

/// Encoded `FileDescriptorSet` of every xjob proto, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("xjob_descriptor");

/// Why `GLUE_TYPE_GROOVY` never runs; the admin and the executors refuse it with this text.
pub const GROOVY_UNSUPPORTED: &str = "GLUE_TYPE_GROOVY is not supported: it is Java source \
     compiled inside XXL-JOB's JVM executor, and xjob executors are not JVMs; use a BEAN handler \
     or a script glue type (shell, python, nodejs, php, powershell)";

/// Shortest app name the admin accepts (`Register`, groups), in characters.
pub const APP_NAME_MIN_CHARS: usize = 4;
/// Longest app name the admin accepts, in characters.
pub const APP_NAME_MAX_CHARS: usize = 64;

/// Whether `c` may appear in an app name: letters, digits, `_`, `.` and `-`.
pub fn is_app_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}
