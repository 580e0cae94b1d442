//! Connection floods at the accept loop: hundreds of connections that connect and never finish
//! their handshake (nothing sent, or a TLS ClientHello cut short) used to fill the handshake
//! slots, so the accept loop stopped and real clients timed out until the handshake deadline
//! freed them. Now the loop never waits on a client, a real call answers at once, and
//! connections over the per-address or total bound are reset at accept and counted.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
use xjob_admin::{Config, RunningAdmin};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;
use xjob_tests::TestCa;

/// Half-open connections held during the flood (the count the stall was seen with).
const HALF_OPEN: usize = 400;
/// How long a real call may take while the flood is held: far below the 10 s handshake
/// deadline that used to free the slots, with room for a loaded 2-core machine.
const ANSWER_WITHIN: Duration = Duration::from_secs(3);

/// The start of a TLS record announcing a 512-byte handshake message, then a few of its bytes:
/// the server waits for the rest until its handshake deadline.
const PARTIAL_CLIENT_HELLO: [u8; 9] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc];

/// Connects to `admin` from the loopback address `source` (any 127.0.0.0/8 address works on
/// Linux, which lets one test play several client addresses).
async fn connect_from(source: [u8; 4], admin: SocketAddr) -> anyhow::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((source, 0)))?;
    Ok(socket.connect(admin).await?)
}

/// Holds `count` connections from `source`, every other one sending `partial` and the rest
/// nothing.
async fn half_open(
    source: [u8; 4],
    admin: SocketAddr,
    count: usize,
    partial: &[u8],
) -> anyhow::Result<Vec<TcpStream>> {
    let mut held = Vec::with_capacity(count);
    for index in 0..count {
        let mut stream = connect_from(source, admin).await?;
        if index % 2 == 1 {
            stream.write_all(partial).await?;
        }
        held.push(stream);
    }
    Ok(held)
}

/// A real `JobAdmin` call on a new connection; returns how long it took.
async fn timed_call(url: &str, tls: Option<ClientTlsConfig>) -> anyhow::Result<Duration> {
    let mut endpoint = Endpoint::from_shared(url.to_string())?.timeout(ANSWER_WITHIN);
    if let Some(tls) = tls {
        endpoint = endpoint.tls_config(tls)?;
    }
    let started = Instant::now();
    let call = async {
        let channel = endpoint.connect().await?;
        JobAdminClient::new(channel)
            .list_groups(pb::ListGroupsRequest::default())
            .await?;
        anyhow::Ok(())
    };
    tokio::time::timeout(ANSWER_WITHIN * 2, call).await??;
    Ok(started.elapsed())
}

async fn api_answers_under_a_half_open_flood(tls: bool) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut config = Config::for_tests(dir.path().join("admin-data"));
    let mut client_tls = None;
    if tls {
        let ca = TestCa::new(dir.path(), "accept")?;
        let (cert, key) = ca.issue("admin")?;
        config.tls_cert = Some(cert);
        config.tls_key = Some(key);
        client_tls = Some(
            ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(std::fs::read(ca.ca_path())?)),
        );
    }
    let admin: RunningAdmin = xjob_admin::app::start(config.validate()?).await?;
    let partial: &[u8] = if tls {
        &PARTIAL_CLIENT_HELLO
    } else {
        b"PRI * HTTP/2.0\r\n"
    };
    // The default per-address bound (512) admits them all: the flood is held, not refused.
    let held = half_open([127, 0, 0, 1], admin.local_addr(), HALF_OPEN, partial).await?;
    let took = timed_call(&admin.url(), client_tls.clone()).await?;
    assert!(
        took < ANSWER_WITHIN,
        "a call took {took:?} with {HALF_OPEN} half-open connections (tls: {tls})"
    );
    // And again, on yet another new connection: the loop keeps accepting.
    timed_call(&admin.url(), client_tls).await?;
    drop(held);
    admin.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn the_api_answers_while_400_half_open_connections_are_held() -> anyhow::Result<()> {
    api_answers_under_a_half_open_flood(false).await
}

#[tokio::test]
async fn the_api_answers_while_400_half_open_tls_connections_are_held() -> anyhow::Result<()> {
    api_answers_under_a_half_open_flood(true).await
}

/// `xjob_connections_refused_total{listener="grpc",bound=…}` as rendered now.
fn refused_counted(bound: &str) -> f64 {
    refused_on("grpc", bound)
}

/// `xjob_connections_refused_total{listener=…,bound=…}` as rendered now.
fn refused_on(listener: &str, bound: &str) -> f64 {
    let series =
        format!("xjob_connections_refused_total{{listener=\"{listener}\",bound=\"{bound}\"}} ");
    xjob_admin::metrics::render()
        .lines()
        .find_map(|line| line.strip_prefix(&series)?.parse().ok())
        .unwrap_or(0.0)
}

/// Waits for the admin to close `stream`; returns how long that took.
async fn closed_within(mut stream: TcpStream, limit: Duration) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut buffer = [0u8; 64];
    loop {
        match tokio::time::timeout(limit, stream.read(&mut buffer)).await? {
            Ok(0) | Err(_) => return Ok(started.elapsed()),
            Ok(_) => continue,
        }
    }
}

#[tokio::test]
async fn connections_over_the_per_address_and_total_bounds_are_reset_and_counted()
-> anyhow::Result<()> {
    const PER_ADDRESS: usize = 8;
    const TOTAL: usize = 12;
    let dir = tempfile::tempdir()?;
    let mut config = Config::for_tests(dir.path().join("admin-data"));
    config.max_connections_per_address = PER_ADDRESS;
    config.max_connections = TOTAL;
    // Long enough that the held connections are still open when the next ones arrive.
    config.connection_handshake_timeout = Duration::from_secs(30);
    let admin: RunningAdmin = xjob_admin::app::start(config.validate()?).await?;
    let address = admin.local_addr();
    let (per_address_before, total_before) =
        (refused_counted("per_address"), refused_counted("total"));

    // One address fills its bound; its next connection is reset at once, not after the
    // handshake deadline.
    let held = half_open([127, 0, 0, 2], address, PER_ADDRESS, b"PRI").await?;
    let over = connect_from([127, 0, 0, 2], address).await?;
    let took = closed_within(over, Duration::from_secs(5)).await?;
    assert!(took < Duration::from_secs(2), "closed after {took:?}");
    assert!(refused_counted("per_address") >= per_address_before + 1.0);

    // A second address still gets its connections, up to the total.
    let more = half_open([127, 0, 0, 3], address, TOTAL - PER_ADDRESS, b"").await?;
    let over = connect_from([127, 0, 0, 4], address).await?;
    let took = closed_within(over, Duration::from_secs(5)).await?;
    assert!(took < Duration::from_secs(2), "closed after {took:?}");
    assert!(refused_counted("total") >= total_before + 1.0);

    // Closing connections gives their places back: a real client is served again.
    drop(held);
    drop(more);
    let answered = async {
        loop {
            if timed_call(&admin.url(), None).await.is_ok() {
                return;
            }
            // The admin notices the closed connections as their handshake tasks end.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), answered).await?;
    admin.shutdown().await;
    Ok(())
}

/// The console and the XXL-JOB compatibility listener have the gRPC port's accept-loop bounds:
/// over the per-address bound a connection is reset at accept and counted under its listener,
/// while another address is still served, and a closed connection gives its place back.
#[tokio::test]
async fn the_console_and_xxl_job_listeners_reset_and_count_connections_over_their_bounds()
-> anyhow::Result<()> {
    const PER_ADDRESS: usize = 4;
    let dir = tempfile::tempdir()?;
    let mut config = Config::for_tests(dir.path().join("admin-data"));
    config.max_connections_per_address = PER_ADDRESS;
    config.connection_handshake_timeout = Duration::from_secs(30);
    config.http_listen = Some("127.0.0.1:0".parse()?);
    config.xxl_job_compat_listen = Some("127.0.0.1:0".parse()?);
    let admin: RunningAdmin = xjob_admin::app::start(config.validate()?).await?;
    let listeners = [
        ("console", admin.console_addr(), [127, 0, 0, 5]),
        ("xxl_compat", admin.xxl_compat_addr(), [127, 0, 0, 6]),
    ];
    for (listener, address, source) in listeners {
        let address = address.ok_or_else(|| anyhow::anyhow!("{listener} is not listening"))?;
        let before = refused_on(listener, "per_address");
        let held = half_open(source, address, PER_ADDRESS, b"").await?;
        let over = connect_from(source, address).await?;
        let took = closed_within(over, Duration::from_secs(5)).await?;
        assert!(
            took < Duration::from_secs(2),
            "{listener}: closed after {took:?}"
        );
        assert!(
            refused_on(listener, "per_address") >= before + 1.0,
            "{listener}: the refusal was not counted"
        );
        // Another address is served while this one is at its bound.
        http_answers([127, 0, 0, 7], address).await?;
        // Closed connections give their places back.
        drop(held);
        let served = async {
            while http_answers(source, address).await.is_err() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), served).await?;
    }
    admin.shutdown().await;
    Ok(())
}

/// An HTTP/1.1 request from `source` gets an HTTP answer (any status).
async fn http_answers(source: [u8; 4], address: SocketAddr) -> anyhow::Result<()> {
    let mut stream = connect_from(source, address).await?;
    let request = format!("GET / HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut head = [0u8; 8];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut head)).await??;
    anyhow::ensure!(head.starts_with(b"HTTP/1."), "not an HTTP answer: {head:?}");
    Ok(())
}
