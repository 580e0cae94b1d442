//! The task each claimed fire is dispatched in. A second's burst spawns one per fire at once,
//! and most of them wait for a pool slot: what a waiting task holds is what the burst costs in
//! memory, so it must stay small whatever the later steps need.

use std::collections::HashMap;
use std::sync::Arc;

use super::send_ahead_tests::setup;

/// Bytes a dispatch task may take before it runs. Boxing its larger steps brought it from
/// 6 272 to 1 136 bytes (the same in the test and release builds).
const TASK_BYTES_AT_MOST: usize = 2_048;

#[tokio::test]
async fn a_dispatch_task_waiting_to_run_is_small() {
    let setup = setup(3_000).await;
    let targets = Arc::new(HashMap::from([(
        setup.claimed.fire.group_id(),
        setup.target.clone(),
    )]));
    let task = Arc::clone(&setup.trigger).dispatch_task(setup.claimed.clone(), targets);
    let bytes = std::mem::size_of_val(&task);
    drop(task);
    assert!(
        bytes <= TASK_BYTES_AT_MOST,
        "a dispatch task takes {bytes} bytes, more than {TASK_BYTES_AT_MOST}"
    );
    setup.store.close().await;
}
