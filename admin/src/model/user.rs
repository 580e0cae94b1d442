//! JobAdmin's users, their API tokens and the audit trail (see `auth/` for how they are
//! checked). Tokens are never held here in clear: only their SHA-256 hash and a short prefix.

use super::GroupId;

/// What a user may do: `Admin` everything, `Operator` change jobs and runs in granted groups,
/// `Viewer` read in granted groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Viewer,
    Operator,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        match text {
            "viewer" => Some(Role::Viewer),
            "operator" => Some(Role::Operator),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

/// A user as stored in `xjob_user`, with its group grants.
#[derive(Debug, Clone, PartialEq)]
pub struct User {
    pub id: i64,
    pub name: String,
    pub role: Role,
    /// argon2id PHC string; empty = no password login.
    pub password_hash: String,
    pub group_ids: Vec<GroupId>,
    pub created_ms: i64,
}

/// An API token as stored in `xjob_token` (the hash, never the token).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiToken {
    pub id: i64,
    pub user_id: i64,
    pub token_hash: String,
    pub prefix: String,
    pub description: String,
    /// 0 = never.
    pub expires_ms: i64,
    /// 0 = not revoked.
    pub revoked_ms: i64,
    pub created_ms: i64,
}

/// One audit row: who changed what through JobAdmin, and when.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    pub id: i64,
    pub at_ms: i64,
    pub actor: String,
    pub call: String,
    pub object: String,
    pub summary: String,
}

/// A web console session as stored in `xjob_console_session` (the id's hash, never the id).
#[derive(Debug, Clone, PartialEq)]
pub struct ConsoleSession {
    /// Hex SHA-256 of the session id the cookie holds.
    pub token_hash: String,
    /// 0 = an open console's session (no users yet, loopback).
    pub user_id: i64,
    /// The token every form of this session posts back.
    pub csrf_token: String,
    pub created_ms: i64,
    pub expires_ms: i64,
}
