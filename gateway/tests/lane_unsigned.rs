//! An order for the WebSocket API lane is never signed for REST: while the lane
//! is ready, the adapter the gateway lends ([`Gateway::venue_mut`]) prepares
//! orders with their REST signature pending; the lane sends its own frame and
//! the REST signature is never made. One that goes over HTTP after all (the
//! lane gone between its preparation and its submit) is signed at submit, byte
//! for byte the request the adapter signs at once, and the emulator's venue
//! (which verifies every signature) runs it. One the gateway cannot sign is
//! refused, never sent unsigned.

#[path = "common/lane.rs"]
mod lane;

use ergon_core::Class;
use ergon_gateway::{Event, Gateway, Prepared};
use ergon_io::http::with_prepared;
use ergon_venue_sim::sansio::Received;
use ergon_venues::binance_spot::{Auth, BinanceSpot};
use ergon_venues::endpoint::Endpoints;
use ergon_venues::response::Response;
use lane::{http_bytes, order, place, prepare, pump, setup, NoHttp, Venue, IP, MS, SEC};

/// The gateway with its lane up.
fn ready() -> (Gateway<BinanceSpot>, NoHttp, Venue) {
    let (mut gw, mut w, mut v) = setup();
    pump(&mut gw, &mut w, &mut v, MS);
    assert!(gw.ws_api().unwrap().ready(), "the lane is up");
    w.now += SEC;
    (gw, w, v)
}

/// The REST adapter loses its key: signing anything with it would fail.
fn forget_key(gw: &mut Gateway<BinanceSpot>) {
    let keyless = gw.venue().clone().with_auth(Auth::default());
    *gw.venue_mut() = keyless;
}

#[test]
fn a_lane_order_is_prepared_unsigned_and_never_signed() {
    let (mut gw, mut w, mut v) = ready();
    place(&mut gw, &mut w, "lane-0", 0);
    let evs = pump(&mut gw, &mut w, &mut v, MS);
    assert!(
        evs.iter().any(|e| e.starts_with("Applied { tag: 0")),
        "{evs:?}"
    );
    let mut p = prepare(&mut gw, &w, "lane-1");
    assert!(p.signature_pending());
    assert!(!p.target().contains("signature"), "{}", p.target());
    // Signing from here on would fail (and end it Rejected): it goes out anyway,
    // over the lane, with the lane's own frame.
    forget_key(&mut gw);
    gw.submit(&mut w, &mut p, Class::Normal, 1)
        .expect("submitted");
    let evs = pump(&mut gw, &mut w, &mut v, MS);
    assert!(
        evs.iter().any(|e| e.starts_with("Applied { tag: 1")),
        "{evs:?}"
    );
    assert_eq!(w.sent, 0, "nothing over HTTP");
    assert_eq!(gw.stats().rejected, 0);
    assert_eq!(gw.ws_api().unwrap().stats().requests, 2);
}

#[test]
fn a_query_over_the_lane_is_never_signed_either() {
    let (mut gw, mut w, mut v) = ready();
    place(&mut gw, &mut w, "q-0", 0);
    pump(&mut gw, &mut w, &mut v, MS);
    let r = ergon_venues::endpoint::OrderRef {
        symbol: order("q-0").symbol,
        client_order_id: order("q-0").client_order_id,
    };
    let mut q = Prepared::with_capacity(512);
    gw.venue_mut().query_order(&mut q, &r, w.now).unwrap();
    assert!(q.signature_pending());
    forget_key(&mut gw);
    gw.submit(&mut w, &mut q, Class::Normal, 4)
        .expect("submitted");
    let evs = pump(&mut gw, &mut w, &mut v, MS);
    assert!(
        evs.iter().any(|e| e.starts_with("Applied { tag: 4")),
        "{evs:?}"
    );
    assert_eq!(w.sent, 0, "nothing over HTTP");
}

#[test]
fn a_lane_order_that_goes_over_http_after_all_is_signed_as_before_and_settles() {
    let (mut gw, mut w, mut v) = ready();
    let mut p = prepare(&mut gw, &w, "http-1");
    assert!(p.signature_pending());
    // What the adapter writes signing at once, at the same time.
    let mut at_once = gw.venue().clone();
    at_once.defer_signatures(false);
    let mut signed = Prepared::with_capacity(512);
    at_once
        .new_order(&mut signed, &order("http-1"), w.now)
        .unwrap();
    assert!(!signed.signature_pending());
    let old = with_prepared(&signed, (), |r, ()| http_bytes(r)).unwrap();
    // The lane goes away before the submit.
    gw.drop_ws_api();
    gw.submit(&mut w, &mut p, Class::Normal, 2)
        .expect("submitted");
    assert_eq!(w.sent, 1);
    let (id, raw, flight) = w.written.pop().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&raw),
        String::from_utf8_lossy(&old),
        "the old path's bytes"
    );
    assert!(String::from_utf8_lossy(&raw).contains("&signature="));
    // The venue verifies the signature and runs it; the answer settles it.
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
    assert!(matches!(ev, Some(Event::Applied { tag: 2, .. })), "{ev:?}");
    assert_eq!(gw.in_flight(), 0);
}

#[test]
fn a_lane_order_the_gateway_cannot_sign_for_http_is_refused_never_sent_unsigned() {
    let (mut gw, mut w, _v) = ready();
    let mut p = prepare(&mut gw, &w, "nokey-1");
    gw.drop_ws_api();
    forget_key(&mut gw);
    let buckets: Vec<_> = p.parts().iter().map(|x| x.bucket).collect();
    let used = |w: &NoHttp| -> Vec<u64> {
        let s = buckets.iter().map(|b| w.budget.stats(*b).unwrap());
        s.map(|s| s.used).collect()
    };
    let before = used(&w);
    gw.submit(&mut w, &mut p, Class::Normal, 3).expect("taken");
    assert_eq!(w.sent, 0, "nothing unsigned over HTTP");
    let ev = gw.poll_event();
    assert!(matches!(ev, Some(Event::Rejected { tag: 3 })), "{ev:?}");
    assert_eq!(gw.in_flight(), 0);
    assert_eq!(gw.stats().rejected, 1);
    assert_eq!(used(&w), before, "its charge refunded");
}
