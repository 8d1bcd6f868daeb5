//! Bybit's request authentication: the key, the timestamp within its
//! `X-BAPI-RECV-WINDOW`, and the HMAC-SHA256 signature of
//! `timestamp + key + recv_window + payload`
//! (<https://bybit-exchange.github.io/docs/v5/guide>).

use std::borrow::Cow;

use super::{fail, DEFAULT_RECV_WINDOW};
use crate::engine::state::Venue;
use crate::http::{Request, Response};
use crate::params::sign_parts;

impl Venue {
    /// The account a signed request is from, or the venue's refusal: an
    /// unknown key (10003), a bad or stale timestamp (10002), a bad signature
    /// (10004).
    pub(super) fn authenticate_bybit(
        &mut self,
        req: &Request,
        now: i64,
    ) -> Result<usize, Response> {
        let key = req.header("x-bapi-api-key").unwrap_or("");
        let Some(account) = self.cfg.accounts.iter().position(|a| a.api_key == key) else {
            self.report.api_key_rejects += 1;
            return Err(fail(10003, "API key is invalid.", now));
        };
        let ts_text = req.header("x-bapi-timestamp").unwrap_or("");
        let recv_text = req.header("x-bapi-recv-window").unwrap_or("");
        let (Ok(ts), Ok(recv)) = (
            ts_text.parse::<i64>(),
            if recv_text.is_empty() {
                Ok(DEFAULT_RECV_WINDOW)
            } else {
                recv_text.parse::<i64>()
            },
        ) else {
            self.report.timestamp_rejects += 1;
            return Err(fail(
                10002,
                "invalid request, please check your server timestamp or recv_window param",
                now,
            ));
        };
        let payload = if req.method == "GET" {
            Cow::Borrowed(req.query.as_str())
        } else {
            String::from_utf8_lossy(&req.body)
        };
        let origin = [ts_text, key, recv_text, &payload].map(str::as_bytes);
        let expected = sign_parts(&origin, &self.macs[account]);
        let given = req.header("x-bapi-sign").unwrap_or("");
        if !constant_time_eq_ignore_case(expected.as_bytes(), given.as_bytes()) {
            self.report.signature_rejects += 1;
            return Err(fail(
                10004,
                &format!("error sign! origin_string[{ts_text}{key}{recv_text}{payload}]"),
                now,
            ));
        }
        if !(now - recv <= ts && ts < now + 1_000) {
            self.report.timestamp_rejects += 1;
            return Err(fail(
                10002,
                &format!("invalid request, please check your server timestamp or recv_window param. req_timestamp[{ts}],server_timestamp[{now}],recv_window[{recv}]"),
                now,
            ));
        }
        Ok(account)
    }
}

/// Whether two hex signatures are equal, in any letter case, in time that
/// depends only on their length.
pub(super) fn constant_time_eq_ignore_case(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| {
        acc | (x.to_ascii_lowercase() ^ y.to_ascii_lowercase())
    }) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_compare_in_any_case() {
        assert!(constant_time_eq_ignore_case(b"aB", b"Ab"));
        assert!(!constant_time_eq_ignore_case(b"ab", b"ac"));
    }
}
