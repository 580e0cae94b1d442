//! XXL-JOB's trigger codes, which a run's record carries: below the trigger and its parts
//! (dispatch, trace), which all read them.

/// XXL-JOB's trigger codes: accepted, not delivered, maybe delivered (a deadline after sending).
pub(super) const TRIGGER_ACCEPTED: i32 = 200;
pub(super) const TRIGGER_FAILED: i32 = 500;
pub(super) const TRIGGER_UNKNOWN: i32 = 0;
