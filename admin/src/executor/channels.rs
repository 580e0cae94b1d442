//! One lazily connected tonic channel per executor address, reused by every call.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::Duration;

use tonic::transport::{Channel, Endpoint};

/// Cache of channels keyed by executor address.
pub struct ExecutorChannels {
    channels: RwLock<HashMap<String, Channel>>,
    request_timeout: Duration,
}

impl ExecutorChannels {
    pub fn new(request_timeout: Duration) -> ExecutorChannels {
        ExecutorChannels {
            channels: RwLock::new(HashMap::new()),
            request_timeout,
        }
    }

    /// The channel for `address`, created on first use; an invalid address is an error text.
    pub fn channel(&self, address: &str) -> Result<Channel, String> {
        if let Some(channel) = self.read().get(address) {
            return Ok(channel.clone());
        }
        let endpoint = Endpoint::from_shared(address.to_string())
            .map_err(|error| format!("invalid executor address '{address}': {error}"))?
            .connect_timeout(Duration::from_secs(1))
            .timeout(self.request_timeout)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(30));
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
