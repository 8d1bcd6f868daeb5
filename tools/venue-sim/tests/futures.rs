//! The binance-futures profile: /fapi paths, its limits and headers, order shapes,
//! modify, and the 503 texts that say "unknown" and "failed".

mod common;

use common::{at_window_start, Client};
use ergon_venue_sim::{Config, Fault, Interval, LimitType, RateLimit, Server};

fn order(cid: &str) -> String {
    format!("symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.01&price=49000&newClientOrderId={cid}")
}

#[test]
fn futures_paths_limits_and_shapes() {
    let s = Server::start(Config::binance_futures()).unwrap();
    let mut c = Client::connect(s.addr());
    let r = c.get("/fapi/v1/exchangeInfo");
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["futuresType"], "U_MARGINED");
    let rl = v["rateLimits"].as_array().unwrap();
    assert_eq!(rl.len(), 3);
    assert_eq!(rl[0]["limit"], 2400);
    assert!(r.header("X-MBX-USED-WEIGHT-1M").is_some());
    assert_eq!(
        c.get("/api/v3/exchangeInfo").status,
        404,
        "Spot paths are not futures paths"
    );

    let p = c
        .signed(&s, "POST", "/fapi/v1/order", &order("fu1"))
        .unwrap();
    assert_eq!(p.status, 200, "{}", p.body);
    let pv = p.json();
    for k in [
        "orderId",
        "clientOrderId",
        "status",
        "cumQty",
        "cumQuote",
        "avgPrice",
        "positionSide",
        "reduceOnly",
        "updateTime",
    ] {
        assert!(pv.get(k).is_some(), "futures order lacks {k}: {pv}");
    }
    assert_eq!(p.header_u64("X-MBX-ORDER-COUNT-1M"), 1);
    assert_eq!(p.header_u64("X-MBX-ORDER-COUNT-10S"), 1);

    let dup = c
        .signed(&s, "POST", "/fapi/v1/order", &order("fu1"))
        .unwrap();
    assert_eq!((dup.status, dup.code()), (400, -4116));

    let m = c
        .signed(
            &s,
            "PUT",
            "/fapi/v1/order",
            "symbol=BTCUSDT&origClientOrderId=fu1&side=BUY&quantity=0.02&price=49500",
        )
        .unwrap();
    assert_eq!(m.status, 200, "{}", m.body);
    assert_eq!(m.json()["price"], "49500.00000000");
    assert_eq!(
        m.header_u64("X-MBX-ORDER-COUNT-10S"),
        3,
        "a modify counts as an order"
    );

    let q = c
        .signed(
            &s,
            "GET",
            "/fapi/v1/order",
            "symbol=BTCUSDT&origClientOrderId=fu1",
        )
        .unwrap();
    assert_eq!(q.json()["origQty"], "0.02000000");
    assert!(q.json().get("time").is_some());
    let x = c
        .signed(
            &s,
            "DELETE",
            "/fapi/v1/order",
            "symbol=BTCUSDT&origClientOrderId=fu1",
        )
        .unwrap();
    assert_eq!(x.json()["status"], "CANCELED");
    let a = c.signed(&s, "GET", "/fapi/v2/account", "").unwrap();
    assert!(a.json().get("availableBalance").is_some());
    let d = c.get("/fapi/v1/depth?symbol=BTCUSDT&limit=7");
    assert_eq!(d.code(), -1130, "futures depth limits are a fixed set");
    let rep = s.stop();
    assert_eq!(common::order_counts(&rep), (1, 1, 1, 1));
}

#[test]
fn futures_order_limits_count_every_order_request() {
    let mut cfg = Config::binance_futures();
    cfg.rate_limits = vec![
        RateLimit::new(LimitType::RequestWeight, Interval::Minute, 1, 2400),
        RateLimit::new(LimitType::Orders, Interval::Second, 2, 2),
    ];
    let s = Server::start(cfg).unwrap();
    let mut c = Client::connect(s.addr());
    at_window_start(&s, 2_000);
    let mut place = |p: &str| c.signed(&s, "POST", "/fapi/v1/order", p).unwrap();
    let r = place("symbol=BTCUSDT&side=BUY&type=MARKET&quantity=0.01&newClientOrderId=mk");
    assert_eq!(r.json()["status"], "FILLED");
    let r = place(&order("f2"));
    assert_eq!(
        r.header_u64("X-MBX-ORDER-COUNT-2S"),
        2,
        "no fill decrement on futures"
    );
    let r = place(&order("f3"));
    assert_eq!((r.status, r.code()), (429, -1015));
    assert!(r.json()["msg"]
        .as_str()
        .unwrap()
        .contains("2 orders per 2 SECOND"));
}

#[test]
fn futures_503_texts_say_unknown_or_failed() {
    let mut cfg = Config::binance_futures();
    cfg.faults.script = vec![
        (1, Fault::ServerErrorAfterExecute),
        (2, Fault::ServerErrorNoExecute),
    ];
    let s = Server::start(cfg).unwrap();
    let mut c = Client::connect(s.addr());
    let r = c
        .signed(&s, "POST", "/fapi/v1/order", &order("x1"))
        .unwrap();
    assert_eq!(r.status, 503);
    assert_eq!(
        r.json()["msg"],
        "Unknown error, please check your request or try again later."
    );
    let r = c
        .signed(&s, "POST", "/fapi/v1/order", &order("x2"))
        .unwrap();
    assert_eq!(r.status, 503);
    assert_eq!(
        r.json()["msg"],
        "Internal error; unable to process your request. Please try again."
    );
    let q = |c: &mut Client, id: &str| {
        c.signed(
            &s,
            "GET",
            "/fapi/v1/order",
            &format!("symbol=BTCUSDT&origClientOrderId={id}"),
        )
        .unwrap()
        .status
    };
    assert_eq!(q(&mut c, "x1"), 200, "ran");
    assert_eq!(q(&mut c, "x2"), 400, "did not run");
    assert_eq!(s.stop().executions, 1);
}

/// USD-M's BTCUSDT rules (tick 0.01, step 0.001 up to 1,000, notional 100, 200
/// open orders, 100,000 USDT at the default 20x): each breach refused with the
/// code USD-M's error table gives it, nothing booked
/// (<https://developers.binance.com/docs/derivatives/usds-margined-futures/error-code>).
#[test]
fn orders_outside_the_filters_or_the_margin_are_refused_as_usd_m_does() {
    let s = Server::start(Config::binance_futures()).unwrap();
    let mut c = Client::connect(s.addr());
    let info = c.get("/fapi/v1/exchangeInfo").json();
    let filters = info["symbols"][0]["filters"].as_array().unwrap().clone();
    let filter = |t: &str| {
        filters
            .iter()
            .find(|f| f["filterType"] == t)
            .unwrap()
            .clone()
    };
    assert_eq!(filter("MIN_NOTIONAL")["notional"], "100");
    assert_eq!(filter("MAX_NUM_ORDERS")["limit"], 200);
    assert_eq!(filter("LOT_SIZE")["stepSize"], "0.001");
    let o = |qty: &str, price: &str| {
        format!("symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity={qty}&price={price}")
    };
    let refused = [
        (o("1", "2000000"), -4002),
        (o("1", "0.001"), -4013),
        (o("1", "49000.001"), -4014),
        (o("0.0001", "49000"), -4004),
        (o("2000", "49000"), -4005),
        (o("0.0015", "49000"), -4023),
        (o("0.001", "49000"), -4164),
        // 50 BTC at 49,000 is 2.45 M: 122,500 USDT of margin at 20x.
        (o("50", "49000"), -2019),
    ];
    for (params, code) in refused {
        let r = c.signed(&s, "POST", "/fapi/v1/order", &params).unwrap();
        assert_eq!((r.status, r.code()), (400, code), "{params}: {}", r.body);
    }
    let r = c
        .signed(&s, "POST", "/fapi/v1/order", &o("0.001", "49000"))
        .unwrap();
    assert_eq!(
        r.json()["msg"],
        "Order's notional must be no smaller than 100 (unless you choose reduce only)."
    );
    assert_eq!(s.report().executions, 0, "nothing booked");
    for i in 0..200 {
        let r = c
            .signed(&s, "POST", "/fapi/v1/order", &o("0.01", "49000"))
            .unwrap();
        assert_eq!(r.status, 200, "order {i}: {}", r.body);
    }
    let r = c
        .signed(&s, "POST", "/fapi/v1/order", &o("0.01", "49000"))
        .unwrap();
    assert_eq!((r.status, r.code()), (400, -2025), "{}", r.body);
    assert_eq!(r.json()["msg"], "Reach max open order limit.");
}

/// USD-M `DELETE /fapi/v1/allOpenOrders`: every open order of the symbol
/// cancelled, answered `{"code":200,"msg":...}` as documented, none open too.
#[test]
fn all_open_orders_are_cancelled_in_one_call() {
    let s = Server::start(Config::binance_futures()).unwrap();
    let mut c = Client::connect(s.addr());
    for cid in ["a1", "a2"] {
        let r = c.signed(&s, "POST", "/fapi/v1/order", &order(cid)).unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }
    for _ in 0..2 {
        let r = c
            .signed(&s, "DELETE", "/fapi/v1/allOpenOrders", "symbol=BTCUSDT")
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json()["code"], 200);
        assert_eq!(
            r.json()["msg"],
            "The operation of cancel all open order is done."
        );
    }
    let open = c
        .signed(&s, "GET", "/fapi/v1/openOrders", "symbol=BTCUSDT")
        .unwrap();
    assert_eq!(open.json().as_array().unwrap().len(), 0);
    assert_eq!(s.report().cancels, 2);
}
