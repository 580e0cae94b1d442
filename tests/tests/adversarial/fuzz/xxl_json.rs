//! The XXL-JOB compatibility listener's JSON bodies (`api/registry`, `api/registryRemove`,
//! `api/callback`), fuzzed over real HTTP against a running admin: every request gets a whole
//! HTTP answer (a handler that panicked would drop the connection) without a server error, an
//! answer of 200 carries XXL-JOB's JSON envelope, and the listener still registers a real
//! executor afterwards.

use std::net::SocketAddr;

use xjob_proto::pb;
use xjob_tests::TestCluster;

use super::{Budget, Gen, http_exchange};

const APP: &str = "xxl-fuzz-app";
const SECURED_APP: &str = "xxl-fuzz-secured";
const TOKEN: &str = "xxl-fuzz-token";

const PATHS: &[&str] = &[
    "/api/registry",
    "/api/registryRemove",
    "/api/callback",
    "/xxl-job-admin/api/callback",
    "/xxl-job-admin/api/registry/",
    "/api/unknown",
    "/",
    "//api//callback",
    "/api/callback?x=1",
    "/%00/api/registry",
];

/// Valid bodies of each call and line (2.x arrays, 3.x wrapped lists), with the log id and
/// address placeholders filled per case.
const VALID: &[&str] = &[
    r#"{"registryGroup":"EXECUTOR","registryKey":"xxl-fuzz-app","registryValue":"http://127.0.0.1:9"}"#,
    r#"{"registryGroup":"EXECUTOR","registryKey":"xxl-fuzz-secured","registryValue":"http://127.0.0.1:10/"}"#,
    r#"[{"logId":LOG,"logDateTim":1700000000000,"handleCode":200,"handleMsg":"ok"}]"#,
    r#"{"callbackList":[{"logId":LOG,"logDateTime":1700000000000,"handleCode":500,"handleMsg":null}]}"#,
    r#"[{"logId":LOG,"handleCode":502,"handleMsg":"[job running, killed]"},{"logId":1,"handleCode":200}]"#,
];

const DICTIONARY: &[&str] = &[
    "null",
    "true",
    "false",
    "[]",
    "{}",
    "\"\"",
    "[[[[[[[[",
    "]]]]]]]]",
    "{\"a\":",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\"\\uDFFF\"",
    "1e999",
    "-0",
    "0.1",
    "\"EXECUTOR\"",
    "\"ADMIN\"",
    "\"logId\"",
    "\"handleCode\"",
    "\"handleMsg\"",
    "\"callbackList\"",
    "\"registryKey\"",
    "\"registryValue\"",
    "\"http://\"",
    "\"https://[::1]:0\"",
    "\"http://a b:1\"",
    "\"xxl-fuzz-app\"",
    ":",
    ",",
];

#[derive(Debug)]
struct Case {
    path: &'static str,
    method: &'static str,
    token: Option<String>,
    content_type: &'static str,
    body: Vec<u8>,
}

fn make(rng: &mut Gen, log_id: i64) -> Case {
    let body = match rng.below(6) {
        0 => rng.bytes(300),
        1 => rng.string(80, DICTIONARY).into_bytes(),
        2 => nested(rng).into_bytes(),
        _ => {
            let valid = rng.pick(VALID).replace("LOG", &log_id.to_string());
            rng.mutate(&valid, &['{', '}', '[', ']', ',', ':', '"'], DICTIONARY)
                .into_bytes()
        }
    };
    let token = match rng.below(4) {
        0 => None,
        1 => Some(TOKEN.to_string()),
        // Header values must stay on one line: the fuzz is about the body.
        _ => Some(rng.string(20, &[]).replace(['\r', '\n'], "")),
    };
    Case {
        path: rng.pick(PATHS),
        method: if rng.chance(12) { "GET" } else { "POST" },
        token,
        content_type: rng.pick(&["application/json", "application/json;charset=UTF-8"]),
        body,
    }
}

/// Deeply nested arrays and objects (a recursion bomb for naive parsers).
fn nested(rng: &mut Gen) -> String {
    let depth = 1 + rng.below(5000);
    let open = if rng.chance(2) { "[" } else { "{\"a\":" };
    let close = if open == "[" { "]" } else { "}" };
    format!("{}1{}", open.repeat(depth), close.repeat(depth))
}

fn request(address: SocketAddr, case: &Case) -> Vec<u8> {
    let token = case
        .token
        .as_ref()
        .map(|token| format!("XXL-JOB-ACCESS-TOKEN: {token}\r\n"))
        .unwrap_or_default();
    let mut bytes = format!(
        "{} {} HTTP/1.1\r\nHost: {address}\r\nContent-Type: {}\r\n{token}Content-Length: {}\r\n\
         Connection: close\r\n\r\n",
        case.method,
        case.path,
        case.content_type,
        case.body.len()
    )
    .into_bytes();
    bytes.extend_from_slice(&case.body);
    bytes
}

/// Whether an answer is clean (whole, no server error, a 200 carries the JSON envelope); `Ok`
/// names the outcome for the tally: HTTP status and XXL-JOB code.
fn clean(answer: &super::HttpAnswer) -> Result<String, String> {
    if answer.status >= 500 {
        return Err(format!("server error {}", answer.status));
    }
    if answer.status != 200 {
        return Ok(format!("http {}", answer.status));
    }
    let envelope: serde_json::Value = serde_json::from_slice(&answer.body)
        .map_err(|error| format!("answer is not JSON: {error}"))?;
    match envelope["code"].as_i64() {
        Some(code) => Ok(format!("http 200, code {code}")),
        None => Err(format!("answer without a code: {envelope}")),
    }
}

async fn register(address: SocketAddr, app: &str, value: &str) -> anyhow::Result<String> {
    let body = format!(
        r#"{{"registryGroup":"EXECUTOR","registryKey":"{app}","registryValue":"{value}"}}"#
    );
    let case = Case {
        path: "/api/registry",
        method: "POST",
        token: None,
        content_type: "application/json",
        body: body.into_bytes(),
    };
    let answer = http_exchange(address, &request(address, &case))
        .await
        .map_err(anyhow::Error::msg)?;
    Ok(String::from_utf8_lossy(&answer.body).into_owned())
}

#[tokio::test]
async fn xxl_job_bodies_are_answered_cleanly() -> anyhow::Result<()> {
    let cluster = TestCluster::builder()
        .configure(|config| {
            config.xxl_job_compat_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        })
        .start()
        .await?;
    let address = cluster
        .xxl_compat_addr()
        .ok_or_else(|| anyhow::anyhow!("no compatibility listener"))?;
    let group_id = cluster.create_group(APP).await?;
    crate::attacker::group_with_token(&cluster, SECURED_APP, TOKEN).await?;
    // A real run, so that callbacks name an existing log id as well as unknown ones.
    let job = TestCluster::job(group_id, "fuzz", pb::ScheduleType::None, "");
    let job_id = cluster.create_job(job).await?.id;
    let log_id = cluster.trigger(job_id, None).await?;

    let budget = Budget::for_target("xxl-json", 3000);
    let mut rng = Gen::new(budget.seed);
    let started = std::time::Instant::now();
    let mut cases = 0;
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    while cases < budget.cases && started.elapsed() < budget.time {
        let case = make(&mut rng, log_id);
        let outcome = http_exchange(address, &request(address, &case))
            .await
            .and_then(|answer| clean(&answer));
        match outcome {
            Ok(outcome) => *outcomes.entry(outcome).or_default() += 1,
            Err(failure) => panic!(
                "fuzz xxl-json (XJOB_FUZZ_SEED={}) case {cases}: {failure}\n  input: {}",
                budget.base_seed,
                super::shown(&case)
            ),
        }
        cases += 1;
    }
    eprintln!(
        "fuzz xxl-json: {cases} cases in {:?}: {outcomes:?}",
        started.elapsed()
    );
    // The fuzz reached past the parser: some calls were accepted, some refused.
    assert!(outcomes.contains_key("http 200, code 200"), "{outcomes:?}");
    assert!(outcomes.contains_key("http 200, code 500"), "{outcomes:?}");

    // The listener still does its job: a real registration is accepted and routed.
    let answer = register(address, APP, "http://127.0.0.1:7").await?;
    assert!(answer.contains("\"code\":200"), "{answer}");
    let listed = cluster
        .client()
        .list_executors(pb::ListExecutorsRequest {
            app_name: APP.to_string(),
        })
        .await?
        .into_inner()
        .executors;
    assert!(
        listed
            .iter()
            .any(|executor| executor.address.starts_with("http://127.0.0.1:7")),
        "{listed:?}"
    );
    cluster.shutdown().await;
    Ok(())
}
