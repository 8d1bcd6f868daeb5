//! Binance's routes, and each endpoint's request weight as documented for Spot and
//! USD-M futures.
//!
//! Spot weights are those of `rest-api.md` in
//! <https://github.com/binance/binance-spot-api-docs> (checked 2026-11-30 at its
//! commit of 2026-07-21), e.g. `ticker/price` and `ticker/bookTicker` 2 for one
//! `symbol` and 4 otherwise, `ticker/24hr` 2 for one symbol (or 1-20 `symbols`),
//! 40 for 21-100, 80 for more or none, `trades` 25, `klines`/`uiKlines` 2,
//! `avgPrice` 2, `myTrades` 20 (5 with `orderId`), `order/test` 1 (20 with
//! `computeCommissionRates`), `DELETE openOrders` 1, `allOrders` 20,
//! `rateLimit/order` 40; on the WebSocket API the same methods weigh the same, and
//! `userDataStream.subscribe.signature`, `userDataStream.unsubscribe` and
//! `session.subscriptions` 2 (`web-socket-api.md`). The wallet's
//! `capital/config/getall` 10 and margin's `allPairs` 1, `isolated/allPairs` 10
//! (<https://developers.binance.com/docs/wallet/capital/all-coins-info>,
//! <https://developers.binance.com/docs/margin_trading/market-data/Get-All-Cross-Margin-Pairs>,
//! <https://developers.binance.com/docs/margin_trading/market-data/Query-Isolated-Margin-Symbol>);
//! USD-M `DELETE allOpenOrders` 1.

use crate::config::Profile;
use crate::params::Params;

#[derive(Clone, Copy, Debug)]
pub(crate) enum Endpoint {
    Ping,
    Time,
    ExchangeInfo,
    Depth,
    Account,
    OpenOrders,
    NewOrder,
    CancelOrder,
    QueryOrder,
    CancelReplace,
    Modify,
    TickerPrice,
    BookTicker,
    Ticker24hr,
    Trades,
    Klines,
    AvgPrice,
    MyTrades,
    OrderTest,
    CancelAll,
    /// USD-M `countdownCancelAll`: the symbol's dead man's switch.
    Countdown,
    AllOrders,
    RateLimitOrder,
    /// WebSocket API only: `userDataStream.subscribe.signature`.
    StreamSubscribe,
    /// WebSocket API only: `userDataStream.unsubscribe`.
    StreamUnsubscribe,
    /// WebSocket API only: `session.subscriptions`.
    StreamSubscriptions,
    /// WebSocket API only: `session.logon` (Ed25519 keys only).
    SessionLogon,
    /// WebSocket API only: `session.status`.
    SessionStatus,
    /// WebSocket API only: `session.logout`.
    SessionLogout,
    /// WebSocket API only: `userDataStream.subscribe`, on a logged-on connection.
    StreamSubscribeLoggedOn,
    /// Spot `GET /sapi/v1/capital/config/getall`: the account's coins.
    CapitalConfig,
    /// Spot `GET /sapi/v1/margin/allPairs`: the cross-margin pairs.
    MarginPairs,
    /// Spot `GET /sapi/v1/margin/isolated/allPairs`: the isolated-margin pairs.
    IsolatedPairs,
}

impl Endpoint {
    pub(crate) fn route(profile: Profile, method: &str, path: &str) -> Option<Endpoint> {
        Some(match profile {
            Profile::BinanceSpot => match (method, path) {
                ("GET", "/api/v3/ping") => Endpoint::Ping,
                ("GET", "/api/v3/time") => Endpoint::Time,
                ("GET", "/api/v3/exchangeInfo") => Endpoint::ExchangeInfo,
                ("GET", "/api/v3/depth") => Endpoint::Depth,
                ("GET", "/api/v3/account") => Endpoint::Account,
                ("GET", "/api/v3/openOrders") => Endpoint::OpenOrders,
                ("POST", "/api/v3/order") => Endpoint::NewOrder,
                ("DELETE", "/api/v3/order") => Endpoint::CancelOrder,
                ("GET", "/api/v3/order") => Endpoint::QueryOrder,
                ("POST", "/api/v3/order/cancelReplace") => Endpoint::CancelReplace,
                ("GET", "/api/v3/ticker/price") => Endpoint::TickerPrice,
                ("GET", "/api/v3/ticker/bookTicker") => Endpoint::BookTicker,
                ("GET", "/api/v3/ticker/24hr") => Endpoint::Ticker24hr,
                ("GET", "/api/v3/trades") => Endpoint::Trades,
                ("GET", "/api/v3/klines" | "/api/v3/uiKlines") => Endpoint::Klines,
                ("GET", "/api/v3/avgPrice") => Endpoint::AvgPrice,
                ("GET", "/api/v3/myTrades") => Endpoint::MyTrades,
                ("POST", "/api/v3/order/test") => Endpoint::OrderTest,
                ("DELETE", "/api/v3/openOrders") => Endpoint::CancelAll,
                ("GET", "/api/v3/allOrders") => Endpoint::AllOrders,
                ("GET", "/api/v3/rateLimit/order") => Endpoint::RateLimitOrder,
                ("GET", "/sapi/v1/capital/config/getall") => Endpoint::CapitalConfig,
                ("GET", "/sapi/v1/margin/allPairs") => Endpoint::MarginPairs,
                ("GET", "/sapi/v1/margin/isolated/allPairs") => Endpoint::IsolatedPairs,
                _ => return None,
            },
            Profile::BinanceFutures => match (method, path) {
                ("GET", "/fapi/v1/ping") => Endpoint::Ping,
                ("GET", "/fapi/v1/time") => Endpoint::Time,
                ("GET", "/fapi/v1/exchangeInfo") => Endpoint::ExchangeInfo,
                ("GET", "/fapi/v1/depth") => Endpoint::Depth,
                ("GET", "/fapi/v2/account" | "/fapi/v3/account") => Endpoint::Account,
                ("GET", "/fapi/v1/openOrders") => Endpoint::OpenOrders,
                ("POST", "/fapi/v1/order") => Endpoint::NewOrder,
                ("PUT", "/fapi/v1/order") => Endpoint::Modify,
                ("DELETE", "/fapi/v1/order") => Endpoint::CancelOrder,
                ("GET", "/fapi/v1/order") => Endpoint::QueryOrder,
                ("POST", "/fapi/v1/countdownCancelAll") => Endpoint::Countdown,
                ("DELETE", "/fapi/v1/allOpenOrders") => Endpoint::CancelAll,
                _ => return None,
            },
            // Bybit and OKX have their own routers (their modules).
            Profile::Bybit | Profile::Okx | Profile::Deribit | Profile::Hyperliquid => return None,
        })
    }

    pub(crate) fn signed(self) -> bool {
        !self.public()
    }

    /// NONE security: market data, no key.
    pub(crate) fn public(self) -> bool {
        matches!(
            self,
            Endpoint::Ping
                | Endpoint::Time
                | Endpoint::ExchangeInfo
                | Endpoint::Depth
                | Endpoint::TickerPrice
                | Endpoint::BookTicker
                | Endpoint::Ticker24hr
                | Endpoint::Trades
                | Endpoint::Klines
                | Endpoint::AvgPrice
                | Endpoint::StreamUnsubscribe
                | Endpoint::StreamSubscriptions
                | Endpoint::SessionStatus
                | Endpoint::SessionLogout
                | Endpoint::StreamSubscribeLoggedOn
                | Endpoint::MarginPairs
        )
    }

    pub(crate) fn places_order(self) -> bool {
        matches!(
            self,
            Endpoint::NewOrder | Endpoint::CancelReplace | Endpoint::Modify
        )
    }

    /// Request weight as documented for each endpoint of each profile.
    pub(crate) fn weight(self, profile: Profile, p: &Params) -> u64 {
        let with_symbol = p.get("symbol").is_some();
        match profile {
            Profile::BinanceSpot => match self {
                Endpoint::Ping | Endpoint::Time => 1,
                Endpoint::ExchangeInfo => 20,
                Endpoint::Depth => depth_weight(profile, depth_limit(profile, p).unwrap_or(100)),
                Endpoint::Account => 20,
                Endpoint::OpenOrders if with_symbol => 6,
                Endpoint::OpenOrders => 80,
                Endpoint::NewOrder | Endpoint::CancelOrder | Endpoint::CancelReplace => 1,
                Endpoint::QueryOrder => 4,
                Endpoint::Modify => 1,
                Endpoint::TickerPrice | Endpoint::BookTicker if with_symbol => 2,
                Endpoint::TickerPrice | Endpoint::BookTicker => 4,
                Endpoint::Ticker24hr if with_symbol => 2,
                Endpoint::Ticker24hr => match symbols(p).map(|s| s.len()) {
                    Some(1..=20) => 2,
                    Some(21..=100) => 40,
                    _ => 80,
                },
                Endpoint::Trades => 25,
                Endpoint::Klines | Endpoint::AvgPrice => 2,
                Endpoint::MyTrades if p.get("orderId").is_some() => 5,
                Endpoint::MyTrades => 20,
                Endpoint::OrderTest if p.get("computeCommissionRates") == Some("true") => 20,
                Endpoint::OrderTest | Endpoint::CancelAll | Endpoint::Countdown => 1,
                Endpoint::AllOrders => 20,
                Endpoint::RateLimitOrder => 40,
                Endpoint::StreamSubscribe
                | Endpoint::StreamUnsubscribe
                | Endpoint::StreamSubscriptions
                | Endpoint::SessionLogon
                | Endpoint::SessionStatus
                | Endpoint::SessionLogout
                | Endpoint::StreamSubscribeLoggedOn => 2,
                // The /sapi weights, counted here on the same IP weight (Binance
                // keeps a separate /sapi IP limit: not emulated).
                Endpoint::CapitalConfig | Endpoint::IsolatedPairs => 10,
                Endpoint::MarginPairs => 1,
            },
            // New and modified orders weigh 0 on the IP limit, 1 on each order limit.
            Profile::BinanceFutures => match self {
                Endpoint::Ping | Endpoint::Time | Endpoint::ExchangeInfo => 1,
                Endpoint::Depth => depth_weight(profile, depth_limit(profile, p).unwrap_or(500)),
                Endpoint::Account => 5,
                Endpoint::OpenOrders if with_symbol => 1,
                Endpoint::OpenOrders => 40,
                Endpoint::NewOrder | Endpoint::Modify | Endpoint::CancelReplace => 0,
                Endpoint::CancelOrder | Endpoint::QueryOrder => 1,
                Endpoint::Countdown => 10,
                // The WebSocket API's session requests, as Spot's.
                Endpoint::SessionLogon | Endpoint::SessionStatus | Endpoint::SessionLogout => 2,
                // Not routed for futures.
                _ => 1,
            },
            Profile::Bybit | Profile::Okx | Profile::Deribit | Profile::Hyperliquid => 1,
        }
    }
}

/// The depth `limit` parameter: Spot takes 1..=5000 (more is cut to 5000), futures
/// one of 5, 10, 20, 50, 100, 500, 1000.
pub(crate) fn depth_limit(profile: Profile, p: &Params) -> Option<usize> {
    let n = match p.get("limit") {
        None => {
            return Some(match profile {
                Profile::BinanceSpot
                | Profile::Bybit
                | Profile::Okx
                | Profile::Deribit
                | Profile::Hyperliquid => 100,
                Profile::BinanceFutures => 500,
            })
        }
        Some(s) => s.parse::<usize>().ok()?,
    };
    match profile {
        Profile::BinanceSpot
        | Profile::Bybit
        | Profile::Okx
        | Profile::Deribit
        | Profile::Hyperliquid => (n >= 1).then_some(n.min(5000)),
        Profile::BinanceFutures => [5, 10, 20, 50, 100, 500, 1000].contains(&n).then_some(n),
    }
}

pub(crate) fn depth_weight(profile: Profile, limit: usize) -> u64 {
    match profile {
        Profile::Bybit | Profile::Okx | Profile::Deribit | Profile::Hyperliquid => 1,
        Profile::BinanceSpot => match limit {
            0..=100 => 5,
            101..=500 => 25,
            501..=1000 => 50,
            _ => 250,
        },
        Profile::BinanceFutures => match limit {
            0..=50 => 2,
            51..=100 => 5,
            101..=500 => 10,
            _ => 20,
        },
    }
}

/// The `symbols` parameter (`["BTCUSDT","BNBUSDT"]`), if sent and well formed.
pub(crate) fn symbols(p: &Params) -> Option<Vec<String>> {
    let v: serde_json::Value = serde_json::from_str(p.get("symbols")?).ok()?;
    v.as_array()?
        .iter()
        .map(|s| s.as_str().map(str::to_string))
        .collect()
}
