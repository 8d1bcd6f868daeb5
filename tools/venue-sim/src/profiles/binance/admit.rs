//! Step 1 for Binance: everything the venue decides at receipt (bans, IP limits,
//! routing, API key, signature and timestamp, the order counts, the fault draw).

use std::net::IpAddr;

use crate::config::LimitType;
use crate::ed25519;
use crate::engine::state::{Admission, Venue};
use crate::http::{Request, Response};
use crate::limits::Key;
use crate::params::{self, Params, SignatureError};
use crate::profiles::binance::endpoint::Endpoint;
use crate::profiles::binance::request::{err, illegal, mandatory, BinanceOp};

/// Largest recvWindow Binance accepts.
pub(crate) const MAX_RECV_WINDOW: u64 = 60_000;

/// Default recvWindow.
pub(crate) const DEFAULT_RECV_WINDOW: u64 = 5_000;

/// The smallest `timestamp` read as microseconds (1e14: 5138 A.D. in ms, 1973 in µs).
const MICROS_FROM: i64 = 100_000_000_000_000;
/// How far ahead of the server a timestamp may be.
pub(crate) const AHEAD_MS: i64 = 1_000;

/// The path of the listenKey endpoints Binance removed on 2026-02-20.
pub(crate) const LISTEN_KEY_PATH: &str = "/api/v3/userDataStream";

/// What Binance answers on a removed endpoint: its web front's `410 Gone` page,
/// no API body and no usage headers. Seen on `POST /api/v3/userDataStream` after
/// 2026-02-20 (the nginx page quoted in
/// <https://github.com/thrasher-corp/gocryptotrader/issues/2190>, and
/// <https://github.com/ccxt/node-binance-api/issues/995>).
pub(crate) fn removed() -> Response {
    Response::html(
        410,
        "<html>\r\n<head><title>410 Gone</title></head>\r\n<body>\r\n<center><h1>410 Gone</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n".into(),
    )
}

/// Where a call's credentials are.
pub(crate) enum Signing<'a> {
    /// REST: the signature over the query string then the body.
    Rest { query: &'a str, body: &'a [u8] },
    /// WebSocket API: the signature over the sorted parameters.
    Sorted,
    /// WebSocket API on a connection logged on (`session.logon`) with this
    /// account's key, the request carrying no `apiKey`: no signature, the
    /// timestamp still checked ("Session Authentication").
    Session,
}

/// One Binance call, from REST or the WebSocket API.
pub(crate) struct Call<'a> {
    /// What it asks for; `None` if nothing of this name exists.
    pub(crate) endpoint: Option<Endpoint>,
    /// Its parameters, or the name of the one that did not decode.
    pub(crate) params: Result<Params, String>,
    /// `X-MBX-APIKEY` (REST) or the `apiKey` parameter (WebSocket API).
    pub(crate) api_key: Option<&'a str>,
    /// Where the signature is computed over.
    pub(crate) signing: Signing<'a>,
}

/// A call that names no endpoint.
#[derive(Debug)]
pub(crate) struct Unrouted;

impl Venue {
    pub(crate) fn banned(&mut self, ip: IpAddr, now: i64) -> Response {
        self.report.banned_requests += 1;
        let until = self.ips.get(&ip).map(|s| s.banned_until).unwrap_or(now);
        let mut r = Response::error(
            418,
            -1003,
            &format!("Way too much request weight used; IP banned until {until}. Please use WebSocket Streams for live updates to avoid bans."),
        );
        r.headers
            .push(("Retry-After".into(), Self::retry_after(until, now)));
        r
    }

    /// Step 1 of the drive order for a REST request: everything the venue decides
    /// at receipt.
    pub(crate) fn admit_binance(
        &mut self,
        req: &Request,
        ip: IpAddr,
        now: i64,
    ) -> Admission<BinanceOp> {
        if req.path == LISTEN_KEY_PATH {
            return Admission::Final(removed());
        }
        let call = Call {
            endpoint: Endpoint::route(self.cfg.profile, &req.method, &req.path),
            params: Params::parse(&req.query, &req.body),
            api_key: req.api_key.as_deref(),
            signing: Signing::Rest {
                query: &req.query,
                body: &req.body,
            },
        };
        match self.admit_call(call, ip, now) {
            Err(Unrouted) => Admission::Final(err(
                404,
                -1000,
                &format!("Unknown path or method: {} {}.", req.method, req.path),
            )),
            Ok(a) => a,
        }
    }

    /// Step 1 for one call, from REST or the WebSocket API: ban, IP limits, API key,
    /// signature and timestamp, parameters, the order counts and the fault draw.
    /// `Err(Unrouted)` (weight 1 counted) when the call names no endpoint; the
    /// caller answers it in its own words.
    pub(crate) fn admit_call(
        &mut self,
        call: Call<'_>,
        ip: IpAddr,
        now: i64,
    ) -> Result<Admission<BinanceOp>, Unrouted> {
        self.phantom(ip, now);
        if self.ips.get(&ip).is_some_and(|s| s.banned_until > now) {
            return Ok(Admission::Final(self.banned(ip, now)));
        }
        let profile = self.cfg.profile;
        let Call {
            endpoint,
            params,
            api_key,
            signing,
        } = call;
        let weight = match (&endpoint, &params) {
            (Some(e), Ok(p)) => e.weight(profile, p),
            _ => 1,
        };

        // IP limits, counted at receipt whatever happens next.
        let mut over = None;
        for (i, l) in self.limits.iter_mut().enumerate() {
            let amount = match l.spec.kind {
                LimitType::RequestWeight => weight,
                LimitType::RawRequests => 1,
                _ => continue,
            };
            let used = l.charge(Key::Ip(ip), amount, now);
            if used > l.spec.limit && over.is_none() {
                over = Some(i);
            }
        }
        let headers = self.weight_headers(ip, now);
        let st = self.ips.entry(ip).or_default();
        if st.throttled_until > now {
            // Sending inside the Retry-After of a 429 is what gets an IP banned.
            st.violations += 1;
            if st.violations >= self.cfg.ban.after_violations {
                let d = self.cfg.ban.duration_ms(st.ban_level);
                self.ban(ip, d, now);
                return Ok(Admission::Final(self.banned(ip, now)));
            }
        }
        let throttled_until = st.throttled_until;
        if let Some(i) = over {
            let spec = self.limits[i].spec;
            let end = self.limits[i].window_end(now).max(throttled_until);
            let st = self.ips.entry(ip).or_default();
            if st.throttled_until <= now {
                st.violations = 0;
            }
            st.throttled_until = end;
            self.report.throttled += 1;
            let msg = match spec.kind {
                LimitType::RawRequests => format!(
                    "Too many requests; current limit of IP is {} requests per {} {}.",
                    spec.limit, spec.interval_num, spec.interval.name()
                ),
                _ => format!(
                    "Too much request weight used; current limit is {} request weight per {} {}. Please use WebSocket Streams for live updates to avoid polling the API.",
                    spec.limit, spec.interval_num, spec.interval.name()
                ),
            };
            let mut r = Response::error(429, -1003, &msg);
            r.headers = headers;
            r.headers
                .push(("Retry-After".into(), Self::retry_after(end, now)));
            return Ok(Admission::Final(r));
        }

        let with = |mut r: Response, h: &[(String, String)]| {
            r.headers.extend_from_slice(h);
            Ok(Admission::Final(r))
        };
        let Some(endpoint) = endpoint else {
            return Err(Unrouted);
        };
        let params = match params {
            Ok(p) => p,
            Err(name) => return with(illegal(&name), &headers),
        };

        let account = if endpoint.signed() {
            match self.authenticate(api_key, &signing, &params, now) {
                Ok(a) => a,
                Err(a) => return with(a, &headers),
            }
        } else {
            0
        };

        let op = match self.build_op(endpoint, &params) {
            Ok(op) => op,
            Err(a) => return with(a, &headers),
        };

        let mut headers = headers;
        if endpoint.places_order() {
            // The unfilled order count: checked all or none, and only a placement
            // the venue accepts adds to it (a -1015 refusal does not).
            let key = Key::Account(account);
            let over = self
                .limits
                .iter()
                .find(|l| l.spec.kind == LimitType::Orders && l.used(key, now) + 1 > l.spec.limit);
            if let Some(l) = over {
                let spec = l.spec;
                let h = self.order_headers(account, now);
                self.report.order_rate_limited += 1;
                // Documented: a 429 without Retry-After.
                let mut r = err(
                    429,
                    -1015,
                    &format!(
                        "Too many new orders; current limit is {} orders per {} {}.",
                        spec.limit,
                        spec.interval_num,
                        spec.interval.name()
                    ),
                );
                r.headers.extend(h);
                return with(r, &headers);
            }
            self.count_order(account, 1, now);
            headers.extend(self.order_headers(account, now));
        }

        let fault = self.draw_fault(op.changes_orders());
        Ok(Admission::Run {
            op,
            account,
            headers,
            fault,
        })
    }

    pub(crate) fn weight_headers(&self, ip: IpAddr, now: i64) -> Vec<(String, String)> {
        self.limits
            .iter()
            .filter(|l| l.spec.kind == LimitType::RequestWeight)
            .filter_map(|l| Some((l.spec.header_name()?, l.used(Key::Ip(ip), now).to_string())))
            .collect()
    }

    pub(crate) fn order_headers(&self, account: usize, now: i64) -> Vec<(String, String)> {
        self.limits
            .iter()
            .filter(|l| l.spec.kind == LimitType::Orders)
            .filter_map(|l| {
                Some((
                    l.spec.header_name()?,
                    l.used(Key::Account(account), now).to_string(),
                ))
            })
            .collect()
    }

    pub(crate) fn authenticate(
        &mut self,
        api_key: Option<&str>,
        signing: &Signing<'_>,
        p: &Params,
        now: i64,
    ) -> Result<usize, Response> {
        let Some(key) = api_key.filter(|k| !k.is_empty()) else {
            self.report.api_key_rejects += 1;
            return Err(err(401, -2014, "API-key format invalid."));
        };
        let account = self.cfg.accounts.iter().position(|a| a.api_key == key);
        let Some(account) = account.filter(|&a| !self.revoked[a]) else {
            self.report.api_key_rejects += 1;
            return Err(err(
                401,
                -2015,
                "Invalid API-key, IP, or permissions for action.",
            ));
        };
        let Some(ts) = p.non_empty("timestamp") else {
            return Err(mandatory("timestamp"));
        };
        let Ok(ts) = ts.parse::<i64>() else {
            return Err(illegal("timestamp"));
        };
        // "Timestamp parameters ... can be passed in milliseconds or microseconds":
        // a value past the year 5138 in milliseconds is microseconds.
        let ts = if ts >= MICROS_FROM { ts / 1_000 } else { ts };
        let recv_us = match p.get("recvWindow") {
            None => DEFAULT_RECV_WINDOW * 1_000,
            Some(s) => match recv_window_us(s) {
                Some(v) if v <= MAX_RECV_WINDOW * 1_000 => v,
                Some(_) => return Err(err(400, -1131, "recvWindow must be less than 60000.")),
                None => return Err(illegal("recvWindow")),
            },
        };
        let mac = &self.macs[account];
        let verdict = match (signing, &self.cfg.accounts[account].ed25519_public_key) {
            (Signing::Session, _) => Ok(()),
            (Signing::Rest { query, body }, Some(k)) => ed25519::verify_rest(query, body, k),
            (Signing::Sorted, Some(k)) => ed25519::verify_sorted(p, k),
            (Signing::Rest { query, body }, None) => params::verify_with(query, body, mac),
            (Signing::Sorted, None) => params::verify_sorted_with(p, mac),
        };
        match verdict {
            Ok(()) => {}
            Err(SignatureError::Missing) => return Err(mandatory("signature")),
            Err(SignatureError::Invalid) => {
                self.report.signature_rejects += 1;
                return Err(err(400, -1022, "Signature for this request is not valid."));
            }
        }
        if ts >= now + AHEAD_MS {
            self.report.timestamp_rejects += 1;
            return Err(err(
                400,
                -1021,
                "Timestamp for this request was 1000ms ahead of the server's time.",
            ));
        }
        if (now - ts).saturating_mul(1_000) > recv_us as i64 {
            self.report.timestamp_rejects += 1;
            return Err(err(
                400,
                -1021,
                "Timestamp for this request is outside of the recvWindow.",
            ));
        }
        Ok(account)
    }
}

/// When a signed Binance request stops being valid (`timestamp + recvWindow`, venue
/// ms), read from its query and form body; None if it is not signed or cannot be
/// read. Binance checks this again when the matching engine takes the request, so
/// a request held in the venue's queue past it is refused, never executed.
pub(crate) fn valid_until_ms(query: &str, body: &[u8]) -> Option<i64> {
    let body = core::str::from_utf8(body).unwrap_or("");
    let (mut ts, mut recv) = (None, None);
    for kv in query.split('&').chain(body.split('&')) {
        match kv.split_once('=') {
            Some(("timestamp", v)) => ts = Some(v),
            Some(("recvWindow", v)) => recv = Some(v),
            _ => {}
        }
    }
    valid_until(ts?, recv)
}

/// `timestamp + recvWindow` (venue ms) of a signed request whose parameters are
/// `timestamp` and `recv_window` (the default window if absent); None if either
/// cannot be read. The WebSocket API's requests carry the same two parameters.
pub(crate) fn valid_until(timestamp: &str, recv_window: Option<&str>) -> Option<i64> {
    let recv_us = match recv_window {
        Some(v) => recv_window_us(v)?,
        None => DEFAULT_RECV_WINDOW * 1_000,
    };
    let ts = timestamp.parse::<i64>().ok()?;
    let ts = if ts >= MICROS_FROM { ts / 1_000 } else { ts };
    Some(ts.saturating_add((recv_us / 1_000) as i64))
}

/// `recvWindow` in microseconds: milliseconds with up to three decimals
/// (`6000.346`), as the Spot documentation now allows.
pub(crate) fn recv_window_us(s: &str) -> Option<u64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() || frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let ms: u64 = int
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| int.parse().ok())??;
    let mut us: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    for _ in frac.len()..3 {
        us *= 10;
    }
    ms.checked_mul(1_000)?.checked_add(us)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recv_window_takes_up_to_three_decimals() {
        assert_eq!(recv_window_us("5000"), Some(5_000_000));
        assert_eq!(recv_window_us("6000.346"), Some(6_000_346));
        assert_eq!(recv_window_us("1.5"), Some(1_500));
        assert_eq!(recv_window_us("1.2345"), None);
        assert_eq!(recv_window_us("-1"), None);
        assert_eq!(recv_window_us(".5"), None);
    }
}
