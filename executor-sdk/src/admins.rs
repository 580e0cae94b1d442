//! The admin addresses an executor talks to, in the configured order, with the client settings
//! shared by the session (connection) and the callbacks: connect timeout, keep-alive, auth header.

use std::time::Duration;

use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use xjob_proto::pb::registry_client::RegistryClient;

use crate::auth::ClientAuth;
use crate::error::Error;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// HTTP/2 pings detect a dead admin on an idle session.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// A `Registry` client that adds the auth header.
pub(crate) type AdminClient = RegistryClient<InterceptedService<Channel, ClientAuth>>;

/// The admins, in the order they are tried.
#[derive(Clone, Debug)]
pub(crate) struct Admins {
    endpoints: Vec<(String, Endpoint)>,
    auth: ClientAuth,
    tls: xjob_tls::ClientTls,
}

impl Admins {
    /// Validates every address (an `http://` or `https://` URI).
    /// `https://` admins are reached with `tls` (CA, optional client certificate).
    pub(crate) fn new(
        addresses: &[String],
        auth: ClientAuth,
        tls: xjob_tls::ClientTls,
    ) -> Result<Self, Error> {
        if addresses.is_empty() {
            return Err(Error::InvalidConfig {
                field: "admin_addrs",
                message: "at least one admin address is required".to_owned(),
            });
        }
        let mut endpoints = Vec::with_capacity(addresses.len());
        for address in addresses {
            if !(address.starts_with("http://") || address.starts_with("https://")) {
                return Err(Error::InvalidConfig {
                    field: "admin_addrs",
                    message: format!("{address:?} must start with http:// or https://"),
                });
            }
            let endpoint = Endpoint::from_shared(address.clone())
                .map_err(|error| Error::InvalidConfig {
                    field: "admin_addrs",
                    message: format!("{address:?} is not a valid uri: {error}"),
                })?
                .connect_timeout(CONNECT_TIMEOUT)
                .tcp_nodelay(true)
                .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
                .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
                .keep_alive_while_idle(true);
            let endpoint = with_tls(endpoint, address, &tls)?;
            endpoints.push((address.clone(), endpoint));
        }
        Ok(Self {
            endpoints,
            auth,
            tls,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.endpoints.len()
    }

    pub(crate) fn address(&self, index: usize) -> &str {
        self.endpoints
            .get(index)
            .map_or("", |(address, _)| address.as_str())
    }

    /// Connects to one admin now (fails fast when it is unreachable).
    pub(crate) async fn connect(
        &self,
        index: usize,
    ) -> Result<AdminClient, tonic::transport::Error> {
        let (address, endpoint) = &self.endpoints[index % self.endpoints.len()];
        // Each new session connection reads the certificate files again, so a renewed client
        // certificate is presented from the next reconnect on.
        let endpoint = match with_tls(endpoint.clone(), address, &self.tls) {
            Ok(endpoint) => endpoint,
            Err(error) => {
                tracing::warn!(%error, "tls files not reloaded; using the ones read at start");
                endpoint.clone()
            }
        };
        let channel = endpoint.connect().await?;
        Ok(RegistryClient::with_interceptor(channel, self.auth.clone()))
    }

    /// Returns one lazily connecting client per admin, in order.
    pub(crate) fn lazy_clients(&self) -> Vec<(String, AdminClient)> {
        self.endpoints
            .iter()
            .map(|(address, endpoint)| {
                let client =
                    RegistryClient::with_interceptor(endpoint.connect_lazy(), self.auth.clone());
                (address.clone(), client)
            })
            .collect()
    }
}

/// Adds the client TLS settings to the endpoint of an `https://` address.
fn with_tls(
    endpoint: Endpoint,
    address: &str,
    tls: &xjob_tls::ClientTls,
) -> Result<Endpoint, Error> {
    if !address.starts_with("https://") {
        return Ok(endpoint);
    }
    let invalid = |message: String| Error::InvalidConfig {
        field: "tls",
        message,
    };
    let config = tls
        .tonic_config()
        .map_err(|error| invalid(error.to_string()))?;
    endpoint
        .tls_config(config)
        .map_err(|error| invalid(format!("{address}: {error}")))
}
