//! Kraken derivatives (futures) REST: a cost budget of 500 per 10 s per API key for
//! `/derivatives` endpoints (send, edit and cancel cost 10, a batch 9 + its size,
//! reads 1 to 25), and `"error":"apiLimitExceeded"` past it. Errors come in the body
//! (`"result":"error"`), often with HTTP 200, and each order's outcome in
//! `sendStatus.status` / `editStatus.status` / `cancelStatus.status` or
//! `batchStatus[i].status`. No usage headers.
//!
//! "Up to 500 every 10 seconds" is read as any 10 s (a sliding window): never more
//! than the venue allows, whichever way it counts.
//!
//! A 429 that carries `Retry-After` holds for that wait plus the hold guard, keeping
//! the count, whether its body says `apiLimitExceeded` or nothing readable; without
//! a wait, `apiLimitExceeded` raises the count to the limit and holds one window.
//! Public endpoints have no cost and count on no budget: public reads
//! (`Request::Read(0)`, the order book) draw on the `public` gate, and a 429 on one
//! holds that gate, not the key's budget.
//!
//! Sources (checked 2026-11-30; re-read 2026-12-01 for issue 30):
//! <https://docs.kraken.com/exchange/guides/futures/ratelimits> (the budget and the
//! cost table; "Public endpoints do not have a cost and therefore do not count
//! against any rate limiting budget"), <https://docs.kraken.com/api/docs/futures-api/trading/send-order>
//! (`sendStatus` values), <https://docs.kraken.com/api/docs/guides/futures-rest>
//! (errors: `apiLimitExceeded`, `nonceBelowThreshold`, `nonceDuplicate`,
//! `authenticationError`, `Unavailable`).
//!
//! Reading an answer never allocates.

use crate::adapt::{self, Batch, Clock, Error, Parts, Request, Venue, MAX_ITEMS};
use crate::endpoint::{
    self, Amend, ApiKey, ClientIds, Endpoints, IdFormat, Lookup, Method, NewOrder, OrderInfo,
    OrderRef, OrderState, OrderType, Placed, Prepared, Side, Symbol, TimeInForce, Writer,
};
use crate::json::{self, Kind, Value};
use crate::response::Response;
use crate::sign::{self, Secret};
use crate::waits;
use arrayvec::ArrayVec;
use ergon_core::{BucketId, Budget, Builder, Part, Spec, Verdict};

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;

/// The cost budget's window.
pub const WINDOW_NS: i64 = 10 * SEC;

/// How long ergon re-sends a Kraken derivatives request that surely did not run
/// (the venue has no acceptance window of its own: this is ergon's).
pub const DEADLINE_NS: i64 = 5 * SEC;

/// The cost of `cancelallordersafter` (the dead man's switch) in the `/derivatives`
/// budget.
pub const SWITCH_COST: u32 = 25;

/// The budget reserved for the switch: one call per 10 s window, 5 % of the
/// default 500. The documented pace is a call every 15 to 20 s; a disarm right
/// after a refresh waits for the refresh to leave the window (at most 10 s).
pub const SWITCH_RESERVE: u64 = SWITCH_COST as u64;

/// The `/derivatives` cost budget and the costs of the requests an adapter sends.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Cost per 10 s.
    pub budget_per_10s: u64,
    /// `sendorder`, `editorder`, `cancelorder`.
    pub order_cost: u32,
    /// `batchorder`: this plus the number of instructions.
    pub batch_base_cost: u32,
}

impl Default for Config {
    /// 500 per 10 s; 10 per order, edit or cancel; a batch 9 + its size
    /// (docs.kraken.com/exchange/guides/futures/ratelimits, checked 2026-11-30).
    fn default() -> Self {
        Config {
            budget_per_10s: 500,
            order_cost: 10,
            batch_base_cost: 9,
        }
    }
}

/// The Kraken derivatives adapter.
#[derive(Clone, Debug)]
pub struct KrakenFutures {
    clock: Clock,
    c: Config,
    /// The IP gate.
    pub ip: BucketId,
    /// The key's `/derivatives` cost budget, less the switch's share.
    pub derivatives: BucketId,
    /// The dead man's switch's share of the `/derivatives` budget
    /// ([`SWITCH_RESERVE`] per 10 s, see [`crate::switch`]).
    pub switch: BucketId,
    /// The public endpoints ("do not have a cost and therefore do not count against
    /// any rate limiting budget"): a gate that carries a 429's hold.
    pub public: BucketId,
    auth: Option<(ApiKey, Secret)>,
    last_nonce: i64,
    /// The item verdicts of the last batch answer.
    items: ArrayVec<Verdict, MAX_ITEMS>,
}

impl KrakenFutures {
    /// Declares `ip`, `derivatives` (the budget less [`SWITCH_RESERVE`]), `switch`
    /// (that reserve: the venue counts the switch's call in the same budget, so
    /// the strategies' share is declared smaller by it and no class can take it)
    /// and `public`.
    pub fn new(builder: &mut Builder, clock: Clock, c: Config) -> Result<Self, Error> {
        if c.budget_per_10s < 2 * SWITCH_RESERVE {
            return Err(Error::BadField(
                "budget_per_10s (too small for the switch's share)",
            ));
        }
        Ok(KrakenFutures {
            clock,
            c,
            ip: builder.add("ip", Spec::gate())?,
            derivatives: builder.add(
                "derivatives",
                Spec::sliding(c.budget_per_10s - SWITCH_RESERVE, WINDOW_NS, 20),
            )?,
            switch: builder.add("switch", Spec::sliding(SWITCH_RESERVE, WINDOW_NS, 20))?,
            public: builder.add("public", Spec::gate())?,
            auth: None,
            last_nonce: 0,
            items: ArrayVec::new(),
        })
    }

    fn cost_parts(&self, cost: u32) -> Parts {
        let mut p = Parts::new();
        p.push(Part::new(self.ip, 0));
        p.push(Part::new(self.derivatives, cost));
        p
    }

    /// The bucket a throttle of `request` holds: public reads (`Read(0)`, no cost)
    /// their gate, the rest the key's cost budget.
    fn own_bucket(&self, request: Request<'_>) -> BucketId {
        match request {
            Request::Read(0) => self.public,
            _ => self.derivatives,
        }
    }

    /// A request-level error string; `wait_ns` is the answer's `Retry-After`.
    fn error(
        &self,
        e: Value<'_>,
        request: Request<'_>,
        wait_ns: Option<i64>,
        budget: &mut Budget,
        now: i64,
    ) -> Verdict {
        let is = |s| e.str_eq(s).unwrap_or(false);
        if is("apiLimitExceeded") {
            match wait_ns {
                // The venue says when its budget has room again (a 429 with
                // `Retry-After`): hold for that wait plus the guard, keeping our
                // count (DESIGN, server truth: `throttled` with a server wait).
                Some(wait) if wait > 0 => adapt::hold(budget, self.derivatives, Some(wait), now),
                // Without a wait the venue's count is at the limit: ours too, for
                // one window.
                _ => {
                    budget
                        .observe_used(self.derivatives, self.c.budget_per_10s, now)
                        .ok();
                    adapt::hold(budget, self.derivatives, None, now)
                }
            }
        } else if is("nonceBelowThreshold") || is("nonceDuplicate") {
            Verdict::ClockSkew
        } else if is("Unavailable") || is("Server Error") || is("marketUnavailable") {
            if request.is_write() {
                Verdict::Unknown
            } else {
                Verdict::NotRun
            }
        } else {
            Verdict::Rejected
        }
    }

    /// One instruction's `status`.
    fn status(s: Option<Value<'_>>) -> Verdict {
        let Some(s) = s.filter(|s| s.kind() == Kind::String) else {
            return Verdict::Unknown;
        };
        let is = |x| s.str_eq(x).unwrap_or(false);
        if is("placed") || is("edited") || is("cancelled") || is("attempted") {
            Verdict::Done
        } else {
            // insufficientAvailableFunds, notFound, postWouldExecute, marketSuspended ...
            Verdict::Rejected
        }
    }

    /// Each instruction's `status` of a `batchStatus` answer.
    fn batch(v: Value<'_>) -> Batch {
        let mut batch = Batch::new();
        if let Ok(Some(Ok(items))) = v.get("batchStatus").map(|b| b.map(|b| b.items())) {
            items.for_each(|i| batch.add(Self::status(i.get("status").ok().flatten())));
        }
        batch
    }

    fn success(v: Value<'_>, request: Request<'_>) -> Verdict {
        let field = match request {
            Request::Order => "sendStatus",
            Request::CancelReplace => "editStatus",
            Request::Cancel => "cancelStatus",
            // Read by `batch`.
            Request::Batch(_) => return Verdict::Unknown,
            _ => return Verdict::Done,
        };
        match v.get(field) {
            Ok(Some(st)) => Self::status(st.get("status").ok().flatten()),
            _ => Verdict::Unknown,
        }
    }
}

impl Venue for KrakenFutures {
    fn parts(&self, request: Request<'_>) -> Result<Parts, Error> {
        Ok(match request {
            Request::Connect => {
                let mut p = Parts::new();
                p.push(Part::new(self.ip, 0));
                p
            }
            Request::Order | Request::Cancel | Request::CancelReplace => {
                self.cost_parts(self.c.order_cost)
            }
            Request::Batch(n) => {
                self.cost_parts(self.c.batch_base_cost.saturating_add(u32::from(n)))
            }
            Request::Read(0) => {
                let mut p = Parts::new();
                p.push(Part::new(self.ip, 0));
                p.push(Part::new(self.public, 0));
                p
            }
            Request::Read(w) => self.cost_parts(w),
            Request::Info(_) => return Err(Error::Unsupported),
        })
    }

    fn batch_items(&self) -> &[Verdict] {
        &self.items
    }

    fn on_response(
        &mut self,
        request: Request<'_>,
        r: &Response<'_>,
        budget: &mut Budget,
        now: i64,
    ) -> Result<Verdict, Error> {
        self.items.clear();
        let retry = adapt::response_retry_after(r, &self.clock, now);
        let bad = retry.malformed.then_some("Retry-After");
        let body = json::parse(r.body).ok();
        let result = body.and_then(|v| v.get("result").ok().flatten());
        let said = |s| result.is_some_and(|r| r.str_eq(s).unwrap_or(false));
        let verdict = match (r.status, body) {
            (_, Some(v)) if said("error") => match v.get("error") {
                Ok(Some(e)) if e.kind() == Kind::String => {
                    self.error(e, request, retry.wait_ns, budget, now)
                }
                _ if request.is_write() => Verdict::Unknown,
                _ => Verdict::Rejected,
            },
            (200..=299, Some(v)) if said("success") && matches!(request, Request::Batch(_)) => {
                let batch = Self::batch(v);
                let verdict = batch.verdict().unwrap_or(Verdict::Unknown);
                self.items = batch.into_items();
                verdict
            }
            (200..=299, Some(v)) if said("success") => Self::success(v, request),
            (429, _) => adapt::hold(budget, self.own_bucket(request), retry.wait_ns, now),
            (403, None) => waits::block(budget, self.ip, retry, now),
            _ if request.is_write() => Verdict::Unknown,
            (200..=299, _) => Verdict::Unknown,
            (s, _) if s >= 500 => Verdict::NotRun,
            (s, _) => adapt::status_rule(s, budget, self.ip, None, now),
        };
        adapt::finish(verdict, bad)
    }
}

impl KrakenFutures {
    /// Signs requests with `api_key` (`APIKey`) and its base64 `secret`.
    pub fn with_auth(mut self, api_key: &str, secret_b64: &str) -> Result<Self, Error> {
        self.auth = Some((ApiKey::new(api_key)?, Secret::from_base64(secret_b64)?));
        Ok(self)
    }

    /// A request to `/derivatives{path}` whose form body `form` writes (a GET has
    /// none), signed with `Authent`. Returns the deadline.
    fn signed(
        &mut self,
        w: &mut Writer<'_>,
        method: Method,
        path: &'static str,
        now: i64,
        form: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>,
    ) -> Result<i64, Error> {
        let Some((api_key, secret)) = self.auth.clone() else {
            return Err(Error::NoKey);
        };
        let nonce = self
            .clock
            .utc_ms(now)
            .saturating_mul(1000)
            .max(self.last_nonce.saturating_add(1));
        self.last_nonce = nonce;
        w.open();
        w.s("/derivatives");
        w.s(path);
        w.close_target();
        // A GET here carries no query: its signed data is empty.
        let (form_at, form_end) = if method == Method::Get {
            (0, 0)
        } else {
            w.open();
            let at = w.pos();
            form(w)?;
            let end = w.pos();
            w.close_body();
            w.header("Content-Type", b"application/x-www-form-urlencoded")?;
            (at, end)
        };
        w.open();
        let nonce_at = w.pos();
        w.int(nonce);
        let nonce_end = w.pos();
        w.close_header("Nonce")?;
        let mac = sign::kraken_futures(
            &secret,
            path.as_bytes(),
            w.bytes(nonce_at..nonce_end),
            w.bytes(form_at..form_end),
        );
        w.header("APIKey", api_key.as_str().as_bytes())?;
        w.open();
        w.base64(&mac);
        w.close_header("Authent")?;
        Ok(now.saturating_add(DEADLINE_NS))
    }
}

/// `name=value`, after a `&` unless `first`.
fn form(w: &mut Writer<'_>, first: &mut bool, name: &str, value: &str) {
    if !core::mem::take(first) {
        w.s("&");
    }
    w.s(name);
    w.s("=");
    w.s(value);
}

fn order_type(o: &NewOrder<'_>) -> Result<&'static str, Error> {
    Ok(match (o.order_type, o.price) {
        (OrderType::Limit(TimeInForce::Gtc), Some(_)) => "lmt",
        (OrderType::Limit(TimeInForce::Ioc), Some(_)) => "ioc",
        (OrderType::PostOnly, Some(_)) => "post",
        (OrderType::Market, None) => "mkt",
        (OrderType::Limit(TimeInForce::Fok), _) => {
            return Err(Error::BadArgument(
                "FOK (Kraken derivatives: lmt, post, ioc, mkt)",
            ))
        }
        (OrderType::Market, Some(_)) => return Err(Error::BadArgument("price of a market order")),
        (_, None) => return Err(Error::BadArgument("price of a limit order")),
    })
}

fn side(s: Side) -> &'static str {
    match s {
        Side::Buy => "buy",
        Side::Sell => "sell",
    }
}

/// An `orders/status` status word as a state.
fn order_state(v: Value<'_>) -> OrderState {
    let is = |s| v.str_eq(s).unwrap_or(false);
    if is("ENTERED_BOOK") || is("TRIGGER_PLACED") {
        OrderState::New
    } else if is("FULLY_EXECUTED") {
        OrderState::Filled
    } else if is("CANCELLED") {
        OrderState::Canceled
    } else if is("REJECTED") || is("TRIGGER_ACTIVATION_FAILURE") {
        OrderState::Rejected
    } else {
        OrderState::Other
    }
}

impl ClientIds for KrakenFutures {
    /// `cliOrdId`: at most 100 characters
    /// (<https://docs.kraken.com/api/docs/futures-api/trading/send-order>): 32 hex
    /// digits fit.
    const ID_FORMAT: IdFormat = IdFormat::Hex;
}

impl Endpoints for KrakenFutures {
    /// `POST /derivatives/api/v3/sendorder`: cost 10.
    fn new_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &NewOrder<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let t = order_type(o)?;
        let deadline = self.signed(&mut w, Method::Post, "/api/v3/sendorder", now, |w| {
            let mut f = true;
            form(w, &mut f, "orderType", t);
            form(w, &mut f, "symbol", o.symbol.as_str());
            form(w, &mut f, "side", side(o.side));
            form(w, &mut f, "size", o.quantity.as_str());
            if let Some(p) = o.price {
                form(w, &mut f, "limitPrice", p.as_str());
            }
            if o.reduce_only {
                form(w, &mut f, "reduceOnly", "true");
            }
            form(w, &mut f, "cliOrdId", o.client_order_id.as_str());
            w.id(o.client_order_id)
        })?;
        w.finish(self, Request::Order, Method::Post, deadline)
    }

    /// `POST /derivatives/api/v3/cancelorder` by `cliOrdId`: cost 10.
    fn cancel<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let deadline = self.signed(&mut w, Method::Post, "/api/v3/cancelorder", now, |w| {
            form(w, &mut true, "cliOrdId", o.client_order_id.as_str());
            w.id(o.client_order_id)
        })?;
        w.finish(self, Request::Cancel, Method::Post, deadline)
    }

    /// `POST /derivatives/api/v3/editorder` by `cliOrdId` (`size`, `limitPrice`):
    /// cost 10.
    fn amend<'p>(
        &mut self,
        out: &'p mut Prepared,
        a: &Amend<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(a.order.symbol);
        if a.price.is_none() && a.quantity.is_none() {
            return Err(Error::BadArgument("amend changes nothing"));
        }
        let deadline = self.signed(&mut w, Method::Post, "/api/v3/editorder", now, |w| {
            let mut f = true;
            form(w, &mut f, "cliOrdId", a.order.client_order_id.as_str());
            if let Some(q) = a.quantity {
                form(w, &mut f, "size", q.as_str());
            }
            if let Some(p) = a.price {
                form(w, &mut f, "limitPrice", p.as_str());
            }
            w.id(a.order.client_order_id)
        })?;
        w.finish(self, Request::CancelReplace, Method::Post, deadline)
    }

    /// `POST /derivatives/api/v3/orders/status` by `cliOrdIds`: cost 1.
    fn query_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let deadline = self.signed(&mut w, Method::Post, "/api/v3/orders/status", now, |w| {
            form(w, &mut true, "cliOrdIds", o.client_order_id.as_str());
            w.id(o.client_order_id)
        })?;
        w.finish(self, Request::Read(1), Method::Post, deadline)
    }

    /// `GET /derivatives/api/v3/openorders` (every symbol): cost 2.
    fn open_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Option<Symbol<'_>>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        let deadline = self.signed(&mut w, Method::Get, "/api/v3/openorders", now, |_| Ok(()))?;
        w.finish(self, Request::Read(2), Method::Get, deadline)
    }

    /// `GET /derivatives/api/v3/orderbook?symbol=..`: public, no cost (the depth is
    /// the venue's: the whole book).
    fn book<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        _depth: u32,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        w.open();
        w.s("/derivatives/api/v3/orderbook?symbol=");
        w.s(symbol.as_str());
        w.close_target();
        w.finish(
            self,
            Request::Read(0),
            Method::Get,
            now.saturating_add(DEADLINE_NS),
        )
    }

    /// `GET /derivatives/api/v3/accounts`: cost 2.
    fn account<'p>(&mut self, out: &'p mut Prepared, now: i64) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        let deadline = self.signed(&mut w, Method::Get, "/api/v3/accounts", now, |_| Ok(()))?;
        w.finish(self, Request::Read(2), Method::Get, deadline)
    }

    /// `POST /derivatives/api/v3/batchorder` with `json={"batchOrder":[..]}` of
    /// `send` instructions: cost 9 + n.
    fn batch_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        orders: &[NewOrder<'_>],
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(orders.first().map(|o| o.symbol));
        if orders.is_empty() || orders.len() > endpoint::MAX_BATCH {
            return Err(Error::BadArgument("a batch holds 1 to MAX_BATCH orders"));
        }
        let deadline = self.signed(&mut w, Method::Post, "/api/v3/batchorder", now, |w| {
            // The JSON is a form value: every byte outside A-Z a-z 0-9 - . _ ~ is
            // percent-encoded as the writer goes.
            w.s("json=");
            w.enc("{\"batchOrder\":[");
            for (i, o) in orders.iter().enumerate() {
                if i > 0 {
                    w.enc(",");
                }
                w.enc("{\"order\":\"send\",\"order_tag\":\"");
                w.int(i as i64);
                w.enc("\",\"orderType\":\"");
                w.enc(order_type(o)?);
                w.enc("\",\"symbol\":\"");
                w.enc(o.symbol.as_str());
                w.enc("\",\"side\":\"");
                w.enc(side(o.side));
                w.enc("\",\"size\":");
                w.enc(o.quantity.as_str());
                if let Some(p) = o.price {
                    w.enc(",\"limitPrice\":");
                    w.enc(p.as_str());
                }
                if o.reduce_only {
                    w.enc(",\"reduceOnly\":true");
                }
                w.enc(",\"cliOrdId\":\"");
                w.enc(o.client_order_id.as_str());
                w.enc("\"}");
                w.id(o.client_order_id)?;
            }
            w.enc("]}");
            Ok(())
        })?;
        let n = u16::try_from(orders.len()).unwrap_or(u16::MAX);
        w.finish(self, Request::Batch(n), Method::Post, deadline)
    }

    /// `orders/status`: the first of `orders`, or none.
    fn read_order(&self, r: &Response<'_>) -> Lookup {
        let Ok(v) = json::parse(r.body) else {
            return Lookup::Unknown;
        };
        let ok = v
            .get("result")
            .ok()
            .flatten()
            .is_some_and(|x| x.str_eq("success").unwrap_or(false));
        let Some(Ok(mut items)) = v
            .get("orders")
            .ok()
            .flatten()
            .filter(|_| ok)
            .map(|o| o.items())
        else {
            return Lookup::Unknown;
        };
        let Some(first) = items.next() else {
            return Lookup::NotFound;
        };
        let (Some(status), Some(id)) = (
            first.get("status").ok().flatten(),
            first
                .path("order.orderId")
                .ok()
                .flatten()
                .and_then(endpoint::json_text),
        ) else {
            return Lookup::Unknown;
        };
        Lookup::Found(OrderInfo {
            state: order_state(status),
            venue_order_id: id,
            filled: first
                .path("order.filled")
                .ok()
                .flatten()
                .and_then(endpoint::json_text),
        })
    }

    /// `sendorder`: `sendStatus.status` `placed` with its `order_id` is accepted,
    /// any other status refused; a request-level error is refused unless it says
    /// the service failed (`Unavailable`, `Server Error`).
    fn read_placed(&self, r: &Response<'_>) -> Placed {
        let Ok(v) = json::parse(r.body) else {
            return Placed::Unknown;
        };
        let result = v.get("result").ok().flatten();
        let is = |s| result.is_some_and(|x| x.str_eq(s).unwrap_or(false));
        if is("error") {
            return match v.get("error").ok().flatten() {
                Some(e)
                    if e.str_eq("Unavailable").unwrap_or(true)
                        || e.str_eq("Server Error").unwrap_or(true) =>
                {
                    Placed::Unknown
                }
                Some(_) => Placed::Refused,
                None => Placed::Unknown,
            };
        }
        if !is("success") {
            return Placed::Unknown;
        }
        let Some(st) = v.get("sendStatus").ok().flatten() else {
            return Placed::Unknown;
        };
        match (
            st.get("status").ok().flatten(),
            st.get("order_id")
                .ok()
                .flatten()
                .and_then(endpoint::json_text),
        ) {
            (Some(s), Some(id)) if s.str_eq("placed").unwrap_or(false) => {
                Placed::Accepted(OrderInfo {
                    state: OrderState::New,
                    venue_order_id: id,
                    filled: None,
                })
            }
            (Some(s), _) if s.kind() == Kind::String => Placed::Refused,
            _ => Placed::Unknown,
        }
    }
}

/// `POST /derivatives/api/v3/cancelallordersafter` (the dead man's switch):
/// `timeout` in seconds starts a countdown that cancels all the account's orders
/// when it runs out; a new call pushes it back; `timeout=0` disarms it. The
/// answer's `status.currentTime` and `status.triggerTime` are ISO 8601 date-times
/// (`triggerTime` is `"0"` when disarmed). The venue recommends a call every 15
/// to 20 s with a 60 s timeout. It costs [`SWITCH_COST`] in the `/derivatives`
/// budget, which the adapter reserves ([`SWITCH_RESERVE`], carved out of that
/// budget): one call per 10 s window, so the shortest timeout taken is 40 s
/// (refreshed every quarter of it). No longest timeout is documented; ergon takes
/// one day.
///
/// Sources (checked 2026-12-01):
/// <https://docs.kraken.com/api-reference/order-management/dead-mans-switch>,
/// <https://support.kraken.com/hc/en-us/articles/360022635752-Cancel-All-Orders-After>
/// (both answers, the disarmed one with `"triggerTime":"0"`),
/// <https://docs.kraken.com/api/docs/guides/futures-rate-limits> (cost 25).
impl crate::switch::Switch for KrakenFutures {
    fn switch_spec(&self) -> crate::switch::SwitchSpec {
        crate::switch::SwitchSpec {
            min_timeout_ms: 40_000,
            max_timeout_ms: 86_400_000,
            default_timeout_ms: 60_000,
            refresh_div: 4,
            fires_per_day: None,
            scope: crate::switch::Scope::Account,
            arms: crate::switch::Arms::Call,
        }
    }

    fn arm<'p>(
        &mut self,
        out: &'p mut Prepared,
        _symbol: Symbol<'_>,
        timeout_ms: u32,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let w = Writer::start(out);
        let Some(secs) = self.switch_spec().whole_seconds(timeout_ms) else {
            return Err(Error::BadArgument("timeout (40..=86400 s, whole seconds)"));
        };
        self.cancel_all_after(w, secs, now)
    }

    fn disarm<'p>(
        &mut self,
        out: &'p mut Prepared,
        _symbol: Symbol<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let w = Writer::start(out);
        self.cancel_all_after(w, 0, now)
    }

    fn read_switch(&self, answer: &Response<'_>) -> crate::switch::SwitchAnswer {
        use crate::switch::{Refusal, SwitchAnswer};
        let Ok(v) = json::parse(answer.body) else {
            return SwitchAnswer::Unknown;
        };
        let result = v.get("result").ok().flatten();
        let said = |s| result.is_some_and(|r| r.str_eq(s).unwrap_or(false));
        if said("error") {
            let Ok(Some(e)) = v.get("error") else {
                return SwitchAnswer::Unknown;
            };
            let is = |s| e.str_eq(s).unwrap_or(false);
            return if is("apiLimitExceeded")
                || is("nonceBelowThreshold")
                || is("nonceDuplicate")
                || is("Unavailable")
                || is("Server Error")
            {
                // The budget, the clock, the venue: nothing about the switch.
                SwitchAnswer::Unknown
            } else if is("authenticationError") {
                SwitchAnswer::Refused(Refusal::NotAllowed)
            } else {
                // The documented errors name no refused timeout: any other
                // string is a refusal in words.
                SwitchAnswer::Refused(Refusal::Other)
            };
        }
        if !said("success") || !(200..=299).contains(&answer.status) {
            return SwitchAnswer::Unknown;
        }
        crate::switch::rfc3339_trigger(v.path("status.triggerTime").ok().flatten())
    }

    fn switch_guards(&self) -> ArrayVec<BucketId, { crate::switch::MAX_GUARDS }> {
        // The venue counts the call in the key's `/derivatives` budget: a hold
        // there (`apiLimitExceeded`) stops the refresh too.
        let mut g = ArrayVec::new();
        g.push(self.ip);
        g.push(self.derivatives);
        g
    }
}

impl KrakenFutures {
    fn cancel_all_after<'p>(
        &mut self,
        mut w: Writer<'p>,
        seconds: u32,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let deadline = self.signed(
            &mut w,
            Method::Post,
            "/api/v3/cancelallordersafter",
            now,
            |w| {
                w.s("timeout=");
                w.int(i64::from(seconds));
                Ok(())
            },
        )?;
        let mut parts = Parts::new();
        parts.push(Part::new(self.ip, 0));
        parts.push(Part::new(self.switch, SWITCH_COST));
        // A private read's kind: a throttle of it holds the `/derivatives` budget.
        w.finish_with(parts, Request::Read(SWITCH_COST), Method::Post, deadline)
    }
}
