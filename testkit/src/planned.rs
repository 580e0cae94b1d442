//! Who holds the schedule: the admin owning the most planned (PENDING) fires is the one whose
//! schedule rounds under the lock wrote most of the next seconds, i.e. the current or latest
//! holder of the schedule lock. The cluster tests kill or freeze it; the benchmark measures
//! the takeover of its fires.

use std::collections::{HashMap, HashSet};

/// Among `nodes`, the one owning the most of the `(owner node, row id)` pairs of PENDING rows:
/// its index in `nodes` and the ids it owns. None when none of them owns any.
pub fn busiest_owner<'a>(
    pending: impl IntoIterator<Item = (&'a str, i64)>,
    nodes: &[&str],
) -> Option<(usize, HashSet<i64>)> {
    let mut owned: HashMap<&str, HashSet<i64>> = HashMap::new();
    for (node, id) in pending {
        owned.entry(node).or_default().insert(id);
    }
    nodes
        .iter()
        .enumerate()
        .map(|(index, node)| (index, owned.remove(node).unwrap_or_default()))
        .filter(|(_, ids)| !ids.is_empty())
        .max_by_key(|(_, ids)| ids.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_with_most_planned_fires_is_the_busiest() {
        let pending = [("a", 1), ("b", 2), ("b", 3), ("x", 4)];
        let (index, ids) = busiest_owner(pending, &["a", "b", "c"]).expect("an owner");
        assert_eq!(index, 1);
        assert_eq!(ids, HashSet::from([2, 3]));
        assert!(busiest_owner([], &["a"]).is_none());
        assert!(
            busiest_owner([("x", 1)], &["a"]).is_none(),
            "not one of the nodes"
        );
    }
}
