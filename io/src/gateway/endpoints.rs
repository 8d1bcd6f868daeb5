//! What the gateway needs from a venue: the adapter ([`Venue`]: parts and verdicts)
//! plus the few typed endpoints it sends on its own (the venue's time, the query by
//! client order id) and their readers.
//!
//! The venues crate's endpoint contract implements this for each venue; until it
//! lands, [`super::binance_spot`] implements it for Binance Spot.

use ergon_venues::adapt::{Clock, Venue};
use ergon_venues::response::Response;

use super::events::Lookup;
use super::prepared::Prepared;

/// A venue account's endpoints, as the gateway uses them.
pub trait Endpoints: Venue {
    /// The unsigned path that answers the venue's time.
    fn time_path() -> &'static str;

    /// The venue's time (UTC ms) in that answer.
    fn read_time(body: &[u8]) -> Option<i64>;

    /// The unsigned path of the venue's published limits (Binance `exchangeInfo`),
    /// if it publishes them.
    fn limits_path() -> Option<&'static str>;

    /// Writes into `out` the query of the order whose client order id is `cid`,
    /// signed and stamped at `now_ns`. False if it cannot be written (a `cid` the
    /// venue would not accept).
    fn query_order(&self, cid: &str, now_ns: i64, out: &mut Prepared) -> bool;

    /// Reads the answer to such a query.
    fn read_order(&self, response: &Response<'_>) -> Lookup;

    /// Re-anchors the venue clock (after repeated clock skew) for every request
    /// stamped from now on.
    fn set_clock(&mut self, clock: Clock);
}
