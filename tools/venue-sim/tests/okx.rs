//! The okx profile: v5 signing with passphrase and ISO timestamps, per-instrument
//! limits over 2 s answered 429/50011, orders by clOrdId with sCode per order.

mod common;

use common::{Client, Resp};
use ergon_venue_sim::params::{iso8601_ms, sign_base64};
use ergon_venue_sim::{
    Config, Interval, LimitType, RateLimit, Server, DEFAULT_API_KEY, DEFAULT_API_SECRET,
    DEFAULT_PASSPHRASE,
};

fn signed(c: &mut Client, s: &Server, method: &str, target: &str, body: &str) -> Resp {
    signed_at(
        c,
        method,
        target,
        body,
        s.clock().now_ms(),
        DEFAULT_API_SECRET,
        DEFAULT_PASSPHRASE,
    )
}

fn signed_at(
    c: &mut Client,
    method: &str,
    target: &str,
    body: &str,
    ts_ms: i64,
    secret: &str,
    passphrase: &str,
) -> Resp {
    let ts = iso8601_ms(ts_ms);
    let sig = sign_base64(&format!("{ts}{method}{target}{body}"), secret);
    c.send_with(
        method,
        target,
        &[
            ("OK-ACCESS-KEY", DEFAULT_API_KEY),
            ("OK-ACCESS-SIGN", &sig),
            ("OK-ACCESS-TIMESTAMP", &ts),
            ("OK-ACCESS-PASSPHRASE", passphrase),
            ("Content-Type", "application/json"),
        ],
        body,
    )
    .unwrap()
}

fn place(cl: &str) -> String {
    format!(
        r#"{{"instId":"BTC-USDT-SWAP","tdMode":"cross","side":"buy","ordType":"limit","sz":"1","px":"49000","clOrdId":"{cl}"}}"#
    )
}

fn code(r: &Resp) -> String {
    r.json()["code"].as_str().unwrap().to_string()
}

#[test]
fn orders_by_client_id_in_v5_shapes() {
    let s = Server::start(Config::okx()).unwrap();
    let mut c = Client::connect(s.addr());
    let query = |c: &mut Client, cl: &str| {
        let path = format!("/api/v5/trade/order?instId=BTC-USDT-SWAP&clOrdId={cl}");
        signed(c, &s, "GET", &path, "")
    };
    let cancel = |c: &mut Client, cl: &str| {
        let x = format!(r#"{{"instId":"BTC-USDT-SWAP","clOrdId":"{cl}"}}"#);
        signed(c, &s, "POST", "/api/v5/trade/cancel-order", &x)
    };
    let r = signed(&mut c, &s, "POST", "/api/v5/trade/order", &place("ok1"));
    assert_eq!((r.status, code(&r)), (200, "0".to_string()), "{}", r.body);
    assert_eq!(r.json()["data"][0]["sCode"], "0");
    assert_eq!(r.json()["data"][0]["clOrdId"], "ok1");

    let dup = signed(&mut c, &s, "POST", "/api/v5/trade/order", &place("ok1"));
    assert_eq!(code(&dup), "1");
    assert_eq!(dup.json()["data"][0]["sCode"], "51016");

    let q = query(&mut c, "ok1");
    assert_eq!(q.json()["data"][0]["state"], "live");
    assert_eq!(q.json()["data"][0]["px"], "49000");
    let a = signed(
        &mut c,
        &s,
        "POST",
        "/api/v5/trade/amend-order",
        r#"{"instId":"BTC-USDT-SWAP","clOrdId":"ok1","newPx":"49100"}"#,
    );
    assert_eq!(code(&a), "0", "{}", a.body);
    let x = cancel(&mut c, "ok1");
    assert_eq!(code(&x), "0");
    let x = cancel(&mut c, "ok1");
    assert_eq!(x.json()["data"][0]["sCode"], "51400");
    let q = query(&mut c, "ok1");
    assert_eq!(q.json()["data"][0]["state"], "canceled");
    let q = query(&mut c, "never");
    assert_eq!(code(&q), "51603");
    let b = c.get("/api/v5/market/books?instId=BTC-USDT-SWAP&sz=5");
    assert_eq!(b.json()["data"][0]["bids"].as_array().unwrap().len(), 5);
    let rep = s.stop();
    assert_eq!(common::order_counts(&rep), (1, 1, 1, 1));
}

#[test]
fn okx_signatures_passphrases_and_timestamps_are_checked() {
    let s = Server::start(Config::okx()).unwrap();
    let mut c = Client::connect(s.addr());
    let now = s.clock().now_ms();
    let post = |c: &mut Client, ts: i64, secret: &str, pass: &str| {
        signed_at(
            c,
            "POST",
            "/api/v5/trade/order",
            &place("t1"),
            ts,
            secret,
            pass,
        )
    };
    let r = post(&mut c, now, "wrong", DEFAULT_PASSPHRASE);
    assert_eq!((r.status, code(&r)), (401, "50113".to_string()));
    let r = post(&mut c, now, DEFAULT_API_SECRET, "wrong");
    assert_eq!(code(&r), "50105");
    let r = post(&mut c, now - 31_000, DEFAULT_API_SECRET, DEFAULT_PASSPHRASE);
    assert_eq!(code(&r), "50102");
    let r = c
        .send("POST", "/api/v5/trade/order", None, &place("t2"))
        .unwrap();
    assert_eq!(code(&r), "50103");
    let r = post(&mut c, now, DEFAULT_API_SECRET, DEFAULT_PASSPHRASE);
    assert_eq!(code(&r), "0");
    let rep = s.stop();
    assert_eq!(rep.executions, 1);
    assert_eq!((rep.signature_rejects, rep.timestamp_rejects), (1, 1));
}

#[test]
fn over_a_two_second_limit_is_429_50011() {
    let mut cfg = Config::okx();
    cfg.rate_limits = vec![
        RateLimit::new(LimitType::OkxOrder, Interval::Second, 2, 2).rolling(),
        RateLimit::new(LimitType::OkxSubAccount, Interval::Second, 2, 1000).rolling(),
    ];
    let s = Server::start(cfg).unwrap();
    let mut c = Client::connect(s.addr());
    for i in 0..2 {
        let r = signed(
            &mut c,
            &s,
            "POST",
            "/api/v5/trade/order",
            &place(&format!("l{i}")),
        );
        assert_eq!(code(&r), "0");
    }
    let r = signed(&mut c, &s, "POST", "/api/v5/trade/order", &place("l2"));
    assert_eq!((r.status, code(&r)), (429, "50011".to_string()));
    let rep = s.stop();
    assert_eq!((rep.throttled, rep.executions), (1, 2));
}

#[test]
fn market_data_fills_and_history_answer_in_v5_shapes() {
    let s = Server::start(Config::okx()).unwrap();
    let mut c = Client::connect(s.addr());
    let r = c.get("/api/v5/market/ticker?instId=BTC-USDT-SWAP");
    assert_eq!((r.status, code(&r)), (200, "0".to_string()), "{}", r.body);
    assert_eq!(r.json()["data"][0]["askPx"], "50000.01");
    let r = c.get("/api/v5/market/candles?instId=BTC-USDT-SWAP&bar=1H&limit=2");
    let k = r.json()["data"].clone();
    assert_eq!(k.as_array().unwrap().len(), 2, "{}", r.body);
    assert_eq!(k[0].as_array().unwrap().len(), 9);
    assert_eq!(
        (k[0][8].as_str(), k[1][8].as_str()),
        (Some("0"), Some("1")),
        "the current bar is unconfirmed"
    );
    let r = c.get("/api/v5/market/candles?instId=BTC-USDT-SWAP&bar=7m");
    assert_eq!(code(&r), "51000");
    let r = c.get("/api/v5/market/trades?instId=BTC-USDT-SWAP");
    assert_eq!(r.json()["data"], serde_json::json!([]));

    let m = r#"{"instId":"BTC-USDT-SWAP","tdMode":"cross","side":"buy","ordType":"market","sz":"2","clOrdId":"m1"}"#;
    assert_eq!(
        code(&signed(&mut c, &s, "POST", "/api/v5/trade/order", m)),
        "0"
    );
    assert_eq!(
        code(&signed(
            &mut c,
            &s,
            "POST",
            "/api/v5/trade/order",
            &place("r1")
        )),
        "0"
    );
    let r = signed(&mut c, &s, "GET", "/api/v5/trade/fills?instType=SWAP", "");
    assert_eq!(code(&r), "0", "{}", r.body);
    let f = &r.json()["data"];
    assert_eq!(f.as_array().unwrap().len(), 1);
    assert_eq!(
        (f[0]["clOrdId"].as_str(), f[0]["fillSz"].as_str()),
        (Some("m1"), Some("2"))
    );
    let r = signed(
        &mut c,
        &s,
        "GET",
        "/api/v5/trade/orders-history?instType=SWAP",
        "",
    );
    let h = &r.json()["data"];
    assert_eq!(
        h.as_array().unwrap().len(),
        1,
        "only finished orders: {}",
        r.body
    );
    assert_eq!(h[0]["state"], "filled");
    let r = signed(&mut c, &s, "GET", "/api/v5/trade/orders-history", "");
    assert_eq!(code(&r), "50014", "instType is required");
    let r = c.get("/api/v5/trade/fills");
    assert_eq!(r.status, 401, "private");
    s.stop();
}

#[test]
fn the_ticker_limit_is_twenty_per_two_seconds_per_ip() {
    let s = Server::start(Config::okx()).unwrap();
    let mut c = Client::connect(s.addr());
    for i in 0..20 {
        let r = c.get("/api/v5/market/ticker?instId=BTC-USDT-SWAP");
        assert_eq!(r.status, 200, "request {i}");
    }
    let r = c.get("/api/v5/market/ticker?instId=BTC-USDT-SWAP");
    assert_eq!((r.status, code(&r)), (429, "50011".to_string()));
    let l = RateLimit::new(LimitType::OkxTicker, Interval::Second, 2, 20).rolling();
    assert_eq!(s.stop().limit(&l).map(|u| u.peak), Some(21));
}

/// OKX's BTC-USDT-SWAP rules (tick 0.1, lot and minimum 0.01 contract of 0.01
/// BTC, 500 pending orders; 100,000 USDT at 10x): each breach refused with
/// `code` "1" and the order's own `sCode` from OKX's error table, nothing booked.
#[test]
fn orders_outside_the_rules_or_the_margin_are_refused_as_okx_does() {
    let mut cfg = Config::okx();
    for l in &mut cfg.rate_limits {
        l.limit = 1_000_000;
    }
    let s = Server::start(cfg).unwrap();
    let mut c = Client::connect(s.addr());
    let o = |sz: &str, px: &str| {
        format!(
            r#"{{"instId":"BTC-USDT-SWAP","tdMode":"cross","side":"buy","ordType":"limit","sz":"{sz}","px":"{px}"}}"#
        )
    };
    let refused = [
        (o("1", "2000000"), "51006"),
        (o("1", "49000.05"), "51000"),
        (o("0.001", "49000"), "51120"),
        (o("0.015", "49000"), "51121"),
        // 100,000 contracts of 0.01 BTC at 49,000 is 49 M: 4.9 M USDT at 10x.
        (o("100000", "49000"), "51008"),
    ];
    for (body, s_code) in refused {
        let r = signed(&mut c, &s, "POST", "/api/v5/trade/order", &body);
        assert_eq!(
            (r.status, code(&r)),
            (200, "1".to_string()),
            "{body}: {}",
            r.body
        );
        assert_eq!(r.json()["data"][0]["sCode"], s_code, "{body}: {}", r.body);
    }
    assert_eq!(s.report().executions, 0, "nothing booked");
    for i in 0..500 {
        let r = signed(&mut c, &s, "POST", "/api/v5/trade/order", &o("1", "49000"));
        assert_eq!(code(&r), "0", "order {i}: {}", r.body);
    }
    let r = signed(&mut c, &s, "POST", "/api/v5/trade/order", &o("1", "49000"));
    assert_eq!(r.json()["data"][0]["sCode"], "51102", "{}", r.body);
}

/// What ccxt asks OKX for at start: instruments (SWAP lists the one with the
/// figures the engine enforces; other types list nothing) and currencies
/// (signed).
#[test]
fn instruments_and_currencies_answer_in_v5_shapes() {
    let s = Server::start(Config::okx()).unwrap();
    let mut c = Client::connect(s.addr());
    let r = c.get("/api/v5/public/instruments?instType=SWAP");
    assert_eq!(code(&r), "0", "{}", r.body);
    let i = r.json()["data"][0].clone();
    assert_eq!(i["instId"], "BTC-USDT-SWAP");
    assert_eq!(i["tickSz"], "0.1");
    assert_eq!(i["lotSz"], "0.01");
    assert_eq!(i["ctVal"], "0.01");
    assert_eq!(i["state"], "live");
    let r = c.get("/api/v5/public/instruments?instType=SPOT");
    assert_eq!(r.json()["data"].as_array().unwrap().len(), 0, "{}", r.body);
    assert_eq!(code(&c.get("/api/v5/public/instruments")), "50014");
    let r = signed(&mut c, &s, "GET", "/api/v5/asset/currencies", "");
    assert_eq!(code(&r), "0", "{}", r.body);
    assert_eq!(r.json()["data"][0]["ccy"], "USDT");
}

/// `trade/batch-orders` (what ccxt's `create_order` sends): each order its own
/// fate; all placed is `code` "0", none "1", some "2"; more than 20 is 51111.
#[test]
fn batch_orders_answer_each_order_and_the_batch() {
    let s = Server::start(Config::okx()).unwrap();
    let mut c = Client::connect(s.addr());
    let o = |cl: &str, px: &str| {
        format!(
            r#"{{"instId":"BTC-USDT-SWAP","tdMode":"cross","side":"buy","ordType":"limit","sz":"1","px":"{px}","clOrdId":"{cl}"}}"#
        )
    };
    let body = format!("[{},{}]", o("b1", "49000"), o("b2", "48000"));
    let r = signed(&mut c, &s, "POST", "/api/v5/trade/batch-orders", &body);
    assert_eq!(code(&r), "0", "{}", r.body);
    assert_eq!(r.json()["data"][1]["clOrdId"], "b2");
    let body = format!("[{},{}]", o("b3", "49000"), o("b4", "2000000"));
    let r = signed(&mut c, &s, "POST", "/api/v5/trade/batch-orders", &body);
    assert_eq!(code(&r), "2", "{}", r.body);
    assert_eq!(r.json()["data"][0]["sCode"], "0");
    assert_eq!(r.json()["data"][1]["sCode"], "51006");
    let body = format!("[{}]", o("b1", "49000"));
    let r = signed(&mut c, &s, "POST", "/api/v5/trade/batch-orders", &body);
    assert_eq!(code(&r), "1", "{}", r.body);
    assert_eq!(
        r.json()["data"][0]["sCode"],
        "51016",
        "a duplicated clOrdId"
    );
    let many: Vec<String> = (0..21).map(|i| o(&format!("m{i}"), "49000")).collect();
    let r = signed(
        &mut c,
        &s,
        "POST",
        "/api/v5/trade/batch-orders",
        &format!("[{}]", many.join(",")),
    );
    assert_eq!(code(&r), "51111", "{}", r.body);
    assert_eq!(s.report().executions, 3);
}
