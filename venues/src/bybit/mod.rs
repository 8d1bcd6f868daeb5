//! Bybit v5: errors arrive in HTTP 200 bodies as `retCode`; per-UID endpoint limits
//! over a rolling second, reported by `X-Bapi-Limit` / `X-Bapi-Limit-Status` and
//! reset at `X-Bapi-Limit-Reset-Timestamp`; 600 requests per 5 s per IP; a 403
//! "access too frequent" is an IP ban of at least 10 minutes with no `Retry-After`.
//!
//! Sources: <https://bybit-exchange.github.io/docs/v5/rate-limit>,
//! <https://bybit-exchange.github.io/docs/v5/error>,
//! <https://bybit-exchange.github.io/docs/v5/order/batch-place>.
//!
//! **No NotFound bound.** `X-BAPI-RECV-WINDOW` is checked when the request
//! arrives (`server_time - recv_window <= timestamp < server_time + 1000`, the
//! v5 *Integration Guidance*); Bybit states no time after which a
//! request accepted but queued can no longer reach the matching engine. A query
//! that finds nothing proves nothing: the gateway ends such an unknown outcome
//! `Unresolved` and keeps watching the client order id.
//!
//! **Reconcile: the real-time query, then the history.** `GET /v5/order/realtime`
//! by `orderLinkId` lists the order while it is open and, whatever `openOnly`
//! says ("openOnly param will be ignored when query by orderId or orderLinkId"),
//! while it is among the account's 500 most recently closed orders of the
//! category (UTA 2.0: spot, linear, inverse, option; UTA 1.0: spot, linear,
//! option). It does not list a closed order older than those 500 (at the default
//! 10 cancels a second, 50 s of quoting), nor any closed order of a unified account after
//! a Bybit server release or restart ("should only be queried through order
//! history"), nor a closed order of a classic account's spot ("classic account
//! spot can return open orders only"). [`crate::endpoint::Endpoints::query_closed_order`] asks `GET
//! /v5/order/history` by `orderLinkId`, which finds those: on a unified account
//! (except UTA 1.0 inverse) closed orders only, a fully cancelled, rejected or
//! deactivated one for 24 hours, any other for 7 days, one with fills for 2 years;
//! on UTA 1.0 inverse and classic accounts, orders of any status for 7 days
//! (classic spot: cancelled, rejected and deactivated ones for 7 days). Its data
//! "may delay". Each endpoint has its own per-UID limit, 50 requests a second: the
//! real-time query is charged on [`Bybit::read`] (shared with the other reads, as
//! before), the history on [`Bybit::history`].
//! Sources: <https://bybit-exchange.github.io/docs/v5/order/open-order>,
//! <https://bybit-exchange.github.io/docs/v5/order/order-list>,
//! <https://bybit-exchange.github.io/docs/v5/rate-limit>, checked 2026-12-01.
//!
//! Reading an answer never allocates.

use crate::adapt::{self, Batch, Clock, Error, Parts, Request, Venue, MAX_ITEMS};
use crate::endpoint::{ApiKey, HmacKey, Method, Prepared, Writer};
use crate::json::{self, Value};
use crate::response::Response;
use arrayvec::ArrayVec;
use ergon_core::{BucketId, Budget, Builder, Part, Spec, Verdict};

mod endpoints;
use endpoints::decimal;
mod switch;

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;

/// The orders a page of `GET /v5/order/realtime` asks for: Bybit's most ("limit:
/// Limit for data size per page. [1, 50]. Default: 20",
/// <https://bybit-exchange.github.io/docs/v5/order/open-order>).
pub const OPEN_PAGE: i64 = 50;

/// "Wait for at least 10 minutes. The ban will be lifted automatically."
pub const BAN_NS: i64 = 600 * SEC;

/// `POST /v5/order/disconnected-cancel-all`: sets the DCP window ([`Bybit`]'s
/// `Switch` impl).
pub const DCP_PATH: &str = "/v5/order/disconnected-cancel-all";

/// The private WebSocket's DCP topic for the product of a category (`dcp.future`
/// for `linear` and `inverse`, `dcp.spot`, `dcp.option`): the connection that
/// subscribes to it is the one whose loss fires DCP.
pub fn dcp_topic(category: &str) -> &'static str {
    match category {
        "spot" => "dcp.spot",
        "option" => "dcp.option",
        _ => "dcp.future",
    }
}

/// The DCP `product` of a category (`DERIVATIVES` for `linear` and `inverse`).
fn dcp_product(category: &str) -> &'static str {
    match category {
        "spot" => "SPOT",
        "option" => "OPTIONS",
        _ => "DERIVATIVES",
    }
}

/// Per-UID limits of the endpoints an adapter uses, requests (orders, for batch
/// endpoints) per rolling second; the IP limit per 5 s.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// `/v5/order/create` (and `create-batch`, counted per order).
    pub create_per_s: u64,
    /// `/v5/order/amend`.
    pub amend_per_s: u64,
    /// `/v5/order/cancel`.
    pub cancel_per_s: u64,
    /// Reads, counted by their weight.
    pub read_per_s: u64,
    /// `/v5/order/history`.
    pub history_per_s: u64,
    /// Requests per IP per 5 s.
    pub ip_per_5s: u64,
}

impl Default for Config {
    /// The documented defaults for linear contracts (classic account, VIP 0):
    /// create, amend and cancel 10 per second per UID, reads 50 (the order
    /// history 50 of its own), and 600 requests
    /// per 5 s per IP. Source: <https://bybit-exchange.github.io/docs/v5/rate-limit>,
    /// checked 2026-11-30. Raise them to the account's own limits (`GET
    /// /v5/user/query-api` does not return them; the `X-Bapi-Limit` header of each
    /// answer does, and [`Bybit`] reads it).
    fn default() -> Self {
        Config {
            create_per_s: 10,
            amend_per_s: 10,
            cancel_per_s: 10,
            read_per_s: 50,
            history_per_s: 50,
            ip_per_5s: 600,
        }
    }
}

/// The receive window signed requests carry unless told otherwise (Bybit's
/// default, ms).
pub const DEFAULT_RECV_WINDOW_MS: i64 = 5000;

/// The path of the order history: the [`Request::Info`] name its query is
/// charged under.
pub const HISTORY: &str = "/v5/order/history";

/// Connects to the private WebSocket per 5 minutes per IP: "do not establish
/// more than 500 connections in 5 minutes"
/// (<https://bybit-exchange.github.io/docs/v5/rate-limit>, checked 2026-12-02).
pub const PRIVATE_CONNECTS_PER_5MIN: u64 = 500;

/// Most orders of one `POST /v5/order/create-batch` (linear and inverse).
pub const MAX_BATCH_ORDERS: usize = 20;

/// A Bybit API key, its HMAC-SHA256 secret, the receive window, and the product
/// category every request names.
#[derive(Clone, Debug)]
pub struct Auth {
    api_key: ApiKey,
    key: HmacKey,
    recv_window_ms: i64,
}

impl Auth {
    /// The key `api_key` (sent as `X-BAPI-API-KEY`) with its `secret`.
    pub fn new(api_key: &str, secret: &[u8], recv_window_ms: i64) -> Result<Self, Error> {
        if !(1..=60_000).contains(&recv_window_ms) {
            return Err(Error::BadArgument("X-BAPI-RECV-WINDOW (1..=60000 ms)"));
        }
        Ok(Auth {
            api_key: ApiKey::new(api_key)?,
            key: HmacKey::new(secret),
            recv_window_ms,
        })
    }
}

/// The Bybit v5 adapter.
#[derive(Clone, Debug)]
pub struct Bybit {
    clock: Clock,
    auth: Option<Auth>,
    /// The `category` every typed endpoint names (`linear`, `inverse`, `spot`).
    pub category: &'static str,
    items: ArrayVec<Verdict, MAX_ITEMS>,
    /// The IP gate.
    pub ip: BucketId,
    /// 600 requests per 5 s per IP.
    pub ip_5s: BucketId,
    /// `/v5/order/create`.
    pub create: BucketId,
    /// `/v5/order/amend`.
    pub amend: BucketId,
    /// `/v5/order/cancel`.
    pub cancel: BucketId,
    /// Reads.
    pub read: BucketId,
    /// `/v5/order/history` ([`HISTORY`]).
    pub history: BucketId,
    /// Connects to the private WebSocket (`/v5/private`, the connection DCP
    /// needs): at most [`PRIVATE_CONNECTS_PER_5MIN`] per 5 minutes per IP.
    pub private_connects: BucketId,
    /// The endpoint buckets shared by several hosts (their limits are grants
    /// leased through etcd): `X-Bapi-Limit-Status` counts the account, every
    /// host's requests, so it is not fed to them ([`Bybit::leave_to_lease`]).
    leased: ArrayVec<BucketId, 3>,
}

impl Bybit {
    /// Declares `ip`, `ip_5s` and one rolling-second bucket per endpoint, each
    /// as long as the venue's window ([`Bybit::guarded`] with no guard).
    pub fn new(builder: &mut Builder, clock: Clock, c: Config) -> Result<Self, Error> {
        Bybit::guarded(builder, clock, c, 0)
    }

    /// As [`Bybit::new`], each rolling window kept `guard_ns` longer than the
    /// venue's. Bybit counts a request when it arrives, the budget when it is
    /// sent: two requests sent one window apart arrive less than a window apart
    /// when the first's way was the slower, and the venue counts both in one
    /// window (found by the simulator, issue 43: requests sent 1,001.9 ms apart
    /// arrived 999.2 ms apart, the 41st order of a second answered 10006). The
    /// guard covers that spread of the one-way latency (the daemon passes its
    /// `--guard-ms`, the one fixed windows keep around their boundaries).
    pub fn guarded(
        builder: &mut Builder,
        clock: Clock,
        c: Config,
        guard_ns: i64,
    ) -> Result<Self, Error> {
        let g = guard_ns.max(0);
        let second = |n| Spec::sliding(n, SEC + g, 20);
        Ok(Bybit {
            clock,
            auth: None,
            category: "linear",
            items: ArrayVec::new(),
            ip: builder.add("ip", Spec::gate())?,
            ip_5s: builder.add("ip_5s", Spec::sliding(c.ip_per_5s, 5 * SEC + g, 50))?,
            create: builder.add("/v5/order/create", second(c.create_per_s))?,
            amend: builder.add("/v5/order/amend", second(c.amend_per_s))?,
            cancel: builder.add("/v5/order/cancel", second(c.cancel_per_s))?,
            read: builder.add("read", second(c.read_per_s))?,
            history: builder.add(HISTORY, second(c.history_per_s))?,
            private_connects: builder.add(
                "private_ws_connects",
                Spec::sliding(PRIVATE_CONNECTS_PER_5MIN, 300 * SEC, 60),
            )?,
            leased: ArrayVec::new(),
        })
    }

    /// The order endpoints' buckets (create, amend, cancel): Bybit counts them
    /// per account (UID), whichever IP or key sends (its rate-limit page), so
    /// several hosts trading one account share them.
    pub fn account_buckets(&self) -> [BucketId; 3] {
        [self.create, self.amend, self.cancel]
    }

    /// Marks `bucket`, one of [`Bybit::account_buckets`], as leased (shared by
    /// several hosts through etcd): the venue's `X-Bapi-Limit-Status` for it
    /// counts every host's requests, so it no longer raises it. Whether `bucket`
    /// is one of them.
    pub fn leave_to_lease(&mut self, bucket: BucketId) -> bool {
        if !self.account_buckets().contains(&bucket) {
            return false;
        }
        if !self.leased.contains(&bucket) {
            self.leased.push(bucket);
        }
        true
    }

    /// The private WebSocket's `auth` signature of `expires` (venue UTC ms, as
    /// decimal text): the API key and the raw HMAC-SHA256 of
    /// `"GET/realtime" + expires` (the private WebSocket's `auth` frame).
    pub(crate) fn private_sign(&self, expires: &[u8]) -> Result<(&str, [u8; 32]), Error> {
        let auth = self.auth.as_ref().ok_or(Error::NoKey)?;
        let mac = auth.key.sign(&[b"GET/realtime", expires]);
        Ok((auth.api_key.as_str(), mac))
    }

    /// The venue clock requests are stamped with.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Re-anchors the venue clock (after repeated clock skew): every request
    /// prepared from now on is stamped, and its deadline computed, on `clock`.
    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    /// The deadline of a signed request: `X-BAPI-TIMESTAMP` plus `X-BAPI-RECV-WINDOW`.
    pub fn deadline_ns(&self, timestamp_ms: i64, recv_window_ms: i64) -> i64 {
        self.clock
            .now_ns_at(timestamp_ms.saturating_add(recv_window_ms))
    }

    /// The key signed endpoints use (without one they return [`Error::NoKey`]).
    pub fn with_auth(mut self, auth: Auth) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Ends a signed request whose target is written: signs `timestamp + api_key +
    /// recv_window + payload` (the JSON body of a POST, the query of a GET),
    /// HMAC-SHA256 in hex, into the `X-BAPI-*` headers. Returns the deadline.
    fn sign(
        &self,
        w: &mut Writer<'_>,
        payload: core::ops::Range<usize>,
        now: i64,
    ) -> Result<i64, Error> {
        let auth = self.auth.as_ref().ok_or(Error::NoKey)?;
        let ts = self.clock.utc_ms(now);
        let mut digits = [0u8; 20];
        let ts_text = decimal(ts, &mut digits);
        let mut rw = [0u8; 20];
        let rw_text = decimal(auth.recv_window_ms, &mut rw);
        let mac = auth.key.sign(&[
            ts_text,
            auth.api_key.as_str().as_bytes(),
            rw_text,
            w.bytes(payload),
        ]);
        w.header("X-BAPI-API-KEY", auth.api_key.as_str().as_bytes())?;
        w.header("X-BAPI-TIMESTAMP", ts_text)?;
        w.header("X-BAPI-RECV-WINDOW", rw_text)?;
        w.open();
        w.hex(&mac);
        w.close_header("X-BAPI-SIGN")?;
        Ok(self.clock.now_ns_at(ts.saturating_add(auth.recv_window_ms)))
    }

    /// A signed POST of the JSON body `body` writes to `path`, after `category`.
    fn post<'p>(
        &self,
        w: Writer<'p>,
        path: &str,
        kind: Request<'static>,
        now: i64,
        body: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>,
    ) -> Result<&'p Prepared, Error> {
        let (w, deadline) = self.signed_json(w, path, now, |w| {
            w.json(&mut true, "category", self.category);
            body(w)
        })?;
        w.finish(self, kind, Method::Post, deadline)
    }

    /// Writes and signs a POST of the JSON object whose members `members` writes
    /// to `path`; returns the writer to finish and the deadline.
    fn signed_json<'p>(
        &self,
        mut w: Writer<'p>,
        path: &str,
        now: i64,
        members: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>,
    ) -> Result<(Writer<'p>, i64), Error> {
        w.open();
        w.s(path);
        w.close_target();
        w.open();
        w.s("{");
        members(&mut w)?;
        w.s("}");
        w.close_body();
        let at = w.body_span();
        let deadline = self.sign(&mut w, at, now)?;
        w.header("Content-Type", b"application/json")?;
        Ok((w, deadline))
    }

    /// A GET of `path` with the query `query` writes after `category=...`; signed
    /// unless `public`.
    fn get<'p>(
        &self,
        mut w: Writer<'p>,
        path: &str,
        kind: Request<'static>,
        now: i64,
        public: bool,
        query: impl FnOnce(&mut Writer<'_>),
    ) -> Result<&'p Prepared, Error> {
        w.open();
        w.s(path);
        w.s("?");
        let q = w.pos();
        w.s("category=");
        w.s(self.category);
        query(&mut w);
        let end = w.pos();
        w.close_target();
        let deadline = if public {
            let window = self
                .auth
                .as_ref()
                .map_or(DEFAULT_RECV_WINDOW_MS, |a| a.recv_window_ms);
            now.saturating_add(window.saturating_mul(MS))
        } else {
            self.sign(&mut w, q..end, now)?
        };
        w.finish(self, kind, Method::Get, deadline)
    }

    /// The per-UID endpoint bucket of a request.
    pub fn endpoint(&self, request: Request<'_>) -> BucketId {
        match request {
            Request::Order | Request::Batch(_) => self.create,
            Request::CancelReplace => self.amend,
            Request::Cancel => self.cancel,
            Request::Info(HISTORY) => self.history,
            Request::Read(_) | Request::Info(_) | Request::Connect => self.read,
        }
    }

    /// The verdict of one `retCode` (of the request, or of one order of a batch).
    fn code(
        &self,
        code: i64,
        request: Request<'_>,
        r: &Response<'_>,
        budget: &mut Budget,
        now: i64,
        bad: &mut Option<&'static str>,
    ) -> Verdict {
        match code {
            0 => Verdict::Done,
            10006 => {
                let reset = r.header("X-Bapi-Limit-Reset-Timestamp");
                let wait = match reset.map(adapt::header_u64) {
                    Some(Some(ms)) => {
                        let at = self.clock.now_ns_at(i64::try_from(ms).unwrap_or(i64::MAX));
                        Some(at.saturating_sub(now).max(0))
                    }
                    Some(None) => {
                        *bad = bad.or(Some("X-Bapi-Limit-Reset-Timestamp"));
                        None
                    }
                    None => None,
                };
                adapt::hold(budget, self.endpoint(request), wait, now)
            }
            // "Too many visits. Exceeded the API Rate Limit" per IP.
            10018 => adapt::hold(budget, self.ip_5s, None, now),
            // System-level frequency protection.
            10429 => adapt::hold(budget, self.ip, None, now),
            10002 => Verdict::ClockSkew,
            10000 | 10016 | 170007 | 170146 => Verdict::Unknown,
            _ => Verdict::Rejected,
        }
    }

    /// The orders of a batch answer: `retExtInfo.list[i].code`.
    fn batch(
        &self,
        v: Value<'_>,
        request: Request<'_>,
        r: &Response<'_>,
        budget: &mut Budget,
        now: i64,
        bad: &mut Option<&'static str>,
    ) -> Batch {
        let mut batch = Batch::new();
        let Ok(Some(list)) = v.path("retExtInfo.list") else {
            return batch;
        };
        let Ok(items) = list.items() else {
            return batch;
        };
        for item in items {
            match item.get("code").ok().flatten().map(|c| c.as_i64()) {
                Some(Ok(code)) => batch.add(self.code(code, request, r, budget, now, bad)),
                _ => batch.add(Verdict::Unknown),
            }
        }
        batch
    }

    /// `X-Bapi-Limit` minus `X-Bapi-Limit-Status` is the endpoint's usage.
    fn observe(
        &self,
        request: Request<'_>,
        r: &Response<'_>,
        budget: &mut Budget,
        now: i64,
    ) -> Option<&'static str> {
        let (limit, left) = match (r.header("X-Bapi-Limit"), r.header("X-Bapi-Limit-Status")) {
            (None, None) => return None,
            (Some(l), Some(s)) => (adapt::header_u64(l), adapt::header_u64(s)),
            (Some(_), None) => return Some("X-Bapi-Limit-Status"),
            (None, Some(_)) => return Some("X-Bapi-Limit"),
        };
        match (limit, left) {
            (Some(limit), Some(left)) if left <= limit => {
                let bucket = self.endpoint(request);
                // An adapter is driven with the budget it was built for: its ids are that
                // budget's own, never refused. A leased bucket's figure is the account's.
                if !self.leased.contains(&bucket) {
                    budget.observe_used(bucket, limit - left, now).ok();
                }
                None
            }
            (None, _) => Some("X-Bapi-Limit"),
            _ => Some("X-Bapi-Limit-Status"),
        }
    }
}

/// Whether `v` has a `retExtInfo.list` of at least one item (the answer of a
/// batch endpoint).
fn listed(v: Value<'_>) -> bool {
    match v.path("retExtInfo.list") {
        Ok(Some(list)) => list.items().is_ok_and(|mut i| i.next().is_some()),
        _ => false,
    }
}

impl Venue for Bybit {
    fn parts(&self, request: Request<'_>) -> Result<Parts, Error> {
        let mut p = Parts::new();
        p.push(Part::new(self.ip, 0));
        match request {
            Request::Connect => return Ok(p),
            Request::Order | Request::Cancel | Request::CancelReplace => {
                p.push(Part::new(self.endpoint(request), 1))
            }
            Request::Batch(n) => p.push(Part::new(self.create, u32::from(n))),
            Request::Read(w) => p.push(Part::new(self.read, w)),
            Request::Info(HISTORY) => p.push(Part::new(self.history, 1)),
            Request::Info(_) => return Err(Error::Unsupported),
        }
        p.push(Part::new(self.ip_5s, 1));
        Ok(p)
    }

    fn on_response(
        &mut self,
        request: Request<'_>,
        r: &Response<'_>,
        budget: &mut Budget,
        now: i64,
    ) -> Result<Verdict, Error> {
        let mut bad = None;
        self.items.clear();
        let body = json::parse(r.body).ok();
        let ret_code = body
            .and_then(|v| v.get("retCode").ok().flatten())
            .and_then(|c| c.as_i64().ok());
        let verdict = match (r.status, ret_code, body) {
            // "403, access too frequent" (not a retCode body): stop every session,
            // at least 10 minutes.
            (403, None, _) => adapt::ban(budget, self.ip, now.saturating_add(BAN_NS), now),
            // A batch, or a batch cancel (a cancel answered with an item list:
            // each order's own code; a single cancel's `retExtInfo` is empty).
            (_, Some(0), Some(v))
                if matches!(request, Request::Batch(_))
                    || (request == Request::Cancel && listed(v)) =>
            {
                let batch = self.batch(v, request, r, budget, now, &mut bad);
                let verdict = batch.verdict().unwrap_or(Verdict::Unknown);
                self.items = batch.into_items();
                verdict
            }
            (_, Some(code), _) => self.code(code, request, r, budget, now, &mut bad),
            (429, None, _) => adapt::hold(budget, self.ip, None, now),
            (_, None, _) if request.is_write() => Verdict::Unknown,
            (200..=299, None, _) => Verdict::Unknown,
            (s, None, _) => adapt::status_rule(s, budget, self.ip, None, now),
        };
        bad = bad.or(self.observe(request, r, budget, now));
        adapt::finish(verdict, bad)
    }

    fn batch_items(&self) -> &[Verdict] {
        &self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ergon_core::Class;

    /// A full second of creates at the end of a slot of the ring, then one more
    /// 1,002 ms later: a budget without the guard sends it, though the first
    /// ones, on a way 2 ms slower, reached Bybit inside its window; the guarded
    /// one waits the guard out, then sends.
    #[test]
    fn a_guarded_window_outlasts_the_venues_by_the_guard() {
        let t0 = 1_000 * SEC;
        // The last ms of the ring's first 50 ms slot.
        let t1 = t0 + 49 * MS;
        for (guard, passes) in [(0, true), (30 * MS, false)] {
            let mut b = Builder::default();
            let clock = Clock::anchor(t0, 1_700_000_000_000);
            let v = Bybit::guarded(&mut b, clock, Config::default(), guard).unwrap();
            let mut budget = b.build(t0).unwrap();
            let parts = v.parts(Request::Order).unwrap();
            for _ in 0..Config::default().create_per_s {
                let _sent = budget.try_charge(&parts, Class::Normal, t1).unwrap().sent();
            }
            let r = budget.try_charge(&parts, Class::Normal, t1 + SEC + 2 * MS);
            assert_eq!(r.is_ok(), passes, "guard {guard}");
            let r = budget.try_charge(&parts, Class::Normal, t1 + SEC + guard + 60 * MS);
            assert!(r.is_ok(), "guard {guard}: after the guard and a slot");
        }
    }
}
