//! "Not found" is not "never ran" (issue 26, items 1, 5 and 8), on jumped time
//! through a scripted transport: a NotFound is final only from a query sent after
//! the request's venue-side validity; before that the gateway re-queries with a
//! backoff; where the venue states no bound the request ends Unresolved and its id
//! stays watched; a write that names no order ends instead of looping; each item
//! of a batch has its own fate, an unknown one queried by its own id (item 6).

use ergon_core::{Budget, Builder, Class, Flight, Ticket};
use ergon_gateway::{
    Event, Gateway, ItemFate, OrderState, Prepared, Wire, NOT_FOUND_MARGIN_NS, QUERY_CLASS,
    REFUSED_QUERIES_NS, SKEWS_TO_REANCHOR,
};
use ergon_io::client::{Refused, RequestId, Sent};
use ergon_io::http::Request;
use ergon_venues::adapt::{Clock, Request as Kind, Venue};
use ergon_venues::binance_spot::{Auth, BinanceSpot};
use ergon_venues::bybit::{self, Bybit};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Endpoints, NewOrder, OrderRef, OrderType, Side, Symbol, TimeInForce,
};
use ergon_venues::response::{Header, Response};

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;
const T0: i64 = 1_000 * SEC;
const INFO: &[u8] = br#"{"rateLimits":[{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,"limit":6000},{"rateLimitType":"ORDERS","interval":"SECOND","intervalNum":10,"limit":100},{"rateLimitType":"RAW_REQUESTS","interval":"MINUTE","intervalNum":5,"limit":61000}]}"#;
const NOT_FOUND: &[u8] = br#"{"code":-2013,"msg":"Order does not exist."}"#;

/// A transport that records what was written, with the time it was written.
struct Script {
    budget: Budget,
    now: i64,
    next: u64,
    /// (id, method, target, flight, written at) of every request written.
    sent: Vec<(RequestId, String, String, Option<Flight>, i64)>,
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
        self.sent.push((
            id,
            r.method.into(),
            r.target.into(),
            Some(t.sent()),
            self.now,
        ));
        Ok(id)
    }
}

impl Script {
    fn new(budget: Budget) -> Self {
        Script {
            budget,
            now: T0,
            next: 0,
            sent: Vec::new(),
        }
    }
    /// The last request written, its flight taken (to answer it), and when.
    fn last(&mut self) -> (RequestId, String, Flight, i64) {
        let l = self.sent.last_mut().expect("a request was written");
        (l.0, l.2.clone(), l.3.take().expect("not answered yet"), l.4)
    }
    fn queries(&self) -> usize {
        self.sent.iter().filter(|s| s.1 == "GET").count()
    }
}

fn answer(status: u16, body: &[u8]) -> Response<'_> {
    Response {
        status,
        headers: &[],
        body,
    }
}

fn binance() -> (Gateway<BinanceSpot>, Script) {
    let mut b = Budget::builder();
    let clock = Clock::anchor(T0, 1_700_000_000_000);
    let acct = BinanceSpot::from_exchange_info(INFO, &mut b, clock, 30 * MS)
        .unwrap()
        .with_auth(Auth::new("k", b"s", 2_000).unwrap());
    (
        Gateway::new(acct, "BTCUSDT", 8, 512).unwrap(),
        Script::new(b.build(T0).unwrap()),
    )
}

fn new_order<'a>(cid: &'a str) -> NewOrder<'a> {
    NewOrder {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(Decimal::new("49995.00").unwrap()),
        quantity: Decimal::new("0.010").unwrap(),
        client_order_id: ClientOrderId::new(cid).unwrap(),
        reduce_only: false,
    }
}

/// Places `cid`; the connection dies after it was written: its outcome is
/// unknown. Returns the order's deadline (timestamp + recvWindow, our clock).
fn place_unknown<E: ergon_gateway::Account>(
    gw: &mut Gateway<E>,
    w: &mut Script,
    cid: &str,
    tag: u64,
) -> i64 {
    let mut p = Prepared::with_capacity(512);
    gw.venue_mut()
        .new_order(&mut p, &new_order(cid), w.now)
        .unwrap();
    let deadline = p.deadline_ns();
    gw.submit(w, &mut p, Class::Urgent, tag).expect("submitted");
    let (id, _, f, _) = w.last();
    w.now += 5 * MS;
    assert_eq!(
        gw.on_error(w, id, Sent::Maybe(f)),
        Some(Event::Reconciling { tag })
    );
    deadline
}

/// Jumps to the gateway's next due time and polls, until it writes a request
/// (at most `turns` jumps, so a never-idle loop fails fast).
fn next_write<E: ergon_gateway::Account>(gw: &mut Gateway<E>, w: &mut Script, turns: usize) {
    let n = w.sent.len();
    for _ in 0..turns {
        let at = gw.poll_timeout().expect("something is due");
        w.now = w.now.max(at);
        gw.poll(w);
        if w.sent.len() > n {
            return;
        }
    }
    panic!("nothing written in {turns} turns");
}

/// An order held in the venue's queue (the emulator's `Delay` fault): the first
/// query says -2013, the order executes later. The gateway must not say "it never
/// ran" before the venue can no longer run it, and only from a query sent after.
#[test]
fn not_found_before_the_recv_window_ends_is_not_never_ran() {
    let (mut gw, mut w) = binance();
    let deadline = place_unknown(&mut gw, &mut w, "q1", 1);
    let bound = deadline + NOT_FOUND_MARGIN_NS;
    let (qid, q, qf, _) = w.last();
    assert!(q.contains("origClientOrderId=q1"), "{q}");
    w.now += MS;
    // On main this was Reconciled { found: None } at once: double exposure.
    let ev = gw.on_response(&mut w, qid, answer(400, NOT_FOUND), qf);
    assert_eq!(ev, None, "a NotFound inside the window settles nothing");
    assert_eq!(gw.in_flight(), 1);
    // Every further NotFound before the bound settles nothing either; the queries
    // are spaced, not every 20 ms.
    let mut finals = Vec::new();
    let mut last_sent = 0;
    for _ in 0..40 {
        next_write(&mut gw, &mut w, 10);
        let (qid, _, qf, sent_at) = w.last();
        assert!(sent_at > last_sent);
        last_sent = sent_at;
        w.now += MS;
        if let Some(ev) = gw.on_response(&mut w, qid, answer(400, NOT_FOUND), qf) {
            finals.push((ev, sent_at));
            break;
        }
    }
    assert_eq!(
        finals,
        vec![(
            Event::Reconciled {
                tag: 1,
                found: None
            },
            last_sent
        )]
    );
    assert!(
        last_sent >= bound,
        "settled by a query sent after the bound"
    );
    assert!(
        last_sent < bound + 2 * SEC,
        "and not much later: {} ms after",
        (last_sent - bound) / MS
    );
    let queries = w.queries();
    assert!(
        (3..=15).contains(&queries),
        "{queries} queries in {} ms",
        (w.now - T0) / MS
    );
}

/// The same order executes while the gateway still asks: found, never "not found".
#[test]
fn an_order_delayed_in_the_queue_is_found_by_a_later_query() {
    let (mut gw, mut w) = binance();
    place_unknown(&mut gw, &mut w, "q2", 2);
    let (qid, _, qf, _) = w.last();
    assert_eq!(
        gw.on_response(&mut w, qid, answer(400, NOT_FOUND), qf),
        None
    );
    next_write(&mut gw, &mut w, 10);
    let (qid, _, qf, _) = w.last();
    let ev = gw.on_response(
        &mut w,
        qid,
        answer(200, br#"{"symbol":"BTCUSDT","orderId":12,"clientOrderId":"q2","status":"FILLED","executedQty":"0.01000000"}"#),
        qf,
    );
    assert_eq!(
        ev,
        Some(Event::Reconciled {
            tag: 2,
            found: Some(OrderState::Filled)
        })
    );
    assert_eq!(gw.in_flight(), 0);
}

/// A query that never settles (the venue answers 5xx for ever) backs off and
/// ends: no query every 20 ms for ever (item 8).
#[test]
fn a_stuck_reconcile_backs_off_and_ends() {
    let (mut gw, mut w) = binance();
    place_unknown(&mut gw, &mut w, "q3", 3);
    let start = w.now;
    let mut end = None;
    for _ in 0..200 {
        let (qid, _, qf, _) = w.last();
        w.now += MS;
        if let Some(ev) = gw.on_response(&mut w, qid, answer(503, b"busy"), qf) {
            end = Some(ev);
            break;
        }
        next_write(&mut gw, &mut w, 10);
    }
    let ev = end.expect("it ends");
    assert!(ev.is_final() && ev.tag() == 3, "{ev:?}");
    assert!(
        !matches!(ev, Event::Reconciled { found: None, .. }),
        "an unanswered query is no proof it never ran: {ev:?}"
    );
    // Spaced: the first 10 s hold far fewer than 10 s / 20 ms = 500 queries.
    let early = w
        .sent
        .iter()
        .filter(|s| s.1 == "GET" && s.4 < start + 10 * SEC)
        .count();
    assert!(early <= 12, "{early} queries in the first 10 s");
    assert_eq!(gw.in_flight(), 0);
}

/// A reconcile query is charged at its own class ([`QUERY_CLASS`]), never at its
/// request's: with only the Urgent headroom left, an Urgent order's query waits
/// for room rather than take what other cancels need (item 8). On main the query
/// took the request's Urgent class and went out at once.
#[test]
fn the_query_of_an_urgent_order_waits_outside_the_urgent_headroom() {
    let (mut gw, mut w) = binance();
    // The weight limit is 6000 a minute; Normal may not use its last 120. Leave
    // 110: room for the Urgent order (weight 1), none for a Normal query (4).
    let fill = gw.venue().parts(Kind::Read(5_890)).unwrap();
    // Spent (as if sent): never refunded.
    let spent = w.budget.try_charge(&fill, Class::Urgent, w.now);
    let _ = spent.expect("filled").sent();
    let placed_at = w.now;
    place_unknown(&mut gw, &mut w, "u1", 11);
    assert_eq!(w.queries(), 0, "no query out of the Urgent headroom");
    assert_eq!(gw.in_flight(), 1, "still reconciling");
    // The weight window slides over a minute; the gateway looks again every
    // 100 ms, refused at no cost.
    next_write(&mut gw, &mut w, 1_000);
    let (_, target, _, at) = w.last();
    assert!(target.contains("origClientOrderId=u1"), "{target}");
    assert!(
        at > placed_at + SEC,
        "written once the window freed room: {at}"
    );
    assert_eq!(QUERY_CLASS, Class::Normal);
}

/// A query the venue refuses for the clock (-1021) counts toward re-anchoring
/// like any request (item 8): after [`SKEWS_TO_REANCHOR`] of them the gateway
/// reads the venue's time again. On main query answers never counted.
#[test]
fn queries_refused_for_the_clock_reanchor_it() {
    let (mut gw, mut w) = binance();
    place_unknown(&mut gw, &mut w, "s1", 12);
    let skew =
        br#"{"code":-1021,"msg":"Timestamp for this request is outside of the recvWindow."}"#;
    for _ in 0..SKEWS_TO_REANCHOR {
        let (qid, target, qf, _) = w.last();
        assert!(target.contains("origClientOrderId=s1"), "{target}");
        w.now += MS;
        assert_eq!(gw.on_response(&mut w, qid, answer(400, skew), qf), None);
        if !w.sent.iter().any(|s| s.2 == "/api/v3/time") {
            next_write(&mut gw, &mut w, 10);
        }
    }
    assert!(
        w.sent.iter().any(|s| s.2 == "/api/v3/time"),
        "the venue's time is read again: {:?}",
        w.sent.iter().map(|s| &s.2).collect::<Vec<_>>()
    );
    assert_eq!(
        gw.in_flight(),
        1,
        "the order is still reconciled, not settled by a skew"
    );
}

/// A cancel-all (no client order id) with an unknown outcome ends, instead of
/// being re-scheduled every 100 ms for ever (item 5).
#[test]
fn a_cancel_all_with_an_unknown_outcome_ends() {
    let (mut gw, mut w) = binance();
    let mut p = Prepared::with_capacity(512);
    gw.venue_mut()
        .cancel_all(&mut p, Symbol::new("BTCUSDT").unwrap(), w.now)
        .unwrap();
    gw.submit(&mut w, &mut p, Class::Urgent, 4).unwrap();
    let (id, _, f, _) = w.last();
    let ev = gw.on_error(&mut w, id, Sent::Maybe(f));
    let mut evs: Vec<String> = ev.iter().map(|e| format!("{e:?}")).collect();
    for _ in 0..100 {
        while let Some(e) = gw.poll_event() {
            evs.push(format!("{e:?}"));
        }
        match gw.poll_timeout() {
            Some(at) => {
                w.now = w.now.max(at);
                gw.poll(&mut w);
            }
            None => break,
        }
    }
    assert_eq!(gw.in_flight(), 0, "it ended: {evs:?}");
    assert!(
        evs.last().is_some_and(|e| e.starts_with("Unresolved")),
        "{evs:?}"
    );
    assert_eq!(gw.poll_timeout(), None, "nothing left to do");
}

fn bybit_gw() -> (Gateway<Bybit>, Script) {
    let mut b = Builder::default();
    let clock = Clock::anchor(T0, 1_700_000_000_000);
    let acct = Bybit::new(&mut b, clock, bybit::Config::default())
        .unwrap()
        .with_auth(bybit::Auth::new("k", b"s", 5_000).unwrap());
    (
        Gateway::new(acct, "BTCUSDT", 8, 1024).unwrap(),
        Script::new(b.build(T0).unwrap()),
    )
}

/// Bybit states no time after which a queued request can no longer run: a
/// NotFound proves nothing. The request ends Unresolved (never "never ran"), its
/// slot freed, and the open-orders poll reports it Late when it shows up.
#[test]
fn without_a_venue_bound_not_found_ends_unresolved_and_a_late_order_is_reported() {
    let (mut gw, mut w) = bybit_gw();
    gw.set_unresolved_after_ns(3 * SEC);
    gw.set_watch_ns(60 * SEC);
    place_unknown(&mut gw, &mut w, "by1", 5);
    let empty = br#"{"retCode":0,"retMsg":"OK","result":{"list":[],"category":"linear"},"time":1700000000000}"#;
    let mut end = None;
    for _ in 0..50 {
        let (qid, _, qf, _) = w.last();
        w.now += MS;
        if let Some(ev) = gw.on_response(&mut w, qid, answer(200, empty), qf) {
            end = Some(ev);
            break;
        }
        next_write(&mut gw, &mut w, 10);
    }
    assert_eq!(end, Some(Event::Unresolved { tag: 5 }));
    assert_eq!(gw.in_flight(), 0, "the slot is freed");
    assert_eq!(gw.stats().reconciled, 0, "never 'it never ran'");

    // The order rested after all: the next open-orders poll lists it.
    gw.poll_open_orders(SEC);
    w.now += 10 * SEC;
    gw.poll(&mut w);
    let (pid, target, pf, _) = w.last();
    assert!(target.contains("/v5/order/realtime"), "{target}");
    let open = br#"{"retCode":0,"retMsg":"OK","result":{"list":[{"orderLinkId":"other"},{"orderLinkId":"by1"}]},"time":1700000010000}"#;
    let ev = gw.on_response(&mut w, pid, answer(200, open), pf);
    assert!(matches!(ev, Some(Event::OpenOrders { .. })), "{ev:?}");
    assert_eq!(
        gw.poll_event(),
        Some(Event::Late {
            tag: 5,
            found: OrderState::Other
        })
    );
    assert_eq!(gw.poll_event(), None, "reported once");
    assert_eq!(gw.stats().late, 1);
}

/// Issue 47: polls the caller does not want (the daemon while no client asked)
/// are not sent, and cost nothing; but while the gateway watches an unresolved
/// order's id they go out all the same, for its Late.
#[test]
fn unwanted_polls_go_out_only_while_an_id_is_watched() {
    let (mut gw, mut w) = bybit_gw();
    gw.set_unresolved_after_ns(3 * SEC);
    gw.set_watch_ns(60 * SEC);
    gw.poll_open_orders(SEC);
    gw.want_open_orders(false);
    assert_eq!(gw.poll_timeout(), None, "no poll wanted, no id watched");
    w.now += 10 * SEC;
    gw.poll(&mut w);
    assert!(w.sent.is_empty(), "nothing sent");
    assert!(gw.open_orders_spent().is_empty());
    place_unknown(&mut gw, &mut w, "by1", 5);
    let empty = br#"{"retCode":0,"retMsg":"OK","result":{"list":[],"category":"linear"},"time":1700000000000}"#;
    let mut end = None;
    for _ in 0..50 {
        let (qid, target, qf, _) = w.last();
        assert!(
            target.contains("orderLinkId="),
            "a query, never a poll: {target}"
        );
        w.now += MS;
        if let Some(ev) = gw.on_response(&mut w, qid, answer(200, empty), qf) {
            end = Some(ev);
            break;
        }
        next_write(&mut gw, &mut w, 10);
    }
    assert_eq!(end, Some(Event::Unresolved { tag: 5 }));
    // Its id is watched: the poll goes out though nobody wants it.
    w.now += 10 * SEC;
    gw.poll(&mut w);
    let (pid, target, pf, _) = w.last();
    assert!(
        target.contains("/v5/order/realtime") && !target.contains("orderLinkId="),
        "{target}"
    );
    let open = br#"{"retCode":0,"retMsg":"OK","result":{"list":[{"orderLinkId":"by1"}]},"time":1700000010000}"#;
    let ev = gw.on_response(&mut w, pid, answer(200, open), pf);
    assert!(matches!(ev, Some(Event::OpenOrders { .. })), "{ev:?}");
    assert_eq!(
        gw.poll_event(),
        Some(Event::Late {
            tag: 5,
            found: OrderState::Other
        })
    );
    assert!(
        !gw.open_orders_spent().is_empty(),
        "the poll's units are counted"
    );
}

/// Journal recovery follows the same rule: an order a dead gateway left in flight
/// is not "never ran" from one query at restart (on main the hub submitted the
/// query as a plain read, and its -2013 ended the recovery at once), only from a
/// query sent after the venue's bound for anything it could have written.
#[test]
fn a_recovered_order_is_not_found_only_after_the_bound() {
    let (mut gw, mut w) = binance();
    let mut q = Prepared::with_capacity(512);
    let it = ergon_venues::endpoint::OrderRef {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        client_order_id: ClientOrderId::new("j1").unwrap(),
    };
    gw.venue_mut().query_order(&mut q, &it, w.now).unwrap();
    // Written by the dead gateway before now: its deadline is before this one.
    let bound = q.deadline_ns() + NOT_FOUND_MARGIN_NS;
    gw.recover(&mut w, &mut q, 9).expect("adopted");
    let mut settled = None;
    for _ in 0..40 {
        let (qid, target, qf, sent_at) = w.last();
        assert!(target.contains("origClientOrderId=j1"), "{target}");
        w.now += MS;
        if let Some(ev) = gw.on_response(&mut w, qid, answer(400, NOT_FOUND), qf) {
            settled = Some((ev, sent_at));
            break;
        }
        next_write(&mut gw, &mut w, 10);
    }
    let (ev, sent_at) = settled.expect("settled");
    assert_eq!(
        ev,
        Event::Reconciled {
            tag: 9,
            found: None
        }
    );
    assert!(sent_at >= bound, "by a query sent after the bound");
    assert!(w.queries() >= 2);
}

/// Bybit's real-time query lists only the account's 500 most recently closed
/// orders (issue 26, item 2): its NotFound is asked again of the order history at
/// once, not after a backoff, and the history's answer settles the request.
#[test]
fn a_bybit_not_found_asks_the_order_history_which_settles() {
    let (mut gw, mut w) = bybit_gw();
    place_unknown(&mut gw, &mut w, "by2", 7);
    let (qid, target, qf, _) = w.last();
    assert!(target.starts_with("/v5/order/realtime?"), "{target}");
    w.now += MS;
    let empty = br#"{"retCode":0,"retMsg":"OK","result":{"list":[],"category":"linear"},"time":1700000000000}"#;
    assert_eq!(gw.on_response(&mut w, qid, answer(200, empty), qf), None);
    next_write(&mut gw, &mut w, 1);
    let (hid, target, hf, at) = w.last();
    assert_eq!(
        target,
        "/v5/order/history?category=linear&symbol=BTCUSDT&orderLinkId=by2"
    );
    assert_eq!(at, w.now, "at once");
    let closed = br#"{"retCode":0,"retMsg":"OK","result":{"list":[{"orderId":"14bad3a1-6454-43d8-bcf2-5345896cf74d","orderLinkId":"by2","orderStatus":"Cancelled","cumExecQty":"0.000"}],"category":"linear"},"time":1700000000000}"#;
    w.now += MS;
    assert_eq!(
        gw.on_response(&mut w, hid, answer(200, closed), hf),
        Some(Event::Reconciled {
            tag: 7,
            found: Some(OrderState::Canceled)
        })
    );
    assert_eq!(gw.in_flight(), 0);
}

/// Three orders in one Bybit batch.
fn submit_batch(gw: &mut Gateway<Bybit>, w: &mut Script, tag: u64) -> (RequestId, Flight) {
    let orders = [new_order("bt1"), new_order("bt2"), new_order("bt3")];
    let mut p = Prepared::with_capacity(2048);
    gw.venue_mut().batch_orders(&mut p, &orders, w.now).unwrap();
    gw.submit(w, &mut p, Class::Normal, tag).expect("submitted");
    let (id, target, f, _) = w.last();
    assert_eq!(target, "/v5/order/create-batch");
    w.now += MS;
    (id, f)
}

/// Bybit's answer to the query by `cid`: found, resting.
fn bybit_found(cid: &str) -> Vec<u8> {
    format!(
        r#"{{"retCode":0,"retMsg":"OK","result":{{"list":[{{"orderId":"o-{cid}","orderLinkId":"{cid}","symbol":"BTCUSDT","orderStatus":"New","cumExecQty":"0"}}],"category":"linear"}},"time":1700000000000}}"#
    )
    .into_bytes()
}

fn drain<E: ergon_gateway::Account>(gw: &mut Gateway<E>) -> Vec<Event<'static>> {
    std::iter::from_fn(|| gw.poll_event()).collect()
}

fn item(tag: u64, item: u8, fate: ItemFate) -> Event<'static> {
    Event::Item { tag, item, fate }
}

/// A batch answer that leaves one item unknown (Bybit's per-item 10016) is not
/// Applied: the items it settled get their fates at once, the unknown one is
/// queried by its own client order id, and the batch ends BatchSettled after the
/// last item's fate (item 6). On main the batch ended Applied.
#[test]
fn a_batch_answer_with_an_unknown_item_reconciles_that_item_by_its_own_id() {
    let (mut gw, mut w) = bybit_gw();
    let (id, f) = submit_batch(&mut gw, &mut w, 21);
    let body = br#"{"retCode":0,"retMsg":"OK","result":{"list":[{"orderId":"a1","orderLinkId":"bt1"},{"orderId":"","orderLinkId":""},{"orderId":"","orderLinkId":""}]},"retExtInfo":{"list":[{"code":0,"msg":"OK"},{"code":10016,"msg":"Internal server error"},{"code":10001,"msg":"params error: price invalid"}]},"time":1700000000000}"#;
    assert_eq!(
        gw.on_response(&mut w, id, answer(200, body), f),
        Some(Event::Reconciling { tag: 21 })
    );
    assert_eq!(
        drain(&mut gw),
        [
            item(21, 0, ItemFate::Applied),
            item(21, 2, ItemFate::Rejected)
        ]
    );
    let (qid, target, qf, _) = w.last();
    assert!(target.contains("orderLinkId=bt2"), "{target}");
    w.now += MS;
    let found = bybit_found("bt2");
    assert_eq!(gw.on_response(&mut w, qid, answer(200, &found), qf), None);
    assert_eq!(
        drain(&mut gw),
        [
            item(21, 1, ItemFate::Found(OrderState::New)),
            Event::BatchSettled { tag: 21 }
        ]
    );
    assert_eq!(gw.in_flight(), 0);
    assert_eq!(w.queries(), 1, "only the unknown item is asked about");
}

/// A batch whose whole answer was lost is reconciled item by item, each by its
/// own id, not by the first order's id alone (item 6).
#[test]
fn a_lost_batch_answer_queries_every_item_by_its_own_id() {
    let (mut gw, mut w) = bybit_gw();
    let (id, f) = submit_batch(&mut gw, &mut w, 22);
    assert_eq!(
        gw.on_error(&mut w, id, Sent::Maybe(f)),
        Some(Event::Reconciling { tag: 22 })
    );
    let mut events = Vec::new();
    for cid in ["bt1", "bt2", "bt3"] {
        let (qid, target, qf, _) = w.last();
        assert!(target.contains(&format!("orderLinkId={cid}")), "{target}");
        w.now += MS;
        let found = bybit_found(cid);
        assert_eq!(gw.on_response(&mut w, qid, answer(200, &found), qf), None);
        events.extend(drain(&mut gw));
        if cid != "bt3" {
            next_write(&mut gw, &mut w, 1);
        }
    }
    let found = ItemFate::Found(OrderState::New);
    assert_eq!(
        events,
        [
            item(22, 0, found),
            item(22, 1, found),
            item(22, 2, found),
            Event::BatchSettled { tag: 22 }
        ]
    );
    assert_eq!(gw.in_flight(), 0);
}

/// A batch whose orders repeat a client order id is refused DuplicateId, nothing
/// charged or sent (issue 43, found by the simulator at seed 0 --venue bybit):
/// Bybit placed the first, refused the second (110072), the answer was lost,
/// and the query of each item by its own id found the one order for both: two
/// items said they ran. Before, the batch went out.
#[test]
fn a_batch_repeating_a_client_order_id_is_refused_before_it_is_sent() {
    let (mut gw, mut w) = bybit_gw();
    let orders = [new_order("rp1"), new_order("rp2"), new_order("rp1")];
    let mut p = Prepared::with_capacity(2048);
    gw.venue_mut().batch_orders(&mut p, &orders, w.now).unwrap();
    assert_eq!(
        gw.submit(&mut w, &mut p, Class::Normal, 23),
        Err(Event::DuplicateId { tag: 23 })
    );
    assert!(w.sent.is_empty(), "nothing written");
    assert_eq!(gw.in_flight(), 0);
    // The batch of distinct ids that follows goes out.
    let (_, _) = submit_batch(&mut gw, &mut w, 24);
    assert_eq!(w.sent.len(), 1);
}

/// After the venue's dead man's switch fired and was armed again (issue 28), the
/// gateway asks the venue once what still rests: one open-orders poll, at once
/// or when the budget has room, answered as one OpenOrders event, then nothing
/// more is due.
#[test]
fn a_one_off_open_orders_poll_goes_out_once() {
    let (mut gw, mut w) = binance();
    assert_eq!(gw.poll_timeout(), None, "nothing due");
    gw.poll_open_orders_once(w.now);
    next_write(&mut gw, &mut w, 1);
    let (id, target, f, _) = w.last();
    assert!(target.starts_with("/api/v3/openOrders?"), "{target}");
    w.now += MS;
    let open = br#"[{"symbol":"BTCUSDT","clientOrderId":"still-here","status":"NEW"}]"#;
    let ev = gw.on_response(&mut w, id, answer(200, open), f);
    assert!(matches!(ev, Some(Event::OpenOrders { .. })), "{ev:?}");
    assert_eq!(gw.poll_timeout(), None, "once");
    assert_eq!(w.sent.len(), 1);
}

/// A ban that starts while a request reconciles (issue 39, item 3): on main the
/// query refused by the halt was tried again every 100 ms with no count, so the
/// request never ended, held its slot, and a stop waiting for `in_flight() == 0`
/// waited for ever. Now it ends Unresolved at once (its id cannot be asked about
/// until a person clears the halt), its id stays watched through the ban however
/// long it lasts, and once the halt is cleared the order that rested after all
/// reaches its owner as a Late.
#[test]
fn a_ban_during_a_reconcile_ends_it_and_a_late_follows_the_cleared_halt() {
    let (mut gw, mut w) = binance();
    gw.set_watch_ns(60 * SEC);
    place_unknown(&mut gw, &mut w, "ban1", 9);
    // The reconcile query is answered with the IP ban.
    let (qid, target, qf, _) = w.last();
    assert!(target.contains("origClientOrderId=ban1"), "{target}");
    w.now += MS;
    let ban = br#"{"code":-1003,"msg":"Way too many requests; IP banned until 1700000600000."}"#;
    assert_eq!(gw.on_response(&mut w, qid, answer(418, ban), qf), None);
    assert!(w.budget.halted().next().is_some(), "the ban halts a scope");
    // Jumped time: the request ends within a few turns, whatever the venue does.
    let mut events = Vec::new();
    for _ in 0..20 {
        let Some(at) = gw.poll_timeout() else { break };
        w.now = w.now.max(at);
        gw.poll(&mut w);
        events.extend(drain(&mut gw));
        if gw.in_flight() == 0 {
            break;
        }
    }
    assert_eq!(events, vec![Event::Unresolved { tag: 9 }]);
    assert_eq!(gw.in_flight(), 0, "the slot is freed: a stop can finish");
    assert_eq!(gw.stats().unresolved_refused, 1);
    assert_eq!(w.queries(), 1, "nothing left under the ban");

    // The ban outlasts the watch's 60 s; the id stays watched (and live).
    w.now += 10 * 60 * SEC;
    gw.poll(&mut w);
    let mut p = Prepared::with_capacity(512);
    gw.venue_mut()
        .new_order(&mut p, &new_order("ban1"), w.now)
        .unwrap();
    assert_eq!(
        gw.submit(&mut w, &mut p, Class::Normal, 10),
        Err(Event::DuplicateId { tag: 10 }),
        "its id is still live during the ban"
    );
    // A person clears the halt on the budget (as the daemon's clear-halt does):
    // the gateway polls the open orders once, and the order rests there.
    let halted: Vec<_> = w.budget.halted().collect();
    for b in halted {
        w.budget.clear_halt(b).unwrap();
    }
    // The gateway looks again on its own (a timer, not a call of ours).
    let at = gw
        .poll_timeout()
        .expect("it looks whether the halt was cleared");
    assert!(at <= w.now + SEC, "{}", at - w.now);
    w.now = w.now.max(at);
    gw.poll(&mut w);
    let (pid, target, pf, _) = w.last();
    assert!(target.starts_with("/api/v3/openOrders"), "{target}");
    w.now += MS;
    let open = br#"[{"symbol":"BTCUSDT","orderId":7,"clientOrderId":"ban1","status":"NEW"}]"#;
    let ev = gw.on_response(&mut w, pid, answer(200, open), pf);
    assert!(matches!(ev, Some(Event::OpenOrders { .. })), "{ev:?}");
    assert_eq!(
        gw.poll_event(),
        Some(Event::Late {
            tag: 9,
            found: OrderState::Other
        })
    );
    assert_eq!(gw.stats().late, 1);
}

/// A query the budget keeps refusing for another reason than a halt is tried
/// again while the budget's ready time falls inside the reconcile's time
/// ([`REFUSED_QUERIES_NS`]); a hold for an hour (a 429 with `Retry-After: 3600`)
/// does not, and the request ends Unresolved at once: bounded, never a loop.
#[test]
fn a_reconcile_whose_queries_stay_refused_ends_in_bounded_time() {
    let (mut gw, mut w) = binance();
    place_unknown(&mut gw, &mut w, "held1", 11);
    let (qid, _, qf, _) = w.last();
    w.now += MS;
    let held = br#"{"code":-1003,"msg":"Too much request weight used; current limit is 6000 request weight per 1 MINUTE."}"#;
    let r = Response {
        status: 429,
        headers: &[Header {
            name: b"Retry-After",
            value: b"3600",
        }],
        body: held,
    };
    assert_eq!(gw.on_response(&mut w, qid, r, qf), None);
    let start = w.now;
    let mut events = Vec::new();
    for _ in 0..2_000 {
        let Some(at) = gw.poll_timeout() else { break };
        w.now = w.now.max(at);
        gw.poll(&mut w);
        events.extend(drain(&mut gw));
        if gw.in_flight() == 0 {
            break;
        }
    }
    assert_eq!(events, vec![Event::Unresolved { tag: 11 }]);
    assert!(
        w.now - start < REFUSED_QUERIES_NS,
        "ended after {} ms",
        (w.now - start) / MS
    );
    assert_eq!(w.queries(), 1);
}

/// A query the budget refuses (no room outside the Urgent headroom) is charged
/// first on each try after, and written (signed) only once charged (issue 43: a
/// refused try signs nothing); the one that goes out is written then: its bytes
/// are the adapter's query stamped at its send time, not the first try's, and it
/// settles the order.
#[test]
fn a_query_the_budget_refused_goes_out_stamped_when_sent_and_settles() {
    let (mut gw, mut w) = binance();
    // As the_query_of_an_urgent_order_waits_outside_the_urgent_headroom: room for
    // the Urgent order, none for a Normal query until the weight window slides.
    let fill = gw.venue().parts(Kind::Read(5_890)).unwrap();
    let _ = w
        .budget
        .try_charge(&fill, Class::Urgent, w.now)
        .expect("filled")
        .sent();
    place_unknown(&mut gw, &mut w, "held2", 12);
    assert_eq!(w.queries(), 0, "no query out of the Urgent headroom");
    let first_try = w.now;
    let mut tries = 0;
    while w.queries() == 0 && tries < 2_000 {
        let at = gw.poll_timeout().expect("the query is due again");
        w.now = w.now.max(at);
        gw.poll(&mut w);
        tries += 1;
    }
    assert!(tries > 2, "{tries} polls: the budget refused no try");
    assert_eq!(w.queries(), 1);
    let (qid, target, qf, sent_at) = w.last();
    assert!(
        sent_at > first_try + SEC,
        "sent {} ms after the first try",
        (sent_at - first_try) / MS
    );
    // The adapter's own query for the order, written (signed at once: the
    // adapter `venue_mut` lends leaves a signature to `submit`) at the time it
    // went out.
    let mut fresh = Prepared::with_capacity(512);
    let order = OrderRef {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        client_order_id: ClientOrderId::new("held2").unwrap(),
    };
    let mut at_once = gw.venue().clone();
    at_once.defer_signatures(false);
    at_once.query_order(&mut fresh, &order, sent_at).unwrap();
    assert_eq!(target, fresh.target());
    w.now += MS;
    let filled = br#"{"symbol":"BTCUSDT","orderId":13,"clientOrderId":"held2","status":"FILLED","executedQty":"0.01000000"}"#;
    assert_eq!(
        gw.on_response(&mut w, qid, answer(200, filled), qf),
        Some(Event::Reconciled {
            tag: 12,
            found: Some(OrderState::Filled)
        })
    );
    assert_eq!(gw.in_flight(), 0);
}

/// A batch answer whose items met different fates, none run (one refused for its
/// price, one throttled by the endpoint's limit: Bybit's per-item 10001 and
/// 10006), ends with each item's fate and is never re-sent whole (issue 39, item
/// 2). On main the batch's worst verdict (the throttle) re-sent all three.
#[test]
fn a_partial_batch_answer_is_never_resent_whole() {
    let (mut gw, mut w) = bybit_gw();
    let (id, f) = submit_batch(&mut gw, &mut w, 23);
    let body = br#"{"retCode":0,"retMsg":"OK","result":{"list":[{"orderId":"","orderLinkId":""},{"orderId":"","orderLinkId":""},{"orderId":"","orderLinkId":""}]},"retExtInfo":{"list":[{"code":10001,"msg":"params error: price invalid"},{"code":10006,"msg":"Too many visits!"},{"code":10006,"msg":"Too many visits!"}]},"time":1700000000000}"#;
    let ev = gw.on_response(&mut w, id, answer(200, body), f);
    let mut events: Vec<_> = ev.into_iter().collect();
    events.extend(drain(&mut gw));
    assert_eq!(
        events,
        [
            item(23, 0, ItemFate::Rejected),
            item(23, 1, ItemFate::NotRun),
            item(23, 2, ItemFate::NotRun),
            Event::BatchSettled { tag: 23 },
        ]
    );
    assert_eq!(gw.in_flight(), 0);
    w.now += 10 * SEC;
    gw.poll(&mut w);
    assert_eq!(w.sent.len(), 1, "written once");
}

/// The first request written whose target passes `is`, not answered yet: its
/// id and flight (to answer it).
fn take_sent(w: &mut Script, is: impl Fn(&str) -> bool) -> Option<(RequestId, Flight)> {
    let s = w.sent.iter_mut().find(|s| s.3.is_some() && is(&s.2))?;
    Some((s.0, s.3.take()?))
}

/// A batch item left Unresolved is watched at once, while the batch settles its
/// other items; an open-orders poll that lists it then gives no Late: every Late
/// comes about a request no longer in flight (its final event out first, as the
/// daemon's hub routes a Late only to a request that ended). The watch stays,
/// and the poll after the BatchSettled gives it. Found by the simulator (seed 25
/// `--venue bybit`, polls on): a Late before its batch's BatchSettled.
#[test]
fn a_batch_items_late_waits_for_its_batch_settled() {
    let (mut gw, mut w) = bybit_gw();
    gw.set_unresolved_after_ns(3 * SEC);
    gw.set_watch_ns(60 * SEC);
    let (id, f) = submit_batch(&mut gw, &mut w, 25);
    assert_eq!(
        gw.on_error(&mut w, id, Sent::Maybe(f)),
        Some(Event::Reconciling { tag: 25 })
    );
    let empty = br#"{"retCode":0,"retMsg":"OK","result":{"list":[],"category":"linear"},"time":1700000000000}"#;
    let mut events = Vec::new();
    for _ in 0..50 {
        let (qid, target, qf, _) = w.last();
        assert!(target.contains("orderLinkId=bt1"), "{target}");
        w.now += MS;
        assert_eq!(gw.on_response(&mut w, qid, answer(200, empty), qf), None);
        events.extend(drain(&mut gw));
        if !events.is_empty() {
            break;
        }
        next_write(&mut gw, &mut w, 10);
    }
    assert_eq!(events, [item(25, 0, ItemFate::Unresolved)]);
    // bt1 rested after all: a poll lists it while bt2 is asked about.
    gw.poll_open_orders(SEC);
    let is_poll = |t: &str| t.contains("/v5/order/realtime") && !t.contains("orderLinkId=");
    let open = br#"{"retCode":0,"retMsg":"OK","result":{"list":[{"orderLinkId":"bt1"}]},"time":1700000010000}"#;
    let (pid, pf) = loop {
        match take_sent(&mut w, is_poll) {
            Some(p) => break p,
            None => next_write(&mut gw, &mut w, 10),
        }
    };
    assert_eq!(gw.in_flight(), 1, "the batch is in flight");
    let ev = gw.on_response(&mut w, pid, answer(200, open), pf);
    assert!(matches!(ev, Some(Event::OpenOrders { .. })), "{ev:?}");
    assert_eq!(drain(&mut gw), [], "no Late while its batch is in flight");
    for cid in ["bt2", "bt3"] {
        let is_query = |t: &str| t.contains(&format!("orderLinkId={cid}"));
        let (qid, qf) = loop {
            match take_sent(&mut w, is_query) {
                Some(q) => break q,
                None => next_write(&mut gw, &mut w, 10),
            }
        };
        w.now += MS;
        assert_eq!(
            gw.on_response(&mut w, qid, answer(200, &bybit_found(cid)), qf),
            None
        );
        events.extend(drain(&mut gw));
    }
    assert_eq!(events.last(), Some(&Event::BatchSettled { tag: 25 }));
    assert_eq!(gw.in_flight(), 0);
    // The next poll that lists it gives its Late, once.
    let (pid, pf) = loop {
        match take_sent(&mut w, is_poll) {
            Some(p) => break p,
            None => next_write(&mut gw, &mut w, 10),
        }
    };
    let ev = gw.on_response(&mut w, pid, answer(200, open), pf);
    assert!(matches!(ev, Some(Event::OpenOrders { .. })), "{ev:?}");
    assert_eq!(
        drain(&mut gw),
        [Event::Late {
            tag: 25,
            found: OrderState::Other
        }]
    );
}
