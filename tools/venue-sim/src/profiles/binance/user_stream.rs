//! Binance Spot's user data stream on the venue side: what every WebSocket
//! upgrade passes at receipt (ban, connect limit) and the `executionReport`
//! pushed for each order change to the WebSocket API's subscriptions
//! (`crate::profiles::binance::ws_api` has the rules and sources).

use std::net::IpAddr;

use std::io::Write;

use crate::engine::book::{quote, OrdType, Order, Status};
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
        let ev = execution_report(
            o,
            &self.cfg.symbol,
            (exec, cid, orig),
            (last_e8, trade),
            now,
            self.report.ws.events,
        );
        let account = o.account;
        self.report.ws.events += self.hub.publish(account, &ev);
    }
}

/// An `executionReport` of order `o` (`exec`, the client id it is reported
/// under, the original one; the last fill and trade id), written field by field
/// in the venue's order: the same text `serde_json`'s `json!` of its fields
/// printed (the test below holds the two together), without building a map.
fn execution_report(
    o: &Order,
    symbol: &str,
    (exec, cid, orig): (&str, &str, &str),
    (last_e8, trade): (u64, i64),
    now: i64,
    events: u64,
) -> String {
    let price = if o.kind == OrdType::Market {
        0
    } else {
        o.price_e8
    };
    let last_price = if last_e8 > 0 { o.price_e8 } else { 0 };
    let mut w = Vec::with_capacity(768);
    // Writes into a Vec cannot fail; strings are escaped as serde_json does.
    let s = |w: &mut Vec<u8>, k: &str, v: &str| {
        let _ = write!(w, "\"{k}\":");
        let _ = serde_json::to_writer(&mut *w, v);
        w.push(b',');
    };
    let n = |w: &mut Vec<u8>, k: &str, v: &dyn std::fmt::Display| {
        let _ = write!(w, "\"{k}\":{v},");
    };
    let e8 = |w: &mut Vec<u8>, k: &str, v: u64| {
        let _ = write!(w, "\"{k}\":\"{}.{:08}\",", v / 100_000_000, v % 100_000_000);
    };
    w.push(b'{');
    s(&mut w, "e", "executionReport");
    n(&mut w, "E", &now);
    s(&mut w, "s", symbol);
    s(&mut w, "c", cid);
    s(&mut w, "S", o.side.name());
    s(&mut w, "o", o.kind.name());
    s(&mut w, "f", o.tif);
    e8(&mut w, "q", o.qty_e8);
    e8(&mut w, "p", price);
    e8(&mut w, "P", 0);
    e8(&mut w, "F", 0);
    n(&mut w, "g", &-1);
    s(&mut w, "C", orig);
    s(&mut w, "x", exec);
    s(&mut w, "X", o.status.name());
    s(&mut w, "r", "NONE");
    n(&mut w, "i", &o.order_id);
    e8(&mut w, "l", last_e8);
    e8(&mut w, "z", o.executed_e8);
    e8(&mut w, "L", last_price);
    e8(&mut w, "n", 0);
    n(&mut w, "N", &"null");
    n(&mut w, "T", &now);
    n(&mut w, "t", &trade);
    n(&mut w, "I", &events);
    n(&mut w, "w", &(o.status == Status::New));
    n(&mut w, "m", &false);
    n(&mut w, "M", &(trade >= 0));
    n(&mut w, "O", &o.time);
    e8(&mut w, "Z", quote(o.price_e8, o.executed_e8));
    e8(&mut w, "Y", quote(last_price, last_e8));
    e8(&mut w, "Q", 0);
    n(&mut w, "W", &o.time);
    s(&mut w, "V", "EXPIRE_MAKER");
    // The last field's comma closes the object.
    if let Some(last) = w.last_mut() {
        *last = b'}';
    }
    String::from_utf8(w).expect("JSON written from UTF-8 strings")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::execution_report;
    use crate::engine::book::{fmt_e8, quote, OrdType, Order, Side, Status};

    /// The report as the venue built it before (a `json!` map of its fields,
    /// printed): the written one must be the same text, byte for byte.
    #[allow(clippy::too_many_arguments)]
    fn by_map(
        o: &Order,
        symbol: &str,
        exec: &str,
        cid: &str,
        orig: &str,
        last_e8: u64,
        trade: i64,
        now: i64,
        events: u64,
    ) -> String {
        let price = if o.kind == OrdType::Market {
            0
        } else {
            o.price_e8
        };
        let last_price = if last_e8 > 0 { o.price_e8 } else { 0 };
        json!({
            "e": "executionReport", "E": now, "s": symbol, "c": cid,
            "S": o.side.name(), "o": o.kind.name(), "f": o.tif,
            "q": fmt_e8(o.qty_e8), "p": fmt_e8(price), "P": fmt_e8(0), "F": fmt_e8(0),
            "g": -1, "C": orig, "x": exec, "X": o.status.name(), "r": "NONE",
            "i": o.order_id, "l": fmt_e8(last_e8), "z": fmt_e8(o.executed_e8),
            "L": fmt_e8(last_price), "n": fmt_e8(0), "N": null, "T": now, "t": trade,
            "I": events, "w": o.status == Status::New, "m": false, "M": trade >= 0,
            "O": o.time, "Z": fmt_e8(quote(o.price_e8, o.executed_e8)),
            "Y": fmt_e8(quote(last_price, last_e8)), "Q": fmt_e8(0), "W": o.time,
            "V": "EXPIRE_MAKER",
        })
        .to_string()
    }

    #[test]
    fn a_written_report_is_the_maps_text() {
        let mut o = Order {
            order_id: 12_345,
            account: 0,
            client_id: "x-1".into(),
            side: Side::Buy,
            kind: OrdType::Limit,
            tif: "GTC",
            price_e8: 3_000_012_345_678_901,
            qty_e8: 1_000_000,
            executed_e8: 0,
            status: Status::New,
            time: 1_700_000_000_123,
            update_time: 1_700_000_000_123,
            conn: None,
        };
        let cases = [
            ("NEW", "x-1", "", 0, -1),
            ("CANCELED", "c\"q\\\u{1}\u{e9}", "x-1", 0, -1),
            ("TRADE", "x-1", "", 1_000_000, 7),
        ];
        for (k, (exec, cid, orig, last, trade)) in cases.into_iter().enumerate() {
            if k == 1 {
                o.status = Status::Canceled;
                o.kind = OrdType::Market;
            }
            if k == 2 {
                (o.status, o.kind, o.executed_e8, o.side) =
                    (Status::Filled, OrdType::Limit, 1_000_000, Side::Sell);
            }
            let now = 1_700_000_001_000 + k as i64;
            assert_eq!(
                execution_report(&o, "BTCUSDT", (exec, cid, orig), (last, trade), now, 9),
                by_map(&o, "BTCUSDT", exec, cid, orig, last, trade, now, 9),
                "case {k}"
            );
        }
    }
}
