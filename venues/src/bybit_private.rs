//! Bybit's private WebSocket (`/v5/private`), as far as its DCP needs it: the
//! connection whose loss fires Disconnect Cancel All.
//!
//! DCP is armed by a connection, not by a call ([`crate::bybit`]'s `Switch`
//! doc): `POST /v5/order/disconnected-cancel-all` only sets the window, and
//! "for those private connections subscribing dcp topic are all dead, then DCP
//! will be triggered" once the window has passed without a reconnection that
//! resumes the heartbeat. So a caller that wants the switch holds one private
//! connection: [`auth`] first, then [`subscribe`] to the product's topic
//! ([`crate::bybit::dcp_topic`]), then [`ping`] on a schedule (Bybit
//! recommends every 20 s: [`PING_EVERY_MS`]); [`read`] reads each answer.
//!
//! - `auth`: `{"req_id":"1","op":"auth","args":["KEY",EXPIRES,"SIGNATURE"]}`,
//!   the signature the hex HMAC-SHA256 of `"GET/realtime" + EXPIRES`, EXPIRES a
//!   venue time in ms "greater than your current timestamp" (here
//!   [`EXPIRES_AHEAD_MS`] ahead). Answered `{"success":true,"ret_msg":"",
//!   "op":"auth","conn_id":"..."}`.
//! - `subscribe`: `{"req_id":"2","op":"subscribe","args":["dcp.future"]}`,
//!   answered like `auth` with `"op":"subscribe"`.
//! - `ping`: `{"req_id":"3","op":"ping"}`, answered on the private stream by
//!   `{"req_id":"3","op":"pong","args":["1675418560633"],"conn_id":"..."}`.
//! - A connection with no ping-pong and no data is cut after 10 minutes (or the
//!   URL's `max_active_time`).
//! - Connects: "do not establish more than 500 connections in 5 minutes", per
//!   IP ([`crate::bybit::PRIVATE_CONNECTS_PER_5MIN`], the adapter's
//!   `private_connects` bucket).
//!
//! Sources: <https://bybit-exchange.github.io/docs/v5/ws/connect>,
//! <https://bybit-exchange.github.io/docs/v5/websocket/private/dcp>,
//! <https://bybit-exchange.github.io/docs/v5/order/dcp>,
//! <https://bybit-exchange.github.io/docs/v5/rate-limit> (checked 2026-12-02).
//!
//! Nothing here reads a clock (`now` is a parameter); writing reuses the
//! caller's buffer, reading allocates nothing.

use crate::adapt::Error;
use crate::bybit::Bybit;
use crate::json;

/// The private stream's path.
pub const PATH: &str = "/v5/private";

/// How often Bybit recommends a heartbeat ping, ms.
pub const PING_EVERY_MS: i64 = 20_000;

/// How far ahead of the venue's clock the `auth` frame's `expires` is set, ms:
/// room for the connect and the frame's trip.
pub const EXPIRES_AHEAD_MS: i64 = 10_000;

/// Writes the `auth` frame of `bybit`'s key into `out` (cleared first), with
/// `expires` [`EXPIRES_AHEAD_MS`] after `now` on the venue's clock.
/// [`Error::NoKey`] without a key.
pub fn auth(bybit: &Bybit, req_id: u64, now: i64, out: &mut Vec<u8>) -> Result<(), Error> {
    let expires = bybit.clock().utc_ms(now).saturating_add(EXPIRES_AHEAD_MS);
    let digits = itoa(expires);
    let text = digits.text();
    let (key, mac) = bybit.private_sign(text)?;
    out.clear();
    head(out, req_id, "auth");
    out.extend_from_slice(b",\"args\":[\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\",");
    out.extend_from_slice(digits.text());
    out.extend_from_slice(b",\"");
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for b in mac {
        out.push(HEX[usize::from(b >> 4)]);
        out.push(HEX[usize::from(b & 15)]);
    }
    out.extend_from_slice(b"\"]}");
    Ok(())
}

/// Writes the `subscribe` frame to `topic` into `out` (cleared first). A topic
/// is one of [`crate::bybit::dcp_topic`]'s: plain ASCII, written as is.
pub fn subscribe(req_id: u64, topic: &str, out: &mut Vec<u8>) {
    out.clear();
    head(out, req_id, "subscribe");
    out.extend_from_slice(b",\"args\":[\"");
    out.extend_from_slice(topic.as_bytes());
    out.extend_from_slice(b"\"]}");
}

/// Writes the heartbeat `ping` frame into `out` (cleared first).
pub fn ping(req_id: u64, out: &mut Vec<u8>) {
    out.clear();
    head(out, req_id, "ping");
    out.push(b'}');
}

fn head(out: &mut Vec<u8>, req_id: u64, op: &str) {
    out.extend_from_slice(b"{\"req_id\":\"");
    out.extend_from_slice(itoa(i64::try_from(req_id).unwrap_or(i64::MAX)).text());
    out.extend_from_slice(b"\",\"op\":\"");
    out.extend_from_slice(op.as_bytes());
    out.push(b'"');
}

/// A number's decimal digits, right-aligned in a fixed buffer.
struct Digits([u8; 20], usize);

impl Digits {
    fn text(&self) -> &[u8] {
        &self.0[self.1..]
    }
}

fn itoa(n: i64) -> Digits {
    let mut d = Digits([0; 20], 20);
    let mut v = n.unsigned_abs();
    loop {
        d.1 -= 1;
        d.0[d.1] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 || d.1 == 1 {
            break;
        }
    }
    if n < 0 {
        d.1 -= 1;
        d.0[d.1] = b'-';
    }
    d
}

/// What an answer on the private stream is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// The answer to `auth`.
    Auth,
    /// The answer to `subscribe`.
    Subscribe,
    /// The answer to a heartbeat `ping`.
    Pong,
    /// Anything else (a topic's push, an answer to another op).
    Other,
}

/// An answer on the private stream, as [`read`] reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// What it answers.
    pub op: Op,
    /// Whether the venue took it: `success` where the answer has one (a pong has
    /// none and is taken).
    pub ok: bool,
    /// The `req_id` echoed, where it is a number this module wrote.
    pub req_id: Option<u64>,
}

/// Reads one text frame of the private stream; None if it is not a JSON object.
pub fn read(frame: &[u8]) -> Option<Answer> {
    let v = json::parse(frame).ok()?;
    v.members().ok()?;
    let op = match v.get("op").ok().flatten() {
        Some(o) if o.str_eq("auth") == Ok(true) => Op::Auth,
        Some(o) if o.str_eq("subscribe") == Ok(true) => Op::Subscribe,
        Some(o) if o.str_eq("pong") == Ok(true) => Op::Pong,
        _ => Op::Other,
    };
    let ok = match v.get("success").ok().flatten() {
        Some(s) => s.as_bool().unwrap_or(false),
        None => op == Op::Pong,
    };
    let req_id = v
        .get("req_id")
        .ok()
        .flatten()
        .and_then(|r| r.parse_u64().ok());
    Some(Answer { op, ok, req_id })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapt::Clock;
    use crate::bybit::{Auth, Config};

    fn bybit() -> Bybit {
        let mut b = ergon_core::Budget::builder();
        // The venue's clock at 1_662_350_400_000 ms when ours reads 0.
        let clock = Clock::anchor(0, 1_662_350_400_000 - EXPIRES_AHEAD_MS);
        let auth = Auth::new("OZUDHROKUZZNVZWHKN", b"secret", 5_000).expect("auth");
        Bybit::new(&mut b, clock, Config::default())
            .expect("bybit")
            .with_auth(auth)
    }

    #[test]
    fn the_auth_frame_signs_get_realtime_and_its_expires() {
        let mut out = Vec::new();
        auth(&bybit(), 7, 0, &mut out).expect("auth");
        let text = String::from_utf8(out).expect("utf8");
        // expires = the venue's now + 10 s; the signature is
        // hex(HMAC-SHA256("secret", "GET/realtime1662350400000")), computed by
        // `printf GET/realtime1662350400000 | openssl dgst -sha256 -hmac secret`.
        assert_eq!(
            text,
            "{\"req_id\":\"7\",\"op\":\"auth\",\"args\":[\"OZUDHROKUZZNVZWHKN\",1662350400000,\"SIG\"]}"
                .replace("SIG", GET_REALTIME_SIG)
        );
        let v = json::parse(text.as_bytes()).expect("json");
        assert!(v.get("args").expect("args").is_some());
    }

    const GET_REALTIME_SIG: &str =
        "d7ca36fea9ef1287007fd4b15af961e91d419a3d3f3ccbdf23585170ac116cd4";

    #[test]
    fn subscribe_and_ping_frames() {
        let mut out = Vec::new();
        subscribe(12, "dcp.future", &mut out);
        assert_eq!(
            out,
            br#"{"req_id":"12","op":"subscribe","args":["dcp.future"]}"#
        );
        ping(13, &mut out);
        assert_eq!(out, br#"{"req_id":"13","op":"ping"}"#);
    }

    #[test]
    fn no_key_no_frame() {
        let mut b = ergon_core::Budget::builder();
        let v = Bybit::new(&mut b, Clock::anchor(0, 0), Config::default()).expect("bybit");
        let mut out = b"left".to_vec();
        assert_eq!(auth(&v, 1, 0, &mut out), Err(Error::NoKey));
        assert_eq!(out, b"left");
    }

    /// The answers as the connect page prints them.
    #[test]
    fn answers_from_the_docs() {
        let auth_ok =
            br#"{"success":true,"ret_msg":"","op":"auth","conn_id":"cejreaspqfh3sjdnldmg-p"}"#;
        assert_eq!(
            read(auth_ok),
            Some(Answer {
                op: Op::Auth,
                ok: true,
                req_id: None
            })
        );
        let auth_bad =
            br#"{"success":false,"ret_msg":"Params Error","op":"auth","conn_id":"x","req_id":"1"}"#;
        assert_eq!(
            read(auth_bad),
            Some(Answer {
                op: Op::Auth,
                ok: false,
                req_id: Some(1)
            })
        );
        let sub = br#"{"success":true,"ret_msg":"","op":"subscribe","conn_id":"cejreassvfrsfvb9v1a0-2m","req_id":"2"}"#;
        assert_eq!(read(sub).map(|a| (a.op, a.ok)), Some((Op::Subscribe, true)));
        let pong =
            br#"{"req_id":"3","op":"pong","args":["1675418560633"],"conn_id":"cfcb4ocsvfriu23r3er0-1b"}"#;
        assert_eq!(
            read(pong),
            Some(Answer {
                op: Op::Pong,
                ok: true,
                req_id: Some(3)
            })
        );
        let push = br#"{"topic":"order","id":"5923240c6880ab-c59f-420b-9adb-3639adc9dd90","creationTime":1672364262474,"data":[]}"#;
        assert_eq!(read(push).map(|a| a.op), Some(Op::Other));
        assert_eq!(read(b"not json"), None);
        assert_eq!(read(b"[1,2]"), None);
        // A success that is not a boolean is not a success.
        let odd = br#"{"success":"yes","op":"subscribe"}"#;
        assert_eq!(read(odd).map(|a| a.ok), Some(false));
    }
}
