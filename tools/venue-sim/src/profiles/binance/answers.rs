//! Binance's response bodies as documented: order answers (ACK, RESULT, FULL and
//! the futures shape), exchangeInfo, depth, account, and the 5xx of a fault.

use serde_json::{json, Value};

use crate::config::Profile;
use crate::engine::book::{base_asset, fmt_e8, quote, quote_asset, OrdType, Order, Status};
use crate::engine::rules::Funds;
use crate::engine::state::Venue;
use crate::http::Response;
use crate::json_write::Obj;
use crate::profiles::binance::request::RespType;
use crate::profiles::instruments::{dec, rules};

impl Venue {
    /// A Spot placement's answer, of `resp`'s shape (ACK, RESULT or FULL; a
    /// FULL answer with a fill takes the next trade id).
    pub(crate) fn order_ack_text(&mut self, idx: usize, resp: RespType, now: i64) -> String {
        let mut out = String::with_capacity(512);
        let o = &self.orders[idx];
        let mut m = Obj::new(&mut out);
        m.str("symbol", &self.cfg.symbol)
            .uint("orderId", o.order_id)
            .int("orderListId", -1)
            .str("clientOrderId", &o.client_id)
            .int("transactTime", now);
        if resp == RespType::Ack {
            m.end();
            return out;
        }
        m.str(
            "price",
            &fmt_e8(if o.kind == OrdType::Market {
                0
            } else {
                o.price_e8
            }),
        )
        .str("origQty", &fmt_e8(o.qty_e8))
        .str("executedQty", &fmt_e8(o.executed_e8))
        .str("origQuoteOrderQty", &fmt_e8(0))
        .str(
            "cummulativeQuoteQty",
            &fmt_e8(quote(o.price_e8, o.executed_e8)),
        )
        .str("status", o.status.name())
        .str("timeInForce", o.tif)
        .str("type", o.kind.name())
        .str("side", o.side.name())
        .int("workingTime", now)
        .str("selfTradePreventionMode", "EXPIRE_MAKER");
        if resp == RespType::Full {
            let mut fills = String::new();
            if o.executed_e8 > 0 {
                let t = self.next_trade_id;
                self.next_trade_id += 1;
                fills.push('[');
                Obj::new(&mut fills)
                    .str("price", &fmt_e8(o.price_e8))
                    .str("qty", &fmt_e8(o.executed_e8))
                    .str("commission", &fmt_e8(0))
                    .str("commissionAsset", quote_asset(&self.cfg.symbol))
                    .uint("tradeId", t)
                    .end();
                fills.push(']');
            } else {
                fills.push_str("[]");
            }
            m.raw("fills", &fills);
        }
        m.end();
        out
    }

    /// The order as a query answers it (`with_time`) or as a futures place, modify
    /// or cancel answers it.
    pub(crate) fn order_text(&self, o: &Order, with_time: bool) -> String {
        if self.spot() {
            return self.order_query_text(o);
        }
        let mut out = String::with_capacity(640);
        let mut m = Obj::new(&mut out);
        m.uint("orderId", o.order_id)
            .str("symbol", &self.cfg.symbol)
            .str("status", o.status.name())
            .str("clientOrderId", &o.client_id)
            .str(
                "price",
                &fmt_e8(if o.kind == OrdType::Market {
                    0
                } else {
                    o.price_e8
                }),
            )
            .str(
                "avgPrice",
                &fmt_e8(if o.executed_e8 > 0 { o.price_e8 } else { 0 }),
            )
            .str("origQty", &fmt_e8(o.qty_e8))
            .str("executedQty", &fmt_e8(o.executed_e8))
            .str("cumQty", &fmt_e8(o.executed_e8))
            .str("cumQuote", &fmt_e8(quote(o.price_e8, o.executed_e8)))
            .str("timeInForce", o.tif)
            .str("type", o.kind.name())
            .bool("reduceOnly", false)
            .bool("closePosition", false)
            .str("side", o.side.name())
            .str("positionSide", "BOTH")
            .str("stopPrice", &fmt_e8(0))
            .str("workingType", "CONTRACT_PRICE")
            .bool("priceProtect", false)
            .str("origType", o.kind.name())
            .str("priceMatch", "NONE")
            .str("selfTradePreventionMode", "EXPIRE_MAKER")
            .int("goodTillDate", 0)
            .int("updateTime", o.update_time);
        if with_time {
            m.int("time", o.time);
        }
        m.end();
        out
    }

    /// A Spot order as its query answers it.
    pub(crate) fn order_query_text(&self, o: &Order) -> String {
        let mut out = String::with_capacity(640);
        Obj::new(&mut out)
            .str("symbol", &self.cfg.symbol)
            .uint("orderId", o.order_id)
            .int("orderListId", -1)
            .str("clientOrderId", &o.client_id)
            .str(
                "price",
                &fmt_e8(if o.kind == OrdType::Market {
                    0
                } else {
                    o.price_e8
                }),
            )
            .str("origQty", &fmt_e8(o.qty_e8))
            .str("executedQty", &fmt_e8(o.executed_e8))
            .str(
                "cummulativeQuoteQty",
                &fmt_e8(quote(o.price_e8, o.executed_e8)),
            )
            .str("status", o.status.name())
            .str("timeInForce", o.tif)
            .str("type", o.kind.name())
            .str("side", o.side.name())
            .str("stopPrice", &fmt_e8(0))
            .str("icebergQty", &fmt_e8(0))
            .int("time", o.time)
            .int("updateTime", o.update_time)
            .bool("isWorking", o.status == Status::New)
            .int("workingTime", o.time)
            .str("origQuoteOrderQty", &fmt_e8(0))
            .str("selfTradePreventionMode", "EXPIRE_MAKER")
            .end();
        out
    }

    /// The 503 of a 5xx fault. Spot documents every 5xx as unknown and has two
    /// codes for it: -1006 for a request the engine ran, -1007 ("send status
    /// unknown") for one it never got. USD-M futures documents which 503 texts mean
    /// "may have run" and which mean "failed": the emulator sends the first after
    /// executing and the -1001 text, a documented failure, without executing.
    pub(crate) fn binance_server_error(&self, executed: bool) -> Response {
        match (self.cfg.profile, executed) {
            (Profile::BinanceSpot, true) => Response::error(
                503,
                -1006,
                "An unexpected response was received from the message bus. Execution status unknown.",
            ),
            (Profile::BinanceSpot, false) => Response::error(
                503,
                -1007,
                "Timeout waiting for response from backend server. Send status unknown; execution status unknown.",
            ),
            (Profile::BinanceFutures, true) => Response::error(
                503,
                -1000,
                "Unknown error, please check your request or try again later.",
            ),
            (Profile::BinanceFutures, false) => Response::error(
                503,
                -1001,
                "Internal error; unable to process your request. Please try again.",
            ),
            // Not a Binance profile: the dispatcher never asks.
            _ => Response::error(503, -1000, "Service unavailable."),
        }
    }

    /// The configured limits as `exchangeInfo` lists them (`rateLimits`).
    pub(crate) fn rate_limits_json(&self) -> Vec<Value> {
        self.cfg
            .rate_limits
            .iter()
            .map(|l| {
                json!({
                    "rateLimitType": l.kind.name(),
                    "interval": l.interval.name(),
                    "intervalNum": l.interval_num,
                    "limit": l.limit,
                })
            })
            .collect()
    }

    /// The symbol's `filters`, from the rules the engine enforces
    /// (`crate::profiles::instruments`): Spot writes 8 decimals and
    /// `NOTIONAL`/`maxNumOrders`, USD-M `MIN_NOTIONAL`/`limit`.
    fn filters_json(&self) -> Value {
        let r = rules(self.cfg.profile);
        if self.spot() {
            return json!([
                { "filterType": "PRICE_FILTER", "minPrice": fmt_e8(r.min_price_e8), "maxPrice": fmt_e8(r.max_price_e8), "tickSize": fmt_e8(r.tick_e8) },
                { "filterType": "LOT_SIZE", "minQty": fmt_e8(r.min_qty_e8), "maxQty": fmt_e8(r.max_qty_e8), "stepSize": fmt_e8(r.step_e8) },
                { "filterType": "NOTIONAL", "minNotional": fmt_e8(r.min_notional_e8), "applyMinToMarket": true, "avgPriceMins": 5 },
                { "filterType": "MAX_NUM_ORDERS", "maxNumOrders": r.max_open }
            ]);
        }
        json!([
            { "filterType": "PRICE_FILTER", "minPrice": dec(r.min_price_e8), "maxPrice": dec(r.max_price_e8), "tickSize": dec(r.tick_e8) },
            { "filterType": "LOT_SIZE", "minQty": dec(r.min_qty_e8), "maxQty": dec(r.max_qty_e8), "stepSize": dec(r.step_e8) },
            { "filterType": "MARKET_LOT_SIZE", "minQty": dec(r.min_qty_e8), "maxQty": dec(r.max_qty_e8), "stepSize": dec(r.step_e8) },
            { "filterType": "MAX_NUM_ORDERS", "limit": r.max_open },
            { "filterType": "MIN_NOTIONAL", "notional": dec(r.min_notional_e8) }
        ])
    }

    pub(crate) fn exchange_info(&self, now: i64) -> Value {
        if !self.spot() {
            return self.exchange_info_futures(now);
        }
        let limits = self.rate_limits_json();
        let sym = &self.cfg.symbol;
        json!({
            "timezone": "UTC",
            "serverTime": now,
            "rateLimits": limits,
            "exchangeFilters": [],
            "symbols": [{
                "symbol": sym,
                "status": "TRADING",
                "baseAsset": base_asset(sym),
                "baseAssetPrecision": 8,
                "quoteAsset": quote_asset(sym),
                "quotePrecision": 8,
                "quoteAssetPrecision": 8,
                "orderTypes": ["LIMIT", "LIMIT_MAKER", "MARKET"],
                "icebergAllowed": false,
                "ocoAllowed": false,
                "quoteOrderQtyMarketAllowed": false,
                "allowTrailingStop": false,
                "cancelReplaceAllowed": true,
                "isSpotTradingAllowed": true,
                "isMarginTradingAllowed": false,
                "filters": self.filters_json(),
                "permissions": [],
                "permissionSets": [["SPOT"]],
                "defaultSelfTradePreventionMode": "EXPIRE_MAKER",
                "allowedSelfTradePreventionModes": ["EXPIRE_TAKER", "EXPIRE_MAKER", "EXPIRE_BOTH"]
            }]
        })
    }

    pub(crate) fn exchange_info_futures(&self, now: i64) -> Value {
        let limits = self.rate_limits_json();
        let sym = &self.cfg.symbol;
        json!({
            "timezone": "UTC",
            "serverTime": now,
            "futuresType": "U_MARGINED",
            "rateLimits": limits,
            "exchangeFilters": [],
            "assets": [{ "asset": quote_asset(sym), "marginAvailable": true, "autoAssetExchange": "0" }],
            "symbols": [{
                "symbol": sym,
                "pair": sym,
                "contractType": "PERPETUAL",
                "status": "TRADING",
                "baseAsset": base_asset(sym),
                "quoteAsset": quote_asset(sym),
                "marginAsset": quote_asset(sym),
                "pricePrecision": 2,
                "quantityPrecision": 3,
                "baseAssetPrecision": 8,
                "quotePrecision": 8,
                "orderTypes": ["LIMIT", "MARKET"],
                "timeInForce": ["GTC", "IOC", "FOK", "GTX"],
                "filters": self.filters_json()
            }]
        })
    }

    pub(crate) fn depth(&self, limit: usize, now: i64) -> Value {
        let tick = 1_000_000u64; // 0.01
        let mid = self.cfg.mid_price_e8;
        let level = |p: u64| json!([fmt_e8(p), fmt_e8(100_000_000)]);
        let bids: Vec<Value> = (1..=limit as u64)
            .map_while(|i| mid.checked_sub(i * tick))
            .filter(|&p| p > 0)
            .map(level)
            .collect();
        let asks: Vec<Value> = (1..=limit as u64).map(|i| level(mid + i * tick)).collect();
        if self.spot() {
            json!({ "lastUpdateId": now, "bids": bids, "asks": asks })
        } else {
            json!({ "lastUpdateId": now, "E": now, "T": now, "bids": bids, "asks": asks })
        }
    }

    pub(crate) fn account(&self, _account: usize, now: i64) -> Value {
        let sym = &self.cfg.symbol;
        if !self.spot() {
            let q = quote_asset(sym);
            return json!({
                "feeTier": 0,
                "canTrade": true,
                "canDeposit": true,
                "canWithdraw": true,
                "updateTime": 0,
                "multiAssetsMargin": false,
                "totalInitialMargin": "0.00000000",
                "totalMaintMargin": "0.00000000",
                "totalWalletBalance": "100000.00000000",
                "totalUnrealizedProfit": "0.00000000",
                "totalMarginBalance": "100000.00000000",
                "availableBalance": "100000.00000000",
                "maxWithdrawAmount": "100000.00000000",
                "assets": [{
                    "asset": q,
                    "walletBalance": "100000.00000000",
                    "unrealizedProfit": "0.00000000",
                    "marginBalance": "100000.00000000",
                    "availableBalance": "100000.00000000",
                    "updateTime": now
                }],
                "positions": []
            });
        }
        let (base, quote) = match rules(self.cfg.profile).funds {
            Funds::Spot { base_e8, quote_e8 } => (base_e8, quote_e8),
            _ => (0, 0),
        };
        json!({
            "makerCommission": 10,
            "takerCommission": 10,
            "buyerCommission": 0,
            "sellerCommission": 0,
            "commissionRates": { "maker": "0.00100000", "taker": "0.00100000", "buyer": "0.00000000", "seller": "0.00000000" },
            "canTrade": true,
            "canWithdraw": true,
            "canDeposit": true,
            "brokered": false,
            "requireSelfTradePrevention": false,
            "preventSor": false,
            "updateTime": now,
            "accountType": "SPOT",
            "balances": [
                { "asset": base_asset(sym), "free": fmt_e8(base), "locked": "0.00000000" },
                { "asset": quote_asset(sym), "free": fmt_e8(quote), "locked": "0.00000000" }
            ],
            "permissions": ["SPOT"],
            "uid": 1
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::config::Config;
    use crate::engine::book::Side;
    use crate::hashing::Hashing;

    // The `json!` maps the answers were built from before (the reference).
    fn order_ack_json(v: &mut Venue, idx: usize, resp: RespType, now: i64) -> Value {
        let o = v.orders[idx].clone();
        let mut j = json!({
            "symbol": v.cfg.symbol,
            "orderId": o.order_id,
            "orderListId": -1,
            "clientOrderId": o.client_id,
            "transactTime": now,
        });
        if resp == RespType::Ack {
            return j;
        }
        if let Value::Object(m) = &mut j {
            m.insert(
                "price".into(),
                json!(fmt_e8(if o.kind == OrdType::Market {
                    0
                } else {
                    o.price_e8
                })),
            );
            m.insert("origQty".into(), json!(fmt_e8(o.qty_e8)));
            m.insert("executedQty".into(), json!(fmt_e8(o.executed_e8)));
            m.insert("origQuoteOrderQty".into(), json!(fmt_e8(0)));
            m.insert(
                "cummulativeQuoteQty".into(),
                json!(fmt_e8(quote(o.price_e8, o.executed_e8))),
            );
            m.insert("status".into(), json!(o.status.name()));
            m.insert("timeInForce".into(), json!(o.tif));
            m.insert("type".into(), json!(o.kind.name()));
            m.insert("side".into(), json!(o.side.name()));
            m.insert("workingTime".into(), json!(now));
            m.insert("selfTradePreventionMode".into(), json!("EXPIRE_MAKER"));
            if resp == RespType::Full {
                let fills = if o.executed_e8 > 0 {
                    let t = v.next_trade_id;
                    v.next_trade_id += 1;
                    vec![json!({
                        "price": fmt_e8(o.price_e8),
                        "qty": fmt_e8(o.executed_e8),
                        "commission": fmt_e8(0),
                        "commissionAsset": quote_asset(&v.cfg.symbol),
                        "tradeId": t,
                    })]
                } else {
                    Vec::new()
                };
                m.insert("fills".into(), Value::Array(fills));
            }
        }
        j
    }

    /// The order as a query answers it (`with_time`) or as a futures place, modify
    /// or cancel answers it.
    fn order_json(v: &Venue, o: &Order, with_time: bool) -> Value {
        if v.spot() {
            return order_query_json(v, o);
        }
        let mut j = json!({
            "orderId": o.order_id,
            "symbol": v.cfg.symbol,
            "status": o.status.name(),
            "clientOrderId": o.client_id,
            "price": fmt_e8(if o.kind == OrdType::Market { 0 } else { o.price_e8 }),
            "avgPrice": fmt_e8(if o.executed_e8 > 0 { o.price_e8 } else { 0 }),
            "origQty": fmt_e8(o.qty_e8),
            "executedQty": fmt_e8(o.executed_e8),
            "cumQty": fmt_e8(o.executed_e8),
            "cumQuote": fmt_e8(quote(o.price_e8, o.executed_e8)),
            "timeInForce": o.tif,
            "type": o.kind.name(),
            "reduceOnly": false,
            "closePosition": false,
            "side": o.side.name(),
            "positionSide": "BOTH",
            "stopPrice": fmt_e8(0),
            "workingType": "CONTRACT_PRICE",
            "priceProtect": false,
            "origType": o.kind.name(),
            "priceMatch": "NONE",
            "selfTradePreventionMode": "EXPIRE_MAKER",
            "goodTillDate": 0,
            "updateTime": o.update_time,
        });
        if with_time {
            if let Value::Object(m) = &mut j {
                m.insert("time".into(), json!(o.time));
            }
        }
        j
    }

    fn order_query_json(v: &Venue, o: &Order) -> Value {
        json!({
            "symbol": v.cfg.symbol,
            "orderId": o.order_id,
            "orderListId": -1,
            "clientOrderId": o.client_id,
            "price": fmt_e8(if o.kind == OrdType::Market { 0 } else { o.price_e8 }),
            "origQty": fmt_e8(o.qty_e8),
            "executedQty": fmt_e8(o.executed_e8),
            "cummulativeQuoteQty": fmt_e8(quote(o.price_e8, o.executed_e8)),
            "status": o.status.name(),
            "timeInForce": o.tif,
            "type": o.kind.name(),
            "side": o.side.name(),
            "stopPrice": fmt_e8(0),
            "icebergQty": fmt_e8(0),
            "time": o.time,
            "updateTime": o.update_time,
            "isWorking": o.status == Status::New,
            "workingTime": o.time,
            "origQuoteOrderQty": fmt_e8(0),
            "selfTradePreventionMode": "EXPIRE_MAKER",
        })
    }

    /// Random orders of every status, side, type and tif, ids JSON escapes:
    /// every answer's text is its map's, on Spot and on USD-M.
    #[test]
    fn answers_are_the_maps_text() {
        let ids = ["a", "", "q\"b\\c", "x\u{1}y", "é€", "cid-123_ABC"];
        let kinds = [OrdType::Limit, OrdType::LimitMaker, OrdType::Market];
        let resps = [RespType::Ack, RespType::Result, RespType::Full];
        for cfg in [Config::binance_spot(), Config::binance_futures()] {
            let mut new = Venue::new(cfg.clone(), Hashing::fixed());
            let mut old = Venue::new(cfg, Hashing::keyed());
            let mut seed = 9u64;
            let mut next = || {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                seed >> 11
            };
            for n in 0..600 {
                let qty = next() % 10_000_000_000 + 1;
                let o = Order {
                    account: 0,
                    order_id: next() >> (next() % 50),
                    client_id: ids[n % ids.len()].to_string(),
                    side: if next() % 2 == 0 {
                        Side::Buy
                    } else {
                        Side::Sell
                    },
                    kind: kinds[n % 3],
                    tif: ["GTC", "IOC", "FOK"][n % 3],
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
                for t in [false, true] {
                    assert_eq!(new.order_text(&o, t), order_json(&new, &o, t).to_string());
                }
                assert_eq!(
                    new.order_query_text(&o),
                    order_query_json(&new, &o).to_string()
                );
                new.orders.push(o.clone());
                old.orders.push(o);
                let (resp, now) = (resps[n % 3], (next() % 2_000_000_000_000) as i64);
                let text = new.order_ack_text(n, resp, now);
                assert_eq!(
                    text,
                    order_ack_json(&mut old, n, resp, now).to_string(),
                    "{n}"
                );
                assert_eq!(new.next_trade_id, old.next_trade_id);
            }
        }
    }
}
