//! The `hyperliquid` profile's settings: the IP weight windows, the address
//! budget's figures, the nonce window, the open-order cap, the dead man's switch's
//! rules, and who may sign for which account.
//!
//! Defaults from <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/rate-limits-and-user-limits>,
//! <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/nonces-and-api-wallets> and
//! <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/exchange-endpoint#schedule-cancel-dead-mans-switch>,
//! <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/exchange-endpoint#reserve-additional-actions>
//! (checked 2026-12-06), except the short burst window, which the venue enforces
//! without documenting it (the seed's measurement: a 240-weight burst drew a
//! 429): it is a setting.

use crate::config::{Interval, LimitType, RateLimit};

/// The IP limits: 1200 weight per rolling minute, and a short window in front of
/// it (200 weight per rolling 2 s by default: under the 240 that drew a 429).
/// Both are `REQUEST_WEIGHT` per IP; replace them in [`crate::Config::rate_limits`]
/// to measure another burst window.
pub const HYPERLIQUID_LIMITS: [RateLimit; 2] = [
    RateLimit::new(LimitType::RequestWeight, Interval::Minute, 1, 1200).rolling(),
    RateLimit::new(LimitType::RequestWeight, Interval::Second, 2, 200).rolling(),
];

/// The private key of the emulator's default account: the Python SDK's test key
/// (`tests/signing_test.py`), which no real account uses. Its address is the
/// default account's ([`crate::Account::api_key`]).
pub const HYPERLIQUID_TEST_KEY: &str =
    "0x0123456789012345678901234567890123456789012345678901234567890123";

/// The address of [`HYPERLIQUID_TEST_KEY`] (as eth_account derives it).
pub const HYPERLIQUID_TEST_ADDRESS: &str = "0x14791697260e4c9a71f18484c9f997b308e59325";

/// What the `hyperliquid` profile enforces beyond the IP windows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hyperliquid {
    /// Signatures are for mainnet (phantom agent `source` "a") or testnet ("b").
    pub mainnet: bool,
    /// API wallets (agents): `(agent address, account index)`; an account's own
    /// address (its [`crate::Account::api_key`]) always signs for it.
    pub agents: Vec<(String, usize)>,
    /// Requests every address starts with (10,000), plus one per USDC traded.
    pub initial_requests: u64,
    /// Once the budget is spent: one request per this long (10 s).
    pub exhausted_every_ms: i64,
    /// Cancels' own allowance: `min(cap + this, cap × 2)` (100,000).
    pub cancel_extra: u64,
    /// Nonces kept per signer (100): a new one must be above the least of them.
    pub nonces_kept: usize,
    /// A nonce must be within (T − this, T + `nonce_ahead_ms`) of the venue's time.
    pub nonce_behind_ms: i64,
    /// See `nonce_behind_ms`.
    pub nonce_ahead_ms: i64,
    /// Open orders an account may hold (1,000 before volume raises it).
    pub open_order_cap: usize,
    /// `scheduleCancel`: the time must be at least this far ahead (5 s).
    pub switch_min_lead_ms: i64,
    /// `scheduleCancel`: triggers a day per account (10), counted from 00:00 UTC.
    pub switch_fires_per_day: u32,
    /// Cumulative volume, USDC, every account starts with (so tests can open
    /// the budget without trading).
    pub initial_volume_usdc: u64,
    /// `reserveRequestWeight`: the price of one request, USDC in units of 1e-8
    /// (0.0005 USDC: 50,000), paid from the account's value.
    pub reserve_price_e8: u64,
    /// The account's value, USDC (`clearinghouseState`'s `accountValue`):
    /// what purchases may spend in all.
    pub account_value_usdc: u64,
    /// Users an IP's WebSocket subscriptions may track (10).
    pub ws_users_per_ip: usize,
    /// A user no connection tracks any more keeps its slot this long for the
    /// IP's other connections (60 s, measured).
    pub ws_user_release_ms: i64,
}

impl Default for Hyperliquid {
    fn default() -> Self {
        Hyperliquid {
            mainnet: true,
            agents: Vec::new(),
            initial_requests: 10_000,
            exhausted_every_ms: 10_000,
            cancel_extra: 100_000,
            nonces_kept: 100,
            nonce_behind_ms: 2 * 86_400_000,
            nonce_ahead_ms: 86_400_000,
            open_order_cap: 1_000,
            switch_min_lead_ms: 5_000,
            switch_fires_per_day: 10,
            initial_volume_usdc: 0,
            reserve_price_e8: 50_000,
            account_value_usdc: 100_000,
            ws_users_per_ip: 10,
            ws_user_release_ms: 60_000,
        }
    }
}
