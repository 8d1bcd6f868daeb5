//! What each call costs on the pair's trading counter, by the order's age.

use super::{MS, SEC};

/// The decaying part of a cancel's cost by the order's age: +8 under 5 s, +6 under
/// 10 s, +5 under 15 s, +4 under 45 s, +2 under 90 s, +1 under 300 s, 0 after
/// (the fixed part is 0).
pub fn cancel_cost(age_ns: i64) -> u32 {
    by_age(age_ns, [8, 6, 5, 4, 2, 1])
}

/// An amend's cost: +1 fixed, and +3 under 5 s, +2 under 10 s, +1 under 15 s.
pub fn amend_cost(age_ns: i64) -> u32 {
    1 + by_age(age_ns, [3, 2, 1, 0, 0, 0])
}

/// A (legacy, cancel-new) edit's cost: +1 fixed, and +6 under 5 s, +5 under 10 s,
/// +4 under 15 s, +2 under 45 s, +1 under 90 s.
pub fn edit_cost(age_ns: i64) -> u32 {
    1 + by_age(age_ns, [6, 5, 4, 2, 1, 0])
}

/// A batch of `n` new orders: +n/2, rounded up.
pub fn batch_cost(n: u16) -> u32 {
    u32::from(n).div_ceil(2)
}

/// `ns` rounded up to whole milliseconds (a hold never ends early).
pub(super) fn whole_ms(ns: i64) -> i64 {
    ns.saturating_add(MS - 1) / MS * MS
}

fn by_age(age_ns: i64, costs: [u32; 6]) -> u32 {
    const EDGES: [i64; 6] = [5 * SEC, 10 * SEC, 15 * SEC, 45 * SEC, 90 * SEC, 300 * SEC];
    // An age below zero (clocks) is the youngest order: the dearest cost.
    EDGES
        .iter()
        .zip(costs)
        .find(|(edge, _)| age_ns < **edge)
        .map_or(0, |(_, c)| c)
}
