//! Deribit's JSON-RPC over WebSocket (`/ws/api/v2`) through a raw client written
//! here: connection auth (`client_credentials`, `client_signature`), the engine
//! calls of the HTTP profile, heartbeats (`test_request` answered by
//! `public/test`, on the venue clock jumped with `advance_clock`), the credit
//! close, and cancel-on-disconnect: a connection's own orders cancelled when it
//! ends, never another connection's nor HTTP's, nothing on `private/logout`.

mod common;

use std::io::{ErrorKind, Read};
use std::time::Duration;

use common::ws::{upgrade, RawWs, KEY};
use common::{until, Client, Resp};
use ergon_venue_sim::params::sign;
use ergon_venue_sim::{Config, Credits, Server, DEFAULT_API_KEY, DEFAULT_API_SECRET};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(10);
const PATH: &str = "/ws/api/v2";

/// A raw WebSocket client speaking JSON-RPC.
struct Ws {
    raw: RawWs,
    next_id: u64,
}

fn connect(s: &Server) -> Ws {
    let (code, raw) = upgrade(s.addr(), PATH, Some(KEY), WAIT);
    assert_eq!(code, 101);
    Ws {
        raw: raw.unwrap(),
        next_id: 0,
    }
}

impl Ws {
    /// The next frame: opcode and payload; `None` at EOF or reset.
    fn frame(&mut self) -> Option<(u8, Vec<u8>)> {
        let mut chunk = [0u8; 4096];
        loop {
            let b = &self.raw.buf;
            if b.len() >= 2 {
                let (len, at) = match b[1] & 0x7f {
                    126 if b.len() >= 4 => (u16::from_be_bytes([b[2], b[3]]) as usize, 4),
                    126 => (usize::MAX, 0),
                    n => (n as usize, 2),
                };
                if len != usize::MAX && b.len() >= at + len {
                    let op = b[0] & 0x0f;
                    let payload = b[at..at + len].to_vec();
                    self.raw.buf.drain(..at + len);
                    return Some((op, payload));
                }
            }
            match self.raw.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.raw.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("no frame: {e}"),
            }
        }
    }

    fn text(&mut self) -> Value {
        match self.frame() {
            Some((1, t)) => serde_json::from_slice(&t).unwrap(),
            other => panic!("expected a text frame, got {other:?}"),
        }
    }

    /// Sends `method` with `params` under a fresh id; the answer (its id checked).
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.raw.send_frame(1, req.to_string().as_bytes());
        let v = self.text();
        assert_eq!(v["id"], id, "{v}");
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        v
    }

    fn ok(&mut self, method: &str, params: Value) -> Value {
        let v = self.call(method, params);
        assert!(v.get("error").is_none(), "{method}: {v}");
        v["result"].clone()
    }

    fn auth(&mut self) {
        let r = self.ok(
            "public/auth",
            json!({"grant_type": "client_credentials", "client_id": DEFAULT_API_KEY,
                   "client_secret": DEFAULT_API_SECRET}),
        );
        assert_eq!(r["token_type"], "bearer");
    }

    /// A resting limit buy; its order id.
    fn buy(&mut self, label: &str) -> u64 {
        let r = self.ok("private/buy", buy(label));
        r["order"]["order_id"].as_str().unwrap().parse().unwrap()
    }

    /// Reads to the end: whether a close frame came before EOF.
    fn closed(&mut self) -> bool {
        let mut close = false;
        while let Some((op, _)) = self.frame() {
            close |= op == 8;
        }
        close
    }
}

fn buy(label: &str) -> Value {
    json!({"instrument_name": "BTC-PERPETUAL", "amount": 10, "type": "limit", "price": 49000,
           "label": label})
}

fn error(v: &Value) -> (i64, String) {
    (
        v["error"]["code"].as_i64().unwrap_or(0),
        v["error"]["data"]["reason"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    )
}

/// The order's status in the registry, once it is `want` (polled briefly:
/// the connection's thread sees the end on its next look).
fn status_becomes(s: &Server, order_id: u64, want: &str) -> String {
    let status = || {
        let o = s.orders().into_iter().find(|o| o.order_id == order_id);
        o.map(|o| o.status).unwrap_or_default()
    };
    until(Duration::from_secs(2), || {
        Some(status()).filter(|st| st == want)
    })
    .unwrap_or_else(status)
}

/// Waits until the venue saw `n` Deribit WebSocket ends.
fn ends_seen(s: &Server, n: u64) {
    let seen = until(Duration::from_secs(2), || {
        (s.report().deribit_ws.disconnects >= n).then_some(())
    });
    assert!(seen.is_some(), "{:?}", s.report().deribit_ws);
}

/// A JSON-RPC call over `POST /api/v2`.
fn rpc(c: &mut Client, token: Option<&str>, method: &str, params: Value) -> Resp {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(a) = &auth {
        headers.push(("Authorization", a));
    }
    c.send_with("POST", "/api/v2", &headers, &body)
        .expect("answer")
}

fn http_login(c: &mut Client) -> String {
    let r = rpc(
        c,
        None,
        "public/auth",
        json!({"grant_type": "client_credentials", "client_id": DEFAULT_API_KEY,
               "client_secret": DEFAULT_API_SECRET}),
    );
    r.json()["result"]["access_token"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn connection_auth_by_signature_or_credentials_and_refusals() {
    let s = Server::start(Config::deribit()).unwrap();
    let mut w = connect(&s);
    let v = w.call(
        "private/get_open_orders_by_instrument",
        json!({"instrument_name": "BTC-PERPETUAL"}),
    );
    assert_eq!(error(&v), (13009, "invalid_token".into()), "{v}");
    assert_eq!(v["error"]["message"], "unauthorized");

    let ts = s.clock().now_ms();
    let sig = sign(&format!("{ts}\nn1\n"), DEFAULT_API_SECRET);
    let signed = |ts: i64, sig: &str, client: &str| {
        json!({"grant_type": "client_signature", "client_id": client, "timestamp": ts,
               "signature": sig, "nonce": "n1"})
    };
    let bad = sign(&format!("{ts}\nn1\n"), "not-the-secret");
    let v = w.call("public/auth", signed(ts, &bad, DEFAULT_API_KEY));
    assert_eq!(error(&v), (13004, "invalid_signature".into()), "{v}");
    assert_eq!(v["error"]["message"], "invalid_credentials");
    let v = w.call("public/auth", signed(ts, &sig, "nobody"));
    assert_eq!(error(&v), (13004, "invalid_credentials".into()), "{v}");
    let stale = ts - 120_000;
    let stale_sig = sign(&format!("{stale}\nn1\n"), DEFAULT_API_SECRET);
    let v = w.call("public/auth", signed(stale, &stale_sig, DEFAULT_API_KEY));
    assert_eq!(error(&v), (13004, "invalid_timestamp".into()), "{v}");
    let v = w.call(
        "public/auth",
        json!({"grant_type": "client_credentials", "client_id": DEFAULT_API_KEY,
               "client_secret": "wrong"}),
    );
    assert_eq!(error(&v), (13004, "invalid_credentials".into()), "{v}");

    let r = w.ok("public/auth", signed(ts, &sig, DEFAULT_API_KEY));
    assert_eq!(r["token_type"], "bearer");
    assert_eq!(r["expires_in"], 900);
    assert!(r["access_token"].is_string() && r["refresh_token"].is_string());
    // The connection is authenticated: no token needed from now on.
    let open = w.ok(
        "private/get_open_orders_by_instrument",
        json!({"instrument_name": "BTC-PERPETUAL"}),
    );
    assert_eq!(open, json!([]));
    // Numbers as strings, as the real API takes them.
    let r = w.ok(
        "private/buy",
        json!({"instrument_name": "BTC-PERPETUAL", "amount": "10", "price": "49000.5"}),
    );
    assert_eq!(r["order"]["price"], 49000.5);

    let mut w2 = connect(&s);
    w2.auth();
    let r = w2.ok("public/test", json!({}));
    assert!(r["version"].is_string(), "{r}");
    let d = s.report().deribit_ws;
    assert_eq!((d.connects, d.auths, d.auth_refused), (2, 2, 4), "{d:?}");
}

#[test]
fn cancel_on_disconnect_cancels_only_that_connections_orders() {
    let s = Server::start(Config::deribit()).unwrap();
    let mut c = Client::connect(s.addr());
    let token = http_login(&mut c);
    let r = rpc(&mut c, Some(&token), "private/buy", buy("http"));
    let by_http: u64 = r.json()["result"]["order"]["order_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();

    let mut a = connect(&s);
    a.auth();
    let off = a.ok("private/get_cancel_on_disconnect", json!({}));
    assert_eq!(off, json!({"scope": "connection", "enabled": false}));
    assert_eq!(
        a.ok(
            "private/enable_cancel_on_disconnect",
            json!({"scope": "connection"})
        ),
        "ok"
    );
    let on = a.ok("private/get_cancel_on_disconnect", json!({}));
    assert_eq!(on, json!({"scope": "connection", "enabled": true}));
    let by_a = a.buy("a");
    let mut b = connect(&s);
    b.auth();
    let by_b = b.buy("b");

    let before = s.clock().now_ms();
    drop(a);
    assert_eq!(status_becomes(&s, by_a, "CANCELED"), "CANCELED");
    assert_eq!(status_becomes(&s, by_b, "NEW"), "NEW");
    assert_eq!(status_becomes(&s, by_http, "NEW"), "NEW");
    // Still open to its own connection, and the cancel shows over HTTP.
    let open = b.ok(
        "private/get_open_orders_by_instrument",
        json!({"instrument_name": "BTC-PERPETUAL"}),
    );
    assert_eq!(open.as_array().unwrap().len(), 2, "{open}");
    let st = rpc(
        &mut c,
        Some(&token),
        "private/get_order_state",
        json!({"order_id": by_a.to_string()}),
    )
    .json();
    assert_eq!(st["result"]["order_state"], "cancelled");
    let stamped = st["result"]["last_update_timestamp"].as_i64().unwrap();
    assert!(stamped >= before && stamped - before < 2_000, "{st}");
    let d = s.report().deribit_ws;
    assert_eq!((d.cod_cancels, d.disconnects), (1, 1), "{d:?}");
}

#[test]
fn logout_closes_gracefully_and_cancels_nothing() {
    let s = Server::start(Config::deribit()).unwrap();
    let mut w = connect(&s);
    w.auth();
    w.ok("private/enable_cancel_on_disconnect", json!({}));
    let id = w.buy("stay");
    w.raw
        .send_frame(1, br#"{"jsonrpc":"2.0","id":9,"method":"private/logout"}"#);
    assert!(w.closed(), "a close frame, then EOF");
    ends_seen(&s, 1);
    assert_eq!(status_becomes(&s, id, "NEW"), "NEW");
    let d = s.report().deribit_ws;
    assert_eq!((d.logouts, d.cod_cancels), (1, 0), "{d:?}");
}

#[test]
fn unanswered_heartbeat_closes_and_cancels() {
    let s = Server::start(Config::deribit()).unwrap();
    let mut w = connect(&s);
    w.auth();
    assert_eq!(w.ok("public/set_heartbeat", json!({"interval": 10})), "ok");
    w.ok("private/enable_cancel_on_disconnect", json!({}));
    let id = w.buy("hb");
    let beat = json!({"jsonrpc": "2.0", "method": "heartbeat", "params": {"type": "test_request"}});

    s.advance_clock(10_000);
    assert_eq!(w.text(), beat);
    assert!(w.ok("public/test", json!({}))["version"].is_string());
    s.advance_clock(10_000);
    assert_eq!(w.text(), beat, "answered: the connection stays");
    assert_eq!(status_becomes(&s, id, "NEW"), "NEW");
    // Not answered within the interval: closed, and COD cancels.
    s.advance_clock(10_000);
    assert!(w.closed(), "a close frame, then EOF");
    assert_eq!(status_becomes(&s, id, "CANCELED"), "CANCELED");
    let d = s.report().deribit_ws;
    assert_eq!(
        (
            d.heartbeats_sent,
            d.test_replies,
            d.closes_by_heartbeat,
            d.cod_cancels
        ),
        (2, 1, 1, 1),
        "{d:?}"
    );
}

#[test]
fn account_scope_starts_later_connections_enabled() {
    let s = Server::start(Config::deribit()).unwrap();
    let mut a = connect(&s);
    a.auth();
    let p = json!({"scope": "account"});
    assert_eq!(a.ok("private/enable_cancel_on_disconnect", p.clone()), "ok");
    let got = a.ok("private/get_cancel_on_disconnect", p.clone());
    assert_eq!(got, json!({"scope": "account", "enabled": true}));

    let mut b = connect(&s);
    b.auth();
    let got = b.ok("private/get_cancel_on_disconnect", json!({}));
    assert_eq!(got, json!({"scope": "connection", "enabled": true}));
    let id = b.buy("b");
    drop(b);
    assert_eq!(status_becomes(&s, id, "CANCELED"), "CANCELED");

    assert_eq!(a.ok("private/disable_cancel_on_disconnect", p), "ok");
    let mut c = connect(&s);
    c.auth();
    let got = c.ok("private/get_cancel_on_disconnect", json!({}));
    assert_eq!(got, json!({"scope": "connection", "enabled": false}));
    let v = c.call(
        "private/enable_cancel_on_disconnect",
        json!({"scope": "desk"}),
    );
    assert_eq!(v["error"]["code"], -32602, "{v}");
}

#[test]
fn websocket_only_methods_are_refused_over_http_and_short_heartbeats_too() {
    let s = Server::start(Config::deribit()).unwrap();
    let mut c = Client::connect(s.addr());
    let token = http_login(&mut c);
    for m in [
        "private/enable_cancel_on_disconnect",
        "private/disable_cancel_on_disconnect",
        "private/get_cancel_on_disconnect",
        "private/logout",
        "public/set_heartbeat",
    ] {
        let r = rpc(&mut c, Some(&token), m, json!({"interval": 10}));
        assert_eq!(r.status, 400, "{m}: {}", r.body);
        assert_eq!(r.json()["error"]["code"], -32601, "{m}: {}", r.body);
    }
    let mut w = connect(&s);
    let v = w.call("public/set_heartbeat", json!({"interval": 9}));
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert_eq!(v["error"]["data"]["param"], "interval", "{v}");
    assert_eq!(
        w.ok("public/set_heartbeat", json!({"interval": "10"})),
        "ok"
    );
    assert_eq!(w.ok("public/disable_heartbeat", json!({})), "ok");

    // The path is Deribit's only on the deribit profile.
    let b = Server::start(Config::binance_spot()).unwrap();
    let (code, _) = upgrade(b.addr(), PATH, Some(KEY), WAIT);
    assert_ne!(code, 101);
}

#[test]
fn drop_deribit_ws_cuts_without_a_close_frame_and_cod_applies() {
    let s = Server::start(Config::deribit()).unwrap();
    let mut w = connect(&s);
    w.auth();
    w.ok("private/enable_cancel_on_disconnect", json!({}));
    let id = w.buy("cut");
    s.drop_deribit_ws();
    assert!(!w.closed(), "cut: no close frame");
    assert_eq!(status_becomes(&s, id, "CANCELED"), "CANCELED");
    assert_eq!(s.report().deribit_ws.cod_cancels, 1);
}

#[test]
fn an_empty_credit_pool_answers_10028_and_closes_with_cod() {
    let mut cfg = Config::deribit();
    cfg.credits = Credits {
        max: 1_500,
        refill_per_s: 1,
        cost: 500,
        ..Credits::default()
    };
    let s = Server::start(cfg).unwrap();
    let mut w = connect(&s);
    // Public calls pay from the IP's pool: auth, then two tests empty it.
    w.auth();
    w.ok("private/enable_cancel_on_disconnect", json!({}));
    let id = w.buy("rl");
    w.ok("public/test", json!({}));
    w.ok("public/test", json!({}));
    let v = w.call("public/test", json!({}));
    assert_eq!(v["error"]["code"], 10028, "{v}");
    assert_eq!(v["error"]["message"], "too_many_requests");
    assert!(w.closed(), "a close frame, then EOF");
    assert_eq!(status_becomes(&s, id, "CANCELED"), "CANCELED");
    let d = s.report().deribit_ws;
    assert_eq!((d.closes_by_rate_limit, d.cod_cancels), (1, 1), "{d:?}");
    let json = s.stop().to_json();
    assert_eq!(json["deribitWs"]["codCancels"], 1);
}
