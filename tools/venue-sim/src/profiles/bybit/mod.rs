//! The Bybit v5 profile (linear contracts): what happens to one request.
//!
//! - IP limit: 600 requests in any 5 s per IP; over it, "403, access too frequent"
//!   and a ban of at least 10 minutes (no 429 step, no `Retry-After`).
//! - Per-UID limits per endpoint over a rolling second; over one, HTTP 200 with
//!   `retCode` 10006 "Too many visits!". Every private answer carries
//!   `X-Bapi-Limit` (the endpoint's limit), `X-Bapi-Limit-Status` (what is left)
//!   and `X-Bapi-Limit-Reset-Timestamp` (the current time, or when the limit resets
//!   if it was exceeded).
//! - Signing: `X-BAPI-API-KEY`, `X-BAPI-TIMESTAMP`, `X-BAPI-RECV-WINDOW` (default
//!   5000), `X-BAPI-SIGN` = hex HMAC-SHA256 of timestamp + key + recv window +
//!   (the query string for GET, the raw JSON body for POST); 10003 bad key, 10004
//!   bad signature, 10002 when not `server - recvWindow <= timestamp < server + 1000`.
//! - Answers `{"retCode","retMsg","result","retExtInfo","time"}`; order ids are
//!   strings, `orderLinkId` must be unique (110072), an order that is not open
//!   cannot be amended or canceled (110001). `order/create-batch` places up to 20
//!   orders each on its own, each counted on the create limit (`batch.rs`).
//!   `order/cancel-batch` cancels up to 20 orders each on its own, counted per
//!   order on the batch cancel's own limit (`cancel_batch.rs`).
//! - Faults: the 5xx faults answer HTTP 500 with `retCode` 10016 after executing
//!   and 10000 "Server Timeout" without; Bybit documents neither as "not run".
//!
//! - `order/realtime` by `orderId` or `orderLinkId` finds an open order or one of
//!   the account's [`Config::bybit_closed_kept`](crate::Config) (500) most recently
//!   closed ("openOnly param will be ignored when query by orderId or
//!   orderLinkId"); without either it lists the open orders (`openOnly=0`, the
//!   default) or those closed ones (`openOnly=1`). The account played is a
//!   unified one (UTA 2.0): `openOnly=2` (UTA 1.0 inverse, classic accounts) is
//!   refused as a params error. Those lists come by pages, newest first:
//!   `limit` 1 to 50 (20 by default; out of range, 10001), `nextPageCursor` the
//!   cursor of the next page ("" on the last one), which `cursor` asks
//!   (<https://bybit-exchange.github.io/docs/v5/order/open-order>). The
//!   emulator's cursor, like Bybit's, is percent-encoded text
//!   (`page_args%3D<orderId>%26`) and names the page's last order, so an order
//!   that closes while a client pages does not shift the next page.
//!   `order/history` finds an order by `orderId` or
//!   `orderLinkId` however long ago it closed.
//! - Market data (`market/tickers`, `kline`, `recent-trade`, `orderbook`) counts
//!   only against the IP limit; `execution/list` and `order/history` have their
//!   own per-UID limits. The market is synthetic (the mid price, the emulator's
//!   own fills as trades, flat candles).
//!
//! Sources: <https://bybit-exchange.github.io/docs/v5/rate-limit>,
//! <https://bybit-exchange.github.io/docs/v5/market/tickers>,
//! <https://bybit-exchange.github.io/docs/v5/market/kline>,
//! <https://bybit-exchange.github.io/docs/v5/market/recent-trade>,
//! <https://bybit-exchange.github.io/docs/v5/order/execution>,
//! <https://bybit-exchange.github.io/docs/v5/order/order-list>,
//! <https://bybit-exchange.github.io/docs/v5/order/open-order>,
//! <https://bybit-exchange.github.io/docs/v5/error>,
//! <https://bybit-exchange.github.io/docs/v5/guide> (authentication),
//! <https://bybit-exchange.github.io/docs/v5/order/create-order>.
//!
//! - DCP: `POST /v5/order/disconnected-cancel-all` takes `product` (`OPTIONS`,
//!   the default, `DERIVATIVES` or `SPOT`) and `timeWindow`, an integer of 3 to
//!   300 s; anything else is 10001 (a parameter). An account Bybit has not
//!   enabled DCP for ([`Config::bybit_dcp`](crate::Config), off by default) is
//!   refused with 10005 "Permission denied": Bybit documents no code of its own
//!   for that case, 10005 is its documented permission error. A taken window
//!   answers the page's example, `{"retCode":0,"retMsg":"success"}`, and is the
//!   product's window from then on (10 s until one is taken).
//! - The private WebSocket (`/v5/private`, [`private`]): `auth`, `subscribe`
//!   and `ping`; the `dcp.future`, `dcp.spot` and `dcp.option` topics hold their
//!   product's DCP, and when the last connection of an account subscribed to
//!   `dcp.future` ends, the venue arms a countdown of the DERIVATIVES window that
//!   cancels the account's open orders unless a new `dcp.future` subscription
//!   comes first. [`Config::bybit_private_ws`](crate::Config) false answers the
//!   upgrade 404.
//!   Sources: <https://bybit-exchange.github.io/docs/v5/order/dcp>,
//!   <https://bybit-exchange.github.io/docs/v5/websocket/private/dcp>,
//!   <https://bybit-exchange.github.io/docs/v5/ws/connect>.
//!
//! It never touches a socket or reads a clock.

use std::net::IpAddr;

use serde_json::{json, Map, Value};

use crate::config::{LimitType, Profile};
use crate::engine::book::{fmt_e8, quote, OrdType, Side, Status};
use crate::engine::state::{Admission, Venue};
use crate::http::{json_text, Request, Response};
use crate::json_write::Obj;
use crate::limits::Key;
use crate::profiles::instruments::{bybit_refusal, rules};

mod auth;
mod batch;
mod cancel_batch;
mod catalog;
mod orders;

use batch::batch_len;
pub(crate) mod private;
mod request;

use private::DcpProduct;

const DEFAULT_RECV_WINDOW: i64 = 5_000;
/// One tick of the synthetic book (0.01), in units of 1e-8.
const TICK_E8: u64 = 1_000_000;

/// A kline `interval` (minutes, or `D`, `W`, `M`) in milliseconds; `M` is 30 days.
fn kline_interval_ms(i: &str) -> Option<i64> {
    const MIN: i64 = 60_000;
    Some(match i {
        "D" => 1_440 * MIN,
        "W" => 7 * 1_440 * MIN,
        "M" => 30 * 1_440 * MIN,
        _ => match i.parse::<i64>().ok()? {
            m @ (1 | 3 | 5 | 15 | 30 | 60 | 120 | 240 | 360 | 720) => m * MIN,
            _ => return None,
        },
    })
}

/// `limit` in `1..=max`, `default` when absent.
fn limit(f: &Fields, default: usize, max: usize) -> Result<usize, String> {
    match f.get("limit") {
        None => Ok(default),
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| "limit invalid".to_string()),
    }
}

/// An admitted Bybit request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BybitOp {
    Time,
    Orderbook(usize),
    Create {
        side: Side,
        kind: OrdType,
        tif: &'static str,
        qty_e8: u64,
        price_e8: u64,
        link_id: Option<String>,
    },
    Amend {
        target: Target,
        qty_e8: Option<u64>,
        price_e8: Option<u64>,
    },
    Cancel(Target),
    /// `/v5/order/create-batch`: each item a `Create` (see `batch.rs`).
    CreateBatch(Vec<BybitOp>),
    /// `/v5/order/cancel-batch`: each item a cancel; the first `room` fit the
    /// limit, the rest are refused alone (see `cancel_batch.rs`).
    CancelBatch {
        targets: Vec<Target>,
        room: usize,
    },
    /// `/v5/order/realtime`: one order by id, or a page of `limit` open orders
    /// (the recently closed ones with `openOnly=1`), newest first, after the
    /// order `cursor` names (`orders.rs`).
    Realtime {
        target: Option<Target>,
        closed: bool,
        limit: usize,
        cursor: Option<u64>,
    },
    Wallet,
    /// `/v5/market/tickers`.
    Tickers,
    /// `/v5/market/kline`: `limit` candles of `interval_ms`, newest first.
    Kline {
        interval_ms: i64,
        limit: usize,
    },
    /// `/v5/market/recent-trade`: the most recent fills.
    RecentTrade(usize),
    /// `/v5/execution/list`: the account's fills, newest first.
    Executions(usize),
    /// `/v5/order/history`: the account's orders, newest first (one, by id).
    History {
        limit: usize,
        target: Option<Target>,
    },
    /// `/v5/order/disconnected-cancel-all`: the DCP window of a product
    /// (whether DCP is enabled is checked at admission).
    SetDcp {
        product: DcpProduct,
        window_ms: i64,
    },
    /// `/v5/market/instruments-info` of a category (`true`: linear, the one
    /// listed).
    Instruments(bool),
    /// `/v5/asset/coin/query-info`.
    Coins,
    /// `/v5/user/query-api`.
    ApiKey,
    /// `/v5/account/info`.
    AccountInfo,
    /// `/v5/order/cancel-all`.
    CancelAll,
}

impl BybitOp {
    pub(crate) fn changes_orders(&self) -> bool {
        matches!(
            self,
            BybitOp::Create { .. }
                | BybitOp::CreateBatch(_)
                | BybitOp::CancelBatch { .. }
                | BybitOp::Amend { .. }
                | BybitOp::Cancel(_)
                | BybitOp::CancelAll
        )
    }
}

/// An order named by `orderId` or `orderLinkId`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    Id(String),
    Link(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Endpoint {
    Time,
    Orderbook,
    Create,
    CreateBatch,
    CancelBatch,
    Amend,
    Cancel,
    Realtime,
    Wallet,
    Tickers,
    Kline,
    RecentTrade,
    Executions,
    History,
    Dcp,
    Instruments,
    Coins,
    ApiKey,
    AccountInfo,
    CancelAll,
}

impl Endpoint {
    fn route(method: &str, path: &str) -> Option<Endpoint> {
        Some(match (method, path) {
            ("GET", "/v5/market/time") => Endpoint::Time,
            ("GET", "/v5/market/orderbook") => Endpoint::Orderbook,
            ("POST", "/v5/order/create") => Endpoint::Create,
            ("POST", "/v5/order/create-batch") => Endpoint::CreateBatch,
            ("POST", "/v5/order/cancel-batch") => Endpoint::CancelBatch,
            ("POST", "/v5/order/amend") => Endpoint::Amend,
            ("POST", "/v5/order/cancel") => Endpoint::Cancel,
            ("GET", "/v5/order/realtime") => Endpoint::Realtime,
            ("GET", "/v5/account/wallet-balance") => Endpoint::Wallet,
            ("GET", "/v5/market/tickers") => Endpoint::Tickers,
            ("GET", "/v5/market/kline") => Endpoint::Kline,
            ("GET", "/v5/market/recent-trade") => Endpoint::RecentTrade,
            ("GET", "/v5/execution/list") => Endpoint::Executions,
            ("GET", "/v5/order/history") => Endpoint::History,
            ("POST", "/v5/order/disconnected-cancel-all") => Endpoint::Dcp,
            ("GET", "/v5/market/instruments-info") => Endpoint::Instruments,
            ("GET", "/v5/asset/coin/query-info") => Endpoint::Coins,
            ("GET", "/v5/user/query-api") => Endpoint::ApiKey,
            ("GET", "/v5/account/info") => Endpoint::AccountInfo,
            ("POST", "/v5/order/cancel-all") => Endpoint::CancelAll,
            _ => return None,
        })
    }

    fn limit_type(self) -> Option<LimitType> {
        Some(match self {
            Endpoint::Time
            | Endpoint::Orderbook
            | Endpoint::Tickers
            | Endpoint::Kline
            | Endpoint::RecentTrade
            | Endpoint::Instruments
            // Signed, but no per-UID limit of its own on the rate-limit page.
            | Endpoint::Dcp
            | Endpoint::Coins
            | Endpoint::ApiKey
            | Endpoint::AccountInfo => return None,
            // The cancel-all limit is its own; counted on the cancel limit here.
            Endpoint::CancelAll => LimitType::BybitCancel,
            Endpoint::Executions => LimitType::BybitExecution,
            Endpoint::History => LimitType::BybitHistory,
            Endpoint::Create | Endpoint::CreateBatch => LimitType::BybitCreate,
            Endpoint::Amend => LimitType::BybitAmend,
            Endpoint::Cancel => LimitType::BybitCancel,
            Endpoint::CancelBatch => LimitType::BybitCancelBatch,
            Endpoint::Realtime => LimitType::BybitRealtime,
            Endpoint::Wallet => LimitType::BybitWallet,
        })
    }
}

/// Bybit's envelope around `result`, JSON text (written as the `json!` map
/// `{"retCode","retMsg","result","retExtInfo":{},"time"}` was).
fn envelope(code: i64, msg: &str, result: &str, now: i64) -> String {
    envelope_ext(code, msg, result, "{}", now)
}

/// [`envelope`] with `retExtInfo` (JSON text too).
fn envelope_ext(code: i64, msg: &str, result: &str, ext: &str, now: i64) -> String {
    let mut out = String::with_capacity(result.len() + ext.len() + msg.len() + 64);
    Obj::new(&mut out)
        .int("retCode", code)
        .str("retMsg", msg)
        .raw("result", result)
        .raw("retExtInfo", ext)
        .int("time", now)
        .end();
    out
}

fn fail(code: i64, msg: &str, now: i64) -> Response {
    Response::json(200, envelope(code, msg, "{}", now))
}

/// The answer to a banned IP. It is the front server's, not the API's: plain
/// text, no `retCode` (the rate-limit page's "403, access too frequent").
fn too_frequent() -> Response {
    Response {
        content_type: "text/plain",
        ..Response::json(403, "access too frequent".to_string())
    }
}

/// The answer of a 5xx fault.
pub(crate) fn server_error(executed: bool, now: i64) -> Response {
    let (code, msg) = if executed {
        (10016, "Internal server error.")
    } else {
        (10000, "Server Timeout")
    };
    Response::json(500, envelope(code, msg, "{}", now))
}

/// Bybit writes decimals without trailing zeros.
fn fmt_dec(v: u64) -> String {
    let s = fmt_e8(v);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

struct Fields {
    body: Map<String, Value>,
    query: Vec<(String, String)>,
}

impl Fields {
    fn get(&self, name: &str) -> Option<String> {
        if let Some(v) = self.body.get(name) {
            return match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            };
        }
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }
}

impl Venue {
    /// Everything Bybit decides at receipt.
    pub(crate) fn admit_bybit(
        &mut self,
        req: &Request,
        ip: IpAddr,
        now: i64,
    ) -> Admission<BybitOp> {
        if self.ips.get(&ip).is_some_and(|s| s.banned_until > now) {
            self.report.banned_requests += 1;
            return Admission::Final(too_frequent());
        }
        // The IP limit: over it is a ban at once.
        let mut over = false;
        for l in &mut self.limits {
            if l.spec.kind == LimitType::RawRequests {
                over |= l.charge(Key::Ip(ip), 1, now) > l.spec.limit;
            }
        }
        if over {
            let level = self.ips.get(&ip).map_or(0, |s| s.ban_level);
            let d = self.cfg.ban.duration_ms(level);
            self.ban(ip, d, now);
            self.report.banned_requests += 1;
            return Admission::Final(too_frequent());
        }
        let Some(endpoint) = Endpoint::route(&req.method, &req.path) else {
            return Admission::Final(Response::json(
                404,
                json!({ "retCode": 404, "retMsg": "Not Found" }).to_string(),
            ));
        };
        let query = match crate::params::Params::parse(&req.query, b"") {
            Ok(p) => p.pairs().to_vec(),
            Err(name) => {
                return Admission::Final(fail(10001, &format!("params error: {name}"), now))
            }
        };
        let body = if req.method == "POST" {
            match serde_json::from_slice::<Value>(&req.body) {
                Ok(Value::Object(m)) => m,
                _ => {
                    return Admission::Final(fail(
                        10001,
                        "params error: the body is not a JSON object",
                        now,
                    ))
                }
            }
        } else {
            Map::new()
        };
        let f = Fields { body, query };

        let mut account = 0;
        let mut headers = Vec::new();
        let mut room = u64::MAX;
        let signed = matches!(
            endpoint,
            Endpoint::Dcp | Endpoint::Coins | Endpoint::ApiKey | Endpoint::AccountInfo
        );
        if endpoint.limit_type().is_some() || signed {
            account = match self.authenticate_bybit(req, now) {
                Ok(a) => a,
                Err(r) => return Admission::Final(r),
            };
        }
        if let Some(kind) = endpoint.limit_type() {
            self.phantom_orders(ip, account, LimitType::BybitCreate, now);
            let Some(l) = self.limits.iter_mut().find(|l| l.spec.kind == kind) else {
                return Admission::Final(fail(10001, "endpoint not configured", now));
            };
            let n = batch_len(endpoint, &f);
            let used = l.charge(Key::Account(account), n, now);
            let limit = l.spec.limit;
            // The orders of a batch cancel that still fit run (`cancel_batch.rs`).
            room = limit.saturating_sub(used.saturating_sub(n));
            let reset = if used > limit {
                l.window_end_for(Key::Account(account), now)
            } else {
                now
            };
            headers.push(("X-Bapi-Limit".to_string(), limit.to_string()));
            headers.push((
                "X-Bapi-Limit-Status".to_string(),
                limit.saturating_sub(used).to_string(),
            ));
            headers.push((
                "X-Bapi-Limit-Reset-Timestamp".to_string(),
                reset.to_string(),
            ));
            if used > limit && (endpoint != Endpoint::CancelBatch || room == 0) {
                self.report.throttled += 1;
                let mut r = fail(10006, "Too many visits!", now);
                r.headers = headers;
                return Admission::Final(r);
            }
        }
        let op = match self.bybit_op(endpoint, &f) {
            Ok(BybitOp::CancelBatch { targets, .. }) => BybitOp::CancelBatch {
                room: usize::try_from(room).unwrap_or(usize::MAX),
                targets,
            },
            Ok(op) => op,
            Err(msg) => {
                let mut r = fail(10001, &format!("params error: {msg}"), now);
                r.headers = headers;
                return Admission::Final(r);
            }
        };
        if matches!(op, BybitOp::SetDcp { .. }) && !self.cfg.bybit_dcp {
            let mut r = fail(
                10005,
                "Permission denied, please check your API key permissions.",
                now,
            );
            r.headers = headers;
            return Admission::Final(r);
        }
        let fault = self.draw_fault(op.changes_orders());
        Admission::Run {
            op,
            account,
            headers,
            fault,
        }
    }

    /// `{"orderId","orderLinkId"}` of order `i`: what a place, amend or cancel
    /// answers.
    fn bybit_ids(&self, i: usize) -> String {
        let o = &self.orders[i];
        let mut out = String::with_capacity(48 + o.client_id.len());
        Obj::new(&mut out)
            .uint_str("orderId", o.order_id)
            .str("orderLinkId", &o.client_id)
            .end();
        out
    }

    fn find_bybit(&self, account: usize, t: &Target) -> Option<usize> {
        let i = match t {
            Target::Id(id) => *self.by_id.get(&id.parse::<u64>().ok()?)?,
            Target::Link(l) => *self.by_client.get(&(account, l.clone()))?,
        };
        (self.orders[i].account == account).then_some(i)
    }

    /// Runs an admitted Bybit request.
    pub(crate) fn execute_bybit(&mut self, op: BybitOp, account: usize, now: i64) -> Response {
        let ok = |result: Value| Response::json(200, envelope(0, "OK", &json_text(&result), now));
        let ok_text = |result: String| Response::json(200, envelope(0, "OK", &result, now));
        match op {
            BybitOp::Instruments(listed) => ok(self.bybit_instruments(listed)),
            BybitOp::Coins => ok(self.bybit_coins()),
            BybitOp::ApiKey => ok(self.bybit_api_key(account, now)),
            BybitOp::AccountInfo => ok(self.bybit_account_info(account, now)),
            BybitOp::CancelAll => {
                let open: Vec<usize> = (0..self.orders.len())
                    .filter(|&i| self.orders[i].account == account)
                    .filter(|&i| self.orders[i].status == Status::New)
                    .collect();
                let mut list = Vec::with_capacity(open.len());
                for i in open {
                    self.cancel_order(i, now);
                    let o = &self.orders[i];
                    list.push(
                        json!({ "orderId": o.order_id.to_string(), "orderLinkId": o.client_id }),
                    );
                }
                ok(json!({ "list": list, "success": "1" }))
            }
            BybitOp::SetDcp { product, window_ms } => {
                self.set_dcp_window(account, product, window_ms);
                Response::json(
                    200,
                    json!({ "retCode": 0, "retMsg": "success" }).to_string(),
                )
            }
            BybitOp::Time => ok(json!({
                "timeSecond": (now / 1000).to_string(),
                "timeNano": (i128::from(now) * 1_000_000).to_string(),
            })),
            BybitOp::Orderbook(limit) => {
                let (b, a) = self.ladder(limit, |p| json!([fmt_dec(p), "1"]));
                ok(
                    json!({ "s": self.cfg.symbol, "b": b, "a": a, "ts": now, "u": now, "seq": now, "cts": now }),
                )
            }
            BybitOp::Wallet => ok(json!({ "list": [{
                "accountType": "UNIFIED",
                "totalEquity": "100000",
                "totalWalletBalance": "100000",
                "totalAvailableBalance": "100000",
                "coin": [{ "coin": "USDT", "equity": "100000", "walletBalance": "100000", "locked": "0" }]
            }]})),
            op @ BybitOp::Create { .. } => match self.create_one(op, account, now) {
                Ok(i) => ok_text(self.bybit_ids(i)),
                Err((code, msg)) => fail(code, msg, now),
            },
            BybitOp::CreateBatch(ops) => self.create_batch(ops, account, now),
            BybitOp::CancelBatch { targets, room } => {
                self.cancel_batch(&targets, room, account, now)
            }
            BybitOp::Amend {
                target,
                qty_e8,
                price_e8,
            } => {
                let Some(i) = self
                    .find_bybit(account, &target)
                    .filter(|&i| self.orders[i].status == Status::New)
                else {
                    return fail(110001, "order not exists or too late to replace", now);
                };
                let o = &self.orders[i];
                let (price, qty) = (price_e8.unwrap_or(o.price_e8), qty_e8.unwrap_or(o.qty_e8));
                if let Err(b) = rules(Profile::Bybit).check_filters(o.kind, price, qty) {
                    let (code, msg) = bybit_refusal(b);
                    return fail(code, msg, now);
                }
                self.amend_order(i, qty_e8, price_e8, now);
                ok_text(self.bybit_ids(i))
            }
            BybitOp::Cancel(target) => {
                let Some(i) = self
                    .find_bybit(account, &target)
                    .filter(|&i| self.orders[i].status == Status::New)
                else {
                    return fail(110001, "order not exists or too late to cancel", now);
                };
                self.cancel_order(i, now);
                ok_text(self.bybit_ids(i))
            }
            BybitOp::Realtime {
                target: Some(t), ..
            } => {
                let found = self
                    .find_bybit(account, &t)
                    .filter(|&i| self.realtime_keeps(i));
                ok_text(self.bybit_order_list(found, "", true))
            }
            BybitOp::Realtime {
                target: None,
                closed,
                limit,
                cursor,
            } => {
                let Some((page, next)) = self.realtime_page(account, closed, limit, cursor) else {
                    return fail(10001, "params error: cursor invalid", now);
                };
                ok_text(self.bybit_order_list(page, &next, true))
            }
            BybitOp::Tickers => {
                let mid = self.cfg.mid_price_e8;
                let (bid, ask) = (fmt_dec(mid.saturating_sub(TICK_E8)), fmt_dec(mid + TICK_E8));
                let m = fmt_dec(mid);
                ok(json!({ "category": "linear", "list": [{
                    "symbol": self.cfg.symbol, "lastPrice": m, "indexPrice": m, "markPrice": m,
                    "prevPrice24h": m, "price24hPcnt": "0", "highPrice24h": m, "lowPrice24h": m,
                    "prevPrice1h": m, "openInterest": "0", "openInterestValue": "0",
                    "turnover24h": "0", "volume24h": "0", "fundingRate": "0.0001",
                    "nextFundingTime": ((now / 28_800_000 + 1) * 28_800_000).to_string(),
                    "predictedDeliveryPrice": "", "basisRate": "", "deliveryFeeRate": "",
                    "deliveryTime": "0", "bid1Price": bid, "bid1Size": "1", "ask1Price": ask,
                    "ask1Size": "1", "basis": "",
                }]}))
            }
            BybitOp::Kline { interval_ms, limit } => {
                let m = fmt_dec(self.cfg.mid_price_e8);
                let last = now.div_euclid(interval_ms) * interval_ms;
                let list: Vec<Value> = (0..limit as i64)
                    .map(|i| last - i * interval_ms)
                    .filter(|&t| t >= 0)
                    .map(|t| json!([t.to_string(), m, m, m, m, "0", "0"]))
                    .collect();
                ok(json!({ "category": "linear", "symbol": self.cfg.symbol, "list": list }))
            }
            BybitOp::RecentTrade(limit) => {
                let list: Vec<Value> = self
                    .orders
                    .iter()
                    .rev()
                    .filter(|o| o.executed_e8 > 0)
                    .take(limit)
                    .map(|o| {
                        json!({
                            "execId": o.order_id.to_string(),
                            "symbol": self.cfg.symbol,
                            "price": fmt_dec(o.price_e8),
                            "size": fmt_dec(o.executed_e8),
                            "side": if o.side == Side::Buy { "Buy" } else { "Sell" },
                            "time": o.update_time.to_string(),
                            "isBlockTrade": false,
                        })
                    })
                    .collect();
                ok(json!({ "category": "linear", "list": list }))
            }
            BybitOp::Executions(limit) => {
                let list: Vec<Value> = self
                    .orders
                    .iter()
                    .rev()
                    .filter(|o| o.account == account && o.executed_e8 > 0)
                    .take(limit)
                    .map(|o| {
                        json!({
                            "symbol": self.cfg.symbol,
                            "orderId": o.order_id.to_string(),
                            "orderLinkId": o.client_id,
                            "side": if o.side == Side::Buy { "Buy" } else { "Sell" },
                            "orderPrice": fmt_dec(o.price_e8),
                            "orderQty": fmt_dec(o.qty_e8),
                            "leavesQty": "0",
                            "orderType": if o.kind == OrdType::Market { "Market" } else { "Limit" },
                            "execFee": "0",
                            "execId": o.order_id.to_string(),
                            "execPrice": fmt_dec(o.price_e8),
                            "execQty": fmt_dec(o.executed_e8),
                            "execType": "Trade",
                            "execValue": fmt_dec(quote(o.price_e8, o.executed_e8)),
                            "execTime": o.update_time.to_string(),
                            "isMaker": false,
                            "feeRate": "0",
                            "closedSize": "0",
                        })
                    })
                    .collect();
                ok(json!({ "category": "linear", "list": list, "nextPageCursor": "" }))
            }
            BybitOp::History { limit, target } => {
                let one = target.map(|t| self.find_bybit(account, &t));
                let list = self
                    .orders
                    .iter()
                    .enumerate()
                    .rev()
                    .filter(|&(i, o)| match one {
                        None => o.account == account,
                        Some(found) => found == Some(i),
                    })
                    .take(limit)
                    .map(|(i, _)| i);
                ok_text(self.bybit_order_list(list, "", false))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The envelope's text is the `json!` map's it was.
    #[test]
    fn envelopes_are_the_maps_text() {
        let results = [
            "{}",
            r#"{"list":[{"a":"b\"c"}],"nextPageCursor":"","category":"linear"}"#,
            "[]",
        ];
        for (code, msg) in [
            (0, "OK"),
            (10001, "params error: \"x\"\n\u{1}"),
            (110_072, "é€"),
        ] {
            for result in results {
                for now in [0, 1_700_000_000_000, -5] {
                    let r: Value = serde_json::from_str(result).unwrap();
                    let want = json!({
                        "retCode": code, "retMsg": msg, "result": r, "retExtInfo": {}, "time": now,
                    });
                    assert_eq!(envelope(code, msg, result, now), json_text(&want));
                    assert_eq!(fail(code, msg, now).body, envelope(code, msg, "{}", now));
                }
            }
        }
    }

    #[test]
    fn decimals_lose_trailing_zeros() {
        assert_eq!(fmt_dec(4_900_000_000_000), "49000");
        assert_eq!(fmt_dec(1_000_000), "0.01");
    }
}
