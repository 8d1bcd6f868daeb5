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
//! Sources (checked 2026-11-30):
//! <https://docs.kraken.com/exchange/guides/futures/ratelimits> (the budget and the
//! cost table), <https://docs.kraken.com/api/docs/futures-api/trading/send-order>
//! (`sendStatus` values), <https://docs.kraken.com/api/docs/guides/futures-rest>
//! (errors: `apiLimitExceeded`, `nonceBelowThreshold`, `nonceDuplicate`,
//! `authenticationError`, `Unavailable`).
//!
//! Reading an answer never allocates.

use crate::adapt::{self, Batch, Clock, Error, Parts, Request, Venue};
use crate::json::{self, Kind, Value};
use crate::reconcile::{Lookup, ReadError};
use crate::response::Response;
use crate::waits;
use ergon_core::{BucketId, Budget, Builder, Part, Spec, Verdict};

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;

/// The cost budget's window.
pub const WINDOW_NS: i64 = 10 * SEC;

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
    /// The key's `/derivatives` cost budget.
    pub derivatives: BucketId,
}

impl KrakenFutures {
    /// Declares `ip` and `derivatives`.
    pub fn new(builder: &mut Builder, clock: Clock, c: Config) -> Result<Self, Error> {
        Ok(KrakenFutures {
            clock,
            c,
            ip: builder.add("ip", Spec::gate())?,
            derivatives: builder.add(
                "derivatives",
                Spec::sliding(c.budget_per_10s, WINDOW_NS, 20),
            )?,
        })
    }

    fn cost_parts(&self, cost: u32) -> Parts {
        let mut p = Parts::new();
        p.push(Part::new(self.ip, 0));
        p.push(Part::new(self.derivatives, cost));
        p
    }

    /// A request-level error string.
    fn error(&self, e: Value<'_>, request: Request<'_>, budget: &mut Budget, now: i64) -> Verdict {
        let is = |s| e.str_eq(s).unwrap_or(false);
        if is("apiLimitExceeded") {
            // The venue's count is at the limit: ours too, for one window.
            budget
                .observe_used(self.derivatives, self.c.budget_per_10s, now)
                .ok();
            adapt::hold(budget, self.derivatives, None, now)
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

    fn success(v: Value<'_>, request: Request<'_>) -> Verdict {
        let field = match request {
            Request::Order => "sendStatus",
            Request::CancelReplace => "editStatus",
            Request::Cancel => "cancelStatus",
            Request::Batch(_) => {
                let Ok(Some(Ok(items))) = v.get("batchStatus").map(|b| b.map(|b| b.items())) else {
                    return Verdict::Unknown;
                };
                let mut batch = Batch::new();
                items.for_each(|i| batch.add(Self::status(i.get("status").ok().flatten())));
                return batch.verdict().unwrap_or(Verdict::Unknown);
            }
            _ => return Verdict::Done,
        };
        match v.get(field) {
            Ok(Some(st)) => Self::status(st.get("status").ok().flatten()),
            _ => Verdict::Unknown,
        }
    }

    /// Reads an `orders/status` answer for an order looked up by `cliOrdId`: the
    /// first of `orders` and its `status` (`ENTERED_BOOK`, `FULLY_EXECUTED`,
    /// `REJECTED`, `CANCELLED`, `TRIGGER_PLACED`, `TRIGGER_ACTIVATION_FAILURE`); an
    /// empty list is an order the venue does not know.
    pub fn read_order(response: &Response<'_>) -> Result<Lookup, ReadError> {
        let v = json::parse(response.body).map_err(|_| ReadError::Body("JSON"))?;
        let ok = v
            .get("result")
            .ok()
            .flatten()
            .is_some_and(|r| r.str_eq("success").unwrap_or(false));
        if !ok {
            return Err(ReadError::NoAnswer(response.status));
        }
        let orders = v
            .get("orders")
            .ok()
            .flatten()
            .ok_or(ReadError::Body("orders"))?;
        let mut items = orders.items().map_err(|_| ReadError::Body("orders"))?;
        let Some(first) = items.next() else {
            return Ok(Lookup::Absent);
        };
        let status = first
            .get("status")
            .ok()
            .flatten()
            .ok_or(ReadError::Body("status"))?;
        let is = |s| status.str_eq(s).unwrap_or(false);
        Ok(if is("ENTERED_BOOK") || is("TRIGGER_PLACED") {
            Lookup::Open
        } else if is("FULLY_EXECUTED") {
            Lookup::Filled
        } else if is("CANCELLED") {
            Lookup::Cancelled
        } else if is("REJECTED") || is("TRIGGER_ACTIVATION_FAILURE") {
            Lookup::Rejected
        } else {
            return Err(ReadError::Body("status"));
        })
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
            Request::Read(w) => self.cost_parts(w),
            Request::Info(_) => return Err(Error::Unsupported),
        })
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
        let result = body.and_then(|v| v.get("result").ok().flatten());
        let said = |s| result.is_some_and(|r| r.str_eq(s).unwrap_or(false));
        let verdict = match (r.status, body) {
            (_, Some(v)) if said("error") => match v.get("error") {
                Ok(Some(e)) if e.kind() == Kind::String => self.error(e, request, budget, now),
                _ if request.is_write() => Verdict::Unknown,
                _ => Verdict::Rejected,
            },
            (200..=299, Some(v)) if said("success") => Self::success(v, request),
            (429, _) => adapt::hold(budget, self.derivatives, retry.wait_ns, now),
            (403, None) => waits::block(budget, self.ip, retry, now),
            _ if request.is_write() => Verdict::Unknown,
            (200..=299, _) => Verdict::Unknown,
            (s, _) if s >= 500 => Verdict::NotRun,
            (s, _) => adapt::status_rule(s, budget, self.ip, None, now),
        };
        adapt::finish(verdict, bad)
    }
}
