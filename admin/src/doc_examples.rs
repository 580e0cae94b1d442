//! The docs check for CLI examples: every `xjob …` command in a shell block of README.md,
//! CONTRIBUTING.md and docs/*.md is parsed by this binary's own argument parser, so an example
//! with a misspelt flag, a removed verb or an option in the wrong place fails the build's tests.
//! (Runnable blocks are also executed, in `admin/tests/it/docs.rs`.)

use std::path::Path;

use clap::Parser;
use clap::error::ErrorKind;
use xjob_testkit::docs;

use crate::Cli;

/// Problems of the `xjob` examples in one Markdown text, as `file:line: what`.
fn cli_example_problems(file: &Path, markdown: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for block in docs::blocks(markdown)
        .iter()
        .filter(|block| block.is_shell())
    {
        for args in docs::xjob_invocations(&block.text) {
            let argv = std::iter::once("xjob".to_string()).chain(args.iter().cloned());
            if let Err(error) = Cli::try_parse_from(argv) {
                if matches!(
                    error.kind(),
                    ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
                ) {
                    continue;
                }
                let first_line = error.to_string();
                let first_line = first_line.lines().next().unwrap_or_default().to_string();
                problems.push(format!(
                    "{}:{}: `xjob {}`: {first_line}",
                    file.display(),
                    block.line,
                    args.join(" ")
                ));
            }
        }
    }
    problems
}

#[test]
fn every_xjob_example_in_the_docs_parses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let files = docs::doc_files(&root);
    assert!(files.len() > 3, "no docs found under {}", root.display());
    let mut checked = 0;
    let mut problems = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("doc readable");
        checked += docs::blocks(&text)
            .iter()
            .filter(|block| block.is_shell())
            .map(|block| docs::xjob_invocations(&block.text).len())
            .sum::<usize>();
        problems.extend(cli_example_problems(&file, &text));
    }
    assert!(checked > 5, "only {checked} xjob examples found");
    assert!(
        problems.is_empty(),
        "CLI examples the parser refuses:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_wrong_cli_example_is_reported() {
    let text = "<!-- run -->\n```sh\nxjob jobs list --output json\nxjob jobs lst\n\
                xjob jobs create --group\nxjob serve --demo --colour\nxjob --help\n```\n";
    let problems = cli_example_problems(Path::new("x.md"), text);
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(problems[0].contains("`xjob jobs lst`"), "{problems:?}");
    assert!(
        problems[1].contains("`xjob jobs create --group`"),
        "{problems:?}"
    );
    assert!(problems[2].contains("--colour"), "{problems:?}");
}
