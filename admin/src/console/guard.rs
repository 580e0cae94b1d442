//! Which requests reach the console's pages at all, checked before any handler runs:
//!
//! - `Host` must name the console: the address the connection arrived on, `localhost` when
//!   that is loopback, or a name in `http_allowed_hosts`. Otherwise `421 Misdirected Request`.
//!   A page on another site that makes its name resolve to the console's address (DNS
//!   rebinding) sends its own name here, so it never gets a session, a CSRF token or a page.
//! - A request that changes something (any method but GET, HEAD, OPTIONS) whose `Origin` (or,
//!   without one, `Referer`) names another site is refused with `403`, in every mode, before
//!   the CSRF check: browsers send `Origin` on every form post.
//!
//! Requests without `Host` or `Origin` come from tools, not browsers (browsers always send
//! both on a post), and pass to the session and CSRF checks as before.

use std::net::{IpAddr, SocketAddr};

use super::i18n::{Lang, t};
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpStream;
use xjob_metrics_http::AllowedHosts;
use xjob_metrics_http::host::url_authority;

/// The address a console request came from (the TCP peer: a proxy in front of the console
/// is one client), for the login throttle.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddress(pub IpAddr);

/// A console connection's own address and its peer's.
pub trait Addresses {
    /// `(local, peer)`, or `None` when the socket no longer knows them (it closed).
    fn addresses(&self) -> Option<(SocketAddr, SocketAddr)>;
}

impl Addresses for TcpStream {
    fn addresses(&self) -> Option<(SocketAddr, SocketAddr)> {
        Some((self.local_addr().ok()?, self.peer_addr().ok()?))
    }
}

impl Addresses for xjob_tls::TlsStream<TcpStream> {
    fn addresses(&self) -> Option<(SocketAddr, SocketAddr)> {
        self.get_ref().0.addresses()
    }
}

impl<S: Addresses> Addresses for xjob_tls::Tracked<S> {
    fn addresses(&self) -> Option<(SocketAddr, SocketAddr)> {
        self.get_ref().addresses()
    }
}

/// The console's Host and Origin rules.
pub struct Guard {
    hosts: AllowedHosts,
    tls: bool,
}

impl Guard {
    pub fn new(hosts: AllowedHosts, tls: bool) -> Guard {
        Guard { hosts, tls }
    }

    /// The refusal of a request that arrived on `local`, or `None` when it may go on.
    pub fn refusal<B>(&self, request: &Request<B>, local: SocketAddr) -> Option<Response> {
        if !self.names_console(request, local) {
            return Some(
                (
                    StatusCode::MISDIRECTED_REQUEST,
                    "This console answers only requests addressed to its own address or to a \
                     name listed in http_allowed_hosts.\n",
                )
                    .into_response(),
            );
        }
        let changes = !matches!(
            *request.method(),
            Method::GET | Method::HEAD | Method::OPTIONS
        );
        if changes && !self.sent_by_console(request.headers(), local) {
            let lang = Lang::of_request(request.headers());
            return Some(super::pages::error_page(
                lang,
                StatusCode::FORBIDDEN,
                t(lang, "error.cross_site"),
            ));
        }
        None
    }

    /// Whether an answer to this request should carry `Strict-Transport-Security`: under TLS,
    /// except to `localhost` (browsers would then insist on HTTPS for every local port).
    pub fn hsts<B>(&self, request: &Request<B>) -> bool {
        self.tls
            && !host(request).is_some_and(|host| {
                let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
                name.eq_ignore_ascii_case("localhost")
            })
    }

    fn default_port(&self) -> u16 {
        if self.tls { 443 } else { 80 }
    }

    fn names_console<B>(&self, request: &Request<B>, local: SocketAddr) -> bool {
        let port = self.default_port();
        // An absolute-form target (`POST http://name/...`) names a host too.
        if let Some(authority) = request.uri().authority()
            && !self.hosts.allows(authority.as_str(), local, port)
        {
            return false;
        }
        match request.headers().get(header::HOST) {
            None => true,
            Some(value) => value
                .to_str()
                .is_ok_and(|host| self.hosts.allows(host, local, port)),
        }
    }

    /// Whether the `Origin` (else the `Referer`) names this console; true without either.
    fn sent_by_console(&self, headers: &HeaderMap, local: SocketAddr) -> bool {
        let source = headers
            .get(header::ORIGIN)
            .or_else(|| headers.get(header::REFERER));
        let Some(source) = source else {
            return true;
        };
        // `Origin: null` (a sandboxed frame, a file) and unparsable values are another site.
        source
            .to_str()
            .ok()
            .and_then(url_authority)
            .is_some_and(|(authority, port)| self.hosts.allows(authority, local, port))
    }
}

fn host<B>(request: &Request<B>) -> Option<&str> {
    request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: Method, headers: &[(&'static str, &'static str)]) -> Request<()> {
        let mut request = Request::builder().method(method).uri("/users");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).expect("request")
    }

    fn local() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 8081))
    }

    #[test]
    fn a_foreign_host_is_misdirected_and_a_foreign_origin_forbidden() {
        let guard = Guard::new(AllowedHosts::default(), false);
        let own = request(Method::GET, &[("host", "127.0.0.1:8081")]);
        assert!(guard.refusal(&own, local()).is_none());
        let rebound = request(Method::GET, &[("host", "rebind.attacker.example:8081")]);
        let refused = guard.refusal(&rebound, local()).expect("refused");
        assert_eq!(refused.status(), StatusCode::MISDIRECTED_REQUEST);

        let cross = [
            ("host", "127.0.0.1:8081"),
            ("origin", "http://evil.example"),
        ];
        let refused = guard
            .refusal(&request(Method::POST, &cross), local())
            .expect("refused");
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        assert!(
            guard
                .refusal(&request(Method::GET, &cross), local())
                .is_none()
        );
        for origin in ["null", "http://localhost:9999"] {
            let headers = [("host", "localhost:8081"), ("origin", origin)];
            assert!(
                guard
                    .refusal(&request(Method::POST, &headers), local())
                    .is_some()
            );
        }
        let referer = [
            ("host", "localhost:8081"),
            ("referer", "http://evil.example/x"),
        ];
        assert!(
            guard
                .refusal(&request(Method::POST, &referer), local())
                .is_some()
        );
        let same = [
            ("host", "localhost:8081"),
            ("origin", "http://127.0.0.1:8081"),
        ];
        assert!(
            guard
                .refusal(&request(Method::POST, &same), local())
                .is_none()
        );
    }

    #[test]
    fn hsts_is_sent_under_tls_except_to_localhost() {
        let guard = Guard::new(AllowedHosts::default(), true);
        assert!(guard.hsts(&request(Method::GET, &[("host", "127.0.0.1:8081")])));
        assert!(!guard.hsts(&request(Method::GET, &[("host", "localhost:8081")])));
        let plain = Guard::new(AllowedHosts::default(), false);
        assert!(!plain.hsts(&request(Method::GET, &[("host", "127.0.0.1:8081")])));
    }
}
