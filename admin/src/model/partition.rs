//! Partitioned scheduling on the database servers: which partitions an admin takes or releases.
//!
//! Jobs fall in [`PARTITIONS`] partitions by `job_id mod PARTITIONS`, a pure function, so a job
//! never moves. Each partition is owned by at most one admin `(node, epoch)`; a schedule round
//! plans only the jobs of its admin's partitions (`schedule::scan`). This module is the pure
//! rule of the share; the store reads the rows, applies it and writes with compare-and-set.

use std::collections::HashSet;

/// Number of partitions. Part of the schema (`xjob_partition` holds one row per partition):
/// changing it needs a migration.
pub const PARTITIONS: i64 = 256;

/// The partition of a job.
pub fn partition_of(job_id: i64) -> i64 {
    job_id.rem_euclid(PARTITIONS)
}

/// One `xjob_partition` row as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRow {
    pub part_no: i64,
    /// `None` = free.
    pub owner: Option<(String, i64)>,
}

/// A node whose lease holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveNode {
    pub node_id: String,
    pub epoch: i64,
    /// It rebalanced recently (`xjob_node.partitions_seen_ms`): an admin that plans by
    /// partitions and is alive. Not one of an older release (it plans under the global lock),
    /// nor one the liveness watch found dead (its mark is cleared with its partitions).
    pub active: bool,
}

/// What one admin does to the partition rows this round.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rebalance {
    /// Partitions to take, each with the owner it had when read (the compare-and-set value).
    pub take: Vec<PartitionRow>,
    /// Own partitions to release (above this admin's share).
    pub release: Vec<i64>,
    /// Own partitions after the moves (those taken only if the write wins).
    pub keep: Vec<i64>,
}

/// Decides an admin's moves. The share is `ceil(PARTITIONS / admins)` over the active admins
/// (and `me`). A partition is free when it has no owner or its owner `(node, epoch)`'s lease
/// does not hold. This admin takes free ones (first in [`spread_rank`] order) up to its share
/// and releases its last ones in that order above its share, but only when nothing is free:
/// while partitions are free, those under their share take them, and releasing then would
/// only move work around.
pub fn rebalance(rows: &[PartitionRow], live: &[LiveNode], me: (&str, i64)) -> Rebalance {
    let live_owner: HashSet<(&str, i64)> = live
        .iter()
        .map(|node| (node.node_id.as_str(), node.epoch))
        .collect();
    let is_free = |row: &PartitionRow| match &row.owner {
        None => true,
        Some((node, epoch)) => !live_owner.contains(&(node.as_str(), *epoch)),
    };
    let others = live
        .iter()
        .filter(|node| node.active && (node.node_id.as_str(), node.epoch) != me)
        .count() as i64;
    let admins = others + 1;
    let share = (PARTITIONS + admins - 1) / admins;
    let mut mine: Vec<i64> = rows
        .iter()
        .filter(|row| row.owner.as_ref().map(|(n, e)| (n.as_str(), *e)) == Some(me))
        .map(|row| row.part_no)
        .collect();
    mine.sort_unstable_by_key(|part_no| spread_rank(*part_no));
    let mut free: Vec<&PartitionRow> = rows.iter().filter(|row| is_free(row)).collect();
    free.sort_unstable_by_key(|row| spread_rank(row.part_no));
    let own = mine.len() as i64;
    let mut decided = Rebalance::default();
    if own < share {
        let wanted = (share - own) as usize;
        decided.take = free.into_iter().take(wanted).cloned().collect();
        decided.keep = mine;
        decided
            .keep
            .extend(decided.take.iter().map(|row| row.part_no));
        decided.keep.sort_unstable();
    } else if own > share && free.is_empty() {
        let keep = share as usize;
        decided.release = mine[keep..].to_vec();
        decided.keep = mine[..keep].to_vec();
        decided.release.sort_unstable();
        decided.keep.sort_unstable();
    } else {
        decided.keep = mine;
        decided.keep.sort_unstable();
    }
    decided
}

/// The order in which partitions are taken: the partition number's 8 bits reversed (0, 128,
/// 64, 192, 32, …). Job ids are dense and mostly small, and the partition is `id mod 256`, so
/// with taking in numeric order the admin that settles last could own only partitions above
/// every job id of a small installation and plan nothing. In this order any share is spread
/// evenly over the range: each admin owns about its fraction of every stretch of ids.
pub fn spread_rank(part_no: i64) -> u8 {
    (part_no.rem_euclid(PARTITIONS) as u8).reverse_bits()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(owners: impl Fn(i64) -> Option<(&'static str, i64)>) -> Vec<PartitionRow> {
        (0..PARTITIONS)
            .map(|part_no| PartitionRow {
                part_no,
                owner: owners(part_no).map(|(n, e)| (n.to_string(), e)),
            })
            .collect()
    }

    fn node(node_id: &str, epoch: i64, active: bool) -> LiveNode {
        LiveNode {
            node_id: node_id.to_string(),
            epoch,
            active,
        }
    }

    #[test]
    fn a_lone_admin_takes_every_free_partition() {
        let decided = rebalance(&rows(|_| None), &[node("a", 1, true)], ("a", 1));
        assert_eq!(decided.take.len(), 256);
        assert_eq!(decided.keep, (0..256).collect::<Vec<_>>());
        assert!(decided.release.is_empty());
    }

    #[test]
    fn the_owner_releases_its_surplus_to_a_joiner_once_nothing_is_free() {
        let live = [node("a", 1, true), node("b", 1, true)];
        let decided = rebalance(&rows(|_| Some(("a", 1))), &live, ("a", 1));
        // The last half in spread order: the odd partitions.
        let odd: Vec<i64> = (0..256).filter(|p| p % 2 == 1).collect();
        assert_eq!(decided.release, odd);
        assert_eq!(decided.keep.len(), 128);
        // The joiner takes what was released, up to its share.
        let after = rows(|p| (p % 2 == 0).then_some(("a", 1)));
        let joiner = rebalance(&after, &live, ("b", 1));
        assert_eq!(joiner.take.len(), 128);
        assert_eq!(joiner.take[0].part_no, 1);
    }

    #[test]
    fn partitions_of_a_dead_epoch_or_a_lapsed_node_are_free() {
        // "b" restarted (epoch 2): its epoch-1 rows are free; "c" has no live lease.
        let live = [node("a", 1, true), node("b", 2, false)];
        let table = rows(|p| match p % 3 {
            0 => Some(("a", 1)),
            1 => Some(("b", 1)),
            _ => Some(("c", 1)),
        });
        let decided = rebalance(&table, &live, ("a", 1));
        // Only "a" counts: "b" (epoch 2) is not active, a dead admin whose mark was cleared.
        assert_eq!(decided.keep.len(), 256);
        assert!(decided.take.iter().all(|row| row.part_no % 3 != 0));
    }

    #[test]
    fn an_admin_above_its_share_keeps_it_while_partitions_are_free() {
        let live = [node("a", 1, true), node("b", 1, true)];
        let table = rows(|p| match p {
            0..200 => Some(("a", 1)),
            200..250 => Some(("b", 1)),
            _ => None,
        });
        let decided = rebalance(&table, &live, ("a", 1));
        assert!(decided.release.is_empty() && decided.take.is_empty());
        let b = rebalance(&table, &live, ("b", 1));
        assert_eq!(b.take.len(), 6);
    }

    #[test]
    fn three_admins_split_256_as_86_86_84() {
        let live = [node("a", 1, true), node("b", 1, true), node("c", 1, true)];
        let mut table = rows(|_| None);
        for me in ["a", "b", "c"] {
            let decided = rebalance(&table, &live, (me, 1));
            for row in &decided.take {
                table[row.part_no as usize].owner = Some((me.to_string(), 1));
            }
        }
        let count = |me: &str| {
            table
                .iter()
                .filter(|row| row.owner.as_ref().map(|o| o.0.as_str()) == Some(me))
                .count()
        };
        assert_eq!((count("a"), count("b"), count("c")), (86, 86, 84));
        // Each share is spread over the range: of the jobs with ids 1..=60 (a small
        // installation), each admin owns about a third.
        for me in ["a", "b", "c"] {
            let low = (1..=60)
                .filter(|id| {
                    table[partition_of(*id) as usize]
                        .owner
                        .as_ref()
                        .map(|o| o.0.as_str())
                        == Some(me)
                })
                .count();
            assert!(
                (18..=22).contains(&low),
                "{me} owns {low} of the first 60 job ids"
            );
        }
    }
}
