//! Bybit's `POST /v5/order/create-batch` (linear): up to 20 orders in one
//! request, each placed or refused on its own. The answer is `retCode` 0 with one
//! entry per order in `result.list` (empty fields for a refused one) and its own
//! `code` and `msg` in `retExtInfo.list`, in the request's order: a batch with
//! some items refused is a success with those items' codes. Each order counts on
//! the create limit (charged at admission, `batch_len`), and one order's
//! placement is the same as `/v5/order/create`'s (a duplicate `orderLinkId` is
//! 110072). Source: <https://bybit-exchange.github.io/docs/v5/order/batch-place>
//! (checked 2026-12-06).

use serde_json::{Map, Value};

use super::{envelope_ext, BybitOp, Endpoint, Fields};
use crate::config::Profile;
use crate::engine::book::Placement;
use crate::engine::state::Venue;
use crate::http::Response;
use crate::json_write::Obj;
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

    /// Places one order (`/v5/order/create`, or an item of a batch): its index
    /// in the registry, or the code and message of its refusal.
    pub(super) fn create_one(
        &mut self,
        op: BybitOp,
        account: usize,
        now: i64,
    ) -> Result<usize, (i64, &'static str)> {
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
        Ok(idx)
    }

    /// Places each order of a batch on its own: one entry per order in
    /// `result.list` and `retExtInfo.list`, in the request's order.
    pub(super) fn create_batch(&mut self, ops: Vec<BybitOp>, account: usize, now: i64) -> Response {
        let mut list = String::with_capacity(64 + 120 * ops.len());
        let mut info = String::with_capacity(16 + 32 * ops.len());
        list.push_str("{\"list\":[");
        info.push_str("{\"list\":[");
        for (n, op) in ops.into_iter().enumerate() {
            if n > 0 {
                list.push(',');
                info.push(',');
            }
            let (code, msg) = match self.create_one(op, account, now) {
                Ok(i) => {
                    let o = &self.orders[i];
                    Obj::new(&mut list)
                        .str("category", "linear")
                        .str("symbol", &self.cfg.symbol)
                        .uint_str("orderId", o.order_id)
                        .str("orderLinkId", &o.client_id)
                        .int_str("createAt", now)
                        .end();
                    (0, "OK")
                }
                Err(refused) => {
                    list.push_str(concat!(
                        "{\"category\":\"\",\"symbol\":\"\",\"orderId\":\"\",",
                        "\"orderLinkId\":\"\",\"createAt\":\"\"}"
                    ));
                    refused
                }
            };
            Obj::new(&mut info).int("code", code).str("msg", msg).end();
        }
        list.push_str("]}");
        info.push_str("]}");
        Response::json(200, envelope_ext(0, "OK", &list, &info, now))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::Config;
    use crate::engine::book::{OrdType, Side};
    use crate::hashing::Hashing;
    use crate::http::json_text;

    /// The batch's answer as it was built before: `json!` maps, the envelope
    /// printed, read back and its `retExtInfo` replaced (the reference).
    fn batch_as_it_was(v: &mut Venue, ops: Vec<BybitOp>, now: i64) -> String {
        let symbol = v.cfg.symbol.clone();
        let (mut list, mut info) = (Vec::new(), Vec::new());
        for op in ops {
            match v.create_one(op, 0, now) {
                Ok(i) => {
                    let o = &v.orders[i];
                    let placed =
                        json!({ "orderId": o.order_id.to_string(), "orderLinkId": o.client_id });
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
        let env = json_text(&json!({
            "retCode": 0, "retMsg": "OK", "result": { "list": list }, "retExtInfo": {}, "time": now,
        }));
        let mut v: Value = serde_json::from_str(&env).unwrap();
        v["retExtInfo"] = json!({ "list": info });
        v.to_string()
    }

    /// Random batches (items off the tick, repeated and missing link ids,
    /// both sides) on two venues alike: the answers are the same bytes.
    #[test]
    fn a_batch_answers_as_it_did() {
        let mut new = Venue::new(Config::bybit(), Hashing::fixed());
        let mut old = Venue::new(Config::bybit(), Hashing::keyed());
        let mut seed = 5u64;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        for round in 0..200 {
            let n = next(20) + 1;
            let ops = |next: &mut dyn FnMut(u64) -> u64| -> Vec<BybitOp> {
                (0..n)
                    .map(|_| BybitOp::Create {
                        side: if next(2) == 0 { Side::Buy } else { Side::Sell },
                        kind: OrdType::Limit,
                        tif: "GTC",
                        qty_e8: 1_000_000,
                        price_e8: 4_900_000_000_000
                            + next(1_000) * 1_000_000 * [5, 10][next(2) as usize],
                        link_id: match next(4) {
                            0 => None,
                            _ => Some(format!("l-{}", next(300))),
                        },
                    })
                    .collect()
            };
            let batch = ops(&mut next);
            let same: Vec<BybitOp> = batch
                .iter()
                .map(|op| match op {
                    BybitOp::Create {
                        side,
                        kind,
                        tif,
                        qty_e8,
                        price_e8,
                        link_id,
                    } => BybitOp::Create {
                        side: *side,
                        kind: *kind,
                        tif,
                        qty_e8: *qty_e8,
                        price_e8: *price_e8,
                        link_id: link_id.clone(),
                    },
                    _ => unreachable!(),
                })
                .collect();
            let now = 1_700_000_000_000 + round;
            let got = new.create_batch(batch, 0, now);
            assert_eq!(
                got.body,
                batch_as_it_was(&mut old, same, now),
                "round {round}"
            );
        }
    }
}
