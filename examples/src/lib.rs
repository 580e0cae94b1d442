//! Example executors built with the xjob SDK. Each binary in `src/bin/` is a complete executor
//! process; run one next to `xjob serve` to see jobs land on a separate process.
