//! The Binance Spot WebSocket API (`/ws-api/v3`) through a raw client written here:
//! signed requests over sorted params, answers matched by id with `rateLimits`,
//! weights and order counts shared with REST, the user data stream subscription
//! pushing wrapped `executionReport`s on the same connection, 429 with
//! `retryAfter` then a 418 ban, server pings, a drop fault that leaves the order
//! executed and counted once, the upgrade checks (handshake, connect limit then
//! a ban), and the removed listenKey endpoints answering 410 Gone.

mod common;

use std::io::{ErrorKind, Read};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::ws::{upgrade, RawWs, KEY};
use common::{order_params, Client};
use ergon_venue_sim::params::{sign, sorted_payload, Params};
use ergon_venue_sim::{
    Config, Fault, Interval, LimitType, RateLimit, Server, DEFAULT_API_KEY, DEFAULT_API_SECRET,
};
use serde_json::{json, Map, Value};

const WAIT: Duration = Duration::from_secs(10);

/// A raw WebSocket client, with the request ids it gave.
struct Ws {
    raw: RawWs,
    next_id: u64,
}

#[derive(Debug, PartialEq)]
enum In {
    Frame(u8, Vec<u8>),
    Eof,
    Timeout,
}

/// Upgrades to `path`; the status code, and the client on 101.
fn connect(addr: SocketAddr, path: &str) -> (u16, Option<Ws>) {
    connect_with(addr, path, Some(KEY))
}

/// Upgrades to `path` with this `Sec-WebSocket-Key` (none if `None`).
fn connect_with(addr: SocketAddr, path: &str, key: Option<&str>) -> (u16, Option<Ws>) {
    let (code, raw) = upgrade(addr, path, key, WAIT);
    (code, raw.map(|raw| Ws { raw, next_id: 0 }))
}

fn api(server: &Server) -> Ws {
    let (code, ws) = connect(server.addr(), "/ws-api/v3");
    assert_eq!(code, 101);
    ws.unwrap()
}

impl Ws {
    fn send_frame(&mut self, opcode: u8, payload: &[u8]) {
        self.raw.send_frame(opcode, payload);
    }

    fn read(&mut self, timeout: Duration) -> In {
        let until = Instant::now() + timeout;
        let mut chunk = [0u8; 16384];
        loop {
            if self.raw.buf.len() >= 2 {
                let (len, at) = match self.raw.buf[1] & 0x7f {
                    126 if self.raw.buf.len() >= 4 => (
                        u16::from_be_bytes([self.raw.buf[2], self.raw.buf[3]]) as usize,
                        4,
                    ),
                    127 if self.raw.buf.len() >= 10 => {
                        let mut a = [0u8; 8];
                        a.copy_from_slice(&self.raw.buf[2..10]);
                        (u64::from_be_bytes(a) as usize, 10)
                    }
                    126 | 127 => (usize::MAX, 0),
                    n => (n as usize, 2),
                };
                if len != usize::MAX && self.raw.buf.len() >= at + len {
                    let op = self.raw.buf[0] & 0x0f;
                    let payload = self.raw.buf[at..at + len].to_vec();
                    self.raw.buf.drain(..at + len);
                    return In::Frame(op, payload);
                }
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return In::Timeout;
            }
            self.raw
                .stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .unwrap();
            match self.raw.stream.read(&mut chunk) {
                Ok(0) => return In::Eof,
                Ok(n) => self.raw.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return In::Timeout
                }
                Err(_) => return In::Eof,
            }
        }
    }

    /// The next text message (pings answered on the way); `None` if the
    /// connection ended first.
    fn next_text(&mut self) -> Option<Value> {
        loop {
            match self.read(WAIT) {
                In::Frame(1, t) => return Some(serde_json::from_slice(&t).unwrap()),
                In::Frame(9, p) => self.send_frame(0xA, &p),
                In::Frame(8, _) | In::Eof => return None,
                other => panic!("expected a message, got {other:?}"),
            }
        }
    }

    /// Sends `{id, method, params}`; returns the id.
    fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let req = json!({ "id": self.next_id, "method": method, "params": params });
        self.send_frame(1, req.to_string().as_bytes());
        self.next_id
    }

    /// Sends and waits for the answer with the same id (events are skipped).
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        loop {
            let m = self.next_text().expect("an answer");
            if m["id"] == json!(id) {
                return m;
            }
            assert!(m.get("event").is_some(), "an answer to another id: {m}");
        }
    }

    /// A signed call with the default key.
    fn signed(&mut self, server: &Server, method: &str, params: Value) -> Value {
        self.call(method, signed(server, params))
    }
}

/// `params` with `apiKey`, `timestamp` and the signature over the sorted params.
fn signed(server: &Server, params: Value) -> Value {
    let mut m: Map<String, Value> = params.as_object().cloned().unwrap_or_default();
    m.insert("apiKey".into(), json!(DEFAULT_API_KEY));
    m.insert("timestamp".into(), json!(server.clock().now_ms()));
    let pairs = m
        .iter()
        .map(|(k, v)| {
            let t = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), t)
        })
        .collect();
    let sig = sign(
        &sorted_payload(&Params::from_pairs(pairs)),
        DEFAULT_API_SECRET,
    );
    m.insert("signature".into(), json!(sig));
    Value::Object(m)
}

fn order(cid: &str) -> Value {
    json!({
        "symbol": "BTCUSDT", "side": "BUY", "type": "LIMIT", "timeInForce": "GTC",
        "quantity": "0.01", "price": "49000", "newClientOrderId": cid,
    })
}

/// Spot's limits with the weight counted per day (no window edge inside a test).
fn config() -> Config {
    let mut c = Config::binance_spot();
    c.rate_limits[0] = RateLimit::new(LimitType::RequestWeight, Interval::Day, 1, 100_000);
    c
}

/// The `count` of the `rateLimits` entry of `kind` and `interval`.
fn count(answer: &Value, kind: &str, interval: &str) -> Option<u64> {
    answer["rateLimits"]
        .as_array()?
        .iter()
        .find(|l| l["rateLimitType"] == kind && l["interval"] == interval)?["count"]
        .as_u64()
}

#[test]
fn orders_over_the_websocket_api_answer_as_documented_and_share_rest_counts() {
    let s = Server::start(config()).unwrap();
    let mut ws = api(&s);

    let t = ws.call("time", json!({}));
    assert_eq!(t["status"], 200, "{t}");
    assert!(t["result"]["serverTime"].as_i64().unwrap() > 0);
    assert_eq!(
        count(&t, "REQUEST_WEIGHT", "DAY"),
        Some(3),
        "connect 2 + time 1"
    );
    let e = ws.call("v3/exchangeInfo", json!({}));
    assert_eq!(e["result"]["symbols"][0]["symbol"], "BTCUSDT");
    assert_eq!(count(&e, "REQUEST_WEIGHT", "DAY"), Some(23));
    let quiet = ws.call("time", json!({ "returnRateLimits": false }));
    assert!(quiet.get("rateLimits").is_none(), "{quiet}");

    let p = ws.signed(&s, "order.place", order("w1"));
    assert_eq!(p["status"], 200, "{p}");
    assert_eq!(p["result"]["clientOrderId"], "w1");
    assert_eq!(p["result"]["status"], "NEW");
    assert_eq!(count(&p, "ORDERS", "SECOND"), Some(1));
    assert_eq!(count(&p, "REQUEST_WEIGHT", "DAY"), Some(25));

    // REST sees the same IP weight and the same account order count.
    let mut c = Client::connect(s.addr());
    let r = c
        .signed(&s, "POST", "/api/v3/order", &order_params("r1"))
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header_u64("X-MBX-USED-WEIGHT-1D"), 26);
    assert_eq!(r.header_u64("X-MBX-ORDER-COUNT-10S"), 2);

    let q = ws.signed(
        &s,
        "order.status",
        json!({ "symbol": "BTCUSDT", "origClientOrderId": "r1" }),
    );
    assert_eq!(
        (q["status"].as_u64(), q["result"]["clientOrderId"].as_str()),
        (Some(200), Some("r1"))
    );
    assert_eq!(
        count(&q, "REQUEST_WEIGHT", "DAY"),
        Some(30),
        "order.status weighs 4"
    );
    let o = ws.signed(&s, "openOrders.status", json!({ "symbol": "BTCUSDT" }));
    assert_eq!(o["result"].as_array().unwrap().len(), 2);
    let a = ws.signed(&s, "account.status", json!({}));
    assert!(a["result"]["balances"].is_array(), "{a}");
    let x = ws.signed(
        &s,
        "order.cancelReplace",
        json!({
            "symbol": "BTCUSDT", "cancelReplaceMode": "STOP_ON_FAILURE",
            "cancelOrigClientOrderId": "w1", "side": "BUY", "type": "LIMIT",
            "timeInForce": "GTC", "quantity": "0.01", "price": "48000", "newClientOrderId": "w2",
        }),
    );
    assert_eq!(x["status"], 200, "{x}");
    assert_eq!(x["result"]["newOrderResponse"]["clientOrderId"], "w2");
    let d = ws.signed(
        &s,
        "order.cancel",
        json!({ "symbol": "BTCUSDT", "origClientOrderId": "w2" }),
    );
    assert_eq!(d["result"]["status"], "CANCELED", "{d}");
    let gone = ws.signed(
        &s,
        "order.cancel",
        json!({ "symbol": "BTCUSDT", "origClientOrderId": "w2" }),
    );
    assert_eq!(
        (gone["status"].as_u64(), gone["error"]["code"].as_i64()),
        (Some(400), Some(-2011))
    );

    // The registry is REST's: a client id in use is a duplicate either way.
    let dup = ws.signed(&s, "order.place", order("r1"));
    assert_eq!(dup["error"]["code"], -2010, "{dup}");

    let rep = s.stop();
    assert_eq!(
        (rep.executions, rep.cancels, rep.duplicate_rejects),
        (3, 2, 1)
    );
    assert_eq!(rep.duplicates, 0);
    assert_eq!((rep.ws.api_connects, rep.ws.api_requests), (1, 11));
}

#[test]
fn signatures_keys_methods_and_malformed_frames_are_refused() {
    let s = Server::start(config()).unwrap();
    let mut ws = api(&s);
    let mut p = signed(&s, order("b1"));
    p["signature"] = json!("00".repeat(32));
    let r = ws.call("order.place", p);
    assert_eq!(
        (r["status"].as_u64(), r["error"]["code"].as_i64()),
        (Some(400), Some(-1022)),
        "{r}"
    );
    let mut p = signed(&s, order("b2"));
    p["price"] = json!("48000");
    let r = ws.call("order.place", p);
    assert_eq!(
        r["error"]["code"], -1022,
        "a changed param breaks the signature"
    );
    let r = ws.call("order.place", order("b3"));
    assert_eq!(
        (r["status"].as_u64(), r["error"]["code"].as_i64()),
        (Some(401), Some(-2014))
    );
    let old = json!({ "symbol": "BTCUSDT", "recvWindow": 1000 });
    let mut p = signed(&s, old);
    p["timestamp"] = json!(s.clock().now_ms() - 5_000);
    let sig_params: Map<String, Value> = p.as_object().unwrap().clone();
    let pairs = sig_params
        .iter()
        .filter(|(k, _)| *k != "signature")
        .map(|(k, v)| (k.clone(), v.as_str().map_or(v.to_string(), str::to_string)))
        .collect();
    p["signature"] = json!(sign(
        &sorted_payload(&Params::from_pairs(pairs)),
        DEFAULT_API_SECRET
    ));
    let r = ws.call("openOrders.status", p);
    assert_eq!(r["error"]["code"], -1021, "{r}");
    let r = ws.call("userDataStream.start", json!({}));
    assert_eq!(
        (r["status"].as_u64(), r["error"]["code"].as_i64()),
        (Some(400), Some(-1020))
    );
    ws.send_frame(1, b"{not json");
    let r = ws.next_text().unwrap();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].as_i64()),
        (Value::Null, Some(-1000))
    );
    let r = ws.call("time", json!({}));
    assert_eq!(r["status"], 200, "the connection survives bad requests");
    let rep = s.stop();
    assert_eq!(
        (
            rep.signature_rejects,
            rep.api_key_rejects,
            rep.timestamp_rejects
        ),
        (2, 1, 1)
    );
    assert_eq!(rep.executions, 0);
}

#[test]
fn a_subscription_pushes_wrapped_execution_reports_on_the_same_connection() {
    let s = Server::start(config()).unwrap();
    let mut ws = api(&s);
    let sub = ws.signed(&s, "userDataStream.subscribe.signature", json!({}));
    assert_eq!(sub["result"]["subscriptionId"], 0, "{sub}");
    assert_eq!(
        count(&sub, "REQUEST_WEIGHT", "DAY"),
        Some(4),
        "connect 2 + subscribe 2"
    );
    let again = ws.signed(&s, "userDataStream.subscribe.signature", json!({}));
    assert_eq!(
        again["error"]["code"], -2035,
        "one per account per connection"
    );

    // An order placed over REST shows up on the WebSocket API connection.
    let mut c = Client::connect(s.addr());
    let r = c
        .signed(&s, "POST", "/api/v3/order", &order_params("e1"))
        .unwrap();
    assert_eq!(r.status, 200);
    let ev = ws.next_text().unwrap();
    assert_eq!(ev["subscriptionId"], 0, "{ev}");
    let e = &ev["event"];
    assert_eq!(
        (e["e"].as_str(), e["x"].as_str(), e["c"].as_str()),
        (Some("executionReport"), Some("NEW"), Some("e1"))
    );

    // And one placed on the same connection: its answer and its event both come.
    let id = ws.request("order.place", signed(&s, order("e2")));
    let mut got_answer = false;
    let mut got_event = false;
    while !(got_answer && got_event) {
        let m = ws.next_text().unwrap();
        if m["id"] == json!(id) {
            assert_eq!(m["status"], 200);
            got_answer = true;
        } else {
            assert_eq!(m["event"]["c"], "e2", "{m}");
            got_event = true;
        }
    }
    let list = ws.call("session.subscriptions", json!({}));
    assert_eq!(list["result"], json!([{ "subscriptionId": 0 }]));
    let none = ws.call("userDataStream.unsubscribe", json!({ "subscriptionId": 7 }));
    assert_eq!(none["error"]["code"], -2036);
    let off = ws.call("userDataStream.unsubscribe", json!({}));
    assert_eq!(
        (off["status"].as_u64(), off["result"].clone()),
        (Some(200), json!({}))
    );
    let r = c
        .signed(&s, "POST", "/api/v3/order", &order_params("e3"))
        .unwrap();
    assert_eq!(r.status, 200);
    let t = ws.call("time", json!({}));
    assert_eq!(t["status"], 200, "no event came before this answer");
    let rep = s.stop();
    assert_eq!(rep.ws.events, 2);
    assert_eq!(rep.ws.api_subscriptions, 1);
}

#[test]
fn a_drop_after_executing_leaves_the_order_executed_and_counted_once() {
    let mut cfg = config();
    cfg.faults.script = vec![(1, Fault::ExecuteThenClose)];
    let s = Server::start(cfg).unwrap();
    let mut ws = api(&s);
    ws.request("order.place", signed(&s, order("f1")));
    assert_eq!(ws.next_text(), None, "closed without an answer");

    let mut ws = api(&s);
    let q = ws.signed(
        &s,
        "order.status",
        json!({ "symbol": "BTCUSDT", "origClientOrderId": "f1" }),
    );
    assert_eq!(
        (q["status"].as_u64(), q["result"]["status"].as_str()),
        (Some(200), Some("NEW")),
        "{q}"
    );
    let again = ws.signed(&s, "order.place", order("f1"));
    assert_eq!(again["error"]["code"], -2010, "a re-send is caught");
    let rep = s.stop();
    assert_eq!(
        (rep.executions, rep.duplicates, rep.duplicate_rejects),
        (1, 0, 1)
    );
    assert_eq!(rep.faults.execute_then_close, 1);
}

#[test]
fn over_the_weight_limit_429_with_retry_after_then_a_418_ban_and_a_disconnect() {
    let mut cfg = config();
    cfg.rate_limits[0] = RateLimit::new(LimitType::RequestWeight, Interval::Day, 1, 10);
    cfg.ban.after_violations = 2;
    let s = Server::start(cfg).unwrap();
    let mut ws = api(&s);
    let mut n = 0;
    let last = loop {
        n += 1;
        let r = ws.call("time", json!({}));
        if r["status"] != 200 {
            break r;
        }
        assert!(n < 20, "never throttled");
    };
    assert_eq!(n, 9, "connect 2 + 8 requests of 1 fill 10");
    assert_eq!(
        (last["status"].as_u64(), last["error"]["code"].as_i64()),
        (Some(429), Some(-1003))
    );
    let now = s.clock().now_ms();
    let retry = last["error"]["data"]["retryAfter"].as_i64().unwrap();
    assert!(retry > now, "a timestamp ahead: {last}");
    assert_eq!(count(&last, "REQUEST_WEIGHT", "DAY"), Some(11));
    let again = ws.call("time", json!({}));
    assert_eq!(again["status"], 429);
    let id = ws.request("time", json!({}));
    let ban = ws.next_text().unwrap();
    assert_eq!(
        (ban["id"].clone(), ban["status"].as_u64()),
        (json!(id), Some(418)),
        "{ban}"
    );
    assert!(ban["error"]["data"]["retryAfter"].as_i64().unwrap() > now);
    assert_eq!(ws.next_text(), None, "disconnected after the 418");
    let (code, _) = connect(s.addr(), "/ws-api/v3");
    assert_eq!(code, 418, "no connect while banned");
    let mut c = Client::connect(s.addr());
    assert_eq!(c.get("/api/v3/time").status, 418, "REST is banned too");
    let rep = s.stop();
    assert_eq!(rep.bans, 1);
}

#[test]
fn the_server_pings_and_cuts_a_connection_that_does_not_answer() {
    let mut cfg = config();
    cfg.ws.api_ping_interval_ms = 50;
    cfg.ws.api_pong_timeout_ms = 150;
    let s = Server::start(cfg).unwrap();
    let mut answers = api(&s);
    let mut silent = api(&s);
    match answers.read(WAIT) {
        In::Frame(9, p) => answers.send_frame(0xA, &p),
        other => panic!("expected a ping, got {other:?}"),
    }
    let mut pings = 0;
    loop {
        match silent.read(WAIT) {
            In::Frame(9, _) => pings += 1,
            In::Eof | In::Frame(8, _) => break,
            other => panic!("expected pings then a cut, got {other:?}"),
        }
    }
    assert!(pings >= 2, "{pings} pings before the cut");
    let t = answers.call("time", json!({}));
    assert_eq!(t["status"], 200, "the one that answers stays");
    let rep = s.stop();
    assert_eq!(rep.ws.cut_pong, 1);
}

#[test]
fn every_user_data_stream_request_answers_410_gone() {
    // Binance removed the listenKey endpoints on 2026-02-20.
    let s = Server::start(config()).unwrap();
    let mut c = Client::connect(s.addr());
    for method in ["POST", "PUT", "DELETE"] {
        let r = c
            .send(method, "/api/v3/userDataStream", Some(DEFAULT_API_KEY), "")
            .unwrap();
        assert_eq!(r.status, 410, "{method}");
        assert!(r.header("Content-Type").unwrap().starts_with("text/html"));
        assert!(r.body.contains("410 Gone"));
        assert!(
            r.header("X-MBX-USED-WEIGHT-1D").is_none(),
            "the API never saw it"
        );
    }
    let r = c
        .signed(&s, "GET", "/api/v3/openOrders", "symbol=BTCUSDT")
        .unwrap();
    assert_eq!(r.status, 200, "the rest of the API is there");
    assert_eq!(s.stop().responses.get(&410), Some(&3));
}

#[test]
fn bad_upgrades_are_refused() {
    let s = Server::start(config()).unwrap();
    let (code, _) = connect_with(s.addr(), "/ws-api/v3", None);
    assert_eq!(code, 400, "no Sec-WebSocket-Key");
    let (code, _) = connect_with(s.addr(), "/ws-api/v3", Some("c2hvcnQ="));
    assert_eq!(code, 400, "a key that is not 16 bytes");
    let (code, _) = connect(s.addr(), "/ws/somekey");
    assert_eq!(code, 404, "the listenKey stream is gone");
    let (code, ws) = connect(s.addr(), "/ws-api/v3");
    assert_eq!(code, 101, "a good handshake still passes");
    drop(ws);
    let r = s.stop();
    assert_eq!(r.ws.api_connects, 1);
    assert_eq!(r.ws.connects_refused, 0, "bad handshakes are not the limit");
}

#[test]
fn a_connect_storm_is_refused_then_the_ip_is_banned() {
    let mut cfg = config();
    cfg.ws.connects = 5;
    cfg.ws.connect_window_ms = 60_000;
    cfg.ws.ban_after_refused = 3;
    let s = Server::start(cfg).unwrap();
    let mut open = Vec::new();
    for _ in 0..5 {
        let (code, ws) = connect(s.addr(), "/ws-api/v3");
        assert_eq!(code, 101);
        open.push(ws);
    }
    let codes: Vec<u16> = (0..3).map(|_| connect(s.addr(), "/ws-api/v3").0).collect();
    assert_eq!(codes, [429, 429, 418], "refused, then banned");
    let (code, _) = connect(s.addr(), "/ws-api/v3");
    assert_eq!(code, 418, "a banned IP cannot connect");
    let mut c = Client::connect(s.addr());
    assert_eq!(c.get("/api/v3/ping").status, 418, "nor send REST requests");
    let r = s.stop();
    assert_eq!(r.ws.api_connects, 5);
    assert_eq!(r.ws.connects_refused, 4);
    assert_eq!(r.bans, 1);
}

#[test]
fn an_order_held_past_its_recv_window_is_refused_never_executed() {
    // Binance's matching engine checks `timestamp + recvWindow` again when it takes
    // the request: over the WebSocket API as over REST.
    let mut cfg = config();
    cfg.faults.script = vec![(1, Fault::Delay), (2, Fault::Delay)];
    cfg.faults.delay_ms = 300;
    let s = Server::start(cfg).unwrap();
    let mut ws = api(&s);
    let mut short = order("held-1");
    short["recvWindow"] = json!(100);
    let a = ws.signed(&s, "order.place", short);
    assert_eq!(
        (a["status"].as_u64(), &a["error"]["code"]),
        (Some(400), &json!(-1021)),
        "{a}"
    );
    let b = ws.signed(&s, "order.place", order("held-2"));
    assert_eq!(
        b["status"].as_u64(),
        Some(200),
        "inside its 5 s window: {b}"
    );
    let rep = s.stop();
    assert_eq!(rep.executions, 1, "only the order still valid ran: {rep:?}");
    assert_eq!(rep.faults.delay, 2);
}
