//! End to end: no user data stream. With REST order entry (`--order-entry rest`)
//! the gateway opens no WebSocket API connection, so it has no stream (Binance
//! Spot's listenKey stream was discontinued on 2026-02-20 and is never asked for):
//! it prints one warning line and learns open orders by polling, with the same
//! guarantees as with a stream (no 429, no ban, no duplicate, every unknown
//! reconciled).

#[allow(dead_code)]
#[path = "../examples/mm_loop.rs"]
mod mm_loop;

use std::sync::Arc;

use ergon_venue_sim::{Config, Fault, Interval, LimitType, RateLimit};
use mm_loop::{run, Control, Options, NO_STREAM_WARNING};

#[test]
fn without_a_stream_it_warns_once_and_polls_with_the_same_guarantees() {
    let mut c = Config::binance_spot();
    c.rate_limits = vec![
        RateLimit::new(LimitType::RequestWeight, Interval::Second, 1, 150),
        RateLimit::new(LimitType::Orders, Interval::Second, 1, 20),
        RateLimit::new(LimitType::RawRequests, Interval::Minute, 5, 1_000_000),
    ];
    c.faults.seed = 11;
    c.faults.chances = vec![
        (Fault::ExecuteThenClose, 0.04),
        (Fault::CloseBeforeExecute, 0.04),
    ];
    let o = Options {
        duration_s: 5.0,
        demand: 3.0,
        quiet: true,
        sim: c,
        stream: true, // asked for: refused with a warning, not an exit
        ws: Some(false),
        ..Options::default()
    };
    let s = run(&o, Arc::new(Control::default()), None).expect("the loop runs");
    let r = s.venue.clone().expect("the emulator's report");
    assert_eq!(
        s.warnings,
        vec![NO_STREAM_WARNING.to_string()],
        "one warning line"
    );
    assert_eq!(
        r.responses.get(&410),
        None,
        "the removed /api/v3/userDataStream never asked for"
    );
    assert_eq!(r.ws.api_connects, 0, "no WebSocket opened");
    // Twice a second when the weight has room; at 3x demand the weight is full, and
    // a refused poll goes again as soon as its window opens: once a window at least.
    assert!(s.gw.polls >= 5, "open orders polled every window: {s:?}");
    assert_eq!((r.throttled, r.order_rate_limited, r.bans), (0, 0, 0));
    assert_eq!((s.gw.throttled, s.gw.banned), (0, 0));
    assert!(s.gw.unknown > 0, "the faults made outcomes unknown: {s:?}");
    assert_eq!(s.gw.reconciled, s.gw.unknown, "every unknown reconciled");
    assert_eq!((r.duplicates, r.duplicate_rejects), (0, 0));

    // --no-stream: the same run, without the warning.
    let quiet = Options {
        stream: false,
        duration_s: 1.0,
        ..o
    };
    let s = run(&quiet, Arc::new(Control::default()), None).unwrap();
    assert!(s.warnings.is_empty());
}
