//! Hyperliquid's WebSocket (`/ws`) on the `hyperliquid` profile, through a raw
//! client written here: the `post` channel (an info request and signed actions,
//! answered in the documented shapes, counted in the address budget and not in
//! the IP's REST weight), and the users an IP's subscriptions may track (10; a
//! freed slot held 60 s for the other connections, on the venue's clock jumped).
//! Shapes from <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/websocket/post-requests>.

mod common;

use std::io::{ErrorKind, Read};
use std::time::Duration;

use common::ws::{upgrade, RawWs, KEY};
use ergon_venue_sim::{Config, Server, HYPERLIQUID_TEST_ADDRESS, HYPERLIQUID_TEST_KEY};
use ergon_venues::hyperliquid::sign::{Network, Wallet};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(10);

struct Ws {
    raw: RawWs,
}

fn connect(s: &Server) -> Ws {
    let (code, raw) = upgrade(s.addr(), "/ws", Some(KEY), WAIT);
    assert_eq!(code, 101);
    Ws { raw: raw.unwrap() }
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

    /// Sends `v`; the answer.
    fn ask(&mut self, v: &Value) -> Value {
        self.raw.send_frame(1, v.to_string().as_bytes());
        match self.frame() {
            Some((1, t)) => serde_json::from_slice(&t).unwrap(),
            other => panic!("expected a text frame, got {other:?}"),
        }
    }

    fn post(&mut self, id: u64, kind: &str, payload: Value) -> Value {
        let v = self.ask(
            &json!({"method": "post", "id": id, "request": {"type": kind, "payload": payload}}),
        );
        assert_eq!(v["channel"], "post", "{v}");
        assert_eq!(v["data"]["id"], id, "{v}");
        v["data"]["response"].clone()
    }

    fn subscribe(&mut self, user: &str) -> Value {
        self.ask(
            &json!({"method": "subscribe", "subscription": {"type": "orderUpdates", "user": user}}),
        )
    }

    fn unsubscribe(&mut self, user: &str) -> Value {
        self.ask(&json!({"method": "unsubscribe", "subscription": {"type": "orderUpdates", "user": user}}))
    }
}

/// An exchange body: `action` signed with the account's key.
fn signed(action: &str, nonce: u64) -> Value {
    let mut w = Wallet::from_key_text(HYPERLIQUID_TEST_KEY.as_bytes(), Network::Mainnet).unwrap();
    let sig = w.sign_json(action.as_bytes(), nonce, None).unwrap();
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    json!({
        "action": serde_json::from_str::<Value>(action).unwrap(),
        "nonce": nonce,
        "signature": {"r": format!("0x{}", hex(&sig.r)), "s": format!("0x{}", hex(&sig.s)), "v": sig.v},
    })
}

const ORDER: &str = r#"{"type":"order","orders":[{"a":0,"b":true,"p":"49000","s":"0.5","r":false,"t":{"limit":{"tif":"Gtc"}},"c":"0x00000000000000000000000000000001"}],"grouping":"na"}"#;

fn user(n: u8) -> String {
    format!("0x{:040x}", n)
}

#[test]
fn posts_run_info_and_actions_in_the_documented_shapes() {
    let s = Server::start(Config::hyperliquid()).unwrap();
    let mut ws = connect(&s);
    assert_eq!(ws.ask(&json!({"method": "ping"}))["channel"], "pong");

    let r = ws.post(1, "info", json!({"type": "l2Book", "coin": "BTC"}));
    assert_eq!(r["type"], "info", "{r}");
    assert_eq!(r["payload"]["type"], "l2Book", "{r}");
    assert_eq!(r["payload"]["data"]["coin"], "BTC", "{r}");
    assert_eq!(
        r["payload"]["data"]["levels"].as_array().unwrap().len(),
        2,
        "{r}"
    );

    let nonce = s.clock().now_ms() as u64;
    let r = ws.post(2, "action", signed(ORDER, nonce));
    assert_eq!(r["type"], "action", "{r}");
    assert_eq!(r["payload"]["status"], "ok", "{r}");
    assert!(
        r["payload"]["response"]["data"]["statuses"][0]["resting"]["oid"].is_u64(),
        "{r}"
    );
    assert_eq!(s.orders().len(), 1);
    // The same nonce again: the venue's refusal, as an action's answer.
    let r = ws.post(3, "action", signed(r#"{"type":"noop"}"#, nonce));
    assert_eq!(
        (&r["type"], &r["payload"]["status"]),
        (&json!("action"), &json!("err")),
        "{r}"
    );
    // A payload the venue cannot read: an error of the post.
    let r = ws.post(4, "action", json!({"action": {"type": "order"}}));
    assert_eq!(r["type"], "error", "{r}");
    let r = ws.post(5, "bogus", json!({}));
    assert_eq!(r["type"], "error", "{r}");

    // The order counted in the address budget; nothing in the REST weight.
    let r = ws.post(
        6,
        "info",
        json!({"type": "userRateLimit", "user": HYPERLIQUID_TEST_ADDRESS}),
    );
    assert_eq!(r["payload"]["data"]["nRequestsUsed"], 1, "{r}");
    let report = s.stop();
    assert!(
        report.limits.iter().all(|l| l.peak == 0),
        "{:?}",
        report.limits
    );
    assert_eq!((report.hl_ws.connects, report.hl_ws.posts), (1, 6));
}

#[test]
fn an_ip_tracks_ten_users_and_a_freed_slot_waits_a_minute_for_the_others() {
    let s = Server::start(Config::hyperliquid()).unwrap();
    let (mut a, mut b) = (connect(&s), connect(&s));
    for n in 1..=6 {
        assert_eq!(a.subscribe(&user(n))["channel"], "subscriptionResponse");
    }
    for n in 7..=10 {
        assert_eq!(b.subscribe(&user(n))["channel"], "subscriptionResponse");
    }
    // Per IP, not per connection: an eleventh is refused on the error channel.
    let v = b.subscribe(&user(11));
    assert_eq!(
        v,
        json!({"channel": "error", "data": "Cannot track more than 10 total users."})
    );
    // A user already tracked shares its slot.
    assert_eq!(b.subscribe(&user(1))["channel"], "subscriptionResponse");
    // Freed by `a` while `b` still tracks it: still taken.
    assert_eq!(a.unsubscribe(&user(1))["channel"], "subscriptionResponse");
    assert_eq!(b.subscribe(&user(11))["channel"], "error");
    // Freed by every connection: held 60 s for the others, not for `a`.
    assert_eq!(a.unsubscribe(&user(2))["channel"], "subscriptionResponse");
    assert_eq!(b.subscribe(&user(11))["channel"], "error");
    assert_eq!(a.subscribe(&user(2))["channel"], "subscriptionResponse");
    assert_eq!(a.unsubscribe(&user(2))["channel"], "subscriptionResponse");
    s.advance_clock(59_000);
    assert_eq!(b.subscribe(&user(11))["channel"], "error");
    s.advance_clock(1_001);
    assert_eq!(b.subscribe(&user(11))["channel"], "subscriptionResponse");
    // A connection gone frees its users (3 to 6), held 60 s too.
    drop(a);
    let r = s.wait_report(WAIT, |r| r.hl_ws.ends > 0);
    assert!(r.hl_ws.ends > 0, "a's end never reached the venue");
    let mut c = connect(&s);
    assert_eq!(c.subscribe(&user(12))["channel"], "error");
    s.advance_clock(59_000);
    assert_eq!(c.subscribe(&user(12))["channel"], "error");
    s.advance_clock(1_001);
    assert_eq!(c.subscribe(&user(12))["channel"], "subscriptionResponse");
    let r = s.stop();
    assert!(r.hl_ws.users_refused >= 5, "{:?}", r.hl_ws);
}

/// ergon's WebSocket adapter reads the emulator's frames as the venue's: a
/// refused user holds its bucket and names the venue's figure, a post's answer
/// is its verdict, a subscription is acknowledged.
#[test]
fn the_adapter_reads_the_emulators_frames() {
    use ergon_core::{Budget, Spec, Verdict};
    use ergon_venues::hyperliquid_ws::{Config as WsConfig, HyperliquidWs, WsAnswer};
    let mut b = Budget::builder();
    let ip = b.add("ip", Spec::gate()).unwrap();
    let mut adapter = HyperliquidWs::new(&mut b, ip, WsConfig::default()).unwrap();
    let mut budget = b.build(0).unwrap();
    let s = Server::start(Config::hyperliquid()).unwrap();
    let mut ws = connect(&s);
    let mut read = |v: &Value| adapter.on_frame(v.to_string().as_bytes(), &mut budget, 0);
    assert_eq!(read(&ws.subscribe(&user(1))), WsAnswer::Subscribed);
    for n in 2..=10 {
        ws.subscribe(&user(n));
    }
    assert!(matches!(
        read(&ws.subscribe(&user(11))),
        WsAnswer::Refused(_)
    ));
    let nonce = s.clock().now_ms() as u64;
    let r = ws.ask(&json!({"method": "post", "id": 7, "request": {"type": "action", "payload": signed(ORDER, nonce)}}));
    assert_eq!(
        read(&r),
        WsAnswer::Post {
            id: 7,
            verdict: Verdict::Done
        },
        "{r}"
    );
    let r = ws.ask(&json!({"method": "post", "id": 8, "request": {"type": "action", "payload": signed(r#"{"type":"noop"}"#, nonce)}}));
    assert_eq!(
        read(&r),
        WsAnswer::Post {
            id: 8,
            verdict: Verdict::ClockSkew
        },
        "{r}"
    );
    assert_eq!(adapter.venue_user_limit, Some(10));
}
