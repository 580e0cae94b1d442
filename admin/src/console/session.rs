//! Console sessions: a random id in an `HttpOnly`, `SameSite=Strict` cookie (`Secure` under
//! TLS), stored only as its SHA-256 in `xjob_session`'s table, so any admin of a cluster
//! resolves it. A session names its user (re-read on every request, so a deleted user or a
//! changed grant applies at once) and carries the CSRF token of its forms.
//!
//! With no users yet on an admin that may run open (loopback), the console needs no login: a
//! session without a user is made on the first visit, only to carry the CSRF token, and acts
//! as [`Caller::Open`] until the first user exists.

use std::time::Duration;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Redirect, Response};
use tokio_util::sync::CancellationToken;

use super::cookies::{cookie, set_cookie, with_cookie};
use super::shared::{Console, Shared};
use crate::auth::secrets::{generate_token, hash_token};
use crate::auth::{Caller, Permission, Scope};
use crate::model::{ConsoleSession, GroupId};

/// The session cookie's name.
pub const COOKIE: &str = "xjob_session";
/// How long a session lasts after login.
const SESSION_TTL_MS: i64 = 12 * 3600 * 1000;

/// Who is looking at a page: the caller the API sees, and the session's CSRF token.
#[derive(Debug, Clone)]
pub struct Viewer {
    pub caller: Caller,
    pub csrf: String,
    /// The language pages are written in (cookie, else the browser's).
    pub lang: super::i18n::Lang,
}

impl Viewer {
    pub fn is_open(&self) -> bool {
        matches!(self.caller, Caller::Open)
    }

    pub fn name(&self) -> &str {
        self.caller.actor()
    }

    pub fn is_admin(&self) -> bool {
        self.caller.is_admin()
    }

    /// Whether the API would let this viewer change jobs and runs of a group: controls are
    /// shown only then (the API checks again on every post).
    pub fn can_operate(&self, group_id: i64) -> bool {
        self.caller
            .allows(Permission::Operate, Scope::Group(GroupId(group_id)))
    }

    /// Whether the viewer may create jobs in some group.
    pub fn can_operate_any(&self) -> bool {
        match &self.caller {
            Caller::Open => true,
            Caller::User(user) => {
                self.caller.is_admin()
                    || (user.role >= crate::model::Role::Operator && !user.group_ids.is_empty())
            }
        }
    }
}

impl FromRequestParts<Shared> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, console: &Shared) -> Result<Viewer, Response> {
        match resolve(console, &parts.headers).await {
            Ok(Some(viewer)) => Ok(viewer),
            Ok(None) => Err(no_session(console, parts).await),
            Err(status) => Err(super::errors::status_page(
                super::i18n::Lang::of_request(&parts.headers),
                &status,
            )),
        }
    }
}

/// The viewer of a valid session cookie; `None` without one.
pub async fn resolve(
    console: &Console,
    headers: &HeaderMap,
) -> Result<Option<Viewer>, tonic::Status> {
    let Some(id) = cookie(headers, COOKIE) else {
        return Ok(None);
    };
    let store = &console.ctx.store;
    let hash = hash_token(&id);
    let session = store
        .console_session(&hash)
        .await
        .map_err(crate::error::Error::from)?;
    let Some(session) = session else {
        return Ok(None);
    };
    if session.expires_ms <= console.ctx.clock.now_ms() {
        return Ok(None);
    }
    let caller = if session.user_id == 0 {
        if !console.runs_open().await? {
            // Users exist now: the open session is over.
            return Ok(None);
        }
        Caller::Open
    } else {
        let user = store
            .get_user(session.user_id)
            .await
            .map_err(crate::error::Error::from)?;
        match user {
            Some(user) => Caller::User(user),
            None => return Ok(None),
        }
    };
    Ok(Some(Viewer {
        caller,
        csrf: session.csrf_token,
        lang: super::i18n::Lang::of_request(headers),
    }))
}

/// Without a session: an open console makes one and comes back; otherwise the login page.
async fn no_session(console: &Console, parts: &Parts) -> Response {
    let target = parts
        .uri
        .path_and_query()
        .map(|path| path.as_str().to_string())
        .unwrap_or_else(|| "/".to_string());
    let lang = super::i18n::Lang::of_request(&parts.headers);
    let open = console.runs_open().await.unwrap_or(false);
    if open && parts.method == Method::GET {
        return match start_session(console, 0).await {
            Ok(cookie) => with_cookie(Redirect::to(&target).into_response(), &cookie),
            Err(status) => super::errors::status_page(lang, &status),
        };
    }
    if parts.method != Method::GET {
        // A post without a session (expired, or forged from another site): refused.
        return super::errors::error_page(
            lang,
            axum::http::StatusCode::FORBIDDEN,
            super::i18n::t(lang, "error.no_session"),
        );
    }
    let next: String = form_urlencoded::byte_serialize(target.as_bytes()).collect();
    Redirect::to(&format!("/login?next={next}")).into_response()
}

/// Creates a session for `user_id` (0 = open console) and returns its `Set-Cookie` value.
pub async fn start_session(console: &Console, user_id: i64) -> Result<String, tonic::Status> {
    let id = random()?;
    let csrf = random()?;
    let now_ms = console.ctx.clock.now_ms();
    let session = ConsoleSession {
        token_hash: hash_token(&id),
        user_id,
        csrf_token: csrf,
        created_ms: now_ms,
        expires_ms: now_ms + SESSION_TTL_MS,
    };
    console
        .ctx
        .store
        .insert_console_session(&session)
        .await
        .map_err(crate::error::Error::from)?;
    Ok(set_cookie(COOKIE, &id, SESSION_TTL_MS / 1000, console.tls))
}

/// Ends the session of this cookie (logout); returns the `Set-Cookie` that clears it.
pub async fn end_session(console: &Console, headers: &HeaderMap) -> String {
    if let Some(id) = cookie(headers, COOKIE) {
        let deleted = console
            .ctx
            .store
            .delete_console_session(&hash_token(&id))
            .await;
        if let Err(error) = deleted {
            tracing::warn!(%error, "console session not deleted at logout");
        }
    }
    set_cookie(COOKIE, "", 0, console.tls)
}

/// A random value for ids and tokens (256 bits, hex, without the API token prefix).
pub fn random() -> Result<String, tonic::Status> {
    let token = generate_token()
        .map_err(|error| tonic::Status::unavailable(format!("no randomness: {error}")))?;
    Ok(token
        .trim_start_matches(crate::auth::secrets::TOKEN_PREFIX)
        .to_string())
}

/// Deletes expired sessions every 10 minutes.
pub async fn prune_loop(console: Shared, cancel: CancellationToken) {
    loop {
        let now_ms = console.ctx.clock.now_ms();
        if let Err(error) = console.ctx.store.prune_console_sessions(now_ms).await {
            tracing::debug!(%error, "expired console sessions not pruned");
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(600)) => {}
        }
    }
}
