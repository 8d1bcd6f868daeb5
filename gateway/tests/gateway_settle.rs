//! The gateway's settle rule on jumped time, through a scripted transport: what
//! each report of the transport and each answer of the venue becomes (events,
//! refunds, re-sends, queries), and that an unknown write is never sent twice.

use ergon_core::{BucketId, Budget, Class, Flight, Ticket, Why};
use ergon_gateway::{Account, Event, Gateway, OrderState, Prepared, Wire, RETRY_GAP_NS};
use ergon_io::client::{Refused, RequestId, Sent};
use ergon_io::http::Request;
use ergon_venues::adapt::Clock;
use ergon_venues::binance_spot::{Auth, BinanceSpot};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Endpoints, NewOrder, OrderType, Side, Symbol, TimeInForce,
};
use ergon_venues::response::{Header, Response};

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;
const T0: i64 = 1_000 * SEC;
const INFO: &[u8] = br#"{"rateLimits":[{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,"limit":6000},{"rateLimitType":"ORDERS","interval":"SECOND","intervalNum":10,"limit":100},{"rateLimitType":"RAW_REQUESTS","interval":"MINUTE","intervalNum":5,"limit":61000}]}"#;

/// A transport that records what was written and can refuse (no idle connection).
struct Script {
    budget: Budget,
    now: i64,
    next: u64,
    busy: bool,
    /// (id, method, target, flight) of every request written, in order.
    sent: Vec<(RequestId, String, String, Option<Flight>)>,
}

impl Wire for Script {
    fn now(&self) -> i64 {
        self.now
    }
    fn budget(&mut self) -> &mut Budget {
        &mut self.budget
    }
    fn send(&mut self, r: &Request<'_>, t: Ticket, _deadline: i64) -> Result<RequestId, Refused> {
        if self.busy {
            return Err(Refused::Busy(t));
        }
        self.next += 1;
        let id = RequestId(self.next);
        self.sent
            .push((id, r.method.into(), r.target.into(), Some(t.sent())));
        Ok(id)
    }
}

impl Script {
    /// The last request written, its flight taken (to answer it).
    fn last(&mut self) -> (RequestId, String, Flight) {
        let l = self.sent.last_mut().expect("a request was written");
        (l.0, l.2.clone(), l.3.take().expect("not answered yet"))
    }
    fn writes_of(&self, cid: &str) -> usize {
        self.sent
            .iter()
            .filter(|s| s.1 == "POST" && s.2.contains(&format!("newClientOrderId={cid}&")))
            .count()
    }
}

type Gw = Gateway<BinanceSpot>;

fn setup() -> (Gw, Script) {
    let mut b = Budget::builder();
    let clock = Clock::anchor(T0, 1_700_000_000_000);
    let acct = BinanceSpot::from_exchange_info(INFO, &mut b, clock, 30 * MS)
        .unwrap()
        .with_auth(Auth::new("k", b"s", 2_000).unwrap());
    let budget = b.build(T0).unwrap();
    let w = Script {
        budget,
        now: T0,
        next: 0,
        busy: false,
        sent: Vec::new(),
    };
    (Gateway::new(acct, "BTCUSDT", 8, 512).unwrap(), w)
}

fn order(gw: &mut Gw, p: &mut Prepared, cid: &str, now: i64) {
    let o = NewOrder {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(Decimal::new("49995.00").unwrap()),
        quantity: Decimal::new("0.010").unwrap(),
        client_order_id: ClientOrderId::new(cid).unwrap(),
        reduce_only: false,
    };
    gw.venue_mut().new_order(p, &o, now).unwrap();
}

fn place(gw: &mut Gw, w: &mut Script, cid: &str, tag: u64) {
    let mut p = Prepared::with_capacity(512);
    order(gw, &mut p, cid, w.now);
    gw.submit(w, &mut p, Class::Normal, tag).expect("submitted");
}

fn answer<'a>(status: u16, headers: &'a [Header<'a>], body: &'a [u8]) -> Response<'a> {
    Response {
        status,
        headers,
        body,
    }
}

fn owned(e: Option<Event<'_>>) -> Option<String> {
    e.map(|e| format!("{e:?}"))
}

fn weight_used(gw: &Gw, w: &Script) -> u64 {
    let l = gw.venue().limits.limits()[0].bucket;
    w.budget.stats(l).unwrap().used
}

#[test]
fn done_is_applied_and_the_slot_is_freed() {
    let (mut gw, mut w) = setup();
    place(&mut gw, &mut w, "a1", 7);
    assert_eq!(gw.in_flight(), 1);
    let (id, target, f) = w.last();
    assert!(
        target.starts_with("/api/v3/order?symbol=BTCUSDT&side=BUY"),
        "{target}"
    );
    assert!(target.contains("&signature="));
    w.now += 3 * MS;
    let ev = gw.on_response(&mut w, id, answer(200, &[], b"{\"orderId\":1}"), f);
    assert_eq!(
        ev,
        Some(Event::Applied {
            tag: 7,
            body: b"{\"orderId\":1}"
        })
    );
    assert_eq!(gw.in_flight(), 0);
    assert_eq!(gw.poll_event(), None);
}

#[test]
fn an_unknown_write_is_queried_by_client_order_id_never_resent() {
    let (mut gw, mut w) = setup();
    place(&mut gw, &mut w, "u1", 1);
    let (id, _, f) = w.last();
    w.now += 5 * MS;
    // The connection died after the request was written.
    let ev = gw.on_error(&mut w, id, Sent::Maybe(f));
    assert_eq!(ev, Some(Event::Reconciling { tag: 1 }));
    let (qid, q, qf) = w.last();
    assert!(
        q.starts_with("/api/v3/order?symbol=BTCUSDT&origClientOrderId=u1&"),
        "{q}"
    );
    // The query itself is throttled: it settles nothing and goes again once the
    // hold has ended.
    w.now += MS;
    let retry = [Header {
        name: b"Retry-After",
        value: b"1",
    }];
    let ev = gw.on_response(
        &mut w,
        qid,
        answer(429, &retry, br#"{"code":-1003,"msg":"Too many requests."}"#),
        qf,
    );
    assert_eq!(ev, None);
    let held_from = w.now;
    for _ in 0..100 {
        let at = gw.poll_timeout().expect("the query is due again");
        w.now = at;
        gw.poll(&mut w);
        if w.sent.len() == 3 {
            break;
        }
    }
    assert!(w.now >= held_from + SEC, "not before the hold ended");
    let (qid, q, qf) = w.last();
    assert!(q.contains("origClientOrderId=u1"));
    let ev = gw.on_response(
        &mut w,
        qid,
        answer(200, &[], br#"{"symbol":"BTCUSDT","orderId":12,"clientOrderId":"u1","status":"NEW","executedQty":"0.00000000"}"#),
        qf,
    );
    assert_eq!(
        ev,
        Some(Event::Reconciled {
            tag: 1,
            found: Some(OrderState::New)
        })
    );
    assert_eq!(w.writes_of("u1"), 1, "the order was written once");
    assert_eq!(gw.in_flight(), 0);
    assert_eq!((gw.stats().unknown, gw.stats().reconciled), (1, 1));

    // Not found: it never ran, once a query sent after its recvWindow (and the
    // margin) still finds nothing. The first NotFound, inside the window, settles
    // nothing (gateway_not_found.rs has the delayed-order case).
    // Its deadline: timestamp (now, to the ms) + recvWindow 2 s.
    let deadline = w.now - MS + 2 * SEC;
    place(&mut gw, &mut w, "u2", 2);
    let (id, _, f) = w.last();
    assert_eq!(
        gw.on_response(&mut w, id, answer(200, &[], b"not json"), f),
        Some(Event::Reconciling { tag: 2 })
    );
    let (qid, _, qf) = w.last();
    let not_found = br#"{"code":-2013,"msg":"Order does not exist."}"#;
    let ev = gw.on_response(&mut w, qid, answer(400, &[], not_found), qf);
    assert_eq!(ev, None, "inside the window a NotFound proves nothing");
    let mut ev = None;
    for _ in 0..40 {
        let n = w.sent.len();
        while w.sent.len() == n {
            w.now = gw.poll_timeout().expect("a query is due");
            gw.poll(&mut w);
        }
        let (qid, _, qf) = w.last();
        ev = gw.on_response(&mut w, qid, answer(400, &[], not_found), qf);
        if ev.is_some() {
            break;
        }
    }
    assert!(w.now >= deadline + ergon_gateway::NOT_FOUND_MARGIN_NS);
    assert_eq!(
        ev,
        Some(Event::Reconciled {
            tag: 2,
            found: None
        })
    );
    assert_eq!(w.writes_of("u2"), 1);
}

#[test]
fn never_written_is_refunded_and_resent_inside_its_deadline() {
    let (mut gw, mut w) = setup();
    let before = weight_used(&gw, &w);
    place(&mut gw, &mut w, "n1", 3);
    let (id, _, f) = w.last();
    drop(f);
    // Sent::No: the ticket of a request that never left.
    let t = {
        let l = gw.venue().limits.limits()[0].bucket;
        w.budget
            .try_charge(&[ergon_core::Part::new(l, 0)], Class::Normal, w.now)
            .unwrap()
    };
    let ev = gw.on_error(&mut w, id, Sent::No(t));
    assert_eq!(ev, Some(Event::Retrying { tag: 3, in_ns: 0 }));
    assert_eq!(
        w.writes_of("n1"),
        2,
        "re-sent at once: it surely did not run"
    );

    // No idle connection: refunded, retried after the gap, not sent meanwhile.
    w.busy = true;
    place(&mut gw, &mut w, "n2", 4);
    assert_eq!(
        gw.poll_event(),
        Some(Event::Retrying {
            tag: 4,
            in_ns: RETRY_GAP_NS
        })
    );
    assert_eq!(w.writes_of("n2"), 0);
    w.busy = false;
    w.now += RETRY_GAP_NS - 1;
    gw.poll(&mut w);
    assert_eq!(w.writes_of("n2"), 0, "not before its time");
    w.now += 1;
    gw.poll(&mut w);
    assert_eq!(w.writes_of("n2"), 1);
    assert_eq!(gw.poll_event(), None, "announced once");
    // Weight charged: n1 once (the first send's flight completed; the second
    // charge in flight) and n2 once; the refunded charges left nothing.
    assert_eq!(weight_used(&gw, &w) - before, 3);
}

#[test]
fn a_throttle_waits_for_the_hold_and_expires_past_the_deadline() {
    let (mut gw, mut w) = setup();
    place(&mut gw, &mut w, "t1", 5);
    let (id, _, f) = w.last();
    let retry = [Header {
        name: b"Retry-After",
        value: b"1",
    }];
    let ev = gw.on_response(
        &mut w,
        id,
        answer(
            429,
            &retry,
            br#"{"code":-1015,"msg":"Too many new orders; current limit is 100 orders per 10 SECOND."}"#,
        ),
        f,
    );
    let Some(Event::Retrying { tag: 5, in_ns }) = ev else {
        panic!("{ev:?}")
    };
    let at_ns = w.now + in_ns;
    assert!(at_ns >= w.now + SEC, "held for the venue's wait");
    w.now = at_ns - 1;
    gw.poll(&mut w);
    assert_eq!(w.writes_of("t1"), 1);
    w.now = at_ns;
    gw.poll(&mut w);
    assert_eq!(w.writes_of("t1"), 2, "re-sent when the hold ended");

    // The same, but the hold outlasts the request's deadline (recvWindow 2 s).
    place(&mut gw, &mut w, "t2", 6);
    let (id, _, f) = w.last();
    let retry = [Header {
        name: b"Retry-After",
        value: b"5",
    }];
    let ev = gw.on_response(
        &mut w,
        id,
        answer(
            429,
            &retry,
            br#"{"code":-1015,"msg":"Too many new orders; current limit is 100 orders per 10 SECOND."}"#,
        ),
        f,
    );
    assert_eq!(
        owned(ev),
        owned(Some(Event::Expired {
            tag: 6,
            why: ergon_gateway::Expiry::Deadline
        }))
    );
    assert_eq!(w.writes_of("t2"), 1);
    assert_eq!(gw.in_flight(), 1, "t1 is still on the wire");
}

#[test]
fn a_ban_halts_until_a_person_clears_it() {
    let (mut gw, mut w) = setup();
    place(&mut gw, &mut w, "b1", 8);
    let (id, _, f) = w.last();
    let ev = gw.on_response(
        &mut w,
        id,
        answer(
            418,
            &[],
            br#"{"code":-1003,"msg":"Way too many requests; IP(127.0.0.1) banned until 1700000060000."}"#,
        ),
        f,
    );
    let ip = gw.venue().limits.ip();
    assert_eq!(
        ev,
        Some(Event::Halted {
            tag: 8,
            bucket: ip.index()
        })
    );
    let mut p = Prepared::with_capacity(512);
    order(&mut gw, &mut p, "b2", w.now);
    let e = gw.submit(&mut w, &mut p, Class::Urgent, 9).unwrap_err();
    assert!(matches!(
        e,
        Event::Limited {
            tag: 9,
            why: Why::Halted,
            ..
        }
    ));
    // Long after the venue's end of the ban: still halted.
    w.now += 120 * SEC;
    order(&mut gw, &mut p, "b2", w.now);
    let e = gw.submit(&mut w, &mut p, Class::Urgent, 9);
    assert!(matches!(
        e,
        Err(Event::Limited {
            why: Why::Halted,
            ..
        })
    ));
    assert_eq!(w.sent.len(), 1, "nothing left while halted");
    assert_eq!(gw.clear_halts(&mut w), 1);
    place(&mut gw, &mut w, "b3", 10);
    assert_eq!(w.sent.len(), 2);
}

#[test]
fn repeated_clock_skew_reanchors_the_venue_clock_and_realigns_fixed_windows() {
    let (mut gw, mut w) = setup();
    let before: std::collections::HashMap<_, _> = ids_and_phases(&w.budget)
        .into_iter()
        .map(|(id, _, phase)| (id, phase))
        .collect();
    let skew = br#"{"code":-1021,"msg":"Timestamp for this request was 1000ms ahead of the server's time."}"#;
    for (i, cid) in ["s1", "s2"].iter().enumerate() {
        place(&mut gw, &mut w, cid, i as u64);
        let (id, _, f) = w.last();
        let ev = gw.on_response(&mut w, id, answer(400, &[], skew), f);
        assert!(matches!(ev, Some(Event::Retrying { .. })), "{ev:?}");
    }
    let time = w
        .sent
        .iter()
        .position(|s| s.2 == "/api/v3/time")
        .expect("a time read after the second skew");
    let (id, f) = (w.sent[time].0, w.sent[time].3.take().unwrap());
    w.now += 4 * MS;
    // The venue is 700 ms behind our anchor.
    let ev = gw.on_response(
        &mut w,
        id,
        answer(200, &[], br#"{"serverTime":1699999999300}"#),
        f,
    );
    assert_eq!(ev, None);
    assert_eq!(gw.stats().reanchors, 1);
    let c = gw.venue().limits.clock;
    assert_eq!(c.utc_ms(w.now - 2 * MS), 1_699_999_999_300);
    // Every fixed bucket's windows moved to the new anchor's UTC boundaries.
    let fixed: Vec<_> = ids_and_phases(&w.budget);
    assert!(!fixed.is_empty());
    for (id, window, phase) in fixed {
        assert_eq!(phase, c.phase_ns(window), "bucket {id:?}");
        assert_ne!(phase, before[&id], "bucket {id:?} did not move");
    }
}

/// Issue 43: the venue's clock steps 120 ms back (beyond the 30 ms guard). The
/// first answer to a write stamped with its time (`transactTime`) re-anchors the
/// clock, by as much as the stamp proves and no more, and realigns every fixed
/// bucket's windows; an answer read seconds after its write (queued) proves
/// nothing and moves nothing, nor does an error within half the guard.
#[test]
fn a_stamped_answer_reanchors_a_stepped_venue_clock_at_once() {
    let (mut gw, mut w) = setup();
    let before: std::collections::HashMap<_, _> = ids_and_phases(&w.budget)
        .into_iter()
        .map(|(id, _, phase)| (id, phase))
        .collect();
    // The venue's time at our `now`: the anchor's, 120 ms back after the step.
    let venue_ms = |now: i64| 1_700_000_000_000 + (now - T0) / MS - 120;
    let body = |ms: i64| format!(r#"{{"orderId":1,"transactTime":{ms}}}"#);
    w.now += 5 * SEC;
    place(&mut gw, &mut w, "k1", 1);
    let (id, _, f) = w.last();
    // Handled 1 ms after the write, read 2 ms after it.
    let b = body(venue_ms(w.now + MS));
    w.now += 2 * MS;
    let ev = gw.on_response(&mut w, id, answer(200, &[], b.as_bytes()), f);
    assert!(matches!(ev, Some(Event::Applied { tag: 1, .. })), "{ev:?}");
    assert_eq!(gw.stats().reanchors, 1);
    let c = gw.venue().limits.clock;
    // Now within the round trip of the venue's time, never past it.
    let err = c.utc_ms(w.now) - venue_ms(w.now);
    assert!((0..=2).contains(&err), "{err} ms off");
    for (id, window, phase) in ids_and_phases(&w.budget) {
        assert_eq!(phase, c.phase_ns(window), "bucket {id:?}");
        assert_ne!(phase, before[&id], "bucket {id:?} did not move");
    }
    // Queued: written now, handled 2.9 s later, read at 3 s. The stamp says the
    // venue is 1 ms behind; the round trip allows 3 s either way: nothing moves.
    place(&mut gw, &mut w, "k2", 2);
    let (id, _, f) = w.last();
    let b = body(venue_ms(w.now + 2_900 * MS) - err - 1);
    w.now += 3 * SEC;
    let ev = gw.on_response(&mut w, id, answer(200, &[], b.as_bytes()), f);
    assert!(matches!(ev, Some(Event::Applied { tag: 2, .. })), "{ev:?}");
    assert_eq!(gw.stats().reanchors, 1);
    assert_eq!(gw.venue().limits.clock, c);
    // 10 ms off, read at once: within half the 30 ms guard, left to the guard.
    place(&mut gw, &mut w, "k3", 3);
    let (id, _, f) = w.last();
    let b = body(c.utc_ms(w.now) - 10);
    w.now += MS;
    let ev = gw.on_response(&mut w, id, answer(200, &[], b.as_bytes()), f);
    assert!(matches!(ev, Some(Event::Applied { tag: 3, .. })), "{ev:?}");
    assert_eq!((gw.stats().reanchors, gw.venue().limits.clock), (1, c));
}

/// A cancel-replace's answer carries the venue's time in its parts (found by
/// the simulator, seed 6626: a -181 ms step whose first stamped answer was a
/// cancel-replace's, unread, and a burst half a second later drew five 429s):
/// its new order's stamp, else its cancel's; a query's answer has none.
#[test]
fn a_cancel_replace_answer_is_stamped_by_its_parts() {
    let (gw, _) = setup();
    let at = |b: &str| gw.venue().answer_time(b.as_bytes()).map(|(_, ms)| ms);
    let both = r#"{"cancelResult":"SUCCESS","newOrderResult":"SUCCESS","cancelResponse":{"orderId":1,"transactTime":5},"newOrderResponse":{"orderId":2,"transactTime":7}}"#;
    assert_eq!(at(both), Some(7));
    let cancel_only = r#"{"cancelResult":"SUCCESS","newOrderResult":"FAILURE","cancelResponse":{"orderId":1,"transactTime":5},"newOrderResponse":{"code":-2010,"msg":"x"}}"#;
    assert_eq!(at(cancel_only), Some(5));
    assert_eq!(at(r#"{"orderId":1,"transactTime":9}"#), Some(9));
    assert_eq!(at(r#"{"orderId":1,"time":9,"updateTime":9}"#), None);
}

/// Each fixed bucket of `budget` with its window and phase.
fn ids_and_phases(budget: &Budget) -> Vec<(BucketId, i64, i64)> {
    budget
        .ids()
        .filter_map(|id| {
            let (window, phase) = budget.fixed_window(id).ok()??;
            Some((id, window, phase))
        })
        .collect()
}
