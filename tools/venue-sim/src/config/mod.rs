//! What the emulator is told before it starts: profile, address, clock offset,
//! limits, ban policy, faults and credentials.
//!
//! Everything here is plain data with documented defaults taken from the venue's
//! documentation; parsing from command-line text returns a [`ConfigError`] that says
//! what was wrong, never a silent default.

mod hyperliquid;
mod rate_limit;

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

pub use hyperliquid::{
    Hyperliquid, HYPERLIQUID_LIMITS, HYPERLIQUID_TEST_ADDRESS, HYPERLIQUID_TEST_KEY,
};
pub use rate_limit::{
    Interval, LimitType, RateLimit, BINANCE_FUTURES_LIMITS, BINANCE_SPOT_LIMITS, BYBIT_LIMITS,
    OKX_LIMITS,
};

/// Which venue the emulator plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Profile {
    /// Binance Spot REST (`/api/v3/...`).
    BinanceSpot,
    /// Binance USD-M futures REST (`/fapi/v1/...`).
    BinanceFutures,
    /// Bybit v5 REST (`/v5/...`, linear contracts).
    Bybit,
    /// OKX v5 REST (`/api/v5/...`).
    Okx,
    /// Deribit v2 JSON-RPC over HTTP (`/api/v2/...`).
    Deribit,
    /// Hyperliquid (`/info`, `/exchange`).
    Hyperliquid,
}

impl Profile {
    /// The profile's name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Profile::BinanceSpot => "binance-spot",
            Profile::BinanceFutures => "binance-futures",
            Profile::Bybit => "bybit",
            Profile::Okx => "okx",
            Profile::Deribit => "deribit",
            Profile::Hyperliquid => "hyperliquid",
        }
    }
}

impl FromStr for Profile {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s {
            "binance-spot" => Ok(Profile::BinanceSpot),
            "binance-futures" => Ok(Profile::BinanceFutures),
            "bybit" => Ok(Profile::Bybit),
            "okx" => Ok(Profile::Okx),
            "deribit" => Ok(Profile::Deribit),
            "hyperliquid" => Ok(Profile::Hyperliquid),
            _ => Err(ConfigError::UnknownProfile(s.to_string())),
        }
    }
}

/// When a client that keeps sending into a 429 is banned, and for how long.
///
/// Binance documents the escalation ("from 2 minutes to 3 days for repeat
/// offenders") but not the trigger; the trigger here is the emulator's choice:
/// `after_violations` requests received from an IP while it is inside the
/// Retry-After of a 429 it was given. The default, 5, lets the few requests a
/// client already had in flight when its 429 was written arrive without a ban.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BanPolicy {
    /// Requests sent into an unexpired 429 before the IP is banned (at least 1).
    pub after_violations: u32,
    /// The first ban's length; each later ban doubles it.
    pub first_ms: i64,
    /// The longest ban.
    pub max_ms: i64,
}

impl Default for BanPolicy {
    fn default() -> Self {
        BanPolicy {
            after_violations: 5,
            first_ms: 2 * 60_000,
            max_ms: 3 * 86_400_000,
        }
    }
}

impl BanPolicy {
    /// Length of the ban number `level` (0 for the first).
    pub fn duration_ms(&self, level: u32) -> i64 {
        let mut d = self.first_ms.max(1);
        for _ in 0..level {
            d = d.saturating_mul(2);
            if d >= self.max_ms {
                return self.max_ms;
            }
        }
        d.min(self.max_ms)
    }
}

/// One injected fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// Read the request, count it, close the connection, never execute.
    CloseBeforeExecute,
    /// Execute, then close the connection without a reply.
    ExecuteThenClose,
    /// Wait [`Faults::delay_ms`], then execute and reply (the client's deadline has
    /// usually passed, so the order appears after the client gave up). On the
    /// Binance profiles over HTTP, a signed request whose `timestamp + recvWindow`
    /// passed meanwhile is refused (-1021) instead, as Binance's matching engine does.
    Delay,
    /// Execute, then answer HTTP 503 with the profile's "execution status unknown"
    /// body (Spot -1006; futures "Unknown error, please check your request or try
    /// again later.").
    ServerErrorAfterExecute,
    /// Do not execute; answer HTTP 503 (Spot -1007, which Spot still documents as
    /// unknown, so a Spot client must reconcile; futures -1001 "Internal error;
    /// unable to process your request. Please try again.", documented as failed).
    ServerErrorNoExecute,
}

impl Fault {
    /// All faults, in report order.
    pub const ALL: [Fault; 5] = [
        Fault::CloseBeforeExecute,
        Fault::ExecuteThenClose,
        Fault::Delay,
        Fault::ServerErrorAfterExecute,
        Fault::ServerErrorNoExecute,
    ];

    /// The name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Fault::CloseBeforeExecute => "close-before-execute",
            Fault::ExecuteThenClose => "execute-then-close",
            Fault::Delay => "delay",
            Fault::ServerErrorAfterExecute => "5xx-after-execute",
            Fault::ServerErrorNoExecute => "5xx-not-executed",
        }
    }
}

impl FromStr for Fault {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        Fault::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| ConfigError::BadFault(s.to_string()))
    }
}

/// Which requests faults may hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultScope {
    /// Only order placements, cancels and cancel-replaces (the ones that change state).
    Orders,
    /// Every request that passed the limit and auth checks.
    All,
}

/// Fault injection: a script by eligible-request number, then chances drawn from a
/// seeded generator, so a run is repeatable.
#[derive(Clone, Debug, PartialEq)]
pub struct Faults {
    /// Seed of the generator that draws the chances.
    pub seed: u64,
    /// `(n, fault)`: the n-th eligible request (1-based) gets `fault`. Wins over chances.
    pub script: Vec<(u64, Fault)>,
    /// `(fault, p)`: each eligible request gets `fault` with probability `p`; the sum
    /// must not exceed 1.
    pub chances: Vec<(Fault, f64)>,
    /// How long [`Fault::Delay`] holds a request.
    pub delay_ms: u64,
    /// Which requests are eligible.
    pub scope: FaultScope,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            seed: 1,
            script: Vec::new(),
            chances: Vec::new(),
            delay_ms: 2_000,
            scope: FaultScope::Orders,
        }
    }
}

/// One API key and its HMAC secret, or its Ed25519 public key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// Sent by the client in `X-MBX-APIKEY`.
    pub api_key: String,
    /// The HMAC-SHA256 key.
    pub secret: String,
    /// Binance: the key is an Ed25519 key with this public key (its signatures
    /// are checked with it, `secret` is not used), the only kind
    /// `session.logon` takes.
    pub ed25519_public_key: Option<[u8; 32]>,
}

/// The emulator's configuration. Start from [`Config::binance_spot`].
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The venue played.
    pub profile: Profile,
    /// Where to listen; must be a loopback address (port 0 picks a free port).
    pub bind: SocketAddr,
    /// Venue clock minus host clock, in milliseconds (positive: the venue is ahead).
    pub clock_offset_ms: i64,
    /// The limits enforced and served from `exchangeInfo`.
    pub rate_limits: Vec<RateLimit>,
    /// Ban trigger and escalation.
    pub ban: BanPolicy,
    /// Fault injection.
    pub faults: Faults,
    /// Accepted API keys.
    pub accounts: Vec<Account>,
    /// Weight another sender on the same IP adds per second (to every IP that has
    /// sent at least one request), which the client never sent. On Bybit and OKX:
    /// orders per second another process of the same account places from the same
    /// IP (charged to the account's place-order limit, and on Bybit to the IP's).
    pub other_sender_weight_per_s: u64,
    /// The one listed symbol.
    pub symbol: String,
    /// Mid price of the synthetic book, in units of 1e-8.
    pub mid_price_e8: u64,
    /// Most window records kept per limit in the report.
    pub history_cap: usize,
    /// The OKX API passphrase (`OK-ACCESS-PASSPHRASE`) of every account.
    pub passphrase: String,
    /// The WebSocket API's limits (Binance Spot `/ws-api/v3`).
    pub ws: WsLimits,
    /// The credit pools and the connection limit (the `deribit` profile).
    pub credits: Credits,
    /// Closed orders per account that Bybit's `/v5/order/realtime` still lists
    /// (the most recently closed first); older ones only `/v5/order/history`
    /// finds. Default [`BYBIT_CLOSED_KEPT`].
    pub bybit_closed_kept: usize,
    /// Whether Bybit enabled DCP (Disconnect Cancel All) for the accounts: it
    /// does so per account, on request to the client manager, for institutional
    /// clients only, so the default is off and `POST
    /// /v5/order/disconnected-cancel-all` is refused
    /// (<https://bybit-exchange.github.io/docs/v5/order/dcp>, checked 2026-12-02).
    pub bybit_dcp: bool,
    /// Whether Bybit's private WebSocket (`/v5/private`, the `bybit` profile) is
    /// served. Default true; false answers its upgrade 404, as a venue whose
    /// private stream cannot be reached (the DCP countdown then never arms).
    pub bybit_private_ws: bool,
    /// The `hyperliquid` profile's rules beyond the IP windows.
    pub hyperliquid: Hyperliquid,
}

/// "Query a maximum of recent 500 closed status records are kept under each
/// account each category": Bybit's `/v5/order/realtime`,
/// <https://bybit-exchange.github.io/docs/v5/order/open-order>, checked 2026-12-01.
pub const BYBIT_CLOSED_KEPT: usize = 500;

/// Deribit's limits: a credit pool per sub-account, refilled continuously, one
/// for matching-engine requests (`private/buy`, `sell`, `edit`, `cancel`,
/// `cancel_all*`, `close_position`, `cancel_by_label`) and one for the rest, and
/// a limit on the connections open at once from one IP.
///
/// Defaults, from <https://support.deribit.com/hc/en-us/articles/25944617523357-Rate-Limits>
/// and <https://support.deribit.com/hc/en-us/articles/25944603459613> (checked
/// 2026-11-30): non-matching requests cost 500 credits of a 50,000 pool refilled
/// at 10,000 a second (20 a second, bursts of 100); matching-engine requests of
/// the lowest tier 5 a second with bursts of 20, written here as 1,000 credits of
/// a 20,000 pool refilled at 5,000 a second (dearer per request); 32 connections
/// open at once per IP, the 33rd refused with HTTP 429. Unauthenticated requests
/// draw from a pool of the IP with the non-matching figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Credits {
    /// Largest non-matching pool.
    pub max: u64,
    /// Non-matching credits added per second.
    pub refill_per_s: u64,
    /// What a non-matching request costs.
    pub cost: u64,
    /// Largest matching-engine pool.
    pub matching_max: u64,
    /// Matching-engine credits added per second.
    pub matching_refill_per_s: u64,
    /// What a matching-engine request costs.
    pub matching_cost: u64,
    /// Connections open at once per IP; the next one is refused with HTTP 429.
    pub connections_per_ip: u32,
}

impl Default for Credits {
    fn default() -> Self {
        Credits {
            max: 50_000,
            refill_per_s: 10_000,
            cost: 500,
            matching_max: 20_000,
            matching_refill_per_s: 5_000,
            matching_cost: 1_000,
            connections_per_ip: 32,
        }
    }
}

/// The limits of the WebSocket API, as Binance Spot documents them for its
/// WebSocket endpoints: 300 connects per 5 minutes per IP (over it the connect is refused, and an IP that keeps trying is banned), a
/// ping from the server every 20 seconds that must be answered within a minute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WsLimits {
    /// Connects per IP in any rolling [`WsLimits::connect_window_ms`].
    pub connects: u32,
    /// The connect window.
    pub connect_window_ms: i64,
    /// Connects refused for the connect limit, inside one connect window, after
    /// which the IP is banned (the emulator's choice: Binance says only that
    /// repeats get the IP banned). The ban follows [`Config::ban`].
    pub ban_after_refused: u32,
    /// How often the WebSocket API (`/ws-api/v3`) pings each connection
    /// (documented: every 20 seconds).
    pub api_ping_interval_ms: i64,
    /// How long a WebSocket API ping may go unanswered before the connection is
    /// cut (documented: a minute).
    pub api_pong_timeout_ms: i64,
}

impl Default for WsLimits {
    fn default() -> Self {
        WsLimits {
            connects: 300,
            connect_window_ms: 5 * 60_000,
            ban_after_refused: 10,
            api_ping_interval_ms: 20_000,
            api_pong_timeout_ms: 60_000,
        }
    }
}

/// Default OKX passphrase of the embedded emulator.
pub const DEFAULT_PASSPHRASE: &str = "ergon-sim-passphrase";

/// Default API key of the embedded emulator (no real venue accepts it).
pub const DEFAULT_API_KEY: &str = "ergon-sim-key";
/// A throwaway Ed25519 private key for test clients (`openssl genpkey -algorithm
/// ed25519`), the PKCS#8 PEM Binance's key generator writes too.
pub const ED25519_TEST_PRIVATE_PEM: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIOphjDnj177uXH0N7VA8AvzH1KwCiMvsNlT6fbyHUhAr
-----END PRIVATE KEY-----
";
/// The public key of [`ED25519_TEST_PRIVATE_PEM`] (`openssl pkey -pubout`).
pub const ED25519_TEST_PUBLIC_PEM: &str = "-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEAny3I38iivRKuGGf8RcAq5jE4+qqOpU1Lw7CMdMY0mbk=
-----END PUBLIC KEY-----
";
/// The API key of [`Account::ed25519_test`].
pub const ED25519_TEST_API_KEY: &str = "ergon-sim-ed25519-key";

impl Account {
    /// An Ed25519 account: [`ED25519_TEST_API_KEY`] with the public key of
    /// [`ED25519_TEST_PRIVATE_PEM`].
    pub fn ed25519_test() -> Account {
        Account {
            api_key: ED25519_TEST_API_KEY.into(),
            secret: String::new(),
            ed25519_public_key: crate::ed25519::public_key_from_pem(ED25519_TEST_PUBLIC_PEM).ok(),
        }
    }
}

/// Default HMAC secret of the embedded emulator.
pub const DEFAULT_API_SECRET: &str = "ergon-sim-secret";

impl Config {
    /// Binance Spot with its published limits, one account
    /// ([`DEFAULT_API_KEY`]/[`DEFAULT_API_SECRET`]), symbol BTCUSDT, on `127.0.0.1:0`.
    pub fn binance_spot() -> Self {
        Config {
            profile: Profile::BinanceSpot,
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            clock_offset_ms: 0,
            rate_limits: BINANCE_SPOT_LIMITS.to_vec(),
            ban: BanPolicy::default(),
            faults: Faults::default(),
            accounts: vec![Account {
                api_key: DEFAULT_API_KEY.to_string(),
                secret: DEFAULT_API_SECRET.to_string(),
                ed25519_public_key: None,
            }],
            other_sender_weight_per_s: 0,
            symbol: "BTCUSDT".to_string(),
            mid_price_e8: 50_000 * 100_000_000,
            history_cap: 10_000,
            passphrase: DEFAULT_PASSPHRASE.to_string(),
            ws: WsLimits::default(),
            credits: Credits::default(),
            bybit_closed_kept: BYBIT_CLOSED_KEPT,
            bybit_dcp: false,
            bybit_private_ws: true,
            hyperliquid: Hyperliquid::default(),
        }
    }

    /// Binance USD-M futures with its published limits; otherwise as
    /// [`Config::binance_spot`].
    pub fn binance_futures() -> Self {
        Config {
            profile: Profile::BinanceFutures,
            rate_limits: BINANCE_FUTURES_LIMITS.to_vec(),
            // "Websocket server will send a ping frame every 3 minutes", and drops
            // a connection without a pong "within a 10 minute period" (USD-M
            // "WebSocket API General Info").
            ws: WsLimits {
                api_ping_interval_ms: 180_000,
                api_pong_timeout_ms: 600_000,
                ..WsLimits::default()
            },
            ..Config::binance_spot()
        }
    }

    /// Deribit with its documented default credit pools and connection limit
    /// ([`Credits::default`]), instrument `BTC-PERPETUAL`, no windowed limits;
    /// otherwise as [`Config::binance_spot`].
    pub fn deribit() -> Self {
        Config {
            profile: Profile::Deribit,
            rate_limits: Vec::new(),
            symbol: "BTC-PERPETUAL".to_string(),
            ..Config::binance_spot()
        }
    }

    /// OKX v5 with its documented limits, instrument `BTC-USDT-SWAP`, passphrase
    /// [`DEFAULT_PASSPHRASE`]; otherwise as [`Config::binance_spot`].
    pub fn okx() -> Self {
        Config {
            profile: Profile::Okx,
            rate_limits: OKX_LIMITS.to_vec(),
            symbol: "BTC-USDT-SWAP".to_string(),
            ..Config::binance_spot()
        }
    }

    /// Bybit v5 with its documented limits; an IP over its limit is banned at
    /// once for 10 minutes ("403, access too frequent ... wait for at least 10
    /// minutes"); otherwise as [`Config::binance_spot`].
    pub fn bybit() -> Self {
        Config {
            profile: Profile::Bybit,
            rate_limits: BYBIT_LIMITS.to_vec(),
            ban: BanPolicy {
                after_violations: 1,
                first_ms: 600_000,
                max_ms: 600_000,
            },
            ..Config::binance_spot()
        }
    }

    /// Hyperliquid with its documented limits ([`HYPERLIQUID_LIMITS`],
    /// [`Hyperliquid::default`]), coin `BTC`, one account: the address of
    /// [`HYPERLIQUID_TEST_KEY`] (its `secret`, for test clients), which signs
    /// for itself; otherwise as
    /// [`Config::binance_spot`].
    pub fn hyperliquid() -> Self {
        Config {
            profile: Profile::Hyperliquid,
            rate_limits: HYPERLIQUID_LIMITS.to_vec(),
            symbol: "BTC".to_string(),
            accounts: vec![Account {
                api_key: HYPERLIQUID_TEST_ADDRESS.to_string(),
                secret: HYPERLIQUID_TEST_KEY.to_string(),
                ed25519_public_key: None,
            }],
            ..Config::binance_spot()
        }
    }

    /// The defaults of `profile`.
    pub fn for_profile(profile: Profile) -> Self {
        match profile {
            Profile::BinanceSpot => Config::binance_spot(),
            Profile::BinanceFutures => Config::binance_futures(),
            Profile::Bybit => Config::bybit(),
            Profile::Okx => Config::okx(),
            Profile::Deribit => Config::deribit(),
            Profile::Hyperliquid => Config::hyperliquid(),
        }
    }

    /// Checks everything [`crate::Server::start`] relies on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.bind.ip().is_loopback() {
            return Err(ConfigError::NotLoopback(self.bind));
        }
        for l in &self.rate_limits {
            if l.interval_num == 0 {
                return Err(ConfigError::BadLimit(format!("{l:?}")));
            }
        }
        if self.ban.after_violations == 0
            || self.ban.first_ms <= 0
            || self.ban.max_ms < self.ban.first_ms
        {
            return Err(ConfigError::BadBanPolicy);
        }
        let mut sum = 0.0;
        for &(f, p) in &self.faults.chances {
            if !(0.0..=1.0).contains(&p) {
                return Err(ConfigError::BadFault(format!("{}:{p}", f.name())));
            }
            sum += p;
        }
        if sum > 1.0 + 1e-9 {
            return Err(ConfigError::BadFault(format!(
                "chances add up to {sum} > 1"
            )));
        }
        if self.faults.script.iter().any(|&(n, _)| n == 0) {
            return Err(ConfigError::BadFault(
                "scripted request numbers start at 1".into(),
            ));
        }
        let c = &self.credits;
        if c.refill_per_s == 0
            || c.matching_refill_per_s == 0
            || c.cost > c.max
            || c.matching_cost > c.matching_max
            || c.connections_per_ip == 0
        {
            return Err(ConfigError::BadCredits);
        }
        if self.accounts.is_empty() {
            return Err(ConfigError::NoAccount);
        }
        if self.symbol.is_empty()
            || !self
                .symbol
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(ConfigError::BadSymbol(self.symbol.clone()));
        }
        let w = &self.ws;
        if w.connects == 0
            || w.connect_window_ms <= 0
            || w.ban_after_refused == 0
            || w.api_ping_interval_ms <= 0
            || w.api_pong_timeout_ms <= 0
        {
            return Err(ConfigError::BadWsLimits);
        }
        Ok(())
    }
}

/// A configuration the emulator refuses.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The bind address is not loopback: the emulator never listens beyond the host.
    NotLoopback(SocketAddr),
    /// A profile name nobody knows.
    UnknownProfile(String),
    /// A profile the issue lists but this emulator does not play yet.
    ProfileNotBuilt(String),
    /// A rate limit that is not `TYPE:INTERVAL:NUM:LIMIT` with NUM >= 1.
    BadLimit(String),
    /// A ban policy with a zero trigger, a non-positive first ban or max < first.
    BadBanPolicy,
    /// A fault name, chance or script entry that does not parse or add up.
    BadFault(String),
    /// No API key configured.
    NoAccount,
    /// A symbol that is empty or not alphanumeric.
    BadSymbol(String),
    /// A WebSocket limit, window or interval that is zero or negative.
    BadWsLimits,
    /// A credit pool that never refills or cannot pay one request, or no
    /// connection allowed.
    BadCredits,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::NotLoopback(a) => {
                write!(f, "refusing to bind {a}: the emulator listens on loopback only")
            }
            ConfigError::UnknownProfile(p) => write!(
                f,
                "unknown profile {p:?} (known: binance-spot, binance-futures, bybit, okx, deribit, hyperliquid)"
            ),
            ConfigError::ProfileNotBuilt(p) => {
                write!(f, "profile {p:?} is not built yet; binance-spot, binance-futures, bybit, okx, deribit and hyperliquid are")
            }
            ConfigError::BadLimit(s) => write!(
                f,
                "bad rate limit {s:?}: want TYPE:INTERVAL:NUM:LIMIT, e.g. REQUEST_WEIGHT:MINUTE:1:6000"
            ),
            ConfigError::BadBanPolicy => {
                write!(f, "bad ban policy: need violations >= 1 and 0 < first <= max")
            }
            ConfigError::BadFault(s) => write!(f, "bad fault {s:?}"),
            ConfigError::NoAccount => write!(f, "no API key configured"),
            ConfigError::BadSymbol(s) => write!(f, "bad symbol {s:?}"),
            ConfigError::BadCredits => write!(
                f,
                "bad credits: refills must be positive, a cost at most its pool, connections at least 1"
            ),
            ConfigError::BadWsLimits => write!(
                f,
                "bad WebSocket limits: every limit, window and interval must be positive"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_parses_and_names_its_header() {
        let l: RateLimit = "ORDERS:SECOND:10:100".parse().unwrap();
        assert_eq!(l.header_name().as_deref(), Some("X-MBX-ORDER-COUNT-10S"));
        assert_eq!(l.window_ms(), 10_000);
        assert!("ORDERS:SECOND:0:100".parse::<RateLimit>().is_err());
        assert!("ORDERS:WEEK:1:100".parse::<RateLimit>().is_err());
        assert!("REQUEST_WEIGHT:MINUTE:1".parse::<RateLimit>().is_err());
    }

    #[test]
    fn bans_escalate_from_two_minutes_to_three_days() {
        let p = BanPolicy::default();
        assert_eq!(p.duration_ms(0), 120_000);
        assert_eq!(p.duration_ms(1), 240_000);
        assert_eq!(p.duration_ms(40), 259_200_000);
    }

    #[test]
    fn non_loopback_is_refused() {
        let mut c = Config::binance_spot();
        c.bind = "0.0.0.0:0".parse().unwrap();
        assert!(matches!(c.validate(), Err(ConfigError::NotLoopback(_))));
    }

    #[test]
    fn every_profile_parses_and_others_are_unknown() {
        assert_eq!("hyperliquid".parse::<Profile>(), Ok(Profile::Hyperliquid));
        assert_eq!("okx".parse::<Profile>(), Ok(Profile::Okx));
        assert_eq!("bybit".parse::<Profile>(), Ok(Profile::Bybit));
        let l: RateLimit = "/v5/order/create:SECOND:1:10:ROLLING".parse().unwrap();
        assert!(l.rolling);
        assert_eq!(l.kind, LimitType::BybitCreate);
        assert!(matches!(
            "nasdaq".parse::<Profile>(),
            Err(ConfigError::UnknownProfile(_))
        ));
    }
}
