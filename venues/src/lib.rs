//! ergon-venues: what each venue's requests charge and what its answers mean.
//!
//! - [`response`]: the view of an HTTP answer the adapters read (status, headers,
//!   body), filled by ergon-io's decoder or by [`classify::HttpFile`];
//! - [`json`]: a zero-allocation JSON reader for venue bodies;
//! - [`adapt`]: the [`Venue`](adapt::Venue) trait and what every adapter shares (the
//!   venue's clock, `Retry-After`, usage headers, holds, bans, batches, alerts);
//! - one module per venue: Binance Spot, Binance USD-M futures, Bybit v5 (and the
//!   private WebSocket its DCP needs, [`bybit_private`]), OKX v5,
//!   Hyperliquid (and its WebSocket limits, [`hyperliquid_ws`]), Deribit, Kraken Spot,
//!   Kraken derivatives and Coinbase Exchange; [`waits`] holds the firewall block
//!   the last four share, and
//!   [`sign`] their request signatures;
//! - [`binance_spot_ws`] and [`binance_futures_ws`]: Binance order entry over the
//!   WebSocket API (Spot's `/ws-api/v3`, USD-M's `/ws-fapi/v1`; `session.logon`);
//! - [`deribit_ws`]: Deribit order entry over its WebSocket (the REST requests' twins);
//! - [`endpoint`]: typed endpoints: a request prepared from typed arguments, with
//!   the parts it charges, its signed target, headers and body, its deadline and
//!   client order id, and the reconcile readers ([`Endpoints`](endpoint::Endpoints));
//! - [`switch`]: the venues' dead man's switch (cancel-on-disconnect): arm,
//!   refresh, disarm and their answers;
//! - [`classify`]: the `ergon-venues classify` command and the shipped fixtures.
//!
//! Venue tables change without notice: they are loaded at start where the venue
//! publishes them (Binance `exchangeInfo`), and documented defaults otherwise. This
//! crate's version moves with the tables; ergon-core's does not.

// The unit tests' order generator is shared with ergon-io's tests by path, and
// names this crate as they do.
#[cfg(test)]
extern crate self as ergon_venues;

pub mod adapt;
mod binance_auth;
pub mod binance_futures;
pub mod binance_futures_ws;
pub mod binance_replace;
pub mod binance_spot;
pub mod binance_spot_ws;
pub mod bybit;
pub mod bybit_private;
pub mod classify;
pub mod coinbase_exchange;
pub mod deribit;
pub mod deribit_ws;
pub mod endpoint;
pub mod hyperliquid;
pub mod hyperliquid_ws;
mod inflight;
pub mod json;
pub mod kraken_futures;
pub mod kraken_spot;
pub mod okx;
pub mod response;
pub mod sign;
pub mod switch;
pub mod waits;
