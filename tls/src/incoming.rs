//! Accept loops that hand connections to tonic's `serve_with_incoming*`.
//!
//! Both set TCP options on each accepted socket: `TCP_NODELAY` (small unary calls) and TCP
//! keepalive, so a peer that vanished without a FIN (power loss, a cut link) has its socket
//! closed by the kernel instead of holding a slot forever. The TLS loop runs each handshake in
//! its own task with a deadline and a bound on handshakes in flight: a client that connects and
//! sends nothing costs one task until the deadline, never a stalled accept loop.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::server::TlsStream;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;

use crate::ServerTls;

/// Socket and handshake settings of a listener.
#[derive(Clone, Copy, Debug)]
pub struct ListenOptions {
    /// Idle time before the kernel starts probing a silent peer (`None` = off).
    pub tcp_keepalive: Option<Duration>,
    /// Longest a TLS handshake may take.
    pub handshake_timeout: Duration,
    /// Most TLS handshakes in progress at once; further connections wait to be accepted.
    pub max_handshakes: usize,
}

impl Default for ListenOptions {
    fn default() -> Self {
        ListenOptions {
            tcp_keepalive: Some(Duration::from_secs(60)),
            handshake_timeout: Duration::from_secs(10),
            max_handshakes: 256,
        }
    }
}

/// Plaintext connections from `listener`, with the socket options applied. A connection is
/// handed on once its first bytes arrive (within `handshake_timeout`): one that connects and
/// stays silent is closed rather than kept open forever (hyper has no such deadline for HTTP/2).
pub fn plain_incoming(
    listener: TcpListener,
    options: ListenOptions,
) -> impl Stream<Item = io::Result<TcpStream>> + Send + 'static {
    let (tx, rx) = mpsc::channel(16);
    let slots = Arc::new(Semaphore::new(options.max_handshakes.max(1)));
    tokio::spawn(async move {
        loop {
            let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                return;
            };
            let accepted = tokio::select! {
                _ = tx.closed() => return,
                accepted = listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    accept_failed(error).await;
                    continue;
                }
            };
            configure(&stream, &options);
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut first = [0u8; 1];
                let spoke =
                    tokio::time::timeout(options.handshake_timeout, stream.peek(&mut first)).await;
                drop(slot);
                match spoke {
                    Ok(Ok(read)) if read > 0 => {
                        let _ = tx.send(Ok(stream)).await;
                    }
                    Ok(_) => {}
                    Err(_) => tracing::debug!(%peer, "connection sent nothing; closed"),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

/// TLS connections from `listener`, each handshaken with the config current at its accept.
pub fn tls_incoming(
    listener: TcpListener,
    tls: Arc<ServerTls>,
    options: ListenOptions,
) -> impl Stream<Item = io::Result<TlsStream<TcpStream>>> + Send + 'static {
    let (tx, rx) = mpsc::channel(16);
    let slots = Arc::new(Semaphore::new(options.max_handshakes.max(1)));
    tokio::spawn(async move {
        loop {
            let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                return;
            };
            let accepted = tokio::select! {
                _ = tx.closed() => return,
                accepted = listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    accept_failed(error).await;
                    continue;
                }
            };
            configure(&stream, &options);
            let acceptor = tls.acceptor();
            let tx = tx.clone();
            tokio::spawn(async move {
                let handshake =
                    tokio::time::timeout(options.handshake_timeout, acceptor.accept(stream)).await;
                drop(slot);
                match handshake {
                    Ok(Ok(stream)) => {
                        let _ = tx.send(Ok(stream)).await;
                    }
                    // A plaintext client, a wrong certificate, a port scan: the peer's problem,
                    // logged at debug so a scan does not flood the log.
                    Ok(Err(error)) => tracing::debug!(%peer, %error, "tls handshake failed"),
                    Err(_) => tracing::debug!(%peer, "tls handshake timed out"),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

fn configure(stream: &TcpStream, options: &ListenOptions) {
    let _ = stream.set_nodelay(true);
    if let Some(idle) = options.tcp_keepalive {
        // Probes every idle/3 after `idle`; the kernel drops the socket after its retry count.
        let keepalive = socket2::TcpKeepalive::new()
            .with_time(idle)
            .with_interval((idle / 3).max(Duration::from_secs(1)));
        let _ = socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive);
    }
}

/// Accept errors are mostly resource exhaustion (too many open files): wait a moment instead
/// of spinning, and keep serving the connections already open.
async fn accept_failed(error: io::Error) {
    tracing::warn!(%error, "accepting a connection failed");
    tokio::time::sleep(Duration::from_millis(100)).await;
}
