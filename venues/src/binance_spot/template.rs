//! A prepared `POST /api/v3/order`: [`OrderTemplate`] keeps the bytes of an order
//! that do not change (path, `symbol`, `side`, `type`, `timeInForce`, `recvWindow`);
//! [`BinanceSpot::new_order_from`] writes one order from it with only the price,
//! quantity, client order id, timestamp and signature filled in. The request is
//! byte for byte the one [`Endpoints::new_order`](crate::endpoint::Endpoints::new_order) writes for the same order (a
//! property test holds the two to it), so the venue sees exactly what it saw
//! before.

use arrayvec::ArrayString;

use super::{order_params, BinanceSpot, PostOnly};
use crate::adapt::{Error, Request};
use crate::endpoint::{
    decimal, ClientOrderId, Decimal, Field, Fill, Method, NewOrder, OrderType, Prepared, Runs,
    Side, Symbol, Values, Writer,
};

/// The fixed bytes of one kind of Binance Spot order: see the module docs. Made by
/// [`BinanceSpot::order_template`]; good for the adapter that made it (its receive
/// window is written in).
#[derive(Clone, Debug)]
pub struct OrderTemplate {
    runs: Runs,
    /// Where the signed query starts: after `/api/v3/order?`.
    query_at: usize,
    /// Whether the order type carries a price (all but MARKET).
    priced: bool,
    symbol: ArrayString<32>,
    recv_window_ms: i64,
}

impl BinanceSpot {
    /// The template of `symbol`'s `side` orders of `order_type`: the same checks as
    /// [`Endpoints::new_order`](crate::endpoint::Endpoints::new_order) (a post-only order is `LIMIT_MAKER`), made once.
    pub fn order_template(
        &self,
        symbol: Symbol<'_>,
        side: Side,
        order_type: OrderType,
    ) -> Result<OrderTemplate, Error> {
        // The fixed parameters as the builder writes them, from an order whose
        // open fields are placeholders; the text is cut where they stand.
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
        let mut scratch = Prepared::default();
        let mut w = Writer::start(&mut scratch);
        let mut first = true;
        order_params(
            &mut w,
            &mut first,
            &o,
            "newClientOrderId",
            PostOnly::LimitMaker,
        )?;
        let end = w.pos();
        let text =
            core::str::from_utf8(w.bytes(0..end)).map_err(|_| Error::BadArgument("symbol"))?;
        let fixed = text
            .split_once("&quantity=")
            .map(|(fixed, _)| fixed)
            .ok_or(Error::BadArgument("order type"))?;
        let mut runs = Runs::default();
        let path = "/api/v3/order?";
        runs.lit(path);
        runs.lit(fixed);
        runs.lit("&quantity=");
        let mut ok = runs.field(Field::Quantity);
        if priced {
            runs.lit("&price=");
            ok &= runs.field(Field::Price);
        }
        runs.lit("&newClientOrderId=");
        ok &= runs.field(Field::Id);
        let mut buf = [0u8; 20];
        let window = decimal(self.auth.recv_window_ms, &mut buf);
        runs.lit("&recvWindow=");
        runs.lit(window);
        runs.lit("&timestamp=");
        ok &= runs.field(Field::Timestamp);
        if !ok {
            return Err(Error::BadArgument("order template"));
        }
        let mut sym = ArrayString::new();
        sym.try_push_str(symbol.as_str())
            .map_err(|_| Error::BadArgument("symbol"))?;
        Ok(OrderTemplate {
            runs,
            query_at: path.len(),
            priced,
            symbol: sym,
            recv_window_ms: self.auth.recv_window_ms,
        })
    }

    /// One order of template `t` into `out`: what [`Endpoints::new_order`](crate::endpoint::Endpoints::new_order) writes
    /// for the template's order with `fill`'s price, quantity and client order id,
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
        let mut w = Writer::start(out);
        let price = match (t.priced, fill.price) {
            (true, Some(p)) => p.as_str(),
            (false, None) => "",
            (false, Some(_)) => return Err(Error::BadArgument("price of a market order")),
            (true, None) => return Err(Error::BadArgument("price of a limit order")),
        };
        if t.recv_window_ms != self.auth.recv_window_ms {
            return Err(Error::BadArgument("a template of another receive window"));
        }
        let (Some(api_key), Some(key)) = (&self.auth.api_key, &self.auth.key) else {
            return Err(Error::NoKey);
        };
        w.symbol_text(&t.symbol);
        let clock = &self.limits.clock;
        let ts = clock.utc_ms(now);
        let mut stamp = [0u8; 20];
        let values = Values {
            id: fill.client_order_id.as_str(),
            price,
            quantity: fill.quantity.as_str(),
            timestamp: decimal(ts, &mut stamp),
            request_id: "",
        };
        w.open();
        let start = w.pos();
        t.runs.emit(&values, |b| w.s(b));
        let end = w.pos();
        let mac = key.sign(&[w.bytes(start + t.query_at..end)]);
        w.s("&signature=");
        w.hex(&mac);
        w.close_target();
        w.header_str("X-MBX-APIKEY", api_key.as_str())?;
        w.id(fill.client_order_id)?;
        let deadline = clock.now_ns_at(ts.saturating_add(self.auth.recv_window_ms));
        w.finish(self, Request::Order, Method::Post, deadline)
    }
}

#[cfg(test)]
mod tests;
