//! A fast hasher for maps keyed by the admin's ids (job ids, log ids).
//!
//! The runner looks ids up several times for every run, and at 10 000 runs a second std's
//! default hasher (SipHash) was a visible share of the executor's start path. An id is one
//! integer, so one wide multiplication mixes it: the 128-bit product of the id and a constant,
//! its two halves folded together by XOR. The high half depends on every bit of the id, so ids
//! that differ only in their high bits, or share a stride, still land in different buckets (a
//! plain 64-bit product spreads a bit only upwards). Each map draws its own random seed, mixed
//! in before the multiplication, so a caller that can choose ids (a local process sending runs
//! to an executor without an access token) cannot work out a set that piles into one bucket.
//! Keep std's hasher for maps keyed by anything longer than an integer.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};

/// An odd constant with well-spread bits (2^64 divided by the golden ratio).
const SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;

/// Builds the hashers of one map: each map gets its own random seed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IdHashBuilder {
    seed: u64,
}

impl Default for IdHashBuilder {
    fn default() -> Self {
        // std's random keys (drawn once per thread, then stepped for each new state).
        Self {
            seed: RandomState::new().hash_one(SPREAD),
        }
    }
}

impl BuildHasher for IdHashBuilder {
    type Hasher = IdHasher;

    fn build_hasher(&self) -> IdHasher {
        IdHasher(self.seed)
    }
}

/// Hashes integer ids by one wide multiplication each; see the module doc for when it fits.
#[derive(Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only integer keys use this hasher; bytes are mixed one at a time all the same, so
        // a key of another type still hashes correctly (if slowly).
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = folded_multiply(self.0 ^ value, SPREAD);
    }

    fn write_i64(&mut self, value: i64) {
        // Reinterprets the bits: negative ids hash as well as positive ones.
        self.write_u64(value as u64);
    }
}

/// The two halves of the 128-bit product, folded together.
fn folded_multiply(left: u64, right: u64) -> u64 {
    let product = u128::from(left) * u128::from(right);
    (product as u64) ^ ((product >> 64) as u64)
}

/// A map keyed by admin-assigned ids.
pub(crate) type IdMap<V> = HashMap<i64, V, IdHashBuilder>;
/// A set of admin-assigned ids.
pub(crate) type IdSet = HashSet<i64, IdHashBuilder>;

#[cfg(test)]
mod tests {
    use super::*;

    /// How many of `ids` land in distinct buckets of a table with 2^`bits` buckets (the table
    /// indexes by the hash's low bits), hashed as one map hashes them.
    fn distinct_buckets(ids: impl Iterator<Item = i64>, bits: u32) -> usize {
        let builder = IdHashBuilder::default();
        let mask = (1u64 << bits) - 1;
        let buckets: HashSet<u64> = ids.map(|id| builder.hash_one(id) & mask).collect();
        buckets.len()
    }

    #[test]
    fn consecutive_ids_fill_the_buckets() {
        // A perfect spread gives 4096; random hashing about 63 % of it.
        assert!(distinct_buckets(1..=4096, 12) > 2_400);
    }

    #[test]
    fn ids_with_a_power_of_two_stride_do_not_share_buckets() {
        // These ids all agree in their low 12 bits.
        assert!(distinct_buckets((1..=4096).map(|n| n << 12), 12) > 2_400);
    }

    #[test]
    fn ids_that_differ_only_in_their_high_bits_do_not_share_buckets() {
        // A plain 64-bit product leaves the low 51 bits of these ids' hashes equal.
        assert!(distinct_buckets((1..4096).map(|n| n << 51), 12) > 2_400);
    }

    #[test]
    fn each_map_hashes_with_its_own_seed() {
        let (first, second) = (IdHashBuilder::default(), IdHashBuilder::default());
        let ids = 1..=64_i64;
        let differ = ids
            .filter(|id| first.hash_one(id) != second.hash_one(id))
            .count();
        assert_eq!(differ, 64, "two maps hash the same ids alike");
    }

    #[test]
    fn negative_and_positive_ids_hash_apart() {
        let builder = IdHashBuilder::default();
        assert_ne!(builder.hash_one(-1_i64), builder.hash_one(1_i64));
        assert_ne!(builder.hash_one(0_i64), builder.hash_one(i64::MIN));
    }

    #[test]
    fn maps_keyed_by_ids_behave_as_maps() {
        let mut runs: IdMap<&str> = IdMap::default();
        runs.insert(7, "queued");
        runs.insert(7 << 40, "running");
        assert_eq!(runs.get(&7), Some(&"queued"));
        assert_eq!(runs.remove(&(7 << 40)), Some("running"));
        assert_eq!(runs.len(), 1);
    }
}
