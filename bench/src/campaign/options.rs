//! The campaign's options on the command line: below the common options, which hold them, and
//! the campaign, which reads them.

use super::plan::FaultKind;

/// The campaign's own options (the cluster's size, the load and the window are the common
/// options: --database, --admins, --executors, --jobs, --warmup, --duration, --drain).
#[derive(clap::Args, Debug, Clone)]
pub struct Options {
    /// Campaign: the seed of the fault plan (default: drawn from the clock, and printed). The
    /// same seed with the same cluster options replays the same faults at the same offsets.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Campaign: seconds at the end of the window left without faults, so what the last one
    /// disturbed has healed before the window closes.
    #[arg(long, default_value_t = 15)]
    pub settle: u64,
    /// Campaign: shortest and longest pause in seconds between one fault healing and the
    /// next one starting.
    #[arg(long, num_args = 2, value_names = ["MIN", "MAX"], default_values_t = [1, 6])]
    pub fault_gap: Vec<u64>,
    /// Campaign: only these kinds of fault (default: every kind the database allows).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub faults: Vec<FaultKind>,
    /// Campaign: at the window's start, backfill an extra (never started) every-second job
    /// over this many seconds before the window, under the same faults; 0 for none.
    #[arg(long, default_value_t = 240)]
    pub backfill: u64,
    /// Campaign: this many jobs of each overlap policy (BUFFER_ALL, BUFFER_ONE, SKIP) firing
    /// every other second, with runs that sometimes last longer than that, under the same
    /// faults; 0 for none.
    #[arg(long, default_value_t = 2)]
    pub overlap: usize,
    /// Campaign: start a diamond workflow and one with a failing step and its error branch,
    /// in turn every 2 s during the window, under the same faults (false: none).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub workflows: bool,
}
