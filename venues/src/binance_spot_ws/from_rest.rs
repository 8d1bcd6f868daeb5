//! A REST new order's WebSocket API twin written from a prepared template: the
//! gateway's order lane hands the session the REST request it holds
//! (`POST /api/v3/order`, as the REST adapter or its template prepared it), and
//! the session finds that order's kind (symbol, side, type, time in force) among
//! the [`FrameTemplate`]s it made, makes it once if it has none, and fills in only
//! the frame's request id, the price, the quantity, the client order id and the
//! REST request's own timestamp (so the venue's acceptance window, and the
//! deadline the ledger keeps, are the REST request's). After `session.logon` the
//! frame goes unsigned ([`Signing::Session`]); before, it is signed per request
//! as [`Session::prepare_rest`] signs it ([`Signing::PerRequest`]).
//!
//! Byte for byte what [`Session::prepare_rest`] writes for the same request (a
//! property test holds the two to it), into a [`Text`]
//! ([`Session::prepare_rest_text`]): the caller's WebSocket session takes its
//! bytes as text with no UTF-8 scan per send (ergon-io's
//! `send_request_text_charged`); [`Session::prepare_rest_order`] writes the same
//! into a `String` for callers that take `&str` (one scan when it is handed
//! back). A request this does not
//! cover (another method, a parameter the template does not carry, another
//! receive window) is left to [`Session::prepare_rest`].
//!
//! Nothing here allocates once each kind's template is made (the first order of
//! a kind, at most [`MAX_TEMPLATES`] kinds kept, the oldest replaced).

use arrayvec::{ArrayString, ArrayVec};

use super::{Pending, PrepareError, Session, Signing, WsVenue};
use crate::adapt::Request;
use crate::endpoint::{Method, OrderType, Prepared, Side, Symbol, Text, Values};
use crate::inflight::Slot;

use super::FrameTemplate;

/// How many order kinds a session keeps a template of.
pub const MAX_TEMPLATES: usize = 16;

/// What makes one template: the fixed part of an order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Kind {
    symbol: ArrayString<32>,
    side: Side,
    order_type: OrderType,
    signing: Signing,
}

/// A session's templates, by kind.
#[derive(Clone, Debug, Default)]
pub(super) struct Templates {
    kinds: ArrayVec<(Kind, FrameTemplate), MAX_TEMPLATES>,
    /// The entry a new kind replaces when every one is taken.
    next: usize,
}

/// The parameters of a REST new order, as its query carries them.
#[derive(Default)]
struct RestOrder<'a> {
    symbol: &'a str,
    side: &'a str,
    order_type: &'a str,
    time_in_force: Option<&'a str>,
    quantity: &'a str,
    price: Option<&'a str>,
    id: &'a str,
    recv_window: &'a str,
    timestamp: &'a str,
}

impl<'a> RestOrder<'a> {
    /// The order `p` places, if it is a `POST` to `path` (the venue's new order)
    /// whose query carries exactly what a template does, each value one a JSON
    /// string may carry as it is.
    fn read(p: &'a Prepared, path: &str) -> Option<Self> {
        if p.kind() != Some(Request::Order) || p.method() != Some(Method::Post) {
            return None;
        }
        let query = p.target().strip_prefix(path)?.strip_prefix('?')?;
        let mut o = RestOrder::default();
        for kv in query.split('&') {
            let (name, value) = kv.split_once('=')?;
            if value.bytes().any(|c| c == b'"' || c == b'\\' || c < b' ') {
                return None;
            }
            let slot = match name {
                "symbol" => &mut o.symbol,
                "side" => &mut o.side,
                "type" => &mut o.order_type,
                "quantity" => &mut o.quantity,
                "newClientOrderId" => &mut o.id,
                "recvWindow" => &mut o.recv_window,
                "timestamp" => &mut o.timestamp,
                "timeInForce" if o.time_in_force.is_none() => {
                    o.time_in_force = Some(value);
                    continue;
                }
                "price" if o.price.is_none() => {
                    o.price = Some(value);
                    continue;
                }
                "signature" => continue,
                _ => return None,
            };
            if !slot.is_empty() || value.is_empty() {
                return None;
            }
            *slot = value;
        }
        let digits = |s: &str| (1..=19).contains(&s.len()) && s.bytes().all(|c| c.is_ascii_digit());
        let complete = !o.symbol.is_empty() && !o.quantity.is_empty() && !o.id.is_empty();
        (complete && digits(o.timestamp) && digits(o.recv_window)).then_some(o)
    }

    /// The order's type as the template takes it, if venue `V`'s names are ours.
    fn order_type<V: WsVenue>(&self) -> Option<OrderType> {
        V::order_type(self.order_type, self.time_in_force)
    }
}

impl<V: WsVenue> Session<V> {
    /// [`Session::prepare_rest_text`] into a `String`: the same frame, the same
    /// slot (the string's buffer is lent to a [`Text`] and handed back: one UTF-8
    /// scan of the frame). For callers that take `&str`; the send path takes the
    /// [`Text`].
    pub fn prepare_rest_order(
        &mut self,
        p: &Prepared,
        out: &mut String,
    ) -> Result<Option<Pending>, PrepareError> {
        let mut text = Text::from(core::mem::take(out));
        let r = self.prepare_rest_text(p, &mut text);
        *out = String::from(text);
        r
    }

    /// Writes the WebSocket API twin of `p` from the template of its kind into
    /// `out` (cleared first) and reserves its slot, as [`Session::prepare_rest`]
    /// does and byte for byte what it writes (see the module doc); the parts,
    /// deadline and client order id are `p`'s. `Ok(None)`: `p` is not a new order
    /// the templates cover, `out` is empty and nothing is reserved: write it with
    /// [`Session::prepare_rest`]. `Err(Full)`: the table is full.
    pub fn prepare_rest_text(
        &mut self,
        p: &Prepared,
        out: &mut Text,
    ) -> Result<Option<Pending>, PrepareError> {
        out.clear();
        let Some(o) = RestOrder::read(p, V::ORDER_PATH) else {
            return Ok(None);
        };
        let same_window = o.recv_window.parse::<i64>().ok() == Some(self.recv_window_ms);
        let Some(order_type) = o.order_type::<V>().filter(|_| same_window) else {
            return Ok(None);
        };
        let side = match o.side {
            "BUY" => Side::Buy,
            "SELL" => Side::Sell,
            _ => return Ok(None),
        };
        let (Ok(symbol), Ok(name)) = (Symbol::new(o.symbol), ArrayString::from(o.symbol)) else {
            return Ok(None);
        };
        let signing = match self.logged_on {
            true => Signing::Session,
            false => Signing::PerRequest,
        };
        let kind = Kind {
            symbol: name,
            side,
            order_type,
            signing,
        };
        let Some(id) = self.slots.next() else {
            return Err(PrepareError::Full);
        };
        let at = match self.templates.kinds.iter().position(|(k, _)| *k == kind) {
            Some(i) => i,
            None => match self.order_template(symbol, side, order_type, signing) {
                Ok(t) => self.templates.add(kind, t),
                // No key to sign with, or a kind the builder refuses: its own path says.
                Err(_) => return Ok(None),
            },
        };
        let Some((_, t)) = self.templates.kinds.get(at) else {
            return Ok(None);
        };
        if t.priced() != o.price.is_some() {
            return Ok(None);
        }
        let Ok(timestamp) = o.timestamp.parse::<i64>() else {
            return Ok(None);
        };
        let values = Values {
            id: o.id,
            price: o.price.unwrap_or(""),
            quantity: o.quantity,
            timestamp,
            request_id: i64::try_from(id).unwrap_or(i64::MAX),
        };
        let key = if t.signs() { self.key.as_ref() } else { None };
        t.write(&values, key, out);
        let client_order_id = p.client_order_id().copied();
        self.slots.reserve(Slot::prepared(
            id,
            Request::Order,
            p.deadline_ns(),
            client_order_id,
            (),
        ));
        Ok(Some(Pending {
            id,
            kind: Request::Order,
            parts: p.parts().iter().copied().collect(),
            deadline_ns: p.deadline_ns(),
            client_order_id,
        }))
    }

    /// How many order kinds the session holds a template of.
    pub fn templates(&self) -> usize {
        self.templates.kinds.len()
    }
}

impl Templates {
    /// Keeps `t` for `kind`, in place of the oldest when every entry is taken: its
    /// index.
    fn add(&mut self, kind: Kind, t: FrameTemplate) -> usize {
        if !self.kinds.is_full() {
            self.kinds.push((kind, t));
            return self.kinds.len() - 1;
        }
        let at = self.next % MAX_TEMPLATES;
        self.next = at + 1;
        self.kinds[at] = (kind, t);
        at
    }
}

#[cfg(test)]
mod tests;
