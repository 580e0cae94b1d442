//! Creating users and issuing their tokens: shared by `JobAdmin`, `xjob user create` and the
//! bootstrap token.

use super::secrets::{generate_token, hash_password, hash_token, shown_prefix, verify_password};
use crate::error::Error;
use crate::model::{ApiToken, AuditEntry, Role, User};
use crate::store::Store;

/// Longest user name (the MySQL column holds 191 characters).
const MAX_NAME_CHARS: usize = 64;

/// Shortest console password, in characters. The one rule for `CreateUser`, `xjob user create
/// --password-stdin` and the console's Users page, which all go through [`create_user`].
pub const MIN_PASSWORD_CHARS: usize = 12;

/// Refuses a password shorter than [`MIN_PASSWORD_CHARS`]. Empty means "no password login"
/// and is allowed; the message never repeats the password.
pub fn check_password(password: &str) -> Result<(), Error> {
    check_password_field("password", password)
}

/// [`check_password`] for a request field of another name (`new_password`).
fn check_password_field(field: &str, password: &str) -> Result<(), Error> {
    let chars = password.chars().count();
    if chars > 0 && chars < MIN_PASSWORD_CHARS {
        return Err(Error::invalid(
            field,
            format!("at least {MIN_PASSWORD_CHARS} characters (or empty for no password login)"),
        ));
    }
    Ok(())
}

/// The stored hash of a new password after [`check_password`] (empty stays empty: no password
/// login). argon2 takes tens of milliseconds of CPU, so it runs off the async threads.
pub async fn new_password_hash(field: &str, password: &str) -> Result<String, Error> {
    check_password_field(field, password)?;
    if password.is_empty() {
        return Ok(String::new());
    }
    let password = password.to_string();
    tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|error| Error::internal("password hashing stopped".to_string(), error))?
        .map_err(|error| Error::invalid(field, error))
}

/// Whether `password` is the user's current one (false for a user without a password), off
/// the async threads like every argon2 call.
pub async fn password_matches(password: &str, password_hash: &str) -> bool {
    let (password, hash) = (password.to_string(), password_hash.to_string());
    tokio::task::spawn_blocking(move || verify_password(&password, &hash))
        .await
        .unwrap_or(false)
}

/// A new user and its first token, shown once.
pub struct CreatedUser {
    pub user: User,
    pub token: String,
    pub token_info: ApiToken,
}

/// Validates and inserts a user, then issues its first token (`token` when given, e.g. the
/// bootstrap token; else a random one). A taken name is `ALREADY_EXISTS`.
pub async fn create_user(
    store: &Store,
    name: &str,
    role: &str,
    password: &str,
    token: Option<String>,
    now_ms: i64,
    ttl_ms: i64,
) -> Result<CreatedUser, Error> {
    let name = name.trim();
    let name_ok = !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'));
    if !name_ok {
        return Err(Error::invalid(
            "name",
            format!("1 to {MAX_NAME_CHARS} characters of letters, digits, - _ . @"),
        ));
    }
    let role = Role::parse(role)
        .ok_or_else(|| Error::invalid("role", "must be admin, operator or viewer"))?;
    check_password(password)?;
    let password_hash = if password.is_empty() {
        String::new()
    } else {
        hash_password(password).map_err(|error| Error::invalid("password", error))?
    };
    let user = User {
        id: 0,
        name: name.to_string(),
        role,
        password_hash,
        group_ids: Vec::new(),
        created_ms: now_ms,
    };
    let user = store
        .insert_user(&user)
        .await
        .map_err(|error| match error {
            crate::store::StoreError::Conflict(_) => {
                Error::AlreadyExists(format!("user '{name}' already exists"))
            }
            other => other.into(),
        })?;
    let (token, token_info) = issue_token(store, user.id, token, now_ms, ttl_ms, "").await?;
    Ok(CreatedUser {
        user,
        token,
        token_info,
    })
}

/// What the audit trail says about a new user (its token only by its shown prefix).
pub fn created_summary(created: &CreatedUser) -> String {
    format!(
        "name '{}', role {}, token {}",
        created.user.name,
        created.user.role.as_str(),
        created.token_info.prefix
    )
}

/// Writes the audit row of a user made outside `JobAdmin` (`xjob user create`, the bootstrap
/// token), so every user's origin is in the trail. `actor` says which way it was made.
pub async fn audit_created(
    store: &Store,
    actor: &str,
    created: &CreatedUser,
    now_ms: i64,
) -> Result<(), Error> {
    let entry = AuditEntry {
        id: 0,
        at_ms: now_ms,
        actor: actor.to_string(),
        call: "CreateUser".to_string(),
        object: format!("user:{}", created.user.id),
        summary: created_summary(created),
    };
    store.insert_audit(&entry).await?;
    Ok(())
}

/// Issues a token for a user (random unless given); returns it with its stored description.
pub async fn issue_token(
    store: &Store,
    user_id: i64,
    token: Option<String>,
    now_ms: i64,
    ttl_ms: i64,
    description: &str,
) -> Result<(String, ApiToken), Error> {
    if ttl_ms < 0 {
        return Err(Error::invalid(
            "ttl_ms",
            format!("must be >= 0, got {ttl_ms}"),
        ));
    }
    let token = match token {
        Some(token) => token,
        None => generate_token()
            .map_err(|error| Error::internal(format!("no randomness: {error}"), error))?,
    };
    let record = ApiToken {
        id: 0,
        user_id,
        token_hash: hash_token(&token),
        prefix: shown_prefix(&token),
        description: description.chars().take(200).collect(),
        expires_ms: if ttl_ms > 0 {
            now_ms.saturating_add(ttl_ms)
        } else {
            0
        },
        revoked_ms: 0,
        created_ms: now_ms,
    };
    let record = store.insert_token(&record).await?;
    Ok((token, record))
}

#[cfg(test)]
mod tests {
    use super::{MIN_PASSWORD_CHARS, check_password};

    #[test]
    fn passwords_shorter_than_the_minimum_are_refused_empty_is_allowed() {
        assert!(check_password("").is_ok(), "empty = no password login");
        let short = "x".repeat(MIN_PASSWORD_CHARS - 1);
        let error = check_password(&short).expect_err("one short").to_string();
        assert!(error.contains("at least 12 characters"), "{error}");
        assert!(
            !error.contains(&short),
            "the message repeats the password: {error}"
        );
        // Characters, not bytes: 12 non-ASCII letters are enough.
        assert!(check_password(&"é".repeat(MIN_PASSWORD_CHARS)).is_ok());
    }
}
