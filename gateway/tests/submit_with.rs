//! `Gateway::submit_with` (issue 46, the fast path): a request prepared straight
//! into the ledger slot it takes, no buffer swapped. It sends the bytes
//! `Gateway::submit` sends for the same order and answers as it does; every
//! refusal leaves the ledger and the budget as they were, the slot free for the
//! next submit; and a settled order's slot is written over by the next one.

use ergon_core::{Budget, Class, Flight, Ticket, Why};
use ergon_gateway::{Event, Gateway, Prepared, Wire, RETRY_GAP_NS};
use ergon_io::client::{Refused, RequestId};
use ergon_io::http::{with_prepared, Request};
use ergon_venues::adapt::{Clock, Error};
use ergon_venues::binance_spot::template::OrderTemplate;
use ergon_venues::binance_spot::{Auth, BinanceSpot};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Endpoints, Fill, OrderType, Side, Symbol, TimeInForce,
};
use ergon_venues::response::Response;
use proptest::prelude::*;

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;
const T0: i64 = 1_000 * SEC;

/// Binance Spot's limits but for orders: `orders` per 10 s.
fn info(orders: u32) -> Vec<u8> {
    format!(
        r#"{{"rateLimits":[{{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,"limit":6000}},{{"rateLimitType":"ORDERS","interval":"SECOND","intervalNum":10,"limit":{orders}}},{{"rateLimitType":"RAW_REQUESTS","interval":"MINUTE","intervalNum":5,"limit":61000}}]}}"#
    )
    .into_bytes()
}

/// A transport that records each request's bytes as sent and keeps its flight.
struct Script {
    budget: Budget,
    now: i64,
    next: u64,
    /// Each request sent: its id, its bytes, its flight (taken when answered).
    sent: Vec<(RequestId, Vec<u8>, Option<Flight>)>,
}

impl Wire for Script {
    fn now(&self) -> i64 {
        self.now
    }

    fn budget(&mut self) -> &mut Budget {
        &mut self.budget
    }

    fn send(&mut self, req: &Request<'_>, t: Ticket, _: i64) -> Result<RequestId, Refused> {
        self.next += 1;
        let id = RequestId(self.next);
        let mut bytes = format!("{} {}\r\n", req.method, req.target).into_bytes();
        for (k, v) in req.headers {
            bytes.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
        }
        bytes.extend_from_slice(b"\r\n");
        bytes.extend_from_slice(req.body);
        self.sent.push((id, bytes, Some(t.sent())));
        Ok(id)
    }

    /// The request as encoded from its parts, and as written as HTTP/1.1 when the
    /// adapter wrote it so: both recorded.
    fn send_prepared(&mut self, req: &Prepared, t: Ticket, d: i64) -> Result<RequestId, Refused> {
        let http = req.http().map(|h| [h.line(), h.rest()].concat());
        let sent = with_prepared(req, t, |r, t| self.send(r, t, d))
            .unwrap_or_else(|_| panic!("a prepared request"));
        if let (Ok(_), Some(http), Some(last)) = (&sent, http, self.sent.last_mut()) {
            last.1.extend_from_slice(b"\n--\n");
            last.1.extend_from_slice(&http);
        }
        sent
    }
}

/// A gateway of `capacity` slots under a budget of `orders` orders per 10 s,
/// its signatures deferred (as `venue_mut` leaves them) or not.
fn setup(capacity: usize, orders: u32, deferred: bool) -> (Gateway<BinanceSpot>, Script) {
    let mut b = Budget::builder();
    let clock = Clock::anchor(T0, 1_700_000_000_000);
    let acct = BinanceSpot::from_exchange_info(&info(orders), &mut b, clock, 30 * MS)
        .unwrap()
        .with_auth(Auth::new("key", b"secret", 5_000).unwrap());
    let w = Script {
        budget: b.build(T0).unwrap(),
        now: T0,
        next: 0,
        sent: Vec::new(),
    };
    let mut gw = Gateway::new(acct, "BTCUSDT", capacity, 1024).unwrap();
    gw.venue_mut().defer_signatures(deferred);
    (gw, w)
}

fn template(gw: &Gateway<BinanceSpot>) -> OrderTemplate {
    let symbol = Symbol::new("BTCUSDT").unwrap();
    let limit = OrderType::Limit(TimeInForce::Gtc);
    gw.venue().order_template(symbol, Side::Buy, limit).unwrap()
}

fn fill<'a>(id: &str, price: &'a str, quantity: &'a str) -> Fill<'a> {
    Fill {
        price: Some(Decimal::new(price).unwrap()),
        quantity: Decimal::new(quantity).unwrap(),
        client_order_id: ClientOrderId::new(id).unwrap(),
    }
}

/// Answers the oldest unanswered request: the venue took the order.
fn answer(gw: &mut Gateway<BinanceSpot>, w: &mut Script) -> Option<String> {
    let k = w.sent.iter().position(|s| s.2.is_some())?;
    let (id, flight) = (w.sent[k].0, w.sent[k].2.take()?);
    let body = br#"{"symbol":"BTCUSDT","orderId":1,"status":"NEW"}"#;
    let r = Response {
        status: 200,
        headers: &[],
        body,
    };
    let ev = gw.on_response(w, id, r, flight);
    Some(format!("{ev:?}"))
}

/// What the budget has used, over every bucket.
fn used(w: &Script) -> u64 {
    w.budget
        .ids()
        .map(|b| w.budget.stats(b).unwrap().used)
        .sum()
}

#[derive(Clone, Debug)]
enum Step {
    /// An order: its id (of a small pool, so some are live), price, quantity.
    Order(usize, usize, usize),
    /// The oldest unanswered request answered.
    Answer,
    /// The clock moves on this many ms.
    Wait(i64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0usize..6, 0usize..3, 0usize..3).prop_map(|(i, p, q)| Step::Order(i, p, q)),
        3 => Just(Step::Answer),
        1 => (1i64..4_000).prop_map(Step::Wait),
    ]
}

const IDS: [&str; 6] = [
    "a",
    "mm-000001",
    "mm-000002",
    "mm-0003",
    "x-99",
    "mm-000001-long-id",
];
const PRICES: [&str; 3] = ["50000", "50000.5", "9"];
const QUANTITIES: [&str; 3] = ["0.001", "1", "12.25"];

proptest! {
    /// The same steps on two gateways, one submitting with `submit` from a
    /// buffer of its own, the other with `submit_with` into the slot: the same
    /// events, the same bytes on the wire (each order prepared at once or with
    /// its signature deferred), the same budget and counts after every step.
    /// Slots are few, ids repeat and the budget is small: the ledger fills,
    /// duplicate ids and the budget refuse, settled slots are written over.
    #[test]
    fn the_fast_path_sends_and_answers_what_submit_does(
        steps in proptest::collection::vec(step(), 1..60),
        capacity in 1usize..4,
        deferred in any::<bool>(),
    ) {
        let (mut slow, mut ws) = setup(capacity, 5, deferred);
        let (mut fast, mut wf) = setup(capacity, 5, deferred);
        let t = template(&slow);
        let mut p = Prepared::with_capacity(1024);
        for (tag, s) in steps.iter().enumerate() {
            let tag = tag as u64;
            match *s {
                // A full ledger is refused before the preparation on the fast
                // path, after the charge on the other (and refunded): answered
                // the same but for the budget's own refusal, which the charge
                // finds first. Tested on its own below.
                Step::Order(..) if slow.in_flight() == capacity => {}
                Step::Order(i, pr, q) => {
                    let f = fill(IDS[i], PRICES[pr], QUANTITIES[q]);
                    let now = ws.now;
                    slow.venue().new_order_from(&t, &mut p, &f, now).unwrap();
                    let a = slow.submit(&mut ws, &mut p, Class::Normal, tag);
                    let b = fast.submit_with(&mut wf, Class::Normal, tag, |venue, req| {
                        venue.new_order_from(&t, req, &f, now)
                    });
                    prop_assert_eq!(a, b);
                }
                Step::Answer => {
                    prop_assert_eq!(answer(&mut slow, &mut ws), answer(&mut fast, &mut wf));
                }
                Step::Wait(ms) => {
                    ws.now += ms * MS;
                    wf.now += ms * MS;
                }
            }
            while let Some(e) = slow.poll_event() {
                prop_assert_eq!(Some(e), fast.poll_event());
            }
            prop_assert_eq!(fast.poll_event(), None);
            prop_assert_eq!(ws.sent.len(), wf.sent.len());
            if let (Some(a), Some(b)) = (ws.sent.last(), wf.sent.last()) {
                prop_assert_eq!(
                    String::from_utf8_lossy(&a.1),
                    String::from_utf8_lossy(&b.1),
                    "the bytes on the wire"
                );
            }
            prop_assert_eq!(used(&ws), used(&wf));
            prop_assert_eq!(slow.stats(), fast.stats());
            prop_assert_eq!(slow.in_flight(), fast.in_flight());
        }
    }
}

/// Each way a submit is refused leaves the ledger and the budget as they were:
/// nothing in flight added, nothing charged, the refused order's id not live;
/// the next submit takes the slot and goes.
#[test]
fn every_refusal_leaves_the_ledger_as_it_was() {
    let (mut gw, mut w) = setup(2, 3, false);
    let t = template(&gw);
    let now = w.now;
    let ok = |gw: &mut Gateway<BinanceSpot>, w: &mut Script, id: &str, tag: u64| {
        let f = fill(id, "50000", "0.001");
        let now = w.now;
        gw.submit_with(w, Class::Normal, tag, |venue, req| {
            venue.new_order_from(&t, req, &f, now)
        })
    };
    assert_eq!(ok(&mut gw, &mut w, "first", 1), Ok(()));
    let (flight, spent) = (gw.in_flight(), used(&w));

    // The preparation fails (a limit order without a price): Rejected.
    let priceless = Fill {
        price: None,
        ..fill("no-price", "1", "1")
    };
    let r = gw.submit_with(&mut w, Class::Normal, 2, |venue, req| {
        venue.new_order_from(&t, req, &priceless, now)
    });
    assert_eq!(r, Err(Event::Rejected { tag: 2 }));
    // The closure's own error: Rejected, whatever it wrote.
    let f = fill("written-then-failed", "1", "1");
    let r = gw.submit_with(&mut w, Class::Normal, 3, |venue, req| {
        venue.new_order_from(&t, req, &f, now)?;
        Err(Error::BadArgument("the strategy's own"))
    });
    assert_eq!(r, Err(Event::Rejected { tag: 3 }));
    // A closure that says Ok and writes nothing: the slot's last request (it
    // holds "written-then-failed", and before it "first") is not sent again.
    let r = gw.submit_with(&mut w, Class::Normal, 31, |_, req| Ok(req));
    assert_eq!(r, Err(Event::Rejected { tag: 31 }));
    assert_eq!(gw.stats().rejected, 3);
    // Prepared before the deadline, submitted after it: Expired.
    let late = fill("late", "1", "1");
    w.now += 6 * SEC;
    let r = gw.submit_with(&mut w, Class::Normal, 4, |venue, req| {
        venue.new_order_from(&t, req, &late, now)
    });
    assert!(matches!(r, Err(Event::Expired { tag: 4, .. })), "{r:?}");
    // An id live in the ledger: DuplicateId.
    assert_eq!(
        ok(&mut gw, &mut w, "first", 5),
        Err(Event::DuplicateId { tag: 5 })
    );
    assert_eq!((gw.in_flight(), used(&w)), (flight, spent), "nothing taken");
    assert!(w.sent.len() == 1, "nothing sent");

    // Those ids are not live: each goes now, into the slot they were refused in.
    assert_eq!(ok(&mut gw, &mut w, "written-then-failed", 6), Ok(()));
    assert_eq!(gw.in_flight(), 2);
    // Every slot taken: Limited, Full, and `prepare` never called.
    let r = gw.submit_with(&mut w, Class::Normal, 7, |_, _| {
        panic!("no slot to prepare in")
    });
    assert_eq!(
        r,
        Err(Event::Limited {
            tag: 7,
            why: Why::Full,
            ready_in_ns: RETRY_GAP_NS
        })
    );
    assert_eq!(gw.stats().ledger_full, 1);

    // The budget refuses (3 orders per 10 s): Limited, the slot free again.
    assert!(answer(&mut gw, &mut w).is_some());
    assert_eq!(gw.in_flight(), 1);
    assert_eq!(ok(&mut gw, &mut w, "third", 8), Ok(()));
    assert!(answer(&mut gw, &mut w).is_some());
    let (flight, spent) = (gw.in_flight(), used(&w));
    let r = ok(&mut gw, &mut w, "fourth", 9);
    assert!(
        matches!(
            r,
            Err(Event::Limited {
                tag: 9,
                why: Why::Full,
                ..
            })
        ),
        "{r:?}"
    );
    assert_eq!((gw.in_flight(), used(&w)), (flight, spent));
    w.now += 11 * SEC;
    assert_eq!(ok(&mut gw, &mut w, "fourth", 10), Ok(()));
    assert_eq!(gw.in_flight(), 2);
    assert_eq!(w.sent.len(), 4);
}

/// One order at a time: each is written over the last, settled, one in its
/// slot's buffer, and goes as a fresh preparation of it would; the settled id
/// is free again, the live one is not (refused in the other slot).
#[test]
fn a_settled_orders_slot_is_written_over_by_the_next() {
    let (mut gw, mut w) = setup(2, 100, false);
    let t = template(&gw);
    for (tag, (id, price)) in [
        ("one", "1"),
        ("two", "22.5"),
        ("one", "3"),
        ("three-x", "4"),
    ]
    .into_iter()
    .enumerate()
    {
        let f = fill(id, price, "0.5");
        let now = w.now;
        let r = gw.submit_with(&mut w, Class::Normal, tag as u64, |venue, req| {
            venue.new_order_from(&t, req, &f, now)
        });
        assert_eq!(r, Ok(()));
        let mut fresh = Prepared::with_capacity(1024);
        gw.venue().new_order_from(&t, &mut fresh, &f, now).unwrap();
        let mut twin = Script {
            budget: w.budget.clone(),
            now,
            next: 0,
            sent: Vec::new(),
        };
        let ticket = twin
            .budget
            .try_charge(fresh.parts(), Class::Normal, now)
            .unwrap();
        twin.send_prepared(&fresh, ticket, 0).unwrap();
        assert_eq!(w.sent.last().unwrap().1, twin.sent[0].1, "order {tag}");
        // Live: the same id again is refused.
        let r = gw.submit_with(&mut w, Class::Normal, 99, |venue, req| {
            venue.new_order_from(&t, req, &f, now)
        });
        assert_eq!(r, Err(Event::DuplicateId { tag: 99 }));
        let ev = answer(&mut gw, &mut w).unwrap();
        assert!(ev.contains("Applied"), "{ev}");
        assert_eq!(gw.in_flight(), 0);
        w.now += MS;
    }
}
