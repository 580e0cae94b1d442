//! End-to-end scenarios: a real admin and real executors talking gRPC on loopback, with the
//! admin's state in a real SQLite file. One test binary; one module per area.

mod admission;
mod alarms;
mod backfill;
mod basics;
mod block_strategies;
mod calendars;
mod children;
mod dst_policy;
mod groovy;
mod keepalive;
mod kill;
mod limits;
mod lost;
mod metrics;
mod operations;
mod overlap;
mod pools;
mod retention;
mod retries;
mod routes;
mod schedule_policies;
mod schedule_types;
mod send_ahead;
mod session_dispatch;
mod tls;
mod users;
mod workflow_nodes;
mod workflow_runs;
mod workflow_schedules;
mod workflows;
