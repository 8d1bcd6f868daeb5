//! Bybit's private WebSocket (`/v5/private`) through a raw client written here:
//! auth signed over `GET/realtime{expires}`, subscriptions, heartbeats, and DCP:
//! the countdown the end of an account's last `dcp.future` connection arms, that
//! a new subscription stops and that cancels the account's open orders when it
//! runs out (on the venue clock, jumped with `advance_clock`).

mod common;

use std::io::{ErrorKind, Read};
use std::net::SocketAddr;
use std::time::Duration;

use common::ws::{upgrade, RawWs, KEY};
use common::{until, Client, Resp};
use ergon_venue_sim::params::sign;
use ergon_venue_sim::{Config, Server, SwitchView, DEFAULT_API_KEY, DEFAULT_API_SECRET};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(10);
/// The slack allowed between a client's drop and the venue seeing it.
const SEEN_WITHIN_MS: i64 = 1_000;

/// A raw WebSocket client.
struct Ws {
    raw: RawWs,
}

/// Upgrades to `path`; the status code, and the client on 101.
fn connect(addr: SocketAddr, path: &str) -> (u16, Option<Ws>) {
    let (code, raw) = upgrade(addr, path, Some(KEY), WAIT);
    (code, raw.map(|raw| Ws { raw }))
}

fn private(s: &Server) -> Ws {
    let (code, ws) = connect(s.addr(), "/v5/private");
    assert_eq!(code, 101);
    ws.unwrap()
}

impl Ws {
    fn send_frame(&mut self, opcode: u8, payload: &[u8]) {
        self.raw.send_frame(opcode, payload);
    }

    /// The next frame: opcode and payload; `None` at EOF.
    fn frame(&mut self) -> Option<(u8, Vec<u8>)> {
        let mut chunk = [0u8; 4096];
        loop {
            if self.raw.buf.len() >= 2 {
                let (len, at) = match self.raw.buf[1] & 0x7f {
                    126 if self.raw.buf.len() >= 4 => (
                        u16::from_be_bytes([self.raw.buf[2], self.raw.buf[3]]) as usize,
                        4,
                    ),
                    126 => (usize::MAX, 0),
                    n => (n as usize, 2),
                };
                if len != usize::MAX && self.raw.buf.len() >= at + len {
                    let op = self.raw.buf[0] & 0x0f;
                    let payload = self.raw.buf[at..at + len].to_vec();
                    self.raw.buf.drain(..at + len);
                    return Some((op, payload));
                }
            }
            match self.raw.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.raw.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => panic!("no frame: {e}"),
            }
        }
    }

    /// Sends `req` as a text frame; the answer.
    fn call(&mut self, req: Value) -> Value {
        self.send_frame(1, req.to_string().as_bytes());
        self.text()
    }

    fn text(&mut self) -> Value {
        match self.frame() {
            Some((1, t)) => serde_json::from_slice(&t).unwrap(),
            other => panic!("expected a text frame, got {other:?}"),
        }
    }

    /// `auth` with the default key, expiring `ahead_ms` after the venue's now,
    /// signed with `secret`.
    fn auth(&mut self, s: &Server, key: &str, ahead_ms: i64, secret: &str) -> Value {
        let expires = s.clock().now_ms() + ahead_ms;
        let sig = sign(&format!("GET/realtime{expires}"), secret);
        self.call(json!({"req_id": "a1", "op": "auth", "args": [key, expires, sig]}))
    }

    /// auth with the default key, then subscribe `topics`; both must succeed.
    fn auth_and_subscribe(&mut self, s: &Server, topics: &[&str]) {
        let a = self.auth(s, DEFAULT_API_KEY, 5_000, DEFAULT_API_SECRET);
        assert_eq!(a["success"], true, "{a}");
        let r = self.call(json!({"req_id": "s1", "op": "subscribe", "args": topics}));
        assert_eq!(r["success"], true, "{r}");
    }
}

/// A signed v5 POST with the default key.
fn v5_post(c: &mut Client, s: &Server, path: &str, body: &str) -> Resp {
    let ts = s.clock().now_ms().to_string();
    let sig = sign(
        &format!("{ts}{DEFAULT_API_KEY}5000{body}"),
        DEFAULT_API_SECRET,
    );
    let headers = [
        ("X-BAPI-API-KEY", DEFAULT_API_KEY),
        ("X-BAPI-TIMESTAMP", ts.as_str()),
        ("X-BAPI-RECV-WINDOW", "5000"),
        ("X-BAPI-SIGN", sig.as_str()),
    ];
    c.send_with("POST", path, &headers, body).unwrap()
}

/// Places a resting linear order and sets DERIVATIVES' DCP window to
/// `window_s`; both must be taken.
fn order_and_window(s: &Server, window_s: u32) {
    let mut c = Client::connect(s.addr());
    let order = r#"{"category":"linear","symbol":"BTCUSDT","side":"Buy","orderType":"Limit","qty":"0.01","price":"49000","orderLinkId":"dcp-1"}"#;
    let r = v5_post(&mut c, s, "/v5/order/create", order);
    assert_eq!(r.json()["retCode"], 0, "{}", r.body);
    let window = format!(r#"{{"product":"DERIVATIVES","timeWindow":{window_s}}}"#);
    let r = v5_post(&mut c, s, "/v5/order/disconnected-cancel-all", &window);
    assert_eq!(r.json()["retCode"], 0, "{}", r.body);
}

fn dcp_config() -> Config {
    Config {
        bybit_dcp: true,
        ..Config::bybit()
    }
}

fn order_status(s: &Server) -> String {
    s.orders()[0].status.clone()
}

/// Waits until the venue has seen `n` private connections end.
fn ended(s: &Server, n: u64) {
    let seen = until(WAIT, || {
        (s.report().bybit_private.disconnects >= n).then_some(())
    });
    assert!(seen.is_some(), "the venue never saw the drop");
}

/// Waits for the venue to see `n` drops, then returns its armed switches.
fn switches_after(s: &Server, n: u64) -> Vec<SwitchView> {
    ended(s, n);
    s.switches()
}

#[test]
fn auth_subscribe_and_ping_answer_as_documented() {
    let s = Server::start(Config::bybit()).unwrap();
    let mut ws = private(&s);

    let r = ws.call(json!({"req_id": "x", "op": "subscribe", "args": ["dcp.future"]}));
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["ret_msg"], "Request not authorized");
    assert_eq!((&r["op"], &r["req_id"]), (&json!("subscribe"), &json!("x")));

    let r = ws.auth(&s, "nobody", 5_000, DEFAULT_API_SECRET);
    assert_eq!(r["success"], false, "unknown key: {r}");
    let r = ws.auth(&s, DEFAULT_API_KEY, 5_000, "wrong-secret");
    assert_eq!(r["success"], false, "bad signature: {r}");
    assert!(r["ret_msg"].as_str().unwrap().contains("signature"), "{r}");
    let r = ws.auth(&s, DEFAULT_API_KEY, -1, DEFAULT_API_SECRET);
    assert_eq!(
        (&r["success"], &r["ret_msg"]),
        (&json!(false), &json!("Params Error"))
    );
    let r = ws.call(json!({"op": "auth", "args": [DEFAULT_API_KEY, "soon", "x"]}));
    assert_eq!(r["ret_msg"], "Params Error", "{r}");
    assert!(
        r.get("req_id").is_none(),
        "no req_id asked, none echoed: {r}"
    );

    let r = ws.auth(&s, DEFAULT_API_KEY, 5_000, DEFAULT_API_SECRET);
    let conn_id = r["conn_id"].as_str().unwrap().to_string();
    assert!(!conn_id.is_empty());
    assert_eq!(
        r,
        json!({"success": true, "ret_msg": "", "op": "auth", "conn_id": conn_id, "req_id": "a1"})
    );
    let r = ws.auth(&s, DEFAULT_API_KEY, 5_000, DEFAULT_API_SECRET);
    assert_eq!(
        (&r["success"], &r["ret_msg"]),
        (&json!(false), &json!("Repeat auth"))
    );

    let r = ws.call(json!({"req_id": "s", "op": "subscribe", "args": ["dcp.future", "nope.x"]}));
    assert_eq!(r["success"], false);
    assert!(r["ret_msg"].as_str().unwrap().contains("nope.x"), "{r}");
    let r = ws.call(json!({"req_id": "s", "op": "subscribe", "args": ["dcp.future", "order"]}));
    assert_eq!(
        r,
        json!({"success": true, "ret_msg": "", "op": "subscribe", "conn_id": conn_id, "req_id": "s"})
    );

    let before = s.clock().now_ms();
    let r = ws.call(json!({"req_id": "p", "op": "ping"}));
    let t: i64 = r["args"][0].as_str().unwrap().parse().unwrap();
    assert!((before..=s.clock().now_ms()).contains(&t), "{r}");
    assert_eq!(
        r,
        json!({"req_id": "p", "op": "pong", "args": [t.to_string()], "conn_id": conn_id})
    );
    ws.send_frame(0x9, b"hb");
    assert_eq!(ws.frame(), Some((0xA, b"hb".to_vec())));

    // Not JSON, or an unknown op: refused, the connection stays.
    ws.send_frame(1, b"hello");
    assert_eq!(ws.text()["success"], false);
    let r = ws.call(json!({"req_id": "u", "op": "unsubscribe", "args": ["order"]}));
    assert_eq!((&r["success"], &r["req_id"]), (&json!(false), &json!("u")));
    assert_eq!(ws.call(json!({"op": "ping"}))["op"], "pong");

    let p = s.report().bybit_private;
    assert_eq!((p.connects, p.auths, p.auth_refused), (1, 1, 5));
    assert_eq!((p.dcp_subscribed, p.pings), (1, 3));

    // max_active_time: 30s..600s or 1m..10m.
    assert_eq!(connect(s.addr(), "/v5/private?max_active_time=29s").0, 400);
    assert_eq!(connect(s.addr(), "/v5/private?max_active_time=1m").0, 101);
    s.stop();
}

#[test]
fn the_last_dcp_connection_dropped_arms_the_window_that_cancels_the_orders() {
    let s = Server::start(dcp_config()).unwrap();
    order_and_window(&s, 3);
    let mut ws = private(&s);
    ws.auth_and_subscribe(&s, &["dcp.future"]);
    assert!(s.switches().is_empty(), "nothing armed while it lives");

    let closed = s.clock().now_ms();
    drop(ws);
    let armed = switches_after(&s, 1);
    assert_eq!(armed.len(), 1, "{armed:?}");
    assert_eq!((armed[0].account, armed[0].symbol.as_deref()), (0, None));
    let fires = armed[0].fires_at_ms;
    assert!(
        (closed + 3_000..=closed + 3_000 + SEEN_WITHIN_MS).contains(&fires),
        "fires {} ms after the close",
        fires - closed
    );

    s.advance_clock(fires - 500 - s.clock().now_ms());
    assert_eq!(s.switches().len(), 1);
    assert_eq!(order_status(&s), "NEW", "500 ms before the window ends");
    s.advance_clock(1_000);
    assert!(s.switches().is_empty());
    assert_eq!(order_status(&s), "CANCELED");
    let r = s.report();
    assert_eq!((r.switch_fires, r.bybit_private.dcp_armed), (1, 1));
    s.stop();
}

#[test]
fn one_live_dcp_connection_of_two_keeps_the_countdown_off() {
    let s = Server::start(dcp_config()).unwrap();
    order_and_window(&s, 3);
    let mut a = private(&s);
    a.auth_and_subscribe(&s, &["dcp.future"]);
    let mut b = private(&s);
    b.auth_and_subscribe(&s, &["dcp.future", "wallet"]);
    // A connection without the dcp topic holds nothing.
    let mut c = private(&s);
    c.auth_and_subscribe(&s, &["order"]);

    drop(a);
    assert!(switches_after(&s, 1).is_empty(), "b still holds DCP");
    drop(b);
    assert_eq!(switches_after(&s, 2).len(), 1, "c does not hold DCP");
    drop(c);
    s.stop();
}

#[test]
fn a_new_dcp_subscription_before_the_fire_stops_the_countdown() {
    let s = Server::start(dcp_config()).unwrap();
    order_and_window(&s, 3);
    let mut a = private(&s);
    a.auth_and_subscribe(&s, &["dcp.future"]);
    drop(a);
    assert_eq!(switches_after(&s, 1).len(), 1);

    let mut b = private(&s);
    // Auth alone is not a subscription.
    let r = b.auth(&s, DEFAULT_API_KEY, 5_000, DEFAULT_API_SECRET);
    assert_eq!(r["success"], true);
    assert_eq!(s.switches().len(), 1);
    let r = b.call(json!({"op": "subscribe", "args": ["dcp.future"]}));
    assert_eq!(r["success"], true);
    assert!(s.switches().is_empty());

    s.advance_clock(5_000);
    assert!(s.switches().is_empty());
    assert_eq!(order_status(&s), "NEW");
    assert_eq!(s.report().switch_fires, 0);
    drop(b);
    s.stop();
}

#[test]
fn without_dcp_enabled_or_on_other_products_a_drop_arms_nothing() {
    let s = Server::start(Config::bybit()).unwrap();
    let mut ws = private(&s);
    ws.auth_and_subscribe(&s, &["dcp.future"]);
    drop(ws);
    assert!(
        switches_after(&s, 1).is_empty(),
        "DCP is off for the account"
    );
    s.stop();

    // dcp.spot and dcp.option hold products the emulator does not trade.
    let s = Server::start(dcp_config()).unwrap();
    let mut ws = private(&s);
    ws.auth_and_subscribe(&s, &["dcp.spot", "dcp.option"]);
    drop(ws);
    assert!(switches_after(&s, 1).is_empty());
    assert_eq!(s.report().bybit_private.dcp_subscribed, 2);
    s.stop();
}

#[test]
fn an_idle_connection_is_cut_at_its_max_active_time_and_that_arms_dcp() {
    let s = Server::start(dcp_config()).unwrap();
    let (code, ws) = connect(s.addr(), "/v5/private?max_active_time=30s");
    assert_eq!(code, 101);
    let mut ws = ws.unwrap();
    let before = s.clock().now_ms();
    ws.auth_and_subscribe(&s, &["dcp.future"]);
    let after = s.clock().now_ms();

    s.advance_clock(31_000);
    assert_eq!(ws.frame().map(|f| f.0), Some(0x8), "a close frame");
    let armed = switches_after(&s, 1);
    assert_eq!(armed.len(), 1);
    // Cut 30 s after the last answer, plus the default 10 s window.
    let fires = armed[0].fires_at_ms;
    assert!(
        (before + 40_000..=after + 40_000).contains(&fires),
        "{fires} not in {}..={}",
        before + 40_000,
        after + 40_000
    );
    assert_eq!(s.report().bybit_private.idle_cuts, 1);
    s.stop();
}

#[test]
fn the_private_stream_can_be_unreachable() {
    let s = Server::start(Config {
        bybit_private_ws: false,
        ..Config::bybit()
    })
    .unwrap();
    assert_eq!(connect(s.addr(), "/v5/private").0, 404);
    assert_eq!(s.report().bybit_private.connects, 0);
    s.stop();

    // Not Bybit: the path is nothing special.
    let s = Server::start(Config::binance_spot()).unwrap();
    assert_ne!(connect(s.addr(), "/v5/private").0, 101);
    s.stop();
}

/// `Server::drop_bybit_private`: a network cut of every open private
/// connection; the client reads the end, and DCP counts it like a close.
#[test]
fn a_cut_ends_every_private_connection_and_arms_dcp() {
    let s = Server::start(dcp_config()).unwrap();
    order_and_window(&s, 3);
    let mut ws = private(&s);
    ws.auth_and_subscribe(&s, &["dcp.future"]);
    s.drop_bybit_private();
    assert_eq!(ws.frame(), None, "ended without a close frame");
    let armed = switches_after(&s, 1);
    assert_eq!(armed.len(), 1, "{armed:?}");
    // A connection opened after the cut is not cut by it.
    let mut again = private(&s);
    again.auth_and_subscribe(&s, &["dcp.future"]);
    assert!(s.switches().is_empty(), "a new subscription stops it");
    let pong = again.call(json!({"req_id": "p", "op": "ping"}));
    assert_eq!(pong["op"], "pong");
    s.stop();
}
