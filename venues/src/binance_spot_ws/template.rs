//! A prepared `order.place` frame: [`FrameTemplate`] keeps the bytes of an order
//! frame that do not change (method, `symbol`, `side`, `type`, `timeInForce`,
//! `recvWindow`, and for a per-request signature `apiKey`); [`Session::prepare_from`]
//! writes one frame from it with only the request id, price, quantity, client order
//! id and timestamp filled in (and the signature, for [`Signing::PerRequest`]).
//!
//! [`Signing::PerRequest`] frames are byte for byte those [`Session::prepare`] writes
//! for `Call::Place` (a property test holds the two to it). [`Signing::Session`]
//! frames are the form Binance takes on a connection authenticated by
//! `session.logon`: the same frame without `apiKey` and `signature`
//! ("Session Authentication", `web-socket-api.md`: after `session.logon`, SIGNED
//! requests need neither; `timestamp` is still required). Sending one on a
//! connection that is not logged on is refused by the venue (-1022 / -2014):
//! the lane's logon decides which form it uses.

use core::sync::atomic::{AtomicU64, Ordering};

use arrayvec::ArrayVec;

use super::{order_params, put_val, Pending, PrepareError, Session, Val, WsVenue, MAX_PARAMS};
use crate::adapt::{Error, Parts, Request};
use crate::endpoint::{
    ClientOrderId, Decimal, Field, Fill, NewOrder, OrderType, Runs, Side, SignKey, Symbol, Text,
    Values,
};
use crate::inflight::Slot;

/// How the frames of a template are authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signing {
    /// `apiKey` and an HMAC-SHA256 `signature` in every frame.
    PerRequest,
    /// Neither: the connection is authenticated by `session.logon`.
    Session,
}

/// The fixed bytes of one kind of `order.place` frame: see the module docs. Made by
/// [`Session::order_template`]; good for the session that made it.
#[derive(Clone, Debug)]
pub struct FrameTemplate {
    /// The frame up to the last parameter (no signature, no closing braces).
    frame: Runs,
    /// The signature payload, for [`Signing::PerRequest`].
    payload: Option<Runs>,
    priced: bool,
    recv_window_ms: i64,
    /// What an order charges, asked of the adapter once, and the limits it was
    /// asked of (the session's `limits_id` then): another session's, or limits
    /// changed since through `adapter_mut`, and the parts are asked again.
    parts: Parts,
    limits_id: u64,
}

/// A number no session's limits had before: a session takes one when it is made and
/// whenever its adapter is handed out to change, so a template's parts are used
/// only with the limits they were asked of.
pub(super) fn limits_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl FrameTemplate {
    /// Appends the frame with `values` to `out`, signed with `key` if the template
    /// signs per request.
    pub(super) fn write(&self, values: &Values<'_>, key: Option<&SignKey>, out: &mut Text) {
        self.frame.emit(values, out);
        if let (Some(payload), Some(key)) = (&self.payload, key) {
            let end = out.len();
            payload.emit(values, out);
            let sig = super::signature_text(key, out.as_bytes().get(end..).unwrap_or_default());
            out.truncate_to_mark(end);
            out.push_str(",\"signature\":\"");
            out.push_str(&sig);
            out.push_str("\"}}");
        }
    }

    /// Whether its frames carry a price.
    pub(super) fn priced(&self) -> bool {
        self.priced
    }

    /// Whether its frames carry `apiKey` and a signature.
    pub(super) fn signs(&self) -> bool {
        self.payload.is_some()
    }
}

/// A parameter of the template: fixed text or number, or a field left open.
#[derive(Clone, Copy)]
enum Param<'a> {
    Fixed(Val<'a>),
    Open(Field),
}

impl<V: WsVenue> Session<V> {
    /// The template of `symbol`'s `side` `order.place` frames of `order_type`,
    /// authenticated as `signing` says: the same checks as [`Session::prepare`],
    /// made once. [`Signing::PerRequest`] needs the session's key
    /// ([`Error::NoKey`]).
    pub fn order_template(
        &self,
        symbol: Symbol<'_>,
        side: Side,
        order_type: OrderType,
        signing: Signing,
    ) -> Result<FrameTemplate, Error> {
        let priced = !matches!(order_type, OrderType::Market);
        let placeholder = Decimal::new("1")?;
        let o = NewOrder {
            symbol,
            side,
            order_type,
            price: priced.then_some(placeholder),
            quantity: placeholder,
            client_order_id: ClientOrderId::new("x")?,
            reduce_only: false,
        };
        let mut fixed: ArrayVec<(&'static str, Val<'_>), MAX_PARAMS> = ArrayVec::new();
        order_params::<V>(&mut fixed, &o)?;
        let mut params: ArrayVec<(&'static str, Param<'_>), MAX_PARAMS> = fixed
            .iter()
            .map(|&(name, v)| {
                let open = match name {
                    "quantity" => Some(Field::Quantity),
                    "price" => Some(Field::Price),
                    "newClientOrderId" => Some(Field::Id),
                    _ => None,
                };
                (name, open.map_or(Param::Fixed(v), Param::Open))
            })
            .collect();
        let full = Error::BadArgument("more than 16 params");
        if signing == Signing::PerRequest {
            let (Some(api_key), Some(_)) = (&self.api_key, &self.key) else {
                return Err(Error::NoKey);
            };
            params
                .try_push(("apiKey", Param::Fixed(Val::Str(api_key.as_str()))))
                .map_err(|_| full)?;
        }
        let window = Param::Fixed(Val::Int(self.recv_window_ms));
        params.try_push(("recvWindow", window)).map_err(|_| full)?;
        let stamp = Param::Open(Field::Timestamp);
        params.try_push(("timestamp", stamp)).map_err(|_| full)?;
        params.sort_unstable_by_key(|(n, _)| *n);

        let mut ok = true;
        let mut frame = Runs::default();
        frame.lit("{\"id\":");
        ok &= frame.field(Field::RequestId);
        frame.lit(",\"method\":\"order.place\",\"params\":{");
        let mut payload = Runs::default();
        for (i, (name, v)) in params.iter().enumerate() {
            if i > 0 {
                frame.lit(",");
                payload.lit("&");
            }
            frame.lit("\"");
            frame.lit(name);
            frame.lit("\":");
            payload.lit(name);
            payload.lit("=");
            match *v {
                Param::Fixed(v) => {
                    let mut text = Vec::new();
                    put_val(&mut text, v, true);
                    frame.lit(core::str::from_utf8(&text).unwrap_or_default());
                    text.clear();
                    put_val(&mut text, v, false);
                    payload.lit(core::str::from_utf8(&text).unwrap_or_default());
                }
                Param::Open(Field::Timestamp) => {
                    ok &= frame.field(Field::Timestamp);
                    ok &= payload.field(Field::Timestamp);
                }
                Param::Open(f) => {
                    frame.lit("\"");
                    ok &= frame.field(f);
                    frame.lit("\"");
                    ok &= payload.field(f);
                }
            }
        }
        if signing == Signing::Session {
            frame.lit("}}");
        }
        if !ok {
            return Err(Error::BadArgument("order template"));
        }
        Ok(FrameTemplate {
            frame,
            payload: (signing == Signing::PerRequest).then_some(payload),
            priced,
            recv_window_ms: self.recv_window_ms,
            parts: self.adapter.parts(Request::Order)?,
            limits_id: self.limits_id,
        })
    }

    /// Writes one `order.place` frame of template `t` into `out` (cleared first; a
    /// [`Text`], which a transport takes as text with no UTF-8 check per send, and
    /// into which the request id and timestamp go as digits with no check either)
    /// with `fill`'s price, quantity and client order id, stamped (and, for
    /// [`Signing::PerRequest`], signed) at the venue's UTC of `now`, and reserves
    /// its slot, as [`Session::prepare`] does for `Call::Place`. A price on a
    /// market template or none on a priced one, a template of another receive
    /// window, or a per-request template on a session without a key: `Err`, `out`
    /// empty and nothing reserved.
    pub fn prepare_frame(
        &mut self,
        t: &FrameTemplate,
        fill: &Fill<'_>,
        out: &mut Text,
        now: i64,
    ) -> Result<Pending, PrepareError> {
        out.clear();
        let Some(id) = self.slots.next() else {
            return Err(PrepareError::Full);
        };
        let bad = |e| Err(PrepareError::Bad(e));
        let price = match (t.priced, fill.price) {
            (true, Some(p)) => p.as_str(),
            (false, None) => "",
            (false, Some(_)) => return bad(Error::BadArgument("price of a market order")),
            (true, None) => return bad(Error::BadArgument("price of a limit order")),
        };
        if t.recv_window_ms != self.recv_window_ms {
            return bad(Error::BadArgument("a template of another receive window"));
        }
        let key = match (&t.payload, &self.key) {
            (Some(_), None) => return bad(Error::NoKey),
            (_, key) => key,
        };
        let parts = if t.limits_id == self.limits_id {
            t.parts.clone()
        } else {
            match self.adapter.parts(Request::Order) {
                Ok(p) => p,
                Err(e) => return bad(e),
            }
        };
        let clock = &self.adapter.limits().clock;
        let ts = clock.utc_ms(now);
        let values = Values {
            id: fill.client_order_id.as_str(),
            price,
            quantity: fill.quantity.as_str(),
            timestamp: ts,
            request_id: i64::try_from(id).unwrap_or(i64::MAX),
        };
        t.write(&values, key.as_ref(), out);
        let deadline_ns = clock.now_ns_at(ts.saturating_add(self.recv_window_ms));
        let client_order_id = Some(fill.client_order_id);
        self.slots.reserve(Slot::prepared(
            id,
            Request::Order,
            deadline_ns,
            client_order_id,
            (),
        ));
        Ok(Pending {
            id,
            kind: Request::Order,
            parts,
            deadline_ns,
            client_order_id,
        })
    }

    /// [`Session::prepare_frame`] into a `String`: the same frame, the same slot
    /// (the string's buffer is reused as it is; one UTF-8 scan of the frame when
    /// it is handed back). For callers that take `&str`; the send path takes the
    /// [`Text`].
    pub fn prepare_from(
        &mut self,
        t: &FrameTemplate,
        fill: &Fill<'_>,
        out: &mut String,
        now: i64,
    ) -> Result<Pending, PrepareError> {
        let mut text = Text::from(core::mem::take(out));
        let r = self.prepare_frame(t, fill, &mut text, now);
        *out = String::from(text);
        r
    }
}

#[cfg(test)]
mod tests;
