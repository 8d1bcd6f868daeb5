//! Bybit's requests read into operations: each endpoint's parameters checked
//! (category, symbol, side, type, decimals, ids, limits) before anything runs; a
//! bad one is a `params error` naming it. It never touches a socket or reads a
//! clock.

use serde_json::Value;

use crate::engine::book::{parse_e8, valid_client_id, OrdType, Side};
use crate::engine::state::Venue;

use super::private::DcpProduct;
use super::{kline_interval_ms, limit, BybitOp, Endpoint, Fields, Target};

impl Venue {
    pub(super) fn bybit_op(&self, e: Endpoint, f: &Fields) -> Result<BybitOp, String> {
        let symbol_ok = |f: &Fields| match f.get("symbol") {
            Some(s) if s == self.cfg.symbol => Ok(()),
            Some(_) => Err("symbol invalid".to_string()),
            None => Err("symbol missing".to_string()),
        };
        let category_ok = |f: &Fields| match f.get("category").as_deref() {
            Some("linear") => Ok(()),
            Some(_) => Err("category not supported here (linear only)".to_string()),
            None => Err("category missing".to_string()),
        };
        let target = |f: &Fields| match (f.get("orderId"), f.get("orderLinkId")) {
            (Some(id), _) if !id.is_empty() => Ok(Target::Id(id)),
            (_, Some(l)) if !l.is_empty() => Ok(Target::Link(l)),
            _ => Err("orderId or orderLinkId is required".to_string()),
        };
        let dec = |f: &Fields, name: &str| -> Result<Option<u64>, String> {
            match f.get(name) {
                None => Ok(None),
                Some(v) => parse_e8(&v)
                    .filter(|&x| x > 0)
                    .map(Some)
                    .ok_or_else(|| format!("{name} invalid")),
            }
        };
        Ok(match e {
            Endpoint::Time => BybitOp::Time,
            Endpoint::Instruments => match f.get("category").as_deref() {
                Some("linear") => BybitOp::Instruments(true),
                Some("spot" | "inverse" | "option") => BybitOp::Instruments(false),
                Some(_) => return Err("category invalid".into()),
                None => return Err("category missing".into()),
            },
            Endpoint::Coins => BybitOp::Coins,
            Endpoint::ApiKey => BybitOp::ApiKey,
            Endpoint::AccountInfo => BybitOp::AccountInfo,
            Endpoint::CancelAll => {
                category_ok(f)?;
                BybitOp::CancelAll
            }
            Endpoint::Dcp => {
                let product = match f.get("product").as_deref() {
                    None => DcpProduct::Options,
                    Some(p) => DcpProduct::from_rest(p).ok_or("product invalid")?,
                };
                let window = f.body.get("timeWindow").and_then(Value::as_i64);
                let Some(window_s) = window.filter(|w| (3..=300).contains(w)) else {
                    return Err("timeWindow invalid".into());
                };
                BybitOp::SetDcp {
                    product,
                    window_ms: window_s * 1_000,
                }
            }
            Endpoint::Wallet => BybitOp::Wallet,
            Endpoint::Orderbook => {
                category_ok(f)?;
                symbol_ok(f)?;
                let limit = match f.get("limit") {
                    None => 25,
                    Some(v) => v
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=500).contains(n))
                        .ok_or("limit invalid")?,
                };
                BybitOp::Orderbook(limit)
            }
            Endpoint::Create => {
                category_ok(f)?;
                symbol_ok(f)?;
                let side = match f.get("side").as_deref() {
                    Some("Buy") => Side::Buy,
                    Some("Sell") => Side::Sell,
                    _ => return Err("side invalid".into()),
                };
                let kind = match f.get("orderType").as_deref() {
                    Some("Limit") => OrdType::Limit,
                    Some("Market") => OrdType::Market,
                    _ => return Err("orderType invalid".into()),
                };
                let qty_e8 = dec(f, "qty")?.ok_or("qty missing")?;
                let (price_e8, tif) = match kind {
                    OrdType::Market => (self.cfg.mid_price_e8, "IOC"),
                    _ => {
                        let p = dec(f, "price")?.ok_or("price missing")?;
                        let tif = match f.get("timeInForce").as_deref() {
                            None | Some("GTC") => "GTC",
                            Some("IOC") => "IOC",
                            Some("FOK") => "FOK",
                            Some("PostOnly") => "PostOnly",
                            Some(_) => return Err("timeInForce invalid".into()),
                        };
                        (p, tif)
                    }
                };
                let link_id = match f.get("orderLinkId") {
                    None => None,
                    Some(l) if l.is_empty() => None,
                    Some(l) if valid_client_id(&l) => Some(l),
                    Some(_) => return Err("orderLinkId invalid".into()),
                };
                BybitOp::Create {
                    side,
                    kind,
                    tif,
                    qty_e8,
                    price_e8,
                    link_id,
                }
            }
            Endpoint::CreateBatch => self.batch_op(f)?,
            Endpoint::CancelBatch => self.cancel_batch_op(f)?,
            Endpoint::Amend => {
                category_ok(f)?;
                symbol_ok(f)?;
                BybitOp::Amend {
                    target: target(f)?,
                    qty_e8: dec(f, "qty")?,
                    price_e8: dec(f, "price")?,
                }
            }
            Endpoint::Cancel => {
                category_ok(f)?;
                symbol_ok(f)?;
                BybitOp::Cancel(target(f)?)
            }
            Endpoint::Realtime => {
                category_ok(f)?;
                let closed = match f.get("openOnly").as_deref() {
                    None | Some("0") => false,
                    Some("1") => true,
                    Some(_) => return Err("openOnly invalid (0 or 1 on a unified account)".into()),
                };
                let cursor = match f.get("cursor").as_deref() {
                    None | Some("") => None,
                    Some(c) => Some(
                        c.strip_prefix("page_args%3D")
                            .and_then(|c| c.strip_suffix("%26"))
                            .and_then(|c| c.parse::<u64>().ok())
                            .ok_or("cursor invalid")?,
                    ),
                };
                BybitOp::Realtime {
                    target: target(f).ok(),
                    closed,
                    limit: limit(f, 20, 50)?,
                    cursor,
                }
            }
            Endpoint::Tickers => {
                category_ok(f)?;
                symbol_ok(f)?;
                BybitOp::Tickers
            }
            Endpoint::Kline => {
                category_ok(f)?;
                symbol_ok(f)?;
                let interval_ms = match f.get("interval").as_deref() {
                    Some(i) => kline_interval_ms(i).ok_or("interval invalid")?,
                    None => return Err("interval missing".into()),
                };
                BybitOp::Kline {
                    interval_ms,
                    limit: limit(f, 200, 1000)?,
                }
            }
            Endpoint::RecentTrade => {
                category_ok(f)?;
                symbol_ok(f)?;
                BybitOp::RecentTrade(limit(f, 500, 1000)?)
            }
            Endpoint::Executions => {
                category_ok(f)?;
                BybitOp::Executions(limit(f, 50, 100)?)
            }
            Endpoint::History => {
                category_ok(f)?;
                BybitOp::History {
                    limit: limit(f, 20, 50)?,
                    target: target(f).ok(),
                }
            }
        })
    }
}
