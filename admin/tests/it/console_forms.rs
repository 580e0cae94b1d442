//! The web console's forms over plain HTTP, against the real `xjob` binary (an open console on
//! loopback, no users) and, for scripts, a real executor running bash:
//!
//! - a SHELL script with CRLF line ends, posted as a browser posts a text area, is stored with
//!   LF and runs SUCCESS; the API's UpdateGlue, UpdateJob and TriggerJob store LF too;
//! - bad numbers (timeout, retries, child ids, run filters) are refused under their field and
//!   nothing is saved; timeouts take units;
//! - errors stay in the form and name no internals: a trigger address outside the group, a
//!   run id that is not a number, an unknown URL, the audit trail's address type, the
//!   preview's time-zone error;
//! - times carry their job's zone, the runs filter reads typed times in the zone the viewer
//!   picked (cookie `xjob_tz`, or the `tz` the form carried) and says which, and the
//!   dashboard's "failed today" tile and failing-jobs card count the same runs.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use xjob_executor::Executor;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;
use xjob_testkit::{AdminOutput, AdminProcess, AdminSpec, connect_admin, free_port, wait_until};

type Client = JobAdminClient<tonic::transport::Channel>;

const APP: &str = "forms-app";

/// A running admin with its console, and an open console session (cookie and CSRF token).
struct Fixture {
    _dir: tempfile::TempDir,
    admin: AdminProcess,
    url: String,
    client: Client,
    http_port: u16,
    cookie: String,
    csrf: String,
    group_id: i64,
}

/// An HTTP answer: the status code, the headers and the body.
#[derive(Debug)]
struct Answer {
    code: u16,
    head: String,
    body: String,
}

impl Fixture {
    async fn start() -> anyhow::Result<Fixture> {
        let dir = tempfile::tempdir()?;
        let (port, http_port) = (free_port()?, free_port()?);
        let url = format!("http://127.0.0.1:{port}");
        let config_file = dir.path().join("admin.toml");
        std::fs::write(
            &config_file,
            format!(
                "heartbeat_interval = \"500ms\"\nexecutor_lease = \"3s\"\nnode_lease = \"2s\"\n\
                 followup_interval = \"100ms\"\nreport_interval = \"1s\"\n\
                 http_listen = \"127.0.0.1:{http_port}\"\n"
            ),
        )?;
        let admin = AdminProcess::spawn(AdminSpec {
            binary: env!("CARGO_BIN_EXE_xjob").into(),
            node_id: "forms-admin".into(),
            port,
            data_dir: dir.path().join("admin"),
            database_url: None,
            config_file,
            log_filter: "warn".into(),
            output: AdminOutput::AppendTo(dir.path().join("admin.log")),
            env: Vec::new(),
        })?;
        let mut client = connect_admin(&url, Duration::from_secs(20)).await?;
        let group_id = client
            .create_group(pb::CreateGroupRequest {
                group: Some(pb::Group {
                    app_name: APP.into(),
                    title: "forms".into(),
                    address_type: pb::AddressType::Auto as i32,
                    ..Default::default()
                }),
            })
            .await?
            .into_inner()
            .group
            .map(|group| group.id)
            .unwrap_or_default();
        let first = wait_until(Duration::from_secs(10), "the console to answer", || async {
            http(http_port, "GET", "/", "", "").await.ok()
        })
        .await?;
        let cookie = first
            .head
            .lines()
            .filter_map(|line| line.strip_prefix("set-cookie: "))
            .find(|value| value.starts_with("xjob_session="))
            .and_then(|value| value.split(';').next())
            .map(str::to_string)
            .ok_or_else(|| anyhow::anyhow!("no session cookie: {}", first.head))?;
        let form = http(http_port, "GET", "/jobs/new", &cookie, "").await?;
        let csrf = form
            .body
            .split("name=\"csrf\" value=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .map(str::to_string)
            .ok_or_else(|| anyhow::anyhow!("no CSRF field on /jobs/new"))?;
        Ok(Fixture {
            _dir: dir,
            admin,
            url,
            client,
            http_port,
            cookie,
            csrf,
            group_id,
        })
    }

    async fn get(&self, path: &str) -> anyhow::Result<Answer> {
        http(self.http_port, "GET", path, &self.cookie, "").await
    }

    /// Posts `fields` (with the session's CSRF token) as a browser posts a form.
    async fn post(&self, path: &str, fields: &[(&str, &str)]) -> anyhow::Result<Answer> {
        let mut body = form_urlencoded::Serializer::new(String::new());
        body.append_pair("csrf", &self.csrf);
        for (name, value) in fields {
            body.append_pair(name, value);
        }
        http(self.http_port, "POST", path, &self.cookie, &body.finish()).await
    }

    /// The editor's fields for a new job of the fixture's group; `overrides` replace them.
    fn job_form<'a>(
        &'a self,
        group: &'a str,
        overrides: &[(&'a str, &'a str)],
    ) -> Vec<(&'a str, &'a str)> {
        let mut fields = vec![
            ("group_id", group),
            ("name", "form job"),
            ("author", "tests"),
            ("schedule_type", "NONE"),
            ("schedule_conf", ""),
            ("time_zone", ""),
            ("handler", "echo"),
            ("params", ""),
            ("route_strategy", "FIRST"),
            ("misfire_strategy", "DO_NOTHING"),
            ("block_strategy", "SERIAL_EXECUTION"),
            ("timeout_ms", "0"),
            ("fail_retry_count", "0"),
            ("child_job_ids", ""),
            ("glue_type", "BEAN"),
        ];
        for (name, value) in overrides {
            match fields.iter_mut().find(|(field, _)| field == name) {
                Some(field) => field.1 = value,
                None => fields.push((name, value)),
            }
        }
        fields
    }

    async fn job_count(&mut self) -> anyhow::Result<usize> {
        let jobs = self
            .client
            .list_jobs(pb::ListJobsRequest {
                page_size: 100,
                ..Default::default()
            })
            .await?
            .into_inner()
            .jobs;
        Ok(jobs.len())
    }

    async fn get_job(&mut self, id: i64) -> anyhow::Result<pb::Job> {
        self.client
            .get_job(pb::GetJobRequest { id })
            .await?
            .into_inner()
            .job
            .ok_or_else(|| anyhow::anyhow!("job {id} has no body"))
    }
}

/// One HTTP/1.0 request on a fresh connection (the answer ends when the server closes it).
async fn http(
    port: u16,
    method: &str,
    path: &str,
    cookie: &str,
    body: &str,
) -> anyhow::Result<Answer> {
    let headers: &[(&str, &str)] = if cookie.is_empty() {
        &[]
    } else {
        &[("Cookie", cookie)]
    };
    http_with(port, method, path, headers, body).await
}

/// [`http`] with any request headers.
async fn http_with(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> anyhow::Result<Answer> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let mut request = format!("{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if method == "POST" {
        request.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        stream.read_to_string(&mut response),
    )
    .await??;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("no HTTP header in {response:.200}"))?;
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no status in {head:.200}"))?;
    Ok(Answer {
        code,
        head: head.to_string(),
        body: body.to_string(),
    })
}

/// The text of the error shown under field `name` (`<div class="error" id="err-NAME">`),
/// unescaped.
fn field_error(body: &str, name: &str) -> Option<String> {
    let marker = format!("id=\"err-{name}\" role=\"alert\">");
    let rest = body.split(&marker).nth(1)?;
    rest.split("</div>").next().map(unescape)
}

/// Page text without the HTML escapes the console writes.
fn unescape(text: &str) -> String {
    text.replace("&#39;", "'")
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The job id a successful create redirects to (`location: /jobs/ID?notice=…`).
fn created_job_id(answer: &Answer) -> Option<i64> {
    let location = answer
        .head
        .lines()
        .find_map(|line| line.strip_prefix("location: /jobs/"))?;
    location.split(['?', '/']).next()?.parse().ok()
}

async fn wait_for_end(client: &mut Client, log_id: i64) -> anyhow::Result<pb::Log> {
    wait_until(Duration::from_secs(30), "the run to end", || {
        let mut client = client.clone();
        async move {
            let log = client
                .get_log(pb::GetLogRequest { id: log_id })
                .await
                .ok()?
                .into_inner()
                .log?;
            let open = [pb::RunStatus::Pending as i32, pb::RunStatus::Running as i32];
            (!open.contains(&log.status)).then_some(log)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crlf_script_from_the_console_is_stored_with_lf_and_runs() -> anyhow::Result<()> {
    let mut fx = Fixture::start().await?;
    let dir = tempfile::tempdir()?;
    let executor = Executor::builder()
        .app_name(APP)
        .admin_addrs([fx.url.clone()])
        .bind("127.0.0.1:0")
        .log_dir(dir.path())
        .glue_interpreter(pb::GlueType::Shell, "bash")
        .start()
        .await?;
    executor.wait_registered(Duration::from_secs(10)).await?;
    // With CR left in, bash reads `then\r` as a command and fails ("unexpected end of file").
    let script = "if true; then\r\n  echo \"crlf-ok $1\"\r\nfi\r\n";
    let group = fx.group_id.to_string();
    let fields = fx.job_form(
        &group,
        &[
            ("glue_type", "SHELL"),
            ("handler", ""),
            ("glue_source", script),
            ("params", "first\r\nsecond"),
        ],
    );
    let created = fx.post("/jobs/new", &fields).await?;
    let job_id = created_job_id(&created).ok_or_else(|| {
        anyhow::anyhow!("job not created: {} {:.2000}", created.head, created.body)
    })?;
    let job = fx.get_job(job_id).await?;
    assert_eq!(
        job.glue_source,
        "if true; then\n  echo \"crlf-ok $1\"\nfi\n"
    );
    assert_eq!(job.params, "first\nsecond");

    let log_ids = fx
        .client
        .trigger_job(pb::TriggerJobRequest {
            id: job_id,
            params: Some("one\r\ntwo".into()),
            addresses: Vec::new(),
        })
        .await?
        .into_inner()
        .log_ids;
    let log_id = *log_ids.first().ok_or_else(|| anyhow::anyhow!("no run"))?;
    let log = wait_for_end(&mut fx.client, log_id).await?;
    assert_eq!(log.params, "one\ntwo", "trigger params are stored with LF");
    assert_eq!(
        log.status,
        pb::RunStatus::Success as i32,
        "the script runs: {log:?}"
    );

    // A new version saved from the console's source form, and one through UpdateGlue.
    let saved = fx
        .post(
            &format!("/jobs/{job_id}/glue"),
            &[
                ("glue_source", "echo v2\r\necho done\r"),
                ("glue_remark", "v2"),
            ],
        )
        .await?;
    assert_eq!(saved.code, 303, "{:.1000}", saved.body);
    assert_eq!(
        fx.get_job(job_id).await?.glue_source,
        "echo v2\necho done\n"
    );
    let updated = fx
        .client
        .update_glue(pb::UpdateGlueRequest {
            job_id,
            glue_source: "echo v3\r\n".into(),
            glue_remark: "v3".into(),
        })
        .await?
        .into_inner()
        .job
        .unwrap_or_default();
    assert_eq!(updated.glue_source, "echo v3\n");
    let mut edited = fx.get_job(job_id).await?;
    edited.params = "a\rb\r\nc".into();
    fx.client
        .update_job(pb::UpdateJobRequest { job: Some(edited) })
        .await?;
    assert_eq!(fx.get_job(job_id).await?.params, "a\nb\nc");
    executor.shutdown().await;
    drop(fx.admin);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_numbers_are_refused_under_their_field_and_nothing_is_saved() -> anyhow::Result<()> {
    let mut fx = Fixture::start().await?;
    let group = fx.group_id.to_string();
    let refusals = [
        (
            "timeout_ms",
            "30x",
            "'30x' is not a duration: use 30s, 5m, 1h or plain seconds",
        ),
        (
            "fail_retry_count",
            "three",
            "'three' is not a whole number of 0 or more",
        ),
        (
            "fail_retry_count",
            "-1",
            "'-1' is not a whole number of 0 or more",
        ),
        ("child_job_ids", "abc", "'abc' is not a job id"),
    ];
    for (field, value, expected) in refusals {
        let answer = fx
            .post("/jobs/new", &fx.job_form(&group, &[(field, value)]))
            .await?;
        assert_eq!(answer.code, 400, "{field}={value}");
        let shown = field_error(&answer.body, field)
            .ok_or_else(|| anyhow::anyhow!("no error under {field}: {:.3000}", answer.body))?;
        assert!(shown.contains(expected), "{field}={value}: {shown}");
        assert_eq!(fx.job_count().await?, 0, "{field}={value} saved nothing");
    }

    // Units are accepted and the editor shows them back.
    let created = fx
        .post("/jobs/new", &fx.job_form(&group, &[("timeout_ms", "5m")]))
        .await?;
    let job_id = created_job_id(&created).ok_or_else(|| anyhow::anyhow!("not created"))?;
    assert_eq!(fx.get_job(job_id).await?.timeout_ms, 300_000);
    let editor = fx.get(&format!("/jobs/{job_id}")).await?;
    assert!(
        editor
            .body
            .contains("name=\"timeout_ms\" id=\"timeout_ms\" value=\"5m\""),
        "{:.3000}",
        editor.body
    );
    // An edit with a bad timeout keeps the stored one.
    let answer = fx
        .post(
            &format!("/jobs/{job_id}"),
            &fx.job_form(&group, &[("timeout_ms", "30 parsecs")]),
        )
        .await?;
    assert_eq!(answer.code, 400);
    assert!(field_error(&answer.body, "timeout_ms").is_some());
    assert_eq!(fx.get_job(job_id).await?.timeout_ms, 300_000);

    // The runs list refuses a filter it cannot read instead of dropping it.
    for (query, expected) in [
        ("from=yesterday", "from: 'yesterday' is not a time"),
        (
            "to=2024-13-45T10:00",
            "to: '2024-13-45T10:00' is not a time",
        ),
        ("job=abc", "job: 'abc' is not an id"),
    ] {
        let answer = fx.get(&format!("/runs?{query}")).await?;
        assert_eq!(answer.code, 400, "{query}");
        assert!(
            answer.body.contains("id=\"filter-error\"")
                && unescape(&answer.body).contains(expected),
            "{query}: {:.3000}",
            answer.body
        );
    }
    let fine = fx.get("/runs?from=2024-05-01T13%3A30&to=").await?;
    assert_eq!(fine.code, 200, "{:.2000}", fine.body);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_stay_in_the_form_and_name_no_internals() -> anyhow::Result<()> {
    let fx = Fixture::start().await?;
    let group = fx.group_id.to_string();
    let created = fx.post("/jobs/new", &fx.job_form(&group, &[])).await?;
    let job_id = created_job_id(&created).ok_or_else(|| anyhow::anyhow!("not created"))?;

    // An address the group does not have: under the addresses field, on the job page.
    let answer = fx
        .post(
            &format!("/jobs/{job_id}/trigger"),
            &[("params", "p"), ("addresses", "http://127.0.0.1:9")],
        )
        .await?;
    assert_eq!(answer.code, 403);
    let shown = field_error(&answer.body, "addresses")
        .ok_or_else(|| anyhow::anyhow!("no error under addresses: {:.3000}", answer.body))?;
    assert!(
        shown.contains("'http://127.0.0.1:9' is not an address of group"),
        "{shown}"
    );
    assert!(
        answer.body.contains("id=\"trigger-form\""),
        "the form is still there"
    );
    assert!(!answer.body.contains("trigger.any_address"), "{shown}");
    assert!(!answer.body.contains("trigger_any_address"), "{shown}");

    // Ids that are not numbers and unknown URLs: the console's HTML 404 page.
    for path in ["/runs/abc", "/jobs/abc", "/no/such/page"] {
        let answer = fx.get(path).await?;
        assert_eq!(answer.code, 404, "{path}");
        assert!(answer.head.contains("text/html"), "{path}: {}", answer.head);
        assert!(
            answer.body.contains("id=\"error\""),
            "{path}: {:.500}",
            answer.body
        );
        assert!(!answer.body.contains("Cannot parse"), "{path}");
    }

    // The audit trail names the address type.
    let audit = fx.get("/audit").await?;
    assert!(
        audit.body.contains("address_type AUTO"),
        "{:.3000}",
        audit.body
    );
    assert!(!audit.body.contains("address_type 1"));

    // The preview names the time zone as the refused field (the editor shows it there).
    let preview = fx
        .get("/preview?schedule_type=CRON&schedule_conf=0+*+*+*+*+%3F&time_zone=Mars%2FBase")
        .await?;
    let json: serde_json::Value = serde_json::from_str(&preview.body)?;
    assert_eq!(json["field"], "time_zone", "{json}");

    // A console password under the minimum is refused with the rule, and no user is made.
    let answer = fx
        .post(
            "/users",
            &[
                ("name", "shorty"),
                ("role", "viewer"),
                ("password", "elevenchars"),
            ],
        )
        .await?;
    assert_eq!(answer.code, 400, "{:.2000}", answer.body);
    assert!(
        answer.body.contains("password: at least 12 characters"),
        "{:.3000}",
        answer.body
    );
    assert!(
        !answer.body.contains("elevenchars"),
        "the password is echoed"
    );
    let users = fx.get("/users").await?;
    assert!(
        users.body.contains("at least 12 characters"),
        "the form says the minimum"
    );
    assert!(!users.body.contains("shorty"), "a user was created");

    // A group with jobs is not deleted: the answer says why.
    let answer = fx.post(&format!("/groups/{group}/delete"), &[]).await?;
    assert_eq!(answer.code, 409, "{:.2000}", answer.body);
    assert!(
        answer.body.contains("job(s); delete them first"),
        "{:.3000}",
        answer.body
    );
    assert!(
        fx.get(&format!("/groups/{group}"))
            .await?
            .body
            .contains("id=\"delete-group\"")
    );

    // A group no job uses is deleted, and the executors page no longer lists it.
    let mut fx = fx;
    let spare = fx
        .client
        .create_group(pb::CreateGroupRequest {
            group: Some(pb::Group {
                app_name: "spare-app".into(),
                title: "spare".into(),
                address_type: pb::AddressType::Auto as i32,
                ..Default::default()
            }),
        })
        .await?
        .into_inner()
        .group
        .map(|group| group.id)
        .unwrap_or_default();
    assert!(fx.get("/executors").await?.body.contains("spare-app"));
    let answer = fx.post(&format!("/groups/{spare}/delete"), &[]).await?;
    assert_eq!(answer.code, 303, "{:.2000}", answer.body);
    assert!(!fx.get("/executors").await?.body.contains("spare-app"));
    Ok(())
}

/// `at_ms` as a `datetime-local` value on the wall clock of `zone`.
fn wall_clock(at_ms: i64, zone: chrono_tz::Tz) -> String {
    chrono::DateTime::from_timestamp_millis(at_ms)
        .map(|at| at.with_timezone(&zone).format("%Y-%m-%dT%H:%M").to_string())
        .unwrap_or_default()
}

/// The number in the dashboard tile labelled `label`.
fn tile(body: &str, label: &str) -> Option<i64> {
    let before = body.split(&format!("</b><span>{label}</span>")).next()?;
    before.rsplit("<b>").next()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_are_read_in_the_zone_shown_and_the_dashboard_agrees() -> anyhow::Result<()> {
    let mut fx = Fixture::start().await?;
    let group = fx.group_id.to_string();
    let created = fx
        .post(
            "/jobs/new",
            &fx.job_form(
                &group,
                &[("time_zone", "Asia/Tokyo"), ("name", "tokyo job")],
            ),
        )
        .await?;
    let job_id = created_job_id(&created).ok_or_else(|| anyhow::anyhow!("not created"))?;
    // No executor is online: the run fails at once (a failed run for the dashboard).
    let log_id = fx
        .client
        .trigger_job(pb::TriggerJobRequest {
            id: job_id,
            params: None,
            addresses: Vec::new(),
        })
        .await?
        .into_inner()
        .log_ids
        .first()
        .copied()
        .ok_or_else(|| anyhow::anyhow!("no run"))?;
    let run = wait_for_end(&mut fx.client, log_id).await?;
    assert_eq!(run.status, pb::RunStatus::Failed as i32, "{run:?}");
    let triggered = run.trigger_time_ms;

    // A run's times carry its job's zone, for the "job's zone" choice.
    let list = fx.get("/runs").await?;
    assert!(
        list.body.contains("data-tz=\"Asia/Tokyo\""),
        "{:.3000}",
        list.body
    );
    assert!(
        list.body.contains("id=\"runs-live\" data-live"),
        "a live region"
    );

    // Half an hour before the run, on Berlin's and on Tokyo's wall clock.
    let berlin = wall_clock(triggered - 1_800_000, chrono_tz::Europe::Berlin);
    let tokyo = wall_clock(triggered - 1_800_000, chrono_tz::Asia::Tokyo);
    let session = fx.cookie.clone();
    let listed = |answer: &Answer| answer.body.contains(&format!("data-run-id=\"{log_id}\""));
    let zone_named = |answer: &Answer, zone: &str| {
        answer
            .body
            .contains(&format!("id=\"filter-zone\">(times in {zone})"))
    };
    let query = |from: &str| format!("/runs?job={job_id}&from={}", from.replace(':', "%3A"));

    // Read in the viewer's zone (Berlin): from half an hour before, the run is listed.
    fx.cookie = format!("{session}; xjob_tz=local:Europe/Berlin");
    let answer = fx.get(&query(&berlin)).await?;
    assert_eq!(answer.code, 200);
    assert!(
        zone_named(&answer, "Europe/Berlin"),
        "{:.3000}",
        answer.body
    );
    assert!(listed(&answer), "from {berlin} Berlin time lists the run");
    // The same wall-clock time read as UTC is after the run (Berlin is ahead of UTC).
    let answer = fx.get(&format!("{}&tz=UTC", query(&berlin))).await?;
    assert!(zone_named(&answer, "UTC"), "the form's own zone wins");
    assert!(!listed(&answer), "from {berlin} UTC is after the run");
    assert!(
        answer.body.contains("name=\"tz\" value=\"UTC\""),
        "the form carries its zone"
    );
    // Without a choice, UTC, and said.
    fx.cookie = session.clone();
    let answer = fx.get(&query(&berlin)).await?;
    assert!(zone_named(&answer, "UTC"));
    assert!(!listed(&answer));
    // "Job's zone": a list of one job reads its times in that job's zone.
    fx.cookie = format!("{session}; xjob_tz=job");
    let answer = fx.get(&query(&tokyo)).await?;
    assert!(zone_named(&answer, "Asia/Tokyo"), "{:.3000}", answer.body);
    assert!(listed(&answer), "from {tokyo} Tokyo time lists the run");
    fx.cookie = session;

    // The preview names the zone its times are in.
    let preview = fx
        .get("/preview?schedule_type=CRON&schedule_conf=0+0+*+*+*+%3F&time_zone=Asia%2FTokyo")
        .await?;
    assert!(
        preview.body.contains("\"zone\":\"Asia/Tokyo\""),
        "{}",
        preview.body
    );

    // The dashboard's failed-today tile and its failing-jobs card count the same runs.
    let dashboard = fx.get("/").await?;
    let failed = tile(&dashboard.body, "failed today");
    assert_eq!(failed, Some(1), "{:.4000}", dashboard.body);
    assert!(
        dashboard
            .body
            .contains("id=\"failed-total\">Runs failed today: 1 ("),
        "{:.6000}",
        dashboard.body
    );
    assert!(dashboard.body.contains("id=\"dashboard-live\" data-live"));
    Ok(())
}

/// Logs `name` in through the login form; returns the session cookie and its CSRF token (from
/// the Account page, which every user may open).
async fn login(port: u16, name: &str, password: &str) -> anyhow::Result<Option<(String, String)>> {
    let form = http(port, "GET", "/login", "", "").await?;
    let login_cookie = form
        .head
        .lines()
        .filter_map(|line| line.strip_prefix("set-cookie: "))
        .find(|value| value.starts_with("xjob_login="))
        .and_then(|value| value.split(';').next())
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("no login cookie: {}", form.head))?;
    let csrf = login_cookie.trim_start_matches("xjob_login=");
    let mut body = form_urlencoded::Serializer::new(String::new());
    body.append_pair("csrf", csrf)
        .append_pair("next", "/account")
        .append_pair("name", name)
        .append_pair("password", password);
    let answer = http(port, "POST", "/login", &login_cookie, &body.finish()).await?;
    let Some(cookie) = session_cookie(&answer) else {
        return Ok(None);
    };
    let csrf = csrf_of(port, &cookie).await?;
    Ok(Some((cookie, csrf)))
}

/// The session cookie an answer sets, if any.
fn session_cookie(answer: &Answer) -> Option<String> {
    answer
        .head
        .lines()
        .filter_map(|line| line.strip_prefix("set-cookie: "))
        .find(|value| value.starts_with("xjob_session=") && !value.contains("Max-Age=0"))
        .and_then(|value| value.split(';').next())
        .map(str::to_string)
}

async fn csrf_of(port: u16, cookie: &str) -> anyhow::Result<String> {
    let page = http(port, "GET", "/account", cookie, "").await?;
    page.body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("no CSRF field on /account: {:.500}", page.body))
}

async fn post_as(
    port: u16,
    (cookie, csrf): &(String, String),
    path: &str,
    fields: &[(&str, &str)],
) -> anyhow::Result<Answer> {
    let mut body = form_urlencoded::Serializer::new(String::new());
    body.append_pair("csrf", csrf);
    for (name, value) in fields {
        body.append_pair(name, value);
    }
    http(port, "POST", path, cookie, &body.finish()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admins_change_roles_and_reset_passwords_users_change_their_own() -> anyhow::Result<()> {
    let mut fx = Fixture::start().await?;
    let port = fx.http_port;
    let mut ids = Vec::new();
    // The first user is made while the admin runs open; it ends that, so the second needs its
    // token.
    let mut token = String::new();
    for (name, role, password) in [
        ("root", "admin", "root's long password"),
        ("vera", "viewer", "vera's first password"),
    ] {
        let mut request = tonic::Request::new(pb::CreateUserRequest {
            name: name.into(),
            role: role.into(),
            password: password.into(),
            token_ttl_ms: 0,
        });
        if !token.is_empty() {
            request
                .metadata_mut()
                .insert("authorization", format!("Bearer {token}").parse()?);
        }
        let created = fx.client.create_user(request).await?.into_inner();
        ids.push(created.user.map(|user| user.id).unwrap_or_default());
        token = created.token;
    }
    let (root_id, vera_id) = (ids[0], ids[1]);
    let root = login(port, "root", "root's long password")
        .await?
        .ok_or_else(|| anyhow::anyhow!("root cannot log in"))?;

    // The Users page offers a role change and a password reset on other users' rows only.
    let users = http(port, "GET", "/users", &root.0, "").await?;
    assert!(
        users
            .body
            .contains(&format!("action=\"/users/{vera_id}/role\""))
    );
    assert!(
        users
            .body
            .contains(&format!("href=\"/users/{vera_id}/password\""))
    );
    assert!(
        !users
            .body
            .contains(&format!("action=\"/users/{root_id}/role\""))
    );
    let answer = post_as(
        port,
        &root,
        &format!("/users/{vera_id}/role"),
        &[("role", "operator")],
    )
    .await?;
    assert_eq!(answer.code, 303, "{:.2000}", answer.body);
    let users = http(port, "GET", "/users", &root.0, "").await?;
    let vera_row = users
        .body
        .split(&format!("<tr><td>{vera_id}</td>"))
        .nth(1)
        .and_then(|rest| rest.split("</tr>").next())
        .unwrap_or_default();
    assert!(
        vera_row.contains("<td>operator</td>"),
        "vera is not an operator: {vera_row}"
    );

    // Vera signs in; a short reset is refused under the field, a good one ends her session.
    let vera = login(port, "vera", "vera's first password")
        .await?
        .ok_or_else(|| anyhow::anyhow!("vera cannot log in"))?;
    let reset = format!("/users/{vera_id}/password");
    let short = post_as(port, &root, &reset, &[("new_password", "short")]).await?;
    assert_eq!(short.code, 400, "{:.2000}", short.body);
    let shown = field_error(&short.body, "new_password").unwrap_or_default();
    assert!(shown.contains("at least 12 characters"), "{shown}");
    let done = post_as(
        port,
        &root,
        &reset,
        &[("new_password", "set by root today")],
    )
    .await?;
    assert_eq!(done.code, 303, "{:.2000}", done.body);
    let ended = http(port, "GET", "/account", &vera.0, "").await?;
    assert!(
        ended.code == 303 || ended.code == 302 || ended.code == 307,
        "vera's session outlived the reset: {}",
        ended.head
    );
    assert!(
        login(port, "vera", "vera's first password")
            .await?
            .is_none()
    );
    let vera = login(port, "vera", "set by root today")
        .await?
        .ok_or_else(|| anyhow::anyhow!("vera cannot log in with the reset password"))?;

    // Her own change: the current password is checked, under its field.
    let wrong = post_as(
        port,
        &vera,
        "/account/password",
        &[
            ("current_password", "not my password"),
            ("new_password", "vera's own choice"),
        ],
    )
    .await?;
    assert_eq!(wrong.code, 400, "{:.2000}", wrong.body);
    let shown = field_error(&wrong.body, "current_password").unwrap_or_default();
    assert!(shown.contains("does not match"), "{shown}");
    let changed = post_as(
        port,
        &vera,
        "/account/password",
        &[
            ("current_password", "set by root today"),
            ("new_password", "vera's own choice"),
        ],
    )
    .await?;
    assert_eq!(changed.code, 303, "{:.2000}", changed.body);
    // This browser keeps working with the new session; the old cookie is over.
    let fresh = session_cookie(&changed).ok_or_else(|| anyhow::anyhow!("no new session"))?;
    assert_eq!(http(port, "GET", "/account", &fresh, "").await?.code, 200);
    assert_ne!(http(port, "GET", "/account", &vera.0, "").await?.code, 200);
    assert!(login(port, "vera", "vera's own choice").await?.is_some());
    fx.admin.process_mut().kill_now()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_speaks_the_browsers_language_or_the_one_picked() -> anyhow::Result<()> {
    let fx = Fixture::start().await?;
    let port = fx.http_port;
    // The browser prefers Chinese: the page is in Chinese, and says so.
    let chinese = http_with(
        port,
        "GET",
        "/users",
        &[
            ("Cookie", &fx.cookie),
            ("Accept-Language", "zh-CN,zh;q=0.9,en;q=0.5"),
        ],
        "",
    )
    .await?;
    assert_eq!(chinese.code, 200);
    assert!(
        chinese.body.contains("<html lang=\"zh-Hans\">"),
        "{:.300}",
        chinese.body
    );
    assert!(chinese.body.contains(">任务</a>"), "{:.2000}", chinese.body);
    assert!(
        chinese.body.contains(">新建用户</h2>"),
        "the page's own words too"
    );
    // A picked language (the cookie) wins over the browser's.
    let picked = format!("{}; xjob_lang=en", fx.cookie);
    let english = http_with(
        port,
        "GET",
        "/users",
        &[("Cookie", &picked), ("Accept-Language", "zh-CN")],
        "",
    )
    .await?;
    assert!(
        english.body.contains("<html lang=\"en\">"),
        "{:.300}",
        english.body
    );
    assert!(english.body.contains(">Jobs</a>"));

    // The switch sets the cookie for a year and goes back to the page it was used on.
    let referer = format!("http://127.0.0.1:{port}/runs?status=FAILED");
    let switched = http_with(
        port,
        "GET",
        "/language?lang=zh",
        &[("Referer", &referer)],
        "",
    )
    .await?;
    assert_eq!(switched.code, 303, "{}", switched.head);
    assert!(
        switched.head.contains("location: /runs?status=FAILED"),
        "{}",
        switched.head
    );
    assert!(
        switched.head.contains(
            "set-cookie: xjob_lang=zh; Path=/; HttpOnly; SameSite=Strict; Max-Age=31536000"
        ),
        "{}",
        switched.head
    );
    let elsewhere = http_with(
        port,
        "GET",
        "/language?lang=en",
        &[("Referer", "http://127.0.0.1:1//evil.example/")],
        "",
    )
    .await?;
    assert!(
        elsewhere
            .head
            .lines()
            .any(|line| line.trim_end() == "location: /"),
        "{}",
        elsewhere.head
    );
    let unknown = http(port, "GET", "/language?lang=fr", "", "").await?;
    assert_eq!(unknown.code, 400, "{:.500}", unknown.body);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_count_their_rows_and_sort_by_a_clicked_column() -> anyhow::Result<()> {
    let fx = Fixture::start().await?;
    let group = fx.group_id.to_string();
    for name in ["bravo", "alpha", "charlie"] {
        let created = fx
            .post("/jobs/new", &fx.job_form(&group, &[("name", name)]))
            .await?;
        anyhow::ensure!(created_job_id(&created).is_some(), "{name} not created");
    }
    let position = |body: &str, name: &str| body.find(&format!(">{name}</a>"));
    let sorted = fx.get("/jobs?sort=-name").await?;
    assert_eq!(sorted.code, 200, "{:.2000}", sorted.body);
    assert!(
        sorted.body.contains("id=\"jobs-total\">3 jobs</p>"),
        "{:.3000}",
        sorted.body
    );
    let order: Vec<Option<usize>> = ["charlie", "bravo", "alpha"]
        .iter()
        .map(|name| position(&sorted.body, name))
        .collect();
    assert!(
        order.iter().all(Option::is_some) && order.windows(2).all(|pair| pair[0] < pair[1]),
        "names not descending: {order:?}"
    );
    // The sorted column says so, and its link sorts the other way; the filters are kept.
    assert!(sorted.body.contains("aria-sort=\"descending\""));
    let filtered = fx.get("/jobs?name=a&sort=name").await?;
    assert!(
        filtered
            .body
            .contains("href=\"/jobs?name=a&amp;sort=-name\" data-sort=\"name\""),
        "{:.4000}",
        filtered.body
    );
    // A sort key that is not a column is refused, naming the choices.
    let refused = fx.get("/jobs?sort=glue_source").await?;
    assert_eq!(refused.code, 400);
    assert!(
        unescape(&refused.body).contains("order_by: 'glue_source' is not one of: id, name"),
        "{:.2000}",
        refused.body
    );
    Ok(())
}

/// Words the console may show in English in every language: names and values the test made
/// (an ASCII app name, a handler, a script's language), the brand, the language switch's own
/// name for English, units of addresses. Upper-case words (enum values such as CRON, FIRST,
/// SUCCESS; UTC) pass on their own.
const ENGLISH_ALLOWED: &[&str] = &[
    "xjob", "English", "forms", "app", "admin", "echo", "bash", "http", "https", "hi",
];

/// The texts of `page` a reader sees (text nodes, and titles, placeholders, labels and
/// confirmation questions) that are all ASCII and hold a word not on [`ENGLISH_ALLOWED`]:
/// English the Chinese console forgot. Code, scripts, logs, times and what the page marks
/// `translate="no"` (ids, messages of executors, the audit trail's records) are not the
/// console's prose and are left out.
fn english_left(page: &str) -> Vec<String> {
    let mut page = page.to_string();
    while let Some(marked) = page.find(" translate=\"no\"") {
        let Some(start) = page[..marked].rfind('<') else {
            break;
        };
        let name: String = page[start + 1..marked]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        let close = format!("</{name}>");
        let Some(length) = page[marked..].find(&close) else {
            break;
        };
        page.replace_range(start..marked + length + close.len(), " ");
    }
    for tag in ["script", "style", "code", "pre", "textarea", "time"] {
        let (open, close) = (format!("<{tag}"), format!("</{tag}>"));
        while let Some(start) = page.find(&open) {
            let Some(length) = page[start..].find(&close) else {
                break;
            };
            page.replace_range(start..start + length + close.len(), " ");
        }
    }
    let mut texts = Vec::new();
    let mut rest = page.as_str();
    while let Some(open) = rest.find('<') {
        texts.push(rest[..open].to_string());
        let Some(close) = rest[open..].find('>') else {
            break;
        };
        let tag = &rest[open..open + close];
        for attribute in ["title", "placeholder", "aria-label", "data-confirm", "alt"] {
            if let Some(value) = tag.split(&format!(" {attribute}=\"")).nth(1) {
                texts.push(value.split('"').next().unwrap_or_default().to_string());
            }
        }
        rest = &rest[open + close + 1..];
    }
    texts.push(rest.to_string());
    texts
        .into_iter()
        .map(|text| unescape(text.trim()))
        .filter(|text| text.is_ascii())
        .filter(|text| {
            text.split(|c: char| !c.is_ascii_alphabetic())
                .filter(|word| word.len() >= 2)
                .any(|word| {
                    !word.chars().all(|c| c.is_ascii_uppercase())
                        && !ENGLISH_ALLOWED.contains(&word)
                })
        })
        .collect()
}

#[test]
fn english_left_finds_english_prose_and_passes_chinese_and_values() {
    let page = "<h1>任务</h1><p title=\"Next fire\">下次 CRON</p><td>forms-app</td>\
                <button>Save</button><code>xjob user create</code><td>SUCCESS</td>\
                <input placeholder=\"名称\"><time title=\"2024 UTC\">2024-05-01 UTC</time>\
                <td translate=\"no\">lease_renewal</td><td class=\"msg\">exited</td>";
    assert_eq!(english_left(page), vec!["Next fire", "Save", "exited"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_and_refusal_of_the_chinese_console_is_in_chinese() -> anyhow::Result<()> {
    let mut fx = Fixture::start().await?;
    let dir = tempfile::tempdir()?;
    let executor = Executor::builder()
        .app_name(APP)
        .admin_addrs([fx.url.clone()])
        .bind("127.0.0.1:0")
        .log_dir(dir.path())
        .glue_interpreter(pb::GlueType::Shell, "bash")
        .start()
        .await?;
    executor.wait_registered(Duration::from_secs(10)).await?;
    let chinese = format!("{}; xjob_lang=zh", fx.cookie);
    let (port, csrf) = (fx.http_port, fx.csrf.clone());
    let get = |path: String| {
        let chinese = chinese.clone();
        async move { http(port, "GET", &path, &chinese, "").await }
    };
    let post = |path: String, fields: Vec<(&str, &str)>| {
        let chinese = chinese.clone();
        let mut body = form_urlencoded::Serializer::new(String::new());
        body.append_pair("csrf", &csrf);
        for (name, value) in fields {
            body.append_pair(name, value);
        }
        let body = body.finish();
        async move { http(port, "POST", &path, &chinese, &body).await }
    };
    let mut found = Vec::new();
    let mut check = |what: &str, answer: &Answer| {
        assert!(
            answer.body.contains("<html lang=\"zh-Hans\">"),
            "{what}: not the Chinese console: {} {:.300}",
            answer.head,
            answer.body
        );
        for text in english_left(&answer.body) {
            found.push(format!("{what}: {text:?}"));
        }
    };

    // A script job that ran once on a real executor, so every page has rows to show.
    let group = fx.group_id.to_string();
    let fields = fx.job_form(
        &group,
        &[
            ("name", "巡检任务"),
            ("author", "测试"),
            ("glue_type", "SHELL"),
            ("handler", ""),
            ("glue_source", "echo hi"),
            ("schedule_type", "CRON"),
            ("schedule_conf", "0 0 3 * * ?"),
        ],
    );
    let created = post("/jobs/new".into(), fields).await?;
    let job_id = created_job_id(&created)
        .ok_or_else(|| anyhow::anyhow!("not created: {} {:.2000}", created.head, created.body))?;
    let triggered = post(format!("/jobs/{job_id}/trigger"), vec![("params", "")]).await?;
    assert_eq!(triggered.code, 303, "{:.2000}", triggered.body);
    let log_id = fx
        .client
        .list_logs(pb::ListLogsRequest {
            job_id,
            page_size: 1,
            ..Default::default()
        })
        .await?
        .into_inner()
        .logs
        .first()
        .map(|log| log.id)
        .ok_or_else(|| anyhow::anyhow!("the trigger made no run"))?;
    let ended = wait_for_end(&mut fx.client, log_id).await?;
    assert_eq!(ended.status, pb::RunStatus::Success as i32, "{ended:?}");

    for path in [
        "/".to_string(),
        "/jobs".into(),
        "/jobs/new".into(),
        format!("/jobs/{job_id}"),
        format!("/jobs/{job_id}/copy"),
        "/runs".into(),
        format!("/runs/{log_id}"),
        "/executors".into(),
        "/groups/new".into(),
        format!("/groups/{group}"),
        "/users".into(),
        "/audit".into(),
        "/account".into(),
        "/no/such/page".into(),
        "/runs/abc".into(),
        "/jobs/999999".into(),
        "/runs?from=yesterday".into(),
        "/runs?to=2024-03-31T02%3A30&tz=Europe%2FBerlin".into(),
        "/runs?job=abc".into(),
        "/runs?job_name=nothing-like-this".into(),
        "/language?lang=fr".into(),
    ] {
        let answer = get(path.clone()).await?;
        check(&path, &answer);
    }

    // Every refusal of the job editor: the console's own parsers and the API's checks.
    let refusals: &[(&str, &str)] = &[
        ("timeout_ms", "30x"),
        ("fail_retry_count", "three"),
        ("child_job_ids", "abc"),
        ("child_job_ids", "999999"),
        ("retry_factor", "x"),
        ("retry_delay", "soon"),
        ("jitter_max_ms", "2h"),
        ("name", ""),
        ("schedule_conf", "every day"),
        ("schedule_conf", "0 99 * * * ?"),
        ("time_zone", "Mars/Base"),
        ("glue_source", ""),
    ];
    for (field, value) in refusals {
        let fields = fx.job_form(
            &group,
            &[
                ("glue_type", "SHELL"),
                ("handler", ""),
                ("glue_source", "echo hi"),
                ("schedule_type", "CRON"),
                ("schedule_conf", "0 0 3 * * ?"),
                (field, value),
            ],
        );
        let answer = post("/jobs/new".into(), fields).await?;
        assert!(
            (400..500).contains(&answer.code),
            "{field}={value} refused: {:.2000}",
            answer.body
        );
        let shown = field_error(&answer.body, field);
        assert!(
            shown.as_ref().is_some_and(|text| !text.is_ascii()),
            "{field}={value}: no Chinese refusal under the field: {shown:?}"
        );
        check(&format!("new job {field}={value}"), &answer);
    }
    let fix_rate = fx.job_form(
        &group,
        &[("schedule_type", "FIX_RATE"), ("schedule_conf", "often")],
    );
    check("FIX_RATE often", &post("/jobs/new".into(), fix_rate).await?);
    let bean = fx.job_form(&group, &[("handler", "")]);
    check(
        "BEAN without handler",
        &post("/jobs/new".into(), bean).await?,
    );
    let foreign = vec![("params", "p"), ("addresses", "http://127.0.0.1:9")];
    check(
        "trigger on a foreign address",
        &post(format!("/jobs/{job_id}/trigger"), foreign).await?,
    );
    let malformed = vec![("params", "p"), ("addresses", "ftp://x")];
    check(
        "trigger on a malformed address",
        &post(format!("/jobs/{job_id}/trigger"), malformed).await?,
    );
    check(
        "glue without remark",
        &post(
            format!("/jobs/{job_id}/glue"),
            vec![("glue_source", "echo v2"), ("glue_remark", "")],
        )
        .await?,
    );
    check(
        "group without app name",
        &post(
            "/groups/new".into(),
            vec![
                ("app_name", ""),
                ("title", "分组"),
                ("address_type", "AUTO"),
            ],
        )
        .await?,
    );
    check(
        "manual group without addresses",
        &post(
            "/groups/new".into(),
            vec![
                ("app_name", "manual-app"),
                ("title", "手动"),
                ("address_type", "MANUAL"),
            ],
        )
        .await?,
    );
    check(
        "group with jobs deleted",
        &post(format!("/groups/{group}/delete"), vec![]).await?,
    );
    check(
        "short password",
        &post(
            "/users".into(),
            vec![
                ("name", "shorty"),
                ("role", "viewer"),
                ("password", "short"),
            ],
        )
        .await?,
    );
    check(
        "clear with a bad job",
        &post(
            "/runs/clear".into(),
            vec![("group", &group), ("job", "abc"), ("mode", "ALL")],
        )
        .await?,
    );
    // Flash notices arrive on the page a post redirects to.
    let bulk = post(
        "/jobs/bulk".into(),
        vec![("action", "stop"), ("ids", "abc"), ("ids", "999999")],
    )
    .await?;
    let location = bulk
        .head
        .lines()
        .find_map(|line| line.strip_prefix("location: "))
        .ok_or_else(|| anyhow::anyhow!("bulk did not redirect: {}", bulk.head))?
        .to_string();
    check("bulk notice", &get(location).await?);
    let stale = http(port, "POST", "/jobs/new", &chinese, "csrf=wrong&name=x").await?;
    check("wrong CSRF token", &stale);

    // The first user ends the open console: the login page, a wrong password, a post without
    // a session.
    fx.client
        .create_user(pb::CreateUserRequest {
            name: "root".into(),
            role: "admin".into(),
            password: "root's long password".into(),
            token_ttl_ms: 0,
        })
        .await?;
    let form = http(port, "GET", "/login", "xjob_lang=zh", "").await?;
    check("login", &form);
    let login_cookie = form
        .head
        .lines()
        .filter_map(|line| line.strip_prefix("set-cookie: "))
        .find(|value| value.starts_with("xjob_login="))
        .and_then(|value| value.split(';').next())
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("no login cookie: {}", form.head))?;
    let mut body = form_urlencoded::Serializer::new(String::new());
    body.append_pair("csrf", login_cookie.trim_start_matches("xjob_login="))
        .append_pair("name", "root")
        .append_pair("password", "not the password");
    let cookies = format!("{login_cookie}; xjob_lang=zh");
    let wrong = http(port, "POST", "/login", &cookies, &body.finish()).await?;
    assert!(
        wrong.body.contains("用户名或密码错误"),
        "{:.2000}",
        wrong.body
    );
    check("wrong password", &wrong);
    let expired = http(port, "POST", "/jobs/new", "xjob_lang=zh", "name=x").await?;
    assert_eq!(expired.code, 403, "{:.1000}", expired.body);
    check("post without a session", &expired);

    executor.shutdown().await;
    assert!(
        found.is_empty(),
        "English left in the Chinese console:\n{}",
        found.join("\n")
    );
    Ok(())
}

/// The job form's daylight-saving fields: chosen values are stored and shown selected again, the
/// preview takes them, and a policy on a schedule without local times is refused under its field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dst_policy_fields_are_saved_shown_and_checked() -> anyhow::Result<()> {
    let mut fx = Fixture::start().await?;
    let group = fx.group_id.to_string();
    let cron = [
        ("schedule_type", "CRON"),
        ("schedule_conf", "0 30 2 * * ?"),
        ("time_zone", "Europe/Berlin"),
        ("dst_gap_policy", "SKIP"),
        ("dst_overlap_policy", "BOTH"),
    ];
    let created = fx.post("/jobs/new", &fx.job_form(&group, &cron)).await?;
    let job_id = created_job_id(&created)
        .ok_or_else(|| anyhow::anyhow!("not created: {:.3000}", created.body))?;
    let stored = fx.get_job(job_id).await?;
    assert_eq!(stored.dst_gap_policy, pb::DstGapPolicy::Skip as i32);
    assert_eq!(stored.dst_overlap_policy, pb::DstOverlapPolicy::Both as i32);
    let editor = fx.get(&format!("/jobs/{job_id}")).await?;
    for selected in [
        "<option value=\"SKIP\" selected>",
        "<option value=\"BOTH\" selected>",
    ] {
        assert!(
            editor.body.contains(selected),
            "{selected}: {:.3000}",
            editor.body
        );
    }

    // The preview under the form computes with the policy the form holds.
    let preview = fx
        .get("/preview?schedule_type=CRON&schedule_conf=0+30+2+*+*+%3F&time_zone=Europe%2FBerlin&dst_gap=SKIP&dst_overlap=BOTH")
        .await?;
    assert_eq!(preview.code, 200, "{}", preview.body);
    assert!(preview.body.contains("\"times\":["), "{}", preview.body);

    let rate = [
        ("schedule_type", "FIX_RATE"),
        ("schedule_conf", "60"),
        ("dst_gap_policy", "SKIP"),
    ];
    let answer = fx.post("/jobs/new", &fx.job_form(&group, &rate)).await?;
    assert_eq!(answer.code, 400);
    let shown = field_error(&answer.body, "dst_gap_policy")
        .ok_or_else(|| anyhow::anyhow!("no error under dst_gap_policy: {:.3000}", answer.body))?;
    assert!(shown.contains("applies to CRON schedules only"), "{shown}");
    assert_eq!(fx.job_count().await?, 1, "the refused job was not saved");
    Ok(())
}

/// The Calendars page (docs/console.md): a calendar made from the form is listed with its rules,
/// a bad rule comes back in the form with the rule named and nothing saved, a job form names
/// the calendar and its mode, and the preview strikes the fires the calendar keeps out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calendars_are_edited_in_the_console_and_jobs_name_them() -> anyhow::Result<()> {
    let mut fx = Fixture::start().await?;
    let group = fx.group_id.to_string();
    let bad = fx
        .post(
            "/calendars/new",
            &[("name", "closed"), ("rules", "2026-12-25\nweekly funday")],
        )
        .await?;
    assert_eq!(bad.code, 400, "{:.3000}", bad.body);
    assert!(
        unescape(&bad.body).contains("calendar.rules[1]: 'funday' is not a day"),
        "{:.3000}",
        bad.body
    );
    let calendars = fx
        .client
        .list_calendars(pb::ListCalendarsRequest {})
        .await?
        .into_inner()
        .calendars;
    assert!(calendars.is_empty(), "nothing saved: {calendars:?}");

    let made = fx
        .post(
            "/calendars/new",
            &[
                ("name", "closed"),
                ("time_zone", "Asia/Shanghai"),
                ("rules", "2026-12-25\r\nweekly mon-sun\r\n"),
                ("description", "always closed"),
            ],
        )
        .await?;
    assert_eq!(made.code, 303, "{:.3000}", made.body);
    let listed = fx.get("/calendars").await?;
    assert!(
        listed.body.contains("id=\"calendar-closed\"")
            && listed.body.contains("2026-12-25\nweekly mon-sun"),
        "{:.3000}",
        listed.body
    );
    let stored = fx
        .client
        .get_calendar(pb::GetCalendarRequest {
            name: "closed".into(),
        })
        .await?
        .into_inner()
        .calendar
        .unwrap_or_default();
    assert_eq!(stored.rules, ["2026-12-25", "weekly mon-sun"]);
    assert_eq!(stored.time_zone, "Asia/Shanghai");

    // A job names it from its form; the editor shows it back.
    let created = fx
        .post(
            "/jobs/new",
            &fx.job_form(&group, &[("calendar", "closed"), ("calendar_mode", "ONLY")]),
        )
        .await?;
    let job_id = created_job_id(&created).ok_or_else(|| anyhow::anyhow!("not created"))?;
    let job = fx.get_job(job_id).await?;
    assert_eq!(
        (job.calendar.as_str(), job.calendar_mode),
        ("closed", pb::CalendarMode::Only as i32)
    );
    let editor = fx.get(&format!("/jobs/{job_id}")).await?;
    assert!(
        editor
            .body
            .contains("name=\"calendar\" id=\"calendar\" value=\"closed\""),
        "{:.3000}",
        editor.body
    );
    let unknown = fx
        .post("/jobs/new", &fx.job_form(&group, &[("calendar", "nope")]))
        .await?;
    let shown = field_error(&unknown.body, "calendar")
        .ok_or_else(|| anyhow::anyhow!("no error under calendar: {:.3000}", unknown.body))?;
    assert!(shown.contains("calendar 'nope' not found"), "{shown}");

    // The preview says why each fire is skipped.
    let preview = fx
        .get("/preview?schedule_type=CRON&schedule_conf=*+*+*+*+*+%3F&calendar=closed&calendar_mode=SKIP")
        .await?;
    let answer: serde_json::Value = serde_json::from_str(&preview.body)?;
    let skipped = answer["skipped"].as_array().cloned().unwrap_or_default();
    assert_eq!(skipped.len(), 5, "{answer}");
    assert!(
        skipped.iter().all(|why| why
            .as_str()
            .is_some_and(|why| why.contains("blackout rule 'weekly mon-sun'"))),
        "{answer}"
    );

    // In use: the delete is refused and says by which job.
    let refused = fx.post("/calendars/closed/delete", &[]).await?;
    assert!(
        unescape(&refused.body).contains(&format!("used by 1 job(s) ({job_id})")),
        "{:.3000}",
        refused.body
    );
    Ok(())
}

/// The job page's backfill form: a range typed in the job's zone starts a backfill whose
/// progress the page shows until it is DONE (no executor: each run fails, and is counted so);
/// a reversed range is named as typed, in the job's zone; the card speaks Chinese when the
/// viewer does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_page_starts_a_backfill_and_shows_its_progress() -> anyhow::Result<()> {
    let fx = Fixture::start().await?;
    let group = fx.group_id.to_string();
    let overrides = [
        ("schedule_type", "CRON"),
        ("schedule_conf", "0 0 * * * ?"),
        ("time_zone", "Asia/Shanghai"),
    ];
    let created = fx
        .post("/jobs/new", &fx.job_form(&group, &overrides))
        .await?;
    let job_id = created_job_id(&created).ok_or_else(|| anyhow::anyhow!("not created"))?;
    let page = fx.get(&format!("/jobs/{job_id}")).await?;
    assert!(
        page.body.contains("id=\"backfill-form\""),
        "{:.3000}",
        page.body
    );
    assert!(
        page.body.contains("Asia/Shanghai"),
        "the zone the range is read in"
    );

    let range = [
        ("from", "2026-01-01T08:00"),
        ("to", "2026-01-01T10:00"),
        ("concurrency", "2"),
    ];
    let started = fx.post(&format!("/jobs/{job_id}/backfill"), &range).await?;
    assert_eq!(started.code, 303, "{}", started.head);
    assert!(started.head.contains("Backfill"), "{}", started.head);
    let backfills = fx
        .client
        .clone()
        .list_backfills(pb::ListBackfillsRequest { job_id })
        .await?
        .into_inner()
        .backfills;
    assert_eq!(backfills.len(), 1);
    // 08:00 to 10:00 in Shanghai (UTC+8) is 00:00 to 02:00 UTC: three hours, both ends included.
    assert_eq!(backfills[0].from_ms, 1_767_225_600_000);
    assert_eq!(backfills[0].total, 3);
    let row = format!("id=\"backfill-{}\"", backfills[0].id);
    let done = wait_until(
        Duration::from_secs(60),
        "the backfill to be DONE",
        || async {
            let page = fx.get(&format!("/jobs/{job_id}")).await.ok()?;
            let shown = page
                .body
                .split(&row)
                .nth(1)?
                .split("</tr>")
                .next()?
                .to_string();
            shown.contains("DONE").then_some(shown)
        },
    )
    .await?;
    assert!(done.contains("3/3"), "{done}");

    let reversed = [("from", "2026-01-02T00:00"), ("to", "2026-01-01T00:00")];
    let refused = fx
        .post(&format!("/jobs/{job_id}/backfill"), &reversed)
        .await?;
    assert_eq!(refused.code, 400, "{}", refused.head);
    assert!(
        refused
            .body
            .contains("From 2026-01-02 00:00 is after To 2026-01-01 00:00 (Asia/Shanghai)"),
        "{:.2000}",
        refused.body
    );

    let zh = http_with(
        fx.http_port,
        "GET",
        &format!("/jobs/{job_id}"),
        &[("Cookie", &format!("{}; xjob_lang=zh", fx.cookie))],
        "",
    )
    .await?;
    assert!(zh.body.contains("补跑"), "{:.2000}", zh.body);
    Ok(())
}

/// A workflow's page draws its graph as SVG, each node coloured by its state in the latest
/// run, with a table of the nodes' runs and the buttons that apply (start, retry, skip); a
/// skip pressed lets the run go on; in English and in Chinese.
#[tokio::test]
async fn a_workflow_page_draws_its_graph_with_the_latest_runs_states() -> anyhow::Result<()> {
    let mut fx = Fixture::start().await?;
    let group = fx.group_id.to_string();
    let mut job_ids = Vec::new();
    for _ in 0..2 {
        let created = fx.post("/jobs/new", &fx.job_form(&group, &[])).await?;
        job_ids.push(created_job_id(&created).ok_or_else(|| anyhow::anyhow!("not created"))?);
    }
    let node = |key: &str, job_id: i64| pb::WorkflowNode {
        key: key.into(),
        job_id,
        fan_in: pb::WorkflowFanIn::AllSuccess as i32,
    };
    let workflow = pb::Workflow {
        group_id: fx.group_id,
        name: "nightly-graph".into(),
        nodes: vec![node("a", job_ids[0]), node("b", job_ids[1])],
        edges: vec![pb::WorkflowEdge {
            from: "a".into(),
            to: "b".into(),
            condition: pb::WorkflowEdgeCondition::OnSuccess as i32,
        }],
        ..Default::default()
    };
    let request = pb::CreateWorkflowRequest {
        workflow: Some(workflow),
    };
    let created = fx.client.create_workflow(request).await?.into_inner();
    let id = created.workflow.map(|w| w.id).unwrap_or_default();

    let listed = fx.get("/workflows").await?;
    assert_eq!(listed.code, 200);
    assert!(
        listed
            .body
            .contains(&format!("<a href=\"/workflows/{id}\">nightly-graph</a>")),
        "{:.3000}",
        listed.body
    );
    let page = fx.get(&format!("/workflows/{id}")).await?;
    assert_eq!(page.code, 200);
    for part in [
        "<svg id=\"workflow-graph\"",
        "<g class=\"node\" id=\"node-a\" data-state=\"\"",
        "<line class=\"edge\" data-from=\"a\" data-to=\"b\"",
        "This workflow has not run yet.",
    ] {
        assert!(page.body.contains(part), "{part}: {:.4000}", page.body);
    }

    // No executor serves the group: A's run fails, so B is skipped and the run fails.
    let started = fx
        .client
        .start_workflow(pb::StartWorkflowRequest {
            workflow_id: id,
            params: String::new(),
        })
        .await?
        .into_inner();
    let run_id = started.workflow_run_id;
    let client = fx.client.clone();
    wait_until(Duration::from_secs(20), "the workflow run to end", || {
        let mut client = client.clone();
        async move {
            let run = client
                .get_workflow_run(pb::GetWorkflowRunRequest { id: run_id })
                .await
                .ok()?
                .into_inner()
                .run?;
            (run.state == pb::WorkflowRunState::Failed as i32).then_some(())
        }
    })
    .await?;
    let page = fx.get(&format!("/workflows/{id}")).await?;
    for part in [
        "<g class=\"node\" id=\"node-a\" data-state=\"FAILED\"",
        "<g class=\"node\" id=\"node-b\" data-state=\"SKIPPED\"",
        "<span class=\"badge s-failed\">FAILED</span>",
    ] {
        assert!(page.body.contains(part), "{part}: {:.4000}", page.body);
    }
    // The buttons of a failed run: start, retry and skip a; nothing for skipped b, no cancel.
    for part in [
        "id=\"start-workflow\"",
        &format!("action=\"/workflow-runs/{run_id}/nodes/a/retry\""),
        "id=\"retry-a\"",
        "id=\"skip-a\"",
        "<div id=\"workflow-live\">",
    ] {
        assert!(page.body.contains(part), "{part}: {:.6000}", page.body);
    }
    for absent in [
        "id=\"retry-b\"",
        "id=\"skip-b\"",
        "id=\"cancel-workflow-run\"",
    ] {
        assert!(!page.body.contains(absent), "{absent}: {:.6000}", page.body);
    }
    // Skipping a lets b run (and fail again: no executor), so the run fails on b this time.
    let skipped = fx
        .post(&format!("/workflow-runs/{run_id}/nodes/a/skip"), &[])
        .await?;
    assert_eq!(skipped.code, 303, "{skipped:?}");
    wait_until(
        Duration::from_secs(20),
        "b to fail after a was skipped",
        || {
            let mut client = client.clone();
            async move {
                let run = client
                    .get_workflow_run(pb::GetWorkflowRunRequest { id: run_id })
                    .await
                    .ok()?
                    .into_inner()
                    .run?;
                let b = run.nodes.iter().find(|node| node.key == "b")?;
                (run.state == pb::WorkflowRunState::Failed as i32
                    && b.state == pb::WorkflowNodeState::Failed as i32)
                    .then_some(())
            }
        },
    )
    .await?;
    let page = fx.get(&format!("/workflows/{id}")).await?;
    for part in [
        "<g class=\"node\" id=\"node-a\" data-state=\"SKIPPED\"",
        "<g class=\"node\" id=\"node-b\" data-state=\"FAILED\"",
        "id=\"retry-b\"",
        "<span class=\"muted\">by ",
    ] {
        assert!(page.body.contains(part), "{part}: {:.6000}", page.body);
    }
    // A skip that does not apply answers the API's reason.
    let again = fx
        .post(&format!("/workflow-runs/{run_id}/nodes/a/skip"), &[])
        .await?;
    assert_eq!(again.code, 409, "{again:?}");
    assert!(
        again.body.contains("was skipped by a user"),
        "{:.3000}",
        again.body
    );
    let started = fx.post(&format!("/workflows/{id}/start"), &[]).await?;
    assert_eq!(started.code, 303, "{started:?}");
    let listed = fx
        .client
        .list_workflow_runs(pb::ListWorkflowRunsRequest {
            workflow_id: id,
            ..Default::default()
        })
        .await?
        .into_inner();
    assert_eq!(listed.runs.len(), 2, "the button started a second run");

    let chinese = format!("{}; xjob_lang=zh", fx.cookie);
    let zh = http(
        fx.http_port,
        "GET",
        &format!("/workflows/{id}"),
        &chinese,
        "",
    )
    .await?;
    assert!(zh.body.contains("最近一次运行"), "{:.3000}", zh.body);
    assert!(zh.body.contains("启动一次运行"), "{:.3000}", zh.body);
    assert!(!zh.body.contains("Latest run"), "{:.3000}", zh.body);
    let zh_list = http(fx.http_port, "GET", "/workflows", &chinese, "").await?;
    assert!(zh_list.body.contains("工作流"), "{:.3000}", zh_list.body);
    fx.admin.process_mut().kill_now()?;
    Ok(())
}

/// A workflow's schedule is edited in the console: a bad cron comes back under its field, a good
/// one is saved (the rest of the workflow kept) and the workflow's page lists its next runs; in
/// Chinese the card is translated.
#[tokio::test]
async fn a_workflow_schedule_is_edited_and_its_next_runs_shown() -> anyhow::Result<()> {
    let mut fx = Fixture::start().await?;
    let group = fx.group_id.to_string();
    let created = fx.post("/jobs/new", &fx.job_form(&group, &[])).await?;
    let job_id = created_job_id(&created).ok_or_else(|| anyhow::anyhow!("not created"))?;
    let workflow = pb::Workflow {
        group_id: fx.group_id,
        name: "scheduled-graph".into(),
        nodes: vec![pb::WorkflowNode {
            key: "a".into(),
            job_id,
            fan_in: pb::WorkflowFanIn::AllSuccess as i32,
        }],
        ..Default::default()
    };
    let request = pb::CreateWorkflowRequest {
        workflow: Some(workflow),
    };
    let created = fx.client.create_workflow(request).await?.into_inner();
    let id = created.workflow.map(|w| w.id).unwrap_or_default();
    let page = fx.get(&format!("/workflows/{id}")).await?;
    assert!(
        page.body.contains("No schedule") && !page.body.contains("id=\"next-runs\""),
        "{:.4000}",
        page.body
    );
    let form = fx.get(&format!("/workflows/{id}/schedule")).await?;
    assert_eq!(form.code, 200);
    assert!(
        form.body.contains("id=\"schedule-form\""),
        "{:.3000}",
        form.body
    );

    let path = format!("/workflows/{id}/schedule");
    let fields = |conf: &'static str| {
        vec![
            ("schedule_type", "CRON"),
            ("schedule_conf", conf),
            ("time_zone", "Asia/Tokyo"),
            ("misfire_strategy", "FIRE_ONCE_NOW"),
            ("overlap_policy", "SKIP"),
            ("params", "day=today"),
        ]
    };
    let refused = fx.post(&path, &fields("daily")).await?;
    assert_eq!(refused.code, 400, "{:.3000}", refused.body);
    assert!(
        refused
            .body
            .contains("id=\"err-schedule_conf\" role=\"alert\""),
        "{:.4000}",
        refused.body
    );
    let saved = fx.post(&path, &fields("0 30 2 * * ?")).await?;
    assert_eq!(saved.code, 303, "{:.3000}", saved.body);
    let stored = fx
        .client
        .get_workflow(pb::GetWorkflowRequest { id })
        .await?
        .into_inner()
        .workflow
        .unwrap_or_default();
    assert_eq!(stored.schedule_conf, "0 30 2 * * ?");
    assert_eq!(stored.time_zone, "Asia/Tokyo");
    assert_eq!(stored.params, "day=today");
    assert_eq!(stored.overlap_policy, pb::OverlapPolicy::Skip as i32);
    assert_eq!(stored.nodes.len(), 1, "the graph is kept");
    let page = fx.get(&format!("/workflows/{id}")).await?;
    let runs = page.body.matches("<li>").count();
    assert!(
        page.body.contains("Cron 0 30 2 * * ?")
            && page.body.contains("id=\"next-runs\"")
            && page.body.contains("fire-once-now · skip"),
        "{:.4000}",
        page.body
    );
    assert!(runs >= 5, "five next runs listed: {:.4000}", page.body);
    let zh = http_with(
        fx.http_port,
        "GET",
        &format!("/workflows/{id}"),
        &[("Cookie", &format!("{}; xjob_lang=zh", fx.cookie))],
        "",
    )
    .await?;
    assert!(zh.body.contains("接下来的运行"), "{:.3000}", zh.body);
    let zh_form = http_with(
        fx.http_port,
        "GET",
        &path,
        &[("Cookie", &format!("{}; xjob_lang=zh", fx.cookie))],
        "",
    )
    .await?;
    assert!(
        zh_form.body.contains("上一次运行未结束时")
            && zh_form.body.contains("<option value=\"SKIP\" selected")
            && zh_form
                .body
                .contains("<option value=\"BUFFER_ONE\">buffer-one</option>"),
        "{:.4000}",
        zh_form.body
    );
    Ok(())
}
