//! `xjob groups …`: executor groups (apps) and which of their executors are online.

use clap::{Args, Subcommand};
use xjob_proto::pb;

use super::client::Client;
use super::error::CliError;
use super::group_names::resolve_group;
use super::prompt::confirm;
use super::render::{self, Details, Output, Table};
use super::view::{self, GroupView};

#[derive(Subcommand)]
pub enum GroupsCommand {
    /// Lists groups with their online executors.
    List {
        /// Substring of the app name.
        #[arg(long)]
        app: Option<String>,
    },
    /// Shows a group.
    Show {
        /// Group id or app name.
        group: String,
    },
    /// Creates a group.
    Create(CreateArgs),
    /// Deletes a group; refused while jobs use it.
    Delete {
        /// Group id or app name.
        group: String,
        /// Do not ask for confirmation (required when stdin is not a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Changes the given fields of a group (id or app name), keeping the others.
    Update {
        /// Group id or app name.
        group: String,
        #[command(flatten)]
        fields: GroupFields,
    },
}

#[derive(Args)]
pub struct CreateArgs {
    /// The app name its executors register under (4-64 characters; cannot change).
    #[arg(long)]
    app_name: String,
    #[command(flatten)]
    fields: GroupFields,
}

#[derive(Args)]
pub struct GroupFields {
    /// A name for people (default: the app name).
    #[arg(long)]
    title: Option<String>,
    /// auto (executors register) or manual (--addresses).
    #[arg(long, value_parser = view::parse_address_type)]
    address_type: Option<i32>,
    /// Executor addresses of a manual group, comma-separated.
    #[arg(long, value_name = "ADDRESSES")]
    addresses: Option<String>,
    /// Token its executors must present ("" = none).
    #[arg(long)]
    access_token: Option<String>,
}

pub async fn run(command: GroupsCommand, out: Output, mut client: Client) -> Result<(), CliError> {
    match command {
        GroupsCommand::List { app } => {
            let request = pb::ListGroupsRequest {
                app_name: app.unwrap_or_default(),
                page_size: 1000,
                page_token: String::new(),
            };
            let groups = client.list_groups(request).await?.into_inner().groups;
            let views: Vec<GroupView> = groups.iter().map(GroupView::from).collect();
            out.list(
                &views,
                "No groups. Create one with: xjob groups create --app-name APP --title TITLE",
                |groups| {
                    let mut table = Table::new(&["ID", "APP", "TITLE", "ADDRESSES", "ONLINE"]);
                    for group in groups {
                        table.row(vec![
                            group.id.to_string(),
                            group.app_name.clone(),
                            render::cell(&group.title, 32),
                            group.address_type.clone(),
                            online_text(group),
                        ]);
                    }
                    table
                },
            )
        }
        GroupsCommand::Show { group } => {
            let id = resolve_group(&mut client, &group).await?;
            let group = get(&mut client, id).await?;
            out.object(&GroupView::from(&group), details)
        }
        GroupsCommand::Create(args) => {
            let mut group = pb::Group {
                app_name: args.app_name,
                address_type: pb::AddressType::Auto as i32,
                ..Default::default()
            };
            apply(&mut group, args.fields);
            if group.title.is_empty() {
                group.title = group.app_name.clone();
            }
            let request = pb::CreateGroupRequest { group: Some(group) };
            let group = client.create_group(request).await?.into_inner().group;
            let group =
                group.ok_or_else(|| CliError::Failed("the admin returned no group".into()))?;
            let sentence = format!("Created group {} '{}'", group.id, group.app_name);
            out.done(&GroupView::from(&group), &sentence)
        }
        GroupsCommand::Delete { group, yes } => {
            let id = resolve_group(&mut client, &group).await?;
            if !yes {
                confirm(&format!("Delete group {id}?"))?;
            }
            client.delete_group(pb::DeleteGroupRequest { id }).await?;
            out.done(
                &serde_json::json!({ "deleted_group_id": id }),
                &format!("Deleted group {id}"),
            )
        }
        GroupsCommand::Update { group, fields } => {
            let id = resolve_group(&mut client, &group).await?;
            let mut group = get(&mut client, id).await?;
            apply(&mut group, fields);
            let request = pb::UpdateGroupRequest { group: Some(group) };
            let group = client.update_group(request).await?.into_inner().group;
            let group =
                group.ok_or_else(|| CliError::Failed("the admin returned no group".into()))?;
            let sentence = format!("Updated group {} '{}'", group.id, group.app_name);
            out.done(&GroupView::from(&group), &sentence)
        }
    }
}

/// Copies the given flags; a stored access token comes back as `********`, which the admin
/// reads as "keep it".
fn apply(group: &mut pb::Group, fields: GroupFields) {
    if let Some(title) = fields.title {
        group.title = title;
    }
    if let Some(address_type) = fields.address_type {
        group.address_type = address_type;
    }
    if let Some(addresses) = fields.addresses {
        group.addresses = addresses
            .split(',')
            .map(str::trim)
            .filter(|address| !address.is_empty())
            .map(str::to_string)
            .collect();
    }
    if let Some(token) = fields.access_token {
        group.access_token = token;
    }
    group.online.clear();
}

async fn get(client: &mut Client, id: i64) -> Result<pb::Group, CliError> {
    let group = client
        .get_group(pb::GetGroupRequest { id })
        .await?
        .into_inner()
        .group;
    group.ok_or_else(|| CliError::Failed(format!("the admin returned no group {id}")))
}

fn online_text(group: &GroupView) -> String {
    if group.online.is_empty() {
        "none".into()
    } else {
        group.online.join(", ")
    }
}

fn details(group: &GroupView) -> Details {
    let mut details = Details::new();
    details
        .add("id", group.id.to_string())
        .add("app name", group.app_name.clone())
        .add("title", group.title.clone())
        .add("address type", group.address_type.clone())
        .add("addresses", render::or_dash(&group.addresses.join(", ")))
        .add("online", online_text(group))
        .add(
            "access token",
            if group.access_token.is_empty() {
                "none".into()
            } else {
                "set".to_string()
            },
        );
    details
}
