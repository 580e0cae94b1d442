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

#[cfg(test)]
mod tests {
    use super::*;

    fn message() -> AlarmMessage {
        AlarmMessage {
            job_id: 7,
            job_name: "nightly".into(),
            log_id: 1234,
            status: "FAILED".into(),
            message: "disk full".into(),
            attempt: 2,
            trace_id: String::new(),
            link: "http://console/logs/1234".into(),
            executor_address: "http://10.0.0.5:9999".into(),
            scheduled_at_ms: 1,
        }
    }

    #[test]
    fn templates_shape_the_body() {
        let json = Webhook::new("http://relay:8080/x", WebhookTemplate::Json).expect("url");
        let body: serde_json::Value = serde_json::from_str(&json.body(&message())).expect("json");
        assert_eq!(body["log_id"], 1234);
        assert_eq!(body["message"], "disk full");
        let slack = Webhook::new("http://relay/x", WebhookTemplate::Slack).expect("url");
        let body: serde_json::Value = serde_json::from_str(&slack.body(&message())).expect("json");
        assert_eq!(
            body["text"],
            "xjob: job 7 'nightly' run 1234 FAILED (attempt 2): disk full http://console/logs/1234"
        );
    }

    #[test]
    fn only_http_urls_with_a_host_are_taken() {
        assert!(Webhook::new("https://hooks.example.com/x", WebhookTemplate::Json).is_err());
        assert!(Webhook::new("http:///x", WebhookTemplate::Json).is_err());
        assert!(Webhook::new("not a url", WebhookTemplate::Json).is_err());
    }
}
