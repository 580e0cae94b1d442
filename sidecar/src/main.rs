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
    /// Makes every check the start makes (without binding or connecting), prints the handlers,
    /// and exits.
    #[arg(long)]
    check: bool,
    /// Log lines as text (colours on a terminal only, none with NO_COLOR) or json (one object
    /// per line).
    #[arg(long, env = "XJOB_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
enum LogFormat {
    Text,
    Json,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_logs(cli.log_format);
    let format = cli.log_format;
    match run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            let line = one_line(&error);
            match format {
                LogFormat::Text => eprintln!("xjob-executor: {line}"),
                // One JSON object like every other line, so a log collector keeps it whole.
                LogFormat::Json => tracing::error!("{line}"),
            }
            std::process::ExitCode::FAILURE
        }
    }
}

/// Logs on stderr: text with colours only on a terminal and without `NO_COLOR` (container logs
/// stay plain), or one JSON object per line.
fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => {
            let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
            let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
            builder.with_ansi(terminal && !no_color).init();
        }
        LogFormat::Json => builder.json().init(),
    }
}

/// The error and its causes on one line, each cause once (errors often quote their source).
fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
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
        // The start's own checks, so a config that passes here is not refused at start.
        builder.check().await?;
        let handlers: Vec<&str> = config.handlers.keys().map(String::as_str).collect();
        let glue: Vec<&str> = config.glue.enabled.iter().map(|l| l.name()).collect();
        eprintln!(
            "{}: ok (app {}, handlers: {}; glue: {})",
            cli.config.display(),
            config.app_name,
            list_or_none(&handlers),
            list_or_none(&glue)
        );
        return Ok(());
    }
    let running = builder.start().await?;
    tracing::info!(
        address = %running.address(),
        app_name = %config.app_name,
        "xjob-executor started"
    );
    shutdown_signal().await;
    running.shutdown().await;
    Ok(())
}

fn list_or_none(items: &[&str]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
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
