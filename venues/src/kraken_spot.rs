//! Kraken Spot REST: errors come as HTTP 200 with an `error` array of strings
//! (`EOrder:Rate limit exceeded`, `EAPI:Rate limit exceeded`, `EGeneral:Temporary
//! lockout`, `EAPI:Invalid nonce`, `EService:Busy` ...), checked before the status.
//!
//! Two limits, both counters that decay at a tier-dependent rate, which is a token
//! bucket (GCRA) in ergon's terms:
//! - the trading counter, per pair, shared by REST, WebSocket and FIX: +1 per new
//!   order, and a cancel, amend or edit costs more the younger the order is (the
//!   table in [`cancel_cost`], [`amend_cost`], [`edit_cost`]). The adapter charges
//!   the cost from the order's age it knows ([`KrakenSpot::cancel_parts`]); when the
//!   venue says `EOrder:Rate limit exceeded`, its counter was higher than ours, and
//!   the verdict path raises ours to full ([`Budget::observe_used`]);
//! - the REST call counter, per API key: +1 per call, +2 for ledger and trade
//!   history; AddOrder and CancelOrder do not count on it.
//!
//! Kraken sends no usage headers: the counts are ours alone.
//!
//! Sources (checked 2026-11-30):
//! <https://docs.kraken.com/exchange/guides/general/ratelimits> (trading counter:
//! thresholds, decay, the age table), <https://docs.kraken.com/exchange/guides/rest/ratelimits>
//! (call counter), <https://docs.kraken.com/exchange/guides/general/errors> (errors),
//! <https://support.kraken.com/articles/360045239571-trading-rate-limits> (the same
//! thresholds and decay rates per tier).
//!
//! One adapter trades one pair. Reading an answer never allocates.

use crate::adapt::{self, Batch, Clock, Error, Parts, Request, Venue};
use crate::json::{self, Kind, Value};
use crate::reconcile::{Lookup, ReadError};
use crate::response::Response;
use crate::waits;
use ergon_core::{BucketId, Budget, Builder, Part, Spec, Verdict};

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;

/// `EGeneral:Temporary lockout`: "wait for the lockout to expire (typically a few
/// minutes)"; read as 15 minutes, the figure of Kraken's older call-limit article.
/// The halt lasts until a person clears it either way.
pub const LOCKOUT_NS: i64 = 900 * SEC;

/// The limits of one account tier.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// The trading counter's threshold, per pair.
    pub trading_max: u64,
    /// The trading counter's decay, in thousandths per second.
    pub trading_decay_milli_per_s: u64,
    /// The REST call counter's maximum.
    pub api_max: u64,
    /// The REST call counter's decay, in thousandths per second.
    pub api_decay_milli_per_s: u64,
}

impl Config {
    /// Starter: trading 60, -1/s; calls 15, -0.33/s.
    pub const STARTER: Config = Config {
        trading_max: 60,
        trading_decay_milli_per_s: 1000,
        api_max: 15,
        api_decay_milli_per_s: 330,
    };
    /// Intermediate: trading 125, -2.34/s; calls 20, -0.5/s.
    pub const INTERMEDIATE: Config = Config {
        trading_max: 125,
        trading_decay_milli_per_s: 2340,
        api_max: 20,
        api_decay_milli_per_s: 500,
    };
    /// Pro: trading 180, -3.75/s; calls 20, -1/s.
    pub const PRO: Config = Config {
        trading_max: 180,
        trading_decay_milli_per_s: 3750,
        api_max: 20,
        api_decay_milli_per_s: 1000,
    };
}

impl Default for Config {
    /// Intermediate, the lowest tier that may trade by API without the Starter
    /// limits (docs.kraken.com trading and REST rate-limit pages, checked 2026-11-30).
    fn default() -> Self {
        Config::INTERMEDIATE
    }
}

/// Nanoseconds per unit of a counter decaying `milli_per_s` thousandths a second,
/// rounded up (the bucket never admits more than the venue).
fn interval_ns(milli_per_s: u64) -> Result<i64, Error> {
    if milli_per_s == 0 {
        return Err(Error::BadField("decay"));
    }
    let m = i64::try_from(milli_per_s).map_err(|_| Error::BadField("decay"))?;
    Ok((1_000 * SEC + m - 1) / m)
}

/// The decaying part of a cancel's cost by the order's age: +8 under 5 s, +6 under
/// 10 s, +5 under 15 s, +4 under 45 s, +2 under 90 s, +1 under 300 s, 0 after
/// (the fixed part is 0).
pub fn cancel_cost(age_ns: i64) -> u32 {
    by_age(age_ns, [8, 6, 5, 4, 2, 1])
}

/// An amend's cost: +1 fixed, and +3 under 5 s, +2 under 10 s, +1 under 15 s.
pub fn amend_cost(age_ns: i64) -> u32 {
    1 + by_age(age_ns, [3, 2, 1, 0, 0, 0])
}

/// A (legacy, cancel-new) edit's cost: +1 fixed, and +6 under 5 s, +5 under 10 s,
/// +4 under 15 s, +2 under 45 s, +1 under 90 s.
pub fn edit_cost(age_ns: i64) -> u32 {
    1 + by_age(age_ns, [6, 5, 4, 2, 1, 0])
}

/// A batch of `n` new orders: +n/2, rounded up.
pub fn batch_cost(n: u16) -> u32 {
    u32::from(n).div_ceil(2)
}

/// `ns` rounded up to whole milliseconds (a hold never ends early).
fn whole_ms(ns: i64) -> i64 {
    ns.saturating_add(MS - 1) / MS * MS
}

fn by_age(age_ns: i64, costs: [u32; 6]) -> u32 {
    const EDGES: [i64; 6] = [5 * SEC, 10 * SEC, 15 * SEC, 45 * SEC, 90 * SEC, 300 * SEC];
    // An age below zero (clocks) is the youngest order: the dearest cost.
    EDGES
        .iter()
        .zip(costs)
        .find(|(edge, _)| age_ns < **edge)
        .map_or(0, |(_, c)| c)
}

/// What a Kraken error string means.
fn error_verdict(e: &[u8]) -> Said {
    let is = |p: &[u8]| e.starts_with(p);
    if is(b"EOrder:Rate limit exceeded") {
        Said::TradingLimit
    } else if is(b"EAPI:Rate limit exceeded") {
        Said::ApiLimit
    } else if is(b"EGeneral:Temporary lockout") {
        Said::Lockout
    } else if is(b"EAPI:Invalid nonce") {
        Said::Verdict(Verdict::ClockSkew)
    } else if is(b"EService:") || is(b"EGeneral:Internal error") {
        Said::Busy
    } else {
        Said::Verdict(Verdict::Rejected)
    }
}

enum Said {
    TradingLimit,
    ApiLimit,
    Lockout,
    Busy,
    Verdict(Verdict),
}

/// The Kraken Spot adapter for one pair.
#[derive(Clone, Debug)]
pub struct KrakenSpot {
    clock: Clock,
    trading_interval_ns: i64,
    api_interval_ns: i64,
    trading_max: u64,
    api_max: u64,
    /// The IP gate.
    pub ip: BucketId,
    /// The pair's trading counter.
    pub trading: BucketId,
    /// The key's REST call counter.
    pub api: BucketId,
}

impl KrakenSpot {
    /// Declares `ip`, `trading` and `api`.
    pub fn new(builder: &mut Builder, clock: Clock, c: Config) -> Result<Self, Error> {
        let trading_interval_ns = interval_ns(c.trading_decay_milli_per_s)?;
        let api_interval_ns = interval_ns(c.api_decay_milli_per_s)?;
        Ok(KrakenSpot {
            clock,
            trading_interval_ns,
            api_interval_ns,
            trading_max: c.trading_max,
            api_max: c.api_max,
            ip: builder.add("ip", Spec::gate())?,
            trading: builder.add(
                "trading",
                Spec::token_every(trading_interval_ns, c.trading_max),
            )?,
            api: builder.add("api", Spec::token_every(api_interval_ns, c.api_max))?,
        })
    }

    /// The deadline of an order sent with `deadline` (RFC 3339, as UTC ms): the
    /// engine does not match it after that.
    pub fn deadline_ns(&self, deadline_ms: i64) -> i64 {
        self.clock.now_ns_at(deadline_ms)
    }

    fn trading_parts(&self, cost: u32) -> Parts {
        let mut p = Parts::new();
        p.push(Part::new(self.ip, 0));
        p.push(Part::new(self.trading, cost));
        p
    }

    /// A cancel of an order placed (or last amended) `age_ns` ago.
    pub fn cancel_parts(&self, age_ns: i64) -> Parts {
        self.trading_parts(cancel_cost(age_ns))
    }

    /// An amend (`AmendOrder`) of an order `age_ns` old.
    pub fn amend_parts(&self, age_ns: i64) -> Parts {
        self.trading_parts(amend_cost(age_ns))
    }

    /// A legacy edit (`EditOrder`) of an order `age_ns` old.
    pub fn edit_parts(&self, age_ns: i64) -> Parts {
        self.trading_parts(edit_cost(age_ns))
    }

    fn said(&self, said: Said, request: Request<'_>, budget: &mut Budget, now: i64) -> Verdict {
        match said {
            Said::TradingLimit => {
                // The venue's counter is at its threshold; ours may be lower (other
                // sessions on the pair, an age we misjudged): raise it to full, and
                // hold until one order's worth has decayed.
                budget
                    .observe_used(self.trading, self.trading_max, now)
                    .ok();
                adapt::hold(
                    budget,
                    self.trading,
                    Some(whole_ms(self.trading_interval_ns)),
                    now,
                )
            }
            Said::ApiLimit => {
                budget.observe_used(self.api, self.api_max, now).ok();
                adapt::hold(budget, self.api, Some(whole_ms(self.api_interval_ns)), now)
            }
            Said::Lockout => adapt::ban(budget, self.ip, now.saturating_add(LOCKOUT_NS), now),
            Said::Busy if request.is_write() => Verdict::Unknown,
            Said::Busy => Verdict::NotRun,
            Said::Verdict(v) => v,
        }
    }

    /// The first error of an `error` array, if any; `Err` if it is not an array of
    /// strings.
    fn first_error<'a>(v: &Value<'a>) -> Result<Option<Value<'a>>, ()> {
        match v.get("error") {
            Ok(Some(e)) if e.kind() == Kind::Array => {
                let mut items = e.items().map_err(|_| ())?;
                match items.next() {
                    Some(first) if first.kind() == Kind::String => Ok(Some(first)),
                    Some(_) => Err(()),
                    None => Ok(None),
                }
            }
            Ok(None) => Ok(None),
            _ => Err(()),
        }
    }

    fn batch(&self, v: Value<'_>, request: Request<'_>, budget: &mut Budget, now: i64) -> Verdict {
        let Ok(Some(Ok(orders))) = v.path("result.orders").map(|o| o.map(|o| o.items())) else {
            return Verdict::Unknown;
        };
        let mut batch = Batch::new();
        for o in orders {
            match o.get("error") {
                Ok(Some(e)) if e.kind() == Kind::String => {
                    let mut buf = [0u8; 64];
                    let said = match e.decode_str(&mut buf) {
                        Ok(s) => error_verdict(s.as_bytes()),
                        Err(_) => Said::Verdict(Verdict::Rejected),
                    };
                    batch.add(self.said(said, request, budget, now));
                }
                Ok(None) if o.get("txid").ok().flatten().is_some() => batch.add(Verdict::Done),
                _ => batch.add(Verdict::Unknown),
            }
        }
        batch.verdict().unwrap_or(Verdict::Unknown)
    }

    /// Reads a `QueryOrders` answer for an order looked up by its client id
    /// (`cl_ord_id`): `result` maps each txid to an order with a `status` of
    /// `pending`, `open`, `closed`, `canceled` or `expired`; an empty result, or
    /// `EOrder:Unknown order`, is an order the venue does not know.
    pub fn read_order(response: &Response<'_>) -> Result<Lookup, ReadError> {
        let v = json::parse(response.body).map_err(|_| ReadError::Body("JSON"))?;
        match Self::first_error(&v) {
            Ok(Some(e)) if e.str_starts_with("EOrder:Unknown order").unwrap_or(false) => {
                return Ok(Lookup::Absent)
            }
            Ok(Some(_)) => return Err(ReadError::NoAnswer(response.status)),
            Ok(None) => {}
            Err(()) => return Err(ReadError::Body("error")),
        }
        let result = v
            .get("result")
            .ok()
            .flatten()
            .ok_or(ReadError::Body("result"))?;
        let mut members = result.members().map_err(|_| ReadError::Body("result"))?;
        let Some((_, order)) = members.next() else {
            return Ok(Lookup::Absent);
        };
        let status = order
            .get("status")
            .ok()
            .flatten()
            .ok_or(ReadError::Body("status"))?;
        let is = |s| status.str_eq(s).unwrap_or(false);
        Ok(if is("pending") || is("open") {
            Lookup::Open
        } else if is("closed") {
            Lookup::Filled
        } else if is("canceled") || is("expired") {
            Lookup::Cancelled
        } else {
            return Err(ReadError::Body("status"));
        })
    }
}

impl Venue for KrakenSpot {
    fn parts(&self, request: Request<'_>) -> Result<Parts, Error> {
        Ok(match request {
            Request::Connect => {
                let mut p = Parts::new();
                p.push(Part::new(self.ip, 0));
                p
            }
            Request::Order => self.trading_parts(1),
            // Without the order's age, the youngest order's cost: never under the
            // venue's count. A caller who knows the age uses `cancel_parts`.
            Request::Cancel => self.cancel_parts(0),
            Request::CancelReplace => self.amend_parts(0),
            Request::Batch(n) => self.trading_parts(batch_cost(n)),
            Request::Read(w) => {
                let mut p = Parts::new();
                p.push(Part::new(self.ip, 0));
                p.push(Part::new(self.api, w));
                p
            }
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
        let first = body.as_ref().map(Self::first_error);
        let verdict = match (r.status, body, first) {
            // The body decides first, whatever the status.
            (_, Some(_), Some(Ok(Some(e)))) => {
                let mut buf = [0u8; 64];
                let said = match e.decode_str(&mut buf) {
                    Ok(s) => error_verdict(s.as_bytes()),
                    Err(_) => Said::Verdict(Verdict::Rejected),
                };
                self.said(said, request, budget, now)
            }
            (200..=299, Some(v), Some(Ok(None))) if v.get("result").ok().flatten().is_some() => {
                match request {
                    Request::Batch(_) => self.batch(v, request, budget, now),
                    _ => Verdict::Done,
                }
            }
            (429, ..) => adapt::hold(budget, self.ip, retry.wait_ns, now),
            (403, None, _) => waits::block(budget, self.ip, retry, now),
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

    /// The age table of docs.kraken.com/exchange/guides/general/ratelimits, row by
    /// row, at each edge.
    #[test]
    fn costs_by_age_follow_the_documented_table() {
        let s = |x: i64| x * SEC;
        let ages = [
            0,
            s(5) - 1,
            s(5),
            s(10) - 1,
            s(10),
            s(15),
            s(45) - 1,
            s(45),
            s(90),
            s(300) - 1,
            s(300),
            s(3600),
        ];
        let cancel = [8, 8, 6, 6, 5, 4, 4, 2, 1, 1, 0, 0];
        let amend = [4, 4, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1];
        let edit = [7, 7, 6, 6, 5, 3, 3, 2, 1, 1, 1, 1];
        for (i, age) in ages.into_iter().enumerate() {
            assert_eq!(cancel_cost(age), cancel[i], "cancel at {age}");
            assert_eq!(amend_cost(age), amend[i], "amend at {age}");
            assert_eq!(edit_cost(age), edit[i], "edit at {age}");
        }
        // A negative age (clock step) is the youngest order.
        assert_eq!(cancel_cost(-1), 8);
        assert_eq!((batch_cost(1), batch_cost(15)), (1, 8));
    }

    #[test]
    fn the_counter_decays_at_the_tier_rate() {
        let mut b = Budget::builder();
        let k = KrakenSpot::new(&mut b, Clock::anchor(0, 0), Config::PRO).unwrap();
        let mut budget = b.build(0).unwrap();
        // 180 of cancels of fresh orders: 22 of them (176), then the 23rd (8) fails.
        for _ in 0..22 {
            let t = budget
                .try_charge(&k.cancel_parts(0), ergon_core::Class::Normal, 0)
                .unwrap();
            budget.complete(t.sent(), 0).unwrap();
        }
        assert!(budget
            .try_charge(&k.cancel_parts(0), ergon_core::Class::Normal, 0)
            .is_err());
        // A 2-minute-old order costs 1 and fits.
        let t = budget
            .try_charge(&k.cancel_parts(120 * SEC), ergon_core::Class::Normal, 0)
            .unwrap();
        budget.complete(t.sent(), 0).unwrap();
        // 177 of 180: a fresh cancel (8) needs 5 units to decay, at 3.75 per second
        // 1.33 s.
        assert!(budget
            .try_charge(&k.cancel_parts(0), ergon_core::Class::Normal, 1_300 * MS)
            .is_err());
        assert!(budget
            .try_charge(&k.cancel_parts(0), ergon_core::Class::Normal, 1_400 * MS)
            .is_ok());
    }

    #[test]
    fn a_zero_decay_is_refused() {
        let mut b = Budget::builder();
        let c = Config {
            trading_decay_milli_per_s: 0,
            ..Config::default()
        };
        assert_eq!(
            KrakenSpot::new(&mut b, Clock::anchor(0, 0), c).unwrap_err(),
            Error::BadField("decay")
        );
    }
}
