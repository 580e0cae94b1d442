//! Alarm e-mail over SMTP (lettre): STARTTLS or TLS with rustls, optional authentication, one
//! message to the job's `alarm_email` list.

use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use super::AlarmMessage;
use crate::config::alarm::{SmtpConfig, SmtpSecurity};

/// A configured SMTP server.
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

impl Mailer {
    /// Builds the transport (no connection yet: one is opened per alarm).
    pub fn new(config: &SmtpConfig, timeout: std::time::Duration) -> Result<Mailer, String> {
        let builder = match config.security {
            SmtpSecurity::Starttls => {
                AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&config.host)
                    .map_err(|error| format!("smtp: {error}"))?
            }
            SmtpSecurity::Tls => AsyncSmtpTransport::<Tokio1Executor>::relay(&config.host)
                .map_err(|error| format!("smtp: {error}"))?,
            SmtpSecurity::None => {
                AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&config.host)
            }
        };
        let mut builder = builder.port(config.port).timeout(Some(timeout));
        if !config.ca_file.is_empty() && config.security != SmtpSecurity::None {
            let parameters = tls_parameters(config)?;
            builder = builder.tls(match config.security {
                SmtpSecurity::Tls => Tls::Wrapper(parameters),
                _ => Tls::Required(parameters),
            });
        }
        if !config.username.is_empty() {
            builder = builder.credentials(Credentials::new(
                config.username.clone(),
                config.password.clone(),
            ));
        }
        let from = config
            .from
            .parse()
            .map_err(|error| format!("smtp from address: {error}"))?;
        Ok(Mailer {
            transport: builder.build(),
            from,
        })
    }

    /// Sends `message` to every address of `recipients` (comma-separated, as `alarm_email`
    /// holds them); `Ok` with the number of recipients.
    pub async fn send(&self, recipients: &str, message: &AlarmMessage) -> Result<usize, String> {
        let mut builder = Message::builder()
            .from(self.from.clone())
            .subject(message.subject())
            .header(ContentType::TEXT_PLAIN);
        let mut count = 0;
        for address in recipients.split([',', ';']).map(str::trim) {
            if address.is_empty() {
                continue;
            }
            let mailbox: Mailbox = address.parse().map_err(|error| {
                let prefix: String = address.chars().take(40).collect();
                format!("bad recipient '{prefix}': {error}")
            })?;
            builder = builder.to(mailbox);
            count += 1;
        }
        if count == 0 {
            return Err("no recipient in alarm_email".to_string());
        }
        let email = builder
            .body(message.text())
            .map_err(|error| format!("building the message: {error}"))?;
        self.transport
            .send(email)
            .await
            .map_err(|error| error.to_string())?;
        Ok(count)
    }
}

/// TLS settings trusting the Mozilla roots and the certificates of `ca_file`.
fn tls_parameters(config: &SmtpConfig) -> Result<TlsParameters, String> {
    let pem = std::fs::read(&config.ca_file)
        .map_err(|error| format!("smtp CA file {}: {error}", config.ca_file))?;
    let certificate = Certificate::from_pem(&pem)
        .map_err(|error| format!("smtp CA file {}: {error}", config.ca_file))?;
    TlsParameters::builder(config.host.clone())
        .add_root_certificate(certificate)
        .build_rustls()
        .map_err(|error| format!("smtp TLS setup: {error}"))
}
