//! Time zones: IANA names as jobs and the config spell them.

use chrono_tz::Tz;

use super::Job;

/// An IANA zone name that is not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown time zone '{0}'")]
pub struct UnknownTimeZone(pub String);

/// Parses an IANA time zone name such as `"Europe/Berlin"` or `"UTC"`.
pub fn parse_time_zone(name: &str) -> Result<Tz, UnknownTimeZone> {
    name.trim()
        .parse::<Tz>()
        .map_err(|_| UnknownTimeZone(name.to_string()))
}

/// The zone a job's cron is evaluated in: its own, else the admin's default.
pub fn job_time_zone(job: &Job, default_tz: Tz) -> Tz {
    if job.time_zone.is_empty() {
        default_tz
    } else {
        parse_time_zone(&job.time_zone).unwrap_or(default_tz)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_zones() {
        assert_eq!(
            parse_time_zone("Europe/Berlin"),
            Ok(chrono_tz::Europe::Berlin)
        );
        assert_eq!(parse_time_zone("UTC"), Ok(chrono_tz::UTC));
        assert_eq!(
            parse_time_zone("Mars/Olympus_Mons")
                .unwrap_err()
                .to_string(),
            "unknown time zone 'Mars/Olympus_Mons'"
        );
    }
}
