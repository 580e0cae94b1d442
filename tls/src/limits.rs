//! Bounds on open connections, per client IP address and in total, checked at accept.
//!
//! A connection takes its place when accepted (before its handshake: a client that connects
//! and sends nothing is what the bound is for) and gives it back when dropped, whether it was
//! turned away at the handshake or served to the end. Over a bound, the accept loop closes the
//! new connection at once instead of queueing it, so one address opening hundreds of
//! connections can neither stall the loop nor exhaust the process's file descriptors.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

/// Why a connection was closed at accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Its address already had `max_connections_per_address` open.
    PerAddress,
    /// The listener already had `max_connections` open.
    Total,
}

impl Refusal {
    /// Both kinds, for metrics that show every label from the start.
    pub const ALL: [Refusal; 2] = [Refusal::PerAddress, Refusal::Total];

    /// The config key of the bound that was hit.
    pub fn key(self) -> &'static str {
        match self {
            Refusal::PerAddress => "max_connections_per_address",
            Refusal::Total => "max_connections",
        }
    }

    /// A short label (`per_address`, `total`).
    pub fn label(self) -> &'static str {
        match self {
            Refusal::PerAddress => "per_address",
            Refusal::Total => "total",
        }
    }
}

#[derive(Default)]
struct Counts {
    total: usize,
    per_address: HashMap<IpAddr, usize>,
}

/// The open connections of one listener.
#[derive(Clone)]
pub(crate) struct ConnectionLimits {
    max_total: usize,
    max_per_address: usize,
    counts: Arc<Mutex<Counts>>,
}

impl ConnectionLimits {
    pub(crate) fn new(max_total: usize, max_per_address: usize) -> ConnectionLimits {
        ConnectionLimits {
            max_total: max_total.max(1),
            max_per_address: max_per_address.max(1),
            counts: Arc::default(),
        }
    }

    /// A place for a new connection from `address`, or why there is none.
    pub(crate) fn admit(&self, address: IpAddr) -> Result<Place, Refusal> {
        // An IPv4 client on a dual-stack socket counts as its IPv4 address.
        let address = address.to_canonical();
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if counts.total >= self.max_total {
            return Err(Refusal::Total);
        }
        let open = counts.per_address.entry(address).or_default();
        if *open >= self.max_per_address {
            return Err(Refusal::PerAddress);
        }
        *open += 1;
        counts.total += 1;
        Ok(Place {
            address,
            counts: Arc::clone(&self.counts),
        })
    }
}

/// One connection's place in the bounds, given back on drop.
pub(crate) struct Place {
    address: IpAddr,
    counts: Arc<Mutex<Counts>>,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts.total = counts.total.saturating_sub(1);
        if let Some(open) = counts.per_address.get_mut(&self.address) {
            *open -= 1;
            if *open == 0 {
                // Addresses come and go; the map holds only those with connections open.
                counts.per_address.remove(&self.address);
            }
        }
    }
}

/// A served connection holding its place in the bounds until tonic drops it. Reads, writes and
/// connection info (peer address, client certificates) are the inner stream's.
pub struct Tracked<S> {
    inner: S,
    _place: Place,
}

impl<S> Tracked<S> {
    pub(crate) fn new(inner: S, place: Place) -> Tracked<S> {
        Tracked {
            inner,
            _place: place,
        }
    }

    /// The connection itself.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: Connected> Connected for Tracked<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_bounded_per_address_and_in_total_and_given_back() {
        let limits = ConnectionLimits::new(3, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = limits.admit(a).unwrap();
        let _second = limits.admit(a).unwrap();
        assert_eq!(limits.admit(a).err(), Some(Refusal::PerAddress));
        let _third = limits.admit(b).unwrap();
        assert_eq!(limits.admit(b).err(), Some(Refusal::Total));
        drop(first);
        // The mapped form of `a` is the same client.
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert!(limits.admit(mapped).is_ok());
    }
}
