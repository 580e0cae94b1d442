//! Bearer-token auth in both directions: the server interceptor that checks
//! `authorization: Bearer <token>` on every incoming call, and the client interceptor that adds
//! the same header to every call to the admin. Without a configured token both let calls through.

use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::service::Interceptor;
use tonic::{Request, Status};

const AUTHORIZATION: &str = "authorization";

/// Builds the `Bearer <token>` header value; `None` when the token is not valid header text.
pub(crate) fn bearer_value(token: &str) -> Option<AsciiMetadataValue> {
    MetadataValue::try_from(format!("Bearer {token}")).ok()
}

/// Checks incoming calls against the configured token (`UNAUTHENTICATED` otherwise).
#[derive(Clone, Debug)]
pub(crate) struct ServerAuth {
    expected_opt: Option<AsciiMetadataValue>,
}

impl ServerAuth {
    pub(crate) fn new(expected_opt: Option<AsciiMetadataValue>) -> Self {
        Self { expected_opt }
    }
}

impl Interceptor for ServerAuth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let Some(expected) = &self.expected_opt else {
            return Ok(request);
        };
        let presented_ok = request
            .metadata()
            .get(AUTHORIZATION)
            .is_some_and(|presented| constant_time_eq(presented.as_bytes(), expected.as_bytes()));
        if presented_ok {
            Ok(request)
        } else {
            Err(Status::unauthenticated("missing or invalid access token"))
        }
    }
}

/// Adds the configured token to outgoing calls.
#[derive(Clone, Debug)]
pub(crate) struct ClientAuth {
    header_opt: Option<AsciiMetadataValue>,
}

impl ClientAuth {
    pub(crate) fn new(header_opt: Option<AsciiMetadataValue>) -> Self {
        Self { header_opt }
    }
}

impl Interceptor for ClientAuth {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(header) = &self.header_opt {
            request.metadata_mut().insert(AUTHORIZATION, header.clone());
        }
        Ok(request)
    }
}

/// Compares without an early exit, so the time taken does not reveal the matching prefix.
fn constant_time_eq(left: &[u8], right: &[u8]) -> bool {
    if left.len() != right.len() {
        return false;
    }
    left.iter()
        .zip(right)
        .fold(0u8, |difference, (a, b)| difference | (a ^ b))
        == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_auth_accepts_only_the_configured_bearer_token() {
        let mut auth = ServerAuth::new(bearer_value("secret"));
        assert_eq!(
            auth.call(Request::new(()))
                .map_err(|status| status.code())
                .err(),
            Some(tonic::Code::Unauthenticated)
        );
        let mut client = ClientAuth::new(bearer_value("secret"));
        let request = client.call(Request::new(())).expect("client adds header");
        assert!(auth.call(request).is_ok());
        let mut wrong = ClientAuth::new(bearer_value("other"));
        let request = wrong.call(Request::new(())).expect("client adds header");
        assert!(auth.call(request).is_err());
        let mut open = ServerAuth::new(None);
        assert!(open.call(Request::new(())).is_ok());
    }
}
