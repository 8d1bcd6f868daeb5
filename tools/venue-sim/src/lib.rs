//! ergon-venue-sim: a venue emulator on loopback that enforces a venue's documented
//! request rules strictly, injects faults on demand, and reports what it counted.
//!
//! It is a test peer, not the product: std threads and blocking sockets, one lock
//! around the venue state. Tests and examples start it in-process with
//! [`Server::start`]; the `ergon-venue-sim` binary runs the same server standalone.
//!
//! Profile `binance-spot` plays Binance Spot REST; `binance-futures` plays USD-M
//! futures (`/fapi`) with the same machinery, its own limits, weights, shapes and
//! 503 texts; `bybit` plays Bybit v5 linear (rolling per-UID endpoint limits with
//! the `X-Bapi-Limit*` headers, 600 per IP per 5 s with an immediate 403 ban, v5
//! signing, `retCode` answers; the private WebSocket `/v5/private` with its DCP
//! countdown, [`Config::bybit_private_ws`] and [`Config::bybit_dcp`]); `okx`
//! plays OKX v5 (limits per 2 s answered 429 50011/50061, passphrase and base64
//! signing over ISO timestamps, `sCode` per order; market data and
//! fills/history); `deribit` plays Deribit v2 JSON-RPC over
//! HTTP (bearer tokens from `public/auth`, credit pools per sub-account with
//! matching-engine requests dearer, `too_many_requests` 10028, 32 connections open
//! per IP) and over WebSocket at `/ws/api/v2` (connection auth, heartbeats,
//! cancel-on-disconnect per connection or account, counted in
//! [`Report::deribit_ws`]; [`Server::drop_deribit_ws`] cuts it); `hyperliquid`
//! plays Hyperliquid's `/info` and `/exchange` (each action's signer recovered
//! from its secp256k1 signature, the nonce rules, the IP weight windows, the
//! address budget, `scheduleCancel`; [`Config::hyperliquid`], [`Hyperliquid`]).
//! Binance Spot in detail:
//! - its own clock ([`VenueClock`]: host UTC plus [`Config::clock_offset_ms`]);
//! - fixed windows aligned on that clock, counted at receipt, per IP for
//!   `REQUEST_WEIGHT` and `RAW_REQUESTS` and per API key for `ORDERS`; the limits are
//!   configurable and served from `/api/v3/exchangeInfo` `rateLimits`, so a test can
//!   use a 1-second weight window instead of waiting minutes;
//! - `X-MBX-USED-WEIGHT-(n)(letter)` on every answer, `X-MBX-ORDER-COUNT-(n)(letter)`
//!   on order placements;
//! - 429 with `Retry-After` and code -1003 over an IP limit; an IP that keeps sending
//!   inside that Retry-After is banned: 418, `Retry-After`, -1003 "IP banned until",
//!   the ban doubling from 2 minutes up to 3 days for repeat offenders ([`BanPolicy`]);
//! - 429 -1015 without `Retry-After` over an order-count limit; only placements the
//!   engine accepts stay counted (a refused or never-executed one does not; a
//!   cancel-replace always does), and an order's first fill takes one off the count,
//!   after its own answer, as the Unfilled Order Count rules say;
//! - `X-MBX-APIKEY` (-2014 missing, -2015 unknown), HMAC-SHA256 over query string +
//!   body (-1022), `timestamp`/`recvWindow` (-1021, -1131);
//! - exchangeInfo, depth, account, openOrders, order (POST with newClientOrderId,
//!   DELETE and GET by origClientOrderId or orderId), order/cancelReplace, time, ping;
//!   the market data and account history a third-party client calls (ticker/price,
//!   ticker/bookTicker, ticker/24hr, trades, klines, uiKlines, avgPrice, myTrades,
//!   allOrders, rateLimit/order), order/test and DELETE openOrders, the wallet's
//!   and margin's `/sapi` answers a client asks for at start
//!   (`capital/config/getall`, `margin/allPairs`, `margin/isolated/allPairs`),
//!   each with its documented weight; orders rest in a simple book;
//! - every profile's order rules, as its exchangeInfo or instruments answer
//!   publishes them (price and lot filters, minimum notional, open-order cap,
//!   funds), each breach refused with the venue's own code
//!   (`profiles::instruments` has the table and its sources);
//! - faults ([`Fault`]) by script or by seeded chance: close before executing,
//!   execute then close without a reply, delay past the client's deadline, 503 after
//!   executing, 503 without executing;
//! - a registry by client order id that counts executions, so duplicates are counted
//!   ([`Report::duplicates`]), and a final [`Report`] as JSON;
//! - the WebSocket API on the same port at `/ws-api/v3`: `{id, method, params}`
//!   requests signed over the sorted params, `{id, status, result|error,
//!   rateLimits}` answers, the same weights, counters, bans, faults and registry as
//!   REST, and the user data stream by `userDataStream.subscribe.signature` on the
//!   same connection (`profiles::binance::ws_api` has the rules and sources), with
//!   Binance's WebSocket limits ([`WsLimits`]: 5 incoming frames a second per
//!   connection, 300 connects per 5 minutes per IP, server pings that must be
//!   answered), counted in [`Report::ws`]; on the USD-M futures profile at
//!   `/ws-fapi/v1`: order entry (`order.place`, `order.modify`, `order.cancel`,
//!   `order.status`) and `session.logon` with USD-M's weights;
//! - the removed listenKey endpoints (`/api/v3/userDataStream`, any method)
//!   answer 410 Gone, as Binance has since 2026-02-20.
//!
//! ## The two 5xx faults
//! Binance Spot documents every 5XX as "execution status UNKNOWN; could have been a
//! success" and lists two codes for it: -1006 "An unexpected response was received
//! from the message bus. Execution status unknown." and -1007 "Timeout waiting for
//! response from backend server. Send status unknown; execution status unknown."
//! The emulator answers [`Fault::ServerErrorAfterExecute`] with 503 -1006 (the engine
//! ran it; the reply was lost) and [`Fault::ServerErrorNoExecute`] with 503 -1007
//! (it never reached the engine: "send status unknown"). Only the emulator knows
//! which happened; a client must treat both as Unknown and reconcile by client order
//! id, and it finds the order in the first case and not in the second.
//!
//! ## Sources
//! - <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/limits>
//! - <https://developers.binance.com/docs/binance-spot-api-docs/errors>
//! - <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/endpoint-security-type>
//! - <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/public-rest-api-for-binance-2024-10-17>
//! - <https://raw.githubusercontent.com/binance/binance-spot-api-docs/master/rest-api.md>
//! - <https://developers.binance.com/docs/binance-spot-api-docs/faqs/order_count_decrement>
//!
//! ## What it never does
//! It never listens on a non-loopback address, never panics on bytes from a client
//! (bad requests get a 4xx and the connection closed), and never guesses a count:
//! every figure in the report is one it recorded.
//!
//! ```
//! use ergon_venue_sim::{Config, Server};
//! let server = Server::start(Config::binance_spot()).unwrap();
//! assert!(server.addr().ip().is_loopback());
//! let report = server.stop();
//! assert_eq!(report.requests, 0);
//! ```

//! ## Layout
//! No module cycles: each line depends only on the lines above it.
//! - `config`, `http`, `params`, `report`, `clock`, `limits`: plain data and
//!   parsers;
//! - `ws::frame`: RFC 6455 on the server side (handshake, frames);
//! - `engine`: the venue state with no venue's rules (`book` orders and decimals,
//!   `hub` stream subscribers, `state` limits, bans, registry, faults, report);
//! - `profiles`: one module per venue (`binance/`, `bybit`, `okx`), each adding
//!   its admit and execute steps to the state;
//! - `dispatch`: picks the profile for each request;
//! - `server`: the I/O shell (listener, `http_conn`, `ws_api_conn`,
//!   `bybit_private_conn`, `deribit_ws_conn`, `shared`).

mod clock;
pub mod config;
mod dispatch;
pub mod ed25519;
mod engine;
mod hashing;
pub mod http;
mod json_write;
mod limits;
pub mod params;
mod profiles;
pub mod report;
pub mod sansio;
pub mod sansio_ws;
mod server;
mod ws;

pub use clock::VenueClock;
pub use config::{
    Account, BanPolicy, Config, ConfigError, Credits, Fault, FaultScope, Faults, Interval,
    LimitType, Profile, RateLimit, WsLimits, BINANCE_FUTURES_LIMITS, BINANCE_SPOT_LIMITS,
    BYBIT_CLOSED_KEPT, BYBIT_LIMITS, DEFAULT_API_KEY, DEFAULT_API_SECRET, DEFAULT_PASSPHRASE,
    ED25519_TEST_API_KEY, ED25519_TEST_PRIVATE_PEM, ED25519_TEST_PUBLIC_PEM, OKX_LIMITS,
};
pub use config::{Hyperliquid, HYPERLIQUID_LIMITS, HYPERLIQUID_TEST_ADDRESS, HYPERLIQUID_TEST_KEY};
pub use engine::switch::SwitchView;
pub use report::{
    BybitPrivateCounts, CreditUsage, DeribitWsCounts, FaultCounts, HlWsCounts, LimitUsage,
    OrderView, Report, WsCounts,
};
pub use server::{Server, StartError};
