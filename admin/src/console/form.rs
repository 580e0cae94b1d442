//! Numbers typed into the console's forms, read strictly: a typo is refused under its field
//! (the message says what is accepted) instead of being saved as 0 or dropped. An empty field
//! keeps its documented default (0 = no timeout, no retries, no children). Refusals are in the
//! viewer's language.

use super::i18n::{Lang, tf};

/// A form field the console refused before calling the API: the field's name and why.
pub type FieldRefusal = (String, String);

/// A job timeout: `30s`, `5m`, `1h`, `250ms` or plain seconds; empty = 0 (none). In ms.
pub fn timeout_ms(lang: Lang, text: &str) -> Result<i64, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(0);
    }
    let refused = || tf(lang, "form.not_a_duration", &[&text]);
    let split_at = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split_at);
    let value: i64 = number.parse().map_err(|_| refused())?;
    let unit_ms = match unit.trim() {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(refused()),
    };
    value
        .checked_mul(unit_ms)
        .ok_or_else(|| tf(lang, "form.too_long", &[&text]))
}

/// A timeout as the editor shows it: the largest unit that writes it whole (`5m`, `90s`).
pub fn timeout_text(ms: i64) -> String {
    match ms {
        0 => "0".to_string(),
        _ if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        _ if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        _ if ms % 1000 == 0 => format!("{}s", ms / 1000),
        _ => format!("{ms}ms"),
    }
}

/// A count such as retries: a whole number ≥ 0; empty = 0.
pub fn count(lang: Lang, text: &str) -> Result<i32, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(0);
    }
    match text.parse::<i32>() {
        Ok(value) if value >= 0 => Ok(value),
        _ => Err(tf(lang, "form.not_a_count", &[&text])),
    }
}

/// A retry backoff factor: a decimal number of 1 or more (1 = the same delay each time);
/// empty = 1.
pub fn factor(lang: Lang, text: &str) -> Result<f64, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(1.0);
    }
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() && (1.0..=100.0).contains(&value) => Ok(value),
        _ => Err(tf(lang, "form.not_a_factor", &[&text])),
    }
}

/// A factor as the editor shows it (`1`, `1.5`, `2`); 0 (unset) shows as 1.
pub fn factor_text(value: f64) -> String {
    if value <= 1.0 {
        "1".to_string()
    } else {
        format!("{value}")
    }
}

/// Job ids separated by commas or spaces; empty = none.
pub fn id_list(lang: Lang, text: &str) -> Result<Vec<i64>, String> {
    text.split([',', ' '])
        .filter(|id| !id.is_empty())
        .map(|id| match id.parse::<i64>() {
            Ok(value) if value > 0 => Ok(value),
            _ => Err(tf(lang, "form.not_a_job_id", &[&id])),
        })
        .collect()
}

/// An id filter such as `?job=`: a positive whole number; empty = any (0).
pub fn id_filter(lang: Lang, text: &str) -> Result<i64, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(0);
    }
    match text.parse::<i64>() {
        Ok(value) if value > 0 => Ok(value),
        _ => Err(tf(lang, "form.not_an_id", &[&text])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Lang::En;

    #[test]
    fn timeouts_take_units_or_plain_seconds() {
        assert_eq!(timeout_ms(En, "30s"), Ok(30_000));
        assert_eq!(timeout_ms(En, "5m"), Ok(300_000));
        assert_eq!(timeout_ms(En, "1h"), Ok(3_600_000));
        assert_eq!(timeout_ms(En, "45"), Ok(45_000));
        assert_eq!(timeout_ms(En, "250ms"), Ok(250));
        assert_eq!(timeout_ms(En, ""), Ok(0));
        for bad in ["30x", "abc", "-5", "1.5m", "99999999999999999h"] {
            assert!(timeout_ms(En, bad).is_err(), "{bad}");
        }
        for ms in [0, 250, 30_000, 90_000, 300_000, 7_200_000] {
            assert_eq!(timeout_ms(En, &timeout_text(ms)), Ok(ms));
        }
    }

    #[test]
    fn counts_and_ids_refuse_what_is_not_a_number() {
        assert_eq!(count(En, "3"), Ok(3));
        assert_eq!(count(En, ""), Ok(0));
        assert!(count(En, "-1").is_err());
        assert!(count(En, "three").is_err());
        assert_eq!(id_list(En, "3, 5 7"), Ok(vec![3, 5, 7]));
        assert_eq!(id_list(En, ""), Ok(vec![]));
        let refused = id_list(En, "3,abc").expect_err("abc is no id");
        assert!(refused.contains("'abc' is not a job id"), "{refused}");
        assert!(id_list(En, "-1").is_err());
        assert_eq!(id_filter(En, "12"), Ok(12));
        assert_eq!(factor(En, "2"), Ok(2.0));
        assert_eq!(factor(En, ""), Ok(1.0));
        assert!(factor(En, "0.5").is_err());
        assert!(factor(En, "x").is_err());
        assert_eq!(factor(En, &factor_text(1.5)), Ok(1.5));
        assert!(id_filter(En, "x").is_err());
    }

    #[test]
    fn refusals_speak_the_viewers_language() {
        assert_eq!(
            timeout_ms(Lang::Zh, "30x"),
            Err("“30x”不是时长：请用 30s、5m、1h 或秒数".to_string())
        );
        assert_eq!(
            count(Lang::Zh, "three"),
            Err("“three”不是大于等于 0 的整数".to_string())
        );
        assert!(id_list(Lang::Zh, "abc").is_err_and(|why| why.starts_with("“abc”不是任务编号")));
    }
}
