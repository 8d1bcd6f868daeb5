//! The OKX v5 profile: what happens to one request.
//!
//! - Limits per 2 s: per user and instrument for place, cancel, amend and order
//!   queries, per sub-account for new and amended orders, per IP for the order book
//!   (see [`crate::OKX_LIMITS`]); over one, HTTP 429 with `code` 50011 (50061 for the
//!   sub-account). OKX documents no automatic REST ban.
//! - Signing: `OK-ACCESS-KEY`, `OK-ACCESS-PASSPHRASE`, `OK-ACCESS-TIMESTAMP`
//!   (ISO 8601 UTC with milliseconds), `OK-ACCESS-SIGN` = base64 HMAC-SHA256 of
//!   timestamp + method + request path (with its query) + body; 50103/50111 key,
//!   50105 passphrase, 50112 timestamp format, 50113 signature, 50102 a timestamp
//!   more than 30 s from the server's.
//! - Answers `{"code":"0","msg":"","data":[...]}`, codes as strings; a failed order
//!   is `code` "1" with its own `sCode`/`sMsg` in `data[0]`: 51016 duplicated
//!   `clOrdId`, 51400 nothing to cancel, 51503 nothing to amend; a query for an
//!   unknown order is `code` 51603.
//! - Faults: 5xx after executing answers 500 with 50004 ("does not mean that the
//!   request was successful or failed"), without executing 503 with 50001 ("Service
//!   temporarily unavailable").
//! - Market data (`market/ticker`, `books`, `candles`, `trades`) is limited per
//!   IP, `trade/fills` and `orders-history` per user; the market is synthetic (the
//!   mid price, the emulator's own fills as trades, flat candles).
//! - Not emulated: `expTime` (the request header that bounds when OKX may run it).
//!
//! Sources: <https://www.okx.com/docs-v5/en/#overview-rest-authentication>,
//! <https://www.okx.com/docs-v5/en/#overview-rate-limits>,
//! <https://www.okx.com/docs-v5/en/#error-code-rest-api>,
//! <https://www.okx.com/docs-v5/en/#order-book-trading-trade-post-place-order>,
//! <https://www.okx.com/docs-v5/en/#order-book-trading-market-data-get-ticker>,
//! <https://www.okx.com/docs-v5/en/#order-book-trading-market-data-get-candlesticks>,
//! <https://www.okx.com/docs-v5/en/#order-book-trading-market-data-get-trades>,
//! <https://www.okx.com/docs-v5/en/#order-book-trading-trade-get-transaction-details-last-3-days>,
//! <https://www.okx.com/docs-v5/en/#order-book-trading-trade-get-order-history-last-7-days>.
//!
//! It never touches a socket or reads a clock.

mod batch;
mod catalog;
mod request;

use std::net::IpAddr;

use serde_json::{json, Map, Value};

use crate::config::{LimitType, Profile};
use crate::engine::book::{fmt_e8, quote, OrdType, Order, Side, Status};
use crate::engine::state::{Admission, Venue};
use crate::http::{Request, Response};
use crate::limits::Key;
use crate::params::{parse_iso8601_ms, sign_base64};
use crate::profiles::instruments::{okx_refusal, rules};

/// An admitted OKX request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum OkxOp {
    Time,
    /// `public/instruments` of an `instType` (`true`: SWAP, where the one is
    /// listed).
    Instruments(bool),
    /// `asset/currencies`.
    Currencies,
    /// `trade/batch-orders`: up to 20 placements, each with its own fate.
    Batch(Vec<OkxOp>),
    Books(usize),
    Balance,
    Place {
        side: Side,
        kind: OrdType,
        qty_e8: u64,
        price_e8: u64,
        cl_id: Option<String>,
    },
    Cancel(Target),
    Amend {
        target: Target,
        qty_e8: Option<u64>,
        price_e8: Option<u64>,
    },
    Query(Target),
    Pending,
    /// `GET /api/v5/market/ticker`.
    Ticker,
    /// `GET /api/v5/market/candles`: `limit` bars of `bar_ms`, newest first.
    Candles {
        bar_ms: i64,
        limit: usize,
    },
    /// `GET /api/v5/market/trades`: the most recent fills.
    Trades(usize),
    /// `GET /api/v5/trade/fills`: the account's fills, newest first.
    Fills(usize),
    /// `GET /api/v5/trade/orders-history`: the account's finished orders.
    History(usize),
    /// `POST /api/v5/trade/cancel-all-after`: the account's switch, seconds (0
    /// disarms).
    CancelAllAfter(i64),
}

impl OkxOp {
    pub(crate) fn changes_orders(&self) -> bool {
        matches!(
            self,
            OkxOp::Place { .. } | OkxOp::Cancel(_) | OkxOp::Amend { .. } | OkxOp::Batch(_)
        )
    }
}

/// An order named by `ordId` or `clOrdId`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    Id(String),
    Client(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Endpoint {
    Time,
    Books,
    Balance,
    Place,
    Cancel,
    Amend,
    Query,
    Pending,
    Ticker,
    Candles,
    Trades,
    Fills,
    History,
    CancelAllAfter,
    Instruments,
    Currencies,
    Batch,
}

impl Endpoint {
    fn route(method: &str, path: &str) -> Option<Endpoint> {
        Some(match (method, path) {
            ("GET", "/api/v5/public/time") => Endpoint::Time,
            ("GET", "/api/v5/market/books") => Endpoint::Books,
            ("GET", "/api/v5/account/balance") => Endpoint::Balance,
            ("POST", "/api/v5/trade/order") => Endpoint::Place,
            ("POST", "/api/v5/trade/cancel-order") => Endpoint::Cancel,
            ("POST", "/api/v5/trade/amend-order") => Endpoint::Amend,
            ("GET", "/api/v5/trade/order") => Endpoint::Query,
            ("GET", "/api/v5/trade/orders-pending") => Endpoint::Pending,
            ("GET", "/api/v5/market/ticker") => Endpoint::Ticker,
            ("GET", "/api/v5/market/candles") => Endpoint::Candles,
            ("GET", "/api/v5/market/trades") => Endpoint::Trades,
            ("GET", "/api/v5/trade/fills") => Endpoint::Fills,
            ("GET", "/api/v5/trade/orders-history") => Endpoint::History,
            ("POST", "/api/v5/trade/cancel-all-after") => Endpoint::CancelAllAfter,
            ("GET", "/api/v5/public/instruments") => Endpoint::Instruments,
            ("GET", "/api/v5/asset/currencies") => Endpoint::Currencies,
            ("POST", "/api/v5/trade/batch-orders") => Endpoint::Batch,
            _ => return None,
        })
    }

    fn private(self) -> bool {
        !matches!(
            self,
            Endpoint::Time
                | Endpoint::Books
                | Endpoint::Ticker
                | Endpoint::Candles
                | Endpoint::Trades
                | Endpoint::Instruments
        )
    }

    /// The limits a request of this endpoint counts against.
    fn limits(self) -> &'static [LimitType] {
        match self {
            // Cancel All After's own limit (1 a second per user and tag), and
            // the instruments' and currencies' (20 and 6 per second), are not
            // emulated.
            Endpoint::Time
            | Endpoint::Balance
            | Endpoint::CancelAllAfter
            | Endpoint::Instruments
            | Endpoint::Currencies => &[],
            Endpoint::Books => &[LimitType::OkxBooks],
            // A batch is charged once here (its own limit, 300 orders per 2 s,
            // is not emulated).
            Endpoint::Place | Endpoint::Batch => &[LimitType::OkxOrder, LimitType::OkxSubAccount],
            Endpoint::Amend => &[LimitType::OkxAmend, LimitType::OkxSubAccount],
            Endpoint::Cancel => &[LimitType::OkxCancel],
            Endpoint::Query | Endpoint::Pending => &[LimitType::OkxQuery],
            Endpoint::Ticker => &[LimitType::OkxTicker],
            Endpoint::Candles => &[LimitType::OkxCandles],
            Endpoint::Trades => &[LimitType::OkxTrades],
            Endpoint::Fills => &[LimitType::OkxFills],
            Endpoint::History => &[LimitType::OkxHistory],
        }
    }
}

fn answer(status: u16, code: &str, msg: &str, data: Value) -> Response {
    Response::json(
        status,
        json!({ "code": code, "msg": msg, "data": data }).to_string(),
    )
}

/// A failed order operation: `code` "1", the order's own `sCode` in `data[0]`.
fn order_failed(s_code: &str, s_msg: &str, ord_id: &str, cl_id: &str) -> Response {
    answer(
        200,
        "1",
        "All operations failed",
        json!([{ "clOrdId": cl_id, "ordId": ord_id, "tag": "", "sCode": s_code, "sMsg": s_msg }]),
    )
}

/// The answer of a 5xx fault.
pub(crate) fn server_error(executed: bool) -> Response {
    if executed {
        answer(
            500,
            "50004",
            "Endpoint request timeout (does not mean that the request was successful or failed, please check the request result)",
            json!([]),
        )
    } else {
        answer(
            503,
            "50001",
            "Service temporarily unavailable. Please try again later",
            json!([]),
        )
    }
}

/// One tick of the synthetic book (0.01), in units of 1e-8.
const TICK_E8: u64 = 1_000_000;

/// A candle `bar` (`1m`, `1H`, `1D` ...) in milliseconds; `1M` is 30 days.
fn bar_ms(b: &str) -> Option<i64> {
    const MIN: i64 = 60_000;
    Some(match b {
        "1s" => 1_000,
        "1m" => MIN,
        "3m" => 3 * MIN,
        "5m" => 5 * MIN,
        "15m" => 15 * MIN,
        "30m" => 30 * MIN,
        "1H" => 60 * MIN,
        "2H" => 120 * MIN,
        "4H" => 240 * MIN,
        "6H" | "6Hutc" => 360 * MIN,
        "12H" | "12Hutc" => 720 * MIN,
        "1D" | "1Dutc" => 1_440 * MIN,
        "2D" | "2Dutc" => 2 * 1_440 * MIN,
        "3D" | "3Dutc" => 3 * 1_440 * MIN,
        "1W" | "1Wutc" => 7 * 1_440 * MIN,
        "1M" | "1Mutc" => 30 * 1_440 * MIN,
        _ => return None,
    })
}

/// OKX writes decimals without trailing zeros.
fn fmt_dec(v: u64) -> String {
    let s = fmt_e8(v);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn text(body: &Map<String, Value>, query: &[(String, String)], name: &str) -> Option<String> {
    if let Some(Value::String(s)) = body.get(name) {
        return Some(s.clone());
    }
    query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
}

impl Venue {
    /// Everything OKX decides at receipt.
    pub(crate) fn admit_okx(&mut self, req: &Request, ip: IpAddr, now: i64) -> Admission<OkxOp> {
        let Some(endpoint) = Endpoint::route(&req.method, &req.path) else {
            return Admission::Final(answer(404, "404", "Not Found", json!([])));
        };
        let query = match crate::params::Params::parse(&req.query, b"") {
            Ok(p) => p.pairs().to_vec(),
            Err(name) => {
                return Admission::Final(answer(
                    400,
                    "50014",
                    &format!("Parameter {name} can not be empty"),
                    json!([]),
                ))
            }
        };
        let mut batch = Vec::new();
        let body = if req.method == "POST" {
            match serde_json::from_slice::<Value>(&req.body) {
                Ok(Value::Object(m)) if endpoint != Endpoint::Batch => m,
                Ok(Value::Array(a)) if endpoint == Endpoint::Batch => {
                    if !(1..=20).contains(&a.len()) {
                        let msg = "Maximum 20 orders can be placed in bulk";
                        return Admission::Final(answer(200, "51111", msg, json!([])));
                    }
                    batch = a;
                    Map::new()
                }
                _ => {
                    return Admission::Final(answer(
                        400,
                        "50000",
                        "Body can not be empty",
                        json!([]),
                    ))
                }
            }
        } else {
            Map::new()
        };
        let mut account = 0;
        if endpoint.private() {
            account = match self.authenticate_okx(req, now) {
                Ok(a) => a,
                Err(r) => return Admission::Final(r),
            };
            self.phantom_orders(ip, account, LimitType::OkxOrder, now);
        }
        for &kind in endpoint.limits() {
            let key = if kind.per_ip() {
                Key::Ip(ip)
            } else {
                Key::Account(account)
            };
            let Some(l) = self.limits.iter_mut().find(|l| l.spec.kind == kind) else {
                continue;
            };
            if l.charge(key, 1, now) > l.spec.limit {
                self.report.throttled += 1;
                let (code, msg) = if kind == LimitType::OkxSubAccount {
                    ("50061", "Sub-account rate limit exceeded")
                } else {
                    (
                        "50011",
                        "Rate limit reached. Please refer to API documentation and throttle requests accordingly",
                    )
                };
                return Admission::Final(answer(429, code, msg, json!([])));
            }
        }
        let op = if endpoint == Endpoint::Batch {
            let mut ops = Vec::with_capacity(batch.len());
            for v in &batch {
                let Value::Object(m) = v else {
                    return Admission::Final(answer(
                        200,
                        "50000",
                        "Body can not be empty",
                        json!([]),
                    ));
                };
                match self.okx_op(Endpoint::Place, m, &[]) {
                    Ok(op) => ops.push(op),
                    Err(r) => return Admission::Final(r),
                }
            }
            OkxOp::Batch(ops)
        } else {
            match self.okx_op(endpoint, &body, &query) {
                Ok(op) => op,
                Err(r) => return Admission::Final(r),
            }
        };
        let fault = self.draw_fault(op.changes_orders());
        Admission::Run {
            op,
            account,
            headers: Vec::new(),
            fault,
        }
    }

    fn authenticate_okx(&mut self, req: &Request, now: i64) -> Result<usize, Response> {
        let unauthorized = |code: &str, msg: &str| answer(401, code, msg, json!([]));
        let key = req.header("ok-access-key").unwrap_or("");
        if key.is_empty() {
            self.report.api_key_rejects += 1;
            return Err(unauthorized(
                "50103",
                "Request header OK-ACCESS-KEY cannot be empty.",
            ));
        }
        let Some(account) = self.cfg.accounts.iter().position(|a| a.api_key == key) else {
            self.report.api_key_rejects += 1;
            return Err(unauthorized("50111", "Invalid OK-ACCESS-KEY."));
        };
        if req.header("ok-access-passphrase") != Some(self.cfg.passphrase.as_str()) {
            self.report.api_key_rejects += 1;
            return Err(unauthorized(
                "50105",
                "Request header OK-ACCESS-PASSPHRASE incorrect.",
            ));
        }
        let ts_text = req.header("ok-access-timestamp").unwrap_or("");
        let Some(ts) = parse_iso8601_ms(ts_text) else {
            self.report.timestamp_rejects += 1;
            return Err(unauthorized("50112", "Invalid OK-ACCESS-TIMESTAMP."));
        };
        let path = if req.query.is_empty() {
            req.path.clone()
        } else {
            format!("{}?{}", req.path, req.query)
        };
        let prehash = format!(
            "{ts_text}{}{path}{}",
            req.method,
            String::from_utf8_lossy(&req.body)
        );
        let expected = sign_base64(&prehash, &self.cfg.accounts[account].secret);
        if req.header("ok-access-sign") != Some(expected.as_str()) {
            self.report.signature_rejects += 1;
            return Err(unauthorized("50113", "Invalid signature."));
        }
        if (now - ts).abs() > 30_000 {
            self.report.timestamp_rejects += 1;
            return Err(unauthorized("50102", "Timestamp request expired."));
        }
        Ok(account)
    }

    fn find_okx(&self, account: usize, t: &Target) -> Option<usize> {
        let i = match t {
            Target::Id(id) => *self.by_id.get(&id.parse::<u64>().ok()?)?,
            Target::Client(c) => *self.by_client.get(&(account, c.clone()))?,
        };
        (self.orders[i].account == account).then_some(i)
    }

    /// Runs an admitted OKX request.
    pub(crate) fn execute_okx(&mut self, op: OkxOp, account: usize, now: i64) -> Response {
        let ok = |data: Value| answer(200, "0", "", data);
        let names = |t: &Target| match t {
            Target::Id(i) => (i.clone(), String::new()),
            Target::Client(c) => (String::new(), c.clone()),
        };
        match op {
            OkxOp::Time => ok(json!([{ "ts": now.to_string() }])),
            OkxOp::Instruments(listed) => ok(self.okx_instruments(listed)),
            OkxOp::Currencies => ok(catalog::currencies()),
            OkxOp::CancelAllAfter(s) => {
                let at = self.arm_switch(account, None, s * 1000, now);
                ok(json!([{ "triggerTime": at.to_string(), "tag": "", "ts": now.to_string() }]))
            }
            OkxOp::Balance => ok(json!([{
                "totalEq": "100000",
                "details": [{ "ccy": "USDT", "eq": "100000", "availBal": "100000", "frozenBal": "0" }]
            }])),
            OkxOp::Books(sz) => {
                let (bids, asks) = self.ladder(sz, |p| json!([fmt_dec(p), "1", "0", "1"]));
                ok(json!([{ "asks": asks, "bids": bids, "ts": now.to_string() }]))
            }
            OkxOp::Place { .. } => match self.okx_place(account, op, now) {
                Ok(v) => ok(json!([v])),
                Err(v) => answer(200, "1", "All operations failed", json!([v])),
            },
            OkxOp::Batch(ops) => self.okx_batch(account, ops, now),
            OkxOp::Cancel(t) => {
                let Some(i) = self
                    .find_okx(account, &t)
                    .filter(|&i| self.orders[i].status == Status::New)
                else {
                    let (id, cl) = names(&t);
                    return order_failed(
                        "51400",
                        "Order cancellation failed as the order has been filled, canceled or does not exist",
                        &id,
                        &cl,
                    );
                };
                self.cancel_order(i, now);
                let o = &self.orders[i];
                ok(json!([{
                    "clOrdId": o.client_id,
                    "ordId": o.order_id.to_string(),
                    "ts": now.to_string(),
                    "sCode": "0",
                    "sMsg": "",
                }]))
            }
            OkxOp::Amend {
                target,
                qty_e8,
                price_e8,
            } => {
                let Some(i) = self
                    .find_okx(account, &target)
                    .filter(|&i| self.orders[i].status == Status::New)
                else {
                    let (id, cl) = names(&target);
                    return order_failed(
                        "51503",
                        "Order modification failed as the order has been filled, canceled or does not exist",
                        &id,
                        &cl,
                    );
                };
                let o = &self.orders[i];
                let (price, qty) = (price_e8.unwrap_or(o.price_e8), qty_e8.unwrap_or(o.qty_e8));
                if let Err(b) = rules(Profile::Okx).check_filters(o.kind, price, qty) {
                    let (code, msg) = okx_refusal(b);
                    let (id, cl) = (o.order_id.to_string(), o.client_id.clone());
                    return order_failed(code, &msg, &id, &cl);
                }
                self.amend_order(i, qty_e8, price_e8, now);
                let o = &self.orders[i];
                ok(json!([{
                    "clOrdId": o.client_id,
                    "ordId": o.order_id.to_string(),
                    "reqId": "",
                    "ts": now.to_string(),
                    "sCode": "0",
                    "sMsg": "",
                }]))
            }
            OkxOp::Query(t) => match self.find_okx(account, &t) {
                Some(i) => ok(json!([self.okx_order_json(&self.orders[i])])),
                None => answer(200, "51603", "Order does not exist", json!([])),
            },
            OkxOp::Ticker => {
                let mid = self.cfg.mid_price_e8;
                let m = fmt_dec(mid);
                ok(json!([{
                    "instType": "SWAP", "instId": self.cfg.symbol, "last": m, "lastSz": "0",
                    "askPx": fmt_dec(mid + TICK_E8), "askSz": "1",
                    "bidPx": fmt_dec(mid.saturating_sub(TICK_E8)), "bidSz": "1",
                    "open24h": m, "high24h": m, "low24h": m, "volCcy24h": "0", "vol24h": "0",
                    "sodUtc0": m, "sodUtc8": m, "ts": now.to_string(),
                }]))
            }
            OkxOp::Candles { bar_ms, limit } => {
                let m = fmt_dec(self.cfg.mid_price_e8);
                let last = now.div_euclid(bar_ms) * bar_ms;
                let list: Vec<Value> = (0..limit as i64)
                    .map(|i| last - i * bar_ms)
                    .filter(|&t| t >= 0)
                    .map(|t| {
                        let confirm = if t == last { "0" } else { "1" };
                        json!([t.to_string(), m, m, m, m, "0", "0", "0", confirm])
                    })
                    .collect();
                ok(Value::Array(list))
            }
            OkxOp::Trades(limit) => {
                let list: Vec<Value> = self
                    .orders
                    .iter()
                    .rev()
                    .filter(|o| o.executed_e8 > 0)
                    .take(limit)
                    .map(|o| {
                        json!({
                            "instId": self.cfg.symbol,
                            "side": if o.side == Side::Buy { "buy" } else { "sell" },
                            "sz": fmt_dec(o.executed_e8),
                            "px": fmt_dec(o.price_e8),
                            "tradeId": o.order_id.to_string(),
                            "ts": o.update_time.to_string(),
                        })
                    })
                    .collect();
                ok(Value::Array(list))
            }
            OkxOp::Fills(limit) => {
                let list: Vec<Value> = self
                    .orders
                    .iter()
                    .rev()
                    .filter(|o| o.account == account && o.executed_e8 > 0)
                    .take(limit)
                    .map(|o| {
                        json!({
                            "instType": "SWAP",
                            "instId": self.cfg.symbol,
                            "tradeId": o.order_id.to_string(),
                            "ordId": o.order_id.to_string(),
                            "clOrdId": o.client_id,
                            "billId": o.order_id.to_string(),
                            "subType": "1",
                            "tag": "",
                            "fillPx": fmt_dec(o.price_e8),
                            "fillSz": fmt_dec(o.executed_e8),
                            "side": if o.side == Side::Buy { "buy" } else { "sell" },
                            "posSide": "net",
                            "execType": "T",
                            "feeCcy": "USDT",
                            "fee": "0",
                            "ts": o.update_time.to_string(),
                            "fillTime": o.update_time.to_string(),
                        })
                    })
                    .collect();
                ok(Value::Array(list))
            }
            OkxOp::History(limit) => {
                let list: Vec<Value> = self
                    .orders
                    .iter()
                    .rev()
                    .filter(|o| o.account == account && o.status != Status::New)
                    .take(limit)
                    .map(|o| self.okx_order_json(o))
                    .collect();
                ok(Value::Array(list))
            }
            OkxOp::Pending => {
                let list: Vec<Value> = self
                    .open_orders(account)
                    .map(|o| self.okx_order_json(o))
                    .collect();
                ok(Value::Array(list))
            }
        }
    }

    fn okx_order_json(&self, o: &Order) -> Value {
        let state = match o.status {
            Status::New => "live",
            Status::Filled => "filled",
            Status::Canceled | Status::Expired => "canceled",
        };
        json!({
            "instType": "SWAP",
            "instId": self.cfg.symbol,
            "ordId": o.order_id.to_string(),
            "clOrdId": o.client_id,
            "tag": "",
            "px": if o.kind == OrdType::Market { String::new() } else { fmt_dec(o.price_e8) },
            "sz": fmt_dec(o.qty_e8),
            "ordType": if o.kind == OrdType::Market { "market" } else { "limit" },
            "side": if o.side == Side::Buy { "buy" } else { "sell" },
            "posSide": "net",
            "tdMode": "cross",
            "accFillSz": fmt_dec(o.executed_e8),
            "fillPx": if o.executed_e8 > 0 { fmt_dec(o.price_e8) } else { String::new() },
            "avgPx": if o.executed_e8 > 0 { fmt_dec(o.price_e8) } else { String::new() },
            "fillNotionalUsd": fmt_dec(quote(o.price_e8, o.executed_e8)),
            "state": state,
            "cTime": o.time.to_string(),
            "uTime": o.update_time.to_string(),
        })
    }
}
