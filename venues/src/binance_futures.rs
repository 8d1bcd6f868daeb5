//! Binance USD-M futures: 2400 weight per minute, 1200 orders per minute and 300
//! per 10 s (UTC-aligned fixed windows), the four documented 503 answers, 408, and
//! futures codes where they differ from Spot (-2021/-2022 are business rejections
//! here, not cancel-replace outcomes).
//!
//! Sources: <https://developers.binance.com/docs/derivatives/usds-margined-futures/general-info>,
//! <https://developers.binance.com/docs/derivatives/usds-margined-futures/error-code>.
//!
//! Reading an answer never allocates.

use crate::adapt::{self, Batch, Clock, Error, Parts, Request, Venue, MAX_ITEMS};
use crate::endpoint::{
    Amend, ClientIds, Endpoints, Fill, IdFormat, Lookup, Method, NewOrder, OrderRef, OrderType,
    Placed, Prepared, Side, Symbol, Writer,
};
use crate::json;
use crate::response::Response;
use arrayvec::ArrayVec;
use ergon_core::{BucketId, Budget, Builder, Spec, Verdict};

use crate::binance_auth::{self, Auth};
use crate::binance_spot::template::OrderTemplate;
use crate::binance_spot::{self as spot, Counts, Limits, Msg, PostOnly};

const SEC: i64 = 1_000_000_000;

/// Most orders of one `POST /fapi/v1/batchOrders`.
pub const MAX_BATCH_ORDERS: usize = 5;

/// The weight of `GET /fapi/v1/depth` by `limit` (5, 10, 20, 50, 100, 500, 1000).
pub fn depth_weight(limit: u32) -> Option<u32> {
    Some(match limit {
        5 | 10 | 20 | 50 => 2,
        100 => 5,
        500 => 10,
        1000 => 20,
        _ => return None,
    })
}

/// The documented defaults: `REQUEST_WEIGHT_1M` 2400, `ORDERS_1M` 1200,
/// `ORDERS_10S` 300 (<https://developers.binance.com/docs/derivatives/usds-margined-futures/general-info>,
/// checked 2026-11-30). `GET /fapi/v1/exchangeInfo` publishes the account's own
/// `rateLimits`: prefer them ([`Limits::table_from_exchange_info`] reads either
/// product's answer).
pub const DEFAULT_TABLE: &[(Counts, u64, &str, u64)] = &[
    (Counts::Weight, 1, "MINUTE", 2400),
    (Counts::Orders, 1, "MINUTE", 1200),
    (Counts::Orders, 10, "SECOND", 300),
];

/// The 503 answer that says the request may have run.
const UNKNOWN_503: &str = "Unknown error, please check your request or try again later.";
/// The 503 answers that say it did not run.
const NOT_RUN_503: [&str; 2] = [
    "Service Unavailable.",
    "Internal error; unable to process your request. Please try again.",
];

/// The Binance USD-M futures adapter.
#[derive(Clone, Debug)]
pub struct BinanceFutures {
    /// Its limits.
    pub limits: Limits,
    /// The dead man's switch's own share of `REQUEST_WEIGHT_1M`
    /// ([`SWITCH_RESERVE_WEIGHT`], carved out of the declared weight limits).
    pub switch: BucketId,
    auth: Auth,
    items: ArrayVec<Verdict, MAX_ITEMS>,
}

impl BinanceFutures {
    /// Declares `ip`, `REQUEST_WEIGHT_1M`, `ORDERS_1M` and `ORDERS_10S` with the
    /// documented limits (or those of `table`, read from `exchangeInfo`), each
    /// weight limit less [`SWITCH_RESERVE_WEIGHT`], and `switch`, that reserve
    /// (see [`crate::switch`]).
    pub fn new(
        builder: &mut Builder,
        clock: Clock,
        guard_ns: i64,
        table: &[(Counts, u64, &str, u64)],
    ) -> Result<Self, Error> {
        // The switch's weight is counted by the venue in the same limit: the
        // strategies' share is declared smaller by it, so no class can take it.
        let table: Vec<(Counts, u64, &str, u64)> = table
            .iter()
            .map(|&(c, n, unit, limit)| match c {
                Counts::Weight if limit > 2 * SWITCH_RESERVE_WEIGHT => {
                    (c, n, unit, limit - SWITCH_RESERVE_WEIGHT)
                }
                _ => (c, n, unit, limit),
            })
            .collect();
        let limits = Limits::declare(builder, clock, guard_ns, &table)?;
        let switch = builder.add(
            "switch",
            Spec::fixed(SWITCH_RESERVE_WEIGHT, 60 * SEC)
                .phase(clock.phase_ns(60 * SEC))
                .guard(guard_ns),
        )?;
        let me = BinanceFutures {
            limits,
            switch,
            auth: Auth::default(),
            items: ArrayVec::new(),
        };
        me.parts(Request::Order)?;
        Ok(me)
    }

    /// The deadline of a signed request: `timestamp` plus `recvWindow`.
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

    /// Its key, signing key and receive window (for its WebSocket API session).
    pub(crate) fn credentials(
        &self,
    ) -> (
        Option<crate::endpoint::ApiKey>,
        Option<crate::endpoint::SignKey>,
        i64,
    ) {
        (
            self.auth.api_key,
            self.auth.key.clone(),
            self.auth.recv_window_ms,
        )
    }

    fn order_params(
        &self,
        w: &mut Writer<'_>,
        first: &mut bool,
        o: &NewOrder<'_>,
    ) -> Result<(), Error> {
        spot::order_params(w, first, o, "newClientOrderId", PostOnly::Gtx)?;
        if o.reduce_only {
            spot::param(w, first, "reduceOnly", "true");
        }
        Ok(())
    }
}

/// One order of a batch as the JSON object `batchOrders` lists, written as text.
fn batch_item(o: &NewOrder<'_>, out: &mut arrayvec::ArrayString<512>) -> Result<(), Error> {
    use core::fmt::Write;
    let side = match o.side {
        Side::Buy => "BUY",
        Side::Sell => "SELL",
    };
    let full = |_| Error::BadArgument("batch order too long");
    write!(
        out,
        "{{\"symbol\":\"{}\",\"side\":\"{side}\",",
        o.symbol.as_str()
    )
    .map_err(full)?;
    match o.order_type {
        OrderType::Limit(tif) => {
            let tif = match tif {
                crate::endpoint::TimeInForce::Gtc => "GTC",
                crate::endpoint::TimeInForce::Ioc => "IOC",
                crate::endpoint::TimeInForce::Fok => "FOK",
            };
            write!(out, "\"type\":\"LIMIT\",\"timeInForce\":\"{tif}\",").map_err(full)?;
        }
        OrderType::PostOnly => {
            write!(out, "\"type\":\"LIMIT\",\"timeInForce\":\"GTX\",").map_err(full)?
        }
        OrderType::Market => write!(out, "\"type\":\"MARKET\",").map_err(full)?,
    }
    write!(out, "\"quantity\":\"{}\",", o.quantity.as_str()).map_err(full)?;
    match (o.order_type, o.price) {
        (OrderType::Market, None) => {}
        (OrderType::Market, Some(_)) => return Err(Error::BadArgument("price of a market order")),
        (_, Some(p)) => write!(out, "\"price\":\"{}\",", p.as_str()).map_err(full)?,
        (_, None) => return Err(Error::BadArgument("price of a limit order")),
    }
    if o.reduce_only {
        write!(out, "\"reduceOnly\":\"true\",").map_err(full)?;
    }
    write!(
        out,
        "\"newClientOrderId\":\"{}\"}}",
        o.client_order_id.as_str()
    )
    .map_err(full)
}

impl ClientIds for BinanceFutures {
    /// `newClientOrderId`: `^[\.A-Z\:/a-z0-9_-]{1,36}$`
    /// (<https://developers.binance.com/docs/derivatives/usds-margined-futures/trade/rest-api>,
    /// "New Order"): 32 hex digits fit.
    const ID_FORMAT: IdFormat = IdFormat::Hex;
}

impl BinanceFutures {
    /// The template of `symbol`'s `side` orders of `order_type`, `reduce_only` or
    /// not: the same checks as [`Endpoints::new_order`] (a post-only order is
    /// `LIMIT` with `GTX`), made once. See [`OrderTemplate`].
    pub fn order_template(
        &self,
        symbol: Symbol<'_>,
        side: Side,
        order_type: OrderType,
        reduce_only: bool,
    ) -> Result<OrderTemplate, Error> {
        OrderTemplate::build(
            "/fapi/v1/order",
            (symbol, side, order_type, reduce_only),
            (self, &self.auth, &self.limits),
            |w, first, o| self.order_params(w, first, o),
        )
    }

    /// One order of template `t` into `out`: what [`Endpoints::new_order`] writes
    /// for the template's order with `fill`'s price, quantity and client order id,
    /// stamped and signed at `now`; `Err` (and `out` empty) as Spot's
    /// `new_order_from`.
    pub fn new_order_from<'p>(
        &self,
        t: &OrderTemplate,
        out: &'p mut Prepared,
        fill: &Fill<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        t.fill(out, fill, (self, &self.auth, &self.limits), now)
    }
}

impl Endpoints for BinanceFutures {
    /// A fresh `timestamp` and signature on the same request (signed as Spot's).
    fn restamp(&mut self, p: &mut Prepared, now: i64) -> Result<(), Error> {
        binance_auth::restamp(p, &self.auth, &self.limits.clock, now)
    }

    /// New orders (builder and template), cancels, modifies and order queries.
    fn defer_signatures(&mut self, on: bool) {
        self.auth.defer_signatures(on);
    }

    /// With this adapter's key, as Binance signs a REST request.
    fn sign_pending(&self, p: &mut Prepared) -> Result<(), Error> {
        binance_auth::sign_pending(p, &self.auth)
    }

    /// `POST /fapi/v1/order`: one order on the 10 s and 1 min order limits, IP weight 0.
    fn new_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &NewOrder<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let q = spot::begin(&mut w, "/fapi/v1/order");
        let mut first = true;
        self.order_params(&mut w, &mut first, o)?;
        let deadline =
            binance_auth::sign_order(&mut w, &mut first, &self.auth, &self.limits.clock, q, now)?;
        w.finish(self, Request::Order, Method::Post, deadline)
    }

    /// `DELETE /fapi/v1/order` by `origClientOrderId`: weight 1.
    fn cancel<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let q = spot::begin(&mut w, "/fapi/v1/order");
        let mut first = true;
        spot::param(&mut w, &mut first, "symbol", o.symbol.as_str());
        spot::param(
            &mut w,
            &mut first,
            "origClientOrderId",
            o.client_order_id.as_str(),
        );
        w.id(o.client_order_id)?;
        let deadline =
            binance_auth::sign_order(&mut w, &mut first, &self.auth, &self.limits.clock, q, now)?;
        w.finish(self, Request::Cancel, Method::Delete, deadline)
    }

    /// `PUT /fapi/v1/order` (modify): side, quantity and price are all required;
    /// one order on each order limit and IP weight 0.
    fn amend<'p>(
        &mut self,
        out: &'p mut Prepared,
        a: &Amend<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(a.order.symbol);
        let (Some(price), Some(qty)) = (a.price, a.quantity) else {
            return Err(Error::BadArgument("modify needs both price and quantity"));
        };
        let q = spot::begin(&mut w, "/fapi/v1/order");
        let mut first = true;
        spot::param(&mut w, &mut first, "symbol", a.order.symbol.as_str());
        let side = match a.side {
            Side::Buy => "BUY",
            Side::Sell => "SELL",
        };
        spot::param(&mut w, &mut first, "side", side);
        spot::param(&mut w, &mut first, "quantity", qty.as_str());
        spot::param(&mut w, &mut first, "price", price.as_str());
        spot::param(
            &mut w,
            &mut first,
            "origClientOrderId",
            a.order.client_order_id.as_str(),
        );
        w.id(a.order.client_order_id)?;
        let deadline =
            binance_auth::sign_order(&mut w, &mut first, &self.auth, &self.limits.clock, q, now)?;
        w.finish(self, Request::CancelReplace, Method::Put, deadline)
    }

    /// `GET /fapi/v1/order` by `origClientOrderId`: weight 1.
    fn query_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let q = spot::begin(&mut w, "/fapi/v1/order");
        let mut first = true;
        spot::param(&mut w, &mut first, "symbol", o.symbol.as_str());
        spot::param(
            &mut w,
            &mut first,
            "origClientOrderId",
            o.client_order_id.as_str(),
        );
        w.id(o.client_order_id)?;
        let deadline =
            binance_auth::sign_order(&mut w, &mut first, &self.auth, &self.limits.clock, q, now)?;
        w.finish(self, Request::Read(1), Method::Get, deadline)
    }

    /// `GET /fapi/v1/openOrders`: weight 1 for one symbol, 40 for all.
    fn open_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Option<Symbol<'_>>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        let q = spot::begin(&mut w, "/fapi/v1/openOrders");
        let mut first = true;
        if let Some(s) = symbol {
            spot::param(&mut w, &mut first, "symbol", s.as_str());
        }
        let deadline =
            binance_auth::sign(&mut w, &mut first, &self.auth, &self.limits.clock, q, now)?;
        let weight = if symbol.is_some() { 1 } else { 40 };
        w.finish(self, Request::Read(weight), Method::Get, deadline)
    }

    /// `GET /fapi/v1/depth`: weight 2, 5, 10 or 20 by `limit` ([`depth_weight`]).
    fn book<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        depth: u32,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        let weight = depth_weight(depth)
            .ok_or(Error::BadArgument("depth (5, 10, 20, 50, 100, 500, 1000)"))?;
        spot::begin(&mut w, "/fapi/v1/depth");
        let mut first = true;
        spot::param(&mut w, &mut first, "symbol", symbol.as_str());
        w.s("&limit=");
        w.int(i64::from(depth));
        let deadline = spot::unsigned(&mut w, &self.auth, now);
        w.finish(self, Request::Read(weight), Method::Get, deadline)
    }

    /// `GET /fapi/v3/account`: weight 5.
    fn account<'p>(&mut self, out: &'p mut Prepared, now: i64) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        let q = spot::begin(&mut w, "/fapi/v3/account");
        let mut first = true;
        let deadline =
            binance_auth::sign(&mut w, &mut first, &self.auth, &self.limits.clock, q, now)?;
        w.finish(self, Request::Read(5), Method::Get, deadline)
    }

    /// `POST /fapi/v1/batchOrders`, 1 to 5 orders: weight 5, 5 on the 10 s order
    /// limit and 1 on the minute one, whatever the count.
    fn batch_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        orders: &[NewOrder<'_>],
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(orders.first().map(|o| o.symbol));
        if orders.is_empty() || orders.len() > MAX_BATCH_ORDERS {
            return Err(Error::BadArgument("batch of 1 to 5 orders"));
        }
        let q = spot::begin(&mut w, "/fapi/v1/batchOrders");
        w.s("batchOrders=");
        w.enc("[");
        for (i, o) in orders.iter().enumerate() {
            let mut item = arrayvec::ArrayString::<512>::new();
            batch_item(o, &mut item)?;
            if i > 0 {
                w.enc(",");
            }
            w.enc(&item);
            w.id(o.client_order_id)?;
        }
        w.enc("]");
        let mut first = false;
        let deadline =
            binance_auth::sign(&mut w, &mut first, &self.auth, &self.limits.clock, q, now)?;
        // orders.len() <= 5: the cast cannot truncate.
        w.finish(
            self,
            Request::Batch(orders.len() as u16),
            Method::Post,
            deadline,
        )
    }

    fn read_order(&self, answer: &Response<'_>) -> Lookup {
        spot::read_order(answer)
    }

    fn read_placed(&self, answer: &Response<'_>) -> Placed {
        spot::read_placed(answer)
    }
}

/// One item of a `batchOrders` answer: an order object is done; an error object
/// by its code (-1008 not run; -1006/-1007 unknown; any other a rejection of that
/// order alone).
fn batch_item_verdict(item: json::Value<'_>) -> Verdict {
    match item.get("code").ok().flatten().map(|c| c.as_i64()) {
        None if item.get("orderId").ok().flatten().is_some() => Verdict::Done,
        Some(Ok(-1008)) => Verdict::NotRun,
        Some(Ok(-1007 | -1006)) => Verdict::Unknown,
        Some(Ok(_)) => Verdict::Rejected,
        _ => Verdict::Unknown,
    }
}

/// Whether a 503 body (JSON `msg`, or the plain text) is `text`.
fn says_503(m: &Msg<'_>, body: &[u8], text: &str) -> bool {
    m.is(text) || body.trim_ascii() == text.as_bytes()
}

impl Venue for BinanceFutures {
    fn parts(&self, request: Request<'_>) -> Result<Parts, Error> {
        let l = &self.limits;
        match request {
            Request::Connect => Ok(l.connect_parts()),
            // New order: one on each order limit, IP weight 0.
            Request::Order => l.parts(0, 1, 0),
            Request::Cancel => l.parts(1, 0, 0),
            // Modify order: as a new order, IP weight 0, one on each order limit.
            Request::CancelReplace => l.parts(0, 1, 0),
            // batchOrders (at most 5): weight 5, 5 on the 10 s order limit, 1 on
            // the minute one, whatever the count.
            Request::Batch(n) if usize::from(n) <= MAX_BATCH_ORDERS => {
                let mut p = l.parts(5, 0, 0)?;
                l.push_window(&mut p, Counts::Orders, 10 * SEC, 5)?;
                l.push_window(&mut p, Counts::Orders, 60 * SEC, 1)?;
                Ok(p)
            }
            Request::Batch(_) => Err(Error::BadArgument("batch of 1 to 5 orders")),
            Request::Read(w) => l.parts(w, 0, 0),
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
        self.items.clear();
        let l = &self.limits;
        let retry = adapt::response_retry_after(r, &l.clock, now);
        let mut bad = retry.malformed.then_some("Retry-After");
        let wait = retry.wait_ns;
        let m = Msg::read(r.body);
        let verdict = match (r.status, m.code) {
            (418 | 403, _) => l.ban(budget, wait, &m, now),
            (_, Some(-1003)) if m.says("banned until") => l.ban(budget, wait, &m, now),
            (_, Some(-1003)) => match l.named_or_narrowest(Counts::Weight, m.window_ns()) {
                Some(limit) => l.hold(budget, limit, wait, now),
                None => Verdict::Unknown,
            },
            (_, Some(-1015)) => match l.named_or_narrowest(Counts::Orders, m.window_ns()) {
                Some(limit) => l.hold(budget, limit, wait, now),
                None => Verdict::Unknown,
            },
            (_, Some(-1021)) => Verdict::ClockSkew,
            // System-level protection: not run, not counted.
            (_, Some(-1008)) => Verdict::NotRun,
            (503, _) if says_503(&m, r.body, UNKNOWN_503) => Verdict::Unknown,
            (503, _) if NOT_RUN_503.iter().any(|t| says_503(&m, r.body, t)) => Verdict::NotRun,
            (_, Some(-1006 | -1007)) => Verdict::Unknown,
            (408, _) => Verdict::Unknown,
            (429, _) => match l.narrowest(Counts::Weight) {
                Some(limit) => l.hold(budget, limit, wait, now),
                None => Verdict::Unknown,
            },
            (200..=299, _) if m.json.is_none() => Verdict::Unknown,
            // batchOrders: a list with one order or error object per order.
            (200..=299, None) if matches!(request, Request::Batch(_)) => {
                match m.json.map(|v| v.items()) {
                    Some(Ok(items)) => {
                        let mut batch = Batch::new();
                        items.for_each(|i| batch.add(batch_item_verdict(i)));
                        let verdict = batch.verdict().unwrap_or(Verdict::Unknown);
                        self.items = batch.into_items();
                        verdict
                    }
                    _ => Verdict::Unknown,
                }
            }
            (400..=499, None) if m.json.is_none() && request.is_write() => Verdict::Unknown,
            (s, _) => adapt::status_rule(s, budget, l.ip(), wait, now),
        };
        // An order's answer stamps the venue's time of it (`updateTime`).
        let counted = l.counted_at(m.stamp_ms("updateTime"), now);
        bad = bad.or(l.observe(r, budget, counted, now));
        adapt::finish(verdict, bad)
    }

    fn batch_items(&self) -> &[Verdict] {
        &self.items
    }
}

/// The weight of `POST /fapi/v1/countdownCancelAll` (weight 10).
pub const SWITCH_WEIGHT: u32 = 10;

/// Weight a minute reserved for the dead man's switch: four calls, one every 15 s,
/// twice the documented example's pace (a call every 30 s with a 120 s countdown).
pub const SWITCH_RESERVE_WEIGHT: u64 = 4 * SWITCH_WEIGHT as u64;

/// `POST /fapi/v1/countdownCancelAll`: `symbol`, `countdownTime` in ms, 0 stops the
/// timer; called again, it replaces the running countdown (the heartbeat); weight
/// 10; the venue checks countdowns about every 10 ms; the answer echoes `symbol`
/// and `countdownTime` (no trigger time). The documented example: a call every
/// 30 s with a 120 s countdown. No range is documented for USD-M (the options
/// endpoint's minimum is 5 s): we take 60 s to 10 min, the lower end set by
/// [`SWITCH_RESERVE_WEIGHT`], which pays for four calls a minute (a refresh every
/// quarter of the timeout).
///
/// Source: <https://developers.binance.com/docs/derivatives/usds-margined-futures/trade/rest-api/Auto-Cancel-All-Open-Orders>
/// (checked 2026-12-01).
impl crate::switch::Switch for BinanceFutures {
    fn switch_spec(&self) -> crate::switch::SwitchSpec {
        crate::switch::SwitchSpec {
            min_timeout_ms: 60_000,
            max_timeout_ms: 600_000,
            default_timeout_ms: 120_000,
            refresh_div: 4,
            fires_per_day: None,
            scope: crate::switch::Scope::Symbol,
            arms: crate::switch::Arms::Call,
        }
    }

    fn arm<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        timeout_ms: u32,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let w = Writer::start(out);
        if !self.switch_spec().takes(timeout_ms) {
            return Err(Error::BadArgument("countdownTime (60000..=600000 ms)"));
        }
        self.countdown(w, symbol, timeout_ms, now)
    }

    fn disarm<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let w = Writer::start(out);
        self.countdown(w, symbol, 0, now)
    }

    fn read_switch(&self, answer: &Response<'_>) -> crate::switch::SwitchAnswer {
        use crate::switch::{Refusal, SwitchAnswer};
        let m = Msg::read(answer.body);
        match (answer.status, m.code, m.json) {
            (200..=299, None, Some(v)) => match crate::switch::int_field(v, "countdownTime") {
                Some(0) => SwitchAnswer::Disarmed,
                Some(_) => SwitchAnswer::Armed {
                    trigger_utc_ms: None,
                },
                None => SwitchAnswer::Unknown,
            },
            // -1102/-1111/-1130: a parameter the venue refused (the countdown).
            (400..=499, Some(-1102 | -1111 | -1130), _) => SwitchAnswer::Refused(Refusal::Timeout),
            (400..=499, Some(-2014 | -2015), _) => SwitchAnswer::Refused(Refusal::NotAllowed),
            (400..=499, Some(-1003 | -1015 | -1021 | -1008), _) => SwitchAnswer::Unknown,
            (400..=499, Some(code), _) if code != 0 => SwitchAnswer::Refused(Refusal::Code(code)),
            _ => SwitchAnswer::Unknown,
        }
    }

    fn switch_guards(&self) -> ArrayVec<BucketId, { crate::switch::MAX_GUARDS }> {
        let mut g = ArrayVec::new();
        g.push(self.limits.ip());
        for l in self
            .limits
            .of(Counts::Weight)
            .take(crate::switch::MAX_GUARDS - 1)
        {
            g.push(l.bucket);
        }
        g
    }
}

impl BinanceFutures {
    fn countdown<'p>(
        &self,
        mut w: Writer<'p>,
        symbol: Symbol<'_>,
        timeout_ms: u32,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        w.symbol(symbol);
        let q = spot::begin(&mut w, "/fapi/v1/countdownCancelAll");
        let mut first = true;
        spot::param(&mut w, &mut first, "symbol", symbol.as_str());
        w.s("&countdownTime=");
        w.int(i64::from(timeout_ms));
        let deadline =
            binance_auth::sign(&mut w, &mut first, &self.auth, &self.limits.clock, q, now)?;
        let mut parts = Parts::new();
        parts.push(ergon_core::Part::new(self.limits.ip(), 0));
        parts.push(ergon_core::Part::new(self.switch, SWITCH_WEIGHT));
        w.finish_with(parts, Request::Read(0), Method::Post, deadline)
    }
}

#[cfg(test)]
mod template_tests;
