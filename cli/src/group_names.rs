//! Groups by app name: `--group` takes an id or an app name, and tables show `app (id)`.

use std::collections::HashMap;

use xjob_proto::pb;

use super::client::{Client, short};
use super::error::CliError;

/// A group given as its id or its app name.
pub async fn resolve_group(client: &mut Client, group: &str) -> Result<i64, CliError> {
    if let Ok(id) = group.trim().parse::<i64>() {
        return Ok(id);
    }
    let request = pb::ListGroupsRequest {
        app_name: group.trim().to_string(),
        page_size: 1000,
        page_token: String::new(),
    };
    let groups = client.list_groups(request).await?.into_inner().groups;
    groups
        .iter()
        .find(|found| found.app_name == group.trim())
        .map(|found| found.id)
        .ok_or_else(|| {
            CliError::Failed(format!(
                "not found: --group '{}': no group has this id or app name (xjob groups list)",
                short(group)
            ))
        })
}

/// Group id → app name, for tables; empty when the caller may not list groups.
pub async fn group_names(client: &mut Client) -> HashMap<i64, String> {
    let request = pb::ListGroupsRequest {
        page_size: 1000,
        ..Default::default()
    };
    match client.list_groups(request).await {
        Ok(answer) => answer
            .into_inner()
            .groups
            .into_iter()
            .map(|group| (group.id, group.app_name))
            .collect(),
        Err(_) => HashMap::new(),
    }
}

pub fn group_label(groups: &HashMap<i64, String>, id: i64) -> String {
    match groups.get(&id) {
        Some(app) => format!("{app} ({id})"),
        None => id.to_string(),
    }
}
