//! Accept loops that hand connections to tonic's `serve_with_incoming*`.
//!
//! Both set TCP options on each accepted socket: `TCP_NODELAY` (small unary calls) and TCP
//! keepalive, so a peer that vanished without a FIN (power loss, a cut link) has its socket
//! closed by the kernel instead of holding a slot forever. The TLS loop runs each handshake in
//! its own task with a deadline and a bound on handshakes in flight: a client that connects and
//! sends nothing costs one task until the deadline, never a stalled accept loop.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
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
    let first_bytes = |stream: TcpStream, _peer| async move {
        let mut first = [0u8; 1];
        match stream.peek(&mut first).await {
            Ok(read) if read > 0 => Some(stream),
            _ => None,
        }
    };
    accept_loop(
        listener,
        options,
        "connection sent nothing; closed",
        first_bytes,
    )
}

/// TLS connections from `listener`, each handshaken with the config current at its accept.
pub fn tls_incoming(
    listener: TcpListener,
    tls: Arc<ServerTls>,
    options: ListenOptions,
) -> impl Stream<Item = io::Result<TlsStream<TcpStream>>> + Send + 'static {
    let handshake = move |stream: TcpStream, peer: SocketAddr| {
        // Taken here, at accept, not when the handshake task first runs.
        let acceptor = tls.acceptor();
        async move {
            match acceptor.accept(stream).await {
                Ok(stream) => Some(stream),
                Err(error) => {
                    // A plaintext client, a wrong certificate, a port scan: the peer's
                    // problem, logged at debug so a scan does not flood the log.
                    tracing::debug!(%peer, %error, "tls handshake failed");
                    None
                }
            }
        }
    };
    accept_loop(listener, options, "tls handshake timed out", handshake)
}

/// The loop both listeners share: accepts while a handshake slot is free, applies the socket
/// options, and runs `admit` (which turns a socket into the connection tonic gets, or `None`
/// when it turned the peer away) in its own task within `handshake_timeout`. `admit` is called
/// in the loop, so what it captures synchronously is as of the accept. Stops when tonic drops
/// the stream.
fn accept_loop<S, A, F>(
    listener: TcpListener,
    options: ListenOptions,
    timed_out: &'static str,
    admit: A,
) -> ReceiverStream<io::Result<S>>
where
    S: Send + 'static,
    A: Fn(TcpStream, SocketAddr) -> F + Send + 'static,
    F: Future<Output = Option<S>> + Send + 'static,
{
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
            let admitting = admit(stream, peer);
            let tx = tx.clone();
            tokio::spawn(async move {
                let admitted = tokio::time::timeout(options.handshake_timeout, admitting).await;
                drop(slot);
                match admitted {
                    Ok(Some(connection)) => {
                        let _ = tx.send(Ok(connection)).await;
                    }
                    Ok(None) => {}
                    Err(_) => tracing::debug!(%peer, "{timed_out}"),
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
