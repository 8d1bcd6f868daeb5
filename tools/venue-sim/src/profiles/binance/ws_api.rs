//! Binance Spot's WebSocket API (`/ws-api/v3`) on the venue side: one JSON request
//! `{id, method, params}` in, one answer `{id, status, result|error, rateLimits}`
//! out, through the same admission as REST, so the weights, the REQUEST_WEIGHT
//! counts per IP, the ORDERS counts per account, the 429/418 and the ban
//! escalation are REST's, and the order registry (duplicates by client order id)
//! is the same one.
//!
//! What differs from REST, as `web-socket-api.md` documents it
//! (<https://github.com/binance/binance-spot-api-docs/blob/master/web-socket-api.md>,
//! checked 2026-11-30 at its commit of 2026-07-21):
//! - the API key is the `apiKey` parameter; the HMAC-SHA256 signature is over every
//!   parameter but `signature`, sorted by name, `name=value` joined by `&`
//!   ("SIGNED request example (HMAC)"); timing security as REST;
//! - a connect weighs 2 ("Connecting to WebSocket API costs 2 weight"), and at
//!   most 300 connects per 5 minutes per IP ("Connection limits"; the emulator
//!   keeps one record of attempts for the streams and the API);
//! - errors are `{"code","msg"}` in `error`; a 429 or 418 carries
//!   `error.data.retryAfter` (a UTC ms timestamp: when the throttle or the ban
//!   ends) and `serverTime`; a banned IP is disconnected after its 418;
//! - `rateLimits` on every answer (REQUEST_WEIGHT of the IP; ORDERS of the
//!   account for order placements) unless `returnRateLimits` is false in the
//!   request or in the connection URL;
//! - the server pings every 20 s and drops a connection whose pong is a minute
//!   late (the connection thread, `crate::server::ws_api_conn`);
//! - `userDataStream.subscribe.signature` subscribes the connection to the
//!   account's events, pushed as `{"subscriptionId":N,"event":{..}}`; one
//!   subscription per account per connection (-2035), `userDataStream.unsubscribe`
//!   with an unknown id is -2036 ("User Data Stream subscription not active.").
//! - `session.logon`, `session.status`, `session.logout`, weight 2 each
//!   ("Authentication requests",
//!   <https://developers.binance.com/docs/binance-spot-api-docs/websocket-api/authentication-requests>,
//!   and "Session Authentication",
//!   <https://developers.binance.com/docs/binance-spot-api-docs/websocket-api/session-authentication>,
//!   checked 2026-12-06): only Ed25519 keys log on; one key per connection (a
//!   second logon replaces the first); once logged on, a request without
//!   `apiKey` is the key's, needs no `signature` but still its `timestamp`;
//!   `userDataStream.subscribe` subscribes a logged-on connection; a key that
//!   becomes invalid revokes the session "after the next request" with
//!   `{"id":null,"status":401,"error":{"code":-2015,..}}`.
//!
//!
//! USD-M futures (profile `binance-futures`) serve their WebSocket API at
//! `/ws-fapi/v1` ("WebSocket API General Info",
//! <https://developers.binance.com/docs/derivatives/usds-margined-futures/websocket-api-general-info>,
//! checked 2026-12-06: base endpoint `wss://ws-fapi.binance.com/ws-fapi/v1`, a ping
//! every 3 minutes and a connection dropped after 10 minutes without a pong, the
//! signature payload every parameter but `signature` sorted by name, the user
//! data stream on a separate connection), through the same admission with USD-M's
//! weights (its "Trade" methods, as Binance's generated connector documents them:
//! `order.place` 0 on the IP and 1 on each ORDERS limit, `order.modify` the same,
//! `order.cancel` 1, `order.status` 1): `order.place`, `order.modify`,
//! `order.cancel`, `order.status`, `ping`, `time`, and `session.logon`,
//! `session.status`, `session.logout` as Spot's (weight 2, Ed25519 keys only, one
//! key per connection); every other method, Spot's included, is -1020 there, and
//! each profile's path is 404 on the other.
//!
//! Readings where the docs say nothing: an unknown method is 400 -1020 ("This
//! operation is not supported."), a logon with an HMAC key and
//! `userDataStream.subscribe` on a connection not logged on are 401 -1002 ("You
//! are not authorized to execute this request."), the request that finds its
//! session revoked is answered -2015 under its own id too, a frame that is not a JSON request is 400
//! -1000 with `id` null; numbers in `params` are signed as serde_json writes them.
//! This module never touches a socket or reads a clock.

use std::net::IpAddr;
use std::sync::mpsc::Sender;

use serde_json::{json, Map, Value};

use crate::config::{Fault, LimitType, Profile};
use crate::engine::state::{Admission, Venue};
use crate::http::{json_text, Request, Response};
use crate::limits::Key;
use crate::params::Params;
use crate::profiles::binance::admit::{Call, Signing};
use crate::profiles::binance::endpoint::Endpoint;
use crate::profiles::binance::request::{err, BinanceOp, SessionCall};
use crate::ws::frame;

/// Where Spot's WebSocket API is served.
pub(crate) const WS_API_PATH: &str = "/ws-api/v3";
/// Where USD-M futures' WebSocket API is served (`wss://ws-fapi.binance.com/ws-fapi/v1`).
pub(crate) const WS_FAPI_PATH: &str = "/ws-fapi/v1";

/// The WebSocket API path of `profile`, if it has one.
pub(crate) fn api_path(profile: Profile) -> Option<&'static str> {
    match profile {
        Profile::BinanceSpot => Some(WS_API_PATH),
        Profile::BinanceFutures => Some(WS_FAPI_PATH),
        _ => None,
    }
}

/// The endpoint a USD-M futures method asks for: order entry and the session
/// requests; the rest of the USD-M WebSocket API (market data, account, the
/// listen key) is not emulated, and Spot's methods do not exist there.
fn route_futures(method: &str) -> Option<Endpoint> {
    Some(match method {
        "ping" => Endpoint::Ping,
        "time" => Endpoint::Time,
        "order.place" => Endpoint::NewOrder,
        "order.modify" => Endpoint::Modify,
        "order.cancel" => Endpoint::CancelOrder,
        "order.status" => Endpoint::QueryOrder,
        "session.logon" => Endpoint::SessionLogon,
        "session.status" => Endpoint::SessionStatus,
        "session.logout" => Endpoint::SessionLogout,
        _ => return None,
    })
}
/// The weight of a connect.
const CONNECT_WEIGHT: u64 = 2;

/// The endpoint a method name asks for (`v3/` prefix allowed).
fn route(method: &str) -> Option<Endpoint> {
    Some(match method.strip_prefix("v3/").unwrap_or(method) {
        "ping" => Endpoint::Ping,
        "time" => Endpoint::Time,
        "exchangeInfo" => Endpoint::ExchangeInfo,
        "depth" => Endpoint::Depth,
        "trades.recent" => Endpoint::Trades,
        "klines" | "uiKlines" => Endpoint::Klines,
        "avgPrice" => Endpoint::AvgPrice,
        "ticker.24hr" => Endpoint::Ticker24hr,
        "ticker.price" => Endpoint::TickerPrice,
        "ticker.book" => Endpoint::BookTicker,
        "order.place" => Endpoint::NewOrder,
        "order.test" => Endpoint::OrderTest,
        "order.cancel" => Endpoint::CancelOrder,
        "order.cancelReplace" => Endpoint::CancelReplace,
        "order.status" => Endpoint::QueryOrder,
        "openOrders.status" => Endpoint::OpenOrders,
        "openOrders.cancelAll" => Endpoint::CancelAll,
        "allOrders" => Endpoint::AllOrders,
        "myTrades" => Endpoint::MyTrades,
        "account.status" => Endpoint::Account,
        "account.rateLimits.orders" => Endpoint::RateLimitOrder,
        "userDataStream.subscribe.signature" => Endpoint::StreamSubscribe,
        "userDataStream.unsubscribe" => Endpoint::StreamUnsubscribe,
        "session.subscriptions" => Endpoint::StreamSubscriptions,
        "session.logon" => Endpoint::SessionLogon,
        "session.status" => Endpoint::SessionStatus,
        "session.logout" => Endpoint::SessionLogout,
        "userDataStream.subscribe" => Endpoint::StreamSubscribeLoggedOn,
        _ => return None,
    })
}

/// One connection's subscriptions: the connection thread owns it.
pub(crate) struct ApiSession {
    /// Where the hub sends this connection's events.
    tx: Sender<String>,
    /// `(subscriptionId, account, hub id)`.
    subs: Vec<(u64, usize, u64)>,
    next_id: u64,
    /// `returnRateLimits` of the connection URL (default true).
    pub(crate) rate_limits: bool,
    /// The account logged on (`session.logon`) and since when (venue ms).
    logon: Option<(usize, i64)>,
    /// When the connection opened (venue ms).
    connected_since: i64,
}

impl ApiSession {
    /// A session whose events go to `tx`, opened at `now` (venue ms).
    pub(crate) fn new(tx: Sender<String>, rate_limits: bool, now: i64) -> Self {
        ApiSession {
            tx,
            subs: Vec::new(),
            next_id: 0,
            rate_limits,
            logon: None,
            connected_since: now,
        }
    }
}

/// What the venue decided about one request.
pub(crate) enum ApiAdmission {
    /// Send this answer and run nothing; `close` the connection after it (a ban).
    Answer { text: String, close: bool },
    /// Run `op` for `account`, then answer `id`; apply `fault` if any.
    Run(Box<ApiRun>),
}

/// An admitted WebSocket API request.
pub(crate) struct ApiRun {
    /// The request's `id`, echoed.
    pub(crate) id: Value,
    /// What to run.
    pub(crate) op: BinanceOp,
    /// Whose it is.
    pub(crate) account: usize,
    /// The fault drawn, if any.
    pub(crate) fault: Option<Fault>,
    /// Whether the answer carries `rateLimits`.
    pub(crate) limits: bool,
    /// Whether it placed an order (its answer lists the ORDERS counts).
    pub(crate) orders: bool,
    /// `timestamp + recvWindow` (venue ms) if signed: a request held in the
    /// venue's queue past it is refused, never executed, as over REST.
    pub(crate) valid_until: Option<i64>,
}

/// A `params` value as the text it is signed and read as.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl Venue {
    /// A WebSocket API upgrade at receipt: the ban, the connect limit, the connect
    /// weight, the handshake. On success: the accept key.
    pub(crate) fn admit_ws_api(
        &mut self,
        req: &Request,
        ip: IpAddr,
        now: i64,
    ) -> Result<String, Response> {
        self.now_hint = now;
        if api_path(self.cfg.profile) != Some(req.path.as_str()) {
            return Err(err(
                404,
                -1000,
                "No WebSocket API at this path in this profile.",
            ));
        }
        self.admit_upgrade(ip, now)?;
        let accept = frame::check_handshake(req)?;
        let mut over = None;
        for l in &mut self.limits {
            if l.spec.kind == LimitType::RequestWeight
                && l.charge(Key::Ip(ip), CONNECT_WEIGHT, now) > l.spec.limit
            {
                over = Some(l.window_end(now));
            }
        }
        if let Some(end) = over {
            self.report.ws.connects_refused += 1;
            self.report.throttled += 1;
            let mut r = err(
                429,
                -1003,
                "Too much request weight used; the connect weight is over the limit.",
            );
            r.headers
                .push(("Retry-After".into(), Self::retry_after(end, now)));
            return Err(r);
        }
        self.report.ws.api_connects += 1;
        Ok(accept)
    }

    /// Everything the venue decides about one request at receipt.
    pub(crate) fn ws_api_admit(
        &mut self,
        text_frame: &[u8],
        ip: IpAddr,
        now: i64,
        session: &mut ApiSession,
    ) -> ApiAdmission {
        self.report.ws.api_requests += 1;
        self.now_hint = now;
        let request = serde_json::from_slice::<Value>(text_frame).ok();
        let (id, method, params) = match request {
            Some(Value::Object(mut m)) => {
                let id = m.remove("id").unwrap_or(Value::Null);
                let params = match m.remove("params") {
                    None => Some(Map::new()),
                    Some(Value::Object(p)) => Some(p),
                    Some(_) => None,
                };
                match (m.remove("method"), params) {
                    (Some(Value::String(method)), Some(p)) => (id, method, p),
                    _ => return self.malformed(id),
                }
            }
            _ => return self.malformed(Value::Null),
        };
        let pairs: Vec<(String, String)> =
            params.iter().map(|(k, v)| (k.clone(), text(v))).collect();
        let params = Params::from_pairs(pairs);
        let valid_until = params
            .get("timestamp")
            .and_then(|ts| super::admit::valid_until(ts, params.get("recvWindow")));
        let limits = match params.get("returnRateLimits") {
            Some("false") => false,
            Some("true") => true,
            _ => session.rate_limits,
        };
        let mut api_key = params.get("apiKey").map(str::to_string);
        // Logged on, a request without `apiKey` is the session key's.
        let mut signing = Signing::Sorted;
        if let (Some((a, _)), None) = (session.logon, &api_key) {
            api_key = Some(self.cfg.accounts[a].api_key.clone());
            signing = Signing::Session;
            if self.revoked[a] {
                // "after the next request the session will be revoked".
                session.logon = None;
                let revoked = json!({
                    "id": null,
                    "status": 401,
                    "error": { "code": -2015, "msg": "Invalid API-key, IP, or permissions for action." },
                });
                let _ = session.tx.send(revoked.to_string());
                self.report.ws.api_revocations += 1;
            }
        }
        let account_hint = api_key
            .as_deref()
            .and_then(|k| self.cfg.accounts.iter().position(|a| a.api_key == k));
        let endpoint = match self.cfg.profile {
            Profile::BinanceFutures => route_futures(&method),
            _ => route(&method),
        };
        if matches!(signing, Signing::Session) && endpoint.is_some_and(Endpoint::signed) {
            self.report.ws.api_unsigned += 1;
        }
        let orders = endpoint.is_some_and(Endpoint::places_order);
        let call = Call {
            endpoint,
            params: Ok(params),
            api_key: api_key.as_deref(),
            signing,
        };
        let r = match self.admit_call(call, ip, now) {
            Err(_) => err(400, -1020, "This operation is not supported."),
            Ok(Admission::Final(r)) => r,
            Ok(Admission::Run {
                op, account, fault, ..
            }) => {
                return ApiAdmission::Run(Box::new(ApiRun {
                    id,
                    op,
                    account,
                    fault,
                    limits,
                    orders,
                    valid_until,
                }))
            }
        };
        let close = r.status == 418;
        let text = self.ws_api_answer(&id, &r, ip, account_hint, limits, orders, now);
        ApiAdmission::Answer { text, close }
    }

    fn malformed(&mut self, id: Value) -> ApiAdmission {
        let text = json!({
            "id": id,
            "status": 400,
            "error": {
                "code": -1000,
                "msg": "Malformed request: want a JSON object with 'id', 'method' and an object 'params'.",
            },
        })
        .to_string();
        ApiAdmission::Answer { text, close: false }
    }

    /// Runs one of the session's own requests (subscriptions) and answers it as
    /// REST would.
    pub(crate) fn ws_api_session(
        &mut self,
        op: &BinanceOp,
        account: usize,
        session: &mut ApiSession,
        now: i64,
    ) -> Response {
        let not_authorized = || {
            err(
                401,
                -1002,
                "You are not authorized to execute this request.",
            )
        };
        let account = match *op {
            BinanceOp::StreamSubscribeLoggedOn => match session.logon {
                Some((a, _)) => a,
                None => return not_authorized(),
            },
            _ => account,
        };
        match *op {
            BinanceOp::Session(call) => {
                if call == SessionCall::Logon {
                    // "Only Ed25519 keys are supported for this feature."
                    if self.cfg.accounts[account].ed25519_public_key.is_none() {
                        return not_authorized();
                    }
                    session.logon = Some((account, now));
                    self.report.ws.api_logons += 1;
                } else if call == SessionCall::Logout {
                    session.logon = None;
                }
                let (key, since) = match session.logon {
                    Some((a, t)) => (json!(self.cfg.accounts[a].api_key), json!(t)),
                    None => (Value::Null, Value::Null),
                };
                let result = json!({
                    "apiKey": key,
                    "authorizedSince": since,
                    "connectedSince": session.connected_since,
                    "returnRateLimits": session.rate_limits,
                    "serverTime": now,
                    "userDataStream": !session.subs.is_empty(),
                });
                Response::json(200, json_text(&result))
            }
            BinanceOp::StreamSubscribe | BinanceOp::StreamSubscribeLoggedOn => {
                if session.subs.iter().any(|&(_, a, _)| a == account) {
                    return err(400, -2035, "User Data Stream subscription already active.");
                }
                let id = session.next_id;
                session.next_id += 1;
                let hub_id = self.hub.subscribe_api(account, id, session.tx.clone());
                session.subs.push((id, account, hub_id));
                self.report.ws.api_subscriptions += 1;
                Response::json(200, json!({ "subscriptionId": id }).to_string())
            }
            BinanceOp::StreamUnsubscribe(which) => {
                let before = session.subs.len();
                let hub = &mut self.hub;
                session.subs.retain(|&(id, _, hub_id)| {
                    let keep = which.is_some_and(|w| w != id);
                    if !keep {
                        hub.unsubscribe(hub_id);
                    }
                    keep
                });
                if which.is_some() && session.subs.len() == before {
                    return err(400, -2036, "User Data Stream subscription not active.");
                }
                Response::json(200, "{}".into())
            }
            BinanceOp::StreamSubscriptions => {
                let list: Vec<Value> = session
                    .subs
                    .iter()
                    .map(|&(id, _, _)| json!({ "subscriptionId": id }))
                    .collect();
                Response::json(200, json_text(&Value::Array(list)))
            }
            _ => err(400, -1020, "This operation is not supported."),
        }
    }

    /// Runs `run`'s operation at `now`, admitted at `admitted`: the session's
    /// own (subscriptions, logon) or the venue's. The connection thread and the
    /// sans-IO driver ([`crate::sansio`]) both run requests through it.
    pub(crate) fn ws_api_run(
        &mut self,
        run: &ApiRun,
        session: &mut ApiSession,
        now: i64,
        admitted: i64,
    ) -> Response {
        if run.op.on_session() {
            self.ws_api_session(&run.op, run.account, session, now)
        } else {
            self.execute_binance(run.op.clone(), run.account, now, admitted)
        }
    }

    /// Ends every subscription of a closed connection.
    pub(crate) fn ws_api_end(&mut self, session: &mut ApiSession) {
        for (_, _, hub_id) in session.subs.drain(..) {
            self.hub.unsubscribe(hub_id);
        }
    }

    /// The answer to `id` for `r`, a REST-shaped response: `result` for a 200,
    /// else `error` (with `data.retryAfter` and `serverTime` on a 429 or 418), and
    /// `rateLimits` if `limits`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn ws_api_answer(
        &self,
        id: &Value,
        r: &Response,
        ip: IpAddr,
        account: Option<usize>,
        limits: bool,
        orders: bool,
        now: i64,
    ) -> String {
        let body: Value = serde_json::from_str(&r.body)
            .unwrap_or_else(|_| json!({ "code": -1000, "msg": r.body }));
        let mut out = Map::new();
        out.insert("id".into(), id.clone());
        out.insert("status".into(), json!(r.status));
        if r.status == 200 {
            out.insert("result".into(), body);
        } else {
            let mut e = body;
            let code = e["code"].as_i64().unwrap_or(0);
            let retry_after = match (r.status, code) {
                (418, _) => self.ips.get(&ip).map(|s| s.banned_until),
                (429, -1003) => self.ips.get(&ip).map(|s| s.throttled_until),
                (429, -1015) => account.map(|a| self.orders_free_at(a, now)),
                _ => None,
            };
            if let (Some(at), Value::Object(m)) = (retry_after, &mut e) {
                m.insert(
                    "data".into(),
                    json!({ "serverTime": now, "retryAfter": at }),
                );
            }
            out.insert("error".into(), e);
        }
        if limits {
            out.insert(
                "rateLimits".into(),
                Value::Array(self.ws_rate_limits(ip, account.filter(|_| orders), now)),
            );
        }
        json_text(&Value::Object(out))
    }

    /// When every ORDERS limit `account` is at has a new window.
    fn orders_free_at(&self, account: usize, now: i64) -> i64 {
        self.limits
            .iter()
            .filter(|l| l.spec.kind == LimitType::Orders)
            .filter(|l| l.used(Key::Account(account), now) >= l.spec.limit)
            .map(|l| l.window_end(now))
            .max()
            .unwrap_or(now)
    }

    /// The `rateLimits` array: the account's ORDERS counts (for placements), then
    /// the IP's REQUEST_WEIGHT.
    fn ws_rate_limits(&self, ip: IpAddr, orders_of: Option<usize>, now: i64) -> Vec<Value> {
        let entry = |l: &crate::limits::LimitState, key: Key| {
            json!({
                "rateLimitType": l.spec.kind.name(),
                "interval": l.spec.interval.name(),
                "intervalNum": l.spec.interval_num,
                "limit": l.spec.limit,
                "count": l.used(key, now),
            })
        };
        let orders = self
            .limits
            .iter()
            .filter(|l| l.spec.kind == LimitType::Orders)
            .filter_map(|l| orders_of.map(|a| entry(l, Key::Account(a))));
        let weight = self
            .limits
            .iter()
            .filter(|l| l.spec.kind == LimitType::RequestWeight)
            .map(|l| entry(l, Key::Ip(ip)));
        orders.chain(weight).collect()
    }
}
