//! The venue state every profile runs on, under the server's one lock: the limit
//! counters, per-IP throttles and bans, the order registry (by order id and client
//! order id, with the execution count that finds duplicates), the fault draw, the
//! stream hub and the report.
//!
//! The profiles (`crate::profiles`) add their own `impl Venue` blocks for what
//! their venue decides; this module knows no venue's rules and never calls into a
//! profile. It never touches a socket or reads a clock: `now` is always a parameter.

use std::net::IpAddr;

use serde_json::Value;

use crate::config::{Config, Fault, FaultScope, LimitType, Profile};
use crate::engine::book::{fate, fmt_e8, Order, Placement, Status};
use crate::engine::credits::CreditPool;
use crate::engine::hub::WsHub;
use crate::hashing::{Hashing, Map};
use crate::http::Response;
use crate::limits::{window_start, Key, LimitState};
use crate::params::MacKey;
use crate::report::{OrderView, Report, WsCounts};

/// What a profile decided about a request at receipt; `O` is the profile's own
/// operation type.
#[derive(Debug)]
pub(crate) enum Admission<O> {
    /// Answer this and run nothing.
    Final(Response),
    /// Run `op` for `account`; add `headers` to the answer; apply `fault` if any.
    Run {
        op: O,
        account: usize,
        headers: Vec<(String, String)>,
        fault: Option<Fault>,
    },
}

#[derive(Default)]
pub(crate) struct IpState {
    pub(crate) throttled_until: i64,
    pub(crate) violations: u32,
    pub(crate) banned_until: i64,
    pub(crate) ban_level: u32,
    pub(crate) phantom_from: Option<i64>,
    pub(crate) phantom_carry: u64,
}

/// A small, seeded, deterministic generator (SplitMix64).
pub(crate) struct SplitMix(u64);

impl SplitMix {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The venue: limits, bans, book, order registry and report.
pub(crate) struct Venue {
    pub(crate) cfg: Config,
    pub(crate) limits: Vec<LimitState>,
    pub(crate) ips: Map<IpAddr, IpState>,
    pub(crate) orders: Vec<Order>,
    pub(crate) by_client: Map<(usize, String), usize>,
    pub(crate) by_id: Map<u64, usize>,
    pub(crate) executed: Map<(usize, String), u32>,
    pub(crate) next_order_id: u64,
    pub(crate) next_trade_id: u64,
    pub(crate) next_cancel_id: u64,
    pub(crate) rng: SplitMix,
    pub(crate) fault_seq: u64,
    pub(crate) script: Map<u64, Fault>,
    pub(crate) report: Report,
    /// The venue time of the latest receipt (for answers built without one).
    pub(crate) now_hint: i64,
    /// Listen keys and stream subscribers.
    pub(crate) hub: WsHub,
    /// Credit pools by owner and kind (`true`: matching engine).
    pub(crate) pools: Map<(Key, bool), CreditPool>,
    /// Bearer tokens handed out: their account and expiry (venue ms).
    pub(crate) tokens: Map<String, (usize, i64)>,
    /// Connections open now, by IP.
    pub(crate) open: Map<IpAddr, u32>,
    /// The armed dead man's switches (driven by `crate::engine::switch`).
    pub(crate) switches: Vec<Countdown>,
    /// Per account, per disconnect-armed scope (Bybit's DCP products, indexed
    /// by the profile): the window and the live connections holding it.
    pub(crate) held: Vec<[HeldScope; 3]>,
    /// Connection ids handed out so far (WebSocket `conn_id`s).
    pub(crate) next_conn_id: u64,
    /// Per account: whether Deribit's cancel-on-disconnect is on for the
    /// account scope (every connection it authenticates later starts with it).
    pub(crate) deribit_cod: Vec<bool>,
    /// Hyperliquid's per-signer nonces and per-address budgets.
    pub(crate) addresses: crate::engine::address::AddressBook,
    /// Per account: its HMAC secret made ready ([`MacKey`]), the signatures'
    /// key (the account's `secret` never changes after the venue is made).
    pub(crate) macs: Vec<MacKey>,
    /// Per account: its API key was revoked ([`crate::Server::revoke_api_key`]):
    /// every request with it is refused -2015.
    pub(crate) revoked: Vec<bool>,
}

impl Venue {
    /// A venue of `cfg` whose maps hash with `hashing` (keyed behind sockets).
    pub(crate) fn new(cfg: Config, hashing: Hashing) -> Self {
        let limits = cfg
            .rate_limits
            .iter()
            .map(|l| LimitState::new(*l, cfg.history_cap, &hashing))
            .collect();
        let mut script = hashing.map();
        script.extend(cfg.faults.script.iter().copied());
        let rng = SplitMix(cfg.faults.seed);
        let n_accounts = cfg.accounts.len();
        let macs = cfg
            .accounts
            .iter()
            .map(|a| MacKey::new(&a.secret))
            .collect();
        let report = Report {
            profile: cfg.profile.name().to_string(),
            ..Report::default()
        };
        Venue {
            cfg,
            limits,
            ips: hashing.map(),
            orders: Vec::new(),
            by_client: hashing.map(),
            by_id: hashing.map(),
            executed: hashing.map(),
            next_order_id: 1,
            next_trade_id: 1,
            next_cancel_id: 1,
            rng,
            fault_seq: 0,
            script,
            report,
            now_hint: 0,
            hub: WsHub::default(),
            pools: hashing.map(),
            tokens: hashing.map(),
            open: hashing.map(),
            held: vec![[HeldScope::default(); 3]; n_accounts],
            next_conn_id: 0,
            deribit_cod: vec![false; n_accounts],
            switches: Vec::new(),
            addresses: crate::engine::address::AddressBook::new(n_accounts),
            revoked: vec![false; n_accounts],
            macs,
        }
    }

    pub(crate) fn config(&self) -> &Config {
        &self.cfg
    }

    /// The report so far.
    pub(crate) fn report(&self) -> Report {
        let mut r = self.report.clone();
        r.limits = self.limits.iter().map(LimitState::usage).collect();
        r
    }

    /// The order registry, oldest first.
    pub(crate) fn orders(&self) -> Vec<OrderView> {
        self.orders
            .iter()
            .map(|o| OrderView {
                account: o.account,
                order_id: o.order_id,
                client_id: o.client_id.clone(),
                status: o.status.name().to_string(),
                executed_qty: fmt_e8(o.executed_e8),
            })
            .collect()
    }

    /// Updates the WebSocket counts.
    pub(crate) fn ws_note(&mut self, f: impl FnOnce(&mut WsCounts)) {
        f(&mut self.report.ws);
    }

    pub(crate) fn note_status(&mut self, status: u16) {
        *self.report.responses.entry(status).or_insert(0) += 1;
    }

    /// A delayed request's wait ended ([`crate::report::FaultCounts::delay_settled`]).
    pub(crate) fn note_delay_settled(&mut self) {
        self.report.faults.delay_settled += 1;
    }

    /// A connection from `ip` was accepted: whether it may stay (the profile's
    /// limit on connections open at once per IP, Deribit's).
    pub(crate) fn note_connection(&mut self, ip: IpAddr) -> bool {
        self.report.connections += 1;
        let open = self.open.entry(ip).or_insert(0);
        if self.cfg.profile == Profile::Deribit && *open >= self.cfg.credits.connections_per_ip {
            self.report.connections_refused += 1;
            return false;
        }
        *open += 1;
        true
    }

    /// A connection admitted by [`Venue::note_connection`] ended.
    pub(crate) fn note_disconnection(&mut self, ip: IpAddr) {
        if let Some(n) = self.open.get_mut(&ip) {
            *n = n.saturating_sub(1);
        }
    }

    pub(crate) fn note_malformed(&mut self) {
        self.report.malformed += 1;
    }

    pub(crate) fn note_fault(&mut self, f: Fault) {
        self.report.faults.bump(f);
    }

    /// Bans `ip` for `duration_ms` from `now`, as an automatic ban would.
    pub(crate) fn ban(&mut self, ip: IpAddr, duration_ms: i64, now: i64) {
        let st = self.ips.entry(ip).or_default();
        st.banned_until = now.saturating_add(duration_ms.max(1));
        st.ban_level += 1;
        st.violations = 0;
        st.throttled_until = 0;
        self.report.bans += 1;
    }

    /// Adds weight to `ip`'s REQUEST_WEIGHT windows that no request of its client
    /// carried (another sender on the same IP).
    pub(crate) fn add_weight(&mut self, ip: IpAddr, weight: u64, now: i64) {
        for l in &mut self.limits {
            if l.spec.kind == LimitType::RequestWeight {
                l.charge(Key::Ip(ip), weight, now);
            }
        }
    }

    pub(crate) fn phantom(&mut self, ip: IpAddr, now: i64) {
        let whole = self.accrue(ip, LimitType::RequestWeight, now);
        if whole > 0 {
            self.add_weight(ip, whole, now);
        }
    }

    /// Another sender on `ip` with the same account (Bybit, OKX): the requests it
    /// sent since the last call, charged to the account's `kind` limit and, where
    /// the profile counts them, to the IP's raw requests. The client sees them only
    /// where the venue reports usage (Bybit's `X-Bapi-Limit-Status`).
    pub(crate) fn phantom_orders(&mut self, ip: IpAddr, account: usize, kind: LimitType, now: i64) {
        let whole = self.accrue(ip, kind, now);
        if whole == 0 {
            return;
        }
        for l in &mut self.limits {
            if l.spec.kind == kind {
                l.charge(Key::Account(account), whole, now);
            } else if l.spec.kind == LimitType::RawRequests {
                l.charge(Key::Ip(ip), whole, now);
            }
        }
    }

    /// Whole units [`Config::other_sender_weight_per_s`] accrued on `ip` since
    /// the last call. Accrues only inside the current window of the shortest `kind`
    /// limit, so an idle gap does not dump a burst of past units into this window.
    fn accrue(&mut self, ip: IpAddr, kind: LimitType, now: i64) -> u64 {
        let rate = self.cfg.other_sender_weight_per_s;
        if rate == 0 {
            return 0;
        }
        let win = self
            .limits
            .iter()
            .filter(|l| l.spec.kind == kind)
            .map(|l| l.spec.window_ms())
            .min()
            .unwrap_or(60_000);
        let st = self.ips.entry(ip).or_default();
        let Some(from) = st.phantom_from else {
            st.phantom_from = Some(now);
            return 0;
        };
        let from = from.max(window_start(now, win));
        let elapsed = u64::try_from(now - from).unwrap_or(0);
        let milli = rate
            .saturating_mul(elapsed)
            .saturating_add(st.phantom_carry);
        st.phantom_carry = milli % 1000;
        st.phantom_from = Some(now);
        milli / 1000
    }

    /// Adds `n` to (or, negative, takes it from) the account's unfilled order
    /// counts in the windows of `at`.
    pub(crate) fn count_order(&mut self, account: usize, n: i64, at: i64) {
        for l in &mut self.limits {
            if l.spec.kind != LimitType::Orders {
                continue;
            }
            if n >= 0 {
                l.charge(Key::Account(account), n.unsigned_abs(), at);
            } else {
                l.uncharge(Key::Account(account), n.unsigned_abs(), at);
            }
        }
    }

    pub(crate) fn retry_after(until: i64, now: i64) -> String {
        let ms = (until - now).max(1);
        ((ms + 999) / 1000).to_string()
    }

    pub(crate) fn draw_fault(&mut self, changes_orders: bool) -> Option<Fault> {
        let f = &self.cfg.faults;
        if f.scope == FaultScope::Orders && !changes_orders {
            return None;
        }
        if f.script.is_empty() && f.chances.is_empty() {
            return None;
        }
        self.fault_seq += 1;
        if let Some(&fault) = self.script.get(&self.fault_seq) {
            return Some(fault);
        }
        if self.cfg.faults.chances.is_empty() {
            return None;
        }
        let u = self.rng.next_f64();
        let mut acc = 0.0;
        for &(fault, p) in &self.cfg.faults.chances {
            acc += p;
            if u < acc {
                return Some(fault);
            }
        }
        None
    }

    /// Books a new order (the next order id; the caller's client id or
    /// `{fresh}{order_id}`), filled or expired at once as [`fate`] says, indexes it and counts its
    /// execution: a client id executed twice is a duplicate. The venue's own
    /// checks and answer stay with the caller. Returns its index.
    pub(crate) fn book_order(
        &mut self,
        account: usize,
        client_id: Option<String>,
        fresh: &str,
        new: Placement,
        now: i64,
    ) -> usize {
        let order_id = self.next_order_id;
        self.next_order_id += 1;
        let client_id = client_id.unwrap_or_else(|| format!("{fresh}{order_id}"));
        let status = fate(&new, self.cfg.mid_price_e8);
        let filled = status == Status::Filled;
        let idx = self.orders.len();
        self.orders.push(Order {
            order_id,
            account,
            client_id: client_id.clone(),
            side: new.side,
            kind: new.kind,
            tif: new.tif,
            price_e8: new.price_e8,
            qty_e8: new.qty_e8,
            executed_e8: if filled { new.qty_e8 } else { 0 },
            status,
            time: now,
            update_time: now,
            conn: None,
        });
        self.by_client.insert((account, client_id.clone()), idx);
        self.by_id.insert(order_id, idx);
        self.report.executions += 1;
        let count = self.executed.entry((account, client_id)).or_insert(0);
        *count += 1;
        if *count > 1 {
            self.report.duplicates += 1;
        }
        idx
    }

    /// Sets the quantity and the price given of order `i`, and counts the modify.
    pub(crate) fn amend_order(
        &mut self,
        i: usize,
        qty_e8: Option<u64>,
        price_e8: Option<u64>,
        now: i64,
    ) {
        let o = &mut self.orders[i];
        if let Some(q) = qty_e8 {
            o.qty_e8 = q;
        }
        if let Some(p) = price_e8 {
            o.price_e8 = p;
        }
        o.update_time = now;
        self.report.modifies += 1;
    }

    /// Cancels order `i` and counts the cancel.
    pub(crate) fn cancel_order(&mut self, i: usize, now: i64) {
        let o = &mut self.orders[i];
        o.status = Status::Canceled;
        o.update_time = now;
        self.report.cancels += 1;
    }

    /// `n` book levels each side of the mid, a tick (0.01) apart, written by
    /// `level`: the bids below the mid (none under zero), then the asks above.
    pub(crate) fn ladder(
        &self,
        n: usize,
        level: impl Fn(u64) -> Value,
    ) -> (Vec<Value>, Vec<Value>) {
        let tick = 1_000_000u64;
        let mid = self.cfg.mid_price_e8;
        let bids = (1..=n as u64)
            .filter_map(|i| mid.checked_sub(i * tick))
            .map(&level)
            .collect();
        let asks = (1..=n as u64).map(|i| level(mid + i * tick)).collect();
        (bids, asks)
    }

    /// The account's open orders, in the order they were placed.
    pub(crate) fn open_orders(&self, account: usize) -> impl Iterator<Item = &Order> {
        self.orders
            .iter()
            .filter(move |o| o.account == account && o.status == Status::New)
    }

    pub(crate) fn spot(&self) -> bool {
        self.cfg.profile == Profile::BinanceSpot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_generator_repeats() {
        let mut a = SplitMix(7);
        let mut b = SplitMix(7);
        for _ in 0..10 {
            let x = a.next_f64();
            assert_eq!(x, b.next_f64());
            assert!((0.0..1.0).contains(&x));
        }
    }
}

/// One armed countdown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Countdown {
    /// The account whose orders it cancels.
    pub(crate) account: usize,
    /// Only this symbol's orders (Binance USD-M), or every order (None).
    pub(crate) symbol: Option<String>,
    /// When it fires, venue UTC ms.
    pub(crate) fires_at_ms: i64,
}

/// A scope whose countdown the venue arms itself when the last connection
/// holding it ends (Bybit DCP: an account's product, held by the private
/// connections subscribed to its `dcp` topic).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct HeldScope {
    /// The countdown's length, ms, as the client last set it (None: never set).
    pub(crate) window_ms: Option<i64>,
    /// Live connections holding the scope.
    pub(crate) live: u32,
}
