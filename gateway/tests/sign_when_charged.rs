//! An order is signed only once the budget charged it: the adapter the gateway
//! lends ([`Gateway::venue_mut`]) prepares Binance's orders with their signature
//! pending, lane or no lane, and [`Gateway::submit`] signs one after its charge,
//! byte for byte the request the adapter signs at once (which the emulator,
//! verifying every signature, runs). An order the budget refuses is never
//! signed: under a throttle a refused order costs no signature.

// The lane's harness, its lane dropped: its pump goes unused here.
#[allow(dead_code)]
#[path = "common/lane.rs"]
mod lane;

use ergon_core::{Class, Why};
use ergon_gateway::{Event, Gateway};
use ergon_io::http::with_prepared;
use ergon_venue_sim::sansio::Received;
use ergon_venues::binance_spot::{Auth, BinanceSpot};
use ergon_venues::endpoint::{Endpoints, Prepared};
use ergon_venues::response::Response;
use lane::{http_bytes, order, prepare, setup, NoHttp, Venue, IP, MS, SEC};

/// The gateway over REST alone (its lane never started).
fn rest_only() -> (Gateway<BinanceSpot>, NoHttp, Venue) {
    let (mut gw, w, v) = setup();
    gw.drop_ws_api();
    (gw, w, v)
}

#[test]
fn an_order_is_signed_at_submit_as_the_adapter_signs_at_once_and_runs() {
    let (mut gw, mut w, mut v) = rest_only();
    let mut p = prepare(&mut gw, &w, "rest-1");
    assert!(p.signature_pending(), "no signature before the charge");
    assert!(!p.target().contains("signature"), "{}", p.target());
    let mut at_once = gw.venue().clone();
    at_once.defer_signatures(false);
    let mut signed = Prepared::with_capacity(512);
    at_once
        .new_order(&mut signed, &order("rest-1"), w.now)
        .unwrap();
    assert!(!signed.signature_pending());
    let old = with_prepared(&signed, (), |r, ()| http_bytes(r)).unwrap();
    gw.submit(&mut w, &mut p, Class::Normal, 1)
        .expect("submitted");
    assert_eq!(w.sent, 1);
    let (id, raw, flight) = w.written.pop().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&raw),
        String::from_utf8_lossy(&old),
        "the bytes the adapter signs at once"
    );
    w.now += MS;
    let now_ms = v.ms(w.now);
    let answer = match v.engine.admit(&raw, IP, now_ms) {
        Received::Answer(a) => a,
        Received::Run(a) => v.engine.execute(a, now_ms),
    };
    assert_eq!(answer.status, 200, "{}", answer.body);
    let r = Response {
        status: answer.status,
        headers: &[],
        body: answer.body.as_bytes(),
    };
    let ev = gw.on_response(&mut w, id, r, flight);
    assert!(matches!(ev, Some(Event::Applied { tag: 1, .. })), "{ev:?}");
}

#[test]
fn an_order_the_budget_refuses_is_never_signed() {
    let (mut gw, mut w, _v) = rest_only();
    let mut p = prepare(&mut gw, &w, "over");
    assert!(p.signature_pending());
    // Another user of the budget takes what an order needs, until it is refused
    // (the venue's order count per 10 s).
    let mut held = Vec::new();
    while let Ok(t) = w.budget.try_charge(p.parts(), Class::Normal, w.now) {
        held.push(t);
        assert!(held.len() < 100_000, "the budget never refuses");
    }
    // Signing from here on would fail (a Rejected): the order is refused for
    // its budget, as before, and never signed.
    let keyless = gw.venue().clone().with_auth(Auth::default());
    *gw.venue_mut() = keyless;
    let e = gw.submit(&mut w, &mut p, Class::Normal, 7);
    assert!(
        matches!(e, Err(Event::Limited { tag: 7, why: Why::Full, ready_in_ns }) if ready_in_ns > SEC),
        "{e:?}"
    );
    assert!(p.signature_pending(), "the refused order was never signed");
    assert_eq!(w.sent, 0, "nothing written");
    assert_eq!(gw.stats().rejected, 0);
    assert_eq!(gw.in_flight(), 0);
}
