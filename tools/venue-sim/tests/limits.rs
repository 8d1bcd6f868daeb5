//! Limits: fixed windows on the venue clock, usage headers, 429 with Retry-After,
//! order counts with -1015, and weight the client did not send.

mod common;

use std::net::{IpAddr, Ipv4Addr};

use common::{at_window_start, order_params, Client};
use ergon_venue_sim::{Config, Interval, LimitType, RateLimit, Server};

fn server(limits: Vec<RateLimit>) -> Server {
    let mut c = Config::binance_spot();
    c.rate_limits = limits;
    Server::start(c).unwrap()
}

#[test]
fn exchange_info_serves_the_configured_limits_and_headers_follow_them() {
    let limits = vec![
        RateLimit::new(LimitType::RequestWeight, Interval::Second, 1, 1000),
        RateLimit::new(LimitType::Orders, Interval::Second, 10, 7),
        RateLimit::new(LimitType::RawRequests, Interval::Minute, 5, 61000),
    ];
    let s = server(limits);
    let mut c = Client::connect(s.addr());
    let r = c.get("/api/v3/exchangeInfo");
    assert_eq!(r.status, 200);
    let v = r.json();
    let rl = v["rateLimits"].as_array().unwrap();
    assert_eq!(rl.len(), 3);
    assert_eq!(rl[0]["rateLimitType"], "REQUEST_WEIGHT");
    assert_eq!(rl[0]["interval"], "SECOND");
    assert_eq!(rl[0]["intervalNum"], 1);
    assert_eq!(rl[0]["limit"], 1000);
    assert_eq!(rl[1]["rateLimitType"], "ORDERS");
    assert_eq!(rl[1]["intervalNum"], 10);
    assert_eq!(rl[1]["limit"], 7);
    assert_eq!(v["symbols"][0]["symbol"], "BTCUSDT");
    // exchangeInfo weighs 20; the header is named after the served interval.
    assert!(r.header_u64("X-MBX-USED-WEIGHT-1S") >= 20);
    assert!(r.header("X-MBX-USED-WEIGHT-1M").is_none());
}

#[test]
fn over_the_weight_limit_is_429_with_retry_after_and_the_next_window_is_clean() {
    let s = server(vec![RateLimit::new(
        LimitType::RequestWeight,
        Interval::Second,
        2,
        10,
    )]);
    let mut c = Client::connect(s.addr());
    at_window_start(&s, 2_000);
    for i in 1..=10 {
        let r = c.get("/api/v3/ping");
        assert_eq!(r.status, 200, "request {i}");
        assert_eq!(r.header_u64("X-MBX-USED-WEIGHT-2S"), i);
    }
    let r = c.get("/api/v3/ping");
    assert_eq!(r.status, 429);
    assert_eq!(r.code(), -1003);
    assert!(r.json()["msg"]
        .as_str()
        .unwrap()
        .contains("current limit is 10 request weight per 2 SECOND"));
    let wait = r.header_u64("Retry-After");
    assert!((1..=2).contains(&wait), "Retry-After {wait}");
    assert_eq!(
        r.header_u64("X-MBX-USED-WEIGHT-2S"),
        11,
        "refused requests count too"
    );

    // Back off as told: the next window starts from zero and nobody is banned.
    at_window_start(&s, 2_000);
    let r = c.get("/api/v3/ping");
    assert_eq!(r.status, 200);
    assert_eq!(r.header_u64("X-MBX-USED-WEIGHT-2S"), 1);

    let rep = s.stop();
    assert_eq!(rep.throttled, 1);
    assert_eq!(rep.bans, 0);
    let w = &rep.limits[0];
    assert_eq!(w.peak, 11);
    assert_eq!(w.windows_over, 1);
    assert!(w.windows.iter().any(|&(_, u)| u == 11));
    assert!(
        w.windows.iter().all(|&(start, _)| start % 2_000 == 0),
        "windows align on the clock"
    );
}

#[test]
fn weights_are_the_documented_ones() {
    let s = server(vec![RateLimit::new(
        LimitType::RequestWeight,
        Interval::Minute,
        1,
        100_000,
    )]);
    let mut c = Client::connect(s.addr());
    let mut last = 0;
    let mut step = |c: &mut Client, target: &str, signed: bool| {
        let r = if signed {
            let (path, params) = target.split_once('?').unwrap_or((target, ""));
            c.signed(&s, "GET", path, params).unwrap()
        } else {
            c.get(target)
        };
        assert_eq!(r.status, 200, "{target}: {}", r.body);
        let used = r.header_u64("X-MBX-USED-WEIGHT-1M");
        let w = used - last;
        last = used;
        w
    };
    // A minute boundary may pass between two calls; retry the pair if so.
    let mut weights = Vec::new();
    for (t, signed) in [
        ("/api/v3/ping", false),
        ("/api/v3/depth?symbol=BTCUSDT", false),
        ("/api/v3/depth?symbol=BTCUSDT&limit=500", false),
        ("/api/v3/depth?symbol=BTCUSDT&limit=1000", false),
        ("/api/v3/depth?symbol=BTCUSDT&limit=5000", false),
        ("/api/v3/exchangeInfo", false),
        ("/api/v3/account", true),
        ("/api/v3/openOrders?symbol=BTCUSDT", true),
        ("/api/v3/openOrders", true),
    ] {
        weights.push(step(&mut c, t, signed));
    }
    let expected = [1, 5, 25, 50, 250, 20, 20, 6, 80];
    // The first step's delta includes nothing before it; a window reset would show as
    // a value smaller than expected, which we tolerate only once.
    let off: Vec<_> = weights
        .iter()
        .zip(expected)
        .filter(|(w, e)| **w != *e)
        .collect();
    assert!(off.len() <= 1, "weights {weights:?}, expected {expected:?}");
}

#[test]
fn order_count_limit_is_1015_without_retry_after() {
    let s = server(vec![
        RateLimit::new(LimitType::RequestWeight, Interval::Minute, 1, 6000),
        RateLimit::new(LimitType::Orders, Interval::Second, 2, 3),
    ]);
    let mut c = Client::connect(s.addr());
    at_window_start(&s, 2_000);
    for i in 1..=3u64 {
        let r = c
            .signed(&s, "POST", "/api/v3/order", &order_params(&format!("o{i}")))
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.header_u64("X-MBX-ORDER-COUNT-2S"), i);
    }
    let r = c
        .signed(&s, "POST", "/api/v3/order", &order_params("o4"))
        .unwrap();
    assert_eq!(r.status, 429);
    assert_eq!(r.code(), -1015);
    assert!(
        r.header("Retry-After").is_none(),
        "documented: no Retry-After for order counts"
    );
    // Reads do not count as orders.
    let r = c
        .signed(
            &s,
            "GET",
            "/api/v3/order",
            "symbol=BTCUSDT&origClientOrderId=o1",
        )
        .unwrap();
    assert_eq!(r.status, 200);
    let rep = s.stop();
    assert_eq!(rep.order_rate_limited, 1);
    assert_eq!(rep.executions, 3);
    assert_eq!(rep.bans, 0);
}

#[test]
fn raw_request_limit_counts_requests_not_weight() {
    let s = server(vec![
        RateLimit::new(LimitType::RequestWeight, Interval::Minute, 1, 100_000),
        RateLimit::new(LimitType::RawRequests, Interval::Second, 2, 3),
    ]);
    let mut c = Client::connect(s.addr());
    at_window_start(&s, 2_000);
    for _ in 0..3 {
        assert_eq!(c.get("/api/v3/exchangeInfo").status, 200);
    }
    let r = c.get("/api/v3/ping");
    assert_eq!(r.status, 429);
    assert!(r.json()["msg"]
        .as_str()
        .unwrap()
        .contains("3 requests per 2 SECOND"));
    assert!(r.header("Retry-After").is_some());
}

#[test]
fn weight_from_another_sender_on_the_ip_shows_in_the_headers() {
    let mut cfg = Config::binance_spot();
    cfg.rate_limits = vec![RateLimit::new(
        LimitType::RequestWeight,
        Interval::Second,
        2,
        100_000,
    )];
    cfg.other_sender_weight_per_s = 1_000;
    let s = Server::start(cfg).unwrap();
    let mut c = Client::connect(s.addr());
    at_window_start(&s, 2_000);
    let a = c.get("/api/v3/ping").header_u64("X-MBX-USED-WEIGHT-2S");
    s.advance_clock(300);
    let b = c.get("/api/v3/ping").header_u64("X-MBX-USED-WEIGHT-2S");
    // 1 for the ping plus about 300 from the other sender.
    assert!(b - a >= 250, "a {a} b {b}");
    s.add_weight(IpAddr::V4(Ipv4Addr::LOCALHOST), 5_000);
    let d = c.get("/api/v3/ping").header_u64("X-MBX-USED-WEIGHT-2S");
    assert!(d >= b + 5_001, "b {b} d {d}");
}

#[test]
fn only_successful_unfilled_orders_stay_in_the_order_count() {
    let s = server(vec![
        RateLimit::new(LimitType::RequestWeight, Interval::Minute, 1, 6000),
        RateLimit::new(LimitType::Orders, Interval::Second, 2, 3),
    ]);
    let mut c = Client::connect(s.addr());
    at_window_start(&s, 2_000);
    let mut place = |p: &str| c.signed(&s, "POST", "/api/v3/order", p).unwrap();
    let r = place(&order_params("u1"));
    assert_eq!(r.header_u64("X-MBX-ORDER-COUNT-2S"), 1);
    // Refused by the engine (duplicate client id): not a successful placement.
    assert_eq!(place(&order_params("u1")).code(), -2010);
    let r = place(&order_params("u2"));
    assert_eq!(r.header_u64("X-MBX-ORDER-COUNT-2S"), 2);
    // A MARKET order fills at once: counted in its own answer, decremented after.
    let r = place("symbol=BTCUSDT&side=BUY&type=MARKET&quantity=0.01&newClientOrderId=m1");
    assert_eq!(r.json()["status"], "FILLED");
    assert_eq!(r.header_u64("X-MBX-ORDER-COUNT-2S"), 3);
    let r = place(&order_params("u3"));
    assert_eq!(r.status, 200, "the fill made room: {}", r.body);
    assert_eq!(r.header_u64("X-MBX-ORDER-COUNT-2S"), 3);
    assert_eq!(place(&order_params("u4")).code(), -1015);
}
