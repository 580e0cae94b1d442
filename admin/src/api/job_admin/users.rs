//! Users, API tokens, group grants and the audit trail (admin only; `mod.rs` checks).

use xjob_proto::pb;

use super::JobAdminService;
use super::RpcResult;
use super::reply;
use crate::api::convert::{Page, user_to_pb};
use crate::auth::Caller;
use crate::auth::Permission;
use crate::auth::Scope;
use crate::auth::accounts::{create_user, issue_token, new_password_hash, password_matches};
use crate::error::Error;
use crate::model::{ApiToken, AuditEntry, GroupId, Role, User};
use tonic::Request;

fn token_to_pb(token: ApiToken) -> pb::ApiToken {
    pb::ApiToken {
        id: token.id,
        user_id: token.user_id,
        prefix: token.prefix,
        expires_ms: token.expires_ms,
        revoked_ms: token.revoked_ms,
        created_ms: token.created_ms,
        description: token.description,
    }
}

fn audit_to_pb(entry: AuditEntry) -> pb::AuditEntry {
    pb::AuditEntry {
        id: entry.id,
        at_ms: entry.at_ms,
        actor: entry.actor,
        call: entry.call,
        object: entry.object,
        summary: entry.summary,
    }
}

impl JobAdminService {
    async fn load_user(&self, id: i64) -> Result<User, Error> {
        let user = self.store().get_user(id).await?;
        user.ok_or_else(|| Error::NotFound(format!("user {id} not found")))
    }

    pub(super) async fn create_user_checked(
        &self,
        caller: &Caller,
        request: pb::CreateUserRequest,
    ) -> Result<pb::CreateUserResponse, Error> {
        let now_ms = self.ctx.clock.now_ms();
        let created = create_user(
            self.store(),
            &request.name,
            &request.role,
            &request.password,
            None,
            now_ms,
            request.token_ttl_ms,
        )
        .await?;
        self.auth.user_created();
        let summary = crate::auth::accounts::created_summary(&created);
        self.audit(
            caller,
            "CreateUser",
            format!("user:{}", created.user.id),
            summary,
        )
        .await;
        Ok(pb::CreateUserResponse {
            user: Some(user_to_pb(created.user)),
            token: created.token,
            token_info: Some(token_to_pb(created.token_info)),
        })
    }

    pub(super) async fn list_users_all(&self) -> Result<pb::ListUsersResponse, Error> {
        let users = self.store().list_users().await?;
        Ok(pb::ListUsersResponse {
            users: users.into_iter().map(user_to_pb).collect(),
        })
    }

    pub(super) async fn delete_user_checked(
        &self,
        caller: &Caller,
        id: i64,
    ) -> Result<pb::DeleteUserResponse, Error> {
        let user = self.load_user(id).await?;
        if let Caller::User(me) = caller
            && me.id == id
        {
            return Err(Error::FailedPrecondition(
                "an admin cannot delete their own user (ask another admin)".to_string(),
            ));
        }
        self.store().delete_user(id).await?;
        self.auth.invalidate();
        let summary = format!("name '{}', role {}", user.name, user.role.as_str());
        self.audit(caller, "DeleteUser", format!("user:{id}"), summary)
            .await;
        Ok(pb::DeleteUserResponse {})
    }

    /// Changes a user's role. An admin may not change their own (so at least one admin is
    /// always left: the one making the change).
    pub(super) async fn set_role_checked(
        &self,
        caller: &Caller,
        request: pb::SetUserRoleRequest,
    ) -> Result<pb::SetUserRoleResponse, Error> {
        let role = Role::parse(request.role.trim())
            .ok_or_else(|| Error::invalid("role", "must be admin, operator or viewer"))?;
        let user = self.load_user(request.user_id).await?;
        if let Caller::User(me) = caller
            && me.id == user.id
        {
            return Err(Error::FailedPrecondition(
                "an admin cannot change their own role (ask another admin)".to_string(),
            ));
        }
        self.store().set_user_role(user.id, role).await?;
        self.auth.invalidate();
        let summary = format!(
            "user '{}', role {} -> {}",
            user.name,
            user.role.as_str(),
            role.as_str()
        );
        self.audit(caller, "SetUserRole", format!("user:{}", user.id), summary)
            .await;
        Ok(pb::SetUserRoleResponse {
            user: Some(user_to_pb(self.load_user(user.id).await?)),
        })
    }

    /// The caller's own password, after proving the current one. A user without a password
    /// (API token only) cannot give itself one: an admin sets it with ResetPassword.
    pub(super) async fn change_own_password(
        &self,
        caller: &Caller,
        request: pb::ChangePasswordRequest,
    ) -> Result<pb::ChangePasswordResponse, Error> {
        let Caller::User(me) = caller else {
            return Err(Error::FailedPrecondition(
                "the admin runs open (no users yet): there is no own password to change"
                    .to_string(),
            ));
        };
        // Re-read: the cached caller may be seconds old, the hash must be the stored one.
        let user = self.load_user(me.id).await?;
        if user.password_hash.is_empty() {
            return Err(Error::FailedPrecondition(format!(
                "user '{}' has no console password; an admin sets one (ResetPassword)",
                user.name
            )));
        }
        if request.new_password.is_empty() {
            return Err(Error::invalid("new_password", "must not be empty"));
        }
        let hash = new_password_hash("new_password", &request.new_password).await?;
        if !password_matches(&request.current_password, &user.password_hash).await {
            return Err(Error::invalid(
                "current_password",
                "does not match the current password",
            ));
        }
        self.store().set_user_password(user.id, &hash).await?;
        let summary = format!("user '{}'", user.name);
        self.audit(
            caller,
            "ChangePassword",
            format!("user:{}", user.id),
            summary,
        )
        .await;
        Ok(pb::ChangePasswordResponse {})
    }

    /// Sets a user's password without the current one (admin); empty removes password login.
    pub(super) async fn reset_password_checked(
        &self,
        caller: &Caller,
        request: pb::ResetPasswordRequest,
    ) -> Result<pb::ResetPasswordResponse, Error> {
        let user = self.load_user(request.user_id).await?;
        let hash = new_password_hash("new_password", &request.new_password).await?;
        self.store().set_user_password(user.id, &hash).await?;
        let summary = format!(
            "user '{}', {}",
            user.name,
            if hash.is_empty() {
                "password login removed"
            } else {
                "new password"
            }
        );
        self.audit(
            caller,
            "ResetPassword",
            format!("user:{}", user.id),
            summary,
        )
        .await;
        Ok(pb::ResetPasswordResponse {})
    }

    pub(super) async fn create_token_checked(
        &self,
        caller: &Caller,
        request: pb::CreateTokenRequest,
    ) -> Result<pb::CreateTokenResponse, Error> {
        let user = self.load_user(request.user_id).await?;
        let now_ms = self.ctx.clock.now_ms();
        let (token, info) = issue_token(
            self.store(),
            user.id,
            None,
            now_ms,
            request.ttl_ms,
            &request.description,
        )
        .await?;
        let summary = format!(
            "user '{}', token {}, expires_ms {}",
            user.name, info.prefix, info.expires_ms
        );
        self.audit(caller, "CreateToken", format!("token:{}", info.id), summary)
            .await;
        Ok(pb::CreateTokenResponse {
            token,
            token_info: Some(token_to_pb(info)),
        })
    }

    pub(super) async fn list_tokens_of(
        &self,
        user_id: i64,
    ) -> Result<pb::ListTokensResponse, Error> {
        self.load_user(user_id).await?;
        let tokens = self.store().list_tokens(user_id).await?;
        Ok(pb::ListTokensResponse {
            tokens: tokens.into_iter().map(token_to_pb).collect(),
        })
    }

    pub(super) async fn revoke_token_checked(
        &self,
        caller: &Caller,
        id: i64,
    ) -> Result<pb::RevokeTokenResponse, Error> {
        let now_ms = self.ctx.clock.now_ms();
        let user_id = self.store().revoke_token(id, now_ms).await?;
        let user_id = user_id.ok_or_else(|| Error::NotFound(format!("token {id} not found")))?;
        self.auth.invalidate();
        let summary = format!("of user {user_id}");
        self.audit(caller, "RevokeToken", format!("token:{id}"), summary)
            .await;
        Ok(pb::RevokeTokenResponse {})
    }

    /// Grants (or withdraws) a group; returns the user with its grants.
    pub(super) async fn set_grant(
        &self,
        caller: &Caller,
        user_id: i64,
        group_id: GroupId,
        grant: bool,
    ) -> Result<pb::User, Error> {
        let user = self.load_user(user_id).await?;
        let call = if grant {
            self.load_group(group_id).await?;
            self.store().grant_group(user_id, group_id).await?;
            "GrantGroup"
        } else {
            if !self.store().revoke_group(user_id, group_id).await? {
                return Err(Error::NotFound(format!(
                    "user {user_id} has no grant on group {group_id}"
                )));
            }
            "RevokeGroup"
        };
        self.auth.invalidate();
        let summary = format!("user '{}', group {group_id}", user.name);
        self.audit(caller, call, format!("user:{user_id}"), summary)
            .await;
        Ok(user_to_pb(self.load_user(user_id).await?))
    }

    pub(super) async fn list_audit_page(
        &self,
        request: pb::ListAuditRequest,
    ) -> Result<pb::ListAuditResponse, Error> {
        let page = Page::from_request(
            request.page_size,
            &request.page_token,
            self.ctx.config.max_page_size,
        )?;
        let entries = self.store().list_audit(page.offset, page.limit).await?;
        Ok(pb::ListAuditResponse {
            next_page_token: page.next_token(entries.len()),
            entries: entries.into_iter().map(audit_to_pb).collect(),
        })
    }
}

/// The `JobAdmin` RPCs of this concept, called by the shell in `mod.rs`.
impl JobAdminService {
    pub(super) async fn create_user_rpc(
        &self,
        request: Request<pb::CreateUserRequest>,
    ) -> RpcResult<pb::CreateUserResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        reply(
            self.create_user_checked(&caller, request.into_inner())
                .await,
        )
    }

    pub(super) async fn list_users_rpc(
        &self,
        request: Request<pb::ListUsersRequest>,
    ) -> RpcResult<pb::ListUsersResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        reply(self.list_users_all().await)
    }

    pub(super) async fn delete_user_rpc(
        &self,
        request: Request<pb::DeleteUserRequest>,
    ) -> RpcResult<pb::DeleteUserResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        reply(
            self.delete_user_checked(&caller, request.into_inner().id)
                .await,
        )
    }

    pub(super) async fn create_token_rpc(
        &self,
        request: Request<pb::CreateTokenRequest>,
    ) -> RpcResult<pb::CreateTokenResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        reply(
            self.create_token_checked(&caller, request.into_inner())
                .await,
        )
    }

    pub(super) async fn list_tokens_rpc(
        &self,
        request: Request<pb::ListTokensRequest>,
    ) -> RpcResult<pb::ListTokensResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        reply(self.list_tokens_of(request.into_inner().user_id).await)
    }

    pub(super) async fn revoke_token_rpc(
        &self,
        request: Request<pb::RevokeTokenRequest>,
    ) -> RpcResult<pb::RevokeTokenResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        reply(
            self.revoke_token_checked(&caller, request.into_inner().id)
                .await,
        )
    }

    pub(super) async fn set_user_role_rpc(
        &self,
        request: Request<pb::SetUserRoleRequest>,
    ) -> RpcResult<pb::SetUserRoleResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        reply(self.set_role_checked(&caller, request.into_inner()).await)
    }

    pub(super) async fn change_password_rpc(
        &self,
        request: Request<pb::ChangePasswordRequest>,
    ) -> RpcResult<pb::ChangePasswordResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ChangeOwnPassword, Scope::Any)?;
        reply(
            self.change_own_password(&caller, request.into_inner())
                .await,
        )
    }

    pub(super) async fn reset_password_rpc(
        &self,
        request: Request<pb::ResetPasswordRequest>,
    ) -> RpcResult<pb::ResetPasswordResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        reply(
            self.reset_password_checked(&caller, request.into_inner())
                .await,
        )
    }

    pub(super) async fn grant_group_rpc(
        &self,
        request: Request<pb::GrantGroupRequest>,
    ) -> RpcResult<pb::GrantGroupResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        let request = request.into_inner();
        let user = self
            .set_grant(&caller, request.user_id, GroupId(request.group_id), true)
            .await;
        reply(user.map(|user| pb::GrantGroupResponse { user: Some(user) }))
    }

    pub(super) async fn revoke_group_rpc(
        &self,
        request: Request<pb::RevokeGroupRequest>,
    ) -> RpcResult<pb::RevokeGroupResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageUsers, Scope::Any)?;
        let request = request.into_inner();
        let user = self
            .set_grant(&caller, request.user_id, GroupId(request.group_id), false)
            .await;
        reply(user.map(|user| pb::RevokeGroupResponse { user: Some(user) }))
    }

    pub(super) async fn who_am_i_rpc(
        &self,
        request: Request<pb::WhoAmIRequest>,
    ) -> RpcResult<pb::WhoAmIResponse> {
        let caller = self.caller(&request).await?;
        reply(Ok(match caller {
            Caller::Open => pb::WhoAmIResponse {
                user: None,
                open: true,
            },
            Caller::User(user) => pb::WhoAmIResponse {
                user: Some(user_to_pb(user)),
                open: false,
            },
        }))
    }

    pub(super) async fn list_audit_rpc(
        &self,
        request: Request<pb::ListAuditRequest>,
    ) -> RpcResult<pb::ListAuditResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ReadAudit, Scope::Any)?;
        reply(self.list_audit_page(request.into_inner()).await)
    }
}
