//! The spot REST dead man's switch (CancelAllOrdersAfter).

use arrayvec::ArrayVec;

use crate::adapt::{Error, Parts, Request};
use crate::endpoint::{Method, Prepared, Symbol, Writer};
use crate::json::{self};
use crate::response::Response;
use ergon_core::{BucketId, Part, Verdict};

use super::errors::{error_text, error_verdict, Said};
use super::{KrakenSpot, ERROR_BYTES};

/// `POST /0/private/CancelAllOrdersAfter` (the spot REST dead man's switch):
/// `timeout` in seconds starts a countdown that cancels *all* the account's
/// orders when it runs out; a new call pushes it back; `timeout=0` disarms it;
/// once fired it stays off until the next non-zero timeout. The answer's
/// `result.currentTime` and `result.triggerTime` are RFC 3339 (`triggerTime` is
/// `"0"` when disarmed, as the WebSocket v1 page shows). The venue recommends a
/// call every 15 to 30 s with a 60 s timeout, and disarming before the trading
/// engine's scheduled maintenance (an armed timer cancels everything when the
/// engine comes back). It is a private call like any other: +1 on the REST call
/// counter (only AddOrder and CancelOrder are on the trading counter), which the
/// adapter carves the switch's share out of (see [`KrakenSpot::new`]): one call
/// every [`super::SWITCH_EVERY_NS`], so the shortest timeout taken is 60 s (refreshed
/// every quarter of it). The longest is 86,399 s: the WebSocket v2 page says
/// "less than 86400 seconds"; the REST page states no bound.
///
/// Sources (checked 2026-12-01):
/// <https://docs.kraken.com/api-reference/trading/cancel-all-orders-after-x>,
/// <https://docs.kraken.com/api/docs/websocket-v1/cancelallordersafter> (the
/// disarmed answer), <https://docs.kraken.com/api/docs/websocket-v2/cancel_after>
/// (the range), <https://docs.kraken.com/exchange/guides/rest/ratelimits> (the
/// call counter), <https://support.kraken.com/hc/en-us/articles/360001491786-API-error-messages>
/// (`EGeneral:Invalid arguments`, `EGeneral:Permission denied`, `EAPI:Invalid key`).
impl crate::switch::Switch for KrakenSpot {
    fn switch_spec(&self) -> crate::switch::SwitchSpec {
        crate::switch::SwitchSpec {
            min_timeout_ms: 60_000,
            max_timeout_ms: 86_399_000,
            default_timeout_ms: 60_000,
            refresh_div: 4,
            fires_per_day: None,
            scope: crate::switch::Scope::Account,
            arms: crate::switch::Arms::Call,
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
        let Some(secs) = self.switch_spec().whole_seconds(timeout_ms) else {
            return Err(Error::BadArgument("timeout (60..=86399 s, whole seconds)"));
        };
        self.cancel_all_after(w, secs, now)
    }

    fn disarm<'p>(
        &mut self,
        out: &'p mut Prepared,
        _symbol: Symbol<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let w = Writer::start(out);
        self.cancel_all_after(w, 0, now)
    }

    fn read_switch(&self, answer: &Response<'_>) -> crate::switch::SwitchAnswer {
        use crate::switch::{Refusal, SwitchAnswer};
        let Ok(v) = json::parse(answer.body) else {
            return SwitchAnswer::Unknown;
        };
        match Self::first_error(&v) {
            // The body decides first, whatever the status.
            Ok(Some(e)) => {
                let mut buf = [0u8; ERROR_BYTES];
                let Some((text, cut)) = error_text(&e, &mut buf) else {
                    return SwitchAnswer::Unknown;
                };
                let is = |p: &[u8]| text.starts_with(p);
                if is(b"EGeneral:Invalid arguments") {
                    SwitchAnswer::Refused(Refusal::Timeout)
                } else if is(b"EGeneral:Permission denied")
                    || is(b"EAPI:Invalid key")
                    || is(b"EAPI:Feature disabled")
                {
                    SwitchAnswer::Refused(Refusal::NotAllowed)
                } else {
                    match error_verdict(text, cut) {
                        // Throttles, lockouts, a busy engine, the nonce: the
                        // answer says nothing about the switch.
                        Said::Verdict(Verdict::Rejected) => SwitchAnswer::Refused(Refusal::Other),
                        _ => SwitchAnswer::Unknown,
                    }
                }
            }
            Ok(None) if (200..=299).contains(&answer.status) => {
                crate::switch::rfc3339_trigger(v.path("result.triggerTime").ok().flatten())
            }
            _ => SwitchAnswer::Unknown,
        }
    }

    fn switch_guards(&self) -> ArrayVec<BucketId, { crate::switch::MAX_GUARDS }> {
        // The venue counts the call on the key's call counter: a hold there (the
        // venue said it is full) stops the refresh too.
        let mut g = ArrayVec::new();
        g.push(self.ip);
        g.push(self.api);
        g
    }
}

impl KrakenSpot {
    fn cancel_all_after<'p>(
        &mut self,
        mut w: Writer<'p>,
        seconds: u32,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let deadline = self.private(&mut w, "/0/private/CancelAllOrdersAfter", now, |w| {
            w.s("&timeout=");
            w.int(i64::from(seconds));
            Ok(())
        })?;
        let mut parts = Parts::new();
        parts.push(Part::new(self.ip, 0));
        parts.push(Part::new(self.switch, 1));
        // A private read's kind: a throttle of it holds the call counter.
        w.finish_with(parts, Request::Read(1), Method::Post, deadline)
    }
}
