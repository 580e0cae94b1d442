//! JobAdmin users, roles and per-group grants (docs/security.md): every RPC against every role
//! (allowed / PERMISSION_DENIED / UNAUTHENTICATED), expired and revoked tokens, lists filtered
//! to the caller's groups, and the audit trail of the changes made.

use std::time::Duration;

use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;
use xjob_tests::{TestCluster, wait_until};

/// What a call must come to for one caller.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Past the authorization step (any other outcome: OK, NOT_FOUND, FAILED_PRECONDITION…).
    Allowed,
    Denied,
    /// Refused as if the object did not exist (`NOT_FOUND`): the caller may not read its group,
    /// so it must not learn that it exists.
    Hidden,
}
use Expect::{Allowed, Denied, Hidden};

/// Objects the calls act on: group A (granted to the viewer and the operator) and group B (not).
struct Fixture {
    client: JobAdminClient<Channel>,
    admin_token: String,
    group_a: i64,
    group_b: i64,
    job_a: i64,
    job_b: i64,
    log_a: i64,
    log_b: i64,
    workflow_a: i64,
    workflow_b: i64,
    viewer_id: i64,
    operator_id: i64,
}

fn authed<T>(message: T, token: Option<&str>) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(token) = token
        && let Ok(value) = format!("Bearer {token}").parse()
    {
        request.metadata_mut().insert("authorization", value);
    }
    request
}

fn job(group_id: i64, name: &str) -> pb::Job {
    let mut job = TestCluster::job(group_id, "ok", pb::ScheduleType::None, "");
    job.name = name.to_string();
    job
}

fn group(app_name: &str) -> pb::Group {
    pb::Group {
        app_name: app_name.to_string(),
        title: app_name.to_string(),
        address_type: pb::AddressType::Auto as i32,
        access_token: "group-secret-token".to_string(),
        ..Default::default()
    }
}

/// Every JobAdmin RPC, with arguments that reach its authorization step.
#[derive(Debug, Clone, Copy)]
enum Rpc {
    CreateGroup,
    UpdateGroupA,
    DeleteGroupMissing,
    GetGroupA,
    GetGroupB,
    ListGroups,
    CreateJobA,
    CreateJobB,
    UpdateJobA,
    DeleteJobA,
    GetJobA,
    GetJobB,
    ListJobs,
    ListJobsOfB,
    StartJobA,
    StopJobA,
    TriggerJobA,
    TriggerJobAOnForeignAddress,
    UpdateGlueA,
    ListGlueVersionsA,
    GetGlueVersionMissing,
    PreviewSchedule,
    ListLogs,
    GetLogA,
    GetLogB,
    KillRunA,
    ReadRunLogA,
    ClearLogsA,
    ClearLogsAll,
    ListExecutors,
    GetDashboard,
    CreateUser,
    ListUsers,
    DeleteUserMissing,
    CreateToken,
    ListTokens,
    RevokeTokenMissing,
    GrantGroup,
    RevokeGroupMissing,
    SetUserRoleMissing,
    ResetPasswordMissing,
    ChangeOwnPasswordWrong,
    WhoAmI,
    ListAudit,
    CreateCalendar,
    UpdateCalendarMissing,
    DeleteCalendarMissing,
    GetCalendarMissing,
    ListCalendars,
    CreateWorkflowA,
    CreateWorkflowAWithJobB,
    UpdateWorkflowA,
    GetWorkflowA,
    GetWorkflowB,
    ListWorkflows,
    ListWorkflowsOfB,
    DeleteWorkflowA,
}

/// (call, expected for viewer, operator, admin). Without a token every call is
/// UNAUTHENTICATED.
const TABLE: &[(Rpc, [Expect; 3])] = &[
    (Rpc::CreateGroup, [Denied, Denied, Allowed]),
    (Rpc::UpdateGroupA, [Denied, Denied, Allowed]),
    (Rpc::DeleteGroupMissing, [Denied, Denied, Allowed]),
    (Rpc::GetGroupA, [Allowed, Allowed, Allowed]),
    (Rpc::GetGroupB, [Hidden, Hidden, Allowed]),
    (Rpc::ListGroups, [Allowed, Allowed, Allowed]),
    (Rpc::CreateJobA, [Denied, Allowed, Allowed]),
    (Rpc::CreateJobB, [Denied, Denied, Allowed]),
    (Rpc::UpdateJobA, [Denied, Allowed, Allowed]),
    (Rpc::DeleteJobA, [Denied, Allowed, Allowed]),
    (Rpc::GetJobA, [Allowed, Allowed, Allowed]),
    (Rpc::GetJobB, [Hidden, Hidden, Allowed]),
    (Rpc::ListJobs, [Allowed, Allowed, Allowed]),
    (Rpc::ListJobsOfB, [Denied, Denied, Allowed]),
    (Rpc::StartJobA, [Denied, Allowed, Allowed]),
    (Rpc::StopJobA, [Denied, Allowed, Allowed]),
    (Rpc::TriggerJobA, [Denied, Allowed, Allowed]),
    // Only an admin with trigger_any_address may name an address outside the group.
    (Rpc::TriggerJobAOnForeignAddress, [Denied, Denied, Denied]),
    (Rpc::UpdateGlueA, [Denied, Allowed, Allowed]),
    (Rpc::ListGlueVersionsA, [Allowed, Allowed, Allowed]),
    (Rpc::GetGlueVersionMissing, [Allowed, Allowed, Allowed]),
    (Rpc::PreviewSchedule, [Allowed, Allowed, Allowed]),
    (Rpc::ListLogs, [Allowed, Allowed, Allowed]),
    (Rpc::GetLogA, [Allowed, Allowed, Allowed]),
    (Rpc::GetLogB, [Hidden, Hidden, Allowed]),
    (Rpc::KillRunA, [Denied, Allowed, Allowed]),
    (Rpc::ReadRunLogA, [Allowed, Allowed, Allowed]),
    (Rpc::ClearLogsA, [Denied, Allowed, Allowed]),
    (Rpc::ClearLogsAll, [Denied, Denied, Allowed]),
    (Rpc::ListExecutors, [Allowed, Allowed, Allowed]),
    (Rpc::GetDashboard, [Allowed, Allowed, Allowed]),
    (Rpc::CreateUser, [Denied, Denied, Allowed]),
    (Rpc::ListUsers, [Denied, Denied, Allowed]),
    (Rpc::DeleteUserMissing, [Denied, Denied, Allowed]),
    (Rpc::CreateToken, [Denied, Denied, Allowed]),
    (Rpc::ListTokens, [Denied, Denied, Allowed]),
    (Rpc::RevokeTokenMissing, [Denied, Denied, Allowed]),
    (Rpc::GrantGroup, [Denied, Denied, Allowed]),
    (Rpc::RevokeGroupMissing, [Denied, Denied, Allowed]),
    (Rpc::SetUserRoleMissing, [Denied, Denied, Allowed]),
    (Rpc::ResetPasswordMissing, [Denied, Denied, Allowed]),
    // Every user may change their own password (this one with a wrong current password).
    (Rpc::ChangeOwnPasswordWrong, [Allowed, Allowed, Allowed]),
    (Rpc::WhoAmI, [Allowed, Allowed, Allowed]),
    (Rpc::ListAudit, [Denied, Denied, Allowed]),
    // Calendars are shared by every group: admins change them, everyone reads them.
    (Rpc::CreateCalendar, [Denied, Denied, Allowed]),
    (Rpc::UpdateCalendarMissing, [Denied, Denied, Allowed]),
    (Rpc::DeleteCalendarMissing, [Denied, Denied, Allowed]),
    (Rpc::GetCalendarMissing, [Allowed, Allowed, Allowed]),
    (Rpc::ListCalendars, [Allowed, Allowed, Allowed]),
    (Rpc::CreateWorkflowA, [Denied, Allowed, Allowed]),
    // A node runs its job: a job of a group the operator cannot read is answered as missing.
    (Rpc::CreateWorkflowAWithJobB, [Denied, Hidden, Allowed]),
    (Rpc::UpdateWorkflowA, [Denied, Allowed, Allowed]),
    (Rpc::GetWorkflowA, [Allowed, Allowed, Allowed]),
    (Rpc::GetWorkflowB, [Hidden, Hidden, Allowed]),
    (Rpc::ListWorkflows, [Allowed, Allowed, Allowed]),
    (Rpc::ListWorkflowsOfB, [Denied, Denied, Allowed]),
    // Last: the operator deletes it, the admin then finds nothing (past authorization).
    (Rpc::DeleteWorkflowA, [Denied, Allowed, Allowed]),
];

/// Makes one call as `token`; `Ok` when it got past authorization (whatever else it answered).
async fn call(fx: &Fixture, rpc: Rpc, token: Option<&str>, round: usize) -> Result<(), Status> {
    let mut client = fx.client.clone();
    let unique = format!("r{round}-{}", token.map_or(0, str::len));
    match rpc {
        Rpc::CreateGroup => {
            let app = format!("auth-new-{round}");
            let request = pb::CreateGroupRequest {
                group: Some(group(&app)),
            };
            client.create_group(authed(request, token)).await.map(drop)
        }
        Rpc::UpdateGroupA => {
            let mut updated = group("auth-a");
            updated.id = fx.group_a;
            updated.access_token = "********".to_string();
            let request = pb::UpdateGroupRequest {
                group: Some(updated),
            };
            client.update_group(authed(request, token)).await.map(drop)
        }
        Rpc::DeleteGroupMissing => {
            let request = pb::DeleteGroupRequest { id: 999_999 };
            client.delete_group(authed(request, token)).await.map(drop)
        }
        Rpc::GetGroupA | Rpc::GetGroupB => {
            let id = if matches!(rpc, Rpc::GetGroupA) {
                fx.group_a
            } else {
                fx.group_b
            };
            let request = pb::GetGroupRequest { id };
            client.get_group(authed(request, token)).await.map(drop)
        }
        Rpc::ListGroups => {
            let request = pb::ListGroupsRequest::default();
            client.list_groups(authed(request, token)).await.map(drop)
        }
        Rpc::CreateJobA | Rpc::CreateJobB => {
            let group_id = if matches!(rpc, Rpc::CreateJobA) {
                fx.group_a
            } else {
                fx.group_b
            };
            let request = pb::CreateJobRequest {
                job: Some(job(group_id, &format!("new {unique}"))),
            };
            client.create_job(authed(request, token)).await.map(drop)
        }
        Rpc::UpdateJobA => {
            let mut updated = job(fx.group_a, "job a");
            updated.id = fx.job_a;
            let request = pb::UpdateJobRequest { job: Some(updated) };
            client.update_job(authed(request, token)).await.map(drop)
        }
        Rpc::DeleteJobA => {
            // A throwaway job of group A, made by the admin, for each caller to try.
            let request = pb::CreateJobRequest {
                job: Some(job(fx.group_a, &format!("doomed {unique}"))),
            };
            let created = client
                .create_job(authed(request, Some(&fx.admin_token)))
                .await?
                .into_inner()
                .job
                .map_or(0, |job| job.id);
            let request = pb::DeleteJobRequest { id: created };
            client.delete_job(authed(request, token)).await.map(drop)
        }
        Rpc::GetJobA | Rpc::GetJobB => {
            let id = if matches!(rpc, Rpc::GetJobA) {
                fx.job_a
            } else {
                fx.job_b
            };
            client
                .get_job(authed(pb::GetJobRequest { id }, token))
                .await
                .map(drop)
        }
        Rpc::ListJobs | Rpc::ListJobsOfB => {
            let group_id = if matches!(rpc, Rpc::ListJobs) {
                0
            } else {
                fx.group_b
            };
            let request = pb::ListJobsRequest {
                group_id,
                ..Default::default()
            };
            client.list_jobs(authed(request, token)).await.map(drop)
        }
        Rpc::StartJobA => {
            let request = pb::StartJobRequest { id: fx.job_a };
            client.start_job(authed(request, token)).await.map(drop)
        }
        Rpc::StopJobA => {
            let request = pb::StopJobRequest { id: fx.job_a };
            client.stop_job(authed(request, token)).await.map(drop)
        }
        Rpc::TriggerJobA | Rpc::TriggerJobAOnForeignAddress => {
            let addresses = if matches!(rpc, Rpc::TriggerJobA) {
                vec![]
            } else {
                vec!["http://127.0.0.1:9".to_string()]
            };
            let request = pb::TriggerJobRequest {
                id: fx.job_a,
                params: None,
                addresses,
            };
            client.trigger_job(authed(request, token)).await.map(drop)
        }
        Rpc::UpdateGlueA => {
            let request = pb::UpdateGlueRequest {
                job_id: fx.job_a,
                ..Default::default()
            };
            client.update_glue(authed(request, token)).await.map(drop)
        }
        Rpc::ListGlueVersionsA => {
            let request = pb::ListGlueVersionsRequest { job_id: fx.job_a };
            client
                .list_glue_versions(authed(request, token))
                .await
                .map(drop)
        }
        Rpc::GetGlueVersionMissing => {
            let request = pb::GetGlueVersionRequest { id: 999_999 };
            client
                .get_glue_version(authed(request, token))
                .await
                .map(drop)
        }
        Rpc::PreviewSchedule => {
            let request = pb::PreviewScheduleRequest {
                schedule_type: pb::ScheduleType::FixRate as i32,
                schedule_conf: "60".to_string(),
                count: 2,
                ..Default::default()
            };
            client
                .preview_schedule(authed(request, token))
                .await
                .map(drop)
        }
        Rpc::ListLogs => {
            let request = pb::ListLogsRequest::default();
            client.list_logs(authed(request, token)).await.map(drop)
        }
        Rpc::GetLogA | Rpc::GetLogB => {
            let id = if matches!(rpc, Rpc::GetLogA) {
                fx.log_a
            } else {
                fx.log_b
            };
            client
                .get_log(authed(pb::GetLogRequest { id }, token))
                .await
                .map(drop)
        }
        Rpc::KillRunA => {
            let request = pb::KillRunRequest { log_id: fx.log_a };
            client.kill_run(authed(request, token)).await.map(drop)
        }
        Rpc::ReadRunLogA => {
            let request = pb::ReadRunLogRequest {
                log_id: fx.log_a,
                from_line: 1,
            };
            client.read_run_log(authed(request, token)).await.map(drop)
        }
        Rpc::ClearLogsA | Rpc::ClearLogsAll => {
            let group_id = if matches!(rpc, Rpc::ClearLogsA) {
                fx.group_a
            } else {
                0
            };
            let request = pb::ClearLogsRequest {
                group_id,
                job_id: 0,
                // Keeps the newest 100 000: deletes nothing here.
                mode: pb::ClearLogsMode::KeepLatest100000 as i32,
            };
            client.clear_logs(authed(request, token)).await.map(drop)
        }
        Rpc::ListExecutors => {
            let request = pb::ListExecutorsRequest::default();
            client
                .list_executors(authed(request, token))
                .await
                .map(drop)
        }
        Rpc::GetDashboard => {
            let request = pb::GetDashboardRequest::default();
            client.get_dashboard(authed(request, token)).await.map(drop)
        }
        Rpc::CreateUser => {
            let request = pb::CreateUserRequest {
                name: format!("made-{unique}"),
                role: "viewer".to_string(),
                ..Default::default()
            };
            client.create_user(authed(request, token)).await.map(drop)
        }
        Rpc::ListUsers => client
            .list_users(authed(pb::ListUsersRequest {}, token))
            .await
            .map(drop),
        Rpc::DeleteUserMissing => {
            let request = pb::DeleteUserRequest { id: 999_999 };
            client.delete_user(authed(request, token)).await.map(drop)
        }
        Rpc::CreateToken => {
            let request = pb::CreateTokenRequest {
                user_id: fx.viewer_id,
                ttl_ms: 60_000,
                description: "table".to_string(),
            };
            client.create_token(authed(request, token)).await.map(drop)
        }
        Rpc::ListTokens => {
            let request = pb::ListTokensRequest {
                user_id: fx.viewer_id,
            };
            client.list_tokens(authed(request, token)).await.map(drop)
        }
        Rpc::RevokeTokenMissing => {
            let request = pb::RevokeTokenRequest { id: 999_999 };
            client.revoke_token(authed(request, token)).await.map(drop)
        }
        Rpc::GrantGroup => {
            let request = pb::GrantGroupRequest {
                user_id: fx.operator_id,
                group_id: fx.group_a,
            };
            client.grant_group(authed(request, token)).await.map(drop)
        }
        Rpc::RevokeGroupMissing => {
            let request = pb::RevokeGroupRequest {
                user_id: fx.viewer_id,
                group_id: 999_999,
            };
            client.revoke_group(authed(request, token)).await.map(drop)
        }
        Rpc::SetUserRoleMissing => {
            let request = pb::SetUserRoleRequest {
                user_id: 999_999,
                role: "viewer".to_string(),
            };
            client.set_user_role(authed(request, token)).await.map(drop)
        }
        Rpc::ResetPasswordMissing => {
            let request = pb::ResetPasswordRequest {
                user_id: 999_999,
                new_password: "a long enough password".to_string(),
            };
            client
                .reset_password(authed(request, token))
                .await
                .map(drop)
        }
        Rpc::ChangeOwnPasswordWrong => {
            let request = pb::ChangePasswordRequest {
                current_password: "not the current password".to_string(),
                new_password: "a long enough password".to_string(),
            };
            client
                .change_password(authed(request, token))
                .await
                .map(drop)
        }
        Rpc::WhoAmI => client
            .who_am_i(authed(pb::WhoAmIRequest {}, token))
            .await
            .map(drop),
        Rpc::ListAudit => {
            let request = pb::ListAuditRequest::default();
            client.list_audit(authed(request, token)).await.map(drop)
        }
        Rpc::CreateCalendar | Rpc::UpdateCalendarMissing => {
            let calendar = pb::Calendar {
                name: if matches!(rpc, Rpc::CreateCalendar) {
                    format!("cal-{unique}")
                } else {
                    "missing".to_string()
                },
                rules: vec!["2026-12-25".to_string()],
                ..Default::default()
            };
            if matches!(rpc, Rpc::CreateCalendar) {
                let request = pb::CreateCalendarRequest {
                    calendar: Some(calendar),
                };
                client
                    .create_calendar(authed(request, token))
                    .await
                    .map(drop)
            } else {
                let request = pb::UpdateCalendarRequest {
                    calendar: Some(calendar),
                };
                client
                    .update_calendar(authed(request, token))
                    .await
                    .map(drop)
            }
        }
        Rpc::DeleteCalendarMissing => {
            let request = pb::DeleteCalendarRequest {
                name: "missing".to_string(),
            };
            client
                .delete_calendar(authed(request, token))
                .await
                .map(drop)
        }
        Rpc::GetCalendarMissing => {
            let request = pb::GetCalendarRequest {
                name: "missing".to_string(),
            };
            client.get_calendar(authed(request, token)).await.map(drop)
        }
        Rpc::ListCalendars => {
            let request = pb::ListCalendarsRequest {};
            client
                .list_calendars(authed(request, token))
                .await
                .map(drop)
        }
        Rpc::CreateWorkflowA | Rpc::CreateWorkflowAWithJobB => {
            let job_id = if matches!(rpc, Rpc::CreateWorkflowA) {
                fx.job_a
            } else {
                fx.job_b
            };
            let request = pb::CreateWorkflowRequest {
                workflow: Some(workflow(fx.group_a, job_id, &unique)),
            };
            client
                .create_workflow(authed(request, token))
                .await
                .map(drop)
        }
        Rpc::UpdateWorkflowA => {
            let mut updated = workflow(fx.group_a, fx.job_a, &unique);
            updated.id = fx.workflow_a;
            let request = pb::UpdateWorkflowRequest {
                workflow: Some(updated),
            };
            client
                .update_workflow(authed(request, token))
                .await
                .map(drop)
        }
        Rpc::GetWorkflowA | Rpc::GetWorkflowB => {
            let id = if matches!(rpc, Rpc::GetWorkflowA) {
                fx.workflow_a
            } else {
                fx.workflow_b
            };
            let request = pb::GetWorkflowRequest { id };
            client.get_workflow(authed(request, token)).await.map(drop)
        }
        Rpc::ListWorkflows | Rpc::ListWorkflowsOfB => {
            let group_id = if matches!(rpc, Rpc::ListWorkflows) {
                0
            } else {
                fx.group_b
            };
            let request = pb::ListWorkflowsRequest {
                group_id,
                ..Default::default()
            };
            client
                .list_workflows(authed(request, token))
                .await
                .map(drop)
        }
        Rpc::DeleteWorkflowA => {
            let request = pb::DeleteWorkflowRequest { id: fx.workflow_a };
            client
                .delete_workflow(authed(request, token))
                .await
                .map(drop)
        }
    }
}

/// A one-node workflow of `job_id` in `group_id`.
fn workflow(group_id: i64, job_id: i64, name: &str) -> pb::Workflow {
    pb::Workflow {
        group_id,
        name: format!("workflow {name}"),
        nodes: vec![pb::WorkflowNode {
            key: "only".to_string(),
            job_id,
            fan_in: pb::WorkflowFanIn::AllSuccess as i32,
        }],
        ..Default::default()
    }
}

async fn create_workflow(cluster: &TestCluster, workflow: pb::Workflow) -> anyhow::Result<i64> {
    let request = pb::CreateWorkflowRequest {
        workflow: Some(workflow),
    };
    let created = cluster
        .client()
        .create_workflow(request)
        .await?
        .into_inner();
    Ok(created.workflow.map_or(0, |workflow| workflow.id))
}

async fn create_user(
    fx_client: &mut JobAdminClient<Channel>,
    admin: Option<&str>,
    name: &str,
    role: &str,
) -> anyhow::Result<(i64, String)> {
    let request = pb::CreateUserRequest {
        name: name.to_string(),
        role: role.to_string(),
        password: "a password for the console".to_string(),
        token_ttl_ms: 0,
    };
    let created = fx_client
        .create_user(authed(request, admin))
        .await?
        .into_inner();
    let user = created.user.ok_or_else(|| anyhow::anyhow!("no user"))?;
    Ok((user.id, created.token))
}

async fn grant(
    fx_client: &mut JobAdminClient<Channel>,
    admin: &str,
    user_id: i64,
    group_id: i64,
) -> anyhow::Result<()> {
    let request = pb::GrantGroupRequest { user_id, group_id };
    fx_client.grant_group(authed(request, Some(admin))).await?;
    Ok(())
}

/// Groups A and B with a job and a run each (made while the admin runs open), then the first
/// admin (made open too: it ends the open mode), a viewer and an operator granted group A.
async fn fixture(cluster: &TestCluster) -> anyhow::Result<(Fixture, String, String)> {
    let group_a = cluster.create_group("auth-a").await?;
    let group_b = cluster.create_group("auth-b").await?;
    let job_a = cluster.create_job(job(group_a, "job a")).await?.id;
    let job_b = cluster.create_job(job(group_b, "job b")).await?.id;
    let log_a = cluster.trigger(job_a, None).await?;
    let log_b = cluster.trigger(job_b, None).await?;
    let workflow_a = create_workflow(cluster, workflow(group_a, job_a, "a")).await?;
    let workflow_b = create_workflow(cluster, workflow(group_b, job_b, "b")).await?;
    let mut client = cluster.client();
    let (_, admin_token) = create_user(&mut client, None, "root", "admin").await?;
    // The first user ends the open mode: no token is now UNAUTHENTICATED.
    let refused = client
        .who_am_i(pb::WhoAmIRequest {})
        .await
        .expect_err("closed");
    assert_eq!(refused.code(), Code::Unauthenticated);
    let (viewer_id, viewer) =
        create_user(&mut client, Some(&admin_token), "vera", "viewer").await?;
    let (operator_id, operator) =
        create_user(&mut client, Some(&admin_token), "otto", "operator").await?;
    grant(&mut client, &admin_token, viewer_id, group_a).await?;
    grant(&mut client, &admin_token, operator_id, group_a).await?;
    let fx = Fixture {
        client,
        admin_token,
        group_a,
        group_b,
        job_a,
        job_b,
        log_a,
        log_b,
        workflow_a,
        workflow_b,
        viewer_id,
        operator_id,
    };
    Ok((fx, viewer, operator))
}

#[tokio::test]
async fn every_role_against_every_rpc() -> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let (fx, viewer, operator) = fixture(&cluster).await?;
    let callers = [
        ("viewer", viewer.as_str()),
        ("operator", operator.as_str()),
        ("admin", fx.admin_token.as_str()),
    ];
    let mut failures = Vec::new();
    for (round, (rpc, expected)) in TABLE.iter().enumerate() {
        let anonymous = call(&fx, *rpc, None, round).await;
        if anonymous.as_ref().err().map(Status::code) != Some(Code::Unauthenticated) {
            failures.push(format!("{rpc:?} without a token: {anonymous:?}"));
        }
        let forged = call(&fx, *rpc, Some("xjob_not-a-real-token"), round).await;
        if forged.as_ref().err().map(Status::code) != Some(Code::Unauthenticated) {
            failures.push(format!("{rpc:?} with an unknown token: {forged:?}"));
        }
        for ((role, token), expect) in callers.iter().zip(expected) {
            let outcome = call(&fx, *rpc, Some(token), round * 10 + role.len()).await;
            let code = outcome.as_ref().err().map(Status::code);
            let ok = match expect {
                Allowed => !matches!(code, Some(Code::PermissionDenied | Code::Unauthenticated)),
                Hidden => code == Some(Code::NotFound),
                Denied => {
                    code == Some(Code::PermissionDenied)
                        && outcome
                            .as_ref()
                            .err()
                            .is_some_and(|status| status.message().contains("permission"))
                }
            };
            if !ok {
                failures.push(format!(
                    "{rpc:?} as {role}: expected {expect:?}, got {outcome:?}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn lists_show_only_granted_groups_and_never_tokens() -> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let (fx, viewer, _) = fixture(&cluster).await?;
    let mut client = fx.client.clone();

    let groups = client
        .list_groups(authed(pb::ListGroupsRequest::default(), Some(&viewer)))
        .await?
        .into_inner()
        .groups;
    let ids: Vec<i64> = groups.iter().map(|group| group.id).collect();
    assert_eq!(ids, vec![fx.group_a]);
    let jobs = client
        .list_jobs(authed(pb::ListJobsRequest::default(), Some(&viewer)))
        .await?
        .into_inner()
        .jobs;
    assert!(
        !jobs.is_empty() && jobs.iter().all(|job| job.group_id == fx.group_a),
        "{jobs:?}"
    );
    let logs = client
        .list_logs(authed(pb::ListLogsRequest::default(), Some(&viewer)))
        .await?
        .into_inner()
        .logs;
    let log_ids: Vec<i64> = logs.iter().map(|log| log.id).collect();
    assert_eq!(log_ids, vec![fx.log_a]);

    // A group's access token is shown by the call that sets it, masked by every read.
    let mut secret = group("auth-secret");
    secret.access_token = "shown-once-token".to_string();
    let created = client
        .create_group(authed(
            pb::CreateGroupRequest {
                group: Some(secret),
            },
            Some(&fx.admin_token),
        ))
        .await?
        .into_inner()
        .group
        .ok_or_else(|| anyhow::anyhow!("no group"))?;
    assert_eq!(created.access_token, "shown-once-token");
    let read = client
        .get_group(authed(
            pb::GetGroupRequest { id: created.id },
            Some(&fx.admin_token),
        ))
        .await?
        .into_inner()
        .group
        .ok_or_else(|| anyhow::anyhow!("no group"))?;
    assert_eq!(read.access_token, "********");
    let listed = client
        .list_groups(authed(
            pb::ListGroupsRequest::default(),
            Some(&fx.admin_token),
        ))
        .await?
        .into_inner()
        .groups;
    assert!(
        listed
            .iter()
            .all(|group| !group.access_token.contains("token")),
        "{listed:?}"
    );
    // Sending the mask back keeps the token (a console edits what it read).
    let mut edited = read.clone();
    edited.title = "edited".to_string();
    client
        .update_group(authed(
            pb::UpdateGroupRequest {
                group: Some(edited),
            },
            Some(&fx.admin_token),
        ))
        .await?;
    let executor_side = cluster
        .executor("auth-secret")
        .access_token("shown-once-token")
        .handler("ok", xjob_tests::ok_handler)
        .start()
        .await?;
    executor_side
        .wait_registered(Duration::from_secs(5))
        .await?;
    executor_side.shutdown().await;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn expired_and_revoked_tokens_are_refused() -> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let (fx, _, _) = fixture(&cluster).await?;
    let mut client = fx.client.clone();
    let admin = Some(fx.admin_token.as_str());

    let short = client
        .create_token(authed(
            pb::CreateTokenRequest {
                user_id: fx.viewer_id,
                ttl_ms: 1_500,
                description: "short".to_string(),
            },
            admin,
        ))
        .await?
        .into_inner();
    client
        .who_am_i(authed(pb::WhoAmIRequest {}, Some(&short.token)))
        .await?;
    let expired = wait_until(Duration::from_secs(10), "the token to expire", || {
        let mut client = client.clone();
        let token = short.token.clone();
        async move {
            client
                .who_am_i(authed(pb::WhoAmIRequest {}, Some(&token)))
                .await
                .err()
        }
    })
    .await?;
    assert_eq!(expired.code(), Code::Unauthenticated);
    assert!(expired.message().contains("expired"), "{expired:?}");

    let revocable = client
        .create_token(authed(
            pb::CreateTokenRequest {
                user_id: fx.operator_id,
                ttl_ms: 0,
                description: "revocable".to_string(),
            },
            admin,
        ))
        .await?
        .into_inner();
    client
        .who_am_i(authed(pb::WhoAmIRequest {}, Some(&revocable.token)))
        .await?;
    let token_id = revocable.token_info.map_or(0, |info| info.id);
    client
        .revoke_token(authed(pb::RevokeTokenRequest { id: token_id }, admin))
        .await?;
    // Revoked on this admin: refused at once (its cache is cleared).
    let revoked = client
        .who_am_i(authed(pb::WhoAmIRequest {}, Some(&revocable.token)))
        .await
        .expect_err("revoked");
    assert_eq!(revoked.code(), Code::Unauthenticated);
    assert!(revoked.message().contains("revoked"), "{revoked:?}");
    // Listings never carry a token, only its prefix.
    let tokens = client
        .list_tokens(authed(
            pb::ListTokensRequest {
                user_id: fx.operator_id,
            },
            admin,
        ))
        .await?
        .into_inner()
        .tokens;
    assert!(tokens.iter().any(|token| token.revoked_ms > 0));
    assert!(tokens.iter().all(|token| token.prefix.len() <= 12));
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn mutating_calls_are_audited_without_secrets() -> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let (fx, _, operator) = fixture(&cluster).await?;
    let mut client = fx.client.clone();
    let mut secret = group("auth-audited");
    secret.access_token = "never-in-the-audit".to_string();
    client
        .create_group(authed(
            pb::CreateGroupRequest {
                group: Some(secret),
            },
            Some(&fx.admin_token),
        ))
        .await?;
    let mut with_params = job(fx.group_a, "audited job");
    with_params.params = "DB_PASSWORD=hunter2".to_string();
    let created = client
        .create_job(authed(
            pb::CreateJobRequest {
                job: Some(with_params),
            },
            Some(&operator),
        ))
        .await?
        .into_inner()
        .job
        .ok_or_else(|| anyhow::anyhow!("no job"))?;
    client
        .trigger_job(authed(
            pb::TriggerJobRequest {
                id: created.id,
                params: Some("DB_PASSWORD=hunter3".to_string()),
                addresses: vec![],
            },
            Some(&operator),
        ))
        .await?;
    client
        .delete_job(authed(
            pb::DeleteJobRequest { id: created.id },
            Some(&operator),
        ))
        .await?;
    // A refused change is not audited (a job of a group the operator cannot see: NOT_FOUND).
    let viewer_attempt = client
        .delete_job(authed(
            pb::DeleteJobRequest { id: fx.job_b },
            Some(&operator),
        ))
        .await;
    assert_eq!(
        viewer_attempt.err().map(|status| status.code()),
        Some(Code::NotFound)
    );

    let entries = client
        .list_audit(authed(
            pb::ListAuditRequest {
                page_size: 100,
                page_token: String::new(),
            },
            Some(&fx.admin_token),
        ))
        .await?
        .into_inner()
        .entries;
    let seen: Vec<(String, String, String)> = entries
        .iter()
        .map(|entry| {
            (
                entry.actor.clone(),
                entry.call.clone(),
                entry.object.clone(),
            )
        })
        .collect();
    let job_object = format!("job:{}", created.id);
    for (actor, call, object) in [
        ("(open)", "CreateGroup", format!("group:{}", fx.group_a)),
        ("(open)", "CreateUser", "user:1".to_string()),
        ("root", "GrantGroup", format!("user:{}", fx.viewer_id)),
        ("root", "CreateGroup", String::new()),
        ("otto", "CreateJob", job_object.clone()),
        ("otto", "TriggerJob", job_object.clone()),
        ("otto", "DeleteJob", job_object.clone()),
    ] {
        assert!(
            seen.iter()
                .any(|(a, c, o)| a == actor && c == call && (object.is_empty() || *o == object)),
            "no audit row {actor} {call} {object} in {seen:?}"
        );
    }
    let refused_object = format!("job:{}", fx.job_b);
    assert!(
        !seen
            .iter()
            .any(|(_, call, object)| call == "DeleteJob" && *object == refused_object),
        "refused call audited: {seen:?}"
    );
    for entry in &entries {
        let secrets = [
            "never-in-the-audit",
            "hunter",
            "group-secret-token",
            fx.admin_token.as_str(),
            operator.as_str(),
        ];
        for secret in secrets {
            assert!(
                !entry.summary.contains(secret),
                "secret in audit: {entry:?}"
            );
        }
        assert!(entry.at_ms > 0);
    }
    // Newest first, paged.
    assert!(entries.windows(2).all(|pair| pair[0].id > pair[1].id));
    let first_page = client
        .list_audit(authed(
            pb::ListAuditRequest {
                page_size: 2,
                page_token: String::new(),
            },
            Some(&fx.admin_token),
        ))
        .await?
        .into_inner();
    assert_eq!(first_page.entries.len(), 2);
    assert_eq!(first_page.next_page_token, "2");
    cluster.shutdown().await;
    Ok(())
}

/// The message of a refused call with its code, or a panic naming what was expected.
fn refused<T: std::fmt::Debug>(outcome: Result<T, Status>, code: Code) -> String {
    match outcome {
        Err(status) if status.code() == code => status.message().to_string(),
        other => panic!("expected {code:?}, got {other:?}"),
    }
}

#[tokio::test]
async fn roles_change_and_passwords_change_or_reset_with_precise_refusals() -> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let (fx, viewer, _) = fixture(&cluster).await?;
    let mut client = fx.client.clone();
    let admin = Some(fx.admin_token.as_str());

    // Role: the viewer becomes an operator, at once (the token cache is cleared).
    let set = pb::SetUserRoleRequest {
        user_id: fx.viewer_id,
        role: "operator".to_string(),
    };
    let user = client.set_user_role(authed(set, admin)).await?.into_inner();
    assert_eq!(user.user.map(|user| user.role).as_deref(), Some("operator"));
    let me = client
        .who_am_i(authed(pb::WhoAmIRequest {}, Some(&viewer)))
        .await?
        .into_inner();
    assert_eq!(me.user.map(|user| user.role).as_deref(), Some("operator"));
    let bad_role = pb::SetUserRoleRequest {
        user_id: fx.viewer_id,
        role: "root".to_string(),
    };
    let message = refused(
        client.set_user_role(authed(bad_role, admin)).await,
        Code::InvalidArgument,
    );
    assert!(message.starts_with("role: "), "{message}");
    let root_id = client
        .who_am_i(authed(pb::WhoAmIRequest {}, admin))
        .await?
        .into_inner()
        .user
        .map(|user| user.id)
        .unwrap_or_default();
    let own_role = pb::SetUserRoleRequest {
        user_id: root_id,
        role: "viewer".to_string(),
    };
    let message = refused(
        client.set_user_role(authed(own_role, admin)).await,
        Code::FailedPrecondition,
    );
    assert!(message.contains("own role"), "{message}");

    // Own password: the current one is required, the new one follows the minimum.
    let change = |current: &str, new: &str| pb::ChangePasswordRequest {
        current_password: current.to_string(),
        new_password: new.to_string(),
    };
    let message = refused(
        client
            .change_password(authed(
                change("wrong", "a brand new password"),
                Some(&viewer),
            ))
            .await,
        Code::InvalidArgument,
    );
    assert!(message.starts_with("current_password: "), "{message}");
    let message = refused(
        client
            .change_password(authed(
                change("a password for the console", "short"),
                Some(&viewer),
            ))
            .await,
        Code::InvalidArgument,
    );
    assert!(
        message.starts_with("new_password: at least 12 characters"),
        "{message}"
    );
    client
        .change_password(authed(
            change("a password for the console", "a brand new password"),
            Some(&viewer),
        ))
        .await?;
    // The new password is now the current one (the old one no longer is).
    refused(
        client
            .change_password(authed(
                change("a password for the console", "yet another password"),
                Some(&viewer),
            ))
            .await,
        Code::InvalidArgument,
    );

    // Reset by an admin: no current password; short refused; empty removes password login,
    // after which the user cannot change its own (it has none).
    let reset = |new: &str| pb::ResetPasswordRequest {
        user_id: fx.viewer_id,
        new_password: new.to_string(),
    };
    let message = refused(
        client.reset_password(authed(reset("tiny"), admin)).await,
        Code::InvalidArgument,
    );
    assert!(message.starts_with("new_password: "), "{message}");
    client
        .reset_password(authed(reset("set by the admin now"), admin))
        .await?;
    client
        .change_password(authed(
            change("set by the admin now", "chosen by vera herself"),
            Some(&viewer),
        ))
        .await?;
    client.reset_password(authed(reset(""), admin)).await?;
    let message = refused(
        client
            .change_password(authed(
                change("chosen by vera herself", "a brand new password"),
                Some(&viewer),
            ))
            .await,
        Code::FailedPrecondition,
    );
    assert!(message.contains("no console password"), "{message}");

    // Audited, never with a password.
    let entries = client
        .list_audit(authed(
            pb::ListAuditRequest {
                page_size: 100,
                page_token: String::new(),
            },
            admin,
        ))
        .await?
        .into_inner()
        .entries;
    for call in ["SetUserRole", "ChangePassword", "ResetPassword"] {
        assert!(
            entries.iter().any(|entry| entry.call == call),
            "no {call} in the audit trail"
        );
    }
    for entry in &entries {
        for secret in [
            "brand new",
            "set by the admin",
            "chosen by vera",
            "password for",
        ] {
            assert!(
                !entry.summary.contains(secret),
                "password in audit: {entry:?}"
            );
        }
    }
    cluster.shutdown().await;
    Ok(())
}
