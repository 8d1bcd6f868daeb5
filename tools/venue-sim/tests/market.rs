//! Binance Spot's market data and account history endpoints, as a third-party
//! client (python-binance and the like) calls them: status, shape and the weight
//! each one adds to `X-MBX-USED-WEIGHT-1D`, as documented in `rest-api.md`.

mod common;

use common::{order_params, signed_query, Client, Resp};
use ergon_venue_sim::{Config, Interval, LimitType, RateLimit, Server, DEFAULT_API_KEY};

/// Spot's limits with the weight counted per day, so the weight each request adds
/// is read without waiting for a window to start.
fn config() -> Config {
    let mut c = Config::binance_spot();
    c.rate_limits[0] = RateLimit::new(LimitType::RequestWeight, Interval::Day, 1, 1_000_000);
    c
}

/// Sends a request and returns it with the weight it added.
fn weighed(before: &mut u64, r: std::io::Result<Resp>) -> (Resp, u64) {
    let r = r.expect("answer");
    let used = r.header_u64("X-MBX-USED-WEIGHT-1D");
    let added = used - *before;
    *before = used;
    (r, added)
}

#[test]
fn market_data_answers_with_documented_shapes_and_weights() {
    let s = Server::start(config()).unwrap();
    let mut c = Client::connect(s.addr());
    let mut used = 0;
    let mut get = |c: &mut Client, target: &str| c_get(c, &mut used, target);

    let (r, w) = get(&mut c, "/api/v3/ticker/price?symbol=BTCUSDT");
    assert_eq!((r.status, w), (200, 2), "{}", r.body);
    assert_eq!(r.json()["price"], "50000.00000000");
    let (r, w) = get(&mut c, "/api/v3/ticker/price");
    assert_eq!((r.status, w), (200, 4));
    assert_eq!(r.json()[0]["symbol"], "BTCUSDT");
    let (r, w) = get(&mut c, "/api/v3/ticker/price?symbols=%5B%22BTCUSDT%22%5D");
    assert_eq!((r.status, w), (200, 4), "{}", r.body);
    assert!(r.json().is_array());

    let (r, w) = get(&mut c, "/api/v3/ticker/bookTicker?symbol=BTCUSDT");
    assert_eq!((r.status, w), (200, 2));
    let b = r.json();
    assert_eq!(
        (b["bidPrice"].as_str(), b["askPrice"].as_str()),
        (Some("49999.99000000"), Some("50000.01000000"))
    );
    assert_eq!(b["askQty"], "1.00000000");
    let (_, w) = get(&mut c, "/api/v3/ticker/bookTicker");
    assert_eq!(w, 4);

    let (r, w) = get(&mut c, "/api/v3/ticker/24hr?symbol=BTCUSDT");
    assert_eq!((r.status, w), (200, 2));
    for k in [
        "priceChange",
        "lastPrice",
        "bidPrice",
        "volume",
        "openTime",
        "count",
    ] {
        assert!(r.json().get(k).is_some(), "{k} in {}", r.body);
    }
    let (r, w) = get(&mut c, "/api/v3/ticker/24hr?symbol=BTCUSDT&type=MINI");
    assert_eq!(w, 2);
    assert!(
        r.json().get("bidPrice").is_none(),
        "MINI has no book fields"
    );
    let (r, w) = get(&mut c, "/api/v3/ticker/24hr");
    assert_eq!((r.status, w), (200, 80), "all symbols");
    assert!(r.json().is_array());

    let (r, w) = get(&mut c, "/api/v3/trades?symbol=BTCUSDT&limit=10");
    assert_eq!((r.status, w), (200, 25));
    assert_eq!(r.json(), serde_json::json!([]), "no fills yet");

    let (r, w) = get(&mut c, "/api/v3/klines?symbol=BTCUSDT&interval=1m&limit=3");
    assert_eq!((r.status, w), (200, 2), "{}", r.body);
    let k = r.json();
    assert_eq!(k.as_array().unwrap().len(), 3);
    assert_eq!(
        k[0].as_array().unwrap().len(),
        12,
        "the documented 12 fields"
    );
    assert_eq!(
        k[1][0].as_i64().unwrap() - k[0][0].as_i64().unwrap(),
        60_000
    );
    let (r, w) = get(
        &mut c,
        "/api/v3/uiKlines?symbol=BTCUSDT&interval=1h&limit=1",
    );
    assert_eq!((r.status, w), (200, 2));
    let (r, w) = get(&mut c, "/api/v3/klines?symbol=BTCUSDT&interval=7m");
    assert_eq!((r.status, r.code(), w), (400, -1120, 2));
    let (r, _) = get(&mut c, "/api/v3/klines?symbol=BTCUSDT");
    assert_eq!(r.code(), -1102, "interval is mandatory");

    let (r, w) = get(&mut c, "/api/v3/avgPrice?symbol=BTCUSDT");
    assert_eq!((r.status, w), (200, 2));
    assert_eq!(r.json()["mins"], 5);

    let (r, _) = get(&mut c, "/api/v3/ticker/price?symbol=BTCUSDT&symbols=%5B%5D");
    assert_eq!(r.code(), -1128, "symbol and symbols together");
    let (r, _) = get(&mut c, "/api/v3/ticker/price?symbol=ETHUSDT");
    assert_eq!(r.code(), -1121);
    s.stop();
}

#[test]
fn account_history_test_orders_and_cancel_all() {
    let s = Server::start(config()).unwrap();
    let mut c = Client::connect(s.addr());
    let mut used = 0;
    let mut signed = |c: &mut Client, method: &str, path: &str, params: &str| {
        let q = signed_query(&s, params);
        let r = c.send(method, &format!("{path}?{q}"), Some(DEFAULT_API_KEY), "");
        weighed(&mut used, r)
    };

    // order/test: validated, never booked, not counted as an order.
    let (r, w) = signed(&mut c, "POST", "/api/v3/order/test", &order_params("t1"));
    assert_eq!((r.status, w, r.body.as_str()), (200, 1, "{}"));
    assert!(r.header("X-MBX-ORDER-COUNT-10S").is_none());
    let p = format!("{}&computeCommissionRates=true", order_params("t2"));
    let (r, w) = signed(&mut c, "POST", "/api/v3/order/test", &p);
    assert_eq!((r.status, w), (200, 20));
    assert!(r.json()["standardCommissionForOrder"]["maker"].is_string());
    let (r, _) = signed(
        &mut c,
        "POST",
        "/api/v3/order/test",
        "symbol=BTCUSDT&side=BUY",
    );
    assert_eq!(r.code(), -1102, "validated like an order");

    // Two resting orders and one MARKET fill.
    for cid in ["a1", "a2"] {
        let (r, _) = signed(&mut c, "POST", "/api/v3/order", &order_params(cid));
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let m = "symbol=BTCUSDT&side=BUY&type=MARKET&quantity=0.02&newClientOrderId=m1";
    let (r, _) = signed(&mut c, "POST", "/api/v3/order", m);
    assert_eq!(r.status, 200);
    let market_id = r.json()["orderId"].as_u64().unwrap();

    let (r, w) = signed(&mut c, "GET", "/api/v3/myTrades", "symbol=BTCUSDT");
    assert_eq!((r.status, w), (200, 20));
    let t = r.json();
    assert_eq!(t.as_array().unwrap().len(), 1);
    assert_eq!(
        (t[0]["orderId"].as_u64(), t[0]["qty"].as_str()),
        (Some(market_id), Some("0.02000000"))
    );
    let q = format!("symbol=BTCUSDT&orderId={market_id}");
    let (_, w) = signed(&mut c, "GET", "/api/v3/myTrades", &q);
    assert_eq!(w, 5, "with orderId");
    let (r, w) = signed(&mut c, "GET", "/api/v3/trades", "symbol=BTCUSDT");
    assert_eq!(w, 25);
    assert_eq!(
        r.json().as_array().unwrap().len(),
        1,
        "the fill is a public trade"
    );

    let (r, w) = signed(&mut c, "GET", "/api/v3/allOrders", "symbol=BTCUSDT");
    assert_eq!((r.status, w), (200, 20));
    assert_eq!(r.json().as_array().unwrap().len(), 3);
    assert_eq!(r.json()[0]["clientOrderId"], "a1");

    let (r, w) = signed(&mut c, "GET", "/api/v3/rateLimit/order", "");
    assert_eq!((r.status, w), (200, 40));
    let counts = r.json();
    assert_eq!(counts[0]["rateLimitType"], "ORDERS");
    assert_eq!(
        counts[0]["count"], 2,
        "two unfilled placements; the fill took one off"
    );

    let (r, w) = signed(&mut c, "DELETE", "/api/v3/openOrders", "symbol=BTCUSDT");
    assert_eq!((r.status, w), (200, 1), "{}", r.body);
    let canceled = r.json();
    assert_eq!(canceled.as_array().unwrap().len(), 2);
    assert_eq!(canceled[1]["origClientOrderId"], "a2");
    assert_eq!(canceled[1]["status"], "CANCELED");
    let (r, _) = signed(&mut c, "DELETE", "/api/v3/openOrders", "symbol=BTCUSDT");
    assert_eq!((r.status, r.code()), (400, -2011), "nothing left to cancel");
    let (r, _) = signed(&mut c, "DELETE", "/api/v3/openOrders", "");
    assert_eq!(r.code(), -1102, "symbol is mandatory");

    let rep = s.stop();
    assert_eq!((rep.executions, rep.cancels), (3, 2));
}

fn c_get(c: &mut Client, before: &mut u64, target: &str) -> (Resp, u64) {
    let r = c.send("GET", target, None, "");
    weighed(before, r)
}
