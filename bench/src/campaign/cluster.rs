//! The campaign's cluster: the admins (reaching their database through a fault proxy when it
//! is a server), the recording executors (reaching each admin through a proxy of their own,
//! and dialled by the admins through another), and the database. Every link a fault can
//! disturb goes through a [`FaultProxy`]; every process a fault can kill is restartable here.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::admins::{self, Admin, Timing};
use crate::database::Database;
use xjob_testkit::process::Signal;

use crate::processes::{self, ChildProcess, free_port, sibling_binary};

use super::disk::SmallDisk;
use super::proxy::FaultProxy;

/// One recording executor, restartable on the same address with the same records file.
pub struct Executor {
    name: String,
    command: CommandSpec,
    process: Option<ChildProcess>,
    /// Its link to each admin (its sessions) and the admins' link to it (dispatches).
    pub links: Vec<FaultProxy>,
}

/// What starts an executor again after a kill.
struct CommandSpec {
    binary: PathBuf,
    admin_urls: String,
    bind: String,
    records: PathBuf,
    advertised: String,
    run_logs: PathBuf,
}

impl Executor {
    /// Starts executor `index`, reaching the admins through new proxies and advertising a
    /// proxy in front of itself.
    pub async fn start(
        index: usize,
        admin_addresses: &[SocketAddr],
        (dir, run_logs): (&Path, &Path),
    ) -> anyhow::Result<Executor> {
        let port = free_port()?;
        let bind: SocketAddr = ([127, 0, 0, 1], port).into();
        let mut links = Vec::new();
        let mut admin_urls = Vec::new();
        for &admin in admin_addresses {
            let proxy = FaultProxy::start(admin).await?;
            admin_urls.push(format!("http://{}", proxy.address()));
            links.push(proxy);
        }
        let inbound = FaultProxy::start(bind).await?;
        let advertised = format!("http://{}", inbound.address());
        links.push(inbound);
        let command = CommandSpec {
            binary: sibling_binary("xjob-bench-executor")?,
            admin_urls: admins::rotated_urls(&admin_urls, index).join(","),
            bind: bind.to_string(),
            records: dir.join(format!("records-{index}.txt")),
            advertised,
            run_logs: run_logs.to_path_buf(),
        };
        let mut executor = Executor {
            name: format!("executor-{index}"),
            command,
            process: None,
            links,
        };
        executor.spawn()?;
        Ok(executor)
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let spec = &self.command;
        let mut command = Command::new(&spec.binary);
        command
            .arg(&spec.admin_urls)
            .arg(&spec.bind)
            .arg(&spec.records)
            .env("XJOB_BENCH_RECORD_EACH", "1")
            .env("XJOB_BENCH_ADVERTISE", &spec.advertised)
            .env("XJOB_BENCH_RUN_LOGS", &spec.run_logs)
            .env("RUST_LOG", "error");
        self.process = Some(ChildProcess::spawn(&self.name, &mut command)?);
        Ok(())
    }

    fn process(&mut self) -> anyhow::Result<&mut ChildProcess> {
        self.process
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("{} is not running", self.name))
    }

    /// SIGKILL: no shutdown code runs, runs in flight die with it.
    pub fn kill_9(&mut self) -> anyhow::Result<()> {
        self.process()?.kill_now()?;
        self.process = None;
        Ok(())
    }

    /// A new process on the same address, appending to the same records file.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        if let Some(mut old) = self.process.take() {
            old.kill_now()?;
        }
        self.spawn()
    }

    pub fn pause(&mut self) -> anyhow::Result<()> {
        self.process()?.signal(Signal::SIGSTOP)
    }

    pub fn resume(&mut self) -> anyhow::Result<()> {
        self.process()?.signal(Signal::SIGCONT)
    }

    /// The process, for stopping it with the others.
    pub fn process_mut(&mut self) -> Option<&mut ChildProcess> {
        self.process.as_mut()
    }
}

/// Everything a fault can hit.
pub struct Cluster {
    pub admins: Vec<Admin>,
    pub executors: Vec<Executor>,
    /// Between the admins and a database server (None on SQLite).
    pub database_link: Option<FaultProxy>,
    pub database: Database,
    /// The SQLite database's small file system, for the full-disk fault.
    pub disk: Option<SmallDisk>,
}

impl Cluster {
    /// SIGTERM to every executor, then to every admin (executors first: they finish their
    /// runs' results while the admins still listen).
    pub fn stop_processes(&mut self) -> anyhow::Result<()> {
        for executor in &mut self.executors {
            for link in &executor.links {
                link.heal();
            }
        }
        if let Some(link) = &self.database_link {
            link.heal();
        }
        if let Some(disk) = &self.disk {
            disk.free()?;
        }

        processes::terminate_all(
            self.executors.iter_mut().filter_map(Executor::process_mut),
            Duration::from_secs(20),
        )?;
        processes::terminate_all(
            self.admins.iter_mut().map(Admin::process_mut),
            Duration::from_secs(20),
        )
    }
}

/// Starts the admins on `database_url`; for a server, through a new fault proxy. Each admin's
/// clock follows its offset file (the clock step).
pub async fn start_admins(
    dir: &Path,
    count: usize,
    database_url: &str,
    timing: Timing,
) -> anyhow::Result<(Vec<Admin>, Option<FaultProxy>)> {
    match server_address(database_url) {
        Some((address, rewrite)) => {
            let proxy = FaultProxy::start(address).await?;
            let proxied_url = rewrite(proxy.address());
            let admins = admins::spawn_admins(dir, count, &proxied_url, timing, true)?;
            Ok((admins, Some(proxy)))
        }
        None => Ok((
            admins::spawn_admins(dir, count, database_url, timing, true)?,
            None,
        )),
    }
}

/// A server URL's `host:port` (when it is a loopback address) and a function that writes the
/// same URL with another address in its place; None for SQLite.
#[allow(clippy::type_complexity)]
fn server_address(url: &str) -> Option<(SocketAddr, Box<dyn Fn(SocketAddr) -> String + '_>)> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme.starts_with("sqlite") {
        return None;
    }
    let host_start = rest.rfind('@').map_or(0, |at| at + 1);
    let host_end = rest[host_start..]
        .find(['/', '?'])
        .map_or(rest.len(), |end| host_start + end);
    let host_port = &rest[host_start..host_end];
    let host_port = host_port.replacen("localhost", "127.0.0.1", 1);
    let address: SocketAddr = host_port.parse().ok()?;
    let rewrite = move |proxy: SocketAddr| {
        format!(
            "{scheme}://{}{proxy}{}",
            &rest[..host_start],
            &rest[host_end..]
        )
    };
    Some((address, Box::new(rewrite)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_url_is_rewritten_to_go_through_the_proxy() {
        let url = "postgres://xjob:secret@127.0.0.1:5433/scratch_1?sslmode=disable";
        let (address, rewrite) = server_address(url).expect("a server");
        assert_eq!(
            address,
            "127.0.0.1:5433".parse::<SocketAddr>().expect("address")
        );
        assert_eq!(
            rewrite("127.0.0.1:9999".parse().expect("address")),
            "postgres://xjob:secret@127.0.0.1:9999/scratch_1?sslmode=disable"
        );
        let (_, rewrite) = server_address("mysql://root@localhost:3307/db").expect("a server");
        assert_eq!(
            rewrite("127.0.0.1:1".parse().expect("address")),
            "mysql://root@127.0.0.1:1/db"
        );
        assert!(server_address("sqlite:///tmp/xjob.db").is_none());
    }
}
