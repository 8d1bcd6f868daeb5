//! OKX's placements: one order (`trade/order`) or up to 20 (`trade/batch-orders`,
//! which ccxt's `create_order` sends), each with its own `sCode`. A batch whose
//! orders all ran answers `code` "0", all failed "1" ("All operations failed"),
//! some "2" ("Bulk operation partially succeeded"):
//! <https://www.okx.com/docs-v5/en/#order-book-trading-trade-post-place-multiple-orders>
//! (checked 2026-12-06). It never touches a socket or reads a clock.

use serde_json::{json, Value};

use crate::config::Profile;
use crate::engine::book::Placement;
use crate::engine::state::Venue;
use crate::http::Response;
use crate::profiles::instruments::{okx_refusal, rules};

use super::{answer, OkxOp};

impl Venue {
    /// One placement: its `data` entry, `Ok` if it was booked.
    pub(super) fn okx_place(
        &mut self,
        account: usize,
        op: OkxOp,
        now: i64,
    ) -> Result<Value, Value> {
        let OkxOp::Place {
            side,
            kind,
            qty_e8,
            price_e8,
            cl_id,
        } = op
        else {
            return Err(failed("51000", "Parameter ordType error", ""));
        };
        let cl = cl_id.clone().unwrap_or_default();
        if let Some(c) = &cl_id {
            if self.by_client.contains_key(&(account, c.clone())) {
                self.report.duplicate_rejects += 1;
                return Err(failed("51016", "Duplicated clOrdId", c));
            }
        }
        let placement = Placement {
            side,
            kind,
            tif: "GTC",
            qty_e8,
            price_e8,
        };
        if let Err(b) = self.check_placement(account, &rules(Profile::Okx), &placement) {
            let (code, msg) = okx_refusal(b);
            return Err(failed(code, &msg, &cl));
        }
        let idx = self.book_order(account, cl_id, "sim", placement, now);
        let o = &self.orders[idx];
        Ok(json!({
            "clOrdId": o.client_id,
            "ordId": o.order_id.to_string(),
            "tag": "",
            "ts": now.to_string(),
            "sCode": "0",
            "sMsg": "Order placed",
        }))
    }

    /// A batch: each placement in order, each with its fate.
    pub(super) fn okx_batch(&mut self, account: usize, ops: Vec<OkxOp>, now: i64) -> Response {
        let n = ops.len();
        let mut placed = 0;
        let mut data = Vec::with_capacity(n);
        for op in ops {
            match self.okx_place(account, op, now) {
                Ok(v) => {
                    placed += 1;
                    data.push(v);
                }
                Err(v) => data.push(v),
            }
        }
        let (code, msg) = match placed {
            p if p == n => ("0", ""),
            0 => ("1", "All operations failed"),
            _ => ("2", "Bulk operation partially succeeded"),
        };
        answer(200, code, msg, Value::Array(data))
    }
}

/// A failed order's `data` entry.
fn failed(s_code: &str, s_msg: &str, cl_id: &str) -> Value {
    json!({ "clOrdId": cl_id, "ordId": "", "tag": "", "sCode": s_code, "sMsg": s_msg })
}
