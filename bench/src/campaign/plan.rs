//! The fault plan of a campaign: which fault, on which process or link, when and for how long,
//! drawn from a seed. The plan depends only on the seed and on what the cluster offers (its
//! admins, executors and which faults its database allows), so the same seed on the same
//! cluster shape replays the same faults at the same offsets into the window.
//!
//! Faults come one at a time: each is injected, lasts its time, is healed, and the next one
//! starts after a random gap. Overlapping faults would find more, but a sequential plan keeps
//! a finding readable (the timeline says which fault was in force) and is the first version.

use std::fmt;
use std::time::Duration;

/// One kind of fault the harness can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum FaultKind {
    /// SIGKILL of an admin; restarted (same node id, port and data) after `length`.
    KillAdmin,
    /// SIGKILL of an executor; restarted on the same address after `length`.
    KillExecutor,
    /// SIGSTOP of an admin for `length`, then SIGCONT.
    PauseAdmin,
    /// SIGSTOP of an executor for `length`, then SIGCONT.
    PauseExecutor,
    /// The database server stopped for `length`, then started on the same port (a server the
    /// harness started, or one it has a control command for).
    RestartDatabase,
    /// Every open admin → database connection cut at once (PostgreSQL, MariaDB).
    DropDatabaseConnections,
    /// What admins and the database send each other arrives `delay` late, for `length`.
    DelayDatabase,
    /// What one executor and the admins send each other arrives `delay` late, for `length`.
    DelayExecutorLink,
    /// Nothing gets through between one executor and the admins for `length` (total loss: the
    /// bytes wait in the proxy, as TCP would retransmit them), then everything flows again.
    PartitionExecutor,
    /// One admin's clock steps `clock_step` (forward or back) for `length`, then steps back
    /// (a test hook of the admin: `XJOB_TEST_CLOCK_OFFSET_FILE`).
    StepClock,
    /// The SQLite database's file system (a small tmpfs) is filled for `length`, then freed.
    FillDisk,
    /// One executor's links to and from the admins turn lossy for `length`: every chunk
    /// `delay` late with jitter, and `loss_pct` of them held a retransmission timeout (or
    /// several), as TCP delivers through a lossy network (see `proxy`).
    LossyExecutorLink,
    /// The same on the link between the admins and the database server.
    LossyDatabaseLink,
}

impl FaultKind {
    /// The faults that need a server between the admins and their data (not SQLite).
    pub const NETWORKED_DATABASE: [FaultKind; 3] = [
        FaultKind::DropDatabaseConnections,
        FaultKind::DelayDatabase,
        FaultKind::LossyDatabaseLink,
    ];

    /// The faults every cluster offers.
    pub const ALWAYS: [FaultKind; 8] = [
        FaultKind::KillAdmin,
        FaultKind::KillExecutor,
        FaultKind::PauseAdmin,
        FaultKind::PauseExecutor,
        FaultKind::DelayExecutorLink,
        FaultKind::PartitionExecutor,
        FaultKind::StepClock,
        FaultKind::LossyExecutorLink,
    ];

    /// Whether the fault picks one admin (else one executor, or the database).
    fn targets_admin(self) -> bool {
        matches!(
            self,
            FaultKind::KillAdmin | FaultKind::PauseAdmin | FaultKind::StepClock
        )
    }

    fn targets_executor(self) -> bool {
        matches!(
            self,
            FaultKind::KillExecutor
                | FaultKind::PauseExecutor
                | FaultKind::DelayExecutorLink
                | FaultKind::PartitionExecutor
                | FaultKind::LossyExecutorLink
        )
    }

    fn has_delay(self) -> bool {
        matches!(
            self,
            FaultKind::DelayDatabase | FaultKind::DelayExecutorLink
        ) || self.is_lossy()
    }

    /// The lossy links, drawn with a loss rate.
    pub fn is_lossy(self) -> bool {
        matches!(
            self,
            FaultKind::LossyExecutorLink | FaultKind::LossyDatabaseLink
        )
    }

    /// How long the fault lasts, in ms: [min, max].
    fn length_range_ms(self) -> (u64, u64) {
        match self {
            FaultKind::DropDatabaseConnections => (0, 0),
            FaultKind::KillAdmin | FaultKind::KillExecutor | FaultKind::RestartDatabase => {
                (500, 5_000)
            }
            _ => (1_000, 8_000),
        }
    }
}

/// Which process or link a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Admin(usize),
    Executor(usize),
    Database,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Admin(index) => write!(f, "admin-{}", index + 1),
            Target::Executor(index) => write!(f, "executor-{index}"),
            Target::Database => write!(f, "database"),
        }
    }
}

/// One planned fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// Offset from the window's start.
    pub at: Duration,
    pub kind: FaultKind,
    pub target: Target,
    /// How long it lasts before it is healed (0: an instant fault).
    pub length: Duration,
    /// For the delay faults: how late each byte arrives.
    pub delay: Duration,
    /// For the lossy links: the share of chunks lost (and retransmitted) each way, in percent.
    pub loss_pct: u32,
    /// For the clock step: how far the admin's clock moves (negative: back).
    pub clock_step_ms: i64,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} {} for {} ms",
            self.kind,
            self.target,
            self.length.as_millis()
        )?;
        if self.kind.is_lossy() {
            write!(
                f,
                " (delay {} ms, loss {}%)",
                self.delay.as_millis(),
                self.loss_pct
            )?;
        } else if self.kind.has_delay() {
            write!(f, " (delay {} ms)", self.delay.as_millis())?;
        }
        if self.kind == FaultKind::StepClock {
            write!(f, " (clock {:+} ms)", self.clock_step_ms)?;
        }
        Ok(())
    }
}

/// What the plan is drawn from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    pub seed: u64,
    pub admins: usize,
    pub executors: usize,
    /// The fault kinds this cluster offers, in a fixed order.
    pub kinds: Vec<FaultKind>,
    /// The window the faults fall in; the last `settle` of it stays fault-free, so what the
    /// last fault disturbed has healed before the checker's window ends.
    pub window: Duration,
    pub settle: Duration,
    /// Random gap between one fault healing and the next: [min, max].
    pub gap: (Duration, Duration),
}

/// Draws the faults of `shape` from its seed.
pub fn draw(shape: &Shape) -> Vec<Fault> {
    let mut rng = fastrand::Rng::with_seed(shape.seed);
    let mut kinds = shape.kinds.clone();
    kinds.sort();
    kinds.dedup();
    let last_heal_ms = shape.window.saturating_sub(shape.settle).as_millis() as u64;
    let mut faults = Vec::new();
    let mut at_ms = random_ms(&mut rng, shape.gap);
    while !kinds.is_empty() {
        let kind = kinds[rng.usize(..kinds.len())];
        let (min, max) = kind.length_range_ms();
        let length_ms = rng.u64(min..=max);
        let target = if kind.targets_admin() {
            Target::Admin(rng.usize(..shape.admins.max(1)))
        } else if kind.targets_executor() {
            Target::Executor(rng.usize(..shape.executors.max(1)))
        } else {
            Target::Database
        };
        let delay_ms = if kind.is_lossy() {
            rng.u64(10..=400)
        } else if kind.has_delay() {
            rng.u64(50..=2_000)
        } else {
            0
        };
        let loss_pct = if kind.is_lossy() { rng.u32(1..=20) } else { 0 };
        // A step of 1-10 s either way: beyond the admins' 2 s node lease, within and beyond
        // the 5 s misfire threshold.
        let clock_step_ms = if kind == FaultKind::StepClock {
            let step = rng.i64(1_000..=10_000);
            if rng.bool() { step } else { -step }
        } else {
            0
        };
        if at_ms + length_ms > last_heal_ms {
            break;
        }
        faults.push(Fault {
            at: Duration::from_millis(at_ms),
            kind,
            target,
            length: Duration::from_millis(length_ms),
            delay: Duration::from_millis(delay_ms),
            loss_pct,
            clock_step_ms,
        });
        at_ms += length_ms + random_ms(&mut rng, shape.gap);
    }
    faults
}

fn random_ms(rng: &mut fastrand::Rng, (min, max): (Duration, Duration)) -> u64 {
    let min = min.as_millis() as u64;
    rng.u64(min..=(max.as_millis() as u64).max(min))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(seed: u64) -> Shape {
        Shape {
            seed,
            admins: 3,
            executors: 2,
            kinds: FaultKind::ALWAYS
                .iter()
                .chain(&FaultKind::NETWORKED_DATABASE)
                .copied()
                .collect(),
            window: Duration::from_secs(600),
            settle: Duration::from_secs(15),
            gap: (Duration::from_secs(2), Duration::from_secs(10)),
        }
    }

    #[test]
    fn the_same_seed_draws_the_same_plan() {
        assert_eq!(draw(&shape(7)), draw(&shape(7)));
        assert_ne!(draw(&shape(7)), draw(&shape(8)));
    }

    #[test]
    fn faults_come_one_at_a_time_and_heal_before_the_settle_time() {
        let shape = shape(42);
        let faults = draw(&shape);
        assert!(faults.len() > 20, "{} faults in 10 minutes", faults.len());
        for pair in faults.windows(2) {
            assert!(pair[0].at + pair[0].length + shape.gap.0 <= pair[1].at);
        }
        let last = faults.last().expect("faults");
        assert!(last.at + last.length <= shape.window - shape.settle);
    }

    #[test]
    fn targets_exist_and_only_offered_kinds_are_drawn() {
        let mut lone = shape(3);
        lone.admins = 1;
        lone.kinds = FaultKind::ALWAYS.to_vec();
        for fault in draw(&lone) {
            assert!(FaultKind::ALWAYS.contains(&fault.kind));
            match fault.target {
                Target::Admin(index) => assert_eq!(index, 0),
                Target::Executor(index) => assert!(index < 2),
                Target::Database => panic!("no database fault offered: {fault}"),
            }
        }
    }

    #[test]
    fn no_kinds_no_faults() {
        let mut none = shape(1);
        none.kinds.clear();
        assert!(draw(&none).is_empty());
    }
}
