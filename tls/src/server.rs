//! The server side: a rustls `ServerConfig` built from PEM files, held behind a lock and
//! replaced whole on reload. Each new connection takes the config current at its accept, so a
//! reload never touches a connection already open and never fails one being made: a reload that
//! cannot load the files keeps the previous config and logs why.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};
use tokio_util::sync::CancellationToken;

use crate::TlsError;

/// Whether clients must present a certificate signed by the configured CA.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificates are asked for.
    #[default]
    None,
    /// A certificate is asked for and verified when presented; callers without one still
    /// connect (the service decides, e.g. API clients with a bearer token).
    Optional,
    /// The handshake fails without a valid client certificate.
    Required,
}

/// The files of a TLS server: its certificate chain and key, and the CA that signs client
/// certificates (needed unless `client_auth` is `None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerTlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
    pub client_auth: ClientAuth,
}

/// A server TLS config that can be reloaded from its files while serving.
#[derive(Debug)]
pub struct ServerTls {
    files: ServerTlsFiles,
    current: RwLock<Arc<ServerConfig>>,
}

impl ServerTls {
    /// Loads the files now (a bad file fails startup with a message naming it).
    pub fn load(files: ServerTlsFiles) -> Result<Arc<ServerTls>, TlsError> {
        let config = build_config(&files)?;
        Ok(Arc::new(ServerTls {
            files,
            current: RwLock::new(Arc::new(config)),
        }))
    }

    /// Reads the files again and, if they make a valid config, uses it for new connections.
    pub fn reload(&self) -> Result<(), TlsError> {
        let config = build_config(&self.files)?;
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(config);
        Ok(())
    }

    /// The acceptor for one new connection (the config current now).
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        let config = self
            .current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        TlsAcceptor::from(config)
    }

    /// Reloads on `SIGHUP` and whenever one of the files changes (checked every `poll`), until
    /// `cancel` fires. Polling the modification times needs no file-watching dependency and
    /// also sees files replaced by a rename (as certificate tools and Kubernetes secrets do).
    pub async fn watch(self: Arc<ServerTls>, poll: Duration, cancel: CancellationToken) {
        let mut stamps = self.stamps();
        let mut hangup = hangup_signal();
        loop {
            let reason = tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(poll) => {
                    let now = self.stamps();
                    if now == stamps {
                        continue;
                    }
                    stamps = now;
                    "certificate files changed"
                }
                _ = next_hangup(&mut hangup) => "SIGHUP",
            };
            match self.reload() {
                Ok(()) => {
                    tracing::info!(reason, cert = %self.files.cert.display(), "tls certificates reloaded")
                }
                Err(error) => {
                    tracing::warn!(reason, %error, "tls certificates not reloaded; the previous ones stay in use")
                }
            }
        }
    }

    /// Modification time and length of each file (a missing file counts as a change).
    fn stamps(&self) -> Vec<Option<(SystemTime, u64)>> {
        let mut paths: Vec<&Path> = vec![&self.files.cert, &self.files.key];
        if let Some(ca) = &self.files.client_ca {
            paths.push(ca);
        }
        paths
            .into_iter()
            .map(|path| {
                std::fs::metadata(path)
                    .ok()
                    .and_then(|meta| Some((meta.modified().ok()?, meta.len())))
            })
            .collect()
    }
}

#[cfg(unix)]
type Hangup = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangup = Option<()>;

#[cfg(unix)]
fn hangup_signal() -> Hangup {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok()
}

#[cfg(not(unix))]
fn hangup_signal() -> Hangup {
    None
}

async fn next_hangup(hangup: &mut Hangup) {
    #[cfg(unix)]
    if let Some(signal) = hangup {
        signal.recv().await;
        return;
    }
    let _ = hangup;
    std::future::pending::<()>().await
}

fn build_config(files: &ServerTlsFiles) -> Result<ServerConfig, TlsError> {
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|error| TlsError::Config(error.to_string()))?;
    let builder = match (files.client_auth, &files.client_ca) {
        (ClientAuth::None, _) => builder.with_no_client_auth(),
        (_, None) => {
            return Err(TlsError::Config(
                "client certificate verification needs a CA file".to_owned(),
            ));
        }
        (auth, Some(ca)) => {
            let mut roots = RootCertStore::empty();
            for certificate in load_certs(ca)? {
                roots.add(certificate).map_err(|error| TlsError::Content {
                    path: ca.clone(),
                    message: error.to_string(),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier.build().map_err(|error| TlsError::Content {
                path: ca.clone(),
                message: error.to_string(),
            })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|error| TlsError::Content {
        path: files.key.clone(),
        message: format!("no usable private key: {error}"),
    })?;
    let mut config = builder
        .with_single_cert(load_certs(&files.cert)?, key)
        .map_err(|error| TlsError::Content {
            path: files.cert.clone(),
            message: error.to_string(),
        })?;
    // gRPC is HTTP/2 only; clients (tonic, grpcurl) insist on negotiating it.
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certificates = CertificateDer::pem_file_iter(path)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|error| TlsError::Content {
            path: path.to_owned(),
            message: format!("not a PEM certificate file: {error}"),
        })?;
    if certificates.is_empty() {
        return Err(TlsError::Content {
            path: path.to_owned(),
            message: "no certificate in the file".to_owned(),
        });
    }
    Ok(certificates)
}
