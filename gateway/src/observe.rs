//! What the loop publishes for the metrics and health thread: every bucket's
//! [`ergon_core::Stats`] through the boundary's stats seqlock
//! ([`ergon_io::boundary::stats`]), and the gateway's own counters, the ledger's
//! requests in flight and each client's counters through a second seqlock of fixed
//! size ([`OpsSnapshot`]).
//!
//! [`Observed`] wraps a [`Strategy`] (the shared-memory hub in
//! the daemon, `ergon-gatewayd`) and, after the strategy's turn, publishes both at most every
//! [`PUBLISH_EVERY_NS`]. Everything else (reading, rates, health, text) happens on the
//! reader's thread.
//!
//! What this must never do: allocate, lock, format or read a clock on the loop
//! thread after [`observe`]; make the loop wait for a reader.
//!
//! Hooks for features other engineers add: [`Observed::set_protection`] (the dead
//! man's switch) and [`Observed::set_lease`] (the etcd lease) put their state into
//! the publication; the daemon's `health` (ergon-gatewayd) turns `Lapsed` and `Lost` into reasons.

use ergon_io::boundary::seqlock::{seqlock, SeqReader, SeqWriter};
use ergon_io::boundary::stats::{stats_channel, ClientCounters, StatsPublisher, StatsReader};
use ergon_io::event_loop::Readiness;
use ergon_venues::binance_spot_ws::Execution;
use std::cell::Cell;
use std::rc::Rc;

use crate::driver::{Api, Strategy};
use crate::endpoints::Account;
use crate::events::Event;
use crate::machine::Stats;

/// The loop publishes at most this often.
pub const PUBLISH_EVERY_NS: i64 = 100_000_000;
/// Clients published (the first ones; the rest are left out of the metrics).
pub const MAX_PUBLISHED_CLIENTS: usize = 32;
/// Longest client name published, bytes (longer ones are cut).
pub const MAX_CLIENT_NAME: usize = 64;

const NAME_WORDS: usize = MAX_CLIENT_NAME / 8;
const CLIENT_COUNTS: usize = 9;
const CLIENT_WORDS: usize = NAME_WORDS + CLIENT_COUNTS;
const GW_WORDS: usize = 27;
const HEAD_WORDS: usize = 14;
/// Words in one publication of [`OpsSnapshot`].
pub const OPS_WORDS: usize = HEAD_WORDS + GW_WORDS + MAX_PUBLISHED_CLIENTS * CLIENT_WORDS;

/// The dead man's switch as published (set by [`Observed::set_protection`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protection {
    /// No switch in this gateway (the feature is absent or off).
    #[default]
    Absent,
    /// Armed at the venue until `armed_until_ns` (the loop's clock).
    Armed {
        /// When the venue's countdown ends unless refreshed.
        armed_until_ns: i64,
    },
    /// The refresh did not fit in time: the switch may have fired or be about to.
    Lapsed {
        /// When the venue's countdown ended or ends.
        armed_until_ns: i64,
    },
}

/// The etcd lease of account-wide limits as published (set by
/// [`Observed::set_lease`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Lease {
    /// No lease in this gateway (single host).
    #[default]
    Absent,
    /// Held.
    Held,
    /// Lost: the gateway fell back to its safe share.
    Lost,
}

/// One client, as published.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PublishedClient {
    /// Its name (cut at [`MAX_CLIENT_NAME`] bytes).
    pub name: String,
    /// Whether it is attached now.
    pub attached: bool,
    /// Its counters.
    pub stats: ClientStats,
}

/// One consistent publication of the gateway's own state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpsSnapshot {
    /// The loop's clock when it published (0: nothing published yet).
    pub now_ns: i64,
    /// Requests in the ledger (accepted, not yet settled).
    pub in_flight: u64,
    /// The gateway's counters.
    pub gateway: Stats,
    /// The dead man's switch.
    pub protection: Protection,
    /// The etcd lease.
    pub lease: Lease,
    /// The clients (at most [`MAX_PUBLISHED_CLIENTS`]).
    pub clients: Vec<PublishedClient>,
    /// Connect failures in a row to the venue (0: connected), and when the next
    /// attempt is on the loop's clock (the transport backs off between them).
    pub reconnect: (u32, i64),
    /// The venue's address budget (Hyperliquid), once read.
    pub address: Option<crate::endpoints::AddressBudget>,
}

fn gw_words(s: &Stats) -> [u64; GW_WORDS] {
    [
        s.sent,
        s.applied,
        s.rejected,
        s.limited_full,
        s.limited_held,
        s.limited_halted,
        s.limited_too_big,
        s.ledger_full,
        s.busy,
        s.throttled,
        s.banned,
        s.clock_skew,
        s.reanchors,
        s.resent,
        s.expired,
        s.unknown,
        s.reconciled,
        s.reconciled_found,
        s.queries,
        s.halted,
        s.halts_cleared,
        s.polls,
        s.unresolved,
        s.late,
        s.watch_dropped,
        s.duplicate_ids,
        s.unresolved_refused,
    ]
}

fn gw_stats(w: &[u64]) -> Stats {
    Stats {
        sent: w[0],
        applied: w[1],
        rejected: w[2],
        limited_full: w[3],
        limited_held: w[4],
        limited_halted: w[5],
        limited_too_big: w[6],
        ledger_full: w[7],
        busy: w[8],
        throttled: w[9],
        banned: w[10],
        clock_skew: w[11],
        reanchors: w[12],
        resent: w[13],
        expired: w[14],
        unknown: w[15],
        reconciled: w[16],
        reconciled_found: w[17],
        queries: w[18],
        halted: w[19],
        halts_cleared: w[20],
        polls: w[21],
        unresolved: w[22],
        late: w[23],
        watch_dropped: w[24],
        duplicate_ids: w[25],
        unresolved_refused: w[26],
    }
}

/// One client's counts (they appear in the stats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Calls taken from its submit ring.
    pub submitted: u64,
    /// Accepted by the gateway (charged and sent, or queued to send).
    pub accepted: u64,
    /// Refused by its share ceiling.
    pub over_share: u64,
    /// Step events not delivered: a `Retrying` repeated, or no ring room beyond
    /// what its requests in flight need for their final events.
    pub merged_steps: u64,
    /// Refused by the budget.
    pub limited: u64,
    /// Calls that did not decode or that the venue's endpoints refused.
    pub bad: u64,
    /// Final events delivered.
    pub finals: u64,
    /// Events that found its event ring full (must stay 0).
    pub lost_events: u64,
    /// Calls refused because a client order id they name is not in its blocks
    /// ([`crate::shm::ShmEvent::NotYours`]).
    pub not_yours: u64,
    /// Attaches under its name.
    pub attaches: u64,
}

/// Strategies whose clients are published (the hub's); others have none.
pub trait PublishClients {
    /// Calls `f` with each client's name, whether it is attached, and its counts.
    /// Must not allocate.
    fn each_client(&self, _f: &mut dyn FnMut(&str, bool, &ClientStats)) {}

    /// The etcd lease's state, if this strategy holds the leased limits; `None`
    /// leaves what [`Observed::set_lease`] said.
    fn lease(&self) -> Option<Lease> {
        None
    }
}

/// A strategy that publishes the gateway's state after each of its turns (at most
/// every [`PUBLISH_EVERY_NS`]).
pub struct Observed<S> {
    inner: S,
    stats: StatsPublisher,
    ops: SeqWriter<OPS_WORDS>,
    words: Box<[u64; OPS_WORDS]>,
    next_ns: i64,
    every_ns: i64,
    protection: Rc<Cell<Protection>>,
    lease: Lease,
}

impl<S> core::fmt::Debug for Observed<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Observed").finish_non_exhaustive()
    }
}

/// The reader's side: clone one per monitoring thread.
#[derive(Clone, Debug)]
pub struct ObservedReader {
    /// Every bucket's stats.
    pub stats: StatsReader,
    ops: SeqReader<OPS_WORDS>,
}

/// Wraps `inner`; the reader goes to the monitoring thread.
pub fn observe<S>(inner: S) -> (Observed<S>, ObservedReader) {
    let (stats, reader) = stats_channel();
    let (ops, ops_reader) = seqlock::<OPS_WORDS>();
    (
        Observed {
            inner,
            stats,
            ops,
            words: Box::new([0; OPS_WORDS]),
            next_ns: i64::MIN,
            every_ns: PUBLISH_EVERY_NS,
            protection: Rc::new(Cell::new(Protection::Absent)),
            lease: Lease::Absent,
        },
        ObservedReader {
            stats: reader,
            ops: ops_reader,
        },
    )
}

impl<S> Observed<S> {
    /// The wrapped strategy.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Publishes at most every `every_ns` instead of [`PUBLISH_EVERY_NS`] (0: every
    /// turn, as the allocation test does).
    pub fn with_period(mut self, every_ns: i64) -> Self {
        self.every_ns = every_ns.max(0);
        self
    }

    /// The wrapped strategy, mutably.
    pub fn inner_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Hook for the dead man's switch: its state, published from the next turn.
    pub fn set_protection(&mut self, p: Protection) {
        self.protection.set(p);
    }

    /// Where the dead man's switch posts its state when it wraps this strategy
    /// (it cannot reach its inner strategy's methods): the same cell
    /// [`Observed::set_protection`] sets, on the loop's thread.
    pub fn protection_cell(&self) -> Rc<Cell<Protection>> {
        Rc::clone(&self.protection)
    }

    /// Hook for the etcd lease when the wrapped strategy does not say it
    /// ([`PublishClients::lease`]): published from the next turn.
    pub fn set_lease(&mut self, l: Lease) {
        self.lease = l;
    }
}

impl<S: PublishClients> Observed<S> {
    fn publish<E: Account>(&mut self, api: &mut Api<'_, '_, E>) {
        let now = api.now();
        if now < self.next_ns {
            return;
        }
        self.next_ns = now.saturating_add(self.every_ns);
        let g = *api.stats();
        let address = api.venue().address_budget();
        let in_flight = api.in_flight() as u64;
        let (failing, retry_at) = api.reconnect();
        self.stats
            .publish(api.budget(), &ClientCounters::default(), now);
        // In the same turn as the counters: the labels' totals are never behind
        // the buckets' (the metrics compare them).
        api.publish_labels();
        let w = &mut *self.words;
        let (p, p_until) = match self.protection.get() {
            Protection::Absent => (0, 0),
            Protection::Armed { armed_until_ns } => (1, armed_until_ns),
            Protection::Lapsed { armed_until_ns } => (2, armed_until_ns),
        };
        let lease = match self.inner.lease().unwrap_or(self.lease) {
            Lease::Absent => 0,
            Lease::Held => 1,
            Lease::Lost => 2,
        };
        let mut n = 0;
        self.inner.each_client(&mut |name, attached, s| {
            if n >= MAX_PUBLISHED_CLIENTS {
                return;
            }
            let at = HEAD_WORDS + GW_WORDS + n * CLIENT_WORDS;
            let row = &mut w[at..at + CLIENT_WORDS];
            let bytes = &name.as_bytes()[..name.len().min(MAX_CLIENT_NAME)];
            for (k, cell) in row[..NAME_WORDS].iter_mut().enumerate() {
                let mut b = [0u8; 8];
                let part = bytes.get(k * 8..).unwrap_or(&[]);
                let m = part.len().min(8);
                b[..m].copy_from_slice(&part[..m]);
                *cell = u64::from_le_bytes(b);
            }
            row[NAME_WORDS..].copy_from_slice(&[
                u64::from(attached),
                s.submitted,
                s.accepted,
                s.over_share,
                s.limited,
                s.bad,
                s.finals,
                s.lost_events,
                s.attaches,
            ]);
            n += 1;
        });
        w[..HEAD_WORDS].copy_from_slice(&[
            now as u64,
            in_flight,
            p,
            p_until as u64,
            lease,
            n as u64,
            u64::from(failing),
            retry_at as u64,
            0,
            u64::from(address.is_some()),
            address.map_or(0, |a| a.used),
            address.map_or(0, |a| a.cap),
            address.map_or(0, |a| a.surplus),
            // Milli-hours; u64::MAX: no forecast.
            address
                .and_then(|a| a.forecast_hours)
                .map_or(u64::MAX, |h| (h * 1e3).clamp(0.0, 1e18) as u64),
        ]);
        w[HEAD_WORDS..HEAD_WORDS + GW_WORDS].copy_from_slice(&gw_words(&g));
        self.ops.publish(w);
    }
}

impl ObservedReader {
    /// The latest publication of the gateway's own state.
    pub fn read_ops(&self) -> OpsSnapshot {
        let mut w = Box::new([0u64; OPS_WORDS]);
        self.ops.read(&mut w);
        let n = (w[5] as usize).min(MAX_PUBLISHED_CLIENTS);
        let clients = (0..n)
            .map(|i| {
                let at = HEAD_WORDS + GW_WORDS + i * CLIENT_WORDS;
                let row = &w[at..at + CLIENT_WORDS];
                let mut name = Vec::with_capacity(MAX_CLIENT_NAME);
                for cell in &row[..NAME_WORDS] {
                    name.extend_from_slice(&cell.to_le_bytes());
                }
                let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                let c = &row[NAME_WORDS..];
                PublishedClient {
                    name: String::from_utf8_lossy(&name[..len]).into_owned(),
                    attached: c[0] != 0,
                    stats: ClientStats {
                        submitted: c[1],
                        accepted: c[2],
                        over_share: c[3],
                        limited: c[4],
                        bad: c[5],
                        finals: c[6],
                        lost_events: c[7],
                        attaches: c[8],
                        // Not published: the hub's own --stats lines show it.
                        ..ClientStats::default()
                    },
                }
            })
            .collect();
        OpsSnapshot {
            now_ns: w[0] as i64,
            in_flight: w[1],
            protection: match w[2] {
                1 => Protection::Armed {
                    armed_until_ns: w[3] as i64,
                },
                2 => Protection::Lapsed {
                    armed_until_ns: w[3] as i64,
                },
                _ => Protection::Absent,
            },
            lease: match w[4] {
                1 => Lease::Held,
                2 => Lease::Lost,
                _ => Lease::Absent,
            },
            gateway: gw_stats(&w[HEAD_WORDS..HEAD_WORDS + GW_WORDS]),
            clients,
            reconnect: (u32::try_from(w[6]).unwrap_or(u32::MAX), w[7] as i64),
            address: (w[9] != 0).then(|| crate::endpoints::AddressBudget {
                used: w[10],
                cap: w[11],
                surplus: w[12],
                forecast_hours: (w[13] != u64::MAX).then(|| w[13] as f64 / 1e3),
            }),
        }
    }
}

impl<E: Account, S: Strategy<E> + PublishClients> Strategy<E> for Observed<S> {
    fn on_event(&mut self, gw: &mut Api<'_, '_, E>, event: Event<'_>) {
        self.inner.on_event(gw, event);
    }

    fn on_turn(&mut self, gw: &mut Api<'_, '_, E>) {
        self.inner.on_turn(gw);
        self.publish(gw);
    }

    fn on_order_update(&mut self, gw: &mut Api<'_, '_, E>, update: &Execution) {
        self.inner.on_order_update(gw, update);
    }

    fn on_timer(&mut self, gw: &mut Api<'_, '_, E>, token: u64) {
        self.inner.on_timer(gw, token);
    }

    fn on_fd(&mut self, gw: &mut Api<'_, '_, E>, token: u64, ready: Readiness) {
        self.inner.on_fd(gw, token, ready);
    }

    fn before_park(&mut self, gw: &mut Api<'_, '_, E>) -> bool {
        self.inner.before_park(gw)
    }
}
