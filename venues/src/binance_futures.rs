//! Binance USD-M futures: 2400 weight per minute, 1200 orders per minute and 300
//! per 10 s (UTC-aligned fixed windows), the four documented 503 answers, 408, and
//! futures codes where they differ from Spot (-2021/-2022 are business rejections
//! here, not cancel-replace outcomes).
//!
//! Sources: <https://developers.binance.com/docs/derivatives/usds-margined-futures/general-info>,
//! <https://developers.binance.com/docs/derivatives/usds-margined-futures/error-code>.
//!
//! Reading an answer never allocates.

use crate::adapt::{self, Clock, Error, Parts, Request, Venue};
use crate::response::Response;
use ergon_core::{Budget, Builder, Verdict};

use crate::binance_spot::{Counts, Limits, Msg};

/// The documented defaults: `REQUEST_WEIGHT_1M` 2400, `ORDERS_1M` 1200,
/// `ORDERS_10S` 300.
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
}

impl BinanceFutures {
    /// Declares `ip`, `REQUEST_WEIGHT_1M`, `ORDERS_1M` and `ORDERS_10S` with the
    /// documented limits (or those of `table`, read from `exchangeInfo`).
    pub fn new(
        builder: &mut Builder,
        clock: Clock,
        guard_ns: i64,
        table: &[(Counts, u64, &str, u64)],
    ) -> Result<Self, Error> {
        let limits = Limits::declare(builder, clock, guard_ns, table)?;
        let me = BinanceFutures { limits };
        me.parts(Request::Order)?;
        Ok(me)
    }

    /// The deadline of a signed request: `timestamp` plus `recvWindow`.
    pub fn deadline_ns(&self, timestamp_ms: i64, recv_window_ms: i64) -> i64 {
        self.limits
            .clock
            .now_ns_at(timestamp_ms.saturating_add(recv_window_ms))
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
            Request::Order => l.parts(1, 1, 0),
            Request::Cancel => l.parts(1, 0, 0),
            // Modify order: weight 1, counts as an order.
            Request::CancelReplace => l.parts(1, 1, 0),
            // batchOrders: weight 5, each order counts.
            Request::Batch(n) => l.parts(5, u32::from(n), 0),
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
            (400..=499, None) if m.json.is_none() && request.is_write() => Verdict::Unknown,
            (s, _) => adapt::status_rule(s, budget, l.ip, wait, now),
        };
        bad = bad.or(l.observe(r, budget, now));
        adapt::finish(verdict, bad)
    }
}
