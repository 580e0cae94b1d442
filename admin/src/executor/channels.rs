//! One lazily connected tonic channel per executor address, reused by every call. An
//! `https://` address is reached over TLS with the admin's CA and client certificate, read from
//! their files when the channel is made (a renewed certificate is used from the next channel;
//! channels are dropped when their executor leaves).

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::Duration;

use tonic::transport::{Channel, Endpoint};

/// Cache of channels keyed by executor address.
pub struct ExecutorChannels {
    channels: RwLock<HashMap<String, Channel>>,
    request_timeout: Duration,
    tls: xjob_tls::ClientTls,
}

impl ExecutorChannels {
    pub fn new(request_timeout: Duration, tls: xjob_tls::ClientTls) -> ExecutorChannels {
        ExecutorChannels {
            channels: RwLock::new(HashMap::new()),
            request_timeout,
            tls,
        }
    }

    /// The channel for `address`, created on first use; an invalid address is an error text.
    pub fn channel(&self, address: &str) -> Result<Channel, String> {
        if let Some(channel) = self.read().get(address) {
            return Ok(channel.clone());
        }
        let mut endpoint = Endpoint::from_shared(address.to_string())
            .map_err(|error| format!("invalid executor address '{address}': {error}"))?
            .connect_timeout(Duration::from_secs(1))
            .timeout(self.request_timeout)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(30));
        if address.starts_with("https://") {
            let tls = self
                .tls
                .tonic_config()
                .map_err(|error| format!("tls for executor '{address}': {error}"))?;
            endpoint = endpoint
                .tls_config(tls)
                .map_err(|error| format!("tls for executor '{address}': {error}"))?;
        }
        let channel = endpoint.connect_lazy();
        let mut channels = self
            .channels
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(channels
            .entry(address.to_string())
            .or_insert(channel)
            .clone())
    }

    /// Drops the cached channel of an address.
    pub fn evict(&self, address: &str) {
        let mut channels = self
            .channels
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        channels.remove(address);
    }

    /// Drops every cached channel.
    pub fn clear(&self) {
        self.channels
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Channel>> {
        self.channels
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
