//! The Deribit WebSocket order-entry session: the `public/auth` signature against
//! openssl, the REST requests' twins as exact JSON-RPC frames, a full table, the
//! answers read by the REST rules (Done, the 10028 hold, 10009 Rejected), the
//! heartbeat, unknown ids changing nothing, the fate of every id on disconnect, no
//! allocation in steady state, and arbitrary bytes never panicking.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write as _;

use ergon_core::{Budget, Verdict};
use ergon_venues::adapt::{Clock, Error, Request, Venue};
use ergon_venues::binance_spot::BinanceSpot;
use ergon_venues::classify::{BINANCE_GUARD_NS, SPOT_EXCHANGE_INFO};
use ergon_venues::deribit::{self, CodCall, CodScope, Deribit};
use ergon_venues::deribit_ws::{
    as_response, read_auth, Answer, Call, Fate, FrameError, Incoming, PrepareError, Session,
};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Endpoints, NewOrder, OrderRef, OrderType, Prepared, Side, Symbol,
    TimeInForce,
};
use ergon_venues::response::Response;
use ergon_venues::switch::SwitchAnswer;
use proptest::prelude::*;

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

const UTC_MS: i64 = 1_700_000_000_000;
const SEC: i64 = 1_000_000_000;

fn adapter(b: &mut ergon_core::Builder) -> Deribit {
    Deribit::new(b, Clock::anchor(0, UTC_MS), deribit::Config::default())
        .unwrap()
        .with_auth("client-id", "client-secret")
        .unwrap()
}

fn session(capacity: usize) -> (Session, Budget) {
    let mut b = Budget::builder();
    let s = Session::over(adapter(&mut b), capacity).unwrap();
    (s, b.build(0).unwrap())
}

fn cid(s: &str) -> ClientOrderId {
    ClientOrderId::new(s).unwrap()
}

fn order(side: Side, order_type: OrderType, id: &str) -> NewOrder<'static> {
    NewOrder {
        symbol: Symbol::new("BTC-PERPETUAL").unwrap(),
        side,
        order_type,
        price: Some(Decimal::new("27500.5").unwrap()),
        quantity: Decimal::new("0.01").unwrap(),
        client_order_id: cid(id),
        reduce_only: false,
    }
}

fn buy(id: &str) -> NewOrder<'static> {
    order(Side::Buy, OrderType::Limit(TimeInForce::Gtc), id)
}

fn oref(symbol: &'static str, id: &str) -> OrderRef<'static> {
    OrderRef {
        symbol: Symbol::new(symbol).unwrap(),
        client_order_id: cid(id),
    }
}

fn text(out: &[u8]) -> &str {
    std::str::from_utf8(out).unwrap()
}

/// Bucket state, to show a frame changed nothing.
fn state(b: &Budget) -> Vec<(u64, Option<i64>, bool)> {
    b.ids()
        .map(|id| {
            let s = b.stats(id).unwrap();
            (s.used, s.held_until_ns, s.halted)
        })
        .collect()
}

#[test]
fn a_session_needs_the_adapters_credentials() {
    let mut b = Budget::builder();
    let bare = Deribit::new(&mut b, Clock::anchor(0, UTC_MS), deribit::Config::default()).unwrap();
    assert_eq!(Session::over(bare, 4).unwrap_err(), Error::NoKey);
    assert_eq!(
        Session::over(adapter(&mut Budget::builder()), 0).unwrap_err(),
        Error::BadArgument("capacity (at least 1)")
    );
    let (s, _) = session(4);
    let shown = format!("{s:?}");
    assert!(!shown.contains("client-secret"), "{shown}");
    assert!(!shown.contains("client-id"), "{shown}");
}

#[test]
fn auth_is_signed_as_documented() {
    let (mut s, _) = session(4);
    let mut out = Vec::new();
    let p = s.auth(&mut out, 0).unwrap();
    // printf '1700000000000\n1\n' | openssl dgst -sha256 -hmac client-secret
    assert_eq!(
        text(&out),
        r#"{"jsonrpc":"2.0","id":1,"method":"public/auth","params":{"grant_type":"client_signature","client_id":"client-id","timestamp":1700000000000,"nonce":"1","data":"","signature":"b242456c30869284b8a008adcee02d20075303073ecf0296bca7e6eb9ce552ea"}}"#
    );
    assert_eq!(p.id, 1);
    assert_eq!(p.kind, Request::Read(1));
    assert_eq!(p.parts, s.adapter().switch_parts());
    assert_eq!(p.deadline_ns, 5 * SEC);
    assert_eq!(p.client_order_id, None);
    // A fresh nonce on every call.
    let p = s.auth(&mut out, 0).unwrap();
    assert_eq!(p.id, 2);
    // printf '1700000000000\n2\n' | openssl dgst -sha256 -hmac client-secret
    assert!(text(&out).contains(
        r#""nonce":"2","data":"","signature":"e1d2d324ad4cfa7f924e6121dd09917c71cd5066ba370d57896b212bbc39a3f1"}}"#
    ));
    serde_json::from_slice::<serde_json::Value>(&out).unwrap();
}

#[test]
fn the_auth_answer_is_read() {
    let (mut s, mut budget) = session(4);
    let mut out = Vec::new();
    let p = s.auth(&mut out, 0).unwrap();
    s.sent(p.id);
    let ok = br#"{"jsonrpc":"2.0","id":1,"result":{"access_token":"1582628593469.1MbQ-J_4.CBP-OqOwm_FBdMYj4cRK2dMXyHPfBtXGpzLxhWg31nHu3H_Q60FpE5_vqUBEQGSiMrIGzw3nC37NMb9d1tpBNqBOM_Ql9pXOmgtV9Yj3Pq1c6BqC6dU6eTxHMFO67x8GpJxqw_QcKP5IepwGBD-gfKSHfAv9AEnLJkNu3JkMJBdLToY1lrBnuedF3dU_uARm","expires_in":31536000,"refresh_token":"1582628593469.1GP4rQd0.A9Wa78o5kFRIUP49mScaD1CqHgiK50HOl2VA6kCtWa8BQZU5Dr03BhcbXPNvEh3I_MVixKZXnyoBeKJwLl8LXnfo180ckAiPj3zOclcUu4zkXuF3NNP3sTPcDf1B3C1CwMKkJ1NOcf1yPmRbsrd7hbgQ-hLa40tfx6Oa-85ymm_3Z65LZcnCeLrqlj_A9jM","scope":"connection mainaccount","enabled_features":[],"token_type":"bearer"},"usIn":1582628593469160,"usOut":1582628593469444,"usDiff":284,"testnet":false}"#;
    match s.on_frame(ok, &mut budget, 0) {
        Ok(Incoming::Answer(a)) => {
            assert_eq!((a.id, a.call, a.status), (1, Call::Auth, 200));
            assert_eq!(a.verdict, Ok(Verdict::Done));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(read_auth(ok), Ok(()));
    let refused = br#"{"jsonrpc":"2.0","id":2,"error":{"message":"invalid_credentials","code":13004},"testnet":false}"#;
    assert_eq!(read_auth(refused), Err(Some(13004)));
    assert_eq!(
        read_auth(br#"{"jsonrpc":"2.0","id":2,"result":"ok"}"#),
        Err(None)
    );
    assert_eq!(read_auth(b"not json"), Err(None));
    assert_eq!(s.in_flight(), 0);
}

#[test]
fn cancel_on_disconnect_and_test_frames() {
    let (mut s, mut budget) = session(4);
    let mut out = Vec::new();
    let call = CodCall::Enable(CodScope::Connection);
    let p = s.cod(call, &mut out, 0).unwrap();
    assert_eq!(out, call.frame(p.id).unwrap().as_bytes());
    assert_eq!(
        text(&out),
        r#"{"jsonrpc":"2.0","id":1,"method":"private/enable_cancel_on_disconnect","params":{"scope":"connection"}}"#
    );
    assert_eq!((p.kind, p.deadline_ns), (Request::Read(1), 5 * SEC));
    s.sent(p.id);
    let ok = br#"{"jsonrpc":"2.0","id":1,"result":"ok"}"#;
    match s.on_frame(ok, &mut budget, 0) {
        Ok(Incoming::Answer(Answer {
            call: Call::Cod(c),
            verdict,
            ..
        })) => {
            assert_eq!(c, call);
            assert_eq!(verdict, Ok(Verdict::Done));
            assert_eq!(
                c.read(1, ok),
                SwitchAnswer::Armed {
                    trigger_utc_ms: None
                }
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        s.cod(CodCall::Heartbeat(5), &mut out, 0),
        Err(PrepareError::Bad(Error::BadArgument(
            "interval (at least 10 s)"
        )))
    );
    assert!(out.is_empty());
    assert_eq!(s.in_flight(), 0);
    let p = s.test(&mut out, 0).unwrap();
    assert_eq!(
        text(&out),
        r#"{"jsonrpc":"2.0","id":2,"method":"public/test","params":{}}"#
    );
    assert_eq!(p.parts, s.adapter().switch_parts());
}

/// Prepares with the REST adapter, then its twin; checks what the twin carries
/// over and returns the frame.
fn twin(
    s: &mut Session,
    prep: impl FnOnce(&mut Deribit, &mut Prepared),
) -> (String, ergon_venues::deribit_ws::Pending) {
    let mut p = Prepared::with_capacity(1024);
    prep(s.adapter_mut(), &mut p);
    assert!(!p.is_empty());
    let mut out = Vec::new();
    let pending = s.prepare_rest(&p, &mut out).unwrap();
    assert_eq!(Some(pending.kind), p.kind());
    assert_eq!(&pending.parts[..], p.parts());
    assert_eq!(pending.deadline_ns, p.deadline_ns());
    assert_eq!(pending.client_order_id.as_ref(), p.client_order_id());
    serde_json::from_slice::<serde_json::Value>(&out).unwrap();
    (String::from_utf8(out).unwrap(), pending)
}

#[test]
fn rest_requests_become_their_json_rpc_twins() {
    let (mut s, _) = session(16);
    let (f, p) = twin(&mut s, |d, p| {
        d.new_order(p, &buy("mm-1"), 0).unwrap();
    });
    assert_eq!(
        f,
        r#"{"jsonrpc":"2.0","id":1,"method":"private/buy","params":{"instrument_name":"BTC-PERPETUAL","amount":0.01,"type":"limit","price":27500.5,"time_in_force":"good_til_cancelled","label":"mm-1","valid_until":1700000005000}}"#
    );
    assert_eq!(
        (p.kind, p.deadline_ns, p.client_order_id),
        (Request::Order, 5 * SEC, Some(cid("mm-1")))
    );
    let (f, _) = twin(&mut s, |d, p| {
        let mut o = order(Side::Sell, OrderType::PostOnly, "mm-2");
        o.reduce_only = true;
        d.new_order(p, &o, 0).unwrap();
    });
    assert_eq!(
        f,
        r#"{"jsonrpc":"2.0","id":2,"method":"private/sell","params":{"instrument_name":"BTC-PERPETUAL","amount":0.01,"type":"limit","price":27500.5,"time_in_force":"good_til_cancelled","post_only":true,"reject_post_only":true,"reduce_only":true,"label":"mm-2","valid_until":1700000005000}}"#
    );
    let (f, p) = twin(&mut s, |d, p| {
        d.cancel(p, &oref("BTC-PERPETUAL", "mm-1"), 0).unwrap();
    });
    assert_eq!(
        f,
        r#"{"jsonrpc":"2.0","id":3,"method":"private/cancel_by_label","params":{"label":"mm-1","currency":"BTC"}}"#
    );
    assert_eq!(p.kind, Request::Cancel);
    let (f, p) = twin(&mut s, |d, p| {
        d.query_order(p, &oref("ETH_USDC-PERPETUAL", "mm-1"), 0)
            .unwrap();
    });
    assert_eq!(
        f,
        r#"{"jsonrpc":"2.0","id":4,"method":"private/get_order_state_by_label","params":{"currency":"USDC","label":"mm-1"}}"#
    );
    assert_eq!(p.kind, Request::Read(1));
    let (f, _) = twin(&mut s, |d, p| {
        d.open_orders(p, Some(Symbol::new("BTC-PERPETUAL").unwrap()), 0)
            .unwrap();
    });
    assert_eq!(
        f,
        r#"{"jsonrpc":"2.0","id":5,"method":"private/get_open_orders_by_instrument","params":{"instrument_name":"BTC-PERPETUAL"}}"#
    );
    let (f, _) = twin(&mut s, |d, p| {
        d.open_orders(p, None, 0).unwrap();
    });
    assert_eq!(
        f,
        r#"{"jsonrpc":"2.0","id":6,"method":"private/get_open_orders","params":{}}"#
    );
    let (f, _) = twin(&mut s, |d, p| {
        d.book(p, Symbol::new("BTC-PERPETUAL").unwrap(), 10, 0)
            .unwrap();
    });
    assert_eq!(
        f,
        r#"{"jsonrpc":"2.0","id":7,"method":"public/get_order_book","params":{"instrument_name":"BTC-PERPETUAL","depth":10}}"#
    );
    assert_eq!(s.in_flight(), 7);
}

#[test]
fn requests_without_a_twin_are_refused() {
    let (mut s, _) = session(4);
    let mut out = b"stale".to_vec();
    let bad = s.prepare_rest(&Prepared::default(), &mut out);
    assert_eq!(
        bad,
        Err(PrepareError::Bad(Error::BadArgument("an empty request")))
    );
    assert!(out.is_empty());
    let mut b = Budget::builder();
    let mut spot = BinanceSpot::from_exchange_info(
        SPOT_EXCHANGE_INFO,
        &mut b,
        Clock::anchor(0, UTC_MS),
        BINANCE_GUARD_NS,
    )
    .unwrap();
    let mut p = Prepared::with_capacity(1024);
    spot.book(&mut p, Symbol::new("BTCUSDT").unwrap(), 5, 0)
        .unwrap();
    out.extend_from_slice(b"stale");
    assert_eq!(
        s.prepare_rest(&p, &mut out),
        Err(PrepareError::Bad(Error::BadArgument(
            "a request that is not a GET of /api/v2/<method>"
        )))
    );
    assert!(out.is_empty());
    assert_eq!(s.in_flight(), 0);
    // Nothing reserved: the next id is still 1.
    assert_eq!(s.test(&mut out, 0).unwrap().id, 1);
}

#[test]
fn a_full_table_refuses() {
    let (mut s, mut budget) = session(2);
    let mut p = Prepared::with_capacity(1024);
    let mut out = Vec::new();
    s.adapter_mut().new_order(&mut p, &buy("mm-1"), 0).unwrap();
    let a = s.prepare_rest(&p, &mut out).unwrap();
    let b = s.prepare_rest(&p, &mut out).unwrap();
    assert_eq!((a.id, b.id), (1, 2));
    assert_eq!(s.prepare_rest(&p, &mut out), Err(PrepareError::Full));
    assert!(out.is_empty());
    assert_eq!(s.auth(&mut out, 0), Err(PrepareError::Full));
    assert_eq!(s.test(&mut out, 0), Err(PrepareError::Full));
    assert_eq!(
        s.cod(CodCall::Disable(CodScope::Account), &mut out, 0),
        Err(PrepareError::Full)
    );
    // A written request leaves only by its answer; a prepared one by `unsent`.
    assert!(s.sent(a.id));
    assert!(!s.unsent(a.id));
    assert!(s.unsent(b.id));
    assert!(!s.unsent(b.id));
    assert_eq!(s.in_flight(), 1);
    // Issue 39, item 4: id 3 takes the free slot. On main ids took slots in turn
    // (id % capacity), so id 3 waited for a's slot, with b's free: this
    // assertion said `Err(Full)`.
    assert_eq!(s.prepare_rest(&p, &mut out).unwrap().id, 3);
    assert_eq!(s.prepare_rest(&p, &mut out), Err(PrepareError::Full));
    let ok =
        br#"{"jsonrpc":"2.0","id":1,"result":{"order":{"order_id":"1","order_state":"open"}}}"#;
    assert!(matches!(
        s.on_frame(ok, &mut budget, 0),
        Ok(Incoming::Answer(_))
    ));
    assert_eq!(s.prepare_rest(&p, &mut out).unwrap().id, 4);
    assert_eq!(s.prepare_rest(&p, &mut out), Err(PrepareError::Full));
}

/// Issue 39, item 4: one request never answered holds its own slot and nothing
/// else. The lane keeps sending and reading the answers of the others, far more
/// than the table's length of them; on main the table refused (`Full`, the lane
/// `Busy`) once `capacity - 1` later ids had gone, with free slots left, until
/// the stuck request's deadline dropped the connection, and on Deribit that drop
/// fires cancel-on-disconnect.
#[test]
fn one_request_never_answered_stalls_nothing_else() {
    let (mut s, mut budget) = session(4);
    let mut p = Prepared::with_capacity(1024);
    let mut out = Vec::new();
    s.adapter_mut()
        .new_order(&mut p, &buy("slow-1"), 0)
        .unwrap();
    let slow = s.prepare_rest(&p, &mut out).unwrap();
    assert!(s.sent(slow.id));
    for n in 0..100 {
        let o = s
            .prepare_rest(&p, &mut out)
            .unwrap_or_else(|e| panic!("request {n} refused: {e:?}"));
        assert!(s.sent(o.id));
        let ok = format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"order":{{"order_id":"{n}","order_state":"open"}}}}}}"#,
            o.id
        );
        match s.on_frame(ok.as_bytes(), &mut budget, 0) {
            Ok(Incoming::Answer(a)) => assert_eq!(a.id, o.id),
            other => panic!("{other:?}"),
        }
        assert_eq!(s.in_flight(), 1, "only the slow one waits");
    }
    // Its answer, late, is still matched to it.
    let late = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"order":{{"order_id":"9","order_state":"open"}}}}}}"#,
        slow.id
    );
    match s.on_frame(late.as_bytes(), &mut budget, 0) {
        Ok(Incoming::Answer(a)) => assert_eq!(a.id, slow.id),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.in_flight(), 0);
}

/// A verdict with its bucket as its index in `b` (ids differ between budgets).
fn same_buckets(v: Result<Verdict, Error>, b: &Budget) -> String {
    let index = |id| b.ids().position(|i| i == id);
    match v {
        Ok(Verdict::Throttled { bucket, until_ns }) => {
            format!("Throttled {:?} {until_ns}", index(bucket))
        }
        Ok(Verdict::Banned { bucket, until_ns }) => {
            format!("Banned {:?} {until_ns}", index(bucket))
        }
        other => format!("{other:?}"),
    }
}

/// A written buy, and the frame `body` answering it (its id spliced in).
fn answered(body: &str) -> (Session, Budget, Answer, Budget) {
    let (mut s, mut budget) = session(4);
    let mut p = Prepared::with_capacity(1024);
    let mut out = Vec::new();
    s.adapter_mut().new_order(&mut p, &buy("mm-1"), 0).unwrap();
    let pending = s.prepare_rest(&p, &mut out).unwrap();
    s.sent(pending.id);
    let frame = body.replace("ID", &pending.id.to_string());
    // The REST reader on a twin budget: the verdict and the holds must agree.
    let mut b = Budget::builder();
    let mut rest = adapter(&mut b);
    let mut rest_budget = b.build(0).unwrap();
    let status = as_response(frame.as_bytes()).unwrap().0;
    let want = rest.on_response(
        Request::Order,
        &Response {
            status,
            headers: &[],
            body: frame.as_bytes(),
        },
        &mut rest_budget,
        SEC,
    );
    let a = match s.on_frame(frame.as_bytes(), &mut budget, SEC) {
        Ok(Incoming::Answer(a)) => a,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        same_buckets(a.verdict, &budget),
        same_buckets(want, &rest_budget)
    );
    assert_eq!(state(&budget), state(&rest_budget));
    assert_eq!(s.in_flight(), 0);
    (s, budget, a, rest_budget)
}

#[test]
fn a_result_is_done() {
    let (_, _, a, _) = answered(
        r#"{"jsonrpc":"2.0","id":ID,"result":{"trades":[],"order":{"order_id":"ETH-349249","label":"mm-1","order_state":"open","filled_amount":0.0}},"usIn":1,"usOut":2,"usDiff":1,"testnet":false}"#,
    );
    assert_eq!(
        (a.id, a.kind, a.call, a.status, a.code),
        (1, Request::Order, Call::Rest, 200, None)
    );
    assert_eq!(a.client_order_id, Some(cid("mm-1")));
    assert_eq!(a.verdict, Ok(Verdict::Done));
}

#[test]
fn too_many_requests_holds_the_pool() {
    let (s, budget, a, _) = answered(
        r#"{"jsonrpc":"2.0","id":ID,"error":{"message":"too_many_requests","code":10028},"testnet":false}"#,
    );
    assert_eq!((a.status, a.code), (400, Some(10028)));
    let matching = s.adapter().matching;
    match a.verdict {
        Ok(Verdict::Throttled { bucket, until_ns }) => {
            assert_eq!(bucket, matching);
            assert!(until_ns > SEC);
            assert_eq!(
                budget.stats(matching).unwrap().held_until_ns,
                Some(until_ns)
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn not_enough_funds_is_rejected() {
    let (_, _, a, _) = answered(
        r#"{"jsonrpc":"2.0","id":ID,"error":{"message":"not_enough_funds","code":10009},"testnet":false}"#,
    );
    assert_eq!((a.status, a.code), (400, Some(10009)));
    assert_eq!(a.verdict, Ok(Verdict::Rejected));
}

#[test]
fn heartbeats_and_notifications() {
    let (mut s, mut budget) = session(4);
    let cases: [(&[u8], Incoming); 4] = [
        (
            br#"{"jsonrpc":"2.0","method":"heartbeat","params":{"type":"test_request"}}"#,
            Incoming::TestRequest,
        ),
        (
            br#"{"jsonrpc":"2.0","method":"heartbeat","params":{"type":"heartbeat"}}"#,
            Incoming::Heartbeat,
        ),
        (
            br#"{"jsonrpc":"2.0","method":"subscription","params":{"channel":"user.orders.any.any.raw","data":{}}}"#,
            Incoming::Other,
        ),
        (br#"{"method":"heartbeat"}"#, Incoming::Other),
    ];
    for (frame, want) in cases {
        assert_eq!(s.on_frame(frame, &mut budget, 0), Ok(want));
        assert_eq!(as_response(frame), None);
    }
}

#[test]
fn bad_frames_change_nothing() {
    let (mut s, mut budget) = session(4);
    let mut p = Prepared::with_capacity(1024);
    let mut out = Vec::new();
    s.adapter_mut().new_order(&mut p, &buy("mm-1"), 0).unwrap();
    let pending = s.prepare_rest(&p, &mut out).unwrap();
    s.sent(pending.id);
    let before = state(&budget);
    let unknown =
        br#"{"jsonrpc":"2.0","id":99,"error":{"message":"too_many_requests","code":10028}}"#;
    assert_eq!(
        s.on_frame(unknown, &mut budget, 0),
        Err(FrameError::UnknownId(99))
    );
    assert!(matches!(
        s.on_frame(b"{\"id\":1,", &mut budget, 0),
        Err(FrameError::Json(_))
    ));
    assert_eq!(
        s.on_frame(
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700}}"#,
            &mut budget,
            0
        ),
        Err(FrameError::NoId)
    );
    assert_eq!(s.on_frame(b"[1]", &mut budget, 0), Err(FrameError::NoId));
    assert_eq!(
        s.on_frame(br#"{"id":"1","result":1}"#, &mut budget, 0),
        Err(FrameError::NoId)
    );
    assert_eq!(state(&budget), before);
    assert_eq!(s.in_flight(), 1);
    // The request is still there to answer.
    let ok =
        br#"{"jsonrpc":"2.0","id":1,"result":{"order":{"order_id":"1","order_state":"open"}}}"#;
    assert!(matches!(
        s.on_frame(ok, &mut budget, 0),
        Ok(Incoming::Answer(_))
    ));
}

#[test]
fn a_disconnect_says_the_fate_of_every_id() {
    let (mut s, _) = session(8);
    let mut p = Prepared::with_capacity(1024);
    let mut out = Vec::new();
    s.adapter_mut().new_order(&mut p, &buy("mm-1"), 0).unwrap();
    let a = s.prepare_rest(&p, &mut out).unwrap();
    s.adapter_mut()
        .cancel(&mut p, &oref("BTC-PERPETUAL", "mm-0"), 0)
        .unwrap();
    let b = s.prepare_rest(&p, &mut out).unwrap();
    let c = s.auth(&mut out, 0).unwrap();
    assert!(s.sent(a.id) && s.sent(b.id));
    let mut fates: Vec<Fate> = s.on_disconnect().collect();
    fates.sort_by_key(|f| match f {
        Fate::Unknown { id, .. } | Fate::NotWritten { id } => *id,
    });
    assert_eq!(
        fates,
        [
            Fate::Unknown {
                id: a.id,
                kind: Request::Order,
                client_order_id: Some(cid("mm-1")),
                deadline_ns: 5 * SEC,
            },
            Fate::Unknown {
                id: b.id,
                kind: Request::Cancel,
                client_order_id: Some(cid("mm-0")),
                deadline_ns: 5 * SEC,
            },
            Fate::NotWritten { id: c.id },
        ]
    );
    assert_eq!(s.in_flight(), 0);
    assert_eq!(s.on_disconnect().count(), 0);
}

#[test]
fn steady_state_allocates_nothing() {
    let (mut s, mut budget) = session(64);
    let mut p = Prepared::with_capacity(1024);
    let mut out = Vec::with_capacity(1024);
    let mut answer = Vec::with_capacity(1024);
    let mut now = 0;
    let mut round = |s: &mut Session, budget: &mut Budget, now: i64| {
        for step in 0..5 {
            let pending = match step {
                0 => {
                    s.adapter_mut().new_order(&mut p, &buy("z1"), now).unwrap();
                    s.prepare_rest(&p, &mut out).unwrap()
                }
                1 => {
                    s.adapter_mut()
                        .cancel(&mut p, &oref("BTC-PERPETUAL", "z1"), now)
                        .unwrap();
                    s.prepare_rest(&p, &mut out).unwrap()
                }
                2 => s.auth(&mut out, now).unwrap(),
                3 => s
                    .cod(CodCall::Enable(CodScope::Connection), &mut out, now)
                    .unwrap(),
                _ => s.test(&mut out, now).unwrap(),
            };
            s.sent(pending.id);
            answer.clear();
            write!(
                answer,
                r#"{{"jsonrpc":"2.0","id":{},"result":{{"order":{{"order_id":"1","order_state":"open"}}}},"usIn":1,"usOut":2,"usDiff":1,"testnet":false}}"#,
                pending.id
            )
            .unwrap();
            let r = s.on_frame(&answer, budget, now);
            assert!(matches!(r, Ok(Incoming::Answer(_))), "{r:?}");
            let hb = br#"{"jsonrpc":"2.0","method":"heartbeat","params":{"type":"test_request"}}"#;
            assert_eq!(s.on_frame(hb, budget, now), Ok(Incoming::TestRequest));
            assert!(as_response(&answer).is_some());
        }
    };
    round(&mut s, &mut budget, now);
    let before = allocs();
    for _ in 0..200 {
        now += SEC;
        round(&mut s, &mut budget, now);
    }
    assert_eq!(allocs() - before, 0);
    let v = std::hint::black_box(vec![1u8; 8]);
    assert_eq!(allocs() - before, 1, "{v:?}");
}

fn answer_like() -> impl Strategy<Value = Vec<u8>> {
    (
        0u64..6,
        any::<i32>(),
        prop_oneof![Just("error"), Just("result"), Just("method")],
        proptest::collection::vec((0usize..120, any::<u8>()), 0..4),
        0usize..200,
    )
        .prop_map(|(id, code, member, edits, cut)| {
            let mut f = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"{member}":{{"code":{code},"message":"x","type":"test_request"}}}}"#
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
    fn arbitrary_frames_never_panic_and_errors_change_nothing(
        frames in proptest::collection::vec(
            prop_oneof![proptest::collection::vec(any::<u8>(), 0..64), answer_like()],
            1..8,
        )
    ) {
        let (mut s, mut budget) = session(4);
        let mut p = Prepared::with_capacity(1024);
        let mut out = Vec::new();
        s.adapter_mut().new_order(&mut p, &buy("mm-1"), 0).unwrap();
        for _ in 0..3 {
            let pending = s.prepare_rest(&p, &mut out).unwrap();
            s.sent(pending.id);
        }
        for f in frames {
            let (before, in_flight) = (state(&budget), s.in_flight());
            match s.on_frame(&f, &mut budget, SEC) {
                Err(_) => {
                    prop_assert_eq!(state(&budget), before);
                    prop_assert_eq!(s.in_flight(), in_flight);
                }
                Ok(Incoming::Answer(_)) => prop_assert_eq!(s.in_flight(), in_flight - 1),
                Ok(_) => prop_assert_eq!(s.in_flight(), in_flight),
            }
            let _ = as_response(&f);
            let _ = read_auth(&f);
        }
    }
}

/// A strategy reading flat out (every credit of `credits` spent, every read
/// refused) never starves the connection's own calls: the heartbeat's answer,
/// the auth and cancel-on-disconnect after a reconnect charge the `switch`
/// share, which no strategy request charges.
#[test]
fn a_flood_of_reads_never_starves_the_heartbeat_answer() {
    let (mut s, mut budget) = session(16);
    let read = s.adapter().parts(Request::Read(1)).unwrap();
    let mut reads = 0;
    while let Ok(t) = budget.try_charge(&read, ergon_core::Class::Urgent, 0) {
        budget.complete(t.sent(), 0).unwrap();
        reads += 1;
    }
    assert_eq!(reads, 90, "the venue's 100 less the reserve's 10");
    let mut out = Vec::new();
    for p in [
        s.auth(&mut out, 0).unwrap(),
        s.cod(CodCall::Enable(CodScope::Connection), &mut out, 0)
            .unwrap(),
        s.cod(CodCall::Heartbeat(10), &mut out, 0).unwrap(),
        s.test(&mut out, 0).unwrap(),
    ] {
        let t = budget
            .try_charge(&p.parts, ergon_core::Class::Normal, 0)
            .unwrap_or_else(|l| panic!("request {} refused: {l:?}", p.id));
        budget.complete(t.sent(), 0).unwrap();
    }
    // And the reserve is no more than its share: ten calls, then they wait.
    for _ in 4..10 {
        let p = s.test(&mut out, 0).unwrap();
        let t = budget.try_charge(&p.parts, ergon_core::Class::Normal, 0);
        budget.complete(t.unwrap().sent(), 0).unwrap();
    }
    let p = s.test(&mut out, 0).unwrap();
    assert!(budget
        .try_charge(&p.parts, ergon_core::Class::Urgent, 0)
        .is_err());
}
