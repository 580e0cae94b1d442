//! The safe default, checked once at startup: JobAdmin never runs open on a network.

use crate::config::Config;
use crate::error::Error;
use crate::store::Store;

/// Name of the user the bootstrap token (`XJOB_BOOTSTRAP_TOKEN`) is issued to.
pub const BOOTSTRAP_USER: &str = "admin";
/// Shortest bootstrap token accepted: it is the only secret guarding a fresh cluster.
const MIN_BOOTSTRAP_CHARS: usize = 24;

/// Whether JobAdmin may run without users: on a loopback listener, or when the operator opted
/// out explicitly.
pub fn open_without_users(config: &Config) -> bool {
    config.listen.ip().is_loopback() || config.insecure_open_admin_api
}

/// Issues the bootstrap token when there are no users yet, then refuses to start a listener
/// off loopback that would serve JobAdmin to anyone, and says loudly when it runs open.
pub async fn check(store: &Store, config: &Config, now_ms: i64) -> Result<(), Error> {
    let mut users = store.count_users().await?;
    if users == 0 && !config.bootstrap_token.is_empty() {
        bootstrap(store, &config.bootstrap_token, now_ms).await?;
        users = 1;
    }
    if users > 0 {
        tracing::info!(
            users,
            "JobAdmin requires API tokens (authorization: Bearer …)"
        );
        return Ok(());
    }
    if config.listen.ip().is_loopback() {
        tracing::warn!(
            listen = %config.listen,
            "JobAdmin is open without authentication: no users yet and the listener is on \
             loopback; create one with `xjob user create --role admin NAME` before listening \
             on a network"
        );
        return Ok(());
    }
    if config.insecure_open_admin_api {
        tracing::error!(
            listen = %config.listen,
            "INSECURE: JobAdmin is open to the network WITHOUT authentication \
             (insecure_open_admin_api is set): anyone who reaches this port can run code on \
             your executors"
        );
        return Ok(());
    }
    Err(Error::FailedPrecondition(open_network_refusal(config)))
}

/// What `check` would refuse on this database with this configuration, without changing
/// anything (no bootstrap user is created): `xjob migrate` says it before the first start.
pub async fn refusal(store: &Store, config: &Config) -> Result<Option<String>, Error> {
    if store.count_users().await? > 0 || open_without_users(config) {
        return Ok(None);
    }
    if config.bootstrap_token.is_empty() {
        return Ok(Some(open_network_refusal(config)));
    }
    Ok(short_bootstrap_token(&config.bootstrap_token).map(|error| error.to_string()))
}

/// Why JobAdmin is not served on a network without users, and the ways out.
fn open_network_refusal(config: &Config) -> String {
    format!(
        "refusing to serve JobAdmin without authentication on {} (not loopback) while no user \
         exists: create the first admin with `xjob user create --role admin NAME` (same \
         configuration; it prints the token once), or set XJOB_BOOTSTRAP_TOKEN to a random \
         secret of at least {MIN_BOOTSTRAP_CHARS} characters, or listen on 127.0.0.1; \
         `--insecure-open-admin-api` (XJOB_INSECURE_OPEN_ADMIN_API) serves it open anyway",
        config.listen
    )
}

fn short_bootstrap_token(token: &str) -> Option<Error> {
    (token.chars().count() < MIN_BOOTSTRAP_CHARS).then(|| {
        Error::invalid(
            "bootstrap_token",
            format!("must be at least {MIN_BOOTSTRAP_CHARS} characters"),
        )
    })
}

/// Says at start when a listener accepts executors of groups without an access token from any
/// process that reaches it: on loopback (the laptop default, `--demo`) that is every local
/// process, which can register under such a group's app name and receive its runs and params.
pub fn warn_open_registry(
    config: &Config,
    grpc: std::net::SocketAddr,
    xxl_job: Option<std::net::SocketAddr>,
) {
    if !config.executor_token.is_empty() {
        return;
    }
    let listeners = std::iter::once(grpc).chain(xxl_job);
    for address in listeners {
        if address.ip().is_loopback() {
            tracing::warn!(
                %address,
                "groups without an access token are open to executors on this loopback \
                 listener: any local process can register as their executor and receive their \
                 runs and params; give each group an access token (or set executor_token) on \
                 a shared machine"
            );
        } else if config.insecure_open_registry {
            tracing::error!(
                %address,
                "INSECURE: groups without an access token are open to executors from the \
                 network (insecure_open_registry is set)"
            );
        }
    }
}

async fn bootstrap(store: &Store, token: &str, now_ms: i64) -> Result<(), Error> {
    if let Some(error) = short_bootstrap_token(token) {
        return Err(error);
    }
    let created = super::accounts::create_user(
        store,
        BOOTSTRAP_USER,
        "admin",
        "",
        Some(token.to_string()),
        now_ms,
        0,
    )
    .await;
    let created = match created {
        Ok(created) => created,
        // Another admin of the cluster, started with the same token, made it first.
        Err(Error::AlreadyExists(_)) => return Ok(()),
        Err(error) => return Err(error),
    };
    if let Err(error) =
        super::accounts::audit_created(store, "(bootstrap token)", &created, now_ms).await
    {
        tracing::error!(%error, user = %created.user.name, "audit entry not written");
    }
    tracing::warn!(
        user = %created.user.name,
        "created the first admin from XJOB_BOOTSTRAP_TOKEN; issue personal tokens and revoke \
         this one (RevokeToken id {})",
        created.token_info.id
    );
    Ok(())
}
