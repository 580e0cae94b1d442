//! What a campaign prints: the seed and the command that replays it, the fault timeline, the
//! checker's table, and one JSON line for the results file.

use std::collections::BTreeMap;

use serde::Serialize;

use super::checker::Verdict;
use super::inject::{Happened, slip};

/// The campaign's result line.
#[derive(Debug, Serialize)]
pub struct CampaignLine {
    pub workload: &'static str,
    pub seed: u64,
    pub database: String,
    pub admins: usize,
    pub executors: usize,
    pub jobs: usize,
    pub duration_s: u64,
    pub faults: usize,
    pub faults_by_kind: BTreeMap<String, usize>,
    pub fault_errors: usize,
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The backfill's verdict (none with `--backfill 0`).
    pub backfill: Option<super::backfill::Verdict>,
    /// The overlap policies' verdicts, one per policy (none with `--overlap 0`).
    pub overlap: Vec<super::overlap::Verdict>,
    /// The workflows' verdict (none with `--workflows false`).
    pub workflows: Option<super::workflows::Verdict>,
    pub misfire_threshold_ms: i64,
    pub commit: String,
}

impl CampaignLine {
    pub fn faults_by_kind(timeline: &[Happened]) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for happened in timeline {
            *counts
                .entry(format!("{:?}", happened.fault.kind))
                .or_default() += 1;
        }
        counts
    }
}

/// The timeline, one line per fault, times in seconds from the window's start.
pub fn timeline_text(timeline: &[Happened], window_start_ms: i64) -> String {
    let seconds = |ms: i64| (ms - window_start_ms) as f64 / 1000.0;
    let mut text = String::from("fault timeline (s from the window's start):\n");
    for happened in timeline {
        let slipped = slip(happened, window_start_ms).as_millis();
        text.push_str(&format!(
            "  {:>7.1} – {:>7.1}  {}{}{}\n",
            seconds(happened.injected_ms),
            seconds(happened.healed_ms),
            happened.fault,
            if slipped > 500 {
                format!(" (started {slipped} ms after its plan)")
            } else {
                String::new()
            },
            happened
                .error
                .as_ref()
                .map(|error| format!("  ERROR: {error}"))
                .unwrap_or_default()
        ));
    }
    text
}

/// The checker's table, and the bad occurrences' examples with the faults around them.
pub fn verdict_text(verdict: &Verdict, window_start_ms: i64, threshold_ms: i64) -> String {
    let rows = [
        ("planned", verdict.planned),
        ("delivered", verdict.delivered),
        ("misfired (SKIPPED row)", verdict.misfired),
        ("failed (final row, no run)", verdict.failed),
        ("unaccounted (row claims a run)", verdict.unaccounted),
        ("LOST (no run, no row)", verdict.lost),
        ("DUPLICATED (run twice or more)", verdict.duplicated),
        ("late (> misfire threshold)", verdict.late),
        ("runs off the schedule", verdict.off_schedule),
    ];
    let mut text = String::from("occurrences:\n");
    for (name, count) in rows {
        text.push_str(&format!("  {name:<32} {count:>9}\n"));
    }
    text.push_str(&format!(
        "  latest first start: {} ms after its second (threshold {threshold_ms} ms)\n",
        verdict.lateness_max_ms
    ));
    if !verdict.failed_by_status.is_empty() {
        text.push_str(&format!(
            "  failed by row status: {:?}\n",
            verdict.failed_by_status
        ));
    }
    let at = |ms: i64| (ms - window_start_ms) as f64 / 1000.0;
    for (job, scheduled) in &verdict.lost_examples {
        text.push_str(&format!("  lost: job {job} at {:.1} s\n", at(*scheduled)));
    }
    for (index, (job, scheduled)) in verdict.duplicated_examples.iter().enumerate() {
        let detail = verdict
            .duplicated_details
            .get(index)
            .cloned()
            .unwrap_or_default();
        text.push_str(&format!(
            "  duplicated: job {job} at {:.1} s: {detail}\n",
            at(*scheduled)
        ));
    }
    for (scheduled, count) in &verdict.duplicated_seconds {
        text.push_str(&format!(
            "  duplicated at {:.1} s: {count} occurrences\n",
            at(*scheduled)
        ));
    }
    for ((job, scheduled), status) in &verdict.unaccounted_examples {
        text.push_str(&format!(
            "  unaccounted: job {job} at {:.1} s, row {status:?}\n",
            at(*scheduled)
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::campaign::plan::{Fault, FaultKind, Target};

    const T0: i64 = 1_800_000_000_000;

    fn happened(at_s: u64, injected_ms: i64) -> Happened {
        Happened {
            fault: Fault {
                at: Duration::from_secs(at_s),
                kind: FaultKind::KillAdmin,
                target: Target::Admin(0),
                length: Duration::from_millis(1500),
                delay: Duration::ZERO,
                loss_pct: 0,
                clock_step_ms: 0,
            },
            injected_ms,
            healed_ms: injected_ms + 1500,
            error: None,
        }
    }

    #[test]
    fn the_timeline_shows_each_fault_and_its_slip() {
        let timeline = [happened(2, T0 + 2000), happened(10, T0 + 12_000)];
        let text = timeline_text(&timeline, T0);
        assert!(
            text.contains("    2.0 –     3.5  KillAdmin admin-1 for 1500 ms\n"),
            "{text}"
        );
        assert!(text.contains("(started 2000 ms after its plan)"), "{text}");
        let counts = CampaignLine::faults_by_kind(&timeline);
        assert_eq!(counts.get("KillAdmin"), Some(&2));
    }

    #[test]
    fn the_table_names_lost_occurrences() {
        let verdict = Verdict {
            planned: 10,
            delivered: 9,
            lost: 1,
            lost_examples: vec![(7, T0 + 4000)],
            ..Verdict::default()
        };
        let text = verdict_text(&verdict, T0, 5000);
        assert!(text.contains("LOST (no run, no row)"), "{text}");
        assert!(text.contains("lost: job 7 at 4.0 s"), "{text}");
    }
}
