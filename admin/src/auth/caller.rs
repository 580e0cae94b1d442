//! The authorization step of every `JobAdmin` call: resolve the caller, then require one
//! permission in one scope.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tonic::Status;
use tonic::metadata::MetadataMap;

use super::secrets::hash_token;
use crate::model::{GroupId, Role, SharedClock, User};
use crate::store::Store;

/// How long a resolved token is trusted without reading the database again. A revocation made
/// on this admin applies at once (the cache is cleared); one made on another admin of the
/// cluster applies here within this time.
const CACHE_TTL: Duration = Duration::from_secs(5);
/// Most tokens kept in the cache (it is cleared when full: a flood of valid tokens is rare).
const CACHE_MAX: usize = 10_000;

/// What a call needs. The name is what `PERMISSION_DENIED` messages show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// Read groups, jobs, runs, logs, executors (viewer and up, in the group).
    Read,
    /// Change jobs, trigger, kill, clear logs (operator and up, in the group).
    Operate,
    /// Create, change and delete groups (admin).
    ManageGroups,
    /// Manage users, tokens and grants (admin).
    ManageUsers,
    /// Change one's own console password (every user).
    ChangeOwnPassword,
    /// Read the audit trail (admin).
    ReadAudit,
    /// Trigger a job on an address outside its group (admin, with `trigger_any_address`).
    TriggerAnyAddress,
}

impl Permission {
    pub fn name(self) -> &'static str {
        match self {
            Permission::Read => "jobs.read",
            Permission::Operate => "jobs.operate",
            Permission::ManageGroups => "groups.manage",
            Permission::ManageUsers => "users.manage",
            Permission::ChangeOwnPassword => "account.password",
            Permission::ReadAudit => "audit.read",
            Permission::TriggerAnyAddress => "trigger.any_address",
        }
    }

    /// The lowest role that has this permission (in its groups, for the group-scoped ones).
    fn min_role(self) -> Role {
        match self {
            Permission::Read | Permission::ChangeOwnPassword => Role::Viewer,
            Permission::Operate => Role::Operator,
            _ => Role::Admin,
        }
    }
}

/// Where a permission is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// No particular object (the answer is filtered, or holds no group's data).
    Any,
    /// One group's objects.
    Group(GroupId),
    /// Every group at once (e.g. clearing the logs of all groups): admins only.
    AllGroups,
}

/// Who is calling.
#[derive(Debug, Clone, PartialEq)]
pub enum Caller {
    /// No users exist and the admin runs open (loopback): everything is allowed.
    Open,
    User(User),
}

impl Caller {
    /// The name the audit trail records.
    pub fn actor(&self) -> &str {
        match self {
            Caller::Open => "(open)",
            Caller::User(user) => &user.name,
        }
    }

    fn role(&self) -> Role {
        match self {
            Caller::Open => Role::Admin,
            Caller::User(user) => user.role,
        }
    }

    pub fn is_admin(&self) -> bool {
        self.role() == Role::Admin
    }

    /// Whether the caller may do `permission` in `scope`.
    pub fn allows(&self, permission: Permission, scope: Scope) -> bool {
        let role = self.role();
        if role == Role::Admin {
            return true;
        }
        if role < permission.min_role() {
            return false;
        }
        match (self, scope) {
            (_, Scope::Any) => true,
            (Caller::User(user), Scope::Group(group_id)) => user.group_ids.contains(&group_id),
            _ => false,
        }
    }

    /// `PERMISSION_DENIED` naming the missing permission unless [`Caller::allows`].
    pub fn require(&self, permission: Permission, scope: Scope) -> Result<(), Status> {
        if self.allows(permission, scope) {
            return Ok(());
        }
        let place = match scope {
            Scope::Any => String::new(),
            Scope::Group(group_id) => format!(" in group {group_id}"),
            Scope::AllGroups => " in every group".to_string(),
        };
        Err(Status::permission_denied(format!(
            "missing permission {}{place} (user '{}', role {})",
            permission.name(),
            self.actor(),
            self.role().as_str()
        )))
    }

    /// The groups whose objects the caller may read, for list calls to filter by in the
    /// database (so pages come back full); `None` = every group.
    pub fn readable_groups(&self) -> Option<Vec<GroupId>> {
        match self {
            Caller::User(user) if user.role != Role::Admin => Some(user.group_ids.clone()),
            _ => None,
        }
    }

    /// Whether a list answer may show this group's objects to the caller.
    pub fn may_read(&self, group_id: GroupId) -> bool {
        self.allows(Permission::Read, Scope::Group(group_id))
    }
}

/// A caller this process resolved itself (the web console, from its session cookie), attached
/// to a `JobAdmin` request's extensions so the handler skips the bearer token. Only code in
/// this process can attach it: a gRPC client sends metadata, never extensions.
#[derive(Debug, Clone)]
pub struct ResolvedCaller(pub Caller);

/// Resolves callers from their bearer tokens, with a short cache.
pub struct Authenticator {
    store: Store,
    clock: SharedClock,
    /// No users may mean open: true on loopback or with `insecure_open_admin_api`.
    open_without_users: bool,
    /// Set once a user was seen: from then on this admin never runs open again, even if every
    /// user is deleted (fails closed until a restart).
    users_exist: AtomicBool,
    cache: Mutex<HashMap<String, Cached>>,
}

struct Cached {
    user: User,
    /// Token expiry (0 = never), checked at every use.
    expires_ms: i64,
    loaded: Instant,
}

impl Authenticator {
    pub fn new(store: Store, clock: SharedClock, open_without_users: bool) -> Authenticator {
        Authenticator {
            store,
            clock,
            open_without_users,
            users_exist: AtomicBool::new(false),
            cache: Mutex::default(),
        }
    }

    /// The caller of a request: `UNAUTHENTICATED` without a valid token (unless the admin runs
    /// open), `UNAVAILABLE` when the database cannot say.
    pub async fn caller(&self, metadata: &MetadataMap) -> Result<Caller, Status> {
        let token = bearer(metadata)?;
        let Some(token) = token else {
            if self.open_without_users && !self.users_exist().await? {
                return Ok(Caller::Open);
            }
            return Err(Status::unauthenticated(
                "JobAdmin needs an API token: send 'authorization: Bearer <token>' \
                 (create one with `xjob user create` or CreateToken)",
            ));
        };
        let hash = hash_token(token);
        let now_ms = self.clock.now_ms();
        if let Some(user) = self.cached(&hash, now_ms)? {
            return Ok(Caller::User(user));
        }
        let user = self.load(&hash, now_ms).await?;
        Ok(Caller::User(user))
    }

    /// Whether a caller without credentials acts as an admin right now (no users yet, and
    /// open allowed on this listener): the console then needs no login.
    pub async fn runs_open(&self) -> Result<bool, Status> {
        Ok(self.open_without_users && !self.users_exist().await?)
    }

    /// Forgets every resolved token (after a change to users, tokens or grants).
    pub fn invalidate(&self) {
        self.lock_cache().clear();
    }

    /// Records that a user now exists (created through this admin).
    pub fn user_created(&self) {
        self.users_exist.store(true, Ordering::Relaxed);
    }

    async fn users_exist(&self) -> Result<bool, Status> {
        if self.users_exist.load(Ordering::Relaxed) {
            return Ok(true);
        }
        let count = self
            .store
            .count_users()
            .await
            .map_err(crate::error::Error::from)?;
        if count > 0 {
            self.users_exist.store(true, Ordering::Relaxed);
        }
        Ok(count > 0)
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Cached>> {
        // A panic while holding the lock leaves a plain map behind: still usable.
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn cached(&self, hash: &str, now_ms: i64) -> Result<Option<User>, Status> {
        let cache = self.lock_cache();
        let Some(entry) = cache.get(hash) else {
            return Ok(None);
        };
        if entry.loaded.elapsed() > CACHE_TTL {
            return Ok(None);
        }
        if entry.expires_ms > 0 && now_ms >= entry.expires_ms {
            return Err(Status::unauthenticated("the API token has expired"));
        }
        Ok(Some(entry.user.clone()))
    }

    async fn load(&self, hash: &str, now_ms: i64) -> Result<User, Status> {
        let token = self
            .store
            .token_by_hash(hash)
            .await
            .map_err(crate::error::Error::from)?
            .ok_or_else(|| Status::unauthenticated("unknown API token"))?;
        if token.revoked_ms > 0 {
            return Err(Status::unauthenticated("the API token was revoked"));
        }
        if token.expires_ms > 0 && now_ms >= token.expires_ms {
            return Err(Status::unauthenticated("the API token has expired"));
        }
        let user = self
            .store
            .get_user(token.user_id)
            .await
            .map_err(crate::error::Error::from)?
            .ok_or_else(|| Status::unauthenticated("the API token's user was deleted"))?;
        self.users_exist.store(true, Ordering::Relaxed);
        let mut cache = self.lock_cache();
        if cache.len() >= CACHE_MAX {
            cache.clear();
        }
        cache.insert(
            hash.to_string(),
            Cached {
                user: user.clone(),
                expires_ms: token.expires_ms,
                loaded: Instant::now(),
            },
        );
        Ok(user)
    }
}

/// The token of `authorization: Bearer <token>`; `None` without the header.
fn bearer(metadata: &MetadataMap) -> Result<Option<&str>, Status> {
    let Some(value) = metadata.get("authorization") else {
        return Ok(None);
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|token| !token.is_empty());
    token
        .map(Some)
        .ok_or_else(|| Status::unauthenticated("authorization must be 'Bearer <token>'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(role: Role, groups: &[i64]) -> Caller {
        Caller::User(User {
            id: 1,
            name: "u".to_string(),
            role,
            password_hash: String::new(),
            group_ids: groups.iter().copied().map(GroupId).collect(),
            created_ms: 0,
        })
    }

    #[test]
    fn roles_and_groups_decide() {
        let viewer = user(Role::Viewer, &[1]);
        let operator = user(Role::Operator, &[1]);
        let admin = user(Role::Admin, &[]);
        assert!(viewer.allows(Permission::Read, Scope::Group(GroupId(1))));
        assert!(!viewer.allows(Permission::Read, Scope::Group(GroupId(2))));
        assert!(!viewer.allows(Permission::Operate, Scope::Group(GroupId(1))));
        assert!(operator.allows(Permission::Operate, Scope::Group(GroupId(1))));
        assert!(!operator.allows(Permission::Operate, Scope::AllGroups));
        assert!(!operator.allows(Permission::ManageGroups, Scope::Any));
        assert!(admin.allows(Permission::ManageUsers, Scope::Any));
        assert!(Caller::Open.allows(Permission::ReadAudit, Scope::AllGroups));
        let denied = viewer
            .require(Permission::Operate, Scope::Group(GroupId(1)))
            .unwrap_err();
        assert_eq!(denied.code(), tonic::Code::PermissionDenied);
        assert!(
            denied.message().contains("jobs.operate in group 1"),
            "{}",
            denied.message()
        );
    }
}
