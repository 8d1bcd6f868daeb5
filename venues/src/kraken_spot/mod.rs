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
use crate::endpoint::{ApiKey, ClientOrderId, Writer};
use crate::json::{self, Kind, Value};
use crate::response::Response;
use crate::sign::{self, Secret};
use crate::waits;
use ergon_core::{BucketId, Budget, Builder, Part, Spec, Verdict};

mod costs;
mod endpoints;
mod errors;
mod switch;
#[cfg(test)]
mod tests;

use costs::whole_ms;
pub use costs::{amend_cost, batch_cost, cancel_cost, edit_cost};
use errors::{is_warning, said_of, Said};

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
