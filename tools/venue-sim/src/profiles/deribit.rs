//! The Deribit profile: JSON-RPC 2.0 over HTTP, credit pools, connection limits.
//!
//! - Requests: `GET /api/v2/<method>?<params>`, or `POST /api/v2` (or
//!   `/api/v2/<method>`) with a JSON-RPC body `{"jsonrpc":"2.0","id":..,
//!   "method":..,"params":{..}}`. Answers `{"jsonrpc":"2.0","id":..,"result":..}`
//!   or `{.., "error":{"code","message","data"}}` with `usIn`, `usOut`, `usDiff`
//!   and `testnet`; errors are HTTP 400.
//! - Methods: `public/auth` (`grant_type=client_credentials`, `client_id`,
//!   `client_secret`: a bearer token for 900 s), `public/get_time`,
//!   `public/get_order_book`, `private/buy`, `private/sell`, `private/edit`,
//!   `private/cancel`, `private/cancel_by_label`, `private/get_order_state`,
//!   `private/get_order_state_by_label`,
//!   `private/get_open_orders_by_instrument`, `private/cancel_all_by_instrument`,
//!   and what a client asks for at start ([`catalog`]): `public/get_instruments`,
//!   `public/get_currencies`, `private/get_account_summaries`. Private methods take
//!   `Authorization: Bearer <token>`, or are signed per request with
//!   `Authorization: deri-hmac-sha256 id=..,ts=..,sig=..,nonce=..` (hex HMAC-SHA256
//!   of `ts\nnonce\nMETHOD\nURI\nBODY\n`, `ts` within 60 s; <https://docs.deribit.com/#authentication>);
//!   13009 `unauthorized` without either.
//! - Credits: each request pays its cost from a pool of its sub-account (of its IP
//!   when unauthenticated), refilled continuously; matching-engine requests (buy,
//!   sell, edit, cancel) pay from their own pool at a higher cost
//!   ([`crate::Credits`]). An empty pool answers `too_many_requests` (10028),
//!   with HTTP 429 and the connection closed ("we immediately send a
//!   too_many_requests (code 10028) or similar error and terminate the session").
//! - Connections: at most [`crate::Credits::connections_per_ip`] open at once per
//!   IP; the next is refused with HTTP 429 (the server's accept loop).
//! - Orders: `label` is the client order id (Deribit does not require labels to
//!   be unique: a label placed twice executes twice and the report counts the
//!   second as a duplicate); order ids are decimal strings; states `open`,
//!   `filled`, `cancelled`. Cancel of an unknown order is 11044 `not_open_order`.
//! - Faults: 5xx after executing is HTTP 500 `internal_server_error` (11094, the
//!   outcome unknown); without executing, HTTP 503 `retry` (10040).
//!
//! - WebSocket: the same methods as JSON-RPC frames on `/ws/api/v2`, plus
//!   connection auth, heartbeats and cancel-on-disconnect ([`ws`]); orders
//!   record the connection that placed them. Over HTTP the WebSocket-only
//!   methods stay unknown (-32601).
//!
//! Readings: the HTTP status of a 10028 answer (429 here) and the body of a
//! refused connection are not documented. Sessions per API key (16) are not
//! emulated: every token is connection-independent.
//!
//! Sources: <https://docs.deribit.com/articles/rate-limits>,
//! <https://support.deribit.com/hc/en-us/articles/25944617523357-Rate-Limits>,
//! <https://support.deribit.com/hc/en-us/articles/25944603459613> (connection
//! management: 32 connections per IP, HTTP 429 past them),
//! <https://docs.deribit.com/#public-auth>, <https://docs.deribit.com/#private-buy>,
//! <https://docs.deribit.com/#public-get_order_book>,
//! <https://docs.deribit.com/#json-rpc> (checked 2026-11-30).
//! It never touches a socket or reads a clock.

mod catalog;
pub(crate) mod ws;

use std::net::IpAddr;

use serde_json::{json, Map, Value};

use crate::config::Profile;
use crate::engine::book::{fmt_e8, parse_e8, OrdType, Order, Placement, Side, Status};
use crate::engine::credits::{CreditPool, PoolSpec};
use crate::engine::state::{Admission, Venue};
use crate::http::{Request, Response};
use crate::limits::Key;
use crate::params::{sign, Params};
use crate::profiles::instruments::{deribit_refusal, rules};
use crate::report::CreditUsage;

/// How long a bearer token lives, in seconds.
const TOKEN_S: i64 = 900;

/// An admitted Deribit request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DeribitOp {
    /// The JSON-RPC id, echoed.
    id: Value,
    call: DeribitCall,
    /// The WebSocket connection it came on (`None`: HTTP); a placement records
    /// it on its order, for cancel-on-disconnect.
    conn: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum DeribitCall {
    Auth {
        client_id: String,
        secret: String,
    },
    Time,
    Book(usize),
    Place {
        side: Side,
        kind: OrdType,
        amount_e8: u64,
        price_e8: u64,
        label: Option<String>,
    },
    Edit {
        order_id: String,
        amount_e8: u64,
        price_e8: u64,
    },
    Cancel(String),
    CancelByLabel(String),
    State(String),
    ByLabel(String),
    Open,
    /// `public/get_instruments` (`true`: BTC futures, where the one is listed).
    Instruments(bool),
    /// `public/get_currencies`.
    Currencies,
    /// `private/get_account_summaries`.
    Summaries,
    /// `private/cancel_all_by_instrument`.
    CancelAllByInstrument,
}

impl DeribitOp {
    /// Whether it changes orders (the requests faults hit by default).
    pub(crate) fn changes_orders(&self) -> bool {
        matches!(
            self.call,
            DeribitCall::Place { .. }
                | DeribitCall::Edit { .. }
                | DeribitCall::Cancel(_)
                | DeribitCall::CancelByLabel(_)
                | DeribitCall::CancelAllByInstrument
        )
    }
}

/// Whether `method` is a matching-engine request (the rate limits page's list).
fn matching(method: &str) -> bool {
    matches!(
        method,
        "private/buy"
            | "private/sell"
            | "private/edit"
            | "private/cancel"
            | "private/cancel_all"
            | "private/cancel_all_by_instrument"
            | "private/cancel_all_by_currency"
            | "private/cancel_by_label"
            | "private/close_position"
    )
}

/// The JSON-RPC envelope around `body` (`result` or `error`).
fn envelope(id: &Value, key: &str, body: Value, now: i64) -> String {
    let us = now.saturating_mul(1_000);
    let mut m = Map::new();
    m.insert("jsonrpc".into(), json!("2.0"));
    if !id.is_null() {
        m.insert("id".into(), id.clone());
    }
    m.insert(key.into(), body);
    m.insert("usIn".into(), json!(us));
    m.insert("usOut".into(), json!(us));
    m.insert("usDiff".into(), json!(0));
    m.insert("testnet".into(), json!(false));
    Value::Object(m).to_string()
}

fn ok(id: &Value, result: Value, now: i64) -> Response {
    Response::json(200, envelope(id, "result", result, now))
}

fn fail(status: u16, id: &Value, code: i64, message: &str, now: i64) -> Response {
    fail_with(status, id, code, message, Value::Null, now)
}

fn fail_with(status: u16, id: &Value, code: i64, message: &str, data: Value, now: i64) -> Response {
    let mut e = json!({ "code": code, "message": message });
    if !data.is_null() {
        e["data"] = data;
    }
    Response::json(status, envelope(id, "error", e, now))
}

fn invalid(id: &Value, param: &str, now: i64) -> Response {
    fail_with(
        400,
        id,
        -32602,
        "Invalid params",
        json!({ "reason": "bad or missing value", "param": param }),
        now,
    )
}

/// The answer of a 5xx fault.
pub(crate) fn server_error(executed: bool, now: i64) -> Response {
    if executed {
        fail(500, &Value::Null, 11094, "internal_server_error", now)
    } else {
        fail(503, &Value::Null, 10040, "retry", now)
    }
}

/// Deribit writes numbers as JSON numbers.
fn num(e8: u64) -> Value {
    fmt_e8(e8)
        .trim_end_matches('0')
        .trim_end_matches('.')
        .parse::<f64>()
        .map_or(Value::Null, |f| json!(f))
}

impl Venue {
    /// The pools' report entries, created on first use.
    fn credit_usage(&mut self, matching: bool) -> &mut CreditUsage {
        if self.report.credits.is_empty() {
            let c = self.cfg.credits;
            self.report.credits = vec![
                CreditUsage {
                    pool: "matching".into(),
                    max: c.matching_max,
                    refill_per_s: c.matching_refill_per_s,
                    cost: c.matching_cost,
                    lowest: c.matching_max,
                    ..CreditUsage::default()
                },
                CreditUsage {
                    pool: "non-matching".into(),
                    max: c.max,
                    refill_per_s: c.refill_per_s,
                    cost: c.cost,
                    lowest: c.max,
                    ..CreditUsage::default()
                },
            ];
        }
        &mut self.report.credits[usize::from(!matching)]
    }

    /// Pays one request's cost from `key`'s pool; when it cannot, when it could.
    fn pay(&mut self, key: Key, matching: bool, now: i64) -> Result<(), i64> {
        let c = self.cfg.credits;
        let spec = if matching {
            PoolSpec {
                max: c.matching_max,
                refill_per_s: c.matching_refill_per_s,
                cost: c.matching_cost,
            }
        } else {
            PoolSpec {
                max: c.max,
                refill_per_s: c.refill_per_s,
                cost: c.cost,
            }
        };
        let taken = self
            .pools
            .entry((key, matching))
            .or_insert_with(|| CreditPool::full(spec, now))
            .take(spec, now);
        let u = self.credit_usage(matching);
        match taken {
            Ok(left) => {
                u.paid += 1;
                u.lowest = u.lowest.min(left);
                Ok(())
            }
            Err(at) => {
                u.refused += 1;
                Err(at)
            }
        }
    }

    /// The account that signed `req` with `deri-hmac-sha256` (`fields`: `id=..,
    /// ts=..,sig=..,nonce=..`): the signature is hex HMAC-SHA256 of `ts \n nonce \n
    /// METHOD \n URI \n BODY \n` with the account's secret, and `ts` (UTC ms) within
    /// 60 s of the venue's clock. `Err` is the reason.
    fn signed_by(&self, req: &Request, fields: &str, now: i64) -> Result<usize, &'static str> {
        let field = |name: &str| {
            fields
                .split(',')
                .filter_map(|kv| kv.trim().split_once('='))
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v)
        };
        let (Some(id), Some(ts), Some(sig), Some(nonce)) =
            (field("id"), field("ts"), field("sig"), field("nonce"))
        else {
            return Err("invalid_credentials");
        };
        let account = self.cfg.accounts.iter().position(|a| a.api_key == id);
        let account = account.ok_or("invalid_credentials")?;
        let ts_ms: i64 = ts.parse().map_err(|_| "invalid_timestamp")?;
        if (ts_ms - now).abs() > 60_000 {
            return Err("invalid_timestamp");
        }
        let uri = match req.query.is_empty() {
            true => req.path.clone(),
            false => format!("{}?{}", req.path, req.query),
        };
        let body = String::from_utf8_lossy(&req.body);
        let data = format!("{ts}\n{nonce}\n{}\n{uri}\n{body}\n", req.method);
        if sign(&data, &self.cfg.accounts[account].secret) != sig {
            return Err("invalid_signature");
        }
        Ok(account)
    }

    /// Everything Deribit decides at receipt.
    pub(crate) fn admit_deribit(
        &mut self,
        req: &Request,
        ip: IpAddr,
        now: i64,
    ) -> Admission<DeribitOp> {
        let (id, method, params) = match read_call(req) {
            Ok(c) => c,
            Err(r) => return Admission::Final(r(now)),
        };
        let private = method.starts_with("private/");
        let mut account = 0;
        let key = if private {
            let auth = req.header("authorization").unwrap_or("");
            let token = auth.strip_prefix("Bearer ").unwrap_or("");
            let signed = auth
                .strip_prefix("deri-hmac-sha256 ")
                .map(|a| self.signed_by(req, a, now));
            match (signed, self.tokens.get(token)) {
                (Some(Ok(a)), _) => {
                    account = a;
                    Key::Account(a)
                }
                (Some(Err(reason)), _) => {
                    self.report.signature_rejects += 1;
                    return Admission::Final(fail_with(
                        400,
                        &id,
                        13009,
                        "unauthorized",
                        json!({ "reason": reason }),
                        now,
                    ));
                }
                (None, Some(&(a, until))) if until > now => {
                    account = a;
                    Key::Account(a)
                }
                _ => {
                    self.report.api_key_rejects += 1;
                    return Admission::Final(fail_with(
                        400,
                        &id,
                        13009,
                        "unauthorized",
                        json!({ "reason": "invalid_token" }),
                        now,
                    ));
                }
            }
        } else {
            Key::Ip(ip)
        };
        if self.pay(key, matching(&method), now).is_err() {
            self.report.throttled += 1;
            let mut r = fail(429, &id, 10028, "too_many_requests", now);
            r.close = true;
            return Admission::Final(r);
        }
        let call = match self.deribit_call(&id, &method, &params, now) {
            Ok(c) => c,
            Err(r) => return Admission::Final(r),
        };
        let op = DeribitOp {
            id,
            call,
            conn: None,
        };
        let fault = self.draw_fault(op.changes_orders());
        Admission::Run {
            op,
            account,
            headers: Vec::new(),
            fault,
        }
    }

    /// The call `method` with `params` makes, or the refusal to answer (a bad
    /// param, an unknown method); the same over HTTP and WebSocket.
    fn deribit_call(
        &self,
        id: &Value,
        method: &str,
        params: &Params,
        now: i64,
    ) -> Result<DeribitCall, Response> {
        let id = id.clone();
        let get = |name: &str| params.get(name).filter(|v| !v.is_empty());
        // A positive number; one past the exact decimals (`1e11`, a huge
        // amount) saturates, so the funds check answers it as the venue does.
        let dec = |name: &str| {
            get(name)
                .and_then(|v| {
                    parse_e8(v).or_else(|| {
                        let f = v.parse::<f64>().ok().filter(|f| f.is_finite())?;
                        Some((f * 1e8).min(u64::MAX as f64) as u64)
                    })
                })
                .filter(|&v| v > 0)
        };
        let call = match method {
            "public/auth" => match (get("grant_type"), get("client_id"), get("client_secret")) {
                (Some("client_credentials"), Some(c), Some(s)) => DeribitCall::Auth {
                    client_id: c.to_string(),
                    secret: s.to_string(),
                },
                (Some("client_credentials"), _, _) => return Err(invalid(&id, "client_id", now)),
                _ => return Err(invalid(&id, "grant_type", now)),
            },
            "public/get_time" => DeribitCall::Time,
            "public/get_order_book" => {
                if get("instrument_name") != Some(self.cfg.symbol.as_str()) {
                    return Err(invalid(&id, "instrument_name", now));
                }
                match get("depth").map(str::parse::<usize>) {
                    None => DeribitCall::Book(5),
                    Some(Ok(d)) if (1..=10_000).contains(&d) => DeribitCall::Book(d.min(1_000)),
                    Some(_) => return Err(invalid(&id, "depth", now)),
                }
            }
            "private/buy" | "private/sell" => {
                if get("instrument_name") != Some(self.cfg.symbol.as_str()) {
                    return Err(invalid(&id, "instrument_name", now));
                }
                let Some(amount_e8) = dec("amount") else {
                    return Err(invalid(&id, "amount", now));
                };
                let kind = match get("type") {
                    None | Some("limit") => OrdType::Limit,
                    Some("market") => OrdType::Market,
                    Some(_) => return Err(invalid(&id, "type", now)),
                };
                let price_e8 = match kind {
                    OrdType::Market => self.cfg.mid_price_e8,
                    _ => match dec("price") {
                        Some(p) => p,
                        None => return Err(invalid(&id, "price", now)),
                    },
                };
                let label = match get("label") {
                    Some(l) if l.len() > 64 => return Err(invalid(&id, "label", now)),
                    l => l.map(str::to_string),
                };
                let side = if method == "private/buy" {
                    Side::Buy
                } else {
                    Side::Sell
                };
                DeribitCall::Place {
                    side,
                    kind,
                    amount_e8,
                    price_e8,
                    label,
                }
            }
            "private/edit" => match (get("order_id"), dec("amount"), dec("price")) {
                (Some(o), Some(a), Some(p)) => DeribitCall::Edit {
                    order_id: o.to_string(),
                    amount_e8: a,
                    price_e8: p,
                },
                (None, _, _) => return Err(invalid(&id, "order_id", now)),
                (_, None, _) => return Err(invalid(&id, "amount", now)),
                _ => return Err(invalid(&id, "price", now)),
            },
            "private/cancel" | "private/get_order_state" => match get("order_id") {
                Some(o) if method == "private/cancel" => DeribitCall::Cancel(o.to_string()),
                Some(o) => DeribitCall::State(o.to_string()),
                None => return Err(invalid(&id, "order_id", now)),
            },
            "private/cancel_by_label" => match get("label") {
                Some(l) => DeribitCall::CancelByLabel(l.to_string()),
                None => return Err(invalid(&id, "label", now)),
            },
            "private/get_order_state_by_label" => match get("label") {
                Some(l) => DeribitCall::ByLabel(l.to_string()),
                None => return Err(invalid(&id, "label", now)),
            },
            // Without `currency`, every currency (ccxt's load_markets asks so).
            "public/get_instruments" => DeribitCall::Instruments(
                matches!(get("currency"), None | Some("BTC" | "any"))
                    && matches!(get("kind"), None | Some("future")),
            ),
            "public/get_currencies" => DeribitCall::Currencies,
            "private/get_account_summaries" => DeribitCall::Summaries,
            "private/cancel_all_by_instrument" => {
                if get("instrument_name") != Some(self.cfg.symbol.as_str()) {
                    return Err(invalid(&id, "instrument_name", now));
                }
                DeribitCall::CancelAllByInstrument
            }
            "private/get_open_orders_by_instrument" => {
                if get("instrument_name") != Some(self.cfg.symbol.as_str()) {
                    return Err(invalid(&id, "instrument_name", now));
                }
                DeribitCall::Open
            }
            _ => return Err(fail(400, &id, -32601, "Method not found", now)),
        };
        Ok(call)
    }

    /// A new bearer token of `account` for [`TOKEN_S`]: the token and
    /// `public/auth`'s result.
    fn issue_token(&mut self, account: usize, now: i64) -> (String, Value) {
        self.next_cancel_id += 1;
        let token = format!("sim{:016x}{:08x}", now.unsigned_abs(), self.next_cancel_id);
        self.tokens
            .insert(token.clone(), (account, now + TOKEN_S * 1_000));
        let result = json!({
            "access_token": token,
            "expires_in": TOKEN_S,
            "refresh_token": format!("{token}r"),
            "scope": "connection mainaccount",
            "token_type": "bearer",
        });
        (token, result)
    }

    fn find_deribit(&self, account: usize, order_id: &str) -> Option<usize> {
        let i = *self.by_id.get(&order_id.parse::<u64>().ok()?)?;
        (self.orders[i].account == account).then_some(i)
    }

    /// Runs an admitted Deribit request.
    pub(crate) fn execute_deribit(&mut self, op: DeribitOp, account: usize, now: i64) -> Response {
        let DeribitOp { id, call, conn } = op;
        match call {
            DeribitCall::Auth { client_id, secret } => {
                let Some(a) = self
                    .cfg
                    .accounts
                    .iter()
                    .position(|a| a.api_key == client_id && a.secret == secret)
                else {
                    self.report.api_key_rejects += 1;
                    return fail(400, &id, 13004, "invalid_credentials", now);
                };
                let (_, result) = self.issue_token(a, now);
                ok(&id, result, now)
            }
            DeribitCall::Time => ok(&id, json!(now), now),
            DeribitCall::Book(depth) => {
                let (bids, asks) = self.ladder(depth, |p| json!([num(p), 10.0]));
                let mid = num(self.cfg.mid_price_e8);
                let best = |side: &[Value]| side.first().map_or(Value::Null, |l| l[0].clone());
                ok(
                    &id,
                    json!({
                        "timestamp": now,
                        "state": "open",
                        "instrument_name": self.cfg.symbol,
                        "change_id": now,
                        "mark_price": mid,
                        "index_price": mid,
                        "last_price": mid,
                        "best_bid_price": best(&bids),
                        "best_bid_amount": 10.0,
                        "best_ask_price": best(&asks),
                        "best_ask_amount": 10.0,
                        "bids": bids,
                        "asks": asks,
                    }),
                    now,
                )
            }
            DeribitCall::Place {
                side,
                kind,
                amount_e8,
                price_e8,
                label,
            } => {
                let placement = Placement {
                    side,
                    kind,
                    tif: "good_til_cancelled",
                    qty_e8: amount_e8,
                    price_e8,
                };
                if let Err(b) = self.check_placement(account, &rules(Profile::Deribit), &placement)
                {
                    let (code, msg) = deribit_refusal(b);
                    return fail(400, &id, code, msg, now);
                }
                // Deribit labels need not be unique; an empty one is no label.
                let cid = label.unwrap_or_default();
                let idx = if cid.is_empty() {
                    let i = self.book_order(account, None, "", placement, now);
                    self.orders[i].client_id = String::new();
                    i
                } else {
                    self.book_order(account, Some(cid), "", placement, now)
                };
                self.orders[idx].conn = conn;
                let o = &self.orders[idx];
                ok(
                    &id,
                    json!({ "order": deribit_order(o, &self.cfg.symbol), "trades": [] }),
                    now,
                )
            }
            DeribitCall::Edit {
                order_id,
                amount_e8,
                price_e8,
            } => {
                let Some(i) = self.find_deribit(account, &order_id) else {
                    return fail(400, &id, 10004, "order_not_found", now);
                };
                if self.orders[i].status != Status::New {
                    return fail(400, &id, 11044, "not_open_order", now);
                }
                let kind = self.orders[i].kind;
                if let Err(b) = rules(Profile::Deribit).check_filters(kind, price_e8, amount_e8) {
                    let (code, msg) = deribit_refusal(b);
                    return fail(400, &id, code, msg, now);
                }
                self.amend_order(i, Some(amount_e8), Some(price_e8), now);
                let o = &self.orders[i];
                ok(
                    &id,
                    json!({ "order": deribit_order(o, &self.cfg.symbol), "trades": [] }),
                    now,
                )
            }
            DeribitCall::Cancel(order_id) => {
                let Some(i) = self.find_deribit(account, &order_id) else {
                    return fail(400, &id, 10004, "order_not_found", now);
                };
                if self.orders[i].status != Status::New {
                    return fail(400, &id, 11044, "not_open_order", now);
                }
                self.cancel_order(i, now);
                ok(&id, deribit_order(&self.orders[i], &self.cfg.symbol), now)
            }
            // The number of orders cancelled (none is not an error).
            DeribitCall::CancelByLabel(label) => {
                let open: Vec<usize> = (0..self.orders.len())
                    .filter(|&i| {
                        let o = &self.orders[i];
                        o.account == account && o.client_id == label && o.status == Status::New
                    })
                    .collect();
                for &i in &open {
                    self.cancel_order(i, now);
                }
                ok(&id, json!(open.len()), now)
            }
            DeribitCall::State(order_id) => match self.find_deribit(account, &order_id) {
                Some(i) => ok(&id, deribit_order(&self.orders[i], &self.cfg.symbol), now),
                None => fail(400, &id, 10004, "order_not_found", now),
            },
            DeribitCall::ByLabel(label) => {
                let list: Vec<Value> = self
                    .orders
                    .iter()
                    .filter(|o| o.account == account && o.client_id == label)
                    .map(|o| deribit_order(o, &self.cfg.symbol))
                    .collect();
                ok(&id, Value::Array(list), now)
            }
            DeribitCall::Open => {
                let list: Vec<Value> = self
                    .open_orders(account)
                    .map(|o| deribit_order(o, &self.cfg.symbol))
                    .collect();
                ok(&id, Value::Array(list), now)
            }
            DeribitCall::Instruments(listed) => ok(&id, self.deribit_instruments(listed), now),
            DeribitCall::Currencies => ok(&id, catalog::currencies(), now),
            DeribitCall::Summaries => ok(&id, self.deribit_summaries(account), now),
            // The number of orders cancelled (none is not an error).
            DeribitCall::CancelAllByInstrument => {
                let open: Vec<usize> = (0..self.orders.len())
                    .filter(|&i| self.orders[i].account == account)
                    .filter(|&i| self.orders[i].status == Status::New)
                    .collect();
                for &i in &open {
                    self.cancel_order(i, now);
                }
                ok(&id, json!(open.len()), now)
            }
        }
    }
}

/// An order as Deribit writes it.
fn deribit_order(o: &Order, instrument: &str) -> Value {
    let state = match o.status {
        Status::New => "open",
        Status::Filled => "filled",
        Status::Canceled | Status::Expired => "cancelled",
    };
    json!({
        "order_id": o.order_id.to_string(),
        "label": o.client_id,
        "instrument_name": instrument,
        "direction": if o.side == Side::Buy { "buy" } else { "sell" },
        "order_type": if o.kind == OrdType::Market { "market" } else { "limit" },
        "order_state": state,
        "price": if o.kind == OrdType::Market { json!("market_price") } else { num(o.price_e8) },
        "amount": num(o.qty_e8),
        "filled_amount": num(o.executed_e8),
        "average_price": if o.executed_e8 > 0 { num(o.price_e8) } else { json!(0.0) },
        "time_in_force": o.tif,
        "post_only": false,
        "reduce_only": false,
        "replaced": o.update_time != o.time && o.status == Status::New,
        "api": true,
        "creation_timestamp": o.time,
        "last_update_timestamp": o.update_time,
    })
}

/// A failure answer that needs the time.
type Late = Box<dyn Fn(i64) -> Response>;

/// The JSON-RPC id, method and params of a request.
fn read_call(req: &Request) -> Result<(Value, String, Params), Late> {
    let path_method = req.path.strip_prefix("/api/v2/").map(str::to_string);
    if req.method == "GET" {
        let Some(method) = path_method else {
            return Err(Box::new(|now| {
                fail(404, &Value::Null, -32601, "Method not found", now)
            }));
        };
        return match Params::parse(&req.query, b"") {
            Ok(p) => Ok((Value::Null, method, p)),
            Err(name) => Err(Box::new(move |now| invalid(&Value::Null, &name, now))),
        };
    }
    if req.method != "POST" || !(req.path == "/api/v2" || path_method.is_some()) {
        return Err(Box::new(|now| {
            fail(404, &Value::Null, -32601, "Method not found", now)
        }));
    }
    let parse_error = |now| fail(400, &Value::Null, -32700, "Parse error", now);
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(&req.body) else {
        return Err(Box::new(parse_error));
    };
    read_object(body, path_method)
}

/// The id, method and params of a JSON-RPC request object (`path_method`: the
/// method its URL names, if any). Params are read as text, numbers and strings
/// alike, as the HTTP query gives them.
fn read_object(
    mut body: Map<String, Value>,
    path_method: Option<String>,
) -> Result<(Value, String, Params), Late> {
    let id = body.remove("id").unwrap_or(Value::Null);
    let method = match (body.remove("method"), path_method) {
        (Some(Value::String(m)), _) => m,
        (None, Some(m)) => m,
        _ => {
            return Err(Box::new(move |now| {
                fail(400, &id, -32600, "Invalid Request", now)
            }))
        }
    };
    let params = match body.remove("params") {
        None => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => return Err(Box::new(move |now| invalid(&id, "params", now))),
    };
    let pairs = params
        .into_iter()
        .map(|(k, v)| {
            let t = match v {
                Value::String(s) => s,
                other => other.to_string(),
            };
            (k, t)
        })
        .collect();
    Ok((id, method, Params::from_pairs(pairs)))
}
