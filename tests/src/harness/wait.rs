//! `wait_until`: polls an async condition until it holds or the deadline passes.

use std::future::Future;
use std::time::Duration;

/// Polls `condition` every 20 ms until it returns `Some(value)`; errors after `timeout` with
/// `what` in the message so a failing test says which event never happened.
pub async fn wait_until<T, F, Fut>(
    timeout: Duration,
    what: &str,
    mut condition: F,
) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = condition().await {
            return Ok(value);
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
