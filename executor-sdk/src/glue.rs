//! Script (GLUE) jobs: the job carries its script, the executor runs it with an interpreter.
//!
//! ```text
//! RunRequest{glue_type, glue_source, glue_updated_ms}
//!   ─▶ {log_dir}/gluesource/{job_id}_{glue_updated_ms}.{ext}   (written once per version)
//!   ─▶ command handler: [interpreter, leading args…, script, params split on whitespace]
//! ```
//!
//! The script file is named by job and version stamp, so a version is written once and reused
//! by every run until the source is edited; older versions of the job are deleted when a new one
//! is written (runs of one job never overlap on an executor, and a process still reading a
//! deleted file keeps it open). Running reuses the `command` handler: own process group, output
//! into the run log, `XJOB_*` variables, exit 0 = success, kill/timeout stop the whole group.
//!
//! Glue is off unless the executor enables it, per language: scripts are code sent over the
//! network, and an executor should only run the languages its owner chose.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use xjob_proto::pb;

use crate::command::{CommandSpec, run_spec};
use crate::context::JobContext;
use crate::handler::{HandlerFn, JobError, JobResult, boxed_handler};

/// Folder under the log dir holding the script files.
const SCRIPT_DIR: &str = "gluesource";

pub(crate) use xjob_proto::GROOVY_UNSUPPORTED;

pub(crate) mod languages;
use languages::{Language, language_of};

/// The enabled glue languages with their interpreter programs, by glue type.
#[derive(Clone, Default)]
pub(crate) struct GlueRunners {
    runners: BTreeMap<i32, HandlerFn>,
}

impl GlueRunners {
    /// Builds one runner per enabled language; scripts go under `{log_dir}/gluesource/`.
    pub(crate) fn new(
        interpreters: &BTreeMap<i32, String>,
        env: &[(String, String)],
        log_dir: &Path,
    ) -> Self {
        let script_dir: Arc<Path> = log_dir.join(SCRIPT_DIR).into();
        let env: Arc<[(String, String)]> = env.into();
        let runners = interpreters
            .iter()
            .filter_map(|(glue_type, interpreter)| {
                let language = language_of(pb::GlueType::try_from(*glue_type).ok()?)?;
                let runner = glue_handler(
                    language,
                    interpreter.clone(),
                    Arc::clone(&env),
                    Arc::clone(&script_dir),
                );
                Some((*glue_type, runner))
            })
            .collect();
        Self { runners }
    }

    /// Returns the runner of an enabled glue type.
    pub(crate) fn get(&self, glue_type: pb::GlueType) -> Option<HandlerFn> {
        self.runners.get(&(glue_type as i32)).cloned()
    }

    /// Returns the enabled glue type names (`GLUE_TYPE_SHELL`, …), for diagnostics.
    pub(crate) fn names(&self) -> Vec<&'static str> {
        self.runners
            .keys()
            .filter_map(|glue_type| pb::GlueType::try_from(*glue_type).ok())
            .map(|glue_type| glue_type.as_str_name())
            .collect()
    }
}

impl std::fmt::Debug for GlueRunners {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_list().entries(self.names()).finish()
    }
}

fn glue_handler(
    language: Language,
    interpreter: String,
    env: Arc<[(String, String)]>,
    script_dir: Arc<Path>,
) -> HandlerFn {
    boxed_handler(move |context: JobContext| {
        let interpreter = interpreter.clone();
        let env = Arc::clone(&env);
        let script_dir = Arc::clone(&script_dir);
        async move { run_script(language, &interpreter, &env, &script_dir, context).await }
    })
}

async fn run_script(
    language: Language,
    interpreter: &str,
    env: &[(String, String)],
    script_dir: &Path,
    context: JobContext,
) -> JobResult {
    let script = script_file(language, script_dir, &context).await?;
    context.log(format!(
        "glue {} version {} from {}",
        language.glue_type.as_str_name(),
        context.glue_updated_ms(),
        script.display()
    ));
    let argv = std::iter::once(interpreter.to_owned())
        .chain(language.leading_args.iter().map(|arg| (*arg).to_owned()))
        .chain(std::iter::once(script.to_string_lossy().into_owned()));
    let spec = env
        .iter()
        .fold(CommandSpec::new(argv), |spec, (key, value)| {
            spec.env(key, value)
        });
    run_spec(Arc::new(spec), context).await
}

/// Returns the script file of the run's job and glue version, writing it if this version is not
/// stored yet (and then deleting the job's older versions).
async fn script_file(
    language: Language,
    script_dir: &Path,
    context: &JobContext,
) -> Result<PathBuf, JobError> {
    let job_prefix = format!("{}_", context.job_id());
    let name = format!(
        "{job_prefix}{}.{}",
        context.glue_updated_ms(),
        language.extension
    );
    let path = script_dir.join(&name);
    if tokio::fs::try_exists(&path).await.unwrap_or(false) {
        return Ok(path);
    }
    let failed = |error: std::io::Error| {
        JobError::new(format!(
            "failed to write the glue script {}: {error}",
            path.display()
        ))
    };
    tokio::fs::create_dir_all(script_dir)
        .await
        .map_err(failed)?;
    // Written aside then renamed: a half-written file is never taken for this version.
    let partial = script_dir.join(format!("{name}.{}.partial", context.log_id()));
    tokio::fs::write(&partial, context.glue_source().as_bytes())
        .await
        .map_err(failed)?;
    tokio::fs::rename(&partial, &path).await.map_err(failed)?;
    remove_older_versions(script_dir, &job_prefix, &name).await;
    Ok(path)
}

/// Deletes the job's other script files; failures only cost disk space.
async fn remove_older_versions(script_dir: &Path, job_prefix: &str, keep: &str) {
    let Ok(mut entries) = tokio::fs::read_dir(script_dir).await else {
        return;
    };
    while let Ok(Some(entry)) = entries.next_entry().await {
        let file_name = entry.file_name();
        let file_name = file_name.to_string_lossy();
        if file_name.starts_with(job_prefix) && file_name != keep {
            let _ = tokio::fs::remove_file(entry.path()).await;
        }
    }
}
