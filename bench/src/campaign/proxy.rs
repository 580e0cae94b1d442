//! A loopback TCP proxy the campaign puts on a link (admin ↔ database, executor ↔ admin) to
//! disturb it from user space: delay every byte, hold every byte (a partition: total loss,
//! the bytes wait as TCP would keep retransmitting them), or cut every open connection (a
//! dropped connection, as a firewall or a restarted load balancer does).
//!
//! A lossy link (`set_loss`) is what a network that loses packets looks like to the programs at
//! both ends of a TCP connection: TCP hides lost and reordered packets and delivers the bytes
//! in order, late: a lost segment waits for its retransmission (a timeout of 200 ms or more,
//! doubled when the retransmission is lost too), and everything behind it waits with it. The
//! proxy draws that per chunk it forwards. Kernel packet loss (`tc netem` in network
//! namespaces) was the first choice; the kernels the campaign runs on here lack netem.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// What the proxy does to the link now.
#[derive(Debug, Default)]
struct Disturbance {
    delay_ms: AtomicU64,
    /// Percent of chunks lost once (then more, each as likely) before they get through.
    loss_pct: AtomicU32,
    partitioned: AtomicBool,
}

/// TCP's shortest retransmission timeout (Linux): a lost segment arrives this late at least.
const RETRANSMISSION_TIMEOUT_MS: u64 = 200;
/// The longest wait a chunk's losses add (the timeout doubles with each loss in a row).
const LONGEST_RETRANSMISSION_MS: u64 = 3_200;

impl Disturbance {
    /// How late a chunk arriving now leaves: the delay in force, with a quarter of it as
    /// jitter when the link is lossy, plus a retransmission timeout per loss in a row.
    fn lateness(&self, rng: &mut fastrand::Rng) -> Duration {
        let delay_ms = self.delay_ms.load(Ordering::SeqCst);
        let loss_pct = self.loss_pct.load(Ordering::SeqCst);
        if loss_pct == 0 {
            return Duration::from_millis(delay_ms);
        }
        let jitter_ms = delay_ms / 4;
        let mut late_ms = delay_ms - jitter_ms + rng.u64(0..=2 * jitter_ms);
        let mut timeout_ms = RETRANSMISSION_TIMEOUT_MS;
        while rng.u32(0..100) < loss_pct && timeout_ms <= LONGEST_RETRANSMISSION_MS {
            late_ms += timeout_ms;
            timeout_ms *= 2;
        }
        Duration::from_millis(late_ms)
    }
}

/// One proxied link; dropping it stops accepting (open connections end with either side).
pub struct FaultProxy {
    address: SocketAddr,
    disturbance: Arc<Disturbance>,
    /// Bumped to cut every open connection.
    cuts: watch::Sender<u64>,
    accept: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards every connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<FaultProxy> {
        FaultProxy::serve(TcpListener::bind("127.0.0.1:0").await?, upstream)
    }

    fn serve(listener: TcpListener, upstream: SocketAddr) -> anyhow::Result<FaultProxy> {
        let address = listener.local_addr()?;
        let disturbance = Arc::new(Disturbance::default());
        let (cuts, _) = watch::channel(0u64);
        let accept = {
            let disturbance = Arc::clone(&disturbance);
            let cuts = cuts.clone();
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let _ = client.set_nodelay(true);
                    let link = Link {
                        disturbance: Arc::clone(&disturbance),
                        cut: cuts.subscribe(),
                    };
                    tokio::spawn(link.forward(client, upstream));
                }
            })
        };
        Ok(FaultProxy {
            address,
            disturbance,
            cuts,
            accept,
        })
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Every byte arrives `delay` late (0: on time).
    pub fn set_delay(&self, delay: Duration) {
        self.disturbance
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// `percent` of the chunks forwarded are lost once or more and arrive a retransmission
    /// timeout (or several) late, with jitter on the delay; 0: none.
    pub fn set_loss(&self, percent: u32) {
        self.disturbance.loss_pct.store(percent, Ordering::SeqCst);
    }

    /// Nothing gets through while on; what was held flows once off.
    pub fn set_partitioned(&self, on: bool) {
        self.disturbance.partitioned.store(on, Ordering::SeqCst);
    }

    /// Closes every open connection at once; new ones are accepted as before.
    pub fn cut_all(&self) {
        self.cuts.send_modify(|generation| *generation += 1);
    }

    /// Back to a clean link.
    pub fn heal(&self) {
        self.set_delay(Duration::ZERO);
        self.set_loss(0);
        self.set_partitioned(false);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut_all();
    }
}

/// One connection's view of the proxy's disturbance.
struct Link {
    disturbance: Arc<Disturbance>,
    cut: watch::Receiver<u64>,
}

impl Link {
    async fn forward(mut self, client: TcpStream, upstream: SocketAddr) {
        // A partition holds new connections too, as a dropped SYN would.
        self.wait_while_partitioned().await;
        let Ok(server) = TcpStream::connect(upstream).await else {
            return;
        };
        let _ = server.set_nodelay(true);
        let (client_read, client_write) = client.into_split();
        let (server_read, server_write) = server.into_split();
        let disturbance = &self.disturbance;
        let both_ways = async {
            tokio::join!(
                pump(client_read, server_write, disturbance),
                pump(server_read, client_write, disturbance)
            )
        };
        self.cut.borrow_and_update();
        tokio::select! {
            _ = both_ways => {}
            // Dropping both halves closes both sockets: each side sees its connection end.
            _ = self.cut.changed() => {}
        }
    }

    async fn wait_while_partitioned(&self) {
        while self.disturbance.partitioned.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Copies one direction: each chunk is stamped when it arrives and written once the delay in
/// force has passed and no partition holds it, in order.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    disturbance: &Disturbance,
) {
    let (chunks, mut arrived) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let read = async move {
        let mut buffer = vec![0u8; 16 * 1024];
        while let Ok(read) = from.read(&mut buffer).await {
            if read == 0
                || chunks
                    .send((Instant::now(), buffer[..read].to_vec()))
                    .is_err()
            {
                break;
            }
        }
    };
    let write = async move {
        let mut rng = fastrand::Rng::new();
        // Bytes leave in order, as TCP delivers them: a chunk never overtakes a later one.
        let mut not_before = Instant::now();
        while let Some((at, chunk)) = arrived.recv().await {
            loop {
                not_before = not_before.max(at + disturbance.lateness(&mut rng));
                tokio::time::sleep_until(not_before).await;
                if !disturbance.partitioned.load(Ordering::SeqCst) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            if to.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(read, write);
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn echo_server() -> anyhow::Result<SocketAddr> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut read, mut write) = socket.split();
                    let _ = tokio::io::copy(&mut read, &mut write).await;
                });
            }
        });
        Ok(address)
    }

    async fn round_trip(stream: &mut TcpStream) -> anyhow::Result<Duration> {
        let started = std::time::Instant::now();
        stream.write_all(b"ping").await?;
        let mut answer = [0u8; 4];
        stream.read_exact(&mut answer).await?;
        anyhow::ensure!(&answer == b"ping", "echoed {answer:?}");
        Ok(started.elapsed())
    }

    #[tokio::test]
    async fn a_delay_slows_a_link_and_a_cut_closes_it() -> anyhow::Result<()> {
        let proxy = FaultProxy::start(echo_server().await?).await?;
        let mut stream = TcpStream::connect(proxy.address()).await?;
        round_trip(&mut stream).await?;
        proxy.set_delay(Duration::from_millis(200));
        // Both directions are delayed: at least two delays per round trip.
        assert!(round_trip(&mut stream).await? >= Duration::from_millis(400));
        proxy.heal();
        proxy.cut_all();
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest));
        assert!(
            read.await?.is_ok_and(|bytes| bytes == 0),
            "the cut closes it"
        );
        let mut fresh = TcpStream::connect(proxy.address()).await?;
        round_trip(&mut fresh).await?;
        Ok(())
    }

    #[test]
    fn a_lossy_link_adds_retransmission_timeouts_to_some_chunks() {
        let disturbance = Disturbance::default();
        disturbance.delay_ms.store(100, Ordering::SeqCst);
        let mut rng = fastrand::Rng::with_seed(1);
        assert_eq!(disturbance.lateness(&mut rng), Duration::from_millis(100));
        disturbance.loss_pct.store(20, Ordering::SeqCst);
        let lateness: Vec<u64> = (0..1_000)
            .map(|_| disturbance.lateness(&mut rng).as_millis() as u64)
            .collect();
        let lost = lateness.iter().filter(|&&ms| ms >= 275).count();
        assert!(
            (120..=280).contains(&lost),
            "{lost} of 1000 chunks lost at 20%"
        );
        assert!(
            lateness.iter().all(|&ms| ms >= 75),
            "jitter is a quarter of the delay"
        );
        let longest = 125 + 200 + 400 + 800 + 1_600 + 3_200;
        assert!(lateness.iter().all(|&ms| ms <= longest));
    }

    #[tokio::test]
    async fn a_partition_holds_the_bytes_until_healed() -> anyhow::Result<()> {
        let proxy = FaultProxy::start(echo_server().await?).await?;
        let mut stream = TcpStream::connect(proxy.address()).await?;
        round_trip(&mut stream).await?;
        proxy.set_partitioned(true);
        stream.write_all(b"ping").await?;
        let mut answer = [0u8; 4];
        let held = tokio::time::timeout(Duration::from_millis(300), stream.read_exact(&mut answer));
        assert!(held.await.is_err(), "nothing gets through a partition");
        proxy.set_partitioned(false);
        tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut answer)).await??;
        assert_eq!(&answer, b"ping");
        Ok(())
    }
}
