//! Coinbase Exchange REST: lazy-fill token buckets (burst, refilled at a steady
//! rate): private endpoints per profile 15 a second with bursts up to 30, the
//! private `/fills` endpoint 10 and 20, public endpoints per IP 10 and 15; HTTP 429
//! past them. Errors are a JSON `message` with a 4xx or 5xx status; a request whose
//! `CB-ACCESS-TIMESTAMP` is more than 30 s from the venue's clock is refused. No
//! usage headers.
//!
//! There is no amend and no batch on REST (FIX has both, 15 orders a batch message,
//! with its own rates: 2 logons a second per key, 100 requests a second, the session
//! cut past 200 messages a second; not built here).
//!
//! Sources (checked 2026-11-30):
//! <https://docs.cdp.coinbase.com/exchange/rest-api/rate-limits> (the buckets),
//! <https://docs.cdp.coinbase.com/exchange/introduction/rate-limits-overview> (the
//! same figures, and FIX's), <https://docs.cdp.coinbase.com/exchange/rest-api/requests>
//! (errors), <https://docs.cdp.coinbase.com/exchange/rest-api/authentication> (the
//! 30 s timestamp window).
//!
//! Reading an answer never allocates.

use crate::adapt::{self, Clock, Error, Parts, Request, Venue};
use crate::json::{self, Value};
use crate::reconcile::{Lookup, ReadError};
use crate::response::Response;
use crate::waits;
use ergon_core::{BucketId, Budget, Builder, Part, Spec, Verdict};

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
        })
    }

    /// The bucket a request draws on: `/fills` reads (`Info("fills")`) their own,
    /// public reads (`Info("public")`) the IP's, the rest the profile's.
    pub fn bucket(&self, request: Request<'_>) -> BucketId {
        match request {
            Request::Info("fills") => self.fills,
            Request::Info("public") => self.public,
            _ => self.private,
        }
    }

    fn said_clock(message: Option<Value<'_>>) -> bool {
        // "request timestamp expired", "invalid timestamp"; not "API key expired".
        message.is_some_and(|m| m.str_contains("timestamp").unwrap_or(false))
    }

    /// Reads a `GET /orders/client:<client_oid>` answer: `status` `pending`,
    /// `open`, `active` (on the book or accepted), `done` (then `done_reason`
    /// `filled` or `canceled`) or `rejected`; a 404 is an order the venue does not
    /// know.
    pub fn read_order(response: &Response<'_>) -> Result<Lookup, ReadError> {
        match response.status {
            404 => return Ok(Lookup::Absent),
            200..=299 => {}
            s => return Err(ReadError::NoAnswer(s)),
        }
        let v = json::parse(response.body).map_err(|_| ReadError::Body("JSON"))?;
        let status = v
            .get("status")
            .ok()
            .flatten()
            .ok_or(ReadError::Body("status"))?;
        let is = |s| status.str_eq(s).unwrap_or(false);
        Ok(
            if is("pending") || is("open") || is("active") || is("received") {
                Lookup::Open
            } else if is("rejected") {
                Lookup::Rejected
            } else if is("done") {
                let reason = v
                    .get("done_reason")
                    .ok()
                    .flatten()
                    .ok_or(ReadError::Body("done_reason"))?;
                if reason.str_eq("filled").unwrap_or(false) {
                    Lookup::Filled
                } else {
                    Lookup::Cancelled
                }
            } else {
                return Err(ReadError::Body("status"));
            },
        )
    }
}

impl Venue for CoinbaseExchange {
    fn parts(&self, request: Request<'_>) -> Result<Parts, Error> {
        let mut p = Parts::new();
        p.push(Part::new(self.ip, 0));
        match request {
            Request::Connect => {}
            Request::Order | Request::Cancel => p.push(Part::new(self.private, 1)),
            Request::Read(w) => p.push(Part::new(self.private, w)),
            Request::Info("fills" | "public") => p.push(Part::new(self.bucket(request), 1)),
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
