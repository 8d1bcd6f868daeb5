//! Deribit (JSON-RPC over HTTP and WebSocket): two credit pools per sub-account,
//! both refilled continuously (a token bucket in ergon's terms), and connection
//! limits per IP.
//!
//! - Matching-engine requests (`buy`, `sell`, `edit`, `cancel`, `cancel_all*`,
//!   `close_position` ...) draw on a pool whose size and refill depend on the
//!   account's tier (read it from `private/get_account_summary`, `limits`);
//! - every other request costs 500 credits of a pool of 50,000 refilled at 10,000
//!   a second (20 requests a second sustained, 100 at once);
//! - an empty pool answers `too_many_requests` (code 10028) and, on a WebSocket,
//!   closes the session;
//! - at most 32 connections per IP (HTTP 429 past them), 16 sessions per API key.
//!
//! Errors are a JSON-RPC `error` object (`code`, `message`, `data`) whatever the
//! HTTP status; the body decides first. No usage headers.
//!
//! Sources (checked 2026-11-30): <https://docs.deribit.com/articles/rate-limits>
//! (the credit system; its copy <https://support.deribit.com/hc/en-us/articles/25944617523357-Rate-Limits>
//! gives the non-matching figures and the tier table, of which the lowest tier, 5
//! requests a second and 20 at once, is the default here),
//! <https://docs.deribit.com/articles/errors> (the error format). The connection
//! figures (32 per IP, 16 sessions per key) are the rate-limit page's as quoted by
//! its api-evangelist copy; the older pages (asia.deribit.com, 2020) give 20 per
//! second with a burst of 100 for non-matching requests, the same as today's pool.
//! Error codes 10040, 10041, 10047, 11051, 11094, 13028, 13888 are the API
//! reference's (v2.1.1) list; the newer errors article lists fewer.
//!
//! Reading an answer never allocates.

use crate::adapt::{self, Clock, Error, Parts, Request, Venue};
use crate::endpoint::{
    self, Amend, ApiKey, ClientIds, Endpoints, HmacKey, IdFormat, Lookup, Method, NewOrder,
    OrderInfo, OrderRef, OrderState, OrderType, Placed, Prepared, Side, Symbol, TimeInForce,
    Writer,
};
use crate::json::{self, Value};
use crate::response::Response;
use crate::waits;
use ergon_core::{BucketId, Budget, Builder, Part, Spec, Verdict};

/// How long an order is valid (`valid_until`, UTC ms): the venue rejects it
/// after that, so it is the order's deadline; other requests use it as ergon's
/// re-send window.
///
/// **NotFound bound.** `valid_until` on `private/buy`, `private/sell`: an order
/// the matching engine has not processed by then is rejected (API v2,
/// `private/buy`, paraphrased; check the page). So a new order's deadline
/// is the last moment it can run; Deribit states no such bound for other
/// requests (an edit, a cancel): their unknown outcomes end `Unresolved`.
pub const VALID_FOR_MS: i64 = 5_000;

/// The limits of one sub-account and IP.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Matching-engine requests per second, sustained.
    pub matching_per_s: u32,
    /// Matching-engine requests at once.
    pub matching_burst: u64,
    /// Credits a non-matching request costs.
    pub credit_cost: u32,
    /// The non-matching pool's size, credits.
    pub credits_max: u64,
    /// Credits refilled per second.
    pub credits_per_s: u32,
    /// Connections per IP (HTTP and WebSocket together).
    pub connections: u64,
    /// Sessions per API key.
    pub sessions: u64,
}

impl Default for Config {
    /// The documented defaults: the lowest tier's 5 matching requests a second and
    /// 20 at once; 500 of 50,000 credits per other request, refilled at 10,000 a
    /// second; 32 connections per IP, 16 sessions per key (docs.deribit.com
    /// rate-limits, checked 2026-11-30).
    fn default() -> Self {
        Config {
            matching_per_s: 5,
            matching_burst: 20,
            credit_cost: 500,
            credits_max: 50_000,
            credits_per_s: 10_000,
            connections: 32,
            sessions: 16,
        }
    }
}

/// Credits a second kept for the order connection's own calls: one request
/// every 2 s, five times the heartbeat's answer at its shortest interval (10 s),
/// so a reconnect's three calls come back within 6 s.
pub const SWITCH_CREDITS_PER_S: u32 = 250;

/// Credits at once kept for them: ten requests, three reconnects' calls (auth,
/// cancel-on-disconnect, heartbeat) and an answer, with room left after a
/// restart that books its predecessor's recent calls.
pub const SWITCH_CREDITS_MAX: u64 = 5_000;

/// The Deribit adapter.
#[derive(Clone, Debug)]
pub struct Deribit {
    clock: Clock,
    credit_cost: u32,
    /// How long the venue's whole non-matching pool takes to refill, ns.
    credits_refill_ns: i64,
    /// The IP gate.
    pub ip: BucketId,
    /// The matching-engine pool, in requests.
    pub matching: BucketId,
    /// The non-matching pool, in credits.
    pub credits: BucketId,
    /// Open connections of the IP.
    pub connections: BucketId,
    /// Open sessions of the key.
    pub sessions: BucketId,
    /// The share of the non-matching pool kept for the order connection's own
    /// calls ([`Deribit::switch_parts`]: `public/auth`, cancel-on-disconnect,
    /// the heartbeat's `public/test`), which no strategy request charges: a
    /// strategy reading flat out cannot starve the heartbeat answer whose
    /// absence closes the connection and fires cancel-on-disconnect. `credits`
    /// is declared smaller by it ([`SWITCH_CREDITS_PER_S`],
    /// [`SWITCH_CREDITS_MAX`]).
    pub switch: BucketId,
    auth: Option<(ApiKey, HmacKey)>,
    nonce: u64,
}

impl Deribit {
    /// Declares `ip`, `matching`, `credits` (less the `switch` share),
    /// `switch`, `connections` and `sessions`.
    pub fn new(builder: &mut Builder, clock: Clock, c: Config) -> Result<Self, Error> {
        if c.matching_per_s == 0
            || c.credits_per_s <= SWITCH_CREDITS_PER_S
            || c.credits_max <= SWITCH_CREDITS_MAX
        {
            return Err(Error::BadField("refill"));
        }
        let credits = Spec::token(
            c.credits_per_s - SWITCH_CREDITS_PER_S,
            c.credits_max - SWITCH_CREDITS_MAX,
        );
        Ok(Deribit {
            clock,
            credit_cost: c.credit_cost,
            credits_refill_ns: i64::try_from(c.credits_max)
                .unwrap_or(i64::MAX)
                .saturating_mul(1_000_000_000)
                / i64::from(c.credits_per_s),
            ip: builder.add("ip", Spec::gate())?,
            matching: builder.add("matching", Spec::token(c.matching_per_s, c.matching_burst))?,
            credits: builder.add("credits", credits)?,
            switch: builder.add(
                "switch",
                Spec::token(SWITCH_CREDITS_PER_S, SWITCH_CREDITS_MAX),
            )?,
            connections: builder.add("connections", Spec::in_flight(c.connections))?,
            sessions: builder.add("sessions", Spec::in_flight(c.sessions))?,
            auth: None,
            nonce: 0,
        })
    }

    /// The venue clock requests are stamped with.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Re-anchors the venue clock (after repeated clock skew): every request
    /// prepared from now on is stamped, and its deadline computed, on `clock`.
    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    /// What the order connection's own calls charge (auth,
    /// cancel-on-disconnect, the heartbeat's answer): the IP gate and one
    /// request's credits of [`Deribit::switch`].
    pub fn switch_parts(&self) -> Parts {
        let mut p = Parts::new();
        p.push(Part::new(self.ip, 0));
        p.push(Part::new(self.switch, self.credit_cost));
        p
    }

    /// The pool a request draws on.
    pub fn pool(&self, request: Request<'_>) -> BucketId {
        if request.is_write() {
            self.matching
        } else {
            self.credits
        }
    }

    /// One error code.
    fn code(
        &self,
        code: i64,
        err: Value<'_>,
        request: Request<'_>,
        budget: &mut Budget,
        now: i64,
    ) -> Verdict {
        let reason_says = |w| {
            err.path("data.reason")
                .ok()
                .flatten()
                .is_some_and(|r| r.str_contains(w).unwrap_or(false))
        };
        match code {
            // The pool is empty: hold it until the venue's has refilled (the
            // non-matching one: its whole size at its refill, not the share
            // the adapter keeps for the strategy).
            10028 if !request.is_write() => {
                adapt::hold(budget, self.credits, Some(self.credits_refill_ns), now)
            }
            10028 => adapt::hold(budget, self.pool(request), None, now),
            // Too many concurrent public requests: the IP's.
            10066 => adapt::hold(budget, self.ip, None, now),
            // "retry", settlement in progress, matching-engine queue full,
            // maintenance: refused before the engine.
            10040 | 10041 | 10047 | 11051 => Verdict::NotRun,
            // "timed_out": "Server did not manage to process request when it was
            // valid (`valid_until`)": it did not run.
            13888 => Verdict::NotRun,
            // Internal error, temporarily unavailable: it may have run.
            11094 | 13028 if request.is_write() => Verdict::Unknown,
            11094 | 13028 => Verdict::NotRun,
            // A signature whose timestamp or nonce the venue refuses.
            10000 | 13004 | 13009 if reason_says("timestamp") || reason_says("nonce") => {
                Verdict::ClockSkew
            }
            _ => Verdict::Rejected,
        }
    }
}

impl Venue for Deribit {
    fn parts(&self, request: Request<'_>) -> Result<Parts, Error> {
        let mut p = Parts::new();
        p.push(Part::new(self.ip, 0));
        match request {
            Request::Connect => {
                p.push(Part::new(self.connections, 1));
                p.push(Part::new(self.sessions, 1));
            }
            Request::Order | Request::Cancel | Request::CancelReplace => {
                p.push(Part::new(self.matching, 1))
            }
            Request::Read(w) => p.push(Part::new(self.credits, self.credit_cost.saturating_mul(w))),
            // Orders go one by one (mass quotes have their own limits).
            Request::Batch(_) | Request::Info(_) => return Err(Error::Unsupported),
        }
        Ok(p)
    }

    fn on_response(
        &mut self,
        request: Request<'_>,
        r: &Response<'_>,
        budget: &mut Budget,
        now: i64,
    ) -> Result<Verdict, Error> {
        let retry = adapt::response_retry_after(r, &self.clock, now);
        let bad = retry.malformed.then_some("Retry-After");
        let body = json::parse(r.body).ok();
        let error = body.and_then(|v| v.get("error").ok().flatten());
        let code = error
            .and_then(|e| e.get("code").ok().flatten())
            .and_then(|c| c.as_i64().ok());
        let has_result = body.is_some_and(|v| v.get("result").ok().flatten().is_some());
        let verdict = match (r.status, error, code) {
            (_, Some(e), Some(code)) => self.code(code, e, request, budget, now),
            (200..=299, None, _) if has_result => Verdict::Done,
            // Past the connection limit of the IP.
            (429, ..) => adapt::hold(budget, self.ip, retry.wait_ns, now),
            (403, ..) if body.is_none() => waits::block(budget, self.ip, retry, now),
            _ if request.is_write() => Verdict::Unknown,
            (200..=299, ..) => Verdict::Unknown,
            (s, ..) if s >= 500 => Verdict::NotRun,
            (s, ..) => adapt::status_rule(s, budget, self.ip, None, now),
        };
        adapt::finish(verdict, bad)
    }
}

impl Deribit {
    /// Signs private requests (`deri-hmac-sha256`) as `client_id` with
    /// `client_secret`.
    pub fn with_auth(mut self, client_id: &str, client_secret: &str) -> Result<Self, Error> {
        self.auth = Some((
            ApiKey::new(client_id)?,
            HmacKey::new(client_secret.as_bytes()),
        ));
        Ok(self)
    }

    /// The client id and the key of the client secret `with_auth` gave, if any: a
    /// WebSocket session signs its `public/auth` with them.
    pub(crate) fn credentials(&self) -> Option<(&ApiKey, &HmacKey)> {
        self.auth.as_ref().map(|(id, key)| (id, key))
    }

    /// The next nonce of this adapter's signatures (one sequence for the REST
    /// requests and a WebSocket session's `public/auth`).
    pub(crate) fn next_nonce(&mut self) -> i64 {
        next_nonce(&mut self.nonce)
    }

    /// A GET of `/api/v2/{method}?` whose query `query` writes; signed when
    /// `private`. Returns the deadline (`valid_until` for orders).
    fn get(
        &mut self,
        w: &mut Writer<'_>,
        method: &str,
        private: bool,
        now: i64,
        query: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>,
    ) -> Result<i64, Error> {
        if private && self.auth.is_none() {
            return Err(Error::NoKey);
        }
        w.open();
        let target_at = w.pos();
        w.s("/api/v2/");
        w.s(method);
        w.s("?");
        query(w)?;
        let target_end = w.pos();
        w.close_target();
        let ts = self.clock.utc_ms(now);
        if let Some((id, key)) = &self.auth {
            if private {
                let nonce = next_nonce(&mut self.nonce);
                w.open();
                w.s("deri-hmac-sha256 id=");
                w.s(id.as_str());
                w.s(",ts=");
                let ts_at = w.pos();
                w.int(ts);
                let ts_end = w.pos();
                w.s(",nonce=");
                let nonce_at = w.pos();
                w.int(nonce);
                let nonce_end = w.pos();
                let mac = key.sign(&[
                    w.bytes(ts_at..ts_end),
                    b"\n",
                    w.bytes(nonce_at..nonce_end),
                    b"\nGET\n",
                    w.bytes(target_at..target_end),
                    b"\n\n",
                ]);
                w.s(",sig=");
                w.hex(&mac);
                w.close_header("Authorization")?;
            }
        }
        Ok(self.clock.now_ns_at(ts.saturating_add(VALID_FOR_MS)))
    }
}

/// Advances `counter` and returns it as a non-negative nonce.
fn next_nonce(counter: &mut u64) -> i64 {
    *counter = counter.wrapping_add(1);
    i64::try_from(*counter & 0x7fff_ffff_ffff_ffff).unwrap_or(0)
}

/// `&name=value` (or without `&` if `first`).
fn q(w: &mut Writer<'_>, first: &mut bool, name: &str, value: &str) {
    if !core::mem::take(first) {
        w.s("&");
    }
    w.s(name);
    w.s("=");
    w.s(value);
}

/// The settlement currency of an instrument: `BTC` of `BTC-PERPETUAL`, `USDC` of
/// `ETH_USDC-PERPETUAL`.
fn currency(instrument: &str) -> &str {
    let head = instrument.split('-').next().unwrap_or(instrument);
    head.split('_').nth(1).unwrap_or(head)
}

/// An order object (`order_id`, `order_state`, `filled_amount`).
fn order_info(o: Value<'_>) -> Option<OrderInfo> {
    let st = o.get("order_state").ok().flatten()?;
    let is = |s| st.str_eq(s).unwrap_or(false);
    let state = if is("open") {
        OrderState::New
    } else if is("untriggered") {
        OrderState::Pending
    } else if is("filled") {
        OrderState::Filled
    } else if is("cancelled") {
        OrderState::Canceled
    } else if is("rejected") {
        OrderState::Rejected
    } else {
        OrderState::Other
    };
    Some(OrderInfo {
        state,
        venue_order_id: endpoint::json_text(o.get("order_id").ok().flatten()?)?,
        filled: o
            .get("filled_amount")
            .ok()
            .flatten()
            .and_then(endpoint::json_text),
    })
}

fn error_code(v: Value<'_>) -> Option<i64> {
    v.path("error.code").ok().flatten()?.as_i64().ok()
}

impl ClientIds for Deribit {
    /// `label`: a user-defined label of at most 64 characters
    /// (<https://docs.deribit.com/api-reference/trading/private-edit_by_label>,
    /// `private/buy` the same): 32 hex digits fit.
    const ID_FORMAT: IdFormat = IdFormat::Hex;
}

impl Endpoints for Deribit {
    /// `private/buy` or `private/sell`, labelled with the client order id, valid
    /// for [`VALID_FOR_MS`]: one matching-engine request.
    fn new_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &NewOrder<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let method = match o.side {
            Side::Buy => "private/buy",
            Side::Sell => "private/sell",
        };
        let valid_until = self.clock.utc_ms(now).saturating_add(VALID_FOR_MS);
        let deadline = self.get(&mut w, method, true, now, |w| {
            let mut f = true;
            q(w, &mut f, "instrument_name", o.symbol.as_str());
            q(w, &mut f, "amount", o.quantity.as_str());
            let (kind, tif) = match o.order_type {
                OrderType::Limit(TimeInForce::Gtc) | OrderType::PostOnly => {
                    ("limit", "good_til_cancelled")
                }
                OrderType::Limit(TimeInForce::Ioc) => ("limit", "immediate_or_cancel"),
                OrderType::Limit(TimeInForce::Fok) => ("limit", "fill_or_kill"),
                OrderType::Market => ("market", "good_til_cancelled"),
            };
            q(w, &mut f, "type", kind);
            match (o.order_type, o.price) {
                (OrderType::Market, None) => {}
                (OrderType::Market, Some(_)) => {
                    return Err(Error::BadArgument("price of a market order"))
                }
                (_, Some(p)) => q(w, &mut f, "price", p.as_str()),
                (_, None) => return Err(Error::BadArgument("price of a limit order")),
            }
            q(w, &mut f, "time_in_force", tif);
            if o.order_type == OrderType::PostOnly {
                q(w, &mut f, "post_only", "true");
                q(w, &mut f, "reject_post_only", "true");
            }
            if o.reduce_only {
                q(w, &mut f, "reduce_only", "true");
            }
            q(w, &mut f, "label", o.client_order_id.as_str());
            w.s("&valid_until=");
            w.int(valid_until);
            w.id(o.client_order_id)
        })?;
        w.finish(self, Request::Order, Method::Get, deadline)
    }

    /// `private/cancel_by_label` (the label is the client order id): one
    /// matching-engine request.
    fn cancel<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let deadline = self.get(&mut w, "private/cancel_by_label", true, now, |w| {
            let mut f = true;
            q(w, &mut f, "label", o.client_order_id.as_str());
            q(w, &mut f, "currency", currency(o.symbol.as_str()));
            w.id(o.client_order_id)
        })?;
        w.finish(self, Request::Cancel, Method::Get, deadline)
    }

    /// `private/edit_by_label` (the amount is required): one matching-engine
    /// request.
    fn amend<'p>(
        &mut self,
        out: &'p mut Prepared,
        a: &Amend<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(a.order.symbol);
        let Some(amount) = a.quantity else {
            return Err(Error::BadArgument(
                "quantity (Deribit's edit needs the amount)",
            ));
        };
        let deadline = self.get(&mut w, "private/edit_by_label", true, now, |w| {
            let mut f = true;
            q(w, &mut f, "label", a.order.client_order_id.as_str());
            q(w, &mut f, "instrument_name", a.order.symbol.as_str());
            q(w, &mut f, "amount", amount.as_str());
            if let Some(p) = a.price {
                q(w, &mut f, "price", p.as_str());
            }
            w.id(a.order.client_order_id)
        })?;
        w.finish(self, Request::CancelReplace, Method::Get, deadline)
    }

    /// `private/get_order_state_by_label`: 500 credits.
    fn query_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let deadline = self.get(&mut w, "private/get_order_state_by_label", true, now, |w| {
            let mut f = true;
            q(w, &mut f, "currency", currency(o.symbol.as_str()));
            q(w, &mut f, "label", o.client_order_id.as_str());
            w.id(o.client_order_id)
        })?;
        w.finish(self, Request::Read(1), Method::Get, deadline)
    }

    /// `private/get_open_orders_by_instrument` (or `get_open_orders`): 500 credits.
    fn open_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Option<Symbol<'_>>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        let method = if symbol.is_some() {
            "private/get_open_orders_by_instrument"
        } else {
            "private/get_open_orders"
        };
        let deadline = self.get(&mut w, method, true, now, |w| {
            if let Some(s) = symbol {
                q(w, &mut true, "instrument_name", s.as_str());
            }
            Ok(())
        })?;
        w.finish(self, Request::Read(1), Method::Get, deadline)
    }

    /// `public/get_order_book` with `depth` (1 to 10000): 500 credits.
    fn book<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        depth: u32,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        if !(1..=10_000).contains(&depth) {
            return Err(Error::BadArgument("depth (1..=10000)"));
        }
        let deadline = self.get(&mut w, "public/get_order_book", false, now, |w| {
            q(w, &mut true, "instrument_name", symbol.as_str());
            w.s("&depth=");
            w.int(i64::from(depth));
            Ok(())
        })?;
        w.finish(self, Request::Read(1), Method::Get, deadline)
    }

    /// `private/get_account_summaries`: 500 credits.
    fn account<'p>(&mut self, out: &'p mut Prepared, now: i64) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        let deadline = self.get(&mut w, "private/get_account_summaries", true, now, |_| {
            Ok(())
        })?;
        w.finish(self, Request::Read(1), Method::Get, deadline)
    }

    /// `get_order_state_by_label`: the first order of `result` (a list), none, or
    /// 10004 (`order_not_found`); any other error, unknown.
    fn read_order(&self, r: &Response<'_>) -> Lookup {
        let Ok(v) = json::parse(r.body) else {
            return Lookup::Unknown;
        };
        if v.get("error").ok().flatten().is_some() {
            return match error_code(v) {
                Some(10004) => Lookup::NotFound,
                _ => Lookup::Unknown,
            };
        }
        let Some(result) = v.get("result").ok().flatten() else {
            return Lookup::Unknown;
        };
        let order = match result.kind() {
            json::Kind::Array => match result.at(0) {
                Ok(Some(o)) => o,
                Ok(None) => return Lookup::NotFound,
                Err(_) => return Lookup::Unknown,
            },
            _ => result,
        };
        order_info(order).map_or(Lookup::Unknown, Lookup::Found)
    }

    /// `buy`/`sell`: `result.order`; an error code that says it did not run is
    /// refused (13888 `timed_out` too: not processed while valid); 11094, 13028
    /// (it may have run) are unknown.
    fn read_placed(&self, r: &Response<'_>) -> Placed {
        let Ok(v) = json::parse(r.body) else {
            return Placed::Unknown;
        };
        if v.get("error").ok().flatten().is_some() {
            return match error_code(v) {
                Some(11094 | 13028) | None => Placed::Unknown,
                Some(_) => Placed::Refused,
            };
        }
        match v.path("result.order").ok().flatten().and_then(order_info) {
            Some(info) if info.state == OrderState::Rejected => Placed::Refused,
            Some(info) => Placed::Accepted(info),
            None => Placed::Unknown,
        }
    }
}

/// **Cancel on disconnect: WebSocket only, per connection.**
/// `private/enable_cancel_on_disconnect` and `private/disable_cancel_on_disconnect`
/// (`scope`: `connection`, the default, or `account`) and `public/set_heartbeat`
/// (`interval`, seconds, not less than 10) are WebSocket-only ("Attempting to use
/// it via REST/HTTP will result in an error response"). Once enabled, the orders
/// created over that connection are cancelled when it closes: a TCP close, 10
/// minutes without traffic, or a heartbeat the client does not answer (a
/// `test_request` it must answer with `public/test`); a graceful
/// `private/logout` does not trigger it. It "does not affect orders created by
/// other connections"; on the `account` scope, every connection opened from then
/// on starts with it enabled. Each answers `"result":"ok"`.
///
/// So it cannot cover orders sent over HTTP, which is how this adapter's
/// [`Endpoints`] go: these frames serve a WebSocket order lane (see the README's
/// switch table), and [`CodCall::read`] reads their answers.
///
/// Sources (checked 2026-12-02):
/// <https://docs.deribit.com/api-reference/session-management/private-enable_cancel_on_disconnect>,
/// <https://docs.deribit.com/api-reference/session-management/private-disable_cancel_on_disconnect>,
/// <https://docs.deribit.com/api-reference/session-management/public-set_heartbeat>,
/// <https://docs.deribit.com/articles/json-rpc-overview> ("subscriptions and
/// cancel on disconnect are not supported" over HTTP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodCall {
    /// `private/enable_cancel_on_disconnect`.
    Enable(CodScope),
    /// `private/disable_cancel_on_disconnect`.
    Disable(CodScope),
    /// `public/set_heartbeat`, the interval in seconds (at least
    /// [`MIN_HEARTBEAT_S`]).
    Heartbeat(u32),
}

/// Where a cancel-on-disconnect change applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodScope {
    /// The connection the frame is sent over (the venue's default).
    Connection,
    /// The account: every connection opened from then on.
    Account,
}

/// The shortest heartbeat interval `public/set_heartbeat` takes, s.
pub const MIN_HEARTBEAT_S: u32 = 10;

/// Deribit's cancel-on-disconnect as a switch ([`crate::switch`]): armed over
/// the order connection itself (scope `connection`), it cancels the orders
/// created over that connection when it closes; the connection's heartbeat
/// (`public/set_heartbeat`, at its shortest, [`MIN_HEARTBEAT_S`]) is what lets
/// the venue see a silent connection dead, so the timeout is that interval.
/// No call to refresh; a graceful `private/logout` does not trigger it.
pub const COD_SPEC: crate::switch::SwitchSpec = crate::switch::SwitchSpec {
    min_timeout_ms: MIN_HEARTBEAT_S * 1_000,
    max_timeout_ms: MIN_HEARTBEAT_S * 1_000,
    default_timeout_ms: MIN_HEARTBEAT_S * 1_000,
    refresh_div: 1,
    fires_per_day: None,
    scope: crate::switch::Scope::Connection,
    arms: crate::switch::Arms::Lane,
};

/// A JSON-RPC text frame, written without allocating.
pub type Frame = arrayvec::ArrayString<160>;

impl CodCall {
    /// The call as a JSON-RPC text frame with request `id`. The private calls
    /// need a connection already authenticated (`public/auth` over it).
    pub fn frame(self, id: u64) -> Result<Frame, Error> {
        use core::fmt::Write;
        let mut f = Frame::new();
        let (method, params) = match self {
            CodCall::Enable(scope) => ("private/enable_cancel_on_disconnect", scope),
            CodCall::Disable(scope) => ("private/disable_cancel_on_disconnect", scope),
            CodCall::Heartbeat(s) if s < MIN_HEARTBEAT_S => {
                return Err(Error::BadArgument("interval (at least 10 s)"))
            }
            CodCall::Heartbeat(s) => {
                let _ = write!(
                    f,
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"public/set_heartbeat","params":{{"interval":{s}}}}}"#
                );
                return Ok(f);
            }
        };
        let scope = match params {
            CodScope::Connection => "connection",
            CodScope::Account => "account",
        };
        let _ = write!(
            f,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{"scope":"{scope}"}}}}"#
        );
        Ok(f)
    }

    /// Reads the venue's answer `frame` to this call sent with request `id`:
    /// enabled on this connection is armed (it fires when the connection
    /// closes); enabled on the account, or a heartbeat set, is configured (it arms
    /// connections, none in particular); disabled is disarmed. An error that says
    /// nothing about the call (the credit pools, a retry, the venue busy) or an
    /// answer to another id is unknown.
    pub fn read(self, id: u64, frame: &[u8]) -> crate::switch::SwitchAnswer {
        use crate::switch::{Refusal, SwitchAnswer};
        let Ok(v) = json::parse(frame) else {
            return SwitchAnswer::Unknown;
        };
        let answers = v
            .get("id")
            .ok()
            .flatten()
            .and_then(|i| i.as_u64().ok())
            .is_some_and(|i| i == id);
        if !answers {
            return SwitchAnswer::Unknown;
        }
        if let Some(code) = error_code(v) {
            return match code {
                10028 | 10040 | 10041 | 10047 | 10066 | 11051 | 11094 | 13028 | 13888 => {
                    SwitchAnswer::Unknown
                }
                // Not authorized, bad credentials, forbidden (the key's scope).
                13004 | 13009 | 13021 => SwitchAnswer::Refused(Refusal::NotAllowed),
                c => SwitchAnswer::Refused(Refusal::Code(c)),
            };
        }
        let ok = v
            .get("result")
            .ok()
            .flatten()
            .is_some_and(|r| r.str_eq("ok").unwrap_or(false));
        match (ok, self) {
            (false, _) => SwitchAnswer::Unknown,
            (true, CodCall::Enable(CodScope::Connection)) => SwitchAnswer::Armed {
                trigger_utc_ms: None,
            },
            (true, CodCall::Enable(CodScope::Account) | CodCall::Heartbeat(_)) => {
                SwitchAnswer::Configured
            }
            (true, CodCall::Disable(_)) => SwitchAnswer::Disarmed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ergon_core::{Class, Why};

    const MS: i64 = 1_000_000;
    const SEC: i64 = 1_000 * MS;

    /// 50,000 credits, 500 a read, 10,000 a second: 100 reads at once, then one
    /// every 50 ms; an idle second refills 20 reads, and never more than the pool.
    /// The pool is the venue's; the adapter splits it between the strategy's
    /// reads (`credits`) and the order connection's own calls (`switch`), so the
    /// venue's figures hold for the two together, never more.
    #[test]
    fn the_credit_pool_refills_continuously() {
        let mut b = Budget::builder();
        let d = Deribit::new(&mut b, Clock::anchor(0, 0), Config::default()).unwrap();
        let mut budget = b.build(0).unwrap();
        let read = d.parts(Request::Read(1)).unwrap();
        let own = d.switch_parts();
        // Everything admitted at `at`, reads first, then the connection's calls.
        let drain = |budget: &mut Budget, at: i64| {
            let mut n = [0u32; 2];
            for (i, parts) in [&read, &own].into_iter().enumerate() {
                while let Ok(t) = budget.try_charge(parts, Class::Normal, at) {
                    budget.complete(t.sent(), at).unwrap();
                    n[i] += 1;
                }
            }
            n
        };
        // The whole pool at once: 100 requests, of which the reserve's 10.
        assert_eq!(drain(&mut budget, 0), [90, 10]);
        let refused = budget.try_charge(&read, Class::Normal, 0).unwrap_err();
        assert_eq!((refused.bucket, refused.why), (d.credits, Why::Full));
        // The next read when 500 credits came back at 9,750 a second (never
        // sooner; the bucket's rounding within a millisecond).
        let due = 500 * SEC / 9_750;
        assert!(
            (due..due + MS).contains(&refused.ready_at_ns),
            "{refused:?}"
        );
        // One idle second: at most the venue's 20, and 19 here (the split rounds
        // down on each side).
        let n = drain(&mut budget, SEC);
        assert_eq!(n, [19, 0]);
        // An idle minute: back to the full pool of 100, no more.
        assert_eq!(drain(&mut budget, 61 * SEC), [90, 10]);
    }

    #[test]
    fn matching_requests_draw_on_their_own_pool() {
        let mut b = Budget::builder();
        let d = Deribit::new(&mut b, Clock::anchor(0, 0), Config::default()).unwrap();
        let mut budget = b.build(0).unwrap();
        let order = d.parts(Request::Order).unwrap();
        for _ in 0..20 {
            let t = budget.try_charge(&order, Class::Normal, 0).unwrap();
            budget.complete(t.sent(), 0).unwrap();
        }
        assert_eq!(
            budget
                .try_charge(&order, Class::Normal, 0)
                .unwrap_err()
                .bucket,
            d.matching
        );
        // Reads still pass: the other pool.
        assert!(budget
            .try_charge(&d.parts(Request::Read(1)).unwrap(), Class::Normal, 0)
            .is_ok());
        // 5 a second: the next order 200 ms later.
        assert!(budget.try_charge(&order, Class::Normal, 200 * MS).is_ok());
    }
}
