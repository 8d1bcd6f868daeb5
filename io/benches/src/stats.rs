//! Turning the batch times of one case into the report: ns per call (min, median,
//! mean of the batch means, p99, p99.9, slowest batch) and stalls.
//!
//! Pure arithmetic on recorded numbers; runs after the timed loops, never inside them.

/// A batch at least this much slower than the median batch is a stall.
pub const STALL_NS: u64 = 1_000;

/// The figures of one case.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Batches measured.
    pub batches: usize,
    /// Calls per batch.
    pub batch: usize,
    /// ns per call: the fastest batch's mean.
    pub min: f64,
    /// ns per call: the median batch's mean.
    pub median: f64,
    /// ns per call: the mean of the batch means.
    pub mean: f64,
    /// ns per call: the 99th percentile batch.
    pub p99: f64,
    /// ns per call: the 99.9th percentile batch.
    pub p999: f64,
    /// ns per call: the slowest batch.
    pub max: f64,
    /// The median batch, whole (ns).
    pub median_batch_ns: u64,
    /// The slowest batch, whole (ns).
    pub slowest_batch_ns: u64,
    /// Batches at least [`STALL_NS`] slower than the median batch.
    pub stalls: u64,
    /// Of those, at least 10 µs slower.
    pub stalls_10us: u64,
    /// Of those, at least 100 µs slower.
    pub stalls_100us: u64,
    /// How much slower than the median batch the worst stall was (ns).
    pub worst_stall_ns: u64,
    /// Time lost to stalls (their excess over the median batch) as a share of the
    /// case's whole timed run.
    pub stall_share: f64,
}

/// The value at quantile `q` (0..=1) of sorted data, nearest rank.
fn quantile(sorted: &[u64], q: f64) -> u64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Summarises the batch times (ns per whole batch of `batch` calls). `None` if there
/// is no batch.
pub fn summarize(batch_ns: &[u64], batch: usize) -> Option<Summary> {
    if batch_ns.is_empty() || batch == 0 {
        return None;
    }
    let mut sorted = batch_ns.to_vec();
    sorted.sort_unstable();
    let per_call = |ns: u64| ns as f64 / batch as f64;
    let median_batch = quantile(&sorted, 0.5);
    let total: u128 = batch_ns.iter().map(|&n| u128::from(n)).sum();
    let (mut stalls, mut s10, mut s100, mut worst, mut lost) = (0, 0, 0, 0, 0u128);
    for &ns in batch_ns {
        let excess = ns.saturating_sub(median_batch);
        if excess >= STALL_NS {
            stalls += 1;
            s10 += u64::from(excess >= 10_000);
            s100 += u64::from(excess >= 100_000);
            worst = worst.max(excess);
            lost += u128::from(excess);
        }
    }
    Some(Summary {
        batches: batch_ns.len(),
        batch,
        min: per_call(sorted[0]),
        median: per_call(median_batch),
        mean: total as f64 / batch_ns.len() as f64 / batch as f64,
        p99: per_call(quantile(&sorted, 0.99)),
        p999: per_call(quantile(&sorted, 0.999)),
        max: per_call(sorted[sorted.len() - 1]),
        median_batch_ns: median_batch,
        slowest_batch_ns: sorted[sorted.len() - 1],
        stalls,
        stalls_10us: s10,
        stalls_100us: s100,
        worst_stall_ns: worst,
        stall_share: if total == 0 {
            0.0
        } else {
            lost as f64 / total as f64
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=1000).collect();
        assert_eq!(quantile(&v, 0.5), 500);
        assert_eq!(quantile(&v, 0.99), 990);
        assert_eq!(quantile(&v, 0.999), 999);
        assert_eq!(quantile(&[7], 0.999), 7);
    }

    #[test]
    fn stalls_are_counted_against_the_median_batch() {
        // 97 batches of 640 ns (10 ns a call with batch 64), then three stalls.
        let mut v = vec![640u64; 97];
        v.extend([640 + 999, 640 + 1_000, 640 + 150_000]);
        let s = summarize(&v, 64).unwrap();
        assert_eq!(s.median, 10.0);
        assert_eq!(s.min, 10.0);
        assert_eq!(s.median_batch_ns, 640);
        assert_eq!(s.slowest_batch_ns, 150_640);
        assert_eq!((s.stalls, s.stalls_10us, s.stalls_100us), (2, 1, 1));
        assert_eq!(s.worst_stall_ns, 150_000);
        let total = (640 * 100 + 999 + 1_000 + 150_000) as f64;
        assert!((s.stall_share - 151_000.0 / total).abs() < 1e-12);
        assert!((s.max - 150_640.0 / 64.0).abs() < 1e-9);
        assert!((s.mean - total / 100.0 / 64.0).abs() < 1e-9);
    }

    #[test]
    fn nothing_to_summarize() {
        assert_eq!(summarize(&[], 64), None);
        assert_eq!(summarize(&[1], 0), None);
    }
}
