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

use crate::adapt::{self, Batch, Clock, Error, Parts, Request, Venue, MAX_ITEMS};
use crate::endpoint::{
    self, Amend, ClientIds, ClientOrderId, Endpoints, IdFormat, Lookup, Method, NewOrder,
    OrderInfo, OrderRef, OrderState, OrderType, Placed, Prepared, Side, Symbol, TimeInForce,
    Writer,
};
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

/// One reading of `userRateLimit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    /// When it was read, on the caller's clock.
    pub at_ns: i64,
    /// `floor(cumVlm)`, USDC.
    pub volume: u64,
    /// `nRequestsUsed`.
    pub used: u64,
    /// `nRequestsCap`.
    pub cap: u64,
    /// `nRequestsSurplus`: requests bought with `reserveRequestWeight`.
    pub surplus: u64,
}

impl Reading {
    /// Reads a `userRateLimit` answer.
    pub fn parse(body: &[u8], at_ns: i64) -> Result<Self, Error> {
        let v = json::parse(body)?;
        let field = |name: &'static str| -> Result<Value<'_>, Error> {
            v.get(name)?.ok_or(Error::BadField(name))
        };
        let int = |name: &'static str| -> Result<u64, Error> {
            field(name)?.as_u64().map_err(|_| Error::BadField(name))
        };
        Ok(Reading {
            at_ns,
            volume: whole_usdc(field("cumVlm")?).ok_or(Error::BadField("cumVlm"))?,
            used: int("nRequestsUsed")?,
            cap: int("nRequestsCap")?,
            surplus: int("nRequestsSurplus").or_else(|e| match v.get("nRequestsSurplus") {
                Ok(None) => Ok(0),
                _ => Err(e),
            })?,
        })
    }

    /// Requests the address may send in all: the cap, plus the surplus bought
    /// unless the cap already grew by it. The cap the volume earns is
    /// 10,000 + floor(volume); whatever the cap holds above that is a purchase
    /// already counted, and only the surplus beyond it is added.
    pub fn allowance(&self) -> u64 {
        let earned = INITIAL_REQUESTS.saturating_add(self.volume);
        let bought_in_cap = self.cap.saturating_sub(earned);
        self.cap
            .saturating_add(self.surplus.saturating_sub(bought_in_cap))
    }

    /// Requests left before the address is down to one per 10 s.
    pub fn remaining(&self) -> u64 {
        self.allowance().saturating_sub(self.used)
    }
}

/// `cumVlm` (a decimal string, or a number) rounded down to whole USDC.
fn whole_usdc(v: Value<'_>) -> Option<u64> {
    let mut buf = [0u8; 64];
    let text: &str = match v.kind() {
        Kind::String => v.decode_str(&mut buf).ok()?,
        Kind::Number => core::str::from_utf8(v.raw()).ok()?,
        _ => return None,
    };
    let whole = text.split('.').next()?;
    if whole.is_empty() || !whole.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let frac = text.get(whole.len() + 1..).unwrap_or("");
    if !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    whole.parse().ok()
}

/// The address budget: the last two readings of `userRateLimit`, and the actions
/// sent since the last one.
#[derive(Clone, Copy, Debug, Default)]
pub struct Address {
    last: Option<Reading>,
    before: Option<Reading>,
    sent_since: u64,
}

impl Address {
    /// Takes a new reading; actions counted locally before it are now in it.
    pub fn read(&mut self, reading: Reading) {
        self.before = self.last.replace(reading);
        self.sent_since = 0;
    }

    /// Requests left: the last reading's, less what was sent since. `None` before
    /// the first reading.
    pub fn remaining(&self) -> Option<u64> {
        self.last
            .map(|r| r.remaining().saturating_sub(self.sent_since))
    }

    /// Counts actions sent.
    pub fn sent(&mut self, n: u64) {
        self.sent_since = self.sent_since.saturating_add(n);
    }

    /// Hours until the address budget runs out at the pace between the last two
    /// readings (requests used, less requests earned by volume and bought). `None`
    /// without two readings, or if the budget is not shrinking.
    pub fn hours_to_exhaustion(&self) -> Option<f64> {
        let (a, b) = (self.before?, self.last?);
        let hours = (b.at_ns - a.at_ns) as f64 / HOUR as f64;
        if hours <= 0.0 {
            return None;
        }
        let burned = b.remaining() as f64 - a.remaining() as f64;
        let per_hour = -burned / hours;
        if per_hour <= 0.0 {
            return None;
        }
        Some(b.remaining() as f64 / per_hour)
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
            items: ArrayVec::new(),
        })
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
                            Ok(reading) => self.address.read(reading),
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

/// An ECDSA signature over an action, as the exchange endpoint takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signature {
    /// `r`.
    pub r: [u8; 32],
    /// `s`.
    pub s: [u8; 32],
    /// `v` (27 or 28).
    pub v: u8,
}

/// What an exchange request asks for, as the signer sees it.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Action<'a> {
    /// `order`: new orders (the asset index of each is in the JSON).
    Order(&'a [NewOrder<'a>]),
    /// `cancelByCloid`.
    Cancel(&'a OrderRef<'a>),
    /// `modify` by client order id.
    Modify(&'a Amend<'a>),
    /// `noop`: marks the nonce used.
    Noop,
    /// `scheduleCancel`: the dead man's switch, armed to fire at `time` (UTC ms),
    /// or disarmed (`None`: the action carries no `time`).
    ScheduleCancel(Option<u64>),
}

/// Signs Hyperliquid actions: the caller's key, never in this crate. Hyperliquid
/// signs the msgpack of the action with the nonce and `expiresAfter` (an EIP-712
/// "phantom agent"); `action_json` is the action exactly as it is sent, for signers
/// that hash from it, and `action` the same in typed form.
pub trait Signer {
    /// The account's address (`0x` and 40 hex digits), for info requests.
    fn address(&self) -> &str;

    /// Signs one action.
    fn sign(
        &mut self,
        action: Action<'_>,
        action_json: &[u8],
        nonce_ms: u64,
        expires_after_ms: u64,
    ) -> Result<Signature, Error>;
}

/// The exchange and info endpoints of one Hyperliquid account: the adapter, the
/// caller's signer, the asset table (name to index, from `meta`, loaded at start)
/// and the last nonce used.
#[derive(Clone, Debug)]
pub struct Exchange<S> {
    /// The adapter (budget buckets, answers).
    pub venue: Hyperliquid,
    signer: S,
    assets: Vec<(arrayvec::ArrayString<16>, u32)>,
    last_nonce: u64,
    expiry_ms: i64,
    /// The last `scheduleCancel` written: `Some(Some(time))` an arm, `Some(None)`
    /// a disarm. Its answer does not say which, so the reader answers for it.
    switch_written: Option<Option<u64>>,
}

impl<S: Signer> Exchange<S> {
    /// The endpoints of `venue` signed by `signer`; `assets` names each asset's
    /// index (`meta.universe` order: `("BTC", 0)`, `("ETH", 1)` ...); an action
    /// expires `expiry_ms` after its nonce (`expiresAfter`).
    pub fn new(
        venue: Hyperliquid,
        signer: S,
        assets: &[(&str, u32)],
        expiry_ms: i64,
    ) -> Result<Self, Error> {
        if !(1..=86_400_000).contains(&expiry_ms) {
            return Err(Error::BadArgument("expiresAfter window (1 ms to 1 day)"));
        }
        let assets = assets
            .iter()
            .map(|(n, i)| {
                arrayvec::ArrayString::from(n)
                    .map(|n| (n, *i))
                    .map_err(|_| Error::BadArgument("asset name"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Exchange {
            venue,
            signer,
            assets,
            last_nonce: 0,
            expiry_ms,
            switch_written: None,
        })
    }

    /// The signer.
    pub fn signer_mut(&mut self) -> &mut S {
        &mut self.signer
    }

    fn asset(&self, s: &Symbol<'_>) -> Result<u32, Error> {
        self.assets
            .iter()
            .find(|(n, _)| n.as_str() == s.as_str())
            .map(|(_, i)| *i)
            .ok_or(Error::BadArgument("asset not in the table"))
    }

    /// The next nonce: now in UTC ms, or one more than the last if that is later
    /// (nonces must be unique and are best increasing).
    fn nonce(&mut self, now: i64) -> u64 {
        let ms = u64::try_from(self.venue.clock.utc_ms(now)).unwrap_or(0);
        self.last_nonce = ms.max(self.last_nonce.saturating_add(1));
        self.last_nonce
    }

    /// Ends an exchange request whose action JSON is in the body from `action_at`:
    /// signs it and closes `{"action":..,"nonce":..,"signature":..,"expiresAfter":..}`.
    fn exchange<'p>(
        &mut self,
        w: Writer<'p>,
        action_at: usize,
        action: Action<'_>,
        kind: Request<'static>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let nonce = self.nonce(now);
        self.signed_exchange(w, action_at, action, kind, nonce, None)
    }

    /// [`Exchange::exchange`] with its nonce taken already (an action that names
    /// a time after it), charging `parts` instead of the kind's where given.
    fn signed_exchange<'p>(
        &mut self,
        mut w: Writer<'p>,
        action_at: usize,
        action: Action<'_>,
        kind: Request<'static>,
        nonce: u64,
        parts: Option<Parts>,
    ) -> Result<&'p Prepared, Error> {
        let end = w.pos();
        let expires = nonce.saturating_add(self.expiry_ms.unsigned_abs());
        let sig = self
            .signer
            .sign(action, w.bytes(action_at..end), nonce, expires)?;
        w.s(",\"nonce\":");
        w.int(i64::try_from(nonce).unwrap_or(i64::MAX));
        w.s(",\"signature\":{\"r\":\"0x");
        w.hex(&sig.r);
        w.s("\",\"s\":\"0x");
        w.hex(&sig.s);
        w.s("\",\"v\":");
        w.int(i64::from(sig.v));
        w.s("},\"expiresAfter\":");
        let expires = i64::try_from(expires).unwrap_or(i64::MAX);
        w.int(expires);
        w.s("}");
        w.close_body();
        w.header("Content-Type", b"application/json")?;
        let deadline = self.venue.clock.now_ns_at(expires);
        match parts {
            Some(parts) => w.finish_with(parts, kind, Method::Post, deadline),
            None => w.finish(&self.venue, kind, Method::Post, deadline),
        }
    }

    /// Starts an exchange request: the target and `{"action":`.
    fn start_exchange(w: &mut Writer<'_>) -> usize {
        w.open();
        w.s("/exchange");
        w.close_target();
        w.open();
        w.s("{\"action\":");
        w.pos()
    }

    /// An info request `{"type":TYPE,...}` whose fields after the type `fields` writes.
    fn info<'p>(
        &self,
        mut w: Writer<'p>,
        kind: &'static str,
        now: i64,
        fields: impl FnOnce(&mut Writer<'_>, &str),
    ) -> Result<&'p Prepared, Error> {
        w.open();
        w.s("/info");
        w.close_target();
        w.open();
        w.s("{\"type\":\"");
        w.s(kind);
        w.s("\"");
        fields(&mut w, self.signer.address());
        w.s("}");
        w.close_body();
        w.header("Content-Type", b"application/json")?;
        let deadline = now.saturating_add(self.expiry_ms.saturating_mul(MS));
        w.finish(&self.venue, Request::Info(kind), Method::Post, deadline)
    }

    /// A `noop` action: uses a nonce and does nothing else. Hyperliquid keeps the
    /// highest nonces of each address and refuses a nonce at or below the least
    /// of them once they are full, so a noop with a later nonce settles an
    /// in-flight action whose answer was lost: it may still land only if its nonce
    /// is among the kept ones; after its `expiresAfter` it never lands. Weight 1.
    pub fn noop<'p>(&mut self, out: &'p mut Prepared, now: i64) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        let at = Self::start_exchange(&mut w);
        w.s("{\"type\":\"noop\"}");
        self.exchange(w, at, Action::Noop, Request::Cancel, now)
    }
}

/// One order's wire object: `a` asset, `b` buy, `p` price, `s` size, `r` reduce
/// only, `t` type, `c` client order id.
fn order_wire(w: &mut Writer<'_>, asset: u32, o: &NewOrder<'_>) -> Result<(), Error> {
    let cloid = hl_cloid(&o.client_order_id)?;
    let tif = match o.order_type {
        OrderType::Limit(TimeInForce::Gtc) => "Gtc",
        OrderType::Limit(TimeInForce::Ioc) | OrderType::Market => "Ioc",
        OrderType::Limit(TimeInForce::Fok) => {
            return Err(Error::BadArgument("Hyperliquid has no FOK"))
        }
        OrderType::PostOnly => "Alo",
    };
    // A market order is an IOC limit at the caller's worst price.
    let price = o.price.ok_or(Error::BadArgument(
        "Hyperliquid orders need a price (IOC at the worst price for a market order)",
    ))?;
    w.s("{\"a\":");
    w.int(i64::from(asset));
    w.s(if o.side == Side::Buy {
        ",\"b\":true"
    } else {
        ",\"b\":false"
    });
    w.s(",\"p\":\"");
    w.s(price.as_str());
    w.s("\",\"s\":\"");
    w.s(o.quantity.as_str());
    w.s(if o.reduce_only {
        "\",\"r\":true"
    } else {
        "\",\"r\":false"
    });
    w.s(",\"t\":{\"limit\":{\"tif\":\"");
    w.s(tif);
    w.s("\"}},\"c\":\"");
    w.s(cloid);
    w.s("\"}");
    w.id(o.client_order_id)
}

/// Hyperliquid's `cloid`: `0x` and 32 hex digits (128 bits).
fn hl_cloid(id: &ClientOrderId) -> Result<&str, Error> {
    let s = id.as_str();
    let ok = s.len() == 34 && s.starts_with("0x") && s[2..].bytes().all(|c| c.is_ascii_hexdigit());
    if ok {
        Ok(s)
    } else {
        Err(Error::BadArgument(
            "Hyperliquid cloid: 0x and 32 hex digits",
        ))
    }
}

/// An order's `status` word as a state.
fn hl_state(word: &str) -> OrderState {
    match word {
        "open" | "triggered" => OrderState::New,
        "filled" => OrderState::Filled,
        "rejected" => OrderState::Rejected,
        w if w.ends_with("Rejected") => OrderState::Rejected,
        w if w == "canceled" || w.ends_with("Canceled") => OrderState::Canceled,
        _ => OrderState::Other,
    }
}

impl<S: Signer> Venue for Exchange<S> {
    fn parts(&self, request: Request<'_>) -> Result<Parts, Error> {
        self.venue.parts(request)
    }

    fn on_response(
        &mut self,
        request: Request<'_>,
        r: &Response<'_>,
        budget: &mut Budget,
        now: i64,
    ) -> Result<Verdict, Error> {
        self.venue.on_response(request, r, budget, now)
    }

    fn batch_items(&self) -> &[Verdict] {
        self.venue.batch_items()
    }
}

impl<S: Signer> ClientIds for Exchange<S> {
    /// `cloid`: a 128-bit hex string, `0x` and 32 hex digits
    /// (<https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/exchange-endpoint>,
    /// "Place an order").
    const ID_FORMAT: IdFormat = IdFormat::Cloid;
}

impl<S: Signer> Endpoints for Exchange<S> {
    /// An `order` action of one order: weight 1 and one address action.
    fn new_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &NewOrder<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        self.batch_orders(out, core::slice::from_ref(o), now)
    }

    /// `cancelByCloid`: weight 1 and one address action.
    fn cancel<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let asset = self.asset(&o.symbol)?;
        let cloid = hl_cloid(&o.client_order_id)?;
        let at = Self::start_exchange(&mut w);
        w.s("{\"type\":\"cancelByCloid\",\"cancels\":[{\"asset\":");
        w.int(i64::from(asset));
        w.s(",\"cloid\":\"");
        w.s(cloid);
        w.s("\"}]}");
        w.id(o.client_order_id)?;
        self.exchange(w, at, Action::Cancel(o), Request::Cancel, now)
    }

    /// `modify` by cloid (a whole GTC limit order: side, price and size are all
    /// required): weight 1 and one address action.
    fn amend<'p>(
        &mut self,
        out: &'p mut Prepared,
        a: &Amend<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(a.order.symbol);
        let (Some(price), Some(quantity)) = (a.price, a.quantity) else {
            return Err(Error::BadArgument("modify needs both price and quantity"));
        };
        let asset = self.asset(&a.order.symbol)?;
        let order = NewOrder {
            symbol: a.order.symbol,
            side: a.side,
            order_type: OrderType::Limit(TimeInForce::Gtc),
            price: Some(price),
            quantity,
            client_order_id: a.order.client_order_id,
            reduce_only: false,
        };
        let at = Self::start_exchange(&mut w);
        w.s("{\"type\":\"modify\",\"oid\":\"");
        w.s(hl_cloid(&a.order.client_order_id)?);
        w.s("\",\"order\":");
        order_wire(&mut w, asset, &order)?;
        w.s("}");
        self.exchange(w, at, Action::Modify(a), Request::CancelReplace, now)
    }

    /// `orderStatus` by cloid: info weight 2.
    fn query_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let cloid = hl_cloid(&o.client_order_id)?;
        w.id(o.client_order_id)?;
        self.info(w, "orderStatus", now, |w, user| {
            w.s(",\"user\":\"");
            w.s(user);
            w.s("\",\"oid\":\"");
            w.s(cloid);
            w.s("\"");
        })
    }

    /// `openOrders` (every asset: Hyperliquid has no per-asset form): info weight 20.
    fn open_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Option<Symbol<'_>>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        self.info(w, "openOrders", now, |w, user| {
            w.s(",\"user\":\"");
            w.s(user);
            w.s("\"");
        })
    }

    /// `l2Book` of a coin (20 levels a side, the only depth): info weight 2.
    fn book<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        depth: u32,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        if depth != 20 {
            return Err(Error::BadArgument(
                "depth (Hyperliquid's l2Book has 20 levels)",
            ));
        }
        self.info(w, "l2Book", now, |w, _| {
            w.s(",\"coin\":\"");
            w.s(symbol.as_str());
            w.s("\"");
        })
    }

    /// `clearinghouseState`: info weight 2.
    fn account<'p>(&mut self, out: &'p mut Prepared, now: i64) -> Result<&'p Prepared, Error> {
        let w = Writer::start(out);
        self.info(w, "clearinghouseState", now, |w, user| {
            w.s(",\"user\":\"");
            w.s(user);
            w.s("\"");
        })
    }

    /// An `order` action of `n` orders: weight 1 + floor(n / 40), each order one
    /// address action.
    fn batch_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        orders: &[NewOrder<'_>],
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(orders.first().map(|o| o.symbol));
        if orders.is_empty() || orders.len() > endpoint::MAX_BATCH {
            return Err(Error::BadArgument("batch of 1 to MAX_BATCH orders"));
        }
        let at = Self::start_exchange(&mut w);
        w.s("{\"type\":\"order\",\"orders\":[");
        for (i, o) in orders.iter().enumerate() {
            if i > 0 {
                w.s(",");
            }
            let asset = self.asset(&o.symbol)?;
            order_wire(&mut w, asset, o)?;
        }
        w.s("],\"grouping\":\"na\"}");
        let kind = if orders.len() == 1 {
            Request::Order
        } else {
            // orders.len() <= MAX_BATCH: the cast cannot truncate.
            Request::Batch(orders.len() as u16)
        };
        self.exchange(w, at, Action::Order(orders), kind, now)
    }

    /// `{"status":"order","order":{"status":..}}`: found; `unknownOid`: not found.
    fn read_order(&self, r: &Response<'_>) -> Lookup {
        let Ok(v) = json::parse(r.body) else {
            return Lookup::Unknown;
        };
        if !(200..=299).contains(&r.status) {
            return Lookup::Unknown;
        }
        match v.get("status") {
            Ok(Some(s)) if s.str_eq("unknownOid").unwrap_or(false) => Lookup::NotFound,
            Ok(Some(s)) if s.str_eq("order").unwrap_or(false) => {
                let mut buf = [0u8; 48];
                let state = match v
                    .path("order.status")
                    .ok()
                    .flatten()
                    .map(|s| s.decode_str(&mut buf))
                {
                    Some(Ok(word)) => hl_state(word),
                    _ => return Lookup::Unknown,
                };
                match v
                    .path("order.order.oid")
                    .ok()
                    .flatten()
                    .and_then(endpoint::json_text)
                {
                    Some(id) => Lookup::Found(OrderInfo {
                        state,
                        venue_order_id: id,
                        filled: None,
                    }),
                    None => Lookup::Unknown,
                }
            }
            _ => Lookup::Unknown,
        }
    }

    /// The first status: `resting` (new) or `filled` with its `oid`: accepted;
    /// `error` or a top-level `err`: refused.
    fn read_placed(&self, r: &Response<'_>) -> Placed {
        let Ok(v) = json::parse(r.body) else {
            return Placed::Unknown;
        };
        if !(200..=299).contains(&r.status) {
            return Placed::Unknown;
        }
        if v.get("status")
            .ok()
            .flatten()
            .is_some_and(|s| s.str_eq("err").unwrap_or(false))
        {
            return Placed::Refused;
        }
        let Ok(Some(first)) = v
            .path("response.data.statuses")
            .map(|s| s.and_then(|s| s.at(0).ok().flatten()))
        else {
            return Placed::Unknown;
        };
        let accepted = |state, o: Option<Value<'_>>| match o
            .and_then(|o| o.get("oid").ok().flatten())
            .and_then(endpoint::json_text)
        {
            Some(id) => Placed::Accepted(OrderInfo {
                state,
                venue_order_id: id,
                filled: None,
            }),
            None => Placed::Unknown,
        };
        if let Ok(Some(o)) = first.get("resting") {
            accepted(OrderState::New, Some(o))
        } else if let Ok(Some(o)) = first.get("filled") {
            accepted(OrderState::Filled, Some(o))
        } else if let Ok(Some(_)) = first.get("error") {
            Placed::Refused
        } else {
            Placed::Unknown
        }
    }
}

/// Hyperliquid's dead man's switch, the `scheduleCancel` action, as documented: a
/// `time` (UTC ms) at least 5 s ahead arms it, an action without `time` removes it,
/// and it may fire at most 10 times a day per account (counted from 00:00 UTC): a
/// gateway must never arm it and let it lapse in a loop. These are the venue's
/// figures; the endpoint (`impl Switch for Exchange`) takes timeouts from
/// [`SWITCH_MIN_TIMEOUT_MS`] only.
///
/// Source: <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/exchange-endpoint#schedule-cancel-dead-mans-switch>
/// (checked 2026-12-01).
pub const SWITCH_SPEC: crate::switch::SwitchSpec = crate::switch::SwitchSpec {
    min_timeout_ms: 5_000,
    max_timeout_ms: 86_400_000,
    default_timeout_ms: 60_000,
    refresh_div: 4,
    fires_per_day: Some(10),
    scope: crate::switch::Scope::Account,
    arms: crate::switch::Arms::Call,
};

/// The shortest timeout the endpoint takes: the venue's is 5 s, but
/// [`SWITCH_RESERVE_WEIGHT`] pays for a refresh every 15 s, a quarter of 60 s.
pub const SWITCH_MIN_TIMEOUT_MS: u32 = 60_000;

/// The `scheduleCancel` action (see [`SWITCH_SPEC`]): `{"type":"scheduleCancel",
/// "time":T}` arms the switch to cancel every open order of the account at `T`
/// (UTC ms, at least 5 s ahead), the action without `time` removes it; signed like
/// every action. `T` is the action's nonce (its UTC ms) plus the timeout, so the
/// lead the venue checks is the timeout itself. The answer, `{"status":"ok",
/// "response":{"type":"default"}}`, says neither the time nor which of the two
/// was sent: the reader answers for the last switch action this endpoint wrote.
/// Each call is an action: weight 1 of the IP's minute, charged to the reserved
/// `switch` share, and one request of the address budget, which the adapter
/// counts when the answer comes like any action's (four a minute are 5,760 a
/// day of the 10,000 an address starts with, plus one per USDC traded). The
/// venue refuses to arm or disarm until the account has traded enough volume
/// (`Cannot set scheduled cancel time until enough volume traded. Required:
/// $1000000. ...`, an error the exchange-endpoint page does not list): read as
/// [`Refusal::NotAllowed`](crate::switch::Refusal::NotAllowed), like a spent
/// daily count.
///
/// Sources (checked 2026-12-01):
/// <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/exchange-endpoint#schedule-cancel-dead-mans-switch>,
/// <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/rate-limits-and-user-limits>.
impl<S: Signer> crate::switch::Switch for Exchange<S> {
    fn switch_spec(&self) -> crate::switch::SwitchSpec {
        crate::switch::SwitchSpec {
            min_timeout_ms: SWITCH_MIN_TIMEOUT_MS,
            ..SWITCH_SPEC
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
        if !self.switch_spec().takes(timeout_ms) {
            return Err(Error::BadArgument("time (60 s to 1 day ahead)"));
        }
        self.schedule_cancel(w, Some(timeout_ms), now)
    }

    fn disarm<'p>(
        &mut self,
        out: &'p mut Prepared,
        _symbol: Symbol<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let w = Writer::start(out);
        self.schedule_cancel(w, None, now)
    }

    fn read_switch(&self, answer: &Response<'_>) -> crate::switch::SwitchAnswer {
        use crate::switch::{Refusal, SwitchAnswer};
        let Ok(v) = json::parse(answer.body) else {
            return SwitchAnswer::Unknown;
        };
        if !(200..=299).contains(&answer.status) {
            return SwitchAnswer::Unknown;
        }
        let Ok(Some(status)) = v.get("status") else {
            return SwitchAnswer::Unknown;
        };
        if status.str_eq("ok").unwrap_or(false) {
            return match self.switch_written {
                Some(Some(t)) => SwitchAnswer::Armed {
                    trigger_utc_ms: i64::try_from(t).ok(),
                },
                Some(None) => SwitchAnswer::Disarmed,
                None => SwitchAnswer::Unknown,
            };
        }
        if !status.str_eq("err").unwrap_or(false) {
            return SwitchAnswer::Unknown;
        }
        let Ok(Some(e)) = v.get("response") else {
            return SwitchAnswer::Unknown;
        };
        let says = |t| e.str_contains(t).unwrap_or(false);
        if says("Too many cumulative requests") || says("nonce") || says("Nonce") {
            // The address budget, the nonce: nothing about the switch.
            SwitchAnswer::Unknown
        } else if says("enough volume") || says("Too many") || says("too many") {
            SwitchAnswer::Refused(Refusal::NotAllowed)
        } else if says("at least 5 seconds") || says("too early") || says("in the past") {
            SwitchAnswer::Refused(Refusal::Timeout)
        } else if e.kind() == Kind::String {
            SwitchAnswer::Refused(Refusal::Other)
        } else {
            SwitchAnswer::Unknown
        }
    }

    fn switch_guards(&self) -> ArrayVec<BucketId, { crate::switch::MAX_GUARDS }> {
        // The IP gate, the minute weight and the short window the venue counts
        // the action on (a 429 holds the short one), and the address gate (held
        // once the address budget is spent).
        let mut g = ArrayVec::new();
        g.push(self.venue.ip);
        g.push(self.venue.weight);
        g.push(self.venue.burst);
        g.push(self.venue.address_gate);
        g
    }
}

impl<S: Signer> Exchange<S> {
    /// A `scheduleCancel` to fire `timeout_ms` after its nonce, or without `time`.
    fn schedule_cancel<'p>(
        &mut self,
        mut w: Writer<'p>,
        timeout_ms: Option<u32>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let nonce = self.nonce(now);
        let time = timeout_ms.map(|t| nonce.saturating_add(u64::from(t)));
        let at = Self::start_exchange(&mut w);
        w.s("{\"type\":\"scheduleCancel\"");
        if let Some(t) = time {
            w.s(",\"time\":");
            w.int(i64::try_from(t).unwrap_or(i64::MAX));
        }
        w.s("}");
        let mut parts = Parts::new();
        parts.push(Part::new(self.venue.ip, 0));
        parts.push(Part::new(self.venue.switch, 1));
        parts.push(Part::new(self.venue.address_gate, 0));
        // An action's kind: its answer is counted against the address.
        let p = self.signed_exchange(
            w,
            at,
            Action::ScheduleCancel(time),
            Request::Cancel,
            nonce,
            Some(parts),
        )?;
        self.switch_written = Some(time);
        Ok(p)
    }
}
