//! Step 2 for Binance: an admitted request run on the order registry (place,
//! cancel, cancel-replace, modify, queries), with the unfilled order count kept
//! as Binance Spot documents it.

use serde_json::json;

use crate::engine::book::{fmt_e8, quote, Placement, Status};
use crate::engine::state::Venue;
use crate::http::Response;
use crate::json_write::{array_into, Obj};
use crate::profiles::binance::request::{BinanceOp, NewOrder, OrderRef, ReplaceMode};
use crate::profiles::instruments::{binance_refusal, rules};

impl Venue {
    /// Step 2 of the drive order: run an admitted request at `now`, admitted at
    /// `admitted` (the same instant unless a fault delayed it).
    pub(crate) fn execute_binance(
        &mut self,
        op: BinanceOp,
        account: usize,
        now: i64,
        admitted: i64,
    ) -> Response {
        match op {
            BinanceOp::TickerPrice { .. }
            | BinanceOp::BookTicker { .. }
            | BinanceOp::Ticker24hr { .. }
            | BinanceOp::Trades(_)
            | BinanceOp::Klines { .. }
            | BinanceOp::AvgPrice
            | BinanceOp::MyTrades { .. }
            | BinanceOp::AllOrders { .. }
            | BinanceOp::RateLimitOrder
            | BinanceOp::OrderTest { .. } => self.market_answer(&op, account, now),
            BinanceOp::Countdown(ms) => {
                let symbol = self.cfg.symbol.clone();
                self.arm_switch(account, Some(symbol.clone()), ms, now);
                Response::json(
                    200,
                    json!({ "symbol": symbol, "countdownTime": ms.to_string() }).to_string(),
                )
            }
            BinanceOp::CapitalConfig => Response::json(200, self.capital_config().to_string()),
            BinanceOp::MarginPairs { isolated } => {
                Response::json(200, self.margin_pairs(isolated).to_string())
            }
            BinanceOp::CancelAll => {
                let open: Vec<u64> = self.open_orders(account).map(|o| o.order_id).collect();
                if !self.spot() {
                    // USD-M `DELETE allOpenOrders`: none open is no error.
                    for id in open {
                        let r = OrderRef {
                            order_id: Some(id),
                            client_id: None,
                        };
                        let _ = self.cancel(account, &r, None, now);
                    }
                    return Response::json(
                        200,
                        json!({ "code": 200, "msg": "The operation of cancel all open order is done." })
                            .to_string(),
                    );
                }
                if open.is_empty() {
                    return Response::error(400, -2011, "Unknown order sent.");
                }
                let mut list = Vec::with_capacity(open.len());
                for id in open {
                    let r = OrderRef {
                        order_id: Some(id),
                        client_id: None,
                    };
                    match self.cancel(account, &r, None, now) {
                        Ok(v) => list.push(v),
                        Err((status, code, msg)) => return Response::error(status, code, &msg),
                    }
                }
                let mut body = String::new();
                array_into(&mut body, &list);
                Response::json(200, body)
            }
            // Only the WebSocket API routes these, and its session runs them.
            BinanceOp::StreamSubscribe
            | BinanceOp::StreamUnsubscribe(_)
            | BinanceOp::StreamSubscriptions
            | BinanceOp::Session(_)
            | BinanceOp::StreamSubscribeLoggedOn => {
                Response::error(400, -1020, "This operation is not supported.")
            }
            BinanceOp::Ping => Response::json(200, "{}".into()),
            BinanceOp::Time => Response::json(200, json!({ "serverTime": now }).to_string()),
            BinanceOp::ExchangeInfo => Response::json(200, self.exchange_info(now).to_string()),
            BinanceOp::Depth(limit) => Response::json(200, self.depth(limit, now).to_string()),
            BinanceOp::Account => Response::json(200, self.account(account, now).to_string()),
            BinanceOp::OpenOrders => {
                let list: Vec<String> = self
                    .open_orders(account)
                    .map(|o| self.order_text(o, true))
                    .collect();
                let mut body = String::new();
                array_into(&mut body, &list);
                Response::json(200, body)
            }
            BinanceOp::NewOrder(n) => match self.place(account, n, now) {
                Ok(v) => Response::json(200, v),
                Err((status, code, msg)) => {
                    // Spot: refused by the engine is not a successful placement.
                    if self.spot() {
                        self.count_order(account, -1, admitted);
                    }
                    Response::error(status, code, &msg)
                }
            },
            BinanceOp::Modify {
                target,
                side,
                qty_e8,
                price_e8,
            } => {
                let Some(i) = self
                    .find(account, &target)
                    .filter(|&i| self.orders[i].status == Status::New)
                else {
                    return Response::error(400, -2013, "Order does not exist.");
                };
                if self.orders[i].side != side {
                    return Response::error(
                        400,
                        -4064,
                        "Original order side and modified side must be the same.",
                    );
                }
                let profile = self.cfg.profile;
                let kind = self.orders[i].kind;
                if let Err(b) = rules(profile).check_filters(kind, price_e8, qty_e8) {
                    let (code, msg) = binance_refusal(profile, b);
                    return Response::error(400, code, &msg);
                }
                self.amend_order(i, Some(qty_e8), Some(price_e8), now);
                Response::json(200, self.order_text(&self.orders[i], false))
            }
            BinanceOp::Cancel(r, cid) => match self.cancel(account, &r, cid, now) {
                Ok(v) => Response::json(200, v),
                Err((status, code, msg)) => Response::error(status, code, &msg),
            },
            BinanceOp::Query(r) => match self.find(account, &r) {
                Some(i) => Response::json(200, self.order_text(&self.orders[i], true)),
                None => Response::error(400, -2013, "Order does not exist."),
            },
            BinanceOp::CancelReplace {
                mode,
                cancel,
                cancel_client_id,
                new,
            } => self.cancel_replace(account, mode, &cancel, cancel_client_id, new, now),
        }
    }

    /// An admitted placement that never reached the engine (a fault closed or
    /// failed it first): it was not a successful placement, so it does not stay in
    /// the unfilled order count. A cancel-replace keeps its count: Binance counts
    /// its new order even when it is not attempted.
    pub(crate) fn binance_not_executed(&mut self, op: &BinanceOp, account: usize, admitted: i64) {
        if self.spot() && matches!(op, BinanceOp::NewOrder(_)) {
            self.count_order(account, -1, admitted);
        }
    }

    pub(crate) fn find(&self, account: usize, r: &OrderRef) -> Option<usize> {
        let i = match (&r.order_id, &r.client_id) {
            (Some(id), _) => *self.by_id.get(id)?,
            (None, Some(c)) => *self.by_client.get(&(account, c.clone()))?,
            (None, None) => return None,
        };
        let o = &self.orders[i];
        if o.account != account {
            return None;
        }
        if let (Some(_), Some(c)) = (&r.order_id, &r.client_id) {
            if &o.client_id != c {
                return None;
            }
        }
        Some(i)
    }

    pub(crate) fn place(
        &mut self,
        account: usize,
        n: NewOrder,
        now: i64,
    ) -> Result<String, (u16, i32, String)> {
        if let Some(c) = &n.client_id {
            if let Some(&i) = self.by_client.get(&(account, c.clone())) {
                if self.orders[i].status == Status::New {
                    self.report.duplicate_rejects += 1;
                    return Err(if self.spot() {
                        (400, -2010, "Duplicate order sent.".into())
                    } else {
                        (400, -4116, "ClientOrderId is duplicated.".into())
                    });
                }
            }
        }
        let placement = Placement {
            side: n.side,
            kind: n.kind,
            tif: n.tif,
            qty_e8: n.qty_e8,
            price_e8: n.price_e8,
        };
        let profile = self.cfg.profile;
        if let Err(b) = self.check_placement(account, &rules(profile), &placement) {
            let (code, msg) = binance_refusal(profile, b);
            return Err((400, code, msg));
        }
        let idx = self.book_order(account, n.client_id.clone(), "sim-", placement, now);
        let client_id = self.orders[idx].client_id.clone();
        let fate = self.orders[idx].status;
        let filled = fate == Status::Filled;
        if filled && self.spot() {
            // Binance Spot decrements the unfilled order count when an order first fills
            // (after the answer's headers were written, as there).
            self.count_order(account, -1, now);
        }
        // The stream: accepted as NEW, then its fill or its expiry.
        let executed = self.orders[idx].executed_e8;
        self.orders[idx].status = Status::New;
        self.orders[idx].executed_e8 = 0;
        self.emit(idx, "NEW", &client_id, "", 0, -1, now);
        self.orders[idx].status = fate;
        self.orders[idx].executed_e8 = executed;
        if filled {
            let t = self.next_trade_id as i64;
            self.next_trade_id += 1;
            self.emit(idx, "TRADE", &client_id, "", n.qty_e8, t, now);
        } else if fate == Status::Expired {
            self.emit(idx, "EXPIRED", &client_id, "", 0, -1, now);
        }
        if !self.spot() {
            return Ok(self.order_text(&self.orders[idx], false));
        }
        Ok(self.order_ack_text(idx, n.resp, now))
    }

    pub(crate) fn cancel(
        &mut self,
        account: usize,
        r: &OrderRef,
        cancel_id: Option<String>,
        now: i64,
    ) -> Result<String, (u16, i32, String)> {
        let Some(i) = self
            .find(account, r)
            .filter(|&i| self.orders[i].status == Status::New)
        else {
            return Err((400, -2011, "Unknown order sent.".into()));
        };
        let cancel_id = cancel_id.unwrap_or_else(|| {
            self.next_cancel_id += 1;
            format!("sim-cancel-{}", self.next_cancel_id)
        });
        self.cancel_order(i, now);
        let orig = self.orders[i].client_id.clone();
        self.emit(i, "CANCELED", &cancel_id, &orig, 0, -1, now);
        let o = &self.orders[i];
        if !self.spot() {
            return Ok(self.order_text(o, false));
        }
        let mut out = String::with_capacity(512);
        Obj::new(&mut out)
            .str("symbol", &self.cfg.symbol)
            .str("origClientOrderId", &o.client_id)
            .uint("orderId", o.order_id)
            .int("orderListId", -1)
            .str("clientOrderId", &cancel_id)
            .int("transactTime", now)
            .str("price", &fmt_e8(o.price_e8))
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
            .str("selfTradePreventionMode", "EXPIRE_MAKER")
            .end();
        Ok(out)
    }

    pub(crate) fn cancel_replace(
        &mut self,
        account: usize,
        mode: ReplaceMode,
        cancel: &OrderRef,
        cancel_client_id: Option<String>,
        new: NewOrder,
        now: i64,
    ) -> Response {
        let err_json = |(_, code, msg): (u16, i32, String)| {
            let mut out = String::with_capacity(msg.len() + 24);
            Obj::new(&mut out)
                .int("code", i64::from(code))
                .str("msg", &msg)
                .end();
            out
        };
        let c = self.cancel(account, cancel, cancel_client_id, now);
        let c_ok = c.is_ok();
        if !c_ok && mode == ReplaceMode::StopOnFailure {
            let mut data = String::with_capacity(160);
            Obj::new(&mut data)
                .str("cancelResult", "FAILURE")
                .str("newOrderResult", "NOT_ATTEMPTED")
                .raw(
                    "cancelResponse",
                    &c.map_err(err_json).err().unwrap_or_else(|| "null".into()),
                )
                .raw("newOrderResponse", "null")
                .end();
            return Response::json(400, failed(-2022, "Order cancel-replace failed.", &data));
        }
        let n = self.place(account, new, now);
        let n_ok = n.is_ok();
        let result = |ok: bool| if ok { "SUCCESS" } else { "FAILURE" };
        let cancel_v = c.unwrap_or_else(err_json);
        let new_v = n.unwrap_or_else(err_json);
        let mut data = String::with_capacity(cancel_v.len() + new_v.len() + 96);
        Obj::new(&mut data)
            .str("cancelResult", result(c_ok))
            .str("newOrderResult", result(n_ok))
            .raw("cancelResponse", &cancel_v)
            .raw("newOrderResponse", &new_v)
            .end();
        match (c_ok, n_ok) {
            (true, true) => Response::json(200, data),
            (false, false) => {
                Response::json(400, failed(-2022, "Order cancel-replace failed.", &data))
            }
            _ => Response::json(
                409,
                failed(-2021, "Order cancel-replace partially failed.", &data),
            ),
        }
    }
}

/// A cancel-replace's failure: `{"code","msg","data"}`, `data` JSON text.
fn failed(code: i64, msg: &str, data: &str) -> String {
    let mut out = String::with_capacity(data.len() + msg.len() + 32);
    Obj::new(&mut out)
        .int("code", code)
        .str("msg", msg)
        .raw("data", data)
        .end();
    out
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::config::Config;
    use crate::engine::book::{OrdType, Side};
    use crate::hashing::Hashing;
    use crate::profiles::binance::request::RespType;

    /// The cancel answer's `json!` map as it was (Spot), from the order after
    /// its cancel.
    fn cancel_as_it_was(v: &Venue, i: usize, cancel_id: &str, now: i64) -> Value {
        let o = &v.orders[i];
        json!({
            "symbol": v.cfg.symbol,
            "origClientOrderId": o.client_id,
            "orderId": o.order_id,
            "orderListId": -1,
            "clientOrderId": cancel_id,
            "transactTime": now,
            "price": fmt_e8(o.price_e8),
            "origQty": fmt_e8(o.qty_e8),
            "executedQty": fmt_e8(o.executed_e8),
            "cummulativeQuoteQty": fmt_e8(quote(o.price_e8, o.executed_e8)),
            "status": o.status.name(),
            "timeInForce": o.tif,
            "type": o.kind.name(),
            "side": o.side.name(),
            "selfTradePreventionMode": "EXPIRE_MAKER",
        })
    }

    /// The cancel-replace answer as it was composed from its parts' maps
    /// (each part's text read back: their own tests hold them to their maps).
    fn replace_as_it_was(
        v: &mut Venue,
        mode: ReplaceMode,
        cancel: &OrderRef,
        new: NewOrder,
        now: i64,
    ) -> (u16, String) {
        let err_json = |(_, code, msg): (u16, i32, String)| json!({ "code": code, "msg": msg });
        let read = |t: String| serde_json::from_str::<Value>(&t).unwrap();
        let c = v.cancel(0, cancel, None, now).map(read);
        let c_ok = c.is_ok();
        if !c_ok && mode == ReplaceMode::StopOnFailure {
            let body = json!({
                "code": -2022,
                "msg": "Order cancel-replace failed.",
                "data": {
                    "cancelResult": "FAILURE",
                    "newOrderResult": "NOT_ATTEMPTED",
                    "cancelResponse": c.map_err(err_json).err(),
                    "newOrderResponse": null,
                }
            });
            return (400, body.to_string());
        }
        let n = v.place(0, new, now).map(read);
        let n_ok = n.is_ok();
        let result = |ok: bool| if ok { "SUCCESS" } else { "FAILURE" };
        let data = json!({
            "cancelResult": result(c_ok),
            "newOrderResult": result(n_ok),
            "cancelResponse": c.unwrap_or_else(err_json),
            "newOrderResponse": n.unwrap_or_else(err_json),
        });
        match (c_ok, n_ok) {
            (true, true) => (200, data.to_string()),
            (false, false) => (
                400,
                json!({ "code": -2022, "msg": "Order cancel-replace failed.", "data": data })
                    .to_string(),
            ),
            _ => (
                409,
                json!({ "code": -2021, "msg": "Order cancel-replace partially failed.", "data": data })
                    .to_string(),
            ),
        }
    }

    /// Random places, cancels and cancel-replaces (both modes; cancels of
    /// orders gone or never there, places refused as duplicates or off the
    /// filters) on two Spot venues alike: the same answers, byte for byte.
    #[test]
    fn cancels_and_replaces_answer_as_they_did() {
        let mut new = Venue::new(Config::binance_spot(), Hashing::fixed());
        let mut old = Venue::new(Config::binance_spot(), Hashing::keyed());
        let mut seed = 17u64;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        let resps = [RespType::Ack, RespType::Result, RespType::Full];
        for round in 0..400u64 {
            let now = 1_700_000_000_000 + round as i64 * 10;
            let order = NewOrder {
                side: if next(2) == 0 { Side::Buy } else { Side::Sell },
                kind: OrdType::Limit,
                tif: "GTC",
                qty_e8: 1_000_000 * (next(3) + 1),
                price_e8: 4_900_000_000_000 + next(500) * 1_000_000 + next(8) / 7 * 7,
                client_id: Some(format!("c-{}", next(60))),
                resp: resps[next(3) as usize],
            };
            let target = OrderRef {
                order_id: (next(2) == 0).then(|| next(round + 2) + 1),
                client_id: Some(format!("c-{}", next(60))),
            };
            match next(3) {
                0 => {
                    let a = new.place(0, order.clone(), now);
                    let b = old.place(0, order, now);
                    assert_eq!(a, b, "round {round}");
                }
                1 => {
                    let cid = (next(2) == 0).then(|| "q\"x".to_string());
                    let a = new.cancel(0, &target, cid.clone(), now);
                    let b = old.cancel(0, &target, cid.clone(), now);
                    match (&a, b) {
                        (Ok(text), Ok(_)) => {
                            let i = old.find(0, &target).unwrap();
                            let id = match cid {
                                Some(c) => c,
                                None => format!("sim-cancel-{}", old.next_cancel_id),
                            };
                            assert_eq!(text, &cancel_as_it_was(&old, i, &id, now).to_string());
                        }
                        (a, b) => assert_eq!(a, &b, "round {round}"),
                    }
                }
                _ => {
                    let mode =
                        [ReplaceMode::StopOnFailure, ReplaceMode::AllowFailure][next(2) as usize];
                    let r = new.cancel_replace(0, mode, &target, None, order.clone(), now);
                    let (status, body) = replace_as_it_was(&mut old, mode, &target, order, now);
                    assert_eq!((r.status, r.body), (status, body), "round {round}");
                }
            }
        }
        let (open, all) = (new.open_orders(0).count(), new.orders.len());
        assert!(all > 80 && open > 10 && open < all, "{open} open of {all}");
    }
}
