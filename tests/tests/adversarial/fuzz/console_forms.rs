//! The web console's form fields and query strings, fuzzed over real HTTP against a running
//! admin (open laptop mode, with a real session and its CSRF token): every request gets a whole
//! answer without a server error (a handler that panicked would drop the connection), and no
//! HTML answer carries a fuzzed value unescaped. Creating users (which ends the open mode) and
//! the login page (the console's own module covers it) are left out.

use std::net::SocketAddr;

use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;
use xjob_tests::TestCluster;

use super::{Budget, Gen, HttpAnswer, header, http_exchange};

const APP: &str = "console-fuzz-app";
/// Put in fuzzed values: an HTML answer showing it unescaped would let input write markup.
const MARKUP: &str = "<xjob-fuzz>";

/// The field names each form posts, with a valid value each.
const JOB_FORM: &[(&str, &str)] = &[
    ("group_id", "GROUP"),
    ("name", "nightly report"),
    ("author", "ops"),
    ("alarm_email", "ops@example.com"),
    ("schedule_type", "CRON"),
    ("schedule_conf", "0 0 3 * * ?"),
    ("time_zone", "Europe/Berlin"),
    ("misfire_strategy", "DO_NOTHING"),
    ("route_strategy", "FIRST"),
    ("block_strategy", "SERIAL_EXECUTION"),
    ("handler", "report"),
    ("params", "--full"),
    ("timeout_ms", "60000"),
    ("fail_retry_count", "2"),
    ("child_job_ids", "JOB"),
    ("glue_type", "BEAN"),
];
const GROUP_FORM: &[(&str, &str)] = &[
    ("app_name", "console-fuzz-other"),
    ("title", "Other"),
    ("address_type", "MANUAL"),
    ("addresses", "http://127.0.0.1:9\nhttp://127.0.0.1:10"),
    ("access_token", "group-secret"),
];
const TRIGGER_FORM: &[(&str, &str)] = &[("params", "a=1"), ("addresses", "http://127.0.0.1:9")];
const GLUE_FORM: &[(&str, &str)] = &[("glue_source", "echo hi"), ("glue_remark", "first")];
const CLEAR_FORM: &[(&str, &str)] = &[
    ("mode", "OLDER_THAN_30_DAYS"),
    ("group", "GROUP"),
    ("job", "JOB"),
];
const GRANT_FORM: &[(&str, &str)] = &[("group", "GROUP")];
const TOKEN_FORM: &[(&str, &str)] = &[("ttl_days", "30"), ("description", "ci")];
const RUNS_QUERY: &[(&str, &str)] = &[
    ("group", "GROUP"),
    ("job", "JOB"),
    ("status", "FAILED"),
    ("from", "2024-01-01T00:00"),
    ("to", "2030-01-01T00:00"),
    ("page", "abc"),
    ("notice", "saved"),
];
const PREVIEW_QUERY: &[(&str, &str)] = &[
    ("schedule_type", "CRON"),
    ("schedule_conf", "0 * * * * ?"),
    ("time_zone", "UTC"),
];

/// A form's or query's fields: (name, valid value).
type FormFields = &'static [(&'static str, &'static str)];

/// (method, path, fields); `GROUP`, `JOB`, `RUN` stand for ids of real objects.
const TARGETS: &[(&str, &str, FormFields)] = &[
    ("POST", "/jobs/new", JOB_FORM),
    ("POST", "/jobs/JOB", JOB_FORM),
    ("POST", "/jobs/JOB/trigger", TRIGGER_FORM),
    ("POST", "/jobs/JOB/glue", GLUE_FORM),
    ("POST", "/jobs/JOB/start", &[]),
    ("POST", "/jobs/JOB/stop", &[]),
    ("POST", "/groups/new", GROUP_FORM),
    ("POST", "/groups/GROUP", GROUP_FORM),
    ("POST", "/runs/clear", CLEAR_FORM),
    ("POST", "/runs/RUN/kill", &[]),
    ("POST", "/users/7/grant", GRANT_FORM),
    ("POST", "/users/7/revoke", GRANT_FORM),
    ("POST", "/users/7/tokens", TOKEN_FORM),
    ("GET", "/jobs", &[("group", "GROUP"), ("notice", "x")]),
    ("GET", "/jobs/new", &[("group", "GROUP")]),
    ("GET", "/jobs/JOB", &[("notice", "x"), ("version", "1")]),
    ("GET", "/runs", RUNS_QUERY),
    ("GET", "/runs/RUN", &[("notice", "x")]),
    ("GET", "/runs/RUN/log", &[("from", "1")]),
    ("GET", "/preview", PREVIEW_QUERY),
    ("GET", "/executors", &[("notice", "x")]),
    ("GET", "/audit", &[("page", "x")]),
    ("GET", "/", &[]),
];

const DICTIONARY: &[&str] = &[
    MARKUP,
    "%",
    "%zz",
    "%ff%fe",
    "%00",
    "%0d%0a",
    "+",
    "&",
    "=",
    "&&",
    "==",
    ";",
    "\n",
    "\r\n",
    "%E2%80%8B",
    "CRON",
    "FIX_RATE",
    "NONE",
    "GLUE_SHELL",
    "SHELL",
    "MANUAL",
    "AUTO",
    "BEAN",
    "FIRST",
    "SHARDING_BROADCAST",
    "ALL",
    "csrf",
    "-1",
    "1,2,3",
    "1 1 1",
    ",,,",
    "0 * * * * ?",
    "Mars/Olympus",
    "http://",
    "http://127.0.0.1:0",
    "javascript:alert(1)",
    "\"><script>",
];

#[derive(Debug)]
struct Case {
    method: &'static str,
    path: String,
    body: Vec<u8>,
}

/// The ids that stand in for `GROUP`, `JOB` and `RUN`, and the session.
struct Fixture {
    ids: [(&'static str, String); 3],
    cookie: String,
    csrf: String,
}

impl Fixture {
    fn fill(&self, text: &str) -> String {
        self.ids
            .iter()
            .fold(text.to_string(), |text, (name, id)| text.replace(name, id))
    }
}

fn encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// A form body or query: the target's fields (valid values), then mutated as text, or values
/// replaced by fuzzed strings, or random bytes.
fn make_fields(rng: &mut Gen, fixture: &Fixture, fields: &[(&str, &str)]) -> Vec<u8> {
    let mut pairs: Vec<(String, String)> = fields
        .iter()
        .map(|(name, value)| (name.to_string(), fixture.fill(value)))
        .collect();
    for _ in 0..rng.below(4) {
        match rng.below(4) {
            0 if !pairs.is_empty() => {
                let at = rng.below(pairs.len());
                pairs[at].1 = rng.string(40, DICTIONARY);
            }
            1 if !pairs.is_empty() => {
                let at = rng.below(pairs.len());
                let valid = pairs[at].1.clone();
                pairs[at].1 = rng.mutate(&valid, &[',', ' ', ':', '/', '\n'], DICTIONARY);
            }
            2 => pairs.push((rng.string(8, DICTIONARY), rng.string(20, DICTIONARY))),
            _ if !pairs.is_empty() => {
                let at = rng.below(pairs.len());
                let copy = pairs[at].clone();
                pairs.push(copy);
            }
            _ => {}
        }
    }
    let mut encoded: String = pairs
        .iter()
        .map(|(name, value)| format!("{}={}", encode(name), encode(value)))
        .collect::<Vec<_>>()
        .join("&");
    match rng.below(8) {
        // Raw (not encoded) text: broken percent escapes, bare separators.
        0 => encoded.push_str(&format!("&{}", rng.string(30, DICTIONARY))),
        1 => return rng.bytes(200),
        2 => encoded = rng.mutate(&encoded, &['&', '='], DICTIONARY),
        _ => {}
    }
    encoded.into_bytes()
}

fn make(rng: &mut Gen, fixture: &Fixture) -> Case {
    let (method, path, fields) = rng.pick(TARGETS);
    let path = fixture.fill(path);
    let mut form = make_fields(rng, fixture, fields);
    if method == "GET" {
        // Query strings travel in the request line: keep them on it.
        let query: String = String::from_utf8_lossy(&form)
            .chars()
            .map(|c| if c.is_ascii_graphic() { c } else { '+' })
            .collect();
        return Case {
            method,
            path: format!("{path}?{query}"),
            body: Vec::new(),
        };
    }
    // Most posts carry the session's CSRF token so that the handler behind it runs.
    if !rng.chance(10) {
        let mut with_token = format!("csrf={}&", fixture.csrf).into_bytes();
        with_token.append(&mut form);
        form = with_token;
    }
    Case {
        method,
        path,
        body: form,
    }
}

fn request(address: SocketAddr, cookie: &str, case: &Case) -> Vec<u8> {
    let mut bytes = format!(
        "{} {} HTTP/1.1\r\nHost: {address}\r\nOrigin: http://{address}\r\nCookie: {cookie}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        case.method,
        case.path,
        case.body.len()
    )
    .into_bytes();
    bytes.extend_from_slice(&case.body);
    bytes
}

/// Whether an answer is clean; `Ok` gives its status for the tally.
fn clean(answer: &HttpAnswer) -> Result<u16, String> {
    if answer.status >= 500 {
        let body = String::from_utf8_lossy(&answer.body);
        return Err(format!("server error {}: {body:.300}", answer.status));
    }
    let html = header(&answer.head, "content-type").is_some_and(|kind| kind.contains("html"));
    if html && String::from_utf8_lossy(&answer.body).contains(MARKUP) {
        return Err("a fuzzed value is shown unescaped".to_string());
    }
    Ok(answer.status)
}

/// Opens a console session the way a browser does in open mode, and reads its CSRF token.
async fn session(address: SocketAddr) -> anyhow::Result<(String, String)> {
    let get = |path: &str, cookie: &str| {
        format!(
            "GET {path} HTTP/1.1\r\nHost: {address}\r\nCookie: {cookie}\r\nConnection: close\r\n\r\n"
        )
    };
    let first = http_exchange(address, get("/", "").as_bytes())
        .await
        .map_err(anyhow::Error::msg)?;
    let cookie = first
        .head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("set-cookie"))
        .and_then(|(_, value)| value.trim().split(';').next())
        .ok_or_else(|| anyhow::anyhow!("no session cookie: {}", first.head))?
        .to_string();
    let form = http_exchange(address, get("/jobs/new", &cookie).as_bytes())
        .await
        .map_err(anyhow::Error::msg)?;
    let page = String::from_utf8_lossy(&form.body);
    let marker = "name=\"csrf\" value=\"";
    let start = page
        .find(marker)
        .ok_or_else(|| anyhow::anyhow!("no CSRF field on /jobs/new ({})", form.status))?
        + marker.len();
    let csrf = page[start..]
        .split('"')
        .next()
        .unwrap_or_default()
        .to_string();
    Ok((cookie, csrf))
}

#[tokio::test]
async fn console_forms_and_queries_are_answered_cleanly() -> anyhow::Result<()> {
    // The admin itself (not a TestCluster): its console address is what the test needs.
    let dir = tempfile::tempdir()?;
    let mut config = xjob_admin::Config::for_tests(dir.path().join("admin-data"));
    config.http_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    let admin = xjob_admin::app::start(config.validate()?).await?;
    let address = admin
        .console_addr()
        .ok_or_else(|| anyhow::anyhow!("no console listener"))?;
    let mut client = JobAdminClient::connect(admin.url()).await?;
    let group = pb::Group {
        app_name: APP.to_string(),
        title: APP.to_string(),
        address_type: pb::AddressType::Auto as i32,
        ..Default::default()
    };
    let group_id = client
        .create_group(pb::CreateGroupRequest { group: Some(group) })
        .await?
        .into_inner()
        .group
        .map_or(0, |group| group.id);
    let job = TestCluster::job(group_id, "fuzz", pb::ScheduleType::None, "");
    let job_id = client
        .create_job(pb::CreateJobRequest { job: Some(job) })
        .await?
        .into_inner()
        .job
        .map_or(0, |job| job.id);
    let log_id = client
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
        .unwrap_or(0);
    let (cookie, csrf) = session(address).await?;
    let fixture = Fixture {
        ids: [
            ("GROUP", group_id.to_string()),
            ("JOB", job_id.to_string()),
            ("RUN", log_id.to_string()),
        ],
        cookie,
        csrf,
    };

    let budget = Budget::for_target("console-forms", 2000);
    let mut rng = Gen::new(budget.seed);
    let started = std::time::Instant::now();
    let mut cases = 0;
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    while cases < budget.cases && started.elapsed() < budget.time {
        let case = make(&mut rng, &fixture);
        let outcome = http_exchange(address, &request(address, &fixture.cookie, &case))
            .await
            .and_then(|answer| clean(&answer));
        match outcome {
            Ok(status) => *statuses.entry(status).or_default() += 1,
            Err(failure) => panic!(
                "fuzz console-forms (XJOB_FUZZ_SEED={}) case {cases}: {failure}\n  input: {}",
                budget.base_seed,
                super::shown(&case)
            ),
        }
        cases += 1;
    }
    eprintln!(
        "fuzz console-forms: {cases} cases in {:?}, statuses {statuses:?}",
        started.elapsed()
    );
    // The fuzz reached the handlers: pages shown (200), changes made (303), input refused (400).
    for reached in [200, 303, 400] {
        assert!(statuses.contains_key(&reached), "{statuses:?}");
    }
    // Still serving the session's pages.
    let page = format!(
        "GET /jobs HTTP/1.1\r\nHost: {address}\r\nCookie: {}\r\nConnection: close\r\n\r\n",
        fixture.cookie
    );
    let answer = http_exchange(address, page.as_bytes())
        .await
        .map_err(anyhow::Error::msg)?;
    assert_eq!(answer.status, 200, "{}", answer.head);
    admin.shutdown().await;
    Ok(())
}
