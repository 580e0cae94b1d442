//! The one conversion of a claimed fire into the `RunRequest` an executor receives.

use xjob_proto::pb;

use crate::model::{Fire, NodeIdentity};
use crate::wire::{block_strategy_to_pb, glue_type_to_pb, trigger_type_to_pb};

/// The `RunRequest` for `fire`, claimed at `trigger_time_ms` (the executor files the run's log
/// under that day); `traceparent` is the dispatch span's, empty when not traced; `start_at_ms`
/// the executor-clock start of a run sent ahead (0: start at once); `sender` this admin (an
/// executor refuses a run from a sender another admin fenced it against).
pub(super) fn run_request(
    fire: &Fire,
    sender: &NodeIdentity,
    trigger_time_ms: i64,
    traceparent: String,
    start_at_ms: i64,
) -> pb::RunRequest {
    let job = &fire.job;
    pb::RunRequest {
        job_id: job.id.0,
        log_id: fire.log_id.0,
        handler: if fire.handler.is_empty() {
            job.handler.clone()
        } else {
            fire.handler.clone()
        },
        params: fire.params.clone(),
        block_strategy: block_strategy_to_pb(job.block_strategy) as i32,
        timeout_ms: job.timeout_ms,
        log_date_ms: trigger_time_ms,
        glue_type: glue_type_to_pb(job.glue_type) as i32,
        glue_source: job.glue_source.clone(),
        glue_updated_ms: job.glue_updated_ms,
        shard_index: fire.shard.index,
        shard_total: fire.shard.total,
        scheduled_at_ms: fire.scheduled_at_ms,
        attempt: fire.attempt,
        trigger_type: trigger_type_to_pb(fire.trigger_type) as i32,
        traceparent,
        start_at_ms,
        sender_node: sender.node_id.clone(),
        sender_epoch: sender.epoch,
    }
}
