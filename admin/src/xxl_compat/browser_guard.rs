//! Keeps web pages away from the XXL-JOB listener. XXL-JOB executors are plain HTTP clients:
//! they send `Content-Type: application/json` and no `Origin` or `Sec-Fetch-*` headers. A page
//! in a browser can post to a loopback address with `text/plain` (no CORS preflight) but always
//! sends `Origin`, and modern browsers add `Sec-Fetch-*`; it cannot send `application/json`
//! cross-site without a preflight, which this listener never grants.

use std::net::SocketAddr;

use hyper::HeaderMap;
use hyper::header;

/// Refuses a request that is not JSON or that names another site as its `Origin`.
pub fn check(headers: &HeaderMap, local: SocketAddr) -> Result<(), String> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    if !is_json(content_type) {
        return Err(format!(
            "Content-Type must be application/json, got '{}'",
            short(content_type)
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !is_own_origin(origin, local) {
            return Err(format!(
                "requests from another origin ('{}') are refused",
                short(origin)
            ));
        }
    }
    Ok(())
}

/// Whether the request comes from a web page (it carries `Origin` or `Sec-Fetch-*`).
pub fn from_browser(headers: &HeaderMap) -> bool {
    headers.contains_key(header::ORIGIN)
        || headers
            .keys()
            .any(|name| name.as_str().starts_with("sec-fetch-"))
}

/// `application/json`, with or without parameters (`;charset=UTF-8`), in any case.
fn is_json(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// The listener itself: `http://IP:PORT` of its address, or `http://localhost:PORT` when it
/// listens on loopback.
fn is_own_origin(origin: &str, local: SocketAddr) -> bool {
    let Some(authority) = origin.strip_prefix("http://") else {
        return false;
    };
    if authority.eq_ignore_ascii_case(&local.to_string()) {
        return true;
    }
    local.ip().is_loopback()
        && authority.eq_ignore_ascii_case(&format!("localhost:{}", local.port()))
}

fn short(text: &str) -> String {
    text.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            if let Ok(value) = value.parse() {
                map.insert(*name, value);
            }
        }
        map
    }

    #[test]
    fn only_json_from_no_origin_or_the_listener_itself_passes() {
        let local: SocketAddr = ([127, 0, 0, 1], 8081).into();
        let json = ("content-type", "application/json;charset=UTF-8");
        assert!(check(&headers(&[json]), local).is_ok());
        assert!(check(&headers(&[("content-type", "text/plain")]), local).is_err());
        assert!(check(&headers(&[]), local).is_err());
        assert!(
            check(
                &headers(&[json, ("origin", "http://127.0.0.1:8081")]),
                local
            )
            .is_ok()
        );
        assert!(
            check(
                &headers(&[json, ("origin", "http://localhost:8081")]),
                local
            )
            .is_ok()
        );
        for foreign in ["http://evil.example", "null", "http://127.0.0.1:8082", ""] {
            let refused = check(&headers(&[json, ("origin", foreign)]), local);
            assert!(refused.is_err(), "{foreign}");
        }
        assert!(from_browser(&headers(&[("sec-fetch-site", "cross-site")])));
        assert!(from_browser(&headers(&[(
            "origin",
            "http://127.0.0.1:8081"
        )])));
        assert!(!from_browser(&headers(&[json])));
    }
}
