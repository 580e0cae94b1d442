//! JobAdmin users, API tokens (by hash) and per-group grants.

use crate::model::{ApiToken, GroupId, Role, User};
use crate::store::dialect::Dialect;
use crate::store::sql::{Cols, Pools, Sql};
use crate::store::{StoreError, StoreResult};

const SELECT_USER: &str = "SELECT id, name, role, password_hash, created_ms FROM xjob_user";
const SELECT_TOKEN: &str = "SELECT id, user_id, token_hash, prefix, description, expires_ms, \
    revoked_ms, created_ms FROM xjob_token";

fn user_from_row<DB: Dialect>(row: &DB::Row) -> StoreResult<User> {
    let row = Cols::<DB>(row);
    Ok(User {
        id: row.get("id")?,
        name: row.get("name")?,
        role: row.parse("role", Role::parse)?,
        password_hash: row.get("password_hash")?,
        group_ids: Vec::new(),
        created_ms: row.get("created_ms")?,
    })
}

fn token_from_row<DB: Dialect>(row: &DB::Row) -> StoreResult<ApiToken> {
    let row = Cols::<DB>(row);
    Ok(ApiToken {
        id: row.get("id")?,
        user_id: row.get("user_id")?,
        token_hash: row.get("token_hash")?,
        prefix: row.get("prefix")?,
        description: row.get("description")?,
        expires_ms: row.get("expires_ms")?,
        revoked_ms: row.get("revoked_ms")?,
        created_ms: row.get("created_ms")?,
    })
}

/// Inserts a user (without grants) and returns it with its id; a taken name is `Conflict`.
pub async fn insert_user<DB: Dialect>(db: Pools<'_, DB>, user: &User) -> StoreResult<User> {
    let insert =
        Sql::<DB>::new("INSERT INTO xjob_user (name, role, password_hash, created_ms) VALUES (")
            .bind(user.name.as_str())
            .push(", ")
            .bind(user.role.as_str())
            .push(", ")
            .bind(user.password_hash.as_str())
            .push(", ")
            .bind(user.created_ms)
            .push(")");
    let id = super::insert_returning_id(&mut *db.write().await?, insert).await?;
    Ok(User {
        id,
        group_ids: Vec::new(),
        ..user.clone()
    })
}

/// Deletes a user with its tokens and grants; false when it did not exist.
pub async fn delete_user<DB: Dialect>(db: Pools<'_, DB>, id: i64) -> StoreResult<bool> {
    let mut tx = db.begin().await?;
    for table in ["xjob_token", "xjob_user_group"] {
        Sql::<DB>::new(format!("DELETE FROM {table} WHERE user_id = "))
            .bind(id)
            .execute(&mut *tx)
            .await?;
    }
    let deleted = Sql::<DB>::new("DELETE FROM xjob_user WHERE id = ")
        .bind(id)
        .affected(&mut *tx)
        .await?;
    crate::store::sql::commit(tx).await?;
    Ok(deleted == 1)
}

/// Number of users (none = JobAdmin may run open on loopback).
pub async fn count_users<DB: Dialect>(db: Pools<'_, DB>) -> StoreResult<i64> {
    Sql::<DB>::new("SELECT COUNT(*) FROM xjob_user")
        .fetch_scalar(&mut *db.read().await?)
        .await
}

/// A user with its grants.
pub async fn get_user<DB: Dialect>(db: Pools<'_, DB>, id: i64) -> StoreResult<Option<User>> {
    let row = Sql::<DB>::new(SELECT_USER)
        .push(" WHERE id = ")
        .bind(id)
        .fetch_optional(&mut *db.read().await?)
        .await?;
    let Some(mut user) = row.as_ref().map(user_from_row::<DB>).transpose()? else {
        return Ok(None);
    };
    user.group_ids = Sql::<DB>::new("SELECT group_id FROM xjob_user_group WHERE user_id = ")
        .bind(id)
        .push(" ORDER BY group_id")
        .fetch_column(&mut *db.read().await?)
        .await?;
    Ok(Some(user))
}

/// A user by name, with its grants.
pub async fn user_by_name<DB: Dialect>(db: Pools<'_, DB>, name: &str) -> StoreResult<Option<User>> {
    let id: Option<i64> = Sql::<DB>::new("SELECT id FROM xjob_user WHERE name = ")
        .bind(name)
        .fetch_column(&mut *db.read().await?)
        .await?
        .into_iter()
        .next();
    match id {
        Some(id) => get_user(db, id).await,
        None => Ok(None),
    }
}

/// Every user with its grants, by id.
pub async fn list_users<DB: Dialect>(db: Pools<'_, DB>) -> StoreResult<Vec<User>> {
    let mut conn = db.read().await?;
    let rows = Sql::<DB>::new(SELECT_USER)
        .push(" ORDER BY id")
        .fetch_all(&mut conn)
        .await?;
    let mut users: Vec<User> = rows
        .iter()
        .map(user_from_row::<DB>)
        .collect::<StoreResult<_>>()?;
    let grants = Sql::<DB>::new("SELECT user_id, group_id FROM xjob_user_group ORDER BY group_id")
        .fetch_all(&mut conn)
        .await?;
    for grant in &grants {
        let grant = Cols::<DB>(grant);
        let user_id: i64 = grant.get("user_id")?;
        let group_id: GroupId = grant.get("group_id")?;
        if let Some(user) = users.iter_mut().find(|user| user.id == user_id) {
            user.group_ids.push(group_id);
        }
    }
    Ok(users)
}

/// Grants a group to a user (granting twice changes nothing).
pub async fn grant_group<DB: Dialect>(
    db: Pools<'_, DB>,
    user_id: i64,
    group_id: GroupId,
) -> StoreResult<()> {
    let inserted = Sql::<DB>::new("INSERT INTO xjob_user_group (user_id, group_id) VALUES (")
        .bind(user_id)
        .push(", ")
        .bind(group_id.0)
        .push(")")
        .execute(&mut *db.write().await?)
        .await;
    match inserted {
        Ok(_) | Err(StoreError::Conflict(_)) => Ok(()),
        Err(error) => Err(error),
    }
}

/// Withdraws a group grant; false when there was none.
pub async fn revoke_group<DB: Dialect>(
    db: Pools<'_, DB>,
    user_id: i64,
    group_id: GroupId,
) -> StoreResult<bool> {
    let deleted = Sql::<DB>::new("DELETE FROM xjob_user_group WHERE user_id = ")
        .bind(user_id)
        .push(" AND group_id = ")
        .bind(group_id.0)
        .affected(&mut *db.write().await?)
        .await?;
    Ok(deleted == 1)
}

/// Stores a token (by hash) and returns it with its id.
pub async fn insert_token<DB: Dialect>(
    db: Pools<'_, DB>,
    token: &ApiToken,
) -> StoreResult<ApiToken> {
    let insert = Sql::<DB>::new(
        "INSERT INTO xjob_token (user_id, token_hash, prefix, description, expires_ms, \
         revoked_ms, created_ms) VALUES (",
    )
    .bind(token.user_id)
    .push(", ")
    .bind(token.token_hash.as_str())
    .push(", ")
    .bind(token.prefix.as_str())
    .push(", ")
    .bind(token.description.as_str())
    .push(", ")
    .bind(token.expires_ms)
    .push(", ")
    .bind(token.revoked_ms)
    .push(", ")
    .bind(token.created_ms)
    .push(")");
    let id = super::insert_returning_id(&mut *db.write().await?, insert).await?;
    Ok(ApiToken {
        id,
        ..token.clone()
    })
}

/// The token with this hash, if any (expired and revoked ones too: the caller decides).
pub async fn token_by_hash<DB: Dialect>(
    db: Pools<'_, DB>,
    token_hash: &str,
) -> StoreResult<Option<ApiToken>> {
    let row = Sql::<DB>::new(SELECT_TOKEN)
        .push(" WHERE token_hash = ")
        .bind(token_hash)
        .fetch_optional(&mut *db.read().await?)
        .await?;
    row.as_ref().map(token_from_row::<DB>).transpose()
}

/// A user's tokens, by id.
pub async fn list_tokens<DB: Dialect>(
    db: Pools<'_, DB>,
    user_id: i64,
) -> StoreResult<Vec<ApiToken>> {
    let rows = Sql::<DB>::new(SELECT_TOKEN)
        .push(" WHERE user_id = ")
        .bind(user_id)
        .push(" ORDER BY id")
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter().map(token_from_row::<DB>).collect()
}

/// Marks a token revoked at `now_ms`; returns its user id, `None` when it does not exist.
pub async fn revoke_token<DB: Dialect>(
    db: Pools<'_, DB>,
    id: i64,
    now_ms: i64,
) -> StoreResult<Option<i64>> {
    let mut conn = db.write().await?;
    let user_id: Option<i64> = Sql::<DB>::new("SELECT user_id FROM xjob_token WHERE id = ")
        .bind(id)
        .fetch_column(&mut conn)
        .await?
        .into_iter()
        .next();
    if user_id.is_some() {
        Sql::<DB>::new("UPDATE xjob_token SET revoked_ms = ")
            .bind(now_ms)
            .push(" WHERE revoked_ms = 0 AND id = ")
            .bind(id)
            .execute(&mut conn)
            .await?;
    }
    Ok(user_id)
}

/// Changes a user's role (the caller checked it exists; MySQL counts an unchanged row as
/// unaffected, so the row count says nothing here).
pub async fn set_user_role<DB: Dialect>(db: Pools<'_, DB>, id: i64, role: Role) -> StoreResult<()> {
    Sql::<DB>::new("UPDATE xjob_user SET role = ")
        .bind(role.as_str())
        .push(" WHERE id = ")
        .bind(id)
        .execute(&mut *db.write().await?)
        .await?;
    Ok(())
}

/// Replaces a user's password hash (empty = no password login) and ends every console session
/// of that user in the same transaction, so an old password's sessions do not outlive it.
pub async fn set_user_password<DB: Dialect>(
    db: Pools<'_, DB>,
    id: i64,
    password_hash: &str,
) -> StoreResult<()> {
    let mut tx = db.begin().await?;
    Sql::<DB>::new("UPDATE xjob_user SET password_hash = ")
        .bind(password_hash)
        .push(" WHERE id = ")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    Sql::<DB>::new("DELETE FROM xjob_console_session WHERE user_id = ")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    crate::store::sql::commit(tx).await
}
