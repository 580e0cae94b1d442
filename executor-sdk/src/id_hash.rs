//! A fast hasher for maps keyed by the admin's ids (job ids, log ids).
//!
//! std's default hasher (SipHash) resists keys chosen to collide, which matters when an attacker
//! picks them. These ids are assigned by the admin's database and reach the executor only over an
//! authenticated session, and the runner looks them up several times for every run: at 10 000
//! runs a second SipHash was a visible share of the executor's start path. One multiplication
//! spreads an id well enough, and the rotation in `finish` brings the well-mixed high bits down
//! to the low bits the table indexes by, so ids with a common stride do not share buckets.
//! Keep std's hasher for any map whose keys come from outside (names, addresses, parameters).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// An odd constant with well-spread bits (2^64 divided by the golden ratio).
const SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;

/// Hashes integer ids by one multiplication each; see the module doc for when it fits.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only integer keys use this hasher; bytes are mixed one at a time all the same, so
        // a key of another type still hashes correctly (if slowly).
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(SPREAD);
    }

    fn write_i64(&mut self, value: i64) {
        // Reinterprets the bits: negative ids hash as well as positive ones.
        self.write_u64(value as u64);
    }
}

/// A map keyed by admin-assigned ids.
pub(crate) type IdMap<V> = HashMap<i64, V, BuildHasherDefault<IdHasher>>;
/// A set of admin-assigned ids.
pub(crate) type IdSet = HashSet<i64, BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::*;

    fn hash(id: i64) -> u64 {
        BuildHasherDefault::<IdHasher>::default().hash_one(id)
    }

    /// How many of `ids` land in distinct buckets of a table with 2^`bits` buckets (the table
    /// indexes by the hash's low bits).
    fn distinct_buckets(ids: impl Iterator<Item = i64>, bits: u32) -> usize {
        let mask = (1u64 << bits) - 1;
        let buckets: HashSet<u64> = ids.map(|id| hash(id) & mask).collect();
        buckets.len()
    }

    #[test]
    fn consecutive_ids_fill_the_buckets() {
        // A perfect spread gives 4096; random hashing about 63 % of it.
        assert!(distinct_buckets(1..=4096, 12) > 2_400);
    }

    #[test]
    fn ids_with_a_power_of_two_stride_do_not_share_buckets() {
        // Without the rotation in `finish`, these ids all agree in their low 12 bits
        // and would land in one bucket.
        assert!(distinct_buckets((1..=4096).map(|n| n << 12), 12) > 2_400);
    }

    #[test]
    fn negative_and_positive_ids_hash_apart() {
        assert_ne!(hash(-1), hash(1));
        assert_ne!(hash(0), hash(i64::MIN));
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
