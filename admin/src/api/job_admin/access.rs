//! The authorization step shared by every `JobAdmin` RPC, and the audit trail of changes.

use std::collections::HashSet;

use tonic::{Request, Status};

use super::JobAdminService;
use crate::auth::{Caller, Permission, ResolvedCaller, Scope};
use crate::error::Error;
use crate::model::validate::validate_executor_addresses;
use crate::model::{AuditEntry, Group, GroupId, Job, JobId, LogId, RunLog};

impl JobAdminService {
    /// The caller of a request (`UNAUTHENTICATED` without a valid token).
    /// A caller the console resolved from its session comes in the request's extensions.
    pub(super) async fn caller<T>(&self, request: &Request<T>) -> Result<Caller, Status> {
        if let Some(ResolvedCaller(caller)) = request.extensions().get::<ResolvedCaller>() {
            return Ok(caller.clone());
        }
        self.auth.caller(request.metadata()).await
    }

    /// Requires `permission` in the group of job `job_id` (`NOT_FOUND` when there is none, or
    /// when the caller may not read its group: see [`JobAdminService::visible_job`]).
    pub(super) async fn require_in_job(
        &self,
        caller: &Caller,
        permission: Permission,
        job_id: JobId,
    ) -> Result<(), Status> {
        let job = self.visible_job(caller, job_id).await?;
        caller.require(permission, Scope::Group(job.group_id))
    }

    /// Job `id`, if the caller may read its group. A job of a group the caller cannot read is
    /// answered exactly like a job that does not exist (`NOT_FOUND "job N not found"`), so an
    /// outsider learns neither which ids exist nor which group holds them. A caller who may
    /// read the group but lacks the permission a call needs gets `PERMISSION_DENIED` from
    /// [`Caller::require`] as before: it already sees the job.
    pub(super) async fn visible_job(&self, caller: &Caller, id: JobId) -> Result<Job, Error> {
        let job = self.load_job(id).await?;
        if caller.may_read(job.group_id) {
            Ok(job)
        } else {
            Err(Error::NotFound(format!("job {id} not found")))
        }
    }

    /// Group `id`, if the caller may read it; else the same `NOT_FOUND` as for no group.
    pub(super) async fn visible_group(&self, caller: &Caller, id: GroupId) -> Result<Group, Error> {
        let group = self.load_group(id).await?;
        if caller.may_read(group.id) {
            Ok(group)
        } else {
            Err(Error::NotFound(format!("group {id} not found")))
        }
    }

    /// Run `id`, if the caller may read its group; else the same `NOT_FOUND` as for no run.
    pub(super) async fn visible_log(&self, caller: &Caller, id: LogId) -> Result<RunLog, Error> {
        let run = self.load_log(id).await?;
        if caller.may_read(run.group_id) {
            Ok(run)
        } else {
            Err(Error::NotFound(format!("log {id} not found")))
        }
    }

    /// A child link makes the parent's runs start the child: whoever adds one must be allowed
    /// to run the child (`jobs.operate` in the child's group), else an operator of one group
    /// could run another group's jobs by linking them under its own. Links the job already had
    /// are kept without a check (an admin may have set them). A child in a group the caller
    /// cannot read is answered as a missing child.
    pub(super) async fn check_child_links(
        &self,
        caller: &Caller,
        wanted: &[JobId],
        existing: &[JobId],
    ) -> Result<(), Status> {
        let mut added: Vec<JobId> = wanted
            .iter()
            .copied()
            .filter(|id| !existing.contains(id))
            .collect();
        added.sort_unstable();
        added.dedup();
        if added.is_empty() || caller.is_admin() {
            return Ok(());
        }
        // Missing children are left to `check_job`, which names the first one.
        let children = self.store().get_jobs(&added).await.map_err(Error::from)?;
        for child in added.iter().filter_map(|id| children.get(id)) {
            if !caller.may_read(child.group_id) {
                let message = format!("job.child_job_ids: job {} not found", child.id);
                return Err(Error::NotFound(message).into());
            }
            caller.require(Permission::Operate, Scope::Group(child.group_id))?;
        }
        Ok(())
    }

    /// App names of the groups the caller may read; `None` = every app (admins, open mode).
    pub(super) async fn readable_app_names(
        &self,
        caller: &Caller,
    ) -> Result<Option<HashSet<String>>, Error> {
        let Caller::User(user) = caller else {
            return Ok(None);
        };
        if caller.is_admin() {
            return Ok(None);
        }
        let mut apps = HashSet::new();
        for group_id in &user.group_ids {
            if let Some(group) = self.store().get_group(*group_id).await? {
                apps.insert(group.app_name);
            }
        }
        Ok(Some(apps))
    }

    /// TriggerJob's address override makes this admin dial the addresses named: only those of
    /// the job's group (its MANUAL list or its live executors), unless an admin asks and the
    /// configuration allows any address (`trigger_any_address`).
    pub(super) async fn check_override_addresses(
        &self,
        caller: &Caller,
        job: &Job,
        addresses: &[String],
    ) -> Result<(), Status> {
        if addresses.is_empty() {
            return Ok(());
        }
        // A malformed address is INVALID_ARGUMENT naming it, whoever asks.
        validate_executor_addresses(addresses, "addresses").map_err(Error::from)?;
        if self.ctx.config.trigger_any_address
            && caller.allows(Permission::TriggerAnyAddress, Scope::Any)
        {
            return Ok(());
        }
        let group = self.load_group(job.group_id).await?;
        let mut known: HashSet<String> = group.addresses.iter().cloned().collect();
        known.extend(self.ctx.registry.online_addresses(&group.app_name));
        if let Some(foreign) = addresses.iter().find(|address| !known.contains(*address)) {
            let shown: String = foreign.chars().take(64).collect();
            return Err(Status::permission_denied(format!(
                "missing permission {}: address '{shown}' is not an address of group {} \
                 (admins may use any address when trigger_any_address is set)",
                Permission::TriggerAnyAddress.name(),
                group.id
            )));
        }
        Ok(())
    }

    /// Records a change in the audit trail. The change is already made: a failed write is
    /// logged, not returned (the caller would retry a change that happened).
    pub(super) async fn audit(&self, caller: &Caller, call: &str, object: String, summary: String) {
        let entry = AuditEntry {
            id: 0,
            at_ms: self.ctx.clock.now_ms(),
            actor: caller.actor().to_string(),
            call: call.to_string(),
            object,
            summary,
        };
        // An API write: it goes ahead of background writes on SQLite's single writer.
        let written = crate::store::writer_gate::api_write(self.store().insert_audit(&entry)).await;
        if let Err(error) = written {
            tracing::error!(%error, actor = %entry.actor, call, object = %entry.object,
                summary = %entry.summary, "audit entry not written");
        }
    }
}

impl JobAdminService {
    pub(super) async fn load_group(&self, id: GroupId) -> Result<Group, Error> {
        let group = self.store().get_group(id).await?;
        group.ok_or_else(|| Error::NotFound(format!("group {id} not found")))
    }

    pub(super) async fn load_job(&self, id: JobId) -> Result<Job, Error> {
        let job = self.store().get_job(id).await?;
        job.ok_or_else(|| Error::NotFound(format!("job {id} not found")))
    }

    pub(super) async fn load_log(&self, id: LogId) -> Result<RunLog, Error> {
        let run = self.store().get_log(id).await?;
        let run = run.ok_or_else(|| Error::NotFound(format!("log {id} not found")))?;
        Ok(self.ctx.trigger.with_held_outcome(run))
    }
}
