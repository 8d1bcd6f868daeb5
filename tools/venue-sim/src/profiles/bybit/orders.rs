//! Bybit's orders as its order queries answer them: the JSON of one order, and
//! which closed orders `order/realtime` still lists (the account's
//! [`Config::bybit_closed_kept`](crate::Config) most recently closed: "Query a
//! maximum of recent 500 closed status records are kept under each account each
//! category", <https://bybit-exchange.github.io/docs/v5/order/open-order>).

use serde_json::{json, Value};

use super::fmt_dec;
use crate::engine::book::{quote, OrdType, Order, Side, Status};
use crate::engine::state::Venue;

impl Venue {
    /// The account's [`Config::bybit_closed_kept`](crate::Config) most recently
    /// closed orders, the last closed first: what `order/realtime` still lists.
    pub(super) fn recently_closed(&self, account: usize) -> Vec<usize> {
        let mut closed: Vec<usize> = (0..self.orders.len())
            .filter(|&i| self.orders[i].account == account && self.orders[i].status != Status::New)
            .collect();
        closed.sort_by_key(|&i| core::cmp::Reverse((self.orders[i].update_time, i)));
        closed.truncate(self.cfg.bybit_closed_kept);
        closed
    }

    /// Whether `order/realtime` still lists order `i`: open, or among its
    /// account's most recently closed.
    pub(super) fn realtime_keeps(&self, i: usize) -> bool {
        self.orders[i].status == Status::New
            || self.recently_closed(self.orders[i].account).contains(&i)
    }

    /// A page of `order/realtime`'s list (the open orders, or with `closed` the
    /// recently closed ones), newest first: at most `limit` orders after the
    /// order `cursor` names, and the cursor of the next page ("" when none is
    /// left). The list is ordered by (time, index), the open ones by creation
    /// and the closed by their close, so a page starts after the cursor's order
    /// whether or not that order is still in the list. None: `cursor` names no
    /// order of the account.
    pub(super) fn realtime_page(
        &self,
        account: usize,
        closed: bool,
        limit: usize,
        cursor: Option<u64>,
    ) -> Option<(Vec<usize>, String)> {
        let key = |i: usize| {
            let o = &self.orders[i];
            (if closed { o.update_time } else { o.time }, i)
        };
        let mut list: Vec<usize> = if closed {
            self.recently_closed(account)
        } else {
            (0..self.orders.len())
                .filter(|&i| self.orders[i].account == account)
                .filter(|&i| self.orders[i].status == Status::New)
                .collect()
        };
        list.sort_by_key(|&i| core::cmp::Reverse(key(i)));
        if let Some(c) = cursor {
            let after = (0..self.orders.len())
                .find(|&i| self.orders[i].order_id == c && self.orders[i].account == account)?;
            list.retain(|&i| key(i) < key(after));
        }
        let next = match list.get(limit) {
            Some(_) => format!("page_args%3D{}%26", self.orders[list[limit - 1]].order_id),
            None => String::new(),
        };
        list.truncate(limit);
        Some((list, next))
    }

    pub(super) fn bybit_order_json(&self, o: &Order) -> Value {
        let status = match o.status {
            Status::New => "New",
            Status::Filled => "Filled",
            Status::Canceled | Status::Expired => "Cancelled",
        };
        json!({
            "orderId": o.order_id.to_string(),
            "orderLinkId": o.client_id,
            "symbol": self.cfg.symbol,
            "price": fmt_dec(if o.kind == OrdType::Market { 0 } else { o.price_e8 }),
            "qty": fmt_dec(o.qty_e8),
            "side": if o.side == Side::Buy { "Buy" } else { "Sell" },
            "positionIdx": 0,
            "orderStatus": status,
            "avgPrice": fmt_dec(if o.executed_e8 > 0 { o.price_e8 } else { 0 }),
            "leavesQty": fmt_dec(if o.status == Status::New { o.qty_e8 - o.executed_e8 } else { 0 }),
            "cumExecQty": fmt_dec(o.executed_e8),
            "cumExecValue": fmt_dec(quote(o.price_e8, o.executed_e8)),
            "cumExecFee": "0",
            "timeInForce": o.tif,
            "orderType": if o.kind == OrdType::Market { "Market" } else { "Limit" },
            "reduceOnly": false,
            "createdTime": o.time.to_string(),
            "updatedTime": o.update_time.to_string(),
        })
    }
}
