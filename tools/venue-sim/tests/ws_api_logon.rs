//! Ed25519 API keys on the Binance Spot profile, and the WebSocket API's
//! `session.logon`/`session.status`/`session.logout` ("Authentication requests"
//! and "Session Authentication" of the Spot WebSocket API docs): REST and
//! WebSocket API signatures checked with the account's public key (ring), signed
//! here by ergon-venues' Ed25519 key (ed25519-dalek); a logon with an HMAC key
//! refused; an order without `apiKey`/`signature` refused on a connection not
//! logged on and accepted on one logged on; a revoked key ending the session.

mod common;

use std::io::Read;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use common::ws::{upgrade, RawWs, KEY};
use common::{order_params, Client};
use ergon_venue_sim::params::{sign, sorted_payload, Params};
use ergon_venue_sim::{
    Account, Config, Server, DEFAULT_API_KEY, DEFAULT_API_SECRET, ED25519_TEST_API_KEY,
    ED25519_TEST_PRIVATE_PEM,
};
use ergon_venues::endpoint::Ed25519Key;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(10);
const ED_KEY: &str = ED25519_TEST_API_KEY;

fn key() -> Ed25519Key {
    Ed25519Key::from_pkcs8_pem(ED25519_TEST_PRIVATE_PEM).unwrap()
}

/// The default HMAC account and an Ed25519 one.
fn server() -> Server {
    let mut c = Config::binance_spot();
    c.accounts.push(Account::ed25519_test());
    Server::start(c).unwrap()
}

struct Ws {
    raw: RawWs,
    id: u64,
}

impl Ws {
    fn open(server: &Server) -> Ws {
        Ws::open_at(server, "/ws-api/v3")
    }

    fn open_at(server: &Server, path: &str) -> Ws {
        let (code, raw) = upgrade(server.addr(), path, Some(KEY), WAIT);
        assert_eq!(code, 101);
        Ws {
            raw: raw.unwrap(),
            id: 0,
        }
    }

    /// The next text message (pings answered on the way).
    fn next(&mut self) -> Value {
        let until = Instant::now() + WAIT;
        let mut chunk = [0u8; 16384];
        loop {
            let b = &self.raw.buf;
            if b.len() >= 2 {
                let (len, at) = match b[1] & 0x7f {
                    126 if b.len() >= 4 => (usize::from(u16::from_be_bytes([b[2], b[3]])), 4),
                    126 => (usize::MAX, 0),
                    n => (usize::from(n), 2),
                };
                if len != usize::MAX && b.len() >= at + len {
                    let op = b[0] & 0x0f;
                    let payload = b[at..at + len].to_vec();
                    self.raw.buf.drain(..at + len);
                    match op {
                        1 => return serde_json::from_slice(&payload).unwrap(),
                        9 => self.raw.send_frame(0xA, &payload),
                        _ => panic!("unexpected frame {op}"),
                    }
                    continue;
                }
            }
            assert!(Instant::now() < until, "no message");
            self.raw
                .stream
                .set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            if let Ok(n) = self.raw.stream.read(&mut chunk) {
                assert!(n > 0, "closed");
                self.raw.buf.extend_from_slice(&chunk[..n]);
            }
        }
    }

    /// Sends `method` with `params`, returns the answer with its id.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let req = json!({ "id": self.id, "method": method, "params": params });
        self.raw.send_frame(1, req.to_string().as_bytes());
        loop {
            let v = self.next();
            if v["id"] == json!(self.id) {
                return v;
            }
        }
    }
}

/// `params` with `timestamp` and, if `key` is given, `apiKey` and `signature`
/// (Ed25519, base64 over the sorted payload).
fn signed(server: &Server, mut params: Value, key: Option<(&str, &Ed25519Key)>) -> Value {
    let m = params.as_object_mut().unwrap();
    m.insert("timestamp".into(), json!(server.clock().now_ms()));
    if let Some((api_key, k)) = key {
        m.insert("apiKey".into(), json!(api_key));
        let pairs = m
            .iter()
            .map(|(k, v)| {
                let v = v.as_str().map(str::to_string).unwrap_or(v.to_string());
                (k.clone(), v)
            })
            .collect();
        let payload = sorted_payload(&Params::from_pairs(pairs));
        m.insert(
            "signature".into(),
            json!(STANDARD.encode(k.sign(payload.as_bytes()))),
        );
    }
    params
}

/// `session.logon`'s parameters signed with the default account's HMAC key.
fn hmac_logon(server: &Server) -> Value {
    let ts = server.clock().now_ms();
    let payload = format!("apiKey={DEFAULT_API_KEY}&timestamp={ts}");
    json!({"apiKey": DEFAULT_API_KEY, "timestamp": ts,
           "signature": sign(&payload, DEFAULT_API_SECRET)})
}

fn order(cid: &str) -> Value {
    json!({"symbol":"BTCUSDT","side":"BUY","type":"LIMIT","timeInForce":"GTC",
           "quantity":"0.01","price":"49000","newClientOrderId":cid})
}

fn code(v: &Value) -> i64 {
    v["error"]["code"].as_i64().unwrap_or(0)
}

#[test]
fn rest_takes_an_ed25519_signature_and_refuses_a_bad_one() {
    let server = server();
    let mut c = Client::connect(server.addr());
    let q = format!(
        "{}&timestamp={}",
        order_params("ed-rest-1"),
        server.clock().now_ms()
    );
    let sig = STANDARD.encode(key().sign(q.as_bytes()));
    let enc = sig
        .replace('+', "%2B")
        .replace('/', "%2F")
        .replace('=', "%3D");
    let r = c
        .send(
            "POST",
            &format!("/api/v3/order?{q}&signature={enc}"),
            Some(ED_KEY),
            "",
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    // The same signature over another payload, and an HMAC one, are refused.
    let q2 = q.replace("ed-rest-1", "ed-rest-2");
    let r = c
        .send(
            "POST",
            &format!("/api/v3/order?{q2}&signature={enc}"),
            Some(ED_KEY),
            "",
        )
        .unwrap();
    assert_eq!((r.status, r.code()), (400, -1022), "{}", r.body);
    let hmac = sign(&q2, DEFAULT_API_SECRET);
    let r = c
        .send(
            "POST",
            &format!("/api/v3/order?{q2}&signature={hmac}"),
            Some(ED_KEY),
            "",
        )
        .unwrap();
    assert_eq!((r.status, r.code()), (400, -1022), "{}", r.body);
    assert_eq!(server.orders().len(), 1);
}

#[test]
fn logon_takes_an_ed25519_key_and_orders_then_go_unsigned() {
    let server = server();
    let k = key();
    let mut ws = Ws::open(&server);
    // Not logged on: an order without apiKey and signature is refused.
    let r = ws.call("order.place", signed(&server, order("ed-ws-0"), None));
    assert_eq!((r["status"].as_u64(), code(&r)), (Some(401), -2014), "{r}");
    let r = ws.call("session.status", json!({}));
    assert_eq!(r["result"]["apiKey"], Value::Null, "{r}");
    let r = ws.call(
        "session.logon",
        signed(&server, json!({}), Some((ED_KEY, &k))),
    );
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(r["result"]["apiKey"], ED_KEY);
    // Weight 2, counted on the IP's REQUEST_WEIGHT like any request.
    let weight = r["rateLimits"][0]["count"].as_u64().unwrap();
    let r = ws.call("session.status", json!({}));
    assert_eq!(r["result"]["apiKey"], ED_KEY, "{r}");
    assert_eq!(r["rateLimits"][0]["count"].as_u64().unwrap(), weight + 2);
    // Logged on: the order goes without apiKey and signature, with its timestamp.
    let r = ws.call("order.place", signed(&server, order("ed-ws-1"), None));
    assert_eq!(r["status"], 200, "{r}");
    // Still timed.
    let r = ws.call("order.place", order("ed-ws-2"));
    assert_eq!(code(&r), -1102, "{r}");
    // The user data stream without a signature.
    let r = ws.call("userDataStream.subscribe", json!({}));
    assert!(r["result"]["subscriptionId"].is_u64(), "{r}");
    // Logout: signatures needed again.
    let r = ws.call("session.logout", json!({}));
    assert_eq!(r["result"]["apiKey"], Value::Null, "{r}");
    let r = ws.call("order.place", signed(&server, order("ed-ws-3"), None));
    assert_eq!(code(&r), -2014, "{r}");
    assert_eq!(server.report().ws.api_logons, 1);
    assert_eq!(server.orders().len(), 1);
}

#[test]
fn an_hmac_key_cannot_log_on() {
    let server = server();
    let mut ws = Ws::open(&server);
    let r = ws.call("session.logon", hmac_logon(&server));
    assert_eq!((r["status"].as_u64(), code(&r)), (Some(401), -1002), "{r}");
    let r = ws.call("userDataStream.subscribe", json!({}));
    assert_eq!(code(&r), -1002, "{r}");
    let r = ws.call("order.place", signed(&server, order("hm-1"), None));
    assert_eq!(code(&r), -2014, "{r}");
    assert_eq!(server.report().ws.api_logons, 0);
}

#[test]
fn a_revoked_key_ends_the_session_at_the_next_request() {
    let server = server();
    let k = key();
    let mut ws = Ws::open(&server);
    let r = ws.call(
        "session.logon",
        signed(&server, json!({}), Some((ED_KEY, &k))),
    );
    assert_eq!(r["status"], 200, "{r}");
    assert!(server.revoke_api_key(ED_KEY));
    let r = ws.call("order.place", signed(&server, order("rv-1"), None));
    assert_eq!(code(&r), -2015, "{r}");
    // Then the documented revocation, with a null id.
    let v = ws.next();
    assert_eq!(v["id"], Value::Null, "{v}");
    assert_eq!((v["status"].as_u64(), code(&v)), (Some(401), -2015), "{v}");
    let r = ws.call("session.status", json!({}));
    assert_eq!(r["result"]["apiKey"], Value::Null, "{r}");
    assert!(server.orders().is_empty());
    assert_eq!(server.report().ws.api_revocations, 1);
}

/// The REQUEST_WEIGHT count and the ORDERS counts an answer's `rateLimits` lists.
fn counts(r: &Value) -> (u64, Vec<u64>) {
    let list = r["rateLimits"].as_array().cloned().unwrap_or_default();
    let of = |kind: &str| -> Vec<u64> {
        list.iter()
            .filter(|l| l["rateLimitType"] == kind)
            .filter_map(|l| l["count"].as_u64())
            .collect()
    };
    (
        of("REQUEST_WEIGHT").first().copied().unwrap_or(0),
        of("ORDERS"),
    )
}

#[test]
fn usdm_futures_serve_the_websocket_api_with_logon_at_ws_fapi() {
    let mut c = Config::binance_futures();
    c.accounts.push(Account::ed25519_test());
    let server = Server::start(c).unwrap();
    // Spot's path is not USD-M's.
    let (status, _) = upgrade(server.addr(), "/ws-api/v3", Some(KEY), WAIT);
    assert_eq!(status, 404);
    let mut ws = Ws::open_at(&server, "/ws-fapi/v1");
    // Only Ed25519 keys log on.
    let r = ws.call("session.logon", hmac_logon(&server));
    assert_eq!((r["status"].as_u64(), code(&r)), (Some(401), -1002), "{r}");
    // Not logged on, an order without apiKey and signature is refused.
    let r = ws.call("order.place", signed(&server, order("fm-0"), None));
    assert_eq!(code(&r), -2014, "{r}");
    let k = key();
    let r = ws.call(
        "session.logon",
        signed(&server, json!({}), Some((ED_KEY, &k))),
    );
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(r["result"]["apiKey"], ED_KEY);
    let (logon_weight, _) = counts(&r);
    // order.place: 0 on the IP's weight, 1 on each ORDERS limit; unsigned.
    let r = ws.call("order.place", signed(&server, order("fm-1"), None));
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(counts(&r), (logon_weight, vec![1, 1]), "{r}");
    // order.modify: the same weights.
    let modify = json!({"symbol":"BTCUSDT","side":"BUY","quantity":"0.02",
                        "price":"48000","origClientOrderId":"fm-1"});
    let r = ws.call("order.modify", signed(&server, modify, None));
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(counts(&r), (logon_weight, vec![2, 2]), "{r}");
    // order.cancel: 1 on the IP's weight.
    let cancel = json!({"symbol":"BTCUSDT","origClientOrderId":"fm-1"});
    let r = ws.call("order.cancel", signed(&server, cancel, None));
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(counts(&r).0, logon_weight + 1, "{r}");
    // Spot's methods are not USD-M's.
    for method in ["order.cancelReplace", "userDataStream.subscribe"] {
        let r = ws.call(method, signed(&server, order("fm-2"), None));
        assert_eq!(code(&r), -1020, "{method}: {r}");
    }
    let rep = server.report();
    assert_eq!(
        (rep.ws.api_logons, rep.ws.api_unsigned),
        (1, 3),
        "{:?}",
        rep.ws
    );
    assert_eq!(server.orders().len(), 1);
}
