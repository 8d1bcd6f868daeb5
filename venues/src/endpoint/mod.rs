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

use arrayvec::ArrayString;

use crate::adapt::{Error, Venue};
use crate::response::Response;

mod keys;
mod prepared;
mod template;
mod text;

pub use keys::{is_pem_private_key, ApiKey, Ed25519Key, HmacKey, SignKey};
pub(crate) use prepared::Writer;
pub use prepared::{Http, Prepared};
pub use template::Fill;
pub(crate) use template::{decimal, Field, Runs, Values};
pub use text::Text;

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

    /// The page after `cursor` of [`Endpoints::open_orders`], where the venue
    /// answers that list by pages; `cursor` is the venue's token as its previous
    /// page gave it. [`Error::Unsupported`] (the default) where one answer lists
    /// every open order.
    fn open_orders_after<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Option<Symbol<'_>>,
        cursor: &[u8],
        now_ns: i64,
    ) -> Result<&'p Prepared, Error> {
        let _ = (symbol, cursor, now_ns);
        Writer::start(out);
        Err(Error::Unsupported)
    }

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

    /// Writes, from now on, the requests a WebSocket API lane carries in place of
    /// REST (new orders, cancels, cancel-replaces, amends, order queries) with their signature
    /// pending ([`Prepared::signature_pending`]), while `on`: a gateway whose lane
    /// is ready turns it on, so an order the lane sends is never signed for
    /// REST, and signs one that goes over HTTP after all with
    /// [`Endpoints::sign_pending`]. Everything else is written as before. The
    /// default does nothing: the adapter always signs.
    fn defer_signatures(&mut self, on: bool) {
        let _ = on;
    }

    /// Signs `p`, prepared by this adapter with its signature pending: byte for
    /// byte the request it would have written signing at once (the same
    /// timestamp and deadline), allocating nothing. Nothing pending: `Ok`, `p`
    /// unchanged. `Err` (and `p` left pending, never to be sent over HTTP) if the
    /// adapter cannot: the default, for adapters that never defer, or no key.
    fn sign_pending(&self, p: &mut Prepared) -> Result<(), Error> {
        match p.signature_pending() {
            true => Err(Error::Unsupported),
            false => Ok(()),
        }
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
