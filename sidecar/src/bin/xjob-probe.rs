//! `xjob-probe ADDRESS [SERVICE]`: asks a gRPC health service (`grpc.health.v1.Health/Check`)
//! whether the server is SERVING; exit 0 if so, 1 otherwise. For container health checks of the
//! admin (`xjob-probe http://127.0.0.1:8080`) and of `xjob-executor`
//! (`xjob-probe http://127.0.0.1:9999`); Kubernetes probes use their built-in gRPC check instead.

use std::time::Duration;

use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(address) = args.next() else {
        eprintln!("usage: xjob-probe http://HOST:PORT [SERVICE]");
        return std::process::ExitCode::from(2);
    };
    let service = args.next().unwrap_or_default();
    match tokio::time::timeout(Duration::from_secs(5), check(address, service)).await {
        Ok(Ok(status)) if status == "SERVING" => std::process::ExitCode::SUCCESS,
        Ok(Ok(status)) => {
            eprintln!("xjob-probe: {status}");
            std::process::ExitCode::FAILURE
        }
        Ok(Err(error)) => {
            eprintln!("xjob-probe: {error}");
            std::process::ExitCode::FAILURE
        }
        Err(_) => {
            eprintln!("xjob-probe: no answer within 5s");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn check(address: String, service: String) -> anyhow::Result<String> {
    let channel = tonic::transport::Channel::from_shared(address)?
        .connect()
        .await?;
    let mut client = HealthClient::new(channel);
    let response = client.check(HealthCheckRequest { service }).await?;
    let status = tonic_health::pb::health_check_response::ServingStatus::try_from(
        response.into_inner().status,
    )
    .map_or("UNKNOWN", |status| status.as_str_name());
    Ok(status.to_owned())
}
