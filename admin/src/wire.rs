//! The contract's enums between the wire (`xjob_proto::pb`) and the domain (`crate::model`),
//! shared by the API (`api/convert.rs`) and the trigger's `RunRequest` (`trigger/request.rs`).
//!
//! Each enum comes in three flavours: `x_to_pb` (model → pb), `x_from_pb` (an i32 off the wire
//! → `Option`, `None` for UNSPECIFIED or unknown values) and `pb_x` (the same, as an
//! `InvalidArgument` naming the field).

use xjob_proto::pb;

use crate::error::Error;
use crate::model::{
    AddressType, BackfillState, BlockStrategy, GlueType, JobStatus, MisfireStrategy, RouteStrategy,
    RunStatus, ScheduleType, TriggerType,
};

/// Generates the three conversions of one enum pair; the match stays exhaustive both ways, so a
/// value added to either side is a compile error here.
macro_rules! enum_conversions {
    (
        $model:ident <-> pb::$wire:ident,
        to: $to_pb:ident, from: $from_pb:ident, checked: $checked:ident,
        { $($model_variant:ident <-> $wire_variant:ident),+ $(,)? }
        $(unsupported: { $($unsupported:ident),+ })?
    ) => {
        #[doc = concat!("Returns the wire value of a `", stringify!($model), "`.")]
        pub fn $to_pb(value: $model) -> pb::$wire {
            match value { $($model::$model_variant => pb::$wire::$wire_variant),+ }
        }

        #[doc = concat!("Reads a wire `", stringify!($wire), "`; `None` for UNSPECIFIED or an unknown value.")]
        pub fn $from_pb(value: i32) -> Option<$model> {
            match pb::$wire::try_from(value) {
                $(Ok(pb::$wire::$wire_variant) => Some($model::$model_variant),)+
                $($(Ok(pb::$wire::$unsupported) => None,)+)?
                Ok(pb::$wire::Unspecified) | Err(_) => None,
            }
        }

        #[doc = concat!("Reads a required wire `", stringify!($wire), "`; `InvalidArgument` naming `field` otherwise.")]
        pub fn $checked(value: i32, field: &str) -> Result<$model, Error> {
            $from_pb(value).ok_or_else(|| enum_error(value, field))
        }
    };
}

enum_conversions!(ScheduleType <-> pb::ScheduleType,
    to: schedule_type_to_pb, from: schedule_type_from_pb, checked: pb_schedule_type,
    { None <-> None, Cron <-> Cron, FixRate <-> FixRate, FixDelay <-> FixDelay });
enum_conversions!(MisfireStrategy <-> pb::MisfireStrategy,
    to: misfire_strategy_to_pb, from: misfire_strategy_from_pb, checked: pb_misfire_strategy,
    { DoNothing <-> DoNothing, FireOnceNow <-> FireOnceNow });
enum_conversions!(RouteStrategy <-> pb::RouteStrategy,
to: route_strategy_to_pb, from: route_strategy_from_pb, checked: pb_route_strategy,
{
    First <-> First,
    Last <-> Last,
    Round <-> Round,
    Random <-> Random,
    ConsistentHash <-> ConsistentHash,
    LeastFrequentlyUsed <-> LeastFrequentlyUsed,
    LeastRecentlyUsed <-> LeastRecentlyUsed,
    Failover <-> Failover,
    Busyover <-> Busyover,
    ShardingBroadcast <-> ShardingBroadcast,
});
enum_conversions!(BlockStrategy <-> pb::BlockStrategy,
    to: block_strategy_to_pb, from: block_strategy_from_pb, checked: pb_block_strategy,
    { SerialExecution <-> SerialExecution, DiscardLater <-> DiscardLater, CoverEarly <-> CoverEarly });
enum_conversions!(GlueType <-> pb::GlueType,
to: glue_type_to_pb, from: glue_type_from_pb, checked: pb_glue_type,
{
    Bean <-> Bean,
    Shell <-> Shell,
    Python <-> Python,
    NodeJs <-> Nodejs,
    Php <-> Php,
    PowerShell <-> Powershell,
    Groovy <-> Groovy,
});
enum_conversions!(TriggerType <-> pb::TriggerType,
to: trigger_type_to_pb, from: trigger_type_from_pb, checked: pb_trigger_type,
{
    Cron <-> Cron,
    Manual <-> Manual,
    Retry <-> Retry,
    Parent <-> Parent,
    Api <-> Api,
    Misfire <-> Misfire,
    Backfill <-> Backfill,
    Workflow <-> Workflow,
});
enum_conversions!(BackfillState <-> pb::BackfillState,
to: backfill_state_to_pb, from: backfill_state_from_pb, checked: pb_backfill_state,
{
    Running <-> Running,
    Done <-> Done,
    Cancelled <-> Cancelled,
});
enum_conversions!(RunStatus <-> pb::RunStatus,
to: run_status_to_pb, from: run_status_from_pb, checked: pb_run_status,
{
    Pending <-> Pending,
    Running <-> Running,
    Success <-> Success,
    Failed <-> Failed,
    Timeout <-> Timeout,
    Killed <-> Killed,
    Lost <-> Lost,
    Skipped <-> Skipped,
    Waiting <-> Waiting,
});
enum_conversions!(AddressType <-> pb::AddressType,
    to: address_type_to_pb, from: address_type_from_pb, checked: pb_address_type,
    { Auto <-> Auto, Manual <-> Manual });
enum_conversions!(JobStatus <-> pb::JobStatus,
    to: job_status_to_pb, from: job_status_from_pb, checked: pb_job_status,
    { Stopped <-> Stopped, Running <-> Running });

/// The error of a required enum field that is unset (0) or holds an unknown value.
pub fn enum_error(value: i32, field: &str) -> Error {
    if value == 0 {
        Error::invalid(field, "must be set")
    } else {
        Error::invalid(field, format!("unknown value {value}"))
    }
}
