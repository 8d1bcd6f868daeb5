//! Bybit answers its open orders by pages: `limit` 1 to 50 (20 by default),
//! the newest first, and `nextPageCursor` for the next page
//! (<https://bybit-exchange.github.io/docs/v5/order/open-order>). An order left
//! Unresolved that rests behind 59 newer ones still gets its Late: the poll
//! asks pages of 50 and follows the cursor, each page a read charged on its own
//! (issue 43). The venue here is a model of that page, written from the doc.

use ergon_core::{Budget, Builder, Class, Flight, Ticket};
use ergon_gateway::{Event, Gateway, OrderState, Wire};
use ergon_io::client::{Refused, RequestId, Sent};
use ergon_io::http::Request;
use ergon_venues::adapt::Clock;
use ergon_venues::bybit::{self, Bybit};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Endpoints, NewOrder, OrderType, Prepared, Side, Symbol, TimeInForce,
};
use ergon_venues::response::Response;

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;
const T0: i64 = 1_000 * SEC;

/// A transport that records what was written: (id, target, flight).
struct Script {
    budget: Budget,
    now: i64,
    sent: Vec<(RequestId, String, Option<Flight>)>,
}

impl Wire for Script {
    fn now(&self) -> i64 {
        self.now
    }
    fn budget(&mut self) -> &mut Budget {
        &mut self.budget
    }
    fn send(&mut self, r: &Request<'_>, t: Ticket, _deadline: i64) -> Result<RequestId, Refused> {
        let id = RequestId(self.sent.len() as u64 + 1);
        self.sent.push((id, r.target.into(), Some(t.sent())));
        Ok(id)
    }
}

impl Script {
    /// The last request written and its flight (taken, to answer it).
    fn last(&mut self) -> (RequestId, String, Flight) {
        let l = self.sent.last_mut().expect("a request was written");
        (l.0, l.1.clone(), l.2.take().expect("not answered yet"))
    }
}

fn answer(body: &[u8]) -> Response<'_> {
    Response {
        status: 200,
        headers: &[],
        body,
    }
}

/// The value of `name` in `target`'s query, percent-decoded.
fn param(target: &str, name: &str) -> Option<String> {
    let q = target.split_once('?')?.1;
    let v = q
        .split('&')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))?;
    let mut out = Vec::new();
    let b = v.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            out.push(u8::from_str_radix(v.get(i + 1..i + 3)?, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Bybit's open-orders page over `open` (oldest first), as the doc says: the
/// newest first, `limit` 1..=50 or 20, a cursor naming the page's last order
/// (Bybit's cursors are percent-encoded text too), "" on the last page.
fn page(open: &[String], target: &str) -> String {
    let limit = match param(target, "limit") {
        None => 20,
        Some(l) => match l.parse::<usize>() {
            Ok(n @ 1..=50) => n,
            _ => return r#"{"retCode":10001,"retMsg":"params error","result":{}}"#.into(),
        },
    };
    let newest: Vec<&String> = open.iter().rev().collect();
    let start = match param(target, "cursor") {
        None => 0,
        Some(c) => {
            let n = c
                .strip_prefix("page_args%3D")
                .and_then(|c| c.strip_suffix("%26"))
                .and_then(|c| newest.iter().position(|o| *o == c))
                .expect("a cursor this venue gave");
            n + 1
        }
    };
    let rest = &newest[start.min(newest.len())..];
    let list: Vec<String> = rest
        .iter()
        .take(limit)
        .map(|o| format!(r#"{{"orderLinkId":"{o}","orderStatus":"New"}}"#))
        .collect();
    let next = match rest.len() > limit {
        true => format!("page_args%3D{}%26", rest[limit - 1]),
        false => String::new(),
    };
    format!(
        r#"{{"retCode":0,"retMsg":"OK","result":{{"category":"linear","list":[{}],"nextPageCursor":"{next}"}},"time":1700000010000}}"#,
        list.join(",")
    )
}

/// Places `by1` whose outcome stays unknown: it ends Unresolved, its id watched.
fn unresolved(gw: &mut Gateway<Bybit>, w: &mut Script) {
    let mut p = Prepared::with_capacity(512);
    let o = NewOrder {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(Decimal::new("49995.00").unwrap()),
        quantity: Decimal::new("0.010").unwrap(),
        client_order_id: ClientOrderId::new("by1").unwrap(),
        reduce_only: false,
    };
    gw.venue_mut().new_order(&mut p, &o, w.now).unwrap();
    gw.submit(w, &mut p, Class::Urgent, 5).expect("submitted");
    let (id, _, f) = w.last();
    w.now += 5 * MS;
    assert_eq!(
        gw.on_error(w, id, Sent::Maybe(f)),
        Some(Event::Reconciling { tag: 5 })
    );
    let empty = br#"{"retCode":0,"retMsg":"OK","result":{"list":[],"category":"linear"},"time":1700000000000}"#;
    for _ in 0..50 {
        let (qid, _, qf) = w.last();
        w.now += MS;
        if let Some(ev) = gw.on_response(w, qid, answer(empty), qf) {
            assert_eq!(ev, Event::Unresolved { tag: 5 });
            return;
        }
        let n = w.sent.len();
        while w.sent.len() == n {
            w.now = w.now.max(gw.poll_timeout().expect("a query is due"));
            gw.poll(w);
        }
    }
    panic!("never Unresolved");
}

/// A Bybit gateway whose order `by1` ended Unresolved (its id watched), and the
/// venue's 60 open orders, `by1` the oldest.
fn watching() -> (Gateway<Bybit>, Script, Vec<String>) {
    let mut b = Builder::default();
    let clock = Clock::anchor(T0, 1_700_000_000_000);
    let acct = Bybit::new(&mut b, clock, bybit::Config::default())
        .unwrap()
        .with_auth(bybit::Auth::new("k", b"s", 5_000).unwrap());
    let mut gw = Gateway::new(acct, "BTCUSDT", 8, 1024).unwrap();
    let mut w = Script {
        budget: b.build(T0).unwrap(),
        now: T0,
        sent: Vec::new(),
    };
    gw.set_unresolved_after_ns(3 * SEC);
    gw.set_watch_ns(600 * SEC);
    unresolved(&mut gw, &mut w);
    let open: Vec<String> = core::iter::once("by1".to_string())
        .chain((0..59).map(|n| format!("o{n}")))
        .collect();
    (gw, w, open)
}

/// Sends the next poll request; returns its target, id and flight.
fn next_poll(gw: &mut Gateway<Bybit>, w: &mut Script) -> (String, RequestId, Flight) {
    let n = w.sent.len();
    for _ in 0..10 {
        w.now = w.now.max(gw.poll_timeout().expect("a poll is due"));
        gw.poll(w);
        if w.sent.len() > n {
            let (id, target, f) = w.last();
            assert!(target.starts_with("/v5/order/realtime?"), "{target}");
            return (target, id, f);
        }
    }
    panic!("no poll written");
}

/// A one-off poll asked in the middle of a walk is a first page, whose answer
/// makes the event its caller waits for (the protection reads it after the
/// switch fired); the walk starts again from there.
#[test]
fn a_one_off_poll_during_a_walk_asks_the_first_page_and_gets_its_event() {
    let (mut gw, mut w, open) = watching();
    let mut open = open;
    open.retain(|o| o != "by1");
    gw.poll_open_orders(10 * SEC);
    let (target, id, f) = next_poll(&mut gw, &mut w);
    let body = page(&open, &target);
    let ev = gw.on_response(&mut w, id, answer(body.as_bytes()), f);
    assert!(matches!(ev, Some(Event::OpenOrders { .. })), "{ev:?}");
    // The walk's second page is on the wire when the one-off poll is asked.
    let (target, id, f) = next_poll(&mut gw, &mut w);
    assert!(target.contains("&cursor="), "{target}");
    gw.poll_open_orders_once(w.now);
    let body = page(&open, &target);
    // Its page's event (issue 43: every page makes one; it was None).
    let ev = gw.on_response(&mut w, id, answer(body.as_bytes()), f);
    assert!(
        matches!(ev, Some(Event::OpenOrders { page: 1, .. })),
        "{ev:?}"
    );
    let (target, id, f) = next_poll(&mut gw, &mut w);
    assert!(!target.contains("&cursor="), "a first page: {target}");
    let body = page(&open, &target);
    let ev = gw.on_response(&mut w, id, answer(body.as_bytes()), f);
    assert!(matches!(ev, Some(Event::OpenOrders { .. })), "{ev:?}");
}

#[test]
fn an_unresolved_order_behind_59_newer_gets_its_late_over_two_pages() {
    let (mut gw, mut w, open) = watching();
    gw.poll_open_orders(10 * SEC);
    let spent =
        |gw: &Gateway<Bybit>| -> u64 { gw.open_orders_spent().iter().map(|(_, n)| n).sum() };
    let (mut pages, mut events, mut lists, mut first) = (Vec::new(), Vec::new(), 0, 0);
    for _ in 0..20 {
        let n = w.sent.len();
        w.now = w.now.max(gw.poll_timeout().expect("a poll is due"));
        gw.poll(&mut w);
        if w.sent.len() == n {
            continue;
        }
        let (id, target, f) = w.last();
        assert!(target.starts_with("/v5/order/realtime?"), "{target}");
        let body = page(&open, &target);
        pages.push(target);
        if pages.len() == 1 {
            first = spent(&gw);
        }
        w.now += MS;
        if let Some(Event::OpenOrders { .. }) =
            gw.on_response(&mut w, id, answer(body.as_bytes()), f)
        {
            lists += 1;
        }
        while let Some(e) = gw.poll_event() {
            events.push(e);
        }
        if !events.is_empty() {
            break;
        }
    }
    let late = Event::Late {
        tag: 5,
        found: OrderState::Other,
    };
    assert_eq!(events, [late], "pages asked: {pages:#?}");
    assert_eq!(
        pages.len(),
        2,
        "50, then the 10 after the cursor: {pages:#?}"
    );
    assert!(pages.iter().all(|t| t.contains("&limit=50")), "{pages:#?}");
    assert!(
        pages[1].contains("&cursor=page_args%253Do9%2526"),
        "{pages:#?}"
    );
    // Issue 43: one OpenOrders event a page (it was 1, the first page's).
    assert_eq!(lists, 2, "one OpenOrders event a page");
    assert_eq!(spent(&gw), 2 * first, "each page charged as the first");
    assert!(first > 0);
}

/// A page lost on the wire is asked again by the same cursor at the next poll
/// (the walk does not start over, which the network's faults would repeat
/// before the oldest orders: seed 1011 `--venue bybit`); after
/// `OPEN_PAGE_TRIES` failures in a row the walk starts again from the first.
#[test]
fn a_failed_page_is_asked_again_by_its_cursor() {
    let (mut gw, mut w, open) = watching();
    gw.poll_open_orders(10 * SEC);
    let (target, id, f) = next_poll(&mut gw, &mut w);
    let body = page(&open, &target);
    gw.on_response(&mut w, id, answer(body.as_bytes()), f);
    let mut cursors = Vec::new();
    for _ in 0..ergon_gateway::OPEN_PAGE_TRIES {
        let (target, id, f) = next_poll(&mut gw, &mut w);
        cursors.push(param(&target, "cursor"));
        assert_eq!(gw.on_error(&mut w, id, Sent::Maybe(f)), None);
    }
    assert_eq!(cursors.len(), 5);
    assert!(
        cursors
            .iter()
            .all(|c| *c == Some("page_args%3Do9%26".into())),
        "{cursors:?}"
    );
    let (target, _, _) = next_poll(&mut gw, &mut w);
    assert_eq!(param(&target, "cursor"), None, "then the first page");
}
