//! What a Binance WebSocket API [`Session`](super::Session) takes from its venue's
//! REST adapter ([`WsVenue`]): the limits and clock, the key, what each method
//! charges there, how an order's parameters are named, and which REST request
//! each method twins. Binance Spot (`/ws-api/v3`) is one; USD-M futures
//! (`/ws-fapi/v1`, [`crate::binance_futures_ws`]) the other. Nothing here
//! allocates.

use crate::adapt::{Error, Request, Venue};
use crate::binance_spot::{BinanceSpot, Limits};
use crate::endpoint::{ApiKey, Method, OrderType, SignKey};

use super::Call;

/// The adapters' own parts a session reads and no caller should: kept out of
/// reach so that only this crate's adapters are [`WsVenue`]s.
pub(crate) mod sealed {
    use crate::endpoint::{ApiKey, SignKey};

    /// The REST adapter's key, signing key and receive window.
    pub trait Keyed {
        /// `(api key, signing key, recvWindow ms)` of the adapter's `with_auth`.
        fn credentials(&self) -> (Option<ApiKey>, Option<SignKey>, i64);
    }
}

/// A Binance product whose WebSocket API a [`Session`](super::Session) speaks:
/// see the module doc. Implemented by [`BinanceSpot`] and
/// [`BinanceFutures`](crate::binance_futures::BinanceFutures).
pub trait WsVenue: Venue + sealed::Keyed + Clone + core::fmt::Debug + Send + 'static {
    /// The REST path of a new order (`/api/v3/order`, `/fapi/v1/order`).
    const ORDER_PATH: &'static str;
    /// How a post-only order is written: its `type` and `timeInForce`.
    const POST_ONLY: (&'static str, Option<&'static str>);
    /// Whether an order may be `reduceOnly` (a product with positions).
    const REDUCE_ONLY: bool;
    /// Whether the user data stream is subscribed on this connection
    /// (`userDataStream.subscribe`); else it has a connection of its own.
    const STREAM: bool;

    /// The venue's limits and clock.
    fn limits(&self) -> &Limits;

    /// The same, to re-anchor the clock.
    fn limits_mut(&mut self) -> &mut Limits;

    /// What `call` charges here, as its REST twin does; [`Error::Unsupported`]
    /// for a method this venue's WebSocket API does not serve.
    fn call_kind(call: &Call<'_>) -> Result<Request<'static>, Error>;

    /// `cancelReplaceMode` of `order.cancelReplace`, where the venue has it.
    fn replace_mode(&self) -> Option<&'static str>;

    /// The WebSocket API method that twins the REST request `m path`, if any.
    fn rest_twin(m: Method, path: &str) -> Option<&'static str>;

    /// An order type as a REST new order writes it (`type`, `timeInForce`),
    /// if it is one of ours.
    fn order_type(order_type: &str, time_in_force: Option<&str>) -> Option<OrderType> {
        use crate::endpoint::TimeInForce;
        let post_only = (order_type, time_in_force) == Self::POST_ONLY;
        Some(match (order_type, time_in_force) {
            _ if post_only => OrderType::PostOnly,
            ("LIMIT", Some("GTC")) => OrderType::Limit(TimeInForce::Gtc),
            ("LIMIT", Some("IOC")) => OrderType::Limit(TimeInForce::Ioc),
            ("LIMIT", Some("FOK")) => OrderType::Limit(TimeInForce::Fok),
            ("MARKET", None) => OrderType::Market,
            _ => return None,
        })
    }
}

impl sealed::Keyed for BinanceSpot {
    fn credentials(&self) -> (Option<ApiKey>, Option<SignKey>, i64) {
        BinanceSpot::credentials(self)
    }
}

/// Spot's WebSocket API (`web-socket-api.md`, see [`super`]'s sources).
impl WsVenue for BinanceSpot {
    const ORDER_PATH: &'static str = "/api/v3/order";
    const POST_ONLY: (&'static str, Option<&'static str>) = ("LIMIT_MAKER", None);
    const REDUCE_ONLY: bool = false;
    const STREAM: bool = true;

    fn limits(&self) -> &Limits {
        &self.limits
    }

    fn limits_mut(&mut self) -> &mut Limits {
        &mut self.limits
    }

    /// [`Call::kind`]: Spot's weights; `order.modify` is USD-M's.
    fn call_kind(call: &Call<'_>) -> Result<Request<'static>, Error> {
        match call {
            Call::Modify(_) => Err(Error::Unsupported),
            c => Ok(c.kind()),
        }
    }

    fn replace_mode(&self) -> Option<&'static str> {
        Some(self.replace.mode.as_str())
    }

    fn rest_twin(m: Method, path: &str) -> Option<&'static str> {
        Some(match (m, path) {
            (Method::Post, "/api/v3/order") => "order.place",
            (Method::Delete, "/api/v3/order") => "order.cancel",
            (Method::Post, "/api/v3/order/cancelReplace") => "order.cancelReplace",
            (Method::Get, "/api/v3/order") => "order.status",
            (Method::Get, "/api/v3/openOrders") => "openOrders.status",
            (Method::Get, "/api/v3/account") => "account.status",
            (Method::Get, "/api/v3/time") => "time",
            _ => return None,
        })
    }
}
