//! `CountingAlarm`: an alarm hook that records the alarms it is asked to send, so a test can
//! wait for them (with `wait_until`) and check which runs alarmed.

use std::sync::Mutex;

use xjob_admin::model::now_ms;
use xjob_admin::monitor::{Alarm, AlarmFuture, AlarmedRun};

/// One alarm as the hook saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raised {
    pub job_id: i64,
    pub log_id: i64,
    pub attempt: i32,
    /// When the hook was called.
    pub at_ms: i64,
}

/// Records alarms instead of sending them.
#[derive(Default)]
pub struct CountingAlarm {
    raised: Mutex<Vec<Raised>>,
}

impl CountingAlarm {
    /// The alarms raised so far for `job_id`, in order.
    pub fn of_job(&self, job_id: i64) -> Vec<Raised> {
        self.raised
            .lock()
            .map(|raised| {
                raised
                    .iter()
                    .filter(|alarm| alarm.job_id == job_id)
                    .copied()
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Alarm for CountingAlarm {
    fn alarm<'a>(&'a self, alarmed: &'a AlarmedRun) -> AlarmFuture<'a> {
        let AlarmedRun { job, run, .. } = alarmed;
        Box::pin(async move {
            let raised = Raised {
                job_id: job.id.0,
                log_id: run.id.0,
                attempt: run.attempt,
                at_ms: now_ms(),
            };
            self.raised
                .lock()
                .map_err(|_| "alarm record poisoned".to_string())?
                .push(raised);
            Ok("counted by the test".to_string())
        })
    }
}
