//! The fault injectors: each planned fault is applied to the cluster, held for its length and
//! healed, and what really happened (when, how long, any error) goes into the timeline.

use std::time::Duration;

use super::cluster::Cluster;
use super::plan::{Fault, FaultKind, Target};
use crate::clock::now_ms;

/// One fault as it happened.
#[derive(Debug, Clone)]
pub struct Happened {
    pub fault: Fault,
    /// When it was injected and healed (epoch ms).
    pub injected_ms: i64,
    pub healed_ms: i64,
    /// Why it could not be injected or healed, if so.
    pub error: Option<String>,
}

/// Applies `fault`, waits its length, heals it. An error leaves the cluster as healed as it
/// can be made and is reported in the timeline, not raised: a campaign goes on.
pub async fn inject(cluster: &mut Cluster, fault: Fault) -> Happened {
    let injected_ms = now_ms();
    let outcome = match apply(cluster, fault) {
        Ok(()) => {
            tokio::time::sleep(fault.length).await;
            heal(cluster, fault)
        }
        Err(error) => {
            // Whatever half-happened is undone, so the next fault starts from a whole cluster.
            let _ = heal(cluster, fault);
            Err(error)
        }
    };
    Happened {
        fault,
        injected_ms,
        healed_ms: now_ms(),
        error: outcome.err().map(|error| format!("{error:#}")),
    }
}

fn apply(cluster: &mut Cluster, fault: Fault) -> anyhow::Result<()> {
    match (fault.kind, fault.target) {
        (FaultKind::KillAdmin, Target::Admin(index)) => admin(cluster, index)?.kill_9(),
        (FaultKind::PauseAdmin, Target::Admin(index)) => admin(cluster, index)?.pause(),
        (FaultKind::KillExecutor, Target::Executor(index)) => executor(cluster, index)?.kill_9(),
        (FaultKind::PauseExecutor, Target::Executor(index)) => executor(cluster, index)?.pause(),
        (FaultKind::DelayExecutorLink, Target::Executor(index)) => {
            for link in &executor(cluster, index)?.links {
                link.set_delay(fault.delay);
            }
            Ok(())
        }
        (FaultKind::PartitionExecutor, Target::Executor(index)) => {
            for link in &executor(cluster, index)?.links {
                link.set_partitioned(true);
            }
            Ok(())
        }
        (FaultKind::RestartDatabase, Target::Database) => {
            // Flushed first, so the stop is quick and the outage is the planned one.
            cluster.database.control("checkpoint")?;
            cluster.database.control("stop")
        }
        (FaultKind::DropDatabaseConnections, Target::Database) => {
            database_link(cluster)?.cut_all();
            Ok(())
        }
        (FaultKind::DelayDatabase, Target::Database) => {
            database_link(cluster)?.set_delay(fault.delay);
            Ok(())
        }
        (FaultKind::StepClock, Target::Admin(index)) => {
            step_clock(admin(cluster, index)?, fault.clock_step_ms)
        }
        (FaultKind::FillDisk, Target::Database) => disk(cluster)?.fill(),
        (FaultKind::LossyExecutorLink, Target::Executor(index)) => {
            for link in &executor(cluster, index)?.links {
                link.set_delay(fault.delay);
                link.set_loss(fault.loss_pct);
            }
            Ok(())
        }
        (FaultKind::LossyDatabaseLink, Target::Database) => {
            let link = database_link(cluster)?;
            link.set_delay(fault.delay);
            link.set_loss(fault.loss_pct);
            Ok(())
        }
        (kind, target) => anyhow::bail!("{kind:?} cannot hit {target}"),
    }
}

fn heal(cluster: &mut Cluster, fault: Fault) -> anyhow::Result<()> {
    match (fault.kind, fault.target) {
        (FaultKind::KillAdmin, Target::Admin(index)) => admin(cluster, index)?.restart(),
        (FaultKind::PauseAdmin, Target::Admin(index)) => admin(cluster, index)?.resume(),
        (FaultKind::KillExecutor, Target::Executor(index)) => executor(cluster, index)?.restart(),
        (FaultKind::PauseExecutor, Target::Executor(index)) => executor(cluster, index)?.resume(),
        (
            FaultKind::DelayExecutorLink
            | FaultKind::PartitionExecutor
            | FaultKind::LossyExecutorLink,
            Target::Executor(index),
        ) => {
            for link in &executor(cluster, index)?.links {
                link.heal();
            }
            Ok(())
        }
        (FaultKind::RestartDatabase, Target::Database) => cluster.database.control("start"),
        (
            FaultKind::DropDatabaseConnections
            | FaultKind::DelayDatabase
            | FaultKind::LossyDatabaseLink,
            Target::Database,
        ) => {
            database_link(cluster)?.heal();
            Ok(())
        }
        (FaultKind::StepClock, Target::Admin(index)) => step_clock(admin(cluster, index)?, 0),
        (FaultKind::FillDisk, Target::Database) => disk(cluster)?.free(),
        (kind, target) => anyhow::bail!("{kind:?} cannot hit {target}"),
    }
}

/// Sets the admin's clock offset (its clock hook re-reads the file within 100 ms). Written
/// beside and renamed over, so the admin never reads half a number.
fn step_clock(admin: &crate::admins::Admin, offset_ms: i64) -> anyhow::Result<()> {
    let file = admin.clock_offset_file();
    let next = file.with_extension("next");
    std::fs::write(&next, offset_ms.to_string())?;
    std::fs::rename(&next, &file)?;
    Ok(())
}

fn disk(cluster: &Cluster) -> anyhow::Result<&super::disk::SmallDisk> {
    cluster
        .disk
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("the database is not on a small file system"))
}

fn admin(cluster: &mut Cluster, index: usize) -> anyhow::Result<&mut crate::admins::Admin> {
    cluster
        .admins
        .get_mut(index)
        .ok_or_else(|| anyhow::anyhow!("no admin {index}"))
}

fn executor(cluster: &mut Cluster, index: usize) -> anyhow::Result<&mut super::cluster::Executor> {
    cluster
        .executors
        .get_mut(index)
        .ok_or_else(|| anyhow::anyhow!("no executor {index}"))
}

fn database_link(cluster: &Cluster) -> anyhow::Result<&super::proxy::FaultProxy> {
    cluster
        .database_link
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("no proxy between the admins and the database"))
}

/// How long after its planned instant a fault really started (a slow restart of the one
/// before it delays it); shown in the timeline.
pub fn slip(happened: &Happened, window_start_ms: i64) -> Duration {
    let planned_ms = window_start_ms + happened.fault.at.as_millis() as i64;
    Duration::from_millis((happened.injected_ms - planned_ms).max(0) as u64)
}
