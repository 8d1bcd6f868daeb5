//! OKX's requests read into operations: each endpoint's parameters checked
//! (instrument, side, type, decimals, ids, limits) before anything runs; a bad
//! one is answered with OKX's parameter codes. It never touches a socket or reads
//! a clock.

use serde_json::{json, Map, Value};

use crate::engine::book::{parse_e8, OrdType, Side};
use crate::engine::state::Venue;
use crate::http::Response;

use super::{answer, bar_ms, text, Endpoint, OkxOp, Target};

impl Venue {
    pub(super) fn okx_op(
        &self,
        e: Endpoint,
        body: &Map<String, Value>,
        query: &[(String, String)],
    ) -> Result<OkxOp, Response> {
        let get = |name: &str| text(body, query, name);
        let param_err =
            |name: &str| answer(200, "51000", &format!("Parameter {name} error"), json!([]));
        let inst_ok = || match get("instId") {
            Some(s) if s == self.cfg.symbol => Ok(()),
            Some(_) => Err(answer(
                200,
                "51001",
                "Instrument ID does not exist",
                json!([]),
            )),
            None => Err(answer(
                200,
                "50014",
                "Parameter instId can not be empty",
                json!([]),
            )),
        };
        let target = || match (get("ordId"), get("clOrdId")) {
            (Some(id), _) if !id.is_empty() => Ok(Target::Id(id)),
            (_, Some(c)) if !c.is_empty() => Ok(Target::Client(c)),
            _ => Err(answer(
                200,
                "51000",
                "Parameter ordId or clOrdId error",
                json!([]),
            )),
        };
        let dec = |name: &str| -> Result<Option<u64>, Response> {
            match get(name) {
                None => Ok(None),
                Some(v) => parse_e8(&v)
                    .filter(|&x| x > 0)
                    .map(Some)
                    .ok_or_else(|| param_err(name)),
            }
        };
        let limit = |name: &str, default: usize, max: usize| -> Result<usize, Response> {
            match get(name) {
                None => Ok(default),
                Some(v) => v
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=max).contains(n))
                    .ok_or_else(|| param_err(name)),
            }
        };
        Ok(match e {
            // 0, or 10 to 120 seconds.
            Endpoint::CancelAllAfter => match get("timeOut").map(|t| t.parse::<i64>()) {
                Some(Ok(t)) if t == 0 || (10..=120).contains(&t) => OkxOp::CancelAllAfter(t),
                Some(_) => return Err(param_err("timeOut")),
                None => {
                    return Err(answer(
                        200,
                        "50014",
                        "Parameter timeOut can not be empty",
                        json!([]),
                    ))
                }
            },
            Endpoint::Time => OkxOp::Time,
            Endpoint::Instruments => match get("instType").as_deref() {
                Some("SWAP") => OkxOp::Instruments(true),
                Some("SPOT" | "MARGIN" | "FUTURES" | "OPTION") => OkxOp::Instruments(false),
                Some(_) => return Err(param_err("instType")),
                None => {
                    return Err(answer(
                        200,
                        "50014",
                        "Parameter instType can not be empty",
                        json!([]),
                    ))
                }
            },
            Endpoint::Currencies => OkxOp::Currencies,
            // Read by `admit_okx`, one `Place` per element.
            Endpoint::Batch => return Err(param_err("body")),
            Endpoint::Balance => OkxOp::Balance,
            Endpoint::Pending => OkxOp::Pending,
            Endpoint::Ticker => {
                inst_ok()?;
                OkxOp::Ticker
            }
            Endpoint::Candles => {
                inst_ok()?;
                let bar_ms = match get("bar") {
                    None => 60_000,
                    Some(b) => bar_ms(&b).ok_or_else(|| param_err("bar"))?,
                };
                OkxOp::Candles {
                    bar_ms,
                    limit: limit("limit", 100, 300)?,
                }
            }
            Endpoint::Trades => {
                inst_ok()?;
                OkxOp::Trades(limit("limit", 100, 500)?)
            }
            Endpoint::Fills => OkxOp::Fills(limit("limit", 100, 100)?),
            Endpoint::History => {
                if get("instType").is_none() {
                    return Err(answer(
                        200,
                        "50014",
                        "Parameter instType can not be empty",
                        json!([]),
                    ));
                }
                OkxOp::History(limit("limit", 100, 100)?)
            }
            Endpoint::Books => {
                inst_ok()?;
                let sz = match get("sz") {
                    None => 1,
                    Some(v) => v
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=400).contains(n))
                        .ok_or_else(|| param_err("sz"))?,
                };
                OkxOp::Books(sz)
            }
            Endpoint::Place => {
                inst_ok()?;
                let side = match get("side").as_deref() {
                    Some("buy") => Side::Buy,
                    Some("sell") => Side::Sell,
                    _ => return Err(param_err("side")),
                };
                let kind = match get("ordType").as_deref() {
                    Some("limit") | Some("post_only") => OrdType::Limit,
                    Some("market") => OrdType::Market,
                    _ => return Err(param_err("ordType")),
                };
                let qty_e8 = dec("sz")?.ok_or_else(|| param_err("sz"))?;
                let price_e8 = match kind {
                    OrdType::Market => self.cfg.mid_price_e8,
                    _ => dec("px")?.ok_or_else(|| param_err("px"))?,
                };
                let cl_id = match get("clOrdId") {
                    None => None,
                    Some(c) if c.is_empty() => None,
                    Some(c) if c.len() <= 32 && c.bytes().all(|b| b.is_ascii_alphanumeric()) => {
                        Some(c)
                    }
                    Some(_) => return Err(param_err("clOrdId")),
                };
                OkxOp::Place {
                    side,
                    kind,
                    qty_e8,
                    price_e8,
                    cl_id,
                }
            }
            Endpoint::Cancel => {
                inst_ok()?;
                OkxOp::Cancel(target()?)
            }
            Endpoint::Amend => {
                inst_ok()?;
                OkxOp::Amend {
                    target: target()?,
                    qty_e8: dec("newSz")?,
                    price_e8: dec("newPx")?,
                }
            }
            Endpoint::Query => {
                inst_ok()?;
                OkxOp::Query(target()?)
            }
        })
    }
}
