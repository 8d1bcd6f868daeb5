//! Deribit's JSON-RPC over WebSocket (`/ws/api/v2`) as the venue decides it:
//! connection authentication, heartbeats and cancel-on-disconnect (COD).
//!
//! - Upgrade on `/ws/api/v2` (the `deribit` profile only). A banned IP is
//!   refused with HTTP 429 and `too_many_requests` 10028 (the emulator's
//!   choice: Deribit documents no IP ban); the per-IP connection limit is the
//!   accept loop's, as for every connection.
//! - Frames: `{"jsonrpc":"2.0","id":N,"method":M,"params":{..}}`, answered
//!   `{"jsonrpc":"2.0","id":N,"result":..,"usIn","usOut","usDiff","testnet"}`
//!   or with `"error":{"code","message"[,"data"]}` instead of `result` — the
//!   HTTP profile's envelope, byte for byte. Notifications carry `method` and
//!   no `id`. Not JSON: -32700 "Parse error"; no method: -32600.
//! - Every method the HTTP profile serves is served here with the same
//!   checks, credits, faults and answers; params are read from the JSON object
//!   (numbers and strings alike, as the real API takes them).
//! - `public/auth`: `grant_type` `client_credentials` (`client_id`,
//!   `client_secret`) or `client_signature` (`client_id`, `timestamp` ms within
//!   60 s of the venue's clock, `signature` = hex HMAC-SHA256(secret,
//!   `timestamp + "\n" + nonce + "\n" + data`), `nonce` and `data` empty when
//!   absent). The result is HTTP's (`access_token`, `expires_in`,
//!   `refresh_token`, `scope`, `token_type` `bearer`) and the connection is
//!   then authenticated: later private calls on it need no token. Refusals are
//!   13004 `invalid_credentials` (as over HTTP) with `data.reason`
//!   `invalid_credentials`, `invalid_signature` or `invalid_timestamp`; a bad
//!   `grant_type` or missing field -32602 "Invalid params". A private call on a
//!   connection not authenticated (and without a live `access_token` param):
//!   13009 `unauthorized`, `data.reason` `invalid_token`, as over HTTP.
//! - `public/test`: `{"version":"1.2.26"}`; it answers a pending heartbeat.
//! - `public/set_heartbeat` `{"interval":N}` (whole seconds, N ≥ 10, else
//!   -32602 with `data.param` `interval`) → `"ok"`. Every N s from then the
//!   venue sends `{"jsonrpc":"2.0","method":"heartbeat","params":{"type":
//!   "test_request"}}`; if a `public/test` has not come when the next one is
//!   due, the venue closes the connection (close frame 1000) at that instant.
//!   `public/disable_heartbeat` → `"ok"` and stops them.
//! - Inactivity: a connection the client sent nothing on (no frame of any
//!   kind) for 10 minutes is closed at that instant (close frame 1000).
//! - COD: `private/enable_cancel_on_disconnect`,
//!   `private/disable_cancel_on_disconnect` (`scope` `connection`, the
//!   default, or `account`; anything else -32602) → `"ok"`;
//!   `private/get_cancel_on_disconnect` → `{"scope","enabled"}`. The account
//!   scope makes every connection the account authenticates from then on
//!   start enabled, and (the emulator's reading) applies to the calling
//!   connection too; other connections already open keep their own setting.
//!   Every order records the connection that placed it (`None` over HTTP).
//!   When a connection with COD on ends — closed by the client, EOF or reset,
//!   a close fault, a heartbeat or inactivity close, a `too_many_requests`
//!   close — every order it placed that is still open is cancelled at once,
//!   stamped with the end time (counted in `Report::deribit_ws.cod_cancels`).
//!   `private/logout` and the emulator stopping cancel nothing. Orders placed
//!   before COD was enabled on the connection are cancelled too (the doc's
//!   "all orders created via this connection"). Over HTTP these methods stay
//!   unknown: -32601 "Method not found", as HTTP answered before.
//! - `private/logout` (`invalidate_token`, default true, drops the token this
//!   connection's `public/auth` issued): no answer (the emulator's pick of the
//!   two readings), a close frame 1000, and COD is not triggered.
//! - Credits: every request pays as over HTTP (private methods from the
//!   account's pools, public ones from the IP's). An empty pool answers
//!   10028 `too_many_requests` and the venue closes the session (close frame
//!   1008), as the rate-limits page says; COD applies to that close.
//!
//! Sources: <https://docs.deribit.com/articles/json-rpc-overview>,
//! <https://docs.deribit.com/api-reference/authentication/public-auth>,
//! <https://docs.deribit.com/api-reference/session-management/private-enable_cancel_on_disconnect>,
//! <https://docs.deribit.com/api-reference/session-management/public-set_heartbeat>,
//! <https://docs.deribit.com/articles/rate-limits>.
//!
//! Drive order (the server's connection thread, and tests alike): after the
//! upgrade, hand every frame received to [`DeribitSession::heard`] and every
//! text frame to [`Venue::deribit_ws_text`], doing what its [`WsStep`] says;
//! whenever the venue clock reaches [`DeribitSession::poll_timeout`], call
//! [`Venue::deribit_ws_poll`] until it says [`WsPoll::Wait`]; call
//! [`Venue::deribit_ws_end`] exactly once when the connection is over. No
//! socket, no clock: `now` is the venue's UTC ms.

use std::net::IpAddr;

use serde_json::{json, Value};

use super::{fail, fail_with, invalid, matching, ok, read_object, DeribitOp};
use crate::config::Fault;
use crate::engine::book::Status;
use crate::engine::state::Venue;
use crate::http::{Request, Response};
use crate::limits::Key;
use crate::params::{sign, Params};
use crate::ws::frame;

/// The WebSocket's URL path.
pub(crate) const WS_PATH: &str = "/ws/api/v2";
/// "the connection is closed due to 10 minutes of inactivity".
const INACTIVITY_MS: i64 = 600_000;
/// The shortest heartbeat interval, seconds.
const MIN_HEARTBEAT_S: i64 = 10;
/// What `public/test` answers as the API version.
const VERSION: &str = "1.2.26";
/// How far `public/auth`'s `timestamp` may be from the venue's clock, ms.
const SIGNATURE_SKEW_MS: i64 = 60_000;

/// How a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// Closed by the client, EOF, reset, a protocol error or a close fault.
    Closed,
    /// A `test_request` left unanswered past the interval.
    Heartbeat,
    /// 10 minutes without a message.
    Inactive,
    /// Closed after a `too_many_requests` answer.
    RateLimited,
    /// `private/logout`: graceful, cancels nothing.
    Logout,
    /// The emulator is stopping: cancels nothing.
    Stopped,
}

impl End {
    /// Whether this end triggers cancel-on-disconnect.
    fn cancels(self) -> bool {
        !matches!(self, End::Logout | End::Stopped)
    }
}

/// One connection's state: its id, the account it authenticated, COD, the
/// heartbeat and when the client was last heard.
#[derive(Debug)]
pub(crate) struct DeribitSession {
    conn: u64,
    ip: IpAddr,
    account: Option<usize>,
    /// The token its `public/auth` issued (dropped by `private/logout`).
    token: Option<String>,
    cod: bool,
    heartbeat_ms: Option<i64>,
    /// When the next `test_request` is due (with a heartbeat set).
    beat_at: i64,
    /// A `test_request` was sent and no `public/test` came since.
    awaiting: bool,
    last_heard: i64,
}

impl DeribitSession {
    /// The client sent a frame (of any kind) at `now`: the inactivity time
    /// starts again.
    pub(crate) fn heard(&mut self, now: i64) {
        self.last_heard = self.last_heard.max(now);
    }

    /// When [`Venue::deribit_ws_poll`] next has something to do, venue UTC ms.
    pub(crate) fn poll_timeout(&self) -> i64 {
        let idle = self.last_heard.saturating_add(INACTIVITY_MS);
        match self.heartbeat_ms {
            Some(_) => idle.min(self.beat_at),
            None => idle,
        }
    }
}

/// What to do after a text frame.
#[derive(Debug)]
pub(crate) enum WsStep {
    /// Write this answer; the connection stays open.
    Answer(String),
    /// Write this answer, then close (close frame 1008) and end as `End`.
    AnswerThenEnd(String, End),
    /// Write nothing, close (close frame 1000) and end as `End`.
    End(End),
    /// A delay fault: wait `ms` outside the lock, then
    /// [`Venue::deribit_ws_delayed`] and write its answer.
    Delay {
        /// What to run after the delay.
        op: DeribitOp,
        /// Whose it is.
        account: usize,
        /// How long, ms.
        ms: u64,
    },
}

/// What the venue's timers want now.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum WsPoll {
    /// Write this notification, then poll again.
    Send(String),
    /// Close (close frame 1000) and end as `End` at this venue time.
    End(End, i64),
    /// Nothing until [`DeribitSession::poll_timeout`].
    Wait,
}

/// The heartbeat notification.
fn test_request() -> String {
    json!({"jsonrpc": "2.0", "method": "heartbeat", "params": {"type": "test_request"}}).to_string()
}

/// `scope` of the COD methods: whether it is the account's.
fn account_scope(p: &Params) -> Option<bool> {
    match p.get("scope").filter(|s| !s.is_empty()) {
        None | Some("connection") => Some(false),
        Some("account") => Some(true),
        Some(_) => None,
    }
}

impl Venue {
    /// An upgrade to `/ws/api/v2`: the `Sec-WebSocket-Accept` and the new
    /// connection's session, or the refusal to write.
    pub(crate) fn admit_deribit_ws(
        &mut self,
        req: &Request,
        ip: IpAddr,
        now: i64,
    ) -> Result<(String, DeribitSession), Response> {
        self.now_hint = now;
        if self.ips.get(&ip).is_some_and(|s| s.banned_until > now) {
            self.report.banned_requests += 1;
            return Err(fail(429, &Value::Null, 10028, "too_many_requests", now));
        }
        let accept = frame::check_handshake(req)?;
        self.next_conn_id += 1;
        self.report.deribit_ws.connects += 1;
        let session = DeribitSession {
            conn: self.next_conn_id,
            ip,
            account: None,
            token: None,
            cod: false,
            heartbeat_ms: None,
            beat_at: 0,
            awaiting: false,
            last_heard: now,
        };
        Ok((accept, session))
    }

    /// Handles one text frame of the connection.
    pub(crate) fn deribit_ws_text(
        &mut self,
        s: &mut DeribitSession,
        text: &[u8],
        now: i64,
    ) -> WsStep {
        self.now_hint = now;
        s.heard(now);
        self.report.deribit_ws.requests += 1;
        self.expire_switches(now);
        let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(text) else {
            let r = fail(400, &Value::Null, -32700, "Parse error", now);
            return WsStep::Answer(r.body);
        };
        let (id, method, p) = match read_object(body, None) {
            Ok(c) => c,
            Err(late) => return WsStep::Answer(late(now).body),
        };
        let private = method.starts_with("private/");
        let account = if private {
            let by_token = p
                .get("access_token")
                .and_then(|t| self.tokens.get(t))
                .filter(|&&(_, until)| until > now)
                .map(|&(a, _)| a);
            match s.account.or(by_token) {
                Some(a) => Some(a),
                None => {
                    self.report.api_key_rejects += 1;
                    let reason = json!({ "reason": "invalid_token" });
                    let r = fail_with(400, &id, 13009, "unauthorized", reason, now);
                    return WsStep::Answer(r.body);
                }
            }
        } else {
            None
        };
        let key = account.map_or(Key::Ip(s.ip), Key::Account);
        if self.pay(key, matching(&method), now).is_err() {
            self.report.throttled += 1;
            let r = fail(429, &id, 10028, "too_many_requests", now);
            return WsStep::AnswerThenEnd(r.body, End::RateLimited);
        }
        let account = account.unwrap_or_else(|| s.account.unwrap_or(0));
        let answer = |r: Response| WsStep::Answer(r.body);
        match method.as_str() {
            "public/auth" => answer(self.deribit_ws_auth(s, &id, &p, now)),
            "public/test" => {
                s.awaiting = false;
                self.report.deribit_ws.test_replies += 1;
                answer(ok(&id, json!({ "version": VERSION }), now))
            }
            "public/set_heartbeat" => {
                let secs = p.get("interval").and_then(|v| v.parse::<i64>().ok());
                match secs.filter(|&n| (MIN_HEARTBEAT_S..=86_400).contains(&n)) {
                    Some(n) => {
                        s.heartbeat_ms = Some(n * 1_000);
                        s.beat_at = now.saturating_add(n * 1_000);
                        s.awaiting = false;
                        answer(ok(&id, json!("ok"), now))
                    }
                    None => answer(invalid(&id, "interval", now)),
                }
            }
            "public/disable_heartbeat" => {
                s.heartbeat_ms = None;
                s.awaiting = false;
                answer(ok(&id, json!("ok"), now))
            }
            "private/enable_cancel_on_disconnect" | "private/disable_cancel_on_disconnect" => {
                let on = method == "private/enable_cancel_on_disconnect";
                let Some(whole) = account_scope(&p) else {
                    return answer(invalid(&id, "scope", now));
                };
                if whole {
                    if let Some(a) = self.deribit_cod.get_mut(account) {
                        *a = on;
                    }
                }
                s.cod = on;
                answer(ok(&id, json!("ok"), now))
            }
            "private/get_cancel_on_disconnect" => {
                let Some(whole) = account_scope(&p) else {
                    return answer(invalid(&id, "scope", now));
                };
                let (scope, enabled) = if whole {
                    let on = self.deribit_cod.get(account).copied().unwrap_or(false);
                    ("account", on)
                } else {
                    ("connection", s.cod)
                };
                answer(ok(&id, json!({ "scope": scope, "enabled": enabled }), now))
            }
            "private/logout" => {
                if p.get("invalidate_token") != Some("false") {
                    if let Some(t) = s.token.take() {
                        self.tokens.remove(&t);
                    }
                }
                WsStep::End(End::Logout)
            }
            _ => match self.deribit_call(&id, &method, &p, now) {
                Err(r) => answer(r),
                Ok(call) => {
                    let op = DeribitOp {
                        id,
                        call,
                        conn: Some(s.conn),
                    };
                    self.deribit_ws_run(op, account, now)
                }
            },
        }
    }

    /// Runs an engine call admitted on the connection, with the fault drawn
    /// for it: a close fault ends the connection (a disconnection: COD
    /// applies), a 5xx fault answers the HTTP profile's error with the id.
    fn deribit_ws_run(&mut self, op: DeribitOp, account: usize, now: i64) -> WsStep {
        let Some(fault) = self.draw_fault(op.changes_orders()) else {
            return WsStep::Answer(self.execute_deribit(op, account, now).body);
        };
        self.note_fault(fault);
        match fault {
            Fault::CloseBeforeExecute => WsStep::End(End::Closed),
            Fault::ExecuteThenClose => {
                self.execute_deribit(op, account, now);
                WsStep::End(End::Closed)
            }
            Fault::ServerErrorAfterExecute => {
                let id = op.id.clone();
                self.execute_deribit(op, account, now);
                WsStep::Answer(fail(500, &id, 11094, "internal_server_error", now).body)
            }
            Fault::ServerErrorNoExecute => {
                WsStep::Answer(fail(503, &op.id, 10040, "retry", now).body)
            }
            Fault::Delay => WsStep::Delay {
                op,
                account,
                ms: self.cfg.faults.delay_ms,
            },
        }
    }

    /// Runs a call a delay fault held, at `now` (after the delay).
    pub(crate) fn deribit_ws_delayed(&mut self, op: DeribitOp, account: usize, now: i64) -> String {
        self.now_hint = now;
        self.execute_deribit(op, account, now).body
    }

    /// `public/auth` on the connection: the answer; the connection is
    /// authenticated when it is a result.
    fn deribit_ws_auth(
        &mut self,
        s: &mut DeribitSession,
        id: &Value,
        p: &Params,
        now: i64,
    ) -> Response {
        let get = |name: &str| p.get(name).filter(|v| !v.is_empty());
        let refuse = |v: &mut Venue, reason: &str| {
            v.report.deribit_ws.auth_refused += 1;
            let data = json!({ "reason": reason });
            fail_with(400, id, 13004, "invalid_credentials", data, now)
        };
        let client = get("client_id");
        let account = client.and_then(|c| self.cfg.accounts.iter().position(|a| a.api_key == c));
        let account = match get("grant_type") {
            Some("client_credentials" | "client_signature") if client.is_none() => {
                self.report.deribit_ws.auth_refused += 1;
                return invalid(id, "client_id", now);
            }
            Some("client_credentials") => {
                let Some(secret) = get("client_secret") else {
                    self.report.deribit_ws.auth_refused += 1;
                    return invalid(id, "client_secret", now);
                };
                match account.filter(|&a| self.cfg.accounts[a].secret == secret) {
                    Some(a) => a,
                    None => {
                        self.report.api_key_rejects += 1;
                        return refuse(self, "invalid_credentials");
                    }
                }
            }
            Some("client_signature") => {
                let (Some(ts), Some(given)) = (get("timestamp"), get("signature")) else {
                    self.report.deribit_ws.auth_refused += 1;
                    let missing = if get("timestamp").is_none() {
                        "timestamp"
                    } else {
                        "signature"
                    };
                    return invalid(id, missing, now);
                };
                let Some(a) = account else {
                    self.report.api_key_rejects += 1;
                    return refuse(self, "invalid_credentials");
                };
                let nonce = p.get("nonce").unwrap_or("");
                let data = p.get("data").unwrap_or("");
                let expected = sign(
                    &format!("{ts}\n{nonce}\n{data}"),
                    &self.cfg.accounts[a].secret,
                );
                if !expected.eq_ignore_ascii_case(given) {
                    self.report.signature_rejects += 1;
                    return refuse(self, "invalid_signature");
                }
                match ts.parse::<i64>() {
                    Ok(t) if (t - now).abs() <= SIGNATURE_SKEW_MS => a,
                    _ => {
                        self.report.signature_rejects += 1;
                        return refuse(self, "invalid_timestamp");
                    }
                }
            }
            _ => {
                self.report.deribit_ws.auth_refused += 1;
                return invalid(id, "grant_type", now);
            }
        };
        let (token, result) = self.issue_token(account, now);
        s.account = Some(account);
        s.token = Some(token);
        if self.deribit_cod.get(account).copied().unwrap_or(false) {
            s.cod = true;
        }
        self.report.deribit_ws.auths += 1;
        ok(id, result, now)
    }

    /// What the connection's timers want at `now`: a `test_request` due, or
    /// the close for an unanswered one or for inactivity (stamped with its
    /// deadline).
    pub(crate) fn deribit_ws_poll(&mut self, s: &mut DeribitSession, now: i64) -> WsPoll {
        let idle_at = s.last_heard.saturating_add(INACTIVITY_MS);
        if let Some(ms) = s.heartbeat_ms.filter(|_| s.beat_at <= now) {
            if s.beat_at <= idle_at {
                if s.awaiting {
                    return WsPoll::End(End::Heartbeat, s.beat_at);
                }
                s.awaiting = true;
                s.beat_at = s.beat_at.saturating_add(ms);
                self.report.deribit_ws.heartbeats_sent += 1;
                return WsPoll::Send(test_request());
            }
        }
        if idle_at <= now {
            return WsPoll::End(End::Inactive, idle_at);
        }
        WsPoll::Wait
    }

    /// The connection ended at `at`: with COD on (and an end that triggers
    /// it), every order it placed that is still open is cancelled, stamped `at`.
    pub(crate) fn deribit_ws_end(&mut self, s: &mut DeribitSession, at: i64, end: End) {
        let c = &mut self.report.deribit_ws;
        c.disconnects += 1;
        match end {
            End::Heartbeat => c.closes_by_heartbeat += 1,
            End::Inactive => c.closes_by_inactivity += 1,
            End::RateLimited => c.closes_by_rate_limit += 1,
            End::Logout => c.logouts += 1,
            End::Closed | End::Stopped => {}
        }
        if !(std::mem::take(&mut s.cod) && end.cancels()) {
            return;
        }
        let open: Vec<usize> = (0..self.orders.len())
            .filter(|&i| {
                let o = &self.orders[i];
                o.conn == Some(s.conn) && o.status == Status::New
            })
            .collect();
        for i in open {
            self.cancel_order(i, at);
            self.report.deribit_ws.cod_cancels += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::hashing::Hashing;
    use std::net::Ipv4Addr;

    fn session(v: &mut Venue, now: i64) -> DeribitSession {
        v.next_conn_id += 1;
        DeribitSession {
            conn: v.next_conn_id,
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            account: None,
            token: None,
            cod: false,
            heartbeat_ms: None,
            beat_at: 0,
            awaiting: false,
            last_heard: now,
        }
    }

    fn text(step: WsStep) -> Value {
        match step {
            WsStep::Answer(t) => serde_json::from_str(&t).unwrap(),
            other => panic!("no answer: {other:?}"),
        }
    }

    #[test]
    fn heartbeat_sends_then_closes_unanswered_at_the_deadline() {
        let mut v = Venue::new(Config::deribit(), Hashing::keyed());
        let mut s = session(&mut v, 0);
        let req =
            br#"{"jsonrpc":"2.0","id":1,"method":"public/set_heartbeat","params":{"interval":10}}"#;
        assert_eq!(text(v.deribit_ws_text(&mut s, req, 0))["result"], "ok");
        assert_eq!(s.poll_timeout(), 10_000);
        assert_eq!(v.deribit_ws_poll(&mut s, 9_999), WsPoll::Wait);
        assert_eq!(
            v.deribit_ws_poll(&mut s, 10_000),
            WsPoll::Send(test_request())
        );
        assert_eq!(v.deribit_ws_poll(&mut s, 10_000), WsPoll::Wait);
        let test = br#"{"jsonrpc":"2.0","id":2,"method":"public/test"}"#;
        assert_eq!(
            text(v.deribit_ws_text(&mut s, test, 15_000))["result"]["version"],
            VERSION
        );
        assert_eq!(
            v.deribit_ws_poll(&mut s, 20_000),
            WsPoll::Send(test_request())
        );
        assert_eq!(
            v.deribit_ws_poll(&mut s, 30_005),
            WsPoll::End(End::Heartbeat, 30_000)
        );
    }

    #[test]
    fn inactivity_closes_after_ten_minutes_without_a_frame() {
        let mut v = Venue::new(Config::deribit(), Hashing::keyed());
        let mut s = session(&mut v, 0);
        s.heard(5_000);
        assert_eq!(v.deribit_ws_poll(&mut s, 604_999), WsPoll::Wait);
        assert_eq!(
            v.deribit_ws_poll(&mut s, 700_000),
            WsPoll::End(End::Inactive, 605_000)
        );
    }

    #[test]
    fn bad_frames_are_answered_not_fatal() {
        let mut v = Venue::new(Config::deribit(), Hashing::keyed());
        let mut s = session(&mut v, 0);
        for (req, code) in [
            (&b"not json"[..], -32700),
            (br#"[1,2]"#, -32700),
            (br#"{"id":3}"#, -32600),
            (br#"{"id":3,"method":"public/nope"}"#, -32601),
            (
                br#"{"id":3,"method":"public/set_heartbeat","params":{"interval":9}}"#,
                -32602,
            ),
            (
                br#"{"id":3,"method":"private/get_cancel_on_disconnect"}"#,
                13009,
            ),
        ] {
            assert_eq!(
                text(v.deribit_ws_text(&mut s, req, 0))["error"]["code"],
                code
            );
        }
    }
}
