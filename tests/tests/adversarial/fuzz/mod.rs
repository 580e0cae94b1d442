//! Bounded fuzzing of the parsers that read untrusted input: cron expressions, the XXL-JOB
//! listener's JSON bodies, the console's form fields, and the admin's and sidecar's TOML
//! configuration. Inputs are random bytes, random strings, and structure-aware mutations of
//! valid inputs (tokens swapped for dictionary words, deleted, repeated, numbers pushed to their
//! extremes). A case fails on a panic, an unclean error, or a computation that does not finish.
//!
//! The generator is a seeded `fastrand` (already a dependency) rather than `proptest`: no new
//! crate, a failure names the seed and the input so it replays exactly, and the mutations are
//! the structure-aware ones these formats need (shrinking matters little when the failing input
//! is printed whole).
//!
//! Bounds, so CI stays short: each target runs its default number of cases or for
//! `XJOB_FUZZ_SECONDS` (10 s), whichever ends first. For longer local runs:
//! `XJOB_FUZZ_CASES=200000 XJOB_FUZZ_SECONDS=600 cargo test -p xjob-tests --test adversarial fuzz`;
//! `XJOB_FUZZ_SEED=<seed from a failure>` replays a run.

mod config;
mod console_forms;
mod cron;
mod xxl_json;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A case still running after this long counts as not terminating (debug build, loaded machine:
/// every real case takes milliseconds).
const STUCK_AFTER: Duration = Duration::from_secs(10);

/// How much one target runs: cases, wall-clock budget, and the seed its inputs come from.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub cases: usize,
    pub time: Duration,
    /// `XJOB_FUZZ_SEED`: what a failure prints, to replay the run.
    pub base_seed: u64,
    /// This target's own seed, derived from the base.
    pub seed: u64,
}

impl Budget {
    /// `default_cases` unless `XJOB_FUZZ_CASES` says otherwise; the seed differs per target.
    pub fn for_target(target: &str, default_cases: usize) -> Budget {
        let cases = env_number("XJOB_FUZZ_CASES").map_or(default_cases, |cases| cases as usize);
        let time = Duration::from_secs(env_number("XJOB_FUZZ_SECONDS").unwrap_or(10));
        let base = env_number("XJOB_FUZZ_SEED").unwrap_or_else(|| fastrand::u64(..));
        let seed = target
            .bytes()
            .fold(base, |seed, byte| seed.rotate_left(5) ^ u64::from(byte));
        // Printed so that a failure anywhere in the target can be replayed.
        eprintln!("fuzz {target}: XJOB_FUZZ_SEED={base} ({cases} cases, {time:?})");
        Budget {
            cases,
            time,
            base_seed: base,
            seed,
        }
    }
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// What ran: cases and the slowest single case.
#[derive(Debug)]
pub struct Ran {
    pub cases: usize,
    pub slowest: Duration,
}

/// The case in progress, as the watchdog sees it.
struct Current {
    index: usize,
    input: String,
    started: Instant,
}

/// Runs `check` on `budget.cases` inputs from `make` on a worker thread, and panics naming the
/// seed and the input when a case panics, returns `Err`, or runs past [`STUCK_AFTER`].
pub fn run_cases<I, M, C>(target: &str, budget: Budget, make: M, check: C) -> Ran
where
    I: std::fmt::Debug + Send + 'static,
    M: FnMut(&mut Gen) -> I + Send + 'static,
    C: Fn(&I) -> Result<(), String> + Send + 'static,
{
    let current = Arc::new(Mutex::new(Current {
        index: 0,
        input: String::new(),
        started: Instant::now(),
    }));
    let (done_tx, done_rx) = mpsc::channel::<Result<Ran, String>>();
    let worker_current = Arc::clone(&current);
    let mut make = make;
    std::thread::spawn(move || {
        let mut rng = Gen::new(budget.seed);
        let started = Instant::now();
        let mut slowest = Duration::ZERO;
        let mut cases = 0;
        while cases < budget.cases && started.elapsed() < budget.time {
            let input = make(&mut rng);
            let shown = shown(&input);
            let case_started = Instant::now();
            if let Ok(mut current) = worker_current.lock() {
                *current = Current {
                    index: cases,
                    input: shown.clone(),
                    started: case_started,
                };
            }
            let outcome = catch_unwind(AssertUnwindSafe(|| check(&input)));
            let failure = match outcome {
                Ok(Ok(())) => None,
                Ok(Err(message)) => Some(format!("unclean error: {message}")),
                Err(panic) => Some(format!("panicked: {}", panic_text(&panic))),
            };
            if let Some(failure) = failure {
                let _ = done_tx.send(Err(format!("case {cases}: {failure}\n  input: {shown}")));
                return;
            }
            slowest = slowest.max(case_started.elapsed());
            cases += 1;
        }
        let _ = done_tx.send(Ok(Ran { cases, slowest }));
    });
    loop {
        match done_rx.recv_timeout(Duration::from_millis(200)) {
            Ok(Ok(ran)) => {
                eprintln!(
                    "fuzz {target}: {} cases, slowest {:?}",
                    ran.cases, ran.slowest
                );
                return ran;
            }
            Ok(Err(failure)) => panic!(
                "fuzz {target} (XJOB_FUZZ_SEED={}): {failure}",
                budget.base_seed
            ),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                panic!(
                    "fuzz {target} (XJOB_FUZZ_SEED={}): the worker died",
                    budget.base_seed
                )
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let Ok(current) = current.lock() else {
                    continue;
                };
                if current.started.elapsed() > STUCK_AFTER {
                    // The worker thread is left spinning; the failing test ends the run.
                    panic!(
                        "fuzz {target} (XJOB_FUZZ_SEED={}): case {} did not finish within {STUCK_AFTER:?}\n  input: {}",
                        budget.base_seed, current.index, current.input
                    );
                }
            }
        }
    }
}

/// An input as a failure message shows it: debug-escaped, cut at 2 000 characters.
pub fn shown(input: &impl std::fmt::Debug) -> String {
    let text = format!("{input:?}");
    match text.char_indices().nth(2000) {
        Some((cut, _)) => format!("{}… ({} bytes in all)", &text[..cut], text.len()),
        None => text,
    }
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "(no message)".to_string()
    }
}

/// Characters that break parsers more often than letters do.
const AWKWARD: &[char] = &[
    '\0', '\t', '\n', '\r', ' ', '\u{7f}', '\u{85}', '\u{a0}', '\u{2028}', '\u{feff}', '\u{fffd}',
    'é', 'ß', '中', '😀', '\\', '"', '\'', '`', '%', '&', '=', '+', '#', '/', '?', '*', ',', '-',
    ':', ';', '<', '>', '[', ']', '{', '}', '.', '$', '@', '!', '~', '^', '|',
];

/// Numbers at the edges of the integer types parsers convert to.
pub const EXTREME_NUMBERS: &[&str] = &[
    "0",
    "-0",
    "-1",
    "1",
    "255",
    "256",
    "65535",
    "65536",
    "2147483647",
    "2147483648",
    "-2147483649",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "99999999999999999999999999",
    "1e309",
    "-1e309",
    "0.5",
    "NaN",
    "inf",
    "0x10",
    "1_000",
];

/// The seeded input generator.
pub struct Gen {
    rng: fastrand::Rng,
}

impl Gen {
    pub fn new(seed: u64) -> Gen {
        Gen {
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    pub fn below(&mut self, bound: usize) -> usize {
        self.rng.usize(..bound.max(1))
    }

    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    pub fn i64(&mut self) -> i64 {
        self.rng.i64(..)
    }

    pub fn i64_in(&mut self, range: std::ops::Range<i64>) -> i64 {
        self.rng.i64(range)
    }

    /// Up to `max_len` random bytes (short lengths are likelier).
    pub fn bytes(&mut self, max_len: usize) -> Vec<u8> {
        let len = self.length(max_len);
        (0..len).map(|_| self.rng.u8(..)).collect()
    }

    /// A random string: awkward characters, ASCII, any Unicode scalar, extreme numbers and
    /// words from `dictionary`, up to about `max_len` characters.
    pub fn string(&mut self, max_len: usize, dictionary: &[&str]) -> String {
        let len = self.length(max_len);
        let mut text = String::new();
        while text.chars().count() < len {
            match self.below(8) {
                0 | 1 => text.push(self.pick(AWKWARD)),
                2 | 3 => text.push(self.rng.char(' '..='~')),
                4 => text.push(self.rng.char(..)),
                5 => text.push_str(self.pick(EXTREME_NUMBERS)),
                _ if !dictionary.is_empty() => text.push_str(self.pick(dictionary)),
                _ => text.push(self.rng.alphanumeric()),
            }
        }
        text
    }

    /// A structure-aware mutation of `valid`: one to four edits on its tokens (split on spaces
    /// and `separators`), then sometimes a character-level edit.
    pub fn mutate(&mut self, valid: &str, separators: &[char], dictionary: &[&str]) -> String {
        let mut tokens = tokenize(valid, separators);
        for _ in 0..=self.below(4) {
            self.edit_tokens(&mut tokens, dictionary);
        }
        let mut text: String = tokens.concat();
        if self.chance(3) {
            self.edit_chars(&mut text);
        }
        text
    }

    fn edit_tokens(&mut self, tokens: &mut Vec<String>, dictionary: &[&str]) {
        if tokens.is_empty() {
            tokens.push(self.string(4, dictionary));
            return;
        }
        let at = self.below(tokens.len());
        match self.below(9) {
            0 if !dictionary.is_empty() => tokens[at] = self.pick(dictionary).to_string(),
            1 => tokens[at] = self.pick(EXTREME_NUMBERS).to_string(),
            2 => {
                tokens.remove(at);
            }
            3 => {
                let copy = tokens[at].clone();
                tokens.insert(at, copy);
            }
            4 => {
                let other = self.below(tokens.len());
                tokens.swap(at, other);
            }
            5 => tokens[at] = tokens[at].repeat(2 + self.below(50)),
            6 => tokens.insert(at, self.string(6, dictionary)),
            7 => tokens.truncate(at),
            _ => tokens[at] = replace_digits(&tokens[at], self.pick(EXTREME_NUMBERS)),
        }
    }

    fn edit_chars(&mut self, text: &mut String) {
        let boundaries: Vec<usize> = text
            .char_indices()
            .map(|(at, _)| at)
            .chain([text.len()])
            .collect();
        let at = self.pick(&boundaries);
        match self.below(3) {
            0 => text.insert(at, self.pick(AWKWARD)),
            1 => text.truncate(at),
            _ => {
                let junk = self.string(3, &[]);
                text.insert_str(at, &junk);
            }
        }
    }

    /// A length up to `max`, small ones likelier (most bugs show on short inputs).
    fn length(&mut self, max: usize) -> usize {
        match self.below(4) {
            0 => self.below(4),
            1 | 2 => self.below(max.min(32) + 1),
            _ => self.below(max + 1),
        }
    }
}

/// Splits `text` into tokens that concatenate back to it: runs of ordinary characters, and each
/// whitespace or separator character on its own.
fn tokenize(text: &str, separators: &[char]) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if c.is_whitespace() || separators.contains(&c) {
            if !word.is_empty() {
                tokens.push(std::mem::take(&mut word));
            }
            tokens.push(c.to_string());
        } else {
            word.push(c);
        }
    }
    if !word.is_empty() {
        tokens.push(word);
    }
    tokens
}

/// `token` with its first run of digits replaced by `number` (the token itself when it has
/// none).
fn replace_digits(token: &str, number: &str) -> String {
    let Some(start) = token.find(|c: char| c.is_ascii_digit()) else {
        return number.to_string();
    };
    let end = token[start..]
        .find(|c: char| !c.is_ascii_digit())
        .map_or(token.len(), |len| start + len);
    format!("{}{number}{}", &token[..start], &token[end..])
}

/// A complete HTTP/1.1 answer as a raw client reads it.
#[derive(Debug)]
pub struct HttpAnswer {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

/// Sends one raw HTTP/1.1 request (`Connection: close`) and reads the whole answer; `Err` when
/// the connection breaks before a complete answer (a handler that panicked drops it) or takes
/// longer than [`STUCK_AFTER`].
pub async fn http_exchange(
    address: std::net::SocketAddr,
    request: &[u8],
) -> Result<HttpAnswer, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(address)
            .await
            .map_err(|error| format!("connect: {error}"))?;
        stream
            .write_all(request)
            .await
            .map_err(|error| format!("write: {error}"))?;
        let mut answer = Vec::new();
        stream
            .read_to_end(&mut answer)
            .await
            .map_err(|error| format!("read: {error}"))?;
        parse_answer(&answer)
    };
    tokio::time::timeout(STUCK_AFTER, exchange)
        .await
        .map_err(|_| format!("no answer within {STUCK_AFTER:?}"))?
}

/// Splits a raw answer into status, head and body; `Err` when it is not a whole answer.
fn parse_answer(answer: &[u8]) -> Result<HttpAnswer, String> {
    let Some(split) = answer.windows(4).position(|window| window == b"\r\n\r\n") else {
        return Err(format!(
            "no complete answer ({} bytes): {:?}",
            answer.len(),
            String::from_utf8_lossy(&answer[..answer.len().min(200)])
        ));
    };
    let head = String::from_utf8_lossy(&answer[..split]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("no status line: {head:?}"))?;
    let body = answer[split + 4..].to_vec();
    if let Some(length) =
        header(&head, "content-length").and_then(|value| value.parse::<usize>().ok())
        && body.len() != length
    {
        return Err(format!("body cut: {} of {length} bytes", body.len()));
    }
    Ok(HttpAnswer { status, head, body })
}

/// The value of header `name` (case-insensitive) in `head`.
pub fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim()
            .eq_ignore_ascii_case(name)
            .then_some(value.trim())
    })
}
