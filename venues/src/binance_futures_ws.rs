//! Binance USD-M futures over the WebSocket API (`/ws-fapi/v1`): Spot's
//! [`binance_spot_ws::Session`] over the USD-M adapter ([`BinanceFutures`]), with
//! USD-M's methods, parameters and weights. The drive order, the table of
//! requests in flight, `session.logon` and the templates are Spot's (see
//! [`binance_spot_ws`]).
//!
//! Sources ("WebSocket API General Info",
//! <https://developers.binance.com/docs/derivatives/usds-margined-futures/websocket-api-general-info>,
//! checked 2026-12-06; the Trade methods' pages under
//! <https://developers.binance.com/docs/derivatives/usds-margined-futures/trade/websocket-api>,
//! the weights as Binance's generated USD-M connector documents them; the
//! emulator's model, `tools/venue-sim` `profiles/binance/ws_api.rs`, cites the
//! same): base endpoint `wss://ws-fapi.binance.com/ws-fapi/v1`; the signature
//! payload is every parameter but `signature`, sorted by name, as on Spot;
//! `session.logon`, `session.status`, `session.logout` as Spot's (weight 2, only
//! Ed25519 keys log on); the user data stream is not on this connection (a
//! listen key of its own).
//!
//! What each method charges is what its REST twin charges on the USD-M
//! adapter ([`Venue::parts`](crate::adapt::Venue::parts)):
//!
//! | method | REST twin | charge |
//! |---|---|---|
//! | `order.place` | `POST /fapi/v1/order` | weight 0, 1 on each ORDERS limit |
//! | `order.modify` | `PUT /fapi/v1/order` | weight 0, 1 on each ORDERS limit |
//! | `order.cancel` | `DELETE /fapi/v1/order` | weight 1 |
//! | `order.status` | `GET /fapi/v1/order` | weight 1 |
//! | `time` | `GET /fapi/v1/time` | weight 1 |
//! | `session.logon` / `status` / `logout` | — | weight 2 |
//!
//! Every other [`Call`] is [`Error::Unsupported`] here (the venue answers it
//! -1020). A post-only order is `LIMIT` with `timeInForce` `GTX`, and an order
//! may be `reduceOnly`, as over REST. Nothing here allocates.

use crate::adapt::{Error, Request};
use crate::binance_futures::BinanceFutures;
use crate::binance_spot::Limits;
use crate::binance_spot_ws::venue::sealed::Keyed;
use crate::binance_spot_ws::{self, Call, WsVenue};
use crate::endpoint::{ApiKey, Method, SignKey};

/// A USD-M futures WebSocket API session: [`binance_spot_ws::Session`]'s drive
/// order, USD-M's methods and charges.
pub type Session = binance_spot_ws::Session<BinanceFutures>;

/// Where USD-M futures serve the WebSocket API.
pub const PATH: &str = "/ws-fapi/v1";

impl Keyed for BinanceFutures {
    fn credentials(&self) -> (Option<ApiKey>, Option<SignKey>, i64) {
        BinanceFutures::credentials(self)
    }
}

/// USD-M's WebSocket API: see the module doc.
impl WsVenue for BinanceFutures {
    const ORDER_PATH: &'static str = "/fapi/v1/order";
    const POST_ONLY: (&'static str, Option<&'static str>) = ("LIMIT", Some("GTX"));
    const REDUCE_ONLY: bool = true;
    const STREAM: bool = false;

    fn limits(&self) -> &Limits {
        &self.limits
    }

    fn limits_mut(&mut self) -> &mut Limits {
        &mut self.limits
    }

    fn call_kind(call: &Call<'_>) -> Result<Request<'static>, Error> {
        Ok(match call {
            Call::Place(_) => Request::Order,
            Call::Modify(_) => Request::CancelReplace,
            Call::Cancel(_) => Request::Cancel,
            Call::Status(_) | Call::Time => Request::Read(1),
            Call::Logon | Call::SessionStatus | Call::Logout => Request::Read(2),
            _ => return Err(Error::Unsupported),
        })
    }

    fn replace_mode(&self) -> Option<&'static str> {
        None
    }

    fn rest_twin(m: Method, path: &str) -> Option<&'static str> {
        Some(match (m, path) {
            (Method::Post, "/fapi/v1/order") => "order.place",
            (Method::Put, "/fapi/v1/order") => "order.modify",
            (Method::Delete, "/fapi/v1/order") => "order.cancel",
            (Method::Get, "/fapi/v1/order") => "order.status",
            (Method::Get, "/fapi/v1/time") => "time",
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests;
