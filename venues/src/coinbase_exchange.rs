//! Coinbase Exchange REST: lazy-fill token buckets (burst, refilled at a steady
//! rate): private endpoints per profile 15 a second with bursts up to 30, the
//! private `/fills` endpoint 10 and 20, public endpoints per IP 10 and 15; HTTP 429
//! past them. Errors are a JSON `message` with a 4xx or 5xx status; a request whose
//! `CB-ACCESS-TIMESTAMP` is more than 30 s from the venue's clock is refused. No
//! usage headers.
//!
//! The REST API cancels every open order of a product in one request (`DELETE
//! /orders?product_id=`, [`Endpoints::cancel_all`]:
//! <https://docs.cloud.coinbase.com/api-reference/exchange-api/rest-api/orders/cancel-all-orders>,
//! checked 2026-11-30). There is no amend and no batch on REST (FIX has both, 15 orders a batch message,
//! with its own rates: 2 logons a second per key, 100 requests a second, the session
//! cut past 200 messages a second; not built here).
//!
//! "Public endpoints are throttled by IP and private endpoints by profile ID": a
//! 429 holds the bucket of the request's own scope ([`CoinbaseExchange::bucket`]),
//! the IP's public bucket for a public read, never the profile's for it.
//!
//! Sources (checked 2026-11-30; re-read 2026-12-01 for issue 30):
//! <https://docs.cdp.coinbase.com/exchange/rest-api/rate-limits> (the buckets; "When
//! a REST API rate limit is exceeded, a status of `429 Too Many Requests` is
//! returned"),
//! <https://docs.cdp.coinbase.com/exchange/introduction/rate-limits-overview> (the
//! same figures, and FIX's), <https://docs.cdp.coinbase.com/exchange/rest-api/requests>
//! (errors), <https://docs.cdp.coinbase.com/exchange/rest-api/authentication> (the
//! 30 s timestamp window).
//!
//! Reading an answer never allocates.

use crate::adapt::{self, Clock, Error, Parts, Request, Venue};
use crate::endpoint::{
    self, ApiKey, ClientIds, ClientOrderId, Endpoints, IdFormat, Lookup, Method, NewOrder,
    OrderInfo, OrderRef, OrderState, OrderType, Placed, Prepared, Side, Symbol, TimeInForce,
    Writer,
};
use crate::json::{self, Value};
use crate::response::Response;
use crate::sign::{self, Secret};
use crate::waits;
use ergon_core::{BucketId, Budget, Builder, Part, Spec, Verdict};

/// How far `CB-ACCESS-TIMESTAMP` may be from the venue's clock: a request is
/// refused 30 s after its timestamp, so that is its deadline.
pub const TIMESTAMP_WINDOW_S: i64 = 30;

/// The buckets' rates and bursts.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Private requests per second per profile ...
    pub private_per_s: u32,
    /// ... and in bursts.
    pub private_burst: u64,
    /// `/fills` requests per second per profile ...
    pub fills_per_s: u32,
    /// ... and in bursts.
    pub fills_burst: u64,
    /// Public requests per second per IP ...
    pub public_per_s: u32,
    /// ... and in bursts.
    pub public_burst: u64,
}

impl Default for Config {
    /// 15/30 private, 10/20 `/fills`, 10/15 public
    /// (docs.cdp.coinbase.com/exchange/rest-api/rate-limits, checked 2026-11-30).
    fn default() -> Self {
        Config {
            private_per_s: 15,
            private_burst: 30,
            fills_per_s: 10,
            fills_burst: 20,
            public_per_s: 10,
            public_burst: 15,
        }
    }
}

/// The Coinbase Exchange adapter for one profile.
#[derive(Clone, Debug)]
pub struct CoinbaseExchange {
    clock: Clock,
    /// The IP gate.
    pub ip: BucketId,
    /// Private requests of the profile.
    pub private: BucketId,
    /// `/fills` of the profile.
    pub fills: BucketId,
    /// Public requests of the IP.
    pub public: BucketId,
    auth: Option<(ApiKey, Secret, ApiKey)>,
}

impl CoinbaseExchange {
    /// Declares `ip`, `private`, `fills` and `public`.
    pub fn new(builder: &mut Builder, clock: Clock, c: Config) -> Result<Self, Error> {
        if c.private_per_s == 0 || c.fills_per_s == 0 || c.public_per_s == 0 {
            return Err(Error::BadField("per_s"));
        }
        Ok(CoinbaseExchange {
            clock,
            ip: builder.add("ip", Spec::gate())?,
            private: builder.add("private", Spec::token(c.private_per_s, c.private_burst))?,
            fills: builder.add("fills", Spec::token(c.fills_per_s, c.fills_burst))?,
            public: builder.add("public", Spec::token(c.public_per_s, c.public_burst))?,
            auth: None,
        })
    }

    /// The bucket a request draws on, and the one its 429 holds: `/fills` reads
    /// (`Info("fills")`) their own, public reads the IP's, the rest the profile's.
    /// A public read is `Info("public")` or `Read(0)`, a read that costs the
    /// profile nothing (every private request costs it one), the way the Kraken
    /// adapters name their public book.
    pub fn bucket(&self, request: Request<'_>) -> BucketId {
        match request {
            Request::Info("fills") => self.fills,
            Request::Info("public") | Request::Read(0) => self.public,
            _ => self.private,
        }
    }

    fn said_clock(message: Option<Value<'_>>) -> bool {
        // "request timestamp expired", "invalid timestamp"; not "API key expired".
        message.is_some_and(|m| m.str_contains("timestamp").unwrap_or(false))
    }
}

impl Venue for CoinbaseExchange {
    fn parts(&self, request: Request<'_>) -> Result<Parts, Error> {
        let mut p = Parts::new();
        p.push(Part::new(self.ip, 0));
        match request {
            Request::Connect => {}
            Request::Order | Request::Cancel => p.push(Part::new(self.private, 1)),
            Request::Info("fills" | "public") | Request::Read(0) => {
                p.push(Part::new(self.bucket(request), 1))
            }
            Request::Read(w) => p.push(Part::new(self.private, w)),
            Request::CancelReplace | Request::Batch(_) | Request::Info(_) => {
                return Err(Error::Unsupported)
            }
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
        let message = body.and_then(|v| v.get("message").ok().flatten());
        let verdict = match (r.status, body) {
            (200..=299, Some(v)) => {
                // An order the venue refused at once (post-only crossing ...)
                // comes back as status "rejected".
                let rejected = v
                    .get("status")
                    .ok()
                    .flatten()
                    .is_some_and(|s| s.str_eq("rejected").unwrap_or(false));
                if rejected {
                    Verdict::Rejected
                } else {
                    Verdict::Done
                }
            }
            (429, _) => adapt::hold(budget, self.bucket(request), retry.wait_ns, now),
            (400 | 401, Some(_)) if Self::said_clock(message) => Verdict::ClockSkew,
            (403, None) => waits::block(budget, self.ip, retry, now),
            _ if request.is_write() && !(400..500).contains(&r.status) => Verdict::Unknown,
            (400..=499, Some(_)) => Verdict::Rejected,
            _ if request.is_write() => Verdict::Unknown,
            (s, _) if s >= 500 => Verdict::NotRun,
            (s, _) => adapt::status_rule(s, budget, self.ip, None, now),
        };
        adapt::finish(verdict, bad)
    }
}

impl CoinbaseExchange {
    /// Signs private requests with `api_key` (`CB-ACCESS-KEY`), its base64 `secret`
    /// and its `passphrase` (`CB-ACCESS-PASSPHRASE`).
    pub fn with_auth(
        mut self,
        api_key: &str,
        secret_b64: &str,
        passphrase: &str,
    ) -> Result<Self, Error> {
        self.auth = Some((
            ApiKey::new(api_key)?,
            Secret::from_base64(secret_b64)?,
            ApiKey::new(passphrase)?,
        ));
        Ok(self)
    }

    /// A private request: `target` writes path and query, `body` the JSON body (or
    /// nothing); signed. Returns the deadline: the timestamp plus 30 s.
    fn private(
        &self,
        w: &mut Writer<'_>,
        method: Method,
        now: i64,
        target: impl FnOnce(&mut Writer<'_>),
        body: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>,
    ) -> Result<i64, Error> {
        let Some((api_key, secret, passphrase)) = &self.auth else {
            return Err(Error::NoKey);
        };
        let ts = self.clock.utc_ms(now).div_euclid(1000);
        w.open();
        let target_at = w.pos();
        target(w);
        let target_end = w.pos();
        w.close_target();
        w.open();
        let body_at = w.pos();
        body(w)?;
        let body_end = w.pos();
        w.close_body();
        w.open();
        let ts_at = w.pos();
        w.int(ts);
        let ts_end = w.pos();
        w.close_header("CB-ACCESS-TIMESTAMP")?;
        let mac = sign::coinbase(
            secret,
            w.bytes(ts_at..ts_end),
            method.as_str().as_bytes(),
            w.bytes(target_at..target_end),
            w.bytes(body_at..body_end),
        );
        w.header("CB-ACCESS-KEY", api_key.as_str().as_bytes())?;
        w.open();
        w.base64(&mac);
        w.close_header("CB-ACCESS-SIGN")?;
        w.header("CB-ACCESS-PASSPHRASE", passphrase.as_str().as_bytes())?;
        if body_end > body_at {
            w.header("Content-Type", b"application/json")?;
        }
        Ok(self
            .clock
            .now_ns_at(ts.saturating_add(TIMESTAMP_WINDOW_S).saturating_mul(1000)))
    }
}

/// `client_oid` must be a UUID (8-4-4-4-12 hex digits).
fn uuid(id: &ClientOrderId) -> Result<&str, Error> {
    let s = id.as_str();
    let groups = [8, 4, 4, 4, 12];
    let ok = s.len() == 36
        && s.split('-').map(str::len).eq(groups)
        && s.bytes().all(|c| c == b'-' || c.is_ascii_hexdigit());
    if ok {
        Ok(s)
    } else {
        Err(Error::BadArgument("client order id (Coinbase: a UUID)"))
    }
}

/// An order object (`id`, `status`, `done_reason`, `filled_size`).
fn order_info(v: Value<'_>) -> Option<OrderInfo> {
    let status = v.get("status").ok().flatten()?;
    let is = |s| status.str_eq(s).unwrap_or(false);
    let state = if is("pending") || is("received") {
        OrderState::Pending
    } else if is("open") || is("active") {
        OrderState::New
    } else if is("rejected") {
        OrderState::Rejected
    } else if is("done") {
        let filled = v
            .get("done_reason")
            .ok()
            .flatten()
            .is_some_and(|r| r.str_eq("filled").unwrap_or(false));
        if filled {
            OrderState::Filled
        } else {
            OrderState::Canceled
        }
    } else {
        OrderState::Other
    };
    Some(OrderInfo {
        state,
        venue_order_id: endpoint::json_text(v.get("id").ok().flatten()?)?,
        filled: v
            .get("filled_size")
            .ok()
            .flatten()
            .and_then(endpoint::json_text),
    })
}

impl ClientIds for CoinbaseExchange {
    /// `client_oid`: a UUID (<https://docs.cdp.coinbase.com/exchange/reference/exchangerestapi_postorders>;
    /// "Invalid order id" otherwise, as Coinbase's staff answered in
    /// <https://forums.coinbasecloud.dev/t/requirements-for-client-order-id/870>).
    const ID_FORMAT: IdFormat = IdFormat::Uuid;
}

impl Endpoints for CoinbaseExchange {
    /// `POST /orders` (JSON): one private request.
    fn new_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &NewOrder<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        if o.reduce_only {
            return Err(Error::BadArgument(
                "reduce_only (Coinbase Exchange has no positions)",
            ));
        }
        let cloid = uuid(&o.client_order_id)?;
        let deadline = self.private(
            &mut w,
            Method::Post,
            now,
            |w| w.s("/orders"),
            |w| {
                w.s("{");
                let mut f = true;
                let (kind, tif, post_only) = match o.order_type {
                    OrderType::Limit(TimeInForce::Gtc) => ("limit", Some("GTC"), false),
                    OrderType::Limit(TimeInForce::Ioc) => ("limit", Some("IOC"), false),
                    OrderType::Limit(TimeInForce::Fok) => ("limit", Some("FOK"), false),
                    OrderType::PostOnly => ("limit", Some("GTC"), true),
                    OrderType::Market => ("market", None, false),
                };
                w.json(&mut f, "type", kind);
                w.json(
                    &mut f,
                    "side",
                    match o.side {
                        Side::Buy => "buy",
                        Side::Sell => "sell",
                    },
                );
                w.json(&mut f, "product_id", o.symbol.as_str());
                match (o.order_type, o.price) {
                    (OrderType::Market, None) => {}
                    (OrderType::Market, Some(_)) => {
                        return Err(Error::BadArgument("price of a market order"))
                    }
                    (_, Some(p)) => w.json(&mut f, "price", p.as_str()),
                    (_, None) => return Err(Error::BadArgument("price of a limit order")),
                }
                w.json(&mut f, "size", o.quantity.as_str());
                if let Some(t) = tif {
                    w.json(&mut f, "time_in_force", t);
                }
                if post_only {
                    w.s(",\"post_only\":true");
                }
                w.json(&mut f, "client_oid", cloid);
                w.s("}");
                w.id(o.client_order_id)
            },
        )?;
        w.finish(self, Request::Order, Method::Post, deadline)
    }

    /// `DELETE /orders/client:<client_oid>?product_id=..`: one private request.
    fn cancel<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let cloid = uuid(&o.client_order_id)?;
        let deadline = self.private(
            &mut w,
            Method::Delete,
            now,
            |w| {
                w.s("/orders/client:");
                w.s(cloid);
                w.s("?product_id=");
                w.s(o.symbol.as_str());
            },
            |w| w.id(o.client_order_id),
        )?;
        w.finish(self, Request::Cancel, Method::Delete, deadline)
    }

    /// `DELETE /orders?product_id=` (every open order of the product, best effort:
    /// <https://docs.cloud.coinbase.com/api-reference/exchange-api/rest-api/orders/cancel-all-orders>).
    fn cancel_all<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        let deadline = self.private(
            &mut w,
            Method::Delete,
            now,
            |w| {
                w.s("/orders?product_id=");
                w.s(symbol.as_str());
            },
            |_| Ok(()),
        )?;
        w.finish(self, Request::Cancel, Method::Delete, deadline)
    }

    /// `GET /orders/client:<client_oid>`: one private request.
    fn query_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let cloid = uuid(&o.client_order_id)?;
        let deadline = self.private(
            &mut w,
            Method::Get,
            now,
            |w| {
                w.s("/orders/client:");
                w.s(cloid);
            },
            |w| w.id(o.client_order_id),
        )?;
        w.finish(self, Request::Read(1), Method::Get, deadline)
    }

    /// `GET /orders?status=open[&product_id=..]`: one private request.
    fn open_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Option<Symbol<'_>>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        let deadline = self.private(
            &mut w,
            Method::Get,
            now,
            |w| {
                w.s("/orders?status=open");
                if let Some(s) = symbol {
                    w.s("&product_id=");
                    w.s(s.as_str());
                }
            },
            |_| Ok(()),
        )?;
        w.finish(self, Request::Read(1), Method::Get, deadline)
    }

    /// `GET /products/<id>/book?level=2` (`depth` 1 the best bid and ask only,
    /// level 1): public, per IP.
    fn book<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        depth: u32,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        w.open();
        w.s("/products/");
        w.s(symbol.as_str());
        w.s(if depth <= 1 {
            "/book?level=1"
        } else {
            "/book?level=2"
        });
        w.close_target();
        let deadline = now.saturating_add(TIMESTAMP_WINDOW_S.saturating_mul(1_000_000_000));
        w.finish(self, Request::Info("public"), Method::Get, deadline)
    }

    /// `GET /accounts`: one private request.
    fn account<'p>(&mut self, out: &'p mut Prepared, now: i64) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        let deadline = self.private(&mut w, Method::Get, now, |w| w.s("/accounts"), |_| Ok(()))?;
        w.finish(self, Request::Read(1), Method::Get, deadline)
    }

    /// `GET /orders/client:..`: the order, a 404 (no such order), or unknown.
    fn read_order(&self, r: &Response<'_>) -> Lookup {
        match r.status {
            404 => Lookup::NotFound,
            200..=299 => json::parse(r.body)
                .ok()
                .and_then(order_info)
                .map_or(Lookup::Unknown, Lookup::Found),
            _ => Lookup::Unknown,
        }
    }

    /// `POST /orders`: the order (refused if its status is `rejected`), a 4xx
    /// with a `message` other than a throttle (refused), or unknown.
    fn read_placed(&self, r: &Response<'_>) -> Placed {
        let v = json::parse(r.body).ok();
        match (r.status, v) {
            (200..=299, Some(v)) => match order_info(v) {
                Some(info) if info.state == OrderState::Rejected => Placed::Refused,
                Some(info) => Placed::Accepted(info),
                None => Placed::Unknown,
            },
            (400..=499, Some(v)) if v.get("message").ok().flatten().is_some() => Placed::Refused,
            _ => Placed::Unknown,
        }
    }
}
