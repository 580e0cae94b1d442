//! The contract's enums as domain types. Each is stored in the database by its XXL-JOB name
//! (`CRON`, `FIRST`, ...) so rows stay readable and familiar; `as_str`/`parse` are the only
//! conversions to and from that text.

macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            /// All values, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// Returns the stored (XXL-JOB) name.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// Parses a stored name; `None` for anything else.
            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

named_enum!(
    /// When a job fires.
    ScheduleType { None => "NONE", Cron => "CRON", FixRate => "FIX_RATE", FixDelay => "FIX_DELAY" }
);
named_enum!(
    /// What happens to a fire found more than the misfire threshold late.
    MisfireStrategy { DoNothing => "DO_NOTHING", FireOnceNow => "FIRE_ONCE_NOW" }
);
named_enum!(
    /// Which executor of the group a run goes to.
    RouteStrategy {
        First => "FIRST",
        Last => "LAST",
        Round => "ROUND",
        Random => "RANDOM",
        ConsistentHash => "CONSISTENT_HASH",
        LeastFrequentlyUsed => "LEAST_FREQUENTLY_USED",
        LeastRecentlyUsed => "LEAST_RECENTLY_USED",
        Failover => "FAILOVER",
        Busyover => "BUSYOVER",
        ShardingBroadcast => "SHARDING_BROADCAST",
    }
);
named_enum!(
    /// Executor-side behaviour when a run arrives while the job is busy there.
    BlockStrategy {
        SerialExecution => "SERIAL_EXECUTION",
        DiscardLater => "DISCARD_LATER",
        CoverEarly => "COVER_EARLY",
    }
);
named_enum!(
    /// How the handler's code is provided.
    GlueType {
        Bean => "BEAN",
        Shell => "GLUE_SHELL",
        Python => "GLUE_PYTHON",
        NodeJs => "GLUE_NODEJS",
        Php => "GLUE_PHP",
        PowerShell => "GLUE_POWERSHELL",
        // Java compiled inside an XXL-JOB executor (a JVM): only for groups of XXL-JOB
        // executors (`model::glue::groovy_refusal`).
        Groovy => "GLUE_GROOVY",
    }
);
named_enum!(
    /// Why a run was created.
    TriggerType {
        Cron => "CRON",
        Manual => "MANUAL",
        Retry => "RETRY",
        Parent => "PARENT",
        Api => "API",
        Misfire => "MISFIRE",
        Backfill => "BACKFILL",
        Workflow => "WORKFLOW",
    }
);
named_enum!(
    /// Lifecycle of one run.
    RunStatus {
        Pending => "PENDING",
        Running => "RUNNING",
        Success => "SUCCESS",
        Failed => "FAILED",
        Timeout => "TIMEOUT",
        Killed => "KILLED",
        Lost => "LOST",
        Skipped => "SKIPPED",
        // Held back by its job's overlap policy until the earlier run ends (`model::overlap`).
        Waiting => "WAITING",
    }
);
named_enum!(
    /// Where a backfill stands: still starting or waiting for its runs, all finished, or
    /// cancelled (no more runs start).
    BackfillState { Running => "RUNNING", Done => "DONE", Cancelled => "CANCELLED" }
);
named_enum!(
    /// Where a group's addresses come from.
    AddressType { Auto => "AUTO", Manual => "MANUAL" }
);

impl RunStatus {
    /// Whether no further result can change this run.
    pub fn is_final(self) -> bool {
        !matches!(
            self,
            RunStatus::Pending | RunStatus::Running | RunStatus::Waiting
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips() {
        for value in RouteStrategy::ALL {
            assert_eq!(RouteStrategy::parse(value.as_str()), Some(*value));
        }
        for value in RunStatus::ALL {
            assert_eq!(RunStatus::parse(value.as_str()), Some(*value));
        }
        assert_eq!(ScheduleType::parse("cron"), None);
    }
}
