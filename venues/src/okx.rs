//! OKX v5: `code` as a string in every body (errors come as HTTP 200 too), each
//! order's own `sCode` in `data[i]`, per-instrument endpoint limits over 2 s, the
//! sub-account limit of 1000 order requests per 2 s, and `expTime` as the request's
//! deadline.
//!
//! Sources: <https://www.okx.com/docs-v5/en/#overview-rate-limits>,
//! <https://www.okx.com/docs-v5/en/#error-code-rest-api>,
//! <https://www.okx.com/docs-v5/en/#order-book-trading-trade-post-place-order>.
//!
//! **NotFound bound.** Trade requests carry `expTime` (timestamp + the window);
//! OKX rejects a trade request its system has not processed by `expTime` (REST
//! API, the `expTime` request header; paraphrased, check the page). So
//! [`Prepared::deadline_ns`](crate::endpoint::Prepared::deadline_ns) of a trade
//! request is the last moment it can run: a query sent after it that finds
//! nothing means it never ran.
//!
//! One adapter trades one instrument (the place-order limit is per instrument).
//! Reading an answer never allocates.

use crate::adapt::{self, Batch, Clock, Error, Parts, Request, Venue, MAX_ITEMS};
use crate::endpoint::{
    self, Amend, ApiKey, ClientIds, ClientOrderId, Endpoints, HmacKey, IdFormat, Lookup, Method,
    NewOrder, OrderInfo, OrderRef, OrderState, OrderType, Placed, Prepared, Side, Symbol,
    TimeInForce, Writer,
};
use crate::json::{self, Value};
use crate::response::Response;
use arrayvec::ArrayVec;
use ergon_core::{BucketId, Budget, Builder, Part, Spec, Verdict};

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;

/// Limits per 2 s.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// `POST /api/v5/trade/order`, per instrument.
    pub order: u64,
    /// `POST /api/v5/trade/batch-orders`, orders per instrument.
    pub batch_orders: u64,
    /// `POST /api/v5/trade/cancel-order`, per instrument.
    pub cancel: u64,
    /// `POST /api/v5/trade/amend-order`, per instrument.
    pub amend: u64,
    /// New and amended orders of the sub-account, all instruments.
    pub sub_account: u64,
    /// Reads, by weight.
    pub read: u64,
}

impl Default for Config {
    /// The documented limits per 2 s: place, cancel and amend order 60 per
    /// instrument, batch orders 300 orders per instrument, 1000 new and amended
    /// orders per sub-account, reads 20 (order details and pending orders take 60;
    /// 20 is the lower, shared default). Source:
    /// <https://www.okx.com/docs-v5/en/#overview-rate-limits> and each endpoint's
    /// "Rate Limit" line, checked 2026-11-30. The sub-account limit changes with the
    /// fill ratio (`GET /api/v5/trade/account-rate-limit`): set it from there.
    fn default() -> Self {
        Config {
            order: 60,
            batch_orders: 300,
            cancel: 60,
            amend: 60,
            sub_account: 1000,
            read: 20,
        }
    }
}

/// How long after its timestamp a signed request stays valid unless told
/// otherwise: sent as `expTime` on trade requests, and the deadline of every request.
pub const DEFAULT_EXP_MS: i64 = 5000;

/// Most orders of one `POST /api/v5/trade/batch-orders`.
pub const MAX_BATCH_ORDERS: usize = 20;

/// An OKX API key, its HMAC-SHA256 secret and passphrase, and how long a request
/// stays valid (`expTime` = timestamp + this).
#[derive(Clone, Debug)]
pub struct Auth {
    api_key: ApiKey,
    key: HmacKey,
    passphrase: ApiKey,
    exp_ms: i64,
}

impl Auth {
    /// The key `api_key` (`OK-ACCESS-KEY`), its `secret` and `passphrase`.
    pub fn new(api_key: &str, secret: &[u8], passphrase: &str, exp_ms: i64) -> Result<Self, Error> {
        if !(1..=60_000).contains(&exp_ms) {
            return Err(Error::BadArgument("expTime window (1..=60000 ms)"));
        }
        Ok(Auth {
            api_key: ApiKey::new(api_key)?,
            key: HmacKey::new(secret),
            passphrase: ApiKey::new(passphrase).map_err(|_| Error::BadArgument("passphrase"))?,
            exp_ms,
        })
    }
}

/// The OKX v5 adapter for one instrument.
#[derive(Clone, Debug)]
pub struct Okx {
    clock: Clock,
    auth: Option<Auth>,
    /// The trade mode new orders name (`cross`, `isolated`, `cash`).
    pub td_mode: &'static str,
    items: ArrayVec<Verdict, MAX_ITEMS>,
    /// The IP gate.
    pub ip: BucketId,
    /// Place order, per instrument.
    pub order: BucketId,
    /// Batch orders, per instrument, by order.
    pub batch_orders: BucketId,
    /// Cancel order, per instrument.
    pub cancel: BucketId,
    /// Amend order, per instrument.
    pub amend: BucketId,
    /// The sub-account's order requests.
    pub sub_account: BucketId,
    /// Reads.
    pub read: BucketId,
    /// `POST /api/v5/trade/cancel-all-after`, its own limit (1 per second): the
    /// dead man's switch's reserved share (see [`crate::switch`]).
    pub switch: BucketId,
}

impl Okx {
    /// Declares `ip`, one 2 s bucket per endpoint and `sub-account`.
    pub fn new(builder: &mut Builder, clock: Clock, c: Config) -> Result<Self, Error> {
        let two_s = |n| Spec::sliding(n, 2 * SEC, 20);
        Ok(Okx {
            clock,
            auth: None,
            td_mode: "cross",
            items: ArrayVec::new(),
            ip: builder.add("ip", Spec::gate())?,
            order: builder.add("/api/v5/trade/order", two_s(c.order))?,
            batch_orders: builder.add("/api/v5/trade/batch-orders", two_s(c.batch_orders))?,
            cancel: builder.add("/api/v5/trade/cancel-order", two_s(c.cancel))?,
            amend: builder.add("/api/v5/trade/amend-order", two_s(c.amend))?,
            sub_account: builder.add("sub-account", two_s(c.sub_account))?,
            read: builder.add("read", two_s(c.read))?,
            switch: builder.add("switch", Spec::sliding(1, SEC, 10))?,
        })
    }

    /// The order endpoints' buckets and `sub-account`: OKX counts them per user
    /// ID (per instrument) and per sub-account, whichever IP or key sends (its
    /// rate-limit rules), so several hosts trading one account share them. OKX
    /// sends no usage figure for them.
    pub fn account_buckets(&self) -> [BucketId; 5] {
        [
            self.order,
            self.batch_orders,
            self.cancel,
            self.amend,
            self.sub_account,
        ]
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

    /// The deadline of a request sent with `expTime` (UTC ms): the venue does not
    /// run it after that, so neither may a re-send.
    pub fn deadline_ns(&self, exp_time_ms: i64) -> i64 {
        self.clock.now_ns_at(exp_time_ms)
    }

    /// The key signed endpoints use (without one they return [`Error::NoKey`]).
    pub fn with_auth(mut self, auth: Auth) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Signs a request whose target (and body) are written: base64 of
    /// HMAC-SHA256(`timestamp + method + requestPath(+query) + body`), the
    /// timestamp in ISO 8601 with milliseconds; `OK-ACCESS-*` headers and, on trade
    /// requests, `expTime`. Returns the deadline: timestamp + the window.
    fn sign(
        &self,
        w: &mut Writer<'_>,
        method: Method,
        target: core::ops::Range<usize>,
        body: core::ops::Range<usize>,
        trade: bool,
        now: i64,
    ) -> Result<i64, Error> {
        let auth = self.auth.as_ref().ok_or(Error::NoKey)?;
        let ts = self.clock.utc_ms(now);
        let mut iso = [0u8; 24];
        let iso = iso_ms(ts, &mut iso).ok_or(Error::BadArgument("clock outside years 0..=9999"))?;
        let mac = auth.key.sign(&[
            iso,
            method.as_str().as_bytes(),
            w.bytes(target),
            w.bytes(body),
        ]);
        w.header("OK-ACCESS-KEY", auth.api_key.as_str().as_bytes())?;
        w.open();
        w.base64(&mac);
        w.close_header("OK-ACCESS-SIGN")?;
        w.header("OK-ACCESS-TIMESTAMP", iso)?;
        w.header("OK-ACCESS-PASSPHRASE", auth.passphrase.as_str().as_bytes())?;
        let exp = ts.saturating_add(auth.exp_ms);
        if trade {
            w.open();
            w.int(exp);
            w.close_header("expTime")?;
        }
        Ok(self.clock.now_ns_at(exp))
    }

    /// A signed trade POST of `path` with the JSON `body`.
    fn post<'p>(
        &self,
        mut w: Writer<'p>,
        path: &str,
        kind: Request<'static>,
        now: i64,
        body: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>,
    ) -> Result<&'p Prepared, Error> {
        w.open();
        w.s(path);
        w.close_target();
        let target = 0..w.pos();
        w.open();
        body(&mut w)?;
        w.close_body();
        let at = w.body_span();
        let deadline = self.sign(&mut w, Method::Post, target, at, true, now)?;
        w.header("Content-Type", b"application/json")?;
        w.finish(self, kind, Method::Post, deadline)
    }

    /// A GET of `path` + `query`, signed unless `public`.
    fn get<'p>(
        &self,
        mut w: Writer<'p>,
        path: &str,
        kind: Request<'static>,
        now: i64,
        public: bool,
        query: impl FnOnce(&mut Writer<'_>),
    ) -> Result<&'p Prepared, Error> {
        w.open();
        w.s(path);
        query(&mut w);
        w.close_target();
        let target = 0..w.pos();
        let deadline = if public {
            let window = self.auth.as_ref().map_or(DEFAULT_EXP_MS, |a| a.exp_ms);
            now.saturating_add(window.saturating_mul(MS))
        } else {
            self.sign(&mut w, Method::Get, target, 0..0, false, now)?
        };
        w.finish(self, kind, Method::Get, deadline)
    }

    /// The endpoint bucket of a request.
    pub fn endpoint(&self, request: Request<'_>) -> BucketId {
        match request {
            Request::Order => self.order,
            Request::Batch(_) => self.batch_orders,
            Request::Cancel => self.cancel,
            Request::CancelReplace => self.amend,
            Request::Read(_) | Request::Info(_) | Request::Connect => self.read,
        }
    }

    /// The verdict of one code (the request's `code`, or an order's `sCode`).
    fn code(
        &self,
        code: i64,
        request: Request<'_>,
        wait: Option<i64>,
        budget: &mut Budget,
        now: i64,
    ) -> Verdict {
        match code {
            0 => Verdict::Done,
            // Rate limit reached / too frequent: the endpoint's 2 s window.
            50011 | 50040 => adapt::hold(budget, self.endpoint(request), wait, now),
            50061 => adapt::hold(budget, self.sub_account, wait, now),
            50102 => Verdict::ClockSkew,
            50004 => Verdict::Unknown,
            50001 | 50013 | 50026 if request.is_write() => Verdict::Unknown,
            50001 | 50013 | 50026 => Verdict::NotRun,
            _ => Verdict::Rejected,
        }
    }

    /// `code` 1 (failed) or 2 (partly): each order's `sCode` decides.
    fn orders(
        &self,
        v: Value<'_>,
        request: Request<'_>,
        wait: Option<i64>,
        budget: &mut Budget,
        now: i64,
    ) -> Batch {
        let mut batch = Batch::new();
        let Ok(Some(Ok(items))) = v.get("data").map(|d| d.map(|d| d.items())) else {
            return batch;
        };
        for item in items {
            match item.get("sCode").ok().flatten().map(|c| c.parse_i64()) {
                Some(Ok(code)) => batch.add(self.code(code, request, wait, budget, now)),
                _ => batch.add(Verdict::Unknown),
            }
        }
        batch
    }
}

/// UTC `ms` as `2020-12-08T09:08:57.715Z`, in `buf`.
fn iso_ms(ms: i64, buf: &mut [u8; 24]) -> Option<&[u8]> {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    // H. Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    if !(0..=9999).contains(&y) {
        return None;
    }
    let fields = [
        (y, 4, b'-'),
        (m, 2, b'-'),
        (d, 2, b'T'),
        (in_day / 3_600_000, 2, b':'),
        (in_day / 60_000 % 60, 2, b':'),
        (in_day / 1000 % 60, 2, b'.'),
        (in_day % 1000, 3, b'Z'),
    ];
    let mut at = 0;
    for (value, width, sep) in fields {
        let mut v = value;
        for i in (0..width).rev() {
            buf[at + i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
        buf[at + width] = sep;
        at += width + 1;
    }
    Some(&buf[..at])
}

/// OKX's `clOrdId`: 1 to 32 letters and digits.
fn okx_id(id: &ClientOrderId) -> Result<&str, Error> {
    let s = id.as_str();
    if s.len() <= 32 && s.bytes().all(|c| c.is_ascii_alphanumeric()) {
        Ok(s)
    } else {
        Err(Error::BadArgument(
            "OKX clOrdId: 1 to 32 letters and digits",
        ))
    }
}

/// One order's JSON object.
fn order_object(w: &mut Writer<'_>, td_mode: &str, o: &NewOrder<'_>) -> Result<(), Error> {
    let cl = okx_id(&o.client_order_id)?;
    w.s("{");
    let mut first = true;
    w.json(&mut first, "instId", o.symbol.as_str());
    w.json(&mut first, "tdMode", td_mode);
    w.json(
        &mut first,
        "side",
        match o.side {
            Side::Buy => "buy",
            Side::Sell => "sell",
        },
    );
    w.json(
        &mut first,
        "ordType",
        match o.order_type {
            OrderType::Limit(TimeInForce::Gtc) => "limit",
            OrderType::Limit(TimeInForce::Ioc) => "ioc",
            OrderType::Limit(TimeInForce::Fok) => "fok",
            OrderType::PostOnly => "post_only",
            OrderType::Market => "market",
        },
    );
    w.json(&mut first, "sz", o.quantity.as_str());
    match (o.order_type, o.price) {
        (OrderType::Market, None) => {}
        (OrderType::Market, Some(_)) => return Err(Error::BadArgument("price of a market order")),
        (_, Some(p)) => w.json(&mut first, "px", p.as_str()),
        (_, None) => return Err(Error::BadArgument("price of a limit order")),
    }
    w.json(&mut first, "clOrdId", cl);
    if o.reduce_only {
        w.s(",\"reduceOnly\":true");
    }
    w.s("}");
    w.id(o.client_order_id)
}

/// `state` of an order as a state.
fn order_state(word: &str) -> OrderState {
    match word {
        "live" => OrderState::New,
        "partially_filled" => OrderState::PartiallyFilled,
        "filled" => OrderState::Filled,
        "canceled" | "mmp_canceled" => OrderState::Canceled,
        _ => OrderState::Other,
    }
}

/// `code` and the first item of `data` of an OKX body.
fn first_item<'a>(r: &Response<'a>) -> Option<(i64, Option<Value<'a>>)> {
    let v = json::parse(r.body).ok()?;
    let code = v.get("code").ok()??.parse_i64().ok()?;
    let item = v
        .get("data")
        .ok()
        .flatten()
        .and_then(|d| d.at(0).ok().flatten());
    Some((code, item))
}

impl ClientIds for Okx {
    /// `clOrdId`: 1 to 32 case-sensitive letters and digits
    /// (<https://www.okx.com/docs-v5/en/#order-book-trading-trade-post-place-order>):
    /// exactly 32 hex digits.
    const ID_FORMAT: IdFormat = IdFormat::Hex;
}

impl Endpoints for Okx {
    /// `POST /api/v5/trade/order`: the instrument's order limit and the
    /// sub-account's.
    fn new_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &NewOrder<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let td = self.td_mode;
        self.post(w, "/api/v5/trade/order", Request::Order, now, |w| {
            order_object(w, td, o)
        })
    }

    /// `POST /api/v5/trade/cancel-order` by `clOrdId`.
    fn cancel<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        self.post(w, "/api/v5/trade/cancel-order", Request::Cancel, now, |w| {
            let cl = okx_id(&o.client_order_id)?;
            w.s("{");
            let mut first = true;
            w.json(&mut first, "instId", o.symbol.as_str());
            w.json(&mut first, "clOrdId", cl);
            w.s("}");
            w.id(o.client_order_id)
        })
    }

    /// `POST /api/v5/trade/cancel-batch-orders` by `clOrdId`, 1 to 20 orders: the
    /// cancel bucket once per order (OKX gives the batch its own 300 orders per
    /// 2 s; charging the single cancel's 60 is the conservative reading). It
    /// answers as one cancel (`code` 0 all canceled, 1 or 2 read by the first
    /// item's `sCode`; a cancel may be sent again).
    fn batch_cancel<'p>(
        &mut self,
        out: &'p mut Prepared,
        orders: &[OrderRef<'_>],
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let n = orders.len();
        if n == 0 || n > MAX_BATCH_ORDERS {
            Writer::start(out);
            return Err(Error::BadArgument("batch of 1 to 20 orders"));
        }
        let mut w = Writer::start(&mut *out);
        w.symbol(orders.first().map(|o| o.symbol));
        self.post(
            w,
            "/api/v5/trade/cancel-batch-orders",
            Request::Cancel,
            now,
            |w| {
                w.s("[");
                for (i, o) in orders.iter().enumerate() {
                    let cl = okx_id(&o.client_order_id)?;
                    w.s(if i == 0 { "{" } else { ",{" });
                    let mut first = true;
                    w.json(&mut first, "instId", o.symbol.as_str());
                    w.json(&mut first, "clOrdId", cl);
                    w.s("}");
                    w.id(o.client_order_id)?;
                }
                w.s("]");
                Ok(())
            },
        )?;
        let mut parts = Parts::new();
        parts.push(Part::new(self.ip, 0));
        // n <= 20: the cast cannot truncate.
        parts.push(Part::new(self.cancel, n as u32));
        out.set_parts(parts);
        Ok(out)
    }

    /// `POST /api/v5/trade/amend-order` by `clOrdId`: `newSz`, `newPx`.
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
        self.post(
            w,
            "/api/v5/trade/amend-order",
            Request::CancelReplace,
            now,
            |w| {
                let cl = okx_id(&a.order.client_order_id)?;
                w.s("{");
                let mut first = true;
                w.json(&mut first, "instId", a.order.symbol.as_str());
                w.json(&mut first, "clOrdId", cl);
                if let Some(q) = a.quantity {
                    w.json(&mut first, "newSz", q.as_str());
                }
                if let Some(p) = a.price {
                    w.json(&mut first, "newPx", p.as_str());
                }
                w.s("}");
                w.id(a.order.client_order_id)
            },
        )
    }

    /// `GET /api/v5/trade/order` by `clOrdId`: one read.
    fn query_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let cl = okx_id(&o.client_order_id)?;
        w.id(o.client_order_id)?;
        self.get(
            w,
            "/api/v5/trade/order",
            Request::Read(1),
            now,
            false,
            |w| {
                w.s("?instId=");
                w.s(o.symbol.as_str());
                w.s("&clOrdId=");
                w.s(cl);
            },
        )
    }

    /// `GET /api/v5/trade/orders-pending`: one read.
    fn open_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Option<Symbol<'_>>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        self.get(
            w,
            "/api/v5/trade/orders-pending",
            Request::Read(1),
            now,
            false,
            |w| {
                if let Some(s) = symbol {
                    w.s("?instId=");
                    w.s(s.as_str());
                }
            },
        )
    }

    /// `GET /api/v5/market/books`, depth 1 to 400: one read, unsigned.
    fn book<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        depth: u32,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        if !(1..=400).contains(&depth) {
            return Err(Error::BadArgument("depth (1..=400)"));
        }
        self.get(
            w,
            "/api/v5/market/books",
            Request::Read(1),
            now,
            true,
            |w| {
                w.s("?instId=");
                w.s(symbol.as_str());
                w.s("&sz=");
                w.int(i64::from(depth));
            },
        )
    }

    /// `GET /api/v5/account/balance`: one read.
    fn account<'p>(&mut self, out: &'p mut Prepared, now: i64) -> Result<&'p Prepared, Error> {
        let w = Writer::start(out);
        self.get(
            w,
            "/api/v5/account/balance",
            Request::Read(1),
            now,
            false,
            |_| {},
        )
    }

    /// `POST /api/v5/trade/batch-orders`, 1 to 20 orders: each counts on the batch
    /// limit and the sub-account's.
    fn batch_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        orders: &[NewOrder<'_>],
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(orders.first().map(|o| o.symbol));
        if orders.is_empty() || orders.len() > MAX_BATCH_ORDERS {
            return Err(Error::BadArgument("batch of 1 to 20 orders"));
        }
        let td = self.td_mode;
        // orders.len() <= 20: the cast cannot truncate.
        self.post(
            w,
            "/api/v5/trade/batch-orders",
            Request::Batch(orders.len() as u16),
            now,
            |w| {
                w.s("[");
                for (i, o) in orders.iter().enumerate() {
                    if i > 0 {
                        w.s(",");
                    }
                    order_object(w, td, o)?;
                }
                w.s("]");
                Ok(())
            },
        )
    }

    /// `code` 0 with the order in `data`: found; `code` 0 with empty `data`, or
    /// 51603 "Order does not exist": not found.
    fn read_order(&self, r: &Response<'_>) -> Lookup {
        match first_item(r) {
            Some((0, Some(o))) => {
                let mut buf = [0u8; 32];
                let state = match o
                    .get("state")
                    .ok()
                    .flatten()
                    .map(|s| s.decode_str(&mut buf))
                {
                    Some(Ok(word)) => order_state(word),
                    _ => return Lookup::Unknown,
                };
                let Some(id) = o.get("ordId").ok().flatten().and_then(endpoint::json_text) else {
                    return Lookup::Unknown;
                };
                let filled = o
                    .get("accFillSz")
                    .ok()
                    .flatten()
                    .and_then(endpoint::json_text);
                Lookup::Found(OrderInfo {
                    state,
                    venue_order_id: id,
                    filled,
                })
            }
            Some((0, None)) | Some((51603, _)) => Lookup::NotFound,
            _ => Lookup::Unknown,
        }
    }

    /// `sCode` 0 with `ordId`: accepted (live); an `sCode` that surely did not run:
    /// refused.
    fn read_placed(&self, r: &Response<'_>) -> Placed {
        let Some((_, Some(item))) = first_item(r) else {
            return Placed::Unknown;
        };
        match item.get("sCode").ok().flatten().map(|c| c.parse_i64()) {
            Some(Ok(0)) => match item
                .get("ordId")
                .ok()
                .flatten()
                .and_then(endpoint::json_text)
            {
                Some(id) => Placed::Accepted(OrderInfo {
                    state: OrderState::New,
                    venue_order_id: id,
                    filled: None,
                }),
                None => Placed::Unknown,
            },
            Some(Ok(50001 | 50004 | 50013 | 50026)) => Placed::Unknown,
            Some(Ok(_)) => Placed::Refused,
            _ => Placed::Unknown,
        }
    }
}

impl Venue for Okx {
    fn parts(&self, request: Request<'_>) -> Result<Parts, Error> {
        let mut p = Parts::new();
        p.push(Part::new(self.ip, 0));
        match request {
            Request::Connect => {}
            Request::Order | Request::CancelReplace => {
                p.push(Part::new(self.endpoint(request), 1));
                p.push(Part::new(self.sub_account, 1));
            }
            Request::Cancel => p.push(Part::new(self.cancel, 1)),
            Request::Batch(n) => {
                p.push(Part::new(self.batch_orders, u32::from(n)));
                p.push(Part::new(self.sub_account, u32::from(n)));
            }
            Request::Read(w) => p.push(Part::new(self.read, w)),
            Request::Info(_) => return Err(Error::Unsupported),
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
        self.items.clear();
        // OKX documents no wait header; a `Retry-After` (RFC 9110) on a throttle is
        // read like any other venue's.
        let retry = adapt::response_retry_after(r, &self.clock, now);
        let bad = retry.malformed.then_some("Retry-After");
        let wait = retry.wait_ns;
        let body = json::parse(r.body).ok();
        let code = body
            .and_then(|v| v.get("code").ok().flatten())
            .and_then(|c| c.parse_i64().ok());
        let verdict = match (r.status, code, body) {
            (_, Some(1 | 2), Some(v)) => {
                let batch = self.orders(v, request, wait, budget, now);
                let verdict = batch.verdict().unwrap_or(Verdict::Unknown);
                if matches!(request, Request::Batch(_)) {
                    self.items = batch.into_items();
                }
                verdict
            }
            // A batch that all went through: each order is done.
            (_, Some(0), Some(v)) if matches!(request, Request::Batch(_)) => {
                let batch = self.orders(v, request, wait, budget, now);
                self.items = batch.into_items();
                Verdict::Done
            }
            (_, Some(code), _) => self.code(code, request, wait, budget, now),
            (429, None, _) => adapt::hold(budget, self.endpoint(request), wait, now),
            (_, None, _) if request.is_write() => Verdict::Unknown,
            (200..=299, None, _) => Verdict::Unknown,
            (s, None, _) => adapt::status_rule(s, budget, self.ip, wait, now),
        };
        adapt::finish(verdict, bad)
    }

    fn batch_items(&self) -> &[Verdict] {
        &self.items
    }
}

/// `POST /api/v5/trade/cancel-all-after` (Cancel All After): `timeOut` in seconds,
/// 0 or 10 to 120, 0 disables it; without `tag` it is account-level (every pending
/// order-book order of the sub-account); the answer's `data[0].triggerTime` is when
/// it fires (0: disabled), `ts` when the request was received; its own rate limit,
/// 1 request per second per user ID and tag; the venue recommends a heartbeat every
/// second and warns that cancelling may take a few seconds once triggered.
///
/// Source: <https://www.okx.com/docs-v5/en/#order-book-trading-trade-post-cancel-all-after>
/// (checked 2026-12-01).
impl crate::switch::Switch for Okx {
    fn switch_spec(&self) -> crate::switch::SwitchSpec {
        crate::switch::SwitchSpec {
            min_timeout_ms: 10_000,
            max_timeout_ms: 120_000,
            default_timeout_ms: 60_000,
            // Every 15 s of 60 s: the limit would allow one a second, but each
            // refresh is a request on the shared IP; four chances per timeout is
            // the margin the other venues document.
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
            return Err(Error::BadArgument("timeOut (10..=120 s, whole seconds)"));
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
        use crate::switch::{coded, int_field, Refusal, SwitchAnswer};
        let Some((v, code)) = coded(answer, "code") else {
            return SwitchAnswer::Unknown;
        };
        match code {
            0 if (200..=299).contains(&answer.status) => {
                let first = v.path("data[0]").ok().flatten();
                match first.and_then(|d| int_field(d, "triggerTime")) {
                    Some(0) => SwitchAnswer::Disarmed,
                    // The documented example carries 10 digits; every other OKX
                    // time is ms: read a value below 10^11 as seconds.
                    Some(t) if t < 100_000_000_000 => SwitchAnswer::Armed {
                        trigger_utc_ms: Some(t.saturating_mul(1000)),
                    },
                    Some(t) => SwitchAnswer::Armed {
                        trigger_utc_ms: Some(t),
                    },
                    None => SwitchAnswer::Unknown,
                }
            }
            // Throttled, busy, clock: the answer says nothing about the switch.
            50011 | 50040 | 50061 | 50001 | 50004 | 50013 | 50026 | 50102 => SwitchAnswer::Unknown,
            // 51000: parameter error (the timeout); 50014: a parameter empty.
            51000 | 50014 => SwitchAnswer::Refused(Refusal::Timeout),
            // 50120/50121: the key's permission; 51071: too many tag-level CAAs.
            50120 | 50121 | 51071 => SwitchAnswer::Refused(Refusal::NotAllowed),
            0 => SwitchAnswer::Unknown,
            c => SwitchAnswer::Refused(Refusal::Code(c)),
        }
    }

    fn switch_guards(&self) -> ArrayVec<BucketId, { crate::switch::MAX_GUARDS }> {
        let mut g = ArrayVec::new();
        g.push(self.ip);
        g
    }
}

impl Okx {
    fn cancel_all_after<'p>(
        &self,
        mut w: Writer<'p>,
        seconds: u32,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        w.open();
        w.s("/api/v5/trade/cancel-all-after");
        w.close_target();
        let target = 0..w.pos();
        w.open();
        w.s("{\"timeOut\":\"");
        w.int(i64::from(seconds));
        w.s("\"}");
        w.close_body();
        let at = w.body_span();
        let deadline = self.sign(&mut w, Method::Post, target, at, false, now)?;
        w.header("Content-Type", b"application/json")?;
        let mut parts = Parts::new();
        parts.push(Part::new(self.ip, 0));
        parts.push(Part::new(self.switch, 1));
        w.finish_with(parts, Request::Read(0), Method::Post, deadline)
    }
}
