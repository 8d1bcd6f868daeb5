//! End to end: `mm_loop --venue hyperliquid` against the emulator's
//! `hyperliquid` profile, every action signed by the built-in wallet and its
//! signer recovered by the emulator, under injected faults (a connection closed
//! before or after the venue ran the action, a 502 after it ran): no IP 429, no
//! refused signature or nonce, no address budget refusal, every unknown outcome
//! reconciled by `cloid` (never re-sent), no duplicate.

#[allow(dead_code)]
#[path = "../examples/mm_loop.rs"]
mod mm_loop;

use std::sync::Arc;

use ergon_venue_sim::{Config, Fault};
use mm_loop::{run, Control, Options};

#[test]
fn hyperliquid_quotes_signed_inside_both_limit_families_with_faults() {
    let mut c = Config::hyperliquid();
    c.faults.seed = 44;
    c.faults.chances = vec![
        (Fault::ExecuteThenClose, 0.03),
        (Fault::CloseBeforeExecute, 0.03),
        (Fault::ServerErrorAfterExecute, 0.03),
    ];
    let o = Options {
        venue: "hyperliquid".into(),
        duration_s: 5.0,
        demand: 3.0,
        quiet: true,
        sim: c,
        ws: Some(false),
        ..Options::default()
    };
    let s = run(&o, Arc::new(Control::default()), None).expect("the loop runs");
    let r = s.venue.clone().expect("the emulator's report");
    assert!(r.executions > 5, "it traded: {r:?}");
    assert_eq!((r.throttled, r.bans), (0, 0), "{r:?}");
    assert_eq!((r.signature_rejects, r.timestamp_rejects), (0, 0), "{r:?}");
    assert_eq!((s.gw.throttled, s.gw.banned), (0, 0), "{s:?}");
    assert!(s.gw.unknown > 0, "the faults made outcomes unknown: {s:?}");
    assert_eq!(s.gw.reconciled, s.gw.unknown, "every unknown reconciled");
    assert_eq!(r.duplicates, 0, "{r:?}");
}
