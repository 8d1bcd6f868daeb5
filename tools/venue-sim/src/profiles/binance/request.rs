//! A Binance request's parameters read into an operation ([`BinanceOp`]), with the
//! venue's error answers for what is missing or malformed.

use crate::config::Profile;
use crate::engine::book::{parse_e8, valid_client_id, OrdType, Side};
use crate::engine::state::Venue;
use crate::http::Response;
use crate::params::Params;
use crate::profiles::binance::endpoint::{depth_limit, symbols, Endpoint};

pub(crate) fn err(status: u16, code: i32, msg: &str) -> Response {
    Response::error(status, code, msg)
}

pub(crate) fn mandatory(name: &str) -> Response {
    err(
        400,
        -1102,
        &format!("Mandatory parameter '{name}' was not sent, was empty/null, or malformed."),
    )
}

pub(crate) fn illegal(name: &str) -> Response {
    err(
        400,
        -1100,
        &format!("Illegal characters found in parameter '{name}'; legal range is '^([0-9]{{1,20}})(\\.[0-9]{{1,20}})?$'."),
    )
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RespType {
    Ack,
    Result,
    Full,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NewOrder {
    pub(crate) side: Side,
    pub(crate) kind: OrdType,
    pub(crate) tif: &'static str,
    pub(crate) qty_e8: u64,
    pub(crate) price_e8: u64,
    pub(crate) client_id: Option<String>,
    pub(crate) resp: RespType,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OrderRef {
    pub(crate) order_id: Option<u64>,
    pub(crate) client_id: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReplaceMode {
    StopOnFailure,
    AllowFailure,
}

/// An admitted request, ready to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BinanceOp {
    Ping,
    Time,
    ExchangeInfo,
    Depth(usize),
    Account,
    OpenOrders,
    NewOrder(NewOrder),
    Cancel(OrderRef, Option<String>),
    Query(OrderRef),
    /// Futures `PUT /fapi/v1/order`: new price and quantity for a resting order.
    Modify {
        target: OrderRef,
        side: Side,
        qty_e8: u64,
        price_e8: u64,
    },
    CancelReplace {
        mode: ReplaceMode,
        cancel: OrderRef,
        cancel_client_id: Option<String>,
        new: NewOrder,
    },
    /// `ticker/price`: one object (`symbol`) or a list (`symbols` or neither).
    TickerPrice {
        list: bool,
    },
    /// `ticker/bookTicker`.
    BookTicker {
        list: bool,
    },
    /// `ticker/24hr`, `type=MINI` or FULL.
    Ticker24hr {
        list: bool,
        mini: bool,
    },
    /// `trades`: the most recent fills, at most this many.
    Trades(usize),
    /// `klines`/`uiKlines`: `limit` candles of `interval_ms` ending at `end` (or now).
    Klines {
        interval_ms: i64,
        limit: usize,
        end: Option<i64>,
    },
    /// `avgPrice`.
    AvgPrice,
    /// `myTrades`, optionally of one order.
    MyTrades {
        order_id: Option<u64>,
        limit: usize,
    },
    /// `order/test`: validated, never run; with the commission rates if asked.
    OrderTest {
        commission: bool,
    },
    /// `DELETE openOrders`: cancel every open order of the symbol.
    CancelAll,
    /// USD-M `countdownCancelAll`: arm (ms) or, with 0, stop the symbol's switch.
    Countdown(i64),
    /// `allOrders`, from `orderId` on.
    AllOrders {
        order_id: Option<u64>,
        limit: usize,
    },
    /// `rateLimit/order`: the unfilled order counts.
    RateLimitOrder,
    /// WebSocket API: subscribe this connection to the account's events.
    StreamSubscribe,
    /// WebSocket API: end one subscription of this connection, or all.
    StreamUnsubscribe(Option<u64>),
    /// WebSocket API: this connection's subscriptions.
    StreamSubscriptions,
    /// WebSocket API: `session.logon`, `session.status`, `session.logout`.
    Session(SessionCall),
    /// WebSocket API: `userDataStream.subscribe` on a logged-on connection.
    StreamSubscribeLoggedOn,
    /// `capital/config/getall`.
    CapitalConfig,
    /// `margin/allPairs` (`false`) or `margin/isolated/allPairs` (`true`).
    MarginPairs {
        isolated: bool,
    },
}

/// A WebSocket API session request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SessionCall {
    /// `session.logon`.
    Logon,
    /// `session.status`.
    Status,
    /// `session.logout`.
    Logout,
}

impl BinanceOp {
    /// A WebSocket API subscription request, run by the connection's session.
    pub(crate) fn on_session(&self) -> bool {
        matches!(
            self,
            BinanceOp::StreamSubscribe
                | BinanceOp::StreamUnsubscribe(_)
                | BinanceOp::StreamSubscriptions
                | BinanceOp::Session(_)
                | BinanceOp::StreamSubscribeLoggedOn
        )
    }

    pub(crate) fn changes_orders(&self) -> bool {
        matches!(
            self,
            BinanceOp::NewOrder(_)
                | BinanceOp::Cancel(..)
                | BinanceOp::CancelReplace { .. }
                | BinanceOp::Modify { .. }
                | BinanceOp::CancelAll
        )
    }
}

impl Venue {
    pub(crate) fn check_symbol(&self, p: &Params) -> Result<(), Response> {
        match p.non_empty("symbol") {
            None => Err(mandatory("symbol")),
            Some(s) if s == self.cfg.symbol => Ok(()),
            Some(_) => Err(err(400, -1121, "Invalid symbol.")),
        }
    }

    pub(crate) fn order_ref(p: &Params, id: &str, cid: &str) -> Result<OrderRef, Response> {
        let order_id = match p.non_empty(id) {
            None => None,
            Some(s) => Some(s.parse::<u64>().map_err(|_| illegal(id))?),
        };
        let client_id = p.non_empty(cid).map(str::to_string);
        if order_id.is_none() && client_id.is_none() {
            return Err(err(
                400,
                -1102,
                &format!("Param '{cid}' or '{id}' must be sent, but both were empty/null!"),
            ));
        }
        Ok(OrderRef {
            order_id,
            client_id,
        })
    }

    pub(crate) fn new_order(&self, p: &Params, cid_name: &str) -> Result<NewOrder, Response> {
        let futures = self.cfg.profile == Profile::BinanceFutures;
        self.check_symbol(p)?;
        let side = match p.non_empty("side") {
            None => return Err(mandatory("side")),
            Some("BUY") => Side::Buy,
            Some("SELL") => Side::Sell,
            Some(_) => return Err(err(400, -1117, "Invalid side.")),
        };
        let kind = match p.non_empty("type") {
            None => return Err(mandatory("type")),
            Some("LIMIT") => OrdType::Limit,
            Some("LIMIT_MAKER") if !futures => OrdType::LimitMaker,
            Some("MARKET") => OrdType::Market,
            Some(_) => return Err(err(400, -1116, "Invalid orderType.")),
        };
        let qty_e8 = match p.non_empty("quantity") {
            None => return Err(mandatory("quantity")),
            Some(q) => parse_e8(q).ok_or_else(|| illegal("quantity"))?,
        };
        if qty_e8 == 0 {
            return Err(err(400, -1013, "Filter failure: LOT_SIZE"));
        }
        let (tif, price_e8) = match kind {
            OrdType::Market => ("GTC", self.cfg.mid_price_e8),
            OrdType::Limit | OrdType::LimitMaker => {
                let tif = if kind == OrdType::Limit {
                    match p.non_empty("timeInForce") {
                        None => return Err(mandatory("timeInForce")),
                        Some("GTC") => "GTC",
                        Some("IOC") => "IOC",
                        Some("FOK") => "FOK",
                        Some("GTX") if futures => "GTX",
                        Some(_) => return Err(err(400, -1115, "Invalid timeInForce.")),
                    }
                } else {
                    "GTC"
                };
                let price = match p.non_empty("price") {
                    None => return Err(mandatory("price")),
                    Some(s) => parse_e8(s).ok_or_else(|| illegal("price"))?,
                };
                if price == 0 {
                    return Err(err(400, -1013, "Filter failure: PRICE_FILTER"));
                }
                (tif, price)
            }
        };
        let client_id = match p.get(cid_name) {
            None => None,
            Some(c) if valid_client_id(c) => Some(c.to_string()),
            Some(_) => {
                return Err(err(
                    400,
                    -1100,
                    &format!("Illegal characters found in parameter '{cid_name}'; legal range is '^[\\.A-Z\\:/a-z0-9_-]{{1,36}}$'."),
                ))
            }
        };
        let resp = match p.non_empty("newOrderRespType") {
            None if futures || kind == OrdType::LimitMaker => RespType::Ack,
            None => RespType::Full,
            Some("ACK") => RespType::Ack,
            Some("RESULT") => RespType::Result,
            Some("FULL") if !futures => RespType::Full,
            Some(_) => return Err(illegal("newOrderRespType")),
        };
        Ok(NewOrder {
            side,
            kind,
            tif,
            qty_e8,
            price_e8,
            client_id,
            resp,
        })
    }

    /// `symbol` or `symbols` (never both: -1128), each the listed symbol; whether
    /// the answer is a list.
    fn symbol_or_symbols(&self, p: &Params) -> Result<bool, Response> {
        match (p.get("symbol"), p.get("symbols")) {
            (Some(_), Some(_)) => Err(err(
                400,
                -1128,
                "Combination of optional parameters invalid.",
            )),
            (Some(_), None) => self.check_symbol(p).map(|()| false),
            (None, Some(_)) => {
                let list = symbols(p).ok_or_else(|| illegal("symbols"))?;
                if list.is_empty() || list.iter().any(|s| *s != self.cfg.symbol) {
                    return Err(err(400, -1121, "Invalid symbol."));
                }
                Ok(true)
            }
            (None, None) => Ok(true),
        }
    }

    /// `limit` in 1..=1000, default 500 (trades, klines, myTrades, allOrders).
    fn limit_1000(p: &Params) -> Result<usize, Response> {
        match p.get("limit") {
            None => Ok(500),
            Some(s) => s
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=1000).contains(n))
                .ok_or_else(|| err(400, -1130, "Data sent for parameter 'limit' is not valid.")),
        }
    }

    fn opt_id(p: &Params, name: &str) -> Result<Option<u64>, Response> {
        match p.non_empty(name) {
            None => Ok(None),
            Some(s) => s.parse::<u64>().map(Some).map_err(|_| illegal(name)),
        }
    }

    pub(crate) fn build_op(&self, e: Endpoint, p: &Params) -> Result<BinanceOp, Response> {
        Ok(match e {
            Endpoint::TickerPrice => BinanceOp::TickerPrice {
                list: self.symbol_or_symbols(p)?,
            },
            Endpoint::BookTicker => BinanceOp::BookTicker {
                list: self.symbol_or_symbols(p)?,
            },
            Endpoint::Ticker24hr => {
                let list = self.symbol_or_symbols(p)?;
                let mini = match p.get("type") {
                    None | Some("FULL") => false,
                    Some("MINI") => true,
                    Some(_) => return Err(illegal("type")),
                };
                BinanceOp::Ticker24hr { list, mini }
            }
            Endpoint::Trades => {
                self.check_symbol(p)?;
                BinanceOp::Trades(Self::limit_1000(p)?)
            }
            Endpoint::Klines => {
                self.check_symbol(p)?;
                let interval_ms = match p.non_empty("interval") {
                    None => return Err(mandatory("interval")),
                    Some(i) => {
                        kline_interval_ms(i).ok_or_else(|| err(400, -1120, "Invalid interval."))?
                    }
                };
                BinanceOp::Klines {
                    interval_ms,
                    limit: Self::limit_1000(p)?,
                    end: Self::opt_id(p, "endTime")?.map(|t| t as i64),
                }
            }
            Endpoint::AvgPrice => {
                self.check_symbol(p)?;
                BinanceOp::AvgPrice
            }
            Endpoint::MyTrades => {
                self.check_symbol(p)?;
                BinanceOp::MyTrades {
                    order_id: Self::opt_id(p, "orderId")?,
                    limit: Self::limit_1000(p)?,
                }
            }
            Endpoint::OrderTest => {
                self.new_order(p, "newClientOrderId")?;
                let commission = match p.get("computeCommissionRates") {
                    None | Some("false") => false,
                    Some("true") => true,
                    Some(_) => return Err(illegal("computeCommissionRates")),
                };
                BinanceOp::OrderTest { commission }
            }
            Endpoint::CancelAll => {
                self.check_symbol(p)?;
                BinanceOp::CancelAll
            }
            Endpoint::Countdown => {
                self.check_symbol(p)?;
                let ms = p
                    .non_empty("countdownTime")
                    .ok_or_else(|| mandatory("countdownTime"))?;
                BinanceOp::Countdown(
                    ms.parse::<i64>()
                        .ok()
                        .filter(|v| *v >= 0)
                        .ok_or_else(|| illegal("countdownTime"))?,
                )
            }
            Endpoint::AllOrders => {
                self.check_symbol(p)?;
                BinanceOp::AllOrders {
                    order_id: Self::opt_id(p, "orderId")?,
                    limit: Self::limit_1000(p)?,
                }
            }
            Endpoint::RateLimitOrder => BinanceOp::RateLimitOrder,
            Endpoint::StreamSubscribe => BinanceOp::StreamSubscribe,
            Endpoint::StreamUnsubscribe => {
                BinanceOp::StreamUnsubscribe(Self::opt_id(p, "subscriptionId")?)
            }
            Endpoint::StreamSubscriptions => BinanceOp::StreamSubscriptions,
            Endpoint::SessionLogon => BinanceOp::Session(SessionCall::Logon),
            Endpoint::SessionStatus => BinanceOp::Session(SessionCall::Status),
            Endpoint::SessionLogout => BinanceOp::Session(SessionCall::Logout),
            Endpoint::StreamSubscribeLoggedOn => BinanceOp::StreamSubscribeLoggedOn,
            Endpoint::CapitalConfig => BinanceOp::CapitalConfig,
            Endpoint::MarginPairs => BinanceOp::MarginPairs { isolated: false },
            Endpoint::IsolatedPairs => BinanceOp::MarginPairs { isolated: true },
            Endpoint::Ping => BinanceOp::Ping,
            Endpoint::Time => BinanceOp::Time,
            Endpoint::ExchangeInfo => BinanceOp::ExchangeInfo,
            Endpoint::Depth => {
                self.check_symbol(p)?;
                BinanceOp::Depth(depth_limit(self.cfg.profile, p).ok_or_else(|| {
                    err(400, -1130, "Data sent for parameter 'limit' is not valid.")
                })?)
            }
            Endpoint::Account => BinanceOp::Account,
            Endpoint::OpenOrders => {
                if p.get("symbol").is_some() {
                    self.check_symbol(p)?;
                }
                BinanceOp::OpenOrders
            }
            Endpoint::NewOrder => BinanceOp::NewOrder(self.new_order(p, "newClientOrderId")?),
            Endpoint::CancelOrder => {
                self.check_symbol(p)?;
                let r = Self::order_ref(p, "orderId", "origClientOrderId")?;
                BinanceOp::Cancel(r, p.non_empty("newClientOrderId").map(str::to_string))
            }
            Endpoint::QueryOrder => {
                self.check_symbol(p)?;
                BinanceOp::Query(Self::order_ref(p, "orderId", "origClientOrderId")?)
            }
            Endpoint::Modify => {
                self.check_symbol(p)?;
                let target = Self::order_ref(p, "orderId", "origClientOrderId")?;
                let side = match p.non_empty("side") {
                    None => return Err(mandatory("side")),
                    Some("BUY") => Side::Buy,
                    Some("SELL") => Side::Sell,
                    Some(_) => return Err(err(400, -1117, "Invalid side.")),
                };
                let qty_e8 = match p.non_empty("quantity") {
                    None => return Err(mandatory("quantity")),
                    Some(q) => parse_e8(q)
                        .filter(|&q| q > 0)
                        .ok_or_else(|| illegal("quantity"))?,
                };
                let price_e8 = match p.non_empty("price") {
                    None => return Err(mandatory("price")),
                    Some(q) => parse_e8(q)
                        .filter(|&q| q > 0)
                        .ok_or_else(|| illegal("price"))?,
                };
                BinanceOp::Modify {
                    target,
                    side,
                    qty_e8,
                    price_e8,
                }
            }
            Endpoint::CancelReplace => {
                let mode = match p.non_empty("cancelReplaceMode") {
                    None => return Err(mandatory("cancelReplaceMode")),
                    Some("STOP_ON_FAILURE") => ReplaceMode::StopOnFailure,
                    Some("ALLOW_FAILURE") => ReplaceMode::AllowFailure,
                    Some(_) => return Err(illegal("cancelReplaceMode")),
                };
                let cancel = Self::order_ref(p, "cancelOrderId", "cancelOrigClientOrderId")?;
                let new = self.new_order(p, "newClientOrderId")?;
                BinanceOp::CancelReplace {
                    mode,
                    cancel,
                    cancel_client_id: p.non_empty("cancelNewClientOrderId").map(str::to_string),
                    new,
                }
            }
        })
    }
}

/// A kline interval (case-sensitive, as documented) in milliseconds; `1M` is taken
/// as 30 days.
fn kline_interval_ms(i: &str) -> Option<i64> {
    const M: i64 = 60_000;
    Some(match i {
        "1s" => 1_000,
        "1m" => M,
        "3m" => 3 * M,
        "5m" => 5 * M,
        "15m" => 15 * M,
        "30m" => 30 * M,
        "1h" => 60 * M,
        "2h" => 120 * M,
        "4h" => 240 * M,
        "6h" => 360 * M,
        "8h" => 480 * M,
        "12h" => 720 * M,
        "1d" => 1_440 * M,
        "3d" => 3 * 1_440 * M,
        "1w" => 7 * 1_440 * M,
        "1M" => 30 * 1_440 * M,
        _ => return None,
    })
}
