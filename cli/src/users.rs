//! `xjob users …`: users of a running admin (roles, passwords) over gRPC. Creating the first
//! admin is `xjob user create`, which works on the database itself.

use std::io::BufRead;

use clap::Subcommand;
use serde::Serialize;
use xjob_proto::pb;

use super::client::Client;
use super::error::CliError;
use super::render::{self, Output, Table};

#[derive(Subcommand)]
pub enum UsersCommand {
    /// Lists users with their roles and granted groups (admin).
    List,
    /// Changes a user's role (admin; not your own).
    SetRole {
        /// User id or name.
        user: String,
        /// admin, operator or viewer.
        role: String,
    },
    /// Sets another user's console password (admin), read from the first line of stdin; ends
    /// that user's console sessions.
    ResetPassword {
        /// User id or name.
        user: String,
        /// Remove password login instead (the user keeps its API tokens).
        #[arg(long)]
        no_password: bool,
    },
    /// Changes your own console password: stdin holds the current one on its first line and
    /// the new one on its second.
    ChangePassword,
}

/// `User`, as `--output json` shows it.
#[derive(Serialize)]
struct UserView {
    id: i64,
    name: String,
    role: String,
    group_ids: Vec<i64>,
    created_ms: i64,
}

impl From<&pb::User> for UserView {
    fn from(user: &pb::User) -> UserView {
        UserView {
            id: user.id,
            name: user.name.clone(),
            role: user.role.clone(),
            group_ids: user.group_ids.clone(),
            created_ms: user.created_ms,
        }
    }
}

pub async fn run(command: UsersCommand, out: Output, mut client: Client) -> Result<(), CliError> {
    match command {
        UsersCommand::List => {
            let users = list(&mut client).await?;
            let views: Vec<UserView> = users.iter().map(UserView::from).collect();
            out.list(&views, "No users.", |users| {
                let mut table = Table::new(&["ID", "NAME", "ROLE", "GROUPS", "CREATED"]);
                for user in users {
                    let groups: Vec<String> = user.group_ids.iter().map(i64::to_string).collect();
                    table.row(vec![
                        user.id.to_string(),
                        user.name.clone(),
                        user.role.clone(),
                        render::or_dash(&groups.join(",")),
                        render::time(user.created_ms),
                    ]);
                }
                table
            })
        }
        UsersCommand::SetRole { user, role } => {
            let user_id = resolve_user(&mut client, &user).await?;
            let request = pb::SetUserRoleRequest { user_id, role };
            let user = client.set_user_role(request).await?.into_inner().user;
            let user = user.ok_or_else(|| CliError::Failed("the admin returned no user".into()))?;
            let sentence = format!("User {} '{}' is now {}", user.id, user.name, user.role);
            out.done(&UserView::from(&user), &sentence)
        }
        UsersCommand::ResetPassword { user, no_password } => {
            let user_id = resolve_user(&mut client, &user).await?;
            let new_password = if no_password {
                String::new()
            } else {
                let mut lines = stdin_lines(1)?;
                lines.remove(0)
            };
            let request = pb::ResetPasswordRequest {
                user_id,
                new_password,
            };
            client.reset_password(request).await?;
            let sentence = if no_password {
                format!("User {user_id} has no console password now")
            } else {
                format!("Password of user {user_id} reset; its console sessions ended")
            };
            out.done(&serde_json::json!({ "user_id": user_id }), &sentence)
        }
        UsersCommand::ChangePassword => {
            let mut lines = stdin_lines(2)?;
            let new_password = lines.remove(1);
            let current_password = lines.remove(0);
            let request = pb::ChangePasswordRequest {
                current_password,
                new_password,
            };
            client.change_password(request).await?;
            out.done(
                &serde_json::json!({ "changed": true }),
                "Password changed; your console sessions ended",
            )
        }
    }
}

async fn list(client: &mut Client) -> Result<Vec<pb::User>, CliError> {
    Ok(client
        .list_users(pb::ListUsersRequest {})
        .await?
        .into_inner()
        .users)
}

/// A user id, or a name looked up in the user list.
async fn resolve_user(client: &mut Client, user: &str) -> Result<i64, CliError> {
    if let Ok(id) = user.trim().parse::<i64>() {
        return Ok(id);
    }
    let users = list(client).await?;
    users
        .iter()
        .find(|known| known.name == user.trim())
        .map(|known| known.id)
        .ok_or_else(|| CliError::Failed(format!("no user named '{}'", render::cell(user, 64))))
}

/// The first `count` lines of stdin without their line ends; each must hold something.
/// Passwords come on stdin, never as arguments (those show in `ps` and shell history).
fn stdin_lines(count: usize) -> Result<Vec<String>, CliError> {
    let mut lines = Vec::with_capacity(count);
    let mut stdin = std::io::stdin().lock();
    for index in 0..count {
        let mut line = String::new();
        stdin
            .read_line(&mut line)
            .map_err(|error| CliError::Failed(format!("cannot read stdin: {error}")))?;
        let line = line.trim_end_matches(['\r', '\n']).to_string();
        if line.is_empty() {
            return Err(CliError::Usage(format!(
                "stdin line {} is empty: expected {count} password line(s)",
                index + 1
            )));
        }
        lines.push(line);
    }
    Ok(lines)
}
