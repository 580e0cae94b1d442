//! Reads the dispatch stage cannot go on without, retried until the database answers or the
//! stage stops: a claimed fire is never dropped because one read failed.

use std::time::Duration;

use crate::error::Error;
use crate::lifecycle::Tasks;

/// Retries a read with a growing pause until the database answers, or until the dispatch
/// stage is told to stop (then the last error).
pub(super) async fn until_answered<T, E, F, Fut>(
    tasks: &Tasks,
    runs: usize,
    mut read: F,
) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
    E: std::fmt::Display + Into<Error>,
{
    let mut delay = Duration::from_millis(100);
    loop {
        match read().await {
            Ok(value) => return Ok(value),
            Err(error) => {
                tracing::warn!(%error, runs, "loading jobs or groups of claimed fires failed; retrying");
                tokio::select! {
                    _ = tasks.stopping().cancelled() => return Err(error.into()),
                    _ = tokio::time::sleep(delay) => {}
                }
                delay = (delay * 2).min(Duration::from_secs(2));
            }
        }
    }
}
