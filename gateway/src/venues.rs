//! [`Account`] for each venue the gateway drives.

use ergon_core::{BucketId, Builder, Part};
use ergon_venues::adapt::{self, Clock};
use ergon_venues::binance_futures::{self, BinanceFutures};
use ergon_venues::binance_spot::{self, BinanceSpot};
use ergon_venues::bybit::{self, Bybit};
use ergon_venues::deribit::{self, Deribit};
use ergon_venues::json;
use ergon_venues::okx::{self, Okx};

use super::endpoints::{Account, DeclareError, Keys};
use super::endpoints::{Boot, NOT_FOUND_MARGIN_NS};
use super::lane_api::DeribitLane;
use ergon_venues::adapt::Request as Kind;
use ergon_venues::endpoint::{Prepared, SignKey};

const SEC: i64 = 1_000_000_000;

/// Calls `f` with the string field `key` of each object in the JSON array at
/// `path` of `body` (`""`: the body itself).
pub(crate) fn each_string(body: &[u8], path: &str, key: &str, f: &mut dyn FnMut(&[u8])) {
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

/// A Binance key: an Ed25519 key if the secret is a PKCS#8 PEM private key
/// (Binance's recommended type), else an HMAC-SHA256 secret; a 2 s recvWindow.
fn binance_auth(k: &Keys<'_>) -> Result<binance_spot::Auth, DeclareError> {
    let key = SignKey::detect(k.secret).map_err(DeclareError::Keys)?;
    binance_spot::Auth::with_key(k.api_key, key, 2_000).map_err(DeclareError::Keys)
}

impl Account for BinanceSpot {
    /// Limits from `exchangeInfo`; signed with a 2 s recvWindow.
    fn declare(
        boot: &Boot,
        b: &mut Builder,
        k: &Keys<'_>,
        guard_ns: i64,
    ) -> Result<Self, DeclareError> {
        let info = boot.limits.as_deref().unwrap_or_default();
        let auth = binance_auth(k)?;
        let v = BinanceSpot::from_exchange_info(info, b, boot.clock, guard_ns);
        Ok(v.map_err(DeclareError::Limits)?.with_auth(auth))
    }

    /// The `ORDERS_*` limits: Binance counts orders per account, across IPs and
    /// keys.
    fn account_wide(&self, bucket: BucketId) -> bool {
        orders_limit(&self.limits, bucket)
    }

    fn lease_bucket(&mut self, bucket: BucketId) -> bool {
        self.leave_to_lease(bucket)
    }

    fn windows(&self) -> Vec<(BucketId, i64)> {
        binance_windows(&self.limits)
    }

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

    /// `transactTime`: an order's, a cancel's answer, and a cancel-replace's,
    /// which nests it in its parts (its new order's, else its cancel's: each was
    /// stamped between the request's write and its answer's read). Spot's
    /// queries carry `time` and `updateTime`, never it.
    fn answer_time(&self, body: &[u8]) -> Option<(Clock, i64)> {
        let root = json::parse(body).ok()?;
        let v = match root.get("transactTime").ok()? {
            Some(v) => v,
            None => ["newOrderResponse", "cancelResponse"]
                .into_iter()
                .find_map(|part| root.get(part).ok()??.get("transactTime").ok()?)?,
        };
        Some((self.limits.clock, v.as_i64().ok()?))
    }

    fn limits_path() -> Option<&'static str> {
        Some("/api/v3/exchangeInfo")
    }

    /// `exchangeInfo` weighs 20 ("Request Weight: 20",
    /// <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/general-endpoints#exchange-information>).
    fn limits_kind() -> adapt::Request<'static> {
        adapt::Request::Read(20)
    }

    fn set_clock(&mut self, clock: Clock) {
        self.limits.clock = clock;
    }

    /// `timestamp + recvWindow` (the request's deadline) plus the margin: the
    /// matching engine refuses a request after it (see [`binance_spot`]'s doc).
    fn not_found_after(&self, req: &Prepared) -> Option<i64> {
        Some(req.deadline_ns().saturating_add(NOT_FOUND_MARGIN_NS))
    }

    /// The query's deadline plus the margin: reads are signed with the same `recvWindow` (assumes the dead
    /// gateway signed with the same window).
    fn lost_not_found_after(&self, query: &Prepared) -> Option<i64> {
        Some(query.deadline_ns().saturating_add(NOT_FOUND_MARGIN_NS))
    }

    fn open_ids(&self, body: &[u8], f: &mut dyn FnMut(&[u8])) {
        each_string(body, "", "clientOrderId", f);
    }

    /// Over `/ws-api/v3`, with the REST adapter's limits, clock and key.
    fn ws_api(&self, capacity: usize) -> Option<Box<dyn crate::lane_api::LaneApi>> {
        let s = ergon_venues::binance_spot_ws::Session::over(self.clone(), capacity).ok()?;
        Some(Box::new(s))
    }
}

/// Binance USD-M futures: its REST API mirrors Spot's (`/fapi/v1/...`), with the
/// dead man's switch `countdownCancelAll` ([`binance_futures`]'s doc).
impl Account for BinanceFutures {
    /// Limits from `/fapi/v1/exchangeInfo` (the documented table where the
    /// bootstrap read none), each weight limit less the switch's reserve; signed
    /// with a 2 s recvWindow.
    fn declare(
        boot: &Boot,
        b: &mut Builder,
        k: &Keys<'_>,
        guard_ns: i64,
    ) -> Result<Self, DeclareError> {
        let auth = binance_auth(k)?;
        let read = match boot.limits.as_deref() {
            Some(info) => binance_spot::Limits::table_from_exchange_info(info)
                .map_err(DeclareError::Limits)?,
            None => binance_futures::DEFAULT_TABLE
                .iter()
                .map(|&(c, n, u, l)| (c, n, u.to_string(), l))
                .collect(),
        };
        let table: Vec<_> = read
            .iter()
            .map(|(c, n, u, l)| (*c, *n, u.as_str(), *l))
            .collect();
        let v = BinanceFutures::new(b, boot.clock, guard_ns, &table);
        Ok(v.map_err(DeclareError::Limits)?.with_auth(auth))
    }

    /// The `ORDERS_*` limits, as on Spot.
    fn account_wide(&self, bucket: BucketId) -> bool {
        orders_limit(&self.limits, bucket)
    }

    /// As on Spot: the venue's `X-MBX-ORDER-COUNT-*` count the account, so they
    /// no longer raise a leased limit.
    fn lease_bucket(&mut self, bucket: BucketId) -> bool {
        self.limits.leave_to_lease(bucket)
    }

    fn windows(&self) -> Vec<(BucketId, i64)> {
        binance_windows(&self.limits)
    }

    fn time_path() -> &'static str {
        "/fapi/v1/time"
    }

    fn read_time(body: &[u8]) -> Option<i64> {
        BinanceSpot::read_time(body)
    }

    fn limits_path() -> Option<&'static str> {
        Some("/fapi/v1/exchangeInfo")
    }

    fn set_clock(&mut self, clock: Clock) {
        self.limits.clock = clock;
    }

    /// `timestamp + recvWindow` plus the margin, as on Spot: the matching engine
    /// refuses a request after it ([`binance_futures`]'s doc).
    fn not_found_after(&self, req: &Prepared) -> Option<i64> {
        Some(req.deadline_ns().saturating_add(NOT_FOUND_MARGIN_NS))
    }

    /// Over `/ws-fapi/v1`, with the REST adapter's limits, clock and key
    /// ([`ergon_venues::binance_futures_ws`]): orders, cancels, modifies and
    /// queries; no user data stream on it.
    fn ws_api(&self, capacity: usize) -> Option<Box<dyn crate::lane_api::LaneApi>> {
        let s = ergon_venues::binance_futures_ws::Session::over(self.clone(), capacity).ok()?;
        Some(Box::new(s))
    }

    /// The query's deadline plus the margin (assumes the dead gateway signed
    /// with the same window).
    fn lost_not_found_after(&self, query: &Prepared) -> Option<i64> {
        Some(query.deadline_ns().saturating_add(NOT_FOUND_MARGIN_NS))
    }

    fn switch_mut(&mut self) -> Option<&mut dyn ergon_venues::switch::Switch> {
        Some(self)
    }

    fn switch_spec(&self) -> Option<ergon_venues::switch::SwitchSpec> {
        Some(ergon_venues::switch::Switch::switch_spec(self))
    }

    fn open_ids(&self, body: &[u8], f: &mut dyn FnMut(&[u8])) {
        each_string(body, "", "clientOrderId", f);
    }
}

/// Each Binance limit's bucket and window (Spot and USD-M alike).
fn binance_windows(limits: &binance_spot::Limits) -> Vec<(BucketId, i64)> {
    limits
        .limits()
        .iter()
        .map(|l| (l.bucket, l.window_ns))
        .collect()
}

/// Whether `bucket` is one of Binance's order-count limits.
fn orders_limit(limits: &binance_spot::Limits, bucket: BucketId) -> bool {
    limits
        .limits()
        .iter()
        .any(|l| l.bucket == bucket && l.counts == binance_spot::Counts::Orders)
}

impl Account for Bybit {
    /// Create, amend and cancel: counted per account ([`Bybit::account_buckets`]).
    fn account_wide(&self, bucket: BucketId) -> bool {
        self.account_buckets().contains(&bucket)
    }

    fn lease_bucket(&mut self, bucket: BucketId) -> bool {
        self.leave_to_lease(bucket)
    }

    /// The adapter's documented limits ([`bybit::Config::default`]), each rolling
    /// window kept `guard` longer than the venue's ([`Bybit::guarded`]); a 5 s
    /// recvWindow.
    fn declare(
        boot: &Boot,
        b: &mut Builder,
        k: &Keys<'_>,
        guard: i64,
    ) -> Result<Self, DeclareError> {
        let auth = bybit::Auth::new(k.api_key, k.secret, 5_000).map_err(DeclareError::Keys)?;
        let v = Bybit::guarded(b, boot.clock, bybit::Config::default(), guard);
        let v = v.map_err(DeclareError::Buckets)?;
        Ok(v.with_auth(auth))
    }

    fn windows(&self) -> Vec<(BucketId, i64)> {
        let s = [
            self.create,
            self.amend,
            self.cancel,
            self.read,
            self.history,
        ];
        let mut w: Vec<_> = s.iter().map(|b| (*b, SEC)).collect();
        w.push((self.ip_5s, 5 * SEC));
        w
    }

    fn time_path() -> &'static str {
        "/v5/market/time"
    }

    /// `timeNano` of `result` (the top-level `time` is the answer's stamp).
    fn read_time(body: &[u8]) -> Option<i64> {
        let v = json::parse(body).ok()?;
        let nano = v.path("result.timeNano").ok()??.parse_i64().ok()?;
        Some(nano / 1_000_000)
    }

    fn limits_path() -> Option<&'static str> {
        None
    }

    /// Every request stamped from now on (`X-BAPI-TIMESTAMP`) and its deadline.
    fn set_clock(&mut self, clock: Clock) {
        Bybit::set_clock(self, clock);
    }

    fn open_ids(&self, body: &[u8], f: &mut dyn FnMut(&[u8])) {
        each_string(body, "result.list", "orderLinkId", f);
    }

    /// `result.nextPageCursor` when not empty: Bybit's open orders come by
    /// pages (<https://bybit-exchange.github.io/docs/v5/order/open-order>). A
    /// cursor with a JSON escape in it is not followed.
    fn next_page<'b>(&self, body: &'b [u8]) -> Option<&'b [u8]> {
        let raw = json::parse(body)
            .ok()?
            .path("result.nextPageCursor")
            .ok()??
            .raw();
        let c = raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
        (!c.is_empty() && !c.contains(&b'\\')).then_some(c)
    }

    /// DCP's window call. A taken window arms nothing by itself: the gateway's
    /// private WebSocket subscribed to `dcp` ([`Account::dcp_link`]) does.
    fn switch_mut(&mut self) -> Option<&mut dyn ergon_venues::switch::Switch> {
        Some(self)
    }

    fn switch_spec(&self) -> Option<ergon_venues::switch::SwitchSpec> {
        Some(ergon_venues::switch::Switch::switch_spec(self))
    }

    /// The private stream subscribed to the category's `dcp` topic; connects
    /// charge `private_ws_connects` and the IP gate.
    fn dcp_link(&self) -> Option<super::endpoints::DcpSpec> {
        Some(super::endpoints::DcpSpec {
            topic: bybit::dcp_topic(self.category),
            connect_parts: [Part::new(self.private_connects, 1), Part::new(self.ip, 0)],
            message_parts: [Part::new(self.ip, 0)],
        })
    }

    fn dcp_auth(&self, req_id: u64, now: i64, out: &mut Vec<u8>) -> Result<(), adapt::Error> {
        ergon_venues::bybit_private::auth(self, req_id, now, out)
    }
}

impl Account for Okx {
    /// The order endpoints and `sub-account` ([`Okx::account_buckets`]).
    fn account_wide(&self, bucket: BucketId) -> bool {
        self.account_buckets().contains(&bucket)
    }

    /// OKX sends no usage figure for them: nothing to leave out.
    fn lease_bucket(&mut self, bucket: BucketId) -> bool {
        self.account_wide(bucket)
    }

    /// The adapter's documented limits ([`okx::Config::default`]); requests expire
    /// 5 s after they are stamped. The passphrase is required.
    fn declare(
        boot: &Boot,
        b: &mut Builder,
        k: &Keys<'_>,
        _guard: i64,
    ) -> Result<Self, DeclareError> {
        let pass = k.passphrase.ok_or(DeclareError::NoPassphrase)?;
        let auth = okx::Auth::new(k.api_key, k.secret, pass, 5_000);
        let auth = auth.map_err(DeclareError::Keys)?;
        let v = Okx::new(b, boot.clock, okx::Config::default());
        let v = v.map_err(DeclareError::Buckets)?;
        Ok(v.with_auth(auth))
    }

    fn windows(&self) -> Vec<(BucketId, i64)> {
        let s = [
            self.order,
            self.batch_orders,
            self.cancel,
            self.amend,
            self.sub_account,
            self.read,
        ];
        s.iter().map(|b| (*b, 2 * SEC)).collect()
    }

    fn time_path() -> &'static str {
        "/api/v5/public/time"
    }

    fn read_time(body: &[u8]) -> Option<i64> {
        let v = json::parse(body).ok()?;
        v.path("data")
            .ok()??
            .at(0)
            .ok()??
            .get("ts")
            .ok()??
            .parse_i64()
            .ok()
    }

    fn limits_path() -> Option<&'static str> {
        None
    }

    /// Every request stamped from now on (`OK-ACCESS-TIMESTAMP`, `expTime`) and
    /// its deadline.
    fn set_clock(&mut self, clock: Clock) {
        Okx::set_clock(self, clock);
    }

    /// A trade request's `expTime` (its deadline) plus the margin (see
    /// [`okx`]'s doc); reads carry no `expTime`.
    fn not_found_after(&self, req: &Prepared) -> Option<i64> {
        req.kind()
            .filter(|k| k.is_write())
            .map(|_| req.deadline_ns().saturating_add(NOT_FOUND_MARGIN_NS))
    }

    /// The query's deadline plus the margin: reads carry the same window after their timestamp (assumes the dead
    /// gateway signed with the same window).
    fn lost_not_found_after(&self, query: &Prepared) -> Option<i64> {
        Some(query.deadline_ns().saturating_add(NOT_FOUND_MARGIN_NS))
    }

    fn switch_mut(&mut self) -> Option<&mut dyn ergon_venues::switch::Switch> {
        Some(self)
    }

    fn switch_spec(&self) -> Option<ergon_venues::switch::SwitchSpec> {
        Some(ergon_venues::switch::Switch::switch_spec(self))
    }

    fn open_ids(&self, body: &[u8], f: &mut dyn FnMut(&[u8])) {
        each_string(body, "data", "clOrdId", f);
    }
}

impl Account for Deribit {
    /// The adapter's documented limits ([`deribit::Config::default`]: the lowest
    /// tier's matching-engine pool, 500 of 50,000 credits for the rest) less one
    /// request of each pool's burst; private requests signed one by one
    /// (`deri-hmac-sha256`) with the key as client id.
    ///
    /// Why the slack: Deribit takes a request's cost when it arrives, on its own
    /// clock, and a pool run at its refill rate sits at zero, so a request that
    /// arrives a little early by the venue's clock (the clocks' granularity, one
    /// connection faster than another) would find it short. One request of burst
    /// (50 ms of refill for the credits, 200 ms for the matching engine) absorbs
    /// that; the run's use stays above 95% of what the pools allow.
    fn declare(
        boot: &Boot,
        b: &mut Builder,
        k: &Keys<'_>,
        _guard: i64,
    ) -> Result<Self, DeclareError> {
        let secret = core::str::from_utf8(k.secret).map_err(|_| DeclareError::SecretNotUtf8)?;
        let mut c = deribit::Config::default();
        c.credits_max = c.credits_max.saturating_sub(u64::from(c.credit_cost));
        c.matching_burst = c.matching_burst.saturating_sub(1);
        let v = Deribit::new(b, boot.clock, c).map_err(DeclareError::Buckets)?;
        v.with_auth(k.api_key, secret).map_err(DeclareError::Keys)
    }

    /// The two credit pools, by their refill per second (token buckets: the
    /// limit a window of one second admits is the burst plus one second's refill).
    fn windows(&self) -> Vec<(BucketId, i64)> {
        vec![(self.matching, SEC), (self.credits, SEC)]
    }

    fn time_path() -> &'static str {
        "/api/v2/public/get_time"
    }

    /// `result`: UTC ms.
    fn read_time(body: &[u8]) -> Option<i64> {
        json::parse(body).ok()?.get("result").ok()??.as_i64().ok()
    }

    fn limits_path() -> Option<&'static str> {
        None
    }

    /// Every request stamped from now on (`ts` of the signature, `valid_until`).
    fn set_clock(&mut self, clock: Clock) {
        Deribit::set_clock(self, clock);
    }

    /// Orders carry the client order id as their `label`.
    /// A new order's `valid_until` (its deadline) plus the margin; no bound for
    /// anything else (see [`deribit::VALID_FOR_MS`]).
    fn not_found_after(&self, req: &Prepared) -> Option<i64> {
        matches!(req.kind(), Some(Kind::Order))
            .then(|| req.deadline_ns().saturating_add(NOT_FOUND_MARGIN_NS))
    }

    /// The query's deadline plus the margin: the journal holds new orders, and reads use `valid_until`'s window (assumes the dead
    /// gateway signed with the same window).
    fn lost_not_found_after(&self, query: &Prepared) -> Option<i64> {
        Some(query.deadline_ns().saturating_add(NOT_FOUND_MARGIN_NS))
    }

    fn open_ids(&self, body: &[u8], f: &mut dyn FnMut(&[u8])) {
        each_string(body, "result", "label", f);
    }

    /// Order entry over Deribit's JSON-RPC WebSocket ([`DeribitLane`]), where
    /// cancel-on-disconnect covers the orders.
    fn ws_api(&self, capacity: usize) -> Option<Box<dyn crate::lane_api::LaneApi>> {
        let lane = DeribitLane::over(self.clone(), capacity).ok()?;
        Some(Box::new(lane))
    }

    /// Cancel-on-disconnect, armed over the order lane itself
    /// ([`deribit::COD_SPEC`]): without the lane (`--order-entry rest`) it covers
    /// nothing, and the protection says so.
    fn switch_spec(&self) -> Option<ergon_venues::switch::SwitchSpec> {
        Some(deribit::COD_SPEC)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_venue_reads_its_time_and_open_orders() {
        let t = br#"{"retCode":0,"retMsg":"OK","result":{"timeSecond":"1700000000","timeNano":"1700000000123456789"},"time":1700000000124}"#;
        assert_eq!(<Bybit as Account>::read_time(t), Some(1_700_000_000_123));
        let t = br#"{"code":"0","msg":"","data":[{"ts":"1700000000125"}]}"#;
        assert_eq!(<Okx as Account>::read_time(t), Some(1_700_000_000_125));
        assert_eq!(<Okx as Account>::read_time(b"{}"), None);
        let t = br#"{"jsonrpc":"2.0","result":1700000000126,"usIn":1,"usOut":2}"#;
        assert_eq!(<Deribit as Account>::read_time(t), Some(1_700_000_000_126));
        let mut ids = Vec::new();
        each_string(
            br#"{"result":{"list":[{"orderLinkId":"a1"},{"orderLinkId":"b2"}]}}"#,
            "result.list",
            "orderLinkId",
            &mut |id| ids.push(id.to_vec()),
        );
        each_string(
            br#"[{"clientOrderId":"c3"}]"#,
            "",
            "clientOrderId",
            &mut |id| ids.push(id.to_vec()),
        );
        each_string(b"not json", "", "x", &mut |_| panic!("nothing to read"));
        assert_eq!(ids, [b"a1".to_vec(), b"b2".to_vec(), b"c3".to_vec()]);
    }

    /// Binance USD-M, leased (issue 29): the venue's `X-MBX-ORDER-COUNT-10S` counts
    /// every host's orders, so it no longer fills this host's grant; unleased it
    /// does.
    #[test]
    fn a_leased_binance_futures_order_limit_ignores_the_accounts_count() {
        use ergon_core::{Class, Verdict};
        use ergon_venues::adapt::{Request as Kind, Venue};
        use ergon_venues::response::{Header, Response};
        let boot = Boot {
            clock: Clock::anchor(0, 1_700_000_000_000),
            limits: None,
        };
        let keys = Keys {
            api_key: "k",
            secret: b"s",
            passphrase: None,
        };
        let headers = [Header {
            name: b"X-MBX-ORDER-COUNT-10S",
            value: b"300",
        }];
        let full = Response {
            status: 200,
            headers: &headers,
            body: br#"{"orderId":1,"clientOrderId":"a","status":"NEW"}"#,
        };
        for leased in [false, true] {
            let mut b = Builder::default();
            let mut v = <BinanceFutures as Account>::declare(&boot, &mut b, &keys, 0).unwrap();
            let orders = v
                .limits
                .limits()
                .iter()
                .find(|l| l.suffix == "10S")
                .map(|l| l.bucket)
                .unwrap();
            assert!(<BinanceFutures as Account>::lease_bucket(&mut v, orders) || !leased);
            if !leased {
                v.limits
                    .limits_mut()
                    .iter_mut()
                    .for_each(|l| l.leased = false);
            }
            let mut budget = b.build(SEC).unwrap();
            let parts = v.parts(Kind::Order).unwrap();
            let t = budget.try_charge(&parts, Class::Urgent, SEC).unwrap();
            let flight = t.sent();
            let verdict = v.on_response(Kind::Order, &full, &mut budget, SEC + 1);
            assert_eq!(verdict, Ok(Verdict::Done));
            let _ = budget.complete(flight, SEC + 1);
            let next = budget.try_charge(&parts, Class::Urgent, SEC + 2);
            assert_eq!(next.is_ok(), leased, "leased {leased}: {next:?}");
        }
    }

    /// The limits `--etcd` leases: Binance's order counts, Bybit's and OKX's
    /// order endpoints (issue 29); never an IP's. A leased Bybit endpoint no
    /// longer takes `X-Bapi-Limit-Status` (the account's count) as its own.
    #[test]
    fn account_wide_limits_per_venue_and_bybit_leaves_a_leased_figure_out() {
        use ergon_core::{Class, Verdict};
        use ergon_venues::adapt::{Request as Kind, Venue};
        use ergon_venues::response::{Header, Response};
        let clock = Clock::anchor(0, 1_700_000_000_000);
        let mut b = Builder::default();
        let okx = Okx::new(&mut b, clock, okx::Config::default()).unwrap();
        assert!(okx.account_wide(okx.order) && okx.account_wide(okx.sub_account));
        assert!(!okx.account_wide(okx.ip) && !okx.account_wide(okx.read));
        assert!(!okx.account_wide(okx.switch));
        let boot = Boot {
            clock,
            limits: Some(br#"{"rateLimits":[{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,"limit":6000},{"rateLimitType":"ORDERS","interval":"SECOND","intervalNum":10,"limit":100}]}"#.to_vec()),
        };
        let keys = Keys {
            api_key: "k",
            secret: b"s",
            passphrase: None,
        };
        let mut b = Builder::default();
        let spot = <BinanceSpot as Account>::declare(&boot, &mut b, &keys, 0).unwrap();
        let wide: Vec<bool> = spot
            .limits
            .limits()
            .iter()
            .map(|l| spot.account_wide(l.bucket))
            .collect();
        assert_eq!(wide, [false, true], "weight per IP, orders per account");

        let headers = [
            Header {
                name: b"X-Bapi-Limit",
                value: b"10",
            },
            Header {
                name: b"X-Bapi-Limit-Status",
                value: b"0",
            },
        ];
        let full = Response {
            status: 200,
            headers: &headers,
            body: br#"{"retCode":0,"retMsg":"OK","result":{"orderId":"1","orderLinkId":"a"},"time":1700000000000}"#,
        };
        for leased in [false, true] {
            let mut b = Builder::default();
            let mut v = Bybit::new(&mut b, clock, bybit::Config::default()).unwrap();
            assert!(v.account_wide(v.create) && !v.account_wide(v.ip_5s));
            if leased {
                let create = v.create;
                assert!(Account::lease_bucket(&mut v, create));
            }
            let mut budget = b.build(SEC).unwrap();
            let parts = v.parts(Kind::Order).unwrap();
            let flight = budget
                .try_charge(&parts, Class::Urgent, SEC)
                .unwrap()
                .sent();
            let verdict = v.on_response(Kind::Order, &full, &mut budget, SEC + 1);
            assert_eq!(verdict, Ok(Verdict::Done));
            let _ = budget.complete(flight, SEC + 1);
            let next = budget.try_charge(&parts, Class::Urgent, SEC + 2);
            assert_eq!(next.is_ok(), leased, "leased {leased}: {next:?}");
        }
    }

    /// A re-anchor moves what Bybit and OKX stamp on every later request (the
    /// signed timestamp); the deadline stays the receive window after `now`.
    #[test]
    fn bybit_and_okx_restamp_after_a_reanchor() {
        use ergon_venues::endpoint::{Endpoints, OrderRef, Prepared, Symbol};
        let order = OrderRef {
            symbol: Symbol::new("BTCUSDT").unwrap(),
            client_order_id: ergon_venues::endpoint::ClientOrderId::new("c1").unwrap(),
        };
        let now = 7 * SEC;
        let first = Clock::anchor(0, 1_700_000_000_000);
        let later = Clock::anchor(0, 1_700_000_000_250);
        let mut b = Builder::default();
        let mut bybit = Bybit::new(&mut b, first, bybit::Config::default())
            .unwrap()
            .with_auth(bybit::Auth::new("k", b"s", 5_000).unwrap());
        let mut p = Prepared::with_capacity(512);
        bybit.query_order(&mut p, &order, now).unwrap();
        let (ts0, d0) = (
            p.header("X-BAPI-TIMESTAMP").unwrap().to_owned(),
            p.deadline_ns(),
        );
        assert_eq!(ts0, "1700000007000");
        <Bybit as Account>::set_clock(&mut bybit, later);
        bybit.query_order(&mut p, &order, now).unwrap();
        assert_eq!(p.header("X-BAPI-TIMESTAMP"), Some("1700000007250"));
        assert_eq!(p.deadline_ns(), d0, "the window stays as long");

        let mut b = Builder::default();
        let mut okx = Okx::new(&mut b, first, okx::Config::default())
            .unwrap()
            .with_auth(okx::Auth::new("k", b"s", "p", 5_000).unwrap());
        okx.query_order(&mut p, &order, now).unwrap();
        let d0 = p.deadline_ns();
        assert_eq!(
            p.header("OK-ACCESS-TIMESTAMP"),
            Some("2023-11-14T22:13:27.000Z")
        );
        <Okx as Account>::set_clock(&mut okx, later);
        okx.query_order(&mut p, &order, now).unwrap();
        assert_eq!(
            p.header("OK-ACCESS-TIMESTAMP"),
            Some("2023-11-14T22:13:27.250Z")
        );
        assert_eq!(p.deadline_ns(), d0, "the window stays as long");
    }
}
