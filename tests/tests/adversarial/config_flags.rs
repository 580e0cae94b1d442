//! Boolean environment variables: `XJOB_EXECUTOR_PEER_CHECK=TRUE` used to mean *false* (only
//! `1`, `true` and `yes` were read as true), silently turning a security check off. Every
//! spelling of true and false is now read alike, and anything else stops the start.

use std::net::IpAddr;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Endpoint;
use xjob_admin::config::Config;
use xjob_proto::pb;
use xjob_proto::pb::registry_client::RegistryClient;
use xjob_tests::{TestCluster, ok_handler};

const WAIT: Duration = Duration::from_secs(10);

/// Reads one boolean setting of a config.
type Setting = fn(&Config) -> bool;

const VARIABLES: [(&str, Setting); 5] = [
    ("XJOB_DEMO", |config| config.demo),
    ("XJOB_INSECURE_OPEN_ADMIN_API", |config| {
        config.insecure_open_admin_api
    }),
    ("XJOB_EXECUTOR_PEER_CHECK", |config| {
        config.executor_peer_check
    }),
    ("XJOB_INSECURE_OPEN_REGISTRY", |config| {
        config.insecure_open_registry
    }),
    ("XJOB_TRIGGER_ANY_ADDRESS", |config| {
        config.trigger_any_address
    }),
];

/// A config whose booleans all start as `initial`, with one variable applied.
fn with_env(variable: &'static str, value: &'static str, initial: bool) -> Result<Config, String> {
    let mut config = Config {
        demo: initial,
        insecure_open_admin_api: initial,
        executor_peer_check: initial,
        insecure_open_registry: initial,
        trigger_any_address: initial,
        ..Config::default()
    };
    config
        .apply_env(|key| (key == variable).then(|| value.to_string()))
        .map_err(|error| error.to_string())?;
    Ok(config)
}

#[test]
fn every_boolean_variable_reads_every_spelling_and_refuses_the_rest() {
    for (variable, read) in VARIABLES {
        for yes in ["TRUE", "true", "True", "on", "ON", "1", "yes", "YES"] {
            let config = with_env(variable, yes, false).expect(yes);
            assert!(read(&config), "{variable}={yes} is true");
        }
        for no in ["FALSE", "false", "off", "OFF", "0", "no", "No"] {
            let config = with_env(variable, no, true).expect(no);
            assert!(!read(&config), "{variable}={no} is false");
        }
        for bad in ["", "maybe", "ture", "2", "enabled"] {
            let refused = with_env(variable, bad, true).expect_err(bad);
            assert!(refused.contains(variable), "{variable}={bad}: {refused}");
        }
    }
}

/// The check the mis-read variable turned off: a second process taking over a live executor's
/// address. With the file saying `executor_peer_check = false` and the environment `TRUE`, the
/// environment wins and the takeover is refused.
#[tokio::test]
async fn executor_peer_check_true_in_capitals_keeps_the_check_on() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder()
        .configure(|config| {
            config.executor_peer_check = false;
            let applied = config
                .apply_env(|key| (key == "XJOB_EXECUTOR_PEER_CHECK").then(|| "TRUE".to_string()));
            assert!(applied.is_ok(), "{applied:?}");
        })
        .start()
        .await?;
    cluster.create_group("flag-app").await?;
    let real = cluster.executor("flag-app").handler("ok", ok_handler);
    let address = cluster.start_executor(real).await?;

    let attacker: IpAddr = "127.0.0.2".parse()?;
    let channel = Endpoint::from_shared(cluster.admin_url())?
        .local_address(Some(attacker))
        .connect()
        .await?;
    let register = pb::Register {
        app_name: "flag-app".to_string(),
        address,
        handlers: vec!["ok".to_string()],
        protocol_version: xjob_proto::PROTOCOL_VERSION,
        ..Default::default()
    };
    let (outbound_tx, outbound_rx) = mpsc::channel(1);
    outbound_tx
        .send(pb::ExecutorMessage {
            kind: Some(pb::executor_message::Kind::Register(register)),
        })
        .await?;
    let mut inbound = RegistryClient::new(channel)
        .session(ReceiverStream::new(outbound_rx))
        .await?
        .into_inner();
    let first = tokio::time::timeout(WAIT, inbound.message()).await?;
    let refusal = first.expect_err("the takeover is refused");
    assert_eq!(refusal.code(), tonic::Code::AlreadyExists, "{refusal:?}");
    drop(outbound_tx);
    cluster.shutdown().await;
    Ok(())
}
