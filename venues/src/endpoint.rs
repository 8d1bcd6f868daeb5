//! Typed endpoints: a request prepared from typed arguments, carrying together what
//! it charges and what is sent.
//!
//! An adapter that implements [`Endpoints`] writes each request into a caller-owned
//! [`Prepared`]: the request kind (for [`Venue::on_response`]), the parts it
//! charges (weights by parameter, e.g. a book's depth), the method, the target
//! (path and query), the headers, the body, the signature, the deadline on the
//! caller's monotonic clock and the client order id(s). The parts come from the
//! same call that writes the target, and a `Prepared` can only be filled by an
//! adapter, so charging one request and sending another cannot be written with
//! this API. A `Prepared` keeps its byte buffer between requests: once it has held
//! the largest request of a session, preparing allocates nothing.
//!
//! Prices and quantities are [`Decimal`]: text the caller formatted, checked to be
//! a plain decimal. The caller knows each symbol's tick and lot steps (Binance
//! `PRICE_FILTER`/`LOT_SIZE`, OKX `tickSz`/`lotSz`), so it rounds; the adapter
//! copies the digits as they are, with no float on the way and no allocation, and
//! the check keeps a `&`, `"` or space from reaching a query string or a JSON body.
//!
//! Reconcile: [`Endpoints::read_order`] reads the answer to
//! [`Endpoints::query_order`] as [`Lookup::Found`], [`Lookup::NotFound`] or
//! [`Lookup::Unknown`], so an unknown outcome is settled by code.
//! [`Endpoints::read_placed`] reads the answer to a new order (its venue id and
//! state).
//!
//! Nothing here reads a clock: `now_ns` is the caller's monotonic time, turned into
//! the venue's UTC by the adapter's [`Clock`](crate::adapt::Clock).

use core::ops::Range;

use arrayvec::{ArrayString, ArrayVec};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::adapt::{Error, Parts, Request, Venue};
use crate::response::Response;

/// Most orders one prepared batch carries (OKX and Bybit allow 20 per request).
pub const MAX_BATCH: usize = 20;
/// Most headers one prepared request carries.
pub const MAX_HEADERS: usize = 8;
/// Longest client order id any adapter accepts (Binance, Bybit: 36).
pub const MAX_CLIENT_ORDER_ID: usize = 36;

/// An HTTP method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// GET.
    Get,
    /// POST.
    Post,
    /// PUT.
    Put,
    /// DELETE.
    Delete,
}

impl Method {
    /// The method as the request line writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
        }
    }
}

/// A client order id: up to [`MAX_CLIENT_ORDER_ID`] bytes of `A-Z a-z 0-9 . _ : / -`
/// (Binance's `newClientOrderId` alphabet; adapters with a narrower one, like OKX's
/// 32 alphanumerics, check theirs when they prepare). Fixed capacity, `Copy`: no
/// allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ClientOrderId(ArrayString<MAX_CLIENT_ORDER_ID>);

impl ClientOrderId {
    /// Checks `id`; `Err` names what is wrong.
    ///
    /// ```
    /// use ergon_venues::endpoint::ClientOrderId;
    /// assert_eq!(ClientOrderId::new("mm-42").unwrap().as_str(), "mm-42");
    /// assert!(ClientOrderId::new("a&b").is_err());
    /// assert!(ClientOrderId::new("").is_err());
    /// ```
    pub fn new(id: &str) -> Result<Self, Error> {
        let ok = !id.is_empty()
            && id.len() <= MAX_CLIENT_ORDER_ID
            && id
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"._:/-".contains(&c));
        if !ok {
            return Err(Error::BadArgument("client order id"));
        }
        ArrayString::from(id)
            .map(ClientOrderId)
            .map_err(|_| Error::BadArgument("client order id"))
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

/// How a venue spells a client order id that names 128 bits (a UUID's 16 bytes),
/// within the venue's own length and alphabet: what an id issuer writes for it
/// ([`ClientIds::ID_FORMAT`]). Every form is at most [`MAX_CLIENT_ORDER_ID`]
/// bytes of [`ClientOrderId`]'s alphabet, and different bytes always give
/// different ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IdFormat {
    /// 32 lower-case hex digits (Kraken's "short UUID"): fits every venue whose id
    /// is free text of at least 32 letters and digits.
    Hex,
    /// `0x` and 32 lower-case hex digits (Hyperliquid's `cloid`, 128 bits).
    Cloid,
    /// The UUID's text, 8-4-4-4-12 lower-case hex digits (Coinbase's `client_oid`).
    Uuid,
}

impl IdFormat {
    /// The id for `bytes` in this form.
    ///
    /// ```
    /// use ergon_venues::endpoint::IdFormat;
    /// let b = 0x0123_4567_89ab_4def_8123_4567_89ab_cdef_u128.to_be_bytes();
    /// assert_eq!(IdFormat::Hex.write(b).as_str(), "0123456789ab4def8123456789abcdef");
    /// assert_eq!(IdFormat::Cloid.write(b).as_str(), "0x0123456789ab4def8123456789abcdef");
    /// assert_eq!(IdFormat::Uuid.write(b).as_str(), "01234567-89ab-4def-8123-456789abcdef");
    /// ```
    pub fn write(self, bytes: [u8; 16]) -> ClientOrderId {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut s = ArrayString::<MAX_CLIENT_ORDER_ID>::new();
        if self == IdFormat::Cloid {
            s.push_str("0x");
        }
        for (i, b) in bytes.iter().enumerate() {
            if self == IdFormat::Uuid && matches!(i, 4 | 6 | 8 | 10) {
                s.push('-');
            }
            s.push(char::from(HEX[usize::from(b >> 4)]));
            s.push(char::from(HEX[usize::from(b & 15)]));
        }
        // At most 36 bytes of hex digits, `x` and `-`: always a valid id.
        ClientOrderId(s)
    }
}

/// A price or quantity as the caller formatted it: digits with at most one `.`
/// inside them (`0.1`, `42`, `1.50`), at most 32 bytes. See the module doc for why
/// this is text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Decimal<'a>(&'a str);

impl<'a> Decimal<'a> {
    /// Checks `text`.
    ///
    /// ```
    /// use ergon_venues::endpoint::Decimal;
    /// assert!(Decimal::new("0.1").is_ok());
    /// assert!(Decimal::new("1e3").is_err());
    /// assert!(Decimal::new("-1").is_err());
    /// assert!(Decimal::new(".5").is_err());
    /// ```
    pub fn new(text: &'a str) -> Result<Self, Error> {
        let b = text.as_bytes();
        let dots = b.iter().filter(|&&c| c == b'.').count();
        let ok = !b.is_empty()
            && b.len() <= 32
            && b.iter().all(|&c| c.is_ascii_digit() || c == b'.')
            && dots <= 1
            && b.first() != Some(&b'.')
            && b.last() != Some(&b'.');
        if ok {
            Ok(Decimal(text))
        } else {
            Err(Error::BadArgument("decimal"))
        }
    }

    /// The text.
    pub fn as_str(&self) -> &'a str {
        self.0
    }
}

/// Which side an order is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// Buy.
    Buy,
    /// Sell.
    Sell,
}

/// How an order executes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OrderType {
    /// A limit order with a time in force.
    Limit(TimeInForce),
    /// A limit order that is refused rather than taking liquidity (post-only).
    PostOnly,
    /// A market order (no price).
    Market,
}

/// How long a limit order stays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeInForce {
    /// Good till cancelled.
    Gtc,
    /// Immediate or cancel.
    Ioc,
    /// Fill or kill.
    Fok,
}

/// A symbol or instrument name as the venue spells it (`BTCUSDT`, `BTC-USDT-SWAP`,
/// `BTC`): 1 to 32 bytes of `A-Z a-z 0-9 - _ / .`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Symbol<'a>(&'a str);

impl<'a> Symbol<'a> {
    /// Checks `name`.
    pub fn new(name: &'a str) -> Result<Self, Error> {
        let ok = !name.is_empty()
            && name.len() <= 32
            && name
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"-_/.".contains(&c));
        if ok {
            Ok(Symbol(name))
        } else {
            Err(Error::BadArgument("symbol"))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &'a str {
        self.0
    }
}

/// A new order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewOrder<'a> {
    /// The symbol.
    pub symbol: Symbol<'a>,
    /// Buy or sell.
    pub side: Side,
    /// Limit, post-only or market.
    pub order_type: OrderType,
    /// The limit price (`None` only for a market order).
    pub price: Option<Decimal<'a>>,
    /// The quantity, in the venue's unit (base asset, contracts).
    pub quantity: Decimal<'a>,
    /// The caller's id for this order: the key of every reconcile.
    pub client_order_id: ClientOrderId,
    /// Only reduce a position (derivatives venues; refused where it means nothing).
    pub reduce_only: bool,
}

/// An order named by the caller's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderRef<'a> {
    /// The symbol.
    pub symbol: Symbol<'a>,
    /// The order's client order id.
    pub client_order_id: ClientOrderId,
}

/// Cancel one order and place another in one request (Binance Spot
/// `cancelReplace`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CancelReplace<'a> {
    /// The order to cancel (same symbol as `new`).
    pub cancel: ClientOrderId,
    /// The order to place.
    pub new: NewOrder<'a>,
}

/// Change an order's price or quantity in place; it keeps its client order id
/// (Binance futures modify, Bybit and OKX amend, Hyperliquid modify).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Amend<'a> {
    /// The order.
    pub order: OrderRef<'a>,
    /// Its side (venues that replace the whole order need it).
    pub side: Side,
    /// The new price, if it changes.
    pub price: Option<Decimal<'a>>,
    /// The new quantity, if it changes.
    pub quantity: Option<Decimal<'a>>,
}

/// What a request is for, as the caller counts it (`trade:order`, `mon:book`):
/// an index into a table of names the caller registered (the gateway's
/// `Gateway::label`). It is not sent; it only says whose budget a request spent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Label(u8);

impl Label {
    /// No label: counted with the unlabeled requests.
    pub const NONE: Label = Label(u8::MAX);

    /// The label at `index` of the caller's table (`u8::MAX` is [`Label::NONE`]).
    pub const fn new(index: u8) -> Self {
        Label(index)
    }

    /// Its index in the caller's table; `None` for [`Label::NONE`].
    pub const fn index(self) -> Option<u8> {
        match self.0 {
            u8::MAX => None,
            i => Some(i),
        }
    }
}

impl Default for Label {
    fn default() -> Self {
        Label::NONE
    }
}

/// A request prepared by an adapter, ready to charge and to send: see the module
/// doc. Only adapters fill it; the caller reads it.
///
/// Drive order: an [`Endpoints`] method fills it → `Budget::try_charge(parts())`
/// → write `method() target()`, `headers()`, `body()` → `Venue::on_response(kind(),
/// answer)` → `Budget::resend(verdict, parts(), class, deadline_ns(), now)` if it
/// did not run. After a failed preparation it is empty ([`Prepared::is_empty`]):
/// nothing to charge, nothing to send.
#[derive(Clone, Debug, Default)]
pub struct Prepared {
    kind: Option<Request<'static>>,
    parts: Parts,
    method: Option<Method>,
    bytes: Vec<u8>,
    target: Range<usize>,
    headers: ArrayVec<(&'static str, Range<usize>), MAX_HEADERS>,
    body: Range<usize>,
    deadline_ns: i64,
    ids: ArrayVec<ClientOrderId, MAX_BATCH>,
    symbol: ArrayString<32>,
    label: Label,
}

impl Prepared {
    /// An empty request whose buffer holds `capacity` bytes before it grows (1 KiB
    /// holds any single order; a 20-order batch body needs about 4 KiB).
    pub fn with_capacity(capacity: usize) -> Self {
        Prepared {
            bytes: Vec::with_capacity(capacity),
            ..Prepared::default()
        }
    }

    /// Whether nothing is prepared (new, or the last preparation failed).
    pub fn is_empty(&self) -> bool {
        self.kind.is_none()
    }

    /// The request kind, for [`Venue::on_response`]; `None` if empty.
    pub fn kind(&self) -> Option<Request<'static>> {
        self.kind
    }

    /// What the request charges, all or none.
    pub fn parts(&self) -> &[ergon_core::Part] {
        &self.parts
    }

    /// The method; `None` if empty.
    pub fn method(&self) -> Option<Method> {
        self.method
    }

    /// Path and query (`/api/v3/order?symbol=...&signature=...`).
    pub fn target(&self) -> &str {
        self.text(self.target.clone())
    }

    /// Headers to send besides `Host`, `Content-Length` and the connection's own.
    pub fn headers(&self) -> impl Iterator<Item = (&'static str, &str)> + '_ {
        self.headers
            .iter()
            .map(move |(name, at)| (*name, self.text(at.clone())))
    }

    /// The value of the header `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// The body (empty for most GET and DELETE requests).
    pub fn body(&self) -> &[u8] {
        self.bytes.get(self.body.clone()).unwrap_or(&[])
    }

    /// The end of the venue's acceptance window (timestamp + recvWindow, OKX
    /// `expTime`, Hyperliquid's nonce window) on the caller's clock: never re-send
    /// after it. For unsigned reads: `now_ns` + the adapter's receive window.
    pub fn deadline_ns(&self) -> i64 {
        self.deadline_ns
    }

    /// The client order id the request places, cancels, amends or queries (the
    /// first, for a batch); `None` for reads that name no order.
    pub fn client_order_id(&self) -> Option<&ClientOrderId> {
        self.ids.first()
    }

    /// Every client order id, in the order of the batch's items.
    pub fn client_order_ids(&self) -> &[ClientOrderId] {
        &self.ids
    }

    /// What the request is for ([`Label::NONE`] until [`Prepared::set_label`]).
    pub fn label(&self) -> Label {
        self.label
    }

    /// Labels the request, after it is prepared (each preparation starts
    /// unlabeled). The label changes nothing sent or charged; it says whose
    /// budget the request spent.
    pub fn set_label(&mut self, label: Label) {
        self.label = label;
    }

    /// The symbol the request names (the first order's, for a batch), so a
    /// reconcile queries the order where it was placed; `None` for requests that
    /// name none (the account, open orders of every symbol).
    pub fn symbol(&self) -> Option<Symbol<'_>> {
        Symbol::new(self.symbol.as_str()).ok()
    }

    /// Replaces what a prepared request charges (a batch cancel: the cancel
    /// limit once per order).
    pub(crate) fn set_parts(&mut self, parts: Parts) {
        self.parts = parts;
    }

    /// Exchanges the two requests, as `core::mem::swap` does, moving only the
    /// client order ids and headers in use: a `Prepared` is about 1.3 KB, most of it
    /// room for [`MAX_BATCH`] ids, and a ledger swaps one in on every submit (a whole
    /// swap was ~320 instructions of the send path, this ~60 for one order).
    pub fn swap_with(&mut self, other: &mut Prepared) {
        core::mem::swap(&mut self.kind, &mut other.kind);
        core::mem::swap(&mut self.parts, &mut other.parts);
        core::mem::swap(&mut self.method, &mut other.method);
        core::mem::swap(&mut self.bytes, &mut other.bytes);
        core::mem::swap(&mut self.target, &mut other.target);
        swap_used(&mut self.headers, &mut other.headers);
        core::mem::swap(&mut self.body, &mut other.body);
        core::mem::swap(&mut self.deadline_ns, &mut other.deadline_ns);
        swap_used(&mut self.ids, &mut other.ids);
        core::mem::swap(&mut self.symbol, &mut other.symbol);
        core::mem::swap(&mut self.label, &mut other.label);
    }

    fn text(&self, at: Range<usize>) -> &str {
        // Adapters write ASCII only (every argument is checked), so this never fails.
        self.bytes
            .get(at)
            .and_then(|b| core::str::from_utf8(b).ok())
            .unwrap_or("")
    }
}

/// Exchanges the elements of `a` and `b`, touching only those in use.
fn swap_used<T, const N: usize>(a: &mut ArrayVec<T, N>, b: &mut ArrayVec<T, N>) {
    let common = a.len().min(b.len());
    a[..common].swap_with_slice(&mut b[..common]);
    // The longer one's tail moves over; both have room for it (same capacity).
    if a.len() > common {
        b.extend(a.drain(common..));
    } else {
        a.extend(b.drain(common..));
    }
}

/// What adapters use to fill a [`Prepared`]: one writer per preparation, which
/// empties the request first and marks it ready last, so a failure in between
/// leaves it empty.
pub(crate) struct Writer<'p> {
    p: &'p mut Prepared,
    mark: usize,
}

impl<'p> Writer<'p> {
    /// Empties `p` and starts a request.
    pub(crate) fn start(p: &'p mut Prepared) -> Self {
        p.kind = None;
        p.method = None;
        p.parts.clear();
        p.bytes.clear();
        p.target = 0..0;
        p.headers.clear();
        p.body = 0..0;
        p.deadline_ns = 0;
        p.ids.clear();
        p.symbol.clear();
        p.label = Label::NONE;
        Writer { p, mark: 0 }
    }

    /// Appends raw bytes.
    pub(crate) fn put(&mut self, b: &[u8]) {
        self.p.bytes.extend_from_slice(b);
    }

    /// Appends a string.
    pub(crate) fn s(&mut self, s: &str) {
        self.put(s.as_bytes());
    }

    /// Appends a decimal integer, two digits a step from a table and the sign in
    /// the same buffer: one append (a 13-digit timestamp took ~140 instructions a
    /// digit at a time and two appends for a negative number).
    pub(crate) fn int(&mut self, n: i64) {
        const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
            2021222324252627282930313233343536373839\
            4041424344454647484950515253545556575859\
            6061626364656667686970717273747576777879\
            8081828384858687888990919293949596979899";
        let mut buf = [0u8; 20];
        let mut i = buf.len();
        let mut v = n.unsigned_abs();
        while v >= 100 {
            let pair = usize::from((v % 100) as u8) * 2;
            v /= 100;
            i -= 2;
            buf[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
        }
        if v >= 10 {
            let pair = usize::from(v as u8) * 2;
            i -= 2;
            buf[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
        } else {
            i -= 1;
            buf[i] = b'0' + v as u8;
        }
        if n < 0 {
            i -= 1;
            buf[i] = b'-';
        }
        self.put(&buf[i..]);
    }

    /// Appends lower-case hex of `bytes`, 32 bytes (a MAC) in one append: a
    /// signature is on every signed request's path, and an append per byte cost
    /// ~15 instructions a byte in capacity checks and calls.
    pub(crate) fn hex(&mut self, bytes: &[u8]) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for chunk in bytes.chunks(32) {
            let mut out = [0u8; 64];
            for (o, &b) in out.chunks_exact_mut(2).zip(chunk) {
                o[0] = HEX[usize::from(b >> 4)];
                o[1] = HEX[usize::from(b & 15)];
            }
            self.put(&out[..2 * chunk.len()]);
        }
    }

    /// Appends `s` percent-encoded: every byte but `A-Z a-z 0-9 - . _ ~` as `%XX`
    /// (a JSON value inside a query string).
    pub(crate) fn enc(&mut self, s: &str) {
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        for &c in s.as_bytes() {
            if c.is_ascii_alphanumeric() || b"-._~".contains(&c) {
                self.put(&[c]);
            } else {
                self.put(&[b'%', HEX[usize::from(c >> 4)], HEX[usize::from(c & 15)]]);
            }
        }
    }

    /// Appends `"name":"value"` after a `,` unless `first` (values are checked
    /// arguments: no quote or backslash to escape).
    pub(crate) fn json(&mut self, first: &mut bool, name: &str, value: &str) {
        if !core::mem::take(first) {
            self.s(",");
        }
        self.s("\"");
        self.s(name);
        self.s("\":\"");
        self.s(value);
        self.s("\"");
    }

    /// Appends standard base64 (with padding) of `bytes`.
    pub(crate) fn base64(&mut self, bytes: &[u8]) {
        const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for chunk in bytes.chunks(3) {
            let b = [
                chunk[0],
                chunk.get(1).copied().unwrap_or(0),
                chunk.get(2).copied().unwrap_or(0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            let out = [
                B64[(n >> 18) as usize & 63],
                B64[(n >> 12) as usize & 63],
                if chunk.len() > 1 {
                    B64[(n >> 6) as usize & 63]
                } else {
                    b'='
                },
                if chunk.len() > 2 {
                    B64[n as usize & 63]
                } else {
                    b'='
                },
            ];
            self.put(&out);
        }
    }

    /// Where the next byte goes.
    pub(crate) fn pos(&self) -> usize {
        self.p.bytes.len()
    }

    /// The bytes written in `at`.
    pub(crate) fn bytes(&self, at: Range<usize>) -> &[u8] {
        self.p.bytes.get(at).unwrap_or(&[])
    }

    /// Starts a span (target, header value or body) at the current position.
    pub(crate) fn open(&mut self) {
        self.mark = self.pos();
    }

    /// Ends the target span.
    pub(crate) fn close_target(&mut self) {
        self.p.target = self.mark..self.pos();
    }

    /// Ends a header value span, named `name`.
    pub(crate) fn close_header(&mut self, name: &'static str) -> Result<(), Error> {
        let at = self.mark..self.pos();
        self.p
            .headers
            .try_push((name, at))
            .map_err(|_| Error::BadArgument("too many headers"))
    }

    /// Writes a whole header.
    pub(crate) fn header(&mut self, name: &'static str, value: &[u8]) -> Result<(), Error> {
        self.open();
        self.put(value);
        self.close_header(name)
    }

    /// Ends the body span.
    pub(crate) fn close_body(&mut self) {
        self.p.body = self.mark..self.pos();
    }

    /// The body span written so far.
    pub(crate) fn body_span(&self) -> Range<usize> {
        self.p.body.clone()
    }

    /// Records the symbol the request names (`None`: none).
    pub(crate) fn symbol<'s>(&mut self, symbol: impl Into<Option<Symbol<'s>>>) {
        self.p.symbol.clear();
        if let Some(s) = symbol.into() {
            // A Symbol is at most 32 bytes: it always fits.
            let _ = self.p.symbol.try_push_str(s.as_str());
        }
    }

    /// Records a client order id.
    pub(crate) fn id(&mut self, id: ClientOrderId) -> Result<(), Error> {
        self.p
            .ids
            .try_push(id)
            .map_err(|_| Error::BadArgument("more orders than MAX_BATCH"))
    }

    /// Marks the request ready like [`Writer::finish`], with parts the adapter
    /// computed from state it keeps instead of `venue.parts(kind)` (Kraken's cancel
    /// and amend cost, by the age of the order it placed).
    pub(crate) fn finish_with(
        self,
        parts: Parts,
        kind: Request<'static>,
        method: Method,
        deadline_ns: i64,
    ) -> Result<&'p Prepared, Error> {
        self.p.parts = parts;
        self.p.kind = Some(kind);
        self.p.method = Some(method);
        self.p.deadline_ns = deadline_ns;
        Ok(self.p)
    }

    /// Marks the request ready: its kind, the parts `venue` charges for it, its
    /// method and deadline. The parts are asked of the venue here, from the kind
    /// the same call wrote the target for.
    pub(crate) fn finish<V: Venue + ?Sized>(
        self,
        venue: &V,
        kind: Request<'static>,
        method: Method,
        deadline_ns: i64,
    ) -> Result<&'p Prepared, Error> {
        let parts = venue.parts(kind)?;
        self.p.parts = parts;
        self.p.kind = Some(kind);
        self.p.method = Some(method);
        self.p.deadline_ns = deadline_ns;
        Ok(self.p)
    }
}

/// An HMAC-SHA256 key, keyed once; each signature clones the keyed state (no
/// allocation). Its `Debug` shows no key material.
#[derive(Clone)]
pub struct HmacKey(Hmac<Sha256>);

impl HmacKey {
    /// Keys HMAC-SHA256 with `secret`.
    pub fn new(secret: &[u8]) -> Self {
        // HMAC takes a key of any length; this never fails.
        HmacKey(Hmac::<Sha256>::new_from_slice(secret).unwrap_or_else(|_| unreachable!()))
    }

    /// The MAC of the concatenation of `pieces`.
    pub fn sign(&self, pieces: &[&[u8]]) -> [u8; 32] {
        let mut mac = self.0.clone();
        for p in pieces {
            mac.update(p);
        }
        mac.finalize().into_bytes().into()
    }
}

impl core::fmt::Debug for HmacKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("HmacKey(..)")
    }
}

/// An API key as the venue's header carries it: up to 128 bytes of printable ASCII.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ApiKey(ArrayString<128>);

impl ApiKey {
    /// Checks `key`.
    pub fn new(key: &str) -> Result<Self, Error> {
        if key.is_empty() || !key.bytes().all(|c| c.is_ascii_graphic()) {
            return Err(Error::BadArgument("api key"));
        }
        ArrayString::from(key)
            .map(ApiKey)
            .map_err(|_| Error::BadArgument("api key"))
    }

    /// The key.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl core::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("ApiKey(..)")
    }
}

/// An order's state at the venue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OrderState {
    /// Accepted, not yet on the book (Binance `PENDING_NEW`, Bybit `Created`).
    Pending,
    /// On the book, nothing filled.
    New,
    /// On the book, partly filled.
    PartiallyFilled,
    /// Wholly filled.
    Filled,
    /// Cancelled (partly filled or not).
    Canceled,
    /// Refused by the matching engine after it was accepted.
    Rejected,
    /// Expired by its time in force or the venue.
    Expired,
    /// A state the adapter does not know; read the venue's word yourself.
    Other,
}

impl OrderState {
    /// Whether the order can no longer fill.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            OrderState::Filled | OrderState::Canceled | OrderState::Rejected | OrderState::Expired
        )
    }
}

/// An order as the venue reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderInfo {
    /// Its state.
    pub state: OrderState,
    /// The venue's order id, as text.
    pub venue_order_id: ArrayString<64>,
    /// The quantity filled, as the venue wrote it, if the answer carries it.
    pub filled: Option<ArrayString<40>>,
}

/// The answer to an order query, for reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The venue knows the order.
    Found(OrderInfo),
    /// The venue says no such order exists (Binance -2013, an empty list on Bybit
    /// and OKX, Hyperliquid `unknownOid`): it never landed, or is gone from the
    /// venue's memory. Within the request's deadline, it never landed.
    NotFound,
    /// The answer says neither (an error, a throttle, a body that cannot be read):
    /// ask again.
    Unknown,
}

/// The answer to a new order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placed {
    /// The venue took the order.
    Accepted(OrderInfo),
    /// The venue surely refused it (its code says so).
    Refused,
    /// The answer does not say: reconcile by client order id.
    Unknown,
}

/// How a venue's client order ids are written by an issuer (the gateway's): a
/// trait of its own, so that [`Endpoints`] stays usable as `dyn Endpoints` (the
/// fuzz targets drive every venue through one).
pub trait ClientIds {
    /// The form of the ids (see [`IdFormat`]), within the rule the venue's
    /// documentation gives (each adapter cites the page).
    const ID_FORMAT: IdFormat;
}

/// The typed endpoints of one venue account: the trait a gateway is generic over.
///
/// Each method fills `out` (see [`Prepared`]) and returns it; `Err` leaves it
/// empty. The kinds a venue lacks return [`Error::Unsupported`].
pub trait Endpoints: Venue {
    /// A new order.
    fn new_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        order: &NewOrder<'_>,
        now_ns: i64,
    ) -> Result<&'p Prepared, Error>;

    /// Cancel one order by client order id.
    fn cancel<'p>(
        &mut self,
        out: &'p mut Prepared,
        order: &OrderRef<'_>,
        now_ns: i64,
    ) -> Result<&'p Prepared, Error>;

    /// Cancel one order and place another in one request.
    fn cancel_replace<'p>(
        &mut self,
        out: &'p mut Prepared,
        args: &CancelReplace<'_>,
        now_ns: i64,
    ) -> Result<&'p Prepared, Error> {
        let _ = (args, now_ns);
        Writer::start(out);
        Err(Error::Unsupported)
    }

    /// Change an order's price or quantity in place.
    fn amend<'p>(
        &mut self,
        out: &'p mut Prepared,
        args: &Amend<'_>,
        now_ns: i64,
    ) -> Result<&'p Prepared, Error> {
        let _ = (args, now_ns);
        Writer::start(out);
        Err(Error::Unsupported)
    }

    /// Query one order by client order id (for reconcile: read the answer with
    /// [`Endpoints::read_order`]).
    fn query_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        order: &OrderRef<'_>,
        now_ns: i64,
    ) -> Result<&'p Prepared, Error>;

    /// Query one order by client order id where the venue keeps the orders
    /// [`Endpoints::query_order`] no longer lists (Bybit's order history, which
    /// holds closed orders the real-time query has dropped): ask it after
    /// `query_order` answered [`Lookup::NotFound`], and read its answer with
    /// [`Endpoints::read_order`]. [`Error::Unsupported`] (the default) where
    /// `query_order` sees every order the venue remembers.
    fn query_closed_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        order: &OrderRef<'_>,
        now_ns: i64,
    ) -> Result<&'p Prepared, Error> {
        let _ = (order, now_ns);
        Writer::start(out);
        Err(Error::Unsupported)
    }

    /// The open orders of one symbol, or of every symbol.
    fn open_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Option<Symbol<'_>>,
        now_ns: i64,
    ) -> Result<&'p Prepared, Error>;

    /// The order book of `symbol`, `depth` levels a side (the weight follows it).
    fn book<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        depth: u32,
        now_ns: i64,
    ) -> Result<&'p Prepared, Error>;

    /// The account's balances.
    fn account<'p>(&mut self, out: &'p mut Prepared, now_ns: i64) -> Result<&'p Prepared, Error>;

    /// Several new orders in one request.
    fn batch_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        orders: &[NewOrder<'_>],
        now_ns: i64,
    ) -> Result<&'p Prepared, Error> {
        let _ = (orders, now_ns);
        Writer::start(out);
        Err(Error::Unsupported)
    }

    /// Several cancels in one request.
    fn batch_cancel<'p>(
        &mut self,
        out: &'p mut Prepared,
        orders: &[OrderRef<'_>],
        now_ns: i64,
    ) -> Result<&'p Prepared, Error> {
        let _ = (orders, now_ns);
        Writer::start(out);
        Err(Error::Unsupported)
    }

    /// Cancel every open order of `symbol` in one request (Binance Spot `DELETE
    /// openOrders`, Bybit `cancel-all`, Coinbase Exchange `DELETE /orders`). It
    /// answers as one cancel: Done once the venue ran it, whatever it found.
    fn cancel_all<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        now_ns: i64,
    ) -> Result<&'p Prepared, Error> {
        let _ = (symbol, now_ns);
        Writer::start(out);
        Err(Error::Unsupported)
    }

    /// Re-signs `p` (prepared by this adapter) for a re-send at `now`: a fresh
    /// timestamp on the current clock (after a re-anchor too), a new signature and
    /// deadline; what it asks of the venue is unchanged. [`Error::Unsupported`]
    /// (the default) where the adapter cannot: `p` is left as it was.
    fn restamp(&mut self, p: &mut Prepared, now_ns: i64) -> Result<(), Error> {
        let _ = (p, now_ns);
        Err(Error::Unsupported)
    }

    /// Reads the answer to [`Endpoints::query_order`] or
    /// [`Endpoints::query_closed_order`].
    fn read_order(&self, answer: &Response<'_>) -> Lookup;

    /// Reads the answer to [`Endpoints::new_order`].
    fn read_placed(&self, answer: &Response<'_>) -> Placed;
}

/// Copies a JSON string or number into fixed text, if it fits.
pub(crate) fn json_text<const N: usize>(v: crate::json::Value<'_>) -> Option<ArrayString<N>> {
    let mut buf = [0u8; 128];
    let s: &str = match v.kind() {
        crate::json::Kind::String => v.decode_str(&mut buf).ok()?,
        crate::json::Kind::Number => core::str::from_utf8(v.raw()).ok()?,
        _ => return None,
    };
    ArrayString::from(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every digit count, both signs, the ends of `i64` and each power of ten's
    /// neighbours: the pair table writes what `format!` does.
    #[test]
    fn int_writes_every_length_as_format_does() {
        let mut cases = vec![
            0i64,
            1,
            -1,
            9,
            10,
            99,
            100,
            i64::MAX,
            i64::MIN,
            i64::MIN + 1,
        ];
        let mut p10 = 1i64;
        for _ in 0..18 {
            p10 *= 10;
            for n in [p10 - 1, p10, p10 + 1, p10 * 9 / 7] {
                cases.extend([n, -n]);
            }
        }
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push(x as i64 >> (x % 64));
        }
        for n in cases {
            let mut p = Prepared::default();
            let mut w = Writer::start(&mut p);
            w.int(n);
            let end = w.pos();
            assert_eq!(w.bytes(0..end), n.to_string().as_bytes(), "{n}");
        }
    }

    #[test]
    fn writer_encodings() {
        let mut p = Prepared::default();
        let mut w = Writer::start(&mut p);
        w.int(-1_499_827_319_559);
        w.s(" ");
        w.int(0);
        w.s(" ");
        w.hex(&[0x0f, 0xa0]);
        w.s(" ");
        for s in [&b""[..], b"f", b"fo", b"foo", b"foob", b"fooba", b"foobar"] {
            w.base64(s);
            w.s("|");
        }
        w.enc("[{\"a\":1}]");
        let n = w.pos();
        assert_eq!(
            w.bytes(0..n),
            &b"-1499827319559 0 0fa0 |Zg==|Zm8=|Zm9v|Zm9vYg==|Zm9vYmE=|Zm9vYmFy|%5B%7B%22a%22%3A1%7D%5D"[..]
        );
    }

    /// `swap_with` leaves both requests as `mem::swap` would, whichever holds more
    /// ids and headers.
    #[test]
    fn swap_with_is_a_swap() {
        let filled = |ids: usize, headers: usize, tag: &str| {
            let mut p = Prepared::with_capacity(64);
            let mut w = Writer::start(&mut p);
            w.s(tag);
            w.close_target();
            for i in 0..ids {
                w.id(ClientOrderId::new(&format!("{tag}{i}")).unwrap())
                    .unwrap();
            }
            for h in ["A", "B", "C"].iter().take(headers) {
                w.open();
                w.s(tag);
                w.close_header(h).unwrap();
            }
            p.deadline_ns = ids as i64;
            p.label = Label::new(headers as u8);
            p
        };
        for (i, j, h, k) in [
            (0, 0, 0, 0),
            (1, 0, 1, 3),
            (0, 3, 2, 0),
            (2, 2, 1, 1),
            (MAX_BATCH, 1, 3, 2),
        ] {
            let (mut a, mut b) = (filled(i, h, "a"), filled(j, k, "b"));
            let (mut x, mut y) = (a.clone(), b.clone());
            a.swap_with(&mut b);
            core::mem::swap(&mut x, &mut y);
            assert_eq!(format!("{a:?}"), format!("{x:?}"), "{i} {j} {h} {k}");
            assert_eq!(format!("{b:?}"), format!("{y:?}"), "{i} {j} {h} {k}");
        }
    }

    /// Hex is written 32 bytes at a time: every length across those steps gives
    /// the byte-by-byte encoding.
    #[test]
    fn hex_of_every_length_across_its_steps() {
        let src: Vec<u8> = (0..=255u8).rev().collect();
        for n in [0, 1, 31, 32, 33, 64, 65, 100] {
            let mut p = Prepared::default();
            let mut w = Writer::start(&mut p);
            w.hex(&src[..n]);
            let want: String = src[..n].iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(w.bytes(0..w.pos()), want.as_bytes(), "{n} bytes");
        }
    }

    #[test]
    fn arguments_are_checked() {
        assert!(ClientOrderId::new(&"x".repeat(36)).is_ok());
        assert!(ClientOrderId::new(&"x".repeat(37)).is_err());
        assert!(ClientOrderId::new("a b").is_err());
        assert!(Symbol::new("BTC-USDT-SWAP").is_ok());
        assert!(Symbol::new("BTC&x=1").is_err());
        assert!(Decimal::new("1.2.3").is_err());
        assert!(Decimal::new("1.").is_err());
        assert!(ApiKey::new("key with space").is_err());
        assert_eq!(format!("{:?}", HmacKey::new(b"secret")), "HmacKey(..)");
    }
}
