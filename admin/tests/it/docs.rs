//! Docs that cannot drift: README.md, CONTRIBUTING.md and docs/*.md checked against the code.
//!
//! - every TOML block is parsed by the admin's own config parser (or the sidecar's, marked
//!   `<!-- toml: sidecar -->`), which refuses unknown keys; inline `key = value` settings too;
//! - every key and `XJOB_*` variable the code reads is in docs/configuration.md, every key
//!   named there exists, and every default written there as one literal, or in prose as
//!   `` `key` (default `value`) ``, is the code's default;
//! - every `XJOB_*` variable named anywhere exists in the code;
//! - every RPC named (`JobAdmin.CreateJob`, `TriggerJob`) exists in proto/;
//! - relative links and #anchors resolve;
//! - every shell block is marked `<!-- run -->` or `<!-- no-run: reason -->`, and the runnable
//!   ones are executed against a real `xjob serve --demo` started here on free ports (the
//!   block's 127.0.0.1:8080 / :8081 rewritten), each asserting exit code 0 and the lines of an
//!   `<!-- expect -->` block after it.
//!
//! The `xjob …` examples are parsed by the CLI's parser in the binary's own tests
//! (admin/src/doc_examples.rs). Each check has a test on a small wrong input below.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use xjob_proto::pb;
use xjob_testkit::docs::{self, Block};
use xjob_testkit::{ChildProcess, free_port, wait_until};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("repository root")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The docs as `(path relative to the root, text)`.
fn doc_texts() -> Vec<(PathBuf, String)> {
    let root = root();
    let files = docs::doc_files(&root);
    assert!(files.len() > 5, "docs not found under {}", root.display());
    files
        .into_iter()
        .map(|path| {
            let text = read(&path);
            (path, text)
        })
        .collect()
}

fn assert_none(what: &str, problems: Vec<String>) {
    assert!(problems.is_empty(), "{what}:\n{}", problems.join("\n"));
}

// ---------------------------------------------------------------- settings

/// Which program reads a TOML text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reader {
    Admin,
    Sidecar,
}

impl Reader {
    /// Parses `text`; the error names the key at fault.
    fn parse(self, text: &str) -> Result<String, String> {
        match self {
            Reader::Admin => xjob_admin::Config::from_toml(text)
                .map(|config| format!("{config:?}"))
                .map_err(|error| error.to_string()),
            Reader::Sidecar => xjob_sidecar::config::Config::from_toml(text)
                .map(|config| format!("{config:?}"))
                .map_err(|error| error.to_string()),
        }
    }

    /// The reader a block's marker names (`<!-- toml: sidecar -->`); None for `cargo` (a
    /// Cargo.toml excerpt, only checked to be TOML).
    fn of_block(block: &Block) -> Option<Reader> {
        match block.marker.as_deref() {
            Some("toml: sidecar") => Some(Reader::Sidecar),
            Some("toml: cargo") => None,
            _ => Some(Reader::Admin),
        }
    }
}

/// The keys serde lists in its "unknown field `x`, expected one of …" error.
fn expected_fields(error: &str) -> Vec<String> {
    let Some((_, list)) = error.split_once("expected ") else {
        return Vec::new();
    };
    let list = list.split(['\n', '(']).next().unwrap_or_default();
    list.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Every key a reader accepts, dotted (`alarm.smtp.host`, `handlers.NAME.argv`): asked of the
/// parser itself with an unknown key in each table.
fn code_keys(reader: Reader) -> BTreeSet<String> {
    let tables: &[(&str, &str, &str)] = match reader {
        Reader::Admin => &[
            ("", "", ""),
            ("[alarm]", "alarm.", ""),
            ("[alarm.smtp]", "alarm.smtp.", ""),
        ],
        Reader::Sidecar => &[
            ("", "", ""),
            ("[tls]", "tls.", ""),
            ("[glue]", "glue.", ""),
            ("[handlers.x]", "handlers.NAME.", "kind = \"command\"\n"),
            ("[handlers.x]", "handlers.NAME.", "kind = \"http\"\n"),
        ],
    };
    let tables_themselves = ["alarm", "alarm.smtp", "tls", "glue", "handlers"];
    let mut keys = BTreeSet::new();
    for (header, prefix, body) in tables {
        let error = reader
            .parse(&format!("{header}\n{body}zz_not_a_key = 1\n"))
            .expect_err("an unknown key is refused");
        let fields = expected_fields(&error);
        assert!(!fields.is_empty(), "no key list in: {error}");
        for field in fields {
            let key = format!("{prefix}{field}");
            if !tables_themselves.contains(&key.as_str()) {
                keys.insert(key);
            }
        }
    }
    if reader == Reader::Sidecar {
        keys.insert("handlers.NAME.kind".to_string());
    }
    keys
}

/// TOML blocks the reader refuses (unknown keys, wrong types).
fn toml_block_problems(file: &Path, markdown: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for block in docs::blocks(markdown)
        .iter()
        .filter(|block| block.is_toml())
    {
        let place = format!("{}:{}", file.display(), block.line);
        let result = match Reader::of_block(block) {
            Some(reader) => reader.parse(&block.text),
            None => block
                .text
                .parse::<toml::Table>()
                .map(|_| String::new())
                .map_err(|error| error.to_string()),
        };
        if let Err(error) = result {
            problems.push(format!("{place}: TOML block refused: {}", one_line(&error)));
        }
    }
    problems
}

/// An error on one line, without serde's list of every valid key.
fn one_line(text: &str) -> String {
    let text = text.split(", expected one of").next().unwrap_or(text);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Inline settings written as `key = value` that neither the admin nor the sidecar accepts.
fn inline_setting_problems(file: &Path, markdown: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let known: BTreeSet<String> = code_keys(Reader::Admin)
        .into_iter()
        .chain(code_keys(Reader::Sidecar))
        .collect();
    for (line, code) in docs::inline_code(markdown) {
        // A dotted key of a table (`alarm.smtp.host`, `tls.cert`) must exist.
        let table_key = ["alarm.", "tls.", "glue."]
            .iter()
            .any(|table| code.starts_with(table))
            && code
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '_' || c == '.');
        if table_key && !known.contains(&code) {
            problems.push(format!(
                "{}:{line}: `{code}` is not a setting",
                file.display()
            ));
            continue;
        }
        let Some((key, value)) = code.split_once(" = ") else {
            continue;
        };
        let is_key = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '_' || c == '.');
        // Only a TOML value makes it a setting (`from_line = to_line + 1` is arithmetic).
        let is_toml_value = format!("v = {value}").parse::<toml::Table>().is_ok();
        if !is_key || !is_toml_value {
            continue;
        }
        let text = match key.rsplit_once('.') {
            Some((table, leaf)) => format!("[{table}]\n{leaf} = {value}\n"),
            None => format!("{key} = {value}\n"),
        };
        let admin = Reader::Admin.parse(&text);
        let sidecar = Reader::Sidecar.parse(&text);
        if let (Err(admin), Err(_)) = (admin, sidecar) {
            problems.push(format!(
                "{}:{line}: `{code}` is not a setting: {}",
                file.display(),
                one_line(&admin)
            ));
        }
    }
    problems
}

/// `XJOB_*` names in a text.
fn env_vars(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("XJOB_") {
        let before_ok = rest[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'));
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        let name = name.trim_end_matches('_').to_string();
        if before_ok && name.len() > "XJOB_".len() {
            names.insert(name);
        }
        rest = &rest[at + 5..];
    }
    names
}

/// The text of every source file (not docs), where a documented variable must appear.
fn source_text() -> String {
    let root = root();
    let mut text = String::new();
    let mut pending: Vec<PathBuf> = [
        "admin",
        "cli",
        "sidecar",
        "executor-sdk",
        "examples",
        "sdks",
        "tests",
        "testkit",
        "bench",
        "src",
        ".ci",
        "deploy",
        "scripts",
        "tls",
        "metrics-http",
    ]
    .iter()
    .map(|dir| root.join(dir))
    .collect();
    let skip = ["target", "node_modules", ".git", "docs"];
    let kept = [
        "rs", "sh", "py", "js", "go", "java", "yaml", "yml", "toml", "json",
    ];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !skip.contains(&name.as_str()) {
                    pending.push(path);
                }
            } else if path
                .extension()
                .is_some_and(|ext| kept.contains(&ext.to_string_lossy().as_ref()))
                || name == "Dockerfile"
                || name == "run"
            {
                text.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
    text
}

/// Variables a doc names that no source file mentions.
fn unknown_env_var_problems(file: &Path, markdown: &str, source: &str) -> Vec<String> {
    let known = env_vars(source);
    let mut problems = Vec::new();
    for (index, line) in markdown.lines().enumerate() {
        for name in env_vars(line) {
            if !known.contains(&name) {
                problems.push(format!(
                    "{}:{}: {name} is read nowhere in the code",
                    file.display(),
                    index + 1
                ));
            }
        }
    }
    problems
}

/// The `XJOB_*` variables the admin (with its command line) and the sidecar read (their string
/// literals), test-only ones aside.
fn code_env_vars() -> BTreeSet<String> {
    let root = root();
    let mut text = String::new();
    let mut pending = vec![
        root.join("admin/src"),
        root.join("cli/src"),
        root.join("sidecar/src"),
    ];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                text.push_str(&read(&path));
            }
        }
    }
    env_vars(&text)
        .into_iter()
        .filter(|name| text.contains(&format!("\"{name}\"")))
        .filter(|name| !name.starts_with("XJOB_TEST_"))
        .collect()
}

/// A row of a table in docs/configuration.md: its section's reader, keys and default cell.
struct SettingRow {
    line: usize,
    reader: Reader,
    keys: Vec<String>,
    default: String,
}

/// The settings tables of docs/configuration.md: rows whose first cell holds keys in
/// backticks; sections whose heading names `xjob-executor` are the sidecar's.
fn setting_rows(markdown: &str) -> Vec<SettingRow> {
    let mut reader = Reader::Admin;
    let mut default_column = None;
    let mut rows = Vec::new();
    for (line, text) in docs::prose_lines(markdown) {
        if text.starts_with("## ") {
            reader = if text.contains("xjob-executor") {
                Reader::Sidecar
            } else {
                Reader::Admin
            };
            continue;
        }
        if !text.starts_with('|') {
            continue;
        }
        let cells: Vec<&str> = text
            .trim()
            .trim_matches('|')
            .split(" | ")
            .map(str::trim)
            .collect();
        if cells
            .iter()
            .any(|cell| cell.eq_ignore_ascii_case("default"))
        {
            default_column = cells
                .iter()
                .position(|cell| cell.eq_ignore_ascii_case("default"));
            continue;
        }
        if cells[0].starts_with("---") {
            continue;
        }
        let keys: Vec<String> = cells[0]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        if keys.is_empty() {
            continue;
        }
        let default = default_column
            .and_then(|column| cells.get(column))
            .map_or(String::new(), |cell| cell.to_string());
        rows.push(SettingRow {
            line,
            reader,
            keys,
            default,
        });
    }
    rows
}

/// docs/configuration.md against the code: every key and variable the code reads is there,
/// every key there exists, and a default written as one literal is the code's.
fn configuration_page_problems(markdown: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let rows = setting_rows(markdown);
    for reader in [Reader::Admin, Reader::Sidecar] {
        let code = code_keys(reader);
        let documented: BTreeSet<String> = rows
            .iter()
            .filter(|row| row.reader == reader)
            .flat_map(|row| row.keys.iter().cloned())
            .collect();
        for key in code.difference(&documented) {
            problems.push(format!(
                "docs/configuration.md: {reader:?} key {key} is not documented"
            ));
        }
        for key in documented.difference(&code) {
            problems.push(format!(
                "docs/configuration.md: {reader:?} key {key} does not exist in the code"
            ));
        }
    }
    for row in &rows {
        if let Some(problem) = default_problem(row) {
            problems.push(format!("docs/configuration.md:{}: {problem}", row.line));
        }
    }
    problems
}

/// A default written as exactly one literal (`` `5s` ``, `` `256` ``) that differs from the
/// code's: parsing `key = literal` must give the same configuration as no key at all.
fn default_problem(row: &SettingRow) -> Option<String> {
    let [key] = row.keys.as_slice() else {
        return None;
    };
    let literal = row.default.strip_prefix('`')?.strip_suffix('`')?;
    if literal.contains('`') || key.contains("NAME") {
        return None;
    }
    let baseline = row.reader.parse("").expect("an empty config parses");
    let (table, leaf) = match key.rsplit_once('.') {
        Some((table, leaf)) => (format!("[{table}]\n"), leaf),
        None => (String::new(), key.as_str()),
    };
    let candidates = [
        format!("{table}{leaf} = {literal}\n"),
        format!("{table}{leaf} = \"{literal}\"\n"),
    ];
    let parsed: Vec<String> = candidates
        .iter()
        .filter_map(|text| row.reader.parse(text).ok())
        .collect();
    if parsed.is_empty() {
        return Some(format!(
            "{key}: default `{literal}` is not a value of this key"
        ));
    }
    (!parsed.contains(&baseline))
        .then(|| format!("{key}: documented default `{literal}` is not the code's default"))
}

/// Defaults written in prose as `` `key` (default `value`) `` (bold allowed) that are not the
/// code's. Derived defaults (`admin-{listen}`) are written so in configuration.md and skipped.
fn prose_default_problems(file: &Path, markdown: &str) -> Vec<String> {
    let admin = code_keys(Reader::Admin);
    let sidecar = code_keys(Reader::Sidecar);
    let mut problems = Vec::new();
    for (line, text) in docs::prose_lines(markdown) {
        let mut rest = text;
        while let Some(at) = rest.find("(default `") {
            let before = rest[..at]
                .trim_end()
                .trim_end_matches('*')
                .trim_end_matches(',');
            let after = &rest[at + "(default `".len()..];
            rest = after;
            let Some(key) = before.strip_suffix('`').and_then(|b| b.rsplit('`').next()) else {
                continue;
            };
            let Some(value) = after.split('`').next() else {
                continue;
            };
            let reader = if admin.contains(key) {
                Reader::Admin
            } else if sidecar.contains(key) {
                Reader::Sidecar
            } else {
                continue;
            };
            if value.contains('{') {
                continue;
            }
            let row = SettingRow {
                line,
                reader,
                keys: vec![key.to_string()],
                default: format!("`{value}`"),
            };
            if let Some(problem) = default_problem(&row) {
                problems.push(format!("{}:{line}: {problem}", file.display()));
            }
        }
    }
    problems
}

#[test]
fn defaults_written_in_prose_are_the_codes() {
    let problems = doc_texts()
        .iter()
        .flat_map(|(file, text)| prose_default_problems(file, text))
        .collect();
    assert_none("defaults the code does not have", problems);
}

#[test]
fn a_wrong_default_in_prose_is_reported() {
    let text = "- **`node_lease`** (default `10s`), `retention_interval` (default `2h`), \
                `alarm.rate_window` (default `10m`), `shutdown_grace` (default `5s`).\n";
    let problems = prose_default_problems(Path::new("x.md"), text);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("retention_interval: documented default `2h`"));
    assert!(problems[1].contains("shutdown_grace: documented default `5s`"));
}

#[test]
fn toml_blocks_and_inline_settings_parse() {
    let mut problems = Vec::new();
    let mut blocks = 0;
    for (file, text) in doc_texts() {
        blocks += docs::blocks(&text).iter().filter(|b| b.is_toml()).count();
        problems.extend(toml_block_problems(&file, &text));
        problems.extend(inline_setting_problems(&file, &text));
    }
    assert!(blocks >= 3, "only {blocks} TOML blocks found");
    assert_none("settings the parsers refuse", problems);
}

#[test]
fn configuration_page_matches_the_code() {
    let page = read(&root().join("docs/configuration.md"));
    let mut problems = configuration_page_problems(&page);
    for name in code_env_vars() {
        if !page.contains(&name) {
            problems.push(format!("docs/configuration.md: {name} is not documented"));
        }
    }
    assert_none("docs/configuration.md against the code", problems);
}

#[test]
fn every_variable_named_in_the_docs_exists() {
    let source = source_text();
    let problems = doc_texts()
        .iter()
        .flat_map(|(file, text)| unknown_env_var_problems(file, text, &source))
        .collect();
    assert_none("variables the code never reads", problems);
}

// ---------------------------------------------------------------- names and links

#[test]
fn every_rpc_named_exists_in_proto() {
    let proto = docs::ProtoNames::read_dir(&root().join("proto"));
    assert!(proto.services.contains_key("JobAdmin"), "proto/ not read");
    let problems = doc_texts()
        .iter()
        .flat_map(|(file, text)| proto.unknown_names(file, text))
        .collect();
    assert_none("names proto/ does not declare", problems);
}

/// Keys of the JSON that shell blocks send with `grpcurl -d '…'` that no proto message has.
fn unknown_json_field_problems(
    file: &Path,
    markdown: &str,
    proto: &docs::ProtoNames,
) -> Vec<String> {
    let mut problems = Vec::new();
    for block in docs::blocks(markdown)
        .iter()
        .filter(|block| block.is_shell())
    {
        for words in docs::shell_commands(&block.text) {
            if words.first().is_none_or(|program| program != "grpcurl") {
                continue;
            }
            let Some(at) = words.iter().position(|word| word == "-d") else {
                continue;
            };
            let Some(body) = words.get(at + 1) else {
                continue;
            };
            let place = format!("{}:{}", file.display(), block.line);
            match serde_json::from_str::<serde_json::Value>(body) {
                Ok(value) => {
                    let mut keys = Vec::new();
                    json_keys(&value, &mut keys);
                    for key in keys.iter().filter(|key| !proto.is_field(key)) {
                        problems.push(format!(
                            "{place}: grpcurl JSON field {key:?} is in no proto message"
                        ));
                    }
                }
                Err(error) => problems.push(format!("{place}: grpcurl -d is not JSON: {error}")),
            }
        }
    }
    problems
}

fn json_keys(value: &serde_json::Value, keys: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, inner) in map {
                keys.push(key.clone());
                json_keys(inner, keys);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|item| json_keys(item, keys)),
        _ => {}
    }
}

#[test]
fn every_grpcurl_json_field_exists_in_proto() {
    let proto = docs::ProtoNames::read_dir(&root().join("proto"));
    let problems = doc_texts()
        .iter()
        .flat_map(|(file, text)| unknown_json_field_problems(file, text, &proto))
        .collect();
    assert_none("grpcurl JSON fields proto/ does not declare", problems);
}

#[test]
fn a_grpcurl_field_that_does_not_exist_is_reported() {
    let proto =
        docs::ProtoNames::parse(["message Job {\n  int64 group_id = 1;\n  string name = 2;\n}\n"]);
    let text = "<!-- run -->\n```sh\ngrpcurl -plaintext -d '{\"job\": {\"groupId\": 1, \"nmae\": \"x\"}}' \\\n  h xjob.v1.JobAdmin/CreateJob\n```\n";
    let proto_with_job = docs::ProtoNames::parse([
        "message CreateJobRequest {\n  Job job = 1;\n}\nmessage Job {\n  int64 group_id = 1;\n  string name = 2;\n}\n",
    ]);
    assert_eq!(
        unknown_json_field_problems(Path::new("x.md"), text, &proto).len(),
        2
    );
    let problems = unknown_json_field_problems(Path::new("x.md"), text, &proto_with_job);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("\"nmae\""), "{problems:?}");
}

#[test]
fn relative_links_and_anchors_resolve() {
    let problems = doc_texts()
        .iter()
        .flat_map(|(file, text)| docs::broken_links(file, text))
        .collect();
    assert_none("broken links", problems);
}

#[test]
fn every_shell_block_says_whether_it_runs() {
    let problems = doc_texts()
        .iter()
        .flat_map(|(file, text)| docs::unmarked_shell_blocks(file, text))
        .collect();
    assert_none("unmarked shell blocks", problems);
}

// ---------------------------------------------------------------- runnable blocks

/// Where runnable blocks run: the admin's ports, a scratch directory, a PATH with `xjob`
/// (and `grpcurl` when it is there).
struct BlockEnv {
    grpc_port: u16,
    http_port: u16,
    dir: PathBuf,
    bin_dir: PathBuf,
    has_grpcurl: bool,
}

impl BlockEnv {
    fn new(dir: &Path) -> BlockEnv {
        let bin_dir = dir.join("bin");
        std::fs::create_dir_all(&bin_dir).expect("bin dir");
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_xjob"), bin_dir.join("xjob"))
            .expect("xjob link");
        let grpcurl = std::env::var_os("XJOB_GRPCURL_BIN").map(PathBuf::from);
        let has_grpcurl = match &grpcurl {
            Some(path) if path.is_file() => {
                std::os::unix::fs::symlink(path, bin_dir.join("grpcurl")).expect("grpcurl link");
                true
            }
            _ => false,
        };
        let mut env = BlockEnv {
            grpc_port: 0,
            http_port: 0,
            dir: dir.to_path_buf(),
            bin_dir,
            has_grpcurl,
        };
        env.pick_ports();
        env
    }

    /// Two loopback ports free a moment ago, for the admin's gRPC and HTTP listeners.
    fn pick_ports(&mut self) {
        self.grpc_port = free_port().expect("port");
        self.http_port = free_port().expect("port");
    }

    /// The block as it runs here: the documented ports replaced by this admin's.
    fn rewrite(&self, script: &str) -> String {
        let grpc = format!("127.0.0.1:{}", self.grpc_port);
        let http = format!("127.0.0.1:{}", self.http_port);
        script
            .replace("127.0.0.1:8080", &grpc)
            .replace("localhost:8080", &grpc)
            .replace("127.0.0.1:8081", &http)
            .replace("localhost:8081", &http)
    }
}

/// Runs the `<!-- run -->` blocks of one doc in order; problems as `file:line: what`.
async fn run_blocks(file: &Path, markdown: &str, env: &BlockEnv) -> Vec<String> {
    let blocks = docs::blocks(markdown);
    let mut problems = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        if !block.is_shell() || block.marker.as_deref() != Some("run") {
            continue;
        }
        let place = format!("{}:{}", file.display(), block.line);
        let uses_grpcurl = docs::shell_commands(&block.text)
            .iter()
            .any(|words| words.first().is_some_and(|w| w == "grpcurl"));
        if uses_grpcurl && !env.has_grpcurl {
            let message =
                format!("{place}: needs grpcurl (XJOB_GRPCURL_BIN, built by .ci/grpcurl.sh)");
            if std::env::var_os("CI").is_some() {
                problems.push(message);
            } else {
                eprintln!("skipped: {message}");
            }
            continue;
        }
        let expected = blocks
            .get(index + 1)
            .filter(|next| next.marker.as_deref() == Some("expect"));
        if let Err(problem) = run_block(block, expected, env).await {
            problems.push(format!("{place}: {problem}"));
        }
    }
    problems
}

/// How long one block may take (a `--follow` waits for a run to end).
const BLOCK_TIMEOUT: Duration = Duration::from_secs(60);

async fn run_block(block: &Block, expected: Option<&Block>, env: &BlockEnv) -> Result<(), String> {
    let script = format!("set -euo pipefail\n{}\n", env.rewrite(&block.text));
    let path = format!(
        "{}:{}",
        env.bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let child = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(&env.dir)
        .env("PATH", path)
        .env("XJOB_ADMIN", format!("http://127.0.0.1:{}", env.grpc_port))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| format!("cannot start bash: {error}"))?;
    let output = tokio::time::timeout(BLOCK_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| format!("still running after {BLOCK_TIMEOUT:?}"))?
        .map_err(|error| format!("bash failed: {error}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!(
            "exited with {}\n--- stdout\n{stdout}--- stderr\n{stderr}",
            output.status
        ));
    }
    if let Some(expected) = expected {
        let printed = format!("{stdout}{stderr}");
        for line in expected.text.lines().map(str::trim) {
            let elided = line.contains("...") || line.contains('…');
            if !line.is_empty() && !elided && !printed.contains(&env.rewrite(line)) {
                return Err(format!(
                    "did not print the promised line {line:?}\n--- output\n{printed}"
                ));
            }
        }
    }
    Ok(())
}

/// `xjob serve --demo` on the env's ports, once its demo executor is online. The ports were
/// free when picked, but another test of this binary can bind one before the admin does: an
/// admin that exits before it serves is started again on new ports (its log is printed).
async fn start_demo_admin(env: &mut BlockEnv) -> ChildProcess {
    const ATTEMPTS: usize = 3;
    for attempt in 1..=ATTEMPTS {
        let mut admin = spawn_demo_admin(env);
        let url = format!("http://127.0.0.1:{}", env.grpc_port);
        match wait_serving(&mut admin, &url).await {
            Ok(client) => {
                wait_for_demo_executor(client).await;
                return admin;
            }
            Err(AdminStart::Exited) if attempt < ATTEMPTS => {
                eprintln!(
                    "the docs' admin exited before serving (attempt {attempt}); new ports\n{}",
                    xjob_testkit::admin::tail(&env.dir.join("admin.log"), 30)
                );
                env.pick_ports();
            }
            Err(failure) => panic!(
                "the docs' admin serves: {failure:?}\nadmin log:\n{}",
                xjob_testkit::admin::tail(&env.dir.join("admin.log"), 30)
            ),
        }
    }
    unreachable!("the last attempt returns or panics")
}

fn spawn_demo_admin(env: &BlockEnv) -> ChildProcess {
    let log = std::fs::File::create(env.dir.join("admin.log")).expect("admin log");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_xjob"));
    command
        .args(["serve", "--demo", "--listen"])
        .arg(format!("127.0.0.1:{}", env.grpc_port))
        .arg("--http-listen")
        .arg(format!("127.0.0.1:{}", env.http_port))
        .arg("--data-dir")
        .arg(env.dir.join("xjob-data"))
        .current_dir(&env.dir)
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "warn")
        .stderr(log.try_clone().expect("log"));
    ChildProcess::spawn_with_stdout("docs-admin", &mut command, log.into())
        .expect("xjob serve --demo starts")
}

type AdminClient = pb::job_admin_client::JobAdminClient<tonic::transport::Channel>;

#[derive(Debug)]
enum AdminStart {
    /// The process ended before it answered (a port taken, a bad flag).
    Exited,
    /// Still running, never answered within the bound.
    NeverServed,
}

/// A client once the admin answers, or why it never did.
async fn wait_serving(admin: &mut ChildProcess, url: &str) -> Result<AdminClient, AdminStart> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        if let Ok(client) = xjob_testkit::connect_admin(url, Duration::from_secs(1)).await {
            return Ok(client);
        }
        if !admin.is_running() {
            return Err(AdminStart::Exited);
        }
    }
    Err(AdminStart::NeverServed)
}

async fn wait_for_demo_executor(client: AdminClient) {
    wait_until(
        Duration::from_secs(60),
        "the demo executor to register",
        || {
            let mut client = client.clone();
            async move {
                let executors = client
                    .list_executors(pb::ListExecutorsRequest::default())
                    .await
                    .ok()?
                    .into_inner();
                (!executors.executors.is_empty()).then_some(())
            }
        },
    )
    .await
    .expect("demo executor online");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runnable_blocks_run_against_a_real_admin() {
    let mut problems = Vec::new();
    let mut ran_files = 0;
    for (file, text) in doc_texts() {
        let runnable = docs::blocks(&text)
            .iter()
            .any(|block| block.is_shell() && block.marker.as_deref() == Some("run"));
        if !runnable {
            continue;
        }
        ran_files += 1;
        let dir = tempfile::tempdir().expect("temp dir");
        let mut env = BlockEnv::new(dir.path());
        let admin = start_demo_admin(&mut env).await;
        let found = run_blocks(&file, &text, &env).await;
        drop(admin);
        if !found.is_empty() {
            eprintln!(
                "admin log:\n{}",
                xjob_testkit::admin::tail(&env.dir.join("admin.log"), 30)
            );
        }
        problems.extend(found);
    }
    assert!(ran_files >= 1, "no doc has a runnable block");
    assert_none("runnable blocks that failed", problems);
}

// ---------------------------------------------------------------- the checks catch mistakes

#[test]
fn a_toml_block_with_an_unknown_key_is_refused() {
    let text = "```toml\nlisten = \"127.0.0.1:8080\"\nretention = \"2h\"\n```\n\
                <!-- toml: sidecar -->\n```toml\napp_name = \"a\"\nbind_address = \"x\"\n```\n\
                <!-- toml: sidecar -->\n```toml\napp_name = \"a\"\n```\n\
                ```toml\nlog_retention = \"2h\"\n[alarm]\nlink_base = \"http://h/runs/\"\n```\n";
    let problems = toml_block_problems(Path::new("x.md"), text);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("x.md:1:") && problems[0].contains("retention"));
    assert!(problems[1].contains("bind_address"));
}

#[test]
fn an_inline_setting_that_does_not_exist_is_reported() {
    let text = "Set `retention = \"2h\"`, or `log_retention = \"2h\"`, or `alarm.attempts = 3`, \
                or the sidecar's `shutdown_grace = \"30s\"`, not `a = b` prose.\n\
                `alarm.smtp.host` and `tls.cert` exist, `alarm.link_bse` does not.\n";
    let problems = inline_setting_problems(Path::new("x.md"), text);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("`retention = \"2h\"`"));
    assert!(problems[1].contains("x.md:2: `alarm.link_bse`"));
}

#[test]
fn the_configuration_page_is_held_to_the_code() {
    let page = "## Admin\n\n| key | env | default | meaning |\n|---|---|---|---|\n\
                | `listen` | `XJOB_LISTEN` | `127.0.0.1:8080` | address |\n\
                | `pre_read` | — | `9s` | wrong default |\n\
                | `retention` | — | `2h` | no such key |\n\
                ## Sidecar (`xjob-executor`)\n\n| key | env | default | meaning |\n|---|---|---|---|\n\
                | `bind` | `XJOB_BIND` | `127.0.0.1:9999` | address |\n";
    let problems = configuration_page_problems(page);
    let has = |needle: &str| problems.iter().any(|p| p.contains(needle));
    assert!(has("Admin key retention does not exist"), "{problems:?}");
    assert!(has("Admin key data_dir is not documented"), "{problems:?}");
    assert!(
        has("Sidecar key app_name is not documented"),
        "{problems:?}"
    );
    assert!(has("pre_read: documented default `9s`"), "{problems:?}");
    assert!(!has("listen:") && !has("bind:"), "{problems:?}");
}

#[test]
fn a_variable_the_code_never_reads_is_reported() {
    let source = "lookup(\"XJOB_LISTEN\")";
    let problems = unknown_env_var_problems(
        Path::new("x.md"),
        "`XJOB_LISTEN` and `XJOB_LISTEN_ADDR`, and MY_XJOB_THING",
        source,
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("XJOB_LISTEN_ADDR"));
}

#[tokio::test]
async fn a_failing_block_or_a_missing_promised_line_is_reported() {
    let dir = tempfile::tempdir().expect("temp dir");
    let env = BlockEnv::new(dir.path());
    let text = "<!-- run -->\n```sh\necho \"admin at 127.0.0.1:8080\"\n```\n\
                <!-- expect -->\n```\nadmin at 127.0.0.1:8080\n```\n\
                <!-- run -->\n```sh\necho hello\n```\n<!-- expect -->\n```\ngoodbye\n...\n```\n\
                <!-- run -->\n```sh\nfalse\necho never\n```\n\
                <!-- no-run: would fail -->\n```sh\nfalse\n```\n";
    let problems = run_blocks(Path::new("x.md"), text, &env).await;
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(problems[0].starts_with("x.md:10:") && problems[0].contains("\"goodbye\""));
    assert!(problems[1].starts_with("x.md:19:") && problems[1].contains("exited with"));
}
