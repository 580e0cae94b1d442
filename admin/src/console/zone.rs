//! The zone the console shows times in, which the viewer picks: UTC, their browser's zone
//! ("local"), or the zone of the job a time belongs to. The choice lives in a cookie the
//! script writes (`xjob_tz`: `utc`, `local:Area/City` or `job`), so the server reads typed
//! times (the runs filter) in the zone the page shows, and says which. Without the script
//! there is no cookie and everything is UTC, labelled as such.
//!
//! Times are still written in UTC by the server (`html::time`); a time that belongs to a job
//! carries that job's zone (`data-tz`) for the script.

use axum::http::HeaderMap;
use chrono::TimeZone;
use chrono_tz::Tz;

use super::cookies;
use super::csrf::Fields;
use super::html::{self, Markup, markup};
use super::i18n::{Lang, t, tf};

/// The cookie holding the viewer's choice.
pub const COOKIE: &str = "xjob_tz";

/// What the viewer picked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    Utc,
    /// The browser's zone, as the script reported it.
    Local(Tz),
    /// Each time in the zone of its job (UTC where a time has no job).
    Job,
}

impl Choice {
    /// The choice a cookie value names; anything else (or no cookie) is UTC.
    pub fn parse(value: &str) -> Choice {
        match value.split_once(':') {
            Some(("local", zone)) => crate::model::parse_time_zone(zone)
                .map(Choice::Local)
                .unwrap_or(Choice::Utc),
            _ if value == "job" => Choice::Job,
            _ => Choice::Utc,
        }
    }

    pub fn of(headers: &HeaderMap) -> Choice {
        cookies::cookie(headers, COOKIE)
            .map(|value| Choice::parse(&value))
            .unwrap_or(Choice::Utc)
    }
}

/// The zone a form's typed times are read in: the `tz` the form carried (the zone it said it
/// used when it was shown, so a shared link means the same times), else the viewer's choice;
/// with "job's zone", `job_zone` when the page is about one job, else UTC.
pub fn reading_zone(query: &Fields, headers: &HeaderMap, job_zone: Option<Tz>) -> Tz {
    if let Ok(zone) = crate::model::parse_time_zone(query.get("tz")) {
        return zone;
    }
    match Choice::of(headers) {
        Choice::Utc => chrono_tz::UTC,
        Choice::Local(zone) => zone,
        Choice::Job => job_zone.unwrap_or(chrono_tz::UTC),
    }
}

/// `YYYY-MM-DDTHH:MM` (seconds allowed; a `datetime-local` field) read in `zone`, to epoch
/// ms; 0 when empty. A time the zone skips (a clock moved forward) is refused; one it repeats
/// is the earlier. `name` is the key of the field's name in the refusal.
pub fn parse_local(lang: Lang, name: &'static str, text: &str, zone: Tz) -> Result<i64, String> {
    if text.is_empty() {
        return Ok(0);
    }
    let naive = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"]
        .iter()
        .find_map(|format| chrono::NaiveDateTime::parse_from_str(text, format).ok())
        .ok_or_else(|| tf(lang, "form.not_a_time", &[&t(lang, name), &text, &zone]))?;
    zone.from_local_datetime(&naive)
        .earliest()
        .map(|at| at.timestamp_millis())
        .ok_or_else(|| tf(lang, "form.skipped_time", &[&t(lang, name), &text, &zone]))
}

/// A time that belongs to a job whose schedule runs in `zone`: UTC text, like
/// [`html::time`], plus the job's zone for the "job's zone" choice.
pub fn job_time(ms: i64, zone: &str) -> Markup {
    if ms <= 0 {
        return html::time(ms);
    }
    let utc = html::utc_text(ms);
    markup!(
        "<time data-ms=\"{}\" data-tz=\"{}\" title=\"{}\">{}</time>",
        ms,
        zone,
        utc,
        utc
    )
}

/// The zone a job's times are shown in under "job's zone": its own, else the admin's default.
pub fn of_job(job_zone: &str, default: Tz) -> Tz {
    crate::model::parse_time_zone(job_zone).unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_come_from_the_cookie_value() {
        assert_eq!(Choice::parse("utc"), Choice::Utc);
        assert_eq!(Choice::parse("job"), Choice::Job);
        assert_eq!(
            Choice::parse("local:Europe/Berlin"),
            Choice::Local(chrono_tz::Europe::Berlin)
        );
        assert_eq!(Choice::parse("local:Mars/Olympus"), Choice::Utc);
        assert_eq!(Choice::parse(""), Choice::Utc);
    }

    #[test]
    fn typed_times_are_read_in_the_zone_shown() {
        // 2024-05-01 13:30 in Berlin (summer time, UTC+2) is 11:30 UTC.
        let berlin = parse_local(
            Lang::En,
            "filter.from",
            "2024-05-01T13:30",
            chrono_tz::Europe::Berlin,
        );
        assert_eq!(berlin, Ok(1_714_563_000_000));
        let utc = parse_local(
            Lang::En,
            "filter.from",
            "2024-05-01T11:30:00",
            chrono_tz::UTC,
        );
        assert_eq!(utc, Ok(1_714_563_000_000));
        assert_eq!(
            parse_local(Lang::En, "filter.from", "", chrono_tz::UTC),
            Ok(0)
        );
        let bad = parse_local(
            Lang::En,
            "filter.to",
            "yesterday",
            chrono_tz::Europe::Berlin,
        );
        assert_eq!(
            bad,
            Err("to: 'yesterday' is not a time like 2024-05-01T13:30 (Europe/Berlin)".into())
        );
        let skipped = parse_local(
            Lang::En,
            "filter.from",
            "2024-03-31T02:30",
            chrono_tz::Europe::Berlin,
        );
        assert!(
            skipped.is_err_and(|message| message.contains("does not exist")),
            "02:30 is skipped in Berlin on 2024-03-31"
        );
        let chinese = parse_local(Lang::Zh, "filter.to", "昨天", chrono_tz::UTC);
        assert_eq!(
            chinese,
            Err("结束时间：“昨天”不是有效的时间，格式如 2024-05-01T13:30（UTC）".into())
        );
    }

    #[test]
    fn a_form_keeps_the_zone_it_was_shown_in() {
        let mut headers = HeaderMap::new();
        headers.insert(
            axum::http::header::COOKIE,
            axum::http::HeaderValue::from_static("xjob_tz=local:Asia/Tokyo"),
        );
        let plain = Fields::from_query(None);
        assert_eq!(reading_zone(&plain, &headers, None), chrono_tz::Asia::Tokyo);
        let carried = Fields::from_query(Some("tz=America%2FNew_York"));
        assert_eq!(
            reading_zone(&carried, &headers, None),
            chrono_tz::America::New_York
        );
        headers.insert(
            axum::http::header::COOKIE,
            axum::http::HeaderValue::from_static("xjob_tz=job"),
        );
        assert_eq!(reading_zone(&plain, &headers, None), chrono_tz::UTC);
        let zone = Some(chrono_tz::Europe::Paris);
        assert_eq!(
            reading_zone(&plain, &headers, zone),
            chrono_tz::Europe::Paris
        );
    }
}
