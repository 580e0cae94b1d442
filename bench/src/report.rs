//! The one-line JSON result of a run, written by `serde_json` from structs whose fields keep
//! the line's order. Measured floats are rounded to the decimals the figures deserve; what was
//! not measured is `null`; the failover fields appear only for the F workloads.

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
    /// `expected` … `lateness_max_ms`, in the order `Figures` declares them.
    #[serde(flatten)]
    pub figures: Figures,
    pub admin_cpu_s: f64,
    pub executor_cpu_s: f64,
    pub db_cpu_s: Option<f64>,
    pub admin_peak_rss_mb: f64,
    pub executor_peak_rss_mb: f64,
    pub db_rss_mb: Option<f64>,
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
            admin_peak_rss_mb: 30.0,
            executor_peak_rss_mb: 20.0,
            db_rss_mb: None,
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
            }),
            recovery: None,
        };
        let json = line(Some(failover)).to_json().expect("json");
        assert!(
            json.contains(
                "\"node_lease_ms\":2000,\"misfired\":2,\"lost\":0,\"kills\":2,\
                 \"takeover_ms\":[1800,null],\"takeover_median_ms\":1800,\
                 \"takeover_max_ms\":1800,\"takeover_def\":\"def\",\"version\""
            ),
            "{json}"
        );
        assert!(!json.contains("recovery"), "{json}");
    }
}
