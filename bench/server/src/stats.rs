//! Percentiles of measured durations.

use std::time::Duration;

/// The `p`-th percentile (0 to 100) of `samples` by nearest rank: the smallest sample with at least
/// `p` percent of the samples at or below it; `None` when there are none.
pub(crate) fn percentile(samples: &[Duration], p: f64) -> Option<Duration> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Seconds rounded to the microsecond, as the JSON lines give them.
pub(crate) fn secs(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e6).round() / 1e6
}

/// `value` rounded to `digits` decimals.
pub(crate) fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(values: &[u64]) -> Vec<Duration> {
        values.iter().map(|v| Duration::from_millis(*v)).collect()
    }

    #[test]
    fn nearest_rank_percentiles() {
        let samples = ms(&[5, 1, 4, 2, 3]);
        assert_eq!(percentile(&samples, 50.0), Some(Duration::from_millis(3)));
        assert_eq!(percentile(&samples, 99.0), Some(Duration::from_millis(5)));
        assert_eq!(percentile(&samples, 0.0), Some(Duration::from_millis(1)));
        let hundred: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&ms(&hundred), 99.0), Some(Duration::from_millis(99)));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn rounding() {
        assert_eq!(secs(Duration::from_nanos(1_234_567)), 0.001235);
        assert_eq!(round(12.3456, 1), 12.3);
    }
}
