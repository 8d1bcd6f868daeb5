//! The bybit profile: v5 signing, per-UID rolling limits with the X-Bapi headers,
//! the IP limit's immediate 403 ban, orders by orderLinkId.

mod common;

use common::Client;
use ergon_venue_sim::params::sign;
use ergon_venue_sim::{
    Config, Interval, LimitType, RateLimit, Server, DEFAULT_API_KEY, DEFAULT_API_SECRET,
};

/// A signed v5 request: `payload` is the query string (GET) or the JSON body (POST).
fn v5(c: &mut Client, s: &Server, method: &str, path: &str, payload: &str) -> common::Resp {
    v5_at(
        c,
        method,
        path,
        payload,
        s.clock().now_ms(),
        DEFAULT_API_SECRET,
    )
}

fn v5_at(
    c: &mut Client,
    method: &str,
    path: &str,
    payload: &str,
    ts: i64,
    secret: &str,
) -> common::Resp {
    let recv = "5000";
    let sig = sign(&format!("{ts}{DEFAULT_API_KEY}{recv}{payload}"), secret);
    let (target, body) = if method == "GET" {
        (format!("{path}?{payload}"), String::new())
    } else {
        (path.to_string(), payload.to_string())
    };
    c.send_with(
        method,
        &target,
        &[
            ("X-BAPI-API-KEY", DEFAULT_API_KEY),
            ("X-BAPI-TIMESTAMP", &ts.to_string()),
            ("X-BAPI-RECV-WINDOW", recv),
            ("X-BAPI-SIGN", &sig),
        ],
        &body,
    )
    .unwrap()
}

fn create(link: &str) -> String {
    format!(
        r#"{{"category":"linear","symbol":"BTCUSDT","side":"Buy","orderType":"Limit","qty":"0.01","price":"49000","timeInForce":"GTC","orderLinkId":"{link}"}}"#
    )
}

fn ret_code(r: &common::Resp) -> i64 {
    r.json()["retCode"].as_i64().unwrap()
}

#[test]
fn orders_by_link_id_in_v5_shapes() {
    let s = Server::start(Config::bybit()).unwrap();
    let mut c = Client::connect(s.addr());
    let realtime = |c: &mut Client, link: &str| {
        let q = format!("category=linear&symbol=BTCUSDT&orderLinkId={link}");
        v5(c, &s, "GET", "/v5/order/realtime", &q)
    };
    let cancel = |c: &mut Client, link: &str| {
        let x = format!(r#"{{"category":"linear","symbol":"BTCUSDT","orderLinkId":"{link}"}}"#);
        v5(c, &s, "POST", "/v5/order/cancel", &x)
    };
    let r = v5(&mut c, &s, "POST", "/v5/order/create", &create("bb-1"));
    assert_eq!((r.status, ret_code(&r)), (200, 0), "{}", r.body);
    assert_eq!(r.json()["result"]["orderLinkId"], "bb-1");
    assert_eq!(r.header("X-Bapi-Limit"), Some("10"));
    assert_eq!(r.header("X-Bapi-Limit-Status"), Some("9"));
    assert!(r.header("X-Bapi-Limit-Reset-Timestamp").is_some());

    let dup = v5(&mut c, &s, "POST", "/v5/order/create", &create("bb-1"));
    assert_eq!(ret_code(&dup), 110072);

    let q = realtime(&mut c, "bb-1");
    let o = &q.json()["result"]["list"][0];
    assert_eq!(o["orderStatus"], "New");
    assert_eq!(o["price"], "49000");

    let a = v5(
        &mut c,
        &s,
        "POST",
        "/v5/order/amend",
        r#"{"category":"linear","symbol":"BTCUSDT","orderLinkId":"bb-1","price":"49100"}"#,
    );
    assert_eq!(ret_code(&a), 0, "{}", a.body);
    let x = cancel(&mut c, "bb-1");
    assert_eq!(ret_code(&x), 0);
    let x = cancel(&mut c, "bb-1");
    assert_eq!(ret_code(&x), 110001, "not open any more");
    let q = realtime(&mut c, "bb-1");
    assert_eq!(q.json()["result"]["list"][0]["orderStatus"], "Cancelled");
    let q = realtime(&mut c, "never");
    assert_eq!(q.json()["result"]["list"].as_array().unwrap().len(), 0);

    let book = c.get("/v5/market/orderbook?category=linear&symbol=BTCUSDT&limit=5");
    assert_eq!(book.json()["result"]["b"].as_array().unwrap().len(), 5);
    let rep = s.stop();
    assert_eq!(common::order_counts(&rep), (1, 1, 1, 1));
}

#[test]
fn v5_signatures_and_timestamps_are_checked() {
    let s = Server::start(Config::bybit()).unwrap();
    let mut c = Client::connect(s.addr());
    let now = s.clock().now_ms();
    let r = v5_at(
        &mut c,
        "POST",
        "/v5/order/create",
        &create("t1"),
        now,
        "wrong",
    );
    assert_eq!(ret_code(&r), 10004);
    let r = v5_at(
        &mut c,
        "POST",
        "/v5/order/create",
        &create("t2"),
        now + 2_000,
        DEFAULT_API_SECRET,
    );
    assert_eq!(ret_code(&r), 10002, "ahead of the server");
    let r = v5_at(
        &mut c,
        "POST",
        "/v5/order/create",
        &create("t3"),
        now - 6_000,
        DEFAULT_API_SECRET,
    );
    assert_eq!(ret_code(&r), 10002, "older than recv_window");
    let r = c
        .send("POST", "/v5/order/create", None, &create("t4"))
        .unwrap();
    assert_eq!(ret_code(&r), 10003);
    let rep = s.stop();
    assert_eq!(rep.executions, 0);
    assert_eq!(
        (
            rep.signature_rejects,
            rep.timestamp_rejects,
            rep.api_key_rejects
        ),
        (1, 2, 1)
    );
}

#[test]
fn uid_limits_roll_and_say_when_they_reset() {
    let mut cfg = Config::bybit();
    cfg.rate_limits = vec![
        RateLimit::new(LimitType::RawRequests, Interval::Second, 5, 600).rolling(),
        RateLimit::new(LimitType::BybitCreate, Interval::Second, 1, 3).rolling(),
    ];
    let s = Server::start(cfg).unwrap();
    let mut c = Client::connect(s.addr());
    for i in 0..3 {
        let r = v5(
            &mut c,
            &s,
            "POST",
            "/v5/order/create",
            &create(&format!("r{i}")),
        );
        assert_eq!(ret_code(&r), 0);
        assert_eq!(
            r.header("X-Bapi-Limit-Status"),
            Some((2 - i).to_string().as_str())
        );
    }
    let first_at = s.clock().now_ms();
    let r = v5(&mut c, &s, "POST", "/v5/order/create", &create("r3"));
    assert_eq!((r.status, ret_code(&r)), (200, 10006));
    let reset: i64 = r
        .header("X-Bapi-Limit-Reset-Timestamp")
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        reset > first_at && reset <= first_at + 1_000,
        "resets when the oldest expires"
    );
    // The venue's clock jumps past the reset (no waiting it out).
    s.advance_clock(reset - s.clock().now_ms() + 20);
    let r = v5(&mut c, &s, "POST", "/v5/order/create", &create("r4"));
    assert_eq!(
        ret_code(&r),
        0,
        "room again once the oldest left the rolling second"
    );
    assert_eq!(s.stop().throttled, 1);
}

#[test]
fn over_the_ip_limit_is_an_immediate_403_ban() {
    let mut cfg = Config::bybit();
    cfg.rate_limits =
        vec![RateLimit::new(LimitType::RawRequests, Interval::Second, 5, 5).rolling()];
    cfg.ban.first_ms = 800;
    cfg.ban.max_ms = 800;
    let s = Server::start(cfg).unwrap();
    let mut c = Client::connect(s.addr());
    for _ in 0..5 {
        assert_eq!(c.get("/v5/market/time").status, 200);
    }
    let r = c.get("/v5/market/time");
    assert_eq!(r.status, 403);
    assert!(
        r.header("Retry-After").is_none(),
        "Bybit gives no Retry-After"
    );
    assert_eq!(c.get("/v5/market/time").status, 403, "banned");
    let rep = s.report();
    assert_eq!((rep.bans, rep.banned_requests), (1, 2));
}

#[test]
fn market_data_and_history_endpoints_answer_in_v5_shapes() {
    let s = Server::start(Config::bybit()).unwrap();
    let mut c = Client::connect(s.addr());
    let q = "category=linear&symbol=BTCUSDT";
    let r = c.get(&format!("/v5/market/tickers?{q}"));
    assert_eq!((r.status, ret_code(&r)), (200, 0), "{}", r.body);
    let t = &r.json()["result"]["list"][0];
    assert_eq!(
        (t["bid1Price"].as_str(), t["ask1Price"].as_str()),
        (Some("49999.99"), Some("50000.01"))
    );
    assert!(
        r.header("X-Bapi-Limit").is_none(),
        "market data: IP limit only"
    );
    let r = c.get(&format!("/v5/market/kline?{q}&interval=15&limit=3"));
    let k = r.json()["result"]["list"].clone();
    assert_eq!(k.as_array().unwrap().len(), 3, "{}", r.body);
    let (t0, t1): (i64, i64) = (
        k[0][0].as_str().unwrap().parse().unwrap(),
        k[1][0].as_str().unwrap().parse().unwrap(),
    );
    assert_eq!(t0 - t1, 900_000, "newest first");
    let r = c.get(&format!("/v5/market/kline?{q}&interval=7"));
    assert_eq!(ret_code(&r), 10001, "bad interval");
    let r = c.get(&format!("/v5/market/recent-trade?{q}&limit=5"));
    assert_eq!(r.json()["result"]["list"], serde_json::json!([]));

    let m = r#"{"category":"linear","symbol":"BTCUSDT","side":"Sell","orderType":"Market","qty":"0.5","orderLinkId":"m1"}"#;
    assert_eq!(ret_code(&v5(&mut c, &s, "POST", "/v5/order/create", m)), 0);
    assert_eq!(
        ret_code(&v5(&mut c, &s, "POST", "/v5/order/create", &create("l1"))),
        0
    );
    let r = v5(
        &mut c,
        &s,
        "GET",
        "/v5/execution/list",
        "category=linear&symbol=BTCUSDT",
    );
    assert_eq!(ret_code(&r), 0, "{}", r.body);
    assert_eq!(
        r.header("X-Bapi-Limit"),
        Some("50"),
        "its own per-UID limit"
    );
    let e = &r.json()["result"]["list"];
    assert_eq!(
        (e[0]["orderLinkId"].as_str(), e[0]["execQty"].as_str()),
        (Some("m1"), Some("0.5"))
    );
    assert_eq!(
        e.as_array().unwrap().len(),
        1,
        "the resting order has no fill"
    );
    let r = v5(
        &mut c,
        &s,
        "GET",
        "/v5/order/history",
        "category=linear&limit=10",
    );
    let h = &r.json()["result"]["list"];
    assert_eq!(h.as_array().unwrap().len(), 2);
    assert_eq!(h[0]["orderLinkId"], "l1", "newest first");
    assert_eq!(h[1]["orderStatus"], "Filled");
    let r = v5(
        &mut c,
        &s,
        "GET",
        "/v5/order/history",
        "category=linear&limit=51",
    );
    assert_eq!(ret_code(&r), 10001, "limit above 50");
    s.stop();
}

/// Bybit's realtime query keeps only the account's most recently closed orders
/// (500 by default, 2 here), by id whatever `openOnly` says; its order history
/// finds an older one by `orderLinkId`
/// (<https://bybit-exchange.github.io/docs/v5/order/open-order>).
#[test]
fn realtime_keeps_only_the_recently_closed_and_history_finds_the_rest() {
    let s = Server::start(Config {
        bybit_closed_kept: 2,
        ..Config::bybit()
    })
    .unwrap();
    let mut c = Client::connect(s.addr());
    let list = |r: &common::Resp| r.json()["result"]["list"].as_array().unwrap().clone();
    for link in ["c1", "c2", "c3"] {
        let r = v5(&mut c, &s, "POST", "/v5/order/create", &create(link));
        assert_eq!(ret_code(&r), 0, "{}", r.body);
        let x = format!(r#"{{"category":"linear","symbol":"BTCUSDT","orderLinkId":"{link}"}}"#);
        let r = v5(&mut c, &s, "POST", "/v5/order/cancel", &x);
        assert_eq!(ret_code(&r), 0, "{}", r.body);
    }
    let r = v5(&mut c, &s, "POST", "/v5/order/create", &create("o4"));
    assert_eq!(ret_code(&r), 0, "{}", r.body);

    let by_link = |c: &mut Client, path: &str, link: &str| {
        let q = format!("category=linear&symbol=BTCUSDT&orderLinkId={link}&openOnly=0");
        v5(c, &s, "GET", path, &q)
    };
    let r = by_link(&mut c, "/v5/order/realtime", "c1");
    assert_eq!(list(&r).len(), 0, "c1 left the realtime list: {}", r.body);
    let r = by_link(&mut c, "/v5/order/realtime", "c2");
    assert_eq!(
        list(&r)[0]["orderStatus"],
        "Cancelled",
        "openOnly is ignored by id"
    );
    let r = by_link(&mut c, "/v5/order/history", "c1");
    let h = list(&r);
    assert_eq!(h.len(), 1, "{}", r.body);
    assert_eq!(
        (h[0]["orderLinkId"].as_str(), h[0]["orderStatus"].as_str()),
        (Some("c1"), Some("Cancelled"))
    );
    let r = by_link(&mut c, "/v5/order/history", "never");
    assert_eq!(list(&r).len(), 0);

    let q = "category=linear&symbol=BTCUSDT";
    let r = v5(&mut c, &s, "GET", "/v5/order/realtime", q);
    let open = list(&r);
    assert_eq!(
        (open.len(), open[0]["orderLinkId"].as_str()),
        (1, Some("o4"))
    );
    let r = v5(
        &mut c,
        &s,
        "GET",
        "/v5/order/realtime",
        &format!("{q}&openOnly=1"),
    );
    let closed: Vec<_> = list(&r).iter().map(|o| o["orderLinkId"].clone()).collect();
    assert_eq!(closed, ["c3", "c2"], "the last closed first");
    let r = v5(
        &mut c,
        &s,
        "GET",
        "/v5/order/realtime",
        &format!("{q}&openOnly=2"),
    );
    assert_eq!(ret_code(&r), 10001, "not a unified account's value");
    s.stop();
}

#[test]
fn the_dcp_window_is_taken_only_where_bybit_enabled_dcp_and_only_in_its_range() {
    const DCP: &str = "/v5/order/disconnected-cancel-all";
    // Off by default: Bybit enables it per account, on request.
    let s = Server::start(Config::bybit()).unwrap();
    let mut c = Client::connect(s.addr());
    let r = v5(&mut c, &s, "POST", DCP, r#"{"timeWindow":40}"#);
    assert_eq!(ret_code(&r), 10005, "{}", r.body);

    let s = Server::start(Config {
        bybit_dcp: true,
        ..Config::bybit()
    })
    .unwrap();
    let mut c = Client::connect(s.addr());
    // The page's example, and its answer.
    let r = v5(&mut c, &s, "POST", DCP, r#"{"timeWindow":40}"#);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json(),
        serde_json::json!({"retCode": 0, "retMsg": "success"})
    );
    for ok in [
        r#"{"product":"DERIVATIVES","timeWindow":3}"#,
        r#"{"product":"SPOT","timeWindow":300}"#,
    ] {
        assert_eq!(ret_code(&v5(&mut c, &s, "POST", DCP, ok)), 0, "{ok}");
    }
    for bad in [
        r#"{"timeWindow":2}"#,
        r#"{"timeWindow":301}"#,
        r#"{"timeWindow":"40"}"#,
        r#"{}"#,
        r#"{"product":"FUTURES","timeWindow":40}"#,
    ] {
        assert_eq!(ret_code(&v5(&mut c, &s, "POST", DCP, bad)), 10001, "{bad}");
    }
    // Signed like every private endpoint.
    let ts = s.clock().now_ms();
    let r = v5_at(&mut c, "POST", DCP, r#"{"timeWindow":40}"#, ts, "wrong");
    assert_eq!(ret_code(&r), 10004);
}

/// Bybit's linear BTCUSDT rules (tick 0.10, step 0.001 up to 1,190, notional 5
/// USDT, 500 active orders; 100,000 USDT at 10x): each breach refused with the
/// `retCode` Bybit's error table gives it, nothing booked; and an order placed
/// without `orderLinkId` is answered with an empty one, as the venue does.
#[test]
fn orders_outside_the_filters_or_the_margin_are_refused_as_bybit_does() {
    let mut cfg = Config::bybit();
    // 501 orders: no per-UID or IP limit in the way.
    for l in &mut cfg.rate_limits {
        l.limit = 1_000_000;
    }
    let s = Server::start(cfg).unwrap();
    let mut c = Client::connect(s.addr());
    let o = |qty: &str, price: &str| {
        format!(
            r#"{{"category":"linear","symbol":"BTCUSDT","side":"Buy","orderType":"Limit","qty":"{qty}","price":"{price}"}}"#
        )
    };
    let refused = [
        (o("1", "2000000"), 110003),
        (o("1", "49000.05"), 10001),
        (o("10000", "49000"), 10001),
        (o("0.0001", "49000"), 10001),
        (o("0.0015", "49000"), 10001),
        (o("0.001", "1000"), 110094),
        // 100 BTC at 49,000 is 4.9 M: 490,000 USDT of margin at 10x.
        (o("100", "49000"), 110007),
    ];
    for (body, code) in refused {
        let r = v5(&mut c, &s, "POST", "/v5/order/create", &body);
        assert_eq!((r.status, ret_code(&r)), (200, code), "{body}: {}", r.body);
    }
    assert_eq!(s.report().executions, 0, "nothing booked");
    let r = v5(&mut c, &s, "POST", "/v5/order/create", &o("0.01", "49000"));
    assert_eq!(ret_code(&r), 0, "{}", r.body);
    assert_eq!(r.json()["result"]["orderLinkId"], "", "none was sent");
    for i in 1..500 {
        let r = v5(&mut c, &s, "POST", "/v5/order/create", &o("0.01", "49000"));
        assert_eq!(ret_code(&r), 0, "order {i}: {}", r.body);
    }
    let r = v5(&mut c, &s, "POST", "/v5/order/create", &o("0.01", "49000"));
    assert_eq!(ret_code(&r), 110020, "{}", r.body);
}

/// What ccxt asks Bybit for at start and to clean up: instruments (linear lists
/// the symbol with the filters the engine enforces; spot, inverse and option list
/// nothing), coins, the API key, the account, and `order/cancel-all`.
#[test]
fn the_catalog_and_cancel_all_answer_in_v5_shapes() {
    let s = Server::start(Config::bybit()).unwrap();
    let mut c = Client::connect(s.addr());
    let r = c.get("/v5/market/instruments-info?category=linear");
    assert_eq!(ret_code(&r), 0, "{}", r.body);
    let i = r.json()["result"]["list"][0].clone();
    assert_eq!(i["symbol"], "BTCUSDT");
    assert_eq!(i["priceFilter"]["tickSize"], "0.1");
    assert_eq!(i["lotSizeFilter"]["qtyStep"], "0.001");
    assert_eq!(i["lotSizeFilter"]["minNotionalValue"], "5");
    for cat in ["spot", "inverse", "option"] {
        let r = c.get(&format!("/v5/market/instruments-info?category={cat}"));
        assert_eq!(ret_code(&r), 0, "{cat}: {}", r.body);
        assert_eq!(r.json()["result"]["list"].as_array().unwrap().len(), 0);
    }
    let r = v5(&mut c, &s, "GET", "/v5/asset/coin/query-info", "");
    assert_eq!(r.json()["result"]["rows"][0]["coin"], "USDT", "{}", r.body);
    let r = v5(&mut c, &s, "GET", "/v5/user/query-api", "");
    assert_eq!(r.json()["result"]["apiKey"], DEFAULT_API_KEY, "{}", r.body);
    assert_eq!(r.json()["result"]["readOnly"], 0);
    let r = v5(&mut c, &s, "GET", "/v5/account/info", "");
    assert_eq!(
        r.json()["result"]["marginMode"],
        "REGULAR_MARGIN",
        "{}",
        r.body
    );
    assert_eq!(r.json()["result"]["dcpStatus"], "OFF");
    assert_eq!(c.get("/v5/account/info").json()["retCode"], 10003, "signed");

    for link in ["ca-1", "ca-2"] {
        let r = v5(&mut c, &s, "POST", "/v5/order/create", &create(link));
        assert_eq!(ret_code(&r), 0, "{}", r.body);
    }
    let r = v5(
        &mut c,
        &s,
        "POST",
        "/v5/order/cancel-all",
        r#"{"category":"linear","symbol":"BTCUSDT"}"#,
    );
    assert_eq!(ret_code(&r), 0, "{}", r.body);
    assert_eq!(r.json()["result"]["success"], "1");
    let links: Vec<String> = r.json()["result"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["orderLinkId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(links, ["ca-1", "ca-2"]);
    assert_eq!(s.report().cancels, 2);
}

/// Bybit's open orders come by pages, newest first: `limit` 1 to 50, 20 by
/// default, and `nextPageCursor` the `cursor` of the next page, empty on the
/// last (<https://bybit-exchange.github.io/docs/v5/order/open-order>). An order
/// that closes while a client pages does not shift the next page.
#[test]
fn open_orders_come_by_pages_of_limit_newest_first_with_a_cursor() {
    let mut cfg = Config::bybit();
    for l in &mut cfg.rate_limits {
        l.limit = 1_000_000;
    }
    let s = Server::start(cfg).unwrap();
    let mut c = Client::connect(s.addr());
    for n in 0..55 {
        let r = v5(
            &mut c,
            &s,
            "POST",
            "/v5/order/create",
            &create(&format!("p{n}")),
        );
        assert_eq!(ret_code(&r), 0, "{}", r.body);
        s.advance_clock(1);
    }
    let page = |c: &mut Client, q: &str| {
        let r = v5(c, &s, "GET", "/v5/order/realtime", q);
        assert_eq!(ret_code(&r), 0, "{q}: {}", r.body);
        let v = r.json();
        let links: Vec<String> = v["result"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["orderLinkId"].as_str().unwrap().to_string())
            .collect();
        (
            links,
            v["result"]["nextPageCursor"].as_str().unwrap().to_string(),
        )
    };
    let names =
        |r: core::ops::Range<usize>| -> Vec<String> { r.rev().map(|n| format!("p{n}")).collect() };
    let q = "category=linear&symbol=BTCUSDT";
    let (first, cursor) = page(&mut c, q);
    assert_eq!(first, names(35..55), "20 by default, the newest first");
    assert!(!cursor.is_empty());

    // The last order of the first page closes: the next page is still the next.
    let x = r#"{"category":"linear","symbol":"BTCUSDT","orderLinkId":"p35"}"#;
    assert_eq!(ret_code(&v5(&mut c, &s, "POST", "/v5/order/cancel", x)), 0);
    let enc = cursor.replace('%', "%25");
    let (second, cursor) = page(&mut c, &format!("{q}&limit=30&cursor={enc}"));
    assert_eq!(second, names(5..35));
    let enc = cursor.replace('%', "%25");
    let (last, cursor) = page(&mut c, &format!("{q}&limit=30&cursor={enc}"));
    assert_eq!((last, cursor.as_str()), (names(0..5), ""), "the last page");

    let (all, cursor) = page(&mut c, &format!("{q}&limit=50"));
    assert_eq!((all.len(), cursor.is_empty()), (50, false), "at most 50");
    for bad in ["limit=0", "limit=51", "cursor=nonsense"] {
        let r = v5(
            &mut c,
            &s,
            "GET",
            "/v5/order/realtime",
            &format!("{q}&{bad}"),
        );
        assert_eq!(ret_code(&r), 10001, "{bad}: {}", r.body);
    }
    s.stop();
}
