//! Bybit v5: errors arrive in HTTP 200 bodies as `retCode`; per-UID endpoint limits
//! over a rolling second, reported by `X-Bapi-Limit` / `X-Bapi-Limit-Status` and
//! reset at `X-Bapi-Limit-Reset-Timestamp`; 600 requests per 5 s per IP; a 403
//! "access too frequent" is an IP ban of at least 10 minutes with no `Retry-After`.
//!
//! Sources: <https://bybit-exchange.github.io/docs/v5/rate-limit>,
//! <https://bybit-exchange.github.io/docs/v5/error>,
//! <https://bybit-exchange.github.io/docs/v5/order/batch-place>.
//!
//! Reading an answer never allocates.

use crate::adapt::{self, Batch, Clock, Error, Parts, Request, Venue};
use crate::json::{self, Value};
use crate::response::Response;
use ergon_core::{BucketId, Budget, Builder, Part, Spec, Verdict};

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;

/// "Wait for at least 10 minutes. The ban will be lifted automatically."
pub const BAN_NS: i64 = 600 * SEC;

/// Per-UID limits of the endpoints an adapter uses, requests (orders, for batch
/// endpoints) per rolling second; the IP limit per 5 s.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// `/v5/order/create` (and `create-batch`, counted per order).
    pub create_per_s: u64,
    /// `/v5/order/amend`.
    pub amend_per_s: u64,
    /// `/v5/order/cancel`.
    pub cancel_per_s: u64,
    /// Reads, counted by their weight.
    pub read_per_s: u64,
    /// Requests per IP per 5 s.
    pub ip_per_5s: u64,
}

impl Default for Config {
    /// The documented defaults for linear contracts (classic VIP 0).
    fn default() -> Self {
        Config {
            create_per_s: 10,
            amend_per_s: 10,
            cancel_per_s: 10,
            read_per_s: 50,
            ip_per_5s: 600,
        }
    }
}

/// The Bybit v5 adapter.
#[derive(Clone, Debug)]
pub struct Bybit {
    clock: Clock,
    /// The IP gate.
    pub ip: BucketId,
    /// 600 requests per 5 s per IP.
    pub ip_5s: BucketId,
    /// `/v5/order/create`.
    pub create: BucketId,
    /// `/v5/order/amend`.
    pub amend: BucketId,
    /// `/v5/order/cancel`.
    pub cancel: BucketId,
    /// Reads.
    pub read: BucketId,
}

impl Bybit {
    /// Declares `ip`, `ip_5s` and one rolling-second bucket per endpoint.
    pub fn new(builder: &mut Builder, clock: Clock, c: Config) -> Result<Self, Error> {
        let second = |n| Spec::sliding(n, SEC, 20);
        Ok(Bybit {
            clock,
            ip: builder.add("ip", Spec::gate())?,
            ip_5s: builder.add("ip_5s", Spec::sliding(c.ip_per_5s, 5 * SEC, 50))?,
            create: builder.add("/v5/order/create", second(c.create_per_s))?,
            amend: builder.add("/v5/order/amend", second(c.amend_per_s))?,
            cancel: builder.add("/v5/order/cancel", second(c.cancel_per_s))?,
            read: builder.add("read", second(c.read_per_s))?,
        })
    }

    /// The deadline of a signed request: `X-BAPI-TIMESTAMP` plus `X-BAPI-RECV-WINDOW`.
    pub fn deadline_ns(&self, timestamp_ms: i64, recv_window_ms: i64) -> i64 {
        self.clock
            .now_ns_at(timestamp_ms.saturating_add(recv_window_ms))
    }

    /// The per-UID endpoint bucket of a request.
    pub fn endpoint(&self, request: Request<'_>) -> BucketId {
        match request {
            Request::Order | Request::Batch(_) => self.create,
            Request::CancelReplace => self.amend,
            Request::Cancel => self.cancel,
            Request::Read(_) | Request::Info(_) | Request::Connect => self.read,
        }
    }

    /// The verdict of one `retCode` (of the request, or of one order of a batch).
    fn code(
        &self,
        code: i64,
        request: Request<'_>,
        r: &Response<'_>,
        budget: &mut Budget,
        now: i64,
        bad: &mut Option<&'static str>,
    ) -> Verdict {
        match code {
            0 => Verdict::Done,
            10006 => {
                let reset = r.header("X-Bapi-Limit-Reset-Timestamp");
                let wait = match reset.map(adapt::header_u64) {
                    Some(Some(ms)) => {
                        let at = self.clock.now_ns_at(i64::try_from(ms).unwrap_or(i64::MAX));
                        Some(at.saturating_sub(now).max(0))
                    }
                    Some(None) => {
                        *bad = bad.or(Some("X-Bapi-Limit-Reset-Timestamp"));
                        None
                    }
                    None => None,
                };
                adapt::hold(budget, self.endpoint(request), wait, now)
            }
            // "Too many visits. Exceeded the API Rate Limit" per IP.
            10018 => adapt::hold(budget, self.ip_5s, None, now),
            // System-level frequency protection.
            10429 => adapt::hold(budget, self.ip, None, now),
            10002 => Verdict::ClockSkew,
            10000 | 10016 | 170007 | 170146 => Verdict::Unknown,
            _ => Verdict::Rejected,
        }
    }

    /// The orders of a batch answer: `retExtInfo.list[i].code`.
    fn batch(
        &self,
        v: Value<'_>,
        request: Request<'_>,
        r: &Response<'_>,
        budget: &mut Budget,
        now: i64,
        bad: &mut Option<&'static str>,
    ) -> Verdict {
        let Ok(Some(list)) = v.path("retExtInfo.list") else {
            return Verdict::Unknown;
        };
        let Ok(items) = list.items() else {
            return Verdict::Unknown;
        };
        let mut batch = Batch::new();
        for item in items {
            match item.get("code").ok().flatten().map(|c| c.as_i64()) {
                Some(Ok(code)) => batch.add(self.code(code, request, r, budget, now, bad)),
                _ => batch.add(Verdict::Unknown),
            }
        }
        batch.verdict().unwrap_or(Verdict::Unknown)
    }

    /// `X-Bapi-Limit` minus `X-Bapi-Limit-Status` is the endpoint's usage.
    fn observe(
        &self,
        request: Request<'_>,
        r: &Response<'_>,
        budget: &mut Budget,
        now: i64,
    ) -> Option<&'static str> {
        let (limit, left) = match (r.header("X-Bapi-Limit"), r.header("X-Bapi-Limit-Status")) {
            (None, None) => return None,
            (Some(l), Some(s)) => (adapt::header_u64(l), adapt::header_u64(s)),
            (Some(_), None) => return Some("X-Bapi-Limit-Status"),
            (None, Some(_)) => return Some("X-Bapi-Limit"),
        };
        match (limit, left) {
            (Some(limit), Some(left)) if left <= limit => {
                // An adapter is driven with the budget it was built for: its ids are that
                // budget's own, never refused.
                budget
                    .observe_used(self.endpoint(request), limit - left, now)
                    .ok();
                None
            }
            (None, _) => Some("X-Bapi-Limit"),
            _ => Some("X-Bapi-Limit-Status"),
        }
    }
}

impl Venue for Bybit {
    fn parts(&self, request: Request<'_>) -> Result<Parts, Error> {
        let mut p = Parts::new();
        p.push(Part::new(self.ip, 0));
        match request {
            Request::Connect => return Ok(p),
            Request::Order | Request::Cancel | Request::CancelReplace => {
                p.push(Part::new(self.endpoint(request), 1))
            }
            Request::Batch(n) => p.push(Part::new(self.create, u32::from(n))),
            Request::Read(w) => p.push(Part::new(self.read, w)),
            Request::Info(_) => return Err(Error::Unsupported),
        }
        p.push(Part::new(self.ip_5s, 1));
        Ok(p)
    }

    fn on_response(
        &mut self,
        request: Request<'_>,
        r: &Response<'_>,
        budget: &mut Budget,
        now: i64,
    ) -> Result<Verdict, Error> {
        let mut bad = None;
        let body = json::parse(r.body).ok();
        let ret_code = body
            .and_then(|v| v.get("retCode").ok().flatten())
            .and_then(|c| c.as_i64().ok());
        let verdict = match (r.status, ret_code, body) {
            // "403, access too frequent" (not a retCode body): stop every session,
            // at least 10 minutes.
            (403, None, _) => adapt::ban(budget, self.ip, now.saturating_add(BAN_NS), now),
            (_, Some(0), Some(v)) if matches!(request, Request::Batch(_)) => {
                self.batch(v, request, r, budget, now, &mut bad)
            }
            (_, Some(code), _) => self.code(code, request, r, budget, now, &mut bad),
            (429, None, _) => adapt::hold(budget, self.ip, None, now),
            (_, None, _) if request.is_write() => Verdict::Unknown,
            (200..=299, None, _) => Verdict::Unknown,
            (s, None, _) => adapt::status_rule(s, budget, self.ip, None, now),
        };
        bad = bad.or(self.observe(request, r, budget, now));
        adapt::finish(verdict, bad)
    }
}
