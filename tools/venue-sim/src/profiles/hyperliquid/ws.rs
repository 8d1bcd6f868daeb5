//! Hyperliquid's WebSocket (`/ws`), as the emulator plays it:
//!
//! - `{"method":"post","id":N,"request":{"type":"info"|"action","payload":P}}`:
//!   `P` is what `POST /info` or `POST /exchange` takes, admitted and run as
//!   they run it (signature, nonce, address budget, book), and answered on the
//!   `post` channel: `{"channel":"post","data":{"id":N,"response":{"type":
//!   "info","payload":{"type":KIND,"data":ANSWER}}}}`, `{"type":"action",
//!   "payload":ANSWER}` (the `/exchange` answer, `status` ok or err), or
//!   `{"type":"error","payload":TEXT}` for a request the venue cannot take.
//!   A post is not counted in the IP's REST weight (the WebSocket limits are
//!   messages and posts in flight); its action counts in the address budget
//!   like any action.
//! - `subscribe` / `unsubscribe` `{"method":..,"subscription":{"type":..,..}}`,
//!   answered `{"channel":"subscriptionResponse","data":{"method":..,
//!   "subscription":..}}`. A subscription naming a `user` tracks that user:
//!   an IP may track at most 10 users across its connections; the 11th is
//!   refused on the `error` channel (`Cannot track more than 10 total users.`),
//!   a user already tracked shares its slot, and a user no connection tracks
//!   any more (unsubscribed, or its connection gone) keeps its slot 60 s for
//!   every other connection (the one that freed it takes it back at once).
//! - `{"method":"ping"}` is answered `{"channel":"pong"}`.
//!
//! Not emulated: the 2,000 messages a minute and 100 posts in flight per IP
//! (each post is answered before the next frame is read), subscription data.
//!
//! Sources (checked 2026-12-06):
//! <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/websocket/post-requests>,
//! <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/websocket/subscriptions>,
//! <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/rate-limits-and-user-limits>
//! ("10 unique users across user-specific websocket subscriptions"); the 60 s
//! hold and the refusal's text as measured against the venue (see
//! `ergon_venues::hyperliquid_ws`). It never touches a socket or reads a clock.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_json::{json, Map, Value};

use super::verify::parse_address;
use crate::engine::address::UserSlot;
use crate::engine::state::Venue;
use crate::http::Response;

/// The path of the WebSocket.
pub(crate) const WS_PATH: &str = "/ws";

/// One connection's subscriptions: each one's text, and the user it tracks.
#[derive(Debug)]
pub(crate) struct HlWsSession {
    pub(crate) conn: u64,
    pub(crate) ip: IpAddr,
    subs: BTreeMap<String, Option<[u8; 20]>>,
}

fn channel(name: &str, data: Value) -> String {
    json!({ "channel": name, "data": data }).to_string()
}

fn post_answer(id: &Value, response: Value) -> String {
    channel("post", json!({ "id": id, "response": response }))
}

fn post_error(id: &Value, text: &str) -> String {
    post_answer(id, json!({ "type": "error", "payload": text }))
}

/// The body of an HTTP answer as JSON (a plain-text one as a string).
fn body_json(r: &Response) -> Value {
    serde_json::from_str(&r.body).unwrap_or_else(|_| Value::String(r.body.clone()))
}

impl Venue {
    /// An upgrade to `/ws`: the connection's session.
    pub(crate) fn hl_ws_session(&mut self, ip: IpAddr) -> HlWsSession {
        self.next_conn_id += 1;
        self.report.hl_ws.connects += 1;
        HlWsSession {
            conn: self.next_conn_id,
            ip,
            subs: BTreeMap::new(),
        }
    }

    /// One text frame of the connection: the frames to write back.
    pub(crate) fn hl_ws_text(&mut self, s: &mut HlWsSession, text: &[u8], now: i64) -> String {
        self.now_hint = now;
        self.report.ws.messages += 1;
        let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(text) else {
            return channel("error", json!("Invalid JSON"));
        };
        match m.get("method").and_then(Value::as_str) {
            Some("ping") => channel("pong", Value::Null),
            Some("post") => self.hl_ws_post(&m, now),
            Some(method @ ("subscribe" | "unsubscribe")) => {
                let Some(sub) = m.get("subscription").filter(|v| v.is_object()) else {
                    return channel("error", json!(format!("Invalid {method}")));
                };
                if method == "subscribe" {
                    self.hl_subscribe(s, sub, now)
                } else {
                    self.hl_unsubscribe(s, sub, now)
                }
            }
            _ => channel("error", json!("Unknown method")),
        }
    }

    fn hl_ws_post(&mut self, m: &Map<String, Value>, now: i64) -> String {
        let id = m.get("id").cloned().unwrap_or(Value::Null);
        if !id.is_u64() {
            return channel("error", json!("Invalid post id"));
        }
        self.report.hl_ws.posts += 1;
        let request = m.get("request");
        let kind = request.and_then(|r| r.get("type")).and_then(Value::as_str);
        let Some(Value::Object(payload)) = request.and_then(|r| r.get("payload")) else {
            return post_error(&id, "Invalid post request");
        };
        match kind {
            Some("info") => match self.admit_info(payload, None, now) {
                Ok(op) => {
                    let r = self.execute_info(op, now);
                    let kind = payload.get("type").cloned().unwrap_or(Value::Null);
                    post_answer(
                        &id,
                        json!({ "type": "info", "payload": { "type": kind, "data": body_json(&r) } }),
                    )
                }
                Err(r) => post_error(&id, &r.body),
            },
            Some("action") => match self.admit_exchange(payload, None, now) {
                Ok(op) => {
                    let r = self.execute_exchange(op, now);
                    post_answer(&id, json!({ "type": "action", "payload": body_json(&r) }))
                }
                // The venue's refusals of an action (signature, nonce, budget)
                // are its `status: err` answers; a body it cannot read is an
                // error of the post.
                Err(r) if r.status == 200 => {
                    post_answer(&id, json!({ "type": "action", "payload": body_json(&r) }))
                }
                Err(r) => post_error(&id, &r.body),
            },
            _ => post_error(&id, "Invalid post request type"),
        }
    }

    fn hl_subscribe(&mut self, s: &mut HlWsSession, sub: &Value, now: i64) -> String {
        let key = sub.to_string();
        if s.subs.contains_key(&key) {
            return channel("error", json!(format!("Already subscribed: {key}")));
        }
        let user = match sub.get("user") {
            None => None,
            Some(u) => match u
                .as_str()
                .and_then(|u| parse_address(&u.to_ascii_lowercase()))
            {
                Some(a) => Some(a),
                None => return channel("error", json!(format!("Invalid subscription {key}"))),
            },
        };
        if let Some(u) = user {
            if !self.hl_track(s, u, now) {
                self.report.hl_ws.users_refused += 1;
                let n = self.cfg.hyperliquid.ws_users_per_ip;
                return channel(
                    "error",
                    json!(format!("Cannot track more than {n} total users.")),
                );
            }
        }
        s.subs.insert(key, user);
        channel(
            "subscriptionResponse",
            json!({ "method": "subscribe", "subscription": sub }),
        )
    }

    fn hl_unsubscribe(&mut self, s: &mut HlWsSession, sub: &Value, now: i64) -> String {
        let key = sub.to_string();
        let Some(user) = s.subs.remove(&key) else {
            return channel("error", json!(format!("Already unsubscribed: {key}")));
        };
        if let Some(u) = user {
            if !s.subs.values().any(|v| *v == Some(u)) {
                self.hl_untrack(s.ip, s.conn, u, now);
            }
        }
        channel(
            "subscriptionResponse",
            json!({ "method": "unsubscribe", "subscription": sub }),
        )
    }

    /// Takes (or shares) `user`'s slot of the IP for the connection; false:
    /// refused.
    fn hl_track(&mut self, s: &HlWsSession, user: [u8; 20], now: i64) -> bool {
        let (limit, hold) = (
            self.cfg.hyperliquid.ws_users_per_ip,
            self.cfg.hyperliquid.ws_user_release_ms,
        );
        let slots = self.addresses.ws_users.entry(s.ip).or_default();
        slots.retain(|x| !x.conns.is_empty() || x.freed.is_some_and(|(at, _)| now < at + hold));
        if let Some(x) = slots.iter_mut().find(|x| x.user == user) {
            match x.freed {
                None => {
                    if !x.conns.contains(&s.conn) {
                        x.conns.push(s.conn);
                    }
                    return true;
                }
                // Held for every other connection; the one that freed it takes
                // it back.
                Some((_, by)) if by == s.conn => {
                    x.freed = None;
                    x.conns.push(s.conn);
                    return true;
                }
                Some(_) => return false,
            }
        }
        if slots.len() >= limit {
            return false;
        }
        slots.push(UserSlot {
            user,
            conns: vec![s.conn],
            freed: None,
        });
        true
    }

    fn hl_untrack(&mut self, ip: IpAddr, conn: u64, user: [u8; 20], now: i64) {
        let Some(slots) = self.addresses.ws_users.get_mut(&ip) else {
            return;
        };
        if let Some(x) = slots.iter_mut().find(|x| x.user == user) {
            x.conns.retain(|&c| c != conn);
            if x.conns.is_empty() && x.freed.is_none() {
                x.freed = Some((now, conn));
            }
        }
    }

    /// The connection is over: every user it tracked is freed (held 60 s).
    pub(crate) fn hl_ws_end(&mut self, s: &mut HlWsSession, now: i64) {
        let users: Vec<[u8; 20]> = s.subs.values().flatten().copied().collect();
        for u in users {
            self.hl_untrack(s.ip, s.conn, u, now);
        }
        s.subs.clear();
        self.report.hl_ws.ends += 1;
    }
}
