//! `alarm_status` of a finished run: where its follow-up stands (XXL-JOB's values).

/// The follow-up state of a finished run, stored as XXL-JOB's numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AlarmStatus {
    /// 0: finished, not followed up yet.
    NotFollowedUp,
    /// -1: follow-up in progress, claimed by one admin.
    Claimed,
    /// 1: followed up, no alarm was due (success, a retry follows, job gone, skipped).
    NothingToAlarm,
    /// 2: the alarm was sent.
    Sent,
    /// 3: sending the alarm failed.
    Failed,
    /// 4: followed up, its alarm waits in the alarm queue (xjob's own value; the delivery task
    /// sets 2 or 3 once it ends).
    Queued,
}

impl AlarmStatus {
    /// The stored number.
    pub fn code(self) -> i32 {
        match self {
            AlarmStatus::NotFollowedUp => 0,
            AlarmStatus::Claimed => -1,
            AlarmStatus::NothingToAlarm => 1,
            AlarmStatus::Sent => 2,
            AlarmStatus::Failed => 3,
            AlarmStatus::Queued => 4,
        }
    }

    /// The status of a stored number; `None` for a number no admin writes.
    pub fn from_code(code: i32) -> Option<AlarmStatus> {
        [
            AlarmStatus::NotFollowedUp,
            AlarmStatus::Claimed,
            AlarmStatus::NothingToAlarm,
            AlarmStatus::Sent,
            AlarmStatus::Failed,
            AlarmStatus::Queued,
        ]
        .into_iter()
        .find(|status| status.code() == code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for code in -1..=4 {
            assert_eq!(
                AlarmStatus::from_code(code).map(AlarmStatus::code),
                Some(code)
            );
        }
        assert_eq!(AlarmStatus::from_code(5), None);
    }
}
