//! ergon-venues: what each venue's requests charge and what its answers mean.
//!
//! - [`response`]: the view of an HTTP answer the adapters read (status, headers,
//!   body), filled by ergon-io's decoder or by [`classify::HttpFile`];
//! - [`json`]: a zero-allocation JSON reader for venue bodies;
//! - [`adapt`]: the [`Venue`](adapt::Venue) trait and what every adapter shares (the
//!   venue's clock, `Retry-After`, usage headers, holds, bans, batches, alerts);
//! - one module per venue: Binance Spot, Binance USD-M futures, Bybit v5, OKX v5 and
//!   Hyperliquid;
//! - [`endpoint`]: typed endpoints: a request prepared from typed arguments, with
//!   the parts it charges, its signed target, headers and body, its deadline and
//!   client order id, and the reconcile readers ([`Endpoints`](endpoint::Endpoints));
//! - [`classify`]: the `ergon-venues classify` command and the shipped fixtures.
//!
//! Venue tables change without notice: they are loaded at start where the venue
//! publishes them (Binance `exchangeInfo`), and documented defaults otherwise. This
//! crate's version moves with the tables; ergon-core's does not.

pub mod adapt;
pub mod binance_futures;
pub mod binance_spot;
pub mod bybit;
pub mod classify;
pub mod endpoint;
pub mod hyperliquid;
pub mod json;
pub mod okx;
pub mod response;
