//! Reading the user docs (README.md, CONTRIBUTING.md, docs/*.md) the way the docs checks need:
//! fenced code blocks with the marker comment written before them, links, headings as GitHub
//! anchors, inline code, shell commands split into words, and the names `proto/` declares.
//!
//! The checks themselves live in the admin's tests (`admin/tests/it/docs.rs`, and the CLI examples
//! in the `xjob` binary's own tests), where the admin's and the sidecar's parsers are at hand.
//! Everything here is plain text processing, so a check's logic can be tested on small bad
//! inputs without any file.
//!
//! Markers (an HTML comment on the last non-blank line before a block, invisible on GitHub):
//! - `<!-- run -->`: a shell block the docs check executes against a real admin;
//! - `<!-- no-run: why -->`: a shell block that cannot run there, with the reason;
//! - `<!-- expect -->`: an output block whose lines the runnable block before it must print;
//! - `<!-- toml: sidecar -->` / `<!-- toml: cargo -->`: which parser reads a TOML block (the
//!   admin's when there is none).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One fenced code block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Line of the opening fence, counted from 1.
    pub line: usize,
    /// The fence's info string (`sh`, `toml`, empty).
    pub info: String,
    /// The marker comment's content (`run`, `no-run: …`), trimmed; None without one.
    pub marker: Option<String>,
    /// The lines between the fences, with the fence's indentation removed.
    pub text: String,
}

impl Block {
    /// A shell block: `sh`, `bash`, `shell` or `console`.
    pub fn is_shell(&self) -> bool {
        matches!(self.info.as_str(), "sh" | "bash" | "shell" | "console")
    }

    pub fn is_toml(&self) -> bool {
        self.info == "toml"
    }
}

/// The user docs under `root`: README.md, CONTRIBUTING.md and docs/*.md, sorted.
pub fn doc_files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ["README.md", "CONTRIBUTING.md"]
        .iter()
        .map(|name| root.join(name))
        .filter(|path| path.is_file())
        .collect();
    if let Ok(entries) = std::fs::read_dir(root.join("docs")) {
        let mut docs: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
            .collect();
        docs.sort();
        files.extend(docs);
    }
    files
}

/// The marker comment on `line`, if it is one (`<!-- run -->` gives `run`).
fn marker_of(line: &str) -> Option<String> {
    let inner = line.trim().strip_prefix("<!--")?.strip_suffix("-->")?;
    Some(inner.trim().to_string())
}

/// Every fenced code block of a Markdown text, in order.
pub fn blocks(markdown: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut last_text_line: Option<&str> = None;
    let mut open: Option<(Block, usize)> = None;
    let mut body: Vec<String> = Vec::new();
    for (index, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match open.take() {
            Some((block, fence_indent)) => {
                if trimmed.starts_with("```") {
                    found.push(Block {
                        text: body.join("\n"),
                        ..block
                    });
                    body.clear();
                    last_text_line = None;
                } else {
                    let cut = line
                        .char_indices()
                        .take_while(|(at, c)| *at < fence_indent && c.is_whitespace())
                        .count();
                    body.push(line[cut..].to_string());
                    open = Some((block, fence_indent));
                }
            }
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let block = Block {
                        line: index + 1,
                        info: info.trim().to_string(),
                        marker: last_text_line.and_then(marker_of),
                        text: String::new(),
                    };
                    open = Some((block, indent));
                } else if !trimmed.is_empty() {
                    last_text_line = Some(line);
                }
            }
        }
    }
    found
}

/// The text outside fenced blocks, line by line (`(line number, text)`), for links, inline
/// code and prose.
pub fn prose_lines(markdown: &str) -> Vec<(usize, &str)> {
    let mut inside = false;
    let mut lines = Vec::new();
    for (index, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            inside = !inside;
            continue;
        }
        if !inside {
            lines.push((index + 1, line));
        }
    }
    lines
}

/// Inline code spans outside fenced blocks: `(line, content)`.
pub fn inline_code(markdown: &str) -> Vec<(usize, String)> {
    let mut spans = Vec::new();
    for (line_number, line) in prose_lines(markdown) {
        let mut rest = line;
        while let Some(start) = rest.find('`') {
            let ticks = rest[start..].chars().take_while(|c| *c == '`').count();
            let fence = "`".repeat(ticks);
            let after = &rest[start + ticks..];
            match after.find(&fence) {
                Some(end) => {
                    spans.push((line_number, after[..end].trim().to_string()));
                    rest = &after[end + ticks..];
                }
                None => break,
            }
        }
    }
    spans
}

/// A line with its inline code spans blanked out, so links and names inside code are not read.
fn without_inline_code(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut inside = false;
    for c in line.chars() {
        if c == '`' {
            inside = !inside;
            out.push(' ');
        } else {
            out.push(if inside { ' ' } else { c });
        }
    }
    out
}

/// Link targets outside code: inline `[text](target)` and reference definitions `[x]: target`.
pub fn links(markdown: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (line_number, line) in prose_lines(markdown) {
        let line = without_inline_code(line);
        if let Some(rest) = line.trim_start().strip_prefix('[')
            && let Some((_, target)) = rest.split_once("]: ")
        {
            found.push((line_number, target.trim().to_string()));
            continue;
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let mut depth = 0usize;
            let mut end = after.len();
            for (index, c) in after.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 0 => {
                        end = index;
                        break;
                    }
                    ')' => depth -= 1,
                    _ => {}
                }
            }
            let target = after[..end].split_whitespace().next().unwrap_or("");
            found.push((line_number, target.trim_matches(['<', '>']).to_string()));
            rest = &after[end.min(after.len())..];
        }
    }
    found
}

/// GitHub's anchor for a heading's text: lower case, punctuation dropped, spaces as hyphens.
pub fn slug(heading: &str) -> String {
    // Links in a heading count by their text only.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        match rest[open..].find("](") {
            Some(mid) => {
                let close = rest[open + mid..]
                    .find(')')
                    .map_or(rest.len(), |at| open + mid + at + 1);
                text.push_str(&rest[..open]);
                text.push_str(&rest[open + 1..open + mid]);
                rest = &rest[close..];
            }
            None => break,
        }
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor a Markdown text offers: its headings' slugs (a repeated heading gets `-1`,
/// `-2`, … as on GitHub) and explicit `<a id="…">` / `<a name="…">`.
pub fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    for (_, line) in prose_lines(markdown) {
        let trimmed = line.trim_start();
        if trimmed.starts_with('#') {
            let text = trimmed.trim_start_matches('#');
            if text.starts_with(' ') {
                let base = slug(text);
                let count = seen.entry(base.clone()).or_insert(0);
                let anchor = if *count == 0 {
                    base.clone()
                } else {
                    format!("{base}-{count}")
                };
                *count += 1;
                anchors.insert(anchor);
            }
        }
        for key in ["<a id=\"", "<a name=\""] {
            let mut rest = line;
            while let Some(at) = rest.find(key) {
                let after = &rest[at + key.len()..];
                let end = after.find('"').unwrap_or(after.len());
                anchors.insert(after[..end].to_string());
                rest = &after[end..];
            }
        }
    }
    anchors
}

/// Relative links of `file` (its Markdown `markdown`) whose file or anchor does not exist;
/// each problem as `file:line: what`.
pub fn broken_links(file: &Path, markdown: &str) -> Vec<String> {
    let dir = file.parent().unwrap_or(Path::new("."));
    let mut problems = Vec::new();
    for (line, target) in links(markdown) {
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (target.as_str(), None),
        };
        let resolved = if path.is_empty() {
            file.to_path_buf()
        } else {
            dir.join(path)
        };
        let place = format!("{}:{line}", file.display());
        if !resolved.exists() {
            problems.push(format!("{place}: link target {target} does not exist"));
            continue;
        }
        let Some(anchor) = anchor else { continue };
        if resolved.extension().is_none_or(|ext| ext != "md") {
            continue;
        }
        let text = if path.is_empty() {
            markdown.to_string()
        } else {
            std::fs::read_to_string(&resolved).unwrap_or_default()
        };
        if !anchors(&text).contains(anchor) {
            problems.push(format!(
                "{place}: link {target}: no heading or anchor '#{anchor}' in {}",
                resolved.display()
            ));
        }
    }
    problems
}

/// Shell blocks that carry neither `<!-- run -->` nor `<!-- no-run: reason -->`.
pub fn unmarked_shell_blocks(file: &Path, markdown: &str) -> Vec<String> {
    blocks(markdown)
        .into_iter()
        .filter(|block| block.is_shell())
        .filter(|block| match block.marker.as_deref() {
            Some("run") => false,
            Some(marker) => marker
                .strip_prefix("no-run:")
                .is_none_or(|reason| reason.trim().is_empty()),
            None => true,
        })
        .map(|block| {
            format!(
                "{}:{}: shell block needs <!-- run --> or <!-- no-run: reason --> on the line before",
                file.display(),
                block.line
            )
        })
        .collect()
}

/// Splits a shell script into simple commands, each a list of words: quotes and backslash-line
/// continuations are honoured; `|`, `;`, `&&`, `||`, `&` and newlines separate commands;
/// comments, redirections and leading `NAME=value` assignments are dropped. Enough for the
/// docs' examples, not a shell.
pub fn shell_commands(script: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = script.chars().peekable();
    let finish_word = |word: &mut String, in_word: &mut bool, words: &mut Vec<String>| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    let finish_command = |words: &mut Vec<String>, commands: &mut Vec<Vec<String>>| {
        let command = clean_command(std::mem::take(words));
        if !command.is_empty() {
            commands.push(command);
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(next) => {
                    word.push(next);
                    in_word = true;
                }
                None => {}
            },
            '\'' => {
                in_word = true;
                for next in chars.by_ref() {
                    if next == '\'' {
                        break;
                    }
                    word.push(next);
                }
            }
            '"' => {
                in_word = true;
                while let Some(next) = chars.next() {
                    match next {
                        '"' => break,
                        '\\' => {
                            if let Some(escaped) = chars.next() {
                                word.push(escaped);
                            }
                        }
                        _ => word.push(next),
                    }
                }
            }
            '#' if !in_word => {
                for next in chars.by_ref() {
                    if next == '\n' {
                        break;
                    }
                }
                finish_word(&mut word, &mut in_word, &mut words);
                finish_command(&mut words, &mut commands);
            }
            '\n' | ';' | '|' | '&' => {
                finish_word(&mut word, &mut in_word, &mut words);
                finish_command(&mut words, &mut commands);
            }
            c if c.is_whitespace() => finish_word(&mut word, &mut in_word, &mut words),
            _ => {
                word.push(c);
                in_word = true;
            }
        }
    }
    finish_word(&mut word, &mut in_word, &mut words);
    finish_command(&mut words, &mut commands);
    commands
}

/// Drops a command's leading `NAME=value` assignments and its redirections.
fn clean_command(words: Vec<String>) -> Vec<String> {
    let mut cleaned = Vec::new();
    let mut skip_next = false;
    for word in words {
        if skip_next {
            skip_next = false;
            continue;
        }
        let is_assignment = cleaned.is_empty()
            && word.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
        if is_assignment {
            continue;
        }
        let bare = word.trim_start_matches(|c: char| c.is_ascii_digit());
        if matches!(bare, ">" | ">>" | "<") {
            skip_next = true;
            continue;
        }
        if bare.starts_with('>') || bare.starts_with('<') {
            continue;
        }
        cleaned.push(word);
    }
    cleaned
}

/// The `xjob` command lines of a shell script, as the arguments after the program: `xjob …`,
/// `target/release/xjob …` and `cargo run … --bin xjob -- …`.
pub fn xjob_invocations(script: &str) -> Vec<Vec<String>> {
    shell_commands(script)
        .into_iter()
        .filter_map(|words| {
            let program = words.first()?;
            if Path::new(program)
                .file_name()
                .is_some_and(|name| name == "xjob")
            {
                return Some(words[1..].to_vec());
            }
            let is_cargo_run = program == "cargo" && words.get(1).is_some_and(|w| w == "run");
            let runs_xjob = words
                .windows(2)
                .any(|pair| pair[0] == "--bin" && pair[1] == "xjob");
            if is_cargo_run && runs_xjob {
                let separator = words.iter().position(|w| w == "--")?;
                return Some(words[separator + 1..].to_vec());
            }
            None
        })
        .collect()
}

/// What `proto/` declares: services with their RPCs, and message and enum names.
#[derive(Debug, Default)]
pub struct ProtoNames {
    pub services: BTreeMap<String, BTreeSet<String>>,
    pub types: BTreeSet<String>,
    /// Every message field name (snake_case, as declared).
    pub fields: BTreeSet<String>,
}

impl ProtoNames {
    /// Reads the declarations of one or more `.proto` texts.
    pub fn parse<'a>(texts: impl IntoIterator<Item = &'a str>) -> ProtoNames {
        let mut names = ProtoNames::default();
        for text in texts {
            let mut service: Option<String> = None;
            for line in text.lines() {
                let line = line.split("//").next().unwrap_or_default();
                let words: Vec<&str> = line
                    .split(|c: char| c.is_whitespace() || c == '(' || c == '{')
                    .filter(|word| !word.is_empty())
                    .collect();
                match words.as_slice() {
                    ["service", name, ..] => {
                        service = Some(name.to_string());
                        names.services.entry(name.to_string()).or_default();
                    }
                    ["rpc", name, ..] => {
                        if let Some(service) = &service {
                            names
                                .services
                                .entry(service.clone())
                                .or_default()
                                .insert(name.to_string());
                        }
                    }
                    ["message" | "enum", name, ..] => {
                        names.types.insert(name.to_string());
                    }
                    _ => {}
                }
                // `string app_name = 1;`, `repeated Job jobs = 2;`, also several on one line
                // (`message A { Group group = 1; }`); enum values are upper case.
                let statements: Vec<&str> = line.split(';').collect();
                for statement in &statements[..statements.len() - 1] {
                    let statement = statement.rsplit('{').next().unwrap_or_default();
                    let words: Vec<&str> = statement.split_whitespace().collect();
                    if let [.., name, "=", number] = words.as_slice()
                        && number.chars().all(|c| c.is_ascii_digit())
                        && name.chars().any(|c| c.is_ascii_lowercase())
                    {
                        names.fields.insert(name.to_string());
                    }
                }
            }
        }
        names
    }

    /// Reads every `.proto` file under `dir`.
    pub fn read_dir(dir: &Path) -> ProtoNames {
        let mut texts = Vec::new();
        let mut pending = vec![dir.to_path_buf()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    pending.push(path);
                } else if path.extension().is_some_and(|ext| ext == "proto") {
                    texts.push(std::fs::read_to_string(&path).unwrap_or_default());
                }
            }
        }
        ProtoNames::parse(texts.iter().map(String::as_str))
    }

    /// Whether a JSON key (`appName` or `app_name`, as grpcurl takes both) is a field of some
    /// message.
    pub fn is_field(&self, json_key: &str) -> bool {
        let mut snake = String::new();
        for c in json_key.chars() {
            if c.is_ascii_uppercase() {
                snake.push('_');
                snake.push(c.to_ascii_lowercase());
            } else {
                snake.push(c);
            }
        }
        // `service` is the field of grpc.health.v1's HealthCheckRequest, which grpcurl calls too.
        self.fields.contains(&snake) || snake == "service"
    }

    fn is_rpc(&self, name: &str) -> bool {
        self.services.values().any(|rpcs| rpcs.contains(name))
    }

    /// The verbs RPC names start with (`Create`, `List`, …): a CamelCase name in inline code
    /// that starts with one of them is read as an RPC, message or enum name.
    fn verbs(&self) -> BTreeSet<String> {
        self.services
            .values()
            .flatten()
            .filter_map(|rpc| first_hump(rpc))
            .collect()
    }

    /// XXL-JOB's own names the docs compare with, not xjob's.
    const FOREIGN_NAMES: [&str; 1] = ["TriggerParam"];

    /// Names in `markdown` that `proto/` does not declare: `Service.Rpc` / `Service/Rpc`
    /// anywhere (code included), and RPC-like CamelCase names in inline code.
    pub fn unknown_names(&self, file: &Path, markdown: &str) -> Vec<String> {
        let mut problems = Vec::new();
        for (index, line) in markdown.lines().enumerate() {
            for (service, rpcs) in &self.services {
                for separator in ['.', '/'] {
                    let needle = format!("{service}{separator}");
                    let mut rest = line;
                    while let Some(at) = rest.find(&needle) {
                        let before_ok = rest[..at]
                            .chars()
                            .next_back()
                            .is_none_or(|c| !c.is_alphanumeric());
                        let after = &rest[at + needle.len()..];
                        let rpc: String = after
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric())
                            .collect();
                        let starts_upper = rpc.chars().next().is_some_and(char::is_uppercase);
                        if before_ok && starts_upper && !rpcs.contains(&rpc) {
                            problems.push(format!(
                                "{}:{}: {service}{separator}{rpc}: no RPC {rpc} in service {service} (proto/)",
                                file.display(),
                                index + 1
                            ));
                        }
                        rest = after;
                    }
                }
            }
        }
        let verbs = self.verbs();
        for (line, code) in inline_code(markdown) {
            let name: String = code
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            let rest = code[name.len()..].trim_start();
            // `StopJob {"id": 4}` and `TriggerJob` are RPC names; `Job.name` and `a b` are not.
            if !(rest.is_empty() || rest.starts_with('{')) || humps(&name) < 2 {
                continue;
            }
            let Some(first) = first_hump(&name) else {
                continue;
            };
            let known = self.is_rpc(&name)
                || self.types.contains(&name)
                || Self::FOREIGN_NAMES.contains(&name.as_str());
            if verbs.contains(&first) && !known {
                problems.push(format!(
                    "{}:{line}: `{name}` looks like an RPC but proto/ declares no RPC, message or enum of that name",
                    file.display()
                ));
            }
        }
        problems
    }
}

fn humps(name: &str) -> usize {
    let all_caps_or_lower = name
        .chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        || !name.chars().next().is_some_and(|c| c.is_ascii_uppercase());
    if all_caps_or_lower {
        return 0;
    }
    name.chars().filter(char::is_ascii_uppercase).count()
}

fn first_hump(name: &str) -> Option<String> {
    let mut chars = name.char_indices();
    let (_, first) = chars.next()?;
    if !first.is_ascii_uppercase() {
        return None;
    }
    let end = chars
        .find(|(_, c)| c.is_ascii_uppercase())
        .map_or(name.len(), |(at, _)| at);
    Some(name[..end].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_carry_the_marker_written_before_them() {
        let text = "intro\n\n<!-- run -->\n```sh\nxjob jobs list\n```\n\n```toml\na = 1\n```\n";
        let found = blocks(text);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].marker.as_deref(), Some("run"));
        assert_eq!(found[0].text, "xjob jobs list");
        assert_eq!(found[0].line, 4);
        assert_eq!(found[1].marker, None);
        assert!(found[1].is_toml());
    }

    #[test]
    fn an_unmarked_or_reasonless_shell_block_is_reported() {
        let text = "```sh\nls\n```\n<!-- no-run: -->\n```sh\nls\n```\n<!-- no-run: starts a server -->\n```sh\nls\n```\n";
        let problems = unmarked_shell_blocks(Path::new("x.md"), text);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("x.md:1:"));
    }

    #[test]
    fn slugs_follow_github() {
        assert_eq!(slug(" Run it"), "run-it");
        assert_eq!(slug("Use it with `grpcurl`"), "use-it-with-grpcurl");
        assert_eq!(
            slug("An admin is overloaded: more fires than it can send (and record)"),
            "an-admin-is-overloaded-more-fires-than-it-can-send-and-record"
        );
        assert_eq!(slug("[Link](x.md) here"), "link-here");
        let anchors = anchors("# A\n## A\n```\n# not a heading\n```\n<a id=\"custom\"></a>\n");
        assert!(anchors.contains("a") && anchors.contains("a-1") && anchors.contains("custom"));
        assert!(!anchors.contains("not-a-heading"));
    }

    #[test]
    fn broken_links_and_anchors_are_reported() {
        let dir = tempfile_dir();
        std::fs::write(dir.join("other.md"), "# Present\n").expect("write");
        let file = dir.join("doc.md");
        let text = "# Here\n[ok](other.md#present) [ok](#here) [web](https://x.invalid/a)\n\
                    [gone](missing.md) [bad anchor](other.md#absent) [bad local](#nowhere)\n\
                    `[in code](missing.md)`\n";
        std::fs::write(&file, text).expect("write");
        let problems = broken_links(&file, text);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("missing.md does not exist"));
        assert!(problems[1].contains("'#absent'"));
        assert!(problems[2].contains("'#nowhere'"));
        std::fs::remove_dir_all(&dir).ok();
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xjob-docs-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn shell_commands_split_like_a_shell() {
        let script = "XJOB_CONFIG=x.toml xjob serve   # comment\n\
                      xjob jobs create --cron \"0 30 2 * * ?\" \\\n  --name 'a b' > out.txt\n\
                      grpcurl -d '{\"a\":\n 1}' host list | grep x && echo done\n";
        let commands = shell_commands(script);
        assert_eq!(commands[0], ["xjob", "serve"]);
        assert_eq!(
            commands[1],
            [
                "xjob",
                "jobs",
                "create",
                "--cron",
                "0 30 2 * * ?",
                "--name",
                "a b"
            ]
        );
        assert_eq!(
            commands[2],
            ["grpcurl", "-d", "{\"a\":\n 1}", "host", "list"]
        );
        assert_eq!(commands[3], ["grep", "x"]);
        assert_eq!(commands[4], ["echo", "done"]);
        let invocations = xjob_invocations(
            "cargo run --release -p xjob-admin --bin xjob -- serve --demo\ntarget/release/xjob jobs list\n",
        );
        assert_eq!(invocations, [vec!["serve", "--demo"], vec!["jobs", "list"]]);
    }

    #[test]
    fn names_proto_does_not_declare_are_reported() {
        let proto = ProtoNames::parse([
            "service JobAdmin {\n  rpc CreateJob(CreateJobRequest) returns (CreateJobResponse);\n  rpc TriggerJob(A) returns (B);\n}\nmessage CreateJobRequest {\n  int64 group_id = 1;\n}\nenum RunStatus {\n  RUN_STATUS_OK = 0;\n}\n",
        ]);
        let text = "Call `JobAdmin.CreateJob` or `JobAdmin/TriggerJob`, `TriggerJob {\"id\": 1}`, \
                    `CreateJobRequest`, `RunStatus`, `JobContext`.\n\
                    Wrong: `JobAdmin.RunJob`, `CreateJobs`, `TriggerJobNow {}`.\n";
        assert!(proto.is_field("groupId") && proto.is_field("group_id"));
        assert!(!proto.is_field("groupID") && !proto.is_field("RUN_STATUS_OK"));
        let problems = proto.unknown_names(Path::new("x.md"), text);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("JobAdmin.RunJob"));
        assert!(problems.iter().any(|p| p.contains("`CreateJobs`")));
        assert!(problems.iter().any(|p| p.contains("`TriggerJobNow`")));
    }
}
