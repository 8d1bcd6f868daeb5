//! Server waits and blocks for the Deribit, Kraken and Coinbase adapters, by the
//! rules of issue 12 (items 2 and 3):
//!
//! - a wait of zero or less (`Retry-After: 0`, a date already past) holds like no
//!   wait: one window of the bucket, so nothing is sent into the throttle at once;
//! - a wait longer than the bucket's cap (the longer of 5 minutes and two of its
//!   windows) is not a throttle but a ban: the bucket is halted, counted as a ban,
//!   and only [`Budget::clear_halt`] resumes it, so the alerting path sees it;
//! - a 403 whose body is not the venue's JSON (a firewall's block page) is a ban of
//!   the IP gate, ending when its `Retry-After` says or after [`BLOCK_NS`].
//!
//! The venues crate applies the cap here, before [`Budget::throttled`], so the verdict
//! is the same whether or not ergon-core caps waits itself.

use crate::adapt::{self, RetryAfter};
use ergon_core::{BucketId, Budget, Verdict};

const SEC: i64 = 1_000_000_000;

/// The floor of every bucket's cap on a server wait: 5 minutes.
pub const MIN_CAP_NS: i64 = 300 * SEC;

/// A firewall block without a `Retry-After`: read as a ban of this long (a
/// person clears the halt; the figure only dates the venue's end).
pub const BLOCK_NS: i64 = 300 * SEC;

/// The longest server wait read as a throttle for a bucket of `window_ns`.
pub fn cap_ns(window_ns: i64) -> i64 {
    window_ns.saturating_mul(2).max(MIN_CAP_NS)
}

/// Throttles `bucket` (its window `window_ns`) for the venue's wait: no wait or a
/// wait of zero or less holds one window, a wait within the cap holds that long, a
/// longer one halts the bucket as a ban.
///
/// ```
/// use ergon_core::{Budget, Spec, Verdict};
/// use ergon_venues::waits;
/// let mut b = Budget::builder();
/// let ip = b.add("ip", Spec::gate()).unwrap();
/// let mut budget = b.build(0).unwrap();
/// let far = 10_000 * 1_000_000_000;
/// assert!(matches!(waits::throttle(&mut budget, ip, Some(far), 1_000_000_000, 0),
///                  Verdict::Banned { .. }));
/// assert!(budget.is_halted(ip));
/// ```
pub fn throttle(
    budget: &mut Budget,
    bucket: BucketId,
    wait_ns: Option<i64>,
    window_ns: i64,
    now_ns: i64,
) -> Verdict {
    match wait_ns {
        Some(w) if w > cap_ns(window_ns) => {
            adapt::ban(budget, bucket, now_ns.saturating_add(w), now_ns)
        }
        Some(w) if w > 0 => adapt::hold(budget, bucket, Some(w), now_ns),
        _ => adapt::hold(budget, bucket, None, now_ns),
    }
}

/// A firewall's block of the IP (a 403 without the venue's JSON): halts `ip`
/// until the `Retry-After` end, or [`BLOCK_NS`] without one.
pub fn block(budget: &mut Budget, ip: BucketId, retry: RetryAfter, now_ns: i64) -> Verdict {
    let wait = retry.wait_ns.filter(|w| *w > 0).unwrap_or(BLOCK_NS);
    adapt::ban(budget, ip, now_ns.saturating_add(wait), now_ns)
}
