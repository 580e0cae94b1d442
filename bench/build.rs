//! Records the commit the harness is built from (`XJOB_BENCH_COMMIT`), so each result line
//! names the code that ran, not whatever the working tree holds when it runs. A tree with
//! uncommitted changes at build time is marked `-modified`; outside a git checkout the commit
//! is empty.

use std::path::Path;
use std::process::Command;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // Run again on every commit or checkout (the HEAD reflog moves) and on any change to the
    // code the harness and the processes it starts are built from, so the label follows both.
    let reflog = root.join(".git/logs/HEAD");
    if reflog.exists() {
        println!("cargo:rerun-if-changed={}", reflog.display());
    }
    for dir in [
        "admin/src",
        "admin/migrations",
        "bench/src",
        "executor-sdk/src",
        "proto",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(&root)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .and_then(|out| String::from_utf8(out.stdout).ok())
    };
    let commit = git(&["rev-parse", "--short", "HEAD"])
        .map(|commit| commit.trim().to_string())
        .unwrap_or_default();
    let modified = git(&["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|status| !status.trim().is_empty());
    let label = if modified && !commit.is_empty() {
        format!("{commit}-modified")
    } else {
        commit
    };
    println!("cargo:rustc-env=XJOB_BENCH_COMMIT={label}");
}
