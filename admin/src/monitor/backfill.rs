//! The backfill runner: starts the runs of this admin's RUNNING backfills, in occurrence
//! order, keeping at most `max_concurrent` of each unfinished.
//!
//! ```text
//! every tick: adopt RUNNING backfills of gone admins (and of this node's earlier starts)
//!   for each owned backfill:
//!     unfinished runs < max_concurrent ─▶ next occurrences after the cursor
//!       ─▶ store.create_backfill_runs (runs + links + cursor, one fenced transaction)
//!       ─▶ Trigger::dispatch(Fires::Stored) ─▶ admission, route, Run, record
//!     every occurrence created and none unfinished ─▶ DONE
//! ```
//! Nothing is lost or run twice: the cursor moves in the transaction that writes the runs,
//! the link table's key allows one run per occurrence, and the write is fenced on the owner
//! and the count read. A run written but not yet claimed when its admin dies is an ordinary
//! PENDING row of a gone node, which run adoption sends.
//!
//! Runs go through `Fires::Stored`, like retries: each takes an admission slot, and a
//! backfill never has more than its concurrency of them, so a backfill of 10 000 occurrences
//! adds at most `max_concurrent` runs to what the live schedule competes with.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::context::AdminContext;
use crate::error::Error;
use crate::model::backfill::next_occurrence;
use crate::model::{Backfill, Fire, RunStatus, TriggerType, job_time_zone};
use crate::trigger::Fires;

/// How often the runner looks at its backfills: a finished run's successor starts within it.
const TICK: Duration = Duration::from_millis(500);
/// Ticks between two looks for backfills of gone admins.
const ADOPT_EVERY: u32 = 4;

/// Runs until `cancel`: each tick starts what the owned backfills have room for.
pub async fn run_backfills(ctx: Arc<AdminContext>, cancel: CancellationToken) {
    let mut tick: u32 = 0;
    loop {
        if tick.is_multiple_of(ADOPT_EVERY) {
            let adopted = adopt(&ctx).await;
            if let Err(error) = adopted {
                tracing::warn!(%error, "adopting backfills failed; retrying next tick");
            }
        }
        tick = tick.wrapping_add(1);
        if let Err(error) = round(&ctx).await {
            tracing::warn!(%error, "backfill round failed; retrying next tick");
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(TICK) => {}
        }
    }
}

/// Takes over the backfills of gone admins, judged by the database's clock like the leases.
async fn adopt(ctx: &AdminContext) -> Result<(), Error> {
    let lease_now_ms = ctx.store.database_now_ms().await?;
    let adopted = ctx.store.adopt_backfills(&ctx.node, lease_now_ms).await?;
    if adopted > 0 {
        tracing::info!(adopted, "took over the backfills of admins that are gone");
    }
    Ok(())
}

/// One pass over the owned backfills.
async fn round(ctx: &AdminContext) -> Result<(), Error> {
    for backfill in ctx.store.owned_backfills(&ctx.node).await? {
        advance(ctx, &backfill).await?;
    }
    Ok(())
}

/// Starts as many of the backfill's next occurrences as it has room for, or ends it.
async fn advance(ctx: &AdminContext, backfill: &Backfill) -> Result<(), Error> {
    let progress = ctx.store.backfill_progress(backfill.id).await?;
    let now = ctx.clock.now_ms();
    if backfill.all_created() {
        if progress.running == 0 {
            ctx.store
                .finish_backfill(backfill.id, &ctx.node, now)
                .await?;
        }
        return Ok(());
    }
    let room = i64::from(backfill.max_concurrent) - progress.running;
    if room <= 0 {
        return Ok(());
    }
    let Some(job) = ctx.store.get_job(backfill.job_id).await? else {
        // The job is gone: nothing more can run; the backfill ends as cancelled.
        ctx.store.cancel_backfill(backfill.id, now).await?;
        return Ok(());
    };
    let job = Arc::new(job);
    let zone = job_time_zone(&job, ctx.config.default_time_zone());
    let left = backfill.total - backfill.created;
    let mut rows = Vec::new();
    let mut after = backfill.next_after_ms();
    while (rows.len() as i64) < room.min(left) {
        let next = match next_occurrence(&job, zone, backfill.from_ms, after, backfill.to_ms) {
            Ok(next) => next,
            Err(message) => {
                // The job's schedule was changed to one without occurrences (or a bad one):
                // nothing more can be started.
                tracing::warn!(backfill = backfill.id, %message, "backfill cancelled");
                ctx.store.cancel_backfill(backfill.id, now).await?;
                return Ok(());
            }
        };
        let Some(at) = next else { break };
        let fire = Fire::scheduled(Arc::clone(&job), at, TriggerType::Backfill);
        // Not keyed: the link table is the backfill's unique key, and a schedule fire of the
        // same instant must not collide with it.
        let fire = Fire {
            keyed: false,
            ..fire
        };
        rows.push(fire.row(&ctx.node, RunStatus::Pending, ""));
        after = at;
    }
    if rows.is_empty() {
        // The schedule changed since the backfill was counted and fewer occurrences are
        // left: what was created is all there is.
        if progress.running == 0 {
            ctx.store
                .finish_backfill(backfill.id, &ctx.node, now)
                .await?;
        }
        return Ok(());
    }
    let Some(ids) = ctx
        .store
        .create_backfill_runs(backfill, &ctx.node, &rows, now)
        .await?
    else {
        // Cancelled, taken over or advanced meanwhile: the next tick reads it again.
        return Ok(());
    };
    tracing::debug!(
        backfill = backfill.id,
        runs = ids.len(),
        "starting backfill runs"
    );
    let stored = Fires::Stored {
        log_ids: ids,
        trigger_time_ms: ctx.clock.now_ms(),
    };
    ctx.trigger.dispatch(stored).await?;
    Ok(())
}
