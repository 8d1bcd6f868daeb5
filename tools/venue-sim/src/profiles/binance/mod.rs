//! The Binance profiles (Spot and USD-M futures): what happens to one request, from
//! receipt to answer.
//!
//! The drive order, one request at a time under the server's lock:
//! 1. `Venue::admit_binance` (`admit`) at receipt: ban check (418), IP weight and raw-request counts
//!    in the fixed windows of the venue clock (429 -1003, and a ban for an IP that
//!    keeps sending inside a 429's Retry-After), routing, parameters, API key,
//!    signature and timestamp (-2014/-2015, -1022, -1021), order validation, the
//!    account's order counts (429 -1015), then the fault draw.
//! 2. `Venue::execute_binance` (`execute`) runs an admitted request on the book and the order
//!    registry and builds the documented response body.
//!
//! Sources (Binance Spot REST documentation):
//! - limits, usage headers, 429/418 and Retry-After, bans "from 2 minutes to 3 days":
//!   <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/limits>
//! - error codes (-1003, -1006, -1007, -1015, -1021, -1022, -2010, -2011, -2013...):
//!   <https://developers.binance.com/docs/binance-spot-api-docs/errors>
//! - signing (`totalParams` = query string + body, `X-MBX-APIKEY`), timing security
//!   (`timestamp < serverTime + 1000` and `serverTime - timestamp <= recvWindow`,
//!   recvWindow default 5000, at most 60000):
//!   <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/endpoint-security-type>
//! - HTTP return codes ("5XX ... the execution status is UNKNOWN"), parameters in
//!   query and body, query string wins, endpoint weights and response shapes:
//!   <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/public-rest-api-for-binance-2024-10-17>
//!   and <https://raw.githubusercontent.com/binance/binance-spot-api-docs/master/rest-api.md>
//! - the unfilled order count (successful placements count, a first fill takes one
//!   off): <https://developers.binance.com/docs/binance-spot-api-docs/faqs/order_count_decrement>
//!
//! USD-M futures (`/fapi/v1`, account `/fapi/v2` or `/fapi/v3`; modify with `PUT
//! /fapi/v1/order`; no cancel-replace; every order request counts, fills never
//! decrement; the 503 texts that mean "unknown" and "failed"):
//! <https://developers.binance.com/docs/derivatives/usds-margined-futures/general-info>,
//! <https://developers.binance.com/docs/derivatives/usds-margined-futures/error-code>.
//!
//! Simplifications, each visible in responses: one symbol; orders never match each
//! other (LIMIT orders rest as NEW, MARKET orders fill at the synthetic mid);
//! balances are fixed. These modules never touch a socket or read a clock.
//!
//! Layout: `endpoint` (routes and weights), `request` (parameters into an
//! operation), `admit` (step 1), `execute` (step 2), `answers` (response bodies), `market`
//! (market data and account history),
//! `sapi` (the wallet's and margin's answers a client asks for at start),
//! `user_stream` (the upgrade's connect limit and `executionReport`), `ws_api` (the WebSocket API:
//! requests in, answers out, subscriptions).

pub(crate) mod admit;
pub(crate) mod answers;
pub(crate) mod endpoint;
pub(crate) mod execute;
pub(crate) mod market;
pub(crate) mod request;
pub(crate) mod sapi;
pub(crate) mod user_stream;
pub(crate) mod ws_api;
