//! Loopback ports for the servers a test or a benchmark starts.

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
