//! Bybit's private WebSocket (`/v5/private`) as the venue decides it, and DCP
//! (Disconnect Cancel All), the countdown that connection's end arms.
//!
//! - Upgrade: refused like any request from a banned IP (403 "access too
//!   frequent"); `max_active_time` is `30s`..`600s` or `1m`..`10m` (anything
//!   else is refused with 400, the emulator's choice: Bybit documents only the
//!   range), 10 minutes without it. A connection on which the venue wrote
//!   nothing for that long is cut exactly then (Bybit scans every 30 s).
//! - `{"req_id","op":"auth","args":[key, expires, signature]}`: signature = hex
//!   HMAC-SHA256(secret, `"GET/realtime" + expires`), `expires` a number of ms
//!   after the venue's now. Answers `{"success","ret_msg","op","conn_id"}` plus
//!   the `req_id` when the request had one. Refusals: a malformed or expired
//!   request "Params Error" (the text Bybit answers), an unknown key "API key is
//!   invalid." (the REST 10003 text), a bad signature "error:verify signature
//!   fail" (an older Bybit stream's text), a second auth "Repeat auth".
//! - `subscribe` needs auth ("Request not authorized"). Topics `dcp.future`,
//!   `dcp.spot`, `dcp.option`, and `order`, `execution`, `position`, `wallet`
//!   (taken; nothing is pushed on them here). An unknown topic refuses the
//!   whole frame ("error:handler not found,topic:T", Bybit's public-stream
//!   text). Subscribing a topic twice on one connection is taken once.
//!   `unsubscribe` is not emulated (an unknown op).
//! - `{"req_id","op":"ping"}` answers `{"req_id","op":"pong","args":[now],
//!   "conn_id"}`; a WebSocket ping answers a pong. Anything else (not JSON, an
//!   unknown op) is answered `success:false` and the connection stays open.
//! - DCP: per account and product the venue counts the live connections
//!   subscribed to the product's `dcp` topic. When one ends (closed by the
//!   client, reset or EOF, cut as idle; not the emulator stopping) and the count
//!   reaches 0 on an account Bybit enabled DCP for
//!   ([`Config::bybit_dcp`](crate::Config)), a countdown of the product's window
//!   (what `disconnected-cancel-all` last set, 10 s if never) starts at the end
//!   time; a new subscription of that account and product removes it; when it
//!   runs out it cancels every open order of the account of that product. The
//!   emulator trades only the linear symbol, so only `dcp.future`
//!   (DERIVATIVES) arms a countdown — an account-wide switch of
//!   `crate::engine::switch`, seen in [`crate::Server::switches`] and counted
//!   in `Report::switch_fires`; `dcp.spot` and `dcp.option` are counted and
//!   arm nothing, as they would cancel nothing here.
//!
//! Sources: <https://bybit-exchange.github.io/docs/v5/ws/connect>,
//! <https://bybit-exchange.github.io/docs/v5/websocket/private/dcp>,
//! <https://bybit-exchange.github.io/docs/v5/order/dcp>.
//!
//! Drive order (the server's connection thread, and tests alike): after the
//! upgrade, hand every text frame to [`Venue::bybit_private_text`] and write
//! its answer; every WebSocket ping to [`Venue::bybit_private_ping`]; cut the
//! connection when the venue clock reaches [`PrivateSession::cut_at`]; call
//! [`Venue::bybit_private_end`] exactly once when the connection is over. No
//! socket, no clock: `now` is the venue's UTC ms.

use std::net::IpAddr;

use serde_json::{json, Map, Value};

use super::auth::constant_time_eq_ignore_case;
use super::too_frequent;
use crate::engine::state::Venue;
use crate::http::{Request, Response};
use crate::params::sign;
use crate::ws::frame;

/// The private stream's URL path.
pub(crate) const PRIVATE_PATH: &str = "/v5/private";
/// "the connection will be cut off after 10 minutes".
const DEFAULT_MAX_ACTIVE_MS: i64 = 600_000;
/// The range of `max_active_time`.
const MAX_ACTIVE_RANGE_MS: std::ops::RangeInclusive<i64> = 30_000..=600_000;
/// The DCP window of a product never set: "The default time window is 10
/// seconds."
const DEFAULT_DCP_WINDOW_MS: i64 = 10_000;
/// Private topics taken that push nothing here.
const QUIET_TOPICS: [&str; 4] = ["order", "execution", "position", "wallet"];

/// A DCP product: what `disconnected-cancel-all` sets a window for and a `dcp`
/// topic holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DcpProduct {
    /// `OPTIONS`, `dcp.option` (the REST default).
    Options,
    /// `DERIVATIVES`, `dcp.future`: the linear contract the emulator trades.
    Derivatives,
    /// `SPOT`, `dcp.spot`.
    Spot,
}

impl DcpProduct {
    const ALL: [DcpProduct; 3] = [
        DcpProduct::Options,
        DcpProduct::Derivatives,
        DcpProduct::Spot,
    ];

    /// The product of `disconnected-cancel-all`'s `product`.
    pub(crate) fn from_rest(s: &str) -> Option<Self> {
        match s {
            "OPTIONS" => Some(DcpProduct::Options),
            "DERIVATIVES" => Some(DcpProduct::Derivatives),
            "SPOT" => Some(DcpProduct::Spot),
            _ => None,
        }
    }

    fn from_topic(t: &str) -> Option<Self> {
        match t {
            "dcp.option" => Some(DcpProduct::Options),
            "dcp.future" => Some(DcpProduct::Derivatives),
            "dcp.spot" => Some(DcpProduct::Spot),
            _ => None,
        }
    }

    /// Its index in [`crate::engine::state::Venue::held`]'s arrays.
    pub(super) fn index(self) -> usize {
        self as usize
    }
}

/// How a private connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// Closed by the client, reset, EOF or a protocol error: a disconnection.
    Closed,
    /// Cut by the venue at [`PrivateSession::cut_at`]: a disconnection too.
    Idle,
    /// The emulator is stopping: arms nothing.
    Stopped,
}

/// One private connection's state: its id, account once authed, the DCP
/// products it holds and when it idles out.
#[derive(Debug)]
pub(crate) struct PrivateSession {
    conn_id: String,
    account: Option<usize>,
    dcp: [bool; 3],
    max_active_ms: i64,
    last_active: i64,
}

impl PrivateSession {
    /// When the venue cuts the connection unless it writes something first,
    /// venue UTC ms.
    pub(crate) fn cut_at(&self) -> i64 {
        self.last_active.saturating_add(self.max_active_ms)
    }

    /// The venue wrote a frame at `now`: the idle time starts again.
    fn touch(&mut self, now: i64) {
        self.last_active = self.last_active.max(now);
    }
}

/// `max_active_time` of the upgrade's query, ms (the default without one).
fn max_active_ms(query: &str) -> Result<i64, String> {
    let Some(v) = query
        .rsplit('&')
        .find_map(|p| p.strip_prefix("max_active_time="))
    else {
        return Ok(DEFAULT_MAX_ACTIVE_MS);
    };
    let bad = || format!("max_active_time {v:?} invalid: 30s to 600s, or 1m to 10m");
    let (n, unit) = match (v.strip_suffix('s'), v.strip_suffix('m')) {
        (Some(n), _) => (n, 1_000),
        (_, Some(n)) => (n, 60_000),
        _ => return Err(bad()),
    };
    if n.is_empty() || n.len() > 4 || !n.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let ms = n.parse::<i64>().map_err(|_| bad())? * unit;
    if MAX_ACTIVE_RANGE_MS.contains(&ms) {
        Ok(ms)
    } else {
        Err(bad())
    }
}

/// An answer to `op`: `{"success","ret_msg","op","conn_id"}`, then `req_id`
/// when the request had one.
fn answer(s: &PrivateSession, op: &str, ret_msg: &str, req_id: Option<&Value>) -> String {
    let mut m = Map::new();
    m.insert("success".into(), json!(ret_msg.is_empty()));
    m.insert("ret_msg".into(), json!(ret_msg));
    m.insert("op".into(), json!(op));
    m.insert("conn_id".into(), json!(s.conn_id));
    if let Some(id) = req_id {
        m.insert("req_id".into(), id.clone());
    }
    Value::Object(m).to_string()
}

impl Venue {
    /// Sets `product`'s DCP window for `account` (taken by
    /// `disconnected-cancel-all`); it applies to countdowns armed from now on.
    pub(crate) fn set_dcp_window(&mut self, account: usize, product: DcpProduct, window_ms: i64) {
        if let Some(h) = self.held.get_mut(account) {
            h[product.index()].window_ms = Some(window_ms);
        }
    }

    /// An upgrade to the private stream: the `Sec-WebSocket-Accept` and the new
    /// connection's session, or the refusal to write.
    pub(crate) fn admit_bybit_private(
        &mut self,
        req: &Request,
        ip: IpAddr,
        now: i64,
    ) -> Result<(String, PrivateSession), Response> {
        self.now_hint = now;
        if self.ips.get(&ip).is_some_and(|s| s.banned_until > now) {
            self.report.banned_requests += 1;
            return Err(too_frequent());
        }
        let max_active_ms = max_active_ms(&req.query).map_err(|m| {
            let body = json!({ "retCode": 10001, "retMsg": format!("params error: {m}") });
            Response::json(400, body.to_string())
        })?;
        let accept = frame::check_handshake(req)?;
        self.next_conn_id += 1;
        self.report.bybit_private.connects += 1;
        let session = PrivateSession {
            conn_id: format!("sim{:08x}-priv", self.next_conn_id),
            account: None,
            dcp: [false; 3],
            max_active_ms,
            last_active: now,
        };
        Ok((accept, session))
    }

    /// Answers one text frame of the connection (never closes it).
    pub(crate) fn bybit_private_text(
        &mut self,
        s: &mut PrivateSession,
        text: &[u8],
        now: i64,
    ) -> String {
        self.now_hint = now;
        s.touch(now);
        let Ok(Value::Object(req)) = serde_json::from_slice::<Value>(text) else {
            return answer(s, "", "error:request is not a JSON object", None);
        };
        let req_id = req.get("req_id");
        let args = req.get("args");
        match req.get("op").and_then(Value::as_str) {
            Some("auth") => {
                let refusal = self.private_auth(s, args, now);
                if refusal.is_empty() {
                    self.report.bybit_private.auths += 1;
                } else {
                    self.report.bybit_private.auth_refused += 1;
                }
                answer(s, "auth", refusal, req_id)
            }
            Some("subscribe") => {
                let refusal = self.private_subscribe(s, args, now);
                answer(s, "subscribe", &refusal, req_id)
            }
            Some("ping") => {
                self.report.bybit_private.pings += 1;
                let mut m = Map::new();
                if let Some(id) = req_id {
                    m.insert("req_id".into(), id.clone());
                }
                m.insert("op".into(), json!("pong"));
                m.insert("args".into(), json!([now.to_string()]));
                m.insert("conn_id".into(), json!(s.conn_id));
                Value::Object(m).to_string()
            }
            Some(op) => answer(s, op, "error:invalid op", req_id),
            None => answer(s, "", "error:invalid op", req_id),
        }
    }

    /// A WebSocket ping came (the caller writes the pong).
    pub(crate) fn bybit_private_ping(&mut self, s: &mut PrivateSession, now: i64) {
        self.report.bybit_private.pings += 1;
        s.touch(now);
    }

    /// The connection ended at `at`: its DCP subscriptions are dropped, and a
    /// product's last one on an account with DCP arms that product's
    /// countdown (DERIVATIVES only, see the module doc).
    pub(crate) fn bybit_private_end(&mut self, s: &mut PrivateSession, at: i64, end: End) {
        self.report.bybit_private.disconnects += 1;
        if end == End::Idle {
            self.report.bybit_private.idle_cuts += 1;
        }
        let Some(account) = s.account else { return };
        for p in DcpProduct::ALL {
            if !std::mem::take(&mut s.dcp[p.index()]) {
                continue;
            }
            let Some(scope) = self.held.get_mut(account).map(|h| &mut h[p.index()]) else {
                continue;
            };
            scope.live = scope.live.saturating_sub(1);
            let window_ms = scope.window_ms.unwrap_or(DEFAULT_DCP_WINDOW_MS);
            if scope.live == 0
                && end != End::Stopped
                && self.cfg.bybit_dcp
                && p == DcpProduct::Derivatives
            {
                self.arm_switch(account, None, window_ms, at);
                self.report.bybit_private.dcp_armed += 1;
            }
        }
    }

    /// `auth`: the refusal's `ret_msg`, empty when taken.
    fn private_auth(
        &mut self,
        s: &mut PrivateSession,
        args: Option<&Value>,
        now: i64,
    ) -> &'static str {
        if s.account.is_some() {
            return "Repeat auth";
        }
        let parts = args.and_then(Value::as_array).map(Vec::as_slice);
        let Some([Value::String(key), expires, Value::String(given)]) = parts else {
            return "Params Error";
        };
        let Some(expires) = expires.as_i64() else {
            return "Params Error";
        };
        let Some(account) = self.cfg.accounts.iter().position(|a| a.api_key == *key) else {
            return "API key is invalid.";
        };
        let expected = sign(
            &format!("GET/realtime{expires}"),
            &self.cfg.accounts[account].secret,
        );
        if !constant_time_eq_ignore_case(expected.as_bytes(), given.as_bytes()) {
            return "error:verify signature fail";
        }
        if expires <= now {
            return "Params Error";
        }
        s.account = Some(account);
        ""
    }

    /// `subscribe`: the refusal's `ret_msg`, empty when every topic is taken.
    fn private_subscribe(
        &mut self,
        s: &mut PrivateSession,
        args: Option<&Value>,
        now: i64,
    ) -> String {
        let Some(account) = s.account else {
            return "Request not authorized".into();
        };
        let Some(list) = args.and_then(Value::as_array).filter(|l| !l.is_empty()) else {
            return "Params Error".into();
        };
        let mut dcp = Vec::new();
        for t in list {
            let Some(t) = t.as_str() else {
                return "Params Error".into();
            };
            match DcpProduct::from_topic(t) {
                Some(p) => dcp.push(p),
                None if QUIET_TOPICS.contains(&t) => {}
                None => return format!("error:handler not found,topic:{t}"),
            }
        }
        for p in dcp {
            if std::mem::replace(&mut s.dcp[p.index()], true) {
                continue;
            }
            if let Some(h) = self.held.get_mut(account) {
                h[p.index()].live += 1;
            }
            self.report.bybit_private.dcp_subscribed += 1;
            if p == DcpProduct::Derivatives {
                // A connection holds the account's DCP again: its countdown stops.
                self.arm_switch(account, None, 0, now);
            }
        }
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_active_time_takes_seconds_or_minutes_in_range() {
        assert_eq!(max_active_ms(""), Ok(600_000));
        assert_eq!(max_active_ms("max_active_time=30s"), Ok(30_000));
        assert_eq!(max_active_ms("a=1&max_active_time=1m"), Ok(60_000));
        assert_eq!(max_active_ms("max_active_time=600s"), Ok(600_000));
        assert_eq!(max_active_ms("max_active_time=10m"), Ok(600_000));
        for bad in [
            "29s",
            "11m",
            "601s",
            "0m",
            "1h",
            "m",
            "-1m",
            "1.5m",
            "99999999m",
        ] {
            assert!(
                max_active_ms(&format!("max_active_time={bad}")).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn topics_and_rest_names_map_to_one_product() {
        for p in DcpProduct::ALL {
            let (rest, topic) = match p {
                DcpProduct::Options => ("OPTIONS", "dcp.option"),
                DcpProduct::Derivatives => ("DERIVATIVES", "dcp.future"),
                DcpProduct::Spot => ("SPOT", "dcp.spot"),
            };
            assert_eq!(DcpProduct::from_rest(rest), Some(p));
            assert_eq!(DcpProduct::from_topic(topic), Some(p));
        }
        assert_eq!(DcpProduct::from_topic("dcp.linear"), None);
    }
}
