//! The shapes of series the metrics share: below the registry (`mod.rs`) and the state gauges.

use prometheus_client::metrics::gauge::Gauge;

/// One label, e.g. `[("outcome", "lost")]`.
pub(super) type Label = [(&'static str, &'static str); 1];

/// A gauge holding seconds (a timestamp, a lag).
pub(super) type Seconds = Gauge<f64, std::sync::atomic::AtomicU64>;
