//! Hyperliquid: 1200 weight per minute per IP, with a short-window bucket in front
//! of it (the venue refuses bursts well below the minute budget; window and size are
//! configuration); info weights by request type (2, 20, 60) plus weight per items
//! returned, charged after the answer; exchange actions weigh 1 + floor(n / 40);
//! and the address budget (10,000 + 1 request per USDC traded, then 1 request per
//! 10 s) read from `userRateLimit`.
//!
//! Sources: <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/rate-limits-and-user-limits>,
//! <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/info-endpoint#query-user-rate-limits>,
//! <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/exchange-endpoint>.
//!
//! Reading an answer never allocates.

mod address;
mod exchange;
pub mod reserve;
pub mod sign;
mod switch;

pub use address::{Address, Reading};
pub use exchange::{Action, Exchange, Signature, Signer};
pub use switch::{SWITCH_MIN_TIMEOUT_MS, SWITCH_SPEC};

use crate::adapt::{self, Batch, Clock, Error, Parts, Request, Venue, MAX_ITEMS};
use crate::json::{self, Kind, Value};
use crate::response::Response;
use arrayvec::ArrayVec;
use ergon_core::{BucketId, Budget, Builder, Part, Spec, Verdict};

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;
const HOUR: i64 = 3600 * SEC;

/// Requests every address starts with.
pub const INITIAL_REQUESTS: u64 = 10_000;
/// Once the address budget is spent: one request per this long.
pub const EXHAUSTED_EVERY_NS: i64 = 10 * SEC;

/// Weight a minute reserved for the dead man's switch (`scheduleCancel`, weight 1
/// like every action): four calls, a refresh every 15 s, a quarter of the 60 s
/// default timeout. Carved out of the minute weight: `ip_weight_1m` is declared
/// this much smaller.
pub const SWITCH_RESERVE_WEIGHT: u64 = 4;

/// The IP limits.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Weight per minute per IP.
    pub weight_per_min: u64,
    /// The short window in front of the minute one: its weight ...
    pub burst_weight: u64,
    /// ... and its length.
    pub burst_window_ns: i64,
}

impl Default for Config {
    /// 1200 weight per minute per IP (documented:
    /// <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/rate-limits-and-user-limits>,
    /// checked 2026-11-30), and at most 100 weight in any 2 s (configuration, not a
    /// documented figure: the venue refuses bursts below the minute budget and does
    /// not say where).
    fn default() -> Self {
        Config {
            weight_per_min: 1200,
            burst_weight: 100,
            burst_window_ns: 2 * SEC,
        }
    }
}

/// The weight of an `info` request by its `type`.
pub fn info_weight(kind: &str) -> u32 {
    match kind {
        "l2Book"
        | "allMids"
        | "clearinghouseState"
        | "orderStatus"
        | "spotClearinghouseState"
        | "exchangeStatus" => 2,
        "userRole" => 60,
        _ => 20,
    }
}

/// Items per unit of extra weight an `info` answer adds (`None`: no extra weight).
pub fn info_items_per_weight(kind: &str) -> Option<u32> {
    match kind {
        "recentTrades"
        | "historicalOrders"
        | "userFills"
        | "userFillsByTime"
        | "fundingHistory"
        | "userFunding"
        | "nonUserFundingUpdates"
        | "twapHistory"
        | "userTwapSliceFills"
        | "userTwapSliceFillsByTime"
        | "delegatorHistory"
        | "delegatorRewards"
        | "validatorStats" => Some(20),
        "candleSnapshot" => Some(60),
        _ => None,
    }
}

/// The Hyperliquid adapter.
#[derive(Clone, Debug)]
pub struct Hyperliquid {
    clock: Clock,
    /// The IP gate.
    pub ip: BucketId,
    /// 1200 weight per minute per IP, less [`SWITCH_RESERVE_WEIGHT`].
    pub weight: BucketId,
    /// The dead man's switch's share of the minute weight
    /// ([`SWITCH_RESERVE_WEIGHT`], see [`crate::switch`]).
    pub switch: BucketId,
    /// The short window in front of it.
    pub burst: BucketId,
    /// The address gate: held 10 s after each action once the budget is spent.
    pub address_gate: BucketId,
    /// The address budget.
    pub address: Address,
    /// Buying requests when the address budget runs short (off by default).
    pub reserve: reserve::Reserve,
    items: ArrayVec<Verdict, MAX_ITEMS>,
}

impl Hyperliquid {
    /// Declares `ip`, `ip_weight_1m` (the minute weight less
    /// [`SWITCH_RESERVE_WEIGHT`]), `switch` (that reserve: the venue counts the
    /// switch's action in the same minute weight, so the strategies' share is
    /// declared smaller by it and no class can take it), `ip_burst` and `address`.
    pub fn new(builder: &mut Builder, clock: Clock, c: Config) -> Result<Self, Error> {
        if c.weight_per_min < 2 * SWITCH_RESERVE_WEIGHT {
            return Err(Error::BadField(
                "weight_per_min (too small for the switch's share)",
            ));
        }
        // The most slots (at most 64) that cut the window into whole nanoseconds.
        let slots = (1..=64u32)
            .rev()
            .find(|s| c.burst_window_ns > 0 && c.burst_window_ns % i64::from(*s) == 0)
            .ok_or(Error::BadField("burst_window_ns"))?;
        Ok(Hyperliquid {
            clock,
            ip: builder.add("ip", Spec::gate())?,
            weight: builder.add(
                "ip_weight_1m",
                Spec::sliding(c.weight_per_min - SWITCH_RESERVE_WEIGHT, 60 * SEC, 60),
            )?,
            switch: builder.add("switch", Spec::sliding(SWITCH_RESERVE_WEIGHT, 60 * SEC, 60))?,
            burst: builder.add(
                "ip_burst",
                Spec::sliding(c.burst_weight, c.burst_window_ns, slots),
            )?,
            address_gate: builder.add("address", Spec::gate())?,
            address: Address::default(),
            reserve: reserve::Reserve::default(),
            items: ArrayVec::new(),
        })
    }

    /// The venue's UTC ms at `now` on the caller's clock.
    pub fn utc_ms(&self, now: i64) -> i64 {
        self.clock.utc_ms(now)
    }

    /// The deadline of an action sent with `expiresAfter` (UTC ms).
    pub fn deadline_ns(&self, expires_after_ms: i64) -> i64 {
        self.clock.now_ns_at(expires_after_ms)
    }

    fn weight_parts(&self, w: u32, address: bool) -> Parts {
        let mut p = Parts::new();
        p.push(Part::new(self.ip, 0));
        p.push(Part::new(self.weight, w));
        p.push(Part::new(self.burst, w));
        if address {
            p.push(Part::new(self.address_gate, 0));
        }
        p
    }

    /// One exchange status: `"success"`, `{"resting":..}`, `{"filled":..}`,
    /// `{"error":".."}`.
    fn status(&self, s: Value<'_>, budget: &mut Budget, now: i64) -> Verdict {
        match s.kind() {
            Kind::String => Verdict::Done,
            Kind::Object => match s.get("error") {
                Ok(Some(e)) => self.error(e, budget, now),
                Ok(None) => Verdict::Done,
                Err(_) => Verdict::Unknown,
            },
            _ => Verdict::Unknown,
        }
    }

    fn error(&self, e: Value<'_>, budget: &mut Budget, now: i64) -> Verdict {
        let says = |t| e.str_contains(t).unwrap_or(false);
        if says("Too many cumulative requests") {
            adapt::hold(budget, self.address_gate, Some(EXHAUSTED_EVERY_NS), now)
        } else if says("nonce") || says("Nonce") {
            Verdict::ClockSkew
        } else {
            Verdict::Rejected
        }
    }

    fn exchange(&mut self, v: Value<'_>, budget: &mut Budget, now: i64) -> Verdict {
        let Ok(Some(status)) = v.get("status") else {
            return Verdict::Unknown;
        };
        if status.str_eq("err").unwrap_or(false) {
            return match v.get("response") {
                Ok(Some(e)) if e.kind() == Kind::String => self.error(e, budget, now),
                _ => Verdict::Unknown,
            };
        }
        if !status.str_eq("ok").unwrap_or(false) {
            return Verdict::Unknown;
        }
        match v
            .path("response.data.statuses")
            .map(|s| s.map(|s| s.items()))
        {
            Ok(Some(Ok(items))) => {
                let mut batch = Batch::new();
                items.for_each(|s| batch.add(self.status(s, budget, now)));
                let verdict = batch.verdict().unwrap_or(Verdict::Done);
                if batch.len() > 1 {
                    self.items = batch.into_items();
                }
                verdict
            }
            // Actions without statuses (leverage, transfers ...): ok is done.
            Ok(None) => Verdict::Done,
            _ => Verdict::Unknown,
        }
    }
}

impl Venue for Hyperliquid {
    fn batch_items(&self) -> &[Verdict] {
        &self.items
    }

    fn parts(&self, request: Request<'_>) -> Result<Parts, Error> {
        Ok(match request {
            Request::Connect => {
                let mut p = Parts::new();
                p.push(Part::new(self.ip, 0));
                p
            }
            Request::Order | Request::Cancel | Request::CancelReplace => self.weight_parts(1, true),
            Request::Batch(n) => self.weight_parts(1 + u32::from(n) / 40, true),
            Request::Read(w) => self.weight_parts(w, false),
            Request::Info(kind) => self.weight_parts(info_weight(kind), false),
        })
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
        let wait = retry.wait_ns;
        let body = json::parse(r.body).ok();
        let verdict = match (r.status, body) {
            // The venue does not say which window refused: the short one is the
            // one it enforces below the minute budget, and our own minute count
            // keeps the minute.
            (429, _) => adapt::hold(budget, self.burst, wait, now),
            (200..=299, Some(v)) if request.is_write() => self.exchange(v, budget, now),
            (200..=299, Some(v)) => {
                if let Request::Info(kind) = request {
                    // One more weight per `per` items, rounded up: at most one
                    // weight over the venue's count, never under it.
                    if let (Some(per), Ok(items)) = (info_items_per_weight(kind), v.items()) {
                        let n = u32::try_from(items.count()).unwrap_or(u32::MAX);
                        // An adapter is driven with the budget it was built for: its ids are that
                        // budget's own, never refused.
                        budget.charge_after(self.weight, n.div_ceil(per), now).ok();
                    }
                    if kind == "userRateLimit" {
                        match Reading::parse(r.body, now) {
                            Ok(reading) => {
                                self.address.read(reading);
                                let ms = self.clock.utc_ms(now);
                                self.reserve.on_reading(&self.address, ms);
                            }
                            // Not the documented answer: the address budget is
                            // not known from it.
                            Err(_) => return adapt::finish(Verdict::Unknown, bad),
                        }
                    }
                }
                Verdict::Done
            }
            (_, _) if request.is_write() => Verdict::Unknown,
            (200..=299, None) => Verdict::Unknown,
            (s, _) => adapt::status_rule(s, budget, self.burst, wait, now),
        };
        if request.is_write() && r.status != 429 {
            // Every action answered counts against the address, each order of a
            // batch as one.
            let n = match request {
                Request::Batch(n) => u64::from(n),
                _ => 1,
            };
            self.address.sent(n);
            if self.address.remaining() == Some(0) {
                // An adapter is driven with the budget it was built for: its ids are that
                // budget's own, never refused.
                budget
                    .throttled(self.address_gate, Some(EXHAUSTED_EVERY_NS), now)
                    .ok();
            }
        }
        adapt::finish(verdict, bad)
    }
}
