//! The Binance Spot WebSocket API session: the documented signature, frames the
//! venue can verify, parts equal to the REST twins', a scripted sequence of answers
//! (Done, -2011, -2013, 429 with retryAfter, 418), `rateLimits` fed to the budget,
//! the fate of every id on disconnect, user data stream events, no allocation in
//! steady state, and arbitrary bytes as answers never panic nor change anything.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use ergon_core::{BucketId, Budget, Verdict};
use ergon_venues::adapt::{Clock, Error, Request, Venue};
use ergon_venues::binance_spot::{Auth, BinanceSpot};
use ergon_venues::binance_spot_ws::{
    read_order, read_placed, signature, Call, Fate, FrameError, Incoming, PrepareError, Session,
};
use ergon_venues::classify::{BINANCE_GUARD_NS, FIXTURE_NOW_UTC_MS, SPOT_EXCHANGE_INFO};
use ergon_venues::endpoint::{
    CancelReplace, ClientOrderId, Decimal, Endpoints, HmacKey, Lookup, NewOrder, OrderRef,
    OrderState, OrderType, Placed, Prepared, Side, Symbol, TimeInForce,
};
use hmac::{Hmac, Mac};
use proptest::prelude::*;
use sha2::Sha256;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|a| a.set(a.get() + 1));
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        ALLOCS.with(|a| a.set(a.get() + 1));
        System.realloc(ptr, layout, new)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(|a| a.get())
}

const SEC: i64 = 1_000_000_000;
/// The caller's clock when the venue's UTC is `FIXTURE_NOW_UTC_MS` (on a 10 s
/// boundary, 20 s into a minute).
const NOW: i64 = 1_000 * SEC;
const API_KEY: &str = "vmPUZE6mv9SD5VNHk4HlWFsOr6aKE2zvsw0MuIgwCIPy6utIco14y7Ju91duEh8A";
const SECRET: &str = "NhqPtmdSJYdKjVHjA7PZj4Mge3R5YNiP1e3UZjInClVN65XAbvqqM6A7H5fATj0j";

fn adapter(b: &mut ergon_core::Builder) -> BinanceSpot {
    BinanceSpot::from_exchange_info(
        SPOT_EXCHANGE_INFO,
        b,
        Clock::anchor(NOW, FIXTURE_NOW_UTC_MS),
        BINANCE_GUARD_NS,
    )
    .unwrap()
}

fn session(capacity: usize) -> (Session, Budget) {
    let mut b = Budget::builder();
    let spot = adapter(&mut b);
    let s = Session::new(spot, Some((API_KEY, SECRET.as_bytes())), 5000, capacity).unwrap();
    (s, b.build(NOW).unwrap())
}

fn cid(s: &str) -> ClientOrderId {
    ClientOrderId::new(s).unwrap()
}

fn order(id: &str) -> NewOrder<'static> {
    NewOrder {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        side: Side::Sell,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(Decimal::new("52000.00").unwrap()),
        quantity: Decimal::new("0.01000000").unwrap(),
        client_order_id: cid(id),
        reduce_only: false,
    }
}

fn oref(id: &str) -> OrderRef<'static> {
    OrderRef {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        client_order_id: cid(id),
    }
}

fn bucket(b: &Budget, name: &str) -> BucketId {
    b.bucket(name).unwrap()
}

#[test]
fn signature_matches_the_documented_example() {
    // "SIGNED request example (HMAC)", web-socket-api.md: both examples, given in
    // the request's order (not sorted): the payload sorts them.
    let key = HmacKey::new(SECRET.as_bytes());
    let mut out = Vec::new();
    signature(
        &key,
        &[
            ("symbol", "BTCUSDT"),
            ("side", "SELL"),
            ("type", "LIMIT"),
            ("timeInForce", "GTC"),
            ("quantity", "0.01000000"),
            ("price", "52000.00"),
            ("recvWindow", "100"),
            ("timestamp", "1645423376532"),
            ("apiKey", API_KEY),
        ],
        &mut out,
    )
    .unwrap();
    assert_eq!(
        out,
        b"aa1b5712c094bc4e57c05a1a5c1fd8d88dcd628338ea863fec7b88e59fe2db24"
    );
    signature(
        &key,
        &[
            ("symbol", "１２３４５６"),
            ("side", "BUY"),
            ("type", "LIMIT"),
            ("timeInForce", "GTC"),
            ("quantity", "1.00000000"),
            ("price", "0.10000000"),
            ("recvWindow", "5000"),
            ("timestamp", "1645423376532"),
            ("apiKey", API_KEY),
        ],
        &mut out,
    )
    .unwrap();
    assert_eq!(
        out,
        b"b33892ae8e687c939f4468c6268ddd4c40ac1af18ad19a064864c47bae0752cd"
    );
    let many = [("k", "v"); 17];
    assert_eq!(
        signature(&key, &many, &mut out),
        Err(Error::BadArgument("more than 16 params"))
    );
    assert!(out.is_empty());
}

/// The frame's params, signed as the venue checks them: every param but
/// `signature`, sorted by name, values as written (numbers as their digits).
fn venue_checks(frame: &[u8]) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_slice(frame).unwrap();
    let params = v["params"].as_object().unwrap();
    let mut pairs: Vec<(String, String)> = params
        .iter()
        .filter(|(k, _)| *k != "signature")
        .map(|(k, v)| {
            let text = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), text)
        })
        .collect();
    pairs.sort();
    let payload: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(payload.join("&").as_bytes());
    let want: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(params["signature"].as_str().unwrap(), want);
    v
}

#[test]
fn frames_carry_ids_methods_and_signatures_the_venue_accepts() {
    let (mut s, _) = session(16);
    let mut out = Vec::new();
    let p = s
        .prepare(&Call::Place(order("mm-1")), &mut out, NOW)
        .unwrap();
    let v = venue_checks(&out);
    assert_eq!(v["id"], p.id);
    assert_eq!(v["method"], "order.place");
    assert_eq!(v["params"]["newClientOrderId"], "mm-1");
    assert_eq!(v["params"]["timestamp"], FIXTURE_NOW_UTC_MS);
    assert_eq!(v["params"]["recvWindow"], 5000);
    assert_eq!(v["params"]["apiKey"], API_KEY);
    assert_eq!(p.client_order_id, Some(cid("mm-1")));
    assert_eq!(p.deadline_ns, NOW + 5 * SEC);

    let p2 = s
        .prepare(
            &Call::CancelReplace {
                cancel: cid("mm-1"),
                new: order("mm-2"),
            },
            &mut out,
            NOW,
        )
        .unwrap();
    assert_eq!(p2.id, p.id + 1);
    let v = venue_checks(&out);
    assert_eq!(v["method"], "order.cancelReplace");
    assert_eq!(v["params"]["cancelOrigClientOrderId"], "mm-1");
    assert_eq!(v["params"]["cancelReplaceMode"], "STOP_ON_FAILURE");

    for (call, method) in [
        (Call::Cancel(oref("mm-2")), "order.cancel"),
        (Call::Status(oref("mm-2")), "order.status"),
        (Call::OpenOrders(None), "openOrders.status"),
        (Call::Account, "account.status"),
        (Call::Subscribe, "userDataStream.subscribe.signature"),
    ] {
        s.prepare(&call, &mut out, NOW).unwrap();
        let v = venue_checks(&out);
        assert_eq!(v["method"], method);
    }
    // Unsigned: no apiKey, no signature.
    for (call, method) in [
        (Call::Time, "time"),
        (Call::ExchangeInfo(None), "exchangeInfo"),
        (Call::Unsubscribe(Some(7)), "userDataStream.unsubscribe"),
    ] {
        s.prepare(&call, &mut out, NOW).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["method"], method);
        assert!(v["params"].get("signature").is_none(), "{v}");
        assert!(v["params"].get("apiKey").is_none(), "{v}");
    }
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["params"]["subscriptionId"], 7);

    // Bad arguments and no key: refused, nothing reserved, nothing written.
    let before = s.in_flight();
    let mut market = order("mm-3");
    market.order_type = OrderType::Market;
    let e = s.prepare(&Call::Place(market), &mut out, NOW).unwrap_err();
    assert_eq!(
        e,
        PrepareError::Bad(Error::BadArgument("price of a market order"))
    );
    assert!(out.is_empty());
    let mut b = Budget::builder();
    let mut keyless = Session::with_defaults(adapter(&mut b), None, 4).unwrap();
    assert_eq!(
        keyless.prepare(&Call::Account, &mut out, NOW).unwrap_err(),
        PrepareError::Bad(Error::NoKey)
    );
    assert!(keyless.prepare(&Call::Time, &mut out, NOW).is_ok());
    assert_eq!(s.in_flight(), before);
}

#[test]
fn parts_equal_the_rest_twins() {
    let (mut s, budget) = session(64);
    let mut b = Budget::builder();
    let mut rest = adapter(&mut b).with_auth(Auth::new(API_KEY, SECRET.as_bytes(), 5000).unwrap());
    let mut out = Vec::new();
    let mut p = Prepared::with_capacity(1024);
    let sym = Symbol::new("BTCUSDT").unwrap();

    let pairs: Vec<(Call<'_>, Vec<ergon_core::Part>)> = vec![
        (
            Call::Place(order("a")),
            rest.new_order(&mut p, &order("a"), NOW)
                .unwrap()
                .parts()
                .to_vec(),
        ),
        (
            Call::Cancel(oref("a")),
            rest.cancel(&mut p, &oref("a"), NOW)
                .unwrap()
                .parts()
                .to_vec(),
        ),
        (
            Call::CancelReplace {
                cancel: cid("a"),
                new: order("b"),
            },
            rest.cancel_replace(
                &mut p,
                &CancelReplace {
                    cancel: cid("a"),
                    new: order("b"),
                },
                NOW,
            )
            .unwrap()
            .parts()
            .to_vec(),
        ),
        (
            Call::Status(oref("a")),
            rest.query_order(&mut p, &oref("a"), NOW)
                .unwrap()
                .parts()
                .to_vec(),
        ),
        (
            Call::OpenOrders(Some(sym)),
            rest.open_orders(&mut p, Some(sym), NOW)
                .unwrap()
                .parts()
                .to_vec(),
        ),
        (
            Call::OpenOrders(None),
            rest.open_orders(&mut p, None, NOW)
                .unwrap()
                .parts()
                .to_vec(),
        ),
        (
            Call::Account,
            rest.account(&mut p, NOW).unwrap().parts().to_vec(),
        ),
    ];
    for (call, want) in pairs {
        let got = s.prepare(&call, &mut out, NOW).unwrap();
        let idx = |v: &[ergon_core::Part]| -> Vec<(usize, u32)> {
            v.iter().map(|p| (p.bucket.index(), p.cost)).collect()
        };
        assert_eq!(idx(&got.parts), idx(&want), "{call:?}");
    }

    // The documented weights, on REQUEST_WEIGHT_1M; ORDERS for placements only.
    let w = bucket(&budget, "REQUEST_WEIGHT_1M");
    let o = bucket(&budget, "ORDERS_10S");
    let cost = |parts: &[ergon_core::Part], b: BucketId| {
        parts.iter().find(|p| p.bucket == b).map_or(0, |p| p.cost)
    };
    for (call, weight, orders) in [
        (Call::Time, 1, 0),
        (Call::ExchangeInfo(None), 20, 0),
        (Call::Place(order("c")), 1, 1),
        (Call::Cancel(oref("c")), 1, 0),
        (
            Call::CancelReplace {
                cancel: cid("c"),
                new: order("d"),
            },
            1,
            1,
        ),
        (Call::Status(oref("c")), 4, 0),
        (Call::OpenOrders(Some(sym)), 6, 0),
        (Call::OpenOrders(None), 80, 0),
        (Call::Account, 20, 0),
        (Call::Subscribe, 2, 0),
        (Call::Unsubscribe(None), 2, 0),
    ] {
        let got = s.prepare(&call, &mut out, NOW).unwrap();
        assert_eq!(cost(&got.parts, w), weight, "{call:?}");
        assert_eq!(cost(&got.parts, o), orders, "{call:?}");
        assert_eq!(got.parts, s.adapter().parts(call.kind()).unwrap());
    }
}

fn answer(
    s: &mut Session,
    budget: &mut Budget,
    frame: &str,
    now: i64,
) -> Result<Incoming, FrameError> {
    s.on_frame(frame.as_bytes(), budget, now)
}

fn verdict(r: Result<Incoming, FrameError>) -> Result<Verdict, Error> {
    match r {
        Ok(Incoming::Answer(a)) => a.verdict,
        other => panic!("not an answer: {other:?}"),
    }
}

#[test]
fn scripted_answers_by_the_rest_rules() {
    let (mut s, mut budget) = session(16);
    let mut out = Vec::new();
    let calls = [
        Call::Place(order("p1")),
        Call::Cancel(oref("p0")),
        Call::Status(oref("p0")),
        Call::Place(order("p2")),
        Call::Place(order("p3")),
    ];
    let ids: Vec<u64> = calls
        .iter()
        .map(|c| {
            let p = s.prepare(c, &mut out, NOW).unwrap();
            assert!(s.sent(p.id));
            p.id
        })
        .collect();
    let ip = s.adapter().limits.ip();
    let w = bucket(&budget, "REQUEST_WEIGHT_1M");
    let o10 = bucket(&budget, "ORDERS_10S");
    let o1d = bucket(&budget, "ORDERS_1D");

    // Done, with rateLimits raising the counts (and an interval not declared, skipped).
    let done = format!(
        r#"{{"id":{},"status":200,"result":{{"symbol":"BTCUSDT","orderId":12,"clientOrderId":"p1","status":"NEW"}},"rateLimits":[
        {{"rateLimitType":"ORDERS","interval":"SECOND","intervalNum":10,"limit":100,"count":3}},
        {{"rateLimitType":"ORDERS","interval":"DAY","intervalNum":1,"limit":200000,"count":41}},
        {{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,"limit":6000,"count":57}},
        {{"rateLimitType":"REQUEST_WEIGHT","interval":"HOUR","intervalNum":1,"limit":9,"count":8}}]}}"#,
        ids[0]
    );
    let r = answer(&mut s, &mut budget, &done, NOW);
    match r {
        Ok(Incoming::Answer(a)) => {
            assert_eq!(a.verdict, Ok(Verdict::Done));
            assert_eq!(a.client_order_id, Some(cid("p1")));
            assert_eq!(a.kind, Request::Order);
            assert_eq!(a.status, 200);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(budget.stats(w).unwrap().used, 57);
    assert_eq!(budget.stats(o10).unwrap().used, 3);
    assert_eq!(budget.stats(o1d).unwrap().used, 41);
    // Answered: the id is gone.
    assert_eq!(
        answer(&mut s, &mut budget, &done, NOW),
        Err(FrameError::UnknownId(ids[0]))
    );

    // -2011 (cancel of an unknown order) and -2013 (no such order): rejected.
    let rej = |id: u64, code: i64| {
        format!(
            r#"{{"id":{id},"status":400,"error":{{"code":{code},"msg":"Unknown order sent."}}}}"#
        )
    };
    assert_eq!(
        verdict(answer(&mut s, &mut budget, &rej(ids[1], -2011), NOW)),
        Ok(Verdict::Rejected)
    );
    assert_eq!(
        verdict(answer(&mut s, &mut budget, &rej(ids[2], -2013), NOW)),
        Ok(Verdict::Rejected)
    );

    // 429 -1015 with retryAfter 7 s ahead: ORDERS_10S held until then.
    let retry_ms = FIXTURE_NOW_UTC_MS + 7_000;
    let throttled = format!(
        r#"{{"id":{},"status":429,"error":{{"code":-1015,"msg":"Too many new orders; current limit is 100 orders per 10 SECOND.","data":{{"serverTime":{FIXTURE_NOW_UTC_MS},"retryAfter":{retry_ms}}}}}}}"#,
        ids[3]
    );
    match verdict(answer(&mut s, &mut budget, &throttled, NOW)) {
        Ok(Verdict::Throttled { bucket, until_ns }) => {
            assert_eq!(bucket, o10);
            assert!(
                (NOW + 7 * SEC..NOW + 8 * SEC).contains(&until_ns),
                "{until_ns}"
            );
            let held = budget.stats(o10).unwrap().held_until_ns.unwrap();
            assert!(held >= NOW + 7 * SEC, "{held}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!budget.is_halted(ip).unwrap());

    // 418: the IP gate halts; the ban's end is the venue's retryAfter.
    let ban_ms = FIXTURE_NOW_UTC_MS + 300_000;
    let banned = format!(
        r#"{{"id":{},"status":418,"error":{{"code":-1003,"msg":"Way too much request weight used; IP banned until {ban_ms}. Please use WebSocket Streams for live updates to avoid bans.","data":{{"serverTime":{FIXTURE_NOW_UTC_MS},"retryAfter":{ban_ms}}}}}}}"#,
        ids[4]
    );
    match verdict(answer(&mut s, &mut budget, &banned, NOW)) {
        Ok(Verdict::Banned { bucket, until_ns }) => {
            assert_eq!(bucket, ip);
            assert_eq!(until_ns, NOW + 300 * SEC);
        }
        other => panic!("{other:?}"),
    }
    assert!(budget.is_halted(ip).unwrap());
    assert_eq!(s.in_flight(), 0);
}

#[test]
fn bad_rate_limits_are_named_with_the_verdict_standing() {
    let (mut s, mut budget) = session(4);
    let mut out = Vec::new();
    let p = s.prepare(&Call::Time, &mut out, NOW).unwrap();
    s.sent(p.id);
    let frame = format!(
        r#"{{"id":{},"status":200,"result":{{"serverTime":1}},"rateLimits":[{{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,"count":"x"}}]}}"#,
        p.id
    );
    assert_eq!(
        verdict(answer(&mut s, &mut budget, &frame, NOW)),
        Err(Error::BadHeader {
            verdict: Verdict::Done,
            header: "rateLimits"
        })
    );
}

#[test]
fn disconnect_makes_every_unanswered_id_unknown() {
    let (mut s, mut budget) = session(8);
    let mut out = Vec::new();
    let a = s.prepare(&Call::Place(order("d1")), &mut out, NOW).unwrap();
    let b = s.prepare(&Call::Cancel(oref("d0")), &mut out, NOW).unwrap();
    let c = s.prepare(&Call::Place(order("d2")), &mut out, NOW).unwrap();
    let d = s.prepare(&Call::Place(order("d3")), &mut out, NOW).unwrap();
    for id in [a.id, b.id, c.id] {
        assert!(s.sent(id));
    }
    // c is answered before the drop; d is never written.
    let done = format!(r#"{{"id":{},"status":200,"result":{{"orderId":1}}}}"#, c.id);
    assert_eq!(
        verdict(answer(&mut s, &mut budget, &done, NOW)),
        Ok(Verdict::Done)
    );
    // A written request cannot be taken back as unsent.
    assert!(!s.unsent(a.id));
    let mut fates: Vec<Fate> = s.on_disconnect().collect();
    fates.sort_by_key(|f| match f {
        Fate::Unknown { id, .. } | Fate::NotWritten { id } => *id,
    });
    assert_eq!(
        fates,
        vec![
            Fate::Unknown {
                id: a.id,
                kind: Request::Order,
                client_order_id: Some(cid("d1")),
                deadline_ns: a.deadline_ns,
            },
            Fate::Unknown {
                id: b.id,
                kind: Request::Cancel,
                client_order_id: Some(cid("d0")),
                deadline_ns: b.deadline_ns,
            },
            Fate::NotWritten { id: d.id },
        ]
    );
    assert_eq!(s.in_flight(), 0);
    assert_eq!(s.on_disconnect().count(), 0);
    // A late answer on the old ids matches nothing.
    let late = format!(r#"{{"id":{},"status":200,"result":{{}}}}"#, a.id);
    assert_eq!(
        answer(&mut s, &mut budget, &late, NOW),
        Err(FrameError::UnknownId(a.id))
    );
}

#[test]
fn the_table_is_fixed_and_unsent_frees_a_slot() {
    let (mut s, _) = session(2);
    let mut out = Vec::new();
    let a = s.prepare(&Call::Time, &mut out, NOW).unwrap();
    let _b = s.prepare(&Call::Time, &mut out, NOW).unwrap();
    assert_eq!(
        s.prepare(&Call::Time, &mut out, NOW),
        Err(PrepareError::Full)
    );
    assert!(out.is_empty());
    assert!(s.unsent(a.id));
    assert!(s.prepare(&Call::Time, &mut out, NOW).is_ok());
}

/// Issue 39, item 4: a request never answered holds its own slot only; on main
/// id `n` could only take slot `n % capacity`, so the third request here waited
/// for the first's slot with the second's free.
#[test]
fn a_slow_answer_holds_only_its_own_slot() {
    let (mut s, mut budget) = session(2);
    let mut out = Vec::new();
    let slow = s.prepare(&Call::Time, &mut out, NOW).unwrap();
    assert!(s.sent(slow.id));
    for _ in 0..10 {
        let p = s
            .prepare(&Call::Time, &mut out, NOW)
            .expect("a slot is free");
        assert!(s.sent(p.id));
        let ok = format!(
            r#"{{"id":{},"status":200,"result":{{"serverTime":1}}}}"#,
            p.id
        );
        assert!(answer(&mut s, &mut budget, &ok, NOW).is_ok());
        assert_eq!(s.in_flight(), 1);
    }
}

#[test]
fn execution_reports_are_typed_events() {
    let (mut s, mut budget) = session(2);
    let ev = br#"{"subscriptionId":0,"event":{"e":"executionReport","E":1,"s":"BTCUSDT","c":"mm-9","S":"BUY","o":"LIMIT","f":"GTC","q":"1.00000000","p":"0.10000000","C":"","x":"TRADE","X":"PARTIALLY_FILLED","r":"NONE","i":4293153,"l":"0.40000000","z":"0.40000000","T":1}}"#;
    match s.on_frame(ev, &mut budget, NOW).unwrap() {
        Incoming::Execution(e) => {
            assert_eq!(e.subscription_id, 0);
            assert_eq!(e.client_order_id, cid("mm-9"));
            assert_eq!(e.orig_client_order_id, None);
            assert_eq!(e.state, OrderState::PartiallyFilled);
            assert_eq!(e.filled.as_str(), "0.40000000");
            assert_eq!(e.venue_order_id.as_str(), "4293153");
        }
        other => panic!("{other:?}"),
    }
    let cancel = br#"{"subscriptionId":3,"event":{"e":"executionReport","c":"cx-1","C":"mm-9","X":"CANCELED","i":4293153,"z":"0.40000000"}}"#;
    match s.on_frame(cancel, &mut budget, NOW).unwrap() {
        Incoming::Execution(e) => {
            assert_eq!(e.orig_client_order_id, Some(cid("mm-9")));
            assert_eq!(e.state, OrderState::Canceled);
        }
        other => panic!("{other:?}"),
    }
    let other = br#"{"subscriptionId":3,"event":{"e":"outboundAccountPosition","E":1}}"#;
    assert_eq!(
        s.on_frame(other, &mut budget, NOW),
        Ok(Incoming::OtherEvent(3))
    );
    let bad = br#"{"subscriptionId":3,"event":{"e":"executionReport","c":"a&b","X":"NEW","i":1,"z":"0"}}"#;
    assert_eq!(
        s.on_frame(bad, &mut budget, NOW),
        Err(FrameError::BadEvent("c"))
    );
    assert_eq!(
        s.on_frame(
            br#"{"id":null,"status":400,"error":{"code":-1000}}"#,
            &mut budget,
            NOW
        ),
        Err(FrameError::NoId)
    );
}

#[test]
fn steady_state_allocates_nothing() {
    let (mut s, mut budget) = session(64);
    let mut out = Vec::with_capacity(1024);
    let mut answer = Vec::with_capacity(1024);
    let mut round = |s: &mut Session, out: &mut Vec<u8>, answer: &mut Vec<u8>| {
        for call in [
            Call::Place(order("z1")),
            Call::CancelReplace {
                cancel: cid("z1"),
                new: order("z2"),
            },
            Call::Cancel(oref("z2")),
            Call::Status(oref("z2")),
        ] {
            let p = s.prepare(&call, out, NOW).unwrap();
            s.sent(p.id);
            answer.clear();
            use std::io::Write;
            write!(
                answer,
                r#"{{"id":{},"status":200,"result":{{"orderId":1}},"rateLimits":[{{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,"limit":6000,"count":9}}]}}"#,
                p.id
            )
            .unwrap();
            let r = s.on_frame(answer, &mut budget, NOW);
            assert!(matches!(r, Ok(Incoming::Answer(_))), "{r:?}");
        }
    };
    round(&mut s, &mut out, &mut answer);
    let before = allocs();
    for _ in 0..200 {
        round(&mut s, &mut out, &mut answer);
    }
    assert_eq!(allocs() - before, 0);
    let v = std::hint::black_box(vec![1u8; 8]);
    assert_eq!(allocs() - before, 1, "{v:?}");
}

fn state(b: &Budget) -> Vec<(u64, Option<i64>, bool)> {
    b.ids()
        .map(|id| {
            let s = b.stats(id).unwrap();
            (s.used, s.held_until_ns, s.halted)
        })
        .collect()
}

fn answer_like() -> impl Strategy<Value = Vec<u8>> {
    (
        0u64..6,
        prop_oneof![Just(200u16), Just(400), Just(418), Just(429), any::<u16>()],
        any::<i32>(),
        any::<i64>(),
        any::<u64>(),
        proptest::collection::vec((0usize..200, any::<u8>()), 0..4),
        0usize..400,
    )
        .prop_map(|(id, status, code, retry, count, edits, cut)| {
            let mut f = format!(
                r#"{{"id":{id},"status":{status},"error":{{"code":{code},"msg":"x","data":{{"retryAfter":{retry}}}}},"rateLimits":[{{"rateLimitType":"ORDERS","interval":"SECOND","intervalNum":10,"count":{count}}}]}}"#
            )
            .into_bytes();
            for (at, b) in edits {
                if let Some(c) = f.get_mut(at) {
                    *c = b;
                }
            }
            f.truncate(cut.max(1));
            f
        })
}

proptest! {
    #[test]
    fn arbitrary_answers_never_panic_and_errors_change_nothing(
        frames in proptest::collection::vec(
            prop_oneof![proptest::collection::vec(any::<u8>(), 0..64), answer_like()],
            1..8,
        ),
    ) {
        let (mut s, mut budget) = session(8);
        let mut out = Vec::new();
        for c in [Call::Place(order("f1")), Call::Cancel(oref("f1")), Call::Time] {
            let p = s.prepare(&c, &mut out, NOW).unwrap();
            s.sent(p.id);
        }
        for f in frames {
            let (before, in_flight) = (state(&budget), s.in_flight());
            let _ = (read_order(&f), read_placed(&f));
            match s.on_frame(&f, &mut budget, NOW) {
                Err(_) => {
                    prop_assert_eq!(state(&budget), before);
                    prop_assert_eq!(s.in_flight(), in_flight);
                }
                Ok(Incoming::Answer(_)) => prop_assert_eq!(s.in_flight(), in_flight - 1),
                Ok(_) => prop_assert_eq!(s.in_flight(), in_flight),
            }
        }
        prop_assert!(s.on_disconnect().count() <= 3);
    }
}

#[test]
fn answers_read_for_reconcile_like_rest() {
    let found = br#"{"id":3,"status":200,"result":{"symbol":"BTCUSDT","orderId":12569099453,"clientOrderId":"mm-1","executedQty":"0.00500000","status":"PARTIALLY_FILLED"}}"#;
    match read_order(found) {
        Lookup::Found(o) => {
            assert_eq!(o.state, OrderState::PartiallyFilled);
            assert_eq!(o.venue_order_id.as_str(), "12569099453");
            assert_eq!(o.filled.unwrap().as_str(), "0.00500000");
        }
        other => panic!("{other:?}"),
    }
    let missing = br#"{"id":3,"status":400,"error":{"code":-2013,"msg":"Order does not exist."}}"#;
    assert_eq!(read_order(missing), Lookup::NotFound);
    let busy = br#"{"id":3,"status":503,"error":{"code":-1008,"msg":"busy"}}"#;
    assert_eq!(read_order(busy), Lookup::Unknown);
    assert_eq!(read_order(b"\xff"), Lookup::Unknown);

    assert!(matches!(read_placed(found), Placed::Accepted(_)));
    let refused = br#"{"id":4,"status":400,"error":{"code":-2010,"msg":"Duplicate order sent."}}"#;
    assert_eq!(read_placed(refused), Placed::Refused);
    assert_eq!(read_placed(busy), Placed::Unknown);
    assert_eq!(read_placed(b"{}"), Placed::Unknown);
}

/// A request prepared for REST goes over the WebSocket API as its twin: the same
/// frame as the typed call at the same time (same params, timestamp, recvWindow,
/// signature), the REST parts, kind, deadline and client order id; a request
/// without a twin is refused with nothing reserved.
#[test]
fn rest_requests_become_their_websocket_twins() {
    let (mut s, _) = session(16);
    let mut b = Budget::builder();
    let auth = Auth::new(API_KEY, SECRET.as_bytes(), 5000).unwrap();
    let mut rest = adapter(&mut b).with_auth(auth);
    let mut p = Prepared::with_capacity(1024);
    let (mut typed, mut twin) = (Vec::new(), Vec::new());
    let sym = Symbol::new("BTCUSDT").unwrap();
    let cr = CancelReplace {
        cancel: cid("mm-1"),
        new: order("mm-2"),
    };
    type Prep = Box<dyn Fn(&mut BinanceSpot, &mut Prepared)>;
    let cases: Vec<(Call<'_>, Prep)> = vec![
        (
            Call::Place(order("mm-1")),
            Box::new(|v, p| {
                let _ = v.new_order(p, &order("mm-1"), NOW);
            }),
        ),
        (
            Call::Cancel(oref("mm-1")),
            Box::new(|v, p| {
                let _ = v.cancel(p, &oref("mm-1"), NOW);
            }),
        ),
        (
            Call::CancelReplace {
                cancel: cid("mm-1"),
                new: order("mm-2"),
            },
            Box::new(move |v, p| {
                let _ = v.cancel_replace(p, &cr, NOW);
            }),
        ),
        (
            Call::Status(oref("mm-2")),
            Box::new(|v, p| {
                let _ = v.query_order(p, &oref("mm-2"), NOW);
            }),
        ),
        (
            Call::OpenOrders(Some(sym)),
            Box::new(move |v, p| {
                let _ = v.open_orders(p, Some(sym), NOW);
            }),
        ),
    ];
    for (call, prep) in cases {
        prep(&mut rest, &mut p);
        assert!(!p.is_empty());
        let want = s.prepare(&call, &mut typed, NOW).unwrap();
        assert!(s.unsent(want.id));
        let got = s.prepare_rest(&p, &mut twin).unwrap();
        let (a, b): (serde_json::Value, serde_json::Value) =
            (serde_json::from_slice(&typed).unwrap(), venue_checks(&twin));
        assert_eq!(a["method"], b["method"]);
        assert_eq!(a["params"], b["params"], "{}", call.method());
        assert_eq!(b["id"], got.id);
        assert_eq!(got.kind, p.kind().unwrap());
        assert_eq!(&got.parts[..], p.parts());
        assert_eq!(got.deadline_ns, p.deadline_ns());
        assert_eq!(got.client_order_id.as_ref(), p.client_order_id());
        assert!(s.unsent(got.id));
    }
    // The book has no twin here: refused, nothing reserved, nothing written.
    rest.book(&mut p, sym, 100, NOW).unwrap();
    let before = s.in_flight();
    assert!(matches!(
        s.prepare_rest(&p, &mut twin),
        Err(PrepareError::Bad(Error::BadArgument(_)))
    ));
    assert!(twin.is_empty());
    assert_eq!(s.in_flight(), before);
}

/// An order counted 5 s into a 10 s window (its result's `transactTime`) whose
/// answer arrives 2 s into the next: its `rateLimits` count is the window it was
/// counted in, so the next window starts empty; without the stamp it can only be
/// taken as the next window's.
#[test]
fn a_late_order_count_is_booked_in_the_window_of_its_transact_time() {
    let mut used = Vec::new();
    for stamp in [
        format!(",\"transactTime\":{}", FIXTURE_NOW_UTC_MS + 5_000),
        String::new(),
    ] {
        let (mut s, mut budget) = session(4);
        let mut out = Vec::new();
        let id = s
            .prepare(&Call::Place(order("p1")), &mut out, NOW)
            .unwrap()
            .id;
        assert!(s.sent(id));
        let frame = format!(
            r#"{{"id":{id},"status":200,"result":{{"symbol":"BTCUSDT","orderId":12,"clientOrderId":"p1","status":"NEW"{stamp}}},"rateLimits":[
            {{"rateLimitType":"ORDERS","interval":"SECOND","intervalNum":10,"limit":100,"count":7}}]}}"#
        );
        let read_at = NOW + 12 * SEC;
        assert_eq!(
            verdict(answer(&mut s, &mut budget, &frame, read_at)),
            Ok(Verdict::Done)
        );
        budget.tick(read_at);
        used.push(budget.stats(bucket(&budget, "ORDERS_10S")).unwrap().used);
    }
    assert_eq!(used, [0, 7], "stamped, then unstamped");
}
