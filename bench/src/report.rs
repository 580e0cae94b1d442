//! The one-line JSON result of a run, written by `serde_json` from structs whose fields keep
//! the line's order. Measured floats are rounded to the decimals the figures deserve; what was
//! not measured is `null`; the failover fields appear only for the F workloads.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::metrics::Figures;

/// Every field of a run's line, in the order it is written.
#[derive(Debug, Serialize)]
pub struct ResultLine {
    pub workload: String,
    pub n: usize,
    pub duration_s: u64,
    pub warmup_s: u64,
    pub admins: usize,
    pub executors: usize,
    pub database: String,
    /// The server settings the run asked for (`--db-setting`); left out when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub db_settings: Vec<String>,
    /// `expected` … `lateness_max_ms`, in the order `Figures` declares them.
    #[serde(flatten)]
    pub figures: Figures,
    pub admin_cpu_s: f64,
    pub executor_cpu_s: f64,
    pub db_cpu_s: Option<f64>,
    /// CPU µs per fire delivered in the window (`null` when none was, or the database's
    /// processes are not the harness's to measure).
    pub admin_cpu_us_per_fire: Option<f64>,
    pub executor_cpu_us_per_fire: Option<f64>,
    pub db_cpu_us_per_fire: Option<f64>,
    pub admin_peak_rss_mb: f64,
    pub executor_peak_rss_mb: f64,
    pub db_rss_mb: Option<f64>,
    /// What became of the window's fires by their log rows (`Outcomes`), `null` when the rows
    /// could not be read.
    pub outcomes: Option<BTreeMap<String, i64>>,
    /// Whether the admins ran with their liveness locks (`liveness_locks`).
    pub liveness_locks: bool,
    pub period_s: i64,
    pub node_lease_ms: u128,
    #[serde(flatten)]
    pub failover: Option<FailoverLine>,
    pub version: &'static str,
    pub commit: String,
    pub cores: usize,
    pub cpu: String,
}

/// The fields of the failover workloads (F1–F3).
#[derive(Debug, Serialize)]
pub struct FailoverLine {
    pub misfired: u64,
    pub lost: u64,
    /// F1 and F2: the admin kills or stalls.
    #[serde(flatten)]
    pub takeover: Option<TakeoverLine>,
    /// F3: the database outage.
    #[serde(flatten)]
    pub recovery: Option<RecoveryLine>,
}

#[derive(Debug, Serialize)]
pub struct TakeoverLine {
    pub kills: usize,
    /// One entry per disruption, `null` where no survivor took over.
    pub takeover_ms: Vec<Option<i64>>,
    pub takeover_median_ms: Option<i64>,
    pub takeover_max_ms: Option<i64>,
    pub takeover_def: &'static str,
    /// One entry per disruption: the latest dispatch of a victim's planned fire by a survivor,
    /// after its scheduled time (`null` where no survivor dispatched any).
    pub adopted_delay_ms: Vec<Option<i64>>,
    pub adopted_delay_max_ms: Option<i64>,
    pub adopted_delay_def: &'static str,
}

#[derive(Debug, Serialize)]
pub struct RecoveryLine {
    pub outage_s: u64,
    pub outage_ms: Option<i64>,
    pub recovery_ms: Option<i64>,
    pub recovery_def: &'static str,
}

impl ResultLine {
    /// The line, without its newline.
    pub fn to_json(&self) -> anyhow::Result<String> {
        Ok(serde_json::to_string(self)?)
    }
}

/// CPU µs per delivered fire, `None` without a fire or a measurement.
pub fn per_fire_us(cpu_s: Option<f64>, delivered: u64) -> Option<f64> {
    let cpu_s = cpu_s?;
    (delivered > 0).then(|| rounded(cpu_s * 1e6 / delivered as f64, 1))
}

/// The window's fires by what their log rows say: one count per final status, with the
/// reason class where there is one (`skipped_misfire`, `skipped_overloaded`,
/// `failed_overloaded`), and `no_row` for the grid points with no first-attempt row of their
/// own (never written: lost before planning, or covered by a scan's misfire row that stands for
/// several seconds).
pub fn outcomes(
    counts: &[xjob_admin::store::OutcomeCount],
    expected: u64,
) -> BTreeMap<String, i64> {
    let mut outcomes = BTreeMap::new();
    let mut rows = 0;
    for count in counts {
        let mut key = count.status.to_ascii_lowercase();
        if !count.reason.is_empty() {
            key = format!("{key}_{}", count.reason);
        }
        *outcomes.entry(key).or_insert(0) += count.runs;
        rows += count.runs;
    }
    outcomes.insert("no_row".to_string(), (expected as i64 - rows).max(0));
    outcomes
}

/// `value` rounded to `decimals` places, so the line shows `12.3`, not `12.299999713`.
pub fn rounded(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(failover: Option<FailoverLine>) -> ResultLine {
        ResultLine {
            workload: "F1".into(),
            n: 2000,
            duration_s: 60,
            warmup_s: 10,
            admins: 3,
            executors: 4,
            database: "Postgres".into(),
            db_settings: Vec::new(),
            figures: Figures {
                expected: 10,
                delivered: 9,
                missed: 1,
                duplicates: 0,
                off_grid: 0,
                throughput_fps: rounded(1.26, 1),
                lateness_p50_ms: 3,
                lateness_p99_ms: 40,
                lateness_max_ms: 90,
            },
            admin_cpu_s: rounded(1.234, 2),
            executor_cpu_s: 0.5,
            db_cpu_s: None,
            admin_cpu_us_per_fire: Some(rounded(137.123, 1)),
            executor_cpu_us_per_fire: None,
            db_cpu_us_per_fire: None,
            admin_peak_rss_mb: 30.0,
            executor_peak_rss_mb: 20.0,
            db_rss_mb: None,
            outcomes: Some(BTreeMap::from([
                ("success".to_string(), 9),
                ("no_row".to_string(), 1),
            ])),
            liveness_locks: true,
            period_s: 1,
            node_lease_ms: 2000,
            failover,
            version: "0.1.0",
            commit: "abc1234".into(),
            cores: 2,
            cpu: "a \"quoted\" model".into(),
        }
    }

    #[test]
    fn outcomes_are_keyed_by_status_and_reason_and_count_missing_rows() {
        let count = |status: &str, reason: &str, runs| xjob_admin::store::OutcomeCount {
            status: status.into(),
            reason: reason.into(),
            runs,
        };
        let counts = [
            count("SUCCESS", "", 90),
            count("SKIPPED", "misfire", 4),
            count("SKIPPED", "overloaded", 3),
            count("PENDING", "", 1),
        ];
        let outcomes = outcomes(&counts, 100);
        assert_eq!(outcomes["success"], 90);
        assert_eq!(outcomes["skipped_misfire"], 4);
        assert_eq!(outcomes["skipped_overloaded"], 3);
        assert_eq!(outcomes["pending"], 1);
        assert_eq!(outcomes["no_row"], 2);
        assert_eq!(per_fire_us(Some(0.5), 1000), Some(500.0));
        assert_eq!(per_fire_us(Some(0.5), 0), None);
        assert_eq!(per_fire_us(None, 10), None);
    }

    #[test]
    fn fields_keep_their_order_nulls_and_rounding() {
        let json = line(None).to_json().expect("json");
        assert!(
            json.starts_with(
                "{\"workload\":\"F1\",\"n\":2000,\"duration_s\":60,\"warmup_s\":10,\"admins\":3,"
            ),
            "{json}"
        );
        assert!(
            json.contains(
                "\"database\":\"Postgres\",\"expected\":10,\"delivered\":9,\"missed\":1,\
                 \"duplicates\":0,\"off_grid\":0,\"throughput_fps\":1.3,\"lateness_p50_ms\":3,"
            ),
            "{json}"
        );
        assert!(json.contains("\"admin_cpu_s\":1.23,"), "{json}");
        assert!(json.contains("\"db_cpu_s\":null,"), "{json}");
        assert!(
            json.contains("\"admin_cpu_us_per_fire\":137.1,\"executor_cpu_us_per_fire\":null,"),
            "{json}"
        );
        assert!(
            json.contains("\"outcomes\":{\"no_row\":1,\"success\":9},\"liveness_locks\":true,"),
            "{json}"
        );
        assert!(
            json.contains("\"node_lease_ms\":2000,\"version\":\"0.1.0\""),
            "{json}"
        );
        assert!(
            json.ends_with("\"cpu\":\"a \\\"quoted\\\" model\"}"),
            "{json}"
        );
    }

    #[test]
    fn failover_fields_sit_between_the_figures_and_the_context() {
        let failover = FailoverLine {
            misfired: 2,
            lost: 0,
            takeover: Some(TakeoverLine {
                kills: 2,
                takeover_ms: vec![Some(1800), None],
                takeover_median_ms: Some(1800),
                takeover_max_ms: Some(1800),
                takeover_def: "def",
                adopted_delay_ms: vec![Some(40), None],
                adopted_delay_max_ms: Some(40),
                adopted_delay_def: "late",
            }),
            recovery: None,
        };
        let json = line(Some(failover)).to_json().expect("json");
        assert!(
            json.contains(
                "\"node_lease_ms\":2000,\"misfired\":2,\"lost\":0,\"kills\":2,\
                 \"takeover_ms\":[1800,null],\"takeover_median_ms\":1800,\
                 \"takeover_max_ms\":1800,\"takeover_def\":\"def\",\
                 \"adopted_delay_ms\":[40,null],\"adopted_delay_max_ms\":40,\
                 \"adopted_delay_def\":\"late\",\"version\""
            ),
            "{json}"
        );
        assert!(!json.contains("recovery"), "{json}");
    }
}
