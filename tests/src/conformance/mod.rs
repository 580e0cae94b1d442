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

/// How many executors are driven at once when `XJOB_CONFORMANCE_LANES` does not say. Each
/// executor has its own admin, ports and files, and the scenarios mostly wait on processes,
/// so columns overlap well even on two cores; one lane runs them one after another.
const DEFAULT_LANES: usize = 3;

/// Runs every scenario (or those named in `only`) against each executor, one fresh admin per
/// executor, several executors at once (`XJOB_CONFORMANCE_LANES`); returns the report, its
/// columns in the order the executors were given.
pub async fn run_suite(
    admin_binary: &Path,
    executors: &[ExecutorCommand],
    only: &[String],
    repo_root: &Path,
) -> anyhow::Result<Report> {
    let lanes = lanes_from_env().min(executors.len()).max(1);
    let mut tasks = tokio::task::JoinSet::new();
    for lane in 0..lanes {
        // Lane `lane` takes the executors at `lane`, `lane + lanes`, …
        let columns: Vec<(usize, ExecutorCommand)> = executors
            .iter()
            .cloned()
            .enumerate()
            .skip(lane)
            .step_by(lanes)
            .collect();
        let (admin_binary, repo_root) = (admin_binary.to_path_buf(), repo_root.to_path_buf());
        let only = only.to_vec();
        tasks.spawn(async move {
            let mut reports = Vec::new();
            for (index, command) in columns {
                let column = run_column(&admin_binary, &command, &only, &repo_root).await;
                reports.push((index, column));
            }
            reports
        });
    }
    let mut columns = Vec::new();
    while let Some(lane) = tasks.join_next().await {
        columns.extend(lane?);
    }
    columns.sort_by_key(|(index, _)| *index);
    let mut report = Report::default();
    for (_, column) in columns {
        report.append(column?);
    }
    Ok(report)
}

/// `XJOB_CONFORMANCE_LANES`, or the default when unset or not a positive number.
fn lanes_from_env() -> usize {
    std::env::var("XJOB_CONFORMANCE_LANES")
        .ok()
        .and_then(|value| value.trim().parse().ok())
        .filter(|lanes: &usize| *lanes > 0)
        .unwrap_or(DEFAULT_LANES)
}

/// One executor's column: its own admin, then every scenario in turn.
async fn run_column(
    admin_binary: &Path,
    command: &ExecutorCommand,
    only: &[String],
    repo_root: &Path,
) -> anyhow::Result<Report> {
    let mut report = Report::default();
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
    Ok(report)
}

/// The repository root (the parent of the `tests` crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}
