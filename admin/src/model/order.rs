//! The order of a list (`ListJobs`, `ListLogs`): one of the columns a list shows, by its public
//! name, ascending or descending. The names are checked here, against a fixed list per list;
//! the store maps each to its column (the only place that knows the SQL).

/// A list's order: `key` is one of the list's sort keys; `descending` for `-key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListOrder {
    pub key: &'static str,
    pub descending: bool,
}

/// What the jobs list sorts by (its visible columns).
pub const JOB_SORT_KEYS: &[&str] = &[
    "id",
    "name",
    "group",
    "handler",
    "author",
    "status",
    "next_fire",
];
/// What the runs list sorts by (its visible columns).
pub const LOG_SORT_KEYS: &[&str] = &["id", "job", "group", "status", "triggered", "executor"];

impl ListOrder {
    /// Reads `key` or `-key` among `keys`; empty = the list's default order (`None`).
    pub fn parse(text: &str, keys: &[&'static str]) -> Result<Option<ListOrder>, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        let (descending, name) = match text.strip_prefix('-') {
            Some(name) => (true, name),
            None => (false, text),
        };
        match keys.iter().find(|key| **key == name) {
            Some(key) => Ok(Some(ListOrder { key, descending })),
            None => Err(format!(
                "'{}' is not one of: {} (a leading - sorts descending)",
                text.chars().take(40).collect::<String>(),
                keys.join(", ")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_are_one_of_the_lists_keys_with_an_optional_minus() {
        assert_eq!(ListOrder::parse("", JOB_SORT_KEYS), Ok(None));
        assert_eq!(
            ListOrder::parse("-name", JOB_SORT_KEYS),
            Ok(Some(ListOrder {
                key: "name",
                descending: true
            }))
        );
        let refused = ListOrder::parse("name; DROP TABLE x", JOB_SORT_KEYS).unwrap_err();
        assert!(refused.contains("is not one of: id, name"), "{refused}");
        assert!(ListOrder::parse("next_fire", LOG_SORT_KEYS).is_err());
    }
}
