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
use crate::json::{self, Value};
use crate::reconcile::{Lookup, ReadError};
use crate::response::Response;
use crate::waits;
use ergon_core::{BucketId, Budget, Builder, Part, Spec, Verdict};

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

/// The Deribit adapter.
#[derive(Clone, Debug)]
pub struct Deribit {
    clock: Clock,
    credit_cost: u32,
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
}

impl Deribit {
    /// Declares `ip`, `matching`, `credits`, `connections` and `sessions`.
    pub fn new(builder: &mut Builder, clock: Clock, c: Config) -> Result<Self, Error> {
        if c.matching_per_s == 0 || c.credits_per_s == 0 {
            return Err(Error::BadField("refill"));
        }
        Ok(Deribit {
            clock,
            credit_cost: c.credit_cost,
            ip: builder.add("ip", Spec::gate())?,
            matching: builder.add("matching", Spec::token(c.matching_per_s, c.matching_burst))?,
            credits: builder.add("credits", Spec::token(c.credits_per_s, c.credits_max))?,
            connections: builder.add("connections", Spec::in_flight(c.connections))?,
            sessions: builder.add("sessions", Spec::in_flight(c.sessions))?,
        })
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
            // The pool is empty: hold it until it has refilled (one window).
            10028 => adapt::hold(budget, self.pool(request), None, now),
            // Too many concurrent public requests: the IP's.
            10066 => adapt::hold(budget, self.ip, None, now),
            // "retry", settlement in progress, matching-engine queue full,
            // maintenance: refused before the engine.
            10040 | 10041 | 10047 | 11051 => Verdict::NotRun,
            // Internal error, temporarily unavailable, timed out: it may have run.
            11094 | 13028 | 13888 if request.is_write() => Verdict::Unknown,
            11094 | 13028 | 13888 => Verdict::NotRun,
            // A signature whose timestamp or nonce the venue refuses.
            10000 | 13004 | 13009 if reason_says("timestamp") || reason_says("nonce") => {
                Verdict::ClockSkew
            }
            _ => Verdict::Rejected,
        }
    }

    /// Reads a `private/get_order_state_by_label` (or `get_order_state`) answer for
    /// an order looked up by its label, the client id: `result` (an order, or a list
    /// of them) with `order_state` `open`, `filled`, `rejected`, `cancelled` or
    /// `untriggered`; an empty list, or error 10004 (`order_not_found`), is an order
    /// the venue does not know.
    pub fn read_order(response: &Response<'_>) -> Result<Lookup, ReadError> {
        let v = json::parse(response.body).map_err(|_| ReadError::Body("JSON"))?;
        if let Ok(Some(e)) = v.get("error") {
            return match e.get("code").ok().flatten().map(|c| c.as_i64()) {
                Some(Ok(10004)) => Ok(Lookup::Absent),
                _ => Err(ReadError::NoAnswer(response.status)),
            };
        }
        let result = v
            .get("result")
            .ok()
            .flatten()
            .ok_or(ReadError::Body("result"))?;
        let order = match result.kind() {
            json::Kind::Array => match result.at(0) {
                Ok(Some(o)) => o,
                Ok(None) => return Ok(Lookup::Absent),
                Err(_) => return Err(ReadError::Body("result")),
            },
            _ => result,
        };
        let state = order
            .get("order_state")
            .ok()
            .flatten()
            .ok_or(ReadError::Body("order_state"))?;
        let is = |s| state.str_eq(s).unwrap_or(false);
        Ok(if is("open") || is("untriggered") {
            Lookup::Open
        } else if is("filled") {
            Lookup::Filled
        } else if is("cancelled") {
            Lookup::Cancelled
        } else if is("rejected") {
            Lookup::Rejected
        } else {
            return Err(ReadError::Body("order_state"));
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use ergon_core::{Class, Why};

    const MS: i64 = 1_000_000;
    const SEC: i64 = 1_000 * MS;

    /// 50,000 credits, 500 a read, 10,000 a second: 100 reads at once, then one
    /// every 50 ms; an idle second refills 20 reads, and never more than the pool.
    #[test]
    fn the_credit_pool_refills_continuously() {
        let mut b = Budget::builder();
        let d = Deribit::new(&mut b, Clock::anchor(0, 0), Config::default()).unwrap();
        let mut budget = b.build(0).unwrap();
        let read = d.parts(Request::Read(1)).unwrap();
        for i in 0..100 {
            let t = budget
                .try_charge(&read, Class::Normal, 0)
                .unwrap_or_else(|l| panic!("read {i}: {l:?}"));
            budget.complete(t.sent(), 0).unwrap();
        }
        let refused = budget.try_charge(&read, Class::Normal, 0).unwrap_err();
        assert_eq!((refused.bucket, refused.why), (d.credits, Why::Full));
        assert_eq!(refused.ready_at_ns, 50 * MS);
        assert!(budget.try_charge(&read, Class::Normal, 49 * MS).is_err());
        let t = budget.try_charge(&read, Class::Normal, 50 * MS).unwrap();
        budget.complete(t.sent(), 50 * MS).unwrap();
        // One idle second: 20 more, not 21.
        let at = 1_050 * MS;
        for _ in 0..20 {
            let t = budget.try_charge(&read, Class::Normal, at).unwrap();
            budget.complete(t.sent(), at).unwrap();
        }
        assert!(budget.try_charge(&read, Class::Normal, at).is_err());
        // An idle minute: back to the full pool of 100, no more.
        let later = at + 60 * SEC;
        for _ in 0..100 {
            let t = budget.try_charge(&read, Class::Normal, later).unwrap();
            budget.complete(t.sent(), later).unwrap();
        }
        assert!(budget.try_charge(&read, Class::Normal, later).is_err());
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
