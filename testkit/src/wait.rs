//! `wait_until`: polls a condition until it holds or the deadline passes.

use std::future::Future;
use std::time::Duration;

/// How often a condition is polled: often enough not to slow tests down, rarely enough not to
/// load a shared machine.
const POLL: Duration = Duration::from_millis(20);

/// Polls `condition` until it returns `Some(value)`; errors after `timeout` with `what` in
/// the message, so a failing test says which event never happened. A condition that only
/// answers yes or no returns `bool::then_some(())`.
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
        tokio::time::sleep(POLL).await;
    }
}
