//! What both criterion benches share: timing calls in batches that each start from
//! a state set up outside the timed region.

use std::time::{Duration, Instant};

/// Calls per batch; at most the orders/10 s limit of the benches' budgets.
pub const BATCH: u64 = 64;

/// Runs `iters` calls in batches of [`BATCH`], each batch after an untimed `prepare`,
/// and returns the time spent in the calls only.
pub fn batched<S>(
    iters: u64,
    state: &mut S,
    mut prepare: impl FnMut(&mut S),
    mut call: impl FnMut(&mut S),
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(BATCH);
        prepare(state);
        let start = Instant::now();
        for _ in 0..n {
            call(state);
        }
        total += start.elapsed();
        left -= n;
    }
    total
}
