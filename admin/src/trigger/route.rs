//! Route strategies: which address of the group a run goes to, with XXL-JOB's exact semantics
//! (reference §3.1). Everything here is pure over the address list (sorted for auto-registered
//! groups, typed order for manual ones); the only state is the per-job memory of ROUND, LFU and
//! LRU in `RouteState`, kept per admin node and cleared every 24 h as XXL-JOB does.
//!
//! ```text
//! FIRST LAST ROUND RANDOM CONSISTENT_HASH LFU LRU ─▶ RouteState::pick(list) ─▶ address
//! FAILOVER BUSYOVER ─▶ dispatch.rs probes each address in order ─▶ choose_probed(probes)
//! SHARDING_BROADCAST ─▶ one run per address; shard i ─▶ shard_address(list, i)
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use md5::{Digest, Md5};

use crate::model::{JobId, RouteStrategy};

/// Virtual nodes per address on the consistent-hash ring.
const VIRTUAL_NODES: usize = 100;
/// Counters above this restart (ROUND and LFU), as in XXL-JOB.
const COUNTER_LIMIT: u64 = 1_000_000;
/// Per-job route memory is forgotten after a day, as in XXL-JOB.
const MEMORY_TTL_MS: i64 = 24 * 3600 * 1000;

/// Why no address was chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("address list is empty")]
    NoAddress,
    /// FAILOVER, BUSYOVER and SHARDING_BROADCAST are not decided by `pick`.
    #[error("route strategy {0} is not decided by pick")]
    NotPickable(RouteStrategy),
}

/// Per-job memory of the stateful strategies, per admin node.
#[derive(Default)]
pub struct RouteState {
    memory: Mutex<RouteMemory>,
}

#[derive(Default)]
struct RouteMemory {
    /// When the memory was last cleared (epoch ms); 0 = never used.
    cleared_at_ms: i64,
    round_counters: HashMap<i64, u64>,
    /// Per job: use count per address.
    frequency: HashMap<i64, HashMap<String, u64>>,
    /// Per job: addresses from least to most recently used.
    recency: HashMap<i64, Vec<String>>,
}

impl RouteState {
    /// Picks the address for one run of `job` among `addresses` at `now_ms`.
    pub fn pick<'a>(
        &self,
        strategy: RouteStrategy,
        job: JobId,
        addresses: &'a [String],
        now_ms: i64,
    ) -> Result<&'a str, RouteError> {
        if addresses.is_empty() {
            return Err(RouteError::NoAddress);
        }
        let job_id = job.0;
        let index = match strategy {
            RouteStrategy::First => 0,
            RouteStrategy::Last => addresses.len() - 1,
            RouteStrategy::Random => fastrand::usize(..addresses.len()),
            RouteStrategy::ConsistentHash => consistent_hash_index(job_id, addresses),
            RouteStrategy::Round => {
                let mut memory = self.memory(now_ms);
                next_round(&mut memory.round_counters, job_id, addresses.len())
            }
            RouteStrategy::LeastFrequentlyUsed => {
                let mut memory = self.memory(now_ms);
                let counts = memory.frequency.entry(job_id).or_default();
                least_frequently_used(counts, addresses, |len| fastrand::u64(..len))
            }
            RouteStrategy::LeastRecentlyUsed => {
                let mut memory = self.memory(now_ms);
                let order = memory.recency.entry(job_id).or_default();
                least_recently_used(order, addresses)
            }
            RouteStrategy::Failover
            | RouteStrategy::Busyover
            | RouteStrategy::ShardingBroadcast => {
                return Err(RouteError::NotPickable(strategy));
            }
        };
        Ok(&addresses[index])
    }

    /// The memory, cleared first when it is older than a day.
    fn memory(&self, now_ms: i64) -> std::sync::MutexGuard<'_, RouteMemory> {
        let mut memory = self
            .memory
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if now_ms - memory.cleared_at_ms > MEMORY_TTL_MS {
            *memory = RouteMemory {
                cleared_at_ms: now_ms,
                ..RouteMemory::default()
            };
        }
        memory
    }
}

/// Whether jobs may use a strategy: all of them are implemented.
pub fn is_supported(strategy: RouteStrategy) -> bool {
    RouteStrategy::ALL.contains(&strategy)
}

/// XXL-JOB's ROUND: a per-job counter starting at a random offset below 100 (so jobs created
/// together do not all start on the same executor), then +1 per run.
fn next_round(counters: &mut HashMap<i64, u64>, job_id: i64, len: usize) -> usize {
    let counter = counters
        .entry(job_id)
        .or_insert_with(|| fastrand::u64(..100));
    let index = (*counter % len as u64) as usize;
    *counter = if *counter >= COUNTER_LIMIT {
        fastrand::u64(..100)
    } else {
        *counter + 1
    };
    index
}

/// XXL-JOB's hash: MD5 of the UTF-8 bytes, digest bytes 0..3 read as a little-endian u32.
pub fn route_hash(key: &str) -> u32 {
    let digest = Md5::digest(key.as_bytes());
    u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// CONSISTENT_HASH: a ring of 100 virtual nodes per address keyed
/// `hash("SHARD-{address}-NODE-{i}")`; the job's key is `hash(job_id as decimal)`; the first ring
/// entry at or after it wins, wrapping to the first entry. A later address overwrites an equal
/// key, as Java's `TreeMap.put` does. Returns the index into `addresses` (non-empty).
pub fn consistent_hash_index(job_id: i64, addresses: &[String]) -> usize {
    let mut ring: BTreeMap<u32, usize> = BTreeMap::new();
    for (index, address) in addresses.iter().enumerate() {
        for node in 0..VIRTUAL_NODES {
            ring.insert(route_hash(&format!("SHARD-{address}-NODE-{node}")), index);
        }
    }
    let job_key = route_hash(&job_id.to_string());
    ring.range(job_key..)
        .next()
        .or_else(|| ring.iter().next())
        .map_or(0, |(_, index)| *index)
}

/// LEAST_FREQUENTLY_USED: drops counts of vanished addresses, starts new ones (and counters past
/// the limit) at `random_below(len)`, picks the smallest count (ties: list order) and counts it.
fn least_frequently_used(
    counts: &mut HashMap<String, u64>,
    addresses: &[String],
    random_below: impl Fn(u64) -> u64,
) -> usize {
    counts.retain(|address, _| addresses.contains(address));
    for address in addresses {
        let count = counts
            .entry(address.clone())
            .or_insert_with(|| random_below(addresses.len() as u64));
        if *count > COUNTER_LIMIT {
            *count = random_below(addresses.len() as u64);
        }
    }
    let (index, address) = addresses
        .iter()
        .enumerate()
        .min_by_key(|(_, address)| counts.get(*address).copied().unwrap_or(0))
        .unwrap_or((0, &addresses[0]));
    if let Some(count) = counts.get_mut(address) {
        *count += 1;
    }
    index
}

/// LEAST_RECENTLY_USED: `order` runs from least to most recently used; vanished addresses drop
/// out, new ones join at the most-recent end in list order; the least recent one is taken and
/// moved to the most-recent end.
fn least_recently_used(order: &mut Vec<String>, addresses: &[String]) -> usize {
    order.retain(|address| addresses.contains(address));
    for address in addresses {
        if !order.contains(address) {
            order.push(address.clone());
        }
    }
    let eldest = order.remove(0);
    let index = addresses
        .iter()
        .position(|address| *address == eldest)
        .unwrap_or(0);
    order.push(eldest);
    index
}

/// SHARDING_BROADCAST: shard `i` goes to `list[i]`, or `list[0]` when the list got shorter
/// since the shards were created (a retry after an executor left). None for an empty list.
pub fn shard_address(addresses: &[String], shard_index: i32) -> Option<&str> {
    let index = usize::try_from(shard_index).unwrap_or(0);
    addresses
        .get(index)
        .or_else(|| addresses.first())
        .map(String::as_str)
}

/// What one FAILOVER (`Beat`) or BUSYOVER (`IdleBeat`) probe of an address found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeVerdict {
    /// Alive (FAILOVER) or idle for the job (BUSYOVER): this address may take the run.
    Pass,
    /// Answered, but busy with the job (BUSYOVER); the reason it gave.
    Busy(String),
    /// Did not answer: the transport error.
    Error(String),
}

/// One probe of the transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub address: String,
    pub verdict: ProbeVerdict,
}

/// The decision after probing in order: the first passing address, if any.
pub fn choose_probed(probes: &[Probe]) -> Option<&str> {
    probes
        .iter()
        .find(|probe| probe.verdict == ProbeVerdict::Pass)
        .map(|probe| probe.address.as_str())
}

/// The probe transcript for the trigger message: `address: ok|busy (reason)|error (cause)` each.
pub fn probe_transcript(probes: &[Probe]) -> String {
    probes
        .iter()
        .map(|probe| match &probe.verdict {
            ProbeVerdict::Pass => format!("{}: ok", probe.address),
            ProbeVerdict::Busy(reason) => format!("{}: busy ({reason})", probe.address),
            ProbeVerdict::Error(cause) => format!("{}: error ({cause})", probe.address),
        })
        .collect::<Vec<_>>()
        .join("; ")
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

    fn loopback_addresses() -> Vec<String> {
        vec![
            "http://127.0.0.1:9001".into(),
            "http://127.0.0.1:9002".into(),
            "http://127.0.0.1:9003".into(),
        ]
    }

    const NOW: i64 = 1_700_000_000_000;

    #[test]
    fn first_and_last_pick_the_ends() {
        let state = RouteState::default();
        let list = addresses();
        assert_eq!(
            state.pick(RouteStrategy::First, JobId(1), &list, NOW),
            Ok("http://a:1")
        );
        assert_eq!(
            state.pick(RouteStrategy::Last, JobId(1), &list, NOW),
            Ok("http://c:1")
        );
    }

    #[test]
    fn round_cycles_through_every_address_in_order() {
        let state = RouteState::default();
        let list = addresses();
        let picks: Vec<&str> = (0..6)
            .map(|_| {
                state
                    .pick(RouteStrategy::Round, JobId(7), &list, NOW)
                    .expect("pick")
            })
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
            seen.insert(
                state
                    .pick(RouteStrategy::Random, JobId(1), &list, NOW)
                    .expect("pick"),
            );
        }
        assert_eq!(seen.len(), 3);
    }

    #[test]
    fn empty_list_and_probing_strategies_are_not_picked() {
        let state = RouteState::default();
        assert_eq!(
            state.pick(RouteStrategy::First, JobId(1), &[], NOW),
            Err(RouteError::NoAddress)
        );
        for strategy in [
            RouteStrategy::Failover,
            RouteStrategy::Busyover,
            RouteStrategy::ShardingBroadcast,
        ] {
            assert_eq!(
                state.pick(strategy, JobId(1), &addresses(), NOW),
                Err(RouteError::NotPickable(strategy))
            );
        }
    }

    #[test]
    fn every_strategy_is_supported() {
        for strategy in RouteStrategy::ALL {
            assert!(is_supported(*strategy), "{strategy}");
        }
    }

    // Known answers computed independently with Python's hashlib:
    //   d = hashlib.md5(s.encode()).digest(); d[0] | d[1]<<8 | d[2]<<16 | d[3]<<24
    #[test]
    fn route_hash_matches_md5_little_endian_known_answers() {
        assert_eq!(route_hash("1"), 943_901_380);
        assert_eq!(route_hash("42"), 3_905_343_649);
        assert_eq!(route_hash("SHARD-a-NODE-0"), 417_435_878);
    }

    // Known answers from a Python ring built the same way (dict of hash → address, later
    // addresses overwriting, `bisect_left` for the ceiling, wrap to the smallest key):
    // jobs 1..=10 → 9003 9001 9003 9001 9003 9003 9003 9002 9002 9002; job 448 hashes
    // above every ring key (4276646043 > 4274234196) and wraps to the smallest key's 9002.
    #[test]
    fn consistent_hash_matches_the_known_ring_answers() {
        let list = loopback_addresses();
        let expected = [
            (1, 2),
            (2, 0),
            (3, 2),
            (4, 0),
            (5, 2),
            (6, 2),
            (7, 2),
            (8, 1),
            (9, 1),
            (10, 1),
        ];
        for (job_id, index) in expected {
            assert_eq!(consistent_hash_index(job_id, &list), index, "job {job_id}");
        }
        assert_eq!(consistent_hash_index(448, &list), 1, "wrap-around");
    }

    #[test]
    fn consistent_hash_is_stable_and_moves_only_jobs_of_a_removed_address() {
        let state = RouteState::default();
        let list = loopback_addresses();
        for job_id in 1..200 {
            let first = state
                .pick(RouteStrategy::ConsistentHash, JobId(job_id), &list, NOW)
                .expect("pick");
            let again = state
                .pick(RouteStrategy::ConsistentHash, JobId(job_id), &list, NOW)
                .expect("pick");
            assert_eq!(first, again);
            let shorter: Vec<String> = list
                .iter()
                .filter(|a| *a != "http://127.0.0.1:9002")
                .cloned()
                .collect();
            let after = &shorter[consistent_hash_index(job_id, &shorter)];
            if first != "http://127.0.0.1:9002" {
                assert_eq!(after, first, "job {job_id} moved though its address stayed");
            }
        }
    }

    #[test]
    fn least_frequently_used_picks_the_smallest_count_then_counts_it() {
        let list = addresses();
        let mut counts = HashMap::new();
        // New addresses start at random_below(len); here a fixed 0.
        assert_eq!(least_frequently_used(&mut counts, &list, |_| 0), 0);
        assert_eq!(least_frequently_used(&mut counts, &list, |_| 0), 1);
        assert_eq!(least_frequently_used(&mut counts, &list, |_| 0), 2);
        assert_eq!(least_frequently_used(&mut counts, &list, |_| 0), 0);
        assert_eq!(counts.get("http://a:1"), Some(&2));
    }

    #[test]
    fn least_frequently_used_forgets_vanished_addresses_and_seeds_new_ones() {
        let mut counts = HashMap::from([
            ("http://a:1".to_string(), 5),
            ("http://gone:1".to_string(), 0),
        ]);
        let list = vec!["http://a:1".to_string(), "http://new:1".to_string()];
        assert_eq!(least_frequently_used(&mut counts, &list, |_| 1), 1);
        assert!(!counts.contains_key("http://gone:1"));
        assert_eq!(counts.get("http://new:1"), Some(&2));
        counts.insert("http://a:1".to_string(), COUNTER_LIMIT + 1);
        assert_eq!(least_frequently_used(&mut counts, &list, |_| 0), 0);
    }

    #[test]
    fn least_frequently_used_spreads_within_one_of_even() {
        let state = RouteState::default();
        let list = addresses();
        let mut runs: HashMap<&str, u64> = HashMap::new();
        for _ in 0..30 {
            let pick = state
                .pick(RouteStrategy::LeastFrequentlyUsed, JobId(3), &list, NOW)
                .expect("pick");
            *runs.entry(pick).or_default() += 1;
        }
        // Seeds are below 3, so after 30 runs each address has had 30/3 ± 2 runs.
        for address in &list {
            let count = runs.get(address.as_str()).copied().unwrap_or(0);
            assert!((8..=12).contains(&count), "{address} got {count} runs");
        }
    }

    #[test]
    fn least_recently_used_rotates_in_list_order_and_follows_list_changes() {
        let state = RouteState::default();
        let list = addresses();
        let picks: Vec<&str> = (0..4)
            .map(|_| {
                state
                    .pick(RouteStrategy::LeastRecentlyUsed, JobId(9), &list, NOW)
                    .expect("pick")
            })
            .collect();
        assert_eq!(
            picks,
            ["http://a:1", "http://b:1", "http://c:1", "http://a:1"]
        );

        let mut order = vec!["http://b:1".to_string(), "http://c:1".to_string()];
        let changed = vec!["http://c:1".to_string(), "http://d:1".to_string()];
        // b vanished; d is new and joins as most recent: c is the least recent.
        assert_eq!(least_recently_used(&mut order, &changed), 0);
        assert_eq!(order, ["http://d:1", "http://c:1"]);
    }

    #[test]
    fn route_memory_is_cleared_after_a_day() {
        let state = RouteState::default();
        let list = addresses();
        let first = state.pick(RouteStrategy::LeastRecentlyUsed, JobId(9), &list, NOW);
        assert_eq!(first, Ok("http://a:1"));
        let next_day = NOW + MEMORY_TTL_MS + 1;
        let after = state.pick(RouteStrategy::LeastRecentlyUsed, JobId(9), &list, next_day);
        assert_eq!(after, Ok("http://a:1"), "fresh memory starts over");
    }

    #[test]
    fn shard_address_falls_back_to_the_first_when_the_list_shrank() {
        let list = addresses();
        assert_eq!(shard_address(&list, 0), Some("http://a:1"));
        assert_eq!(shard_address(&list, 2), Some("http://c:1"));
        assert_eq!(shard_address(&list[..2], 2), Some("http://a:1"));
        assert_eq!(shard_address(&[], 0), None);
    }

    #[test]
    fn probed_choice_is_the_first_passing_address_with_a_transcript() {
        let probes = vec![
            Probe {
                address: "http://a:1".into(),
                verdict: ProbeVerdict::Error("connection refused".into()),
            },
            Probe {
                address: "http://b:1".into(),
                verdict: ProbeVerdict::Busy("job 3 is running".into()),
            },
            Probe {
                address: "http://c:1".into(),
                verdict: ProbeVerdict::Pass,
            },
        ];
        assert_eq!(choose_probed(&probes), Some("http://c:1"));
        assert_eq!(
            probe_transcript(&probes),
            "http://a:1: error (connection refused); http://b:1: busy (job 3 is running); \
             http://c:1: ok"
        );
        assert_eq!(choose_probed(&probes[..2]), None);
    }
}
