//! Typed endpoints: each prepared request charges what the venue counts for it
//! (weights by parameter, from the venue's documentation), is signed as the venue's
//! documented example signs, carries its deadline and client order id, and its
//! answers are read for reconcile.

use ergon_core::{Budget, Class, Verdict};
use ergon_venues::adapt::{Clock, Error, Request, Venue};
use ergon_venues::binance_futures::{self, BinanceFutures};
use ergon_venues::binance_spot::{self, BinanceSpot};
use ergon_venues::classify::{HttpFile, SPOT_EXCHANGE_INFO};
use ergon_venues::endpoint::{
    Amend, CancelReplace, ClientOrderId, Decimal, Endpoints, HmacKey, Lookup, Method, NewOrder,
    OrderRef, OrderState, OrderType, Placed, Prepared, Side, Symbol, TimeInForce,
};
use hmac::{Hmac, Mac};

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;

/// Binance's documented HMAC example (SIGNED endpoint examples for
/// `POST /api/v3/order`):
/// <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/request-security>
/// (binance-spot-api-docs `rest-api.md`, checked 2026-11-30).
const BINANCE_API_KEY: &str = "vmPUZE6mv9SD5VNHk4HlWFsOr6aKE2zvsw0MuIgwCIPy6utIco14y7Ju91duEh8A";
const BINANCE_SECRET: &str = "NhqPtmdSJYdKjVHjA7PZj4Mge3R5YNiP1e3UZjInClVN65XAbvqqM6A7H5fATj0j";
const BINANCE_QUERY: &str = "symbol=LTCBTC&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=0.1&recvWindow=5000&timestamp=1499827319559";
const BINANCE_SIGNATURE: &str = "c8db56825ae71d6d79447849e617115f4a920fa2acdcab2b053c4b2838bd6b71";
/// The example's timestamp.
const BINANCE_TS_MS: i64 = 1_499_827_319_559;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn id(s: &str) -> ClientOrderId {
    ClientOrderId::new(s).unwrap()
}

fn sym(s: &str) -> Symbol<'_> {
    Symbol::new(s).unwrap()
}

fn dec(s: &str) -> Decimal<'_> {
    Decimal::new(s).unwrap()
}

/// The documented example's order, with a client order id.
fn ltcbtc(cloid: &str) -> NewOrder<'static> {
    NewOrder {
        symbol: sym("LTCBTC"),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(dec("0.1")),
        quantity: dec("1"),
        client_order_id: id(cloid),
        reduce_only: false,
    }
}

/// A Spot adapter on `exchangeInfo`'s limits whose clock reads the documented
/// example's timestamp at now = 10 s, with the documented key.
fn spot() -> (BinanceSpot, Budget) {
    let mut b = Budget::builder();
    let clock = Clock::anchor(10 * SEC, BINANCE_TS_MS);
    let auth = binance_spot::Auth::new(BINANCE_API_KEY, BINANCE_SECRET.as_bytes(), 5000).unwrap();
    let venue = BinanceSpot::from_exchange_info(SPOT_EXCHANGE_INFO, &mut b, clock, 0)
        .unwrap()
        .with_auth(auth);
    (venue, b.build(0).unwrap())
}

/// The parts as (bucket name, cost), sorted.
fn named(p: &Prepared, budget: &Budget) -> Vec<(String, u32)> {
    let mut v: Vec<_> = p
        .parts()
        .iter()
        .map(|part| (budget.name(part.bucket).unwrap().to_string(), part.cost))
        .collect();
    v.sort();
    v
}

fn with(list: &[(&str, u32)]) -> Vec<(String, u32)> {
    let mut v: Vec<_> = list.iter().map(|(n, c)| (n.to_string(), *c)).collect();
    v.sort();
    v
}

/// The query a signature covers, and the signature, of a prepared Binance target.
fn split_signature(target: &str) -> (&str, &str) {
    let query = target.split_once('?').unwrap().1;
    query.rsplit_once("&signature=").unwrap()
}

#[test]
fn binance_hmac_matches_the_documented_example() {
    let mac = HmacKey::new(BINANCE_SECRET.as_bytes()).sign(&[BINANCE_QUERY.as_bytes()]);
    assert_eq!(hex(&mac), BINANCE_SIGNATURE);
}

#[test]
fn binance_spot_order_is_signed_as_documented() {
    let (mut spot, _) = spot();
    let mut p = Prepared::with_capacity(1024);
    let p = spot.new_order(&mut p, &ltcbtc("mm-1"), 10 * SEC).unwrap();
    assert_eq!(p.method(), Some(Method::Post));
    // The documented parameters in the documented order, with the client order id
    // before recvWindow and timestamp.
    assert_eq!(
        p.target(),
        format!(
            "/api/v3/order?symbol=LTCBTC&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=0.1&newClientOrderId=mm-1&recvWindow=5000&timestamp=1499827319559&signature={}",
            split_signature(p.target()).1
        )
    );
    // The signature verifies with the documented secret over the query it follows.
    let (query, sig) = split_signature(p.target());
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(BINANCE_SECRET.as_bytes()).unwrap();
    mac.update(query.as_bytes());
    mac.verify_slice(
        &(0..32)
            .map(|i| u8::from_str_radix(&sig[2 * i..2 * i + 2], 16).unwrap())
            .collect::<Vec<_>>(),
    )
    .expect("the signature verifies");
    assert_eq!(p.header("X-MBX-APIKEY"), Some(BINANCE_API_KEY));
    assert_eq!(p.body(), b"");
    assert_eq!(p.client_order_id().map(|c| c.as_str()), Some("mm-1"));
    // timestamp + recvWindow, on the caller's clock: 10 s + 5 s.
    assert_eq!(p.deadline_ns(), 15 * SEC);
    assert_eq!(p.kind(), Some(Request::Order));
}

/// Weights from the Spot REST API pages (checked 2026-11-30):
/// new order 1 and one unfilled order, cancel 1, cancelReplace 1 and one order,
/// query order 4, open orders 6 (one symbol) or 80 (all), depth 5/25/50/250 by limit,
/// account 20 (<https://developers.binance.com/docs/binance-spot-api-docs/rest-api/trading-endpoints>,
/// <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/account-endpoints>,
/// <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/market-data-endpoints#order-book>).
/// Every request also counts one `RAW_REQUESTS`.
#[test]
fn binance_spot_parts_equal_the_documented_weights() {
    let (mut spot, budget) = spot();
    let mut p = Prepared::default();
    let now = 10 * SEC;
    let order = |w: u32, n: u32| {
        with(&[
            ("ip", 0),
            ("REQUEST_WEIGHT_1M", w),
            ("ORDERS_10S", n),
            ("ORDERS_1D", n),
            ("RAW_REQUESTS_5M", 1),
        ])
    };
    let read = |w: u32| with(&[("ip", 0), ("REQUEST_WEIGHT_1M", w), ("RAW_REQUESTS_5M", 1)]);

    spot.new_order(&mut p, &ltcbtc("a"), now).unwrap();
    assert_eq!(named(&p, &budget), order(1, 1));
    let r = OrderRef {
        symbol: sym("LTCBTC"),
        client_order_id: id("a"),
    };
    spot.cancel(&mut p, &r, now).unwrap();
    assert_eq!(
        (p.method(), named(&p, &budget)),
        (Some(Method::Delete), read(1))
    );
    let cr = CancelReplace {
        cancel: id("a"),
        new: ltcbtc("b"),
    };
    spot.cancel_replace(&mut p, &cr, now).unwrap();
    assert_eq!(named(&p, &budget), order(1, 1));
    assert!(p
        .target()
        .contains("cancelReplaceMode=STOP_ON_FAILURE&cancelOrigClientOrderId=a&"));
    assert_eq!(p.client_order_ids(), &[id("b"), id("a")]);
    spot.query_order(&mut p, &r, now).unwrap();
    assert_eq!(
        (p.method(), named(&p, &budget)),
        (Some(Method::Get), read(4))
    );
    spot.open_orders(&mut p, Some(sym("LTCBTC")), now).unwrap();
    assert_eq!(named(&p, &budget), read(6));
    spot.open_orders(&mut p, None, now).unwrap();
    assert_eq!(named(&p, &budget), read(80));
    assert!(p
        .target()
        .starts_with("/api/v3/openOrders?recvWindow=5000&timestamp="));
    for (limit, weight) in [
        (1, 5),
        (100, 5),
        (101, 25),
        (500, 25),
        (501, 50),
        (1000, 50),
        (1001, 250),
        (5000, 250),
    ] {
        spot.book(&mut p, sym("BTCUSDT"), limit, now).unwrap();
        assert_eq!(named(&p, &budget), read(weight), "depth {limit}");
        assert_eq!(
            p.target(),
            format!("/api/v3/depth?symbol=BTCUSDT&limit={limit}")
        );
        assert_eq!(p.header("X-MBX-APIKEY"), None, "depth is not signed");
    }
    spot.account(&mut p, now).unwrap();
    assert_eq!(named(&p, &budget), read(20));
}

#[test]
fn a_refused_preparation_leaves_nothing_to_send() {
    let (mut spot, _) = spot();
    let mut p = Prepared::default();
    spot.book(&mut p, sym("BTCUSDT"), 100, 0).unwrap();
    assert!(!p.is_empty());
    for limit in [0, 5001] {
        assert_eq!(
            spot.book(&mut p, sym("BTCUSDT"), limit, 0).err(),
            Some(Error::BadArgument("depth (1..=5000)"))
        );
        assert!(p.is_empty() && p.parts().is_empty() && p.target().is_empty());
    }
    let mut market = ltcbtc("a");
    market.order_type = OrderType::Market;
    assert!(
        spot.new_order(&mut p, &market, 0).is_err(),
        "a market order with a price"
    );
    market.price = None;
    assert!(spot
        .new_order(&mut p, &market, 0)
        .unwrap()
        .target()
        .contains("&type=MARKET&quantity=1&newClientOrderId=a&"));
    // Without a key, signed endpoints refuse; the public book does not.
    let mut b = Budget::builder();
    let mut bare =
        BinanceSpot::from_exchange_info(SPOT_EXCHANGE_INFO, &mut b, Clock::anchor(0, 0), 0)
            .unwrap();
    assert_eq!(
        bare.new_order(&mut p, &ltcbtc("a"), 0).err(),
        Some(Error::NoKey)
    );
    assert!(p.is_empty());
    assert!(bare.book(&mut p, sym("BTCUSDT"), 5, 0).is_ok());
    assert_eq!(
        bare.batch_orders(&mut p, &[ltcbtc("a")], 0).err(),
        Some(Error::Unsupported)
    );
    assert!(p.is_empty());
}

/// A prepared request charges, goes out and is answered as its own kind.
#[test]
fn prepared_request_charges_and_reads_its_answer() {
    let (mut spot, mut budget) = spot();
    let mut p = Prepared::default();
    spot.new_order(&mut p, &ltcbtc("mm-000001"), 10 * SEC)
        .unwrap();
    let ticket = budget
        .try_charge(p.parts(), Class::Normal, 10 * SEC)
        .unwrap();
    let flight = ticket.sent();
    let file =
        HttpFile::parse(&std::fs::read(fixture("binance-spot", "order_ok")).unwrap()).unwrap();
    let v = file.with_response(|r| spot.on_response(p.kind().unwrap(), r, &mut budget, 10 * SEC));
    budget.complete(flight, 10 * SEC).unwrap();
    assert_eq!(v, Ok(Verdict::Done));
    let placed = file.with_response(|r| spot.read_placed(r));
    let Placed::Accepted(info) = placed else {
        panic!("{placed:?}")
    };
    assert_eq!(
        (info.venue_order_id.as_str(), info.state),
        ("28", OrderState::Pending)
    );
}

fn fixture(venue: &str, case: &str) -> std::path::PathBuf {
    ergon_venues::classify::fixtures()
        .join(venue)
        .join(format!("{case}.http"))
}

fn read<T>(
    venue: &str,
    case: &str,
    f: impl FnOnce(&ergon_venues::response::Response<'_>) -> T,
) -> T {
    let file = HttpFile::parse(&std::fs::read(fixture(venue, case)).unwrap()).unwrap();
    file.with_response(f)
}

#[test]
fn binance_spot_reconcile_reads_found_not_found_and_unknown() {
    let (spot, _) = spot();
    let found = read("binance-spot", "query_found", |r| spot.read_order(r));
    let Lookup::Found(info) = found else {
        panic!("{found:?}")
    };
    assert_eq!(info.state, OrderState::PartiallyFilled);
    assert_eq!(info.venue_order_id.as_str(), "28");
    assert_eq!(info.filled.as_deref(), Some("0.00400000"));
    assert_eq!(
        read("binance-spot", "query_not_found_2013", |r| spot
            .read_order(r)),
        Lookup::NotFound
    );
    for unknown in [
        "gateway_502",
        "weight_429",
        "timeout_1007",
        "garbage_200",
        "ban_418",
    ] {
        assert_eq!(
            read("binance-spot", unknown, |r| spot.read_order(r)),
            Lookup::Unknown,
            "{unknown}"
        );
    }
    assert_eq!(
        read("binance-spot", "insufficient_2010", |r| spot.read_placed(r)),
        Placed::Refused
    );
    assert_eq!(
        read("binance-spot", "timeout_1007", |r| spot.read_placed(r)),
        Placed::Unknown
    );
    assert_eq!(
        read("binance-spot", "gateway_502", |r| spot.read_placed(r)),
        Placed::Unknown
    );
}

/// Binance USD-M futures' documented HMAC example (SIGNED endpoint examples for
/// `POST /fapi/v1/order`,
/// <https://developers.binance.com/docs/derivatives/usds-margined-futures/general-info>,
/// checked 2026-11-30).
const FUTURES_API_KEY: &str = "dbefbc809e3e83c283a984c3a1459732ea7db1360ca80c5c2c8867408d28cc83";
const FUTURES_SECRET: &str = "2b5eb11e18796d12d88f13dc27dbbd02c2cc51ff7059765ed9821957d82bb4d9";
const FUTURES_QUERY: &str = "symbol=BTCUSDT&side=BUY&type=LIMIT&quantity=1&price=9000&timeInForce=GTC&recvWindow=5000&timestamp=1591702613943";
const FUTURES_SIGNATURE: &str = "3c661234138461fcc7a7d8746c6558c9842d4e10870d2ecbedf7777cad694af9";

fn futures() -> (BinanceFutures, Budget) {
    let mut b = Budget::builder();
    let clock = Clock::anchor(10 * SEC, 1_591_702_613_943);
    let auth = binance_spot::Auth::new(FUTURES_API_KEY, FUTURES_SECRET.as_bytes(), 5000).unwrap();
    let venue = BinanceFutures::new(&mut b, clock, 0, binance_futures::DEFAULT_TABLE)
        .unwrap()
        .with_auth(auth);
    (venue, b.build(0).unwrap())
}

fn btcusdt(cloid: &str) -> NewOrder<'static> {
    NewOrder {
        symbol: sym("BTCUSDT"),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(dec("9000")),
        quantity: dec("1"),
        client_order_id: id(cloid),
        reduce_only: false,
    }
}

#[test]
fn binance_futures_order_is_signed_as_documented() {
    let mac = HmacKey::new(FUTURES_SECRET.as_bytes()).sign(&[FUTURES_QUERY.as_bytes()]);
    assert_eq!(hex(&mac), FUTURES_SIGNATURE);
    let (mut f, _) = futures();
    let mut p = Prepared::default();
    let mut order = btcusdt("mm-1");
    order.reduce_only = true;
    let p = f.new_order(&mut p, &order, 10 * SEC).unwrap();
    let (query, sig) = split_signature(p.target());
    assert_eq!(
        query,
        "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=9000&newClientOrderId=mm-1&reduceOnly=true&recvWindow=5000&timestamp=1591702613943"
    );
    let mac = HmacKey::new(FUTURES_SECRET.as_bytes()).sign(&[query.as_bytes()]);
    assert_eq!(sig, hex(&mac));
    assert_eq!(p.header("X-MBX-APIKEY"), Some(FUTURES_API_KEY));
    assert_eq!(p.deadline_ns(), 15 * SEC);
    let mut post_only = btcusdt("mm-2");
    post_only.order_type = OrderType::PostOnly;
    assert!(f
        .new_order(&mut Prepared::default(), &post_only, 0)
        .unwrap()
        .target()
        .contains("&type=LIMIT&timeInForce=GTX&"));
}

/// Weights from the USD-M futures REST pages (checked 2026-11-30): new order 1 on
/// the 10 s and the 1 min order limits and 0 IP weight; cancel 1; modify (PUT) 1 and
/// one order on each limit; batchOrders 5 weight, 5 on the 10 s and 1 on the minute
/// order limit; query order 1; open orders 1 (one symbol) or 40; depth 2/5/10/20 by
/// limit; account (v3) 5
/// (<https://developers.binance.com/docs/derivatives/usds-margined-futures/trade/rest-api>,
/// <https://developers.binance.com/docs/derivatives/usds-margined-futures/market-data/rest-api/Order-Book>).
#[test]
fn binance_futures_parts_equal_the_documented_weights() {
    let (mut f, budget) = futures();
    let mut p = Prepared::default();
    let parts = |w: u32, o10: u32, o1m: u32| {
        let mut v = vec![("ip", 0), ("REQUEST_WEIGHT_1M", w)];
        if o10 > 0 {
            v.push(("ORDERS_10S", o10));
            v.push(("ORDERS_1M", o1m));
        }
        with(&v)
    };
    f.new_order(&mut p, &btcusdt("a"), 0).unwrap();
    assert_eq!(named(&p, &budget), parts(0, 1, 1));
    let r = OrderRef {
        symbol: sym("BTCUSDT"),
        client_order_id: id("a"),
    };
    f.cancel(&mut p, &r, 0).unwrap();
    assert_eq!(named(&p, &budget), parts(1, 0, 0));
    let amend = Amend {
        order: r,
        side: Side::Buy,
        price: Some(dec("9001")),
        quantity: Some(dec("2")),
    };
    f.amend(&mut p, &amend, 0).unwrap();
    assert_eq!(
        (p.method(), named(&p, &budget)),
        (Some(Method::Put), parts(1, 1, 1))
    );
    assert!(f
        .amend(
            &mut p,
            &Amend {
                quantity: None,
                ..amend
            },
            0
        )
        .is_err());
    let five: Vec<_> = (0..5).map(|i| btcusdt(&format!("b{i}"))).collect();
    for n in 1..=5 {
        f.batch_orders(&mut p, &five[..n], 0).unwrap();
        assert_eq!(named(&p, &budget), parts(5, 5, 1), "{n} orders");
        assert_eq!(p.client_order_ids().len(), n);
    }
    assert!(p
        .target()
        .starts_with("/fapi/v1/batchOrders?batchOrders=%5B%7B%22symbol%22%3A%22BTCUSDT%22"));
    assert_eq!(
        f.batch_orders(&mut p, &[five.clone(), five.clone()].concat()[..6], 0)
            .err(),
        Some(Error::BadArgument("batch of 1 to 5 orders"))
    );
    f.query_order(&mut p, &r, 0).unwrap();
    assert_eq!(named(&p, &budget), parts(1, 0, 0));
    f.open_orders(&mut p, Some(sym("BTCUSDT")), 0).unwrap();
    assert_eq!(named(&p, &budget), parts(1, 0, 0));
    f.open_orders(&mut p, None, 0).unwrap();
    assert_eq!(named(&p, &budget), parts(40, 0, 0));
    for (limit, weight) in [
        (5, 2),
        (10, 2),
        (20, 2),
        (50, 2),
        (100, 5),
        (500, 10),
        (1000, 20),
    ] {
        f.book(&mut p, sym("BTCUSDT"), limit, 0).unwrap();
        assert_eq!(named(&p, &budget), parts(weight, 0, 0), "depth {limit}");
    }
    assert!(f.book(&mut p, sym("BTCUSDT"), 7, 0).is_err());
    f.account(&mut p, 0).unwrap();
    assert_eq!(named(&p, &budget), parts(5, 0, 0));
}

#[test]
fn binance_futures_reconcile_reads_found_and_not_found() {
    let (f, _) = futures();
    let found = read("binance-futures", "query_found", |r| f.read_order(r));
    let Lookup::Found(info) = found else {
        panic!("{found:?}")
    };
    assert_eq!(
        (info.state, info.venue_order_id.as_str()),
        (OrderState::New, "1917641")
    );
    assert_eq!(
        read("binance-futures", "query_not_found_2013", |r| f
            .read_order(r)),
        Lookup::NotFound
    );
    assert_eq!(
        read("binance-futures", "unknown_503", |r| f.read_order(r)),
        Lookup::Unknown
    );
}
