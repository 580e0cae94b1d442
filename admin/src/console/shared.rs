//! What every console handler shares: the console itself (the `JobAdmin` service it calls,
//! the admin's context, the login throttle) and the request that carries a caller to the
//! service. Below the console's router and all its pages, which import it.

use std::sync::Arc;

use tonic::Request;

use super::throttle::LoginThrottle;
use crate::api::job_admin::JobAdminService;
use crate::auth::{Caller, ResolvedCaller};
use crate::context::AdminContext;

/// What every console handler shares.
pub struct Console {
    pub(super) service: Arc<JobAdminService>,
    pub(super) ctx: Arc<AdminContext>,
    pub(super) logins: LoginThrottle,
    /// Served over TLS: cookies get `Secure`.
    pub(super) tls: bool,
    /// Whether this console may run without login while no user exists: its own listener is
    /// on loopback (or the operator opted out with `insecure_open_admin_api`). A console on a
    /// network address never runs open, even when the gRPC port is on loopback.
    pub(super) open_allowed: bool,
}

pub(super) type Shared = Arc<Console>;

impl Console {
    pub fn new(service: Arc<JobAdminService>, ctx: Arc<AdminContext>) -> Arc<Console> {
        let tls = ctx.config.tls_cert.is_some();
        let open_allowed = open_allowed(&ctx.config);
        Arc::new(Console {
            service,
            ctx,
            logins: LoginThrottle::default(),
            tls,
            open_allowed,
        })
    }

    /// Whether the console needs no login right now: no users yet, and both `JobAdmin` and
    /// this console may run open.
    pub(super) async fn runs_open(&self) -> Result<bool, tonic::Status> {
        Ok(self.open_allowed && self.api().authenticator().runs_open().await?)
    }

    /// The `JobAdmin` service the console calls.
    pub(super) fn api(&self) -> &JobAdminService {
        &self.service
    }
}

/// Whether a console may run without login while no user exists (see `Console::open_allowed`).
fn open_allowed(config: &crate::config::Config) -> bool {
    config
        .http_listen
        .is_some_and(|address| address.ip().is_loopback())
        || config.insecure_open_admin_api
}

/// A `JobAdmin` request carrying the console's resolved caller.
pub(super) fn request<T>(caller: &Caller, message: T) -> Request<T> {
    let mut request = Request::new(message);
    request
        .extensions_mut()
        .insert(ResolvedCaller(caller.clone()));
    request
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;

    #[test]
    fn only_a_loopback_console_runs_open() {
        let mut config = crate::config::Config {
            http_listen: Some(SocketAddr::from(([127, 0, 0, 1], 8081))),
            ..crate::config::Config::default()
        };
        assert!(open_allowed(&config));
        config.http_listen = Some(SocketAddr::from(([0, 0, 0, 0], 8081)));
        assert!(
            !open_allowed(&config),
            "a network console always asks for a login"
        );
        config.insecure_open_admin_api = true;
        assert!(open_allowed(&config));
    }
}
