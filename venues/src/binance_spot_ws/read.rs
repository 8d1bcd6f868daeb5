//! Reading the venue's frames on a [`Session`]: answers by the REST rules, their
//! `rateLimits`, and the user data stream's events. Nothing here allocates.

use arrayvec::ArrayString;
use ergon_core::{Budget, Verdict};

use super::{Answer, Execution, FrameError, Incoming, Session, WsVenue};
use crate::adapt::{self, Error};
use crate::binance_spot::{self, order_state, Counts};
use crate::endpoint::{json_text, ClientOrderId, Lookup, Placed};
use crate::json::{self, Kind, Value};
use crate::response::{Header, Response};

const SEC: i64 = 1_000_000_000;

fn interval_ns(word: &str) -> Option<i64> {
    Some(match word {
        "SECOND" => SEC,
        "MINUTE" => 60 * SEC,
        "HOUR" => 3600 * SEC,
        "DAY" => 86_400 * SEC,
        _ => return None,
    })
}

impl<V: WsVenue> Session<V> {
    /// Reads one text frame from the venue: an answer (its verdict by the REST
    /// rules, its holds and halts applied to `budget`, its `rateLimits` fed to
    /// [`Budget::observe_used`]) or a user data stream event. A frame that cannot be
    /// read is an `Err` and changes nothing.
    pub fn on_frame(
        &mut self,
        frame: &[u8],
        budget: &mut Budget,
        now: i64,
    ) -> Result<Incoming, FrameError> {
        let v = json::parse(frame)?;
        if v.kind() != Kind::Object {
            return Err(FrameError::NoId);
        }
        if let (Some(sub), Some(event)) = (v.get("subscriptionId")?, v.get("event")?) {
            return read_event(sub, event);
        }
        let id_field = v.get("id")?;
        if id_field.map_or(true, |i| i.kind() == Kind::Null) {
            // "Regarding API key revocation": `{"id":null,"status":401,"error":
            // {"code":-2015,..}}` after the next request once the key is invalid.
            let code = v.path("error.code")?.and_then(|c| c.as_i64().ok());
            if let Some(code @ -2015) = code {
                self.logged_on = false;
                return Ok(Incoming::Revoked(code));
            }
        }
        let id = id_field
            .and_then(|i| i.as_u64().ok())
            .ok_or(FrameError::NoId)?;
        let Some(slot) = self.slots.get(id) else {
            return Err(FrameError::UnknownId(id));
        };
        let status = v
            .get("status")?
            .and_then(|s| s.as_u64().ok())
            .and_then(|s| u16::try_from(s).ok())
            .unwrap_or(0);
        // Every read that can fail comes before the first change.
        let (error, result, rate_limits) =
            (v.get("error")?, v.get("result")?, v.get("rateLimits")?);
        self.slots.take(id);
        let code = error
            .and_then(|e| e.get("code").ok().flatten())
            .and_then(|c| c.as_i64().ok());
        let body = match (status, result, error) {
            (200..=299, Some(r), _) => r.raw(),
            (_, _, Some(e)) => e.raw(),
            _ => &[],
        };
        // retryAfter is a UTC ms timestamp; the REST reader takes a Retry-After in
        // seconds, so the wait is rounded up (never shorter than the venue's).
        let mut bad = None;
        let mut secs = ArrayString::<24>::new();
        let retry = error
            .and_then(|e| e.path("data.retryAfter").ok().flatten())
            .map(|r| r.as_i64());
        match retry {
            Some(Ok(ms)) => {
                let wait = self
                    .adapter
                    .limits()
                    .clock
                    .now_ns_at(ms)
                    .saturating_sub(now)
                    .max(0);
                let s = wait / SEC + i64::from(wait % SEC != 0);
                let _ = core::fmt::Write::write_fmt(&mut secs, format_args!("{s}"));
            }
            Some(Err(_)) => bad = Some("error.data.retryAfter"),
            None => {}
        }
        let headers = [Header {
            name: b"Retry-After",
            value: secs.as_bytes(),
        }];
        let r = Response {
            status,
            headers: if secs.is_empty() { &[] } else { &headers },
            body,
        };
        let verdict = match self.adapter.on_response(slot.kind, &r, budget, now) {
            Ok(v) => v,
            Err(Error::BadHeader { verdict, header }) => {
                bad = bad.or(Some(header));
                verdict
            }
            Err(_) => Verdict::Unknown,
        };
        if let Some(limits) = rate_limits {
            // An order's result stamps the venue's time of it (`transactTime`).
            let stamp = result
                .and_then(|r| r.get("transactTime").ok().flatten())
                .and_then(|t| t.as_i64().ok());
            let counted = self.adapter.limits().counted_at(stamp, now);
            if self.observe(limits, budget, counted, now).is_err() {
                bad = bad.or(Some("rateLimits"));
            }
        }
        Ok(Incoming::Answer(Answer {
            id,
            kind: slot.kind,
            client_order_id: slot.client_order_id,
            status,
            code,
            verdict: adapt::finish(verdict, bad),
        }))
    }

    /// Feeds each `{rateLimitType, interval, intervalNum, count}` to the limit of
    /// that kind and window, as counted by the venue at `counted`; an interval the
    /// budget does not declare is skipped.
    #[allow(clippy::result_unit_err)] // the caller names the field
    fn observe(
        &self,
        limits: Value<'_>,
        budget: &mut Budget,
        counted: i64,
        now: i64,
    ) -> Result<(), ()> {
        let mut bad = false;
        let mut buf = [0u8; 32];
        for item in limits.items().map_err(|_| ())? {
            let one = (|| {
                let counts = match item.get("rateLimitType").ok()??.decode_str(&mut buf).ok()? {
                    "REQUEST_WEIGHT" => Counts::Weight,
                    "ORDERS" => Counts::Orders,
                    "RAW_REQUESTS" => Counts::Raw,
                    _ => return Some(None),
                };
                let unit = interval_ns(item.get("interval").ok()??.decode_str(&mut buf).ok()?)?;
                let num = i64::try_from(item.get("intervalNum").ok()??.as_u64().ok()?).ok()?;
                let count = item.get("count").ok()??.as_u64().ok()?;
                Some(Some((counts, num.checked_mul(unit)?, count)))
            })();
            match one {
                Some(Some((counts, window, count))) => {
                    let limit = self
                        .adapter
                        .limits()
                        .of(counts)
                        .find(|l| l.window_ns == window && !l.leased);
                    if let Some(l) = limit {
                        if budget
                            .observe_used_at(l.bucket, count, counted, now)
                            .is_err()
                        {
                            bad = true;
                        }
                    }
                }
                Some(None) => {}
                None => bad = true,
            }
        }
        if bad {
            Err(())
        } else {
            Ok(())
        }
    }
}

/// An answer as the REST readers see it: its `status`, and its `result` (2xx) or
/// `error` object as the body; `None` if the frame is not an answer.
pub fn as_response(frame: &[u8]) -> Option<(u16, &[u8])> {
    let v = json::parse(frame).ok()?;
    let status = v.get("status").ok()??.as_u64().ok()?;
    let status = u16::try_from(status).ok()?;
    let body = match (status, v.get("result").ok()?, v.get("error").ok()?) {
        (200..=299, Some(r), _) => r.raw(),
        (_, _, Some(e)) => e.raw(),
        _ => &[],
    };
    Some((status, body))
}

/// Reads the answer frame to [`Call::Status`](super::Call::Status) for reconcile, by the REST reader:
/// the order, [`Lookup::NotFound`] on -2013, else [`Lookup::Unknown`].
pub fn read_order(frame: &[u8]) -> Lookup {
    match as_response(frame) {
        Some((status, body)) => binance_spot::read_order(&Response {
            status,
            headers: &[],
            body,
        }),
        None => Lookup::Unknown,
    }
}

/// Reads the answer frame to [`Call::Place`](super::Call::Place) by the REST reader: accepted with the
/// venue's order id, refused by a code that says it did not run, or unknown.
pub fn read_placed(frame: &[u8]) -> Placed {
    match as_response(frame) {
        Some((status, body)) => binance_spot::read_placed(&Response {
            status,
            headers: &[],
            body,
        }),
        None => Placed::Unknown,
    }
}

fn read_event(sub: Value<'_>, event: Value<'_>) -> Result<Incoming, FrameError> {
    let subscription_id = sub
        .as_u64()
        .map_err(|_| FrameError::BadEvent("subscriptionId"))?;
    let field = |name: &'static str| -> Result<Value<'_>, FrameError> {
        event
            .get(name)
            .ok()
            .flatten()
            .ok_or(FrameError::BadEvent(name))
    };
    if !field("e")?.str_eq("executionReport").unwrap_or(false) {
        return Ok(Incoming::OtherEvent(subscription_id));
    }
    let mut buf = [0u8; 64];
    let cid = |v: Value<'_>, buf: &mut [u8]| -> Option<ClientOrderId> {
        ClientOrderId::new(v.decode_str(buf).ok()?).ok()
    };
    let client_order_id = cid(field("c")?, &mut buf).ok_or(FrameError::BadEvent("c"))?;
    let orig_client_order_id = match event.get("C").ok().flatten() {
        Some(c) if c.kind() == Kind::String && !c.str_eq("").unwrap_or(true) => {
            Some(cid(c, &mut buf).ok_or(FrameError::BadEvent("C"))?)
        }
        _ => None,
    };
    let state = order_state(
        field("X")?
            .decode_str(&mut buf)
            .map_err(|_| FrameError::BadEvent("X"))?,
    );
    let filled = json_text(field("z")?).ok_or(FrameError::BadEvent("z"))?;
    let venue_order_id = json_text(field("i")?).ok_or(FrameError::BadEvent("i"))?;
    Ok(Incoming::Execution(Execution {
        subscription_id,
        client_order_id,
        orig_client_order_id,
        state,
        filled,
        venue_order_id,
    }))
}
