//! The bytes in the slots: a typed endpoint call (submit ring) and a typed event
//! (event ring). Little-endian, length-prefixed text; decoding checks everything
//! (the other side is another process) and never panics.

use ergon_core::{Class, Why};
use ergon_venues::endpoint::{
    CancelReplace, ClientOrderId, Decimal, NewOrder, OrderRef, OrderState, OrderType, Side, Symbol,
    TimeInForce,
};

use ergon_venues::binance_spot_ws::Execution;

use super::event::ShmEvent;
use crate::events::{Expiry, ItemFate, Tag, OPEN_ORDERS, ORDER_UPDATE, PROTECTION};

/// One typed endpoint call, as a strategy process asks for it; the gateway
/// prepares (stamps, signs) it with the account's endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call<'a> {
    /// [`Endpoints::new_order`](ergon_venues::endpoint::Endpoints::new_order).
    NewOrder(NewOrder<'a>),
    /// [`Endpoints::cancel`](ergon_venues::endpoint::Endpoints::cancel).
    Cancel(OrderRef<'a>),
    /// [`Endpoints::cancel_replace`](ergon_venues::endpoint::Endpoints::cancel_replace).
    CancelReplace(CancelReplace<'a>),
    /// [`Endpoints::query_order`](ergon_venues::endpoint::Endpoints::query_order).
    Query(OrderRef<'a>),
    /// [`Endpoints::open_orders`](ergon_venues::endpoint::Endpoints::open_orders).
    /// Its [`ShmEvent::Applied`] body is not the venue's answer (which lists
    /// every client's orders) but the caller's own open client order ids, one a
    /// line, as [`ShmEvent::OpenOrders`].
    OpenOrders(Option<Symbol<'a>>),
    /// [`Endpoints::book`](ergon_venues::endpoint::Endpoints::book).
    Book {
        /// The symbol.
        symbol: Symbol<'a>,
        /// Levels a side.
        depth: u32,
    },
    /// [`Endpoints::account`](ergon_venues::endpoint::Endpoints::account).
    Account,
}

/// A slot that does not decode: what in it was wrong.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BadMessage {
    /// The slot ended before a field did.
    Short,
    /// A text field is not UTF-8.
    Text,
    /// A symbol that is not a valid symbol.
    Symbol,
    /// A client order id that is not a valid one.
    ClientOrderId,
    /// A quantity that is not a decimal number.
    Decimal,
    /// A side byte other than buy (0) or sell (1).
    Side,
    /// An order-type byte out of range.
    OrderType,
    /// A price that is not a decimal number.
    Price,
    /// A class byte other than urgent, normal or bulk.
    Class,
    /// A book depth over `u32::MAX`.
    Depth,
    /// A call kind byte out of range.
    CallKind,
    /// Bytes after the end of a call.
    TrailingBytes,
    /// An order-state byte out of range, or none in an order update.
    OrderState,
    /// An order update's filled quantity that does not fit.
    Filled,
    /// An order update's venue order id that does not fit.
    VenueOrderId,
    /// Bytes after the end of an order update.
    LongOrderUpdate,
    /// An event shorter than its fixed head.
    ShortEvent,
    /// A Limited event's reason byte out of range.
    Why,
    /// A Halted event's bucket that is not an index.
    Bucket,
    /// An event kind byte out of range.
    EventKind,
    /// A part's fate in a BatchSettled body that is not one.
    Fate,
    /// An Expired event's reason byte out of range.
    Expiry,
}

impl BadMessage {
    /// What was wrong, in a few words (the text after `bad message: `).
    pub fn what(&self) -> &'static str {
        match self {
            BadMessage::Short => "short",
            BadMessage::Text => "text",
            BadMessage::Symbol => "symbol",
            BadMessage::ClientOrderId => "client order id",
            BadMessage::Decimal => "decimal",
            BadMessage::Side => "side",
            BadMessage::OrderType => "order type",
            BadMessage::Price => "price",
            BadMessage::Class => "class",
            BadMessage::Depth => "depth",
            BadMessage::CallKind => "call kind",
            BadMessage::TrailingBytes => "trailing bytes",
            BadMessage::OrderState => "order state",
            BadMessage::Filled => "filled",
            BadMessage::VenueOrderId => "venue order id",
            BadMessage::LongOrderUpdate => "long order update",
            BadMessage::ShortEvent => "short event",
            BadMessage::Why => "why",
            BadMessage::Bucket => "bucket",
            BadMessage::EventKind => "event kind",
            BadMessage::Fate => "part fate",
            BadMessage::Expiry => "expiry",
        }
    }

    /// Always [`Culprit::Peer`](ergon_io::Culprit::Peer): only decoding finds it,
    /// in a slot the process at the other end of the ring wrote (encoding never
    /// writes a slot that does not decode).
    pub fn culprit(&self) -> ergon_io::Culprit {
        match self {
            BadMessage::Short
            | BadMessage::Text
            | BadMessage::Symbol
            | BadMessage::ClientOrderId
            | BadMessage::Decimal
            | BadMessage::Side
            | BadMessage::OrderType
            | BadMessage::Price
            | BadMessage::Class
            | BadMessage::Depth
            | BadMessage::CallKind
            | BadMessage::TrailingBytes
            | BadMessage::OrderState
            | BadMessage::Filled
            | BadMessage::VenueOrderId
            | BadMessage::LongOrderUpdate
            | BadMessage::ShortEvent
            | BadMessage::Why
            | BadMessage::Bucket
            | BadMessage::EventKind
            | BadMessage::Fate
            | BadMessage::Expiry => ergon_io::Culprit::Peer,
        }
    }
}

impl core::fmt::Display for BadMessage {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "bad message: {}", self.what())
    }
}

impl std::error::Error for BadMessage {}

struct W<'b> {
    b: &'b mut [u8],
    n: usize,
    ok: bool,
}

impl W<'_> {
    fn put(&mut self, x: &[u8]) {
        match self.b.get_mut(self.n..self.n + x.len()) {
            Some(d) if self.ok => {
                d.copy_from_slice(x);
                self.n += x.len();
            }
            _ => self.ok = false,
        }
    }
    fn u8(&mut self, x: u8) {
        self.put(&[x]);
    }
    fn u64(&mut self, x: u64) {
        self.put(&x.to_le_bytes());
    }
    fn s(&mut self, x: &str) {
        match u8::try_from(x.len()) {
            Ok(n) => {
                self.u8(n);
                self.put(x.as_bytes());
            }
            Err(_) => self.ok = false,
        }
    }
}

struct R<'b> {
    b: &'b [u8],
}

impl<'b> R<'b> {
    fn take(&mut self, n: usize) -> Result<&'b [u8], BadMessage> {
        if self.b.len() < n {
            return Err(BadMessage::Short);
        }
        let (a, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, BadMessage> {
        Ok(self.take(1)?[0])
    }
    fn u64(&mut self) -> Result<u64, BadMessage> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    fn s(&mut self) -> Result<&'b str, BadMessage> {
        let n = self.u8()? as usize;
        core::str::from_utf8(self.take(n)?).map_err(|_| BadMessage::Text)
    }
    fn symbol(&mut self) -> Result<Symbol<'b>, BadMessage> {
        Symbol::new(self.s()?).map_err(|_| BadMessage::Symbol)
    }
    fn cid(&mut self) -> Result<ClientOrderId, BadMessage> {
        ClientOrderId::new(self.s()?).map_err(|_| BadMessage::ClientOrderId)
    }
    fn dec(&mut self) -> Result<Decimal<'b>, BadMessage> {
        Decimal::new(self.s()?).map_err(|_| BadMessage::Decimal)
    }
}

fn class_byte(c: Class) -> u8 {
    match c {
        Class::Urgent => 0,
        Class::Normal => 1,
        Class::Bulk => 2,
    }
}

fn put_order(w: &mut W<'_>, o: &NewOrder<'_>) {
    w.s(o.symbol.as_str());
    w.u8(match o.side {
        Side::Buy => 0,
        Side::Sell => 1,
    });
    w.u8(match o.order_type {
        OrderType::Limit(TimeInForce::Gtc) => 0,
        OrderType::Limit(TimeInForce::Ioc) => 1,
        OrderType::Limit(TimeInForce::Fok) => 2,
        OrderType::PostOnly => 3,
        OrderType::Market => 4,
    });
    w.s(o.price.map_or("", |p| p.as_str()));
    w.s(o.quantity.as_str());
    w.s(o.client_order_id.as_str());
    w.u8(o.reduce_only as u8);
}

fn get_order<'b>(r: &mut R<'b>) -> Result<NewOrder<'b>, BadMessage> {
    let symbol = r.symbol()?;
    let side = match r.u8()? {
        0 => Side::Buy,
        1 => Side::Sell,
        _ => return Err(BadMessage::Side),
    };
    let order_type = match r.u8()? {
        0 => OrderType::Limit(TimeInForce::Gtc),
        1 => OrderType::Limit(TimeInForce::Ioc),
        2 => OrderType::Limit(TimeInForce::Fok),
        3 => OrderType::PostOnly,
        4 => OrderType::Market,
        _ => return Err(BadMessage::OrderType),
    };
    let price = match r.s()? {
        "" => None,
        p => Some(Decimal::new(p).map_err(|_| BadMessage::Price)?),
    };
    Ok(NewOrder {
        symbol,
        side,
        order_type,
        price,
        quantity: r.dec()?,
        client_order_id: r.cid()?,
        reduce_only: r.u8()? != 0,
    })
}

/// Writes `call` into `out`; the bytes used, or None if it does not fit.
pub fn encode_call(call: &Call<'_>, class: Class, tag: Tag, out: &mut [u8]) -> Option<usize> {
    let mut w = W {
        b: out,
        n: 0,
        ok: true,
    };
    w.u8(class_byte(class));
    w.u64(tag);
    match call {
        Call::NewOrder(o) => {
            w.u8(1);
            put_order(&mut w, o);
        }
        Call::Cancel(o) | Call::Query(o) => {
            w.u8(if matches!(call, Call::Cancel(_)) {
                2
            } else {
                4
            });
            w.s(o.symbol.as_str());
            w.s(o.client_order_id.as_str());
        }
        Call::CancelReplace(c) => {
            w.u8(3);
            w.s(c.cancel.as_str());
            put_order(&mut w, &c.new);
        }
        Call::OpenOrders(s) => {
            w.u8(5);
            w.s(s.map_or("", |s| s.as_str()));
        }
        Call::Book { symbol, depth } => {
            w.u8(6);
            w.s(symbol.as_str());
            w.u64(u64::from(*depth));
        }
        Call::Account => w.u8(7),
    }
    w.ok.then_some(w.n)
}

/// Reads a call written by [`encode_call`].
pub fn decode_call(b: &[u8]) -> Result<(Call<'_>, Class, Tag), BadMessage> {
    let mut r = R { b };
    let class = match r.u8()? {
        0 => Class::Urgent,
        1 => Class::Normal,
        2 => Class::Bulk,
        _ => return Err(BadMessage::Class),
    };
    let tag = r.u64()?;
    let call = match r.u8()? {
        1 => Call::NewOrder(get_order(&mut r)?),
        k @ (2 | 4) => {
            let o = OrderRef {
                symbol: r.symbol()?,
                client_order_id: r.cid()?,
            };
            if k == 2 {
                Call::Cancel(o)
            } else {
                Call::Query(o)
            }
        }
        3 => {
            let cancel = r.cid()?;
            Call::CancelReplace(CancelReplace {
                cancel,
                new: get_order(&mut r)?,
            })
        }
        5 => match r.s()? {
            "" => Call::OpenOrders(None),
            s => Call::OpenOrders(Some(Symbol::new(s).map_err(|_| BadMessage::Symbol)?)),
        },
        6 => {
            let symbol = r.symbol()?;
            let depth = u32::try_from(r.u64()?).map_err(|_| BadMessage::Depth)?;
            Call::Book { symbol, depth }
        }
        7 => Call::Account,
        _ => return Err(BadMessage::CallKind),
    };
    if !r.b.is_empty() {
        return Err(BadMessage::TrailingBytes);
    }
    Ok((call, class, tag))
}

fn why_byte(w: Why) -> u8 {
    match w {
        Why::Full => 0,
        Why::Held => 1,
        Why::Halted => 2,
        Why::TooBig => 3,
        Why::Foreign => 4,
        Why::Receipts => 5,
        Why::Closed => 6,
    }
}

fn state_byte(s: Option<OrderState>) -> u8 {
    match s {
        None => 0,
        Some(OrderState::Pending) => 1,
        Some(OrderState::New) => 2,
        Some(OrderState::PartiallyFilled) => 3,
        Some(OrderState::Filled) => 4,
        Some(OrderState::Canceled) => 5,
        Some(OrderState::Rejected) => 6,
        Some(OrderState::Expired) => 7,
        Some(_) => 8,
    }
}

/// Bytes of one part's fate in an [`ShmEvent::BatchSettled`] body: its index
/// and its fate ([`fate_bytes`]).
pub const FATE_BYTES: usize = 3;

/// One part's fate as [`ShmEvent::BatchSettled`]'s body carries it: its index,
/// the fate (0 Applied, 1 Rejected, 2 NotRun, 3 Found, 4 NeverRan, 5
/// Unresolved) and, for Found, the order's state (as in `Reconciled`).
pub fn fate_bytes(item: u8, fate: ItemFate) -> [u8; FATE_BYTES] {
    let (f, state) = match fate {
        ItemFate::Applied => (0, 0),
        ItemFate::Rejected => (1, 0),
        ItemFate::NotRun => (2, 0),
        ItemFate::Found(s) => (3, state_byte(Some(s))),
        ItemFate::NeverRan => (4, 0),
        ItemFate::Unresolved => (5, 0),
    };
    [item, f, state]
}

/// The parts' fates in an [`ShmEvent::BatchSettled`] body, each its index and
/// its fate; an error for bytes that are not fates (the body is another
/// process's: checked, never trusted).
pub fn item_fates(body: &[u8]) -> impl Iterator<Item = Result<(u8, ItemFate), BadMessage>> + '_ {
    let whole = body.len() % FATE_BYTES == 0;
    let bad = (!whole).then_some(Err(BadMessage::Fate));
    body.chunks_exact(FATE_BYTES)
        .map(|c| Ok((c[0], fate_of(c[1], c[2])?)))
        .chain(bad)
}

/// A fate and its order state as [`fate_bytes`] writes them.
fn fate_of(f: u8, state: u8) -> Result<ItemFate, BadMessage> {
    Ok(match (f, state) {
        (0, 0) => ItemFate::Applied,
        (1, 0) => ItemFate::Rejected,
        (2, 0) => ItemFate::NotRun,
        (3, s) => ItemFate::Found(state_of(s)?.ok_or(BadMessage::OrderState)?),
        (4, 0) => ItemFate::NeverRan,
        (5, 0) => ItemFate::Unresolved,
        _ => return Err(BadMessage::Fate),
    })
}

fn expiry_byte(e: Expiry) -> u8 {
    match e {
        Expiry::Deadline => 0,
        Expiry::Resends => 1,
        Expiry::Unsigned => 2,
    }
}

/// Header bytes of an encoded event before its body.
pub const EVENT_HEAD: usize = 1 + 8 + 8 + 1 + 1;

/// Writes `ev` and as much of `body` as fits into `out`; the bytes used. The
/// body is cut at the slot's end (flagged, so the reader knows). An
/// [`ShmEvent::OrderUpdate`] carries its fields where the body goes (`body` is
/// not written); 0 if they do not fit.
pub fn encode_event(ev: &ShmEvent, body: &[u8], out: &mut [u8]) -> usize {
    if let ShmEvent::OrderUpdate(x) = ev {
        return encode_update(x, out);
    }
    let (kind, tag, a, b) = match *ev {
        ShmEvent::Applied { tag } => (1, tag, 0, 0),
        ShmEvent::Rejected { tag } => (2, tag, 0, 0),
        ShmEvent::Limited {
            tag,
            why,
            ready_in_ns,
        } => (3, tag, ready_in_ns, why_byte(why)),
        ShmEvent::Retrying { tag, in_ns } => (4, tag, in_ns, 0),
        ShmEvent::Expired { tag, why } => (5, tag, 0, expiry_byte(why)),
        ShmEvent::Reconciling { tag } => (6, tag, 0, 0),
        ShmEvent::Reconciled { tag, found } => (7, tag, 0, state_byte(found)),
        ShmEvent::OpenOrders { age_ns } => (8, OPEN_ORDERS, age_ns, 0),
        ShmEvent::Halted { tag, bucket } => (9, tag, i64::try_from(bucket).unwrap_or(-1), 0),
        ShmEvent::Lost { tag } => (10, tag, 0, 0),
        ShmEvent::Unresolved { tag } => (12, tag, 0, 0),
        ShmEvent::Late { tag, found } => (13, tag, 0, state_byte(Some(found))),
        ShmEvent::DuplicateId { tag } => (14, tag, 0, 0),
        ShmEvent::NotYours { tag } => (15, tag, 0, 0),
        ShmEvent::BatchSettled { tag } => (16, tag, 0, 0),
        ShmEvent::Item { tag, item, fate } => {
            let [item, f, state] = fate_bytes(item, fate);
            (17, tag, i64::from(item) | i64::from(state) << 8, f)
        }
        ShmEvent::Protection { fires_in_ns } => (18, PROTECTION, fires_in_ns, 0),
        ShmEvent::ProtectionFired => (19, PROTECTION, 0, 0),
        ShmEvent::OrderUpdate(_) => return 0,
    };
    if out.len() < EVENT_HEAD {
        return 0;
    }
    let room = out.len() - EVENT_HEAD;
    let n = body.len().min(room);
    out[0] = kind;
    out[1..9].copy_from_slice(&tag.to_le_bytes());
    out[9..17].copy_from_slice(&a.to_le_bytes());
    out[17] = b;
    out[18] = u8::from(n < body.len());
    out[EVENT_HEAD..EVENT_HEAD + n].copy_from_slice(&body[..n]);
    EVENT_HEAD + n
}

fn encode_update(x: &Execution, out: &mut [u8]) -> usize {
    let mut w = W {
        b: out,
        n: 0,
        ok: true,
    };
    w.u8(11);
    w.u64(ORDER_UPDATE);
    w.u64(x.subscription_id);
    w.u8(state_byte(Some(x.state)));
    w.u8(0);
    w.s(x.client_order_id.as_str());
    w.s(x.orig_client_order_id.as_ref().map_or("", |c| c.as_str()));
    w.s(&x.filled);
    w.s(&x.venue_order_id);
    if w.ok {
        w.n
    } else {
        0
    }
}

fn state_of(x: u8) -> Result<Option<OrderState>, BadMessage> {
    Ok(match x {
        0 => None,
        1 => Some(OrderState::Pending),
        2 => Some(OrderState::New),
        3 => Some(OrderState::PartiallyFilled),
        4 => Some(OrderState::Filled),
        5 => Some(OrderState::Canceled),
        6 => Some(OrderState::Rejected),
        7 => Some(OrderState::Expired),
        8 => Some(OrderState::Other),
        _ => return Err(BadMessage::OrderState),
    })
}

fn decode_update(subscription_id: u64, state: u8, body: &[u8]) -> Result<Execution, BadMessage> {
    let mut r = R { b: body };
    let state = state_of(state)?.ok_or(BadMessage::OrderState)?;
    let client_order_id = r.cid()?;
    let orig_client_order_id = match r.s()? {
        "" => None,
        c => Some(ClientOrderId::new(c).map_err(|_| BadMessage::ClientOrderId)?),
    };
    let filled = r.s()?.try_into().map_err(|_| BadMessage::Filled)?;
    let venue_order_id = r.s()?.try_into().map_err(|_| BadMessage::VenueOrderId)?;
    if !r.b.is_empty() {
        return Err(BadMessage::LongOrderUpdate);
    }
    Ok(Execution {
        subscription_id,
        client_order_id,
        orig_client_order_id,
        state,
        filled,
        venue_order_id,
    })
}

/// Reads an event written by [`encode_event`]: the event, its body, and whether
/// the body was cut.
pub fn decode_event(b: &[u8]) -> Result<(ShmEvent, &[u8], bool), BadMessage> {
    if b.len() < EVENT_HEAD {
        return Err(BadMessage::ShortEvent);
    }
    let mut t = [0u8; 8];
    t.copy_from_slice(&b[1..9]);
    let tag = u64::from_le_bytes(t);
    t.copy_from_slice(&b[9..17]);
    let a = i64::from_le_bytes(t);
    let x = b[17];
    let ev = match b[0] {
        1 => ShmEvent::Applied { tag },
        2 => ShmEvent::Rejected { tag },
        3 => ShmEvent::Limited {
            tag,
            why: match x {
                0 => Why::Full,
                1 => Why::Held,
                2 => Why::Halted,
                3 => Why::TooBig,
                4 => Why::Foreign,
                5 => Why::Receipts,
                6 => Why::Closed,
                _ => return Err(BadMessage::Why),
            },
            ready_in_ns: a,
        },
        4 => ShmEvent::Retrying { tag, in_ns: a },
        5 => ShmEvent::Expired {
            tag,
            why: match x {
                0 => Expiry::Deadline,
                1 => Expiry::Resends,
                2 => Expiry::Unsigned,
                _ => return Err(BadMessage::Expiry),
            },
        },
        6 => ShmEvent::Reconciling { tag },
        7 => ShmEvent::Reconciled {
            tag,
            found: state_of(x)?,
        },
        8 => ShmEvent::OpenOrders { age_ns: a },
        9 => ShmEvent::Halted {
            tag,
            bucket: usize::try_from(a).map_err(|_| BadMessage::Bucket)?,
        },
        10 => ShmEvent::Lost { tag },
        11 => {
            let x = decode_update(a as u64, x, &b[EVENT_HEAD..])?;
            return Ok((ShmEvent::OrderUpdate(x), &[], false));
        }
        12 => ShmEvent::Unresolved { tag },
        13 => ShmEvent::Late {
            tag,
            found: state_of(x)?.ok_or(BadMessage::OrderState)?,
        },
        14 => ShmEvent::DuplicateId { tag },
        15 => ShmEvent::NotYours { tag },
        16 => ShmEvent::BatchSettled { tag },
        17 => {
            let (item, state) = match u16::try_from(a) {
                Ok(v) => (v as u8, (v >> 8) as u8),
                Err(_) => return Err(BadMessage::Fate),
            };
            ShmEvent::Item {
                tag,
                item,
                fate: fate_of(x, state)?,
            }
        }
        18 => ShmEvent::Protection { fires_in_ns: a },
        19 => ShmEvent::ProtectionFired,
        _ => return Err(BadMessage::EventKind),
    };
    Ok((ev, &b[EVENT_HEAD..], b[18] != 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(cid: &str) -> NewOrder<'_> {
        NewOrder {
            symbol: Symbol::new("BTCUSDT").unwrap(),
            side: Side::Sell,
            order_type: OrderType::Limit(TimeInForce::Ioc),
            price: Decimal::new("50000.05").ok(),
            quantity: Decimal::new("0.010").unwrap(),
            client_order_id: ClientOrderId::new(cid).unwrap(),
            reduce_only: true,
        }
    }

    #[test]
    fn every_call_round_trips_and_truncations_are_errors() {
        let s = Symbol::new("BTC-USDT-SWAP").unwrap();
        let r = OrderRef {
            symbol: s,
            client_order_id: ClientOrderId::new("abc").unwrap(),
        };
        let calls = [
            Call::NewOrder(order("x1")),
            Call::Cancel(r),
            Call::Query(r),
            Call::CancelReplace(CancelReplace {
                cancel: ClientOrderId::new("old").unwrap(),
                new: order("new"),
            }),
            Call::OpenOrders(None),
            Call::OpenOrders(Some(s)),
            Call::Book {
                symbol: s,
                depth: 100,
            },
            Call::Account,
        ];
        let mut buf = [0u8; 252];
        for (i, c) in calls.iter().enumerate() {
            let n = encode_call(c, Class::Bulk, i as u64, &mut buf).unwrap();
            assert_eq!(decode_call(&buf[..n]), Ok((*c, Class::Bulk, i as u64)));
            for cut in 0..n {
                assert!(decode_call(&buf[..cut]).is_err(), "{c:?} cut at {cut}");
            }
            assert_eq!(encode_call(c, Class::Bulk, 0, &mut buf[..n - 1]), None);
        }
    }

    #[test]
    fn events_round_trip_and_bodies_are_cut_at_the_slot() {
        let evs = [
            ShmEvent::Applied { tag: 1 },
            ShmEvent::Limited {
                tag: 2,
                why: Why::Held,
                ready_in_ns: -5,
            },
            ShmEvent::Reconciled {
                tag: 3,
                found: Some(OrderState::PartiallyFilled),
            },
            ShmEvent::Halted { tag: 4, bucket: 7 },
            ShmEvent::OpenOrders { age_ns: 99 },
            ShmEvent::Lost { tag: 5 },
        ];
        let mut buf = [0u8; 64];
        for e in evs {
            let n = encode_event(&e, b"body", &mut buf);
            assert_eq!(decode_event(&buf[..n]), Ok((e, &b"body"[..], false)));
        }
        let x = Execution {
            subscription_id: 3,
            client_order_id: ClientOrderId::new("mm1b7").unwrap(),
            orig_client_order_id: ClientOrderId::new("mm1b2").ok(),
            state: OrderState::Canceled,
            filled: "0.00400000".try_into().unwrap(),
            venue_order_id: "12345".try_into().unwrap(),
        };
        let up = ShmEvent::OrderUpdate(x);
        let mut big = [0u8; 256];
        let n = encode_event(&up, b"ignored", &mut big);
        assert_eq!(decode_event(&big[..n]), Ok((up, &[][..], false)));
        assert_eq!(up.tag(), ORDER_UPDATE);
        assert!(!up.is_final());
        for cut in EVENT_HEAD..n {
            assert!(decode_event(&big[..cut]).is_err(), "cut at {cut}");
        }
        assert_eq!(encode_event(&up, &[], &mut big[..n - 1]), 0, "does not fit");
        let n = encode_event(&evs[0], &[7u8; 100], &mut buf);
        let (_, body, cut) = decode_event(&buf[..n]).unwrap();
        assert!(cut && body.len() == 64 - EVENT_HEAD);
        buf[0] = 77;
        assert!(decode_event(&buf).is_err());
    }

    /// Issue 39: a request of several parts ends BatchSettled, its parts' fates in
    /// its body; bytes that are not fates are an error naming them, never a panic.
    #[test]
    fn batch_settled_carries_each_parts_fate() {
        let fates = [
            (0, ItemFate::Rejected),
            (1, ItemFate::Applied),
            (2, ItemFate::NotRun),
            (3, ItemFate::Found(OrderState::Canceled)),
            (4, ItemFate::NeverRan),
            (5, ItemFate::Unresolved),
        ];
        let body: Vec<u8> = fates.iter().flat_map(|&(i, f)| fate_bytes(i, f)).collect();
        let mut buf = [0u8; 256];
        let n = encode_event(&ShmEvent::BatchSettled { tag: 9 }, &body, &mut buf);
        let (ev, got, cut) = decode_event(&buf[..n]).unwrap();
        assert_eq!((ev, cut), (ShmEvent::BatchSettled { tag: 9 }, false));
        assert!(ev.is_final());
        let read: Vec<_> = item_fates(got).map(Result::unwrap).collect();
        assert_eq!(read, fates);
        for bad in [
            &[0u8, 9, 0][..],
            &[0, 3, 0],
            &[0, 3, 99],
            &[0, 0, 1],
            &[0, 0],
        ] {
            assert!(item_fates(bad).any(|f| f.is_err()), "{bad:?} read as fates");
        }
        assert_eq!(item_fates(&[]).count(), 0);
    }
}
