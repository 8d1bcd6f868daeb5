//! OKX v5: `code` as a string in every body (errors come as HTTP 200 too), each
//! order's own `sCode` in `data[i]`, per-instrument endpoint limits over 2 s, the
//! sub-account limit of 1000 order requests per 2 s, and `expTime` as the request's
//! deadline.
//!
//! Sources: <https://www.okx.com/docs-v5/en/#overview-rate-limits>,
//! <https://www.okx.com/docs-v5/en/#error-code-rest-api>,
//! <https://www.okx.com/docs-v5/en/#order-book-trading-trade-post-place-order>.
//!
//! One adapter trades one instrument (the place-order limit is per instrument).
//! Reading an answer never allocates.

use crate::adapt::{self, Batch, Clock, Error, Parts, Request, Venue};
use crate::json::{self, Value};
use crate::response::Response;
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
    /// The documented limits.
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

/// The OKX v5 adapter for one instrument.
#[derive(Clone, Debug)]
pub struct Okx {
    clock: Clock,
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
}

impl Okx {
    /// Declares `ip`, one 2 s bucket per endpoint and `sub-account`.
    pub fn new(builder: &mut Builder, clock: Clock, c: Config) -> Result<Self, Error> {
        let two_s = |n| Spec::sliding(n, 2 * SEC, 20);
        Ok(Okx {
            clock,
            ip: builder.add("ip", Spec::gate())?,
            order: builder.add("/api/v5/trade/order", two_s(c.order))?,
            batch_orders: builder.add("/api/v5/trade/batch-orders", two_s(c.batch_orders))?,
            cancel: builder.add("/api/v5/trade/cancel-order", two_s(c.cancel))?,
            amend: builder.add("/api/v5/trade/amend-order", two_s(c.amend))?,
            sub_account: builder.add("sub-account", two_s(c.sub_account))?,
            read: builder.add("read", two_s(c.read))?,
        })
    }

    /// The deadline of a request sent with `expTime` (UTC ms): the venue does not
    /// run it after that, so neither may a re-send.
    pub fn deadline_ns(&self, exp_time_ms: i64) -> i64 {
        self.clock.now_ns_at(exp_time_ms)
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
    fn code(&self, code: i64, request: Request<'_>, budget: &mut Budget, now: i64) -> Verdict {
        match code {
            0 => Verdict::Done,
            // Rate limit reached / too frequent: the endpoint's 2 s window.
            50011 | 50040 => adapt::hold(budget, self.endpoint(request), None, now),
            50061 => adapt::hold(budget, self.sub_account, None, now),
            50102 => Verdict::ClockSkew,
            50004 => Verdict::Unknown,
            50001 | 50013 | 50026 if request.is_write() => Verdict::Unknown,
            50001 | 50013 | 50026 => Verdict::NotRun,
            _ => Verdict::Rejected,
        }
    }

    /// `code` 1 (failed) or 2 (partly): each order's `sCode` decides.
    fn orders(&self, v: Value<'_>, request: Request<'_>, budget: &mut Budget, now: i64) -> Verdict {
        let Ok(Some(Ok(items))) = v.get("data").map(|d| d.map(|d| d.items())) else {
            return Verdict::Unknown;
        };
        let mut batch = Batch::new();
        for item in items {
            match item.get("sCode").ok().flatten().map(|c| c.parse_i64()) {
                Some(Ok(code)) => batch.add(self.code(code, request, budget, now)),
                _ => batch.add(Verdict::Unknown),
            }
        }
        batch.verdict().unwrap_or(Verdict::Unknown)
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
        let body = json::parse(r.body).ok();
        let code = body
            .and_then(|v| v.get("code").ok().flatten())
            .and_then(|c| c.parse_i64().ok());
        let verdict = match (r.status, code, body) {
            (_, Some(1 | 2), Some(v)) => self.orders(v, request, budget, now),
            (_, Some(code), _) => self.code(code, request, budget, now),
            (429, None, _) => adapt::hold(budget, self.endpoint(request), None, now),
            (_, None, _) if request.is_write() => Verdict::Unknown,
            (200..=299, None, _) => Verdict::Unknown,
            (s, None, _) => adapt::status_rule(s, budget, self.ip, None, now),
        };
        Ok(verdict)
    }
}
