//! The venue's dead man's switch (cancel-on-disconnect): a countdown at the venue
//! that cancels every open order of the scope (a symbol, or the account) when it
//! runs out, so quotes do not outlive the process that placed them, nor a hold that
//! blocks every cancel.
//!
//! An adapter that has one implements [`Switch`]: typed endpoints to arm it with a
//! timeout, refresh it (the same call again: the venue restarts the countdown) and
//! disarm it, each written into a [`Prepared`] like every other endpoint (parts,
//! signature, deadline), and [`Switch::read_switch`], which reads the answer as
//! [`SwitchAnswer`]: armed (until when, where the venue says), disarmed, refused
//! and why, or unknown.
//!
//! **The reserved share.** Each adapter declares the switch its own bucket
//! (`switch` in the budget), sized to the venue's own limit for the call or, where
//! the call costs weight in a shared limit (Binance USD-M), carved out of that
//! limit: the shared limit is declared smaller by the reserve. No strategy request
//! charges the `switch` bucket, whatever its class, so a strategy that floods the
//! budget (even with [`Class::Urgent`](ergon_core::Class::Urgent), which may use a
//! whole limit) cannot take the refresh's room. A class above Urgent would have
//! done the same inside one bucket, but would change what every class means in
//! ergon-core for one caller; a partition needs no change there. What the reserve
//! cannot buy is sending through a hold or a ban of the scope the venue counts the
//! call on: [`Switch::switch_guards`] names those buckets, and the caller does not
//! send while one is held or halted (the venue would refuse it, and Binance turns
//! repeated 429s into a ban).
//!
//! Venues without a switch (Binance Spot, Coinbase Exchange) do not implement the
//! trait: there is nothing to pretend with.
//!
//! Nothing here reads a clock; reading an answer never allocates.

use arrayvec::ArrayVec;
use ergon_core::BucketId;

use crate::adapt::Error;
use crate::endpoint::{Prepared, Symbol};
use crate::json;
use crate::response::Response;

/// Most buckets [`Switch::switch_guards`] names.
pub const MAX_GUARDS: usize = 8;

/// What scope a switch cancels when it fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The open orders of one symbol (Binance USD-M: one countdown per symbol).
    Symbol,
    /// Every open order of the account (OKX without `tag`, Kraken, Hyperliquid).
    Account,
    /// The open orders created over the connection that enabled it (Deribit's
    /// cancel-on-disconnect in its `connection` scope).
    Connection,
}

/// A venue's switch as its documentation describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchSpec {
    /// The shortest timeout the venue takes, ms.
    pub min_timeout_ms: u32,
    /// The longest timeout the venue takes, ms.
    pub max_timeout_ms: u32,
    /// The timeout the venue recommends (and the gateway's default), ms.
    pub default_timeout_ms: u32,
    /// Refresh every `timeout / refresh_div` (Binance: 30 s of 120 s → 4; Kraken:
    /// 15 s of 60 s → 4).
    pub refresh_div: u32,
    /// How many times a day the switch may fire before the venue refuses it
    /// (Hyperliquid: 10), if limited.
    pub fires_per_day: Option<u32>,
    /// What it cancels.
    pub scope: Scope,
    /// What arms it.
    pub arms: Arms,
}

/// What arms a venue's switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arms {
    /// The call: a countdown that each refresh restarts (every venue but Bybit).
    Call,
    /// A connection of the venue's own: the call only sets the window, and the
    /// switch fires when every connection subscribed as the venue documents has
    /// closed (Bybit DCP: private WebSockets subscribed to `dcp`). A caller that
    /// holds no such connection has no switch, whatever the call answers.
    Connection,
    /// The order connection itself, enabled over it once after its
    /// authentication: no call to send, nothing to refresh but the connection's
    /// heartbeat; it fires when that connection closes, for the orders sent over
    /// it (Deribit's cancel-on-disconnect, [`crate::deribit::COD_SPEC`]).
    Lane,
}

impl SwitchSpec {
    /// Whether the venue takes `timeout_ms` (0, the disarm, is not a timeout).
    pub fn takes(&self, timeout_ms: u32) -> bool {
        (self.min_timeout_ms..=self.max_timeout_ms).contains(&timeout_ms)
    }

    /// `timeout_ms` in whole seconds, for a venue that takes seconds: `None`
    /// outside the range or off a whole second.
    pub fn whole_seconds(&self, timeout_ms: u32) -> Option<u32> {
        (self.takes(timeout_ms) && timeout_ms % 1000 == 0).then_some(timeout_ms / 1000)
    }

    /// How long after a refresh the next one is due, ns.
    pub fn refresh_every_ns(&self, timeout_ms: u32) -> i64 {
        i64::from(timeout_ms) * 1_000_000 / i64::from(self.refresh_div.max(1))
    }
}

/// Why the venue refused to arm, refresh or disarm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The timeout is outside the venue's range.
    Timeout,
    /// The account may not use the switch (not enabled for it, or the daily count
    /// of fires is spent).
    NotAllowed,
    /// The venue's code, when none of the above.
    Code(i64),
    /// None of the above, from a venue whose errors are words without a code
    /// (Kraken's error strings, Hyperliquid's messages).
    Other,
}

/// The venue's answer to an arm, refresh or disarm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SwitchAnswer {
    /// Armed. `trigger_utc_ms`: when it fires, where the answer says (OKX
    /// `triggerTime`); otherwise the caller takes the time it sent the request plus
    /// the timeout, which is never later than the venue's own countdown.
    Armed {
        /// When it fires, UTC ms, if the answer says.
        trigger_utc_ms: Option<i64>,
    },
    /// Disarmed: nothing fires.
    Disarmed,
    /// Refused: the previous state stands.
    Refused(Refusal),
    /// The venue took the setting, but nothing is armed by it: the switch fires
    /// only when a connection of its own closes (Bybit's DCP window: every
    /// private WebSocket subscribed to `dcp` must be gone). A caller that holds no
    /// such connection has no switch.
    Configured,
    /// The answer does not say (a throttle, a 5xx, a body that cannot be read):
    /// treat the switch as it was, and send again when the budget allows.
    Unknown,
}

/// The dead man's switch of one venue account: see the module doc.
///
/// Each method fills `out` and returns it; `Err` leaves it empty. A refresh is the
/// arm sent again (every venue here restarts the countdown on it).
pub trait Switch {
    /// The venue's switch: its range, recommended schedule and scope.
    fn switch_spec(&self) -> SwitchSpec;

    /// Arms the switch for `timeout_ms` (checked against [`Switch::switch_spec`]).
    /// `symbol` is the scope where the switch is per symbol, and ignored where it is
    /// account-wide.
    fn arm<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        timeout_ms: u32,
        now_ns: i64,
    ) -> Result<&'p Prepared, Error>;

    /// Restarts the countdown: the arm again.
    fn refresh<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        timeout_ms: u32,
        now_ns: i64,
    ) -> Result<&'p Prepared, Error> {
        self.arm(out, symbol, timeout_ms, now_ns)
    }

    /// Disarms the switch (on a clean stop, and before the venue's maintenance).
    fn disarm<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        now_ns: i64,
    ) -> Result<&'p Prepared, Error>;

    /// Reads the answer to [`Switch::arm`], [`Switch::refresh`] or
    /// [`Switch::disarm`]. Holds and bans in the answer are the adapter's
    /// `Venue::on_response`'s business, as for any request.
    fn read_switch(&self, answer: &Response<'_>) -> SwitchAnswer;

    /// The buckets whose hold or halt stops a refresh too: the scope the venue
    /// counts the call on (its IP gate, its shared weight limit), besides the
    /// `switch` bucket its parts charge.
    fn switch_guards(&self) -> ArrayVec<BucketId, MAX_GUARDS>;
}

/// Reads a `triggerTime` that is `"0"` (disarmed) or an RFC 3339 date-time
/// (armed until then), as both Kraken APIs write it; anything else says nothing.
pub(crate) fn rfc3339_trigger(t: Option<json::Value<'_>>) -> SwitchAnswer {
    let Some(t) = t else {
        return SwitchAnswer::Unknown;
    };
    if t.str_eq("0").unwrap_or(false) {
        return SwitchAnswer::Disarmed;
    }
    let mut buf = [0u8; 40];
    let ms = t
        .decode_str(&mut buf)
        .ok()
        .and_then(|text| crate::adapt::rfc3339_ms(text.as_bytes()));
    match ms {
        Some(ms) => SwitchAnswer::Armed {
            trigger_utc_ms: Some(ms),
        },
        None => SwitchAnswer::Unknown,
    }
}

/// The body of an answer whose errors are a numeric code in `field` (OKX `code`,
/// Bybit `retCode`), with the code, if the body is JSON and carries one.
pub(crate) fn coded<'a>(answer: &Response<'a>, field: &str) -> Option<(json::Value<'a>, i64)> {
    let v = json::parse(answer.body).ok()?;
    let code = v.get(field).ok().flatten()?.parse_i64().ok()?;
    Some((v, code))
}

/// Reads a JSON field that is a number or a string holding one.
pub(crate) fn int_field(v: json::Value<'_>, name: &str) -> Option<i64> {
    let f = v.get(name).ok().flatten()?;
    match f.kind() {
        json::Kind::Number => f.as_i64().ok(),
        json::Kind::String => f.parse_i64().ok(),
        _ => None,
    }
}
