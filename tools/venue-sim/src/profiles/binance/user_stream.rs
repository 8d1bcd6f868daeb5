//! Binance Spot's user data stream on the venue side: a WebSocket upgrade at
//! receipt (ban, connect limit, handshake, listenKey) and the `executionReport`
//! pushed for each order change. The connection itself is served by
//! `crate::server::ws_conn`; the rules and sources are in that module's doc.

use std::net::IpAddr;
use std::sync::mpsc::Receiver;

use serde_json::json;

use crate::config::Profile;
use crate::engine::book::{fmt_e8, quote, OrdType, Status};
use crate::engine::hub::Attempt;
use crate::engine::state::Venue;
use crate::http::{Request, Response};
use crate::profiles::binance::admit::removed;
use crate::profiles::binance::request::err;
use crate::ws::frame;

impl Venue {
    /// A WebSocket upgrade at receipt: the ban, the per-IP connect limit, the
    /// handshake and the listenKey. On success: the accept key, the subscription
    /// and its events.
    pub(crate) fn admit_ws(
        &mut self,
        req: &Request,
        ip: IpAddr,
        now: i64,
    ) -> Result<(String, u64, Receiver<String>), Response> {
        self.now_hint = now;
        if self.cfg.profile != Profile::BinanceSpot {
            return Err(err(404, -1000, "No WebSocket endpoint in this profile."));
        }
        if !self.cfg.listen_key {
            return Err(removed());
        }
        self.admit_upgrade(ip, now)?;
        let accept = frame::check_handshake(req)?;
        let key = req.path.strip_prefix("/ws/").unwrap_or("");
        let Some(account) = self.hub.account_of(key) else {
            return Err(err(400, -1125, "This listenKey does not exist."));
        };
        let (sub, rx) = self.hub.subscribe(account, key);
        self.report.ws.connects += 1;
        Ok((accept, sub, rx))
    }

    /// What every WebSocket upgrade passes first: the ban and the per-IP connect
    /// limit (one record for the streams and the WebSocket API).
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
        if !self.spot() {
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
