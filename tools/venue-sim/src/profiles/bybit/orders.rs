//! Bybit's orders as its order queries answer them: the JSON of one order, and
//! which closed orders `order/realtime` still lists (the account's
//! [`Config::bybit_closed_kept`](crate::Config) most recently closed: "Query a
//! maximum of recent 500 closed status records are kept under each account each
//! category", <https://bybit-exchange.github.io/docs/v5/order/open-order>).

use super::fmt_dec;
use crate::engine::book::{quote, OrdType, Order, Side, Status};
use crate::engine::state::Venue;
use crate::json_write::{str_into, Obj};

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

    /// The order as Bybit's order queries list it, written at the end of `out`
    /// (the bytes of the `json!` map it was: `tests::as_the_map_was`).
    pub(super) fn bybit_order_into(&self, o: &Order, out: &mut String) {
        let status = match o.status {
            Status::New => "New",
            Status::Filled => "Filled",
            Status::Canceled | Status::Expired => "Cancelled",
        };
        Obj::new(out)
            .uint_str("orderId", o.order_id)
            .str("orderLinkId", &o.client_id)
            .str("symbol", &self.cfg.symbol)
            .str(
                "price",
                &fmt_dec(if o.kind == OrdType::Market {
                    0
                } else {
                    o.price_e8
                }),
            )
            .str("qty", &fmt_dec(o.qty_e8))
            .str("side", if o.side == Side::Buy { "Buy" } else { "Sell" })
            .int("positionIdx", 0)
            .str("orderStatus", status)
            .str(
                "avgPrice",
                &fmt_dec(if o.executed_e8 > 0 { o.price_e8 } else { 0 }),
            )
            .str(
                "leavesQty",
                &fmt_dec(if o.status == Status::New {
                    o.qty_e8 - o.executed_e8
                } else {
                    0
                }),
            )
            .str("cumExecQty", &fmt_dec(o.executed_e8))
            .str("cumExecValue", &fmt_dec(quote(o.price_e8, o.executed_e8)))
            .str("cumExecFee", "0")
            .str("timeInForce", o.tif)
            .str(
                "orderType",
                if o.kind == OrdType::Market {
                    "Market"
                } else {
                    "Limit"
                },
            )
            .bool("reduceOnly", false)
            .int_str("createdTime", o.time)
            .int_str("updatedTime", o.update_time)
            .end();
    }

    /// A list of orders as Bybit's order queries answer it: `{"list":[..]`, then
    /// `nextPageCursor` and, with `category`, `"category":"linear"}`.
    pub(super) fn bybit_order_list(
        &self,
        orders: impl IntoIterator<Item = usize>,
        cursor: &str,
        category_last: bool,
    ) -> String {
        let mut out = String::with_capacity(512);
        out.push_str(if category_last {
            "{\"list\":["
        } else {
            "{\"category\":\"linear\",\"list\":["
        });
        for (n, i) in orders.into_iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            self.bybit_order_into(&self.orders[i], &mut out);
        }
        out.push_str("],\"nextPageCursor\":");
        str_into(&mut out, cursor);
        if category_last {
            out.push_str(",\"category\":\"linear\"");
        }
        out.push('}');
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::config::Config;
    use crate::hashing::Hashing;

    /// The `json!` map the order was written from before (the reference).
    fn bybit_order_json(v: &Venue, o: &Order) -> Value {
        let status = match o.status {
            Status::New => "New",
            Status::Filled => "Filled",
            Status::Canceled | Status::Expired => "Cancelled",
        };
        json!({
            "orderId": o.order_id.to_string(),
            "orderLinkId": o.client_id,
            "symbol": v.cfg.symbol,
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

    /// Orders of every status, side and type, random amounts and times, ids
    /// with characters JSON escapes: the text is the map's, alone and in lists.
    #[test]
    fn as_the_map_was() {
        let mut v = Venue::new(Config::bybit(), Hashing::keyed());
        let mut seed = 3u64;
        let mut next = || {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            seed >> 11
        };
        let ids = ["a", "", "q\"b\\c", "x\u{1}y", "é€", "cid-123_ABC"];
        for n in 0..600 {
            let qty = next() % 10_000_000_000 + 1;
            let o = Order {
                account: 0,
                order_id: next() % 1_000_000_000,
                client_id: ids[n % ids.len()].to_string(),
                side: if next() % 2 == 0 {
                    Side::Buy
                } else {
                    Side::Sell
                },
                kind: if next() % 3 == 0 {
                    OrdType::Market
                } else {
                    OrdType::Limit
                },
                tif: ["GTC", "IOC", "FOK", "PostOnly"][n % 4],
                qty_e8: qty,
                price_e8: next() % 10_000_000_000_000,
                executed_e8: if next() % 2 == 0 { 0 } else { next() % qty },
                status: [
                    Status::New,
                    Status::Filled,
                    Status::Canceled,
                    Status::Expired,
                ][n % 4],
                time: (next() % 2_000_000_000_000) as i64 - 1_000,
                update_time: (next() % 2_000_000_000_000) as i64,
                conn: None,
            };
            let mut text = String::new();
            v.bybit_order_into(&o, &mut text);
            assert_eq!(text, bybit_order_json(&v, &o).to_string(), "order {n}");
            let ids = json!({ "orderId": o.order_id.to_string(), "orderLinkId": o.client_id });
            v.orders.push(o);
            assert_eq!(v.bybit_ids(v.orders.len() - 1), ids.to_string());
        }
        let all: Vec<usize> = (0..v.orders.len()).collect();
        for (k, cursor) in [(0, ""), (1, "page_args%3D5%26"), (7, "a\"b"), (50, "")] {
            let page = &all[all.len() - k..];
            let list: Vec<Value> = page
                .iter()
                .map(|&i| bybit_order_json(&v, &v.orders[i]))
                .collect();
            assert_eq!(
                v.bybit_order_list(page.iter().copied(), cursor, true),
                json!({ "list": list, "nextPageCursor": cursor, "category": "linear" }).to_string()
            );
            assert_eq!(
                v.bybit_order_list(page.iter().copied(), cursor, false),
                json!({ "category": "linear", "list": list, "nextPageCursor": cursor }).to_string()
            );
        }
    }
}
