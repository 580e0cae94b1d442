//! The `[alarm]` section of the admin's configuration: where alarms go (SMTP server, webhook),
//! how often delivery is retried, and the per-job rate limit.

use std::time::Duration;

use serde::Deserialize;

use super::parse::{ConfigError, duration_text, invalid, parse_field};

/// How the SMTP connection is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SmtpSecurity {
    /// Plain connection upgraded with STARTTLS (required); usual port 587.
    Starttls,
    /// TLS from the first byte ("SMTPS"); usual port 465.
    Tls,
    /// No encryption: only for a relay on loopback or a trusted network (and tests).
    None,
}

/// The SMTP server alarms are mailed through; `host` empty = no e-mail.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SmtpConfig {
    pub host: String,
    pub port: u16,
    pub security: SmtpSecurity,
    /// Empty = no authentication.
    pub username: String,
    pub password: String,
    /// The sender, e.g. `xjob <xjob@example.com>`.
    pub from: String,
    /// PEM file of extra CA certificates trusted for the server (an internal CA); empty = the
    /// built-in Mozilla roots only.
    pub ca_file: String,
}

impl Default for SmtpConfig {
    fn default() -> SmtpConfig {
        SmtpConfig {
            host: String::new(),
            port: 587,
            security: SmtpSecurity::Starttls,
            username: String::new(),
            password: String::new(),
            from: "xjob <xjob@localhost>".to_string(),
            ca_file: String::new(),
        }
    }
}

/// The body a webhook receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WebhookTemplate {
    /// xjob's own JSON object (docs/observability.md, "Alarms").
    Json,
    /// `{"text": "…"}`, which Slack, Mattermost and Rocket.Chat incoming webhooks accept.
    Slack,
}

/// Alarm delivery settings (`[alarm]` in the TOML file).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AlarmConfig {
    pub smtp: SmtpConfig,
    /// `http(s)://…` URL every alarm is POSTed to; empty = no webhook (`XJOB_ALARM_WEBHOOK_URL`).
    pub webhook_url: String,
    /// PEM file of extra CA certificates trusted for an https webhook (an internal CA); empty =
    /// the built-in Mozilla roots only.
    pub webhook_ca_file: String,
    pub webhook_template: WebhookTemplate,
    /// Prefix of the link in an alarm; the log id is appended (e.g. a console's log page).
    /// Empty = no link.
    pub link_base: String,
    /// Most alarms per job within `rate_window`; the rest are recorded as rate limited, not
    /// sent. 0 = no limit.
    pub max_per_job: u32,
    #[serde(with = "duration_text")]
    pub rate_window: Duration,
    /// Delivery attempts per channel (at least 1).
    pub attempts: u32,
    /// Pause before the second attempt; doubles with each further one.
    #[serde(with = "duration_text")]
    pub retry_delay: Duration,
    /// Deadline of one delivery attempt.
    #[serde(with = "duration_text")]
    pub timeout: Duration,
}

impl Default for AlarmConfig {
    fn default() -> AlarmConfig {
        AlarmConfig {
            smtp: SmtpConfig::default(),
            webhook_url: String::new(),
            webhook_ca_file: String::new(),
            webhook_template: WebhookTemplate::Json,
            link_base: String::new(),
            max_per_job: 5,
            rate_window: Duration::from_secs(600),
            attempts: 3,
            retry_delay: Duration::from_secs(1),
            timeout: Duration::from_secs(10),
        }
    }
}

impl AlarmConfig {
    /// The longest one alarm may take on its way out: every attempt on both channels with its
    /// timeout and the pauses between them. Past it the alarm is given up as failed.
    pub fn delivery_deadline(&self) -> Duration {
        let mut per_channel = Duration::ZERO;
        let mut pause = self.retry_delay;
        for _ in 0..self.attempts.max(1) {
            per_channel += self.timeout + pause;
            pause = (pause * 2).min(Duration::from_secs(60));
        }
        // Both channels, plus a second for the database look-ups around them.
        per_channel * 2 + Duration::from_secs(1)
    }

    /// Applies `XJOB_ALARM_*` and `XJOB_SMTP_*` variables.
    pub fn apply_env(
        &mut self,
        lookup: &impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        if let Some(value) = lookup("XJOB_ALARM_WEBHOOK_URL") {
            self.webhook_url = value;
        }
        if let Some(value) = lookup("XJOB_SMTP_HOST") {
            self.smtp.host = value;
        }
        if let Some(value) = lookup("XJOB_SMTP_PORT") {
            self.smtp.port = parse_field("alarm.smtp.port", &value)?;
        }
        if let Some(value) = lookup("XJOB_SMTP_USERNAME") {
            self.smtp.username = value;
        }
        // The password is best kept out of the TOML file.
        if let Some(value) = lookup("XJOB_SMTP_PASSWORD") {
            self.smtp.password = value;
        }
        if let Some(value) = lookup("XJOB_SMTP_FROM") {
            self.smtp.from = value;
        }
        Ok(())
    }

    /// Checks the fields a delivery depends on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.attempts == 0 {
            return Err(invalid("alarm.attempts", "must be at least 1"));
        }
        if self.timeout.is_zero() {
            return Err(invalid("alarm.timeout", "must be longer than 0"));
        }
        if self.max_per_job > 0 && self.rate_window.is_zero() {
            return Err(invalid(
                "alarm.rate_window",
                "must be longer than 0 when max_per_job is set",
            ));
        }
        if !self.webhook_url.is_empty()
            && !self.webhook_url.starts_with("http://")
            && !self.webhook_url.starts_with("https://")
        {
            let prefix: String = self.webhook_url.chars().take(24).collect();
            return Err(invalid(
                "alarm.webhook_url",
                format!("'{prefix}': must start with http:// or https://"),
            ));
        }
        if !self.smtp.host.is_empty() && !self.smtp.from.contains('@') {
            return Err(invalid("alarm.smtp.from", "must be an e-mail address"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    use super::*;

    #[test]
    fn the_alarm_section_parses_and_env_overrides_it() {
        let mut config = Config::from_toml(
            "metrics_listen = \"127.0.0.1:9464\"\n\
             [alarm]\nwebhook_url = \"http://relay:8080/x\"\nwebhook_template = \"slack\"\n\
             max_per_job = 2\nrate_window = \"1m\"\n\
             [alarm.smtp]\nhost = \"smtp.example.com\"\nsecurity = \"tls\"\nport = 465\n",
        )
        .expect("valid toml");
        config
            .apply_env(|key| (key == "XJOB_SMTP_PASSWORD").then(|| "secret".to_string()))
            .expect("env applies");
        let config = config.validate().expect("valid config");
        assert_eq!(config.metrics_listen.map(|a| a.port()), Some(9464));
        assert_eq!(config.alarm.webhook_template, WebhookTemplate::Slack);
        assert_eq!(config.alarm.rate_window, Duration::from_secs(60));
        assert_eq!(config.alarm.smtp.security, SmtpSecurity::Tls);
        assert_eq!(config.alarm.smtp.port, 465);
        assert_eq!(config.alarm.smtp.password, "secret");
    }

    #[test]
    fn unusable_alarm_settings_name_their_field() {
        let field = |alarm: AlarmConfig| alarm.validate().map_err(|error| error.field);
        assert_eq!(
            field(AlarmConfig {
                webhook_url: "ftp://hooks.example.com/x".into(),
                ..AlarmConfig::default()
            }),
            Err("alarm.webhook_url")
        );
        assert_eq!(
            field(AlarmConfig {
                attempts: 0,
                ..AlarmConfig::default()
            }),
            Err("alarm.attempts")
        );
        let mut no_sender = AlarmConfig::default();
        no_sender.smtp.host = "smtp.example.com".into();
        no_sender.smtp.from = "nobody".into();
        assert_eq!(field(no_sender), Err("alarm.smtp.from"));
        assert!(Config::from_toml("[alarm]\nwebhok_url = \"x\"").is_err());
    }
}
