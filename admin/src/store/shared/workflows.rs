//! Workflows: the definition row, its graph stored as one JSON document (`graph`).

use serde::{Deserialize, Serialize};

use crate::model::workflow_schedule::WorkflowSchedule;
use crate::model::{
    EdgeCondition, FanIn, GroupId, JobId, MisfireStrategy, OverlapPolicy, ScheduleType, Workflow,
    WorkflowEdge, WorkflowId, WorkflowNode,
};
use crate::store::dialect::Dialect;
use crate::store::sql::{Cols, Pools, Sql};
use crate::store::{StoreError, StoreResult};

// params is NULL-able on MySQL (a MEDIUMTEXT column added later cannot have a default there).
pub(super) const SELECT_WORKFLOW: &str = "SELECT id, group_id, name, graph, updated_ms, schedule_type, \
     schedule_conf, time_zone, misfire_strategy, COALESCE(params, '') AS params, next_fire_ms, \
     overlap_policy FROM xjob_workflow";

/// The stored shape of a graph: the model's, with plain ids and enum names, so the model's
/// types stay free of a storage format.
#[derive(Serialize, Deserialize)]
struct StoredGraph {
    nodes: Vec<StoredNode>,
    edges: Vec<StoredEdge>,
}

#[derive(Serialize, Deserialize)]
struct StoredNode {
    key: String,
    job_id: i64,
    fan_in: String,
}

#[derive(Serialize, Deserialize)]
struct StoredEdge {
    from: String,
    to: String,
    condition: String,
}

pub(super) fn graph_json(workflow: &Workflow) -> StoreResult<String> {
    let graph = StoredGraph {
        nodes: (workflow.nodes.iter())
            .map(|node| StoredNode {
                key: node.key.clone(),
                job_id: node.job_id.0,
                fan_in: node.fan_in.as_str().to_string(),
            })
            .collect(),
        edges: (workflow.edges.iter())
            .map(|edge| StoredEdge {
                from: edge.from.clone(),
                to: edge.to.clone(),
                condition: edge.condition.as_str().to_string(),
            })
            .collect(),
    };
    serde_json::to_string(&graph).map_err(|error| StoreError::Corrupt(error.to_string()))
}

fn corrupt_graph(detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("column graph: {detail}"))
}

pub(super) fn graph_from_json(text: &str) -> StoreResult<(Vec<WorkflowNode>, Vec<WorkflowEdge>)> {
    let graph: StoredGraph = serde_json::from_str(text).map_err(corrupt_graph)?;
    let mut nodes = Vec::with_capacity(graph.nodes.len());
    for node in graph.nodes {
        let fan_in = FanIn::parse(&node.fan_in)
            .ok_or_else(|| corrupt_graph(format!("unknown fan-in '{}'", node.fan_in)))?;
        nodes.push(WorkflowNode {
            key: node.key,
            job_id: JobId(node.job_id),
            fan_in,
        });
    }
    let mut edges = Vec::with_capacity(graph.edges.len());
    for edge in graph.edges {
        let condition = EdgeCondition::parse(&edge.condition)
            .ok_or_else(|| corrupt_graph(format!("unknown condition '{}'", edge.condition)))?;
        edges.push(WorkflowEdge {
            from: edge.from,
            to: edge.to,
            condition,
        });
    }
    Ok((nodes, edges))
}

pub(super) fn workflow_from_row<DB: Dialect>(row: &DB::Row) -> StoreResult<Workflow> {
    let row = Cols::<DB>(row);
    let graph: String = row.get("graph")?;
    let (nodes, edges) = graph_from_json(&graph)?;
    Ok(Workflow {
        id: WorkflowId(row.get("id")?),
        group_id: row.get("group_id")?,
        name: row.get("name")?,
        nodes,
        edges,
        updated_ms: row.get("updated_ms")?,
        schedule: WorkflowSchedule {
            schedule_type: row.parse("schedule_type", ScheduleType::parse)?,
            schedule_conf: row.get("schedule_conf")?,
            time_zone: row.get("time_zone")?,
            misfire: row.parse("misfire_strategy", MisfireStrategy::parse)?,
            next_fire_ms: row.get("next_fire_ms")?,
            overlap: row.parse("overlap_policy", OverlapPolicy::parse)?,
        },
        params: row.get("params")?,
    })
}

/// Inserts a workflow and returns it with its id.
pub async fn insert_workflow<DB: Dialect>(
    db: Pools<'_, DB>,
    workflow: &Workflow,
) -> StoreResult<Workflow> {
    let schedule = &workflow.schedule;
    let insert = Sql::<DB>::new(
        "INSERT INTO xjob_workflow (group_id, name, graph, updated_ms, schedule_type, \
         schedule_conf, time_zone, misfire_strategy, params, next_fire_ms, overlap_policy) VALUES (",
    )
    .bind(workflow.group_id.0)
    .push(", ")
    .bind(workflow.name.as_str())
    .push(", ")
    .bind(graph_json(workflow)?)
    .push(", ")
    .bind(workflow.updated_ms)
    .push(", ")
    .bind(schedule.schedule_type.as_str())
    .push(", ")
    .bind(schedule.schedule_conf.as_str())
    .push(", ")
    .bind(schedule.time_zone.as_str())
    .push(", ")
    .bind(schedule.misfire.as_str())
    .push(", ")
    .bind(workflow.params.as_str())
    .push(", ")
    .bind(schedule.next_fire_ms)
    .push(", ")
    .bind(schedule.overlap.as_str())
    .push(")");
    let id = WorkflowId(super::insert_returning_id(&mut *db.write().await?, insert).await?);
    Ok(Workflow {
        id,
        ..workflow.clone()
    })
}

/// Replaces a workflow's group, name, graph, schedule and params; false when it does not exist.
pub async fn update_workflow<DB: Dialect>(
    db: Pools<'_, DB>,
    workflow: &Workflow,
) -> StoreResult<bool> {
    // MySQL counts matched rows (CLIENT_FOUND_ROWS), so an unchanged workflow is still found.
    let updated = Sql::<DB>::new("UPDATE xjob_workflow SET group_id = ")
        .bind(workflow.group_id.0)
        .push(", name = ")
        .bind(workflow.name.as_str())
        .push(", graph = ")
        .bind(graph_json(workflow)?)
        .push(", updated_ms = ")
        .bind(workflow.updated_ms)
        .push(", schedule_type = ")
        .bind(workflow.schedule.schedule_type.as_str())
        .push(", schedule_conf = ")
        .bind(workflow.schedule.schedule_conf.as_str())
        .push(", time_zone = ")
        .bind(workflow.schedule.time_zone.as_str())
        .push(", misfire_strategy = ")
        .bind(workflow.schedule.misfire.as_str())
        .push(", params = ")
        .bind(workflow.params.as_str())
        .push(", next_fire_ms = ")
        .bind(workflow.schedule.next_fire_ms)
        .push(", overlap_policy = ")
        .bind(workflow.schedule.overlap.as_str())
        .push(" WHERE id = ")
        .bind(workflow.id.0)
        .affected(&mut *db.write().await?)
        .await?;
    Ok(updated == 1)
}

/// Deletes a workflow; false when it did not exist.
pub async fn delete_workflow<DB: Dialect>(db: Pools<'_, DB>, id: WorkflowId) -> StoreResult<bool> {
    let deleted = Sql::<DB>::new("DELETE FROM xjob_workflow WHERE id = ")
        .bind(id.0)
        .affected(&mut *db.write().await?)
        .await?;
    Ok(deleted == 1)
}

pub async fn get_workflow<DB: Dialect>(
    db: Pools<'_, DB>,
    id: WorkflowId,
) -> StoreResult<Option<Workflow>> {
    let row = Sql::<DB>::new(SELECT_WORKFLOW)
        .push(" WHERE id = ")
        .bind(id.0)
        .fetch_optional(&mut *db.read().await?)
        .await?;
    row.as_ref().map(workflow_from_row::<DB>).transpose()
}

/// Workflows by id, of the groups in `group_ids` (`None` = every group), a page at a time.
pub async fn list_workflows<DB: Dialect>(
    db: Pools<'_, DB>,
    group_ids: Option<&[GroupId]>,
    offset: i64,
    limit: i64,
) -> StoreResult<Vec<Workflow>> {
    let mut select = Sql::<DB>::new(SELECT_WORKFLOW);
    if let Some(group_ids) = group_ids {
        if group_ids.is_empty() {
            return Ok(Vec::new());
        }
        select.push_mut(" WHERE group_id");
        DB::push_id_list(&mut select, &super::distinct_raw_ids(group_ids));
    }
    let rows = select
        .push(" ORDER BY id LIMIT ")
        .bind(limit)
        .push(" OFFSET ")
        .bind(offset)
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter().map(workflow_from_row::<DB>).collect()
}
