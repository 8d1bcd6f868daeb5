//! Re-sends after the venue's "not run" (issue 26, item 3), on jumped time through
//! a scripted transport: capped at MAX_RESENDS with a final Expired naming the
//! reason, each re-send re-signed (a fresh timestamp), and spaced so that one
//! failing request cannot take the bucket.

use ergon_core::{Budget, Class, Flight, Ticket};
use ergon_gateway::{Gateway, Prepared, Wire, MAX_RESENDS};
use ergon_io::client::{Refused, RequestId};
use ergon_io::http::Request;
use ergon_venues::adapt::Clock;
use ergon_venues::binance_spot::{Auth, BinanceSpot};
use ergon_venues::endpoint::{
    CancelReplace, ClientOrderId, Decimal, Endpoints, NewOrder, OrderType, Side, Symbol,
    TimeInForce,
};
use ergon_venues::response::Response;

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;
const T0: i64 = 1_000 * SEC;
const INFO: &[u8] = br#"{"rateLimits":[{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,"limit":6000},{"rateLimitType":"ORDERS","interval":"SECOND","intervalNum":10,"limit":100},{"rateLimitType":"RAW_REQUESTS","interval":"MINUTE","intervalNum":5,"limit":61000}]}"#;
const BOTH_FAILED: &[u8] =
    br#"{"code":-2022,"msg":"Order cancel-replace failed.","data":{"cancelResult":"FAILURE","newOrderResult":"NOT_ATTEMPTED"}}"#;

struct Script {
    budget: Budget,
    now: i64,
    next: u64,
    /// (id, target, flight, written at).
    sent: Vec<(RequestId, String, Option<Flight>, i64)>,
}

impl Wire for Script {
    fn now(&self) -> i64 {
        self.now
    }
    fn budget(&mut self) -> &mut Budget {
        &mut self.budget
    }
    fn send(&mut self, r: &Request<'_>, t: Ticket, _deadline: i64) -> Result<RequestId, Refused> {
        self.next += 1;
        let id = RequestId(self.next);
        self.sent
            .push((id, r.target.into(), Some(t.sent()), self.now));
        Ok(id)
    }
}

fn setup(recv_window_ms: i64) -> (Gateway<BinanceSpot>, Script) {
    let mut b = Budget::builder();
    let clock = Clock::anchor(T0, 1_700_000_000_000);
    let acct = BinanceSpot::from_exchange_info(INFO, &mut b, clock, 30 * MS)
        .unwrap()
        .with_auth(Auth::new("k", b"s", recv_window_ms).unwrap());
    let w = Script {
        budget: b.build(T0).unwrap(),
        now: T0,
        next: 0,
        sent: Vec::new(),
    };
    (Gateway::new(acct, "BTCUSDT", 8, 1024).unwrap(), w)
}

fn answer(status: u16, body: &[u8]) -> Response<'_> {
    Response {
        status,
        headers: &[],
        body,
    }
}

/// A cancel-replace whose cancel keeps failing (-2022, nothing ran): on main it was
/// written again at once, byte-identical, until its deadline (98 times in 98 ms).
#[test]
fn a_request_the_venue_keeps_refusing_is_resent_at_most_max_resends_times_spaced_and_resigned() {
    let (mut gw, mut w) = setup(60_000);
    let mut p = Prepared::with_capacity(1024);
    let cr = CancelReplace {
        cancel: ClientOrderId::new("old1").unwrap(),
        new: NewOrder {
            symbol: Symbol::new("BTCUSDT").unwrap(),
            side: Side::Buy,
            order_type: OrderType::Limit(TimeInForce::Gtc),
            price: Some(Decimal::new("49995.00").unwrap()),
            quantity: Decimal::new("0.010").unwrap(),
            client_order_id: ClientOrderId::new("new1").unwrap(),
            reduce_only: false,
        },
    };
    gw.venue_mut().cancel_replace(&mut p, &cr, w.now).unwrap();
    gw.submit(&mut w, &mut p, Class::Normal, 1).unwrap();
    let mut events = Vec::new();
    for _ in 0..200 {
        let last = w.sent.last_mut().unwrap();
        let (id, f) = (last.0, last.2.take());
        if let Some(f) = f {
            w.now += MS;
            if let Some(ev) = gw.on_response(&mut w, id, answer(400, BOTH_FAILED), f) {
                events.push(format!("{ev:?}"));
                if ev.is_final() {
                    break;
                }
            }
        }
        while let Some(ev) = gw.poll_event() {
            events.push(format!("{ev:?}"));
        }
        match gw.poll_timeout() {
            Some(at) => {
                w.now = w.now.max(at);
                gw.poll(&mut w);
            }
            // Nothing due and nothing left to answer: it is over.
            None if w.sent.last().is_some_and(|s| s.2.is_none()) => break,
            None => {}
        }
    }
    let writes = w.sent.len();
    assert_eq!(
        writes,
        1 + MAX_RESENDS as usize,
        "the first send and MAX_RESENDS re-sends: {events:?}"
    );
    assert_eq!(
        events.last().map(String::as_str),
        Some("Expired { tag: 1, why: Resends }"),
        "{events:?}"
    );
    // Each re-send re-signed: no two writes carry the same bytes.
    for i in 1..writes {
        assert_ne!(w.sent[i].1, w.sent[i - 1].1, "write {i} is the same bytes");
        let ts = |t: &str| t.split("&timestamp=").nth(1).unwrap()[..13].to_owned();
        assert!(ts(&w.sent[i].1) > ts(&w.sent[i - 1].1), "a fresh timestamp");
    }
    // Spaced: each gap at least half the backoff, growing.
    let gaps: Vec<i64> = w.sent.windows(2).map(|s| s[1].3 - s[0].3).collect();
    assert!(gaps.iter().all(|&g| g >= 10 * MS), "{gaps:?}");
    assert_eq!(gw.in_flight(), 0);
}
