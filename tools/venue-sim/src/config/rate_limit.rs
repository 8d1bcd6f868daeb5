//! The venue limits a profile enforces: what is counted (`LimitType`), over which
//! window (`Interval`, `RateLimit`), and each venue's documented defaults.

use std::str::FromStr;

use crate::config::ConfigError;

/// Binance's `rateLimitType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LimitType {
    /// Summed request weight per IP (`REQUEST_WEIGHT`).
    RequestWeight,
    /// Raw request count per IP (`RAW_REQUESTS`).
    RawRequests,
    /// Order placements per account (`ORDERS`, the unfilled order count).
    Orders,
    /// Bybit, per UID: `/v5/order/create`.
    BybitCreate,
    /// Bybit, per UID: `/v5/order/amend`.
    BybitAmend,
    /// Bybit, per UID: `/v5/order/cancel`.
    BybitCancel,
    /// Bybit, per UID: `/v5/order/realtime`.
    BybitRealtime,
    /// Bybit, per UID: `/v5/account/wallet-balance`.
    BybitWallet,
    /// OKX, per user and instrument: `POST /api/v5/trade/order`.
    OkxOrder,
    /// OKX, per user and instrument: `POST /api/v5/trade/cancel-order`.
    OkxCancel,
    /// OKX, per user and instrument: `POST /api/v5/trade/amend-order`.
    OkxAmend,
    /// OKX, per user: `GET /api/v5/trade/order` and `orders-pending`.
    OkxQuery,
    /// OKX, per sub-account: new and amended orders over all instruments.
    OkxSubAccount,
    /// OKX, per IP: `GET /api/v5/market/books`.
    OkxBooks,
    /// Bybit, per UID: `/v5/execution/list`.
    BybitExecution,
    /// Bybit, per UID: `/v5/order/history`.
    BybitHistory,
    /// Bybit, per UID: `/v5/order/cancel-batch`, counted per order (its own
    /// limit, not the single cancel's).
    BybitCancelBatch,
    /// OKX, per IP: `GET /api/v5/market/ticker`.
    OkxTicker,
    /// OKX, per IP: `GET /api/v5/market/candles`.
    OkxCandles,
    /// OKX, per IP: `GET /api/v5/market/trades`.
    OkxTrades,
    /// OKX, per user: `GET /api/v5/trade/fills`.
    OkxFills,
    /// OKX, per user: `GET /api/v5/trade/orders-history`.
    OkxHistory,
}

impl LimitType {
    /// The enum value as Binance writes it.
    pub fn name(self) -> &'static str {
        match self {
            LimitType::RequestWeight => "REQUEST_WEIGHT",
            LimitType::RawRequests => "RAW_REQUESTS",
            LimitType::Orders => "ORDERS",
            LimitType::BybitCreate => "/v5/order/create",
            LimitType::BybitAmend => "/v5/order/amend",
            LimitType::BybitCancel => "/v5/order/cancel",
            LimitType::BybitRealtime => "/v5/order/realtime",
            LimitType::BybitWallet => "/v5/account/wallet-balance",
            LimitType::OkxOrder => "/api/v5/trade/order",
            LimitType::OkxCancel => "/api/v5/trade/cancel-order",
            LimitType::OkxAmend => "/api/v5/trade/amend-order",
            LimitType::OkxQuery => "/api/v5/trade/order (GET)",
            LimitType::OkxSubAccount => "OKX sub-account orders",
            LimitType::OkxBooks => "/api/v5/market/books",
            LimitType::BybitExecution => "/v5/execution/list",
            LimitType::BybitHistory => "/v5/order/history",
            LimitType::BybitCancelBatch => "/v5/order/cancel-batch",
            LimitType::OkxTicker => "/api/v5/market/ticker",
            LimitType::OkxCandles => "/api/v5/market/candles",
            LimitType::OkxTrades => "/api/v5/market/trades",
            LimitType::OkxFills => "/api/v5/trade/fills",
            LimitType::OkxHistory => "/api/v5/trade/orders-history",
        }
    }

    /// Whether the limit is counted per IP (true) or per account (false).
    pub fn per_ip(self) -> bool {
        matches!(
            self,
            LimitType::RequestWeight
                | LimitType::RawRequests
                | LimitType::OkxBooks
                | LimitType::OkxTicker
                | LimitType::OkxCandles
                | LimitType::OkxTrades
        )
    }
}

/// Binance's rate-limit `interval`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Interval {
    /// `SECOND`, header letter `S`.
    Second,
    /// `MINUTE`, header letter `M`.
    Minute,
    /// `HOUR`, header letter `H`.
    Hour,
    /// `DAY`, header letter `D`.
    Day,
}

impl Interval {
    /// The enum value as Binance writes it.
    pub fn name(self) -> &'static str {
        match self {
            Interval::Second => "SECOND",
            Interval::Minute => "MINUTE",
            Interval::Hour => "HOUR",
            Interval::Day => "DAY",
        }
    }

    /// The letter in usage header names (`X-MBX-USED-WEIGHT-1M`).
    pub fn letter(self) -> char {
        match self {
            Interval::Second => 'S',
            Interval::Minute => 'M',
            Interval::Hour => 'H',
            Interval::Day => 'D',
        }
    }

    /// Length of one interval in milliseconds.
    pub fn ms(self) -> i64 {
        match self {
            Interval::Second => 1_000,
            Interval::Minute => 60_000,
            Interval::Hour => 3_600_000,
            Interval::Day => 86_400_000,
        }
    }
}

/// One entry of `exchangeInfo.rateLimits`: a fixed window aligned on the venue clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RateLimit {
    /// What is counted.
    pub kind: LimitType,
    /// The interval unit.
    pub interval: Interval,
    /// How many units one window spans (`intervalNum`).
    pub interval_num: u32,
    /// Most units admitted per window.
    pub limit: u64,
    /// Counted over any window of this length (Bybit's "rolling time window"),
    /// not in windows aligned on the clock (Binance).
    pub rolling: bool,
}

impl RateLimit {
    /// A limit; `interval_num` must be at least 1 (checked by [`crate::Config::validate`]).
    pub const fn new(kind: LimitType, interval: Interval, interval_num: u32, limit: u64) -> Self {
        RateLimit {
            kind,
            interval,
            interval_num,
            limit,
            rolling: false,
        }
    }

    /// The same limit counted over a rolling window.
    pub const fn rolling(mut self) -> Self {
        self.rolling = true;
        self
    }

    /// The window length in milliseconds.
    pub fn window_ms(&self) -> i64 {
        self.interval.ms() * i64::from(self.interval_num)
    }

    /// The usage header this limit is reported in, if Binance reports it
    /// (`RAW_REQUESTS` has none).
    pub fn header_name(&self) -> Option<String> {
        let prefix = match self.kind {
            LimitType::RequestWeight => "X-MBX-USED-WEIGHT-",
            LimitType::Orders => "X-MBX-ORDER-COUNT-",
            _ => return None,
        };
        Some(format!(
            "{prefix}{}{}",
            self.interval_num,
            self.interval.letter()
        ))
    }

    /// Human form used in error messages: `6000 request weight per 1 MINUTE`.
    pub fn describe(&self) -> String {
        format!(
            "{} per {} {}",
            self.limit,
            self.interval_num,
            self.interval.name()
        )
    }
}

impl FromStr for RateLimit {
    type Err = ConfigError;
    /// `TYPE:INTERVAL:NUM:LIMIT[:ROLLING]`, e.g. `REQUEST_WEIGHT:MINUTE:1:6000`;
    /// TYPE is a Binance `rateLimitType` or a Bybit path (`/v5/order/create`).
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        let bad = || ConfigError::BadLimit(s.to_string());
        let mut it = s.split(':');
        let (Some(t), Some(i), Some(n), Some(l)) = (it.next(), it.next(), it.next(), it.next())
        else {
            return Err(bad());
        };
        let rolling = match (it.next(), it.next()) {
            (None, None) => false,
            (Some("ROLLING"), None) => true,
            _ => return Err(bad()),
        };
        let kind = match t {
            "REQUEST_WEIGHT" => LimitType::RequestWeight,
            "RAW_REQUESTS" => LimitType::RawRequests,
            "ORDERS" => LimitType::Orders,
            "/v5/order/create" => LimitType::BybitCreate,
            "/v5/order/amend" => LimitType::BybitAmend,
            "/v5/order/cancel" => LimitType::BybitCancel,
            "/v5/order/realtime" => LimitType::BybitRealtime,
            "/v5/account/wallet-balance" => LimitType::BybitWallet,
            "/api/v5/trade/order" => LimitType::OkxOrder,
            "/api/v5/trade/cancel-order" => LimitType::OkxCancel,
            "/api/v5/trade/amend-order" => LimitType::OkxAmend,
            "/api/v5/trade/order(GET)" => LimitType::OkxQuery,
            "okx-sub-account" => LimitType::OkxSubAccount,
            "/api/v5/market/books" => LimitType::OkxBooks,
            "/v5/execution/list" => LimitType::BybitExecution,
            "/v5/order/history" => LimitType::BybitHistory,
            "/v5/order/cancel-batch" => LimitType::BybitCancelBatch,
            "/api/v5/market/ticker" => LimitType::OkxTicker,
            "/api/v5/market/candles" => LimitType::OkxCandles,
            "/api/v5/market/trades" => LimitType::OkxTrades,
            "/api/v5/trade/fills" => LimitType::OkxFills,
            "/api/v5/trade/orders-history" => LimitType::OkxHistory,
            _ => return Err(bad()),
        };
        let interval = match i {
            "SECOND" => Interval::Second,
            "MINUTE" => Interval::Minute,
            "HOUR" => Interval::Hour,
            "DAY" => Interval::Day,
            _ => return Err(bad()),
        };
        let num: u32 = n.parse().map_err(|_| bad())?;
        let limit: u64 = l.parse().map_err(|_| bad())?;
        if num == 0 {
            return Err(bad());
        }
        let l = RateLimit::new(kind, interval, num, limit);
        Ok(if rolling { l.rolling() } else { l })
    }
}

/// Binance Spot's published default limits (the `rateLimits` of `exchangeInfo`).
pub const BINANCE_SPOT_LIMITS: [RateLimit; 4] = [
    RateLimit::new(LimitType::RequestWeight, Interval::Minute, 1, 6000),
    RateLimit::new(LimitType::Orders, Interval::Second, 10, 100),
    RateLimit::new(LimitType::Orders, Interval::Day, 1, 200_000),
    RateLimit::new(LimitType::RawRequests, Interval::Minute, 5, 61_000),
];

/// Binance USD-M futures' published default limits.
pub const BINANCE_FUTURES_LIMITS: [RateLimit; 3] = [
    RateLimit::new(LimitType::RequestWeight, Interval::Minute, 1, 2400),
    RateLimit::new(LimitType::Orders, Interval::Minute, 1, 1200),
    RateLimit::new(LimitType::Orders, Interval::Second, 10, 300),
];

/// Bybit v5's documented defaults: 600 requests per IP in any 5 s, and per UID per
/// rolling second 10 creates, 10 amends, 10 cancels (linear, VIP 0) and 50 reads
/// of each read endpoint (`order/realtime`, `account/wallet-balance`,
/// `execution/list`, `order/history`), and 10 orders a second in batch cancels
/// (`order/cancel-batch`: the batch endpoints have their own limit, "does not
/// share it with single requests", and count "the actual number of orders");
/// market data counts only against the IP limit
/// (<https://bybit-exchange.github.io/docs/v5/rate-limit>).
pub const BYBIT_LIMITS: [RateLimit; 9] = [
    RateLimit::new(LimitType::RawRequests, Interval::Second, 5, 600).rolling(),
    RateLimit::new(LimitType::BybitCreate, Interval::Second, 1, 10).rolling(),
    RateLimit::new(LimitType::BybitAmend, Interval::Second, 1, 10).rolling(),
    RateLimit::new(LimitType::BybitCancel, Interval::Second, 1, 10).rolling(),
    RateLimit::new(LimitType::BybitRealtime, Interval::Second, 1, 50).rolling(),
    RateLimit::new(LimitType::BybitWallet, Interval::Second, 1, 50).rolling(),
    RateLimit::new(LimitType::BybitExecution, Interval::Second, 1, 50).rolling(),
    RateLimit::new(LimitType::BybitHistory, Interval::Second, 1, 50).rolling(),
    RateLimit::new(LimitType::BybitCancelBatch, Interval::Second, 1, 10).rolling(),
];

/// OKX v5's documented limits, all per 2 s: 60 places, 60 cancels, 60 amends and 60
/// order queries per user and instrument, 1000 new and amended orders per
/// sub-account, 40 order-book reads per IP; per IP 20 ticker reads, 40 candle
/// reads and 100 trade reads; per user 60 fill reads and 40 order-history reads
/// (each endpoint's "Rate Limit" line in <https://www.okx.com/docs-v5/en/>).
/// OKX does not say whether its windows roll; the emulator rolls them, which never
/// admits more than fixed windows would in any 2 s.
pub const OKX_LIMITS: [RateLimit; 11] = [
    RateLimit::new(LimitType::OkxOrder, Interval::Second, 2, 60).rolling(),
    RateLimit::new(LimitType::OkxCancel, Interval::Second, 2, 60).rolling(),
    RateLimit::new(LimitType::OkxAmend, Interval::Second, 2, 60).rolling(),
    RateLimit::new(LimitType::OkxQuery, Interval::Second, 2, 60).rolling(),
    RateLimit::new(LimitType::OkxSubAccount, Interval::Second, 2, 1000).rolling(),
    RateLimit::new(LimitType::OkxBooks, Interval::Second, 2, 40).rolling(),
    RateLimit::new(LimitType::OkxTicker, Interval::Second, 2, 20).rolling(),
    RateLimit::new(LimitType::OkxCandles, Interval::Second, 2, 40).rolling(),
    RateLimit::new(LimitType::OkxTrades, Interval::Second, 2, 100).rolling(),
    RateLimit::new(LimitType::OkxFills, Interval::Second, 2, 60).rolling(),
    RateLimit::new(LimitType::OkxHistory, Interval::Second, 2, 40).rolling(),
];
