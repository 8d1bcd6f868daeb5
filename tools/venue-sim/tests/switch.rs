//! The dead man's switch as the emulator runs it: OKX `cancel-all-after` (0 or 10
//! to 120 s, 51000 otherwise) and Binance USD-M `countdownCancelAll` (per symbol,
//! 0 stops it) cancel every open order of their scope when the countdown runs out,
//! with no request needed to make it happen; disarming keeps the orders.

mod common;

use std::time::{Duration, Instant};

use common::{Client, Resp};
use ergon_venue_sim::params::{iso8601_ms, sign_base64};
use ergon_venue_sim::{Config, Server, DEFAULT_API_KEY, DEFAULT_API_SECRET, DEFAULT_PASSPHRASE};

fn okx(c: &mut Client, s: &Server, target: &str, body: &str) -> Resp {
    let ts = iso8601_ms(s.clock().now_ms());
    let sig = sign_base64(&format!("{ts}POST{target}{body}"), DEFAULT_API_SECRET);
    c.send_with(
        "POST",
        target,
        &[
            ("OK-ACCESS-KEY", DEFAULT_API_KEY),
            ("OK-ACCESS-SIGN", &sig),
            ("OK-ACCESS-TIMESTAMP", &ts),
            ("OK-ACCESS-PASSPHRASE", DEFAULT_PASSPHRASE),
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

/// Polls the emulator's book until no order is open, up to `limit`.
fn all_cancelled_within(s: &Server, limit: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if s.orders().iter().all(|o| o.status != "NEW") {
            return Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn okx_cancel_all_after_ranges_and_fires() {
    let s = Server::start(Config::okx()).unwrap();
    let mut c = Client::connect(s.addr());
    let path = "/api/v5/trade/cancel-all-after";
    for bad in ["9", "121", "-1", "x"] {
        let r = okx(&mut c, &s, path, &format!(r#"{{"timeOut":"{bad}"}}"#));
        assert_eq!(r.json()["code"], "51000", "{bad}: {}", r.body);
    }
    assert!(s.switches().is_empty());
    for cl in ["a1", "a2"] {
        let r = okx(&mut c, &s, "/api/v5/trade/order", &place(cl));
        assert_eq!(r.json()["code"], "0", "{}", r.body);
    }
    let before = s.clock().now_ms();
    let r = okx(&mut c, &s, path, r#"{"timeOut":"10"}"#);
    assert_eq!(r.json()["code"], "0", "{}", r.body);
    let trigger: i64 = r.json()["data"][0]["triggerTime"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((before + 10_000..=s.clock().now_ms() + 10_000).contains(&trigger));
    assert_eq!(s.switches().len(), 1);
    // Disarm and re-arm: the orders stay while it is disarmed.
    let r = okx(&mut c, &s, path, r#"{"timeOut":"0"}"#);
    assert_eq!(r.json()["data"][0]["triggerTime"], "0");
    assert!(s.switches().is_empty());
    let r = okx(&mut c, &s, path, r#"{"timeOut":"10"}"#);
    assert_eq!(r.json()["code"], "0");
    assert_eq!(s.orders().iter().filter(|o| o.status == "NEW").count(), 2);
    // No request after this: the countdown alone cancels both when it runs out.
    // The venue's clock is jumped there, not waited out. Half a second before
    // the trigger both still rest; just past it the switch thread fires.
    s.advance_clock(trigger - 500 - s.clock().now_ms());
    assert_eq!(s.switches().len(), 1, "fired early");
    assert_eq!(s.orders().iter().filter(|o| o.status == "NEW").count(), 2);
    s.advance_clock(trigger + 1 - s.clock().now_ms());
    let took = all_cancelled_within(&s, Duration::from_secs(2));
    assert!(took.is_some(), "orders still open: {:?}", s.orders());
    assert!(s.switches().is_empty(), "fired once, then gone");
    assert_eq!(s.stop().switch_fires, 1);
}

#[test]
fn binance_futures_countdown_is_per_symbol_and_stops_at_zero() {
    let s = Server::start(Config::binance_futures()).unwrap();
    let mut c = Client::connect(s.addr());
    let q = common::signed_query(&s, "symbol=BTCUSDT&countdownTime=120000");
    let r = c
        .send(
            "POST",
            &format!("/fapi/v1/countdownCancelAll?{q}"),
            Some(DEFAULT_API_KEY),
            "",
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["countdownTime"], "120000");
    assert_eq!(r.header_u64("X-MBX-USED-WEIGHT-1M"), 10);
    let sw = s.switches();
    assert_eq!(sw.len(), 1);
    assert_eq!(sw[0].symbol.as_deref(), Some("BTCUSDT"));
    let q = common::signed_query(&s, "symbol=BTCUSDT&countdownTime=0");
    let r = c
        .send(
            "POST",
            &format!("/fapi/v1/countdownCancelAll?{q}"),
            Some(DEFAULT_API_KEY),
            "",
        )
        .unwrap();
    assert_eq!(r.json()["countdownTime"], "0");
    assert!(s.switches().is_empty());
    let q = common::signed_query(&s, "symbol=BTCUSDT");
    let r = c
        .send(
            "POST",
            &format!("/fapi/v1/countdownCancelAll?{q}"),
            Some(DEFAULT_API_KEY),
            "",
        )
        .unwrap();
    assert_eq!((r.status, r.code()), (400, -1102), "{}", r.body);
}
