//! The process metrics every Prometheus client library exports under the same names
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_open_fds`, …), so
//! stock dashboards and alerts work on the admin and the executors alike.
//!
//! Read from `/proc/self` at each scrape, not kept up to date: a scrape every few seconds costs
//! a few small file reads, and nothing runs between scrapes. Where `/proc` is missing (not
//! Linux) the series are left out rather than reported as 0.

use std::sync::LazyLock;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// Clock ticks per second in `/proc` times (`USER_HZ`): the kernel reports 100 to user space
/// on every architecture we build for, whatever its internal tick rate.
const TICKS_PER_SECOND: f64 = 100.0;

/// A registry, without a prefix, holding only the process collector.
pub fn registry() -> &'static Registry {
    static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(ProcessCollector));
        registry
    });
    &REGISTRY
}

/// What one scrape read about this process.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProcessSample {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<i64>,
    pub open_fds: Option<i64>,
    pub max_fds: Option<i64>,
    pub threads: Option<i64>,
    pub start_time_seconds: Option<f64>,
}

impl ProcessSample {
    /// Reads `/proc/self` now.
    pub fn read() -> ProcessSample {
        let stat = std::fs::read_to_string("/proc/self/stat").ok();
        let fields = stat.as_deref().map(stat_fields).unwrap_or_default();
        let field = |index: usize| fields.get(index).and_then(|f| f.parse::<u64>().ok());
        // Fields after the command name, numbered from `state` (field 3 of proc(5)) at 0.
        let cpu_seconds = match (field(11), field(12)) {
            (Some(user), Some(system)) => Some((user + system) as f64 / TICKS_PER_SECOND),
            _ => None,
        };
        let boot_time = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|text| value_after(&text, "btime"));
        let start_time_seconds = match (field(19), boot_time) {
            (Some(ticks), Some(boot)) => Some(boot as f64 + ticks as f64 / TICKS_PER_SECOND),
            _ => None,
        };
        let resident_bytes = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|text| value_after(&text, "VmRSS:"))
            .map(|kib| kib.saturating_mul(1024));
        let open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|entries| entries.count() as i64);
        let max_fds = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|text| value_after(&text, "Max open files"));
        ProcessSample {
            cpu_seconds,
            resident_bytes,
            open_fds,
            max_fds,
            threads: field(17).map(|n| n as i64),
            start_time_seconds,
        }
    }
}

/// The fields of `/proc/self/stat` after the command name, which is in parentheses and may hold
/// spaces (and parentheses), so the split starts after the last `)`.
fn stat_fields(stat: &str) -> Vec<String> {
    stat.rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// The first number after `key` on the line starting with it (`VmRSS:   1234 kB` → 1234).
fn value_after(text: &str, key: &str) -> Option<i64> {
    text.lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|value| value.parse().ok())
}

#[derive(Debug)]
struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sample = ProcessSample::read();
        if let Some(seconds) = sample.cpu_seconds {
            let counter = ConstCounter::new(seconds);
            let metric = encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                counter.metric_type(),
            )?;
            counter.encode(metric)?;
        }
        let gauges: [(&str, &str, Option<f64>); 5] = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                sample.resident_bytes.map(|v| v as f64),
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                sample.open_fds.map(|v| v as f64),
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors (the soft limit)",
                sample.max_fds.map(|v| v as f64),
            ),
            (
                "process_threads",
                "Number of OS threads in the process",
                sample.threads.map(|v| v as f64),
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch in seconds",
                sample.start_time_seconds,
            ),
        ];
        for (name, help, value) in gauges {
            let Some(value) = value else { continue };
            let gauge = ConstGauge::new(value);
            let metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
            gauge.encode(metric)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_name_with_spaces_and_parentheses_does_not_shift_the_fields() {
        let stat = "42 (my (odd) cmd) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 1234";
        let fields = stat_fields(stat);
        assert_eq!(fields[0], "S");
        assert_eq!((fields[11].as_str(), fields[12].as_str()), ("250", "50"));
        assert_eq!((fields[17].as_str(), fields[19].as_str()), ("7", "1234"));
    }

    #[test]
    fn values_are_read_after_their_key() {
        assert_eq!(
            value_after("Name:\tx\nVmRSS:\t  2048 kB\n", "VmRSS:"),
            Some(2048)
        );
        let limits = "Limit Soft Hard Units\nMax open files            1024                 524288               files\n";
        assert_eq!(value_after(limits, "Max open files"), Some(1024));
        assert_eq!(value_after("", "btime"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_reads_plausibly() {
        let sample = ProcessSample::read();
        assert!(sample.cpu_seconds.is_some_and(|s| s >= 0.0));
        assert!(sample.resident_bytes.is_some_and(|b| b > 1024 * 1024));
        assert!(sample.open_fds.is_some_and(|n| n >= 3));
        assert!(
            sample
                .max_fds
                .is_some_and(|n| n >= sample.open_fds.unwrap_or(0))
        );
        assert!(sample.threads.is_some_and(|n| n >= 1));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or_default();
        assert!(
            sample
                .start_time_seconds
                .is_some_and(|t| t <= now + 1.0 && t > now - 86_400.0 * 365.0)
        );
    }
}
