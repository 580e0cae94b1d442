//! What a run needs from the command line once the workload's defaults are filled in.

use std::time::Duration;

use crate::admins::Timing;
use crate::args::{Args, Workload};
use crate::database::Backend;

/// How the jobs of a workload are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    pub(crate) jobs: usize,
    pub(crate) period_s: i64,
    /// Phases spread over the period (W2, F*), or all jobs on the same second.
    pub(crate) spread: bool,
}

impl Shape {
    pub(crate) fn phase(&self, index: usize) -> i64 {
        if self.spread {
            index as i64 % self.period_s
        } else {
            0
        }
    }

    pub(crate) fn cron(&self, index: usize) -> String {
        let phase = self.phase(index);
        match self.period_s {
            1 => "* * * * * ?".into(),
            60 => format!("{phase} * * * * ?"),
            period => format!("{phase}/{period} * * * * ?"),
        }
    }

    pub(crate) fn fires_per_second(&self) -> f64 {
        self.jobs as f64 / self.period_s as f64
    }
}

/// Everything a run needs that depends on the workload's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) shape: Shape,
    pub(crate) admins: usize,
    pub(crate) executors: usize,
    pub(crate) backend: Backend,
    pub(crate) timing: Timing,
}

pub(crate) fn plan(args: &Args) -> anyhow::Result<Plan> {
    let failover = args.workload.is_failover();
    let jobs = |default: usize| args.jobs.unwrap_or(default);
    let spread_period = |default: i64| -> anyhow::Result<i64> {
        let period = args.period.unwrap_or(default);
        anyhow::ensure!(
            period > 0 && 60 % period == 0,
            "--period must divide 60 (cron seconds repeat every minute), not {period}"
        );
        Ok(period)
    };
    let shape = match args.workload {
        Workload::W1 => Shape {
            jobs: jobs(100),
            period_s: 1,
            spread: false,
        },
        Workload::Campaign => Shape {
            jobs: jobs(20),
            period_s: 1,
            spread: false,
        },
        Workload::W3 => Shape {
            jobs: jobs(300),
            period_s: 1,
            spread: false,
        },
        Workload::W4 => Shape {
            jobs: jobs(1000),
            period_s: 60,
            spread: false,
        },
        Workload::W2 => Shape {
            jobs: jobs(1000),
            period_s: spread_period(10)?,
            spread: true,
        },
        Workload::F1 | Workload::F2 | Workload::F3 | Workload::S1 => Shape {
            jobs: jobs(2000),
            period_s: spread_period(2)?,
            spread: true,
        },
    };
    let backend = backend(args)?;
    let campaign = args.workload == Workload::Campaign;
    // A campaign on a server runs the three-admin cluster; SQLite's is one admin.
    let cluster = failover || (campaign && backend != Backend::Sqlite);
    // S1 runs 1, 2, … up to this many admins.
    let most = cluster || args.workload == Workload::S1;
    let admins = args.admins.unwrap_or(if most { 3 } else { 1 });
    anyhow::ensure!(admins >= 1, "--admins must be at least 1");
    anyhow::ensure!(
        !matches!(args.workload, Workload::F1 | Workload::F2) || admins >= 2,
        "{:?} needs a survivor: --admins 2 or more",
        args.workload
    );
    let executors = args
        .executors
        .unwrap_or(if failover || campaign { 2 } else { 1 });
    anyhow::ensure!(executors >= 1, "--executors must be at least 1");
    // F1 runs with the admin's default lease: a kill is noticed by the liveness lock.
    let short_lease = matches!(
        args.workload,
        Workload::F2 | Workload::F3 | Workload::Campaign
    );
    let node_lease_ms = args.node_lease_ms.or(short_lease.then_some(2000));
    Ok(Plan {
        shape,
        admins,
        executors,
        backend,
        timing: Timing {
            node_lease: node_lease_ms.map(Duration::from_millis),
            max_unsent_runs: args.max_unsent_runs,
            send_ahead_ms: args.send_ahead_ms,
            no_liveness_locks: args.no_liveness_locks,
            retention: args.log_retention_s.map(|retention| {
                (
                    Duration::from_secs(retention),
                    Duration::from_secs(args.retention_interval_s.max(1)),
                )
            }),
        },
    })
}

/// The backend from --database and --database-url, which must agree.
pub(crate) fn backend(args: &Args) -> anyhow::Result<Backend> {
    let backend = match (&args.database_url, args.database) {
        (Some(url), given) => {
            let of_url = Backend::of_url(url)?;
            anyhow::ensure!(
                given.is_none_or(|given| given == of_url),
                "--database {given:?} does not match --database-url (a {of_url:?} server)"
            );
            of_url
        }
        (None, Some(given)) => given,
        (None, None) if args.workload == Workload::F3 => Backend::Postgres,
        (None, None) => Backend::Sqlite,
    };
    anyhow::ensure!(
        args.workload != Workload::F3 || backend == Backend::Postgres,
        "F3 restarts a PostgreSQL server: use --database postgres (or a postgres:// \
         --database-url with --database-ctl)"
    );
    Ok(backend)
}
