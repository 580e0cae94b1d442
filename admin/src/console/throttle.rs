//! Failed console logins, counted three ways on this admin, so guessing passwords stays slow
//! however an attacker spreads the guesses:
//!
//! - per user name: 5 failures in a row lock the name for a minute, whatever the password;
//! - per client address: 20 failures in a row lock the address for a minute, whatever the name;
//! - in all: at most 5 failures a second (bursts of 20) on the whole console; beyond that every
//!   login waits until the budget refills (a second or so).
//!
//! An attempt counts as failed from the moment it is admitted until it succeeds, so attempts
//! sent in parallel count too. The per-name and per-address tables are bounded: when one is
//! full, the entry that failed longest ago and holds no lock makes room. A lock is never
//! forgotten; a table full of locks (only possible above the global rate for a minute) refuses
//! further attempts until locks expire.

use super::i18n::{Lang, tf};
use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The bounds of a [`LoginThrottle`].
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Failures of one name in a row that lock it.
    pub name_failures: u32,
    /// Failures from one client address in a row that lock it.
    pub address_failures: u32,
    /// How long a lock lasts.
    pub lockout: Duration,
    /// Names (and, separately, addresses) tracked at most.
    pub tracked: usize,
    /// Failures a second allowed on the whole console, on average.
    pub failures_per_second: f64,
    /// Failures allowed at once before the average applies.
    pub failure_burst: f64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            name_failures: 5,
            address_failures: 20,
            lockout: Duration::from_secs(60),
            tracked: 10_000,
            failures_per_second: 5.0,
            failure_burst: 20.0,
        }
    }
}

/// Why a login attempt is refused before its password is checked, with the seconds to wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Name(u64),
    Address(u64),
    Everyone(u64),
}

impl Refusal {
    /// The message the login page shows.
    pub fn message(self, lang: Lang) -> String {
        let (key, seconds) = match self {
            Refusal::Name(seconds) => ("login.too_many_name", seconds),
            Refusal::Address(seconds) => ("login.too_many_address", seconds),
            Refusal::Everyone(seconds) => ("login.too_many_all", seconds),
        };
        tf(lang, key, &[&seconds])
    }
}

/// Failed logins on this admin (in memory; see the module comment).
pub struct LoginThrottle {
    limits: Limits,
    state: Mutex<State>,
}

struct State {
    names: Tracker<String>,
    addresses: Tracker<IpAddr>,
    budget: Budget,
}

impl Default for LoginThrottle {
    fn default() -> LoginThrottle {
        LoginThrottle::new(Limits::default())
    }
}

impl LoginThrottle {
    pub fn new(limits: Limits) -> LoginThrottle {
        let now = Instant::now();
        LoginThrottle {
            limits,
            state: Mutex::new(State {
                names: Tracker::default(),
                addresses: Tracker::default(),
                budget: Budget {
                    tokens: limits.failure_burst,
                    at: now,
                },
            }),
        }
    }

    /// Admits a login of `name` from `client`, counting it as failed until [`Self::succeeded`],
    /// or says why not.
    pub fn attempt(&self, name: &str, client: IpAddr) -> Result<(), Refusal> {
        let limits = &self.limits;
        let now = Instant::now();
        let mut state = self.lock();
        if let Some(left) = state.names.locked_for(name, now) {
            return Err(Refusal::Name(seconds(left)));
        }
        if let Some(left) = state.addresses.locked_for(&client, now) {
            return Err(Refusal::Address(seconds(left)));
        }
        state.budget.take(limits, now).map_err(Refusal::Everyone)?;
        let full = Refusal::Everyone(seconds(limits.lockout));
        let name_counted = state
            .names
            .fail(name.to_string(), now, limits, limits.name_failures);
        name_counted.map_err(|Full| full)?;
        let address_counted = state
            .addresses
            .fail(client, now, limits, limits.address_failures);
        address_counted.map_err(|Full| full)
    }

    /// The attempt succeeded: its name and address start afresh, and it leaves the budget.
    pub fn succeeded(&self, name: &str, client: IpAddr) {
        let mut state = self.lock();
        state.names.entries.remove(name);
        state.addresses.entries.remove(&client);
        state.budget.refund(&self.limits);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Whole seconds to wait, at least 1.
fn seconds(left: Duration) -> u64 {
    left.as_secs_f64().ceil().max(1.0) as u64
}

/// Failures in a row per key, bounded.
struct Tracker<K> {
    entries: HashMap<K, Failures>,
}

impl<K> Default for Tracker<K> {
    fn default() -> Self {
        Tracker {
            entries: HashMap::new(),
        }
    }
}

struct Failures {
    count: u32,
    locked_until: Option<Instant>,
    last: Instant,
}

impl Failures {
    fn locked(&self, now: Instant) -> bool {
        self.locked_until.is_some_and(|until| until > now)
    }
}

/// The table is full of locks.
struct Full;

impl<K: Hash + Eq + Clone> Tracker<K> {
    /// Time left on `key`'s lock, if it is locked.
    fn locked_for<Q>(&self, key: &Q, now: Instant) -> Option<Duration>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let until = self.entries.get(key)?.locked_until?;
        until
            .checked_duration_since(now)
            .filter(|left| !left.is_zero())
    }

    /// Counts a failure of `key`; the `limit`-th in a row locks it.
    fn fail(&mut self, key: K, now: Instant, limits: &Limits, limit: u32) -> Result<(), Full> {
        if !self.entries.contains_key(&key)
            && self.entries.len() >= limits.tracked
            && !self.evict_oldest_unlocked(now)
        {
            return Err(Full);
        }
        let entry = self.entries.entry(key).or_insert(Failures {
            count: 0,
            locked_until: None,
            last: now,
        });
        entry.count += 1;
        entry.last = now;
        if entry.count >= limit {
            entry.count = 0;
            entry.locked_until = Some(now + limits.lockout);
        }
        Ok(())
    }

    /// Removes the entry without a lock whose last failure is oldest; false when all are
    /// locked. A scan: it runs only when the table is full, at most at the global rate.
    fn evict_oldest_unlocked(&mut self, now: Instant) -> bool {
        let oldest = self
            .entries
            .iter()
            .filter(|(_, failures)| !failures.locked(now))
            .min_by_key(|(_, failures)| failures.last)
            .map(|(key, _)| key.clone());
        oldest.and_then(|key| self.entries.remove(&key)).is_some()
    }
}

/// A token bucket of failures for the whole console.
struct Budget {
    tokens: f64,
    at: Instant,
}

impl Budget {
    /// Takes one failure from the budget, or says how many seconds until one is free.
    fn take(&mut self, limits: &Limits, now: Instant) -> Result<(), u64> {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens =
            (self.tokens + elapsed * limits.failures_per_second).min(limits.failure_burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            let wait = (1.0 - self.tokens) / limits.failures_per_second;
            Err(seconds(Duration::from_secs_f64(wait)))
        }
    }

    fn refund(&mut self, limits: &Limits) {
        self.tokens = (self.tokens + 1.0).min(limits.failure_burst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    /// No global budget in the way, for tests of the tables.
    fn generous() -> Limits {
        Limits {
            failures_per_second: 1e9,
            failure_burst: 1e9,
            ..Limits::default()
        }
    }

    #[test]
    fn five_failures_lock_a_name_and_success_clears_it() {
        let throttle = LoginThrottle::new(generous());
        for attempt in 0..5 {
            assert_eq!(throttle.attempt("ann", client(attempt)), Ok(()));
        }
        assert!(matches!(
            throttle.attempt("ann", client(9)),
            Err(Refusal::Name(_))
        ));
        assert_eq!(throttle.attempt("bob", client(9)), Ok(()));
        throttle.succeeded("bob", client(9));
        let fresh = LoginThrottle::new(generous());
        for _ in 0..4 {
            fresh.attempt("ann", client(1)).expect("admitted");
        }
        fresh.succeeded("ann", client(1));
        for _ in 0..4 {
            fresh.attempt("ann", client(1)).expect("counted afresh");
        }
    }

    #[test]
    fn an_address_is_locked_after_twenty_failures_whatever_the_names() {
        let throttle = LoginThrottle::new(generous());
        for index in 0..20 {
            let name = format!("junk-{index}");
            assert_eq!(throttle.attempt(&name, client(1)), Ok(()));
        }
        assert!(matches!(
            throttle.attempt("ann", client(1)),
            Err(Refusal::Address(_))
        ));
        assert_eq!(throttle.attempt("ann", client(2)), Ok(()));
    }

    #[test]
    fn a_flood_of_names_evicts_unlocked_entries_but_never_a_lock() {
        let throttle = LoginThrottle::new(Limits {
            tracked: 10,
            ..generous()
        });
        for _ in 0..5 {
            throttle.attempt("victim", client(1)).expect("admitted");
        }
        for index in 0..1000u32 {
            let [.., a, b] = index.to_be_bytes();
            let name = format!("junk-{index}");
            let _ = throttle.attempt(&name, IpAddr::from([10, 1, a, b]));
        }
        assert!(matches!(
            throttle.attempt("victim", client(2)),
            Err(Refusal::Name(_))
        ));
        assert!(throttle.lock().names.entries.len() <= 10);
    }

    #[test]
    fn a_table_full_of_locks_refuses_new_names() {
        let throttle = LoginThrottle::new(Limits {
            tracked: 2,
            name_failures: 1,
            ..generous()
        });
        throttle.attempt("a", client(1)).expect("admitted");
        throttle.attempt("b", client(2)).expect("admitted");
        assert!(matches!(
            throttle.attempt("c", client(3)),
            Err(Refusal::Everyone(_))
        ));
    }

    #[test]
    fn the_console_wide_budget_refuses_beyond_its_burst() {
        let throttle = LoginThrottle::new(Limits {
            failures_per_second: 0.001,
            failure_burst: 3.0,
            ..Limits::default()
        });
        for index in 0..3 {
            throttle
                .attempt(&format!("n{index}"), client(index))
                .expect("within the burst");
        }
        assert!(matches!(
            throttle.attempt("n9", client(9)),
            Err(Refusal::Everyone(_))
        ));
    }
}
