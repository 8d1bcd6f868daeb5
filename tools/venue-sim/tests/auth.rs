//! API key, HMAC-SHA256 signature and timestamp/recvWindow checks, and the venue's
//! own clock with an offset.

mod common;

use common::{order_params, Client};
use ergon_venue_sim::params::sign;
use ergon_venue_sim::{Config, Server, DEFAULT_API_KEY, DEFAULT_API_SECRET};

fn host_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn signed(payload: &str) -> String {
    format!("{payload}&signature={}", sign(payload, DEFAULT_API_SECRET))
}

#[test]
fn api_key_is_required_and_checked() {
    let s = Server::start(Config::binance_spot()).unwrap();
    let mut c = Client::connect(s.addr());
    let q = signed(&format!("timestamp={}", s.clock().now_ms()));
    let r = c
        .send("GET", &format!("/api/v3/account?{q}"), None, "")
        .unwrap();
    assert_eq!((r.status, r.code()), (401, -2014));
    let r = c
        .send("GET", &format!("/api/v3/account?{q}"), Some("nobody"), "")
        .unwrap();
    assert_eq!((r.status, r.code()), (401, -2015));
    let r = c
        .send(
            "GET",
            &format!("/api/v3/account?{q}"),
            Some(DEFAULT_API_KEY),
            "",
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["accountType"], "SPOT");
    assert_eq!(s.stop().api_key_rejects, 2);
}

#[test]
fn signatures_are_hmac_sha256_over_query_then_body() {
    let s = Server::start(Config::binance_spot()).unwrap();
    let mut c = Client::connect(s.addr());
    let ts = s.clock().now_ms();

    // All in the query string.
    let p = format!("{}&timestamp={ts}", order_params("s1"));
    let r = c
        .send(
            "POST",
            &format!("/api/v3/order?{}", signed(&p)),
            Some(DEFAULT_API_KEY),
            "",
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);

    // All in the body.
    let p = format!("{}&timestamp={ts}", order_params("s2"));
    let r = c
        .send("POST", "/api/v3/order", Some(DEFAULT_API_KEY), &signed(&p))
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);

    // Mixed: totalParams is the query string concatenated with the body, no '&'.
    let q = "symbol=BTCUSDT&side=SELL&type=LIMIT&timeInForce=GTC";
    let b = format!("quantity=1&price=51000&newClientOrderId=s3&timestamp={ts}");
    let body = format!(
        "{b}&signature={}",
        sign(&format!("{q}{b}"), DEFAULT_API_SECRET)
    );
    let r = c
        .send(
            "POST",
            &format!("/api/v3/order?{q}"),
            Some(DEFAULT_API_KEY),
            &body,
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);

    // Signed with '&' between the parts: not what Binance signs.
    let bad = format!(
        "{b}&signature={}",
        sign(&format!("{q}&{b}"), DEFAULT_API_SECRET)
    );
    let r = c
        .send(
            "POST",
            &format!("/api/v3/order?{q}"),
            Some(DEFAULT_API_KEY),
            &bad,
        )
        .unwrap();
    assert_eq!((r.status, r.code()), (400, -1022));

    // Tampered after signing.
    let p = format!("{}&timestamp={ts}", order_params("s4"));
    let t = signed(&p).replace("quantity=0.01", "quantity=10");
    let r = c
        .send(
            "POST",
            &format!("/api/v3/order?{t}"),
            Some(DEFAULT_API_KEY),
            "",
        )
        .unwrap();
    assert_eq!((r.status, r.code()), (400, -1022));

    // Wrong secret.
    let w = format!("{p}&signature={}", sign(&p, "not-the-secret"));
    let r = c
        .send(
            "POST",
            &format!("/api/v3/order?{w}"),
            Some(DEFAULT_API_KEY),
            "",
        )
        .unwrap();
    assert_eq!(r.code(), -1022);

    // No signature at all.
    let r = c
        .send(
            "POST",
            &format!("/api/v3/order?{p}"),
            Some(DEFAULT_API_KEY),
            "",
        )
        .unwrap();
    assert_eq!((r.status, r.code()), (400, -1102));

    let rep = s.stop();
    assert_eq!(rep.executions, 3);
    assert_eq!(rep.signature_rejects, 3);
}

#[test]
fn timestamps_must_fall_inside_recv_window_and_not_run_ahead() {
    let s = Server::start(Config::binance_spot()).unwrap();
    let mut c = Client::connect(s.addr());
    let now = s.clock().now_ms();
    let mut ask = |params: String| {
        let r = c.send(
            "GET",
            &format!("/api/v3/account?{}", signed(&params)),
            Some(DEFAULT_API_KEY),
            "",
        );
        r.unwrap()
    };
    let r = ask(format!("timestamp={}", now + 3_000));
    assert_eq!((r.status, r.code()), (400, -1021));
    assert!(r.json()["msg"]
        .as_str()
        .unwrap()
        .contains("ahead of the server"));
    let r = ask(format!("timestamp={}", now - 6_000));
    assert_eq!(r.code(), -1021, "default recvWindow is 5000");
    assert!(r.json()["msg"]
        .as_str()
        .unwrap()
        .contains("outside of the recvWindow"));
    let r = ask(format!("recvWindow=10000&timestamp={}", now - 6_000));
    assert_eq!(r.status, 200, "a wider recvWindow admits it: {}", r.body);
    let r = ask(format!("recvWindow=60001&timestamp={now}"));
    assert_eq!(r.code(), -1131);
    let r = ask(format!("recvWindow=100&timestamp={}", now - 2_000));
    assert_eq!(r.code(), -1021);
    let r = ask("timestamp=yesterday".to_string());
    assert_eq!(r.code(), -1100);
    // Microseconds and fractional recvWindows, as the docs now allow.
    let r = ask(format!(
        "recvWindow=6000.346&timestamp={}",
        (now - 5_500) * 1_000
    ));
    assert_eq!(r.status, 200, "microseconds: {}", r.body);
    let r = ask(format!(
        "recvWindow=5000.5&timestamp={}",
        (now - 6_000) * 1_000
    ));
    assert_eq!(r.code(), -1021, "microseconds past the window");
    let r = ask(format!("recvWindow=1.2345&timestamp={now}"));
    assert_eq!(r.code(), -1100, "at most three decimals");
    assert_eq!(s.stop().timestamp_rejects, 4);
}

#[test]
fn the_venue_clock_runs_at_its_offset() {
    for offset in [-3_000i64, 8_000] {
        let mut cfg = Config::binance_spot();
        cfg.clock_offset_ms = offset;
        let s = Server::start(cfg).unwrap();
        let mut c = Client::connect(s.addr());
        let before = host_ms();
        let server_time = c.get("/api/v3/time").json()["serverTime"].as_i64().unwrap();
        let after = host_ms();
        assert!(
            server_time >= before + offset - 50 && server_time <= after + offset + 50,
            "offset {offset}: host {before}..{after}, venue {server_time}"
        );
        // A client that stamps with the host clock is refused as the venue would.
        let r = c
            .send(
                "GET",
                &format!(
                    "/api/v3/account?{}",
                    signed(&format!("timestamp={}", host_ms()))
                ),
                Some(DEFAULT_API_KEY),
                "",
            )
            .unwrap();
        assert_eq!(r.code(), -1021, "offset {offset}: {}", r.body);
        // Stamped with the venue's time it passes.
        let r = c
            .send(
                "GET",
                &format!(
                    "/api/v3/account?{}",
                    signed(&format!("timestamp={}", s.clock().now_ms()))
                ),
                Some(DEFAULT_API_KEY),
                "",
            )
            .unwrap();
        assert_eq!(r.status, 200);
    }
}
