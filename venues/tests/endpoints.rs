//! Typed endpoints: each prepared request charges what the venue counts for it
//! (weights by parameter, from the venue's documentation), is signed as the venue's
//! documented example signs, carries its deadline and client order id, and its
//! answers are read for reconcile.

use ergon_core::{Budget, Class, Verdict};
use ergon_venues::adapt::{Clock, Error, Request, Venue};
use ergon_venues::binance_futures::{self, BinanceFutures};
use ergon_venues::binance_spot::{self, BinanceSpot};
use ergon_venues::bybit::{self, Bybit};
use ergon_venues::classify::{HttpFile, SPOT_EXCHANGE_INFO};
use ergon_venues::endpoint::{
    Amend, CancelReplace, ClientOrderId, Decimal, Endpoints, HmacKey, Lookup, Method, NewOrder,
    OrderRef, OrderState, OrderType, Placed, Prepared, Side, Symbol, TimeInForce,
};
use ergon_venues::hyperliquid::{self, Action, Exchange, Hyperliquid, Signature, Signer};
use ergon_venues::okx::{self, Okx};
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
/// the 10 s and the 1 min order limits and 0 IP weight; cancel 1; modify (PUT) as a
/// new order; batchOrders 5 weight, 5 on the 10 s and 1 on the minute
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
        (Some(Method::Put), parts(0, 1, 1))
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

fn bybit() -> (Bybit, Budget) {
    let mut b = Budget::builder();
    let clock = Clock::anchor(10 * SEC, 1_700_000_000_000);
    let auth = bybit::Auth::new("XXXXXXXXXX", b"YYYYYYYYYY", 5000).unwrap();
    let venue = Bybit::new(&mut b, clock, bybit::Config::default())
        .unwrap()
        .with_auth(auth);
    (venue, b.build(0).unwrap())
}

/// Bybit's documented signature: HMAC-SHA256 of `timestamp + api_key +
/// recv_window + jsonBodyString` (POST) or `... + queryString` (GET), hex, in `X-BAPI-SIGN`
/// (<https://bybit-exchange.github.io/docs/v5/guide#create-a-request>, checked
/// 2026-11-30). The page gives the recipe and sample code, not a fixed vector, so
/// this checks the recipe on the prepared bytes.
#[test]
fn bybit_requests_are_signed_as_documented() {
    let (mut v, _) = bybit();
    let mut p = Prepared::default();
    let mut order = btcusdt("mm-1");
    order.price = Some(dec("37000"));
    order.quantity = dec("0.01");
    v.new_order(&mut p, &order, 10 * SEC).unwrap();
    assert_eq!(
        (p.method(), p.target()),
        (Some(Method::Post), "/v5/order/create")
    );
    let body = std::str::from_utf8(p.body()).unwrap();
    assert_eq!(
        body,
        r#"{"category":"linear","symbol":"BTCUSDT","side":"Buy","orderType":"Limit","qty":"0.01","price":"37000","timeInForce":"GTC","orderLinkId":"mm-1"}"#
    );
    let _: serde_json::Value = serde_json::from_str(body).expect("the body is JSON");
    assert_eq!(p.header("X-BAPI-TIMESTAMP"), Some("1700000000000"));
    assert_eq!(p.header("X-BAPI-RECV-WINDOW"), Some("5000"));
    assert_eq!(p.header("X-BAPI-API-KEY"), Some("XXXXXXXXXX"));
    assert_eq!(p.header("Content-Type"), Some("application/json"));
    let want = HmacKey::new(b"YYYYYYYYYY")
        .sign(&[format!("1700000000000XXXXXXXXXX5000{body}").as_bytes()]);
    assert_eq!(p.header("X-BAPI-SIGN"), Some(hex(&want).as_str()));
    assert_eq!(p.deadline_ns(), 15 * SEC);
    let r = OrderRef {
        symbol: sym("BTCUSDT"),
        client_order_id: id("mm-1"),
    };
    v.query_order(&mut p, &r, 10 * SEC).unwrap();
    assert_eq!(
        p.target(),
        "/v5/order/realtime?category=linear&symbol=BTCUSDT&orderLinkId=mm-1"
    );
    let want = HmacKey::new(b"YYYYYYYYYY")
        .sign(&[b"1700000000000XXXXXXXXXX5000category=linear&symbol=BTCUSDT&orderLinkId=mm-1"]);
    assert_eq!(p.header("X-BAPI-SIGN"), Some(hex(&want).as_str()));
    assert_eq!(p.body(), b"");
    let mut reduce = order;
    reduce.reduce_only = true;
    reduce.order_type = OrderType::PostOnly;
    let body = v
        .batch_orders(&mut p, &[order, reduce], 0)
        .unwrap()
        .body()
        .to_vec();
    let j: serde_json::Value = serde_json::from_slice(&body).expect("the batch body is JSON");
    assert_eq!(j["request"][1]["reduceOnly"], serde_json::json!(true));
    assert_eq!(j["request"][1]["timeInForce"], "PostOnly");
}

/// Bybit's per-UID limits count each request on its endpoint (create, amend,
/// cancel: 10/s for linear, classic VIP 0), a batch once per order on the create
/// limit, and every request once on the IP's 600 per 5 s
/// (<https://bybit-exchange.github.io/docs/v5/rate-limit>, checked 2026-11-30).
#[test]
fn bybit_parts_equal_the_documented_limits() {
    let (mut v, budget) = bybit();
    let mut p = Prepared::default();
    let parts = |bucket: &str, n: u32| with(&[("ip", 0), ("ip_5s", 1), (bucket, n)]);
    v.new_order(&mut p, &btcusdt("a"), 0).unwrap();
    assert_eq!(named(&p, &budget), parts("/v5/order/create", 1));
    let r = OrderRef {
        symbol: sym("BTCUSDT"),
        client_order_id: id("a"),
    };
    v.cancel(&mut p, &r, 0).unwrap();
    assert_eq!(named(&p, &budget), parts("/v5/order/cancel", 1));
    let amend = Amend {
        order: r,
        side: Side::Buy,
        price: Some(dec("1")),
        quantity: None,
    };
    v.amend(&mut p, &amend, 0).unwrap();
    assert_eq!(named(&p, &budget), parts("/v5/order/amend", 1));
    assert!(!std::str::from_utf8(p.body()).unwrap().contains("qty"));
    let twenty: Vec<_> = (0..20).map(|i| btcusdt(&format!("b{i}"))).collect();
    for n in [1, 7, 20] {
        v.batch_orders(&mut p, &twenty[..n], 0).unwrap();
        assert_eq!(named(&p, &budget), parts("/v5/order/create", n as u32));
    }
    v.query_order(&mut p, &r, 0).unwrap();
    assert_eq!(named(&p, &budget), parts("read", 1));
    // Bybit's page: at most 50 orders, 20 unless asked; the next page by the
    // last one's nextPageCursor, sent percent-encoded, and charged as a read
    // (https://bybit-exchange.github.io/docs/v5/order/open-order).
    v.open_orders(&mut p, None, 0).unwrap();
    assert_eq!(
        p.target(),
        "/v5/order/realtime?category=linear&settleCoin=USDT&limit=50"
    );
    let cursor = b"page_args%3Dfd4300ae-7847-404e-b947-b46980a4d140%26symbol%3D6%26";
    v.open_orders_after(&mut p, Some(sym("BTCUSDT")), cursor, 0)
        .unwrap();
    assert_eq!(
        (p.target(), named(&p, &budget)),
        (
            "/v5/order/realtime?category=linear&symbol=BTCUSDT&limit=50\
             &cursor=page_args%253Dfd4300ae-7847-404e-b947-b46980a4d140%2526symbol%253D6%2526",
            parts("read", 1)
        )
    );
    assert!(v.open_orders_after(&mut p, None, b"", 0).is_err());
    v.book(&mut p, sym("BTCUSDT"), 500, 0).unwrap();
    assert_eq!(
        (named(&p, &budget), p.header("X-BAPI-SIGN")),
        (parts("read", 1), None)
    );
    assert!(v.book(&mut p, sym("BTCUSDT"), 501, 0).is_err());
    v.account(&mut p, 0).unwrap();
    assert_eq!(p.target(), "/v5/account/wallet-balance?accountType=UNIFIED");
}

#[test]
fn bybit_reconcile_reads_found_and_empty_lists() {
    let (v, _) = bybit();
    let found = read("bybit", "query_found", |r| v.read_order(r));
    let Lookup::Found(info) = found else {
        panic!("{found:?}")
    };
    assert_eq!(
        (info.state, info.filled.as_deref()),
        (OrderState::PartiallyFilled, Some("0.004"))
    );
    assert_eq!(
        read("bybit", "query_not_found", |r| v.read_order(r)),
        Lookup::NotFound
    );
    for unknown in ["rate_10006", "gateway_502", "ban_403", "timeout_10000"] {
        assert_eq!(
            read("bybit", unknown, |r| v.read_order(r)),
            Lookup::Unknown,
            "{unknown}"
        );
    }
    let placed = read("bybit", "order_ok", |r| v.read_placed(r));
    assert!(
        matches!(placed, Placed::Accepted(i) if i.venue_order_id.as_str() == "1321003749386327552"),
        "{placed:?}"
    );
    assert_eq!(
        read("bybit", "rejected_110007", |r| v.read_placed(r)),
        Placed::Refused
    );
    assert_eq!(
        read("bybit", "backend_timeout_170007", |r| v.read_placed(r)),
        Placed::Unknown
    );
}

fn okx() -> (Okx, Budget) {
    let mut b = Budget::builder();
    // 2020-12-08T09:08:57.715Z, the docs' example timestamp, at now = 10 s.
    let clock = Clock::anchor(10 * SEC, 1_607_418_537_715);
    let auth = okx::Auth::new("key-1", b"secret-1", "pass-1", 5000).unwrap();
    let venue = Okx::new(&mut b, clock, okx::Config::default())
        .unwrap()
        .with_auth(auth);
    (venue, b.build(0).unwrap())
}

fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in b.chunks(3) {
        let n = c
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &x)| n | u32::from(x) << (16 - 8 * i));
        for i in 0..4 {
            out.push(if i <= c.len() {
                A[(n >> (18 - 6 * i)) as usize & 63] as char
            } else {
                '='
            });
        }
    }
    out
}

fn okx_order(cloid: &str) -> NewOrder<'static> {
    NewOrder {
        symbol: sym("BTC-USDT-SWAP"),
        ..btcusdt(cloid)
    }
}

/// OKX's documented signature: base64 of HMAC-SHA256 over `timestamp + method +
/// requestPath + body`, the timestamp in ISO 8601 with milliseconds
/// (`2020-12-08T09:08:57.715Z`), with `OK-ACCESS-KEY`, `-SIGN`, `-TIMESTAMP`,
/// `-PASSPHRASE`, and `expTime` on trade requests
/// (<https://www.okx.com/docs-v5/en/#overview-rest-authentication-making-requests>,
/// checked 2026-11-30). The page gives the recipe, not a fixed signature.
#[test]
fn okx_requests_are_signed_as_documented() {
    let (mut v, _) = okx();
    let mut p = Prepared::default();
    v.new_order(&mut p, &okx_order("mm1"), 10 * SEC).unwrap();
    let body = std::str::from_utf8(p.body()).unwrap();
    assert_eq!(
        body,
        r#"{"instId":"BTC-USDT-SWAP","tdMode":"cross","side":"buy","ordType":"limit","sz":"1","px":"9000","clOrdId":"mm1"}"#
    );
    assert_eq!(
        p.header("OK-ACCESS-TIMESTAMP"),
        Some("2020-12-08T09:08:57.715Z")
    );
    let want = HmacKey::new(b"secret-1")
        .sign(&[format!("2020-12-08T09:08:57.715ZPOST/api/v5/trade/order{body}").as_bytes()]);
    assert_eq!(p.header("OK-ACCESS-SIGN"), Some(base64(&want).as_str()));
    assert_eq!(p.header("OK-ACCESS-PASSPHRASE"), Some("pass-1"));
    assert_eq!(p.header("expTime"), Some("1607418542715"));
    assert_eq!(p.deadline_ns(), 15 * SEC);
    v.account(&mut p, 10 * SEC).unwrap();
    let want =
        HmacKey::new(b"secret-1").sign(&[b"2020-12-08T09:08:57.715ZGET/api/v5/account/balance"]);
    assert_eq!(p.header("OK-ACCESS-SIGN"), Some(base64(&want).as_str()));
    assert_eq!(p.header("expTime"), None, "reads carry no expTime");
    // OKX's clOrdId is letters and digits only.
    assert_eq!(
        v.new_order(&mut p, &okx_order("mm-1"), 0).err(),
        Some(Error::BadArgument(
            "OKX clOrdId: 1 to 32 letters and digits"
        ))
    );
    assert!(p.is_empty());
    let body = v
        .batch_orders(&mut p, &[okx_order("a1"), okx_order("a2")], 0)
        .unwrap()
        .body()
        .to_vec();
    let j: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(j[1]["clOrdId"], "a2");
}

/// OKX counts place order per instrument (60 per 2 s), batch orders per order
/// (300 per 2 s), cancel and amend per instrument (60 per 2 s), and new and amended
/// orders on the sub-account's 1000 per 2 s
/// (<https://www.okx.com/docs-v5/en/#overview-rate-limits>, checked 2026-11-30).
#[test]
fn okx_parts_equal_the_documented_limits() {
    let (mut v, budget) = okx();
    let mut p = Prepared::default();
    v.new_order(&mut p, &okx_order("a"), 0).unwrap();
    assert_eq!(
        named(&p, &budget),
        with(&[("ip", 0), ("/api/v5/trade/order", 1), ("sub-account", 1)])
    );
    let r = OrderRef {
        symbol: sym("BTC-USDT-SWAP"),
        client_order_id: id("a"),
    };
    v.cancel(&mut p, &r, 0).unwrap();
    assert_eq!(
        named(&p, &budget),
        with(&[("ip", 0), ("/api/v5/trade/cancel-order", 1)])
    );
    v.amend(
        &mut p,
        &Amend {
            order: r,
            side: Side::Buy,
            price: None,
            quantity: Some(dec("3")),
        },
        0,
    )
    .unwrap();
    assert_eq!(
        named(&p, &budget),
        with(&[
            ("ip", 0),
            ("/api/v5/trade/amend-order", 1),
            ("sub-account", 1)
        ])
    );
    assert!(std::str::from_utf8(p.body())
        .unwrap()
        .ends_with(r#""newSz":"3"}"#));
    let orders: Vec<_> = (0..20).map(|i| okx_order(&format!("b{i}"))).collect();
    v.batch_orders(&mut p, &orders, 0).unwrap();
    assert_eq!(
        named(&p, &budget),
        with(&[
            ("ip", 0),
            ("/api/v5/trade/batch-orders", 20),
            ("sub-account", 20)
        ])
    );
    v.query_order(&mut p, &r, 0).unwrap();
    assert_eq!(
        (p.target(), named(&p, &budget)),
        (
            "/api/v5/trade/order?instId=BTC-USDT-SWAP&clOrdId=a",
            with(&[("ip", 0), ("read", 1)])
        )
    );
    v.book(&mut p, sym("BTC-USDT-SWAP"), 400, 0).unwrap();
    assert_eq!(
        (p.target(), p.header("OK-ACCESS-SIGN")),
        ("/api/v5/market/books?instId=BTC-USDT-SWAP&sz=400", None)
    );
    v.open_orders(&mut p, None, 0).unwrap();
    assert_eq!(p.target(), "/api/v5/trade/orders-pending");
}

#[test]
fn okx_reconcile_reads_found_not_found_and_unknown() {
    let (v, _) = okx();
    let found = read("okx", "query_found", |r| v.read_order(r));
    let Lookup::Found(info) = found else {
        panic!("{found:?}")
    };
    assert_eq!(
        (info.state, info.filled.as_deref()),
        (OrderState::PartiallyFilled, Some("4"))
    );
    assert_eq!(
        read("okx", "query_not_found_51603", |r| v.read_order(r)),
        Lookup::NotFound
    );
    assert_eq!(
        read("okx", "unavailable_50001_read", |r| v.read_order(r)),
        Lookup::Unknown
    );
    assert_eq!(
        read("okx", "gateway_502", |r| v.read_order(r)),
        Lookup::Unknown
    );
    assert!(matches!(
        read("okx", "order_ok", |r| v.read_placed(r)),
        Placed::Accepted(_)
    ));
    assert_eq!(
        read("okx", "rejected_51008", |r| v.read_placed(r)),
        Placed::Refused
    );
    assert_eq!(
        read("okx", "timeout_50004", |r| v.read_placed(r)),
        Placed::Unknown
    );
}

/// A signer that records what it was asked to sign and answers a fixed signature:
/// the crate holds no key, so the test checks what reaches the signer.
#[derive(Default)]
struct Recorder {
    seen: Vec<(String, String, u64, u64)>,
}

impl Signer for Recorder {
    fn address(&self) -> &str {
        "0x0000000000000000000000000000000000000abc"
    }
    fn sign(
        &mut self,
        action: Action<'_>,
        json: &[u8],
        nonce: u64,
        expires: u64,
    ) -> Result<Signature, Error> {
        let kind = format!("{action:?}").split('(').next().unwrap().to_string();
        self.seen.push((
            kind,
            String::from_utf8(json.to_vec()).unwrap(),
            nonce,
            expires,
        ));
        Ok(Signature {
            r: [0x11; 32],
            s: [0x22; 32],
            v: 27,
        })
    }
}

fn hl() -> (Exchange<Recorder>, Budget) {
    let mut b = Budget::builder();
    let clock = Clock::anchor(10 * SEC, 1_700_000_000_000);
    let venue = Hyperliquid::new(&mut b, clock, hyperliquid::Config::default()).unwrap();
    let ex = Exchange::new(venue, Recorder::default(), &[("BTC", 0), ("ETH", 1)], 5000).unwrap();
    (ex, b.build(0).unwrap())
}

const CLOID: &str = "0x00000000000000000000000000000001";

fn hl_order(cloid: &str) -> NewOrder<'static> {
    NewOrder {
        symbol: sym("BTC"),
        price: Some(dec("37000")),
        quantity: dec("0.01"),
        ..btcusdt(cloid)
    }
}

/// Hyperliquid's exchange request: `{"action", "nonce", "signature", "expiresAfter"}`
/// with the order wire fields `a b p s r t c`
/// (<https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/exchange-endpoint>,
/// checked 2026-11-30). The signature is the caller's (EIP-712 over msgpack): the
/// test checks that the signer sees the action as sent, the nonce and expiry.
#[test]
fn hyperliquid_actions_go_through_the_callers_signer() {
    let (mut ex, _) = hl();
    let mut p = Prepared::default();
    ex.new_order(&mut p, &hl_order(CLOID), 10 * SEC).unwrap();
    let action = r#"{"type":"order","orders":[{"a":0,"b":true,"p":"37000","s":"0.01","r":false,"t":{"limit":{"tif":"Gtc"}},"c":"0x00000000000000000000000000000001"}],"grouping":"na"}"#;
    let body = std::str::from_utf8(p.body()).unwrap();
    let r = "11".repeat(32);
    let s = "22".repeat(32);
    assert_eq!(
        body,
        format!(
            r#"{{"action":{action},"nonce":1700000000000,"signature":{{"r":"0x{r}","s":"0x{s}","v":27}},"expiresAfter":1700000005000}}"#
        )
    );
    let _: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!((p.target(), p.method()), ("/exchange", Some(Method::Post)));
    assert_eq!(p.deadline_ns(), 15 * SEC);
    // Nonces never repeat, even within one millisecond.
    ex.noop(&mut p, 10 * SEC).unwrap();
    assert!(std::str::from_utf8(p.body())
        .unwrap()
        .starts_with(r#"{"action":{"type":"noop"},"nonce":1700000000001,"#));
    let r = OrderRef {
        symbol: sym("ETH"),
        client_order_id: id(CLOID),
    };
    ex.cancel(&mut p, &r, 10 * SEC).unwrap();
    ex.query_order(&mut p, &r, 10 * SEC).unwrap();
    assert_eq!(
        std::str::from_utf8(p.body()).unwrap(),
        r#"{"type":"orderStatus","user":"0x0000000000000000000000000000000000000abc","oid":"0x00000000000000000000000000000001"}"#
    );
    assert_eq!(p.target(), "/info");
    assert_eq!(
        ex.new_order(&mut p, &hl_order("mm-1"), 0).err(),
        Some(Error::BadArgument(
            "Hyperliquid cloid: 0x and 32 hex digits"
        ))
    );
    let unknown = NewOrder {
        symbol: sym("DOGE"),
        ..hl_order(CLOID)
    };
    assert_eq!(
        ex.new_order(&mut p, &unknown, 0).err(),
        Some(Error::BadArgument("asset not in the table"))
    );
    assert!(p.is_empty());
}

#[test]
fn hyperliquid_signer_sees_each_action() {
    let (mut ex, _) = hl();
    let mut p = Prepared::default();
    ex.new_order(&mut p, &hl_order(CLOID), 10 * SEC).unwrap();
    ex.noop(&mut p, 10 * SEC).unwrap();
    let amend = Amend {
        order: OrderRef {
            symbol: sym("BTC"),
            client_order_id: id(CLOID),
        },
        side: Side::Sell,
        price: Some(dec("1")),
        quantity: Some(dec("2")),
    };
    ex.amend(&mut p, &amend, 10 * SEC).unwrap();
    ex.new_order(&mut p, &hl_order(CLOID), 10 * SEC).unwrap();
    let seen = ex.signer_mut().seen.clone();
    assert_eq!(
        seen.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(),
        ["Order", "Noop", "Modify", "Order"]
    );
    assert_eq!(seen[1].1, r#"{"type":"noop"}"#);
    assert!(seen[2].1.starts_with(r#"{"type":"modify","oid":"0x00000000000000000000000000000001","order":{"a":0,"b":false,"p":"1","s":"2","#));
    assert!(seen.windows(2).all(|w| w[1].2 > w[0].2), "nonces increase");
    assert!(
        seen.iter().all(|s| s.3 == s.2 + 5000),
        "expiresAfter = nonce + 5 s"
    );
}

/// Hyperliquid weighs an exchange action 1 + floor(n / 40) for n orders, and each
/// counts against the address; info requests by type: `orderStatus`, `l2Book`,
/// `clearinghouseState` 2, `openOrders` 20
/// (<https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/rate-limits-and-user-limits>,
/// checked 2026-11-30).
#[test]
fn hyperliquid_parts_equal_the_documented_weights() {
    let (mut ex, budget) = hl();
    let mut p = Prepared::default();
    let action = |w: u32| {
        with(&[
            ("ip", 0),
            ("ip_weight_1m", w),
            ("ip_burst", w),
            ("address", 0),
        ])
    };
    let info = |w: u32| with(&[("ip", 0), ("ip_weight_1m", w), ("ip_burst", w)]);
    ex.new_order(&mut p, &hl_order(CLOID), 0).unwrap();
    assert_eq!(
        (p.kind(), named(&p, &budget)),
        (Some(Request::Order), action(1))
    );
    let twenty: Vec<_> = (0..20)
        .map(|i| hl_order(&format!("0x{:032x}", i + 1)))
        .collect();
    ex.batch_orders(&mut p, &twenty, 0).unwrap();
    assert_eq!(
        (p.kind(), named(&p, &budget)),
        (Some(Request::Batch(20)), action(1))
    );
    ex.noop(&mut p, 0).unwrap();
    assert_eq!(named(&p, &budget), action(1));
    let r = OrderRef {
        symbol: sym("BTC"),
        client_order_id: id(CLOID),
    };
    ex.query_order(&mut p, &r, 0).unwrap();
    assert_eq!(
        (p.kind(), named(&p, &budget)),
        (Some(Request::Info("orderStatus")), info(2))
    );
    ex.open_orders(&mut p, None, 0).unwrap();
    assert_eq!(named(&p, &budget), info(20));
    ex.book(&mut p, sym("BTC"), 20, 0).unwrap();
    assert_eq!(named(&p, &budget), info(2));
    ex.account(&mut p, 0).unwrap();
    assert_eq!(named(&p, &budget), info(2));
}

#[test]
fn hyperliquid_reconcile_reads_order_status() {
    let (ex, _) = hl();
    let found = read("hyperliquid", "order_status_found", |r| ex.read_order(r));
    let Lookup::Found(info) = found else {
        panic!("{found:?}")
    };
    assert_eq!(
        (info.state, info.venue_order_id.as_str()),
        (OrderState::New, "77738308")
    );
    assert_eq!(
        read("hyperliquid", "order_status_unknown_oid", |r| ex
            .read_order(r)),
        Lookup::NotFound
    );
    assert_eq!(
        read("hyperliquid", "gateway_502", |r| ex.read_order(r)),
        Lookup::Unknown
    );
    assert!(
        matches!(read("hyperliquid", "order_resting", |r| ex.read_placed(r)), Placed::Accepted(i) if i.venue_order_id.as_str() == "77738308")
    );
    assert_eq!(
        read("hyperliquid", "order_rejected", |r| ex.read_placed(r)),
        Placed::Refused
    );
    assert_eq!(
        read("hyperliquid", "user_not_found_err", |r| ex.read_placed(r)),
        Placed::Refused
    );
}

/// Every prepared request carries the symbol it names (the gateway's reconcile
/// queries the order there), and none when it names none.
#[test]
fn a_prepared_request_carries_its_symbol() {
    fn check<V: Endpoints>(v: &mut V, name: &'static str) {
        let mut p = Prepared::with_capacity(1024);
        let s = sym(name);
        let order = NewOrder {
            symbol: s,
            side: Side::Buy,
            order_type: OrderType::Limit(TimeInForce::Gtc),
            price: Some(dec("1.5")),
            quantity: dec("2"),
            client_order_id: id("sym1"),
            reduce_only: false,
        };
        let r = OrderRef {
            symbol: s,
            client_order_id: id("sym1"),
        };
        v.new_order(&mut p, &order, 10 * SEC).unwrap();
        assert_eq!(p.symbol(), Some(s), "{name}: order");
        v.cancel(&mut p, &r, 10 * SEC).unwrap();
        assert_eq!(p.symbol(), Some(s), "{name}: cancel");
        v.query_order(&mut p, &r, 10 * SEC).unwrap();
        assert_eq!(p.symbol(), Some(s), "{name}: query");
        v.book(&mut p, s, 5, 10 * SEC).unwrap();
        assert_eq!(p.symbol(), Some(s), "{name}: book");
        v.account(&mut p, 10 * SEC).unwrap();
        assert_eq!(p.symbol(), None, "{name}: the account names none");
    }
    check(&mut spot().0, "LTCBTC");
    check(&mut bybit().0, "BTCUSDT");
    check(&mut okx().0, "BTC-USDT-SWAP");
}

/// Cancel-all and batch cancels: one request each, the cancel limit once per order
/// (Bybit `cancel-batch`, OKX `cancel-batch-orders`), one for a cancel-all (Binance
/// Spot `DELETE openOrders`, Bybit `cancel-all`); bad batches leave nothing to send.
#[test]
fn cancel_all_and_batch_cancels_charge_the_cancel_limit() {
    let (mut s, sb) = spot();
    let mut p = Prepared::with_capacity(2048);
    s.cancel_all(&mut p, sym("LTCBTC"), 10 * SEC).unwrap();
    assert_eq!(p.method(), Some(Method::Delete));
    assert!(
        p.target()
            .starts_with("/api/v3/openOrders?symbol=LTCBTC&recvWindow=5000&timestamp="),
        "{}",
        p.target()
    );
    assert_eq!(p.kind(), Some(Request::Cancel));
    assert_eq!(named(&p, &sb), named_of(&s, &sb, Request::Cancel));

    let (mut b, bb) = bybit();
    let refs = [0, 1, 2].map(|i| OrderRef {
        symbol: sym("BTCUSDT"),
        client_order_id: id(&format!("c{i}")),
    });
    b.batch_cancel(&mut p, &refs, 10 * SEC).unwrap();
    assert_eq!(p.target(), "/v5/order/cancel-batch");
    assert_eq!(
        core::str::from_utf8(p.body()).unwrap(),
        r#"{"category":"linear","request":[{"symbol":"BTCUSDT","orderLinkId":"c0"},{"symbol":"BTCUSDT","orderLinkId":"c1"},{"symbol":"BTCUSDT","orderLinkId":"c2"}]}"#
    );
    assert_eq!(p.client_order_ids().len(), 3);
    assert_eq!(
        named(&p, &bb),
        with(&[("/v5/order/cancel", 3), ("ip", 0), ("ip_5s", 1)])
    );
    b.cancel_all(&mut p, sym("BTCUSDT"), 10 * SEC).unwrap();
    assert_eq!(p.target(), "/v5/order/cancel-all");
    assert_eq!(
        core::str::from_utf8(p.body()).unwrap(),
        r#"{"category":"linear","symbol":"BTCUSDT"}"#
    );
    assert_eq!(
        named(&p, &bb),
        with(&[("/v5/order/cancel", 1), ("ip", 0), ("ip_5s", 1)])
    );
    assert!(b.batch_cancel(&mut p, &[], 10 * SEC).is_err());
    assert!(p.is_empty(), "a refused batch leaves nothing to send");
    let mixed = [
        refs[0],
        OrderRef {
            symbol: sym("ETHUSDT"),
            ..refs[1]
        },
    ];
    assert!(b.batch_cancel(&mut p, &mixed, 10 * SEC).is_err());
    let many = [refs[0]; 21];
    assert!(b.batch_cancel(&mut p, &many, 10 * SEC).is_err());

    let (mut o, ob) = okx();
    let refs = [0, 1].map(|i| OrderRef {
        symbol: sym("BTC-USDT-SWAP"),
        client_order_id: id(&format!("c{i}")),
    });
    o.batch_cancel(&mut p, &refs, 10 * SEC).unwrap();
    assert_eq!(p.target(), "/api/v5/trade/cancel-batch-orders");
    assert_eq!(
        core::str::from_utf8(p.body()).unwrap(),
        r#"[{"instId":"BTC-USDT-SWAP","clOrdId":"c0"},{"instId":"BTC-USDT-SWAP","clOrdId":"c1"}]"#
    );
    assert_eq!(
        named(&p, &ob),
        with(&[("/api/v5/trade/cancel-order", 2), ("ip", 0)])
    );
    assert!(o.batch_cancel(&mut p, &[], 10 * SEC).is_err());
    assert!(p.is_empty());
    assert_eq!(
        o.cancel_all(&mut p, sym("BTC-USDT-SWAP"), 10 * SEC).err(),
        Some(Error::Unsupported),
        "OKX has no cancel-all of a symbol"
    );
}

/// The parts `venue` charges for `kind`, named.
fn named_of<V: Venue>(venue: &V, budget: &Budget, kind: Request<'_>) -> Vec<(String, u32)> {
    let mut v: Vec<_> = venue
        .parts(kind)
        .unwrap()
        .iter()
        .map(|part| (budget.name(part.bucket).unwrap().to_string(), part.cost))
        .collect();
    v.sort();
    v
}

/// A re-send is re-signed (issue 26, item 3): `restamp` gives exactly what a fresh
/// preparation at the later time gives (timestamp, signature, deadline), keeps the
/// parts, ids, symbol and label, and a venue without it says so.
#[test]
fn binance_restamp_equals_a_fresh_preparation_later() {
    let (mut spot, _) = spot();
    let mut p = Prepared::with_capacity(1024);
    spot.new_order(&mut p, &ltcbtc("mm-7"), 10 * SEC).unwrap();
    p.set_label(ergon_venues::endpoint::Label::NONE);
    let before = p.target().to_owned();
    let mut fresh = Prepared::with_capacity(1024);
    spot.new_order(&mut fresh, &ltcbtc("mm-7"), 13 * SEC)
        .unwrap();
    spot.restamp(&mut p, 13 * SEC).unwrap();
    assert_ne!(p.target(), before, "a fresh timestamp");
    assert_eq!(p.target(), fresh.target());
    assert_eq!(p.deadline_ns(), fresh.deadline_ns());
    assert_eq!(p.parts(), fresh.parts());
    assert_eq!(p.kind(), fresh.kind());
    assert_eq!(p.client_order_ids(), fresh.client_order_ids());
    assert_eq!(p.symbol(), fresh.symbol());
    assert_eq!(p.header("X-MBX-APIKEY"), fresh.header("X-MBX-APIKEY"));
    // A cancel-all names no order: the same holds.
    let sym = Symbol::new("LTCBTC").unwrap();
    spot.cancel_all(&mut p, sym, 10 * SEC).unwrap();
    spot.cancel_all(&mut fresh, sym, 14 * SEC).unwrap();
    spot.restamp(&mut p, 14 * SEC).unwrap();
    assert_eq!(p.target(), fresh.target());
    // Bybit cannot (yet): Unsupported, and the request is left as it was.
    let mut b = ergon_core::Builder::default();
    let mut by = Bybit::new(
        &mut b,
        Clock::anchor(0, BINANCE_TS_MS),
        bybit::Config::default(),
    )
    .unwrap()
    .with_auth(bybit::Auth::new("k", b"s", 5_000).unwrap());
    let it = OrderRef {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        client_order_id: ClientOrderId::new("c1").unwrap(),
    };
    by.query_order(&mut p, &it, 0).unwrap();
    let t = p.target().to_owned();
    assert_eq!(by.restamp(&mut p, SEC), Err(Error::Unsupported));
    assert_eq!(p.target(), t);
}
