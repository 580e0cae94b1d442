//! Alarm webhook: one JSON POST over HTTP/1.1 (hyper's client connection, no pool: alarms are
//! rare, so a connection per delivery costs nothing worth caching).

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Uri, header};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::AlarmMessage;
use crate::monitor::alarm_config::WebhookTemplate;

/// A configured webhook.
pub struct Webhook {
    uri: Uri,
    template: WebhookTemplate,
}

impl Webhook {
    /// Parses an `http://` URL (validated by the config already; this says why it is unusable).
    pub fn new(url: &str, template: WebhookTemplate) -> Result<Webhook, String> {
        let uri: Uri = url
            .parse()
            .map_err(|error| format!("webhook url is not a URL: {error}"))?;
        if uri.scheme_str() != Some("http") || uri.host().is_none() {
            return Err("webhook url must be http://host[:port]/path".to_string());
        }
        Ok(Webhook { uri, template })
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
        let host = self.uri.host().unwrap_or_default();
        let port = self.uri.port_u16().unwrap_or(80);
        let stream = TcpStream::connect((host, port))
            .await
            .map_err(|error| format!("connect {host}:{port}: {error}"))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|error| format!("HTTP handshake: {error}"))?;
        // Drives the connection; it ends with the response (or the caller's timeout drops it).
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let path = self
            .uri
            .path_and_query()
            .map(|path| path.as_str())
            .unwrap_or("/");
        let authority = self
            .uri
            .authority()
            .map(|authority| authority.as_str())
            .unwrap_or(host);
        let request = Request::post(path)
            .header(header::HOST, authority)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::USER_AGENT, "xjob-admin")
            .body(Full::new(Bytes::from(body)))
            .map_err(|error| format!("building the request: {error}"))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|error| format!("POST: {error}"))?;
        let status = response.status();
        if status.is_success() {
            Ok(status.as_u16())
        } else {
            Err(format!("HTTP {}", status.as_u16()))
        }
    }
}
