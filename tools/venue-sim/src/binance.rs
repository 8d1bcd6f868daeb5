//! The Binance profiles (Spot and USD-M futures): what happens to one request, from
//! receipt to answer.
//!
//! The drive order, one request at a time under the server's lock:
//! 1. [`Venue::admit`] at receipt: ban check (418), IP weight and raw-request counts
//!    in the fixed windows of the venue clock (429 -1003, and a ban for an IP that
//!    keeps sending inside a 429's Retry-After), routing, parameters, API key,
//!    signature and timestamp (-2014/-2015, -1022, -1021), order validation, the
//!    account's order counts (429 -1015), then the fault draw.
//! 2. [`Venue::execute`] runs an admitted request on the book and the order
//!    registry and builds the documented response body.
//!
//! Sources (Binance Spot REST documentation):
//! - limits, usage headers, 429/418 and Retry-After, bans "from 2 minutes to 3 days":
//!   <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/limits>
//! - error codes (-1003, -1006, -1007, -1015, -1021, -1022, -2010, -2011, -2013...):
//!   <https://developers.binance.com/docs/binance-spot-api-docs/errors>
//! - signing (`totalParams` = query string + body, `X-MBX-APIKEY`), timing security
//!   (`timestamp < serverTime + 1000` and `serverTime - timestamp <= recvWindow`,
//!   recvWindow default 5000, at most 60000):
//!   <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/endpoint-security-type>
//! - HTTP return codes ("5XX ... the execution status is UNKNOWN"), parameters in
//!   query and body, query string wins, endpoint weights and response shapes:
//!   <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/public-rest-api-for-binance-2024-10-17>
//!   and <https://raw.githubusercontent.com/binance/binance-spot-api-docs/master/rest-api.md>
//! - the unfilled order count (successful placements count, a first fill takes one
//!   off): <https://developers.binance.com/docs/binance-spot-api-docs/faqs/order_count_decrement>
//!
//! USD-M futures (`/fapi/v1`, account `/fapi/v2` or `/fapi/v3`; modify with `PUT
//! /fapi/v1/order`; no cancel-replace; every order request counts, fills never
//! decrement; the 503 texts that mean "unknown" and "failed"):
//! <https://developers.binance.com/docs/derivatives/usds-margined-futures/general-info>,
//! <https://developers.binance.com/docs/derivatives/usds-margined-futures/error-code>.
//!
//! Simplifications, each visible in responses: one symbol; orders never match each
//! other (LIMIT orders rest as NEW, MARKET orders fill at the synthetic mid);
//! balances are fixed. This module never touches a socket or reads a clock.

use std::collections::HashMap;
use std::net::IpAddr;

use serde_json::{json, Value};

use crate::config::{Config, Fault, FaultScope, LimitType, Profile};
use crate::http::{Request, Response};
use crate::limits::{window_start, Key, LimitState};
use crate::params::{self, Params, SignatureError};
use crate::report::{OrderView, Report, WsCounts};
use crate::ws::{self, Attempt, WsHub};

mod bybit;
mod okx;

/// Largest recvWindow Binance accepts.
const MAX_RECV_WINDOW: u64 = 60_000;
/// Default recvWindow.
const DEFAULT_RECV_WINDOW: u64 = 5_000;
/// How far ahead of the server a timestamp may be.
const AHEAD_MS: i64 = 1_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Buy,
    Sell,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Buy => "BUY",
            Side::Sell => "SELL",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OrdType {
    Limit,
    LimitMaker,
    Market,
}

impl OrdType {
    fn name(self) -> &'static str {
        match self {
            OrdType::Limit => "LIMIT",
            OrdType::LimitMaker => "LIMIT_MAKER",
            OrdType::Market => "MARKET",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RespType {
    Ack,
    Result,
    Full,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    New,
    Filled,
    Canceled,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::New => "NEW",
            Status::Filled => "FILLED",
            Status::Canceled => "CANCELED",
        }
    }
}

/// What a placement books, whatever the venue.
struct Placement {
    side: Side,
    kind: OrdType,
    tif: &'static str,
    qty_e8: u64,
    price_e8: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NewOrder {
    side: Side,
    kind: OrdType,
    tif: &'static str,
    qty_e8: u64,
    price_e8: u64,
    client_id: Option<String>,
    resp: RespType,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OrderRef {
    order_id: Option<u64>,
    client_id: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReplaceMode {
    StopOnFailure,
    AllowFailure,
}

/// An admitted request, ready to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Ping,
    Time,
    ExchangeInfo,
    Depth(usize),
    Account,
    OpenOrders,
    NewOrder(NewOrder),
    Cancel(OrderRef, Option<String>),
    Query(OrderRef),
    /// `POST /api/v3/userDataStream`.
    StreamStart,
    /// `PUT /api/v3/userDataStream` with this listenKey.
    StreamKeepalive(String),
    /// `DELETE /api/v3/userDataStream` with this listenKey.
    StreamClose(String),
    /// A Bybit request (the `bybit` module runs it).
    Bybit(bybit::BybitOp),
    /// An OKX request (the `okx` module runs it).
    Okx(okx::OkxOp),
    /// Futures `PUT /fapi/v1/order`: new price and quantity for a resting order.
    Modify {
        target: OrderRef,
        side: Side,
        qty_e8: u64,
        price_e8: u64,
    },
    CancelReplace {
        mode: ReplaceMode,
        cancel: OrderRef,
        cancel_client_id: Option<String>,
        new: NewOrder,
    },
}

impl Op {
    fn changes_orders(&self) -> bool {
        matches!(
            self,
            Op::NewOrder(_) | Op::Cancel(..) | Op::CancelReplace { .. } | Op::Modify { .. }
        ) || matches!(self, Op::Bybit(b) if b.changes_orders())
            || matches!(self, Op::Okx(o) if o.changes_orders())
    }
}

/// What [`Venue::admit`] decided.
#[derive(Debug)]
pub(crate) enum Admission {
    /// Answer this and run nothing.
    Final(Response),
    /// Run `op` for `account`; add `headers` to the answer; apply `fault` if any.
    Run {
        op: Op,
        account: usize,
        headers: Vec<(String, String)>,
        fault: Option<Fault>,
    },
}

#[derive(Clone, Copy, Debug)]
enum Endpoint {
    Ping,
    Time,
    ExchangeInfo,
    Depth,
    Account,
    OpenOrders,
    NewOrder,
    CancelOrder,
    QueryOrder,
    CancelReplace,
    Modify,
    StreamStart,
    StreamKeepalive,
    StreamClose,
}

impl Endpoint {
    fn route(profile: Profile, method: &str, path: &str) -> Option<Endpoint> {
        Some(match profile {
            Profile::BinanceSpot => match (method, path) {
                ("GET", "/api/v3/ping") => Endpoint::Ping,
                ("GET", "/api/v3/time") => Endpoint::Time,
                ("GET", "/api/v3/exchangeInfo") => Endpoint::ExchangeInfo,
                ("GET", "/api/v3/depth") => Endpoint::Depth,
                ("GET", "/api/v3/account") => Endpoint::Account,
                ("GET", "/api/v3/openOrders") => Endpoint::OpenOrders,
                ("POST", "/api/v3/order") => Endpoint::NewOrder,
                ("DELETE", "/api/v3/order") => Endpoint::CancelOrder,
                ("GET", "/api/v3/order") => Endpoint::QueryOrder,
                ("POST", "/api/v3/order/cancelReplace") => Endpoint::CancelReplace,
                ("POST", "/api/v3/userDataStream") => Endpoint::StreamStart,
                ("PUT", "/api/v3/userDataStream") => Endpoint::StreamKeepalive,
                ("DELETE", "/api/v3/userDataStream") => Endpoint::StreamClose,
                _ => return None,
            },
            Profile::BinanceFutures => match (method, path) {
                ("GET", "/fapi/v1/ping") => Endpoint::Ping,
                ("GET", "/fapi/v1/time") => Endpoint::Time,
                ("GET", "/fapi/v1/exchangeInfo") => Endpoint::ExchangeInfo,
                ("GET", "/fapi/v1/depth") => Endpoint::Depth,
                ("GET", "/fapi/v2/account" | "/fapi/v3/account") => Endpoint::Account,
                ("GET", "/fapi/v1/openOrders") => Endpoint::OpenOrders,
                ("POST", "/fapi/v1/order") => Endpoint::NewOrder,
                ("PUT", "/fapi/v1/order") => Endpoint::Modify,
                ("DELETE", "/fapi/v1/order") => Endpoint::CancelOrder,
                ("GET", "/fapi/v1/order") => Endpoint::QueryOrder,
                _ => return None,
            },
            // Bybit and OKX have their own routers (their modules).
            Profile::Bybit | Profile::Okx => return None,
        })
    }

    fn signed(self) -> bool {
        !matches!(
            self,
            Endpoint::Ping | Endpoint::Time | Endpoint::ExchangeInfo | Endpoint::Depth
        ) && !self.user_stream()
    }

    /// USER_STREAM security: an API key, no signature.
    fn user_stream(self) -> bool {
        matches!(
            self,
            Endpoint::StreamStart | Endpoint::StreamKeepalive | Endpoint::StreamClose
        )
    }

    fn places_order(self) -> bool {
        matches!(
            self,
            Endpoint::NewOrder | Endpoint::CancelReplace | Endpoint::Modify
        )
    }

    /// Request weight as documented for each endpoint of each profile.
    fn weight(self, profile: Profile, p: &Params) -> u64 {
        let with_symbol = p.get("symbol").is_some();
        match profile {
            Profile::BinanceSpot => match self {
                Endpoint::Ping | Endpoint::Time => 1,
                Endpoint::ExchangeInfo => 20,
                Endpoint::Depth => depth_weight(profile, depth_limit(profile, p).unwrap_or(100)),
                Endpoint::Account => 20,
                Endpoint::OpenOrders if with_symbol => 6,
                Endpoint::OpenOrders => 80,
                Endpoint::NewOrder | Endpoint::CancelOrder | Endpoint::CancelReplace => 1,
                Endpoint::QueryOrder => 4,
                Endpoint::Modify => 1,
                Endpoint::StreamStart | Endpoint::StreamKeepalive | Endpoint::StreamClose => 2,
            },
            // New and modified orders weigh 0 on the IP limit, 1 on each order limit.
            Profile::BinanceFutures => match self {
                Endpoint::Ping | Endpoint::Time | Endpoint::ExchangeInfo => 1,
                Endpoint::Depth => depth_weight(profile, depth_limit(profile, p).unwrap_or(500)),
                Endpoint::Account => 5,
                Endpoint::OpenOrders if with_symbol => 1,
                Endpoint::OpenOrders => 40,
                Endpoint::NewOrder | Endpoint::Modify | Endpoint::CancelReplace => 0,
                Endpoint::CancelOrder | Endpoint::QueryOrder => 1,
                Endpoint::StreamStart | Endpoint::StreamKeepalive | Endpoint::StreamClose => 1,
            },
            Profile::Bybit | Profile::Okx => 1,
        }
    }
}

/// The depth `limit` parameter: Spot takes 1..=5000 (more is cut to 5000), futures
/// one of 5, 10, 20, 50, 100, 500, 1000.
fn depth_limit(profile: Profile, p: &Params) -> Option<usize> {
    let n = match p.get("limit") {
        None => {
            return Some(match profile {
                Profile::BinanceSpot | Profile::Bybit | Profile::Okx => 100,
                Profile::BinanceFutures => 500,
            })
        }
        Some(s) => s.parse::<usize>().ok()?,
    };
    match profile {
        Profile::BinanceSpot | Profile::Bybit | Profile::Okx => (n >= 1).then_some(n.min(5000)),
        Profile::BinanceFutures => [5, 10, 20, 50, 100, 500, 1000].contains(&n).then_some(n),
    }
}

fn depth_weight(profile: Profile, limit: usize) -> u64 {
    match profile {
        Profile::Bybit | Profile::Okx => 1,
        Profile::BinanceSpot => match limit {
            0..=100 => 5,
            101..=500 => 25,
            501..=1000 => 50,
            _ => 250,
        },
        Profile::BinanceFutures => match limit {
            0..=50 => 2,
            51..=100 => 5,
            101..=500 => 10,
            _ => 20,
        },
    }
}

#[derive(Clone, Debug)]
struct Order {
    order_id: u64,
    account: usize,
    client_id: String,
    side: Side,
    kind: OrdType,
    tif: &'static str,
    price_e8: u64,
    qty_e8: u64,
    executed_e8: u64,
    status: Status,
    time: i64,
    update_time: i64,
}

#[derive(Default)]
struct IpState {
    throttled_until: i64,
    violations: u32,
    banned_until: i64,
    ban_level: u32,
    phantom_from: Option<i64>,
    phantom_carry: u64,
}

/// A small, seeded, deterministic generator (SplitMix64).
struct SplitMix(u64);

impl SplitMix {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The venue: limits, bans, book, order registry and report.
pub(crate) struct Venue {
    cfg: Config,
    limits: Vec<LimitState>,
    ips: HashMap<IpAddr, IpState>,
    orders: Vec<Order>,
    by_client: HashMap<(usize, String), usize>,
    by_id: HashMap<u64, usize>,
    executed: HashMap<(usize, String), u32>,
    next_order_id: u64,
    next_trade_id: u64,
    next_cancel_id: u64,
    rng: SplitMix,
    fault_seq: u64,
    script: HashMap<u64, Fault>,
    report: Report,
    /// The venue time of the latest receipt (for answers built without one).
    now_hint: i64,
    /// Listen keys and stream subscribers.
    hub: WsHub,
}

fn err(status: u16, code: i32, msg: &str) -> Response {
    Response::error(status, code, msg)
}

fn mandatory(name: &str) -> Response {
    err(
        400,
        -1102,
        &format!("Mandatory parameter '{name}' was not sent, was empty/null, or malformed."),
    )
}

fn illegal(name: &str) -> Response {
    err(
        400,
        -1100,
        &format!("Illegal characters found in parameter '{name}'; legal range is '^([0-9]{{1,20}})(\\.[0-9]{{1,20}})?$'."),
    )
}

/// Parses a non-negative decimal into units of 1e-8; `None` if malformed or too precise.
fn parse_e8(s: &str) -> Option<u64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if int.len() > 11 {
        return None;
    }
    let frac_trim = frac.trim_end_matches('0');
    if frac_trim.len() > 8 {
        return None;
    }
    let i: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut f: u64 = if frac_trim.is_empty() {
        0
    } else {
        frac_trim.parse().ok()?
    };
    for _ in frac_trim.len()..8 {
        f *= 10;
    }
    i.checked_mul(100_000_000)?.checked_add(f)
}

fn fmt_e8(v: u64) -> String {
    format!("{}.{:08}", v / 100_000_000, v % 100_000_000)
}

fn valid_client_id(s: &str) -> bool {
    (1..=36).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b':' | b'/' | b'_' | b'-'))
}

impl Venue {
    pub(crate) fn new(cfg: Config) -> Self {
        let limits = cfg
            .rate_limits
            .iter()
            .map(|l| LimitState::new(*l, cfg.history_cap))
            .collect();
        let script = cfg.faults.script.iter().copied().collect();
        let rng = SplitMix(cfg.faults.seed);
        let report = Report {
            profile: cfg.profile.name().to_string(),
            ..Report::default()
        };
        Venue {
            cfg,
            limits,
            ips: HashMap::new(),
            orders: Vec::new(),
            by_client: HashMap::new(),
            by_id: HashMap::new(),
            executed: HashMap::new(),
            next_order_id: 1,
            next_trade_id: 1,
            next_cancel_id: 1,
            rng,
            fault_seq: 0,
            script,
            report,
            now_hint: 0,
            hub: WsHub::default(),
        }
    }

    pub(crate) fn config(&self) -> &Config {
        &self.cfg
    }

    /// The report so far.
    pub(crate) fn report(&self) -> Report {
        let mut r = self.report.clone();
        r.limits = self.limits.iter().map(LimitState::usage).collect();
        r
    }

    /// The order registry, oldest first.
    pub(crate) fn orders(&self) -> Vec<OrderView> {
        self.orders
            .iter()
            .map(|o| OrderView {
                account: o.account,
                order_id: o.order_id,
                client_id: o.client_id.clone(),
                status: o.status.name().to_string(),
                executed_qty: fmt_e8(o.executed_e8),
            })
            .collect()
    }

    /// Updates the WebSocket counts.
    pub(crate) fn ws_note(&mut self, f: impl FnOnce(&mut WsCounts)) {
        f(&mut self.report.ws);
    }

    /// Ends every stream connection, as a venue restart would; returns how many.
    pub(crate) fn ws_close_all(&mut self) -> usize {
        self.hub.close_all()
    }

    pub(crate) fn ws_unsubscribe(&mut self, sub: u64) {
        self.hub.unsubscribe(sub);
    }

    /// A WebSocket upgrade at receipt: the ban, the per-IP connect limit, the
    /// handshake and the listenKey. On success: the accept key, the subscription
    /// and its events.
    pub(crate) fn admit_ws(
        &mut self,
        req: &Request,
        ip: IpAddr,
        now: i64,
    ) -> Result<(String, u64, std::sync::mpsc::Receiver<String>), Response> {
        self.now_hint = now;
        if self.cfg.profile != Profile::BinanceSpot {
            return Err(err(404, -1000, "No WebSocket endpoint in this profile."));
        }
        if self.ips.get(&ip).is_some_and(|s| s.banned_until > now) {
            self.report.ws.connects_refused += 1;
            return match self.banned(ip, now) {
                Admission::Final(r) => Err(r),
                Admission::Run { .. } => Err(err(418, -1003, "IP banned.")),
            };
        }
        let lim = self.cfg.ws;
        match self.hub.attempt(ip, &lim, now) {
            Attempt::Ok => {}
            Attempt::Refused { retry_at } => {
                self.report.ws.connects_refused += 1;
                let mut r = err(
                    429,
                    -1003,
                    &format!(
                        "Too many connection attempts; current limit is {} connects per {} ms per IP.",
                        lim.connects, lim.connect_window_ms
                    ),
                );
                r.headers
                    .push(("Retry-After".into(), Self::retry_after(retry_at, now)));
                return Err(r);
            }
            Attempt::Ban => {
                self.report.ws.connects_refused += 1;
                let level = self.ips.get(&ip).map_or(0, |s| s.ban_level);
                let d = self.cfg.ban.duration_ms(level);
                self.ban(ip, d, now);
                return match self.banned(ip, now) {
                    Admission::Final(r) => Err(r),
                    Admission::Run { .. } => Err(err(418, -1003, "IP banned.")),
                };
            }
        }
        let accept = ws::check_handshake(req)?;
        let key = req.path.strip_prefix("/ws/").unwrap_or("");
        let Some(account) = self.hub.account_of(key) else {
            return Err(err(400, -1125, "This listenKey does not exist."));
        };
        let (sub, rx) = self.hub.subscribe(account, key);
        self.report.ws.connects += 1;
        Ok((accept, sub, rx))
    }

    /// Pushes an `executionReport` for order `idx` to the account's streams.
    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        idx: usize,
        exec: &str,
        cid: &str,
        orig: &str,
        last_e8: u64,
        trade: i64,
        now: i64,
    ) {
        if !self.spot() {
            return;
        }
        let o = &self.orders[idx];
        let price = if o.kind == OrdType::Market {
            0
        } else {
            o.price_e8
        };
        let last_price = if last_e8 > 0 { o.price_e8 } else { 0 };
        let ev = json!({
            "e": "executionReport",
            "E": now,
            "s": self.cfg.symbol,
            "c": cid,
            "S": o.side.name(),
            "o": o.kind.name(),
            "f": o.tif,
            "q": fmt_e8(o.qty_e8),
            "p": fmt_e8(price),
            "P": fmt_e8(0),
            "F": fmt_e8(0),
            "g": -1,
            "C": orig,
            "x": exec,
            "X": o.status.name(),
            "r": "NONE",
            "i": o.order_id,
            "l": fmt_e8(last_e8),
            "z": fmt_e8(o.executed_e8),
            "L": fmt_e8(last_price),
            "n": fmt_e8(0),
            "N": null,
            "T": now,
            "t": trade,
            "I": self.report.ws.events,
            "w": o.status == Status::New,
            "m": false,
            "M": trade >= 0,
            "O": o.time,
            "Z": fmt_e8(quote(o.price_e8, o.executed_e8)),
            "Y": fmt_e8(quote(last_price, last_e8)),
            "Q": fmt_e8(0),
            "W": o.time,
            "V": "EXPIRE_MAKER",
        })
        .to_string();
        let account = o.account;
        self.report.ws.events += self.hub.publish(account, &ev);
    }

    pub(crate) fn note_status(&mut self, status: u16) {
        *self.report.responses.entry(status).or_insert(0) += 1;
    }

    pub(crate) fn note_connection(&mut self) {
        self.report.connections += 1;
    }

    pub(crate) fn note_malformed(&mut self) {
        self.report.malformed += 1;
    }

    pub(crate) fn note_fault(&mut self, f: Fault) {
        self.report.faults.bump(f);
    }

    /// Bans `ip` for `duration_ms` from `now`, as an automatic ban would.
    pub(crate) fn ban(&mut self, ip: IpAddr, duration_ms: i64, now: i64) {
        let st = self.ips.entry(ip).or_default();
        st.banned_until = now.saturating_add(duration_ms.max(1));
        st.ban_level += 1;
        st.violations = 0;
        st.throttled_until = 0;
        self.report.bans += 1;
    }

    /// Adds weight to `ip`'s REQUEST_WEIGHT windows that no request of its client
    /// carried (another sender on the same IP).
    pub(crate) fn add_weight(&mut self, ip: IpAddr, weight: u64, now: i64) {
        for l in &mut self.limits {
            if l.spec.kind == LimitType::RequestWeight {
                l.charge(Key::Ip(ip), weight, now);
            }
        }
    }

    fn phantom(&mut self, ip: IpAddr, now: i64) {
        let rate = self.cfg.other_sender_weight_per_s;
        if rate == 0 {
            return;
        }
        // Accrue only inside the current window of the shortest weight limit, so an
        // idle gap does not dump a burst of past weight into this window.
        let win = self
            .limits
            .iter()
            .filter(|l| l.spec.kind == LimitType::RequestWeight)
            .map(|l| l.spec.window_ms())
            .min()
            .unwrap_or(60_000);
        let st = self.ips.entry(ip).or_default();
        let Some(from) = st.phantom_from else {
            st.phantom_from = Some(now);
            return;
        };
        let from = from.max(window_start(now, win));
        let elapsed = u64::try_from(now - from).unwrap_or(0);
        let milli = rate
            .saturating_mul(elapsed)
            .saturating_add(st.phantom_carry);
        st.phantom_carry = milli % 1000;
        st.phantom_from = Some(now);
        let whole = milli / 1000;
        if whole > 0 {
            self.add_weight(ip, whole, now);
        }
    }

    fn weight_headers(&self, ip: IpAddr, now: i64) -> Vec<(String, String)> {
        self.limits
            .iter()
            .filter(|l| l.spec.kind == LimitType::RequestWeight)
            .filter_map(|l| Some((l.spec.header_name()?, l.used(Key::Ip(ip), now).to_string())))
            .collect()
    }

    fn order_headers(&self, account: usize, now: i64) -> Vec<(String, String)> {
        self.limits
            .iter()
            .filter(|l| l.spec.kind == LimitType::Orders)
            .filter_map(|l| {
                Some((
                    l.spec.header_name()?,
                    l.used(Key::Account(account), now).to_string(),
                ))
            })
            .collect()
    }

    /// Adds `n` to (or, negative, takes it from) the account's unfilled order
    /// counts in the windows of `at`.
    fn count_order(&mut self, account: usize, n: i64, at: i64) {
        for l in &mut self.limits {
            if l.spec.kind != LimitType::Orders {
                continue;
            }
            if n >= 0 {
                l.charge(Key::Account(account), n.unsigned_abs(), at);
            } else {
                l.uncharge(Key::Account(account), n.unsigned_abs(), at);
            }
        }
    }

    /// An admitted placement that never reached the engine (a fault closed or
    /// failed it first): it was not a successful placement, so it does not stay in
    /// the unfilled order count. A cancel-replace keeps its count: Binance counts
    /// its new order even when it is not attempted.
    pub(crate) fn not_executed(&mut self, op: &Op, account: usize, admitted: i64) {
        if self.spot() && matches!(op, Op::NewOrder(_)) {
            self.count_order(account, -1, admitted);
        }
    }

    fn retry_after(until: i64, now: i64) -> String {
        let ms = (until - now).max(1);
        ((ms + 999) / 1000).to_string()
    }

    fn banned(&mut self, ip: IpAddr, now: i64) -> Admission {
        self.report.banned_requests += 1;
        let until = self.ips.get(&ip).map(|s| s.banned_until).unwrap_or(now);
        let mut r = Response::error(
            418,
            -1003,
            &format!("Way too much request weight used; IP banned until {until}. Please use WebSocket Streams for live updates to avoid bans."),
        );
        r.headers
            .push(("Retry-After".into(), Self::retry_after(until, now)));
        Admission::Final(r)
    }

    /// Step 1 of the drive order: everything the venue decides at receipt.
    pub(crate) fn admit(&mut self, req: &Request, ip: IpAddr, now: i64) -> Admission {
        self.report.requests += 1;
        self.now_hint = now;
        match self.cfg.profile {
            Profile::Bybit => return self.admit_bybit(req, ip, now),
            Profile::Okx => return self.admit_okx(req, ip, now),
            Profile::BinanceSpot | Profile::BinanceFutures => {}
        }
        self.phantom(ip, now);
        if self.ips.get(&ip).is_some_and(|s| s.banned_until > now) {
            return self.banned(ip, now);
        }
        let profile = self.cfg.profile;
        let endpoint = Endpoint::route(profile, &req.method, &req.path);
        let params = Params::parse(&req.query, &req.body);
        let weight = match (&endpoint, &params) {
            (Some(e), Ok(p)) => e.weight(profile, p),
            _ => 1,
        };

        // IP limits, counted at receipt whatever happens next.
        let mut over = None;
        for (i, l) in self.limits.iter_mut().enumerate() {
            let amount = match l.spec.kind {
                LimitType::RequestWeight => weight,
                LimitType::RawRequests => 1,
                _ => continue,
            };
            let used = l.charge(Key::Ip(ip), amount, now);
            if used > l.spec.limit && over.is_none() {
                over = Some(i);
            }
        }
        let headers = self.weight_headers(ip, now);
        let st = self.ips.entry(ip).or_default();
        if st.throttled_until > now {
            // Sending inside the Retry-After of a 429 is what gets an IP banned.
            st.violations += 1;
            if st.violations >= self.cfg.ban.after_violations {
                let d = self.cfg.ban.duration_ms(st.ban_level);
                self.ban(ip, d, now);
                return self.banned(ip, now);
            }
        }
        let throttled_until = st.throttled_until;
        if let Some(i) = over {
            let spec = self.limits[i].spec;
            let end = self.limits[i].window_end(now).max(throttled_until);
            let st = self.ips.entry(ip).or_default();
            if st.throttled_until <= now {
                st.violations = 0;
            }
            st.throttled_until = end;
            self.report.throttled += 1;
            let msg = match spec.kind {
                LimitType::RawRequests => format!(
                    "Too many requests; current limit of IP is {} requests per {} {}.",
                    spec.limit, spec.interval_num, spec.interval.name()
                ),
                _ => format!(
                    "Too much request weight used; current limit is {} request weight per {} {}. Please use WebSocket Streams for live updates to avoid polling the API.",
                    spec.limit, spec.interval_num, spec.interval.name()
                ),
            };
            let mut r = Response::error(429, -1003, &msg);
            r.headers = headers;
            r.headers
                .push(("Retry-After".into(), Self::retry_after(end, now)));
            return Admission::Final(r);
        }

        let with = |mut r: Response, h: &[(String, String)]| {
            r.headers.extend_from_slice(h);
            Admission::Final(r)
        };
        let Some(endpoint) = endpoint else {
            return with(
                err(
                    404,
                    -1000,
                    &format!("Unknown path or method: {} {}.", req.method, req.path),
                ),
                &headers,
            );
        };
        let params = match params {
            Ok(p) => p,
            Err(name) => return with(illegal(&name), &headers),
        };

        let account = if endpoint.signed() {
            match self.authenticate(req, &params, now) {
                Ok(a) => a,
                Err(a) => return with(a, &headers),
            }
        } else if endpoint.user_stream() {
            match self.api_key_account(req) {
                Ok(a) => a,
                Err(a) => return with(a, &headers),
            }
        } else {
            0
        };

        let op = match self.build_op(endpoint, &params) {
            Ok(op) => op,
            Err(a) => return with(a, &headers),
        };

        let mut headers = headers;
        if endpoint.places_order() {
            // The unfilled order count: checked all or none, and only a placement
            // the venue accepts adds to it (a -1015 refusal does not).
            let key = Key::Account(account);
            let over = self
                .limits
                .iter()
                .find(|l| l.spec.kind == LimitType::Orders && l.used(key, now) + 1 > l.spec.limit);
            if let Some(l) = over {
                let spec = l.spec;
                let h = self.order_headers(account, now);
                self.report.order_rate_limited += 1;
                // Documented: a 429 without Retry-After.
                let mut r = err(
                    429,
                    -1015,
                    &format!(
                        "Too many new orders; current limit is {} orders per {} {}.",
                        spec.limit,
                        spec.interval_num,
                        spec.interval.name()
                    ),
                );
                r.headers.extend(h);
                return with(r, &headers);
            }
            self.count_order(account, 1, now);
            headers.extend(self.order_headers(account, now));
        }

        let fault = self.draw_fault(&op);
        Admission::Run {
            op,
            account,
            headers,
            fault,
        }
    }

    /// USER_STREAM security: the account of `X-MBX-APIKEY`, no signature.
    fn api_key_account(&mut self, req: &Request) -> Result<usize, Response> {
        let Some(key) = req.api_key.as_deref().filter(|k| !k.is_empty()) else {
            self.report.api_key_rejects += 1;
            return Err(err(401, -2014, "API-key format invalid."));
        };
        match self.cfg.accounts.iter().position(|a| a.api_key == key) {
            Some(a) => Ok(a),
            None => {
                self.report.api_key_rejects += 1;
                Err(err(
                    401,
                    -2015,
                    "Invalid API-key, IP, or permissions for action.",
                ))
            }
        }
    }

    fn authenticate(&mut self, req: &Request, p: &Params, now: i64) -> Result<usize, Response> {
        let Some(key) = req.api_key.as_deref().filter(|k| !k.is_empty()) else {
            self.report.api_key_rejects += 1;
            return Err(err(401, -2014, "API-key format invalid."));
        };
        let Some(account) = self.cfg.accounts.iter().position(|a| a.api_key == key) else {
            self.report.api_key_rejects += 1;
            return Err(err(
                401,
                -2015,
                "Invalid API-key, IP, or permissions for action.",
            ));
        };
        let Some(ts) = p.non_empty("timestamp") else {
            return Err(mandatory("timestamp"));
        };
        let Ok(ts) = ts.parse::<i64>() else {
            return Err(illegal("timestamp"));
        };
        let recv = match p.get("recvWindow") {
            None => DEFAULT_RECV_WINDOW,
            Some(s) => match s.parse::<u64>() {
                Ok(v) if v <= MAX_RECV_WINDOW => v,
                Ok(_) => return Err(err(400, -1131, "recvWindow must be less than 60000.")),
                Err(_) => return Err(illegal("recvWindow")),
            },
        };
        match params::verify(&req.query, &req.body, &self.cfg.accounts[account].secret) {
            Ok(()) => {}
            Err(SignatureError::Missing) => return Err(mandatory("signature")),
            Err(SignatureError::Invalid) => {
                self.report.signature_rejects += 1;
                return Err(err(400, -1022, "Signature for this request is not valid."));
            }
        }
        if ts >= now + AHEAD_MS {
            self.report.timestamp_rejects += 1;
            return Err(err(
                400,
                -1021,
                "Timestamp for this request was 1000ms ahead of the server's time.",
            ));
        }
        if now - ts > recv as i64 {
            self.report.timestamp_rejects += 1;
            return Err(err(
                400,
                -1021,
                "Timestamp for this request is outside of the recvWindow.",
            ));
        }
        Ok(account)
    }

    fn check_symbol(&self, p: &Params) -> Result<(), Response> {
        match p.non_empty("symbol") {
            None => Err(mandatory("symbol")),
            Some(s) if s == self.cfg.symbol => Ok(()),
            Some(_) => Err(err(400, -1121, "Invalid symbol.")),
        }
    }

    fn order_ref(p: &Params, id: &str, cid: &str) -> Result<OrderRef, Response> {
        let order_id = match p.non_empty(id) {
            None => None,
            Some(s) => Some(s.parse::<u64>().map_err(|_| illegal(id))?),
        };
        let client_id = p.non_empty(cid).map(str::to_string);
        if order_id.is_none() && client_id.is_none() {
            return Err(err(
                400,
                -1102,
                &format!("Param '{cid}' or '{id}' must be sent, but both were empty/null!"),
            ));
        }
        Ok(OrderRef {
            order_id,
            client_id,
        })
    }

    fn new_order(&self, p: &Params, cid_name: &str) -> Result<NewOrder, Response> {
        let futures = self.cfg.profile == Profile::BinanceFutures;
        self.check_symbol(p)?;
        let side = match p.non_empty("side") {
            None => return Err(mandatory("side")),
            Some("BUY") => Side::Buy,
            Some("SELL") => Side::Sell,
            Some(_) => return Err(err(400, -1117, "Invalid side.")),
        };
        let kind = match p.non_empty("type") {
            None => return Err(mandatory("type")),
            Some("LIMIT") => OrdType::Limit,
            Some("LIMIT_MAKER") if !futures => OrdType::LimitMaker,
            Some("MARKET") => OrdType::Market,
            Some(_) => return Err(err(400, -1116, "Invalid orderType.")),
        };
        let qty_e8 = match p.non_empty("quantity") {
            None => return Err(mandatory("quantity")),
            Some(q) => parse_e8(q).ok_or_else(|| illegal("quantity"))?,
        };
        if qty_e8 == 0 {
            return Err(err(400, -1013, "Filter failure: LOT_SIZE"));
        }
        let (tif, price_e8) = match kind {
            OrdType::Market => ("GTC", self.cfg.mid_price_e8),
            OrdType::Limit | OrdType::LimitMaker => {
                let tif = if kind == OrdType::Limit {
                    match p.non_empty("timeInForce") {
                        None => return Err(mandatory("timeInForce")),
                        Some("GTC") => "GTC",
                        Some("IOC") => "IOC",
                        Some("FOK") => "FOK",
                        Some("GTX") if futures => "GTX",
                        Some(_) => return Err(err(400, -1115, "Invalid timeInForce.")),
                    }
                } else {
                    "GTC"
                };
                let price = match p.non_empty("price") {
                    None => return Err(mandatory("price")),
                    Some(s) => parse_e8(s).ok_or_else(|| illegal("price"))?,
                };
                if price == 0 {
                    return Err(err(400, -1013, "Filter failure: PRICE_FILTER"));
                }
                (tif, price)
            }
        };
        let client_id = match p.get(cid_name) {
            None => None,
            Some(c) if valid_client_id(c) => Some(c.to_string()),
            Some(_) => {
                return Err(err(
                    400,
                    -1100,
                    &format!("Illegal characters found in parameter '{cid_name}'; legal range is '^[\\.A-Z\\:/a-z0-9_-]{{1,36}}$'."),
                ))
            }
        };
        let resp = match p.non_empty("newOrderRespType") {
            None if futures || kind == OrdType::LimitMaker => RespType::Ack,
            None => RespType::Full,
            Some("ACK") => RespType::Ack,
            Some("RESULT") => RespType::Result,
            Some("FULL") if !futures => RespType::Full,
            Some(_) => return Err(illegal("newOrderRespType")),
        };
        Ok(NewOrder {
            side,
            kind,
            tif,
            qty_e8,
            price_e8,
            client_id,
            resp,
        })
    }

    fn build_op(&self, e: Endpoint, p: &Params) -> Result<Op, Response> {
        Ok(match e {
            Endpoint::Ping => Op::Ping,
            Endpoint::Time => Op::Time,
            Endpoint::ExchangeInfo => Op::ExchangeInfo,
            Endpoint::Depth => {
                self.check_symbol(p)?;
                Op::Depth(depth_limit(self.cfg.profile, p).ok_or_else(|| {
                    err(400, -1130, "Data sent for parameter 'limit' is not valid.")
                })?)
            }
            Endpoint::Account => Op::Account,
            Endpoint::OpenOrders => {
                if p.get("symbol").is_some() {
                    self.check_symbol(p)?;
                }
                Op::OpenOrders
            }
            Endpoint::NewOrder => Op::NewOrder(self.new_order(p, "newClientOrderId")?),
            Endpoint::CancelOrder => {
                self.check_symbol(p)?;
                let r = Self::order_ref(p, "orderId", "origClientOrderId")?;
                Op::Cancel(r, p.non_empty("newClientOrderId").map(str::to_string))
            }
            Endpoint::QueryOrder => {
                self.check_symbol(p)?;
                Op::Query(Self::order_ref(p, "orderId", "origClientOrderId")?)
            }
            Endpoint::StreamStart => Op::StreamStart,
            Endpoint::StreamKeepalive | Endpoint::StreamClose => {
                let Some(k) = p.non_empty("listenKey") else {
                    return Err(mandatory("listenKey"));
                };
                if matches!(e, Endpoint::StreamKeepalive) {
                    Op::StreamKeepalive(k.to_string())
                } else {
                    Op::StreamClose(k.to_string())
                }
            }
            Endpoint::Modify => {
                self.check_symbol(p)?;
                let target = Self::order_ref(p, "orderId", "origClientOrderId")?;
                let side = match p.non_empty("side") {
                    None => return Err(mandatory("side")),
                    Some("BUY") => Side::Buy,
                    Some("SELL") => Side::Sell,
                    Some(_) => return Err(err(400, -1117, "Invalid side.")),
                };
                let qty_e8 = match p.non_empty("quantity") {
                    None => return Err(mandatory("quantity")),
                    Some(q) => parse_e8(q)
                        .filter(|&q| q > 0)
                        .ok_or_else(|| illegal("quantity"))?,
                };
                let price_e8 = match p.non_empty("price") {
                    None => return Err(mandatory("price")),
                    Some(q) => parse_e8(q)
                        .filter(|&q| q > 0)
                        .ok_or_else(|| illegal("price"))?,
                };
                Op::Modify {
                    target,
                    side,
                    qty_e8,
                    price_e8,
                }
            }
            Endpoint::CancelReplace => {
                let mode = match p.non_empty("cancelReplaceMode") {
                    None => return Err(mandatory("cancelReplaceMode")),
                    Some("STOP_ON_FAILURE") => ReplaceMode::StopOnFailure,
                    Some("ALLOW_FAILURE") => ReplaceMode::AllowFailure,
                    Some(_) => return Err(illegal("cancelReplaceMode")),
                };
                let cancel = Self::order_ref(p, "cancelOrderId", "cancelOrigClientOrderId")?;
                let new = self.new_order(p, "newClientOrderId")?;
                Op::CancelReplace {
                    mode,
                    cancel,
                    cancel_client_id: p.non_empty("cancelNewClientOrderId").map(str::to_string),
                    new,
                }
            }
        })
    }

    fn draw_fault(&mut self, op: &Op) -> Option<Fault> {
        let f = &self.cfg.faults;
        if f.scope == FaultScope::Orders && !op.changes_orders() {
            return None;
        }
        if f.script.is_empty() && f.chances.is_empty() {
            return None;
        }
        self.fault_seq += 1;
        if let Some(&fault) = self.script.get(&self.fault_seq) {
            return Some(fault);
        }
        if self.cfg.faults.chances.is_empty() {
            return None;
        }
        let u = self.rng.next_f64();
        let mut acc = 0.0;
        for &(fault, p) in &self.cfg.faults.chances {
            acc += p;
            if u < acc {
                return Some(fault);
            }
        }
        None
    }

    // ---- step 2: execution ----

    /// Step 2 of the drive order: run an admitted request at `now`, admitted at
    /// `admitted` (the same instant unless a fault delayed it).
    pub(crate) fn execute(&mut self, op: Op, account: usize, now: i64, admitted: i64) -> Response {
        match op {
            Op::Bybit(b) => self.execute_bybit(b, account, now),
            Op::Okx(o) => self.execute_okx(o, account, now),
            Op::Ping => Response::json(200, "{}".into()),
            Op::Time => Response::json(200, json!({ "serverTime": now }).to_string()),
            Op::ExchangeInfo => Response::json(200, self.exchange_info(now).to_string()),
            Op::Depth(limit) => Response::json(200, self.depth(limit, now).to_string()),
            Op::Account => Response::json(200, self.account(account, now).to_string()),
            Op::OpenOrders => {
                let list: Vec<Value> = self
                    .open_orders(account)
                    .map(|o| self.order_json(o, true))
                    .collect();
                Response::json(200, Value::Array(list).to_string())
            }
            Op::NewOrder(n) => match self.place(account, n, now) {
                Ok(v) => Response::json(200, v.to_string()),
                Err((status, code, msg)) => {
                    // Spot: refused by the engine is not a successful placement.
                    if self.spot() {
                        self.count_order(account, -1, admitted);
                    }
                    Response::error(status, code, &msg)
                }
            },
            Op::Modify {
                target,
                side,
                qty_e8,
                price_e8,
            } => {
                let Some(i) = self
                    .find(account, &target)
                    .filter(|&i| self.orders[i].status == Status::New)
                else {
                    return Response::error(400, -2013, "Order does not exist.");
                };
                if self.orders[i].side != side {
                    return Response::error(
                        400,
                        -4064,
                        "Original order side and modified side must be the same.",
                    );
                }
                self.amend_order(i, Some(qty_e8), Some(price_e8), now);
                Response::json(200, self.order_json(&self.orders[i], false).to_string())
            }
            Op::Cancel(r, cid) => match self.cancel(account, &r, cid, now) {
                Ok(v) => Response::json(200, v.to_string()),
                Err((status, code, msg)) => Response::error(status, code, &msg),
            },
            Op::StreamStart => {
                let (key, new) = self.hub.listen_key(account, now);
                self.report.ws.listen_keys += u64::from(new);
                Response::json(200, json!({ "listenKey": key }).to_string())
            }
            Op::StreamKeepalive(k) | Op::StreamClose(k)
                if self.hub.account_of(&k) != Some(account) =>
            {
                let _ = k;
                Response::error(400, -1125, "This listenKey does not exist.")
            }
            Op::StreamKeepalive(_) => Response::json(200, "{}".into()),
            Op::StreamClose(k) => {
                self.hub.close_key(&k);
                Response::json(200, "{}".into())
            }
            Op::Query(r) => match self.find(account, &r) {
                Some(i) => Response::json(200, self.order_json(&self.orders[i], true).to_string()),
                None => Response::error(400, -2013, "Order does not exist."),
            },
            Op::CancelReplace {
                mode,
                cancel,
                cancel_client_id,
                new,
            } => self.cancel_replace(account, mode, &cancel, cancel_client_id, new, now),
        }
    }

    fn find(&self, account: usize, r: &OrderRef) -> Option<usize> {
        let i = match (&r.order_id, &r.client_id) {
            (Some(id), _) => *self.by_id.get(id)?,
            (None, Some(c)) => *self.by_client.get(&(account, c.clone()))?,
            (None, None) => return None,
        };
        let o = &self.orders[i];
        if o.account != account {
            return None;
        }
        if let (Some(_), Some(c)) = (&r.order_id, &r.client_id) {
            if &o.client_id != c {
                return None;
            }
        }
        Some(i)
    }

    /// Books a new order (the next order id; the caller's client id or
    /// `{fresh}{order_id}`), filled at once if MARKET, indexes it and counts its
    /// execution: a client id executed twice is a duplicate. The venue's own
    /// checks and answer stay with the caller. Returns its index.
    fn book_order(
        &mut self,
        account: usize,
        client_id: Option<String>,
        fresh: &str,
        new: Placement,
        now: i64,
    ) -> usize {
        let order_id = self.next_order_id;
        self.next_order_id += 1;
        let client_id = client_id.unwrap_or_else(|| format!("{fresh}{order_id}"));
        let filled = new.kind == OrdType::Market;
        let idx = self.orders.len();
        self.orders.push(Order {
            order_id,
            account,
            client_id: client_id.clone(),
            side: new.side,
            kind: new.kind,
            tif: new.tif,
            price_e8: new.price_e8,
            qty_e8: new.qty_e8,
            executed_e8: if filled { new.qty_e8 } else { 0 },
            status: if filled { Status::Filled } else { Status::New },
            time: now,
            update_time: now,
        });
        self.by_client.insert((account, client_id.clone()), idx);
        self.by_id.insert(order_id, idx);
        self.report.executions += 1;
        let count = self.executed.entry((account, client_id)).or_insert(0);
        *count += 1;
        if *count > 1 {
            self.report.duplicates += 1;
        }
        idx
    }

    /// Sets the quantity and the price given of order `i`, and counts the modify.
    fn amend_order(&mut self, i: usize, qty_e8: Option<u64>, price_e8: Option<u64>, now: i64) {
        let o = &mut self.orders[i];
        if let Some(q) = qty_e8 {
            o.qty_e8 = q;
        }
        if let Some(p) = price_e8 {
            o.price_e8 = p;
        }
        o.update_time = now;
        self.report.modifies += 1;
    }

    /// Cancels order `i` and counts the cancel.
    fn cancel_order(&mut self, i: usize, now: i64) {
        let o = &mut self.orders[i];
        o.status = Status::Canceled;
        o.update_time = now;
        self.report.cancels += 1;
    }

    /// `n` book levels each side of the mid, a tick (0.01) apart, written by
    /// `level`: the bids below the mid (none under zero), then the asks above.
    fn ladder(&self, n: usize, level: impl Fn(u64) -> Value) -> (Vec<Value>, Vec<Value>) {
        let tick = 1_000_000u64;
        let mid = self.cfg.mid_price_e8;
        let bids = (1..=n as u64)
            .filter_map(|i| mid.checked_sub(i * tick))
            .map(&level)
            .collect();
        let asks = (1..=n as u64).map(|i| level(mid + i * tick)).collect();
        (bids, asks)
    }

    /// The account's open orders, in the order they were placed.
    fn open_orders(&self, account: usize) -> impl Iterator<Item = &Order> {
        self.orders
            .iter()
            .filter(move |o| o.account == account && o.status == Status::New)
    }

    fn place(
        &mut self,
        account: usize,
        n: NewOrder,
        now: i64,
    ) -> Result<Value, (u16, i32, String)> {
        if let Some(c) = &n.client_id {
            if let Some(&i) = self.by_client.get(&(account, c.clone())) {
                if self.orders[i].status == Status::New {
                    self.report.duplicate_rejects += 1;
                    return Err(if self.spot() {
                        (400, -2010, "Duplicate order sent.".into())
                    } else {
                        (400, -4116, "ClientOrderId is duplicated.".into())
                    });
                }
            }
        }
        let placement = Placement {
            side: n.side,
            kind: n.kind,
            tif: n.tif,
            qty_e8: n.qty_e8,
            price_e8: n.price_e8,
        };
        let idx = self.book_order(account, n.client_id.clone(), "sim-", placement, now);
        let client_id = self.orders[idx].client_id.clone();
        let filled = n.kind == OrdType::Market;
        if filled && self.spot() {
            // Binance Spot decrements the unfilled order count when an order first fills
            // (after the answer's headers were written, as there).
            self.count_order(account, -1, now);
        }
        // The stream: accepted as NEW, then (a MARKET order) its fill.
        if filled {
            self.orders[idx].status = Status::New;
            self.orders[idx].executed_e8 = 0;
            self.emit(idx, "NEW", &client_id, "", 0, -1, now);
            self.orders[idx].status = Status::Filled;
            self.orders[idx].executed_e8 = n.qty_e8;
            let t = self.next_trade_id as i64;
            self.next_trade_id += 1;
            self.emit(idx, "TRADE", &client_id, "", n.qty_e8, t, now);
        } else {
            self.emit(idx, "NEW", &client_id, "", 0, -1, now);
        }
        if !self.spot() {
            return Ok(self.order_json(&self.orders[idx], false));
        }
        Ok(self.order_ack_json(idx, n.resp, now))
    }

    fn cancel(
        &mut self,
        account: usize,
        r: &OrderRef,
        cancel_id: Option<String>,
        now: i64,
    ) -> Result<Value, (u16, i32, String)> {
        let Some(i) = self
            .find(account, r)
            .filter(|&i| self.orders[i].status == Status::New)
        else {
            return Err((400, -2011, "Unknown order sent.".into()));
        };
        let cancel_id = cancel_id.unwrap_or_else(|| {
            self.next_cancel_id += 1;
            format!("sim-cancel-{}", self.next_cancel_id)
        });
        self.cancel_order(i, now);
        let orig = self.orders[i].client_id.clone();
        self.emit(i, "CANCELED", &cancel_id, &orig, 0, -1, now);
        let o = &self.orders[i];
        if !self.spot() {
            return Ok(self.order_json(o, false));
        }
        Ok(json!({
            "symbol": self.cfg.symbol,
            "origClientOrderId": o.client_id,
            "orderId": o.order_id,
            "orderListId": -1,
            "clientOrderId": cancel_id,
            "transactTime": now,
            "price": fmt_e8(o.price_e8),
            "origQty": fmt_e8(o.qty_e8),
            "executedQty": fmt_e8(o.executed_e8),
            "cummulativeQuoteQty": fmt_e8(quote(o.price_e8, o.executed_e8)),
            "status": o.status.name(),
            "timeInForce": o.tif,
            "type": o.kind.name(),
            "side": o.side.name(),
            "selfTradePreventionMode": "EXPIRE_MAKER",
        }))
    }

    fn cancel_replace(
        &mut self,
        account: usize,
        mode: ReplaceMode,
        cancel: &OrderRef,
        cancel_client_id: Option<String>,
        new: NewOrder,
        now: i64,
    ) -> Response {
        let err_json = |(_, code, msg): (u16, i32, String)| json!({ "code": code, "msg": msg });
        let c = self.cancel(account, cancel, cancel_client_id, now);
        let c_ok = c.is_ok();
        if !c_ok && mode == ReplaceMode::StopOnFailure {
            let body = json!({
                "code": -2022,
                "msg": "Order cancel-replace failed.",
                "data": {
                    "cancelResult": "FAILURE",
                    "newOrderResult": "NOT_ATTEMPTED",
                    "cancelResponse": c.map_err(err_json).err(),
                    "newOrderResponse": null,
                }
            });
            return Response::json(400, body.to_string());
        }
        let n = self.place(account, new, now);
        let n_ok = n.is_ok();
        let result = |ok: bool| if ok { "SUCCESS" } else { "FAILURE" };
        let cancel_v = c.unwrap_or_else(err_json);
        let new_v = n.unwrap_or_else(err_json);
        let data = json!({
            "cancelResult": result(c_ok),
            "newOrderResult": result(n_ok),
            "cancelResponse": cancel_v,
            "newOrderResponse": new_v,
        });
        match (c_ok, n_ok) {
            (true, true) => Response::json(200, data.to_string()),
            (false, false) => Response::json(
                400,
                json!({ "code": -2022, "msg": "Order cancel-replace failed.", "data": data }).to_string(),
            ),
            _ => Response::json(
                409,
                json!({ "code": -2021, "msg": "Order cancel-replace partially failed.", "data": data })
                    .to_string(),
            ),
        }
    }

    fn order_ack_json(&mut self, idx: usize, resp: RespType, now: i64) -> Value {
        let o = self.orders[idx].clone();
        let mut v = json!({
            "symbol": self.cfg.symbol,
            "orderId": o.order_id,
            "orderListId": -1,
            "clientOrderId": o.client_id,
            "transactTime": now,
        });
        if resp == RespType::Ack {
            return v;
        }
        if let Value::Object(m) = &mut v {
            m.insert(
                "price".into(),
                json!(fmt_e8(if o.kind == OrdType::Market {
                    0
                } else {
                    o.price_e8
                })),
            );
            m.insert("origQty".into(), json!(fmt_e8(o.qty_e8)));
            m.insert("executedQty".into(), json!(fmt_e8(o.executed_e8)));
            m.insert("origQuoteOrderQty".into(), json!(fmt_e8(0)));
            m.insert(
                "cummulativeQuoteQty".into(),
                json!(fmt_e8(quote(o.price_e8, o.executed_e8))),
            );
            m.insert("status".into(), json!(o.status.name()));
            m.insert("timeInForce".into(), json!(o.tif));
            m.insert("type".into(), json!(o.kind.name()));
            m.insert("side".into(), json!(o.side.name()));
            m.insert("workingTime".into(), json!(now));
            m.insert("selfTradePreventionMode".into(), json!("EXPIRE_MAKER"));
            if resp == RespType::Full {
                let fills = if o.executed_e8 > 0 {
                    let t = self.next_trade_id;
                    self.next_trade_id += 1;
                    vec![json!({
                        "price": fmt_e8(o.price_e8),
                        "qty": fmt_e8(o.executed_e8),
                        "commission": fmt_e8(0),
                        "commissionAsset": quote_asset(&self.cfg.symbol),
                        "tradeId": t,
                    })]
                } else {
                    Vec::new()
                };
                m.insert("fills".into(), Value::Array(fills));
            }
        }
        v
    }

    fn spot(&self) -> bool {
        self.cfg.profile == Profile::BinanceSpot
    }

    /// The order as a query answers it (`with_time`) or as a futures place, modify
    /// or cancel answers it.
    fn order_json(&self, o: &Order, with_time: bool) -> Value {
        if self.spot() {
            return self.order_query_json(o);
        }
        let mut v = json!({
            "orderId": o.order_id,
            "symbol": self.cfg.symbol,
            "status": o.status.name(),
            "clientOrderId": o.client_id,
            "price": fmt_e8(if o.kind == OrdType::Market { 0 } else { o.price_e8 }),
            "avgPrice": fmt_e8(if o.executed_e8 > 0 { o.price_e8 } else { 0 }),
            "origQty": fmt_e8(o.qty_e8),
            "executedQty": fmt_e8(o.executed_e8),
            "cumQty": fmt_e8(o.executed_e8),
            "cumQuote": fmt_e8(quote(o.price_e8, o.executed_e8)),
            "timeInForce": o.tif,
            "type": o.kind.name(),
            "reduceOnly": false,
            "closePosition": false,
            "side": o.side.name(),
            "positionSide": "BOTH",
            "stopPrice": fmt_e8(0),
            "workingType": "CONTRACT_PRICE",
            "priceProtect": false,
            "origType": o.kind.name(),
            "priceMatch": "NONE",
            "selfTradePreventionMode": "EXPIRE_MAKER",
            "goodTillDate": 0,
            "updateTime": o.update_time,
        });
        if with_time {
            if let Value::Object(m) = &mut v {
                m.insert("time".into(), json!(o.time));
            }
        }
        v
    }

    fn order_query_json(&self, o: &Order) -> Value {
        json!({
            "symbol": self.cfg.symbol,
            "orderId": o.order_id,
            "orderListId": -1,
            "clientOrderId": o.client_id,
            "price": fmt_e8(if o.kind == OrdType::Market { 0 } else { o.price_e8 }),
            "origQty": fmt_e8(o.qty_e8),
            "executedQty": fmt_e8(o.executed_e8),
            "cummulativeQuoteQty": fmt_e8(quote(o.price_e8, o.executed_e8)),
            "status": o.status.name(),
            "timeInForce": o.tif,
            "type": o.kind.name(),
            "side": o.side.name(),
            "stopPrice": fmt_e8(0),
            "icebergQty": fmt_e8(0),
            "time": o.time,
            "updateTime": o.update_time,
            "isWorking": o.status == Status::New,
            "workingTime": o.time,
            "origQuoteOrderQty": fmt_e8(0),
            "selfTradePreventionMode": "EXPIRE_MAKER",
        })
    }

    /// The 503 of a 5xx fault. Spot documents every 5xx as unknown and has two
    /// codes for it: -1006 for a request the engine ran, -1007 ("send status
    /// unknown") for one it never got. USD-M futures documents which 503 texts mean
    /// "may have run" and which mean "failed": the emulator sends the first after
    /// executing and the -1001 text, a documented failure, without executing.
    pub(crate) fn server_error(&self, executed: bool) -> Response {
        match (self.cfg.profile, executed) {
            (Profile::BinanceSpot, true) => Response::error(
                503,
                -1006,
                "An unexpected response was received from the message bus. Execution status unknown.",
            ),
            (Profile::BinanceSpot, false) => Response::error(
                503,
                -1007,
                "Timeout waiting for response from backend server. Send status unknown; execution status unknown.",
            ),
            (Profile::BinanceFutures, true) => Response::error(
                503,
                -1000,
                "Unknown error, please check your request or try again later.",
            ),
            (Profile::BinanceFutures, false) => Response::error(
                503,
                -1001,
                "Internal error; unable to process your request. Please try again.",
            ),
            (Profile::Bybit, executed) => bybit::server_error(executed, self.now_hint),
            (Profile::Okx, executed) => okx::server_error(executed),
        }
    }

    /// The configured limits as `exchangeInfo` lists them (`rateLimits`).
    fn rate_limits_json(&self) -> Vec<Value> {
        self.cfg
            .rate_limits
            .iter()
            .map(|l| {
                json!({
                    "rateLimitType": l.kind.name(),
                    "interval": l.interval.name(),
                    "intervalNum": l.interval_num,
                    "limit": l.limit,
                })
            })
            .collect()
    }

    fn exchange_info(&self, now: i64) -> Value {
        if !self.spot() {
            return self.exchange_info_futures(now);
        }
        let limits = self.rate_limits_json();
        let sym = &self.cfg.symbol;
        json!({
            "timezone": "UTC",
            "serverTime": now,
            "rateLimits": limits,
            "exchangeFilters": [],
            "symbols": [{
                "symbol": sym,
                "status": "TRADING",
                "baseAsset": base_asset(sym),
                "baseAssetPrecision": 8,
                "quoteAsset": quote_asset(sym),
                "quotePrecision": 8,
                "quoteAssetPrecision": 8,
                "orderTypes": ["LIMIT", "LIMIT_MAKER", "MARKET"],
                "icebergAllowed": false,
                "ocoAllowed": false,
                "quoteOrderQtyMarketAllowed": false,
                "allowTrailingStop": false,
                "cancelReplaceAllowed": true,
                "isSpotTradingAllowed": true,
                "isMarginTradingAllowed": false,
                "filters": [
                    { "filterType": "PRICE_FILTER", "minPrice": "0.00000001", "maxPrice": "1000000.00000000", "tickSize": "0.00000001" },
                    { "filterType": "LOT_SIZE", "minQty": "0.00000001", "maxQty": "9000.00000000", "stepSize": "0.00000001" }
                ],
                "permissions": [],
                "permissionSets": [["SPOT"]],
                "defaultSelfTradePreventionMode": "EXPIRE_MAKER",
                "allowedSelfTradePreventionModes": ["EXPIRE_TAKER", "EXPIRE_MAKER", "EXPIRE_BOTH"]
            }]
        })
    }

    fn exchange_info_futures(&self, now: i64) -> Value {
        let limits = self.rate_limits_json();
        let sym = &self.cfg.symbol;
        json!({
            "timezone": "UTC",
            "serverTime": now,
            "futuresType": "U_MARGINED",
            "rateLimits": limits,
            "exchangeFilters": [],
            "assets": [{ "asset": quote_asset(sym), "marginAvailable": true, "autoAssetExchange": "0" }],
            "symbols": [{
                "symbol": sym,
                "pair": sym,
                "contractType": "PERPETUAL",
                "status": "TRADING",
                "baseAsset": base_asset(sym),
                "quoteAsset": quote_asset(sym),
                "marginAsset": quote_asset(sym),
                "pricePrecision": 2,
                "quantityPrecision": 3,
                "baseAssetPrecision": 8,
                "quotePrecision": 8,
                "orderTypes": ["LIMIT", "MARKET"],
                "timeInForce": ["GTC", "IOC", "FOK", "GTX"],
                "filters": [
                    { "filterType": "PRICE_FILTER", "minPrice": "0.01", "maxPrice": "1000000", "tickSize": "0.01" },
                    { "filterType": "LOT_SIZE", "minQty": "0.001", "maxQty": "1000", "stepSize": "0.001" }
                ]
            }]
        })
    }

    fn depth(&self, limit: usize, now: i64) -> Value {
        let tick = 1_000_000u64; // 0.01
        let mid = self.cfg.mid_price_e8;
        let level = |p: u64| json!([fmt_e8(p), fmt_e8(100_000_000)]);
        let bids: Vec<Value> = (1..=limit as u64)
            .map_while(|i| mid.checked_sub(i * tick))
            .filter(|&p| p > 0)
            .map(level)
            .collect();
        let asks: Vec<Value> = (1..=limit as u64).map(|i| level(mid + i * tick)).collect();
        if self.spot() {
            json!({ "lastUpdateId": now, "bids": bids, "asks": asks })
        } else {
            json!({ "lastUpdateId": now, "E": now, "T": now, "bids": bids, "asks": asks })
        }
    }

    fn account(&self, _account: usize, now: i64) -> Value {
        let sym = &self.cfg.symbol;
        if !self.spot() {
            let q = quote_asset(sym);
            return json!({
                "feeTier": 0,
                "canTrade": true,
                "canDeposit": true,
                "canWithdraw": true,
                "updateTime": 0,
                "multiAssetsMargin": false,
                "totalInitialMargin": "0.00000000",
                "totalMaintMargin": "0.00000000",
                "totalWalletBalance": "100000.00000000",
                "totalUnrealizedProfit": "0.00000000",
                "totalMarginBalance": "100000.00000000",
                "availableBalance": "100000.00000000",
                "maxWithdrawAmount": "100000.00000000",
                "assets": [{
                    "asset": q,
                    "walletBalance": "100000.00000000",
                    "unrealizedProfit": "0.00000000",
                    "marginBalance": "100000.00000000",
                    "availableBalance": "100000.00000000",
                    "updateTime": now
                }],
                "positions": []
            });
        }
        json!({
            "makerCommission": 10,
            "takerCommission": 10,
            "buyerCommission": 0,
            "sellerCommission": 0,
            "commissionRates": { "maker": "0.00100000", "taker": "0.00100000", "buyer": "0.00000000", "seller": "0.00000000" },
            "canTrade": true,
            "canWithdraw": true,
            "canDeposit": true,
            "brokered": false,
            "requireSelfTradePrevention": false,
            "preventSor": false,
            "updateTime": now,
            "accountType": "SPOT",
            "balances": [
                { "asset": base_asset(sym), "free": "1000.00000000", "locked": "0.00000000" },
                { "asset": quote_asset(sym), "free": "100000000.00000000", "locked": "0.00000000" }
            ],
            "permissions": ["SPOT"],
            "uid": 1
        })
    }
}

fn quote(price_e8: u64, qty_e8: u64) -> u64 {
    let q = u128::from(price_e8) * u128::from(qty_e8) / 100_000_000;
    u64::try_from(q).unwrap_or(u64::MAX)
}

fn quote_asset(sym: &str) -> &str {
    for q in ["USDT", "USDC", "FDUSD", "BTC", "ETH", "BNB"] {
        if sym.len() > q.len() && sym.ends_with(q) {
            return q;
        }
    }
    "USDT"
}

fn base_asset(sym: &str) -> &str {
    let q = quote_asset(sym);
    sym.strip_suffix(q).unwrap_or(sym)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_parse_exactly() {
        assert_eq!(parse_e8("0.1"), Some(10_000_000));
        assert_eq!(parse_e8("1"), Some(100_000_000));
        assert_eq!(parse_e8("1.000000000"), Some(100_000_000));
        assert_eq!(parse_e8(".5"), Some(50_000_000));
        assert_eq!(parse_e8("0.000000001"), None);
        assert_eq!(parse_e8("-1"), None);
        assert_eq!(parse_e8("1e3"), None);
        assert_eq!(parse_e8(""), None);
        assert_eq!(fmt_e8(123_456_789), "1.23456789");
    }

    #[test]
    fn seeded_generator_repeats() {
        let mut a = SplitMix(7);
        let mut b = SplitMix(7);
        for _ in 0..10 {
            let x = a.next_f64();
            assert_eq!(x, b.next_f64());
            assert!((0.0..1.0).contains(&x));
        }
    }

    #[test]
    fn assets_split_from_the_symbol() {
        assert_eq!(base_asset("BTCUSDT"), "BTC");
        assert_eq!(quote_asset("ETHBTC"), "BTC");
    }
}
