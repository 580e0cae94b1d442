//! Durations as people write them in flags, variables and TOML: `250ms`, `5s`, `2m`, `1h`.
//! One spelling for the admin's configuration and the command line's `--since` / `--timeout`.

use std::time::Duration;

/// Parses `250ms`, `5s`, `2m`, `1h` (a bare number is seconds).
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split_at = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split_at);
    let value: u64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration like 5s"))?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => {
            return Err(format!(
                "'{text}': unknown unit '{unit}' (use ms, s, m or h)"
            ));
        }
    };
    // A huge number of hours must be an error, not an overflow (a panic at start).
    value
        .checked_mul(unit_ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("'{text}' is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse(" 7 "), Ok(Duration::from_secs(7)));
        assert!(parse("5 parsecs").is_err());
        assert!(parse("s").is_err());
        assert!(parse("99999999999999999h").is_err());
    }
}
