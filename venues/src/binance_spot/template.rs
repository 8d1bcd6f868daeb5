//! A prepared Binance order (`POST /api/v3/order`, and USD-M's `POST /fapi/v1/order`
//! through `BinanceFutures::order_template`): [`OrderTemplate`] keeps the bytes of
//! an order that do not change (path, `symbol`, `side`, `type`, `timeInForce`,
//! `reduceOnly`, `recvWindow`); [`BinanceSpot::new_order_from`] writes one order from
//! it with only the price, quantity, client order id, timestamp and signature filled
//! in. The request is byte for byte the one the adapter's `new_order` writes for the
//! same order (property tests hold the two to it), so the venue sees exactly what it
//! saw before. It is written as HTTP/1.1 sends it but for the `Host` line
//! ([`Prepared::http`]), so a transport copies it out as it is: the template's
//! literals are checked for the wire when it is built, and the fields (a
//! [`Decimal`], a [`ClientOrderId`], digits, the signature's hex or URL-encoded
//! base64, an [`ApiKey`](crate::endpoint::ApiKey)) admit no other bytes.

use arrayvec::ArrayString;

use core::any::TypeId;
use core::sync::atomic::{AtomicU64, Ordering};

use ergon_core::{BucketId, Part};

use super::{order_params, Auth, BinanceSpot, Counts, Limits, PostOnly};
use crate::adapt::{Clock, Error, Parts, Request, Venue};
use crate::binance_auth::signature;
use crate::endpoint::{
    decimal, ApiKey, ClientOrderId, Decimal, Field, Fill, HmacKey, Method, NewOrder, OrderType,
    Prepared, Runs, Side, SignKey, Symbol, Values, Writer,
};

/// The fixed bytes of one kind of Binance Spot order: see the module docs. Made by
/// [`BinanceSpot::order_template`]; good for the adapter that made it (its receive
/// window is written in).
#[derive(Clone, Debug)]
pub struct OrderTemplate {
    /// A number no other template has (its clones share it): part of the layout
    /// a request holding one of its orders is marked with
    /// ([`OrderTemplate::layout`]).
    id: u64,
    /// The number of the [`Auth`] it was made with ([`Auth::id`]).
    auth: u64,
    runs: Runs,
    /// The length of the literal before each field, to find each field's place
    /// in an order from the lengths of the fields before it.
    places: Places,
    /// Where the target starts: after `POST `.
    target_at: usize,
    /// Where the signed query starts: after `POST /api/v3/order?`.
    query_at: usize,
    /// Whether the order type carries a price (all but MARKET).
    priced: bool,
    symbol: ArrayString<32>,
    recv_window_ms: i64,
    /// What follows the signature, written once: the request line's end, the key's
    /// header and the framing ([`VERSION`], `X-MBX-APIKEY: {key}`, [`END`]) for the
    /// key the template was made with; empty if it had none.
    tail: String,
    /// The key's span in `tail`.
    key_at: core::ops::Range<usize>,
    /// The parts of the adapter that made it, for an order, and what they were
    /// computed from.
    parts: CachedParts,
}

/// The length of the literal before each field of a template's order, and after
/// the last (the fields are in this order). A template without a price (a market
/// order's) has an empty literal before it, and its price is empty.
#[derive(Clone, Copy, Debug)]
struct Places {
    quantity: usize,
    price: usize,
    id: usize,
    timestamp: usize,
    tail: usize,
}

/// An order's parts as its adapter computed them when the template was made, with
/// everything they are computed from: the adapter's type, its IP gate and, of each
/// of its limits, what it counts, its bucket and its window. A fill whose adapter
/// matches all of it charges these parts without asking the adapter (~140
/// instructions an order); any difference (a limit added, removed or rebound,
/// another adapter type) and the adapter is asked, as before. The limits' stamp
/// ([`Limits::stamp`]) says they match in one comparison while they are not
/// changed (~70 instructions an order: the comparison of each).
#[derive(Clone, Debug)]
struct CachedParts {
    venue: TypeId,
    ip: BucketId,
    limits: Vec<(Counts, BucketId, i64)>,
    /// The stamp of the limits `ip` and `limits` were read from.
    stamp: u64,
    /// None if the adapter had none (it is asked again, and says why).
    parts: Option<Parts>,
    /// Names `parts` ([`Prepared::parts_key`]): new for each `CachedParts`
    /// made, and a clone's parts are the same.
    key: u64,
}

/// The next [`CachedParts::key`] (0 is no key).
static NEXT_PARTS_KEY: AtomicU64 = AtomicU64::new(1);

impl CachedParts {
    fn new<V: Venue + 'static>(venue: &V, limits: &Limits) -> CachedParts {
        CachedParts {
            venue: TypeId::of::<V>(),
            ip: limits.ip(),
            limits: limits
                .limits()
                .iter()
                .map(|l| (l.counts, l.bucket, l.window_ns))
                .collect(),
            stamp: limits.stamp(),
            parts: venue.parts(Request::Order).ok(),
            key: NEXT_PARTS_KEY.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The parts kept, if `venue` and its `limits` are what they were computed
    /// from; else None: ask the adapter.
    #[inline]
    fn of<V: Venue + 'static>(&self, limits: &Limits) -> Option<&[Part]> {
        let same = self.venue == TypeId::of::<V>()
            && (self.stamp == limits.stamp() || self.same_limits(limits));
        self.parts.as_deref().filter(|_| same)
    }

    /// Whether `limits` are the ones read, by their contents (their stamp
    /// changed: they were changed, maybe back).
    #[cold]
    fn same_limits(&self, limits: &Limits) -> bool {
        self.ip == limits.ip()
            && self.limits.len() == limits.limits().len()
            && self
                .limits
                .iter()
                .zip(limits.limits())
                .all(|(c, l)| *c == (l.counts, l.bucket, l.window_ns))
    }
}

impl OrderTemplate {
    /// The template of `path`'s orders of `symbol`, `side`, `order_type` (and
    /// `reduce_only`), whose parameters `params` writes as the venue's builder does
    /// (`symbol`, `side`, `type`, `timeInForce`, `quantity`, `price`,
    /// `newClientOrderId`, then anything fixed after it), for requests signed
    /// with `auth`. The builder runs once, on placeholder values, and its text is
    /// cut where they stand.
    pub(crate) fn build<V: Venue + 'static>(
        path: &str,
        o: (Symbol<'_>, Side, OrderType, bool),
        (venue, auth, limits): (&V, &Auth, &Limits),
        params: impl FnOnce(&mut Writer<'_>, &mut bool, &NewOrder<'_>) -> Result<(), Error>,
    ) -> Result<OrderTemplate, Error> {
        let (symbol, side, order_type, reduce_only) = o;
        let priced = !matches!(order_type, OrderType::Market);
        let placeholder = Decimal::new("1")?;
        let o = NewOrder {
            symbol,
            side,
            order_type,
            price: priced.then_some(placeholder),
            quantity: placeholder,
            client_order_id: ClientOrderId::new("x")?,
            reduce_only,
        };
        let mut scratch = Prepared::default();
        let mut w = Writer::start(&mut scratch);
        let mut first = true;
        params(&mut w, &mut first, &o)?;
        let end = w.pos();
        let text =
            core::str::from_utf8(w.bytes(0..end)).map_err(|_| Error::BadArgument("symbol"))?;
        let bad = Error::BadArgument("order template");
        let (fixed, rest) = text.split_once("&quantity=").ok_or(bad)?;
        let (_, after) = rest.split_once("&newClientOrderId=x").ok_or(bad)?;
        if !on_the_wire(path) || !on_the_wire(fixed) || !on_the_wire(after) {
            return Err(bad);
        }
        let mut runs = Runs::default();
        runs.lit(REQUEST);
        runs.lit(path);
        runs.lit("?");
        runs.lit(fixed);
        runs.lit("&quantity=");
        let mut places = Places {
            quantity: runs.tail_len(),
            price: 0,
            id: 0,
            timestamp: 0,
            tail: 0,
        };
        let mut ok = runs.field(Field::Quantity);
        if priced {
            runs.lit("&price=");
            places.price = runs.tail_len();
            ok &= runs.field(Field::Price);
        }
        runs.lit("&newClientOrderId=");
        places.id = runs.tail_len();
        ok &= runs.field(Field::Id);
        runs.lit(after);
        let mut buf = [0u8; 20];
        runs.lit("&recvWindow=");
        runs.lit(decimal(auth.recv_window_ms, &mut buf));
        runs.lit("&timestamp=");
        places.timestamp = runs.tail_len();
        ok &= runs.field(Field::Timestamp);
        places.tail = runs.tail_len();
        if !ok {
            return Err(bad);
        }
        let mut tail = String::new();
        let mut key_at = 0..0;
        if let Some(k) = &auth.api_key {
            tail.push_str(VERSION);
            tail.push_str(KEY_HEADER);
            key_at = tail.len()..tail.len() + k.as_str().len();
            tail.push_str(k.as_str());
            tail.push_str(END);
        }
        let mut sym = ArrayString::new();
        sym.try_push_str(symbol.as_str())
            .map_err(|_| Error::BadArgument("symbol"))?;
        Ok(OrderTemplate {
            id: template_id(),
            auth: auth.id,
            runs,
            places,
            target_at: REQUEST.len(),
            query_at: REQUEST.len() + path.len() + 1,
            priced,
            symbol: sym,
            recv_window_ms: auth.recv_window_ms,
            tail,
            key_at,
            parts: CachedParts::new(venue, limits),
        })
    }

    /// One order of this template into `out`, stamped at `now` on `limits`' clock
    /// and signed with `auth` as `sign` signs (its signature left pending with
    /// `auth`'s signatures deferred); its parts `venue`'s (see [`CachedParts`]).
    /// See [`BinanceSpot::new_order_from`]. An order of the layout of the one
    /// `out` holds, with everything else the same ([`OrderTemplate::resumable`]),
    /// is written over it in place and only its id, deadline and label are
    /// recorded again (~200 instructions an order less than recording it whole);
    /// any other is [`OrderTemplate::whole`].
    pub(crate) fn fill<'p, V: Venue + 'static>(
        &self,
        out: &'p mut Prepared,
        fill: &Fill<'_>,
        (venue, auth, limits): (&V, &Auth, &Limits),
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let clock: &Clock = &limits.clock;
        let ts = clock.utc_ms(now);
        if let Ok(price) = self.price(fill) {
            let values = order_values(fill, price, ts);
            if let Some((k, layout)) = self.resumable::<V>(out, &values, (auth, limits)) {
                let (w, _) = self.over(out, &values, k, layout)?;
                let deadline = clock.now_ns_at(ts.saturating_add(auth.recv_window_ms));
                return w.again((Request::Order, layout), fill.client_order_id, deadline);
            }
        }
        self.whole(out, fill, (venue, auth, limits), ts)
    }

    /// [`OrderTemplate::fill`] of an order not [`OrderTemplate::resumable`]:
    /// written whole, or its fields over the last order's and the rest recorded
    /// again; stamped `ts`.
    #[inline(never)]
    fn whole<'p, V: Venue + 'static>(
        &self,
        out: &'p mut Prepared,
        fill: &Fill<'_>,
        (venue, auth, limits): (&V, &Auth, &Limits),
        ts: i64,
    ) -> Result<&'p Prepared, Error> {
        let deadline = || {
            limits
                .clock
                .now_ns_at(ts.saturating_add(auth.recv_window_ms))
        };
        let checked = self.check(fill, auth);
        let (price, api_key, key) = match checked {
            Ok(c) => c,
            Err(e) => {
                Writer::start(out);
                return Err(e);
            }
        };
        let values = order_values(fill, price, ts);
        // The key the template was made with (written in its tail).
        let same_key = self.tail.get(self.key_at.clone()) == Some(api_key.as_str());
        let layout = match key {
            SignKey::Hmac(_) if same_key && !auth.defer => self.layout(&values),
            _ => 0,
        };
        let (mut w, target_end) = match (key, out.holds(layout)) {
            (SignKey::Hmac(k), true) => {
                let (mut w, end) = self.over(out, &values, k, layout)?;
                // Not resumable: what it recorded is recorded again.
                w.clear_records();
                (w, end)
            }
            _ => self.write(out, &values, (auth, key, same_key))?,
        };
        w.symbol_text(&self.symbol);
        w.target_at(self.target_at..target_end);
        let line_end = target_end + VERSION.len();
        if same_key {
            let at = target_end + self.key_at.start..target_end + self.key_at.end;
            w.header_at("X-MBX-APIKEY", at)?;
        } else {
            w.s(VERSION);
            w.s(KEY_HEADER);
            w.header_str("X-MBX-APIKEY", api_key.as_str())?;
            w.s(END);
        }
        w.http(line_end);
        w.id(fill.client_order_id)?;
        w.layout(layout);
        match self.parts.of::<V>(limits) {
            Some(parts) => {
                w.parts_key(self.parts.key);
                w.finish_parts(parts, Request::Order, Method::Post, deadline())
            }
            None => w.finish(venue, Request::Order, Method::Post, deadline()),
        }
    }

    /// Whether `out` holds an order of this template that `v` may be written over
    /// leaving all but its fields, signature, id and deadline as they are
    /// ([`Writer::again`]): one this template wrote whole and ready, with the parts
    /// this template keeps (and `limits` still give), with `auth` the one it was
    /// made with or a clone (its number: the same key, signing key and receive
    /// window), an HMAC key, signatures not deferred, and fields of the same
    /// lengths. Then the HMAC key and the layout.
    #[inline]
    fn resumable<'a, V: Venue + 'static>(
        &self,
        out: &Prepared,
        v: &Values<'_>,
        (auth, limits): (&'a Auth, &Limits),
    ) -> Option<(&'a HmacKey, u128)> {
        // An emptied request (`Prepared::clear`) still holds its last order's
        // bytes and records: its layout mark says whether they are whole.
        if auth.id != self.auth || auth.defer {
            return None;
        }
        if out.parts_key() != self.parts.key {
            return None;
        }
        let Some(SignKey::Hmac(k)) = &auth.key else {
            return None;
        };
        let layout = self.layout(v);
        self.parts.of::<V>(limits)?;
        out.holds(layout).then_some((k, layout))
    }

    /// The fill's price text; `Err` for a price on a market template or none on
    /// a priced one.
    #[inline]
    fn price<'a>(&self, fill: &Fill<'a>) -> Result<&'a str, Error> {
        match (self.priced, fill.price) {
            (true, Some(p)) => Ok(p.as_str()),
            (false, None) => Ok(""),
            (false, Some(_)) => Err(Error::BadArgument("price of a market order")),
            (true, None) => Err(Error::BadArgument("price of a limit order")),
        }
    }

    /// The fill's price text, and the adapter's key and signing key; `Err` for a
    /// price on a market template or none on a priced one, another receive window,
    /// or no key.
    fn check<'a>(
        &self,
        fill: &Fill<'a>,
        auth: &'a Auth,
    ) -> Result<(&'a str, &'a ApiKey, &'a SignKey), Error> {
        let price = self.price(fill)?;
        if self.recv_window_ms != auth.recv_window_ms {
            return Err(Error::BadArgument("a template of another receive window"));
        }
        let (Some(api_key), Some(key)) = (&auth.api_key, &auth.key) else {
            return Err(Error::NoKey);
        };
        Ok((price, api_key, key))
    }

    /// The layout of an order of this template with `v`'s fields: the template,
    /// each field's length and the timestamp's five digits above its last eight
    /// (what a request holding such an order must match for
    /// [`OrderTemplate::over`], which writes only the last eight: the five
    /// change once in ~28 hours); 0 for none: only orders stamped with a
    /// 13-digit timestamp (from 2001-09-09 to 2286) have one.
    fn layout(&self, v: &Values<'_>) -> u128 {
        if !(TS13).contains(&v.timestamp) {
            return 0;
        }
        // Each length is under 256: a price and a quantity are at most 32
        // bytes, a client order id 36; the five digits are under 2^17.
        let len = |n: usize| u128::from(n as u8);
        let high = v.timestamp.unsigned_abs() / TS_LOW;
        (u128::from(self.id) << 64)
            | (u128::from(high) << 24)
            | len(v.quantity.len())
            | (len(v.price.len()) << 8)
            | (len(v.id.len()) << 16)
    }

    /// The order written from the start, into `out` emptied: its writer and where
    /// its target ends (before ` HTTP/1.1`).
    fn write<'p>(
        &self,
        out: &'p mut Prepared,
        values: &Values<'_>,
        (auth, key, same_key): (&Auth, &SignKey, bool),
    ) -> Result<(Writer<'p>, usize), Error> {
        let mut w = Writer::start(out);
        self.runs.emit(values, &mut w);
        let end = w.pos();
        match key {
            // For a WebSocket API lane: signed only if it goes over HTTP after all.
            _ if auth.defer => w.defer_signature(self.query_at..end),
            SignKey::Hmac(k) => {
                let mac = k.sign(&[w.bytes(self.query_at..end)]);
                w.mac_hex(SIGNATURE, &mac);
            }
            SignKey::Ed25519(_) => {
                let mut text = ArrayString::new();
                signature(key, w.bytes(self.query_at..end), &mut text);
                w.s(SIGNATURE);
                w.s(&text);
            }
        }
        let target_end = w.pos();
        if same_key {
            // The rest in one append.
            w.s(&self.tail);
        }
        Ok((w, target_end))
    }

    /// The order written over the one of the same `layout` that `out` holds
    /// ([`Prepared::holds`]): its literals, its signature's lead and its tail are
    /// where they are, so only the fields and the signature's hex are written, in
    /// place. Its writer and where its target ends. Inlined into
    /// [`OrderTemplate::fill`], its one caller (a call, its frame and its
    /// `Result` were ~20 instructions an order).
    #[inline(always)]
    fn over<'p>(
        &self,
        out: &'p mut Prepared,
        values: &Values<'_>,
        k: &HmacKey,
        layout: u128,
    ) -> Result<(Writer<'p>, usize), Error> {
        let mut w = Writer::resume(out, layout).ok_or(Error::BadArgument("order template"))?;
        let lit = &self.places;
        let end = w.over_fields(
            [lit.quantity, lit.price, lit.id, lit.timestamp, lit.tail],
            [values.quantity, values.price, values.id],
            values.timestamp,
        )?;
        let mac = k.sign(&[w.bytes(self.query_at..end)]);
        let hex_at = end + SIGNATURE.len();
        w.over_mac_hex(hex_at, &mac)?;
        Ok((w, hex_at + 64))
    }
}

/// The values of `fill`'s order with the price text `price`, stamped `ts`.
#[inline(always)]
fn order_values<'a>(fill: &'a Fill<'_>, price: &'a str, ts: i64) -> Values<'a> {
    Values {
        id: fill.client_order_id.as_str(),
        price,
        quantity: fill.quantity.as_str(),
        timestamp: ts,
        request_id: 0,
    }
}

/// The UTC milliseconds written in 13 digits.
const TS13: core::ops::Range<i64> = 1_000_000_000_000..10_000_000_000_000;

/// 10^8: a timestamp's last eight digits are its remainder by it.
const TS_LOW: u64 = 100_000_000;

/// The lead of an HMAC signature in the query.
const SIGNATURE: &str = "&signature=";

/// A number no template had before (from 1: a layout of 0 is none).
fn template_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The request line's method and the space after it (every order is a POST with
/// its parameters in the query).
const REQUEST: &str = "POST ";
/// The request line's end.
const VERSION: &str = " HTTP/1.1\r\n";
/// The key's header, before the key.
const KEY_HEADER: &str = "X-MBX-APIKEY: ";
/// After the key's header: the framing an HTTP/1.1 encoder writes for a POST with
/// no body, and the blank line.
const END: &str = "\r\nContent-Length: 0\r\n\r\n";

/// Whether `s` may stand in a request target as it is: no space, control byte,
/// DEL or `#` (the checks a transport makes of a target it encodes).
fn on_the_wire(s: &str) -> bool {
    s.bytes().all(|b| b > 0x20 && b != 0x7f && b != b'#')
}

impl BinanceSpot {
    /// The template of `symbol`'s `side` orders of `order_type`: the same checks as
    /// [`Endpoints::new_order`](crate::endpoint::Endpoints::new_order) (a post-only
    /// order is `LIMIT_MAKER`), made once.
    pub fn order_template(
        &self,
        symbol: Symbol<'_>,
        side: Side,
        order_type: OrderType,
    ) -> Result<OrderTemplate, Error> {
        OrderTemplate::build(
            "/api/v3/order",
            (symbol, side, order_type, false),
            (self, &self.auth, &self.limits),
            |w, first, o| order_params(w, first, o, "newClientOrderId", PostOnly::LimitMaker),
        )
    }

    /// One order of template `t` into `out`: what
    /// [`Endpoints::new_order`](crate::endpoint::Endpoints::new_order) writes for
    /// the template's order with `fill`'s price, quantity and client order id,
    /// stamped and signed at `now`. A price on a market template, or none on a
    /// priced one, a template of an adapter with another receive window, or no key:
    /// `Err`, and `out` is left empty.
    pub fn new_order_from<'p>(
        &self,
        t: &OrderTemplate,
        out: &'p mut Prepared,
        fill: &Fill<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        t.fill(out, fill, (self, &self.auth, &self.limits), now)
    }
}

#[cfg(test)]
pub(crate) mod case;
#[cfg(test)]
pub(crate) mod tests;
