//! The handler starts the executors recorded, with which executor and which log id: what
//! shows how an occurrence came to run twice.

use std::collections::BTreeMap;
use std::path::Path;

/// One handler start as an executor recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    pub executor: usize,
    pub job_id: i64,
    pub scheduled_at_ms: i64,
    pub start_ms: i64,
    /// 0 in a record without one.
    pub log_id: i64,
}

/// Every handler start the executors recorded, with which executor and which log id.
pub fn read_starts(dir: &Path, executors: usize) -> anyhow::Result<Vec<Start>> {
    let mut starts = Vec::new();
    for executor in 0..executors {
        let path = dir.join(format!("records-{executor}.txt"));
        let text = std::fs::read_to_string(&path)
            .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?;
        starts.extend(text.lines().filter_map(|line| parse_start(executor, line)));
    }
    Ok(starts)
}

fn parse_start(executor: usize, line: &str) -> Option<Start> {
    let fields: Vec<i64> = line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    match fields.as_slice() {
        [job_id, scheduled_at_ms, start_ms, rest @ ..] => Some(Start {
            executor,
            job_id: *job_id,
            scheduled_at_ms: *scheduled_at_ms,
            start_ms: *start_ms,
            log_id: rest.first().copied().unwrap_or(0),
        }),
        _ => None,
    }
}

/// For each `(job, scheduled time)` of `job_ids` started more than once, a line per start:
/// which executor, when (seconds into the window) and which log id.
pub fn twice_started(starts: &[Start], job_ids: &[i64], window_start_ms: i64) -> String {
    let mut by_occurrence: BTreeMap<(i64, i64), Vec<&Start>> = BTreeMap::new();
    for start in starts
        .iter()
        .filter(|start| job_ids.contains(&start.job_id))
    {
        by_occurrence
            .entry((start.job_id, start.scheduled_at_ms))
            .or_default()
            .push(start);
    }
    let mut text = String::new();
    for ((job_id, scheduled), starts) in by_occurrence.iter().filter(|(_, s)| s.len() > 1) {
        text.push_str(&format!(
            "  job {job_id} at {scheduled} started {} times:\n",
            starts.len()
        ));
        for start in starts {
            text.push_str(&format!(
                "    by executor-{} at {:.3} s, log id {}\n",
                start.executor,
                (start.start_ms - window_start_ms) as f64 / 1000.0,
                start.log_id
            ));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000_000;

    #[test]
    fn a_start_record_keeps_its_log_id_and_an_older_one_reads_as_none() {
        assert_eq!(
            parse_start(1, "9 1800000000000 1800000000012 4711"),
            Some(Start {
                executor: 1,
                job_id: 9,
                scheduled_at_ms: T0,
                start_ms: T0 + 12,
                log_id: 4711,
            })
        );
        assert_eq!(
            parse_start(0, "9 1800000000000 1800000000012").map(|s| s.log_id),
            Some(0)
        );
        assert_eq!(parse_start(0, "end 9 1800000000000 1800000000012"), None);
    }

    #[test]
    fn only_occurrences_started_twice_are_listed_with_each_start() {
        let start = |executor, job_id, scheduled_at_ms, log_id| Start {
            executor,
            job_id,
            scheduled_at_ms,
            start_ms: T0 + 2_000,
            log_id,
        };
        let starts = vec![
            start(0, 9, T0, 5),
            start(1, 9, T0, 5),
            start(0, 9, T0 + 1000, 6),
            start(0, 8, T0, 7),
            start(1, 8, T0, 8),
        ];
        let text = twice_started(&starts, &[9], T0);
        assert_eq!(
            text,
            format!(
                "  job 9 at {T0} started 2 times:\n    by executor-0 at 2.000 s, log id 5\n    by executor-1 at 2.000 s, log id 5\n"
            )
        );
    }
}
