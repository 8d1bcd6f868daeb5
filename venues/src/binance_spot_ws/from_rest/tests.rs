//! The twin written from a template is what the builder writes, byte for byte:
//! [`Session::prepare_rest`] for the same REST request, and [`Session::prepare`]
//! for the same order at the same time, signed per request (HMAC or Ed25519) or
//! logged on.

use proptest::prelude::*;

use super::*;
use crate::adapt::Clock;
use crate::binance_spot::template::case::case;
use crate::binance_spot::template::tests::{API_KEY, SEC, SECRET};
use crate::binance_spot::{Auth, BinanceSpot};
use crate::binance_spot_ws::Call;
use crate::endpoint::TimeInForce;
use crate::endpoint::{ClientOrderId, Decimal, Ed25519Key, Endpoints, NewOrder, OrderRef};

/// Binance Spot's limits as `exchangeInfo` lists them (its `rateLimits`).
const INFO: &[u8] = br#"{"rateLimits":[{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,"limit":6000},{"rateLimitType":"ORDERS","interval":"SECOND","intervalNum":10,"limit":100},{"rateLimitType":"RAW_REQUESTS","interval":"MINUTE","intervalNum":5,"limit":61000}]}"#;

fn spot(recv_window_ms: i64, ed25519: bool) -> BinanceSpot {
    let auth = match ed25519 {
        true => Auth::ed25519(API_KEY, Ed25519Key::from_seed(&[7; 32]), recv_window_ms),
        false => Auth::new(API_KEY, SECRET, recv_window_ms),
    };
    let mut b = ergon_core::Budget::builder();
    BinanceSpot::from_exchange_info(INFO, &mut b, Clock::anchor(10 * SEC, 1_499_827_319_559), 0)
        .unwrap()
        .with_auth(auth.unwrap())
}

/// A pending request, its parts by bucket index.
fn same(p: &Pending) -> impl PartialEq + core::fmt::Debug {
    let parts: Vec<_> = p.parts.iter().map(|x| (x.bucket.index(), x.cost)).collect();
    (p.id, p.kind, parts, p.deadline_ns, p.client_order_id)
}

fn order<'a>(symbol: &'a str, side: Side, cid: &str) -> NewOrder<'a> {
    NewOrder {
        symbol: Symbol::new(symbol).unwrap(),
        side,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(Decimal::new("49000.5").unwrap()),
        quantity: Decimal::new("0.01").unwrap(),
        client_order_id: ClientOrderId::new(cid).unwrap(),
        reduce_only: false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_template_twin_is_what_the_builders_write(
        c in case(),
        ed25519 in any::<bool>(),
        logged_on in any::<bool>(),
        earlier in 0usize..3,
    ) {
        let (o, _) = c.order(false);
        let now = c.now;
        let mut rest = spot(c.recv_window, ed25519);
        let mut req = Prepared::with_capacity(512);
        rest.new_order(&mut req, &o, now).unwrap();
        let s = Session::over(rest, 4).unwrap();
        let (mut a, mut b, mut c, mut d) = (s.clone(), s.clone(), s.clone(), s);
        for s in [&mut a, &mut b, &mut c, &mut d] {
            s.set_logged_on(logged_on);
        }
        let (mut fa, mut fb, mut fc) = (Vec::new(), String::new(), Vec::new());
        let mut fd = Text::default();
        // `earlier` orders of the same kind before it: the ids move on alike, the
        // template is made once.
        for _ in 0..=earlier {
            let pa = a.prepare_rest(&req, &mut fa).unwrap();
            let pb = b.prepare_rest_order(&req, &mut fb).unwrap().unwrap();
            let pc = c.prepare(&Call::Place(o), &mut fc, now).unwrap();
            let pd = d.prepare_rest_text(&req, &mut fd).unwrap().unwrap();
            prop_assert_eq!(fd.as_bytes(), fb.as_bytes());
            prop_assert_eq!(same(&pd), same(&pb));
            prop_assert_eq!(&fa[..], fb.as_bytes());
            prop_assert_eq!(&fc[..], fb.as_bytes());
            prop_assert_eq!(same(&pa), same(&pb));
            prop_assert_eq!(same(&pc), same(&pb));
        }
        prop_assert_eq!(b.templates(), 1);
        prop_assert_eq!((a.in_flight(), b.in_flight()), (earlier + 1, earlier + 1));
        prop_assert_eq!(fb.contains("\"signature\""), !logged_on);
    }
}

#[test]
fn what_no_template_covers_is_left_to_the_builder_and_nothing_is_reserved() {
    let mut rest = spot(5000, false);
    let mut s = Session::over(rest.clone(), 4).unwrap();
    let mut req = Prepared::with_capacity(512);
    let mut out = String::from("stale");
    let r = OrderRef {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        client_order_id: ClientOrderId::new("c-1").unwrap(),
    };
    rest.cancel(&mut req, &r, 10 * SEC).unwrap();
    assert_eq!(s.prepare_rest_order(&req, &mut out), Ok(None));
    assert_eq!((out.as_str(), s.in_flight()), ("", 0));
    // Another receive window than the session's.
    let mut other = spot(4000, false);
    other
        .new_order(&mut req, &order("BTCUSDT", Side::Buy, "c-2"), 10 * SEC)
        .unwrap();
    assert_eq!(s.prepare_rest_order(&req, &mut out), Ok(None));
    assert_eq!((out.as_str(), s.in_flight(), s.templates()), ("", 0, 0));
    // An empty request.
    assert_eq!(
        s.prepare_rest_order(&Prepared::with_capacity(8), &mut out),
        Ok(None)
    );
    assert_eq!(s.in_flight(), 0);
}

#[test]
fn a_full_table_is_full_and_reserves_nothing() {
    let mut rest = spot(5000, false);
    let mut s = Session::over(rest.clone(), 1).unwrap();
    let mut req = Prepared::with_capacity(512);
    rest.new_order(&mut req, &order("BTCUSDT", Side::Buy, "f-1"), 10 * SEC)
        .unwrap();
    let mut out = String::new();
    assert!(s.prepare_rest_order(&req, &mut out).unwrap().is_some());
    assert_eq!(
        s.prepare_rest_order(&req, &mut out),
        Err(PrepareError::Full)
    );
    assert_eq!((out.as_str(), s.in_flight()), ("", 1));
}

#[test]
fn more_kinds_than_templates_replace_the_oldest_and_stay_exact() {
    let mut rest = spot(5000, false);
    let mut s = Session::over(rest.clone(), 4).unwrap();
    let mut builder = s.clone();
    let mut req = Prepared::with_capacity(512);
    let (mut out, mut want) = (String::new(), Vec::new());
    let names: Vec<String> = (0..MAX_TEMPLATES + 5)
        .map(|i| format!("S{i}USDT"))
        .collect();
    for round in 0..2 {
        for (i, name) in names.iter().enumerate() {
            let cid = format!("k-{round}-{i}");
            let o = order(name, Side::Sell, &cid);
            rest.new_order(&mut req, &o, 10 * SEC).unwrap();
            let p = s.prepare_rest_order(&req, &mut out).unwrap().unwrap();
            let q = builder.prepare_rest(&req, &mut want).unwrap();
            assert_eq!(out.as_bytes(), &want[..], "{name}");
            assert!(s.unsent(p.id) && builder.unsent(q.id));
        }
    }
    assert_eq!(s.templates(), MAX_TEMPLATES);
}

#[test]
fn logging_on_and_off_switches_the_form_of_the_same_kind() {
    let mut rest = spot(5000, true);
    let mut s = Session::over(rest.clone(), 4).unwrap();
    let mut req = Prepared::with_capacity(512);
    rest.new_order(&mut req, &order("BTCUSDT", Side::Buy, "l-1"), 10 * SEC)
        .unwrap();
    let mut out = String::new();
    for (on, signed) in [(false, true), (true, false), (false, true)] {
        s.set_logged_on(on);
        let p = s.prepare_rest_order(&req, &mut out).unwrap().unwrap();
        assert_eq!(out.contains("\"apiKey\""), signed, "{out}");
        assert_eq!(out.contains("\"signature\""), signed, "{out}");
        assert!(s.unsent(p.id));
    }
    assert_eq!(s.templates(), 2);
}

/// By hand (`cargo test --release -p ergon-venues --lib from_rest -- --ignored
/// --nocapture`): ns per frame, the template's path beside the builder's, for the
/// same logged-on new order.
#[test]
#[ignore]
fn time_the_template_beside_the_builder() {
    const N: u32 = 200_000;
    let mut rest = spot(5000, true);
    let mut req = Prepared::with_capacity(512);
    rest.new_order(&mut req, &order("BTCUSDT", Side::Buy, "t-1"), 10 * SEC)
        .unwrap();
    let mut s = Session::over(rest, 4).unwrap();
    s.set_logged_on(true);
    let (mut text, mut bytes) = (String::with_capacity(512), Vec::with_capacity(512));
    let t = std::time::Instant::now();
    for _ in 0..N {
        let p = s.prepare_rest_order(&req, &mut text).unwrap().unwrap();
        s.unsent(p.id);
    }
    let template = t.elapsed().as_nanos() / u128::from(N);
    let t = std::time::Instant::now();
    for _ in 0..N {
        let p = s.prepare_rest(&req, &mut bytes).unwrap();
        let _ = std::hint::black_box(core::str::from_utf8(&bytes));
        s.unsent(p.id);
    }
    let builder = t.elapsed().as_nanos() / u128::from(N);
    let mut kept = Text::with_capacity(512);
    let t = std::time::Instant::now();
    for _ in 0..N {
        let p = s.prepare_rest_text(&req, &mut kept).unwrap().unwrap();
        s.unsent(p.id);
    }
    let as_text = t.elapsed().as_nanos() / u128::from(N);
    println!(
        "ns per frame: template into a String {template}, into a Text {as_text}, builder + from_utf8 {builder}"
    );
    // The last frames differ only in their request ids.
    assert_eq!(text.len(), bytes.len());
    assert_eq!(kept.as_bytes(), text.as_bytes());
}

/// By hand, under callgrind: `LANE_FRAMES=N LANE_INTO=string|text valgrind
/// --tool=callgrind TESTBIN --ignored --exact
/// binance_spot_ws::from_rest::tests::count_the_lane_frames`, the instructions
/// of N logged-on new-order frames written as the lane writes them (into a
/// `Text`, handed to the connection as it is) or as it wrote them before (into
/// a `String`, one UTF-8 scan); less those of N=0, over N.
#[test]
#[ignore]
fn count_the_lane_frames() {
    let n: u32 = std::env::var("LANE_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let into_string = std::env::var("LANE_INTO").as_deref() == Ok("string");
    let mut rest = spot(5000, true);
    let mut req = Prepared::with_capacity(512);
    rest.new_order(&mut req, &order("BTCUSDT", Side::Buy, "t-1"), 10 * SEC)
        .unwrap();
    let mut s = Session::over(rest, 4).unwrap();
    s.set_logged_on(true);
    let (mut string, mut text) = (String::with_capacity(512), Text::with_capacity(512));
    for _ in 0..n {
        let p = match into_string {
            true => s.prepare_rest_order(&req, &mut string),
            false => s.prepare_rest_text(&req, &mut text),
        };
        let p = p.unwrap().unwrap();
        std::hint::black_box((string.as_bytes(), text.as_bytes()));
        s.unsent(p.id);
    }
}
