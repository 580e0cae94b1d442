//! What a lost-run check concludes: runs lost now, and suspects to confirm with their executor
//! first. The XXL-JOB idle judge (`xxl_idle`) concludes in the same terms.

use crate::model::LogId;

/// A run found lost, with the reason recorded as its handle message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostVerdict {
    pub log_id: LogId,
    pub message: String,
}

/// A run its executor's heartbeats have left out for a full interval. Heartbeats can arrive
/// late (a slow network): one sent before the run reached the executor may arrive after the
/// dispatch, and does not list it. So the executor is asked directly before the run is marked
/// lost; a direct answer is given after the dispatch, whatever the delay ([`confirm`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suspect {
    pub verdict: LostVerdict,
    /// How long the heartbeats have left it out.
    pub missing_ms: i64,
}

/// One check's outcome: runs lost now, and runs to confirm with their executor first.
#[derive(Debug, Default)]
pub struct Judgement {
    pub lost: Vec<LostVerdict>,
    pub suspects: Vec<Suspect>,
}
