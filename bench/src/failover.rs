//! The failover figures (F1–F3 of `shared/BENCH.md`), as pure functions over the database's
//! log rows and the executors' records, so they can be checked without processes.
//!
//! - **takeover**: from the instant an admin is killed (or stopped) to the first dispatch by
//!   another admin of a fire the victim had planned (a PENDING row it owned at that instant);
//!   the dispatch instant is the claim time the survivor wrote on the row (`trigger_time_ms`).
//!   A survivor dispatching its *own* fires says nothing about failover, so those don't count.
//! - **recovery** (F3): from the instant the restarted database accepts connections again to
//!   the first handler start after it (every dispatch claims its row first, so no fire starts
//!   while the database is away).
//! - **misfired**: grid points of the window that never ran and that the database accounts
//!   for as misfires (a SKIPPED row of their own, or inside the span of the scan's misfire row
//!   for the job, read by `xjob_testkit::misfire` as the cluster tests' ledger reads them).
//!   They are part of `missed`; `lost` is the rest of `missed`.

use std::collections::HashSet;

use xjob_admin::model::{RunLog, RunStatus};
use xjob_testkit::misfire::{COVERS_LATER, MisfireSpans, ScheduledRow};
use xjob_testkit::planned::busiest_owner;

use crate::metrics::{PeriodicGrid, Record};

/// What the failover figures need of one log row.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRow {
    pub id: i64,
    pub job_id: i64,
    pub scheduled_at_ms: i64,
    /// When the run was claimed for dispatch (0 while PENDING).
    pub trigger_time_ms: i64,
    pub status: RunStatus,
    pub owner_node: String,
    pub shard_index: i32,
    /// A misfire row of the scan that also stands for the job's later fires before its next
    /// planned one (they get no row of their own).
    pub covers_later: bool,
}

impl From<&RunLog> for LogRow {
    fn from(row: &RunLog) -> LogRow {
        LogRow {
            id: row.id.0,
            job_id: row.job_id.0,
            scheduled_at_ms: row.scheduled_at_ms,
            trigger_time_ms: row.trigger_time_ms,
            status: row.status,
            owner_node: row.owner_node.clone(),
            shard_index: row.shard_index,
            covers_later: row.status == RunStatus::Skipped
                && row.trigger_msg.contains(COVERS_LATER),
        }
    }
}

/// One kill (F1) or stall (F2) of an admin.
#[derive(Debug, Clone)]
pub struct Disruption {
    pub node: String,
    pub at_ms: i64,
    /// Ids of the rows the victim owned and had not dispatched just before (PENDING, or
    /// claimed and unsent).
    pub planned: HashSet<i64>,
}

/// The admin owning the most planned fires (PENDING, or RUNNING rows the caller read without
/// an address: claimed, not sent yet): its index in `nodes` and the ids it owns; None when
/// nobody owns any.
pub fn busiest_node(pending: &[LogRow], nodes: &[&str]) -> Option<(usize, HashSet<i64>)> {
    let planned = pending
        .iter()
        .filter(|row| matches!(row.status, RunStatus::Pending | RunStatus::Running))
        .map(|row| (row.owner_node.as_str(), row.id));
    busiest_owner(planned, nodes)
}

/// Takeover time of one disruption in ms; None when no survivor dispatched any of the
/// victim's planned fires (it owned none, or took them back itself first).
pub fn takeover_ms(rows: &[LogRow], disruption: &Disruption) -> Option<i64> {
    rows.iter()
        .filter(|row| disruption.planned.contains(&row.id))
        .filter(|row| row.owner_node != disruption.node)
        .filter(|row| !matches!(row.status, RunStatus::Pending | RunStatus::Skipped))
        .map(|row| row.trigger_time_ms)
        .min()
        .map(|first_ms| (first_ms - disruption.at_ms).max(0))
}

/// The scheduled time of the first of the victim's planned fires a survivor dispatched, after
/// the kill: the part of `takeover_ms` that is the victim's own schedule (no survivor can send a
/// fire before its second), the rest being detection, adoption and claim.
pub fn first_adopted_fire_ms(rows: &[LogRow], disruption: &Disruption) -> Option<i64> {
    rows.iter()
        .filter(|row| disruption.planned.contains(&row.id))
        .filter(|row| row.owner_node != disruption.node)
        .filter(|row| !matches!(row.status, RunStatus::Pending | RunStatus::Skipped))
        .min_by_key(|row| row.trigger_time_ms)
        .map(|row| row.scheduled_at_ms - disruption.at_ms)
}

/// How late the survivors dispatched the victim's planned fires: the largest trigger time (when
/// the run left: its second, or later) minus scheduled time among those another admin
/// dispatched, so 0 when every one left on its second; None when no survivor dispatched any.
/// Takeover (above) also counts the wait for the victim's next planned fire, seconds away when
/// the other admins planned the coming seconds; this is the delay the failover added to them.
pub fn adopted_delay_ms(rows: &[LogRow], disruption: &Disruption) -> Option<i64> {
    rows.iter()
        .filter(|row| disruption.planned.contains(&row.id))
        .filter(|row| row.owner_node != disruption.node)
        .filter(|row| !matches!(row.status, RunStatus::Pending | RunStatus::Skipped))
        .map(|row| row.trigger_time_ms - row.scheduled_at_ms)
        .max()
}

/// Median (mean of the two middle values for an even count) and maximum of the measured
/// values; disruptions without a takeover are left out.
pub fn median_and_max(values: &[Option<i64>]) -> (Option<i64>, Option<i64>) {
    let mut measured: Vec<i64> = values.iter().flatten().copied().collect();
    measured.sort_unstable();
    let len = measured.len();
    let median = match len {
        0 => None,
        _ if len % 2 == 1 => Some(measured[len / 2]),
        _ => Some((measured[len / 2 - 1] + measured[len / 2]) / 2),
    };
    (median, measured.last().copied())
}

/// Recovery time: the first handler start at or after `restarted_ms`, minus `restarted_ms`.
pub fn recovery_ms(records: &[Record], restarted_ms: i64) -> Option<i64> {
    records
        .iter()
        .map(|&(_, _, start_ms)| start_ms)
        .filter(|&start_ms| start_ms >= restarted_ms)
        .min()
        .map(|first_ms| first_ms - restarted_ms)
}

/// Grid points of `[window_start_ms, window_end_ms)` that never ran but have a misfire row.
pub fn misfired(
    grid: &PeriodicGrid,
    records: &[Record],
    rows: &[LogRow],
    window_start_ms: i64,
    window_end_ms: i64,
) -> u64 {
    let delivered: HashSet<(i64, i64)> = records
        .iter()
        .map(|&(job_id, scheduled_at_ms, _)| (job_id, scheduled_at_ms))
        .collect();
    let own_skip: HashSet<(i64, i64)> = rows
        .iter()
        .filter(|row| row.status == RunStatus::Skipped && row.shard_index == 0)
        .map(|row| (row.job_id, row.scheduled_at_ms))
        .collect();
    let spans = MisfireSpans::of(rows.iter().map(|row| ScheduledRow {
        job_id: row.job_id,
        scheduled_at_ms: row.scheduled_at_ms,
        covers_later: row.covers_later,
    }));
    grid.points(window_start_ms, window_end_ms)
        .filter(|point| !delivered.contains(point))
        .filter(|&(job_id, at_ms)| {
            own_skip.contains(&(job_id, at_ms)) || spans.covers(job_id, at_ms)
        })
        .count() as u64
}

/// The next disruption instant: the next whole second after `now_ms`, plus a sub-second
/// phase (`phase_ms` in 0..1000), so kills land at every point of the admins' 1 s rounds.
pub fn next_instant_at_phase(now_ms: i64, phase_ms: i64) -> i64 {
    (now_ms.div_euclid(1000) + 1) * 1000 + phase_ms.rem_euclid(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000_000;

    fn row(id: i64, job_id: i64, scheduled: i64, status: RunStatus, owner: &str) -> LogRow {
        LogRow {
            id,
            job_id,
            scheduled_at_ms: scheduled,
            trigger_time_ms: 0,
            status,
            owner_node: owner.to_string(),
            shard_index: 0,
            covers_later: false,
        }
    }

    fn claimed(mut row: LogRow, at_ms: i64) -> LogRow {
        row.trigger_time_ms = at_ms;
        row
    }

    #[test]
    fn the_admin_with_most_planned_fires_is_the_victim() {
        let pending = vec![
            row(1, 1, T0, RunStatus::Pending, "a"),
            row(2, 2, T0, RunStatus::Pending, "b"),
            row(3, 3, T0, RunStatus::Pending, "b"),
            row(4, 4, T0, RunStatus::Running, "c"),
        ];
        let (index, ids) = busiest_node(&pending, &["a", "b", "c"]).expect("a victim");
        assert_eq!(index, 1);
        assert_eq!(ids, HashSet::from([2, 3]));
        assert!(busiest_node(&[], &["a"]).is_none());
    }

    #[test]
    fn takeover_is_the_first_survivor_dispatch_of_the_victims_fires() {
        let disruption = Disruption {
            node: "a".into(),
            at_ms: T0,
            planned: HashSet::from([1, 2, 3, 4]),
        };
        let rows = vec![
            // Dispatched by the victim itself just before it died: not a takeover.
            claimed(row(1, 1, T0, RunStatus::Success, "a"), T0 - 5),
            // Skipped by a survivor (too late): no dispatch.
            claimed(row(2, 2, T0, RunStatus::Skipped, "b"), T0 + 900),
            claimed(row(3, 3, T0, RunStatus::Success, "b"), T0 + 2100),
            claimed(row(4, 4, T0, RunStatus::Running, "c"), T0 + 1800),
            // A survivor's own fire, dispatched earlier: not the victim's.
            claimed(row(5, 5, T0, RunStatus::Success, "b"), T0 + 10),
        ];
        assert_eq!(takeover_ms(&rows, &disruption), Some(1800));
        let untouched = Disruption {
            planned: HashSet::from([1]),
            ..disruption.clone()
        };
        assert_eq!(takeover_ms(&rows, &untouched), None);
        // Row 3 went out 2 100 ms after its second (T0), row 4 1 800 ms after; the skipped
        // row 2 and the victim's own row 1 say nothing of the failover's delay.
        assert_eq!(adopted_delay_ms(&rows, &disruption), Some(2100));
        assert_eq!(adopted_delay_ms(&rows, &untouched), None);
    }

    #[test]
    fn median_and_max_skip_unmeasured_disruptions() {
        assert_eq!(median_and_max(&[]), (None, None));
        assert_eq!(
            median_and_max(&[Some(300), None, Some(100), Some(200)]),
            (Some(200), Some(300))
        );
        assert_eq!(
            median_and_max(&[Some(400), Some(100), Some(200), Some(300)]),
            (Some(250), Some(400))
        );
    }

    #[test]
    fn recovery_is_the_first_start_after_the_restart() {
        let records = vec![
            (1, T0, T0 + 3),
            (1, T0 + 1000, T0 + 9_000),
            (2, T0, T0 + 8_500),
        ];
        assert_eq!(recovery_ms(&records, T0 + 8_000), Some(500));
        assert_eq!(recovery_ms(&records, T0 + 10_000), None);
    }

    #[test]
    fn misfires_count_own_rows_and_the_seconds_a_scan_row_covers() {
        let grid = PeriodicGrid::new(&[1, 2], 1, |_| 0);
        let records = vec![(1, T0, T0 + 1), (2, T0, T0 + 1), (2, T0 + 4000, T0 + 4001)];
        let mut scan_misfire = row(10, 1, T0 + 1000, RunStatus::Skipped, "a");
        scan_misfire.covers_later = true;
        let rows = vec![
            // Job 1: the scan's row at +1 s stands for +2 s and +3 s; the next row is at +4 s.
            scan_misfire,
            row(11, 1, T0 + 4000, RunStatus::Failed, "a"),
            // Job 2: its own skipped row at +1 s; +2 s and +3 s are simply gone.
            row(12, 2, T0 + 1000, RunStatus::Skipped, "b"),
        ];
        // Job 1: +1, +2, +3 misfired, +4 failed (lost). Job 2: +1 misfired, +2, +3 lost.
        assert_eq!(misfired(&grid, &records, &rows, T0, T0 + 5000), 4);
    }

    #[test]
    fn disruptions_land_at_the_given_sub_second_phase() {
        assert_eq!(next_instant_at_phase(T0 + 250, 730), T0 + 1730);
        assert_eq!(next_instant_at_phase(T0, 0), T0 + 1000);
        assert_eq!(next_instant_at_phase(T0 + 999, 1001), T0 + 1001);
    }
}
