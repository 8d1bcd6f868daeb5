//! Binance Spot: limits loaded from `GET /api/v3/exchangeInfo` `rateLimits`, fixed
//! windows aligned to the UTC minute, 10 s and day, usage from `X-MBX-USED-WEIGHT-*`
//! and `X-MBX-ORDER-COUNT-*`, and the error codes of
//! <https://developers.binance.com/docs/binance-spot-api-docs/errors>.
//!
//! Sources: <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/limits>,
//! <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/general-api-information>.
//!
//! **NotFound bound.** A signed request is refused unless it is processed by
//! `timestamp + recvWindow` on the venue's clock, and (per Binance's *Timing
//! security* section and its 2025 changelog, paraphrased here: check the page)
//! the matching engine checks it again when the order reaches it. So [`Prepared::deadline_ns`] is the last moment an
//! order can still run: a query sent after it (plus a margin for the clock anchor)
//! that answers -2013 means the order never ran. Binance USD-M futures
//! (`binance_futures`) sign the same way and share the bound.
//!
//! The Binance table (buckets named after `rateLimits`, header matching, messages
//! that name a window) is shared with `binance_futures`. Reading an answer never
//! allocates.

use crate::adapt::{self, Clock, Error, Parts, Request, Venue};
use crate::binance_auth::{restamp, sign, sign_order, sign_pending};
pub use crate::binance_auth::{signature, Auth, DEFAULT_RECV_WINDOW_MS};
use crate::binance_replace::{Replace, ReplaceMode};
use crate::endpoint::{
    self, ApiKey, CancelReplace, ClientIds, Endpoints, IdFormat, Lookup, Method, NewOrder,
    OrderInfo, OrderRef, OrderState, OrderType, Placed, Prepared, Side, SignKey, Symbol,
    TimeInForce, Writer,
};
use crate::json::{self, Value};
use crate::response::Response;
use core::sync::atomic::{AtomicU64, Ordering};
use ergon_core::{BucketId, Budget, Builder, ConfigError, Part, Spec, Verdict};
pub mod template;

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;

/// The least IP ban Binance documents ("from 2 minutes to 3 days"): the venue's end
/// of a ban that names none. The halt itself lasts until a person clears it.
pub const MIN_BAN_NS: i64 = 120 * SEC;

/// How far back an answer's own time stamp may lie and still be the time its
/// request was counted at: Binance's longest `recvWindow`, 60 s (a request older
/// than its window is refused, never counted). General API Information,
/// "Timing security": <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/endpoint-security-type>.
pub const MAX_STAMP_AGE_NS: i64 = 60 * SEC;

/// What a Binance rate limit counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counts {
    /// `REQUEST_WEIGHT`: the IP's weight.
    Weight,
    /// `ORDERS`: the account's new orders.
    Orders,
    /// `RAW_REQUESTS`: the IP's requests, whatever their weight.
    Raw,
}

impl Counts {
    fn name(self) -> &'static str {
        match self {
            Counts::Weight => "REQUEST_WEIGHT",
            Counts::Orders => "ORDERS",
            Counts::Raw => "RAW_REQUESTS",
        }
    }
}

/// One declared Binance limit.
#[derive(Clone, Debug)]
pub struct Limit {
    /// What it counts.
    pub counts: Counts,
    /// Its bucket.
    pub bucket: BucketId,
    /// Its window.
    pub window_ns: i64,
    /// The interval as the headers write it: `1M`, `10S`, `1D`.
    pub suffix: String,
    /// Shared by several hosts (its limit is a grant leased through etcd): the
    /// venue's figure for it is the account's count, every host's orders, so it is
    /// never fed to `observe_used` (see [`BinanceSpot::leave_to_lease`]).
    pub leased: bool,
}

/// The Binance limits of one budget, and the IP gate.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Every declared limit ([`Limits::limits`]); changed only through
    /// [`Limits::limits_mut`], which takes a new stamp.
    limits: Vec<Limit>,
    /// The IP gate every request and connect charges ([`Limits::ip`]); never
    /// changed once declared.
    ip: BucketId,
    /// The venue's UTC clock.
    pub clock: Clock,
    /// A number no other `Limits` had with other `limits` or `ip` (a clone shares
    /// it until either is changed): new when made and on every change, so an
    /// order template sees in one comparison that the parts it kept are still
    /// these limits' ([`Limits::stamp`]).
    stamp: u64,
}

/// The next [`Limits::stamp`].
fn limits_stamp() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Normal (quotes, decision reads) may not use the last 1/50 of a limit, so protective
/// closes (Urgent) always find room; Bulk (background reads) may not use the last 1/5,
/// so it never starves quoting. Both round down: a tiny limit keeps no headroom.
const NORMAL_HEADROOM_DIV: u64 = 50;
/// See [`NORMAL_HEADROOM_DIV`].
const BULK_HEADROOM_DIV: u64 = 5;

fn interval(word: &str) -> Option<(i64, char)> {
    Some(match word {
        "SECOND" => (SEC, 'S'),
        "MINUTE" => (60 * SEC, 'M'),
        "HOUR" => (3600 * SEC, 'H'),
        "DAY" => (86_400 * SEC, 'D'),
        _ => return None,
    })
}

impl Limits {
    /// Declares the IP gate and one fixed window per `(counts, interval_num,
    /// INTERVAL, limit)`, aligned to UTC on `clock`, each charge within `guard_ns` of
    /// a boundary counting on both sides of it.
    pub fn declare(
        builder: &mut Builder,
        clock: Clock,
        guard_ns: i64,
        table: &[(Counts, u64, &str, u64)],
    ) -> Result<Self, Error> {
        let ip = builder.add("ip", Spec::gate())?;
        let mut limits = Vec::new();
        for &(counts, num, unit, limit) in table {
            let (unit_ns, letter) = interval(unit).ok_or(Error::BadField("interval"))?;
            let window_ns = i64::try_from(num)
                .ok()
                .filter(|n| *n > 0)
                .and_then(|n| n.checked_mul(unit_ns))
                .ok_or(Error::BadField("intervalNum"))?;
            let suffix = format!("{num}{letter}");
            let name = format!("{}_{suffix}", counts.name());
            let spec = Spec::fixed(limit, window_ns)
                .phase(clock.phase_ns(window_ns))
                .guard(guard_ns)
                .headroom(limit / NORMAL_HEADROOM_DIV, limit / BULK_HEADROOM_DIV);
            let bucket = builder.add(&name, spec)?;
            limits.push(Limit {
                counts,
                bucket,
                window_ns,
                suffix,
                leased: false,
            });
        }
        let me = Limits {
            limits,
            ip,
            clock,
            stamp: limits_stamp(),
        };
        if me.narrowest(Counts::Weight).is_none() {
            return Err(Error::BadField("rateLimits: no REQUEST_WEIGHT limit"));
        }
        if me.narrowest(Counts::Orders).is_none() {
            return Err(Error::BadField("rateLimits: no ORDERS limit"));
        }
        Ok(me)
    }

    /// Reads the `rateLimits` of an `exchangeInfo` body into a table for
    /// [`Limits::declare`].
    pub fn table_from_exchange_info(body: &[u8]) -> Result<Vec<(Counts, u64, String, u64)>, Error> {
        let v = json::parse(body)?;
        let list = v.get("rateLimits")?.ok_or(Error::BadField("rateLimits"))?;
        let mut table = Vec::new();
        let mut buf = [0u8; 32];
        for item in list.items()? {
            let field = |name: &'static str| -> Result<Value<'_>, Error> {
                item.get(name)?.ok_or(Error::BadField(name))
            };
            let counts = match field("rateLimitType")?.decode_str(&mut buf)? {
                "REQUEST_WEIGHT" => Counts::Weight,
                "ORDERS" => Counts::Orders,
                "RAW_REQUESTS" => Counts::Raw,
                _ => return Err(Error::BadField("rateLimitType")),
            };
            let unit = field("interval")?.decode_str(&mut buf)?.to_owned();
            let num = field("intervalNum")?
                .as_u64()
                .map_err(|_| Error::BadField("intervalNum"))?;
            let limit = field("limit")?
                .as_u64()
                .map_err(|_| Error::BadField("limit"))?;
            table.push((counts, num, unit, limit));
        }
        Ok(table)
    }

    /// Every declared limit.
    pub fn limits(&self) -> &[Limit] {
        &self.limits
    }

    /// Every declared limit, to change (add, remove, rebind, lease): the order
    /// templates made before ask the adapter for their parts again if what they
    /// are computed from changed.
    pub fn limits_mut(&mut self) -> &mut Vec<Limit> {
        self.stamp = limits_stamp();
        &mut self.limits
    }

    /// The IP gate every request and connect charges.
    pub fn ip(&self) -> BucketId {
        self.ip
    }

    /// Names what the limits are now: two `Limits` with the same stamp have the
    /// same [`Limits::limits`] and [`Limits::ip`] (the converse need not hold).
    pub(crate) fn stamp(&self) -> u64 {
        self.stamp
    }

    /// Marks `bucket` leased (shared by several hosts through etcd): the venue's
    /// figures for it count the account, every host's, and no longer raise it.
    /// Whether `bucket` is one of these limits.
    pub fn leave_to_lease(&mut self, bucket: BucketId) -> bool {
        let mut found = false;
        for l in self.limits_mut().iter_mut().filter(|l| l.bucket == bucket) {
            l.leased = true;
            found = true;
        }
        found
    }

    /// Every limit counting `counts`.
    pub fn of(&self, counts: Counts) -> impl Iterator<Item = &Limit> {
        self.limits.iter().filter(move |l| l.counts == counts)
    }

    /// The limit of the shortest window counting `counts`.
    pub fn narrowest(&self, counts: Counts) -> Option<&Limit> {
        self.of(counts).min_by_key(|l| l.window_ns)
    }

    /// The limit counting `counts` whose window is `window_ns`, or the narrowest.
    pub fn named_or_narrowest(&self, counts: Counts, window_ns: Option<i64>) -> Option<&Limit> {
        window_ns
            .and_then(|w| self.of(counts).find(|l| l.window_ns == w))
            .or_else(|| self.narrowest(counts))
    }

    /// Pushes `cost` on every limit counting `counts`.
    pub fn push(&self, parts: &mut Parts, counts: Counts, cost: u32) -> Result<(), Error> {
        for l in self.of(counts) {
            parts
                .try_push(Part::new(l.bucket, cost))
                .map_err(|_| Error::Config(ConfigError::TooManyParts))?;
        }
        Ok(())
    }

    /// Parts of a connect: the IP gate alone.
    pub fn connect_parts(&self) -> Parts {
        let mut parts = Parts::new();
        parts.push(Part::new(self.ip, 0));
        parts
    }

    /// Pushes `cost` on the limit counting `counts` over `window_ns`, if declared.
    pub fn push_window(
        &self,
        parts: &mut Parts,
        counts: Counts,
        window_ns: i64,
        cost: u32,
    ) -> Result<(), Error> {
        for l in self.of(counts).filter(|l| l.window_ns == window_ns) {
            parts
                .try_push(Part::new(l.bucket, cost))
                .map_err(|_| Error::Config(ConfigError::TooManyParts))?;
        }
        Ok(())
    }

    /// Parts of a request: the IP gate, then each kind of limit.
    pub fn parts(&self, weight: u32, orders: u32, raw: u32) -> Result<Parts, Error> {
        let mut parts = Parts::new();
        parts.push(Part::new(self.ip, 0));
        self.push(&mut parts, Counts::Weight, weight)?;
        if orders > 0 {
            self.push(&mut parts, Counts::Orders, orders)?;
        }
        if raw > 0 {
            self.push(&mut parts, Counts::Raw, raw)?;
        }
        Ok(parts)
    }

    /// Holds `limit` for the venue's wait, or else until its UTC window ends.
    pub fn hold(&self, budget: &mut Budget, limit: &Limit, wait: Option<i64>, now: i64) -> Verdict {
        let wait = wait.unwrap_or_else(|| self.clock.to_boundary_ns(limit.window_ns, now));
        adapt::hold(budget, limit.bucket, Some(wait), now)
    }

    /// Halts the IP gate; the venue's end of the ban is its `Retry-After`, else the
    /// `IP banned until <ms>` of the message, else [`MIN_BAN_NS`] from now.
    pub fn ban(&self, budget: &mut Budget, wait: Option<i64>, msg: &Msg, now: i64) -> Verdict {
        let until = match (wait, msg.banned_until_ms()) {
            (Some(w), _) => now.saturating_add(w),
            (None, Some(ms)) => self.clock.now_ns_at(ms),
            (None, None) => now.saturating_add(MIN_BAN_NS),
        };
        adapt::ban(budget, self.ip, until, now)
    }

    /// The venue's stamp of the request, on the caller's clock, for
    /// [`Budget::observe_used_at`]: the answer's own stamp (`transactTime` on
    /// Spot, `updateTime` on USD-M, UTC ms) mapped with the clock the windows are
    /// aligned on, where it has a plausible one, else `now`. A stamp further back
    /// than [`MAX_STAMP_AGE_NS`] (Binance's longest `recvWindow`) is no time this
    /// request was counted at, and is not trusted. A stamp after `now` (this
    /// clock behind the venue's) is passed on as it is: the budget reads it as no
    /// stamp, which is careful on both sides of a boundary, where `now` in its
    /// place would book the figure in a window it may not belong to.
    pub fn counted_at(&self, stamp_ms: Option<i64>, now: i64) -> i64 {
        stamp_ms
            .map(|ms| self.clock.now_ns_at(ms))
            .filter(|&t| t >= now.saturating_sub(MAX_STAMP_AGE_NS))
            .unwrap_or(now)
    }

    /// Feeds `X-MBX-USED-WEIGHT-<interval>` and `X-MBX-ORDER-COUNT-<interval>` to
    /// the limits of that interval, as counted by the venue at `counted` (see
    /// [`Limits::counted_at`]: a figure read after a window's end is the window
    /// it was counted in); returns the family of the first bad header.
    pub fn observe(
        &self,
        r: &Response<'_>,
        budget: &mut Budget,
        counted: i64,
        now: i64,
    ) -> Option<&'static str> {
        let mut bad = None;
        for (prefix, counts, family) in [
            ("X-MBX-USED-WEIGHT-", Counts::Weight, "X-MBX-USED-WEIGHT-*"),
            ("X-MBX-ORDER-COUNT-", Counts::Orders, "X-MBX-ORDER-COUNT-*"),
        ] {
            for h in r.headers_with_prefix(prefix) {
                let suffix = &h.name[prefix.len()..];
                let Some(limit) = self
                    .of(counts)
                    .find(|l| l.suffix.as_bytes().eq_ignore_ascii_case(suffix))
                else {
                    continue; // an interval this budget does not declare
                };
                if limit.leased {
                    continue; // the account's count, not this host's
                }
                if adapt::observe_header(budget, limit.bucket, h.value, counted, now).is_err() {
                    bad = bad.or(Some(family));
                }
            }
        }
        bad
    }
}

/// The `code` and `msg` of a Binance error body (`{"code":-1003,"msg":"..."}`),
/// read in place.
#[derive(Clone, Copy, Debug, Default)]
pub struct Msg<'a> {
    /// The body parsed, if it is JSON.
    pub json: Option<Value<'a>>,
    /// `code`, if present and an integer.
    pub code: Option<i64>,
    msg: Option<Value<'a>>,
}

impl<'a> Msg<'a> {
    /// Reads `body`: its members walked once for both fields (the first of
    /// each name, as [`Value::get`] finds them), where a success's answer has
    /// neither.
    pub fn read(body: &'a [u8]) -> Self {
        let Ok(json) = json::parse(body) else {
            return Msg::default();
        };
        let (mut code, mut msg) = (None, None);
        for (k, v) in json.members().into_iter().flatten() {
            if code.is_none() && k.str_eq("code") == Ok(true) {
                code = Some(v);
            } else if msg.is_none() && k.str_eq("msg") == Ok(true) {
                msg = Some(v);
            }
            if code.is_some() && msg.is_some() {
                break;
            }
        }
        Msg {
            json: Some(json),
            code: code.and_then(|c| c.as_i64().ok()),
            msg: msg.filter(|m| m.kind() == json::Kind::String),
        }
    }

    /// The venue's time stamp `field` (UTC ms), if the body has one as an integer.
    pub fn stamp_ms(&self, field: &str) -> Option<i64> {
        self.json?.get(field).ok()??.as_i64().ok()
    }

    /// Whether `msg` contains `needle`.
    pub fn says(&self, needle: &str) -> bool {
        self.msg
            .is_some_and(|m| m.str_contains(needle).unwrap_or(false))
    }

    /// Whether `msg` is `text`.
    pub fn is(&self, text: &str) -> bool {
        self.msg.is_some_and(|m| m.str_eq(text).unwrap_or(false))
    }

    /// The window a message names: `... per 10 SECOND.`, `... per 1 MINUTE.`
    pub fn window_ns(&self) -> Option<i64> {
        let mut buf = [0u8; 256];
        let text = self.msg?.decode_str(&mut buf).ok()?;
        let at = text.rfind("per ")?;
        let mut words = text[at + 4..].split([' ', '.', ';']);
        let num: i64 = words.next()?.parse().ok()?;
        let (unit, _) = interval(words.next()?)?;
        num.checked_mul(unit)
    }

    /// The end of a ban a message names: `IP banned until 1700000300000.`
    pub fn banned_until_ms(&self) -> Option<i64> {
        let mut buf = [0u8; 256];
        let text = self.msg?.decode_str(&mut buf).ok()?;
        let at = text.find("banned until ")? + "banned until ".len();
        let digits: &str = text[at..].split(|c: char| !c.is_ascii_digit()).next()?;
        digits.parse().ok()
    }
}

/// Writes `name=value`, after a `&` unless it is the first parameter.
pub(crate) fn param(w: &mut Writer<'_>, first: &mut bool, name: &str, value: &str) {
    if !core::mem::take(first) {
        w.s("&");
    }
    w.s(name);
    w.s("=");
    w.s(value);
}

/// How a venue writes a post-only order.
#[derive(Clone, Copy)]
pub(crate) enum PostOnly {
    /// `type=LIMIT_MAKER` (Spot).
    LimitMaker,
    /// `type=LIMIT&timeInForce=GTX` (USD-M futures).
    Gtx,
}

/// The parameters of a new order: `symbol`, `side`, `type`, `timeInForce`,
/// `quantity`, `price`, then `newClientOrderId` (named `id_name`).
pub(crate) fn order_params(
    w: &mut Writer<'_>,
    first: &mut bool,
    o: &NewOrder<'_>,
    id_name: &str,
    post_only: PostOnly,
) -> Result<(), Error> {
    param(w, first, "symbol", o.symbol.as_str());
    let side = match o.side {
        Side::Buy => "BUY",
        Side::Sell => "SELL",
    };
    param(w, first, "side", side);
    match o.order_type {
        OrderType::Limit(tif) => {
            param(w, first, "type", "LIMIT");
            let tif = match tif {
                TimeInForce::Gtc => "GTC",
                TimeInForce::Ioc => "IOC",
                TimeInForce::Fok => "FOK",
            };
            param(w, first, "timeInForce", tif);
        }
        OrderType::PostOnly => match post_only {
            PostOnly::LimitMaker => param(w, first, "type", "LIMIT_MAKER"),
            PostOnly::Gtx => {
                param(w, first, "type", "LIMIT");
                param(w, first, "timeInForce", "GTX");
            }
        },
        OrderType::Market => param(w, first, "type", "MARKET"),
    }
    param(w, first, "quantity", o.quantity.as_str());
    match (o.order_type, o.price) {
        (OrderType::Market, None) => {}
        (OrderType::Market, Some(_)) => return Err(Error::BadArgument("price of a market order")),
        (_, Some(p)) => param(w, first, "price", p.as_str()),
        (_, None) => return Err(Error::BadArgument("price of a limit order")),
    }
    param(w, first, id_name, o.client_order_id.as_str());
    w.id(o.client_order_id)
}

/// Starts a request's target: `path?`; returns where the query starts.
pub(crate) fn begin(w: &mut Writer<'_>, path: &str) -> usize {
    w.open();
    w.s(path);
    w.s("?");
    w.pos()
}

/// Ends an unsigned request (no query left open): closes the target; the
/// deadline is `now` plus the receive window.
pub(crate) fn unsigned(w: &mut Writer<'_>, auth: &Auth, now: i64) -> i64 {
    w.close_target();
    now.saturating_add(auth.recv_window_ms.saturating_mul(MS))
}

/// An order's `status` word as a state.
pub(crate) fn order_state(word: &str) -> OrderState {
    match word {
        "PENDING_NEW" => OrderState::Pending,
        "NEW" | "PENDING_CANCEL" => OrderState::New,
        "PARTIALLY_FILLED" => OrderState::PartiallyFilled,
        "FILLED" => OrderState::Filled,
        "CANCELED" => OrderState::Canceled,
        "REJECTED" => OrderState::Rejected,
        "EXPIRED" | "EXPIRED_IN_MATCH" => OrderState::Expired,
        _ => OrderState::Other,
    }
}

/// An order object of a Binance answer (`orderId`, `status`, `executedQty`); the
/// state is `Pending` when the answer (an `ACK`) has no status.
pub(crate) fn order_info(v: Value<'_>) -> Option<OrderInfo> {
    let id = endpoint::json_text(v.get("orderId").ok()??)?;
    let mut buf = [0u8; 32];
    let state = match v.get("status").ok().flatten() {
        Some(s) => order_state(s.decode_str(&mut buf).ok()?),
        None => OrderState::Pending,
    };
    let filled = v
        .get("executedQty")
        .ok()
        .flatten()
        .and_then(endpoint::json_text);
    Some(OrderInfo {
        state,
        venue_order_id: id,
        filled,
    })
}

/// A Binance answer to an order query: the order, -2013 (no such order), or else
/// unknown.
pub(crate) fn read_order(r: &Response<'_>) -> Lookup {
    let m = Msg::read(r.body);
    match (r.status, m.code, m.json) {
        (400..=499, Some(-2013), _) => Lookup::NotFound,
        (200..=299, None, Some(v)) => order_info(v).map_or(Lookup::Unknown, Lookup::Found),
        _ => Lookup::Unknown,
    }
}

/// A Binance answer to a new order: accepted with its id, refused by a code that
/// says it did not run, or unknown.
pub(crate) fn read_placed(r: &Response<'_>) -> Placed {
    let m = Msg::read(r.body);
    match (r.status, m.code, m.json) {
        (200..=299, None, Some(v)) => order_info(v).map_or(Placed::Unknown, Placed::Accepted),
        // -1006/-1007/-1008: the execution status is unknown.
        (_, Some(-1008..=-1006), _) => Placed::Unknown,
        (400..=499, Some(_), _) => Placed::Refused,
        _ => Placed::Unknown,
    }
}

/// The weight of `GET /api/v3/depth` by `limit` (1 to 5000).
pub fn depth_weight(limit: u32) -> Option<u32> {
    Some(match limit {
        1..=100 => 5,
        101..=500 => 25,
        501..=1000 => 50,
        1001..=5000 => 250,
        _ => return None,
    })
}

/// The Binance Spot adapter.
#[derive(Clone, Debug)]
pub struct BinanceSpot {
    /// Its limits.
    pub limits: Limits,
    auth: Auth,
    pub(crate) replace: Replace,
}

impl BinanceSpot {
    /// Marks `bucket` as leased (shared by several hosts through etcd): the
    /// venue's usage figures for it (`X-MBX-ORDER-COUNT-*`, the WebSocket API's
    /// `rateLimits`) count every host's orders, so they no longer raise it. Whether
    /// `bucket` is one of its limits.
    pub fn leave_to_lease(&mut self, bucket: BucketId) -> bool {
        self.limits.leave_to_lease(bucket)
    }

    /// Its key, signing key and receive window (for its WebSocket API session).
    pub(crate) fn credentials(&self) -> (Option<ApiKey>, Option<SignKey>, i64) {
        (
            self.auth.api_key,
            self.auth.key.clone(),
            self.auth.recv_window_ms,
        )
    }

    /// Declares the buckets of an `exchangeInfo` body: the IP gate `ip` and one fixed
    /// window per `rateLimits` entry, named after it (`REQUEST_WEIGHT_1M`,
    /// `ORDERS_10S`, `ORDERS_1D`, `RAW_REQUESTS_5M`).
    pub fn from_exchange_info(
        body: &[u8],
        builder: &mut Builder,
        clock: Clock,
        guard_ns: i64,
    ) -> Result<Self, Error> {
        let table = Limits::table_from_exchange_info(body)?;
        let table: Vec<_> = table
            .iter()
            .map(|(c, n, u, l)| (*c, *n, u.as_str(), *l))
            .collect();
        let limits = Limits::declare(builder, clock, guard_ns, &table)?;
        let me = BinanceSpot {
            limits,
            auth: Auth::default(),
            replace: Replace::default(),
        };
        me.parts(Request::CancelReplace)?; // the widest part list must fit a ticket
        Ok(me)
    }

    /// The deadline of a signed request: its `timestamp` plus `recvWindow`, on the
    /// caller's clock. The venue refuses it after that, so never re-send it later.
    pub fn deadline_ns(&self, timestamp_ms: i64, recv_window_ms: i64) -> i64 {
        self.limits
            .clock
            .now_ns_at(timestamp_ms.saturating_add(recv_window_ms))
    }

    /// The key signed endpoints use (without one they return [`Error::NoKey`]).
    pub fn with_auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    /// The `cancelReplaceMode` its cancel-replaces send from now on (REST and
    /// WebSocket API; default [`ReplaceMode::StopOnFailure`]).
    pub fn set_replace_mode(&mut self, mode: ReplaceMode) {
        self.replace.mode = mode;
    }
}

impl ClientIds for BinanceSpot {
    /// `newClientOrderId`: `^[\.A-Z\:/a-z0-9_-]{1,36}$`, unique among open orders
    /// (<https://developers.binance.com/docs/binance-spot-api-docs/rest-api/trading-endpoints>,
    /// "New order"): 32 hex digits fit.
    const ID_FORMAT: IdFormat = IdFormat::Hex;
}

impl Endpoints for BinanceSpot {
    /// A fresh `timestamp` and signature on the same request (the module's `restamp`).
    fn restamp(&mut self, p: &mut Prepared, now: i64) -> Result<(), Error> {
        restamp(p, &self.auth, &self.limits.clock, now)
    }

    /// New orders (builder and template), cancels, cancel-replaces and order
    /// queries.
    fn defer_signatures(&mut self, on: bool) {
        self.auth.defer_signatures(on);
    }

    /// With this adapter's key, as Binance signs a REST request.
    fn sign_pending(&self, p: &mut Prepared) -> Result<(), Error> {
        sign_pending(p, &self.auth)
    }

    /// `POST /api/v3/order`: weight 1, one order on every `ORDERS` limit.
    fn new_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &NewOrder<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        if o.reduce_only {
            return Err(Error::BadArgument("reduce_only (Spot has no positions)"));
        }
        let q = begin(&mut w, "/api/v3/order");
        let mut first = true;
        order_params(
            &mut w,
            &mut first,
            o,
            "newClientOrderId",
            PostOnly::LimitMaker,
        )?;
        let deadline = sign_order(&mut w, &mut first, &self.auth, &self.limits.clock, q, now)?;
        w.finish(self, Request::Order, Method::Post, deadline)
    }

    /// `DELETE /api/v3/order` by `origClientOrderId`: weight 1.
    fn cancel<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let q = begin(&mut w, "/api/v3/order");
        let mut first = true;
        param(&mut w, &mut first, "symbol", o.symbol.as_str());
        param(
            &mut w,
            &mut first,
            "origClientOrderId",
            o.client_order_id.as_str(),
        );
        w.id(o.client_order_id)?;
        let deadline = sign_order(&mut w, &mut first, &self.auth, &self.limits.clock, q, now)?;
        w.finish(self, Request::Cancel, Method::Delete, deadline)
    }

    /// `DELETE /api/v3/openOrders` of `symbol` (every open order of it): weight 1.
    fn cancel_all<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        let q = begin(&mut w, "/api/v3/openOrders");
        let mut first = true;
        param(&mut w, &mut first, "symbol", symbol.as_str());
        let deadline = sign(&mut w, &mut first, &self.auth, &self.limits.clock, q, now)?;
        w.finish(self, Request::Cancel, Method::Delete, deadline)
    }

    /// `POST /api/v3/order/cancelReplace` in its [`ReplaceMode`]: weight 1, one
    /// order. The client order ids are the new order's, then the cancelled one's;
    /// its answer's parts, in that order, are [`Venue::batch_items`].
    fn cancel_replace<'p>(
        &mut self,
        out: &'p mut Prepared,
        a: &CancelReplace<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(a.new.symbol);
        if a.new.reduce_only {
            return Err(Error::BadArgument("reduce_only (Spot has no positions)"));
        }
        let q = begin(&mut w, "/api/v3/order/cancelReplace");
        let mut first = true;
        order_params(
            &mut w,
            &mut first,
            &a.new,
            "newClientOrderId",
            PostOnly::LimitMaker,
        )?;
        let mode = self.replace.mode.as_str();
        param(&mut w, &mut first, "cancelReplaceMode", mode);
        param(
            &mut w,
            &mut first,
            "cancelOrigClientOrderId",
            a.cancel.as_str(),
        );
        w.id(a.cancel)?;
        let deadline = sign_order(&mut w, &mut first, &self.auth, &self.limits.clock, q, now)?;
        w.finish(self, Request::CancelReplace, Method::Post, deadline)
    }

    /// `GET /api/v3/order` by `origClientOrderId`: weight 4.
    fn query_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let q = begin(&mut w, "/api/v3/order");
        let mut first = true;
        param(&mut w, &mut first, "symbol", o.symbol.as_str());
        param(
            &mut w,
            &mut first,
            "origClientOrderId",
            o.client_order_id.as_str(),
        );
        w.id(o.client_order_id)?;
        let deadline = sign_order(&mut w, &mut first, &self.auth, &self.limits.clock, q, now)?;
        w.finish(self, Request::Read(4), Method::Get, deadline)
    }

    /// `GET /api/v3/openOrders`: weight 6 for one symbol, 80 for all.
    fn open_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Option<Symbol<'_>>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        let q = begin(&mut w, "/api/v3/openOrders");
        let mut first = true;
        if let Some(s) = symbol {
            param(&mut w, &mut first, "symbol", s.as_str());
        }
        let deadline = sign(&mut w, &mut first, &self.auth, &self.limits.clock, q, now)?;
        let weight = if symbol.is_some() { 6 } else { 80 };
        w.finish(self, Request::Read(weight), Method::Get, deadline)
    }

    /// `GET /api/v3/depth`: weight 5, 25, 50 or 250 by `limit` ([`depth_weight`]).
    fn book<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        depth: u32,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        let weight = depth_weight(depth).ok_or(Error::BadArgument("depth (1..=5000)"))?;
        begin(&mut w, "/api/v3/depth");
        let mut first = true;
        param(&mut w, &mut first, "symbol", symbol.as_str());
        w.s("&limit=");
        w.int(i64::from(depth));
        let deadline = unsigned(&mut w, &self.auth, now);
        w.finish(self, Request::Read(weight), Method::Get, deadline)
    }

    /// `GET /api/v3/account?omitZeroBalances=true`: weight 20.
    fn account<'p>(&mut self, out: &'p mut Prepared, now: i64) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        let q = begin(&mut w, "/api/v3/account");
        let mut first = true;
        param(&mut w, &mut first, "omitZeroBalances", "true");
        let deadline = sign(&mut w, &mut first, &self.auth, &self.limits.clock, q, now)?;
        w.finish(self, Request::Read(20), Method::Get, deadline)
    }

    fn read_order(&self, answer: &Response<'_>) -> Lookup {
        read_order(answer)
    }

    fn read_placed(&self, answer: &Response<'_>) -> Placed {
        read_placed(answer)
    }
}

impl Venue for BinanceSpot {
    fn parts(&self, request: Request<'_>) -> Result<Parts, Error> {
        let l = &self.limits;
        match request {
            Request::Connect => Ok(l.connect_parts()),
            Request::Order | Request::CancelReplace => l.parts(1, 1, 1),
            Request::Cancel => l.parts(1, 0, 1),
            // An order list (OCO/OTO): weight 1, each order counts.
            Request::Batch(n) => l.parts(1, u32::from(n), 1),
            Request::Read(w) => l.parts(w, 0, 1),
            Request::Info(_) => Err(Error::Unsupported),
        }
    }

    fn on_response(
        &mut self,
        request: Request<'_>,
        r: &Response<'_>,
        budget: &mut Budget,
        now: i64,
    ) -> Result<Verdict, Error> {
        self.replace.parts.clear();
        let l = &self.limits;
        let retry = adapt::response_retry_after(r, &l.clock, now);
        let mut bad = retry.malformed.then_some("Retry-After");
        let wait = retry.wait_ns;
        let m = Msg::read(r.body);
        let weight = |window| l.named_or_narrowest(Counts::Weight, window);
        let verdict = match (r.status, m.code) {
            (418 | 403, _) => l.ban(budget, wait, &m, now),
            (_, Some(-1003)) if m.says("banned until") => l.ban(budget, wait, &m, now),
            (_, Some(-1003)) => {
                let raw = l.narrowest(Counts::Raw).filter(|_| m.says("queued"));
                match raw.or_else(|| weight(m.window_ns())) {
                    Some(limit) => l.hold(budget, limit, wait, now),
                    None => Verdict::Unknown,
                }
            }
            (_, Some(-1015)) => match l.named_or_narrowest(Counts::Orders, m.window_ns()) {
                Some(limit) => l.hold(budget, limit, wait, now),
                None => Verdict::Unknown,
            },
            (_, Some(-1021)) => Verdict::ClockSkew,
            // -1006 UNEXPECTED_RESP, -1007 TIMEOUT, -1008 SERVER_BUSY: execution status unknown.
            (_, Some(-1008..=-1006)) => Verdict::Unknown,
            // cancelReplace: -2022 both failed, -2021 one half ran; each part's
            // fate from `data` where it says it (binance_replace).
            (_, Some(-2022 | -2021)) => self
                .replace
                .read(m.code, m.json)
                .unwrap_or(Verdict::Unknown),
            (429, _) => match weight(None) {
                Some(limit) => l.hold(budget, limit, wait, now),
                None => Verdict::Unknown,
            },
            (200..=299, _) if m.json.is_none() => Verdict::Unknown,
            (400..=499, None) if m.json.is_none() && request.is_write() => Verdict::Unknown,
            (s, _) => adapt::status_rule(s, budget, l.ip, wait, now),
        };
        let counted = l.counted_at(m.stamp_ms("transactTime"), now);
        bad = bad.or(l.observe(r, budget, counted, now));
        adapt::finish(verdict, bad)
    }

    /// A cancel-replace's parts (new order, cancel), as its -2021/-2022 said.
    fn batch_items(&self) -> &[Verdict] {
        &self.replace.parts
    }
}
