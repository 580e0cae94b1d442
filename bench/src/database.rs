//! The database the admins share: an SQLite file in the run's scratch directory, a PostgreSQL
//! 15 or MariaDB server the harness starts on a free loopback port in a throw-away directory
//! (the recipe of `.ci/databases.sh`), or a server already running (`--database-url`), in a new
//! scratch database. Servers the harness started are stopped and deleted when dropped, so an
//! error or Ctrl-C leaves nothing behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use xjob_admin::store::Store;

use crate::processes::{self, ChildProcess};

const POSTGRES_BIN: &str = "/usr/lib/postgresql/15/bin";

/// Which backend a run uses (the `database` field of the JSON line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    Sqlite,
    Postgres,
    Mariadb,
}

impl Backend {
    /// The backend a server URL names.
    pub fn of_url(url: &str) -> anyhow::Result<Backend> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            Ok(Backend::Mariadb)
        } else {
            anyhow::bail!(
                "--database-url must name a PostgreSQL or MySQL/MariaDB server \
                 (postgres://… or mysql://…); for SQLite leave it out"
            )
        }
    }
}

/// The database of one run.
pub struct Database {
    /// What every admin gets as `--database-url`.
    pub url: String,
    /// A command taking `start|stop|checkpoint` that restarts the server (F3).
    pub ctl: Option<String>,
    server: Option<Server>,
    /// CPU seconds of server processes that have exited (a restart): a total stays monotonic.
    retired_cpu_s: f64,
}

enum Server {
    Postgres(Postgres),
    Mariadb(Mariadb),
}

impl Database {
    /// One SQLite file inside the run's scratch directory, shared by every admin.
    pub fn sqlite(scratch: &Path) -> Database {
        Database {
            url: format!("sqlite://{}", scratch.join("xjob.db").display()),
            ctl: None,
            server: None,
            retired_cpu_s: 0.0,
        }
    }

    /// Starts a server of `backend` on a free loopback port.
    /// `settings` are NAME=VALUE pairs (`parse_setting`) the server starts with.
    pub fn start(backend: Backend, settings: &[String]) -> anyhow::Result<Database> {
        let server = match backend {
            Backend::Sqlite => anyhow::bail!("SQLite needs no server"),
            Backend::Postgres => Server::Postgres(Postgres::start(settings)?),
            Backend::Mariadb => Server::Mariadb(Mariadb::start(settings)?),
        };
        let (url, ctl) = match &server {
            Server::Postgres(postgres) => (postgres.url(), Some(postgres.ctl_command())),
            Server::Mariadb(mariadb) => (mariadb.url(), None),
        };
        Ok(Database {
            url,
            ctl,
            server: Some(server),
            retired_cpu_s: 0.0,
        })
    }

    /// A new scratch database on a server that is already running (it is left there).
    pub async fn external(base_url: &str, ctl: Option<String>) -> anyhow::Result<Database> {
        Backend::of_url(base_url)?;
        let url = Store::create_scratch_database(base_url)
            .await
            .map_err(|error| anyhow::anyhow!("cannot create a scratch database: {error}"))?;
        Ok(Database {
            url,
            ctl,
            server: None,
            retired_cpu_s: 0.0,
        })
    }

    /// Whether the harness can see the server's processes (it started them).
    pub fn measured(&self) -> bool {
        self.server.is_some()
    }

    /// user + system CPU seconds of the server since it was first started.
    pub fn cpu_s(&self) -> f64 {
        let live = match &self.server {
            Some(Server::Postgres(postgres)) => postgres.cpu_s(),
            Some(Server::Mariadb(mariadb)) => processes::cpu_seconds(mariadb.process.pid()),
            None => 0.0,
        };
        self.retired_cpu_s + live
    }

    /// Resident memory of the server now: the sum of its processes' proportional set sizes.
    pub fn rss_mb(&self) -> f64 {
        match &self.server {
            Some(Server::Postgres(postgres)) => postgres
                .pids()
                .into_iter()
                .map(processes::proportional_mb)
                .sum(),
            Some(Server::Mariadb(mariadb)) => processes::proportional_mb(mariadb.process.pid()),
            None => 0.0,
        }
    }

    /// Whether [`Database::control`] can stop and start the server: PostgreSQL through its
    /// control command, a MariaDB server the harness started directly.
    pub fn restartable(&self) -> bool {
        self.ctl.is_some() || matches!(self.server, Some(Server::Mariadb(_)))
    }

    /// Runs the control command with `action` (`start`, `stop`, `checkpoint`).
    pub fn control(&mut self, action: &str) -> anyhow::Result<()> {
        if let Some(Server::Mariadb(mariadb)) = &mut self.server {
            if action == "stop" {
                self.retired_cpu_s += processes::cpu_seconds(mariadb.process.pid());
            }
            return mariadb.control(action);
        }
        let ctl = self
            .ctl
            .clone()
            .ok_or_else(|| anyhow::anyhow!("no command to restart this database"))?;
        if action == "stop" {
            // The stopped processes' CPU would vanish from the total.
            self.retired_cpu_s = self.cpu_s();
        }
        processes::run_shell(&format!("{ctl} {action}"))
    }

    /// Stops a server the harness started and deletes its directory.
    pub fn stop(self) {
        drop(self);
    }
}

/// PostgreSQL 15 in a throw-away directory, run as the `postgres` user (it refuses root).
struct Postgres {
    dir: tempfile::TempDir,
    port: u16,
    /// `-c NAME=VALUE` for each setting asked for.
    options: String,
}

impl Postgres {
    fn start(settings: &[String]) -> anyhow::Result<Postgres> {
        let bin = Path::new(POSTGRES_BIN);
        if !bin.join("postgres").exists() {
            anyhow::bail!(
                "{POSTGRES_BIN}/postgres not found: install PostgreSQL 15 \
                 (.ci/databases.sh: xjob_install_databases) or pass --database-url"
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("xjob-bench-pg.")
            .tempdir()?;
        processes::run_shell(&format!(
            "chown postgres:postgres {}",
            shell_path(dir.path())?
        ))?;
        let postgres = Postgres {
            port: processes::free_port()?,
            dir,
            options: settings
                .iter()
                .map(|setting| format!(" -c {setting}"))
                .collect(),
        };
        eprintln!("starting postgresql on 127.0.0.1:{}", postgres.port);
        postgres.as_postgres(&format!(
            "{POSTGRES_BIN}/initdb -D {} -U postgres -A trust >/dev/null",
            shell_path(&postgres.data())?
        ))?;
        std::fs::write(postgres.ctl_path(), postgres.ctl_script()?)?;
        processes::run_shell(&format!("chmod +x {}", shell_path(&postgres.ctl_path())?))?;
        processes::run_shell(&format!("{} start", postgres.ctl_command()))
            .map_err(|error| anyhow::anyhow!("{error}\n{}", postgres.log_tail()))?;
        processes::run_shell(&format!(
            "psql -h 127.0.0.1 -p {} -U postgres -q -c \"CREATE USER xjob PASSWORD 'xjob' \
             CREATEDB\" -c \"CREATE DATABASE xjob OWNER xjob\" >/dev/null",
            postgres.port
        ))?;
        Ok(postgres)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn ctl_path(&self) -> PathBuf {
        self.dir.path().join("ctl")
    }

    fn ctl_command(&self) -> String {
        self.ctl_path().display().to_string()
    }

    fn url(&self) -> String {
        format!("postgres://xjob:xjob@127.0.0.1:{}/xjob", self.port)
    }

    /// One control script with the server's options baked in, so `stop` then `start` brings
    /// the same server back on the same port; `checkpoint` first makes a `stop` quick.
    fn ctl_script(&self) -> anyhow::Result<String> {
        let dir = shell_path(self.dir.path())?;
        let (port, options) = (self.port, &self.options);
        Ok(format!(
            "#!/bin/sh\n\
             # usage: ctl start|stop|restart|checkpoint\n\
             case \"$1\" in\n  \
               checkpoint) exec psql -h 127.0.0.1 -p {port} -U postgres -q -c CHECKPOINT ;;\n  \
               *) exec su postgres -s /bin/sh -c \"{POSTGRES_BIN}/pg_ctl -D {dir}/data \
                  -l {dir}/log -w -m fast -o '-h 127.0.0.1 -p {port} -k {dir} -c fsync=on \
                  -c max_connections=300{options}' $1 >/dev/null\" ;;\n\
             esac\n"
        ))
    }

    fn as_postgres(&self, script: &str) -> anyhow::Result<()> {
        processes::run_shell(&format!("su postgres -s /bin/sh -c \"{script}\""))
    }

    /// The postmaster (first line of `postmaster.pid`) and its children (backends, workers).
    fn pids(&self) -> Vec<u32> {
        let Some(postmaster) = self.postmaster() else {
            return Vec::new();
        };
        let mut pids = vec![postmaster];
        pids.extend(processes::children_of(postmaster));
        pids
    }

    fn postmaster(&self) -> Option<u32> {
        std::fs::read_to_string(self.data().join("postmaster.pid"))
            .ok()?
            .lines()
            .next()?
            .trim()
            .parse()
            .ok()
    }

    /// The postmaster with the backends it reaped, plus its live children.
    fn cpu_s(&self) -> f64 {
        let Some(postmaster) = self.postmaster() else {
            return 0.0;
        };
        processes::cpu_seconds_with_reaped(postmaster)
            + processes::children_of(postmaster)
                .into_iter()
                .map(processes::cpu_seconds)
                .sum::<f64>()
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // Immediate: the data is thrown away, so no shutdown checkpoint is worth waiting for.
        if let Ok(data) = shell_path(&self.data()) {
            let _ = self.as_postgres(&format!(
                "{POSTGRES_BIN}/pg_ctl -D {data} -m immediate -w stop >/dev/null 2>&1"
            ));
        }
        if let Some(postmaster) = self.postmaster() {
            let _ = processes::signal(postmaster, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// MariaDB in a throw-away directory, its server a direct child of the harness.
struct Mariadb {
    // Dropped (killed) before the directory is deleted.
    process: ChildProcess,
    port: u16,
    dir: tempfile::TempDir,
    /// `--NAME=VALUE` for each setting asked for, kept for a restart.
    options: Vec<String>,
}

impl Mariadb {
    fn start(settings: &[String]) -> anyhow::Result<Mariadb> {
        let dir = tempfile::Builder::new()
            .prefix("xjob-bench-mariadb.")
            .tempdir()?;
        let port = processes::free_port()?;
        eprintln!("starting mariadb on 127.0.0.1:{port}");
        let data = dir.path().join("data");
        let installed = Command::new("mariadb-install-db")
            .args([
                "--no-defaults",
                "--user=root",
                "--auth-root-authentication-method=normal",
            ])
            .arg(format!("--datadir={}", data.display()))
            .stdin(Stdio::null())
            .output()
            .map_err(|error| {
                anyhow::anyhow!(
                    "cannot run mariadb-install-db (is mariadb-server installed?): {error}"
                )
            })?;
        if !installed.status.success() {
            anyhow::bail!(
                "mariadb-install-db failed: {}",
                String::from_utf8_lossy(&installed.stderr)
            );
        }
        let socket = dir.path().join("sock");
        let options: Vec<String> = settings
            .iter()
            .map(|setting| format!("--{setting}"))
            .collect();
        let process = Mariadb::spawn_server(dir.path(), port, &options)?;
        let mut mariadb = Mariadb {
            process,
            port,
            dir,
            options,
        };
        mariadb.wait_ready(&socket)?;
        mariadb.client(
            &socket,
            "CREATE DATABASE xjob; \
             CREATE USER 'xjob'@'%' IDENTIFIED BY 'xjob'; GRANT ALL ON *.* TO 'xjob'@'%'; \
             CREATE USER 'xjob'@'localhost' IDENTIFIED BY 'xjob'; \
             GRANT ALL ON *.* TO 'xjob'@'localhost';",
        )?;
        Ok(mariadb)
    }

    /// `mariadbd` on `dir`'s data directory and socket, listening on `port`.
    fn spawn_server(dir: &Path, port: u16, options: &[String]) -> anyhow::Result<ChildProcess> {
        // Its start-up notes (open-files limits…) go to a file, not the harness's stderr.
        let stdout = std::fs::File::create(dir.join("stdout"))?;
        let mut command = Command::new(mariadbd_binary());
        command
            .stderr(stdout.try_clone()?)
            .args(["--no-defaults", "--user=root", "--bind-address=127.0.0.1"])
            .arg(format!("--datadir={}", dir.join("data").display()))
            .arg(format!("--socket={}", dir.join("sock").display()))
            .arg(format!("--port={port}"))
            .arg(format!("--pid-file={}", dir.join("pid").display()))
            .arg("--max-connections=300")
            .arg(format!("--log-error={}", dir.join("log").display()))
            .args(options);
        ChildProcess::spawn_with_stdout("mariadbd", &mut command, stdout.into())
    }

    /// `stop` (a clean shutdown), `start` (the same server on the same port), `checkpoint`
    /// (nothing to do: InnoDB's shutdown is quick enough).
    fn control(&mut self, action: &str) -> anyhow::Result<()> {
        match action {
            "stop" => {
                self.process.ask_to_exit()?;
                self.process
                    .wait_exit(Instant::now() + Duration::from_secs(30))
            }
            "start" => {
                self.process = Mariadb::spawn_server(self.dir.path(), self.port, &self.options)?;
                let socket = self.dir.path().join("sock");
                self.wait_ready(&socket)
            }
            "checkpoint" => Ok(()),
            other => anyhow::bail!("unknown database action {other}"),
        }
    }

    fn url(&self) -> String {
        format!("mysql://xjob:xjob@127.0.0.1:{}/xjob", self.port)
    }

    fn wait_ready(&mut self, socket: &Path) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.client(socket, "SELECT 1").is_err() {
            if !self.process.is_running() || Instant::now() > deadline {
                let log = std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default();
                anyhow::bail!("mariadb did not start:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    fn client(&self, socket: &Path, sql: &str) -> anyhow::Result<()> {
        let status = Command::new("mariadb")
            .args(["--no-defaults", "-uroot"])
            .arg(format!("--socket={}", socket.display()))
            .args(["-e", sql])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        anyhow::ensure!(status.success(), "mariadb client: {status}");
        Ok(())
    }
}

/// `mariadbd` is in /usr/sbin, which is not always on a root shell's PATH.
fn mariadbd_binary() -> PathBuf {
    let sbin = PathBuf::from("/usr/sbin/mariadbd");
    if sbin.exists() {
        sbin
    } else {
        PathBuf::from("mariadbd")
    }
}

/// A path spliced into a shell command; the harness's own temp paths never need quoting, so
/// anything else is refused rather than quoted.
fn shell_path(path: &Path) -> anyhow::Result<String> {
    let text = path.display().to_string();
    let safe = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c));
    anyhow::ensure!(safe, "unexpected characters in path {text}");
    Ok(text)
}

/// A server setting of `--db-setting`: NAME=VALUE, both of letters, digits, `_`, `.` and `-`
/// (it goes into a shell command line).
pub fn parse_setting(setting: &str) -> Result<String, String> {
    let plain = |part: &str| {
        !part.is_empty()
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    };
    match setting.split_once('=') {
        Some((name, value)) if plain(name) && plain(value) => Ok(setting.to_string()),
        _ => Err(format!(
            "{setting:?} is not NAME=VALUE (letters, digits, '_', '.', '-'), \
             e.g. max_wal_size=4GB"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_are_named_by_url_schemes() {
        assert_eq!(
            Backend::of_url("postgres://u:p@h:1/db").ok(),
            Some(Backend::Postgres)
        );
        assert_eq!(
            Backend::of_url("mysql://u:p@h:1/db").ok(),
            Some(Backend::Mariadb)
        );
        assert!(Backend::of_url("sqlite:///tmp/x.db").is_err());
    }

    #[test]
    fn only_plain_paths_reach_a_shell() {
        assert!(shell_path(Path::new("/tmp/xjob-bench-pg.Ab12_x")).is_ok());
        assert!(shell_path(Path::new("/tmp/a b")).is_err());
        assert!(shell_path(Path::new("/tmp/$(rm)")).is_err());
    }

    #[test]
    fn server_settings_are_plain_name_value_pairs() {
        assert_eq!(
            parse_setting("max_wal_size=16GB").as_deref(),
            Ok("max_wal_size=16GB")
        );
        assert!(parse_setting("innodb-buffer-pool-size=1G").is_ok());
        for refused in ["max_wal_size", "=1GB", "a=", "a=1 b=2", "a=$(rm)", "a='x'"] {
            assert!(parse_setting(refused).is_err(), "{refused} was taken");
        }
    }
}
