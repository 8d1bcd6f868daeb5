//! A client's use of one bucket, for its share ceiling (the hub's `--share` and
//! fair share), counted as the budget counts: a fixed window's charge within
//! the guard of a boundary counts in both windows
//! ([`ergon_core::Budget::counts_in`]); other buckets keep a sliding window of
//! the client's own charges.

use std::collections::VecDeque;

use ergon_core::CountsIn;

/// One client's units in one bucket, counted as the budget counts them.
#[derive(Clone, Default)]
pub(super) struct Use {
    /// Sliding windows and token buckets: the charges (time, units) over the
    /// bucket's last window, oldest first, and their sum.
    pub(super) charges: VecDeque<(i64, u32)>,
    pub(super) sum: u64,
    /// Fixed windows: units per window index, lowest first, from the window
    /// before the current one (a charge within the guard of a boundary counts in
    /// both windows, as the budget counts it: a share kept over a sliding window
    /// let a client's charges near a boundary take twice their units of the
    /// bucket, and the others' share with them).
    windows: VecDeque<(i64, u64)>,
}

impl Use {
    /// Drops the charges that left the window ending at `now`.
    pub(super) fn evict(&mut self, now: i64, w: i64) {
        while let Some(&(t, c)) = self.charges.front() {
            if t > now - w {
                break;
            }
            self.charges.pop_front();
            self.sum -= u64::from(c);
        }
    }

    /// Drops the fixed windows before the one before `current`: no charge from
    /// now on counts in them.
    pub(super) fn forget_before(&mut self, current: i64) {
        while self.windows.front().is_some_and(|&(i, _)| i < current - 1) {
            self.windows.pop_front();
        }
    }

    /// Units in fixed window `index`.
    pub(super) fn in_window(&self, index: i64) -> u64 {
        self.windows
            .iter()
            .find(|&&(i, _)| i == index)
            .map_or(0, |&(_, u)| u)
    }

    /// Adds `cost` to every fixed window `at` counts in.
    pub(super) fn add_in(&mut self, at: CountsIn, cost: u64) {
        for k in at.indices() {
            match self.windows.iter_mut().find(|(i, _)| *i == k) {
                Some((_, u)) => *u += cost,
                None => {
                    let pos = self.windows.partition_point(|&(i, _)| i < k);
                    self.windows.insert(pos, (k, cost));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: i64 = 1_000;

    fn at(index: i64, previous: bool, next: bool) -> CountsIn {
        CountsIn {
            index,
            previous,
            next,
            clear_ns: (index + 1) * W + 30,
            window_ns: W,
        }
    }

    #[test]
    fn a_charge_within_a_guard_counts_in_both_windows() {
        let mut u = Use::default();
        u.add_in(at(0, false, false), 2);
        u.add_in(at(0, false, true), 3); // the last 30 ms of window 0
        assert_eq!((u.in_window(0), u.in_window(1)), (5, 3));
        u.add_in(at(1, true, false), 1); // the first 30 ms of window 1
        assert_eq!((u.in_window(0), u.in_window(1)), (6, 4));
        u.add_in(at(1, false, false), 1);
        assert_eq!((u.in_window(0), u.in_window(1), u.in_window(2)), (6, 5, 0));
    }

    #[test]
    fn windows_before_the_previous_one_are_forgotten() {
        let mut u = Use::default();
        for i in 0..4 {
            u.add_in(at(i, false, false), 1 + i as u64);
        }
        u.forget_before(3);
        assert_eq!(
            (0..4).map(|i| u.in_window(i)).collect::<Vec<_>>(),
            [0, 0, 3, 4]
        );
    }

    #[test]
    fn a_sliding_use_evicts_what_left_the_window() {
        let mut u = Use::default();
        for (t, c) in [(0, 1), (400, 2), (900, 3)] {
            u.charges.push_back((t, c));
            u.sum += u64::from(c);
        }
        u.evict(1_400, W);
        assert_eq!(u.sum, 3);
        assert_eq!(u.charges.len(), 1);
    }
}
