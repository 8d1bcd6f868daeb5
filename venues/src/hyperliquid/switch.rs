//! `scheduleCancel`, Hyperliquid's dead man's switch, as a [`crate::switch::Switch`].

use super::{Action, Exchange, Signer};
use crate::adapt::{Error, Parts, Request};
use crate::endpoint::{Prepared, Symbol, Writer};
use crate::json::{self, Kind};
use crate::response::Response;
use arrayvec::ArrayVec;
use ergon_core::{BucketId, Part};

/// Hyperliquid's dead man's switch, the `scheduleCancel` action, as documented: a
/// `time` (UTC ms) at least 5 s ahead arms it, an action without `time` removes it,
/// and it may fire at most 10 times a day per account (counted from 00:00 UTC): a
/// gateway must never arm it and let it lapse in a loop. These are the venue's
/// figures; the endpoint (`impl Switch for Exchange`) takes timeouts from
/// [`SWITCH_MIN_TIMEOUT_MS`] only.
///
/// Source: <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/exchange-endpoint#schedule-cancel-dead-mans-switch>
/// (checked 2026-12-01).
pub const SWITCH_SPEC: crate::switch::SwitchSpec = crate::switch::SwitchSpec {
    min_timeout_ms: 5_000,
    max_timeout_ms: 86_400_000,
    default_timeout_ms: 60_000,
    refresh_div: 4,
    fires_per_day: Some(10),
    scope: crate::switch::Scope::Account,
    arms: crate::switch::Arms::Call,
};

/// The shortest timeout the endpoint takes: the venue's is 5 s, but
/// [`SWITCH_RESERVE_WEIGHT`](super::SWITCH_RESERVE_WEIGHT) pays for a refresh every 15 s, a quarter of 60 s.
pub const SWITCH_MIN_TIMEOUT_MS: u32 = 60_000;

/// The `scheduleCancel` action (see [`SWITCH_SPEC`]): `{"type":"scheduleCancel",
/// "time":T}` arms the switch to cancel every open order of the account at `T`
/// (UTC ms, at least 5 s ahead), the action without `time` removes it; signed like
/// every action. `T` is the action's nonce (its UTC ms) plus the timeout, so the
/// lead the venue checks is the timeout itself. The answer, `{"status":"ok",
/// "response":{"type":"default"}}`, says neither the time nor which of the two
/// was sent: the reader answers for the last switch action this endpoint wrote.
/// Each call is an action: weight 1 of the IP's minute, charged to the reserved
/// `switch` share, and one request of the address budget, which the adapter
/// counts when the answer comes like any action's (four a minute are 5,760 a
/// day of the 10,000 an address starts with, plus one per USDC traded). The
/// venue refuses to arm or disarm until the account has traded enough volume
/// (`Cannot set scheduled cancel time until enough volume traded. Required:
/// $1000000. ...`, an error the exchange-endpoint page does not list): read as
/// [`Refusal::NotAllowed`](crate::switch::Refusal::NotAllowed), like a spent
/// daily count.
///
/// Sources (checked 2026-12-01):
/// <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/exchange-endpoint#schedule-cancel-dead-mans-switch>,
/// <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/rate-limits-and-user-limits>.
impl<S: Signer> crate::switch::Switch for Exchange<S> {
    fn switch_spec(&self) -> crate::switch::SwitchSpec {
        crate::switch::SwitchSpec {
            min_timeout_ms: SWITCH_MIN_TIMEOUT_MS,
            ..SWITCH_SPEC
        }
    }

    fn arm<'p>(
        &mut self,
        out: &'p mut Prepared,
        _symbol: Symbol<'_>,
        timeout_ms: u32,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let w = Writer::start(out);
        if !self.switch_spec().takes(timeout_ms) {
            return Err(Error::BadArgument("time (60 s to 1 day ahead)"));
        }
        self.schedule_cancel(w, Some(timeout_ms), now)
    }

    fn disarm<'p>(
        &mut self,
        out: &'p mut Prepared,
        _symbol: Symbol<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let w = Writer::start(out);
        self.schedule_cancel(w, None, now)
    }

    fn read_switch(&self, answer: &Response<'_>) -> crate::switch::SwitchAnswer {
        use crate::switch::{Refusal, SwitchAnswer};
        let Ok(v) = json::parse(answer.body) else {
            return SwitchAnswer::Unknown;
        };
        if !(200..=299).contains(&answer.status) {
            return SwitchAnswer::Unknown;
        }
        let Ok(Some(status)) = v.get("status") else {
            return SwitchAnswer::Unknown;
        };
        if status.str_eq("ok").unwrap_or(false) {
            return match self.switch_written {
                Some(Some(t)) => SwitchAnswer::Armed {
                    trigger_utc_ms: i64::try_from(t).ok(),
                },
                Some(None) => SwitchAnswer::Disarmed,
                None => SwitchAnswer::Unknown,
            };
        }
        if !status.str_eq("err").unwrap_or(false) {
            return SwitchAnswer::Unknown;
        }
        let Ok(Some(e)) = v.get("response") else {
            return SwitchAnswer::Unknown;
        };
        let says = |t| e.str_contains(t).unwrap_or(false);
        if says("Too many cumulative requests") || says("nonce") || says("Nonce") {
            // The address budget, the nonce: nothing about the switch.
            SwitchAnswer::Unknown
        } else if says("enough volume") || says("Too many") || says("too many") {
            SwitchAnswer::Refused(Refusal::NotAllowed)
        } else if says("at least 5 seconds") || says("too early") || says("in the past") {
            SwitchAnswer::Refused(Refusal::Timeout)
        } else if e.kind() == Kind::String {
            SwitchAnswer::Refused(Refusal::Other)
        } else {
            SwitchAnswer::Unknown
        }
    }

    fn switch_guards(&self) -> ArrayVec<BucketId, { crate::switch::MAX_GUARDS }> {
        // The IP gate, the minute weight and the short window the venue counts
        // the action on (a 429 holds the short one), and the address gate (held
        // once the address budget is spent).
        let mut g = ArrayVec::new();
        g.push(self.venue.ip);
        g.push(self.venue.weight);
        g.push(self.venue.burst);
        g.push(self.venue.address_gate);
        g
    }
}

impl<S: Signer> Exchange<S> {
    /// A `scheduleCancel` to fire `timeout_ms` after its nonce, or without `time`.
    fn schedule_cancel<'p>(
        &mut self,
        mut w: Writer<'p>,
        timeout_ms: Option<u32>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let nonce = self.nonce(now);
        let time = timeout_ms.map(|t| nonce.saturating_add(u64::from(t)));
        let at = Self::start_exchange(&mut w);
        w.s("{\"type\":\"scheduleCancel\"");
        if let Some(t) = time {
            w.s(",\"time\":");
            w.int(i64::try_from(t).unwrap_or(i64::MAX));
        }
        w.s("}");
        let mut parts = Parts::new();
        parts.push(Part::new(self.venue.ip, 0));
        parts.push(Part::new(self.venue.switch, 1));
        parts.push(Part::new(self.venue.address_gate, 0));
        // An action's kind: its answer is counted against the address.
        let p = self.signed_exchange(
            w,
            at,
            Action::ScheduleCancel(time),
            Request::Cancel,
            nonce,
            Some(parts),
        )?;
        self.switch_written = Some(time);
        Ok(p)
    }
}
