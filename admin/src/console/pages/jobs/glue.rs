//! A script job's source: the editor for the next version (`UpdateGlue`) and the saved
//! versions (`ListGlueVersions`), one of which can be loaded back into the editor.

use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::super::frame;
use super::super::super::html::tm;
use super::super::super::html::{self, Markup, Tone, markup};
use super::super::super::i18n::{Lang, t, tf};
use super::super::super::session::Viewer;
use super::super::super::shared::{Console, request};

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
    let lang = viewer.lang;
    let mut source = job.glue_source.clone();
    let mut remark = String::new();
    let mut diff = Markup::new();
    if version > 0 {
        let loaded = console
            .api()
            .get_glue_version(request(
                &viewer.caller,
                pb::GetGlueVersionRequest { id: version },
            ))
            .await;
        if let Some(loaded) = loaded.ok().and_then(|answer| answer.into_inner().version) {
            diff = diff_section(lang, &job.glue_source, &loaded.glue_source, version);
            source = loaded.glue_source;
            remark = tf(lang, "glue.back_to", &[&version]);
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
        "<section class=\"card\" id=\"glue\"><h2>{}</h2>\
         <form method=\"post\" action=\"/jobs/{}/glue\" id=\"glue-form\">{}{}{}{}{}</fieldset>{}</form>",
        t(lang, "editor.script_source"),
        job.id,
        frame::csrf_field(viewer),
        if editable {
            Markup::literal("<fieldset>")
        } else {
            Markup::literal("<fieldset disabled>")
        },
        html::field(
            t(lang, "glue.source"),
            "glue_source",
            html::code_textarea("glue_source", 12, &source, &code_language(job.glue_type)),
            err("glue_source"),
            tm(lang, "glue.source_hint", &[]),
        ),
        html::field(
            t(lang, "glue.remark"),
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
            markup!("<button id=\"save-glue\">{}</button>", t(lang, "glue.save"))
        } else {
            Markup::new()
        },
    );
    out.push(diff);
    if versions.is_empty() {
        out.push(markup!("<p class=\"empty\">{}</p>", t(lang, "glue.none")));
    } else {
        out.push(markup!(
            "<table id=\"glue-versions\"><tr><th scope=\"col\">{}</th>\
             <th scope=\"col\">{}</th><th scope=\"col\">{}</th>\
             <th scope=\"col\">{}</th></tr>",
            t(lang, "glue.col_version"),
            t(lang, "glue.col_saved"),
            t(lang, "glue.col_remark"),
            t(lang, "jobs.col_actions"),
        ));
        for saved in &versions {
            out.push(markup!(
                "<tr><td>{}</td><td>{}</td><td>{}</td>\
                 <td><a href=\"/jobs/{}?version={}#glue\">{}</a></td></tr>",
                saved.id,
                html::time(saved.created_ms),
                saved.glue_remark,
                job.id,
                saved.id,
                t(lang, "glue.load"),
            ));
        }
        out.push(Markup::literal("</table>"));
    }
    out.push(Markup::literal("</section>"));
    out
}

/// What loading `version` changes against the saved source, line by line.
fn diff_section(lang: Lang, saved: &str, loaded: &str, version: i64) -> Markup {
    let mut out = markup!(
        "<h3>{}</h3><pre class=\"diff\" id=\"glue-diff\">",
        tf(lang, "glue.diff_title", &[&version])
    );
    for (change, line) in line_diff(saved, loaded) {
        out.push(match change {
            Change::Same => markup!("<span>  {}</span>\n", line),
            Change::Removed => markup!("<span class=\"del\">- {}</span>\n", line),
            Change::Added => markup!("<span class=\"add\">+ {}</span>\n", line),
        });
    }
    out.push(Markup::literal("</pre>"));
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    Same,
    Removed,
    Added,
}

/// Most lines compared: a longer script's diff is cut there (the table of the longest common
/// subsequence grows with the product of the two lengths).
const MAX_DIFF_LINES: usize = 2000;

/// A line diff from `old` to `new` by their longest common subsequence of lines.
fn line_diff<'a>(old: &'a str, new: &'a str) -> Vec<(Change, &'a str)> {
    let old: Vec<&str> = old.lines().take(MAX_DIFF_LINES).collect();
    let new: Vec<&str> = new.lines().take(MAX_DIFF_LINES).collect();
    // common[i][j]: the longest common subsequence of old[i..] and new[j..].
    let mut common = vec![vec![0u32; new.len() + 1]; old.len() + 1];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            common[i][j] = if old[i] == new[j] {
                common[i + 1][j + 1] + 1
            } else {
                common[i + 1][j].max(common[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < old.len() || j < new.len() {
        if i < old.len() && j < new.len() && old[i] == new[j] {
            out.push((Change::Same, old[i]));
            i += 1;
            j += 1;
        } else if j < new.len() && (i == old.len() || common[i][j + 1] >= common[i + 1][j]) {
            out.push((Change::Added, new[j]));
            j += 1;
        } else {
            out.push((Change::Removed, old[i]));
            i += 1;
        }
    }
    out
}

/// The script editor's language for a glue type: `SHELL` → `shell` (editor.js knows shell,
/// python, nodejs, php, powershell; any other shows plain, with line numbers).
fn code_language(glue_type: i32) -> String {
    pb::GlueType::try_from(glue_type)
        .map(|known| html::enum_label(known.as_str_name(), "GLUE_TYPE_").to_ascii_lowercase())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_keep_common_lines_and_mark_the_rest() {
        let diff = line_diff("a\nb\nc", "a\nx\nc\nd");
        assert_eq!(
            diff,
            vec![
                (Change::Same, "a"),
                (Change::Added, "x"),
                (Change::Removed, "b"),
                (Change::Same, "c"),
                (Change::Added, "d"),
            ]
        );
        assert!(line_diff("", "").is_empty());
    }
}
