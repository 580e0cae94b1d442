//! S1, the scale-out workload: the same offered load (W2-style, phases spread) run on 1, 2, …
//! up to `--admins` admins sharing one database, each admin process capped at the same CPU
//! quota (`cpu_cap`; the executors and the database uncapped). Each run prints its own result
//! line; a last line gives the fires delivered on time per second for each admin count and
//! `scale_ratio`, the most admins' figure over one admin's. Speed is reported, not asserted.

use serde::Serialize;

use crate::args::Args;
use crate::cpu_cap::CpuCap;
use crate::plan::Plan;

/// The summary line of an S1 run.
#[derive(Debug, Serialize)]
struct ScaleLine {
    workload: &'static str,
    database: String,
    n: usize,
    period_s: i64,
    duration_s: u64,
    admin_cpu_cores: f64,
    cgroup: &'static str,
    on_time_ms: i64,
    /// Per admin count, in order: 1, 2, ….
    admins: Vec<usize>,
    on_time_fps: Vec<f64>,
    /// Periods in which an admin's group was throttled, per admin count (the cap did bite).
    throttled_periods: Vec<u64>,
    /// The last admin count's on-time fires/s over one admin's.
    scale_ratio: Option<f64>,
    commit: String,
}

pub(crate) async fn run(args: &Args, plan: &Plan) -> anyhow::Result<()> {
    let mut line = ScaleLine {
        workload: "S1",
        database: format!("{:?}", plan.backend),
        n: plan.shape.jobs,
        period_s: plan.shape.period_s,
        duration_s: args.duration,
        admin_cpu_cores: args.admin_cpu,
        cgroup: "",
        on_time_ms: args.on_time_ms,
        admins: Vec::new(),
        on_time_fps: Vec::new(),
        throttled_periods: Vec::new(),
        scale_ratio: None,
        commit: env!("XJOB_BENCH_COMMIT").to_string(),
    };
    for admins in 1..=plan.admins {
        eprintln!(
            "S1: {admins} admin(s), each capped at {} cores",
            args.admin_cpu
        );
        let mut cap = CpuCap::new(args.admin_cpu)?;
        line.cgroup = cap.version();
        let step = Plan { admins, ..*plan };
        let outcome = crate::run::run(args, &step, Some(&mut cap)).await?;
        let fps = outcome.on_time as f64 / args.duration.max(1) as f64;
        eprintln!(
            "S1: {admins} admin(s): {fps:.1} fires/s on time (≤ {} ms late)",
            args.on_time_ms
        );
        line.admins.push(admins);
        line.on_time_fps.push(crate::report::rounded(fps, 1));
        line.throttled_periods.push(cap.throttled().0);
    }
    line.scale_ratio = scale_ratio(&line.on_time_fps);
    let json = serde_json::to_string(&line)?;
    eprintln!(
        "S1: on-time fires/s by admin count {:?}, scale_ratio {:?}",
        line.on_time_fps, line.scale_ratio
    );
    #[allow(clippy::print_stdout)]
    {
        println!("{json}");
    }
    crate::run::append(&args.results, &json)
}

/// The last figure over the first (None when the first is 0 or there is only one).
fn scale_ratio(fps: &[f64]) -> Option<f64> {
    match (fps.first(), fps.last()) {
        (Some(&first), Some(&last)) if fps.len() > 1 && first > 0.0 => {
            Some(crate::report::rounded(last / first, 2))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::on_time;

    #[test]
    fn on_time_counts_window_runs_started_within_the_bound() {
        let records = [
            (1, 1000, 1500),
            (2, 1000, 2100),
            (3, 999, 1000),
            (4, 2000, 2000),
        ];
        assert_eq!(on_time(&records, 1000, 2000, 1000), 1);
        assert_eq!(on_time(&records, 1000, 2000, 1100), 2);
    }

    #[test]
    fn the_ratio_is_the_most_admins_over_one() {
        assert_eq!(scale_ratio(&[100.0, 150.0, 250.0]), Some(2.5));
        assert_eq!(scale_ratio(&[100.0]), None);
        assert_eq!(scale_ratio(&[0.0, 10.0]), None);
    }
}
