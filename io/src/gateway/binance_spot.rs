//! Binance Spot's typed endpoints for the gateway: signed orders, cancels,
//! cancel-replaces, reads, the query by client order id and its reader.
//!
//! Stands in for the venues crate's endpoint contract until it lands. Every
//! request is written into the caller's [`Prepared`] without allocating once its
//! buffers have grown (HMAC-SHA256 over the query, hex into the target).

use core::fmt::Write as _;

use ergon_core::Builder;
use ergon_venues::adapt::{self, Clock, Parts, Request as Kind, Venue};
use ergon_venues::binance_spot::{BinanceSpot, Msg};
use ergon_venues::json;
use ergon_venues::response::Response;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::endpoints::Endpoints;
use super::events::{Lookup, OrderState};
use super::prepared::Prepared;

/// A buy or a sell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Buy.
    Buy,
    /// Sell.
    Sell,
}

impl Side {
    fn as_str(self) -> &'static str {
        match self {
            Side::Buy => "BUY",
            Side::Sell => "SELL",
        }
    }
}

/// A decimal written without allocating: `units` scaled by 10^`decimals`
/// (`Px(5_000_123, 2)` is `50001.23`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Px(pub i64, pub u8);

impl core::fmt::Display for Px {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let scale = 10i64.pow(u32::from(self.1.min(18)));
        let sign = if self.0 < 0 { "-" } else { "" };
        let (int, frac) = (
            self.0.unsigned_abs() / scale as u64,
            self.0.unsigned_abs() % scale as u64,
        );
        if self.1 == 0 {
            write!(f, "{sign}{int}")
        } else {
            write!(f, "{sign}{int}.{frac:0w$}", w = usize::from(self.1))
        }
    }
}

/// One Binance Spot account on one symbol: the adapter, the key and its signer.
#[derive(Clone)]
pub struct BinanceSpotAccount {
    /// The adapter (limits, verdicts).
    pub adapter: BinanceSpot,
    /// The symbol traded (`BTCUSDT`).
    pub symbol: String,
    /// recvWindow of signed requests: their deadline is their timestamp plus this.
    pub recv_window_ms: i64,
    key: String,
    mac: Hmac<Sha256>,
}

impl core::fmt::Debug for BinanceSpotAccount {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BinanceSpotAccount")
            .field("symbol", &self.symbol)
            .field("recv_window_ms", &self.recv_window_ms)
            .finish_non_exhaustive()
    }
}

impl BinanceSpotAccount {
    /// Declares the buckets of the `exchangeInfo` body (see
    /// [`BinanceSpot::from_exchange_info`]) for an account with this key and secret.
    pub fn declare(
        exchange_info: &[u8],
        builder: &mut Builder,
        clock: Clock,
        guard_ns: i64,
        key: &str,
        secret: &str,
        symbol: &str,
    ) -> Result<Self, String> {
        let adapter = BinanceSpot::from_exchange_info(exchange_info, builder, clock, guard_ns)
            .map_err(|e| format!("exchangeInfo: {e}"))?;
        let mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes())
            .map_err(|_| "the API secret cannot key HMAC-SHA256".to_string())?;
        Ok(BinanceSpotAccount {
            adapter,
            symbol: symbol.into(),
            recv_window_ms: 2_000,
            key: key.into(),
            mac,
        })
    }

    /// Writes a signed request: `path?params&recvWindow=..&timestamp=..&signature=..`.
    fn signed(
        &self,
        out: &mut Prepared,
        kind: Kind<'static>,
        method: &'static str,
        path: &str,
        now_ns: i64,
        params: core::fmt::Arguments<'_>,
    ) {
        out.clear();
        out.kind = kind;
        out.method = method;
        let ts = self.adapter.limits.clock.utc_ms(now_ns);
        out.target.push_str(path);
        out.target.push('?');
        let from = out.target.len();
        let _ = write!(
            out.target,
            "{params}&recvWindow={}&timestamp={ts}",
            self.recv_window_ms
        );
        let mut mac = self.mac.clone();
        mac.update(&out.target.as_bytes()[from..]);
        out.target.push_str("&signature=");
        for b in mac.finalize().into_bytes() {
            let _ = write!(out.target, "{b:02x}");
        }
        out.header("X-MBX-APIKEY", &self.key);
        out.deadline_ns = self.adapter.deadline_ns(ts, self.recv_window_ms);
    }

    /// A GTC limit order with client order id `cid` (acknowledged on receipt).
    pub fn limit(
        &self,
        out: &mut Prepared,
        side: Side,
        qty: Px,
        price: Px,
        cid: &str,
        now_ns: i64,
    ) {
        self.signed(out, Kind::Order, "POST", "/api/v3/order", now_ns, format_args!(
            "symbol={}&side={}&type=LIMIT&timeInForce=GTC&quantity={qty}&price={price}&newClientOrderId={cid}&newOrderRespType=ACK",
            self.symbol, side.as_str()));
        out.client_order_id.push_str(cid);
    }

    /// A market order (a protective close) with client order id `cid`.
    pub fn market(&self, out: &mut Prepared, side: Side, qty: Px, cid: &str, now_ns: i64) {
        self.signed(out, Kind::Order, "POST", "/api/v3/order", now_ns, format_args!(
            "symbol={}&side={}&type=MARKET&quantity={qty}&newClientOrderId={cid}&newOrderRespType=ACK",
            self.symbol, side.as_str()));
        out.client_order_id.push_str(cid);
    }

    /// Cancels `old` and places a GTC limit order `cid` in one request; the new
    /// order is placed only if the cancel succeeded (`STOP_ON_FAILURE`).
    #[allow(clippy::too_many_arguments)]
    pub fn replace(
        &self,
        out: &mut Prepared,
        side: Side,
        qty: Px,
        price: Px,
        old: &str,
        cid: &str,
        now_ns: i64,
    ) {
        self.signed(out, Kind::CancelReplace, "POST", "/api/v3/order/cancelReplace", now_ns, format_args!(
            "symbol={}&side={}&type=LIMIT&timeInForce=GTC&quantity={qty}&price={price}&cancelReplaceMode=STOP_ON_FAILURE&cancelOrigClientOrderId={old}&newClientOrderId={cid}&newOrderRespType=ACK",
            self.symbol, side.as_str()));
        out.client_order_id.push_str(cid);
    }

    /// Cancels the order `cid`.
    pub fn cancel(&self, out: &mut Prepared, cid: &str, now_ns: i64) {
        self.signed(
            out,
            Kind::Cancel,
            "DELETE",
            "/api/v3/order",
            now_ns,
            format_args!("symbol={}&origClientOrderId={cid}", self.symbol),
        );
        out.client_order_id.push_str(cid);
    }

    /// The order book, `limit` levels a side (weight 5 up to 100 levels).
    pub fn depth(&self, out: &mut Prepared, limit: u32, now_ns: i64) {
        out.clear();
        out.kind = Kind::Read(match limit {
            0..=100 => 5,
            101..=500 => 25,
            501..=1000 => 50,
            _ => 250,
        });
        let _ = write!(
            out.target,
            "/api/v3/depth?symbol={}&limit={limit}",
            self.symbol
        );
        out.deadline_ns = now_ns + 2_000_000_000;
    }

    /// The account's balances (weight 20).
    pub fn account(&self, out: &mut Prepared, now_ns: i64) {
        self.signed(
            out,
            Kind::Read(20),
            "GET",
            "/api/v3/account",
            now_ns,
            format_args!("omitZeroBalances=true"),
        );
    }

    /// The symbol's open orders (weight 6).
    pub fn open_orders(&self, out: &mut Prepared, now_ns: i64) {
        self.signed(
            out,
            Kind::Read(6),
            "GET",
            "/api/v3/openOrders",
            now_ns,
            format_args!("symbol={}", self.symbol),
        );
    }

    /// Calls `f` with the client order id of each order in an open-orders answer.
    pub fn open_ids(&self, body: &[u8], mut f: impl FnMut(&[u8])) {
        let Ok(items) = json::parse(body).and_then(|v| v.items()) else {
            return;
        };
        for o in items {
            if let Ok(Some(c)) = o.get("clientOrderId") {
                let raw = c.raw();
                if raw.len() >= 2 {
                    f(&raw[1..raw.len() - 1]);
                }
            }
        }
    }
}

impl Venue for BinanceSpotAccount {
    fn parts(&self, request: Kind<'_>) -> Result<Parts, adapt::Error> {
        self.adapter.parts(request)
    }

    fn on_response(
        &mut self,
        request: Kind<'_>,
        response: &Response<'_>,
        budget: &mut ergon_core::Budget,
        now_ns: i64,
    ) -> Result<ergon_core::Verdict, adapt::Error> {
        self.adapter.on_response(request, response, budget, now_ns)
    }
}

impl Endpoints for BinanceSpotAccount {
    fn time_path() -> &'static str {
        "/api/v3/time"
    }

    fn read_time(body: &[u8]) -> Option<i64> {
        json::parse(body)
            .ok()?
            .get("serverTime")
            .ok()??
            .as_i64()
            .ok()
    }

    fn limits_path() -> Option<&'static str> {
        Some("/api/v3/exchangeInfo")
    }

    fn query_order(&self, cid: &str, now_ns: i64, out: &mut Prepared) -> bool {
        if cid.is_empty()
            || !cid
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.:/".contains(&b))
        {
            return false;
        }
        self.signed(
            out,
            Kind::Read(4),
            "GET",
            "/api/v3/order",
            now_ns,
            format_args!("symbol={}&origClientOrderId={cid}", self.symbol),
        );
        true
    }

    fn read_order(&self, r: &Response<'_>) -> Lookup {
        let m = Msg::read(r.body);
        // -2013: "Order does not exist."
        if m.code == Some(-2013) {
            return Lookup::NotFound;
        }
        if r.status != 200 {
            return Lookup::Unknown;
        }
        let Some(status) = m.json.and_then(|v| v.get("status").ok().flatten()) else {
            return Lookup::Unknown;
        };
        let is = |s: &str| status.str_eq(s).unwrap_or(false);
        if is("NEW") || is("PARTIALLY_FILLED") || is("PENDING_NEW") {
            Lookup::Found(OrderState::Open)
        } else if is("FILLED") {
            Lookup::Found(OrderState::Filled)
        } else {
            Lookup::Found(OrderState::Ended)
        }
    }

    fn set_clock(&mut self, clock: Clock) {
        self.adapter.limits.clock = clock;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn px_writes_decimals() {
        assert_eq!(Px(5_000_123, 2).to_string(), "50001.23");
        assert_eq!(Px(10, 3).to_string(), "0.010");
        assert_eq!(Px(-5, 1).to_string(), "-0.5");
        assert_eq!(Px(7, 0).to_string(), "7");
    }
}
