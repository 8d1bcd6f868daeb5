//! The adapter's endpoints: the form bodies it signs and the answers it reads.

use crate::adapt::{Error, Request};
use crate::endpoint::{
    self, Amend, ClientIds, Endpoints, IdFormat, Lookup, Method, NewOrder, OrderInfo, OrderRef,
    OrderState, OrderType, Placed, Prepared, Side, Symbol, TimeInForce, Writer,
};
use crate::json::{self, Value};
use crate::response::Response;
use crate::sign::{self};

use super::errors::{said_of, Said};
use super::{KrakenSpot, DEADLINE_NS};

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
