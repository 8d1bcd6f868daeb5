//! `POST /info`: the market, the account's orders and fills, and its address
//! budget (`userRateLimit`), in the shapes the info-endpoint pages document.

use std::net::IpAddr;

use serde_json::{json, Map, Value};

use super::verify::parse_address;
use super::{info_weight, unreadable};
use crate::engine::book::{fmt_e8, Order, Side, Status};
use crate::engine::state::Venue;
use crate::http::Response;

/// An admitted info request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InfoOp {
    pub(crate) kind: InfoKind,
    /// The account of `user` (None: no such account, or no `user`).
    pub(crate) account: Option<usize>,
    /// Where it came from: `userFills` charges its size after the answer
    /// (None: a WebSocket post, not counted in the REST weight).
    pub(crate) ip: Option<IpAddr>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum InfoKind {
    ExchangeStatus,
    Meta,
    AllMids,
    L2Book,
    Clearinghouse,
    OpenOrders { frontend: bool },
    OrderStatus(OrderKey),
    UserFills,
    UserRateLimit,
}

/// An order named by its `oid` or its `cloid`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum OrderKey {
    Oid(u64),
    Cloid(String),
}

impl OrderKey {
    /// A number is an oid; `0x` and 32 hex digits a cloid.
    pub(crate) fn read(v: &Value) -> Option<OrderKey> {
        match v {
            Value::Number(n) => n.as_u64().map(OrderKey::Oid),
            Value::String(s) if is_cloid(s) => Some(OrderKey::Cloid(s.to_ascii_lowercase())),
            _ => None,
        }
    }
}

/// `0x` and 32 hex digits.
pub(crate) fn is_cloid(s: &str) -> bool {
    s.len() == 34 && s.starts_with("0x") && s[2..].bytes().all(|c| c.is_ascii_hexdigit())
}

/// Decimals as the venue writes them: no trailing zeros.
pub(crate) fn dec(v: u64) -> String {
    let s = fmt_e8(v);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl Venue {
    pub(super) fn admit_info(
        &mut self,
        body: &Map<String, Value>,
        ip: Option<IpAddr>,
        now: i64,
    ) -> Result<InfoOp, Response> {
        let Some(kind) = body.get("type").and_then(Value::as_str) else {
            return Err(unreadable());
        };
        if ip.is_some_and(|ip| !self.hl_charge_ip(ip, info_weight(kind), now)) {
            return Err(self.hl_throttled());
        }
        let user = body.get("user").and_then(Value::as_str);
        let account = user
            .and_then(|u| parse_address(&u.to_ascii_lowercase()))
            .and_then(|a| self.hl_account_of(&a));
        let needs_user = !matches!(kind, "meta" | "allMids" | "l2Book" | "exchangeStatus");
        if needs_user
            && user
                .and_then(|u| parse_address(&u.to_ascii_lowercase()))
                .is_none()
        {
            return Err(unreadable());
        }
        let kind = match kind {
            "exchangeStatus" => InfoKind::ExchangeStatus,
            "meta" => InfoKind::Meta,
            "allMids" => InfoKind::AllMids,
            "l2Book" => match body.get("coin").and_then(Value::as_str) {
                Some(_) => InfoKind::L2Book,
                None => return Err(unreadable()),
            },
            "clearinghouseState" => InfoKind::Clearinghouse,
            "openOrders" => InfoKind::OpenOrders { frontend: false },
            "frontendOpenOrders" => InfoKind::OpenOrders { frontend: true },
            "orderStatus" => match body.get("oid").and_then(OrderKey::read) {
                Some(k) => InfoKind::OrderStatus(k),
                None => return Err(unreadable()),
            },
            "userFills" => InfoKind::UserFills,
            "userRateLimit" => InfoKind::UserRateLimit,
            _ => return Err(unreadable()),
        };
        Ok(InfoOp { kind, account, ip })
    }

    fn hl_order_json(&self, o: &Order, frontend: bool) -> Value {
        let mut v = json!({
            "coin": self.cfg.symbol,
            "side": if o.side == Side::Buy { "B" } else { "A" },
            "limitPx": dec(o.price_e8),
            "sz": dec(o.qty_e8 - o.executed_e8),
            "oid": o.order_id,
            "timestamp": o.time,
            "origSz": dec(o.qty_e8),
        });
        if o.client_id.starts_with("0x") {
            v["cloid"] = json!(o.client_id);
        }
        if frontend {
            v["orderType"] = json!("Limit");
            v["tif"] = json!(if o.tif == "Alo" { "Alo" } else { "Gtc" });
            v["reduceOnly"] = json!(false);
            v["isTrigger"] = json!(false);
            v["triggerPx"] = json!("0.0");
            v["triggerCondition"] = json!("N/A");
            v["isPositionTpsl"] = json!(false);
        }
        v
    }

    pub(super) fn execute_info(&mut self, op: InfoOp, now: i64) -> Response {
        let ok = |v: Value| Response::json(200, v.to_string());
        let mid = self.cfg.mid_price_e8;
        let sym = self.cfg.symbol.clone();
        let mine = |o: &&Order| Some(o.account) == op.account;
        match op.kind {
            InfoKind::ExchangeStatus => ok(json!({ "specialStatuses": null, "time": now })),
            InfoKind::Meta => ok(json!({
                "universe": [{ "name": sym, "szDecimals": 5, "maxLeverage": 50 }]
            })),
            InfoKind::AllMids => ok(json!({ sym: dec(mid) })),
            InfoKind::L2Book => {
                let level = |p: u64| json!({ "px": dec(p), "sz": "1", "n": 1 });
                let (bids, asks) = self.ladder(20, level);
                ok(json!({ "coin": sym, "time": now, "levels": [bids, asks] }))
            }
            InfoKind::Clearinghouse => {
                let summary = json!({
                    "accountValue": "100000.0", "totalNtlPos": "0.0",
                    "totalRawUsd": "100000.0", "totalMarginUsed": "0.0",
                });
                ok(json!({
                    "marginSummary": summary, "crossMarginSummary": summary,
                    "crossMaintenanceMarginUsed": "0.0", "withdrawable": "100000.0",
                    "assetPositions": [], "time": now,
                }))
            }
            InfoKind::OpenOrders { frontend } => {
                let list: Vec<Value> = self
                    .orders
                    .iter()
                    .filter(mine)
                    .filter(|o| o.status == Status::New)
                    .map(|o| self.hl_order_json(o, frontend))
                    .collect();
                ok(Value::Array(list))
            }
            InfoKind::OrderStatus(key) => {
                let found = op.account.and_then(|a| match &key {
                    OrderKey::Oid(id) => self.by_id.get(id).copied(),
                    OrderKey::Cloid(c) => self.by_client.get(&(a, c.clone())).copied(),
                });
                match found.filter(|&i| Some(self.orders[i].account) == op.account) {
                    None => ok(json!({ "status": "unknownOid" })),
                    Some(i) => {
                        let o = &self.orders[i];
                        let status = match o.status {
                            Status::New => "open",
                            Status::Filled => "filled",
                            // An IOC that did not reach the book (the profile's
                            // IOCs answer an error instead: never here).
                            Status::Canceled | Status::Expired => "canceled",
                        };
                        ok(json!({ "status": "order", "order": {
                            "order": self.hl_order_json(o, true),
                            "status": status,
                            "statusTimestamp": o.update_time,
                        }}))
                    }
                }
            }
            InfoKind::UserFills => {
                let list: Vec<Value> = self
                    .orders
                    .iter()
                    .rev()
                    .filter(mine)
                    .filter(|o| o.executed_e8 > 0)
                    .take(2000)
                    .map(|o| {
                        let mut f = json!({
                            "coin": sym, "px": dec(o.price_e8), "sz": dec(o.executed_e8),
                            "side": if o.side == Side::Buy { "B" } else { "A" },
                            "time": o.update_time, "startPosition": "0.0",
                            "dir": if o.side == Side::Buy { "Open Long" } else { "Open Short" },
                            "closedPnl": "0.0", "hash": format!("0x{:064x}", o.order_id),
                            "oid": o.order_id, "crossed": true, "fee": "0.0",
                            "tid": o.order_id, "feeToken": "USDC",
                        });
                        if o.client_id.starts_with("0x") {
                            f["cloid"] = json!(o.client_id);
                        }
                        f
                    })
                    .collect();
                // One more weight per 20 items returned, counted after the answer.
                let extra = list.len() as u64 / 20;
                if let Some(ip) = op.ip.filter(|_| extra > 0) {
                    self.hl_charge_ip(ip, extra, now);
                }
                ok(Value::Array(list))
            }
            InfoKind::UserRateLimit => {
                let (used, cap, surplus, vol) = match op.account {
                    Some(a) => {
                        let st = &self.addresses.accounts[a];
                        (st.used, self.hl_cap(a), st.surplus, st.volume_e8)
                    }
                    None => (0, self.cfg.hyperliquid.initial_requests, 0, 0),
                };
                let vol = format!("{}.{:08}", vol / 100_000_000, vol % 100_000_000);
                ok(json!({
                    "cumVlm": vol, "nRequestsUsed": used,
                    "nRequestsCap": cap, "nRequestsSurplus": surplus,
                }))
            }
        }
    }
}
