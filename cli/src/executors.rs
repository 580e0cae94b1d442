//! `xjob executors`: executors with a live session, their handlers and running runs.

use clap::Args;
use xjob_proto::pb;

use super::client::Client;
use super::error::CliError;
use super::render::{self, Output, Table};
use super::view::ExecutorView;

#[derive(Args)]
pub struct ExecutorsArgs {
    /// Only executors of this app.
    #[arg(long)]
    app: Option<String>,
}

pub async fn run(args: ExecutorsArgs, out: Output, mut client: Client) -> Result<(), CliError> {
    let request = pb::ListExecutorsRequest {
        app_name: args.app.unwrap_or_default(),
    };
    let executors = client.list_executors(request).await?.into_inner().executors;
    let views: Vec<ExecutorView> = executors.iter().map(ExecutorView::from).collect();
    let now = render::now_ms();
    out.list(
        &views,
        "No executors online. Start one with an SDK (docs/executors.md), or try xjob serve --demo",
        |executors| {
            let mut table = Table::new(&[
                "APP",
                "ADDRESS",
                "HANDLERS",
                "RUNNING",
                "HEARTBEAT",
                "UP SINCE",
                "ADMIN",
            ]);
            for executor in executors {
                table.row(vec![
                    executor.app_name.clone(),
                    executor.address.clone(),
                    render::cell(&executor.handlers.join(","), 40),
                    executor.running_log_ids.len().to_string(),
                    render::relative(executor.last_heartbeat_ms, now),
                    render::time(executor.registered_ms),
                    render::or_dash(&executor.admin_node),
                ]);
            }
            table
        },
    )
}
