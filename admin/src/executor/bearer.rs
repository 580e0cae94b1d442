//! The bearer token a group's executors require, added to each call by the gRPC client and its
//! batcher alike.

use tonic::metadata::MetadataValue;

/// Wraps a message with the group's bearer token when one is configured.
pub(super) fn authorized<T>(message: T, token: &str) -> Result<tonic::Request<T>, tonic::Status> {
    let mut request = tonic::Request::new(message);
    if !token.is_empty() {
        let value = MetadataValue::try_from(format!("Bearer {token}"))
            .map_err(|_| tonic::Status::invalid_argument("access token is not valid metadata"))?;
        request.metadata_mut().insert("authorization", value);
    }
    Ok(request)
}
