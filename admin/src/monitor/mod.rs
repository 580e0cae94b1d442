//! Monitors: what happens after a run ends, and runs that ended without anyone saying so.
//!
//! ```text
//! callback / failed dispatch / lost ─▶ run final, AlarmStatus::NotFollowedUp
//! followup (every followup_interval, every admin, claimed by CAS)
//!   ─▶ policy::decide: retry after backoff? alarm? child jobs? FIX_DELAY next fire?
//!   ─▶ store.write_followup (one transaction) ─▶ alarm queue ─▶ its own task: Alarm::alarm
//!   ─▶ due retries and child runs ─▶ Trigger::dispatch(Fires::Stored)
//! lost (every heartbeat_interval / 2)
//!   RUNNING runs ─▶ LostJudge (heartbeat lists, live sessions) ─▶ LOST ─▶ followup retries it
//!   stranded runs (claimed by a dead admin, never sent; no executor saw them) ─▶ stranded::send
//! fenced (an admin whose liveness lock was released, as the liveness watch reports it)
//!   its claimed, unsent runs ─▶ every candidate executor fences them ─▶ stranded::send
//! ```
//! The decisions are pure (`policy`, `lost::LostJudge`); the loops only read, call and write.

pub mod alarm;
pub mod alarm_queue;
pub mod backfill;
pub mod fenced;
pub mod followup;
pub mod lost;
pub mod notify;
pub mod policy;
pub mod stranded;
pub mod workflow_hook;
pub mod workflow_schedule;
pub mod workflow_step;

pub use alarm::{Alarm, AlarmFuture, AlarmedRun, LogAlarm};
pub use alarm_queue::AlarmQueue;
pub use backfill::run_backfills;
pub use followup::run_followup;
pub use lost::run_lost_monitor;
pub use notify::Notifier;
pub use workflow_schedule::run_workflow_schedules;
