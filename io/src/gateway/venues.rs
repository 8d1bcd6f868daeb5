//! [`Account`] for each venue the gateway drives.

use ergon_venues::adapt::Clock;
use ergon_venues::binance_spot::BinanceSpot;
use ergon_venues::json;

use super::endpoints::Account;

/// Calls `f` with the string field `key` of each object in the JSON array at
/// `path` of `body` (`""`: the body itself).
fn each_string(body: &[u8], path: &str, key: &str, f: &mut dyn FnMut(&[u8])) {
    let Ok(root) = json::parse(body) else {
        return;
    };
    let list = if path.is_empty() {
        Some(root)
    } else {
        root.path(path).ok().flatten()
    };
    let Some(Ok(items)) = list.map(|l| l.items()) else {
        return;
    };
    for o in items {
        if let Ok(Some(c)) = o.get(key) {
            let raw = c.raw();
            if raw.len() >= 2 && raw[0] == b'"' {
                f(&raw[1..raw.len() - 1]);
            }
        }
    }
}

impl Account for BinanceSpot {
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

    fn set_clock(&mut self, clock: Clock) {
        self.limits.clock = clock;
    }

    fn open_ids(&self, body: &[u8], f: &mut dyn FnMut(&[u8])) {
        each_string(body, "", "clientOrderId", f);
    }
}
