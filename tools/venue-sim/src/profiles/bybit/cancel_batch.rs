//! Bybit's `POST /v5/order/cancel-batch` (linear): 1 to 20 orders in one
//! request, each named by `orderId` or `orderLinkId` with its `symbol`, each
//! cancelled or refused on its own, in the request's order. The answer is
//! `retCode` 0 with one entry per order in `result.list` (`category`,
//! `symbol`, `orderId`, `orderLinkId`; the `orderId` empty for a refused one)
//! and its own `code` and `msg` in `retExtInfo.list`: an order that is not
//! open (unknown, filled, already cancelled) is 110001 "order not exists or too
//! late to cancel", alone. Only unfilled or partially filled orders can be
//! cancelled. Source:
//! <https://bybit-exchange.github.io/docs/v5/order/batch-cancel> (checked
//! 2026-12-06; linear since 2023-09, spot since 2024-03-06, the v5
//! changelog; the emulator plays linear only).
//!
//! Its limit is its own, per UID over a rolling second, 10 orders by default
//! (linear): "The batch order endpoint ... has its own rate limit and does not
//! share it with single requests", counted "according to the actual number of
//! orders"; and "If part of the last batch of orders requested within 1s
//! exceeds the limit, the part that exceeds the limit will fail, and the part
//! that does not exceed the limit will succeed": the orders past what is left
//! answer 10006 each and are not cancelled; with nothing left the whole request
//! is 10006 (<https://bybit-exchange.github.io/docs/v5/rate-limit>, "Instructions
//! for batch endpoints", checked 2026-12-06).

use serde_json::{json, Map, Value};

use super::{BybitOp, Endpoint, Fields, Target};
use crate::engine::book::Status;
use crate::engine::state::Venue;
use crate::http::{json_text, Response};

/// Orders in one batch cancel, at most (linear).
const MAX_ITEMS: usize = 20;

impl Venue {
    /// Reads a batch cancel: the `category` of the request, and each item's
    /// `symbol` and `orderId` or `orderLinkId`. A bad item refuses the whole
    /// request, naming it.
    pub(super) fn cancel_batch_op(&self, f: &Fields) -> Result<BybitOp, String> {
        let category = f.get("category").ok_or("category missing")?;
        let Some(items) = f.body.get("request").and_then(Value::as_array) else {
            return Err("request missing".into());
        };
        if items.is_empty() || items.len() > MAX_ITEMS {
            return Err(format!("request: 1 to {MAX_ITEMS} orders"));
        }
        let mut targets = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let Value::Object(m) = item else {
                return Err(format!("request[{i}] is not an object"));
            };
            let mut body = Map::clone(m);
            body.insert("category".into(), Value::String(category.clone()));
            let one = Fields {
                body,
                query: Vec::new(),
            };
            match self.bybit_op(Endpoint::Cancel, &one) {
                Ok(BybitOp::Cancel(t)) => targets.push(t),
                Ok(_) => return Err(format!("request[{i}]: not a cancel")),
                Err(e) => return Err(format!("request[{i}]: {e}")),
            }
        }
        Ok(BybitOp::CancelBatch {
            targets,
            room: MAX_ITEMS,
        })
    }

    /// Cancels each order of a batch on its own (the first `room`; the rest
    /// are over the limit): one entry per order in `result.list` and
    /// `retExtInfo.list`, in the request's order.
    pub(super) fn cancel_batch(
        &mut self,
        targets: &[Target],
        room: usize,
        account: usize,
        now: i64,
    ) -> Response {
        let symbol = self.cfg.symbol.clone();
        let mut list = Vec::with_capacity(targets.len());
        let mut info = Vec::with_capacity(targets.len());
        for (k, t) in targets.iter().enumerate() {
            let open = self
                .find_bybit(account, t)
                .filter(|&i| self.orders[i].status == Status::New);
            let (order_id, link, code, msg) = match open {
                _ if k >= room => (String::new(), asked_link(t), 10006, "Too many visits!"),
                None => (
                    String::new(),
                    asked_link(t),
                    110001,
                    "order not exists or too late to cancel",
                ),
                Some(i) => {
                    self.cancel_order(i, now);
                    let o = &self.orders[i];
                    (o.order_id.to_string(), o.client_id.clone(), 0, "OK")
                }
            };
            list.push(json!({
                "category": "linear",
                "symbol": symbol,
                "orderId": order_id,
                "orderLinkId": link,
            }));
            info.push(json!({ "code": code, "msg": msg }));
        }
        Response::json(
            200,
            json_text(&json!({
                "retCode": 0,
                "retMsg": "OK",
                "result": { "list": list },
                "retExtInfo": { "list": info },
                "time": now,
            })),
        )
    }
}

/// The `orderLinkId` an item asked for ("" when it named an `orderId`), as the
/// page's example echoes it for an order it did not cancel.
fn asked_link(t: &Target) -> String {
    match t {
        Target::Link(l) => l.clone(),
        Target::Id(_) => String::new(),
    }
}
