//! Output for people and for scripts. Tables are aligned on the widest cell of each column,
//! times are shown in the local zone (`TZ`), durations as `1.2s` / `3m04s`; `--output json`
//! prints the [`super::view`] structs instead, one JSON document per command.

use std::io::Write;

use chrono::TimeZone;
use serde::Serialize;

use super::error::CliError;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
}

/// Where a verb writes its answer.
pub struct Output {
    format: Format,
}

/// Rows under a header, aligned when printed.
pub struct Table {
    headers: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&'static str]) -> Table {
        Table {
            headers: headers.to_vec(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|header| header.len()).collect();
        for row in &self.rows {
            for (index, cell) in row.iter().enumerate() {
                if let Some(width) = widths.get_mut(index) {
                    *width = (*width).max(cell.chars().count());
                }
            }
        }
        let headers: Vec<String> = self.headers.iter().map(|h| h.to_string()).collect();
        let mut text = String::new();
        for row in std::iter::once(&headers).chain(&self.rows) {
            let mut line = String::new();
            for (index, cell) in row.iter().enumerate() {
                if index > 0 {
                    line.push_str("  ");
                }
                line.push_str(cell);
                let pad = widths.get(index).copied().unwrap_or(0);
                let pad = pad.saturating_sub(cell.chars().count());
                line.extend(std::iter::repeat_n(' ', pad));
            }
            text.push_str(line.trim_end());
            text.push('\n');
        }
        text
    }
}

/// `label: value` lines of one object, labels aligned.
pub struct Details(Vec<(&'static str, String)>);

impl Details {
    pub fn new() -> Details {
        Details(Vec::new())
    }

    pub fn add(&mut self, label: &'static str, value: impl Into<String>) -> &mut Details {
        self.0.push((label, value.into()));
        self
    }

    /// The value printed under `label` (tests read single lines).
    #[cfg(test)]
    pub fn value(&self, label: &str) -> Option<&str> {
        let found = self.0.iter().find(|(shown, _)| *shown == label);
        found.map(|(_, value)| value.as_str())
    }

    fn render(&self) -> String {
        let width = self
            .0
            .iter()
            .map(|(label, _)| label.len())
            .max()
            .unwrap_or(0);
        let mut text = String::new();
        for (label, value) in &self.0 {
            // Multi-line values (a script's source) continue indented under their label.
            let mut lines = value.lines();
            let first = lines.next().unwrap_or("");
            text.push_str(format!("{label:<width$}  {first}").trim_end());
            text.push('\n');
            for more in lines {
                text.push_str(&format!("{:width$}  {more}\n", ""));
            }
        }
        text
    }
}

impl Output {
    pub fn new(format: Format) -> Output {
        Output { format }
    }

    pub fn is_json(&self) -> bool {
        self.format == Format::Json
    }

    /// A list: JSON array of the views, or a table (or `empty` when there is nothing).
    pub fn list<T: Serialize>(
        &self,
        items: &[T],
        empty: &str,
        table: impl FnOnce(&[T]) -> Table,
    ) -> Result<(), CliError> {
        if self.is_json() {
            return self.json(&items);
        }
        if items.is_empty() {
            return self.text(&format!("{empty}\n"));
        }
        self.text(&table(items).render())
    }

    /// One object: its JSON view, or `label: value` lines.
    pub fn object<T: Serialize>(
        &self,
        item: &T,
        details: impl FnOnce(&T) -> Details,
    ) -> Result<(), CliError> {
        if self.is_json() {
            return self.json(item);
        }
        self.text(&details(item).render())
    }

    /// The outcome of an action: a JSON object for scripts, a sentence for people.
    pub fn done<T: Serialize>(&self, value: &T, sentence: &str) -> Result<(), CliError> {
        if self.is_json() {
            return self.json(value);
        }
        self.text(&format!("{sentence}\n"))
    }

    pub fn json<T: Serialize + ?Sized>(&self, value: &T) -> Result<(), CliError> {
        let text = serde_json::to_string_pretty(value)
            .map_err(|error| CliError::Failed(format!("cannot encode JSON: {error}")))?;
        self.text(&format!("{text}\n"))
    }

    /// Writes text as it is (a run's log lines); flushed so `--follow` shows lines at once.
    pub fn text(&self, text: &str) -> Result<(), CliError> {
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(text.as_bytes())?;
        stdout.flush()?;
        Ok(())
    }
}

/// An instant in the local zone, `-` for 0 (never).
pub fn time(ms: i64) -> String {
    if ms <= 0 {
        return "-".into();
    }
    match chrono::Local.timestamp_millis_opt(ms).single() {
        Some(local) => local.format("%Y-%m-%d %H:%M:%S").to_string(),
        None => ms.to_string(),
    }
}

/// An instant in the local zone with its offset and how long ago (or until) it is.
pub fn time_long(ms: i64, now_ms: i64) -> String {
    if ms <= 0 {
        return "-".into();
    }
    let zoned = match chrono::Local.timestamp_millis_opt(ms).single() {
        Some(local) => local.format("%Y-%m-%d %H:%M:%S%.3f %:z").to_string(),
        None => ms.to_string(),
    };
    format!("{zoned} ({})", relative(ms, now_ms))
}

/// `5s ago`, `in 3m00s`.
pub fn relative(ms: i64, now_ms: i64) -> String {
    if ms <= now_ms {
        format!("{} ago", duration(now_ms - ms))
    } else {
        format!("in {}", duration(ms - now_ms))
    }
}

/// A duration for people: `350ms`, `1.2s`, `3m04s`, `2h05m`, `1d03h`.
pub fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    let seconds = ms / 1000;
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 => format!("{}.{}s", seconds, (ms % 1000) / 100),
        60_000..3_600_000 => format!("{}m{:02}s", seconds / 60, seconds % 60),
        3_600_000..86_400_000 => format!("{}h{:02}m", seconds / 3600, (seconds % 3600) / 60),
        _ => format!("{}d{:02}h", seconds / 86_400, (seconds % 86_400) / 3600),
    }
}

/// A free-text cell cut to `max` characters on one line.
pub fn cell(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return if line.is_empty() { "-".into() } else { line };
    }
    let cut: String = line.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

/// `-` for an empty value.
pub fn or_dash(text: &str) -> String {
    if text.is_empty() {
        "-".into()
    } else {
        text.to_string()
    }
}

pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_people_write_them() {
        assert_eq!(duration(350), "350ms");
        assert_eq!(duration(1_234), "1.2s");
        assert_eq!(duration(184_000), "3m04s");
        assert_eq!(duration(7_500_000), "2h05m");
        assert_eq!(duration(97_200_000), "1d03h");
        assert_eq!(duration(-5), "0ms");
    }

    #[test]
    fn tables_align_on_the_widest_cell() {
        let mut table = Table::new(&["ID", "NAME"]);
        table.row(vec!["1".into(), "short".into()]);
        table.row(vec!["123".into(), "a longer name".into()]);
        assert_eq!(
            table.render(),
            "ID   NAME\n1    short\n123  a longer name\n"
        );
    }

    #[test]
    fn cells_stay_on_one_bounded_line() {
        assert_eq!(cell("a\nb", 10), "a b");
        assert_eq!(cell("abcdefghij", 5), "abcd…");
        assert_eq!(cell("", 5), "-");
    }
}
