//! The executor conformance suite: a real `xjob serve` process drives executor processes
//! through the scenarios of `xjob_tests::conformance::scenarios` and prints a table of
//! scenario × executor. It fails on any failed scenario.
//!
//! ```text
//! # The Rust SDK's example only, dialed and in session dispatch (the default):
//! cargo test -p xjob-tests --test executor_conformance -- --nocapture
//! # Any executors, `name=command` separated by ';' (`rust` = the Rust example in both
//! # dispatch modes; `name@session=command` runs that one in session dispatch):
//! XJOB_CONFORMANCE_EXECUTOR='rust; python=sdks/python/.venv/bin/python -m xjob_example' \
//!   cargo test -p xjob-tests --test executor_conformance -- --nocapture
//! ```
//! Other variables: `XJOB_CONFORMANCE_SCENARIOS` (comma-separated names: run only those),
//! `XJOB_CONFORMANCE_KEEP` (keep the admin's and executors' files for inspection),
//! `XJOB_CONFORMANCE_LANES` (how many executors run at once, 3 by default), `XJOB_BIN`
//! (an `xjob` binary to use instead of building one). See docs/executors.md.

use std::path::{Path, PathBuf};
use std::process::Command;

use xjob_tests::conformance::{self, ExecutorCommand};

/// The binaries the suite needs: the admin and the Rust example, built in this target dir.
fn build_binaries() -> anyhow::Result<(PathBuf, PathBuf)> {
    // The test binary lives in target/<profile>/deps; the binaries go to target/<profile>.
    let exe = std::env::current_exe()?;
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| anyhow::anyhow!("no target dir above {}", exe.display()))?
        .to_path_buf();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut build = Command::new(cargo);
    build
        .current_dir(conformance::repo_root())
        .args(["build", "--quiet", "-p", "xjob-examples", "--bin"])
        .arg("conformance_executor");
    if std::env::var_os("XJOB_BIN").is_none() {
        build.args(["-p", "xjob-admin", "--bin", "xjob"]);
    }
    if profile_dir
        .file_name()
        .is_some_and(|name| name == "release")
    {
        build.arg("--release");
    }
    let status = build.status()?;
    anyhow::ensure!(status.success(), "building the suite's binaries failed");
    let admin = std::env::var_os("XJOB_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| profile_dir.join("xjob"));
    Ok((admin, profile_dir.join("conformance_executor")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executors_conform() -> anyhow::Result<()> {
    let (admin, rust_example) = build_binaries()?;
    let executors = match std::env::var("XJOB_CONFORMANCE_EXECUTOR") {
        Ok(spec) if !spec.trim().is_empty() => ExecutorCommand::parse_list(&spec, &rust_example),
        _ => ExecutorCommand::rust_both(&rust_example),
    };
    let only: Vec<String> = std::env::var("XJOB_CONFORMANCE_SCENARIOS")
        .unwrap_or_default()
        .split(',')
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .collect();
    let report =
        conformance::run_suite(&admin, &executors, &only, &conformance::repo_root()).await?;
    let table = report.table();
    eprintln!("\nexecutor conformance\n{table}");
    // The test harness captures output of passing tests; CI asks for the table as a file.
    if let Ok(path) = std::env::var("XJOB_CONFORMANCE_TABLE")
        && !path.is_empty()
    {
        std::fs::write(&path, &table)?;
    }
    let failures = report.failures();
    anyhow::ensure!(
        failures.is_empty(),
        "{} scenario(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    Ok(())
}
