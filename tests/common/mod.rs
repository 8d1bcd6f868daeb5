//! What the end-to-end tests of `mm_loop` share: a run against the in-process
//! emulator, and the checks on the emulator's own counts. A test file includes
//! `examples/mm_loop.rs` as `mod mm_loop` and this as `mod common`.

use std::sync::Arc;

use ergon_venue_sim::{RateLimit, Report};

use super::mm_loop::{run, Control, Options, Summary};

/// Runs `o` to its end: the loop's summary and the emulator's report.
pub fn go(o: &Options) -> (Summary, Report) {
    let s = run(o, Arc::new(Control::default()), None).expect("the loop runs");
    let r = s.venue.clone().expect("the emulator's report");
    (s, r)
}

/// Mean use of `limit` over the emulator's windows, leaving out the first and the
/// last (partial) ones, and how many windows that is.
pub fn venue_utilization(r: &Report, limit: &RateLimit) -> (f64, usize) {
    let w = &r.limit(limit).expect("limit reported").windows;
    if w.len() < 3 {
        return (0.0, 0);
    }
    let inner = &w[1..w.len() - 1];
    let sum: f64 = inner
        .iter()
        .map(|&(_, u)| (u.min(limit.limit)) as f64 / limit.limit as f64)
        .sum();
    (sum / inner.len() as f64, inner.len())
}

/// The venue answered no 429 and no ban, the gateway saw none, and no limit's
/// window went over (nor its peak above the limit).
pub fn no_429_no_ban(s: &Summary, r: &Report) {
    assert_eq!(r.throttled, 0, "venue 429s (-1003): {s:?}");
    assert_eq!(r.order_rate_limited, 0, "venue 429s (-1015): {s:?}");
    assert_eq!(r.bans, 0, "{s:?}");
    assert_eq!((s.gw.throttled, s.gw.banned), (0, 0), "{s:?}");
    for l in &r.limits {
        assert_eq!(l.windows_over, 0, "{:?} went over", l.rate_limit);
        assert!(
            l.peak <= l.rate_limit.limit,
            "{:?} peak {}",
            l.rate_limit,
            l.peak
        );
    }
}
