//! The workflow page's buttons: start a run, cancel the latest one, retry or skip one of its
//! nodes. Each is a POST form with the CSRF field (checked by `Posted`), shown only to viewers
//! who may operate the workflow's group; the API checks the same again and refuses a node or
//! run the action does not apply to, with its message.

use axum::extract::State;
use axum::response::Response;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::csrf::Posted;
use super::super::i18n::tf;
use super::super::shared::{Shared, request};
use super::{Path, see_other, status_page};

/// `POST /workflows/{id}/start`.
pub async fn start(State(console): State<Shared>, Path(id): Path<i64>, posted: Posted) -> Response {
    let lang = posted.viewer.lang;
    let asked = pb::StartWorkflowRequest {
        workflow_id: id,
        params: String::new(),
    };
    match console
        .api()
        .start_workflow(request(&posted.viewer.caller, asked))
        .await
    {
        Ok(answer) => {
            let run_id = answer.into_inner().workflow_run_id;
            let notice = tf(lang, "workflows.started", &[&run_id]);
            see_other(&format!("/workflows/{id}"), &notice)
        }
        Err(status) => status_page(lang, &status),
    }
}

/// `POST /workflow-runs/{run}/cancel`.
pub async fn cancel(
    State(console): State<Shared>,
    Path(run_id): Path<i64>,
    posted: Posted,
) -> Response {
    let lang = posted.viewer.lang;
    let asked = pb::CancelWorkflowRunRequest { id: run_id };
    match console
        .api()
        .cancel_workflow_run(request(&posted.viewer.caller, asked))
        .await
    {
        Ok(answer) => {
            let answer = answer.into_inner();
            let workflow_id = answer.run.map(|run| run.workflow_id).unwrap_or_default();
            let notice = tf(lang, "workflows.cancelled", &[&run_id, &answer.killed]);
            see_other(&format!("/workflows/{workflow_id}"), &notice)
        }
        Err(status) => status_page(lang, &status),
    }
}

/// `POST /workflow-runs/{run}/nodes/{key}/retry`.
pub async fn retry_node(
    State(console): State<Shared>,
    Path((run_id, key)): Path<(i64, String)>,
    posted: Posted,
) -> Response {
    let lang = posted.viewer.lang;
    let asked = pb::RetryWorkflowNodeRequest {
        id: run_id,
        node: key.clone(),
    };
    let answer = console
        .api()
        .retry_workflow_node(request(&posted.viewer.caller, asked))
        .await;
    match answer {
        Ok(answer) => {
            let run = answer.into_inner().run.unwrap_or_default();
            let notice = tf(lang, "workflows.node_retried", &[&key]);
            see_other(&format!("/workflows/{}", run.workflow_id), &notice)
        }
        Err(status) => status_page(lang, &status),
    }
}

/// `POST /workflow-runs/{run}/nodes/{key}/skip`.
pub async fn skip_node(
    State(console): State<Shared>,
    Path((run_id, key)): Path<(i64, String)>,
    posted: Posted,
) -> Response {
    let lang = posted.viewer.lang;
    let asked = pb::SkipWorkflowNodeRequest {
        id: run_id,
        node: key.clone(),
    };
    let answer = console
        .api()
        .skip_workflow_node(request(&posted.viewer.caller, asked))
        .await;
    match answer {
        Ok(answer) => {
            let run = answer.into_inner().run.unwrap_or_default();
            let notice = tf(lang, "workflows.node_skipped", &[&key]);
            see_other(&format!("/workflows/{}", run.workflow_id), &notice)
        }
        Err(status) => status_page(lang, &status),
    }
}
