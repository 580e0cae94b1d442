//! The pieces every section of the configuration parses with: the error that names the field,
//! and the readers of fields, booleans and durations. Below both `config.rs` and its sections,
//! so a section reads its fields without reaching back up into the file that assembles it.

/// A configuration problem, naming the field.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {field}: {message}")]
pub struct ConfigError {
    pub field: &'static str,
    pub message: String,
}

pub(crate) fn invalid(field: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field,
        message: message.into(),
    }
}

pub(crate) fn parse_field<T: std::str::FromStr>(
    field: &'static str,
    value: &str,
) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    value
        .parse()
        .map_err(|error: T::Err| invalid(field, format!("'{value}': {error}")))
}

/// A boolean environment variable: `true`/`on`/`yes`/`1` or `false`/`off`/`no`/`0`, in any case
/// (surrounding spaces ignored). Anything else stops the start with an error naming the
/// variable: a typo in a security switch must not silently pick one side.
pub(crate) fn parse_bool(variable: &'static str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "on" | "yes" | "1" => Ok(true),
        "false" | "off" | "no" | "0" => Ok(false),
        _ => Err(invalid(
            variable,
            format!(
                "'{}' is not a boolean: use true/false, on/off, yes/no or 1/0",
                value.chars().take(32).collect::<String>()
            ),
        )),
    }
}

/// Parses `250ms`, `5s`, `2m`, `1h` (a bare number is seconds): the spelling the command line
/// shares, kept in the wire crate.
pub use xjob_proto::duration::parse as parse_duration;

pub(crate) mod duration_text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(deserializer)?;
        super::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}
