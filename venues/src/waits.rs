//! A firewall's block, for the Deribit, Kraken and Coinbase adapters: a 403 whose
//! body is not the venue's JSON (a block page) is a ban of the IP gate, ending when
//! its `Retry-After` says or after [`BLOCK_NS`]. Only [`Budget::clear_halt`], a
//! person's action, resumes it.
//!
//! Server waits need nothing here: [`adapt::hold`] applies ergon-core's rules (a
//! wait of zero or less holds one window; a wait above the bucket's cap, the longer
//! of 5 minutes and two windows, halts as a ban).

use crate::adapt::{self, RetryAfter};
use ergon_core::{BucketId, Budget, Verdict};

const SEC: i64 = 1_000_000_000;

/// A firewall block without a `Retry-After`: read as a ban of this long (a
/// person clears the halt; the figure only dates the venue's end).
pub const BLOCK_NS: i64 = 300 * SEC;

/// A firewall's block of the IP (a 403 without the venue's JSON): halts `ip`
/// until the `Retry-After` end, or [`BLOCK_NS`] without one.
///
/// ```
/// use ergon_core::{Budget, Spec, Verdict};
/// use ergon_venues::{adapt::RetryAfter, waits};
/// let mut b = Budget::builder();
/// let ip = b.add("ip", Spec::gate()).unwrap();
/// let mut budget = b.build(0).unwrap();
/// let v = waits::block(&mut budget, ip, RetryAfter::default(), 0);
/// assert_eq!(v, Verdict::Banned { bucket: ip, until_ns: waits::BLOCK_NS });
/// assert!(budget.is_halted(ip).unwrap());
/// ```
pub fn block(budget: &mut Budget, ip: BucketId, retry: RetryAfter, now_ns: i64) -> Verdict {
    let wait = retry.wait_ns.filter(|w| *w > 0).unwrap_or(BLOCK_NS);
    adapt::ban(budget, ip, now_ns.saturating_add(wait), now_ns)
}
