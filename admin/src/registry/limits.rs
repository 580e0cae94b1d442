//! Bounds on executor sessions, so one misbehaving or hostile peer cannot exhaust the admin:
//! sessions open in total and per peer IP address (a permit held for the session's life), and
//! the rate of messages one session may send (a token bucket). Each refusal is
//! `RESOURCE_EXHAUSTED` naming the limit and its config key; other sessions are not touched.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tonic::Status;

/// Open sessions, in total and by peer address.
#[derive(Debug, Default)]
pub struct SessionCounts {
    open: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    by_peer: HashMap<Option<IpAddr>, usize>,
}

/// One open session's place in the counts; given back when dropped.
#[derive(Debug)]
pub struct SessionPermit {
    counts: Arc<SessionCounts>,
    peer: Option<IpAddr>,
}

impl SessionCounts {
    /// Takes a place for a session from `peer`, or says which limit is reached.
    pub fn acquire(
        self: &Arc<Self>,
        peer: Option<IpAddr>,
        max_total: usize,
        max_per_peer: usize,
    ) -> Result<SessionPermit, Status> {
        let mut counts = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if counts.total >= max_total {
            return Err(Status::resource_exhausted(format!(
                "this admin has {max_total} executor sessions open (max_sessions); try another admin or later"
            )));
        }
        let from_peer = counts.by_peer.entry(peer).or_default();
        if *from_peer >= max_per_peer {
            return Err(Status::resource_exhausted(format!(
                "{max_per_peer} executor sessions are already open from this address (max_sessions_per_peer)"
            )));
        }
        *from_peer += 1;
        counts.total += 1;
        Ok(SessionPermit {
            counts: Arc::clone(self),
            peer,
        })
    }

    /// Sessions open now.
    pub fn total(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .total
    }
}

impl Drop for SessionPermit {
    fn drop(&mut self) {
        let mut counts = self
            .counts
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        counts.total = counts.total.saturating_sub(1);
        if let Some(from_peer) = counts.by_peer.get_mut(&self.peer) {
            *from_peer = from_peer.saturating_sub(1);
            if *from_peer == 0 {
                counts.by_peer.remove(&self.peer);
            }
        }
    }
}

/// A token bucket of `rate` messages per second with a burst of `rate` (at least 1).
#[derive(Debug)]
pub struct MessageRate {
    rate: f64,
    tokens: f64,
    refilled: Instant,
}

impl MessageRate {
    pub fn new(per_second: u32) -> MessageRate {
        let rate = f64::from(per_second.max(1));
        MessageRate {
            rate,
            tokens: rate,
            refilled: Instant::now(),
        }
    }

    /// Takes one token at `now`; false when the session sends faster than allowed.
    pub fn admit(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.refilled);
        self.refilled = now;
        self.tokens = (self.tokens + elapsed.as_secs_f64() * self.rate).min(self.rate);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The refusal sent when a session exceeds its message rate.
pub fn rate_exceeded(per_second: u32) -> Status {
    Status::resource_exhausted(format!(
        "more than {per_second} session messages per second (session_message_rate); session closed"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn session_permits_count_totals_and_peers_and_are_given_back() {
        let counts = Arc::new(SessionCounts::default());
        let a: Option<IpAddr> = Some([10, 0, 0, 1].into());
        let b: Option<IpAddr> = Some([10, 0, 0, 2].into());
        let first = counts.acquire(a, 3, 2).expect("first");
        let _second = counts.acquire(a, 3, 2).expect("second");
        let refused = counts.acquire(a, 3, 2).expect_err("per peer");
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(refused.message().contains("max_sessions_per_peer"));
        let _third = counts.acquire(b, 3, 2).expect("other peer");
        let refused = counts.acquire(b, 3, 2).expect_err("total");
        assert!(refused.message().contains("max_sessions"));
        drop(first);
        assert_eq!(counts.total(), 2);
        counts.acquire(a, 3, 2).expect("place given back");
    }

    #[test]
    fn message_rate_allows_a_burst_then_refills() {
        let start = Instant::now();
        let mut rate = MessageRate::new(5);
        assert!((0..5).all(|_| rate.admit(start)));
        assert!(!rate.admit(start));
        assert!(rate.admit(start + Duration::from_millis(250)));
    }
}
