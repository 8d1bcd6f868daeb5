//! `POST /exchange`: the request's shape, the signer and its nonce, the address
//! budget at receipt; then the actions as the venue runs and answers them.

use std::net::IpAddr;

use serde_json::{json, Map, Value};

use super::info::{dec, is_cloid, OrderKey};
use super::verify::{self, hex_address, parse_address};
use super::{err, unreadable};
use crate::engine::book::{parse_e8, quote, OrdType, Placement, Side, Status};
use crate::engine::state::Venue;
use crate::http::Response;

/// One order of an `order` or `modify` action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HlOrder {
    asset: u64,
    buy: bool,
    price: Option<u64>,
    size: Option<u64>,
    tif: &'static str,
    cloid: Option<String>,
}

/// What an admitted exchange request does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    Order(Vec<HlOrder>),
    Cancel(Vec<OrderKey>),
    Modify(Vec<(OrderKey, HlOrder)>, bool),
    ScheduleCancel(Option<i64>),
    Noop,
    UpdateLeverage,
    Reserve(u64),
}

/// An admitted exchange request: its account and action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExchangeOp {
    pub(crate) account: usize,
    action: Action,
}

impl ExchangeOp {
    pub(crate) fn changes_orders(&self) -> bool {
        matches!(
            self.action,
            Action::Order(_) | Action::Cancel(_) | Action::Modify(..)
        )
    }
}

fn read_order(v: &Value) -> Option<HlOrder> {
    let tif = match v.pointer("/t/limit/tif").and_then(Value::as_str)? {
        "Gtc" => "Gtc",
        "Ioc" => "Ioc",
        "Alo" => "Alo",
        _ => return None,
    };
    let cloid = match v.get("c") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) if is_cloid(c) => Some(c.to_ascii_lowercase()),
        Some(_) => return None,
    };
    Some(HlOrder {
        asset: v.get("a")?.as_u64()?,
        buy: v.get("b")?.as_bool()?,
        price: v.get("p")?.as_str().map(parse_e8)?,
        size: v.get("s")?.as_str().map(parse_e8)?,
        tif,
        cloid,
    })
}

/// The action's kind and items; None: the venue cannot read it.
fn read_action(a: &Map<String, Value>) -> Option<Action> {
    let list = |name: &str| a.get(name).and_then(Value::as_array);
    Some(match a.get("type")?.as_str()? {
        "order" => {
            let orders = list("orders")?;
            Action::Order(orders.iter().map(read_order).collect::<Option<_>>()?)
        }
        "cancel" => Action::Cancel(
            list("cancels")?
                .iter()
                .map(|c| c.get("o").and_then(Value::as_u64).map(OrderKey::Oid))
                .collect::<Option<_>>()?,
        ),
        "cancelByCloid" => Action::Cancel(
            list("cancels")?
                .iter()
                .map(|c| match c.get("cloid")? {
                    Value::String(s) if is_cloid(s) => {
                        Some(OrderKey::Cloid(s.to_ascii_lowercase()))
                    }
                    _ => None,
                })
                .collect::<Option<_>>()?,
        ),
        "modify" => Action::Modify(
            vec![(OrderKey::read(a.get("oid")?)?, read_order(a.get("order")?)?)],
            false,
        ),
        "batchModify" => Action::Modify(
            list("modifies")?
                .iter()
                .map(|m| Some((OrderKey::read(m.get("oid")?)?, read_order(m.get("order")?)?)))
                .collect::<Option<_>>()?,
            true,
        ),
        "scheduleCancel" => match a.get("time") {
            None => Action::ScheduleCancel(None),
            Some(t) => Action::ScheduleCancel(Some(i64::try_from(t.as_u64()?).ok()?)),
        },
        "noop" => Action::Noop,
        "updateLeverage" => Action::UpdateLeverage,
        "reserveRequestWeight" => Action::Reserve(a.get("weight")?.as_u64()?),
        _ => return None,
    })
}

impl Action {
    /// Items the address budget counts (each order of a batch is one).
    fn items(&self) -> u64 {
        let n = match self {
            Action::Order(o) => o.len(),
            Action::Cancel(c) => c.len(),
            Action::Modify(m, _) => m.len(),
            _ => 1,
        };
        n.max(1) as u64
    }

    fn is_cancel(&self) -> bool {
        matches!(self, Action::Cancel(_))
    }
}

const DAY_MS: i64 = 86_400_000;

impl Venue {
    /// Cumulative volume, USDC in units of 1e-8, the configured start included.
    pub(super) fn hl_volume_e8(&self, account: usize) -> u128 {
        self.addresses.accounts[account].volume_e8
            + u128::from(self.cfg.hyperliquid.initial_volume_usdc) * 100_000_000
    }

    /// `nRequestsCap`: the initial requests plus one per whole USDC traded.
    pub(super) fn hl_cap(&self, account: usize) -> u64 {
        let whole = u64::try_from(self.hl_volume_e8(account) / 100_000_000).unwrap_or(u64::MAX);
        self.cfg.hyperliquid.initial_requests.saturating_add(whole)
    }

    pub(super) fn admit_exchange(
        &mut self,
        body: &Map<String, Value>,
        ip: Option<IpAddr>,
        now: i64,
    ) -> Result<ExchangeOp, Response> {
        let action_v = body.get("action").ok_or_else(unreadable)?;
        let action = action_v
            .as_object()
            .and_then(read_action)
            .ok_or_else(unreadable)?;
        let nonce = body
            .get("nonce")
            .and_then(Value::as_u64)
            .ok_or_else(unreadable)?;
        let signature = body.get("signature").ok_or_else(unreadable)?;
        let vault = match body.get("vaultAddress") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => {
                Some(parse_address(&s.to_ascii_lowercase()).ok_or_else(unreadable)?)
            }
            Some(_) => return Err(unreadable()),
        };
        let expires = match body.get("expiresAfter") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_u64().ok_or_else(unreadable)?),
        };
        // 1 + floor(n / 40) for the IP, whatever the signer.
        // (None: a WebSocket post, not counted in the REST weight.)
        if ip.is_some_and(|ip| !self.hl_charge_ip(ip, 1 + action.items() / 40, now)) {
            return Err(self.hl_throttled());
        }
        let cfg = self.cfg.hyperliquid.clone();
        let signer = match verify::recover(
            action_v,
            nonce,
            vault.as_ref(),
            expires,
            signature,
            cfg.mainnet,
        ) {
            Ok(s) => s,
            Err(why) => {
                self.report.signature_rejects += 1;
                return Err(err(&format!("Invalid signature: {why}")));
            }
        };
        // The account: the vault named, else the signer's own, else the one it
        // is an API wallet of; the signer must be that account or its agent.
        let agent_of = |a: usize| {
            cfg.agents.iter().any(|(agent, of)| {
                *of == a && parse_address(&agent.to_ascii_lowercase()) == Some(signer)
            })
        };
        let account = match vault {
            Some(v) => self.hl_account_of(&v),
            None => self
                .hl_account_of(&signer)
                .or_else(|| (0..self.cfg.accounts.len()).find(|&a| agent_of(a))),
        };
        let allowed = account.filter(|&a| {
            let own = parse_address(&self.cfg.accounts[a].api_key.to_ascii_lowercase());
            own == Some(signer) || agent_of(a)
        });
        let Some(account) = allowed else {
            self.report.signature_rejects += 1;
            return Err(err(&format!(
                "User or API Wallet {} does not exist.",
                hex_address(&signer)
            )));
        };
        if let Some(e) = expires {
            if i64::try_from(e).unwrap_or(i64::MAX) < now {
                self.report.timestamp_rejects += 1;
                return Err(err(&format!(
                    "Action expired: expiresAfter {e} is before the current time {now}"
                )));
            }
        }
        if let Err(text) = verify::take_nonce(&mut self.addresses, &cfg, signer, nonce, now) {
            self.report.timestamp_rejects += 1;
            return Err(err(&text));
        }
        self.hl_spend(account, &action, now)?;
        if let Action::Order(orders) = &action {
            for c in orders.iter().filter_map(|o| o.cloid.clone()) {
                if !self.addresses.admitted_cloids.insert((account, c)) {
                    self.report.resubmitted += 1;
                }
            }
        }
        Ok(ExchangeOp { account, action })
    }

    /// The address budget at receipt: counts the action's items, or refuses it.
    /// `reserveRequestWeight` is how a spent address buys its way back: it is
    /// never refused for the budget, and not counted in it.
    fn hl_spend(&mut self, account: usize, action: &Action, now: i64) -> Result<(), Response> {
        if matches!(action, Action::Reserve(_)) {
            return Ok(());
        }
        let cfg = &self.cfg.hyperliquid;
        let (n, every, extra) = (action.items(), cfg.exhausted_every_ms, cfg.cancel_extra);
        let cap = self.hl_cap(account);
        let volume = self.hl_volume_e8(account);
        let st = &mut self.addresses.accounts[account];
        let allowance = cap.saturating_add(st.surplus);
        let limit = if action.is_cancel() {
            allowance
                .saturating_add(extra)
                .min(allowance.saturating_mul(2))
        } else {
            allowance
        };
        if st.used.saturating_add(n) <= limit {
            st.used += n;
            return Ok(());
        }
        if st.last_exhausted_ms.map_or(true, |t| now - t >= every) {
            st.last_exhausted_ms = Some(now);
            st.used += n;
            return Ok(());
        }
        self.report.throttled += 1;
        Err(err(&format!(
            "Too many cumulative requests sent ({} > {}) for cumulative volume traded ${}. Place taker orders to free up 1 request per USDC traded.",
            st.used + n,
            limit,
            volume / 100_000_000
        )))
    }

    /// Counts a switch that has fired by `now` in its UTC day.
    fn hl_settle_switch(&mut self, account: usize, now: i64) {
        let st = &mut self.addresses.accounts[account];
        if let Some(t) = st.switch_at.filter(|&t| t <= now) {
            let day = t.div_euclid(DAY_MS);
            st.fires = if st.fires.0 == day {
                (day, st.fires.1 + 1)
            } else {
                (day, 1)
            };
            st.switch_at = None;
        }
    }

    pub(super) fn execute_exchange(&mut self, op: ExchangeOp, now: i64) -> Response {
        let a = op.account;
        let default = || {
            Response::json(
                200,
                json!({ "status": "ok", "response": { "type": "default" } }).to_string(),
            )
        };
        let statuses = |kind: &str, s: Vec<Value>| {
            Response::json(
                200,
                json!({ "status": "ok", "response": { "type": kind, "data": { "statuses": s } } })
                    .to_string(),
            )
        };
        match op.action {
            Action::Order(orders) => {
                let s = orders.iter().map(|o| self.hl_place(a, o, now)).collect();
                statuses("order", s)
            }
            Action::Cancel(keys) => {
                let s = keys
                    .iter()
                    .map(|k| match self.hl_find_open(a, k) {
                        Some(i) => {
                            self.cancel_order(i, now);
                            json!("success")
                        }
                        None => json!({ "error": "Order was never placed, already canceled, or filled. asset=0" }),
                    })
                    .collect();
                statuses("cancel", s)
            }
            Action::Modify(list, batch) => {
                let mut s = Vec::new();
                for (key, o) in &list {
                    s.push(match (self.hl_find_open(a, key), o.price, o.size) {
                        (Some(i), Some(p), Some(q)) if p > 0 && q > 0 => {
                            self.amend_order(i, Some(q), Some(p), now);
                            let id = self.orders[i].order_id;
                            json!({ "resting": { "oid": id } })
                        }
                        (Some(_), ..) => json!({ "error": "Order has invalid price or size." }),
                        (None, ..) => json!({ "error": "Cannot modify canceled or filled order" }),
                    });
                }
                if batch {
                    return statuses("order", s);
                }
                match s
                    .first()
                    .and_then(|v| v.get("error"))
                    .and_then(Value::as_str)
                {
                    Some(e) => err(e),
                    None => default(),
                }
            }
            Action::ScheduleCancel(time) => {
                self.hl_settle_switch(a, now);
                let cfg = &self.cfg.hyperliquid;
                let (lead, per_day) = (cfg.switch_min_lead_ms, cfg.switch_fires_per_day);
                let Some(t) = time else {
                    self.arm_switch(a, None, 0, now);
                    self.addresses.accounts[a].switch_at = None;
                    return default();
                };
                if t < now + lead {
                    return err(
                        "Scheduled cancel time too early, must be at least 5 seconds from now.",
                    );
                }
                let fires = self.addresses.accounts[a].fires;
                if fires.0 == now.div_euclid(DAY_MS) && fires.1 >= per_day {
                    return err("Too many scheduled cancel triggers today.");
                }
                self.arm_switch(a, None, t - now, now);
                self.addresses.accounts[a].switch_at = Some(t);
                default()
            }
            // 0.0005 USDC a request, paid from the account's value: refused
            // whole when the account cannot pay
            // (<https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/exchange-endpoint#reserve-additional-actions>).
            Action::Reserve(w) => {
                let cfg = &self.cfg.hyperliquid;
                let cost = u128::from(w) * u128::from(cfg.reserve_price_e8);
                let value = u128::from(cfg.account_value_usdc) * 100_000_000;
                let st = &mut self.addresses.accounts[a];
                if st.paid_e8.saturating_add(cost) > value {
                    return err("Insufficient balance to reserve request weight.");
                }
                st.paid_e8 += cost;
                st.surplus = st.surplus.saturating_add(w);
                self.report.reserved_requests = self.report.reserved_requests.saturating_add(w);
                self.report.reserve_paid_e8 += cost;
                default()
            }
            Action::Noop | Action::UpdateLeverage => default(),
        }
    }

    fn hl_find_open(&self, account: usize, key: &OrderKey) -> Option<usize> {
        let i = match key {
            OrderKey::Oid(id) => *self.by_id.get(id)?,
            OrderKey::Cloid(c) => *self.by_client.get(&(account, c.clone()))?,
        };
        let o = &self.orders[i];
        (o.account == account && o.status == Status::New).then_some(i)
    }

    /// One order of an `order` action: its status object.
    fn hl_place(&mut self, account: usize, o: &HlOrder, now: i64) -> Value {
        if o.asset != 0 {
            return json!({ "error": format!("Invalid asset {}.", o.asset) });
        }
        let (Some(price), Some(size)) = (o.price.filter(|&p| p > 0), o.size.filter(|&s| s > 0))
        else {
            return json!({ "error": "Order has invalid price or size." });
        };
        if let Some(c) = &o.cloid {
            if self.by_client.contains_key(&(account, c.clone())) {
                self.report.duplicate_rejects += 1;
                return json!({ "error": "Duplicate cloid." });
            }
        }
        let open = self.open_orders(account).count();
        if o.tif != "Ioc" && open >= self.cfg.hyperliquid.open_order_cap {
            return json!({ "error": format!("Too many open orders: {open}.") });
        }
        let placement = Placement {
            side: if o.buy { Side::Buy } else { Side::Sell },
            kind: if o.tif == "Ioc" {
                OrdType::Market
            } else {
                OrdType::Limit
            },
            tif: o.tif,
            qty_e8: size,
            price_e8: price,
        };
        let i = self.book_order(account, o.cloid.clone(), "hl", placement, now);
        let order = &self.orders[i];
        let mut body = json!({ "oid": order.order_id });
        if let Some(c) = &o.cloid {
            body["cloid"] = json!(c);
        }
        if order.status == Status::Filled {
            let notional = quote(price, size);
            self.addresses.accounts[account].volume_e8 += u128::from(notional);
            body["totalSz"] = json!(dec(size));
            body["avgPx"] = json!(dec(price));
            json!({ "filled": body })
        } else {
            json!({ "resting": body })
        }
    }
}
