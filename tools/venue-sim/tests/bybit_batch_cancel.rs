//! Bybit's `POST /v5/order/cancel-batch` as its page documents it
//! (<https://bybit-exchange.github.io/docs/v5/order/batch-cancel>): each
//! order cancelled or refused on its own, its code in `retExtInfo.list`, its
//! ids in `result.list`; counted per order on the batch cancel's own limit
//! (<https://bybit-exchange.github.io/docs/v5/rate-limit>, "Instructions for
//! batch endpoints"), the part over the limit failing alone.

mod common;

use common::Client;
use ergon_venue_sim::params::sign;
use ergon_venue_sim::{
    Config, Interval, LimitType, RateLimit, Server, DEFAULT_API_KEY, DEFAULT_API_SECRET,
};
use serde_json::Value;

/// A signed v5 POST of `body`.
fn post(c: &mut Client, s: &Server, path: &str, body: &str) -> common::Resp {
    let ts = s.clock().now_ms().to_string();
    let sig = sign(
        &format!("{ts}{DEFAULT_API_KEY}5000{body}"),
        DEFAULT_API_SECRET,
    );
    c.send_with(
        "POST",
        path,
        &[
            ("X-BAPI-API-KEY", DEFAULT_API_KEY),
            ("X-BAPI-TIMESTAMP", &ts),
            ("X-BAPI-RECV-WINDOW", "5000"),
            ("X-BAPI-SIGN", &sig),
        ],
        body,
    )
    .unwrap()
}

fn create(c: &mut Client, s: &Server, link: &str) -> Value {
    let body = format!(
        r#"{{"category":"linear","symbol":"BTCUSDT","side":"Buy","orderType":"Limit","qty":"0.01","price":"49000","timeInForce":"GTC","orderLinkId":"{link}"}}"#
    );
    let r = post(c, s, "/v5/order/create", &body);
    assert_eq!(r.json()["retCode"], 0, "{}", r.body);
    r.json()
}

/// A batch cancel of `links` by `orderLinkId`.
fn cancel_batch(c: &mut Client, s: &Server, links: &[&str]) -> common::Resp {
    let items: Vec<String> = links
        .iter()
        .map(|l| format!(r#"{{"symbol":"BTCUSDT","orderLinkId":"{l}"}}"#))
        .collect();
    let body = format!(r#"{{"category":"linear","request":[{}]}}"#, items.join(","));
    post(c, s, "/v5/order/cancel-batch", &body)
}

fn codes(r: &common::Resp) -> Vec<i64> {
    r.json()["retExtInfo"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["code"].as_i64().unwrap())
        .collect()
}

fn status(c: &mut Client, s: &Server, link: &str) -> String {
    let ts = s.clock().now_ms().to_string();
    let q = format!("category=linear&symbol=BTCUSDT&orderLinkId={link}");
    let sig = sign(&format!("{ts}{DEFAULT_API_KEY}5000{q}"), DEFAULT_API_SECRET);
    let r = c
        .send_with(
            "GET",
            &format!("/v5/order/realtime?{q}"),
            &[
                ("X-BAPI-API-KEY", DEFAULT_API_KEY),
                ("X-BAPI-TIMESTAMP", &ts),
                ("X-BAPI-RECV-WINDOW", "5000"),
                ("X-BAPI-SIGN", &sig),
            ],
            "",
        )
        .unwrap();
    r.json()["result"]["list"][0]["orderStatus"]
        .as_str()
        .unwrap_or("none")
        .to_string()
}

/// Open orders are cancelled, an unknown or already cancelled one fails alone
/// with 110001, in the request's order; the answer is retCode 0 with both
/// lists, and the orders' ids in `result.list`.
#[test]
fn each_order_of_a_batch_cancel_is_cancelled_or_refused_alone() {
    let s = Server::start(Config::bybit()).unwrap();
    let mut c = Client::connect(s.addr());
    let placed = create(&mut c, &s, "bc-1");
    create(&mut c, &s, "bc-2");
    create(&mut c, &s, "bc-3");
    let one = cancel_batch(&mut c, &s, &["bc-3"]);
    assert_eq!(codes(&one), [0]);

    let r = cancel_batch(&mut c, &s, &["bc-1", "never", "bc-2", "bc-3"]);
    assert_eq!((r.status, r.json()["retCode"].as_i64()), (200, Some(0)));
    assert_eq!(codes(&r), [0, 110001, 0, 110001], "{}", r.body);
    let list = &r.json()["result"]["list"];
    assert_eq!(list[0]["orderId"], placed["result"]["orderId"]);
    assert_eq!(list[0]["orderLinkId"], "bc-1");
    assert_eq!(list[0]["category"], "linear");
    assert_eq!(list[1]["orderId"], "", "no order was cancelled");
    assert_eq!(list[1]["orderLinkId"], "never");
    assert_eq!(r.header("X-Bapi-Limit"), Some("10"));
    assert_eq!(r.header("X-Bapi-Limit-Status"), Some("5"), "1 + 4 orders");
    for l in ["bc-1", "bc-2", "bc-3"] {
        assert_eq!(status(&mut c, &s, l), "Cancelled", "{l}");
    }
    // The single cancel's own limit was not touched.
    let x = post(
        &mut c,
        &s,
        "/v5/order/cancel",
        r#"{"category":"linear","symbol":"BTCUSDT","orderLinkId":"bc-1"}"#,
    );
    assert_eq!(x.json()["retCode"], 110001);
    assert_eq!(x.header("X-Bapi-Limit-Status"), Some("9"));
    assert_eq!(
        common::order_counts(&s.stop()).1,
        3,
        "three orders cancelled"
    );
}

/// More than 20 orders, none, an item without an id, or another category:
/// a params error for the whole request, nothing cancelled.
#[test]
fn a_bad_batch_cancel_is_refused_whole() {
    // A limit of 100 orders, so that the 21 are refused for their number, not
    // for the limit (which counts them first, as the create batch's does).
    let mut cfg = Config::bybit();
    for l in &mut cfg.rate_limits {
        if l.kind == LimitType::BybitCancelBatch {
            *l = RateLimit::new(l.kind, Interval::Second, 1, 100).rolling();
        }
    }
    let s = Server::start(cfg).unwrap();
    let mut c = Client::connect(s.addr());
    create(&mut c, &s, "bad-1");
    let many = ["bad-1"; 21];
    let r = cancel_batch(&mut c, &s, &many);
    assert_eq!(r.json()["retCode"], 10001, "{}", r.body);
    let r = cancel_batch(&mut c, &s, &[]);
    assert_eq!(r.json()["retCode"], 10001);
    let r = post(
        &mut c,
        &s,
        "/v5/order/cancel-batch",
        r#"{"category":"linear","request":[{"symbol":"BTCUSDT","orderLinkId":"bad-1"},{"symbol":"BTCUSDT"}]}"#,
    );
    assert_eq!(r.json()["retCode"], 10001);
    assert!(r.body.contains("request[1]"), "{}", r.body);
    let r = post(
        &mut c,
        &s,
        "/v5/order/cancel-batch",
        r#"{"category":"option","request":[{"symbol":"BTCUSDT","orderLinkId":"bad-1"}]}"#,
    );
    assert_eq!(r.json()["retCode"], 10001);
    assert_eq!(status(&mut c, &s, "bad-1"), "New");
}

/// The batch cancel's limit counts orders: with 3 of 5 left, a batch of 4
/// cancels its first 3 and answers 10006 for the 4th, which stays open; with
/// none left the request is 10006 whole.
#[test]
fn the_part_of_a_batch_cancel_over_its_limit_fails_alone() {
    let mut cfg = Config::bybit();
    cfg.rate_limits = vec![
        RateLimit::new(LimitType::RawRequests, Interval::Second, 5, 600).rolling(),
        RateLimit::new(LimitType::BybitCreate, Interval::Second, 1, 50).rolling(),
        RateLimit::new(LimitType::BybitRealtime, Interval::Second, 1, 50).rolling(),
        RateLimit::new(LimitType::BybitCancelBatch, Interval::Second, 1, 5).rolling(),
    ];
    let s = Server::start(cfg).unwrap();
    let mut c = Client::connect(s.addr());
    for l in ["o1", "o2", "o3", "o4", "o5", "o6"] {
        create(&mut c, &s, l);
    }
    let r = cancel_batch(&mut c, &s, &["o1", "o2"]);
    assert_eq!(codes(&r), [0, 0]);
    let r = cancel_batch(&mut c, &s, &["o3", "o4", "o5", "o6"]);
    assert_eq!(r.json()["retCode"], 0, "{}", r.body);
    assert_eq!(codes(&r), [0, 0, 0, 10006], "{}", r.body);
    assert_eq!(status(&mut c, &s, "o5"), "Cancelled");
    assert_eq!(
        status(&mut c, &s, "o6"),
        "New",
        "over the limit: not cancelled"
    );
    let r = cancel_batch(&mut c, &s, &["o6"]);
    assert_eq!(r.json()["retCode"], 10006, "{}", r.body);
    assert_eq!(status(&mut c, &s, "o6"), "New");
}
