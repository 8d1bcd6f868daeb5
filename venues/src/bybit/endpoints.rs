//! The adapter's endpoints: the bodies it signs and the answers it reads.

use super::{Bybit, HISTORY, MAX_BATCH_ORDERS, OPEN_PAGE};
use crate::adapt::{Error, Parts, Request};
use crate::endpoint::{
    self, Amend, ClientIds, Endpoints, IdFormat, Lookup, Method, NewOrder, OrderInfo, OrderRef,
    OrderState, OrderType, Placed, Prepared, Side, Symbol, TimeInForce, Writer,
};
use crate::json::{self, Value};
use crate::response::Response;
use ergon_core::Part;

/// `n` in decimal, in `buf`.
pub(super) fn decimal(n: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 || i == 0 {
            break;
        }
    }
    &buf[i..]
}

/// The fields of one order of a create or create-batch body.
fn order_fields(w: &mut Writer<'_>, first: &mut bool, o: &NewOrder<'_>) -> Result<(), Error> {
    w.json(first, "symbol", o.symbol.as_str());
    w.json(
        first,
        "side",
        match o.side {
            Side::Buy => "Buy",
            Side::Sell => "Sell",
        },
    );
    let (kind, tif) = match o.order_type {
        OrderType::Limit(TimeInForce::Gtc) => ("Limit", "GTC"),
        OrderType::Limit(TimeInForce::Ioc) => ("Limit", "IOC"),
        OrderType::Limit(TimeInForce::Fok) => ("Limit", "FOK"),
        OrderType::PostOnly => ("Limit", "PostOnly"),
        OrderType::Market => ("Market", "IOC"),
    };
    w.json(first, "orderType", kind);
    w.json(first, "qty", o.quantity.as_str());
    match (o.order_type, o.price) {
        (OrderType::Market, None) => {}
        (OrderType::Market, Some(_)) => return Err(Error::BadArgument("price of a market order")),
        (_, Some(p)) => w.json(first, "price", p.as_str()),
        (_, None) => return Err(Error::BadArgument("price of a limit order")),
    }
    w.json(first, "timeInForce", tif);
    w.json(first, "orderLinkId", o.client_order_id.as_str());
    if o.reduce_only {
        w.s(",\"reduceOnly\":true");
    }
    w.id(o.client_order_id)
}

/// `orderStatus` as a state.
fn order_state(word: &str) -> OrderState {
    match word {
        "Created" => OrderState::Pending,
        "New" | "Untriggered" | "Triggered" => OrderState::New,
        "PartiallyFilled" => OrderState::PartiallyFilled,
        "Filled" => OrderState::Filled,
        "Cancelled" | "PartiallyFilledCanceled" | "Deactivated" => OrderState::Canceled,
        "Rejected" => OrderState::Rejected,
        _ => OrderState::Other,
    }
}

/// The `retCode` and `result` of a Bybit body.
fn ret<'a>(r: &Response<'a>) -> Option<(i64, Option<Value<'a>>)> {
    let v = json::parse(r.body).ok()?;
    let code = v.get("retCode").ok()??.as_i64().ok()?;
    Some((code, v.get("result").ok().flatten()))
}

impl ClientIds for Bybit {
    /// `orderLinkId`: up to 36 characters of letters, digits, `-` and `_`
    /// (<https://bybit-exchange.github.io/docs/v5/order/create-order>): 32 hex
    /// digits fit.
    const ID_FORMAT: IdFormat = IdFormat::Hex;
}

impl Endpoints for Bybit {
    /// `POST /v5/order/create`: one on the create limit and on the IP's 5 s.
    fn new_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &NewOrder<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        self.post(w, "/v5/order/create", Request::Order, now, |w| {
            let mut first = false;
            order_fields(w, &mut first, o)
        })
    }

    /// `POST /v5/order/cancel` by `orderLinkId`.
    fn cancel<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        self.post(w, "/v5/order/cancel", Request::Cancel, now, |w| {
            let mut first = false;
            w.json(&mut first, "symbol", o.symbol.as_str());
            w.json(&mut first, "orderLinkId", o.client_order_id.as_str());
            w.id(o.client_order_id)
        })
    }

    /// `POST /v5/order/cancel-all` of `symbol`: one on the cancel limit.
    fn cancel_all<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        self.post(w, "/v5/order/cancel-all", Request::Cancel, now, |w| {
            w.json(&mut false, "symbol", symbol.as_str());
            Ok(())
        })
    }

    /// `POST /v5/order/cancel-batch` by `orderLinkId`, 1 to 20 orders of one
    /// symbol: the cancel limit once per order (Bybit gives batch cancels a
    /// limit of their own, orders counted alike: charging the single cancel's
    /// is the conservative reading). Each order has its own fate: `retCode` 0
    /// carries each one's code in `retExtInfo.list`, in the request's order (an
    /// order not open fails alone, 110001; the part over the limit, 10006), read
    /// as the items of a batch ([`Venue::batch_items`](crate::adapt::Venue::batch_items)).
    /// <https://bybit-exchange.github.io/docs/v5/order/batch-cancel>
    fn batch_cancel<'p>(
        &mut self,
        out: &'p mut Prepared,
        orders: &[OrderRef<'_>],
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let n = orders.len();
        let symbol = orders.first().map(|o| o.symbol);
        if n == 0 || n > MAX_BATCH_ORDERS || orders.iter().any(|o| Some(o.symbol) != symbol) {
            Writer::start(out);
            return Err(Error::BadArgument("batch of 1 to 20 orders of one symbol"));
        }
        let mut w = Writer::start(&mut *out);
        w.symbol(symbol);
        self.post(w, "/v5/order/cancel-batch", Request::Cancel, now, |w| {
            w.s(",\"request\":[");
            for (i, o) in orders.iter().enumerate() {
                w.s(if i == 0 { "{" } else { ",{" });
                let mut first = true;
                w.json(&mut first, "symbol", o.symbol.as_str());
                w.json(&mut first, "orderLinkId", o.client_order_id.as_str());
                w.s("}");
                w.id(o.client_order_id)?;
            }
            w.s("]");
            Ok(())
        })?;
        let mut parts = Parts::new();
        parts.push(Part::new(self.ip, 0));
        parts.push(Part::new(self.ip_5s, 1));
        // n <= 20: the cast cannot truncate.
        parts.push(Part::new(self.cancel, n as u32));
        out.set_parts(parts);
        Ok(out)
    }

    /// `POST /v5/order/amend` by `orderLinkId`: one on the amend limit.
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
        self.post(w, "/v5/order/amend", Request::CancelReplace, now, |w| {
            let mut first = false;
            w.json(&mut first, "symbol", a.order.symbol.as_str());
            w.json(&mut first, "orderLinkId", a.order.client_order_id.as_str());
            if let Some(q) = a.quantity {
                w.json(&mut first, "qty", q.as_str());
            }
            if let Some(p) = a.price {
                w.json(&mut first, "price", p.as_str());
            }
            w.id(a.order.client_order_id)
        })
    }

    /// `GET /v5/order/realtime` by `orderLinkId`: one read. It lists the order
    /// while open or among the account's 500 most recently closed (see the
    /// module doc, <https://bybit-exchange.github.io/docs/v5/order/open-order>);
    /// `openOnly` is left out, since Bybit ignores it when the query names an
    /// `orderLinkId`.
    fn query_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        w.id(o.client_order_id)?;
        self.get(w, "/v5/order/realtime", Request::Read(1), now, false, |w| {
            w.s("&symbol=");
            w.s(o.symbol.as_str());
            w.s("&orderLinkId=");
            w.s(o.client_order_id.as_str());
        })
    }

    /// `GET /v5/order/history` by `orderLinkId`: one on the history's own limit.
    /// It finds a closed order the real-time query no longer lists (see the module
    /// doc, <https://bybit-exchange.github.io/docs/v5/order/order-list>).
    fn query_closed_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        w.id(o.client_order_id)?;
        self.get(w, HISTORY, Request::Info(HISTORY), now, false, |w| {
            w.s("&symbol=");
            w.s(o.symbol.as_str());
            w.s("&orderLinkId=");
            w.s(o.client_order_id.as_str());
        })
    }

    /// `GET /v5/order/realtime` of a symbol, or of every USDT-settled one: one
    /// read, the first page of [`OPEN_PAGE`] orders, the newest first. Bybit
    /// answers this list by pages ("limit: Limit for data size per page. [1,
    /// 50]. Default: 20"); [`Endpoints::open_orders_after`] asks the next.
    /// <https://bybit-exchange.github.io/docs/v5/order/open-order>
    fn open_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Option<Symbol<'_>>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        self.open_page(out, symbol, b"", now)
    }

    /// The page after `cursor` (the `nextPageCursor` of the page before,
    /// percent-encoded here as a query value): one read, charged as the first.
    fn open_orders_after<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Option<Symbol<'_>>,
        cursor: &[u8],
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        if cursor.is_empty() {
            Writer::start(out);
            return Err(Error::BadArgument("cursor (empty)"));
        }
        self.open_page(out, symbol, cursor, now)
    }

    /// `GET /v5/market/orderbook`, depth 1 to 500 (linear): one read, unsigned.
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
        self.get(
            w,
            "/v5/market/orderbook",
            Request::Read(1),
            now,
            true,
            |w| {
                w.s("&symbol=");
                w.s(symbol.as_str());
                w.s("&limit=");
                w.int(i64::from(depth));
            },
        )
    }

    /// `GET /v5/account/wallet-balance?accountType=UNIFIED`: one read.
    fn account<'p>(&mut self, out: &'p mut Prepared, now: i64) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        // wallet-balance takes no category: the target is written here.
        w.open();
        w.s("/v5/account/wallet-balance?");
        let q = w.pos();
        w.s("accountType=UNIFIED");
        let end = w.pos();
        w.close_target();
        let deadline = self.sign(&mut w, q..end, now)?;
        w.finish(self, Request::Read(1), Method::Get, deadline)
    }

    /// `POST /v5/order/create-batch`, 1 to 20 orders: each counts on the create
    /// limit.
    fn batch_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        orders: &[NewOrder<'_>],
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(orders.first().map(|o| o.symbol));
        if orders.is_empty() || orders.len() > MAX_BATCH_ORDERS {
            return Err(Error::BadArgument("batch of 1 to 20 orders"));
        }
        // orders.len() <= 20: the cast cannot truncate.
        self.post(
            w,
            "/v5/order/create-batch",
            Request::Batch(orders.len() as u16),
            now,
            |w| {
                w.s(",\"request\":[");
                for (i, o) in orders.iter().enumerate() {
                    w.s(if i == 0 { "{" } else { ",{" });
                    let mut first = true;
                    order_fields(w, &mut first, o)?;
                    w.s("}");
                }
                w.s("]");
                Ok(())
            },
        )
    }

    /// `retCode` 0 with one order in `result.list`: found; an empty list: not
    /// found. The real-time query and the history answer alike.
    fn read_order(&self, r: &Response<'_>) -> Lookup {
        let Some((0, Some(result))) = ret(r) else {
            return Lookup::Unknown;
        };
        let Ok(Some(list)) = result.get("list") else {
            return Lookup::Unknown;
        };
        let Ok(mut items) = list.items() else {
            return Lookup::Unknown;
        };
        let Some(o) = items.next() else {
            return Lookup::NotFound;
        };
        let mut buf = [0u8; 32];
        let state = match o
            .get("orderStatus")
            .ok()
            .flatten()
            .map(|s| s.decode_str(&mut buf))
        {
            Some(Ok(word)) => order_state(word),
            _ => return Lookup::Unknown,
        };
        let Some(id) = o
            .get("orderId")
            .ok()
            .flatten()
            .and_then(endpoint::json_text)
        else {
            return Lookup::Unknown;
        };
        let filled = o
            .get("cumExecQty")
            .ok()
            .flatten()
            .and_then(endpoint::json_text);
        Lookup::Found(OrderInfo {
            state,
            venue_order_id: id,
            filled,
        })
    }

    /// `retCode` 0 with `result.orderId`: accepted (pending: the create answer is an
    /// acknowledgement); a code that surely did not run: refused.
    fn read_placed(&self, r: &Response<'_>) -> Placed {
        match ret(r) {
            Some((0, Some(result))) => match result
                .get("orderId")
                .ok()
                .flatten()
                .and_then(endpoint::json_text)
            {
                Some(id) => Placed::Accepted(OrderInfo {
                    state: OrderState::Pending,
                    venue_order_id: id,
                    filled: None,
                }),
                None => Placed::Unknown,
            },
            Some((10000 | 10016 | 170007 | 170146, _)) | Some((0, None)) | None => Placed::Unknown,
            Some(_) => Placed::Refused,
        }
    }
}

impl Bybit {
    /// A page of `GET /v5/order/realtime`: [`OPEN_PAGE`] orders, after `cursor`
    /// when it is not empty. The cursor is written percent-encoded (every byte
    /// but the unreserved ones), so the query signed is the query sent.
    fn open_page<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Option<Symbol<'_>>,
        cursor: &[u8],
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        self.get(w, "/v5/order/realtime", Request::Read(1), now, false, |w| {
            match symbol {
                Some(s) => {
                    w.s("&symbol=");
                    w.s(s.as_str());
                }
                None => w.s("&settleCoin=USDT"),
            }
            w.s("&limit=");
            w.int(OPEN_PAGE);
            if !cursor.is_empty() {
                w.s("&cursor=");
                for &b in cursor {
                    if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                        w.put(&[b]);
                    } else {
                        const HEX: &[u8; 16] = b"0123456789ABCDEF";
                        w.put(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
                    }
                }
            }
        })
    }
}
