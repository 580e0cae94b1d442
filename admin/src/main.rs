//! `xjob`: the admin's command line.

mod logs;

use std::path::PathBuf;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use logs::LogFormat;
use xjob_admin::Config;

/// mimalloc returns freed pages to the system shortly after they are freed; glibc's `malloc`
/// kept the memory of each second's burst of runs in per-thread arenas (docs/benchmarks.md,
/// *Admin memory*). It is built without transparent huge pages (`no_thp`, workspace Cargo.toml),
/// with which it held a third (SQLite) to 60 % (PostgreSQL) more memory (docs/benchmarks.md,
/// *Huge pages off*). Only the `xjob` binary sets it: the library leaves the choice to its user.
/// The `mimalloc` feature (on by default) is off in a build with `--no-default-features`, which
/// allocates with glibc's `malloc`: the comparison the allocator has to keep earning.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "xjob",
    version,
    about = "xjob: a distributed job scheduler (XXL-JOB on gRPC)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the admin (scheduling center).
    Serve(ServeArgs),
    /// Creates or upgrades the database schema, then exits.
    Migrate(ConfigArgs),
    /// Manages JobAdmin users (against the configured database).
    #[command(subcommand)]
    User(UserCommand),
    /// Client commands against a running admin over gRPC (jobs, runs, groups, users, executors,
    /// preview).
    #[command(flatten)]
    Client(xjob_cli::Command),
    /// Imports an XXL-JOB installation's groups and jobs (docs/migrating-from-xxl-job.md);
    /// exits 2 when something could not be imported (listed with the reason).
    ImportXxlJob {
        #[command(flatten)]
        import: xjob_admin::import_xxl::ImportArgs,
        #[command(flatten)]
        config: ConfigArgs,
    },
}

#[derive(Subcommand)]
enum UserCommand {
    /// Creates a user and prints its first API token, once (e.g. the first admin).
    Create(UserCreateArgs),
}

#[derive(clap::Args)]
struct UserCreateArgs {
    /// The user's name (letters, digits, - _ . @).
    name: String,
    /// admin (everything), operator (jobs and runs in granted groups) or viewer (read-only).
    #[arg(long)]
    role: String,
    /// Lifetime of the token, e.g. 2160h (90 days); default: never expires.
    #[arg(long)]
    token_ttl: Option<String>,
    /// Reads a web console password from the first line of stdin (none: token only).
    #[arg(long)]
    password_stdin: bool,
    #[command(flatten)]
    config: ConfigArgs,
}

/// Where the configuration and the database are, and how logs are written: every command that
/// works on the admin's database takes these.
#[derive(clap::Args)]
#[command(next_help_heading = "Configuration and logs")]
struct ConfigArgs {
    /// TOML configuration file (flags and XJOB_* variables override it).
    #[arg(long, env = "XJOB_CONFIG")]
    config: Option<PathBuf>,
    /// Data directory for the embedded SQLite database [default: ./xjob-data].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Database URL, e.g. sqlite://./xjob-data/xjob.db.
    #[arg(long)]
    database_url: Option<String>,
    #[command(flatten)]
    logs: logs::LogArgs,
}

/// `serve`'s own flags: what it listens on and runs, on top of the configuration.
#[derive(clap::Args)]
struct ServeArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Address to serve gRPC on [default: 127.0.0.1:8080].
    #[arg(long)]
    listen: Option<String>,
    /// This admin's node id (stable across restarts).
    #[arg(long)]
    node_id: Option<String>,
    /// Also run a demo executor (app `xjob-demo`) with sample jobs.
    #[arg(long)]
    demo: bool,
    /// INSECURE: serve JobAdmin without authentication on a non-loopback address while no
    /// user exists.
    #[arg(long)]
    insecure_open_admin_api: bool,
    /// Address to serve Prometheus metrics on (`GET /metrics`), e.g. 127.0.0.1:9464.
    #[arg(long)]
    metrics_listen: Option<String>,
    /// Address to serve XXL-JOB's executor-facing API on (registry, callback), so unmodified
    /// XXL-JOB executors can register, e.g. 0.0.0.0:8090.
    #[arg(long)]
    xxl_job_compat_listen: Option<String>,
    /// Address to serve the web console on, e.g. 127.0.0.1:8081 (`--demo`: that by default).
    #[arg(long)]
    http_listen: Option<String>,
}

/// The file, then `XJOB_*` variables, then the flags every database command takes. Not yet
/// validated: `serve` applies its own flags first.
fn read_config(args: &ConfigArgs) -> anyhow::Result<Config> {
    let mut config = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|error| anyhow::anyhow!("cannot read {}: {error}", path.display()))?;
            Config::from_toml(&text)?
        }
        None => Config::default(),
    };
    config.apply_env(|key| std::env::var(key).ok())?;
    if let Some(data_dir) = &args.data_dir {
        config.data_dir = data_dir.clone();
    }
    if let Some(url) = &args.database_url {
        config.database_url = url.clone();
    }
    Ok(config)
}

/// The configuration of `migrate`, `user create` and `import-xxl-job`, validated as `serve`
/// validates it.
fn load_config(args: &ConfigArgs) -> anyhow::Result<Config> {
    Ok(read_config(args)?.validate()?)
}

fn load_serve_config(args: &ServeArgs) -> anyhow::Result<Config> {
    let mut config = read_config(&args.config)?;
    if let Some(listen) = &args.listen {
        config.listen = listen
            .parse()
            .map_err(|error| anyhow::anyhow!("--listen '{listen}': {error}"))?;
    }
    if let Some(node_id) = &args.node_id {
        config.node_id = node_id.clone();
    }
    config.demo |= args.demo;
    config.insecure_open_admin_api |= args.insecure_open_admin_api;
    if let Some(address) = &args.metrics_listen {
        config.metrics_listen = Some(
            address
                .parse()
                .map_err(|error| anyhow::anyhow!("--metrics-listen '{address}': {error}"))?,
        );
    }
    if let Some(address) = &args.xxl_job_compat_listen {
        config.xxl_job_compat_listen =
            Some(address.parse().map_err(|error| {
                anyhow::anyhow!("--xxl-job-compat-listen '{address}': {error}")
            })?);
    }
    if let Some(address) = &args.http_listen {
        config.http_listen = Some(
            address
                .parse()
                .map_err(|error| anyhow::anyhow!("--http-listen '{address}': {error}"))?,
        );
    }
    if config.demo && config.http_listen.is_none() {
        // The quick start opens the console here.
        config.http_listen = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 8081)));
    }
    Ok(config.validate()?)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let command = Cli::parse().command;
    let format = match &command {
        Command::Serve(args) => args.config.logs.log_format,
        Command::Migrate(config)
        | Command::ImportXxlJob { config, .. }
        | Command::User(UserCommand::Create(UserCreateArgs { config, .. })) => {
            config.logs.log_format
        }
        Command::Client(_) => LogFormat::Text,
    };
    let result = match command {
        // The client prints its own one-line errors, with its own exit codes.
        Command::Client(command) => Ok(xjob_cli::run(command).await),
        Command::Serve(args) => serve(args).await.map(|()| 0),
        Command::Migrate(config) => migrate(config).await.map(|()| 0),
        Command::User(UserCommand::Create(args)) => create_user(args).await.map(|()| 0),
        Command::ImportXxlJob { import, config } => import_xxl_job(import, config).await,
    };
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(error) => {
            logs::report_error(format, &error);
            ExitCode::FAILURE
        }
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let config = load_serve_config(&args)?;
    let telemetry = logs::init(args.config.logs.log_format, Some(&config.otlp_endpoint))?;
    let result = xjob_admin::run(config, shutdown_signal()).await;
    // Flushing waits for the exporter, which runs on this runtime: off the async thread.
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    Ok(result?)
}

/// `xjob migrate`: the schema, then what `serve` would say about this configuration on this
/// database, so a refusal is met here rather than at the first start.
async fn migrate(args: ConfigArgs) -> anyhow::Result<()> {
    let config = load_config(&args)?;
    logs::init(args.logs.log_format, None)?;
    if config.database_url.starts_with("sqlite:") {
        std::fs::create_dir_all(&config.data_dir)?;
    }
    let store = xjob_admin::store::Store::connect(&config.database_url).await?;
    let refusal = xjob_admin::auth::startup::refusal(&store, &config).await;
    store.close().await;
    tracing::info!("database is migrated");
    if let Some(refusal) = refusal? {
        tracing::warn!("`xjob serve` with this configuration will not start yet: {refusal}");
    }
    Ok(())
}

async fn import_xxl_job(
    import: xjob_admin::import_xxl::ImportArgs,
    args: ConfigArgs,
) -> anyhow::Result<i32> {
    let config = load_config(&args)?;
    logs::init(args.logs.log_format, None)?;
    xjob_admin::import_xxl::run(&config, &import).await
}

/// `xjob user create`: inserts the user in the configured database (migrating it first) and
/// prints its token on stdout, the only time it is shown.
async fn create_user(args: UserCreateArgs) -> anyhow::Result<()> {
    use std::io::Write;

    let config = load_config(&args.config)?;
    logs::init(args.config.logs.log_format, None)?;
    let ttl_ms = match &args.token_ttl {
        Some(text) => {
            let ttl = xjob_admin::config::parse_duration(text)
                .map_err(|error| anyhow::anyhow!("--token-ttl '{text}': {error}"))?;
            i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
        }
        None => 0,
    };
    if config.database_url.starts_with("sqlite:") {
        std::fs::create_dir_all(&config.data_dir)?;
    }
    let password = if args.password_stdin {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)?;
        line.trim_end_matches(['\r', '\n']).to_string()
    } else {
        String::new()
    };
    if args.password_stdin && password.is_empty() {
        anyhow::bail!("--password-stdin: stdin held no password");
    }
    let store = xjob_admin::store::Store::connect(&config.database_url).await?;
    let now_ms = xjob_admin::model::now_ms();
    let created = xjob_admin::auth::accounts::create_user(
        &store, &args.name, &args.role, &password, None, now_ms, ttl_ms,
    )
    .await;
    let audited = match &created {
        Ok(created) => {
            xjob_admin::auth::accounts::audit_created(&store, "(command line)", created, now_ms)
                .await
        }
        Err(_) => Ok(()),
    };
    store.close().await;
    let created = created?;
    tracing::info!(user = %created.user.name, role = created.user.role.as_str(),
        "user created; its token is printed once below");
    if let Err(error) = audited {
        // The user exists and its token is printed; only the trail lacks the row.
        tracing::error!(%error, user = %created.user.name, "audit entry not written");
    }
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", created.token)?;
    stdout.flush()?;
    Ok(())
}

// The docs' `xjob …` examples parsed by this binary's own parser.
#[cfg(test)]
mod doc_examples;
