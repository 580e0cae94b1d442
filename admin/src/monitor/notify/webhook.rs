//! Alarm webhook: one JSON POST over HTTP/1.1 (hyper's client connection, no pool: alarms are
//! rare, so a connection per delivery costs nothing worth caching), over TLS (rustls with the
//! Mozilla roots, plus an optional CA file) for `https://` URLs.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Uri, header};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore, crypto};

use super::AlarmMessage;
use crate::config::alarm::WebhookTemplate;

/// A configured webhook.
pub struct Webhook {
    uri: Uri,
    template: WebhookTemplate,
    /// Set for `https://` URLs.
    tls: Option<TlsConnector>,
}

impl Webhook {
    /// Parses an `http://` or `https://` URL; `ca_file` (PEM) adds trusted roots for https, e.g.
    /// a company CA. The error says why the webhook is unusable.
    pub fn new(url: &str, template: WebhookTemplate, ca_file: &str) -> Result<Webhook, String> {
        let uri: Uri = url
            .parse()
            .map_err(|error| format!("webhook url is not a URL: {error}"))?;
        if uri.host().is_none() {
            return Err("webhook url must be http(s)://host[:port]/path".to_string());
        }
        let tls = match uri.scheme_str() {
            Some("http") => None,
            Some("https") => Some(connector(ca_file)?),
            _ => return Err("webhook url must start with http:// or https://".to_string()),
        };
        Ok(Webhook { uri, template, tls })
    }

    /// The request body for `message` in the configured template.
    pub fn body(&self, message: &AlarmMessage) -> String {
        match self.template {
            WebhookTemplate::Json => serde_json::to_string(message).unwrap_or_default(),
            WebhookTemplate::Slack => serde_json::json!({ "text": message.one_line() }).to_string(),
        }
    }

    /// POSTs `body`; `Ok` with the status on a 2xx answer, else why not.
    pub async fn post(&self, body: String) -> Result<u16, String> {
        // `[::1]` in a URL is `::1` to a socket.
        let host = self
            .uri
            .host()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let default_port = if self.tls.is_some() { 443 } else { 80 };
        let port = self.uri.port_u16().unwrap_or(default_port);
        let stream = TcpStream::connect((host, port))
            .await
            .map_err(|error| format!("connect {host}:{port}: {error}"))?;
        match &self.tls {
            None => self.exchange(TokioIo::new(stream), body).await,
            Some(connector) => {
                let name = ServerName::try_from(host.to_string())
                    .map_err(|error| format!("TLS server name {host}: {error}"))?;
                let stream = connector
                    .connect(name, stream)
                    .await
                    .map_err(|error| format!("TLS with {host}:{port}: {error}"))?;
                self.exchange(TokioIo::new(stream), body).await
            }
        }
    }

    /// One request on a fresh connection.
    async fn exchange<T>(&self, io: T, body: String) -> Result<u16, String>
    where
        T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|error| format!("HTTP handshake: {error}"))?;
        let path = self
            .uri
            .path_and_query()
            .map(|path| path.as_str())
            .unwrap_or("/");
        let authority = self
            .uri
            .authority()
            .map(|authority| authority.as_str())
            .unwrap_or_default();
        let request = Request::post(path)
            .header(header::HOST, authority)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::USER_AGENT, "xjob-admin")
            .body(Full::new(Bytes::from(body)))
            .map_err(|error| format!("building the request: {error}"))?;
        // The connection is driven here, beside the request, not by a task of its own: it ends
        // with the response (or with the caller's timeout, which drops both).
        let call = sender.send_request(request);
        tokio::pin!(call);
        let response = tokio::select! {
            response = &mut call => response,
            // A connection that ends first fails the request, which then returns.
            _ = connection => call.await,
        }
        .map_err(|error| format!("POST: {error}"))?;
        let status = response.status();
        if status.is_success() {
            Ok(status.as_u16())
        } else {
            Err(format!("HTTP {}", status.as_u16()))
        }
    }
}

/// A TLS client trusting the Mozilla roots and the certificates of `ca_file` (when not empty).
/// The ring provider is named explicitly: no process-wide default has to be installed.
fn connector(ca_file: &str) -> Result<TlsConnector, String> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if !ca_file.is_empty() {
        let pem = std::fs::read(ca_file)
            .map_err(|error| format!("webhook CA file {ca_file}: {error}"))?;
        for certificate in CertificateDer::pem_slice_iter(&pem) {
            let certificate =
                certificate.map_err(|error| format!("webhook CA file {ca_file}: {error}"))?;
            roots
                .add(certificate)
                .map_err(|error| format!("webhook CA file {ca_file}: {error}"))?;
        }
    }
    let config = ClientConfig::builder_with_provider(Arc::new(crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("TLS setup: {error}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(TlsConnector::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message() -> AlarmMessage {
        AlarmMessage {
            job_id: 7,
            job_name: "nightly".into(),
            app_name: "billing".into(),
            group_title: "Billing".into(),
            log_id: 1234,
            status: "FAILED".into(),
            message: "disk full".into(),
            attempt: 2,
            trace_id: String::new(),
            link: "http://console/logs/1234".into(),
            executor_address: "http://10.0.0.5:9999".into(),
            scheduled_at_ms: 1,
            scheduled_at: "2026-03-01 02:00:00 CET (Europe/Berlin)".into(),
        }
    }

    #[test]
    fn templates_shape_the_body() {
        let json = Webhook::new("http://relay:8080/x", WebhookTemplate::Json, "").expect("url");
        let body: serde_json::Value = serde_json::from_str(&json.body(&message())).expect("json");
        assert_eq!(body["log_id"], 1234);
        assert_eq!(body["message"], "disk full");
        let slack = Webhook::new("http://relay/x", WebhookTemplate::Slack, "").expect("url");
        let body: serde_json::Value = serde_json::from_str(&slack.body(&message())).expect("json");
        assert_eq!(
            body["text"],
            "xjob: billing job 7 'nightly' run 1234 FAILED at 2026-03-01 02:00:00 CET \
             (Europe/Berlin) (attempt 2): disk full http://console/logs/1234"
        );
    }

    #[test]
    fn only_http_and_https_urls_with_a_host_are_taken() {
        assert!(Webhook::new("https://hooks.example.com/x", WebhookTemplate::Json, "").is_ok());
        assert!(Webhook::new("ftp://hooks.example.com/x", WebhookTemplate::Json, "").is_err());
        assert!(Webhook::new("http:///x", WebhookTemplate::Json, "").is_err());
        assert!(Webhook::new("not a url", WebhookTemplate::Json, "").is_err());
        let missing = Webhook::new("https://h/x", WebhookTemplate::Json, "/nonexistent/ca.pem");
        assert!(missing.is_err_and(|error| error.contains("/nonexistent/ca.pem")));
    }
}
