//! Route strategies: which address of the group a run goes to. Pure over the address list
//! (sorted for auto-registered groups, typed order for manual ones); per-job state for ROUND
//! lives in `RouteState`, as XXL-JOB keeps it per admin node.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::model::RouteStrategy;

/// Per-job counters for stateful strategies.
#[derive(Default)]
pub struct RouteState {
    round_counters: Mutex<HashMap<i64, u64>>,
}

/// Why no address was chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("address list is empty")]
    NoAddress,
    #[error("route strategy {0} is not implemented yet")]
    Unsupported(RouteStrategy),
}

impl RouteState {
    /// Picks the address for one run of `job_id` among `addresses`.
    pub fn pick<'a>(
        &self,
        strategy: RouteStrategy,
        job_id: i64,
        addresses: &'a [String],
    ) -> Result<&'a str, RouteError> {
        if addresses.is_empty() {
            return Err(RouteError::NoAddress);
        }
        let index = match strategy {
            RouteStrategy::First => 0,
            RouteStrategy::Last => addresses.len() - 1,
            RouteStrategy::Random => fastrand::usize(..addresses.len()),
            RouteStrategy::Round => self.next_round(job_id, addresses.len()),
            other => return Err(RouteError::Unsupported(other)),
        };
        Ok(&addresses[index])
    }

    /// XXL-JOB's ROUND: a per-job counter starting at a random offset below 100 (so jobs
    /// created together do not all start on the same executor), then +1 per run.
    fn next_round(&self, job_id: i64, len: usize) -> usize {
        let mut counters = self
            .round_counters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let counter = counters
            .entry(job_id)
            .or_insert_with(|| fastrand::u64(..100));
        let index = (*counter % len as u64) as usize;
        *counter = if *counter >= 1_000_000 {
            fastrand::u64(..100)
        } else {
            *counter + 1
        };
        index
    }
}

/// Whether `pick` supports a strategy (the others arrive with the next release).
pub fn is_supported(strategy: RouteStrategy) -> bool {
    matches!(
        strategy,
        RouteStrategy::First | RouteStrategy::Last | RouteStrategy::Round | RouteStrategy::Random
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addresses() -> Vec<String> {
        vec![
            "http://a:1".into(),
            "http://b:1".into(),
            "http://c:1".into(),
        ]
    }

    #[test]
    fn first_and_last_pick_the_ends() {
        let state = RouteState::default();
        let list = addresses();
        assert_eq!(state.pick(RouteStrategy::First, 1, &list), Ok("http://a:1"));
        assert_eq!(state.pick(RouteStrategy::Last, 1, &list), Ok("http://c:1"));
    }

    #[test]
    fn round_cycles_through_every_address_in_order() {
        let state = RouteState::default();
        let list = addresses();
        let picks: Vec<&str> = (0..6)
            .map(|_| state.pick(RouteStrategy::Round, 7, &list).expect("pick"))
            .collect();
        let start = list
            .iter()
            .position(|a| a == picks[0])
            .expect("known address");
        for (offset, pick) in picks.iter().enumerate() {
            assert_eq!(*pick, list[(start + offset) % list.len()]);
        }
    }

    #[test]
    fn random_stays_within_the_list_and_reaches_every_address() {
        let state = RouteState::default();
        let list = addresses();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..300 {
            seen.insert(state.pick(RouteStrategy::Random, 1, &list).expect("pick"));
        }
        assert_eq!(seen.len(), 3);
    }

    #[test]
    fn empty_list_and_unsupported_strategies_are_errors() {
        let state = RouteState::default();
        assert_eq!(
            state.pick(RouteStrategy::First, 1, &[]),
            Err(RouteError::NoAddress)
        );
        assert_eq!(
            state.pick(RouteStrategy::Failover, 1, &addresses()),
            Err(RouteError::Unsupported(RouteStrategy::Failover))
        );
    }
}
