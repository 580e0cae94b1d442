//! `xjob-bench`: runs one workload of `shared/BENCH.md` against real processes on loopback —
//! one or several `xjob` admins sharing a database (an SQLite file, or a PostgreSQL / MariaDB
//! server the harness starts or is given), remote `xjob-bench-executor`s with a recording
//! no-op handler — then stops everything it started and prints one JSON line of metrics (also
//! appended to the results file). The failover workloads kill or stall the admin holding the
//! schedule lock (F1, F2) or restart the database (F3) during the window.
//!
//! ```text
//! cargo build --release --workspace --bins
//! target/release/xjob-bench --workload W1 --jobs 1000 --warmup 10 --duration 60
//! target/release/xjob-bench --workload F1 --database postgres --kills 5
//! ```

mod admins;
mod args;
mod campaign;
mod clock;
mod cpu_cap;
mod database;
mod disrupt;
mod failover;
mod grpc;
mod metrics;
mod plan;
mod processes;
mod report;
mod run;
mod scale_out;
mod sizing;

use clap::Parser;

use args::{Args, Workload};
use plan::plan;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Warnings only: sqlx reports at INFO every pooled connection the F3 restart cuts.
    tracing_subscriber::fmt()
        .with_target(false)
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .init();
    let args = Args::parse();
    let plan = plan(&args)?;
    // On Ctrl-C or SIGTERM the run is dropped where it waits: every process and server it
    // started is stopped, and the scratch directories are deleted.
    let outcome = async {
        match args.workload {
            Workload::Campaign => campaign::run(&args, &plan).await,
            Workload::S1 => scale_out::run(&args, &plan).await,
            _ => run::run(&args, &plan, None).await.map(|_| ()),
        }
    };
    tokio::select! {
        outcome = outcome => outcome,
        () = interrupted() => anyhow::bail!("interrupted; everything the run started was stopped"),
    }
}

async fn interrupted() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}
