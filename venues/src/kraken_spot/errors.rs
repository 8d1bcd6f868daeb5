//! What Kraken's error strings say (the table in the module doc).

use super::ERROR_BYTES;
use crate::json::Value;
use ergon_core::Verdict;

/// What a Kraken error string means; `cut` says that only its first bytes were
/// read (a timestamp then is not trusted).
pub(super) fn error_verdict(e: &[u8], cut: bool) -> Said {
    let is = |p: &[u8]| e.starts_with(p);
    if is(b"EOrder:Rate limit exceeded") {
        Said::TradingLimit
    } else if is(b"EAPI:Rate limit exceeded") {
        Said::ApiLimit
    } else if is(b"EGeneral:Temporary lockout") {
        Said::Lockout
    } else if is(b"EGeneral:Too many requests") {
        Said::PublicLimit
    } else if is(b"EAPI:Invalid nonce") {
        Said::Verdict(Verdict::ClockSkew)
    } else if let Some(rest) = service(e) {
        let word = |w: &[u8]| rest.starts_with(w);
        if word(b"Throttled") {
            Said::Throttled(if cut {
                None
            } else {
                throttled_until_s(&rest[b"Throttled".len()..])
            })
        } else if word(b"Deadline elapsed") {
            Said::Verdict(Verdict::NotRun)
        } else if word(b"Market in ") {
            Said::Verdict(Verdict::Rejected)
        } else {
            Said::Busy
        }
    } else if is(b"EGeneral:Internal error") {
        Said::Busy
    } else {
        Said::Verdict(Verdict::Rejected)
    }
}

/// What follows `EService:` (and the spaces Kraken may put after the colon, as in
/// `EService: Throttled: 1700000005`).
pub(super) fn service(e: &[u8]) -> Option<&[u8]> {
    let rest = e.strip_prefix(b"EService:")?;
    let spaces = rest.iter().take_while(|c| **c == b' ').count();
    Some(&rest[spaces..])
}

/// The UNIX second after `Throttled` (`: 1700000005`, spaces optional; a fraction
/// rounds up): `None` if there is none or anything else follows it.
pub(super) fn throttled_until_s(rest: &[u8]) -> Option<i64> {
    let rest = rest.trim_ascii_start().strip_prefix(b":")?.trim_ascii();
    let (whole, frac) = match rest.iter().position(|c| *c == b'.') {
        Some(dot) => (&rest[..dot], &rest[dot + 1..]),
        None => (rest, &[][..]),
    };
    if whole.is_empty() || whole.len() > 12 || !whole.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let secs = whole.iter().fold(0i64, |n, c| n * 10 + i64::from(c - b'0'));
    Some(secs + i64::from(frac.iter().any(|c| *c != b'0')))
}

/// The first [`ERROR_BYTES`] of an error string and whether it was longer; `None`
/// if it is not a string.
pub(super) fn error_text<'b>(
    e: &Value<'_>,
    buf: &'b mut [u8; ERROR_BYTES],
) -> Option<(&'b [u8], bool)> {
    let mut n = 0;
    for c in e.str_bytes().ok()? {
        let Some(slot) = buf.get_mut(n) else {
            return Some((&buf[..], true));
        };
        *slot = c;
        n += 1;
    }
    Some((&buf[..n], false))
}

/// Whether the string `e` is a warning (severity `W`), not an error: the request
/// it answers was processed.
pub(super) fn is_warning(e: &Value<'_>) -> bool {
    e.str_starts_with("W").unwrap_or(false)
}

/// What the error string `e` says; a value that is not a string is a refusal.
pub(super) fn said_of(e: &Value<'_>) -> Said {
    let mut buf = [0u8; ERROR_BYTES];
    match error_text(e, &mut buf) {
        Some((text, cut)) => error_verdict(text, cut),
        None => Said::Verdict(Verdict::Rejected),
    }
}

pub(super) enum Said {
    TradingLimit,
    ApiLimit,
    Lockout,
    /// The public endpoints' per-IP throttle.
    PublicLimit,
    /// `EService: Throttled`, with the UNIX second to wait until if readable.
    Throttled(Option<i64>),
    Busy,
    Verdict(Verdict),
}
