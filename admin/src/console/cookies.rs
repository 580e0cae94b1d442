//! Reading and setting the console's cookies: the session, the sign-in form's token, the
//! language and the time zone each keep one. Every cookie the console sets is `HttpOnly`,
//! `SameSite=Strict` and, under TLS, `Secure`.

use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;

/// A cookie's `Set-Cookie` value: `HttpOnly`, `SameSite=Strict`, `Path=/`, `Secure` under TLS.
pub fn set_cookie(name: &str, value: &str, max_age_s: i64, secure: bool) -> String {
    format!(
        "{name}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_s}{}",
        if secure { "; Secure" } else { "" }
    )
}

pub fn with_cookie(mut response: Response, cookie: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// The value of cookie `name`, if the request sent one.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_string())
        .filter(|value| !value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_by_name_and_set_strict() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; xjob_session=abc; b=2"),
        );
        assert_eq!(cookie(&headers, "xjob_session").as_deref(), Some("abc"));
        assert_eq!(cookie(&headers, "c"), None);
        let set = set_cookie("xjob_session", "v", 10, true);
        assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict"));
        assert!(set.ends_with("; Secure"));
        assert!(!set_cookie("xjob_session", "v", 10, false).contains("Secure"));
    }
}
