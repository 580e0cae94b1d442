//! Executor groups: create, update, delete, list (with their live executors' addresses).

use std::sync::Arc;

use xjob_proto::pb;

use super::JobAdminService;
use super::RpcResult;
use super::group_object;
use super::group_summary;
use super::reply;
use crate::api::convert::required;
use crate::api::convert::{Page, group_from_pb, group_to_pb};
use crate::auth::Permission;
use crate::auth::Scope;
use crate::error::Error;
use crate::model::validate::validate_group;
use crate::model::{AddressType, Group, GroupId};
use crate::store::writer_gate::api_write;
use tonic::Request;

/// What reads show instead of a group's access token: the token is only returned by the
/// calls that set it (CreateGroup, UpdateGroup). An update that sends the mask back keeps the
/// token unchanged, so a console can edit a group it read.
pub const TOKEN_MASK: &str = "********";

impl JobAdminService {
    /// Converts a group to the wire with the addresses of its live executors.
    pub(super) fn group_with_online(&self, group: Group) -> pb::Group {
        let online = self.ctx.registry.online_addresses(&group.app_name);
        group_to_pb(group, online)
    }

    /// Like [`Self::group_with_online`], with the access token masked (reads and lists).
    pub(super) fn group_masked(&self, mut group: Group) -> pb::Group {
        if !group.access_token.is_empty() {
            group.access_token = TOKEN_MASK.to_string();
        }
        self.group_with_online(group)
    }

    /// Validates a group for create/update; app names are unique.
    pub(super) async fn check_group(&self, group: &mut Group) -> Result<(), Error> {
        validate_group(group, "group")?;
        if group.address_type == AddressType::Auto {
            // Addresses of an AUTO group come from the registry; typed ones would only mislead.
            group.addresses.clear();
        }
        if let Some(existing) = self.store().get_group_by_app(&group.app_name).await?
            && existing.id != group.id
        {
            let message = format!("group.app_name: '{}' already exists", group.app_name);
            return Err(Error::AlreadyExists(message));
        }
        Ok(())
    }

    pub(super) async fn create_group_checked(
        &self,
        wire_group: pb::Group,
    ) -> Result<pb::Group, Error> {
        let mut group = group_from_pb(wire_group, "group")?;
        group.id = GroupId(0);
        self.check_group(&mut group).await?;
        group.updated_ms = self.ctx.clock.now_ms();
        let created = self.store().insert_group(&group).await?;
        Ok(self.group_with_online(created))
    }

    /// Updates a group; says whether its access token changed.
    pub(super) async fn update_group_checked(
        &self,
        wire_group: pb::Group,
    ) -> Result<(pb::Group, bool), Error> {
        let mut group = group_from_pb(wire_group, "group")?;
        let existing = self.load_group(group.id).await?;
        if group.access_token == TOKEN_MASK {
            group.access_token = existing.access_token.clone();
        }
        let token_changed = group.access_token != existing.access_token;
        if group.app_name != existing.app_name {
            let message = format!("cannot change (is '{}')", existing.app_name);
            return Err(Error::invalid("group.app_name", message));
        }
        self.check_group(&mut group).await?;
        group.updated_ms = self.ctx.clock.now_ms();
        if !self.store().update_group(&group).await? {
            return Err(Error::NotFound(format!("group {} not found", group.id)));
        }
        if token_changed {
            // Executors registered with the old token (or none) must not keep receiving runs.
            crate::registry::stream::close_app_sessions(
                &self.ctx.sessions,
                &group.app_name,
                &group.access_token,
            )
            .await;
        }
        Ok((self.group_with_online(group), token_changed))
    }

    pub(super) async fn delete_group_checked(&self, id: GroupId) -> Result<(), Error> {
        let job_count = self.store().count_jobs_in_group(id).await?;
        if job_count > 0 {
            let message = format!("group {id} is used by {job_count} job(s); delete them first");
            return Err(Error::FailedPrecondition(message));
        }
        if !self.store().delete_group(id).await? {
            return Err(Error::NotFound(format!("group {id} not found")));
        }
        Ok(())
    }

    /// `visible`: the caller's groups (`None` = all); the database filters by them, so a page
    /// holds only what the caller may see and is still full.
    pub(super) async fn list_groups_page(
        &self,
        request: pb::ListGroupsRequest,
        visible: Option<Vec<GroupId>>,
    ) -> Result<pb::ListGroupsResponse, Error> {
        let page = Page::from_request(
            request.page_size,
            &request.page_token,
            self.ctx.config.max_page_size,
        )?;
        let groups = match visible {
            None => {
                self.store()
                    .list_groups(&request.app_name, page.offset, page.limit)
                    .await?
            }
            // A user's grants are few: their groups are read by id and paged here, by id.
            Some(ids) => {
                let mut groups: Vec<Group> = self
                    .store()
                    .get_groups(&ids)
                    .await?
                    .into_values()
                    .map(Arc::unwrap_or_clone)
                    .collect();
                groups.sort_by_key(|group| group.id);
                groups
                    .into_iter()
                    .filter(|group| group.app_name.contains(request.app_name.as_str()))
                    .skip(usize::try_from(page.offset).unwrap_or(usize::MAX))
                    .take(usize::try_from(page.limit).unwrap_or(0))
                    .collect()
            }
        };
        Ok(pb::ListGroupsResponse {
            next_page_token: page.next_token(groups.len()),
            groups: groups
                .into_iter()
                .map(|group| self.group_masked(group))
                .collect(),
        })
    }
}

/// The `JobAdmin` RPCs of this concept, called by the shell in `mod.rs`.
impl JobAdminService {
    pub(super) async fn create_group_rpc(
        &self,
        request: Request<pb::CreateGroupRequest>,
    ) -> RpcResult<pb::CreateGroupResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageGroups, Scope::Any)?;
        let wire_group = required(request.into_inner().group, "group")?;
        let group = api_write(self.create_group_checked(wire_group)).await?;
        self.audit(
            &caller,
            "CreateGroup",
            group_object(GroupId(group.id)),
            group_summary(&group),
        )
        .await;
        reply(Ok(pb::CreateGroupResponse { group: Some(group) }))
    }

    pub(super) async fn update_group_rpc(
        &self,
        request: Request<pb::UpdateGroupRequest>,
    ) -> RpcResult<pb::UpdateGroupResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageGroups, Scope::Any)?;
        let wire_group = required(request.into_inner().group, "group")?;
        let (group, token_changed) = api_write(self.update_group_checked(wire_group)).await?;
        let summary = format!(
            "{}{}",
            group_summary(&group),
            if token_changed {
                ", access token changed"
            } else {
                ""
            }
        );
        self.audit(
            &caller,
            "UpdateGroup",
            group_object(GroupId(group.id)),
            summary,
        )
        .await;
        reply(Ok(pb::UpdateGroupResponse { group: Some(group) }))
    }

    pub(super) async fn delete_group_rpc(
        &self,
        request: Request<pb::DeleteGroupRequest>,
    ) -> RpcResult<pb::DeleteGroupResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::ManageGroups, Scope::Any)?;
        let id = GroupId(request.into_inner().id);
        api_write(self.delete_group_checked(id)).await?;
        self.audit(&caller, "DeleteGroup", group_object(id), String::new())
            .await;
        reply(Ok(pb::DeleteGroupResponse {}))
    }

    pub(super) async fn get_group_rpc(
        &self,
        request: Request<pb::GetGroupRequest>,
    ) -> RpcResult<pb::GetGroupResponse> {
        let caller = self.caller(&request).await?;
        let group = self
            .visible_group(&caller, GroupId(request.into_inner().id))
            .await?;
        reply(Ok(pb::GetGroupResponse {
            group: Some(self.group_masked(group)),
        }))
    }

    pub(super) async fn list_groups_rpc(
        &self,
        request: Request<pb::ListGroupsRequest>,
    ) -> RpcResult<pb::ListGroupsResponse> {
        let caller = self.caller(&request).await?;
        caller.require(Permission::Read, Scope::Any)?;
        let mut page = self
            .list_groups_page(request.into_inner(), caller.readable_groups())
            .await?;
        page.groups
            .retain(|group| caller.may_read(GroupId(group.id)));
        reply(Ok(page))
    }
}
