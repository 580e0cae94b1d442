//! Loopback ports for the servers a test or a benchmark starts, and a proxy that delays what
//! one side sends.

/// A loopback port that was free a moment ago (bound, then released).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `http://127.0.0.1:PORT` on a port nobody listens on: an admin that is down.
pub fn unused_address() -> anyhow::Result<String> {
    Ok(format!("http://127.0.0.1:{}", free_port()?))
}

/// A loopback TCP proxy that delivers what its clients send `delay` late (the answers come back
/// at once): an executor that reaches its admin through it has its registration, heartbeats and
/// run results arrive late, while the admin still calls the executor directly. Dropping it
/// stops accepting; open connections end when either side closes.
pub struct LatencyProxy {
    address: std::net::SocketAddr,
    accept: tokio::task::JoinHandle<()>,
}

impl LatencyProxy {
    /// Listens on a free loopback port and forwards every connection to `upstream`.
    pub async fn start(
        upstream: std::net::SocketAddr,
        delay: std::time::Duration,
    ) -> anyhow::Result<LatencyProxy> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(forward(client, upstream, delay));
            }
        });
        Ok(LatencyProxy { address, accept })
    }

    /// `http://127.0.0.1:PORT`, for an executor's admin address.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }
}

impl Drop for LatencyProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// One proxied connection: client → upstream delayed, upstream → client as it comes.
async fn forward(
    client: tokio::net::TcpStream,
    upstream: std::net::SocketAddr,
    delay: std::time::Duration,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
        return;
    };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    // Each chunk is stamped when it arrives and written once its delay has passed, in order.
    let (chunks, mut delayed) =
        tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let read_client = async move {
        let mut buffer = vec![0u8; 16 * 1024];
        while let Ok(read) = client_read.read(&mut buffer).await {
            if read == 0
                || chunks
                    .send((tokio::time::Instant::now(), buffer[..read].to_vec()))
                    .is_err()
            {
                break;
            }
        }
    };
    let write_server = async move {
        while let Some((arrived, chunk)) = delayed.recv().await {
            tokio::time::sleep_until(arrived + delay).await;
            if server_write.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = server_write.shutdown().await;
    };
    let answers = async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::join!(read_client, write_server, answers);
}
