//! `xjob import-xxl-job`: moves an XXL-JOB installation's executor groups and jobs (with their
//! glue versions) into xjob, so a team can switch the admin first and its executors later
//! (docs/migrating-from-xxl-job.md). Run logs are not imported.
//!
//! ```text
//! XXL-JOB MySQL ─store::xxl_source─▶ rows ─mapping (pure)─▶ jobs/groups ─plan (pure)─▶ Plan
//!                                                              print ◀─┘   └─▶ store (unless --dry-run)
//! ```
//!
//! Writes go straight to the store, like `xjob user create` (the admin need not run), after the
//! same checks `CreateGroup`/`CreateJob` make: `validate_group`, `validate_job`, the group
//! exists, every child exists, no cycle. Each job is written with its glue versions and its
//! import record (`xjob_xxl_import`: XXL-JOB database + job id → xjob job id) in one
//! transaction; that record is what makes a second import create nothing new. Groups are
//! matched by app name. An interrupted import is finished by running it again.

pub mod mapping;
pub mod plan;
pub mod workflows;
#[cfg(test)]
mod workflows_tests;

use std::collections::{HashMap, HashSet};
use std::io::Write;

use crate::config::Config;
use crate::model::validate::JobLimits;
use crate::model::{GroupId, JobId, WorkflowId};
use crate::store::{Store, XxlJobImport, xxl_source};
use mapping::MapOptions;
use plan::{Existing, GroupAction, JobAction, Plan};

/// Exit status when something was (or would be) skipped: the import itself worked.
pub const EXIT_SKIPPED: i32 = 2;

/// The command's own flags (the database flags are `xjob serve`'s).
#[derive(Debug, Clone, clap::Args)]
pub struct ImportArgs {
    /// The XXL-JOB database, e.g. mysql://user:password@host:3306/xxl_job (read only).
    #[arg(long, env = "XJOB_IMPORT_FROM")]
    pub from: String,
    /// Print what would be created, found already there, or skipped; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// IANA time zone for the imported jobs' schedules (XXL-JOB used its JVM's zone); default:
    /// the admin's `time_zone`.
    #[arg(long)]
    pub job_time_zone: Option<String>,
    /// Import jobs running in XXL-JOB stopped too; start them (StartJob) once their executors
    /// are online under xjob and XXL-JOB's admin no longer schedules them.
    #[arg(long)]
    pub import_stopped: bool,
    /// Make each tree of child links a workflow named after its root job, instead of child
    /// links on the jobs; the root job's CRON or FIX_RATE schedule moves to the workflow, so
    /// each time runs the whole chain, and the root is created without one.
    #[arg(long)]
    pub children_as_workflows: bool,
}

/// Runs the import against the configured xjob database; returns the process exit status:
/// 0 everything imported (or there already), [`EXIT_SKIPPED`] something left out.
pub async fn run(config: &Config, args: &ImportArgs) -> anyhow::Result<i32> {
    let source = xxl_source::source_label(&args.from)?;
    let pool = xxl_source::connect(&args.from).await?;
    let snapshot = xxl_source::read_snapshot(&pool).await;
    pool.close().await;
    let snapshot = snapshot?;
    if config.database_url.starts_with("sqlite:") {
        std::fs::create_dir_all(&config.data_dir)?;
    }
    let store = Store::connect(&config.database_url).await?;
    let result = plan_and_apply(&store, config, args, &source, &snapshot).await;
    store.close().await;
    result
}

async fn plan_and_apply(
    store: &Store,
    config: &Config,
    args: &ImportArgs,
    source: &str,
    snapshot: &xxl_source::XxlSnapshot,
) -> anyhow::Result<i32> {
    let options = MapOptions {
        limits: JobLimits {
            max_params_bytes: config.max_params_bytes,
            default_time_zone: config.default_time_zone(),
        },
        time_zone: args.job_time_zone.clone().unwrap_or_default(),
        import_stopped: args.import_stopped,
        children_as_workflows: args.children_as_workflows,
        now_ms: crate::model::now_ms(),
    };
    let existing = read_existing(store, source, snapshot).await?;
    let plan = plan::build(snapshot, &existing, &options, source);
    let mut stdout = std::io::stdout().lock();
    write!(stdout, "{}", plan.render())?;
    if snapshot.max_log_id > 0 {
        writeln!(
            stdout,
            "run ids: xjob's next run id above XXL-JOB's last log id {} (its executors name \
             log files by it)",
            snapshot.max_log_id
        )?;
    }
    if args.dry_run {
        writeln!(stdout, "dry run: nothing was written")?;
    } else {
        let at = (options.now_ms, options.limits.default_time_zone);
        apply(store, &plan, &existing, source, at, &mut stdout).await?;
        store.raise_log_ids_past(snapshot.max_log_id).await?;
    }
    stdout.flush()?;
    Ok(if plan.skipped() > 0 { EXIT_SKIPPED } else { 0 })
}

/// What xjob holds of what the snapshot names: groups by app name, jobs imported before.
async fn read_existing(
    store: &Store,
    source: &str,
    snapshot: &xxl_source::XxlSnapshot,
) -> anyhow::Result<Existing> {
    let mut groups_by_app = HashMap::new();
    for row in &snapshot.groups {
        let app_name = row.app_name.trim();
        if let Some(group) = store.get_group_by_app(app_name).await? {
            groups_by_app.insert(app_name.to_string(), group.id);
        }
    }
    let imported: HashMap<i64, JobId> =
        store.xxl_imported_jobs(source).await?.into_iter().collect();
    let ids: Vec<JobId> = imported.values().copied().collect();
    let missing: HashSet<JobId> = store.missing_job_ids(&ids).await?.into_iter().collect();
    let present: HashSet<JobId> = ids.into_iter().filter(|id| !missing.contains(id)).collect();
    let present_ids: Vec<JobId> = present.iter().copied().collect();
    let linked = (store.get_jobs(&present_ids).await?.into_iter())
        .filter(|(_, job)| !job.child_job_ids.is_empty())
        .map(|(id, _)| id)
        .collect();
    Ok(Existing {
        groups_by_app,
        imported,
        present,
        linked,
        workflows_by_name: workflows_by_name(store).await?,
    })
}

/// Every xjob workflow by name, a page at a time.
async fn workflows_by_name(store: &Store) -> anyhow::Result<HashMap<String, WorkflowId>> {
    const PAGE: i64 = 500;
    let mut by_name = HashMap::new();
    for page in 0.. {
        let found = store.list_workflows(None, page * PAGE, PAGE).await?;
        let last = (found.len() as i64) < PAGE;
        by_name.extend(found.into_iter().map(|w| (w.name, w.id)));
        if last {
            break;
        }
    }
    Ok(by_name)
}

/// Writes the plan: groups, then jobs children first, each resolved to xjob ids.
async fn apply(
    store: &Store,
    plan: &Plan,
    existing: &Existing,
    source: &str,
    (now_ms, default_tz): (i64, chrono_tz::Tz),
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let mut group_ids: HashMap<i64, GroupId> = HashMap::new();
    for item in &plan.groups {
        match &item.action {
            GroupAction::Create(group) => {
                let created = store.insert_group(group).await?;
                writeln!(
                    out,
                    "created group {} {} -> xjob group {}",
                    item.xxl_id, item.app_name, created.id
                )?;
                group_ids.insert(item.xxl_id, created.id);
            }
            GroupAction::Exists(id) => {
                group_ids.insert(item.xxl_id, *id);
            }
            GroupAction::Skip => {}
        }
    }
    let mut job_ids: HashMap<i64, JobId> = existing.imported.clone();
    for &at in &plan.order {
        let item = &plan.jobs[at];
        let JobAction::Create(new) = &item.action else {
            continue;
        };
        fn resolve<Id: Copy>(
            xxl_id: &i64,
            what: &str,
            ids: &HashMap<i64, Id>,
            xxl_job_id: i64,
        ) -> anyhow::Result<Id> {
            ids.get(xxl_id).copied().ok_or_else(|| {
                anyhow::anyhow!("internal: {what} {xxl_id} of XXL-JOB job {xxl_job_id} unresolved")
            })
        }
        let mut job = new.job.clone();
        job.group_id = resolve(&new.xxl_group_id, "group", &group_ids, item.xxl_id)?;
        job.child_job_ids = new
            .xxl_children
            .iter()
            .map(|child| resolve(child, "child job", &job_ids, item.xxl_id))
            .collect::<anyhow::Result<_>>()?;
        let import = XxlJobImport {
            source: source.to_string(),
            xxl_job_id: item.xxl_id,
            job,
            glue_versions: new.glue_versions.clone(),
            replaces: new.replaces,
            now_ms,
        };
        let created = store.import_xxl_job(&import).await?;
        writeln!(
            out,
            "created job {} -> xjob job {}",
            item.xxl_id, created.id
        )?;
        job_ids.insert(item.xxl_id, created.id);
    }
    let at = (now_ms, default_tz);
    let made = create_workflows(store, plan, &group_ids, &job_ids, at, out).await?;
    let (groups, jobs) = (plan.group_tally(), plan.job_tally());
    write!(
        out,
        "done: created {} groups and {} jobs; {} groups and {} jobs were there already; \
         skipped {} groups and {} jobs",
        groups.create, jobs.create, groups.exists, jobs.exists, groups.skip, jobs.skip
    )?;
    if plan.workflows.is_some() {
        write!(out, "; created {made} workflows")?;
    }
    writeln!(out)?;
    Ok(())
}

/// Saves the planned workflows (their jobs are written by then); returns how many.
async fn create_workflows(
    store: &Store,
    plan: &Plan,
    group_ids: &HashMap<i64, GroupId>,
    job_ids: &HashMap<i64, JobId>,
    (now_ms, default_tz): (i64, chrono_tz::Tz),
    out: &mut impl Write,
) -> anyhow::Result<usize> {
    let mut made = 0;
    for item in plan.workflows.iter().flatten() {
        let workflows::WorkflowAction::Create(draft) = &item.action else {
            continue;
        };
        let group_id = group_ids.get(&draft.xxl_group_id).copied().ok_or_else(|| {
            anyhow::anyhow!(
                "internal: group {} of workflow '{}'",
                draft.xxl_group_id,
                item.name
            )
        })?;
        let workflow = draft
            .resolve(
                &item.name,
                group_id,
                |id| job_ids.get(&id).copied(),
                now_ms,
                default_tz,
            )
            .map_err(|error| anyhow::anyhow!("internal: workflow '{}': {error}", item.name))?;
        let created = store.insert_workflow(&workflow).await?;
        writeln!(
            out,
            "created workflow '{}' -> xjob workflow {}",
            item.name, created.id
        )?;
        made += 1;
    }
    Ok(made)
}
