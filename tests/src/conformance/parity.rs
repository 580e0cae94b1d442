//! Scenarios of what every SDK does the same as the Rust SDK beyond the protocol: the built-in
//! `command` handler, script (GLUE) jobs and the run log's line format.

use std::path::Path;
use std::time::Duration;

use xjob_proto::pb;

use super::world::{REGISTER_BOUND, RUN_BOUND, TOKEN, World, expect_status};
use crate::wait_until;

/// The script the `command` scenario runs with `sh`: `exit N` prints the run's variables and a
/// line on stderr, then exits N; `hang PIDFILE` starts a background `sleep`, writes its own and
/// that pid to PIDFILE and ticks until stopped.
const COMMAND_SCRIPT: &str = r#"case "$1" in
exit)
  echo "out job=$XJOB_JOB_ID log=$XJOB_LOG_ID trigger=$XJOB_TRIGGER_TYPE params=$XJOB_PARAMS"
  echo "err line" >&2
  exit "$2" ;;
hang)
  sleep 60 &
  echo "$$ $!" > "$2.tmp" && mv "$2.tmp" "$2"
  while :; do echo tick; sleep 0.1; done ;;
esac
"#;

/// The built-in `command` handler (registered as `command`, the params are the command line):
/// stdout and stderr go to the run log with the `XJOB_*` variables set, exit 0 is SUCCESS and
/// exit 3 FAILED ("command exited with status N"); a kill and a job timeout end the run KILLED
/// and TIMEOUT with every process of the command's group gone, the background one included.
pub async fn command(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("command");
    let group = world.create_group(&app).await?;
    world.start_executor(&app).await?;
    let script = world.work_dir.join(format!("{app}.sh"));
    std::fs::write(&script, COMMAND_SCRIPT)?;
    let script = script.display().to_string();
    anyhow::ensure!(
        !script.contains(char::is_whitespace),
        "the suite's work dir has whitespace in its path ({script}): params are split on it"
    );
    let job_id = world.create_job(World::job(group, "command")).await?;

    let params = format!("sh {script} exit 0");
    let ok = world.trigger_one(job_id, &params).await?;
    let log = world.wait_final(ok, RUN_BOUND).await?;
    expect_status(&log, pb::RunStatus::Success, 200)?;
    ensure_message(&log, "command exited with status 0")?;
    let (content, _) = world.read_log(ok).await?;
    let expected = format!("out job={job_id} log={ok} trigger=MANUAL params={params}");
    for line in [expected.as_str(), "err line", "command started: pid="] {
        anyhow::ensure!(content.contains(line), "the log lacks '{line}':\n{content}");
    }

    let failed = world
        .trigger_one(job_id, &format!("sh {script} exit 3"))
        .await?;
    let log = world.wait_final(failed, RUN_BOUND).await?;
    expect_status(&log, pb::RunStatus::Failed, 500)?;
    ensure_message(&log, "command exited with status 3")?;

    let pid_file = world.work_dir.join(format!("{app}.kill.pids"));
    let killed = world
        .trigger_one(job_id, &format!("sh {script} hang {}", pid_file.display()))
        .await?;
    world.wait_running_with(killed, "tick").await?;
    let answer = world
        .client
        .kill_run(pb::KillRunRequest { log_id: killed })
        .await?
        .into_inner();
    anyhow::ensure!(answer.killed, "KillRun: {}", answer.message);
    let log = world.wait_final(killed, RUN_BOUND).await?;
    expect_status(&log, pb::RunStatus::Killed, 500)?;
    processes_gone(&pid_file).await?;
    let (content, _) = world.read_log(killed).await?;
    anyhow::ensure!(
        content.contains("run stopped: sent SIGTERM to process group"),
        "the killed run's log does not say it signalled the group:\n{content}"
    );

    let timed = world
        .create_job(pb::Job {
            timeout_ms: 1000,
            ..World::job(group, "command")
        })
        .await?;
    let pid_file = world.work_dir.join(format!("{app}.timeout.pids"));
    let timed_out = world
        .trigger_one(timed, &format!("sh {script} hang {}", pid_file.display()))
        .await?;
    let log = world.wait_final(timed_out, RUN_BOUND).await?;
    expect_status(&log, pb::RunStatus::Timeout, 502)?;
    processes_gone(&pid_file).await
}

fn ensure_message(log: &pb::Log, expected: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        log.handle_msg == expected,
        "run {}: handle_msg '{}', expected '{expected}'",
        log.id,
        log.handle_msg
    );
    Ok(())
}

/// Waits until every pid listed in `pid_file` (the script and its background `sleep`) is gone:
/// no such process, or a zombie waiting for its parent.
async fn processes_gone(pid_file: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(pid_file)
        .map_err(|error| anyhow::anyhow!("{}: {error}", pid_file.display()))?;
    let pids: Vec<u32> = text
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    anyhow::ensure!(pids.len() == 2, "pid file '{text}'");
    // The stop takes at most 3/4 of the executor's kill grace (2 s): a few seconds cover it.
    wait_until(
        Duration::from_secs(10),
        &format!("processes {pids:?} to be gone"),
        || async { (!pids.iter().any(|pid| alive(*pid))).then_some(()) },
    )
    .await
}

fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses: `Z` is a zombie (ended).
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Every line of a run log is `yyyy-MM-dd HH:mm:ss.SSS <text>` (local time); the first is the
/// runner's `run start: ...` line, then the handler's lines, then `run end: ...`.
pub async fn log_format(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("logformat");
    let group = world.create_group(&app).await?;
    world.start_executor(&app).await?;
    let job_id = world.create_job(World::job(group, "log")).await?;
    let log_id = world.trigger_one(job_id, "2").await?;
    let log = world.wait_final(log_id, RUN_BOUND).await?;
    expect_status(&log, pb::RunStatus::Success, 200)?;
    let (content, _) = world.read_log(log_id).await?;
    let texts = content
        .lines()
        .map(|line| {
            line_text(line).ok_or_else(|| {
                anyhow::anyhow!("'{line}' is not 'yyyy-MM-dd HH:mm:ss.SSS text':\n{content}")
            })
        })
        .collect::<anyhow::Result<Vec<&str>>>()?;
    let expected = [
        format!(
            "run start: job_id={job_id} log_id={log_id} handler=log params=2 shard=0/1 \
             attempt=0 trigger=TRIGGER_TYPE_MANUAL timeout_ms=0"
        ),
        "line 1".to_string(),
        "line 2".to_string(),
        "run end: status=RUN_STATUS_SUCCESS code=200 message=wrote 2 lines".to_string(),
    ];
    anyhow::ensure!(
        texts == expected,
        "the run log's lines are {texts:#?}, expected {expected:#?}"
    );
    Ok(())
}

/// The text after a `yyyy-MM-dd HH:mm:ss.SSS ` timestamp, or `None` if the line has none.
fn line_text(line: &str) -> Option<&str> {
    const PATTERN: &[u8] = b"dddd-dd-dd dd:dd:dd.ddd ";
    let bytes = line.as_bytes();
    let matches = bytes.len() >= PATTERN.len()
        && PATTERN
            .iter()
            .zip(bytes)
            .all(|(expected, byte)| match expected {
                b'd' => byte.is_ascii_digit(),
                other => other == byte,
            });
    matches.then(|| &line[PATTERN.len()..])
}

/// Script (GLUE) jobs are off unless enabled: a shell script run on an executor without them is
/// refused (FAILED, trigger code 500, "not enabled"). On one started with `XJOB_GLUE_SHELL=1`
/// the job's script runs with bash, its params as arguments and the `XJOB_*` variables set, and
/// once the script is edited (`UpdateGlue`) the next run runs the new version.
pub async fn glue(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("glue-off");
    let group = world.create_group(&app).await?;
    world.start_executor(&app).await?;
    let job_id = world.create_job(glue_job(group, "v1")).await?;
    let refused = world.trigger_one(job_id, "p").await?;
    let log = world.wait_final(refused, RUN_BOUND).await?;
    anyhow::ensure!(
        log.status == pb::RunStatus::Failed as i32
            && log.trigger_code == 500
            && log.trigger_msg.contains("GLUE_TYPE_SHELL is not enabled"),
        "a shell script run on an executor without glue: {} trigger_code {} '{}'",
        super::world::status_name(log.status),
        log.trigger_code,
        log.trigger_msg
    );
    world.stop_executors().await;

    let app = world.app_name("glue");
    let group = world.create_group(&app).await?;
    let admin_url = world.admin.url();
    let glue_on = vec![("XJOB_GLUE_SHELL".to_string(), "1".to_string())];
    let port = super::admin::free_port()?;
    let index = world.spawn_executor_env(&app, TOKEN, port, &admin_url, glue_on)?;
    let address = world.executors[index].address();
    world.wait_listed(&app, &address, REGISTER_BOUND).await?;
    let job_id = world.create_job(glue_job(group, "v1")).await?;
    for version in ["v1", "v2"] {
        if version == "v2" {
            world
                .client
                .update_glue(pb::UpdateGlueRequest {
                    job_id,
                    glue_source: glue_source(version),
                    glue_remark: "edited".to_string(),
                })
                .await?;
        }
        let log_id = world.trigger_one(job_id, "p1 p2").await?;
        let log = world.wait_final(log_id, RUN_BOUND).await?;
        expect_status(&log, pb::RunStatus::Success, 200)?;
        ensure_message(&log, "command exited with status 0")?;
        let (content, _) = world.read_log(log_id).await?;
        let expected = format!("glue {version} p1 p2 log={log_id}");
        anyhow::ensure!(
            content.contains(&expected),
            "the script's log lacks '{expected}':\n{content}"
        );
    }
    Ok(())
}

/// A shell script that echoes its version, its arguments and its run's log id.
fn glue_source(version: &str) -> String {
    format!("echo \"glue {version} $1 $2 log=$XJOB_LOG_ID\"\n")
}

fn glue_job(group_id: i64, version: &str) -> pb::Job {
    pb::Job {
        glue_type: pb::GlueType::Shell as i32,
        glue_source: glue_source(version),
        glue_remark: "conformance".to_string(),
        handler: String::new(),
        ..World::job(group_id, "")
    }
}
