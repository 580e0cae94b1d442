//! `xjob`: the admin's command line.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use xjob_admin::Config;

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
    Migrate(ServeArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// TOML configuration file (flags and XJOB_* variables override it).
    #[arg(long, env = "XJOB_CONFIG")]
    config: Option<PathBuf>,
    /// Address to serve gRPC on [default: 127.0.0.1:8080].
    #[arg(long)]
    listen: Option<String>,
    /// Data directory for the embedded SQLite database [default: ./xjob-data].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Database URL, e.g. sqlite://./xjob-data/xjob.db.
    #[arg(long)]
    database_url: Option<String>,
    /// This admin's node id (stable across restarts).
    #[arg(long)]
    node_id: Option<String>,
    /// Also run a demo executor (app `xjob-demo`) with sample jobs.
    #[arg(long)]
    demo: bool,
    /// Address to serve Prometheus metrics on (`GET /metrics`), e.g. 127.0.0.1:9464.
    #[arg(long)]
    metrics_listen: Option<String>,
}

fn load_config(args: &ServeArgs) -> anyhow::Result<Config> {
    let mut config = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|error| anyhow::anyhow!("cannot read {}: {error}", path.display()))?;
            Config::from_toml(&text)?
        }
        None => Config::default(),
    };
    config.apply_env(|key| std::env::var(key).ok())?;
    if let Some(listen) = &args.listen {
        config.listen = listen
            .parse()
            .map_err(|error| anyhow::anyhow!("--listen '{listen}': {error}"))?;
    }
    if let Some(data_dir) = &args.data_dir {
        config.data_dir = data_dir.clone();
    }
    if let Some(url) = &args.database_url {
        config.database_url = url.clone();
    }
    if let Some(node_id) = &args.node_id {
        config.node_id = node_id.clone();
    }
    config.demo |= args.demo;
    if let Some(address) = &args.metrics_listen {
        config.metrics_listen = Some(
            address
                .parse()
                .map_err(|error| anyhow::anyhow!("--metrics-listen '{address}': {error}"))?,
        );
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

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("info,sqlx=warn,h2=warn,tower=warn,hyper=warn")
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .init();
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    init_tracing();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => {
            let config = load_config(&args)?;
            xjob_admin::run(config, shutdown_signal()).await?;
        }
        Command::Migrate(args) => {
            let config = load_config(&args)?;
            if config.database_url.starts_with("sqlite:") {
                std::fs::create_dir_all(&config.data_dir)?;
            }
            xjob_admin::store::Store::connect(&config.database_url).await?;
            tracing::info!("database is migrated");
        }
    }
    Ok(())
}
