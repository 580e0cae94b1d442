//! A CPU quota for the admin processes (the scale-out workload S1): one cgroup per admin with
//! the `cpu` controller's bandwidth limit, so 1, 2 and 3 admins are compared at equal CPU each
//! while the executors and the database run uncapped. Works on cgroup v2 (`cpu.max`) and v1
//! (`cpu.cfs_quota_us`); needs the right to create cgroups (root). The groups are removed when
//! the cap is dropped (after the processes in them exited).

use std::path::{Path, PathBuf};

/// The bandwidth period both cgroup versions are given (the kernel's default, 100 ms).
const PERIOD_US: u64 = 100_000;

/// Which cgroup hierarchy carries the `cpu` controller.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Hierarchy {
    /// cgroup v2: a group under `root` whose `cgroup.subtree_control` enables `cpu`.
    V2 { root: PathBuf },
    /// cgroup v1: the `cpu` controller's own mount.
    V1 { root: PathBuf },
}

/// A set of cgroups, one per capped process, each limited to `cores` CPUs' worth of time.
pub struct CpuCap {
    hierarchy: Hierarchy,
    /// The parent group made for this run (`xjob-bench-PID`); the admins' groups are its children.
    parent: PathBuf,
    cores: f64,
    groups: Vec<PathBuf>,
}

impl CpuCap {
    /// Finds the `cpu` controller and makes this run's parent group.
    pub fn new(cores: f64) -> anyhow::Result<CpuCap> {
        anyhow::ensure!(
            cores > 0.0 && cores.is_finite(),
            "--admin-cpu must be a positive number of cores, not {cores}"
        );
        let hierarchy = find_hierarchy()?;
        let root = match &hierarchy {
            Hierarchy::V2 { root } | Hierarchy::V1 { root } => root.clone(),
        };
        let parent = root.join(format!("xjob-bench-{}", std::process::id()));
        std::fs::create_dir_all(&parent).map_err(|error| {
            anyhow::anyhow!(
                "cannot create the cgroup {} (the CPU cap needs root): {error}",
                parent.display()
            )
        })?;
        if let Hierarchy::V2 { .. } = hierarchy {
            // The children's cpu.max exists only once the parent hands them the controller.
            write(&parent.join("cgroup.subtree_control"), "+cpu")?;
        }
        Ok(CpuCap {
            hierarchy,
            parent,
            cores,
            groups: Vec::new(),
        })
    }

    /// Moves process `pid` (all its threads, and the ones it starts later) into a new group
    /// limited to this cap's cores.
    pub fn confine(&mut self, name: &str, pid: u32) -> anyhow::Result<()> {
        let group = self.parent.join(name);
        std::fs::create_dir_all(&group)?;
        self.groups.push(group.clone());
        let quota_us = quota_us(self.cores);
        match self.hierarchy {
            Hierarchy::V2 { .. } => {
                write(&group.join("cpu.max"), &format!("{quota_us} {PERIOD_US}"))?;
            }
            Hierarchy::V1 { .. } => {
                write(&group.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
                write(&group.join("cpu.cfs_quota_us"), &quota_us.to_string())?;
            }
        }
        write(&group.join("cgroup.procs"), &pid.to_string())
    }

    /// Throttled periods and time so far, summed over the groups: how often the cap bit.
    pub fn throttled(&self) -> (u64, f64) {
        let mut periods = 0;
        let mut seconds = 0.0;
        for group in &self.groups {
            let stat = std::fs::read_to_string(group.join("cpu.stat")).unwrap_or_default();
            for line in stat.lines() {
                let mut fields = line.split_whitespace();
                let (Some(key), Some(Ok(value))) =
                    (fields.next(), fields.next().map(str::parse::<u64>))
                else {
                    continue;
                };
                match key {
                    "nr_throttled" => periods += value,
                    // v1 counts nanoseconds, v2 microseconds.
                    "throttled_time" => seconds += value as f64 / 1e9,
                    "throttled_usec" => seconds += value as f64 / 1e6,
                    _ => {}
                }
            }
        }
        (periods, seconds)
    }

    pub fn version(&self) -> &'static str {
        match self.hierarchy {
            Hierarchy::V2 { .. } => "v2",
            Hierarchy::V1 { .. } => "v1",
        }
    }
}

impl Drop for CpuCap {
    /// Removes the groups; a group still holding a process cannot be removed and is reported.
    fn drop(&mut self) {
        for group in self.groups.iter().chain(std::iter::once(&self.parent)) {
            if let Err(error) = std::fs::remove_dir(group) {
                eprintln!("warning: cgroup {} not removed: {error}", group.display());
            }
        }
    }
}

/// The quota per period for `cores` CPUs (at least the kernel's 1 ms minimum).
fn quota_us(cores: f64) -> u64 {
    ((cores * PERIOD_US as f64).round() as u64).max(1000)
}

/// cgroup v2 when the unified hierarchy at /sys/fs/cgroup offers `cpu`, else the v1 `cpu`
/// controller's mount.
fn find_hierarchy() -> anyhow::Result<Hierarchy> {
    let unified = Path::new("/sys/fs/cgroup");
    let controllers =
        std::fs::read_to_string(unified.join("cgroup.controllers")).unwrap_or_default();
    if controllers.split_whitespace().any(|name| name == "cpu") {
        return Ok(Hierarchy::V2 {
            root: unified.to_path_buf(),
        });
    }
    let v1 = unified.join("cpu");
    if v1.join("cpu.cfs_quota_us").exists() {
        return Ok(Hierarchy::V1 { root: v1 });
    }
    anyhow::bail!(
        "no cgroup cpu controller found (neither v2 at /sys/fs/cgroup nor v1 at /sys/fs/cgroup/cpu)"
    )
}

fn write(path: &Path, value: &str) -> anyhow::Result<()> {
    std::fs::write(path, value)
        .map_err(|error| anyhow::anyhow!("writing {value:?} to {}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::quota_us;

    #[test]
    fn a_quota_is_the_share_of_a_100_ms_period() {
        assert_eq!(quota_us(0.5), 50_000);
        assert_eq!(quota_us(2.0), 200_000);
        assert_eq!(quota_us(0.001), 1000, "the kernel's minimum");
    }
}
