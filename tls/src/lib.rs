//! TLS for xjob's gRPC links, shared by the admin, the executor SDK and the sidecar.
//!
//! - [`ServerTls`]: a rustls `ServerConfig` built from PEM files and swapped in place when the
//!   files change or the process gets `SIGHUP` ([`ServerTls::watch`]); tonic's own
//!   `ServerTlsConfig` is fixed once the server starts, so we run the handshake ourselves.
//! - [`tls_incoming`] / [`plain_incoming`]: the connection streams handed to tonic's
//!   `serve_with_incoming*`, with TCP keepalive set on every accepted socket (tonic ignores its
//!   own `tcp_keepalive` setting for a caller-supplied stream), a bounded TLS handshake run off
//!   the accept loop so one slow client cannot hold up the others, and bounds on open
//!   connections per client address and in total ([`Refusal`]).
//! - [`ClientTls`]: the CA and optional client certificate a client presents, read from the
//!   files each time a connection is configured (so a renewed certificate is used by the next
//!   new connection).
//! - [`peer_has_verified_cert`]: whether the caller presented a certificate the server's CA
//!   verified (mTLS identity), for services that require one.
//!
//! The crypto provider is rustls' `ring` one, named explicitly rather than taken from a
//! process-wide default.

mod incoming;
mod limits;
mod server;

use std::path::{Path, PathBuf};

pub use incoming::{ListenOptions, plain_incoming, tls_incoming};
pub use limits::{Refusal, Tracked};
pub use rustls_pki_types::CertificateDer;
pub use server::{ClientAuth, ServerTls, ServerTlsFiles};
pub use tokio_rustls::server::TlsStream;

/// A TLS setting that cannot be used, naming the file and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Content { path: PathBuf, message: String },
    #[error("tls configuration: {0}")]
    Config(String),
}

/// What a client trusts and presents: the CA bundle that signs the server's certificate (empty =
/// the system's roots are not used; a CA is required for `https://`), and an optional client
/// certificate and key for servers that require mTLS.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientTls {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl ClientTls {
    /// True when nothing is configured (plaintext clients).
    pub fn is_empty(&self) -> bool {
        self.ca.is_none() && self.cert.is_none() && self.key.is_none()
    }

    /// Checks the files now, so a bad path fails at startup rather than at the first call.
    pub fn check(&self) -> Result<(), TlsError> {
        self.tonic_config().map(|_| ())
    }

    /// tonic's client TLS settings from the files as they are now.
    pub fn tonic_config(&self) -> Result<tonic::transport::ClientTlsConfig, TlsError> {
        use tonic::transport::{Certificate, ClientTlsConfig, Identity};
        let mut config = ClientTlsConfig::new();
        if let Some(ca) = &self.ca {
            config = config.ca_certificate(Certificate::from_pem(read_pem(ca)?));
        }
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                config = config.identity(Identity::from_pem(read_pem(cert)?, read_pem(key)?));
            }
            (None, None) => {}
            _ => {
                return Err(TlsError::Config(
                    "a client certificate needs both its cert and key file".to_owned(),
                ));
            }
        }
        Ok(config)
    }
}

/// True when the call came over TLS with a client certificate (which the server's verifier has
/// checked against its CA before the handshake completed).
pub fn peer_has_verified_cert<T>(request: &tonic::Request<T>) -> bool {
    request
        .peer_certs()
        .is_some_and(|certificates| !certificates.is_empty())
}

/// The certificate a client presented (its leaf, DER), which the handshake verified against the
/// server's CA; `None` on plaintext or without a client certificate.
pub fn peer_leaf_cert<T>(
    request: &tonic::Request<T>,
) -> Option<rustls_pki_types::CertificateDer<'static>> {
    request
        .peer_certs()
        .and_then(|certificates| certificates.first().cloned())
}

/// Whether `cert` is valid for one of `names` (DNS names or IP addresses) by its subject
/// alternative names, matched as a TLS client matches a server's name (the subject's common
/// name is not used). Names that are neither a DNS name nor an IP address match nothing.
pub fn cert_names_one_of(cert: &rustls_pki_types::CertificateDer<'_>, names: &[String]) -> bool {
    use tokio_rustls::rustls::client::verify_server_name;
    use tokio_rustls::rustls::server::ParsedCertificate;
    let Ok(parsed) = ParsedCertificate::try_from(cert) else {
        return false;
    };
    names.iter().any(|name| {
        rustls_pki_types::ServerName::try_from(name.as_str())
            .is_ok_and(|server_name| verify_server_name(&parsed, &server_name).is_ok())
    })
}

/// Whether `name` can be matched against a certificate (a DNS name or an IP address).
pub fn is_certificate_name(name: &str) -> bool {
    rustls_pki_types::ServerName::try_from(name).is_ok()
}

/// Reads a PEM file, naming it on failure.
fn read_pem(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| TlsError::File {
        path: path.to_owned(),
        message: error.to_string(),
    })
}
