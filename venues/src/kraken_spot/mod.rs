//! Kraken Spot REST: errors come as HTTP 200 with an `error` array of strings
//! (`EOrder:Rate limit exceeded`, `EAPI:Rate limit exceeded`, `EGeneral:Temporary
//! lockout`, `EAPI:Invalid nonce`, `EService:Busy` ...), checked before the status.
//!
//! What each string says (the `error_verdict` table):
//! - `EOrder:Rate limit exceeded`: the pair's trading counter (held, raised to full);
//!   `EAPI:Rate limit exceeded`: the key's call counter (held, raised to full);
//! - `EService: Throttled: <UNIX timestamp>` ("too many concurrent requests. Try
//!   again after \[timestamp\]", the REST rate-limit page): not processed. It is a
//!   limit of concurrent requests, not a counter: the IP gate (every request
//!   charges it) is held until that second (plus the hold guard), no counter is
//!   touched. Without a readable timestamp it is held one window;
//! - a string of severity `W` (a warning: "`<severity><category>:<message>`,
//!   severity E for an error or W for a warning") is not an error: next to a
//!   `result` the request was processed (`Done`; a batch item with a `txid` too);
//! - `EGeneral:Too many requests`: the public endpoints' throttle, per IP (public
//!   calls answer it with HTTP 200): the `public` gate is held [`PUBLIC_HOLD_NS`];
//! - `EService:Deadline elapsed` ("the request timed out according to the default or
//!   specified deadline"; AddOrder's `deadline` is when "the matching engine should
//!   reject the new order request"): not run, so `NotRun`;
//! - `EService:Market in cancel_only mode`, `... post_only mode`, `... limit_only
//!   mode` ("Request can't be made at this time (See SystemStatus endpoint)"; the
//!   trading-modes article: new orders "cannot be placed", market orders "will be
//!   rejected"): refused by the market's mode, which lasts minutes, past any
//!   re-send deadline, so `Rejected` (surely not run, and final);
//! - `EGeneral:Temporary lockout`: a ban of the IP gate; `EAPI:Invalid nonce`:
//!   clock skew;
//! - any other `EService:` string (`Busy`, `Unavailable`) and `EGeneral:Internal
//!   error`: a write may have run (`Unknown`), a read did not (`NotRun`);
//! - anything else (`EOrder:Insufficient funds`, `EGeneral:Invalid arguments` ...):
//!   `Rejected`.
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
//!   history; AddOrder and CancelOrder do not count on it;
//! - the public endpoints, per IP (and per pair for Trades and OHLC), on neither
//!   counter: "calling the public endpoints at a frequency of 1 per second (or
//!   less) would remain within the rate limits". No count is published, so public
//!   reads (`Request::Read(0)`) charge the `public` gate, which only carries holds.
//!
//! Kraken sends no usage headers: the counts are ours alone.
//!
//! Sources (checked 2026-11-30):
//! <https://docs.kraken.com/exchange/guides/general/ratelimits> (trading counter:
//! thresholds, decay, the age table), <https://docs.kraken.com/exchange/guides/rest/ratelimits>
//! (call counter; `EService: Throttled: [UNIX timestamp]`),
//! <https://docs.kraken.com/exchange/guides/general/errors> (errors),
//! <https://docs.kraken.com/api/docs/guides/spot-errors> (the `EService:` strings:
//! `Unavailable`, `Market in cancel_only mode`, `Market in post_only mode`,
//! `Deadline elapsed`), <https://docs.kraken.com/api/docs/rest-api/add-order>
//! (`deadline`), <https://support.kraken.com/articles/360045239571-trading-rate-limits>
//! (the same thresholds and decay rates per tier),
//! <https://support.kraken.com/articles/206548367-what-are-the-api-rate-limits->
//! (public endpoints: per IP, 1 a second stays within, "restricted for a few
//! seconds" past it), <https://support.kraken.com/hc/en-us/articles/360055614211-What-are-the-possible-trading-modes->
//! (cancel only, post only, limit only).
//!
//! One adapter trades one pair. Reading an answer never allocates.

use arrayvec::ArrayVec;

use crate::adapt::{self, Batch, Clock, Error, Parts, Request, Venue, MAX_ITEMS};
use crate::endpoint::{
    self, Amend, ApiKey, ClientIds, ClientOrderId, Endpoints, IdFormat, Lookup, Method, NewOrder,
    OrderInfo, OrderRef, OrderState, OrderType, Placed, Prepared, Side, Symbol, TimeInForce,
    Writer,
};
use crate::json::{self, Kind, Value};
use crate::response::Response;
use crate::sign::{self, Secret};
use crate::waits;
use ergon_core::{BucketId, Budget, Builder, Part, Spec, Verdict};

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;

/// `EGeneral:Temporary lockout`: "wait for the lockout to expire (typically a few
/// minutes)"; read as 15 minutes, the figure of Kraken's older call-limit article.
/// The halt lasts until a person clears it either way.
pub const LOCKOUT_NS: i64 = 900 * SEC;

/// `EGeneral:Too many requests` on a public endpoint: "additional calls would be
/// restricted for a few seconds"; read as 5 s (no figure is published). Held on
/// the `public` gate like a server wait, so the hold guard is added.
pub const PUBLIC_HOLD_NS: i64 = 5 * SEC;

/// Bytes of an error string read: every documented string fits; a longer one is
/// read by its first bytes (its prefix decides), never refused as unreadable.
const ERROR_BYTES: usize = 96;

/// How long ergon re-sends a Kraken Spot request that surely did not run: Kraken
/// has no acceptance window unless the key sets a nonce window, so this is
/// ergon's, not the venue's.
pub const DEADLINE_NS: i64 = 5 * SEC;

/// The margin taken off an order's age before its cancel or amend cost is read
/// from the table: the age runs from when the adapter prepared the order, the
/// venue's from when its engine took it, up to one network trip later. A margin
/// of 1 s charges the dearer cost near each edge.
pub const AGE_MARGIN_NS: i64 = SEC;

/// The dead man's switch's reserved pace: one `CancelAllOrdersAfter` every 15 s,
/// the faster end of the documented 15 to 30 s with a 60 s timeout (a disarm
/// right after a refresh waits up to this long).
pub const SWITCH_EVERY_NS: i64 = 15 * SEC;

/// The call counter's decay reserved for the switch, thousandths per second: one
/// call per [`SWITCH_EVERY_NS`] is 66.7, rounded up so that the strategies' share
/// and the switch's together never decay faster than the venue's counter.
pub const SWITCH_DECAY_MILLI_PER_S: u64 = 67;

/// Orders whose age the adapter keeps; past this, the oldest is forgotten (its
/// cancel then costs the youngest order's 8: never under the venue's count).
pub const MAX_AGES: usize = 256;

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

/// What a Kraken error string means; `cut` says that only its first bytes were
/// read (a timestamp then is not trusted).
fn error_verdict(e: &[u8], cut: bool) -> Said {
    let is = |p: &[u8]| e.starts_with(p);
    if is(b"EOrder:Rate limit exceeded") {
        Said::TradingLimit
    } else if is(b"EAPI:Rate limit exceeded") {
        Said::ApiLimit
    } else if is(b"EGeneral:Temporary lockout") {
        Said::Lockout
    } else if is(b"EGeneral:Too many requests") {
        Said::PublicLimit
    } else if is(b"EAPI:Invalid nonce") {
        Said::Verdict(Verdict::ClockSkew)
    } else if let Some(rest) = service(e) {
        let word = |w: &[u8]| rest.starts_with(w);
        if word(b"Throttled") {
            Said::Throttled(if cut {
                None
            } else {
                throttled_until_s(&rest[b"Throttled".len()..])
            })
        } else if word(b"Deadline elapsed") {
            Said::Verdict(Verdict::NotRun)
        } else if word(b"Market in ") {
            Said::Verdict(Verdict::Rejected)
        } else {
            Said::Busy
        }
    } else if is(b"EGeneral:Internal error") {
        Said::Busy
    } else {
        Said::Verdict(Verdict::Rejected)
    }
}

/// What follows `EService:` (and the spaces Kraken may put after the colon, as in
/// `EService: Throttled: 1700000005`).
fn service(e: &[u8]) -> Option<&[u8]> {
    let rest = e.strip_prefix(b"EService:")?;
    let spaces = rest.iter().take_while(|c| **c == b' ').count();
    Some(&rest[spaces..])
}

/// The UNIX second after `Throttled` (`: 1700000005`, spaces optional; a fraction
/// rounds up): `None` if there is none or anything else follows it.
fn throttled_until_s(rest: &[u8]) -> Option<i64> {
    let rest = rest.trim_ascii_start().strip_prefix(b":")?.trim_ascii();
    let (whole, frac) = match rest.iter().position(|c| *c == b'.') {
        Some(dot) => (&rest[..dot], &rest[dot + 1..]),
        None => (rest, &[][..]),
    };
    if whole.is_empty() || whole.len() > 12 || !whole.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let secs = whole.iter().fold(0i64, |n, c| n * 10 + i64::from(c - b'0'));
    Some(secs + i64::from(frac.iter().any(|c| *c != b'0')))
}

/// The first [`ERROR_BYTES`] of an error string and whether it was longer; `None`
/// if it is not a string.
fn error_text<'b>(e: &Value<'_>, buf: &'b mut [u8; ERROR_BYTES]) -> Option<(&'b [u8], bool)> {
    let mut n = 0;
    for c in e.str_bytes().ok()? {
        let Some(slot) = buf.get_mut(n) else {
            return Some((&buf[..], true));
        };
        *slot = c;
        n += 1;
    }
    Some((&buf[..n], false))
}

/// Whether the string `e` is a warning (severity `W`), not an error: the request
/// it answers was processed.
fn is_warning(e: &Value<'_>) -> bool {
    e.str_starts_with("W").unwrap_or(false)
}

/// What the error string `e` says; a value that is not a string is a refusal.
fn said_of(e: &Value<'_>) -> Said {
    let mut buf = [0u8; ERROR_BYTES];
    match error_text(e, &mut buf) {
        Some((text, cut)) => error_verdict(text, cut),
        None => Said::Verdict(Verdict::Rejected),
    }
}

enum Said {
    TradingLimit,
    ApiLimit,
    Lockout,
    /// The public endpoints' per-IP throttle.
    PublicLimit,
    /// `EService: Throttled`, with the UNIX second to wait until if readable.
    Throttled(Option<i64>),
    Busy,
    Verdict(Verdict),
}

/// The Kraken Spot adapter for one pair.
#[derive(Clone, Debug)]
pub struct KrakenSpot {
    clock: Clock,
    trading_interval_ns: i64,
    /// The venue's call counter's decay and maximum (the switch's share
    /// included): what `EAPI:Rate limit exceeded` says is full.
    api_interval_ns: i64,
    trading_max: u64,
    api_max: u64,
    /// The IP gate.
    pub ip: BucketId,
    /// The pair's trading counter.
    pub trading: BucketId,
    /// The key's REST call counter, less the switch's share.
    pub api: BucketId,
    /// The dead man's switch's share of the call counter: one unit, refilled
    /// every [`SWITCH_EVERY_NS`] (see [`crate::switch`]).
    pub switch: BucketId,
    /// The IP's public endpoints: a gate (Kraken publishes no count), held by
    /// `EGeneral:Too many requests`.
    pub public: BucketId,
    auth: Option<(ApiKey, Secret)>,
    last_nonce: i64,
    /// When each order the adapter prepared was placed or last amended.
    ages: ArrayVec<(ClientOrderId, i64), MAX_AGES>,
    /// The item verdicts of the last batch answer.
    items: ArrayVec<Verdict, MAX_ITEMS>,
}

impl KrakenSpot {
    /// Declares `ip`, `trading`, `api`, `public` and `switch`. The switch's call
    /// (`CancelAllOrdersAfter`, +1 on the call counter like every private call but
    /// AddOrder and CancelOrder) is carved out of the call counter: `api` is
    /// declared one unit smaller and [`SWITCH_DECAY_MILLI_PER_S`] slower than the
    /// tier's, and `switch` holds that unit, so no strategy class can take it.
    pub fn new(builder: &mut Builder, clock: Clock, c: Config) -> Result<Self, Error> {
        let trading_interval_ns = interval_ns(c.trading_decay_milli_per_s)?;
        let api_interval_ns = interval_ns(c.api_decay_milli_per_s)?;
        // The tier must leave the strategies something once the switch's share is
        // taken (every documented tier does: 15 and 0.33/s at the least).
        if c.api_max < 2 || c.api_decay_milli_per_s <= SWITCH_DECAY_MILLI_PER_S {
            return Err(Error::BadField(
                "api counter (too small for the switch's share)",
            ));
        }
        let api_share_ns = interval_ns(c.api_decay_milli_per_s - SWITCH_DECAY_MILLI_PER_S)?;
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
            api: builder.add("api", Spec::token_every(api_share_ns, c.api_max - 1))?,
            switch: builder.add("switch", Spec::token_every(SWITCH_EVERY_NS, 1))?,
            public: builder.add("public", Spec::gate())?,
            auth: None,
            last_nonce: 0,
            ages: ArrayVec::new(),
            items: ArrayVec::new(),
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
            Said::PublicLimit => adapt::hold(budget, self.public, Some(PUBLIC_HOLD_NS), now),
            // A limit of concurrent requests ("too many concurrent requests"),
            // not of a counter: no counter is full, and every private call of
            // the key is refused until then. Held: the IP gate, the one scope
            // every request of the adapter charges, until that second.
            Said::Throttled(until_s) => {
                let wait = until_s.map(|s| {
                    self.clock
                        .now_ns_at(s.saturating_mul(1000))
                        .saturating_sub(now)
                });
                adapt::hold(budget, self.ip, wait, now)
            }
            Said::Busy if request.is_write() => Verdict::Unknown,
            Said::Busy => Verdict::NotRun,
            Said::Verdict(v) => v,
        }
    }

    /// The first error of an `error` array, if any; `Err` if it is not an array of
    /// strings.
    ///
    /// A warning (severity `W`: "`<severity><category>:<message>`, severity E for
    /// an error or W for a warning"; "result and error for successful requests or
    /// those with warnings") is not an error: an array of warnings alone is none.
    fn first_error<'a>(v: &Value<'a>) -> Result<Option<Value<'a>>, ()> {
        match v.get("error") {
            Ok(Some(e)) if e.kind() == Kind::Array => {
                for item in e.items().map_err(|_| ())? {
                    if item.kind() != Kind::String {
                        return Err(());
                    }
                    if !is_warning(&item) {
                        return Ok(Some(item));
                    }
                }
                Ok(None)
            }
            Ok(None) => Ok(None),
            _ => Err(()),
        }
    }

    fn batch(&self, v: Value<'_>, request: Request<'_>, budget: &mut Budget, now: i64) -> Batch {
        let Ok(Some(Ok(orders))) = v.path("result.orders").map(|o| o.map(|o| o.items())) else {
            return Batch::new();
        };
        let mut batch = Batch::new();
        for o in orders {
            match o.get("error") {
                Ok(Some(e)) if e.kind() == Kind::String && !is_warning(&e) => {
                    batch.add(self.said(said_of(&e), request, budget, now));
                }
                // Placed with a warning.
                Ok(Some(e))
                    if e.kind() == Kind::String && o.get("txid").ok().flatten().is_some() =>
                {
                    batch.add(Verdict::Done)
                }
                Ok(None) if o.get("txid").ok().flatten().is_some() => batch.add(Verdict::Done),
                _ => batch.add(Verdict::Unknown),
            }
        }
        batch
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
            // Public endpoints count on no counter: they draw on the `public` gate.
            Request::Read(0) => {
                let mut p = Parts::new();
                p.push(Part::new(self.ip, 0));
                p.push(Part::new(self.public, 0));
                p
            }
            Request::Read(w) => {
                let mut p = Parts::new();
                p.push(Part::new(self.ip, 0));
                p.push(Part::new(self.api, w));
                p
            }
            Request::Info(_) => return Err(Error::Unsupported),
        })
    }

    fn batch_items(&self) -> &[Verdict] {
        &self.items
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
        let body = json::parse(r.body).ok();
        let first = body.as_ref().map(Self::first_error);
        let verdict = match (r.status, body, first) {
            // The body decides first, whatever the status.
            (_, Some(_), Some(Ok(Some(e)))) => self.said(said_of(&e), request, budget, now),
            (200..=299, Some(v), Some(Ok(None))) if v.get("result").ok().flatten().is_some() => {
                match request {
                    Request::Batch(_) => {
                        let batch = self.batch(v, request, budget, now);
                        let verdict = batch.verdict().unwrap_or(Verdict::Unknown);
                        self.items = batch.into_items();
                        verdict
                    }
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

impl KrakenSpot {
    /// Signs private requests with `api_key` (`API-Key`) and its base64 `secret`.
    pub fn with_auth(mut self, api_key: &str, secret_b64: &str) -> Result<Self, Error> {
        self.auth = Some((ApiKey::new(api_key)?, Secret::from_base64(secret_b64)?));
        Ok(self)
    }

    /// A nonce above every one sent: the venue's UTC in microseconds, or one more
    /// than the last.
    fn nonce(&mut self, now: i64) -> i64 {
        let n = self
            .clock
            .utc_ms(now)
            .saturating_mul(1000)
            .max(self.last_nonce.saturating_add(1));
        self.last_nonce = n;
        n
    }

    /// The age of an order the adapter placed, as the cost table reads it (less
    /// [`AGE_MARGIN_NS`]); 0, the dearest, for an order it does not know.
    pub fn age_ns(&self, id: &ClientOrderId, now: i64) -> i64 {
        self.ages
            .iter()
            .find(|(i, _)| i == id)
            .map_or(0, |(_, at)| {
                now.saturating_sub(*at).saturating_sub(AGE_MARGIN_NS)
            })
    }

    /// Notes that `id` was placed or amended at `now`.
    fn aged(&mut self, id: ClientOrderId, now: i64) {
        if let Some(e) = self.ages.iter_mut().find(|(i, _)| *i == id) {
            e.1 = now;
            return;
        }
        if self.ages.is_full() {
            let oldest = self
                .ages
                .iter()
                .enumerate()
                .min_by_key(|(_, (_, at))| *at)
                .map_or(0, |(i, _)| i);
            self.ages.swap_remove(oldest);
        }
        self.ages.push((id, now));
    }

    /// A private POST to `path` with a form body: `nonce=` first, then what `body`
    /// writes, signed. Returns the deadline.
    fn private(
        &mut self,
        w: &mut Writer<'_>,
        path: &'static str,
        now: i64,
        body: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>,
    ) -> Result<i64, Error> {
        if self.auth.is_none() {
            return Err(Error::NoKey);
        }
        let nonce = self.nonce(now);
        w.open();
        w.s(path);
        w.close_target();
        w.open();
        let body_at = w.pos();
        w.s("nonce=");
        let nonce_at = w.pos();
        w.int(nonce);
        let nonce_end = w.pos();
        body(w)?;
        w.close_body();
        let body_span = body_at..w.pos();
        let Some((api_key, secret)) = &self.auth else {
            return Err(Error::NoKey);
        };
        let mac = sign::kraken_spot(
            secret,
            path.as_bytes(),
            w.bytes(nonce_at..nonce_end),
            w.bytes(body_span),
        );
        w.header("API-Key", api_key.as_str().as_bytes())?;
        w.open();
        w.base64(&mac);
        w.close_header("API-Sign")?;
        w.header("Content-Type", b"application/x-www-form-urlencoded")?;
        Ok(now.saturating_add(DEADLINE_NS))
    }
}

/// `&name=value` of a form body (values are checked arguments).
fn form(w: &mut Writer<'_>, name: &str, value: &str) {
    w.s("&");
    w.s(name);
    w.s("=");
    w.s(value);
}

/// The fields of a new order in a form body.
fn order_form(w: &mut Writer<'_>, o: &NewOrder<'_>) -> Result<(), Error> {
    let (ordertype, extra) = match o.order_type {
        OrderType::Limit(TimeInForce::Gtc) => ("limit", None),
        OrderType::Limit(TimeInForce::Ioc) => ("limit", Some(("timeinforce", "IOC"))),
        OrderType::Limit(TimeInForce::Fok) => {
            return Err(Error::BadArgument("FOK (Kraken Spot has GTC, IOC, GTD)"))
        }
        OrderType::PostOnly => ("limit", Some(("oflags", "post"))),
        OrderType::Market => ("market", None),
    };
    form(w, "ordertype", ordertype);
    form(w, "type", side(o.side));
    form(w, "volume", o.quantity.as_str());
    form(w, "pair", o.symbol.as_str());
    match (o.order_type, o.price) {
        (OrderType::Market, None) => {}
        (OrderType::Market, Some(_)) => return Err(Error::BadArgument("price of a market order")),
        (_, Some(p)) => form(w, "price", p.as_str()),
        (_, None) => return Err(Error::BadArgument("price of a limit order")),
    }
    if let Some((k, v)) = extra {
        form(w, k, v);
    }
    if o.reduce_only {
        form(w, "reduce_only", "true");
    }
    form(w, "cl_ord_id", o.client_order_id.as_str());
    w.id(o.client_order_id)
}

fn side(s: Side) -> &'static str {
    match s {
        Side::Buy => "buy",
        Side::Sell => "sell",
    }
}

/// An order object of `QueryOrders` (`status`, `vol_exec`) under its txid.
fn order_info(txid: &str, o: Value<'_>) -> Option<OrderInfo> {
    let status = o.get("status").ok().flatten()?;
    let is = |s| status.str_eq(s).unwrap_or(false);
    let state = if is("pending") {
        OrderState::Pending
    } else if is("open") {
        OrderState::New
    } else if is("closed") {
        OrderState::Filled
    } else if is("canceled") {
        OrderState::Canceled
    } else if is("expired") {
        OrderState::Expired
    } else {
        OrderState::Other
    };
    Some(OrderInfo {
        state,
        venue_order_id: arrayvec::ArrayString::from(txid).ok()?,
        filled: o
            .get("vol_exec")
            .ok()
            .flatten()
            .and_then(endpoint::json_text),
    })
}

/// Whether a Kraken error string says the request surely did not run: all but
/// the ones a write may have run after (`EService:Busy`, `Unavailable`, internal
/// errors).
fn refused(e: &Value<'_>) -> bool {
    !matches!(said_of(e), Said::Busy)
}

impl ClientIds for KrakenSpot {
    /// `cl_ord_id`: a long UUID (8-4-4-4-12), a short UUID (32 hex digits) or
    /// free text of at most 18 characters, unique among open orders
    /// (<https://docs.kraken.com/api/docs/guides/spot-clordid>): the short UUID.
    const ID_FORMAT: IdFormat = IdFormat::Hex;
}

impl Endpoints for KrakenSpot {
    /// `POST /0/private/AddOrder`: +1 on the pair's counter; the order's age starts.
    fn new_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &NewOrder<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let deadline = self.private(&mut w, "/0/private/AddOrder", now, |w| order_form(w, o))?;
        self.aged(o.client_order_id, now);
        w.finish(self, Request::Order, Method::Post, deadline)
    }

    /// `POST /0/private/CancelOrder` by `cl_ord_id`: the cost of the order's age.
    fn cancel<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let deadline = self.private(&mut w, "/0/private/CancelOrder", now, |w| {
            form(w, "cl_ord_id", o.client_order_id.as_str());
            w.id(o.client_order_id)
        })?;
        let parts = self.cancel_parts(self.age_ns(&o.client_order_id, now));
        w.finish_with(parts, Request::Cancel, Method::Post, deadline)
    }

    /// `POST /0/private/AmendOrder` by `cl_ord_id` (`order_qty`, `limit_price`):
    /// the cost of the order's age, which then starts again.
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
        let id = a.order.client_order_id;
        let deadline = self.private(&mut w, "/0/private/AmendOrder", now, |w| {
            form(w, "cl_ord_id", id.as_str());
            if let Some(q) = a.quantity {
                form(w, "order_qty", q.as_str());
            }
            if let Some(p) = a.price {
                form(w, "limit_price", p.as_str());
            }
            w.id(id)
        })?;
        let parts = self.amend_parts(self.age_ns(&id, now));
        self.aged(id, now);
        w.finish_with(parts, Request::CancelReplace, Method::Post, deadline)
    }

    /// `POST /0/private/QueryOrders` by `cl_ord_id`: +1 on the call counter.
    fn query_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let deadline = self.private(&mut w, "/0/private/QueryOrders", now, |w| {
            form(w, "cl_ord_id", o.client_order_id.as_str());
            w.id(o.client_order_id)
        })?;
        w.finish(self, Request::Read(1), Method::Post, deadline)
    }

    /// `POST /0/private/OpenOrders` (every pair: the endpoint has no pair filter):
    /// +1 on the call counter.
    fn open_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Option<Symbol<'_>>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        let deadline = self.private(&mut w, "/0/private/OpenOrders", now, |_| Ok(()))?;
        w.finish(self, Request::Read(1), Method::Post, deadline)
    }

    /// `GET /0/public/Depth?pair=..&count=..` (1 to 500): public, on no counter.
    fn book<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        depth: u32,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        if !(1..=500).contains(&depth) {
            return Err(Error::BadArgument("depth (1..=500)"));
        }
        w.open();
        w.s("/0/public/Depth?pair=");
        w.s(symbol.as_str());
        w.s("&count=");
        w.int(i64::from(depth));
        w.close_target();
        w.finish(
            self,
            Request::Read(0),
            Method::Get,
            now.saturating_add(DEADLINE_NS),
        )
    }

    /// `POST /0/private/Balance`: +1 on the call counter.
    fn account<'p>(&mut self, out: &'p mut Prepared, now: i64) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        let deadline = self.private(&mut w, "/0/private/Balance", now, |_| Ok(()))?;
        w.finish(self, Request::Read(1), Method::Post, deadline)
    }

    /// `POST /0/private/AddOrderBatch`: 2 to 15 orders of one pair, JSON body;
    /// +n/2 on the pair's counter.
    fn batch_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        orders: &[NewOrder<'_>],
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(orders.first().map(|o| o.symbol));
        let (Some(first), 2..=15) = (orders.first(), orders.len()) else {
            return Err(Error::BadArgument("a batch holds 2 to 15 orders"));
        };
        if orders.iter().any(|o| o.symbol != first.symbol) {
            return Err(Error::BadArgument("a batch's orders share one pair"));
        }
        let Some((api_key, secret)) = self.auth.clone() else {
            return Err(Error::NoKey);
        };
        let nonce = self.nonce(now);
        let path = "/0/private/AddOrderBatch";
        w.open();
        w.s(path);
        w.close_target();
        w.open();
        let body_at = w.pos();
        w.s("{\"nonce\":");
        let nonce_at = w.pos();
        w.int(nonce);
        let nonce_end = w.pos();
        w.s(",\"pair\":\"");
        w.s(first.symbol.as_str());
        w.s("\",\"orders\":[");
        for (i, o) in orders.iter().enumerate() {
            if i > 0 {
                w.s(",");
            }
            w.s("{");
            let mut f = true;
            let ordertype = match o.order_type {
                OrderType::Limit(TimeInForce::Gtc) | OrderType::PostOnly => "limit",
                OrderType::Limit(TimeInForce::Ioc) => {
                    w.json(&mut f, "timeinforce", "IOC");
                    "limit"
                }
                OrderType::Limit(TimeInForce::Fok) => {
                    return Err(Error::BadArgument("FOK (Kraken Spot has GTC, IOC, GTD)"))
                }
                OrderType::Market => "market",
            };
            if o.order_type == OrderType::PostOnly {
                w.json(&mut f, "oflags", "post");
            }
            w.json(&mut f, "ordertype", ordertype);
            w.json(&mut f, "type", side(o.side));
            w.json(&mut f, "volume", o.quantity.as_str());
            match (o.order_type, o.price) {
                (OrderType::Market, None) => {}
                (OrderType::Market, Some(_)) => {
                    return Err(Error::BadArgument("price of a market order"))
                }
                (_, Some(p)) => w.json(&mut f, "price", p.as_str()),
                (_, None) => return Err(Error::BadArgument("price of a limit order")),
            }
            w.json(&mut f, "cl_ord_id", o.client_order_id.as_str());
            w.s("}");
            w.id(o.client_order_id)?;
        }
        w.s("]}");
        w.close_body();
        let mac = sign::kraken_spot(
            &secret,
            path.as_bytes(),
            w.bytes(nonce_at..nonce_end),
            w.bytes(body_at..w.pos()),
        );
        w.header("API-Key", api_key.as_str().as_bytes())?;
        w.open();
        w.base64(&mac);
        w.close_header("API-Sign")?;
        w.header("Content-Type", b"application/json")?;
        for o in orders {
            self.aged(o.client_order_id, now);
        }
        let n = u16::try_from(orders.len()).unwrap_or(u16::MAX);
        w.finish(
            self,
            Request::Batch(n),
            Method::Post,
            now.saturating_add(DEADLINE_NS),
        )
    }

    /// `QueryOrders`: the order under its txid; an empty result or `EOrder:Unknown
    /// order` is no such order; any other error, unknown.
    fn read_order(&self, r: &Response<'_>) -> Lookup {
        let Ok(v) = json::parse(r.body) else {
            return Lookup::Unknown;
        };
        match Self::first_error(&v) {
            Ok(Some(e)) if e.str_starts_with("EOrder:Unknown order").unwrap_or(false) => {
                return Lookup::NotFound
            }
            Ok(None) => {}
            _ => return Lookup::Unknown,
        }
        let Some(Ok(mut members)) = v.get("result").ok().flatten().map(|r| r.members()) else {
            return Lookup::Unknown;
        };
        let Some((txid, order)) = members.next() else {
            return Lookup::NotFound;
        };
        let mut buf = [0u8; 64];
        match txid
            .decode_str(&mut buf)
            .ok()
            .and_then(|t| order_info(t, order))
        {
            Some(info) => Lookup::Found(info),
            None => Lookup::Unknown,
        }
    }

    /// `AddOrder`: `result.txid[0]`; an error that says it did not run is Refused
    /// (rate limits, throttles, lockout, an elapsed deadline, a market mode that
    /// refuses it, invalid arguments, funds); other `EService:*` strings (`Busy`,
    /// `Unavailable`) and internal errors are Unknown.
    fn read_placed(&self, r: &Response<'_>) -> Placed {
        let Ok(v) = json::parse(r.body) else {
            return Placed::Unknown;
        };
        match Self::first_error(&v) {
            Ok(Some(e)) if refused(&e) => return Placed::Refused,
            Ok(Some(_)) => return Placed::Unknown,
            Ok(None) => {}
            Err(()) => return Placed::Unknown,
        }
        match v
            .path("result.txid")
            .ok()
            .flatten()
            .and_then(|t| t.at(0).ok().flatten())
            .and_then(endpoint::json_text)
        {
            Some(id) => Placed::Accepted(OrderInfo {
                state: OrderState::Pending,
                venue_order_id: id,
                filled: None,
            }),
            None => Placed::Unknown,
        }
    }
}

/// `POST /0/private/CancelAllOrdersAfter` (the spot REST dead man's switch):
/// `timeout` in seconds starts a countdown that cancels *all* the account's
/// orders when it runs out; a new call pushes it back; `timeout=0` disarms it;
/// once fired it stays off until the next non-zero timeout. The answer's
/// `result.currentTime` and `result.triggerTime` are RFC 3339 (`triggerTime` is
/// `"0"` when disarmed, as the WebSocket v1 page shows). The venue recommends a
/// call every 15 to 30 s with a 60 s timeout, and disarming before the trading
/// engine's scheduled maintenance (an armed timer cancels everything when the
/// engine comes back). It is a private call like any other: +1 on the REST call
/// counter (only AddOrder and CancelOrder are on the trading counter), which the
/// adapter carves the switch's share out of (see [`KrakenSpot::new`]): one call
/// every [`SWITCH_EVERY_NS`], so the shortest timeout taken is 60 s (refreshed
/// every quarter of it). The longest is 86,399 s: the WebSocket v2 page says
/// "less than 86400 seconds"; the REST page states no bound.
///
/// Sources (checked 2026-12-01):
/// <https://docs.kraken.com/api-reference/trading/cancel-all-orders-after-x>,
/// <https://docs.kraken.com/api/docs/websocket-v1/cancelallordersafter> (the
/// disarmed answer), <https://docs.kraken.com/api/docs/websocket-v2/cancel_after>
/// (the range), <https://docs.kraken.com/exchange/guides/rest/ratelimits> (the
/// call counter), <https://support.kraken.com/hc/en-us/articles/360001491786-API-error-messages>
/// (`EGeneral:Invalid arguments`, `EGeneral:Permission denied`, `EAPI:Invalid key`).
impl crate::switch::Switch for KrakenSpot {
    fn switch_spec(&self) -> crate::switch::SwitchSpec {
        crate::switch::SwitchSpec {
            min_timeout_ms: 60_000,
            max_timeout_ms: 86_399_000,
            default_timeout_ms: 60_000,
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
            return Err(Error::BadArgument("timeout (60..=86399 s, whole seconds)"));
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
        use crate::switch::{Refusal, SwitchAnswer};
        let Ok(v) = json::parse(answer.body) else {
            return SwitchAnswer::Unknown;
        };
        match Self::first_error(&v) {
            // The body decides first, whatever the status.
            Ok(Some(e)) => {
                let mut buf = [0u8; ERROR_BYTES];
                let Some((text, cut)) = error_text(&e, &mut buf) else {
                    return SwitchAnswer::Unknown;
                };
                let is = |p: &[u8]| text.starts_with(p);
                if is(b"EGeneral:Invalid arguments") {
                    SwitchAnswer::Refused(Refusal::Timeout)
                } else if is(b"EGeneral:Permission denied")
                    || is(b"EAPI:Invalid key")
                    || is(b"EAPI:Feature disabled")
                {
                    SwitchAnswer::Refused(Refusal::NotAllowed)
                } else {
                    match error_verdict(text, cut) {
                        // Throttles, lockouts, a busy engine, the nonce: the
                        // answer says nothing about the switch.
                        Said::Verdict(Verdict::Rejected) => SwitchAnswer::Refused(Refusal::Other),
                        _ => SwitchAnswer::Unknown,
                    }
                }
            }
            Ok(None) if (200..=299).contains(&answer.status) => {
                crate::switch::rfc3339_trigger(v.path("result.triggerTime").ok().flatten())
            }
            _ => SwitchAnswer::Unknown,
        }
    }

    fn switch_guards(&self) -> ArrayVec<BucketId, { crate::switch::MAX_GUARDS }> {
        // The venue counts the call on the key's call counter: a hold there (the
        // venue said it is full) stops the refresh too.
        let mut g = ArrayVec::new();
        g.push(self.ip);
        g.push(self.api);
        g
    }
}

impl KrakenSpot {
    fn cancel_all_after<'p>(
        &mut self,
        mut w: Writer<'p>,
        seconds: u32,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let deadline = self.private(&mut w, "/0/private/CancelAllOrdersAfter", now, |w| {
            w.s("&timeout=");
            w.int(i64::from(seconds));
            Ok(())
        })?;
        let mut parts = Parts::new();
        parts.push(Part::new(self.ip, 0));
        parts.push(Part::new(self.switch, 1));
        // A private read's kind: a throttle of it holds the call counter.
        w.finish_with(parts, Request::Read(1), Method::Post, deadline)
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

    /// `EService: Throttled: <UNIX s>` as the REST rate-limit page writes it, and
    /// the variants a reader may meet: no space, a fraction (rounded up), nothing
    /// readable (`None`: held one window, still not run).
    #[test]
    fn the_throttle_timestamp_is_read_or_refused() {
        let until = |e: &[u8]| match error_verdict(e, false) {
            Said::Throttled(t) => Some(t),
            _ => None,
        };
        assert_eq!(
            until(b"EService: Throttled: 1700000003"),
            Some(Some(1_700_000_003))
        );
        assert_eq!(
            until(b"EService:Throttled:1700000003"),
            Some(Some(1_700_000_003))
        );
        assert_eq!(
            until(b"EService:Throttled: 1700000003.25"),
            Some(Some(1_700_000_004))
        );
        assert_eq!(
            until(b"EService:Throttled: 1700000003.00"),
            Some(Some(1_700_000_003))
        );
        for bad in [
            &b"EService: Throttled"[..],
            b"EService: Throttled:",
            b"EService: Throttled: soon",
            b"EService: Throttled: 17000x",
            b"EService: Throttled: -5",
            b"EService: Throttled: 99999999999999999999999",
            b"EService: Throttled: 1.2.3",
        ] {
            assert_eq!(until(bad), Some(None), "{}", String::from_utf8_lossy(bad));
        }
        // A cut string's digits are not trusted.
        assert!(matches!(
            error_verdict(b"EService: Throttled: 1700000003", true),
            Said::Throttled(None)
        ));
        assert!(matches!(error_verdict(b"EService:Busy", false), Said::Busy));
        assert!(matches!(
            error_verdict(b"EService:Unavailable", false),
            Said::Busy
        ));
        assert!(matches!(
            error_verdict(b"EGeneral:Internal error:123", false),
            Said::Busy
        ));
    }

    fn answer(body: &str, request: Request<'_>) -> (Verdict, Budget, KrakenSpot) {
        let mut b = Budget::builder();
        let mut k = KrakenSpot::new(
            &mut b,
            Clock::anchor(0, 1_700_000_000_000),
            Config::default(),
        )
        .unwrap();
        let mut budget = b.build(0).unwrap();
        let t = budget
            .try_charge(&k.parts(request).unwrap(), ergon_core::Class::Normal, 0)
            .unwrap();
        let flight = t.sent();
        let r = Response {
            status: 200,
            headers: &[],
            body: body.as_bytes(),
        };
        let v = k.on_response(request, &r, &mut budget, 0).unwrap();
        budget.complete(flight, 0).unwrap();
        (v, budget, k)
    }

    /// A throttle holds the IP gate (a limit of concurrent requests, issue 39:
    /// on main it held the request's own counter, the per-pair trading counter
    /// for an order): until its second, one far ahead past the cap halts it, an
    /// unreadable one holds it as a 429 without a wait does. No counter is held.
    #[test]
    fn the_throttle_holds_until_its_second() {
        let (v, b, k) = answer(
            r#"{"error":["EService: Throttled: 1700000003"]}"#,
            Request::Order,
        );
        assert_eq!(
            v,
            Verdict::Throttled {
                bucket: k.ip,
                until_ns: 3 * SEC + ergon_core::DEFAULT_HOLD_GUARD_NS
            }
        );
        for id in [k.trading, k.api, k.public] {
            assert_eq!(b.stats(id).unwrap().held_until_ns, None);
        }
        let (v, _, k) = answer(
            r#"{"error":["EService: Throttled: 1800000000"]}"#,
            Request::Read(2),
        );
        assert!(
            matches!(v, Verdict::Banned { bucket, .. } if bucket == k.ip),
            "{v:?}"
        );
        let (v, _, k) = answer(r#"{"error":["EService: Throttled"]}"#, Request::Read(0));
        assert!(
            matches!(v, Verdict::Throttled { bucket, .. } if bucket == k.ip),
            "{v:?}"
        );
    }

    /// What surely did not run is refused by the placed reader; what may have run
    /// stays unknown, a long string included (read by its prefix, never refused
    /// as unreadable).
    #[test]
    fn the_placed_reader_refuses_only_what_did_not_run() {
        let k = {
            let mut b = Budget::builder();
            KrakenSpot::new(&mut b, Clock::anchor(0, 0), Config::default()).unwrap()
        };
        let placed = |body: &str| {
            k.read_placed(&Response {
                status: 200,
                headers: &[],
                body: body.as_bytes(),
            })
        };
        for refused in [
            "EService: Throttled: 1700000003",
            "EService:Deadline elapsed",
            "EService:Market in cancel_only mode",
            "EService:Market in post_only mode",
            "EService:Market in limit_only mode",
            "EGeneral:Too many requests",
            "EOrder:Insufficient funds",
        ] {
            let body = format!(r#"{{"error":["{refused}"]}}"#);
            assert_eq!(placed(&body), Placed::Refused, "{refused}");
        }
        let long = format!("EService:Busy:{}", "x".repeat(200));
        for unknown in [
            "EService:Busy",
            "EService:Unavailable",
            "EGeneral:Internal error",
            &long,
        ] {
            let body = format!(r#"{{"error":["{unknown}"]}}"#);
            assert_eq!(placed(&body), Placed::Unknown, "{unknown}");
        }
        let (v, ..) = answer(&format!(r#"{{"error":["{long}"]}}"#), Request::Order);
        assert_eq!(v, Verdict::Unknown);
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
