//! Every form carries its session's CSRF token in a hidden `csrf` field; a post without it (or
//! with another session's) is refused before anything is called. `SameSite=Strict` already
//! keeps the cookie off cross-site posts; the token also covers browsers that ignore it.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::response::Response;

use super::i18n::t;
use super::session::Viewer;
use super::shared::Shared;

/// Largest form body accepted (job params are limited by the API far below this).
const MAX_FORM_BYTES: usize = 1024 * 1024;

/// A posted form whose CSRF token matched the viewer's session.
pub struct Posted {
    pub viewer: Viewer,
    pub fields: Fields,
}

impl FromRequest<Shared> for Posted {
    type Rejection = Response;

    async fn from_request(request: Request, console: &Shared) -> Result<Posted, Response> {
        let (mut parts, body) = request.into_parts();
        let viewer = Viewer::from_request_parts(&mut parts, console).await?;
        let bytes = axum::body::to_bytes(body, MAX_FORM_BYTES)
            .await
            .map_err(|_| {
                let lang = viewer.lang;
                super::errors::error_page(
                    lang,
                    StatusCode::PAYLOAD_TOO_LARGE,
                    t(lang, "error.too_large"),
                )
            })?;
        let fields = Fields::parse(&bytes);
        if !same(fields.get("csrf"), &viewer.csrf) {
            return Err(super::errors::error_page(
                viewer.lang,
                StatusCode::FORBIDDEN,
                t(viewer.lang, "error.csrf"),
            ));
        }
        Ok(Posted { viewer, fields })
    }
}

/// Compares without stopping at the first difference (no timing hint about the token).
pub fn same(given: &str, expected: &str) -> bool {
    given.len() == expected.len()
        && !expected.is_empty()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

/// Fields of a form body or query string, in order.
#[derive(Debug, Default, Clone)]
pub struct Fields(Vec<(String, String)>);

impl Fields {
    pub fn parse(bytes: &Bytes) -> Fields {
        Fields(form_urlencoded::parse(bytes).into_owned().collect())
    }

    pub fn from_query(query: Option<&str>) -> Fields {
        Fields(
            form_urlencoded::parse(query.unwrap_or("").as_bytes())
                .into_owned()
                .collect(),
        )
    }

    /// The first value of `name`, trimmed; "" when absent.
    pub fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map_or("", |(_, value)| value.trim())
    }

    /// The first value of `name`, untouched (text areas).
    pub fn raw(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// Every value of `name`, trimmed, in order (checkboxes that share a name).
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(key, _)| key == name)
            .map(|(_, value)| value.trim())
            .collect()
    }

    pub fn has(&self, name: &str) -> bool {
        self.0.iter().any(|(key, _)| key == name)
    }

    /// An integer field; 0 when absent or not a number.
    pub fn int(&self, name: &str) -> i64 {
        self.get(name).parse().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same("abc", "abc"));
        assert!(!same("abd", "abc"));
        assert!(!same("ab", "abc"));
        assert!(!same("", ""));
    }

    #[test]
    fn fields_parse_forms() {
        let fields = Fields::parse(&Bytes::from_static(b"a=1&b=x+y&a=2&c=%26"));
        assert_eq!(fields.get("a"), "1");
        assert_eq!(fields.get("b"), "x y");
        assert_eq!(fields.get("c"), "&");
        assert_eq!(fields.int("a"), 1);
        assert_eq!(fields.get("missing"), "");
        assert_eq!(fields.all("a"), vec!["1", "2"]);
    }
}
