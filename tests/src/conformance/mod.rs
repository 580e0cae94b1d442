//! The executor conformance suite: one real `xjob serve` process per executor under test, and
//! that executor started as a child process from any command line, driven through the same
//! scenarios whatever its language. See docs/executors.md for the interface an executor app
//! implements (environment variables and handlers) and how to run the suite.

pub mod admin;
pub mod batch_split;
pub mod executor;
pub mod parity;
pub mod report;
pub mod scenarios;
pub mod tls;
pub mod traces;
pub mod world;

pub use executor::ExecutorCommand;
pub use report::Report;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Longest one scenario may take before it counts as failed.
pub const SCENARIO_BOUND: Duration = Duration::from_secs(90);

/// Runs every scenario (or those named in `only`) against each executor, one fresh admin per
/// executor; returns the report.
pub async fn run_suite(
    admin_binary: &Path,
    executors: &[ExecutorCommand],
    only: &[String],
    repo_root: &Path,
) -> anyhow::Result<Report> {
    let mut report = Report::default();
    for command in executors {
        let work = tempfile::Builder::new()
            .prefix(&format!("xjob-conformance-{}-", command.name))
            .tempdir()?;
        let admin_dir = work.path().join("admin");
        let port = admin::free_port()?;
        let admin = admin::AdminProcess::start(admin_binary, &admin_dir, port).await?;
        let client = admin.client().await?;
        let mut world = world::World::new(
            admin,
            client,
            command.clone(),
            work.path().to_path_buf(),
            repo_root.to_path_buf(),
        );
        for scenario in scenarios::all() {
            if !only.is_empty() && !only.iter().any(|name| name == scenario.name) {
                continue;
            }
            if command.session && scenarios::needs_port(scenario.name) {
                report.not_applicable(scenario.name, &command.name);
                continue;
            }
            let started = Instant::now();
            let outcome = tokio::time::timeout(SCENARIO_BOUND, (scenario.run)(&mut world)).await;
            let outcome = match outcome {
                Ok(Ok(())) => Ok(started.elapsed()),
                Ok(Err(error)) => Err(format!("{error:#}")),
                Err(_) => Err(format!("did not finish within {SCENARIO_BOUND:?}")),
            };
            if let Err(reason) = &outcome {
                eprintln!("FAIL {} / {}: {reason}", command.name, scenario.name);
                for executor in &world.executors {
                    eprintln!(
                        "  output of the executor on port {} (last 30 lines):\n{}",
                        executor.env.port,
                        executor.output_tail(30)
                    );
                }
            } else {
                eprintln!("pass {} / {}", command.name, scenario.name);
            }
            world.stop_executors().await;
            report.record(scenario.name, &command.name, outcome);
        }
        if std::env::var_os("XJOB_CONFORMANCE_KEEP").is_some() {
            eprintln!("keeping {}", work.keep().display());
        }
    }
    Ok(report)
}

/// The repository root (the parent of the `tests` crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}
