//! Binance Spot's market data and account history answers: tickers, recent trades,
//! klines, the average price, the account's trades and orders, the unfilled order
//! counts and `order/test`. Shapes as in `rest-api.md` of
//! <https://github.com/binance/binance-spot-api-docs> (checked 2026-11-30).
//!
//! The market is synthetic: the book is the fixed ladder around the mid price
//! (best bid one tick under, best ask one tick over), a ticker's prices are the mid,
//! public trades are the emulator's own fills (MARKET orders, at the mid), and
//! klines are flat candles at the mid whose volume is zero. Read-only: nothing here
//! changes the venue state. It never touches a socket or reads a clock.

use serde_json::{json, Value};

use crate::config::LimitType;
use crate::engine::book::{fmt_e8, quote, Order, Side};
use crate::engine::state::Venue;
use crate::http::Response;
use crate::json_write::array_into;
use crate::limits::Key;
use crate::profiles::binance::request::BinanceOp;

/// One tick of the synthetic book (0.01), in units of 1e-8.
const TICK_E8: u64 = 1_000_000;
/// Quantity at each level of the synthetic book (1.0).
const LEVEL_QTY_E8: u64 = 100_000_000;

impl Venue {
    /// Answers a read-only market data or account history request.
    pub(crate) fn market_answer(&self, op: &BinanceOp, account: usize, now: i64) -> Response {
        let one_or_list = |list: bool, v: Value| if list { json!([v]) } else { v };
        let sym = &self.cfg.symbol;
        let mid = self.cfg.mid_price_e8;
        let body = match *op {
            BinanceOp::TickerPrice { list } => {
                one_or_list(list, json!({ "symbol": sym, "price": fmt_e8(mid) }))
            }
            BinanceOp::BookTicker { list } => one_or_list(
                list,
                json!({
                    "symbol": sym,
                    "bidPrice": fmt_e8(mid.saturating_sub(TICK_E8)),
                    "bidQty": fmt_e8(LEVEL_QTY_E8),
                    "askPrice": fmt_e8(mid + TICK_E8),
                    "askQty": fmt_e8(LEVEL_QTY_E8),
                }),
            ),
            BinanceOp::Ticker24hr { list, mini } => one_or_list(list, self.ticker_24hr(mini, now)),
            BinanceOp::Trades(limit) => {
                let fills: Vec<&Order> = self.fills(None).collect();
                let from = fills.len().saturating_sub(limit);
                let list: Vec<Value> = fills[from..]
                    .iter()
                    .map(|o| {
                        json!({
                            "id": o.order_id,
                            "price": fmt_e8(o.price_e8),
                            "qty": fmt_e8(o.executed_e8),
                            "quoteQty": fmt_e8(quote(o.price_e8, o.executed_e8)),
                            "time": o.update_time,
                            "isBuyerMaker": o.side == Side::Sell,
                            "isBestMatch": true,
                        })
                    })
                    .collect();
                Value::Array(list)
            }
            BinanceOp::Klines {
                interval_ms,
                limit,
                end,
            } => {
                let last_open = end.unwrap_or(now).div_euclid(interval_ms) * interval_ms;
                let first = last_open - (limit as i64 - 1) * interval_ms;
                let p = fmt_e8(mid);
                let list: Vec<Value> = (0..limit as i64)
                    .map(|i| first + i * interval_ms)
                    .filter(|&t| t >= 0)
                    .map(|t| {
                        json!([
                            t,
                            p,
                            p,
                            p,
                            p,
                            "0.00000000",
                            t + interval_ms - 1,
                            "0.00000000",
                            0,
                            "0.00000000",
                            "0.00000000",
                            "0"
                        ])
                    })
                    .collect();
                Value::Array(list)
            }
            BinanceOp::AvgPrice => json!({ "mins": 5, "price": fmt_e8(mid), "closeTime": now }),
            BinanceOp::MyTrades { order_id, limit } => {
                let mine: Vec<Value> = self
                    .fills(Some(account))
                    .filter(|o| order_id.map_or(true, |id| o.order_id == id))
                    .map(|o| {
                        json!({
                            "symbol": sym,
                            "id": o.order_id,
                            "orderId": o.order_id,
                            "orderListId": -1,
                            "price": fmt_e8(o.price_e8),
                            "qty": fmt_e8(o.executed_e8),
                            "quoteQty": fmt_e8(quote(o.price_e8, o.executed_e8)),
                            "commission": fmt_e8(0),
                            "commissionAsset": crate::engine::book::quote_asset(sym),
                            "time": o.update_time,
                            "isBuyer": o.side == Side::Buy,
                            "isMaker": false,
                            "isBestMatch": true,
                        })
                    })
                    .collect();
                let from = mine.len().saturating_sub(limit);
                Value::Array(mine[from..].to_vec())
            }
            BinanceOp::AllOrders { order_id, limit } => {
                let list: Vec<String> = self
                    .orders
                    .iter()
                    .filter(|o| o.account == account)
                    .filter(|o| order_id.map_or(true, |id| o.order_id >= id))
                    .take(limit)
                    .map(|o| self.order_text(o, true))
                    .collect();
                let mut body = String::new();
                array_into(&mut body, &list);
                return Response::json(200, body);
            }
            BinanceOp::RateLimitOrder => {
                let list: Vec<Value> = self
                    .limits
                    .iter()
                    .filter(|l| l.spec.kind == LimitType::Orders)
                    .map(|l| {
                        json!({
                            "rateLimitType": "ORDERS",
                            "interval": l.spec.interval.name(),
                            "intervalNum": l.spec.interval_num,
                            "limit": l.spec.limit,
                            "count": l.used(Key::Account(account), now),
                        })
                    })
                    .collect();
                Value::Array(list)
            }
            BinanceOp::OrderTest { commission: false } => json!({}),
            BinanceOp::OrderTest { commission: true } => json!({
                "standardCommissionForOrder": { "maker": "0.00100000", "taker": "0.00100000" },
                "specialCommissionForOrder": { "maker": "0.00000000", "taker": "0.00000000" },
                "taxCommissionForOrder": { "maker": "0.00000000", "taker": "0.00000000" },
                "discount": {
                    "enabledForAccount": false,
                    "enabledForSymbol": false,
                    "discountAsset": "BNB",
                    "discount": "0.00000000"
                }
            }),
            _ => return Response::error(500, -1000, "Not a market data request."),
        };
        Response::json(200, body.to_string())
    }

    /// Orders with a fill, oldest first, of `account` or of everyone.
    fn fills(&self, account: Option<usize>) -> impl Iterator<Item = &Order> {
        self.orders
            .iter()
            .filter(move |o| o.executed_e8 > 0 && account.map_or(true, |a| o.account == a))
    }

    fn ticker_24hr(&self, mini: bool, now: i64) -> Value {
        let mid = fmt_e8(self.cfg.mid_price_e8);
        let count = self.fills(None).count();
        let volume: u64 = self.fills(None).map(|o| o.executed_e8).sum();
        let quote_volume: u64 = self
            .fills(None)
            .map(|o| quote(o.price_e8, o.executed_e8))
            .sum();
        let (first, last) = match (self.fills(None).next(), self.fills(None).last()) {
            (Some(f), Some(l)) => (f.order_id as i64, l.order_id as i64),
            _ => (-1, -1),
        };
        let mut v = json!({
            "symbol": self.cfg.symbol,
            "openPrice": mid,
            "highPrice": mid,
            "lowPrice": mid,
            "lastPrice": mid,
            "volume": fmt_e8(volume),
            "quoteVolume": fmt_e8(quote_volume),
            "openTime": now - 86_400_000,
            "closeTime": now,
            "firstId": first,
            "lastId": last,
            "count": count,
        });
        if !mini {
            if let Value::Object(m) = &mut v {
                let book = self.cfg.mid_price_e8;
                for (k, val) in [
                    ("priceChange", json!(fmt_e8(0))),
                    ("priceChangePercent", json!("0.000")),
                    ("weightedAvgPrice", json!(mid)),
                    ("prevClosePrice", json!(mid)),
                    ("lastQty", json!(fmt_e8(0))),
                    ("bidPrice", json!(fmt_e8(book.saturating_sub(TICK_E8)))),
                    ("bidQty", json!(fmt_e8(LEVEL_QTY_E8))),
                    ("askPrice", json!(fmt_e8(book + TICK_E8))),
                    ("askQty", json!(fmt_e8(LEVEL_QTY_E8))),
                ] {
                    m.insert(k.into(), val);
                }
            }
        }
        v
    }
}
