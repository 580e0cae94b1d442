//! Holds every Rust crate of the workspace to "no circles between files": no two source files
//! import each other, directly or around a loop (`a → b → c → a`), inside one folder as much as
//! across folders. The floors above order the admin's top-level modules; this check orders the
//! files inside them, and inside every other crate, where a circle means two concepts that
//! cannot be read (or moved) one without the other.
//!
//! A file imports another when its code names a path into the other's module: `crate::a::b`,
//! `super::x`, `self::x`, or a child module by name (`child::f()`). A path that ends in a
//! folder's `mod.rs` (an item re-exported there) points at `mod.rs`. Declaring a child
//! (`mod child;`) is not an import, and neither is a re-export (`pub use a::X;`): a path to `X`
//! through the re-exporting file points at the file that defines `X`, so a folder's `mod.rs` or
//! a crate's `lib.rs` that only hands names on is no hub of circles. A module's own file is no
//! exception: its arrows into its children count like any other. Test code is left out:
//! `#[cfg(test)]` modules, whether in their own file or inline, and the `tests/` folders.
//!
//! Like the floor check, this reads text and knows no Rust beyond paths; a failure names the
//! files of the circle and, for each arrow, the line that draws it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{braced, code_of, leading_name};

/// One source file: where it is, its module path inside its crate, its code without comments
/// and test modules.
struct SourceFile {
    path: PathBuf,
    module: Vec<String>,
    code: String,
    /// Its `pub use` statements: names it hands on, which are no arrows of its own.
    handed_on: String,
}

/// The workspace's members, read from the root `Cargo.toml`.
fn members(root: &Path) -> Vec<PathBuf> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("the root Cargo.toml");
    let start = manifest.find("members = [").expect("a members list");
    let list = &manifest[start..];
    let list = &list[list.find('[').unwrap_or(0) + 1..list.find(']').unwrap_or(list.len())];
    list.split(',')
        .map(|member| member.trim().trim_matches('"'))
        .filter(|member| !member.is_empty())
        .map(|member| root.join(member))
        .collect()
}

/// The crate roots of a member: its library, its main binary, and every `src/bin/` binary.
fn crate_roots(member: &Path) -> Vec<PathBuf> {
    let src = member.join("src");
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|name| src.join(name))
        .filter(|path| path.is_file())
        .collect();
    if let Ok(entries) = std::fs::read_dir(src.join("bin")) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|ext| ext == "rs") {
                roots.push(path);
            } else if path.join("main.rs").is_file() {
                roots.push(path.join("main.rs"));
            }
        }
    }
    roots.sort();
    roots
}

/// `text` without comments, with `#[cfg(test)]` modules (inline ones with their bodies) cut
/// out and its `pub use` statements set apart. Returns the code, the re-exports and the names of
/// the file modules (`mod x;`) it declares outside tests.
fn without_tests(text: &str) -> (String, String, Vec<String>) {
    let lines: Vec<&str> = text.lines().map(code_of).collect();
    let mut kept = Vec::with_capacity(lines.len());
    let mut children = Vec::new();
    let mut handed_on = String::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index].trim();
        if line == "#[cfg(test)]" {
            // Skip the item the attribute guards: up to its `;` or its closing brace.
            let mut depth = 0i32;
            let mut opened = false;
            kept.push("");
            index += 1;
            while index < lines.len() {
                let guarded = lines[index];
                kept.push("");
                index += 1;
                depth += guarded.matches('{').count() as i32 - guarded.matches('}').count() as i32;
                opened |= guarded.contains('{');
                if (opened && depth <= 0) || (!opened && guarded.trim_end().ends_with(';')) {
                    break;
                }
            }
            continue;
        }
        if ["pub use ", "pub(crate) use ", "pub(super) use "]
            .iter()
            .any(|start| line.starts_with(start))
        {
            // Through its `;`, which may stand lines below (`pub use a::{\n b,\n c,\n};`).
            while index < lines.len() {
                handed_on.push_str(lines[index]);
                handed_on.push('\n');
                kept.push("");
                index += 1;
                if lines[index - 1].trim_end().ends_with(';') {
                    break;
                }
            }
            continue;
        }
        let declared = line
            .trim_start_matches("pub ")
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ");
        if let Some(name) = declared
            .strip_prefix("mod ")
            .and_then(|r| r.strip_suffix(';'))
        {
            children.push(name.trim().to_string());
        }
        kept.push(lines[index]);
        index += 1;
    }
    (kept.join("\n"), handed_on, children)
}

/// Every file of one crate, following `mod x;` from its root.
fn crate_files(root: &Path, found: &mut Vec<SourceFile>) {
    let mut pending = vec![(root.to_path_buf(), Vec::<String>::new(), true)];
    while let Some((path, module, owns_dir)) = pending.pop() {
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (code, handed_on, children) = without_tests(&text);
        let dir = path.parent().expect("a file in a folder").to_path_buf();
        let child_dir = if owns_dir {
            dir
        } else {
            dir.join(path.file_stem().expect("a file name"))
        };
        for child in children {
            let flat = child_dir.join(format!("{child}.rs"));
            let (child_path, child_owns) = if flat.is_file() {
                (flat, false)
            } else {
                (child_dir.join(&child).join("mod.rs"), true)
            };
            let mut child_module = module.clone();
            child_module.push(child);
            pending.push((child_path, child_module, child_owns));
        }
        found.push(SourceFile {
            path,
            module,
            code,
            handed_on,
        });
    }
}

/// The paths a piece of code names, each as its segments after the start (`crate`, `super`,
/// `self` or a child's name), with the line it stands on. `{…}` groups are spread out.
fn paths_from(code: &str, start: &str) -> Vec<(Vec<String>, usize)> {
    let needle = format!("{start}::");
    let mut found = Vec::new();
    for (at, _) in code.match_indices(&needle) {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':') {
            continue; // `$crate::`, `other_crate::`, `a::start::`
        }
        let line = code[..at].matches('\n').count() + 1;
        let mut head = vec![start.to_string()];
        spread(&code[at + needle.len()..], &mut head, &mut |path| {
            found.push((path, line))
        });
    }
    found
}

/// Calls `each` with every path that `rest` (the text after `prefix::`) continues `prefix` into.
fn spread(rest: &str, prefix: &mut Vec<String>, each: &mut dyn FnMut(Vec<String>)) {
    if rest.starts_with('{') {
        let Some(group) = braced(rest) else { return };
        let mut depth = 0;
        let mut from = 0;
        let mut parts = Vec::new();
        for (index, character) in group.char_indices() {
            match character {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&group[from..index]);
                    from = index + 1;
                }
                _ => {}
            }
        }
        parts.push(&group[from..]);
        for part in parts {
            spread(part.trim_start(), prefix, each);
        }
        return;
    }
    let name = leading_name(rest);
    if name.is_empty() || name == "self" {
        each(prefix.clone());
        return;
    }
    prefix.push(name.to_string());
    let after = &rest.trim_start()[name.len()..];
    match after.strip_prefix("::") {
        Some(deeper) => spread(deeper, prefix, each),
        None => each(prefix.clone()),
    }
    prefix.pop();
}

/// The arrows of one crate: file index → (file index → first line naming it).
type Arrows = BTreeMap<usize, BTreeMap<usize, usize>>;

/// Finds the file a path names, following re-exports to the file that defines the item.
struct Resolver<'a> {
    files: &'a [SourceFile],
    by_module: BTreeMap<&'a [String], usize>,
}

impl<'a> Resolver<'a> {
    fn new(files: &'a [SourceFile]) -> Self {
        let by_module = files
            .iter()
            .enumerate()
            .map(|(index, file)| (file.module.as_slice(), index))
            .collect();
        Resolver { files, by_module }
    }

    /// The names a path may start with in `file`: `crate`, `super`, `self`, its children.
    fn starts(&self, file: &SourceFile) -> Vec<String> {
        let children = self.files.iter().filter(|other| {
            other.module.len() == file.module.len() + 1 && other.module.starts_with(&file.module)
        });
        ["crate", "super", "self"]
            .into_iter()
            .map(str::to_string)
            .chain(children.filter_map(|child| child.module.last().cloned()))
            .collect()
    }

    /// The paths `text` names from `file`, each with its line.
    fn paths(&self, file: &SourceFile, text: &str) -> Vec<(Vec<String>, usize)> {
        self.starts(file)
            .iter()
            .flat_map(|start| paths_from(text, start))
            .collect()
    }

    /// The file that `segments` (a path as written in file `from`) points into.
    fn resolve(&self, from: usize, segments: &[String], hops: usize) -> Option<usize> {
        let file = &self.files[from];
        let (mut module, walk) = match segments[0].as_str() {
            "crate" => (Vec::new(), &segments[1..]),
            "self" => (file.module.clone(), &segments[1..]),
            "super" => (
                file.module[..file.module.len().saturating_sub(1)].to_vec(),
                &segments[1..],
            ),
            _ => (file.module.clone(), segments), // a child: its name is walked below
        };
        let mut rest = &walk[walk.len()..];
        for (at, segment) in walk.iter().enumerate() {
            if segment == "super" {
                module.pop();
                continue;
            }
            module.push(segment.clone());
            if !self.by_module.contains_key(module.as_slice()) {
                module.pop();
                rest = &walk[at..];
                break;
            }
        }
        let target = *self.by_module.get(module.as_slice())?;
        let Some(item) = rest.first() else {
            return Some(target);
        };
        if hops < 8 {
            // An item the target hands on: follow it to where it is defined.
            for (handed, _) in self.paths(&self.files[target], &self.files[target].handed_on) {
                if handed.last() == Some(item) {
                    let mut onward = handed.clone();
                    onward.extend(rest[1..].iter().cloned());
                    return self.resolve(target, &onward, hops + 1).or(Some(target));
                }
            }
        }
        Some(target)
    }
}

fn arrows(files: &[SourceFile]) -> Arrows {
    let resolver = Resolver::new(files);
    let mut arrows = Arrows::new();
    for (from, file) in files.iter().enumerate() {
        for (segments, line) in resolver.paths(file, &file.code) {
            let Some(to) = resolver.resolve(from, &segments, 0) else {
                continue;
            };
            // A module's own file counts like any other: when it calls into a child, that child
            // must not import it back, so what both need lives in a file below both.
            if to != from {
                arrows.entry(from).or_default().entry(to).or_insert(line);
            }
        }
    }
    arrows
}

/// The circles among `count` files (strongly connected parts of more than one file), each as
/// its files' indexes, by Tarjan's algorithm.
fn circles(count: usize, arrows: &Arrows) -> Vec<Vec<usize>> {
    struct Walk<'a> {
        arrows: &'a Arrows,
        order: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        found: Vec<Vec<usize>>,
    }
    fn visit(walk: &mut Walk, node: usize) {
        walk.order[node] = Some(walk.next);
        walk.low[node] = walk.next;
        walk.next += 1;
        walk.stack.push(node);
        walk.on_stack[node] = true;
        let targets: Vec<usize> = walk
            .arrows
            .get(&node)
            .map(|to| to.keys().copied().collect())
            .unwrap_or_default();
        for target in targets {
            match walk.order[target] {
                None => {
                    visit(walk, target);
                    walk.low[node] = walk.low[node].min(walk.low[target]);
                }
                Some(order) if walk.on_stack[target] => {
                    walk.low[node] = walk.low[node].min(order);
                }
                Some(_) => {}
            }
        }
        if Some(walk.low[node]) == walk.order[node] {
            let mut part = Vec::new();
            while let Some(member) = walk.stack.pop() {
                walk.on_stack[member] = false;
                part.push(member);
                if member == node {
                    break;
                }
            }
            if part.len() > 1 {
                part.sort();
                walk.found.push(part);
            }
        }
    }
    let mut walk = Walk {
        arrows,
        order: vec![None; count],
        low: vec![0; count],
        on_stack: vec![false; count],
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for node in 0..count {
        if walk.order[node].is_none() {
            visit(&mut walk, node);
        }
    }
    walk.found
}

/// The circles of one crate, described with the arrows inside each.
fn crate_circles(root: &Path, workspace: &Path) -> Vec<String> {
    let mut files = Vec::new();
    crate_files(root, &mut files);
    let arrows = arrows(&files);
    let name = |index: usize| {
        let path = &files[index].path;
        path.strip_prefix(workspace)
            .unwrap_or(path)
            .display()
            .to_string()
    };
    circles(files.len(), &arrows)
        .into_iter()
        .map(|part| {
            let mut told = format!("a circle of {} files:", part.len());
            for &from in &part {
                for (&to, &line) in arrows.get(&from).into_iter().flatten() {
                    if part.contains(&to) {
                        told.push_str(&format!("\n  {}:{line} → {}", name(from), name(to)));
                    }
                }
            }
            told
        })
        .collect()
}

#[test]
fn no_files_import_each_other_in_any_crate_of_the_workspace() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace above admin/");
    let mut problems = Vec::new();
    let mut roots = 0;
    for member in members(workspace) {
        for root in crate_roots(&member) {
            roots += 1;
            problems.extend(crate_circles(&root, workspace));
        }
    }
    assert!(
        roots > 10,
        "found only {roots} crate roots; is the members list read?"
    );
    assert!(
        problems.is_empty(),
        "files that import each other (move what both need into a file below both):\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_circle_is_found_across_super_crate_and_child_paths() {
    let file = |module: &[&str], code: &str| {
        let (code, handed_on, _) = without_tests(code);
        SourceFile {
            path: PathBuf::from(module.join("/")),
            module: module.iter().map(|m| m.to_string()).collect(),
            code,
            handed_on,
        }
    };
    let files = [
        file(&[], "pub mod a;"),
        file(
            &["a"],
            "pub use c::g;\nuse b::X;\nfn f() { c::g(); }\npub fn h() {}",
        ),
        file(
            &["a", "b"],
            "// crate::a::d in a comment\nuse super::c::g;\npub struct X;",
        ),
        file(&["a", "c"], "use super::{b::{X, Y}, h};\npub fn g() {}"),
        file(
            &["a", "d"],
            "use super::g;\n#[cfg(test)]\nmod tests {\n    use crate::a::b::X;\n}\n",
        ),
    ];
    let arrows = arrows(&files);
    let pairs: Vec<(usize, usize)> = arrows
        .iter()
        .flat_map(|(&from, to)| to.keys().map(move |&to| (from, to)))
        .collect();
    // a → b and a → c (its own children count too); b → c (a sibling by `super::`); c → b and
    // c → a (`h` is an item of a); d → c through a's re-export of `g`, which draws no arrow of
    // a's own; d's test module draws nothing.
    assert_eq!(
        pairs,
        vec![(1, 2), (1, 3), (2, 3), (3, 1), (3, 2), (4, 3)],
        "{arrows:?}"
    );
    // The module file a and its children b and c close one circle.
    assert_eq!(circles(files.len(), &arrows), vec![vec![1, 2, 3]]);
}
