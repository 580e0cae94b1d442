//! Holds the library's imports to its floors (the map in `lib.rs`'s top comment): a module may
//! name `crate::x` only when `x` sits on a lower floor. Run by `cargo test`; a failure names
//! the file, the line and the import, so the map cannot drift from the code again.
//!
//! The check reads the sources as text: every `crate::` path outside comments, including the
//! items inside `use crate::{…}` groups. It is deliberately small and knows no Rust beyond that;
//! `super::` never leaves a top-level module here, so `crate::` paths are the only way up.

use std::path::{Path, PathBuf};

mod circles;

/// The library's top-level modules, bottom floor first. A module imports only from floors below
/// its own; two modules on one floor never import each other. Keep in step with `lib.rs`.
const FLOORS: &[&[&str]] = &[
    &["model", "metrics", "lifecycle"],
    &["store", "config", "telemetry"],
    &["error"],
    &["auth", "health", "maintenance", "wire"],
    &["registry"],
    &["executor"],
    &["trigger"],
    &["schedule", "callback", "context"],
    &["api", "monitor", "import_xxl", "demo"],
    &["console", "xxl_compat"],
    &["app"],
];

/// Items `lib.rs` re-exports at the crate root, and the module each comes from.
const ROOT_ITEMS: &[(&str, &str)] = &[
    ("Error", "error"),
    ("Config", "config"),
    ("RunningAdmin", "app"),
    ("run", "app"),
    ("start", "app"),
];

/// Files under `src/` that are not the library's modules: the `xjob` binary's own modules (its
/// `crate::` is the binary) and this check, whose examples name upward imports on purpose.
const NOT_LIBRARY: &[&str] = &[
    "main.rs",
    "logs.rs",
    "doc_examples.rs",
    "layering.rs",
    "layering",
];

fn floor_of(module: &str) -> Option<usize> {
    FLOORS.iter().position(|floor| floor.contains(&module))
}

/// The top-level module `crate::name` points into, if `name` is one.
fn module_of_root_item(name: &str) -> Option<&str> {
    if floor_of(name).is_some() {
        return Some(name);
    }
    ROOT_ITEMS
        .iter()
        .find(|(item, _)| *item == name)
        .map(|(_, module)| *module)
}

/// `line` without a trailing `//` comment (a `//` inside a string literal stays).
fn code_of(line: &str) -> &str {
    let mut in_string = false;
    let mut previous = ' ';
    for (index, character) in line.char_indices() {
        match character {
            '"' if previous != '\\' => in_string = !in_string,
            '/' if !in_string && previous == '/' => return &line[..index - 1],
            _ => {}
        }
        previous = character;
    }
    line
}

/// The first names of the paths in a `{…}` group (`{a, b::c, d::{e, f}}` gives a, b, d).
fn group_heads(group: &str) -> Vec<&str> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (index, character) in group.char_indices() {
        match character {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                heads.push(leading_name(&group[start..index]));
                start = index + 1;
            }
            _ => {}
        }
    }
    heads.push(leading_name(&group[start..]));
    heads.retain(|head| !head.is_empty() && *head != "self");
    heads
}

fn leading_name(path: &str) -> &str {
    let path = path.trim_start();
    let end = path
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(path.len());
    &path[..end]
}

/// The `{…}` group at the start of `text` (without its braces), or None when unclosed.
fn braced(text: &str) -> Option<&str> {
    let mut depth = 0;
    for (index, character) in text.char_indices() {
        match character {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&text[1..index]);
                }
            }
            _ => {}
        }
    }
    None
}

/// Every import of `text` (the source of `file`, in top-level module `module`) that does not
/// point to a lower floor, as "file:line: …" messages.
fn upward_imports(file: &str, module: &str, text: &str) -> Vec<String> {
    let Some(own_floor) = floor_of(module) else {
        return vec![format!(
            "{file}: module `{module}` is on no floor; add it to FLOORS (and lib.rs's map)"
        )];
    };
    // Comments out, line breaks kept, so an offset still finds its line.
    let code: String = text.lines().map(code_of).collect::<Vec<_>>().join("\n");
    let mut problems = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue; // `$crate::`, `other_crate::`
        }
        let rest = &code[at + "crate::".len()..];
        let names = if rest.starts_with('{') {
            braced(rest).map(group_heads).unwrap_or_default()
        } else {
            vec![leading_name(rest)]
        };
        let line = code[..at].matches('\n').count() + 1;
        for name in names {
            let Some(target) = module_of_root_item(name) else {
                problems.push(format!(
                    "{file}:{line}: `crate::{name}` is neither a module on a floor nor a \
                     root re-export the check knows (FLOORS / ROOT_ITEMS)"
                ));
                continue;
            };
            let target_floor = floor_of(target).unwrap_or(usize::MAX);
            if target != module && target_floor >= own_floor {
                problems.push(format!(
                    "{file}:{line}: `{module}` (floor {own_floor}) imports `crate::{name}` \
                     (`{target}`, floor {target_floor}); a module imports only from floors \
                     below its own"
                ));
            }
        }
    }
    problems
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a readable directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// The top-level module a file under `src/` belongs to (`store/sqlite/jobs.rs` → `store`).
fn top_module(relative: &Path) -> String {
    let first = relative.components().next().expect("a path under src/");
    let first = first.as_os_str().to_string_lossy();
    first.strip_suffix(".rs").unwrap_or(&first).to_string()
}

#[test]
fn every_import_points_to_a_lower_floor() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut problems = Vec::new();
    for path in &files {
        let relative = path.strip_prefix(&src).expect("a file under src/");
        let first = relative.components().next().expect("a path under src/");
        let first = first.as_os_str().to_string_lossy();
        if relative == Path::new("lib.rs") || NOT_LIBRARY.contains(&&*first) {
            continue;
        }
        let text = std::fs::read_to_string(path).expect("a readable source file");
        let file = format!("admin/src/{}", relative.display());
        problems.extend(upward_imports(&file, &top_module(relative), &text));
    }
    assert!(
        problems.is_empty(),
        "imports running back up the layering:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_module_of_the_library_is_on_exactly_one_floor() {
    let lib = include_str!("lib.rs");
    let declared: Vec<&str> = lib
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub mod "))
        .map(|rest| rest.trim_end_matches(';'))
        .collect();
    let placed: Vec<&str> = FLOORS
        .iter()
        .flat_map(|floor| floor.iter())
        .copied()
        .collect();
    for module in &declared {
        let count = placed.iter().filter(|placed| *placed == module).count();
        assert_eq!(count, 1, "`{module}` is on {count} floors of FLOORS");
    }
    for module in &placed {
        assert!(
            declared.contains(module),
            "FLOORS names `{module}`, lib.rs does not"
        );
    }
}

#[test]
fn an_upward_import_is_reported_with_its_file_and_line() {
    let text = "//! `crate::app` in a comment is not an import.\n\
                use crate::model::Job;\n\
                use crate::{error::Error, schedule::plan, store::{Store, StoreError}};\n\
                fn f() { let _ = crate::api::x(); } // crate::app here neither\n";
    let problems = upward_imports("admin/src/trigger/fake.rs", "trigger", text);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    let schedule = "admin/src/trigger/fake.rs:3: `trigger` (floor 6) imports `crate::schedule`";
    assert!(problems[0].starts_with(schedule), "{}", problems[0]);
    assert!(
        problems[1].starts_with("admin/src/trigger/fake.rs:4: "),
        "{}",
        problems[1]
    );
    assert!(problems[1].contains("`crate::api`"), "{}", problems[1]);
}

#[test]
fn a_sibling_on_the_same_floor_and_an_unknown_root_item_are_reported() {
    let sibling = upward_imports("f.rs", "schedule", "use crate::callback::x;");
    assert_eq!(sibling.len(), 1, "{sibling:#?}");
    let unknown = upward_imports("f.rs", "model", "use crate::Nowhere;");
    assert!(
        unknown[0].contains("`crate::Nowhere` is neither"),
        "{unknown:#?}"
    );
    let root = upward_imports("f.rs", "metrics", "fn f() -> crate::Error { todo!() }");
    assert!(root[0].contains("(`error`, floor 2)"), "{root:#?}");
}
