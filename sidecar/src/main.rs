//! `xjob-executor`: the command line of the ready-made executor (see the `xjob_sidecar` crate
//! docs): reads the config, starts the executor, and stops it gracefully on SIGTERM/SIGINT.

use std::path::PathBuf;

use clap::Parser;
use xjob_sidecar::{config, executor};

#[derive(Parser)]
#[command(
    name = "xjob-executor",
    version,
    about = "A ready-made xjob executor: command, http and script jobs from a TOML config"
)]
struct Cli {
    /// TOML configuration file (`XJOB_*` variables override it).
    #[arg(long, env = "XJOB_CONFIG", default_value = "xjob-executor.toml")]
    config: PathBuf,
    /// Checks the configuration, prints the handlers, and exits.
    #[arg(long)]
    check: bool,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colours only on a terminal: container logs stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xjob-executor: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&cli.config)
        .map_err(|error| anyhow::anyhow!("cannot read {}: {error}", cli.config.display()))?;
    let mut config = config::Config::from_toml(&text)
        .map_err(|error| anyhow::anyhow!("{}: {error}", cli.config.display()))?;
    config.apply_env(|key| std::env::var(key).ok())?;
    config.validate()?;
    let builder = executor::builder(&config)?;
    if cli.check {
        eprintln!(
            "{}: ok (app {}, handlers {:?}, glue {:?})",
            cli.config.display(),
            config.app_name,
            config.handlers.keys().collect::<Vec<_>>(),
            config
                .glue
                .enabled
                .iter()
                .map(|language| language.name())
                .collect::<Vec<_>>()
        );
        return Ok(());
    }
    let running = builder.start().await?;
    tracing::info!(
        address = running.address(),
        app_name = %config.app_name,
        "xjob-executor started"
    );
    shutdown_signal().await;
    running.shutdown().await;
    Ok(())
}

/// Completes on SIGTERM (what container runtimes send) or Ctrl-C.
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
        () = ctrl_c => {}
        () = terminate => {}
    }
    tracing::info!("shutdown signal received");
}
