//! Windows counted at receipt, per IP or per account: fixed windows aligned on the
//! venue clock as Binance counts them, or rolling windows as Bybit counts them.
//!
//! Fixed: a window of length W starts at every multiple of W on the venue's clock (a
//! 1-minute window starts at each :00); a count belongs to the window its request
//! was received in and resets to zero when the next window starts. Rolling: a count
//! stays for exactly W after its receipt. Nothing here reads a clock: `now_ms` is
//! the venue time of receipt.

use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;

use crate::config::RateLimit;
use crate::hashing::{Hashing, Map};
use crate::report::LimitUsage;

/// Who a count belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    Ip(IpAddr),
    Account(usize),
}

/// The start of the window that contains `now_ms`.
pub(crate) fn window_start(now_ms: i64, window_ms: i64) -> i64 {
    now_ms.div_euclid(window_ms) * window_ms
}

#[derive(Default)]
struct Counter {
    /// Fixed: the window's start and count.
    start: i64,
    used: u64,
    /// Rolling: what was counted when, oldest first (its sum is `used`).
    log: VecDeque<(i64, u64)>,
}

pub(crate) struct LimitState {
    pub(crate) spec: RateLimit,
    counters: Map<Key, Counter>,
    peak: u64,
    windows_over: u64,
    history: BTreeMap<i64, u64>,
    history_cap: usize,
}

impl LimitState {
    /// No counts yet; the counters hash with `hashing`.
    pub(crate) fn new(spec: RateLimit, history_cap: usize, hashing: &Hashing) -> Self {
        LimitState {
            spec,
            counters: hashing.map(),
            peak: 0,
            windows_over: 0,
            history: BTreeMap::new(),
            history_cap,
        }
    }

    /// Adds `amount` to `key`'s count in the window of `now_ms`; returns the new count.
    pub(crate) fn charge(&mut self, key: Key, amount: u64, now_ms: i64) -> u64 {
        let w = self.spec.window_ms();
        let start = window_start(now_ms, w);
        let c = self.counters.entry(key).or_default();
        if self.spec.rolling {
            while c.log.front().is_some_and(|&(t, _)| t <= now_ms - w) {
                if let Some((_, a)) = c.log.pop_front() {
                    c.used = c.used.saturating_sub(a);
                }
            }
            c.log.push_back((now_ms, amount));
        } else if c.start != start {
            c.start = start;
            c.used = 0;
        }
        let before = c.used;
        c.used = c.used.saturating_add(amount);
        let used = c.used;
        if before <= self.spec.limit && used > self.spec.limit {
            self.windows_over += 1;
        }
        self.peak = self.peak.max(used);
        let h = self.history.entry(start).or_insert(0);
        *h = (*h).max(used);
        while self.history.len() > self.history_cap.max(1) {
            self.history.pop_first();
        }
        used
    }

    /// Takes `amount` back from `key`'s count if the window of `at_ms` is still the
    /// current one for that key (a later window is never touched). The peak stays.
    pub(crate) fn uncharge(&mut self, key: Key, amount: u64, at_ms: i64) {
        let start = window_start(at_ms, self.spec.window_ms());
        if let Some(c) = self.counters.get_mut(&key) {
            if !self.spec.rolling && c.start == start {
                c.used = c.used.saturating_sub(amount);
            }
        }
    }

    /// `key`'s count in the window of `now_ms`.
    pub(crate) fn used(&self, key: Key, now_ms: i64) -> u64 {
        let w = self.spec.window_ms();
        let Some(c) = self.counters.get(&key) else {
            return 0;
        };
        if self.spec.rolling {
            c.log
                .iter()
                .filter(|&&(t, _)| t > now_ms - w)
                .map(|&(_, a)| a)
                .sum()
        } else if c.start == window_start(now_ms, w) {
            c.used
        } else {
            0
        }
    }

    /// When `key`'s count next drops: the end of the fixed window of `now_ms`, or
    /// for a rolling window when its oldest count expires.
    pub(crate) fn window_end_for(&self, key: Key, now_ms: i64) -> i64 {
        let w = self.spec.window_ms();
        if self.spec.rolling {
            return self
                .counters
                .get(&key)
                .and_then(|c| c.log.iter().find(|&&(t, _)| t > now_ms - w))
                .map_or(now_ms, |&(t, _)| t + w);
        }
        self.window_end(now_ms)
    }

    /// When the fixed window of `now_ms` ends.
    pub(crate) fn window_end(&self, now_ms: i64) -> i64 {
        window_start(now_ms, self.spec.window_ms()) + self.spec.window_ms()
    }

    pub(crate) fn usage(&self) -> LimitUsage {
        LimitUsage {
            rate_limit: self.spec,
            peak: self.peak,
            windows_over: self.windows_over,
            windows: self.history.iter().map(|(&s, &u)| (s, u)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Interval, LimitType};

    #[test]
    fn windows_align_on_the_clock_and_reset() {
        let spec = RateLimit::new(LimitType::RequestWeight, Interval::Second, 1, 10);
        let mut l = LimitState::new(spec, 100, &Hashing::keyed());
        let k = Key::Account(0);
        assert_eq!(l.charge(k, 6, 1_999), 6);
        assert_eq!(l.charge(k, 6, 1_999), 12);
        assert_eq!(l.used(k, 1_999), 12);
        assert_eq!(l.used(k, 2_000), 0, "a new window starts at the second");
        assert_eq!(l.charge(k, 1, 2_000), 1);
        assert_eq!(l.window_end(2_500), 3_000);
        let u = l.usage();
        assert_eq!(u.peak, 12);
        assert_eq!(u.windows_over, 1);
        assert_eq!(u.windows, vec![(1_000, 12), (2_000, 1)]);
        assert_eq!(window_start(-1, 1_000), -1_000);
    }

    #[test]
    fn rolling_windows_keep_each_count_for_exactly_one_window() {
        let spec = RateLimit::new(LimitType::BybitCreate, Interval::Second, 1, 3).rolling();
        let mut l = LimitState::new(spec, 100, &Hashing::keyed());
        let k = Key::Account(0);
        assert_eq!(l.charge(k, 1, 1_900), 1);
        assert_eq!(l.charge(k, 1, 2_100), 2, "no reset at the second");
        assert_eq!(l.used(k, 2_899), 2);
        assert_eq!(l.used(k, 2_900), 1, "the first expired 1 s after it came");
        assert_eq!(l.window_end_for(k, 2_000), 2_900);
        assert_eq!(l.charge(k, 1, 2_950), 2);
        assert_eq!(l.charge(k, 2, 2_960), 4);
        assert_eq!(l.usage().windows_over, 1);
    }
}
