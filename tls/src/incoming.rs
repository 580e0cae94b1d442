//! Accept loops that hand connections to tonic's `serve_with_incoming*`.
//!
//! Both set TCP options on each accepted socket: `TCP_NODELAY` (small unary calls) and TCP
//! keepalive, so a peer that vanished without a FIN (power loss, a cut link) has its socket
//! closed by the kernel instead of holding a slot forever. The loop never waits on a client:
//! each handshake runs in its own task with a deadline, and a connection over the per-address
//! or total bound is closed at accept ([`crate::limits`]). So hundreds of clients that connect
//! and send nothing cost a task each until the deadline, never a stalled accept loop, and the
//! next real client is accepted at once.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;

use crate::ServerTls;
use crate::limits::{ConnectionLimits, Refusal, Tracked};

/// Socket, handshake and connection-count settings of a listener.
#[derive(Clone, Copy, Debug)]
pub struct ListenOptions {
    /// Idle time before the kernel starts probing a silent peer (`None` = off).
    pub tcp_keepalive: Option<Duration>,
    /// Longest a TLS handshake (or, in plaintext, the wait for the first bytes) may take.
    pub handshake_timeout: Duration,
    /// Most connections open at once, handshaking or served; further ones are closed at accept.
    pub max_connections: usize,
    /// Most connections open at once from one IP address; further ones are closed at accept.
    pub max_connections_per_address: usize,
    /// Called for each connection closed at accept for a bound (a metric, for instance).
    pub on_refused: Option<fn(Refusal)>,
}

impl Default for ListenOptions {
    fn default() -> Self {
        ListenOptions {
            tcp_keepalive: Some(Duration::from_secs(60)),
            handshake_timeout: Duration::from_secs(10),
            max_connections: 4_096,
            max_connections_per_address: 512,
            on_refused: None,
        }
    }
}

/// Plaintext connections from `listener`, with the socket options applied. A connection is
/// handed on once its first bytes arrive (within `handshake_timeout`): one that connects and
/// stays silent is closed rather than kept open forever (hyper has no such deadline for HTTP/2).
pub fn plain_incoming(
    listener: TcpListener,
    options: ListenOptions,
) -> impl Stream<Item = io::Result<Tracked<TcpStream>>> + Send + 'static {
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
) -> impl Stream<Item = io::Result<Tracked<TlsStream<TcpStream>>>> + Send + 'static {
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

/// The loop both listeners share: accepts, closes a connection over a bound at once, applies
/// the socket options, and runs `admit` (which turns a socket into the connection tonic gets,
/// or `None` when it turned the peer away) in its own task within `handshake_timeout`. `admit`
/// is called in the loop, so what it captures synchronously is as of the accept. The
/// connection keeps its place in the bounds until tonic drops it. Stops when tonic drops the
/// stream.
fn accept_loop<S, A, F>(
    listener: TcpListener,
    options: ListenOptions,
    timed_out: &'static str,
    admit: A,
) -> ReceiverStream<io::Result<Tracked<S>>>
where
    S: Send + 'static,
    A: Fn(TcpStream, SocketAddr) -> F + Send + 'static,
    F: Future<Output = Option<S>> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(16);
    let limits =
        ConnectionLimits::new(options.max_connections, options.max_connections_per_address);
    tokio::spawn(async move {
        loop {
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
            let place = match limits.admit(peer.ip()) {
                Ok(place) => place,
                Err(refusal) => {
                    refused(stream, peer, refusal, &options);
                    continue;
                }
            };
            configure(&stream, &options);
            let admitting = admit(stream, peer);
            let tx = tx.clone();
            tokio::spawn(async move {
                match tokio::time::timeout(options.handshake_timeout, admitting).await {
                    Ok(Some(connection)) => {
                        let _ = tx.send(Ok(Tracked::new(connection, place))).await;
                    }
                    Ok(None) => {}
                    Err(_) => tracing::debug!(%peer, "{timed_out}"),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

/// Closes a connection over a bound. With `SO_LINGER` 0 the close is a reset: the client learns
/// at once, and the socket leaves no `TIME_WAIT` behind on our side.
fn refused(stream: TcpStream, peer: SocketAddr, refusal: Refusal, options: &ListenOptions) {
    let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
    drop(stream);
    tracing::debug!(%peer, key = refusal.key(), "connection over its bound; closed");
    if let Some(on_refused) = options.on_refused {
        on_refused(refusal);
    }
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
