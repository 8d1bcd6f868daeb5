//! The template writes what the builder writes, byte for byte, for any order.

use proptest::prelude::*;

use super::case::case;
use super::*;
use crate::adapt::Clock;
use crate::binance_spot::Auth;
use crate::endpoint::{Ed25519Key, Endpoints, TimeInForce};

pub(crate) const SEC: i64 = 1_000_000_000;
pub(crate) const API_KEY: &str = "vmPUZE6mv9SD5VNHk4HlWFsOr6aKE2zvsw0MuIgwCIPy6utIco14y7Ju91duEh8A";
pub(crate) const SECRET: &[u8] =
    b"NhqPtmdSJYdKjVHjA7PZj4Mge3R5YNiP1e3UZjInClVN65XAbvqqM6A7H5fATj0j";

/// Binance Spot's limits as `exchangeInfo` lists them (its `rateLimits`).
pub(crate) const INFO: &[u8] = br#"{"rateLimits":[{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,"limit":6000},{"rateLimitType":"ORDERS","interval":"SECOND","intervalNum":10,"limit":100},{"rateLimitType":"RAW_REQUESTS","interval":"MINUTE","intervalNum":5,"limit":61000}]}"#;

fn spot(recv_window_ms: i64) -> BinanceSpot {
    spot_with(Auth::new(API_KEY, SECRET, recv_window_ms).unwrap())
}

fn spot_with(auth: Auth) -> BinanceSpot {
    let mut b = ergon_core::Budget::builder();
    BinanceSpot::from_exchange_info(INFO, &mut b, Clock::anchor(10 * SEC, 1_499_827_319_559), 0)
        .unwrap()
        .with_auth(auth)
}

/// Everything a `Prepared` says, as owned values.
pub(crate) fn seen(p: &Prepared) -> impl PartialEq + core::fmt::Debug {
    (
        p.kind(),
        p.method(),
        p.target().to_string(),
        p.headers()
            .map(|(n, v)| (n, v.to_string()))
            .collect::<Vec<_>>(),
        p.body().to_vec(),
        p.parts().to_vec(),
        p.deadline_ns(),
        p.client_order_ids().to_vec(),
        p.symbol().map(|s| s.as_str().to_string()),
        p.label(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_template_writes_what_new_order_writes(c in case(), ed25519 in any::<bool>()) {
        // Either key type: an Ed25519 signature (URL-encoded base64) is written
        // as the builder writes it, as is HMAC's hex.
        let mut spot = match ed25519 {
            false => spot(c.recv_window),
            true => spot_with(
                Auth::ed25519(API_KEY, Ed25519Key::from_seed(&[7; 32]), c.recv_window).unwrap(),
            ),
        };
        let (order, fill) = c.order(false);
        let t = spot.order_template(order.symbol, c.side, c.order_type).unwrap();
        let mut a = Prepared::default();
        let mut b = Prepared::with_capacity(1024);
        spot.new_order(&mut a, &order, c.now).unwrap();
        // Twice into the same request: a reused one holds nothing of the last.
        spot.new_order_from(&t, &mut b, &fill, c.now / 2).unwrap();
        spot.new_order_from(&t, &mut b, &fill, c.now).unwrap();
        prop_assert_eq!(seen(&a), seen(&b));
        // A template made by an adapter with another API key (its key is written
        // in the template's tail): the filling adapter's key is sent.
        let other = spot_with(Auth::new("another-key", SECRET, c.recv_window).unwrap());
        let t2 = other.order_template(order.symbol, c.side, c.order_type).unwrap();
        let mut d = Prepared::with_capacity(1024);
        spot.new_order_from(&t2, &mut d, &fill, c.now).unwrap();
        prop_assert_eq!(seen(&a), seen(&d));
        prop_assert_eq!(b.http(), d.http());
        // Written as HTTP/1.1 sends it (RFC 9112 §3: the request line, then the
        // header lines, Host first, then the blank line): the bytes of the request
        // it describes, as `ergon_io`'s encoder writes them (its own test holds
        // the two byte for byte through the pool).
        prop_assert!(a.http().is_none());
        let h = b.http().unwrap();
        let mut wire = h.line().to_vec();
        wire.extend_from_slice(b"Host: api.binance.com\r\n");
        wire.extend_from_slice(h.rest());
        prop_assert_eq!(wire.len(), h.len_with_host("api.binance.com".len()));
        let want = format!(
            "POST {} HTTP/1.1\r\nHost: api.binance.com\r\nX-MBX-APIKEY: {API_KEY}\r\nContent-Length: 0\r\n\r\n",
            b.target()
        );
        prop_assert_eq!(String::from_utf8(wire).unwrap(), want);
    }
}

/// Binance's documented example ("SIGNED Endpoint Examples for POST /api/v3/order",
/// <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/request-security>):
/// its parameters in the documented order, the key in its header.
#[test]
fn the_template_writes_binances_documented_parameters() {
    let spot = spot(5000);
    let symbol = Symbol::new("LTCBTC").unwrap();
    let t = spot
        .order_template(symbol, Side::Buy, OrderType::Limit(TimeInForce::Gtc))
        .unwrap();
    let fill = Fill {
        price: Some(Decimal::new("0.1").unwrap()),
        quantity: Decimal::new("1").unwrap(),
        client_order_id: ClientOrderId::new("x1").unwrap(),
    };
    let mut p = Prepared::default();
    spot.new_order_from(&t, &mut p, &fill, 10 * SEC).unwrap();
    // The documented query has no newClientOrderId, so only the shape is held here;
    // the documented signature itself is `the_template_writes_what_new_order_writes`'s
    // builder's (`tests/endpoints.rs`).
    assert!(p.target().starts_with(
        "/api/v3/order?symbol=LTCBTC&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=0.1&newClientOrderId=x1&recvWindow=5000&timestamp=1499827319559&signature="
    ));
    assert_eq!(p.header("X-MBX-APIKEY"), Some(API_KEY));
}

#[test]
fn bad_fills_leave_the_request_empty() {
    let spot = spot(5000);
    let symbol = Symbol::new("BTCUSDT").unwrap();
    let limit = spot
        .order_template(symbol, Side::Sell, OrderType::PostOnly)
        .unwrap();
    let market = spot
        .order_template(symbol, Side::Sell, OrderType::Market)
        .unwrap();
    let q = Decimal::new("2").unwrap();
    let id = ClientOrderId::new("a").unwrap();
    let mut p = Prepared::default();
    let no_price = Fill {
        price: None,
        quantity: q,
        client_order_id: id,
    };
    let priced = Fill {
        price: Some(q),
        ..no_price
    };
    spot.new_order_from(&limit, &mut p, &priced, 0).unwrap();
    assert_eq!(
        spot.new_order_from(&limit, &mut p, &no_price, 0)
            .unwrap_err(),
        Error::BadArgument("price of a limit order")
    );
    assert!(p.is_empty() && p.target().is_empty() && p.http().is_none());
    assert_eq!(
        spot.new_order_from(&market, &mut p, &priced, 0)
            .unwrap_err(),
        Error::BadArgument("price of a market order")
    );
    assert!(p.is_empty());
    // A template of an adapter with another receive window.
    let other = self::spot(6000);
    assert!(other.new_order_from(&limit, &mut p, &priced, 0).is_err());
    assert!(p.is_empty());
    // No key.
    let mut b = ergon_core::Budget::builder();
    let keyless = BinanceSpot::from_exchange_info(INFO, &mut b, Clock::anchor(0, 0), 0).unwrap();
    assert_eq!(
        keyless
            .new_order_from(&limit, &mut p, &priced, 0)
            .unwrap_err(),
        Error::NoKey
    );
    assert!(p.is_empty() && p.http().is_none());
}

/// A template refuses literals that could not stand in a request target as they
/// are (the fields admit no such bytes by their types): nothing it writes needs
/// checking again on the way out.
#[test]
fn a_template_checks_its_literals_for_the_wire() {
    let auth = Auth::new(API_KEY, SECRET, 5000).unwrap();
    let spot = spot(5000);
    let symbol = Symbol::new("LTCBTC").unwrap();
    let o = (symbol, Side::Buy, OrderType::Limit(TimeInForce::Gtc), false);
    for bad in ["/a b", "/a#b", "/a\r\nX: y", "/a\u{7f}"] {
        let r = OrderTemplate::build(bad, o, (&spot, &auth, &spot.limits), |w, first, o| {
            crate::binance_spot::order_params(
                w,
                first,
                o,
                "newClientOrderId",
                crate::binance_spot::PostOnly::LimitMaker,
            )
        });
        assert!(r.is_err(), "{bad:?}");
    }
    assert!(super::on_the_wire("/api/v3/order") && !super::on_the_wire("a b"));
}

/// The parts a template keeps are the adapter's as long as what they are computed
/// from is unchanged; a limit added, removed or rebound after the template was made
/// (through `Limits::limits_mut`) and the fill charges the adapter's new parts, as
/// the builder does.
#[test]
fn a_change_of_the_limits_is_charged_by_the_templates_orders() {
    use crate::binance_spot::{Counts, Limit};
    let mut spot = spot(5000);
    let symbol = Symbol::new("LTCBTC").unwrap();
    let order_type = OrderType::Limit(TimeInForce::Gtc);
    let t = spot.order_template(symbol, Side::Buy, order_type).unwrap();
    let id = ClientOrderId::new("x1").unwrap();
    let fill = Fill {
        price: Some(Decimal::new("0.1").unwrap()),
        quantity: Decimal::new("1").unwrap(),
        client_order_id: id,
    };
    let order = NewOrder {
        symbol,
        side: Side::Buy,
        order_type,
        price: fill.price,
        quantity: fill.quantity,
        client_order_id: id,
        reduce_only: false,
    };
    let parts = |spot: &mut BinanceSpot| {
        let (mut a, mut b) = (Prepared::default(), Prepared::default());
        spot.new_order(&mut a, &order, 10 * SEC).unwrap();
        spot.new_order_from(&t, &mut b, &fill, 10 * SEC).unwrap();
        assert_eq!(seen(&a), seen(&b));
        b.parts().to_vec()
    };
    let before = parts(&mut spot);
    assert_eq!(before.len(), 4, "the IP gate, weight, orders, raw requests");
    // A second order limit (a daily one, say), on a bucket of its own.
    let orders = spot.limits.of(Counts::Orders).next().unwrap().clone();
    let raw = spot.limits.of(Counts::Raw).next().unwrap().bucket;
    spot.limits.limits_mut().push(Limit {
        bucket: raw,
        window_ns: 86_400 * SEC,
        ..orders.clone()
    });
    let added = parts(&mut spot);
    assert_eq!(added.len(), 5);
    // The order limit rebound to another bucket, in place.
    spot.limits.limits_mut().pop();
    let weight = spot.limits.of(Counts::Weight).next().unwrap().bucket;
    for l in spot
        .limits
        .limits_mut()
        .iter_mut()
        .filter(|l| l.counts == Counts::Orders)
    {
        l.bucket = weight;
    }
    let rebound = parts(&mut spot);
    assert_ne!(rebound, before);
    assert_eq!(rebound[2].bucket, weight);
    // The limits as they were: the kept parts again.
    for l in spot
        .limits
        .limits_mut()
        .iter_mut()
        .filter(|l| l.counts == Counts::Orders)
    {
        l.bucket = orders.bucket;
    }
    assert_eq!(parts(&mut spot), before);
}

/// One step of a reused request's life: a template's order (of the first or the
/// second template, from the first or a second adapter with another key), or a
/// builder's order written into it; then, now and then, the request labeled (as
/// the gateway labels it).
#[derive(Clone, Debug)]
struct Step {
    /// 0, 1: the first or second template of the first adapter; 2: the first
    /// adapter's builder; 3: the first template filled by the adapter with another
    /// key (and the first one's limits); 4: the first adapter's limits changed (a
    /// daily order limit added or taken away again), then the first template; 5:
    /// the first template filled by a clone of the first adapter (its `Auth`'s
    /// clone) whose order limit is rebound; 6: the first template filled by the
    /// first adapter with its key made again (another `Auth`, the same key); 7:
    /// the same with the key and another secret; 8: the first template filled by
    /// an adapter with another key, of another budget.
    how: u8,
    price: String,
    quantity: String,
    id: String,
    now: i64,
    /// The request emptied after the order ([`Prepared::clear`]: as the gateway
    /// lends a ledger slot's buffer for the next preparation).
    clear: bool,
    /// Labels the request after its order.
    label: Option<u8>,
}

/// Steps whose fields often have the lengths of the step before (so that the
/// request is written over in place), and sometimes not.
fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = (
        prop_oneof![
            6 => Just(0u8),
            2 => Just(1u8),
            1 => Just(2u8),
            1 => Just(3u8),
            1 => Just(4u8),
            1 => Just(5u8),
            1 => Just(6u8),
            1 => Just(7u8),
            1 => Just(8u8)
        ],
        "[1-9]\\.[0-9]{1,2}",
        "[1-9]{1,2}",
        "[a-z0-9]{3,4}",
        // 13-digit timestamps, and now and then 12 (before 2001-09-09).
        prop_oneof![9 => 10 * SEC..20 * SEC, 1 => -(1_499 * SEC)..-(1_498 * SEC)],
        prop::option::weighted(0.3, 0..8u8),
        prop::bool::weighted(0.3),
    )
        .prop_map(|(how, price, quantity, id, now, label, clear)| Step {
            how,
            price,
            quantity,
            id,
            now,
            label,
            clear,
        });
    prop::collection::vec(step, 1..24)
}

/// `spot`'s limits with a daily order limit added, if it has none, else taken
/// away again.
fn toggle_daily_orders_limit(spot: &mut BinanceSpot) {
    use crate::binance_spot::{Counts, Limit};
    let limits = spot.limits.limits_mut();
    let daily = |l: &Limit| l.window_ns == 86_400 * SEC;
    if limits.iter().any(daily) {
        limits.retain(|l| !daily(l));
    } else {
        let orders = limits.iter().find(|l| l.counts == Counts::Orders).unwrap();
        let raw = limits.iter().find(|l| l.counts == Counts::Raw).unwrap();
        let l = Limit {
            bucket: raw.bucket,
            window_ns: 86_400 * SEC,
            ..orders.clone()
        };
        limits.push(l);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A request reused for order after order (as the gateway's ledger hands its
    /// requests back) holds each as a fresh request does, byte for byte and in
    /// everything it records (parts and their key, spans, id, symbol, deadline,
    /// label), whether its fields were written over the last order's in place
    /// (and the rest kept) or the order was written whole: after another
    /// template's order, another key's, another adapter's limits, a change of
    /// the limits, a label.
    #[test]
    fn a_reused_request_holds_each_order_as_a_fresh_one_does(steps in steps()) {
        use crate::binance_spot::Counts;
        let mut spot = spot(5_000);
        let with = |auth| spot.clone().with_auth(auth);
        let other = with(Auth::new("another-key", SECRET, 5_000).unwrap());
        let twin = with(Auth::new(API_KEY, SECRET, 5_000).unwrap());
        let resecret = with(Auth::new(API_KEY, b"another secret", 5_000).unwrap());
        let apart = spot_with(Auth::new("another-key", SECRET, 5_000).unwrap());
        let mut rebound = spot.clone();
        let weight = rebound.limits.of(Counts::Weight).next().unwrap().bucket;
        for l in rebound.limits.limits_mut().iter_mut() {
            if l.counts == Counts::Orders {
                l.bucket = weight;
            }
        }
        let symbol = Symbol::new("LTCBTC").unwrap();
        let ty = OrderType::Limit(TimeInForce::Gtc);
        let t = [
            spot.order_template(symbol, Side::Buy, ty).unwrap(),
            spot.order_template(symbol, Side::Sell, ty).unwrap(),
        ];
        let mut reused = Prepared::with_capacity(1024);
        for s in &steps {
            let fill = Fill {
                price: Some(Decimal::new(&s.price).unwrap()),
                quantity: Decimal::new(&s.quantity).unwrap(),
                client_order_id: ClientOrderId::new(&s.id).unwrap(),
            };
            let mut fresh = Prepared::default();
            if s.how == 4 {
                toggle_daily_orders_limit(&mut spot);
            }
            let by = match s.how {
                3 => &other,
                5 => &rebound,
                6 => &twin,
                7 => &resecret,
                8 => &apart,
                _ => &spot,
            };
            match s.how {
                2 => {
                    let order = NewOrder {
                        symbol,
                        side: Side::Buy,
                        order_type: ty,
                        price: fill.price,
                        quantity: fill.quantity,
                        client_order_id: fill.client_order_id,
                        reduce_only: false,
                    };
                    spot.new_order(&mut reused, &order, s.now).unwrap();
                    spot.new_order(&mut fresh, &order, s.now).unwrap();
                }
                _ => {
                    let t = &t[usize::from(s.how == 1)];
                    by.new_order_from(t, &mut reused, &fill, s.now).unwrap();
                    by.new_order_from(t, &mut fresh, &fill, s.now).unwrap();
                }
            }
            prop_assert_eq!(seen(&reused), seen(&fresh));
            prop_assert_eq!(reused.http(), fresh.http());
            prop_assert_eq!(reused.parts_key(), fresh.parts_key());
            prop_assert_eq!(reused.client_order_id(), Some(&fill.client_order_id));
            prop_assert!(!reused.is_empty() && !reused.signature_pending());
            if let Some(l) = s.label {
                reused.set_label(crate::endpoint::Label::new(l));
            }
            if s.clear {
                reused.clear();
                prop_assert!(reused.is_empty() && reused.http().is_none());
            }
        }
    }
}

/// One order of a template into a reused request: the template (0: a limit
/// order's, 1: a market order's), the field texts as long as they may be (cut to
/// the step's lengths), those lengths, and whether to keep the last step's
/// lengths instead (so that the order is written over the last one in place).
#[derive(Clone, Debug)]
struct Sized {
    market: bool,
    price: String,
    quantity: String,
    id: String,
    lengths: (usize, usize, usize),
    same: bool,
    now: i64,
}

/// Steps of every field length a price, a quantity (1 to 32) and a client order
/// id (1 to 36) may have, mostly of the last step's lengths, stamped now and then
/// on either side of a change of the timestamp's first five digits.
fn sized_steps() -> impl Strategy<Value = Vec<Sized>> {
    let step = (
        prop_oneof![3 => Just(false), 1 => Just(true)],
        "[0-9]{32}",
        "[0-9]{32}",
        "[a-zA-Z0-9._:/-]{36}",
        (1..=32usize, 1..=32usize, 1..=36usize),
        prop_oneof![3 => Just(true), 1 => Just(false)],
        // Now and then across a change of the timestamp's five digits above its
        // last eight (1_499_9.. from 72,680.441 s after the clock's anchor).
        prop_oneof![
            3 => 10 * SEC..20 * SEC,
            1 => 72_689 * SEC..72_692 * SEC,
        ],
    )
        .prop_map(|(market, price, quantity, id, lengths, same, now)| Sized {
            market,
            price,
            quantity,
            id,
            lengths,
            same,
            now,
        });
    prop::collection::vec(step, 1..24)
}

/// `digits` cut to `n`, with a point after the first digit when there is room.
fn decimal_of(digits: &str, n: usize) -> String {
    let mut d = digits[..n].to_string();
    if n >= 3 {
        d.replace_range(1..2, ".");
    }
    d
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A request reused for orders of a limit and a market template, with fields
    /// of every length (each a place in the bytes and a size of copy of its own),
    /// holds each as a fresh request does, byte for byte, whether it was written
    /// over the last in place or whole.
    #[test]
    fn a_reused_request_holds_fields_of_every_length(steps in sized_steps()) {
        let spot = spot(5_000);
        let symbol = Symbol::new("LTCBTC").unwrap();
        let limit = spot
            .order_template(symbol, Side::Buy, OrderType::Limit(TimeInForce::Gtc))
            .unwrap();
        let market = spot.order_template(symbol, Side::Sell, OrderType::Market).unwrap();
        let mut reused = Prepared::with_capacity(1024);
        let mut last = (1, 1, 1);
        for s in &steps {
            let (p, q, i) = if s.same { last } else { s.lengths };
            last = (p, q, i);
            let price = decimal_of(&s.price, p);
            let quantity = decimal_of(&s.quantity, q);
            let fill = Fill {
                price: (!s.market).then(|| Decimal::new(&price).unwrap()),
                quantity: Decimal::new(&quantity).unwrap(),
                client_order_id: ClientOrderId::new(&s.id[..i]).unwrap(),
            };
            let t = if s.market { &market } else { &limit };
            let mut fresh = Prepared::default();
            spot.new_order_from(t, &mut reused, &fill, s.now).unwrap();
            spot.new_order_from(t, &mut fresh, &fill, s.now).unwrap();
            prop_assert_eq!(seen(&reused), seen(&fresh));
            prop_assert_eq!(reused.http(), fresh.http());
        }
    }
}

/// Every length of each field, of a limit and a market template: the second of
/// two orders of the same lengths is written over the first in place (the
/// request holds its layout) and is what a fresh request gets.
#[test]
fn an_order_of_every_field_length_is_written_in_place() {
    let spot = spot(5_000);
    let symbol = Symbol::new("LTCBTC").unwrap();
    let limit = spot
        .order_template(symbol, Side::Buy, OrderType::Limit(TimeInForce::Gtc))
        .unwrap();
    let market = spot
        .order_template(symbol, Side::Sell, OrderType::Market)
        .unwrap();
    let digits = [
        "12345678901234567890123456789012",
        "98765432109876543210987654321098",
    ];
    let ids = [
        "abcdefghijklmnopqrstuvwxyz0123456789",
        "ZYXWVUTSRQPONMLKJIHGFEDCBA-._:/98765",
    ];
    let mut reused = Prepared::default();
    for n in 1..=36 {
        let (p, q, i) = (n.min(32), (37 - n).min(32), n);
        for (t, market) in [(&limit, false), (&market, true)] {
            for k in 0..2 {
                let price = decimal_of(digits[k], p);
                let quantity = decimal_of(digits[1 - k], q);
                let fill = Fill {
                    price: (!market).then(|| Decimal::new(&price).unwrap()),
                    quantity: Decimal::new(&quantity).unwrap(),
                    client_order_id: ClientOrderId::new(&ids[k][..i]).unwrap(),
                };
                let values = Values {
                    id: &ids[k][..i],
                    price: if market { "" } else { &price },
                    quantity: &quantity,
                    timestamp: 1_499_827_319_559,
                    request_id: 0,
                };
                assert_eq!(reused.holds(t.layout(&values)), k == 1, "{n} {market}");
                let now = (10 + k as i64) * SEC + n as i64 * 1_000_000;
                spot.new_order_from(t, &mut reused, &fill, now).unwrap();
                let mut fresh = Prepared::default();
                spot.new_order_from(t, &mut fresh, &fill, now).unwrap();
                assert_eq!(seen(&reused), seen(&fresh), "{n} {market}");
                assert_eq!(reused.http(), fresh.http(), "{n} {market}");
            }
        }
    }
    // The same fields a millisecond apart, across a change of the timestamp's
    // first five digits (1_499_899_999_999 to 1_499_900_000_000): the second
    // order's layout is another, and it is written whole.
    let fill = Fill {
        price: Some(Decimal::new("0.1").unwrap()),
        quantity: Decimal::new("1").unwrap(),
        client_order_id: ClientOrderId::new("mm-1").unwrap(),
    };
    let before = 10 * SEC + (1_499_899_999_999 - 1_499_827_319_559) * 1_000_000;
    let values = |ts| Values {
        id: "mm-1",
        price: "0.1",
        quantity: "1",
        timestamp: ts,
        request_id: 0,
    };
    spot.new_order_from(&limit, &mut reused, &fill, before)
        .unwrap();
    assert!(reused.holds(limit.layout(&values(1_499_899_999_998))));
    assert!(!reused.holds(limit.layout(&values(1_499_900_000_000))));
    spot.new_order_from(&limit, &mut reused, &fill, before + 1_000_000)
        .unwrap();
    let mut fresh = Prepared::default();
    spot.new_order_from(&limit, &mut fresh, &fill, before + 1_000_000)
        .unwrap();
    assert_eq!(reused.http(), fresh.http());
    assert!(reused.target().contains("&timestamp=1499900000000&"));
}

/// Two orders of the same template with fields of the same lengths: the second is
/// written over the first in place (the request holds the first's layout), and is
/// what a fresh request gets; a field of another length, and it is written whole.
#[test]
fn an_order_of_the_same_layout_is_written_in_place() {
    let spot = spot(5_000);
    let symbol = Symbol::new("LTCBTC").unwrap();
    let t = spot
        .order_template(symbol, Side::Buy, OrderType::Limit(TimeInForce::Gtc))
        .unwrap();
    let fill = |price, id| Fill {
        price: Some(Decimal::new(price).unwrap()),
        quantity: Decimal::new("1").unwrap(),
        client_order_id: ClientOrderId::new(id).unwrap(),
    };
    let mut reused = Prepared::default();
    let mut fresh = Prepared::default();
    let values = |price, id| Values {
        id,
        price,
        quantity: "1",
        timestamp: 1_499_827_319_559,
        request_id: 0,
    };
    spot.new_order_from(&t, &mut reused, &fill("0.1", "mm-1"), 10 * SEC)
        .unwrap();
    assert!(reused.holds(t.layout(&values("0.2", "mm-2"))));
    spot.new_order_from(&t, &mut reused, &fill("0.2", "mm-2"), 11 * SEC)
        .unwrap();
    spot.new_order_from(&t, &mut fresh, &fill("0.2", "mm-2"), 11 * SEC)
        .unwrap();
    assert_eq!(reused.http(), fresh.http());
    assert!(reused.target().contains("price=0.2&newClientOrderId=mm-2&"));
    // Written over in place, it holds its layout still: the next is too.
    assert!(reused.holds(t.layout(&values("0.3", "mm-3"))));
    assert!(!reused.holds(t.layout(&values("0.25", "mm-2"))));
    spot.new_order_from(&t, &mut reused, &fill("0.25", "mm-2"), 11 * SEC)
        .unwrap();
    spot.new_order_from(&t, &mut fresh, &fill("0.25", "mm-2"), 11 * SEC)
        .unwrap();
    assert_eq!(reused.http(), fresh.http());
}

/// A template's orders carry a key of their parts: the same for every order of
/// it (and of its clone), another for another template; none for an order whose
/// adapter's limits changed (its parts were asked again), for the builder's order,
/// or once a request is prepared again.
#[test]
fn a_templates_orders_name_their_parts_with_a_key() {
    use crate::binance_spot::{Counts, Limit};
    let mut spot = spot(5000);
    let symbol = Symbol::new("LTCBTC").unwrap();
    let order_type = OrderType::Limit(TimeInForce::Gtc);
    let buy = spot.order_template(symbol, Side::Buy, order_type).unwrap();
    let sell = spot.order_template(symbol, Side::Sell, order_type).unwrap();
    let fill = |id: &str| Fill {
        price: Some(Decimal::new("0.1").unwrap()),
        quantity: Decimal::new("1").unwrap(),
        client_order_id: ClientOrderId::new(id).unwrap(),
    };
    let mut p = Prepared::default();
    let key = |spot: &BinanceSpot, t: &OrderTemplate, p: &mut Prepared, id: &str| {
        spot.new_order_from(t, p, &fill(id), 10 * SEC).unwrap();
        (p.parts_key(), p.parts().to_vec())
    };
    let (k1, parts) = key(&spot, &buy, &mut p, "a1");
    assert_ne!(k1, 0);
    assert_eq!(key(&spot, &buy, &mut p, "a2"), (k1, parts.clone()));
    assert_eq!(key(&spot, &buy.clone(), &mut p, "a3"), (k1, parts.clone()));
    let (k2, _) = key(&spot, &sell, &mut p, "a4");
    assert!(k2 != 0 && k2 != k1, "{k1} {k2}");
    // The limits changed: the parts are asked again, and carry no key.
    let orders = spot.limits.of(Counts::Orders).next().unwrap().clone();
    spot.limits.limits_mut().push(Limit {
        window_ns: 86_400 * SEC,
        ..orders
    });
    let (k3, changed) = key(&spot, &buy, &mut p, "a5");
    assert_eq!(k3, 0);
    assert_ne!(changed, parts);
    spot.limits.limits_mut().pop();
    assert_eq!(key(&spot, &buy, &mut p, "a6"), (k1, parts.clone()));
    let mut q = Prepared::default();
    q.swap_with(&mut p);
    assert_eq!(
        (q.parts_key(), p.parts_key()),
        (k1, 0),
        "swapped with the rest"
    );
    let order = NewOrder {
        symbol,
        side: Side::Buy,
        order_type,
        price: Some(Decimal::new("0.1").unwrap()),
        quantity: Decimal::new("1").unwrap(),
        client_order_id: ClientOrderId::new("a7").unwrap(),
        reduce_only: false,
    };
    spot.new_order(&mut q, &order, 10 * SEC).unwrap();
    assert_eq!(q.parts_key(), 0, "the builder's order");
}
