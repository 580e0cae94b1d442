//! A script job's source: the editor for the next version (`UpdateGlue`) and the saved
//! versions (`ListGlueVersions`), one of which can be loaded back into the editor.

use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::super::frame;
use super::super::super::html::{self, Markup, Tone, markup};
use super::super::super::session::Viewer;
use super::super::super::{Console, request};

/// A script job's source editor and its saved versions; `version` > 0 loads that version's
/// source into the editor (`GetGlueVersion`). Empty for BEAN jobs.
pub async fn glue_section(
    console: &Console,
    viewer: &Viewer,
    job: &pb::Job,
    version: i64,
    error: Option<(Option<String>, String)>,
) -> Markup {
    if job.glue_type == pb::GlueType::Bean as i32 || job.glue_type == 0 {
        return Markup::new();
    }
    let mut source = job.glue_source.clone();
    let mut remark = String::new();
    if version > 0 {
        let loaded = console
            .api()
            .get_glue_version(request(
                &viewer.caller,
                pb::GetGlueVersionRequest { id: version },
            ))
            .await;
        if let Some(loaded) = loaded.ok().and_then(|answer| answer.into_inner().version) {
            source = loaded.glue_source;
            remark = format!("back to version {version}");
        }
    }
    let versions = console
        .api()
        .list_glue_versions(request(
            &viewer.caller,
            pb::ListGlueVersionsRequest { job_id: job.id },
        ))
        .await
        .map(|answer| answer.into_inner().versions)
        .unwrap_or_default();
    let (error_field, message) = error.unwrap_or((None, String::new()));
    let err = |name: &str| (error_field.as_deref() == Some(name)).then_some(message.as_str());
    let editable = viewer.can_operate(job.group_id);
    let mut out = markup!(
        "<section class=\"card\" id=\"glue\"><h2>Script source</h2>\
         <form method=\"post\" action=\"/jobs/{}/glue\" id=\"glue-form\">{}{}{}{}{}</fieldset>{}</form>",
        job.id,
        frame::csrf_field(viewer),
        if editable {
            Markup::literal("<fieldset>")
        } else {
            Markup::literal("<fieldset disabled>")
        },
        html::field(
            "Source",
            "glue_source",
            html::textarea("glue_source", 12, &source),
            err("glue_source"),
            Markup::literal("the next run uses the saved source"),
        ),
        html::field(
            "What changed",
            "glue_remark",
            html::text_input("glue_remark", &remark),
            err("glue_remark"),
            Markup::new(),
        ),
        if error_field.is_none() && !message.is_empty() {
            html::notice(Tone::Bad, &message)
        } else {
            Markup::new()
        },
        if editable {
            Markup::literal("<button id=\"save-glue\">Save source</button>")
        } else {
            Markup::new()
        },
    );
    if versions.is_empty() {
        out.push(Markup::literal(
            "<p class=\"empty\">No saved versions yet.</p>",
        ));
    } else {
        out.push(Markup::literal(
            "<table id=\"glue-versions\"><tr><th scope=\"col\">Version</th>\
             <th scope=\"col\">Saved</th><th scope=\"col\">Remark</th>\
             <th scope=\"col\">Actions</th></tr>",
        ));
        for saved in &versions {
            out.push(markup!(
                "<tr><td>{}</td><td>{}</td><td>{}</td>\
                 <td><a href=\"/jobs/{}?version={}#glue\">load</a></td></tr>",
                saved.id,
                html::time(saved.created_ms),
                saved.glue_remark,
                job.id,
                saved.id,
            ));
        }
        out.push(Markup::literal("</table>"));
    }
    out.push(Markup::literal("</section>"));
    out
}
