//! The address budget: readings of `userRateLimit` and the forecast.

use super::{HOUR, INITIAL_REQUESTS};
use crate::adapt::Error;
use crate::json::{self, Kind, Value};

/// One reading of `userRateLimit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    /// When it was read, on the caller's clock.
    pub at_ns: i64,
    /// `floor(cumVlm)`, USDC.
    pub volume: u64,
    /// `nRequestsUsed`.
    pub used: u64,
    /// `nRequestsCap`.
    pub cap: u64,
    /// `nRequestsSurplus`: requests bought with `reserveRequestWeight`.
    pub surplus: u64,
}

impl Reading {
    /// Reads a `userRateLimit` answer.
    pub fn parse(body: &[u8], at_ns: i64) -> Result<Self, Error> {
        let v = json::parse(body)?;
        let field = |name: &'static str| -> Result<Value<'_>, Error> {
            v.get(name)?.ok_or(Error::BadField(name))
        };
        let int = |name: &'static str| -> Result<u64, Error> {
            field(name)?.as_u64().map_err(|_| Error::BadField(name))
        };
        Ok(Reading {
            at_ns,
            volume: whole_usdc(field("cumVlm")?).ok_or(Error::BadField("cumVlm"))?,
            used: int("nRequestsUsed")?,
            cap: int("nRequestsCap")?,
            surplus: int("nRequestsSurplus").or_else(|e| match v.get("nRequestsSurplus") {
                Ok(None) => Ok(0),
                _ => Err(e),
            })?,
        })
    }

    /// Requests the address may send in all: the cap, plus the surplus bought
    /// unless the cap already grew by it. The cap the volume earns is
    /// 10,000 + floor(volume); whatever the cap holds above that is a purchase
    /// already counted, and only the surplus beyond it is added.
    pub fn allowance(&self) -> u64 {
        let earned = INITIAL_REQUESTS.saturating_add(self.volume);
        let bought_in_cap = self.cap.saturating_sub(earned);
        self.cap
            .saturating_add(self.surplus.saturating_sub(bought_in_cap))
    }

    /// Requests left before the address is down to one per 10 s.
    pub fn remaining(&self) -> u64 {
        self.allowance().saturating_sub(self.used)
    }
}

/// `cumVlm` (a decimal string, or a number) rounded down to whole USDC.
fn whole_usdc(v: Value<'_>) -> Option<u64> {
    let mut buf = [0u8; 64];
    let text: &str = match v.kind() {
        Kind::String => v.decode_str(&mut buf).ok()?,
        Kind::Number => core::str::from_utf8(v.raw()).ok()?,
        _ => return None,
    };
    let whole = text.split('.').next()?;
    if whole.is_empty() || !whole.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let frac = text.get(whole.len() + 1..).unwrap_or("");
    if !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    whole.parse().ok()
}

/// The address budget: the last two readings of `userRateLimit`, and the actions
/// sent since the last one.
#[derive(Clone, Copy, Debug, Default)]
pub struct Address {
    last: Option<Reading>,
    before: Option<Reading>,
    sent_since: u64,
}

impl Address {
    /// Takes a new reading; actions counted locally before it are now in it.
    pub fn read(&mut self, reading: Reading) {
        self.before = self.last.replace(reading);
        self.sent_since = 0;
    }

    /// Requests left: the last reading's, less what was sent since. `None` before
    /// the first reading.
    pub fn remaining(&self) -> Option<u64> {
        self.last
            .map(|r| r.remaining().saturating_sub(self.sent_since))
    }

    /// Counts actions sent.
    pub fn sent(&mut self, n: u64) {
        self.sent_since = self.sent_since.saturating_add(n);
    }

    /// The last reading, if any.
    pub fn last(&self) -> Option<Reading> {
        self.last
    }

    /// Requests the budget loses an hour between the last two readings: used,
    /// less earned by volume and bought. `None` without two readings, or if
    /// the budget is not shrinking.
    pub fn requests_per_hour(&self) -> Option<f64> {
        let (a, b) = (self.before?, self.last?);
        let hours = (b.at_ns - a.at_ns) as f64 / HOUR as f64;
        if hours <= 0.0 {
            return None;
        }
        let burned = b.remaining() as f64 - a.remaining() as f64;
        let per_hour = -burned / hours;
        (per_hour > 0.0).then_some(per_hour)
    }

    /// Hours until the address budget runs out at the pace between the last two
    /// readings ([`Address::requests_per_hour`]). `None` without two readings,
    /// or if the budget is not shrinking.
    pub fn hours_to_exhaustion(&self) -> Option<f64> {
        let per_hour = self.requests_per_hour()?;
        Some(self.last?.remaining() as f64 / per_hour)
    }
}
