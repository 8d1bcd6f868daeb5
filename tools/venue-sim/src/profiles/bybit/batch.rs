//! Bybit's `POST /v5/order/create-batch` (linear): up to 20 orders in one
//! request, each placed or refused on its own. The answer is `retCode` 0 with one
//! entry per order in `result.list` (empty fields for a refused one) and its own
//! `code` and `msg` in `retExtInfo.list`, in the request's order: a batch with
//! some items refused is a success with those items' codes. Each order counts on
//! the create limit (charged at admission, `batch_len`), and one order's
//! placement is the same as `/v5/order/create`'s (a duplicate `orderLinkId` is
//! 110072). Source: <https://bybit-exchange.github.io/docs/v5/order/batch-place>
//! (checked 2026-12-06).

use serde_json::{json, Map, Value};

use super::{envelope, fail, BybitOp, Endpoint, Fields};
use crate::config::Profile;
use crate::engine::book::Placement;
use crate::engine::state::Venue;
use crate::http::Response;
use crate::profiles::instruments::{bybit_refusal, rules};

/// Orders in one batch, at most.
const MAX_ITEMS: usize = 20;

/// What a request of `endpoint` counts on its limit: a batch, each order.
pub(super) fn batch_len(endpoint: Endpoint, f: &Fields) -> u64 {
    match endpoint {
        Endpoint::CreateBatch | Endpoint::CancelBatch => f
            .body
            .get("request")
            .and_then(Value::as_array)
            .map_or(1, |r| r.len().max(1) as u64),
        _ => 1,
    }
}

impl Venue {
    /// Reads a batch: the `category` of the request and each item a `Create`.
    pub(super) fn batch_op(&self, f: &Fields) -> Result<BybitOp, String> {
        let category = f.get("category").ok_or("category missing")?;
        let Some(items) = f.body.get("request").and_then(Value::as_array) else {
            return Err("request missing".into());
        };
        if items.is_empty() || items.len() > MAX_ITEMS {
            return Err(format!("request: 1 to {MAX_ITEMS} orders"));
        }
        let mut ops = Vec::with_capacity(items.len());
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
            let op = self
                .bybit_op(Endpoint::Create, &one)
                .map_err(|e| format!("request[{i}]: {e}"))?;
            ops.push(op);
        }
        Ok(BybitOp::CreateBatch(ops))
    }

    /// Places one order (`/v5/order/create`, or an item of a batch): its
    /// `orderId` and `orderLinkId`, or the code and message of its refusal.
    pub(super) fn create_one(
        &mut self,
        op: BybitOp,
        account: usize,
        now: i64,
    ) -> Result<Value, (i64, &'static str)> {
        let BybitOp::Create {
            side,
            kind,
            tif,
            qty_e8,
            price_e8,
            link_id,
        } = op
        else {
            return Err((10001, "params error: not an order"));
        };
        if let Some(l) = &link_id {
            if self.by_client.contains_key(&(account, l.clone())) {
                self.report.duplicate_rejects += 1;
                return Err((110072, "OrderLinkedID is duplicate"));
            }
        }
        let placement = Placement {
            side,
            kind,
            tif,
            qty_e8,
            price_e8,
        };
        if let Err(b) = self.check_placement(account, &rules(Profile::Bybit), &placement) {
            return Err(bybit_refusal(b));
        }
        // Without an orderLinkId the venue answers "" (indexed by order id).
        let none = link_id.is_none();
        let idx = self.book_order(account, link_id, "", placement, now);
        if none {
            let key = (account, std::mem::take(&mut self.orders[idx].client_id));
            self.by_client.remove(&key);
        }
        let (order_id, client_id) = (self.orders[idx].order_id, &self.orders[idx].client_id);
        Ok(json!({ "orderId": order_id.to_string(), "orderLinkId": client_id }))
    }

    /// Places each order of a batch on its own: one entry per order in
    /// `result.list` and `retExtInfo.list`, in the request's order.
    pub(super) fn create_batch(&mut self, ops: Vec<BybitOp>, account: usize, now: i64) -> Response {
        let symbol = self.cfg.symbol.clone();
        let mut list = Vec::with_capacity(ops.len());
        let mut info = Vec::with_capacity(ops.len());
        for op in ops {
            match self.create_one(op, account, now) {
                Ok(placed) => {
                    list.push(json!({
                        "category": "linear",
                        "symbol": symbol,
                        "orderId": placed["orderId"],
                        "orderLinkId": placed["orderLinkId"],
                        "createAt": now.to_string(),
                    }));
                    info.push(json!({ "code": 0, "msg": "OK" }));
                }
                Err((code, msg)) => {
                    list.push(json!({
                        "category": "", "symbol": "", "orderId": "", "orderLinkId": "", "createAt": "",
                    }));
                    info.push(json!({ "code": code, "msg": msg }));
                }
            }
        }
        let mut v: Value =
            match serde_json::from_str(&envelope(0, "OK", json!({ "list": list }), now)) {
                Ok(v) => v,
                Err(_) => return fail(10016, "Internal server error.", now),
            };
        v["retExtInfo"] = json!({ "list": info });
        Response::json(200, v.to_string())
    }
}
