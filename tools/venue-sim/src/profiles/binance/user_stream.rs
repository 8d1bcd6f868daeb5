//! Binance Spot's user data stream on the venue side: what every WebSocket
//! upgrade passes at receipt (ban, connect limit) and the `executionReport`
//! pushed for each order change to the WebSocket API's subscriptions
//! (`crate::profiles::binance::ws_api` has the rules and sources).

use std::net::IpAddr;

use serde_json::json;

use crate::engine::book::{fmt_e8, quote, OrdType, Status};
use crate::engine::hub::Attempt;
use crate::engine::state::Venue;
use crate::http::Response;
use crate::profiles::binance::request::err;

impl Venue {
    /// What every WebSocket upgrade passes first: the ban and the per-IP connect
    /// limit (one record per IP).
    pub(crate) fn admit_upgrade(&mut self, ip: IpAddr, now: i64) -> Result<(), Response> {
        if self.ips.get(&ip).is_some_and(|s| s.banned_until > now) {
            self.report.ws.connects_refused += 1;
            return Err(self.banned(ip, now));
        }
        let lim = self.cfg.ws;
        match self.hub.attempt(ip, &lim, now) {
            Attempt::Ok => {}
            Attempt::Refused { retry_at } => {
                self.report.ws.connects_refused += 1;
                let mut r = err(
                    429,
                    -1003,
                    &format!(
                        "Too many connection attempts; current limit is {} connects per {} ms per IP.",
                        lim.connects, lim.connect_window_ms
                    ),
                );
                r.headers
                    .push(("Retry-After".into(), Self::retry_after(retry_at, now)));
                return Err(r);
            }
            Attempt::Ban => {
                self.report.ws.connects_refused += 1;
                let level = self.ips.get(&ip).map_or(0, |s| s.ban_level);
                let d = self.cfg.ban.duration_ms(level);
                self.ban(ip, d, now);
                return Err(self.banned(ip, now));
            }
        }
        Ok(())
    }

    /// Pushes an `executionReport` for order `idx` to the account's streams.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn emit(
        &mut self,
        idx: usize,
        exec: &str,
        cid: &str,
        orig: &str,
        last_e8: u64,
        trade: i64,
        now: i64,
    ) {
        // Nobody subscribed: nobody would take the event (publishing it would
        // count nothing), so it is not built.
        if !self.spot() || !self.hub.has_subscriber(self.orders[idx].account) {
            return;
        }
        let o = &self.orders[idx];
        let price = if o.kind == OrdType::Market {
            0
        } else {
            o.price_e8
        };
        let last_price = if last_e8 > 0 { o.price_e8 } else { 0 };
        let ev = json!({
            "e": "executionReport",
            "E": now,
            "s": self.cfg.symbol,
            "c": cid,
            "S": o.side.name(),
            "o": o.kind.name(),
            "f": o.tif,
            "q": fmt_e8(o.qty_e8),
            "p": fmt_e8(price),
            "P": fmt_e8(0),
            "F": fmt_e8(0),
            "g": -1,
            "C": orig,
            "x": exec,
            "X": o.status.name(),
            "r": "NONE",
            "i": o.order_id,
            "l": fmt_e8(last_e8),
            "z": fmt_e8(o.executed_e8),
            "L": fmt_e8(last_price),
            "n": fmt_e8(0),
            "N": null,
            "T": now,
            "t": trade,
            "I": self.report.ws.events,
            "w": o.status == Status::New,
            "m": false,
            "M": trade >= 0,
            "O": o.time,
            "Z": fmt_e8(quote(o.price_e8, o.executed_e8)),
            "Y": fmt_e8(quote(last_price, last_e8)),
            "Q": fmt_e8(0),
            "W": o.time,
            "V": "EXPIRE_MAKER",
        })
        .to_string();
        let account = o.account;
        self.report.ws.events += self.hub.publish(account, &ev);
    }
}
