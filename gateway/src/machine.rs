//! The gateway itself: submit, the answers and errors of the transport, and the
//! turn's due work (re-sends and reconcile queries), each producing typed events.

use std::collections::VecDeque;

use arrayvec::{ArrayString, ArrayVec};
use ergon_core::{
    BucketId, Budget, Class, Flight, Limited, Part, Resend, Verdict, Why, MAX_BUCKETS,
};
use ergon_venues::adapt::{self, Clock, Request as Kind};
use ergon_venues::endpoint::{
    ClientOrderId, Label, Lookup, OrderRef, OrderState, Prepared, Symbol, MAX_BATCH,
};
use ergon_venues::response::Response;

use super::endpoints::Account;
use super::events::{Event, Expiry, ItemFate, Tag, OPEN_ORDERS};
use super::ids::{IdError, IdIssuer};
use super::labels::{label_channel, LabelError, LabelPublisher, LabelReader, Labels};
use super::lane_api::LaneIn;
use super::ledger::{Entry, Key, Ledger, Stage};
use super::record::{self, Declarations, Kind as Rec, Record, Recorder, Writer, Written, NO_LABEL};
use super::shapes::Shapes;
use super::shm::ChargeLog;
use super::wire::{encode, Wire};
use super::ws_api::{Item, SubCharge, Unsent, WsLane, WsReport, WS_BIT};
use ergon_io::client::{RequestId, Sent};
use ergon_io::event_loop::{Readiness, Registry};

/// How long a step that could not go out waits before it is tried again, when the
/// budget gave no better time (no idle connection, a query that settled nothing).
pub const RETRY_GAP_NS: i64 = 20_000_000;

/// Re-sends of one request after the venue's own "not run" answers, at most (a
/// transport that hands a request back unsent does not count): a venue that keeps
/// answering "not run" to the
/// same bytes (a cancel-replace whose cancel keeps failing) ends it as Expired
/// instead of spending the budget until the deadline.
pub const MAX_RESENDS: u8 = 3;

/// The first re-send's gap after a venue's "not run" or clock-skew answer; each
/// further one doubles it (with jitter, up to [`RESEND_BACKOFF_MAX_NS`]), so one
/// failing request cannot take the bucket.
pub const RESEND_BACKOFF_NS: i64 = 25_000_000;

/// The longest gap before a re-send.
pub const RESEND_BACKOFF_MAX_NS: i64 = 1_000_000_000;

/// Clock-skew answers in a row after which the gateway re-anchors the venue clock.
pub const SKEWS_TO_REANCHOR: u32 = 2;

/// Reconcile queries of one request, at most, that may come back without settling
/// it; past them it ends [`Event::Unresolved`].
pub const MAX_QUERIES: u8 = 32;

/// The first re-query's gap; each further one doubles it (with jitter, up to
/// [`QUERY_BACKOFF_MAX_NS`]).
pub const QUERY_BACKOFF_NS: i64 = 50_000_000;

/// The longest gap between two reconcile queries of one request.
pub const QUERY_BACKOFF_MAX_NS: i64 = 5_000_000_000;

/// The class every reconcile query is charged at, whatever the request's: a stuck
/// reconcile of an Urgent cancel must not take the headroom other cancels need.
pub const QUERY_CLASS: Class = Class::Normal;

/// Where the venue states no bound ([`Account::not_found_after`] is None): how long
/// after its outcome became unknown a request that is still not found ends
/// [`Event::Unresolved`] (by default; [`Gateway::set_unresolved_after_ns`]).
pub const UNRESOLVED_AFTER_NS: i64 = 10_000_000_000;

/// How long the client order id of an [`Event::Unresolved`] request stays watched
/// for an [`Event::Late`] (by default; [`Gateway::set_watch_ns`]).
pub const WATCH_NS: i64 = 120_000_000_000;

/// What the gateway did, counted since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests handed to the transport (first sends, re-sends and queries).
    pub sent: u64,
    /// Applied events.
    pub applied: u64,
    /// Rejected events (the venue's business refusals, and requests that cannot be
    /// charged or encoded).
    pub rejected: u64,
    /// Submits refused locally, by reason.
    pub limited_full: u64,
    /// ... the scope is held after a throttle.
    pub limited_held: u64,
    /// ... the scope is halted after a ban.
    pub limited_halted: u64,
    /// ... the request is larger than a limit (or can never pass for another
    /// reason of the caller's: a foreign id, or a new part list while the budget's
    /// table of lists is held full, [`Why::Receipts`]).
    pub limited_too_big: u64,
    /// ... every ledger slot is taken.
    pub ledger_full: u64,
    /// ... a client order id it places is live ([`Event::DuplicateId`]).
    pub duplicate_ids: u64,
    /// Sends the transport handed back (no idle connection): refunded, retried.
    pub busy: u64,
    /// Answers the venue throttled (429 or its body code).
    pub throttled: u64,
    /// Answers that were a ban.
    pub banned: u64,
    /// Answers refused for their timestamp.
    pub clock_skew: u64,
    /// Re-anchors of the venue clock after repeated skew.
    pub reanchors: u64,
    /// Re-sends under `Budget::resend` (only what surely did not run).
    pub resent: u64,
    /// Requests whose deadline passed before a re-send.
    pub expired: u64,
    /// Writes whose outcome was unknown (Reconciling events).
    pub unknown: u64,
    /// Unknown outcomes settled by a query (Reconciled events).
    pub reconciled: u64,
    /// ... of which the order existed.
    pub reconciled_found: u64,
    /// Reconcile queries sent.
    pub queries: u64,
    /// Requests that ended Halted.
    pub halted: u64,
    /// Halts cleared by a person.
    pub halts_cleared: u64,
    /// Open-order polls answered.
    pub polls: u64,
    /// Requests that ended Unresolved.
    pub unresolved: u64,
    /// Late events (an unresolved order seen after all).
    pub late: u64,
    /// Watched ids dropped before their time because the watch list was full.
    pub watch_dropped: u64,
}

/// The client order id of a request that ended [`Event::Unresolved`], watched
/// until `until_ns`.
#[derive(Clone, Copy, Debug)]
struct Watched {
    id: ClientOrderId,
    tag: Tag,
    until_ns: i64,
}

/// One venue account on one egress lane. See [the crate](crate) for the
/// drive order and the settle rule.
#[derive(Debug)]
pub struct Gateway<E> {
    venue: E,
    symbol: ArrayString<32>,
    ledger: Ledger,
    pending: VecDeque<Event<'static>>,
    due: Vec<Key>,
    next_due: i64,
    skews: u32,
    /// The gateway's own time read on the wire: its id and when it was sent.
    time: Option<(RequestId, i64)>,
    /// Open orders polled this often (None: not at all).
    open_every: Option<i64>,
    next_open: i64,
    /// A one-off poll of open orders due at this time
    /// ([`Gateway::poll_open_orders_once`]).
    open_once: Option<i64>,
    /// The poll on the wire: its id and when it was sent.
    open: Option<(RequestId, i64)>,
    open_req: Prepared,
    stats: Stats,
    trace: Trace,
    /// Order entry and the order stream over the WebSocket API, if set.
    ws: Option<WsLane>,
    labels: Labels,
    label_publisher: Option<LabelPublisher>,
    /// The shapes its part lists are charged as.
    shapes: Shapes,
    /// Unresolved requests' ids, watched for a late appearance (pre-sized).
    watch: Vec<Watched>,
    watch_ns: i64,
    unresolved_after_ns: i64,
    /// The jitter's seeded generator (splitmix64 state).
    rng: u64,
    /// Client order ids of this boot (None until a boot epoch is set).
    ids: Option<IdIssuer>,
}

/// The recording side of a gateway: the recorder, if on, and the trace id of each
/// ledger slot's current charge (and of the poll's and the time read's).
#[derive(Debug, Default)]
struct Trace {
    recorder: Option<Recorder>,
    /// The writer thread, when the gateway started it ([`Gateway::record_to`]).
    writer: Option<Writer>,
    next: u64,
    slots: Vec<u64>,
    open: u64,
    time: u64,
    /// The WebSocket API's connect charge until its handshake settles.
    ws_connect: u64,
    /// The WebSocket API's subscribe request's charge until it settles.
    ws_sub: u64,
    /// The transport's connect charges as last recorded ([`Wire::connects`]).
    connects: (u64, u64),
    /// Each bucket's count of usage figures read ([`ergon_core::Stats::observes`])
    /// as last recorded, by bucket index.
    observes: Vec<u64>,
    /// Where each admitted charge is kept for the next start
    /// ([`Gateway::keep_charges`]).
    charges: Option<ChargeLog>,
}

impl Trace {
    /// Records a charge of `parts` at `class` under `label`; its trace id (0: not
    /// recording).
    /// `admitted` is what the live budget decided (the line's `"live"`).
    fn charge(
        &mut self,
        now: i64,
        parts: &[Part],
        class: Class,
        label: Label,
        admitted: bool,
    ) -> u64 {
        // Before the request leaves: stores into the mapped file, nothing more.
        if let (Some(log), true) = (&self.charges, admitted) {
            log.add(parts, now);
        }
        let Some(r) = &self.recorder else {
            return 0;
        };
        self.next += 1;
        let mut p = [(0u8, 0u32); ergon_core::MAX_PARTS];
        for (slot, part) in p.iter_mut().zip(parts) {
            // Bucket indices fit a u8: a budget has at most 255 buckets.
            *slot = (part.bucket.index() as u8, part.cost);
        }
        let n = parts.len().min(p.len());
        let label = label.index().unwrap_or(NO_LABEL);
        r.push(Record::charge(now, self.next, class, label, &p[..n]).live(admitted));
        self.next
    }

    /// Records the transport's connect charges since the last call (see
    /// [`Gateway::note_connects`]), at `venue`'s connect parts, Urgent (the pool's).
    fn connects<W: Wire, E: Account>(&mut self, w: &W, venue: &E) {
        if self.recorder.is_none() {
            return;
        }
        let (left, refused) = w.connects();
        let (left0, refused0) = core::mem::replace(&mut self.connects, (left, refused));
        if (left0, refused0) == (left, refused) {
            return;
        }
        let Ok(parts) = venue.parts(Kind::Connect) else {
            return;
        };
        let now = w.now();
        for _ in left0..left {
            let tid = self.charge(now, &parts, Class::Urgent, Label::NONE, true);
            self.done(now, tid);
        }
        for _ in refused0..refused {
            self.charge(now, &parts, Class::Urgent, Label::NONE, false);
        }
    }

    /// Records a refund of charge `id`.
    fn refund(&self, now: i64, id: u64) {
        if let (Some(r), true) = (&self.recorder, id != 0) {
            r.push(Record::lifecycle(now, Rec::Refund, id));
        }
    }

    /// Records the completion of charge `id`: the trace's `sent` then `complete`
    /// (the transport marks a send inside the client; a completed request was sent).
    fn done(&self, now: i64, id: u64) {
        if let (Some(r), true) = (&self.recorder, id != 0) {
            r.push(Record::lifecycle(now, Rec::Sent, id));
            r.push(Record::lifecycle(now, Rec::Complete, id));
        }
    }

    /// Records the usage figures the adapter fed `budget` since the last call: one
    /// observe line per bucket whose count of figures moved, with its last figure.
    fn observed(&mut self, now: i64, budget: &Budget) {
        let Some(r) = &self.recorder else {
            return;
        };
        for id in budget.ids() {
            let (Ok(s), Some(seen)) = (budget.stats(id), self.observes.get_mut(id.index())) else {
                continue;
            };
            if s.observes != *seen {
                *seen = s.observes;
                let used = i64::try_from(s.observed).unwrap_or(i64::MAX);
                r.push(Record::observe(now, id.index() as u8, used, s.observed_at));
            }
        }
    }

    /// Records a fixed window's new phase.
    fn phase(&self, now: i64, bucket: BucketId, phase_ns: i64) {
        if let Some(r) = &self.recorder {
            r.push(Record::bucket(
                now,
                Rec::Phase,
                bucket.index() as u8,
                phase_ns,
            ));
        }
    }

    /// Records a throttle or ban the verdict says the budget took.
    fn verdict(&self, now: i64, v: &Verdict) {
        let Some(r) = &self.recorder else {
            return;
        };
        let (kind, bucket, until) = match *v {
            Verdict::Throttled { bucket, until_ns } => (Rec::Throttled, bucket, until_ns),
            Verdict::Banned { bucket, until_ns } => (Rec::Banned, bucket, until_ns),
            _ => return,
        };
        let wait = until.saturating_sub(now).max(0);
        r.push(Record::bucket(now, kind, bucket.index() as u8, wait));
    }

    fn slot(&self, key: Key) -> u64 {
        self.slots.get(key.index()).copied().unwrap_or(0)
    }

    fn set(&mut self, key: Key, id: u64) {
        if let Some(s) = self.slots.get_mut(key.index()) {
            *s = id;
        }
    }
}

impl<E: Account> Gateway<E> {
    /// A gateway for `venue` trading `symbol` (what its reconcile queries name),
    /// with room for `capacity` requests in flight, each with buffers of `bytes`
    /// bytes. Everything it needs is allocated here.
    pub fn new(
        venue: E,
        symbol: &str,
        capacity: usize,
        bytes: usize,
    ) -> Result<Self, adapt::Error> {
        let capacity = capacity.max(1);
        Symbol::new(symbol)?;
        let symbol = ArrayString::from(symbol).map_err(|_| adapt::Error::BadArgument("symbol"))?;
        Ok(Gateway {
            venue,
            symbol,
            ledger: Ledger::new(capacity, bytes),
            pending: VecDeque::with_capacity(3 * capacity + 8),
            due: Vec::with_capacity(capacity),
            next_due: i64::MAX,
            skews: 0,
            time: None,
            open_every: None,
            next_open: i64::MIN,
            open_once: None,
            open: None,
            open_req: Prepared::with_capacity(bytes),
            stats: Stats::default(),
            trace: Trace {
                slots: vec![0; capacity],
                ..Trace::default()
            },
            ws: None,
            labels: Labels::default(),
            label_publisher: None,
            shapes: Shapes::default(),
            watch: Vec::with_capacity(capacity),
            watch_ns: WATCH_NS,
            unresolved_after_ns: UNRESOLVED_AFTER_NS,
            rng: 0x5EED_0FE2_6000_0001_u64,
            ids: None,
        })
    }

    /// Sets the boot epoch its client order ids carry ([`super::ids::boot_epoch`];
    /// the bootstrap sets the start's wall-clock milliseconds, `ergon-gateway` the
    /// epoch its journal keeps). Setting the epoch it already has changes
    /// nothing; another one starts its sequence again.
    pub fn set_boot_epoch(&mut self, epoch: u64) -> Result<(), IdError> {
        if self.ids.is_some_and(|i| i.epoch() == epoch) {
            return Ok(());
        }
        self.ids = Some(IdIssuer::new(E::ID_FORMAT, epoch)?);
        Ok(())
    }

    /// A client order id no earlier one of this boot or of an earlier boot
    /// carried, in the venue's form (see [`super::ids`]). Reads no clock,
    /// allocates nothing.
    pub fn next_client_order_id(&mut self) -> Result<ClientOrderId, IdError> {
        self.ids.as_mut().ok_or(IdError::NoEpoch)?.next_id()
    }

    /// Takes `n` ids out of its issuer for another process to issue (a strategy
    /// attached over shared memory).
    pub fn id_block(&mut self, n: u64) -> Result<IdIssuer, IdError> {
        self.ids.as_mut().ok_or(IdError::NoEpoch)?.block(n)
    }

    /// Whether `id` is live here: a request in the ledger names it, or it ended
    /// Unresolved and is still watched at `now`.
    fn id_is_live(&self, id: &ClientOrderId, now: i64) -> bool {
        self.ledger.holds_id(id) || self.watch.iter().any(|w| w.until_ns > now && w.id == *id)
    }

    /// How long an [`Event::Unresolved`] request's client order id stays watched
    /// for an [`Event::Late`] (default [`WATCH_NS`]).
    pub fn set_watch_ns(&mut self, ns: i64) {
        self.watch_ns = ns.max(0);
    }

    /// Where the venue states no bound: how long after its outcome became unknown a
    /// request still not found ends [`Event::Unresolved`] (default
    /// [`UNRESOLVED_AFTER_NS`]).
    pub fn set_unresolved_after_ns(&mut self, ns: i64) {
        self.unresolved_after_ns = ns.max(0);
    }

    /// Seeds the generator of the re-query and re-send jitter (the default seed is
    /// fixed: runs are reproducible).
    pub fn set_seed(&mut self, seed: u64) {
        self.rng = seed;
    }

    /// A gap of `base << n` up to `max`, jittered to between half and all of it.
    fn backoff(&mut self, n: u8, base: i64, max: i64) -> i64 {
        let full = base.saturating_mul(1i64 << n.min(30)).clamp(1, max.max(1));
        // splitmix64: a seeded sequence, no clock.
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let half = full / 2;
        half + (z % (full - half + 1) as u64) as i64
    }

    /// Ends `key`'s request [`Event::Unresolved`]: frees its slot and watches its
    /// client order id (if it has one) for [`WATCH_NS`].
    fn unresolve(&mut self, key: Key, now: i64) -> Option<Event<'static>> {
        let e = self.ledger.get(key)?;
        let (tag, batch, id) = (e.tag, e.items != 0, queried_id(e).copied());
        if !batch {
            self.ledger.remove(key);
        }
        self.stats.unresolved += 1;
        if let Some(id) = id {
            self.watch.retain(|w| w.until_ns > now);
            if self.watch.len() == self.watch.capacity() {
                // Full: the one whose watch ends first goes.
                if let Some(i) = (0..self.watch.len()).min_by_key(|&i| self.watch[i].until_ns) {
                    self.watch.swap_remove(i);
                    self.stats.watch_dropped += 1;
                }
            }
            self.watch.push(Watched {
                id,
                tag,
                until_ns: now.saturating_add(self.watch_ns),
            });
        }
        if batch {
            return self.next_item(key, now, ItemFate::Unresolved);
        }
        Some(Event::Unresolved { tag })
    }

    /// The item of a batch being reconciled that `key`'s queries were about ended
    /// `fate`: its [`Event::Item`], then the next unknown item's query, or, after
    /// the last, [`Event::BatchSettled`] (both queued, in that order).
    fn next_item(&mut self, key: Key, now: i64, fate: ItemFate) -> Option<Event<'static>> {
        let e = self.ledger.get_mut(key)?;
        let (tag, item) = (e.tag, e.item);
        e.items &= !(1 << item);
        // Grows past its reserve only for a batch's items (rare, off the send path).
        self.pending.push_back(Event::Item { tag, item, fate });
        if e.items != 0 {
            e.item = e.items.trailing_zeros() as u8;
            e.queries = 0;
            e.closed = false;
            e.stage = Stage::Reconcile;
            e.at_ns = now;
            self.next_due = self.next_due.min(now);
            return None;
        }
        self.ledger.remove(key);
        self.pending.push_back(Event::BatchSettled { tag });
        None
    }

    /// A batch answer read as Done: the items the venue's answer leaves unknown
    /// (bit `i` for item `i`). Where there are some, `key`'s entry keeps them to
    /// reconcile each by its own id, and an [`Event::Item`] is queued for each of
    /// the others.
    fn batch_unknown(&mut self, key: Key) -> u32 {
        let Some(e) = self.ledger.get_mut(key) else {
            return 0;
        };
        if !matches!(e.req.kind(), Some(Kind::Batch(_))) {
            return 0;
        }
        let items = self.venue.batch_items();
        // An item the answer does not list (a list shorter than the batch) is
        // unknown too.
        let n = e.req.client_order_ids().len().min(MAX_BATCH);
        if items.is_empty() {
            return 0;
        }
        let unknown = (0..n)
            .filter(|&i| items.get(i).map_or(true, |v| *v == Verdict::Unknown))
            .fold(0u32, |m, i| m | 1 << i);
        if unknown == 0 {
            return 0;
        }
        e.items = unknown;
        for (i, v) in items.iter().take(MAX_BATCH).enumerate() {
            let fate = match v {
                Verdict::Unknown => continue,
                Verdict::Done => ItemFate::Applied,
                Verdict::Rejected => ItemFate::Rejected,
                _ => ItemFate::NotRun,
            };
            self.pending.push_back(Event::Item {
                tag: e.tag,
                item: i as u8,
                fate,
            });
        }
        unknown
    }

    /// An order `id` seen at the venue in `state` at `now`: if it is watched, an
    /// [`Event::Late`] is queued and the watch ends.
    fn seen(&mut self, id: &[u8], state: OrderState, now: i64) {
        seen_in(
            &mut self.watch,
            &mut self.pending,
            &mut self.stats,
            id,
            state,
            now,
        );
    }

    /// The label named `name` (registered now if it is new): put it on a prepared
    /// request with [`Prepared::set_label`] to count what the request spends under
    /// it (see [`super::labels`]). Register labels before recording
    /// ([`super::Start::labels`]) for the record to name them.
    pub fn label(&mut self, name: &str) -> Result<Label, LabelError> {
        self.labels.register(name)
    }

    /// The counters by label.
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// A reader of the counters by label for a monitoring thread; from now on
    /// [`Gateway::publish_labels`] publishes them (the [`super::Driver`] calls it
    /// every turn).
    pub fn label_reader(&mut self) -> LabelReader {
        let (publisher, reader) = label_channel();
        self.label_publisher = Some(publisher);
        reader
    }

    /// With `every`, starts a monitoring thread that prints the counters by label
    /// every `every` ([`super::labels::spawn_monitor`]).
    pub fn monitor_labels(
        &mut self,
        budget: &ergon_core::Budget,
        every: Option<std::time::Duration>,
    ) -> std::io::Result<Option<super::labels::MonitorThread>> {
        every
            .map(|e| super::labels::spawn_monitor(self.label_reader(), budget, e))
            .transpose()
    }

    /// Publishes the counters by label to [`Gateway::label_reader`]'s reader, at
    /// most every [`super::labels::PUBLISH_EVERY_NS`]; with `now`, at once (the
    /// last publication of a run).
    pub fn publish_labels(&mut self, now_ns: i64, now: bool) {
        match &mut self.label_publisher {
            Some(p) if now => p.publish_now(&self.labels, now_ns),
            Some(p) => p.publish(&self.labels, now_ns),
            None => {}
        }
    }

    /// The venue's endpoints.
    pub fn venue(&self) -> &E {
        &self.venue
    }

    /// The venue's endpoints, to prepare requests (signing may keep state).
    pub fn venue_mut(&mut self) -> &mut E {
        &mut self.venue
    }

    /// The symbol its reconcile queries name.
    pub fn symbol(&self) -> Symbol<'_> {
        // Checked in `new`.
        Symbol::new(self.symbol.as_str()).unwrap_or_else(|_| unreachable!())
    }

    /// Records every budget call it makes from now on into `recorder`, as an
    /// `ergon-replay` trace (see [`super::record`]): charges, refunds, sends,
    /// completions, throttles, bans, cleared halts, the usage figures the adapter
    /// reads from answers and the windows' re-anchors.
    pub fn record(&mut self, recorder: Recorder) {
        self.trace.recorder = Some(recorder);
        self.trace.observes = vec![0; MAX_BUCKETS];
    }

    /// Keeps every charge the gateway's budget admits from here in `log` (mapped
    /// from a file a restarted gateway reads back: [`ChargeLog`]), before the
    /// request leaves.
    pub fn keep_charges(&mut self, log: ChargeLog) {
        self.trace.charges = Some(log);
    }

    /// Records into the file at `path` (created or truncated) with `budget`'s buckets
    /// as its declarations, through a ring of [`record::RING`] records; the writer
    /// thread runs until [`Gateway::finish_record`] or the gateway's drop.
    pub fn record_to(
        &mut self,
        path: &std::path::Path,
        budget: &ergon_core::Budget,
    ) -> std::io::Result<()> {
        let mut decl = Declarations::of(budget);
        decl.labels = self.labels.names().map(String::from).collect();
        let (recorder, writer) = record::start(path, decl, record::RING)?;
        self.record(recorder);
        self.trace.writer = Some(writer);
        Ok(())
    }

    /// Stops recording: the writer [`Gateway::record_to`] started drains the ring,
    /// flushes the file and reports (None: it started none).
    pub fn finish_record(&mut self) -> Option<std::io::Result<Written>> {
        self.trace.recorder = None;
        self.trace.writer.take().map(Writer::finish)
    }

    /// What it did so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The requests accepted and not yet settled.
    pub fn in_flight(&self) -> usize {
        self.ledger.len()
    }

    /// Polls the venue's open orders every `every_ns` (at [`Class::Normal`], when
    /// the budget has room): the answers come as [`Event::OpenOrders`]. This is how
    /// a venue without a usable user data stream tells which orders ended.
    pub fn poll_open_orders(&mut self, every_ns: i64) {
        self.open_every = Some(every_ns.max(1));
    }

    /// Polls the venue's open orders once, at `now_ns` or as soon as the budget
    /// has room (besides any [`Gateway::poll_open_orders`]): its answer comes as
    /// one [`Event::OpenOrders`]. After the venue's dead man's switch fired, that
    /// answer says which quotes still rest.
    pub fn poll_open_orders_once(&mut self, now_ns: i64) {
        self.open_once = Some(self.open_once.map_or(now_ns, |at| at.min(now_ns)));
    }

    /// The earliest time its due work (a re-send, a query, a poll) wants a
    /// [`Gateway::poll`].
    pub fn poll_timeout(&self) -> Option<i64> {
        let open = match (self.open_every, self.open) {
            (Some(_), None) => self.next_open,
            _ => i64::MAX,
        };
        let once = match self.open {
            None => self.open_once.unwrap_or(i64::MAX),
            Some(_) => i64::MAX,
        };
        let at = self.next_due.min(open).min(once);
        (at != i64::MAX).then_some(at)
    }

    /// Sends the open-orders poll if it is due.
    fn poll_open<W: Wire>(&mut self, w: &mut W) {
        let now = w.now();
        let periodic = self.open_every.is_some() && now >= self.next_open;
        let once = self.open_once.is_some_and(|at| now >= at);
        if self.open.is_some() || !(periodic || once) {
            return;
        }
        // A one-off poll alone retries within a second.
        let every = self.open_every.unwrap_or(1_000_000_000);
        if self.open_every.is_some() {
            self.next_open = now + every;
        }
        let Ok(symbol) = Symbol::new(self.symbol.as_str()) else {
            self.open_once = None;
            return;
        };
        if self
            .venue
            .open_orders(&mut self.open_req, Some(symbol), now)
            .is_err()
        {
            // Nothing the venue can be asked: no retry loop.
            self.open_once = None;
            return;
        }
        let charged = self
            .shapes
            .charge(w.budget(), self.open_req.parts(), Class::Normal, now);
        let tid = self.trace.charge(
            now,
            self.open_req.parts(),
            Class::Normal,
            Label::NONE,
            charged.is_ok(),
        );
        let ticket = match charged {
            Ok(t) => t,
            // The weight is shared with the caller's reads: go as soon as it has room.
            Err(l) => {
                let at = l.ready_at_ns.clamp(now + 1_000_000, now + every);
                if self.open_every.is_some() {
                    self.next_open = at;
                }
                if once {
                    self.open_once = Some(at);
                }
                return;
            }
        };
        let mut ticket = Some(ticket);
        let deadline = self.open_req.deadline_ns();
        let sent = encode(&self.open_req, |r| {
            ticket.take().map(|t| w.send(r, t, deadline))
        });
        self.note_connects(w);
        match sent.flatten() {
            Some(Ok(id)) => {
                self.stats.sent += 1;
                self.open = Some((id, now));
                self.trace.open = tid;
                self.open_once = None;
            }
            Some(Err(refused)) => {
                let _ = w.budget().refund(refused.into_ticket(), now);
                self.trace.refund(now, tid);
                self.next_open = now + RETRY_GAP_NS;
                if once {
                    self.open_once = Some(now + RETRY_GAP_NS);
                }
            }
            None => {
                if let Some(t) = ticket {
                    let _ = w.budget().refund(t, now);
                    self.trace.refund(now, tid);
                }
                self.open_once = None;
            }
        }
    }

    /// The next event produced outside an answer (by submit or poll).
    pub fn poll_event(&mut self) -> Option<Event<'static>> {
        self.pending.pop_front()
    }

    /// Charges and sends `req` at `class`, under `tag`. `req` is swapped into the
    /// ledger: the caller gets another buffer back to prepare the next request in.
    ///
    /// `Err` is the request's one and final event, at once: [`Event::Limited`]
    /// (nothing sent, nothing charged), [`Event::Expired`] (its deadline has passed),
    /// [`Event::DuplicateId`] (an order it places has a client order id that is
    /// live here: nothing charged or sent) or [`Event::Rejected`] (the adapter has
    /// no parts for it). On `Ok` its events come later.
    pub fn submit<W: Wire>(
        &mut self,
        w: &mut W,
        req: &mut Prepared,
        class: Class,
        tag: Tag,
    ) -> Result<(), Event<'static>> {
        let now = w.now();
        if req.is_empty() {
            self.stats.rejected += 1;
            return Err(Event::Rejected { tag });
        }
        if now >= req.deadline_ns() {
            self.stats.expired += 1;
            return Err(Event::Expired {
                tag,
                why: Expiry::Deadline,
            });
        }
        if placed(req).iter().any(|id| self.id_is_live(id, now)) {
            self.stats.duplicate_ids += 1;
            return Err(Event::DuplicateId { tag });
        }
        let charged = self.shapes.charge(w.budget(), req.parts(), class, now);
        let tid = self
            .trace
            .charge(now, req.parts(), class, req.label(), charged.is_ok());
        let refused = charged.as_ref().err().map(|l| (l.why, l.bucket.index()));
        self.labels.submitted(req.label(), req.parts(), refused);
        let ticket = match charged {
            Ok(t) => t,
            Err(l) => {
                self.count_limited(l.why);
                return Err(Event::Limited {
                    tag,
                    why: l.why,
                    ready_at_ns: l.ready_at_ns,
                });
            }
        };
        let Some(key) = self.ledger.insert(tag, class, req) else {
            // The budget's own ticket: never foreign.
            let _ = w.budget().refund(ticket, now);
            self.trace.refund(now, tid);
            self.stats.ledger_full += 1;
            return Err(Event::Limited {
                tag,
                why: Why::Full,
                ready_at_ns: now + RETRY_GAP_NS,
            });
        };
        self.trace.set(key, tid);
        self.send(w, key, ticket);
        Ok(())
    }

    /// Reconciles an order a previous gateway left in flight (its journal):
    /// `query` is its query by client order id, prepared now. It enters the ledger
    /// with an unknown outcome under the same rule as any other: its events are
    /// [`Event::Reconciled`] (found; or not found by a query sent after
    /// [`Account::lost_not_found_after`]) or [`Event::Unresolved`], under `tag`.
    /// `Err` is [`Event::Limited`] (every slot taken: try again later) or
    /// [`Event::Rejected`] (`query` names no order).
    pub fn recover<W: Wire>(
        &mut self,
        w: &mut W,
        query: &mut Prepared,
        tag: Tag,
    ) -> Result<(), Event<'static>> {
        let now = w.now();
        if query.client_order_id().is_none() {
            self.stats.rejected += 1;
            return Err(Event::Rejected { tag });
        }
        let bound = self.venue.lost_not_found_after(query);
        let Some(key) = self.ledger.insert(tag, QUERY_CLASS, query) else {
            self.stats.ledger_full += 1;
            return Err(Event::Limited {
                tag,
                why: Why::Full,
                ready_at_ns: now + RETRY_GAP_NS,
            });
        };
        if let Some(e) = self.ledger.get_mut(key) {
            e.stage = Stage::Reconcile;
            e.at_ns = now;
            e.unknown_since_ns = now;
            e.not_found_after = bound;
        }
        self.stats.unknown += 1;
        self.query(w, key);
        Ok(())
    }

    /// Sends `key`'s request with `ticket`; a send the transport hands back is
    /// refunded and retried (it surely did not run).
    fn send<W: Wire>(&mut self, w: &mut W, key: Key, ticket: ergon_core::Ticket) {
        let now = w.now();
        let tid = self.trace.slot(key);
        let Some(e) = self.ledger.get_mut(key) else {
            let _ = w.budget().refund(ticket, now);
            self.trace.refund(now, tid);
            return;
        };
        let query = e.stage == Stage::Query;
        let req = if query { &e.query } else { &e.req };
        let deadline = req.deadline_ns();
        // Over the WebSocket API when it is open and the request has a twin there.
        let ticket = match self.ws.as_mut() {
            Some(lane) => match lane.try_send(req, ticket, w.budget(), now) {
                Ok(id) => {
                    self.stats.sent += 1;
                    if !query {
                        e.stage = Stage::Wire;
                    }
                    self.ledger.bind(key, RequestId(WS_BIT | id));
                    return;
                }
                Err(Unsent::Elsewhere(t)) => t,
                Err(Unsent::Busy(t)) => {
                    self.handed_back(w, key, t, tid);
                    return;
                }
            },
            None => ticket,
        };
        let mut ticket = Some(ticket);
        let sent = encode(req, |r| match ticket.take() {
            Some(t) => w.send(r, t, deadline),
            None => unreachable!("encode calls once"),
        });
        self.trace.connects(&*w, &self.venue);
        let sent = match (sent, ticket) {
            (Some(s), _) => s,
            (None, Some(t)) => Err(ergon_io::client::Refused::Invalid(
                t,
                ergon_io::http::InvalidRequest::Method,
            )),
            (None, None) => return,
        };
        match sent {
            Ok(id) => {
                self.stats.sent += 1;
                if !query {
                    e.stage = Stage::Wire;
                }
                self.ledger.bind(key, id);
            }
            Err(refused) => self.handed_back(w, key, refused.into_ticket(), tid),
        }
    }

    /// The transport handed `key`'s request back unsent (busy): refunded, and
    /// tried again after a gap (a query goes back to reconciling).
    fn handed_back<W: Wire>(&mut self, w: &mut W, key: Key, ticket: ergon_core::Ticket, tid: u64) {
        let now = w.now();
        let _ = w.budget().refund(ticket, now);
        self.trace.refund(now, tid);
        self.stats.busy += 1;
        let Some(e) = self.ledger.get_mut(key) else {
            return;
        };
        let at = now + RETRY_GAP_NS;
        e.at_ns = at;
        if e.stage == Stage::Query {
            e.stage = Stage::Reconcile;
        } else {
            e.stage = Stage::Retry;
            e.verdict = Verdict::NotRun;
            let tag = e.tag;
            self.push(Event::Retrying { tag, at_ns: at });
        }
        self.next_due = self.next_due.min(at);
    }

    /// The answer to `id`. Returns the event it makes, if any (an `Applied` borrows
    /// the answer's body).
    pub fn on_response<'r, W: Wire>(
        &mut self,
        w: &mut W,
        id: RequestId,
        r: Response<'r>,
        flight: Flight,
    ) -> Option<Event<'r>> {
        let now = w.now();
        let Some(key) = self.ledger.unbind(id) else {
            if let Some((open_id, sent_at_ns)) = self.open {
                if open_id == id {
                    self.open = None;
                    let kind = self.open_req.kind().unwrap_or(Kind::Read(0));
                    let v = self.venue.on_response(kind, &r, w.budget(), now);
                    self.trace.observed(now, w.budget());
                    if let Ok(v) = &v {
                        self.trace.verdict(now, v);
                    }
                    let _ = w.budget().complete(flight, now);
                    self.trace.done(now, self.trace.open);
                    if !matches!(v, Ok(Verdict::Done)) {
                        return None;
                    }
                    self.stats.polls += 1;
                    if !self.watch.is_empty() {
                        let (watch, pending, stats) =
                            (&mut self.watch, &mut self.pending, &mut self.stats);
                        self.venue.open_ids(r.body, &mut |id| {
                            // Open: it rests on the book, filled in part or not.
                            seen_in(watch, pending, stats, id, OrderState::Other, now);
                        });
                    }
                    return Some(Event::OpenOrders {
                        tag: OPEN_ORDERS,
                        sent_at_ns,
                        body: r.body,
                    });
                }
            }
            let _ = w.budget().complete(flight, now);
            if self.time.is_some_and(|t| t.0 == id) {
                self.trace.done(now, self.trace.time);
            }
            if let Some((time_id, sent_at)) = self.time {
                if time_id == id {
                    self.time = None;
                    self.on_time(w, sent_at, now, &r);
                }
            }
            return None;
        };
        let e = self.ledger.get(key)?;
        let stage = e.stage;
        let kind = if stage == Stage::Query {
            e.query.kind()
        } else {
            e.req.kind()
        };
        let kind = kind.unwrap_or(Kind::Read(0));
        let verdict = match self.venue.on_response(kind, &r, w.budget(), now) {
            Ok(v) => v,
            Err(adapt::Error::BadHeader { verdict, .. }) => verdict,
            Err(_) => Verdict::Unknown,
        };
        self.trace.observed(now, w.budget());
        self.trace.verdict(now, &verdict);
        let _ = w.budget().complete(flight, now);
        self.trace.done(now, self.trace.slot(key));
        self.answered(w, key, r, verdict)
    }

    /// What follows the verdict on `key`'s answer `r` (its flight completed): the
    /// settle rule, for an answer over HTTP or the WebSocket API alike.
    fn answered<'r, W: Wire>(
        &mut self,
        w: &mut W,
        key: Key,
        r: Response<'r>,
        verdict: Verdict,
    ) -> Option<Event<'r>> {
        let e = self.ledger.get(key)?;
        let (stage, tag, label) = (e.stage, e.tag, e.req.label());
        let write = e.req.kind().is_some_and(|k| k.is_write());
        self.count_verdict(&verdict);
        self.labels.answered(label, &verdict);
        if stage == Stage::Query {
            return self.on_query(w, key, &r, verdict).map(widen);
        }
        let verdict = match verdict {
            // A read may be asked again: nothing to reconcile.
            Verdict::Unknown if !write => Verdict::NotRun,
            v => v,
        };
        if verdict != Verdict::ClockSkew {
            self.skews = 0;
        }
        match verdict {
            // Some items of a batch answer are unknown: each is reconciled by its
            // own id; the batch is not Applied.
            Verdict::Done if self.batch_unknown(key) != 0 => {
                self.after(w, key, Verdict::Unknown, true).map(widen)
            }
            Verdict::Done => {
                self.ledger.remove(key);
                self.stats.applied += 1;
                Some(Event::Applied { tag, body: r.body })
            }
            Verdict::Rejected => {
                self.ledger.remove(key);
                self.stats.rejected += 1;
                Some(Event::Rejected { tag })
            }
            _ => {
                let mut resends = 0;
                if let Some(e) = self.ledger.get_mut(key) {
                    e.resends = e.resends.saturating_add(1);
                    resends = e.resends;
                }
                if verdict == Verdict::ClockSkew {
                    self.skews += 1;
                    if self.skews >= SKEWS_TO_REANCHOR {
                        self.reanchor(w);
                    }
                }
                let not_run = matches!(
                    verdict,
                    Verdict::NotRun | Verdict::ClockSkew | Verdict::Throttled { .. }
                );
                if not_run && resends > MAX_RESENDS {
                    return self.expire(key, Expiry::Resends).map(widen);
                }
                if matches!(verdict, Verdict::NotRun | Verdict::ClockSkew) {
                    // Spaced, re-signed when due (see `after`): never the same bytes
                    // at once.
                    return self.space(w, key, verdict, resends).map(widen);
                }
                self.after(w, key, verdict, true).map(widen)
            }
        }
    }

    /// Ends `key`'s request [`Event::Expired`] for `why`.
    fn expire(&mut self, key: Key, why: Expiry) -> Option<Event<'static>> {
        let tag = self.ledger.get(key)?.tag;
        self.ledger.remove(key);
        self.stats.expired += 1;
        Some(Event::Expired { tag, why })
    }

    /// Schedules `key`'s re-send after the `n`th "not run" answer, after a jittered
    /// backoff; Expired if that is past its deadline.
    fn space<W: Wire>(
        &mut self,
        w: &mut W,
        key: Key,
        verdict: Verdict,
        n: u8,
    ) -> Option<Event<'static>> {
        let now = w.now();
        let gap = self.backoff(
            n.saturating_sub(1),
            RESEND_BACKOFF_NS,
            RESEND_BACKOFF_MAX_NS,
        );
        let e = self.ledger.get_mut(key)?;
        let at = now + gap;
        if at >= e.resend_until {
            return self.expire(key, Expiry::Deadline);
        }
        e.stage = Stage::Retry;
        e.verdict = verdict;
        e.at_ns = at;
        let tag = e.tag;
        self.next_due = self.next_due.min(at);
        Some(Event::Retrying { tag, at_ns: at })
    }

    /// Request `id` failed in the transport; `sent` says whether a byte left.
    pub fn on_error<W: Wire>(
        &mut self,
        w: &mut W,
        id: RequestId,
        sent: Sent,
    ) -> Option<Event<'static>> {
        let now = w.now();
        let bound = self.ledger.unbind(id);
        let tid = match (bound, self.time, self.open) {
            (Some(key), _, _) => self.trace.slot(key),
            (None, Some((t, _)), _) if t == id => self.trace.time,
            (None, _, Some((o, _))) if o == id => self.trace.open,
            _ => 0,
        };
        let maybe = match sent {
            Sent::No(t) => {
                let _ = w.budget().refund(t, now);
                self.trace.refund(now, tid);
                false
            }
            Sent::Maybe(f) => {
                let _ = w.budget().complete(f, now);
                self.trace.done(now, tid);
                true
            }
        };
        let Some(key) = bound else {
            if self.time.is_some_and(|t| t.0 == id) {
                self.time = None;
            }
            if self.open.is_some_and(|t| t.0 == id) {
                self.open = None;
            }
            return None;
        };
        self.failed(w, key, maybe)
    }

    /// What follows a transport failure of `key`'s request (settled already):
    /// `maybe` a byte left. A query is asked again; a write that may have run is
    /// reconciled; anything else surely did not run.
    fn failed<W: Wire>(&mut self, w: &mut W, key: Key, maybe: bool) -> Option<Event<'static>> {
        let now = w.now();
        let e = self.ledger.get_mut(key)?;
        if e.stage == Stage::Query {
            return self.requery(key, now, now, false);
        }
        let verdict = if maybe && e.req.kind().is_some_and(|k| k.is_write()) {
            Verdict::Unknown
        } else {
            Verdict::NotRun
        };
        self.labels.answered(e.req.label(), &verdict);
        self.after(w, key, verdict, true)
    }

    /// Does the due work: re-sends whose time came, reconcile queries. Its events
    /// come out of [`Gateway::poll_event`].
    pub fn poll<W: Wire>(&mut self, w: &mut W) {
        let now = w.now();
        self.poll_open(w);
        if now < self.next_due {
            return;
        }
        let mut due = core::mem::take(&mut self.due);
        due.clear();
        self.next_due = self.ledger.due(now, &mut |k| due.push(k));
        for &key in &due {
            let Some(e) = self.ledger.get(key) else {
                continue;
            };
            match e.stage {
                Stage::Retry => {
                    let v = e.verdict;
                    if let Some(ev) = self.after(w, key, v, false) {
                        self.push(ev);
                    }
                }
                Stage::Reconcile => self.query(w, key),
                Stage::Wire | Stage::Query => {}
            }
        }
        self.due = due;
    }

    /// Clears every halt (a person's action, after looking at the ban); returns how
    /// many were cleared.
    pub fn clear_halts<W: Wire>(&mut self, w: &mut W) -> usize {
        let now = w.now();
        let b = w.budget();
        let mut n = 0;
        loop {
            let next = b.halted().next();
            let Some(id) = next else {
                self.stats.halts_cleared += n as u64;
                return n;
            };
            // Its own ids: never foreign.
            let _ = b.clear_halt(id);
            if let Some(r) = &self.trace.recorder {
                r.push(Record::bucket(now, Rec::ClearHalt, id.index() as u8, 0));
            }
            n += 1;
        }
    }

    /// What follows a verdict that is not Done or Rejected: the re-send rule. With
    /// `announce`, a Retrying event is given when it waits or goes again.
    fn after<W: Wire>(
        &mut self,
        w: &mut W,
        key: Key,
        verdict: Verdict,
        announce: bool,
    ) -> Option<Event<'static>> {
        let now = w.now();
        let e = self.ledger.get_mut(key)?;
        let tag = e.tag;
        e.verdict = verdict;
        // A venue's "not run": a fresh timestamp and signature (on the clock as
        // re-anchored), never the stale bytes. An adapter that cannot re-sign sends
        // the same bytes, except after a clock skew (they can never pass).
        if verdict != Verdict::Unknown {
            let resigned = self.venue.restamp(&mut e.req, now).is_ok();
            if !resigned && verdict == Verdict::ClockSkew {
                return self.expire(key, Expiry::Unsigned);
            }
        }
        let r = w
            .budget()
            .resend(&verdict, e.req.parts(), e.class, e.resend_until, now);
        match r {
            Resend::Send(ticket) => {
                let tid = self
                    .trace
                    .charge(now, e.req.parts(), e.class, e.req.label(), true);
                self.labels.charged(e.req.label(), e.req.parts());
                self.trace.set(key, tid);
                self.stats.resent += 1;
                self.send(w, key, ticket);
                let waiting = self
                    .ledger
                    .get(key)
                    .is_some_and(|e| e.stage == Stage::Retry);
                (announce && !waiting).then_some(Event::Retrying { tag, at_ns: now })
            }
            Resend::Wait(Limited {
                why: Why::Halted,
                bucket,
                ..
            }) => {
                self.ledger.remove(key);
                self.stats.halted += 1;
                Some(Event::Halted { tag, bucket })
            }
            Resend::Wait(l) if l.ready_at_ns < e.resend_until => {
                e.stage = Stage::Retry;
                e.at_ns = l.ready_at_ns.max(now + 1);
                self.next_due = self.next_due.min(e.at_ns);
                announce.then_some(Event::Retrying {
                    tag,
                    at_ns: e.at_ns,
                })
            }
            Resend::Wait(_) | Resend::Stale | Resend::Final => {
                self.ledger.remove(key);
                self.stats.expired += 1;
                Some(Event::Expired {
                    tag,
                    why: Expiry::Deadline,
                })
            }
            Resend::Reconcile => {
                self.stats.unknown += 1;
                e.stage = Stage::Reconcile;
                e.at_ns = now;
                e.unknown_since_ns = now;
                e.queries = 0;
                e.not_found_after = self.venue.not_found_after(&e.req);
                // A batch is reconciled item by item, each by its own id (all of
                // them when the whole answer was lost).
                if e.items == 0 && matches!(e.req.kind(), Some(Kind::Batch(_))) {
                    let n = e.req.client_order_ids().len().min(MAX_BATCH);
                    e.items = (1u32 << n) - 1;
                }
                e.item = e.items.trailing_zeros().min(31) as u8;
                self.next_due = now;
                self.query(w, key);
                Some(Event::Reconciling { tag })
            }
        }
    }

    /// Writes `key`'s query by client order id (its query of closed orders if
    /// [`Entry::closed`](crate::ledger::Entry::closed)); whether it could.
    fn write_query(&mut self, key: Key, now: i64) -> bool {
        let Some(e) = self.ledger.get_mut(key) else {
            return false;
        };
        // The request's own symbol; the gateway's for one that names none.
        let symbol = match e.req.symbol() {
            Some(s) => Ok(s),
            None => Symbol::new(self.symbol.as_str()),
        };
        let (Some(&client_order_id), Ok(symbol)) = (queried_id(e), symbol) else {
            return false;
        };
        let order = OrderRef {
            symbol,
            client_order_id,
        };
        match e.closed {
            true => self.venue.query_closed_order(&mut e.query, &order, now),
            false => self.venue.query_order(&mut e.query, &order, now),
        }
        .is_ok()
    }

    /// Sends `key`'s query by client order id, or schedules it.
    fn query<W: Wire>(&mut self, w: &mut W, key: Key) {
        let now = w.now();
        let written = self.write_query(key, now);
        let Some(e) = self.ledger.get_mut(key) else {
            return;
        };
        // A write that names no order (a cancel-all) cannot be asked about by id:
        // it ends Unresolved at once, never a loop of queries that cannot be written.
        if !written && e.req.client_order_id().is_none() {
            if let Some(ev) = self.unresolve(key, now) {
                self.push(ev);
            }
            return;
        }
        // Its own class, never the request's Urgent (see QUERY_CLASS).
        let class = QUERY_CLASS;
        let charged = match written {
            true => {
                let charged = self.shapes.charge(w.budget(), e.query.parts(), class, now);
                let tid =
                    self.trace
                        .charge(now, e.query.parts(), class, e.req.label(), charged.is_ok());
                if charged.is_ok() {
                    self.labels.charged(e.req.label(), e.query.parts());
                }
                self.trace.set(key, tid);
                charged.map_err(|l| l.ready_at_ns)
            }
            // A query that cannot be written settles nothing: look again later.
            _ => Err(now + 5 * RETRY_GAP_NS),
        };
        match charged {
            Ok(ticket) => {
                e.stage = Stage::Query;
                if !e.closed {
                    e.query_sent_ns = now;
                }
                self.stats.queries += 1;
                self.send(w, key, ticket);
            }
            Err(ready_at) => {
                // A halt has no ready time: look again soon, refused at no cost.
                e.at_ns = ready_at.clamp(now + 1, now + 5 * RETRY_GAP_NS);
                e.stage = Stage::Reconcile;
                self.next_due = self.next_due.min(e.at_ns);
            }
        }
    }

    fn on_query<W: Wire>(
        &mut self,
        w: &mut W,
        key: Key,
        r: &Response<'_>,
        v: Verdict,
    ) -> Option<Event<'static>> {
        let now = w.now();
        // A query counts toward re-anchoring like any request.
        if v == Verdict::ClockSkew {
            self.skews += 1;
            if self.skews >= SKEWS_TO_REANCHOR {
                self.reanchor(w);
            }
        } else {
            self.skews = 0;
        }
        let lookup = match v {
            // The query was refused before it looked: it settles nothing.
            Verdict::Throttled { .. } | Verdict::Banned { .. } | Verdict::ClockSkew => {
                Lookup::Unknown
            }
            _ => self.venue.read_order(r),
        };
        let e = self.ledger.get_mut(key)?;
        let tag = e.tag;
        // Where the venue keeps closed orders apart (Bybit's history), a NotFound
        // from the query by id is asked there before it counts; the next round
        // starts with the query by id again.
        let closed = core::mem::replace(&mut e.closed, false);
        if lookup == Lookup::NotFound && !closed {
            e.closed = true;
            // Written here to learn whether the venue has such a query; written
            // again, freshly stamped, when the next poll sends it.
            let has = self.write_query(key, now);
            let e = self.ledger.get_mut(key)?;
            e.closed = has;
            if has {
                e.stage = Stage::Reconcile;
                e.at_ns = now;
                self.next_due = self.next_due.min(now);
                return None;
            }
        }
        let e = self.ledger.get(key)?;
        let batch = e.items != 0;
        let found = match lookup {
            Lookup::Found(info) => Some(info.state),
            // "Not found" is "never ran" only from a query sent once the venue
            // could no longer run the request.
            Lookup::NotFound if e.not_found_after.is_some_and(|b| e.query_sent_ns >= b) => None,
            Lookup::NotFound | Lookup::Unknown => {
                let not_found = lookup == Lookup::NotFound;
                let until = match v {
                    Verdict::Throttled { until_ns, .. } => until_ns,
                    _ => now,
                };
                return self.requery(key, now, until, not_found);
            }
        };
        self.stats.reconciled += 1;
        self.stats.reconciled_found += u64::from(found.is_some());
        if batch {
            let fate = found.map_or(ItemFate::NeverRan, ItemFate::Found);
            return self.next_item(key, now, fate);
        }
        self.ledger.remove(key);
        Some(Event::Reconciled { tag, found })
    }

    /// Schedules `key`'s next reconcile query, not before `not_before` (a hold),
    /// after a backoff; or ends it [`Event::Unresolved`] once its queries are spent
    /// or, where the venue states no bound, its time to be found has passed.
    /// `not_found` says the last answer was NotFound (then the query at the
    /// venue's bound, the one that settles, is not put off past it).
    fn requery(
        &mut self,
        key: Key,
        now: i64,
        not_before: i64,
        not_found: bool,
    ) -> Option<Event<'static>> {
        let e = self.ledger.get_mut(key)?;
        e.closed = false;
        e.queries = e.queries.saturating_add(1);
        let (n, bound, since) = (e.queries, e.not_found_after, e.unknown_since_ns);
        let out_of_time = bound.is_none() && now >= since.saturating_add(self.unresolved_after_ns);
        if n >= MAX_QUERIES || out_of_time {
            return self.unresolve(key, now);
        }
        let mut at = now + self.backoff(n - 1, QUERY_BACKOFF_NS, QUERY_BACKOFF_MAX_NS);
        if let (Some(b), true) = (bound, not_found) {
            at = at.min(b);
        }
        let at = at.max(not_before).max(now + 1);
        let e = self.ledger.get_mut(key)?;
        e.stage = Stage::Reconcile;
        e.at_ns = at;
        self.next_due = self.next_due.min(at);
        None
    }

    /// Reads the venue's time again on the gateway's own connection, to re-anchor
    /// the clock at the round trip's midpoint.
    fn reanchor<W: Wire>(&mut self, w: &mut W) {
        if self.time.is_some() {
            return;
        }
        let now = w.now();
        let Ok(parts) = self.venue.parts(Kind::Read(1)) else {
            return;
        };
        let charged = self.shapes.charge(w.budget(), &parts, Class::Urgent, now);
        let tid = self
            .trace
            .charge(now, &parts, Class::Urgent, Label::NONE, charged.is_ok());
        let Ok(ticket) = charged else {
            return;
        };
        let req = ergon_io::http::Request::get(E::time_path());
        let sent = w.send(&req, ticket, now + 2_000_000_000);
        self.note_connects(w);
        match sent {
            Ok(id) => {
                self.stats.sent += 1;
                self.time = Some((id, now));
                self.trace.time = tid;
            }
            Err(refused) => {
                let _ = w.budget().refund(refused.into_ticket(), now);
                self.trace.refund(now, tid);
            }
        }
    }

    /// Re-anchors the venue clock on a time read's answer and realigns every fixed
    /// bucket's windows to the new anchor
    /// ([`Budget::set_phase`](ergon_core::Budget::set_phase), never minting).
    fn on_time<W: Wire>(&mut self, w: &mut W, sent_at: i64, now: i64, r: &Response<'_>) {
        if let Some(server_ms) = E::read_time(r.body).filter(|_| r.status == 200) {
            let clock = Clock::anchor(sent_at + (now - sent_at) / 2, server_ms);
            self.venue.set_clock(clock);
            if let Some(lane) = self.ws.as_mut() {
                lane.api.set_clock(clock);
            }
            let budget = w.budget();
            let ids: ArrayVec<BucketId, MAX_BUCKETS> = budget.ids().collect();
            for id in ids {
                // The budget's own ids: never foreign.
                if let Ok(Some((window, _))) = budget.fixed_window(id) {
                    let phase_ns = clock.phase_ns(window);
                    let _ = budget.set_phase(id, phase_ns, now);
                    self.trace.phase(now, id, phase_ns);
                }
            }
            self.stats.reanchors += 1;
            self.skews = 0;
        }
    }

    fn push(&mut self, ev: Event<'static>) {
        // Sized for two events per slot, so this never grows.
        self.pending.push_back(ev);
    }

    fn count_limited(&mut self, why: Why) {
        match why {
            Why::Full | Why::Closed => self.stats.limited_full += 1,
            Why::Held => self.stats.limited_held += 1,
            Why::Halted => self.stats.limited_halted += 1,
            Why::TooBig | Why::Foreign | Why::Receipts => self.stats.limited_too_big += 1,
        }
    }

    fn count_verdict(&mut self, v: &Verdict) {
        match v {
            Verdict::Throttled { .. } => self.stats.throttled += 1,
            Verdict::Banned { .. } => self.stats.banned += 1,
            Verdict::ClockSkew => self.stats.clock_skew += 1,
            _ => {}
        }
    }
}

/// [`Gateway::seen`] on the gateway's fields (callable while the venue is borrowed).
fn seen_in(
    watch: &mut Vec<Watched>,
    pending: &mut VecDeque<Event<'static>>,
    stats: &mut Stats,
    id: &[u8],
    state: OrderState,
    now: i64,
) {
    let hit = watch
        .iter()
        .position(|w| w.until_ns > now && w.id.as_str().as_bytes() == id);
    if let Some(i) = hit {
        let w = watch.swap_remove(i);
        stats.late += 1;
        // Sized for three events per slot; the watch list holds at most one per slot.
        pending.push_back(Event::Late {
            tag: w.tag,
            found: state,
        });
    }
}

/// The client order id `e`'s reconcile query asks about: the item's under
/// reconcile of a batch, else the request's own.
fn queried_id(e: &Entry) -> Option<&ClientOrderId> {
    match e.items {
        0 => e.req.client_order_id(),
        _ => e.req.client_order_ids().get(usize::from(e.item)),
    }
}

/// The client order ids of the orders `req` places: a new order's, a
/// cancel-replace's new one (its first), every order of a batch.
fn placed(req: &Prepared) -> &[ClientOrderId] {
    let ids = req.client_order_ids();
    match req.kind() {
        Some(Kind::Order | Kind::CancelReplace) => &ids[..ids.len().min(1)],
        Some(Kind::Batch(_)) => ids,
        _ => &[],
    }
}

fn widen<'r>(e: Event<'static>) -> Event<'r> {
    e
}

/// What one item of the WebSocket API connection made.
#[derive(Debug)]
pub enum WsIn<'f> {
    /// An event of a request (or of the gateway's own poll).
    Event(Event<'f>),
    /// An order update of the user data stream.
    Execution(ergon_venues::binance_spot_ws::Execution),
}

/// Order entry and the order stream over the WebSocket API (see
/// [`super::ws_api`]): the connection's reports go through the same ledger and
/// settle rule as HTTP's.
impl<E: Account> Gateway<E> {
    /// Sends every request with a WebSocket API twin over `lane` while it is open
    /// (HTTP otherwise), and takes the order stream from it.
    pub fn set_ws_api(&mut self, lane: WsLane) {
        self.ws = Some(lane);
    }

    /// The WebSocket API connection, if set.
    pub fn ws_api(&self) -> Option<&WsLane> {
        self.ws.as_ref()
    }

    /// Drops the WebSocket API connection: every request goes over HTTP.
    pub fn drop_ws_api(&mut self) -> Option<WsLane> {
        self.ws.take()
    }

    /// Lets the loop watch the lane's socket, once: `registry` is asked only
    /// while the lane is not watched yet (and tried again on the next drive if it
    /// fails).
    pub(crate) fn ws_watch(&mut self, registry: impl FnOnce() -> Option<Registry>) {
        let Some(lane) = self.ws.as_mut() else { return };
        if !lane.watched {
            if let Some(r) = registry() {
                lane.attach(r);
                lane.watched = true;
            }
        }
    }

    /// Whether the connection wants a drive at `now` outside its descriptor and
    /// timer: never watched yet, or a re-connect due.
    pub(crate) fn ws_due(&self, now: i64) -> bool {
        self.ws
            .as_ref()
            .is_some_and(|l| !l.watched || l.next_deadline().is_some_and(|t| t <= now))
    }

    /// The earliest time the connection wants a drive.
    pub fn ws_deadline(&self) -> Option<i64> {
        self.ws.as_ref().and_then(WsLane::next_deadline)
    }

    /// Records the HTTP pool's connect charges made since the last call (they
    /// happen inside the transport, [`Wire::connects`] counts them): an admitted
    /// one as charged, sent and complete (the connect left), a refused one as
    /// charged. Called after each send and at each of the loop's calls.
    pub(crate) fn note_connects<W: Wire>(&mut self, w: &W) {
        self.trace.connects(w, &self.venue);
    }

    /// Connects if due, then reads and writes: what the connection reported, to
    /// hand to [`Gateway::ws_item`] item by item, then back by
    /// [`Gateway::ws_restore`].
    pub(crate) fn ws_drive<W: Wire>(
        &mut self,
        w: &mut W,
        ready: Option<Readiness>,
    ) -> Option<WsReport> {
        let now = w.now();
        let lane = self.ws.as_mut()?;
        if let Some(ok) = lane.connect_if_due(w.budget(), now) {
            let tid = self
                .trace
                .charge(now, lane.connect_parts(), Class::Urgent, Label::NONE, ok);
            if ok {
                self.trace.ws_connect = tid;
            }
        }
        let setup = lane.setup_due(w.budget(), now);
        self.trace_own(setup, now);
        let lane = self.ws.as_mut()?;
        Some(lane.drive(w.budget(), now, ready))
    }

    /// Gives the report back.
    pub(crate) fn ws_restore(&mut self, report: WsReport) {
        if let Some(lane) = self.ws.as_mut() {
            lane.restore(report);
        }
    }

    /// Records what became of the charge of a request of the lane's own (a
    /// setup request, a heartbeat answer).
    fn trace_own(&mut self, c: SubCharge, now: i64) {
        if c == SubCharge::None {
            return;
        }
        let Some(lane) = self.ws.as_ref() else { return };
        let tid = self.trace.charge(
            now,
            lane.sub_parts(),
            Class::Urgent,
            Label::NONE,
            !matches!(c, SubCharge::Refused(_)),
        );
        match c {
            SubCharge::Sent(_) => self.trace.ws_sub = tid,
            SubCharge::Refunded => self.trace.refund(now, tid),
            _ => {}
        }
    }

    /// One item the connection reported: an answer (the adapter's verdict, then the
    /// settle rule), a request's fate at a drop (refunded by the session if never
    /// written; Unknown → reconciled), an execution, the open or the drop.
    pub(crate) fn ws_item<'f, W: Wire>(
        &mut self,
        w: &mut W,
        item: Item,
        bytes: &'f [u8],
    ) -> Option<WsIn<'f>> {
        let now = w.now();
        let lane = self.ws.as_mut()?;
        match item {
            Item::Open => {
                // The handshake was written (its charge completed) and answered.
                let tid = core::mem::take(&mut self.trace.ws_connect);
                self.trace.done(now, tid);
                let sub = lane.on_open(w.budget(), now);
                self.trace_own(sub, now);
                None
            }
            Item::Closed(cause) => {
                let tid = core::mem::take(&mut self.trace.ws_connect);
                match lane.connect_refunded() {
                    true => self.trace.refund(now, tid),
                    false => self.trace.done(now, tid),
                }
                lane.on_closed(cause, w.budget(), now);
                None
            }
            Item::Outcome(id, verdict, flight) => {
                let written = flight.is_some();
                if let Some(f) = flight {
                    // Its own flight: never foreign.
                    let _ = w.budget().complete(f, now);
                }
                if lane.sub_req == Some(id) {
                    lane.sub_req = None;
                    let tid = core::mem::take(&mut self.trace.ws_sub);
                    match written {
                        true => self.trace.done(now, tid),
                        false => self.trace.refund(now, tid),
                    }
                    return None;
                }
                lane.forget(id);
                let key = self.ledger.unbind(RequestId(WS_BIT | id))?;
                // Never written: the session refunded its ticket.
                match written {
                    true => self.trace.done(now, self.trace.slot(key)),
                    false => self.trace.refund(now, self.trace.slot(key)),
                }
                let ev = self.failed(w, key, verdict == Verdict::Unknown)?;
                Some(WsIn::Event(ev))
            }
            Item::Text(a, b) => {
                let frame = bytes.get(a..b)?;
                let incoming = lane.api.on_frame(frame, w.budget(), now);
                let (id, status, verdict) = match incoming {
                    Ok(LaneIn::Answer {
                        id,
                        status,
                        verdict,
                    }) => (id, status, verdict),
                    Ok(LaneIn::Execution(x)) => {
                        lane.stats.executions += 1;
                        self.seen(x.client_order_id.as_str().as_bytes(), x.state, now);
                        return Some(WsIn::Execution(x));
                    }
                    Ok(LaneIn::TestRequest) => {
                        let c = lane.on_test_request(w.budget(), now);
                        self.trace_own(c, now);
                        return None;
                    }
                    Ok(LaneIn::Other) => return None,
                    Err(_) => {
                        lane.stats.bad_frames += 1;
                        return None;
                    }
                };
                lane.stats.answers += 1;
                lane.resolve(id, w.budget(), now);
                let verdict = match verdict {
                    Ok(v) => v,
                    Err(adapt::Error::BadHeader { verdict, .. }) => verdict,
                    Err(_) => Verdict::Unknown,
                };
                if lane.test_req == Some(id) {
                    lane.test_req = None;
                    let tid = core::mem::take(&mut self.trace.ws_sub);
                    self.trace.done(now, tid);
                    return None;
                }
                if lane.sub_req == Some(id) {
                    self.trace.observed(now, w.budget());
                    self.trace.verdict(now, &verdict);
                    let tid = core::mem::take(&mut self.trace.ws_sub);
                    self.trace.done(now, tid);
                    let c = lane.on_setup_answer(verdict, frame, w.budget(), now);
                    self.trace_own(c, now);
                    return None;
                }
                let key = self.ledger.unbind(RequestId(WS_BIT | id))?;
                self.trace.observed(now, w.budget());
                self.trace.verdict(now, &verdict);
                self.trace.done(now, self.trace.slot(key));
                let (status, body) = lane.api.as_response(frame).unwrap_or((status, &[]));
                let r = Response {
                    status,
                    headers: &[],
                    body,
                };
                self.answered(w, key, r, verdict).map(WsIn::Event)
            }
        }
    }
}
