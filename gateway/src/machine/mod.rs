//! The gateway itself: submit, the answers and errors of the transport, and the
//! turn's due work (re-sends and reconcile queries), each producing typed events.

use std::collections::VecDeque;

use arrayvec::{ArrayString, ArrayVec};
use ergon_core::{BucketId, Class, Verdict, Why, MAX_BUCKETS};
use ergon_venues::adapt::{self, Clock};
use ergon_venues::endpoint::{ClientOrderId, Label, Prepared, Symbol};
use ergon_venues::response::Response;

use super::endpoints::Account;
use super::events::{Event, Tag};
use super::ids::{IdError, IdIssuer};
use super::labels::{label_channel, LabelError, LabelPublisher, LabelReader, Labels};
use super::ledger::{IdHash, Key, Ledger, Stage};
use super::record::{self, Declarations, Kind as Rec, Record, Recorder, Writer, Written};
use super::shapes::Shapes;
use super::shm::ChargeLog;
use super::wire::{encode, Wire};
use super::ws_api::WsLane;
use ergon_io::client::RequestId;

mod answers;
mod reconcile;
mod resend;
mod submit;
mod sync;
mod trace;
mod ws;

use trace::Trace;
pub use ws::WsIn;

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

/// The clock error tolerated before an answer's stamp re-anchors the venue
/// clock, where the budget has no fixed window (with them: half the narrowest
/// guard; see [`Account::answer_time`]).
pub const CLOCK_SLACK_NS: i64 = 5_000_000;

/// Reconcile queries of one request, at most, that may come back without settling
/// it; past them it ends [`Event::Unresolved`].
pub const MAX_QUERIES: u8 = 32;

/// How long a reconcile whose queries the budget keeps refusing (no room, a
/// hold, no idle connection) goes on, counted from the venue's bound
/// ([`Account::not_found_after`]) or, where it states none, from when the outcome
/// became unknown; past it, or at once when the budget's ready time is past it,
/// the request ends [`Event::Unresolved`]. Longer than a minute window and a
/// usual `Retry-After`. A halt ends it at once: only a person ends a halt.
pub const REFUSED_QUERIES_NS: i64 = 120_000_000_000;

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

/// How often the gateway looks whether a halt that watched ids wait on was
/// cleared (a person's `clear-halt` reaches the budget, not the gateway).
const HALT_CHECK_NS: i64 = 1_000_000_000;

/// The most pages one poll of a paged venue's open orders walks (Bybit: 10
/// pages of 50, 500 orders, the emulator's cap of active orders for Bybit). A walk that
/// would need more stops there: the orders past it are not seen by that poll
/// (its last event says `more`: a partial list), and a watched one among them
/// waits for its `Late` (a poll never reads an order's absence).
pub const OPEN_PAGES: usize = 10;

/// How many times in a row a walk asks a page that failed (a transport error
/// or an error answer) before it starts again from the first page.
pub const OPEN_PAGE_TRIES: u8 = 5;

/// The longest page cursor kept (Bybit's are about 70 bytes); a longer one
/// ends the walk.
const MAX_CURSOR: usize = 256;

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
    /// Re-anchors of the venue clock: after repeated skew, or on an answer
    /// whose stamp proved it off ([`Account::answer_time`]).
    pub reanchors: u64,
    /// Re-sends under `Budget::resend` (only what surely did not run).
    pub resent: u64,
    /// Requests whose deadline passed before a re-send.
    pub expired: u64,
    /// Writes whose outcome was unknown (Reconciling events).
    pub unknown: u64,
    /// Unknown outcomes settled by a query (Reconciled events; a request of
    /// several parts once, when its last part settles).
    pub reconciled: u64,
    /// ... of which the order existed (requests of one part).
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
    /// ... of which a halt cut the reconcile short (its queries could not leave:
    /// their ids stay watched until the halt is cleared), or whose queries the
    /// budget kept refusing past the reconcile's time.
    pub unresolved_refused: u64,
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
    /// It ended Unresolved because a halt of this bucket refused its queries:
    /// watched until the halt is cleared, then for the watch's time more (a ban
    /// can outlast any watch).
    halted: Option<BucketId>,
}

/// The bytes of a rejection's body kept for [`Gateway::rejected`].
pub const REJECTED_WORDS: usize = 128;

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
    /// The last request the venue rejected: its tag and the venue's words
    /// ([`Gateway::rejected`]).
    rejected: (Tag, ArrayString<REJECTED_WORDS>),
    /// The gateway's own time read on the wire: its id and when it was sent.
    time: Option<(RequestId, i64)>,
    /// Open orders polled this often (None: not at all).
    open_every: Option<i64>,
    /// Whether the periodic poll is wanted besides the gateway's own watch
    /// ([`Gateway::want_open_orders`]).
    open_wanted: bool,
    /// The units the polls of open orders charged, by bucket.
    open_spent: ArrayVec<(BucketId, u64), MAX_BUCKETS>,
    next_open: i64,
    /// A one-off poll of open orders due at this time
    /// ([`Gateway::poll_open_orders_once`]).
    open_once: Option<i64>,
    /// The poll on the wire: its id and when it was sent.
    open: Option<(RequestId, i64)>,
    open_req: Prepared,
    /// The page walk of a paged venue's open orders: the next page's cursor
    /// and number (0: the next poll asks the first page).
    open_cursor: ArrayVec<u8, MAX_CURSOR>,
    open_page: usize,
    /// When the current walk's first page was sent (the age of its events).
    open_walk_at: i64,
    /// The failures of the walk's current page in a row.
    open_fails: u8,
    /// A one-off poll was asked: the next request is a first page (its answer
    /// makes the event the caller waits for), whatever walk was under way.
    open_restart: bool,
    /// The venue's account figures read on the gateway's own (`sync`).
    sync: sync::Sync,
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
    /// When to look next whether a halt that ids of `watch` wait on was cleared
    /// (None: none waits).
    halt_check: Option<i64>,
    watch_ns: i64,
    unresolved_after_ns: i64,
    /// The jitter's seeded generator (splitmix64 state).
    rng: u64,
    /// Client order ids of this boot (None until a boot epoch is set).
    ids: Option<IdIssuer>,
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
            rejected: (0, ArrayString::new()),
            time: None,
            open_every: None,
            open_wanted: true,
            open_spent: ArrayVec::new(),
            next_open: i64::MIN,
            open_once: None,
            open: None,
            open_req: Prepared::with_capacity(bytes),
            open_cursor: ArrayVec::new(),
            open_page: 0,
            open_walk_at: 0,
            open_fails: 0,
            open_restart: false,
            sync: sync::Sync::default(),
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
            halt_check: None,
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
        self.id_is_live_hashed(id, IdHash::of(id), now)
    }

    /// [`Gateway::id_is_live`], `h` being `id`'s hash.
    #[inline(always)]
    fn id_is_live_hashed(&self, id: &ClientOrderId, h: IdHash, now: i64) -> bool {
        self.ledger.holds_id_hashed(id, h)
            || self.watch.iter().any(|w| w.until_ns > now && w.id == *id)
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
    ///
    /// An adapter that can ([`Endpoints::defer_signatures`]: Binance's) writes
    /// the requests a strategy submits (new orders, cancels, cancel-replaces,
    /// amends, order queries) with their signature pending, and
    /// [`Gateway::submit`] signs one only once the budget charged it and it goes
    /// over HTTP (the same bytes as signed at once: the timestamp, so the
    /// deadline, is the preparation's). An order the budget refuses
    /// ([`Event::Limited`]) or the WebSocket API lane carries is never signed for
    /// REST; the signature a sent order needs is made all the same, in `submit`
    /// rather than here. Such a request is for this gateway's `submit`: the
    /// transports refuse to send it unsigned.
    ///
    /// [`Endpoints::defer_signatures`]: ergon_venues::endpoint::Endpoints::defer_signatures
    pub fn venue_mut(&mut self) -> &mut E {
        self.venue.defer_signatures(true);
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
    /// What the venue's bootstrap reads count ([`Account::boot_reads`]) is
    /// recorded in it too, for the next start's hold, and this start's own
    /// reads are kept as charged at `booted_at_ns` (the loop's clock, after
    /// they were answered): the venue counts them, and a gateway killed again
    /// within their window must find them.
    pub fn keep_charges(&mut self, log: ChargeLog, booted_at_ns: i64) {
        let reads = self.venue.boot_reads();
        log.boot_reads(&reads);
        log.add(&reads, booted_at_ns);
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

    /// What the venue said when it rejected the request of `tag`, if that is the
    /// last request it rejected: the start of its answer's body, printable ASCII
    /// only, at most [`REJECTED_WORDS`] bytes (OKX's `{"code":"50105","msg":"Request
    /// header OK-ACCESS-PASSPHRASE incorrect.",...`). For a message that names the
    /// venue's reason where an event carries none.
    pub fn rejected(&self, tag: Tag) -> Option<&str> {
        (self.rejected.0 == tag && !self.rejected.1.is_empty()).then_some(self.rejected.1.as_str())
    }

    /// Keeps what the venue said rejecting `tag` (a copy of at most
    /// [`REJECTED_WORDS`] bytes: no allocation).
    fn note_rejected(&mut self, tag: Tag, body: &[u8]) {
        self.rejected.0 = tag;
        self.rejected.1.clear();
        for &b in body.iter().take(REJECTED_WORDS) {
            let c = if (0x20..0x7f).contains(&b) {
                b as char
            } else {
                ' '
            };
            let _ = self.rejected.1.try_push(c);
        }
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

    /// Whether the periodic poll of [`Gateway::poll_open_orders`] is wanted by
    /// the caller (by default it is). When it is not, the gateway polls only
    /// while it watches the id of an order that ended [`Event::Unresolved`]
    /// (what its [`Event::Late`] needs), and spends nothing on polls otherwise.
    /// The daemon wants them only while a client asked for them.
    pub fn want_open_orders(&mut self, wanted: bool) {
        self.open_wanted = wanted;
    }

    /// Whether the periodic poll runs now: wanted, or an id is watched.
    fn open_needed(&self) -> bool {
        self.open_every.is_some() && (self.open_wanted || !self.watch.is_empty())
    }

    /// The units the polls of open orders charged so far, by bucket (the
    /// weight a quiet strategy did not ask for; `--stats` shows it).
    pub fn open_orders_spent(&self) -> &[(BucketId, u64)] {
        &self.open_spent
    }

    /// Polls the venue's open orders once, at `now_ns` or as soon as the budget
    /// has room (besides any [`Gateway::poll_open_orders`]): its answer comes as
    /// one [`Event::OpenOrders`]. After the venue's dead man's switch fired, that
    /// answer says which quotes still rest.
    pub fn poll_open_orders_once(&mut self, now_ns: i64) {
        self.open_once = Some(self.open_once.map_or(now_ns, |at| at.min(now_ns)));
        self.open_restart = true;
    }

    /// The earliest time its due work (a re-send, a query, a poll) wants a
    /// [`Gateway::poll`].
    pub fn poll_timeout(&self) -> Option<i64> {
        let open = match (self.open_needed(), self.open) {
            (true, None) => self.next_open,
            _ => i64::MAX,
        };
        let once = match self.open {
            None => self.open_once.unwrap_or(i64::MAX),
            Some(_) => i64::MAX,
        };
        let sync = self.sync_timeout().unwrap_or(i64::MAX);
        let at = self.next_due.min(open).min(once).min(sync);
        let at = at.min(self.halt_check.unwrap_or(i64::MAX));
        (at != i64::MAX).then_some(at)
    }

    /// Sends the open-orders poll if it is due.
    fn poll_open<W: Wire>(&mut self, w: &mut W) {
        let now = w.now();
        let periodic = self.open_needed() && now >= self.next_open;
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
            (self.open_page, self.open_fails) = (0, 0);
            return;
        };
        if self.open_restart {
            self.open_restart = false;
            (self.open_page, self.open_fails) = (0, 0);
        }
        let prepared = match self.open_page {
            0 => self
                .venue
                .open_orders(&mut self.open_req, Some(symbol), now),
            _ => {
                let cursor = &self.open_cursor;
                self.venue
                    .open_orders_after(&mut self.open_req, Some(symbol), cursor, now)
            }
        };
        if prepared.is_err() {
            // Nothing the venue can be asked: no retry loop.
            self.open_once = None;
            (self.open_page, self.open_fails) = (0, 0);
            return;
        }
        let charged = self
            .shapes
            .charge(w.budget(), self.open_req.parts(), 0, Class::Normal, now);
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
                for p in self.open_req.parts() {
                    match self.open_spent.iter_mut().find(|(b, _)| *b == p.bucket) {
                        Some((_, n)) => *n += u64::from(p.cost),
                        None => {
                            let _ = self.open_spent.try_push((p.bucket, u64::from(p.cost)));
                        }
                    }
                }
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

    /// Does the due work: re-sends whose time came, reconcile queries. Its events
    /// come out of [`Gateway::poll_event`].
    pub fn poll<W: Wire>(&mut self, w: &mut W) {
        let now = w.now();
        if self.halt_check.is_some_and(|at| now >= at) {
            self.halts_ended(w);
        }
        self.poll_open(w);
        self.poll_sync(w);
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

    /// Ids watched since a halt cut their reconcile short whose halt has been
    /// cleared (by [`Gateway::clear_halts`] or on the budget directly, as the
    /// daemon's `clear-halt` does): watched from now for the watch's time, and the
    /// open orders polled once at once, so an order that rests shows up as
    /// [`Event::Late`] (an execution on the order stream does too).
    fn halts_ended<W: Wire>(&mut self, w: &mut W) {
        let now = w.now();
        let budget = w.budget();
        let (mut ended, mut waiting) = (false, false);
        for x in &mut self.watch {
            let Some(bucket) = x.halted else { continue };
            if budget.halted().any(|h| h == bucket) {
                waiting = true;
                continue;
            }
            x.halted = None;
            x.until_ns = now.saturating_add(self.watch_ns);
            ended = true;
        }
        self.halt_check = waiting.then_some(now.saturating_add(HALT_CHECK_NS));
        if ended {
            self.poll_open_orders_once(now);
        }
    }

    /// Reads the venue's time again on the gateway's own connection, to re-anchor
    /// the clock at the round trip's midpoint.
    fn reanchor<W: Wire>(&mut self, w: &mut W) {
        if self.time.is_some() {
            return;
        }
        let now = w.now();
        let Ok(parts) = self.venue.parts(E::time_kind()) else {
            return;
        };
        let charged = self
            .shapes
            .charge(w.budget(), &parts, 0, Class::Urgent, now);
        let tid = self
            .trace
            .charge(now, &parts, Class::Urgent, Label::NONE, charged.is_ok());
        let Ok(ticket) = charged else {
            return;
        };
        let req = E::time_request();
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
            self.set_venue_clock(w, clock, now);
            self.skews = 0;
        }
    }

    /// Checks the venue clock against the venue's own time stamped on the
    /// answer to `key`'s write, read at `now` ([`Account::answer_time`]), and
    /// re-anchors it there when the stamp proves it off by more than half the
    /// budget's narrowest guard ([`Clock::narrowed`]): the first sound evidence of
    /// a step of the venue's clock (an NTP correction, a failover) realigns the
    /// fixed windows, before a window the venue counts as full draws 429s. The
    /// stamp was written between the write and `now`, so the move is the least
    /// the stamp proves and never goes past the truth, however late the answer
    /// came; an error under the slack is the guard's to absorb, and leaves the
    /// windows (each realignment holds their counts longer) alone.
    pub(super) fn check_clock<W: Wire>(&mut self, w: &mut W, key: Key, body: &[u8], now: i64) {
        if let Some(sent_ns) = self.ledger.get(key).map(|e| e.sent_ns) {
            self.check_clock_since(w, sent_ns, body, now);
        }
    }

    /// [`Gateway::check_clock`] of an answer to a write whose last byte left at
    /// `sent_ns` (the lane's session knows it: a frame that waited in its send
    /// buffer left later than its hand-over).
    pub(super) fn check_clock_since<W: Wire>(
        &mut self,
        w: &mut W,
        sent_ns: i64,
        body: &[u8],
        now: i64,
    ) {
        let Some((clock, stamp_ms)) = self.venue.answer_time(body) else {
            return;
        };
        let budget = w.budget();
        let guard = budget
            .ids()
            .filter_map(|id| budget.fixed_guard(id).ok().flatten())
            .min();
        let slack = guard.map_or(CLOCK_SLACK_NS, |g| g / 2);
        if let Some(clock) = clock.narrowed(stamp_ms, sent_ns, now, slack) {
            self.set_venue_clock(w, clock, now);
        }
    }

    /// Sets the venue clock everywhere it is read (the adapter, the WebSocket
    /// lane) and realigns every fixed bucket's windows to it
    /// ([`Budget::set_phase`](ergon_core::Budget::set_phase), never minting).
    fn set_venue_clock<W: Wire>(&mut self, w: &mut W, clock: Clock, now: i64) {
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
    }

    fn push(&mut self, ev: Event<'static>) {
        // Sized for two events per slot, so this never grows.
        self.pending.push_back(ev);
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

impl Stats {
    /// A refusal of the budget's, counted by its reason.
    fn count_limited(&mut self, why: Why) {
        match why {
            Why::Full | Why::Closed => self.limited_full += 1,
            Why::Held => self.limited_held += 1,
            Why::Halted => self.limited_halted += 1,
            Why::TooBig | Why::Foreign | Why::Receipts => self.limited_too_big += 1,
        }
    }
}

fn widen<'r>(e: Event<'static>) -> Event<'r> {
    e
}
