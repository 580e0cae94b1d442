//! A histogram observed with atomic adds only, for series fed once per fire: the client
//! library's histogram takes a lock on every observation.
//!
//! The sum is kept in whole microseconds (an integer add, where an `f64` sum needs a
//! compare-and-swap loop); a scrape reads the parts one after the other, so it may see a count
//! one observation ahead of a bucket, which Prometheus' rate functions absorb.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Seconds-valued histogram with fixed upper bounds (plus `+Inf`).
#[derive(Debug, Clone)]
pub struct AtomicHistogram {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    bounds: Vec<f64>,
    /// Per bucket, not cumulative; the last one is `+Inf`.
    counts: Vec<AtomicU64>,
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl AtomicHistogram {
    /// A histogram with these upper bounds (ascending), in seconds.
    pub fn new(bounds: impl IntoIterator<Item = f64>) -> AtomicHistogram {
        let bounds: Vec<f64> = bounds.into_iter().collect();
        let counts = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
        AtomicHistogram {
            inner: Arc::new(Inner {
                bounds,
                counts,
                count: AtomicU64::new(0),
                sum_micros: AtomicU64::new(0),
            }),
        }
    }

    /// Observes `seconds` (negative values count as 0).
    pub fn observe(&self, seconds: f64) {
        let seconds = seconds.max(0.0);
        let inner = &self.inner;
        let bucket = inner.bounds.partition_point(|bound| *bound < seconds);
        inner.counts[bucket].fetch_add(1, Ordering::Relaxed);
        inner.count.fetch_add(1, Ordering::Relaxed);
        inner
            .sum_micros
            .fetch_add((seconds * 1e6) as u64, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.inner.count.load(Ordering::Relaxed)
    }
}

impl TypedMetric for AtomicHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for AtomicHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let inner = &self.inner;
        let buckets: Vec<(f64, u64)> = inner
            .bounds
            .iter()
            .copied()
            // The encoder writes `+Inf` for `f64::MAX`.
            .chain(std::iter::once(f64::MAX))
            .zip(&inner.counts)
            .map(|(bound, count)| (bound, count.load(Ordering::Relaxed)))
            .collect();
        let count = inner.count.load(Ordering::Relaxed);
        let sum = inner.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_holding_them_and_add_up() {
        let histogram = AtomicHistogram::new([0.1, 1.0]);
        for seconds in [0.05, 0.1, 0.5, 7.0, -1.0] {
            histogram.observe(seconds);
        }
        let mut registry = Registry::default();
        registry.register("latency_seconds", "test", histogram.clone());
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        for line in [
            "latency_seconds_count 5",
            "latency_seconds_sum 7.65",
            "latency_seconds_bucket{le=\"0.1\"} 3",
            "latency_seconds_bucket{le=\"1.0\"} 4",
            "latency_seconds_bucket{le=\"+Inf\"} 5",
        ] {
            assert!(text.contains(line), "{line} missing in:\n{text}");
        }
        assert_eq!(histogram.count(), 5);
    }
}
