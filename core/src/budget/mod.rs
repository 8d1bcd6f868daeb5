//! The budget: a fixed set of buckets charged all or none.
//!
//! Drive order: call [`Budget::try_charge`] before a request goes out; then exactly
//! one of [`Budget::refund`] (never written) or [`Ticket::sent`] followed later by
//! [`Budget::complete`]. Feed the server's word back with [`Budget::observe_used`],
//! [`Budget::throttled`], [`Budget::banned`] and [`Budget::charge_after`]. Call
//! [`Budget::tick`] while idle so the catch-up walk of the rings stays off the send
//! path.
//!
//! Every call takes `now_ns` on the caller's monotonic clock. A time earlier than one
//! already seen is read as the latest one seen: a clock that steps back neither
//! drops charges early (minting budget) nor holds them longer than the window.
//!
//! The charge path has two speeds. Each bucket keeps a *lane*: the room Urgent has
//! left and the instant until which that room can only change by charging (the end
//! of the ring's slot, the next guard edge of a fixed window; never for a held or
//! halted bucket, nor for a token bucket whose room grows with time). While every
//! part's lane is open, a charge is a compare and a subtraction per part; what the
//! lanes took is settled into the buckets' state by the next call that needs that
//! state (a refusal, a refund, a server figure, a new slot ...). Each of those
//! settles first and reopens the lane after.
//!
//! A [`Shape`](crate::Shape) is a part list registered once: validated, repeated
//! buckets merged, and each class's need per part (cost plus headroom) computed
//! then, so that charging it is a compare per part on the lanes and a subtraction,
//! and its ticket names the shape instead of copying the parts.
//!
//! Files: `builder.rs` (the [`Builder`]), `bucket.rs` (one bucket and its lane),
//! `charge.rs` (ad-hoc charges and refunds), `shape.rs` (shapes), this file (the
//! budget, the server's word, time).
//!
//! Never allocates, locks, logs or reads a clock.

use arrayvec::{ArrayString, ArrayVec};

mod bucket;
mod builder;
mod charge;
mod limit;
mod lists;
mod resend;
mod shape;

use bucket::{Back, Bucket, Lane, State};
use builder::validate_parts;
pub use builder::{Builder, DEFAULT_HOLD_GUARD_NS};
use lists::{Lists, Taken};
use shape::merge;
use shape::ShapeRow;

use crate::fixed::CountsIn;
use crate::spec::{ConfigError, Spec};
use crate::stats::Stats;
use crate::ticket::{BucketId, Flight, ForeignId, Part, Ticket, NO_SHAPE};
use crate::verdict::Verdict;
use crate::{MAX_BUCKETS, MAX_NAME, MAX_SHAPES};

/// The length of the rooms array: every `u8`.
const ROOMS: usize = 256;
const _: () = assert!(MAX_BUCKETS < ROOMS, "a room past the buckets stays closed");

/// A fixed set of rate limits, charged all or none. See the [crate] docs.
// Laid out for the charge path (`repr(C)`, declared order, cache-line aligned):
// the scalars a charge reads or writes share the first line, the rooms of the
// first eight buckets the next, then the shape rows (two lines per row for up
// to four parts); what only the slow paths read comes last.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub struct Budget {
    now_ns: i64,
    /// Charges admitted so far: the sequence number of the last ticket.
    seq: u64,
    /// The earliest end of an open lane (`i64::MAX` if none): before it, every open
    /// lane holds, so a shape's charge checks rooms only.
    lanes_until: i64,
    /// The tag every id, ticket and flight of this budget carries.
    tag: u16,
    shape_count: u8,
    /// The charge sequence when a lane last settled or reopened: a shape's ticket
    /// charged after it is still in its lanes.
    last_settle_seq: u64,
    /// Tickets and flights given back (refunded or completed) so far.
    returned: u64,
    /// Bumped by every change of a lane or a bucket outside the charge and refund
    /// paths (which bump `seq` and `returned`): see [`Budget::stamp`].
    epoch: u64,
    hold_guard_ns: i64,
    /// The room of each lane (see [`Lane`]), by bucket index. One entry per `u8`,
    /// so that a shape's bucket index (a `u8`) needs no bounds check or mask; the
    /// entries past the buckets stay 0 (closed) for good, and
    /// [`shape::NO_ROOM`] is where unregistered shape rows point.
    rooms: [u64; ROOMS],
    /// Registered shapes; `shape_count` of them are in use.
    shapes: [ShapeRow; MAX_SHAPES],
    /// The hot half of each bucket's lane, by bucket index; the slots past the
    /// buckets stay closed. A fixed array so that an index taken modulo its length
    /// needs no bounds check on the charge paths.
    lanes: [Lane; MAX_BUCKETS],
    /// What refunds gave back into each lane since it last settled, by bucket
    /// index, like the rooms.
    back: [Back; ROOMS],
    buckets: ArrayVec<Bucket, MAX_BUCKETS>,
    /// The part lists of outstanding tickets of [`Budget::try_charge`].
    lists: Lists,
}

impl Budget {
    /// A builder to declare the buckets.
    pub fn builder() -> Builder {
        Builder::default()
    }

    pub(crate) fn new(
        specs: &[(ArrayString<MAX_NAME>, Spec)],
        tag: u16,
        hold_guard_ns: i64,
        now_ns: i64,
    ) -> Self {
        let mut lanes = [Lane::closed(); MAX_BUCKETS];
        let mut rooms = [0; ROOMS];
        let mut buckets = ArrayVec::new();
        let mut in_flight = 0u32;
        for (i, (name, spec)) in specs.iter().enumerate().take(MAX_BUCKETS) {
            if matches!(spec.kind(), crate::spec::Kind::InFlight { .. }) {
                in_flight |= 1 << i;
            }
            let (bucket, lane, room) = Bucket::new(*name, spec, now_ns);
            buckets.push(bucket);
            lanes[i] = lane;
            rooms[i] = room;
        }
        let mut budget = Budget {
            now_ns,
            hold_guard_ns,
            seq: 0,
            returned: 0,
            tag,
            buckets,
            lanes,
            rooms,
            back: [Back::default(); ROOMS],
            lanes_until: i64::MAX,
            last_settle_seq: 0,
            epoch: 0,
            shapes: [ShapeRow::EMPTY; MAX_SHAPES],
            shape_count: 0,
            lists: Lists::new(in_flight),
        };
        budget.lanes_changed();
        budget
    }

    /// Call after any lane settled, opened or closed: recomputes the earliest end of
    /// an open lane, and marks the tickets charged so far as settled somewhere.
    fn lanes_changed(&mut self) {
        self.epoch += 1;
        self.last_settle_seq = self.seq;
        self.lanes_until = self.lanes[..self.buckets.len()]
            .iter()
            .filter(|l| l.until_ns != Lane::CLOSED)
            .map(|l| l.until_ns)
            .min()
            .unwrap_or(i64::MAX);
    }

    /// [`Budget::lanes_changed`] after one lane settled and moved its end from `old`
    /// to `new`: recomputes the earliest end only if it may have risen.
    fn lane_moved(&mut self, old: i64, new: i64) {
        self.epoch += 1;
        self.last_settle_seq = self.seq;
        if new == old {
            return;
        }
        if new != Lane::CLOSED && new < self.lanes_until {
            self.lanes_until = new;
        } else if old == self.lanes_until {
            self.lanes_changed();
        }
    }

    /// The budget's version: moves with every charge admitted (`seq`), every ticket
    /// or flight given back (`returned`) and every other change of a bucket or a
    /// lane (`epoch`: each goes through [`Budget::lanes_changed`] or
    /// [`Budget::lane_moved`]). All three only grow, so their sum moves whenever
    /// one does. Settling a lane into its bucket changes no answer and moves
    /// nothing. While it holds and every lane is open, a refusal asked again is
    /// answered the same.
    #[inline(always)]
    fn stamp(&self) -> u64 {
        self.seq
            .wrapping_add(self.returned)
            .wrapping_add(self.epoch)
    }

    /// Reads `now_ns` as no earlier than any time already seen.
    #[inline]
    fn clock(&mut self, now_ns: i64) -> i64 {
        if now_ns > self.now_ns {
            self.now_ns = now_ns;
        }
        self.now_ns
    }

    /// The bucket `id` names and its lane, or `None` for an id of another budget.
    #[allow(clippy::type_complexity)]
    fn bucket_mut(
        &mut self,
        id: BucketId,
    ) -> Option<(&mut Bucket, &mut Lane, &mut u64, &mut Back)> {
        if id.budget != self.tag {
            return None;
        }
        let bucket = self.buckets.get_mut(id.index())?;
        let i = id.index() % MAX_BUCKETS;
        Some((
            bucket,
            &mut self.lanes[i],
            &mut self.rooms[i],
            &mut self.back[i],
        ))
    }

    /// The bucket `id` names, or [`ForeignId`].
    fn own(&self, id: BucketId) -> Result<&Bucket, ForeignId> {
        if id.budget != self.tag {
            return Err(ForeignId);
        }
        self.buckets.get(id.index()).ok_or(ForeignId)
    }

    /// The id of the bucket at `index`.
    fn id(&self, index: usize) -> BucketId {
        BucketId {
            budget: self.tag,
            index: index as u8,
        }
    }

    /// Settles `bucket` and moves it to `now`, lets `f` change it, then reopens its
    /// lane. Every change outside the charge path goes through here.
    fn change<R>(
        &mut self,
        bucket: BucketId,
        now: i64,
        f: impl FnOnce(&mut Bucket) -> R,
    ) -> Result<R, ForeignId> {
        let seq = self.seq;
        let (b, lane, room, back) = self.bucket_mut(bucket).ok_or(ForeignId)?;
        let old = lane.until_ns;
        b.sync(back, *room, now, seq);
        let result = f(b);
        b.open_lane(lane, room, now, seq);
        let new = lane.until_ns;
        self.lane_moved(old, new);
        Ok(result)
    }

    /// The answer to a sent request arrived, or its outcome was settled: releases its
    /// in-flight limits. Rate limits keep the charge: the venue counted the request.
    ///
    /// Every flight must come back here, once: a flight dropped instead keeps its
    /// in-flight units for good, and shows in [`Budget::receipts_outstanding`] (and
    /// a part list's keeps its entry held until another list needs it: see
    /// [`Budget::lists_held`]). A flight whose list the budget gave up for another
    /// (one that charged no in-flight bucket) has nothing to release. A flight of
    /// another budget, or of a clone of this one charged after the clone was made,
    /// is refused with [`ForeignId`], changing nothing.
    pub fn complete(&mut self, flight: Flight, now_ns: i64) -> Result<(), ForeignId> {
        if flight.budget != self.tag {
            return Err(ForeignId);
        }
        let (parts, n) = if flight.shape == NO_SHAPE {
            match self.lists.take(flight.list, flight.gen) {
                Taken::Parts(parts, n) => (parts, n),
                // Given up for another list: it charged no in-flight bucket, so
                // there is nothing to release.
                Taken::GivenUp => {
                    self.returned += 1;
                    return Ok(());
                }
                Taken::Unknown => return Err(ForeignId),
            }
        } else {
            self.shapes[usize::from(flight.shape) % MAX_SHAPES].parts_array()
        };
        let parts = &parts[..n];
        self.returned += 1;
        let now = self.clock(now_ns);
        for part in parts {
            let in_flight = self
                .buckets
                .get(part.bucket.index())
                .is_some_and(|b| matches!(b.state, State::InFlight(_)));
            if in_flight {
                let _own = self.change(part.bucket, now, |b| {
                    if let State::InFlight(outstanding) = &mut b.state {
                        *outstanding = outstanding.saturating_sub(u64::from(part.cost));
                    }
                });
            }
        }
        Ok(())
    }

    /// Adds cost known only from the response (Hyperliquid adds weight per 20 items
    /// returned). Never refused: it may fill the bucket, which then refuses until it
    /// drains. In-flight limits and gates have nothing to add to.
    ///
    /// The venue counts every unit it says it counted, so the whole figure is booked
    /// at `now`, except what no venue can mean:
    /// - sliding and fixed windows: one figure adds at most `limit` units (a bucket
    ///   full for one window, which drains with them);
    /// - token buckets: a debt that would take longer than the bucket's
    ///   [`Spec::max_wait`] to drain is no throttle but a ban: the bucket halts
    ///   (counted in [`Stats::bans`](crate::Stats::bans)) until [`Budget::clear_halt`],
    ///   and keeps `max_wait`'s worth of debt, so that a cleared bucket drains within
    ///   that wait, not at the end of time. Below that the whole debt is kept.
    ///
    /// Never clamped to `limit - used`: the units above it are real and outlive the
    /// older ones.
    pub fn charge_after(
        &mut self,
        bucket: BucketId,
        cost: u32,
        now_ns: i64,
    ) -> Result<(), ForeignId> {
        self.own(bucket)?;
        let now = self.clock(now_ns);
        self.change(bucket, now, |b| {
            let cost = u64::from(cost);
            let limit = b.stats.limit;
            let max_wait_ns = b.max_wait_ns;
            match &mut b.state {
                State::Sliding(ring) => ring.add(cost.min(limit)),
                State::Fixed(windows) => windows.add(cost.min(limit), now),
                State::Token(gcra) => {
                    if let Some(drained_at) = gcra.add_debt(cost, now, max_wait_ns) {
                        b.halt(drained_at);
                    }
                }
                State::InFlight(_) | State::Gate => return,
            }
            b.stats.charged_after = b.stats.charged_after.saturating_add(cost);
        })
    }

    /// The server's count for this scope (a usage header such as
    /// `X-MBX-USED-WEIGHT-1M`). Raises the local count to it, never lowers it; other
    /// senders on the same IP show up here. The difference is kept as drift.
    ///
    /// The venue keeps every unit it says it holds until that unit leaves its
    /// window, so the count rises to the whole figure, never clamped to the limit:
    /// a figure of 26 on a limit of 24 keeps the 2 units above it. One figure raises
    /// the count by at most `limit` above the local count (the burst for token
    /// buckets): a usage header of 10^18 is no count a venue can mean, and a bucket
    /// full for one window drains with it. A sliding window compares the figure
    /// with the units the venue surely still counts (all but its oldest slot's,
    /// which may have left the venue's window already): the rest is another
    /// sender's, booked at `now`, so the count may exceed the figure by at most
    /// that slot (the ring's usual price of conservatism).
    pub fn observe_used(
        &mut self,
        bucket: BucketId,
        used: u64,
        now_ns: i64,
    ) -> Result<(), ForeignId> {
        // Counted at the budget's now, which a clock read going back does not
        // move back.
        self.observe(bucket, used, None, now_ns)
    }

    /// [`Budget::observe_used`] for a figure the venue stamped with its own time
    /// (Binance's `transactTime`), mapped to this clock as `counted_ns` with the
    /// same clock estimate the bucket's windows are aligned on
    /// ([`Spec::phase`], [`Budget::set_phase`]): the stamp then names the
    /// venue's window exactly, whatever that estimate's error.
    ///
    /// On a fixed window, a figure read late, after a boundary, is the window
    /// it was stamped in, not the one its answer arrived in. The venue counts a
    /// request before it stamps it, so a figure stamped within the bucket's
    /// guard after a boundary may be the previous window's, and both are
    /// raised; one stamped before a boundary is never the next window's. A
    /// stamp may be later than `now_ns` (the estimate behind the venue's clock,
    /// an answer read at once): it still names its window, the next one past a
    /// boundary. A stamp more than a guard after `now_ns` is no estimate's error
    /// and no stamp: the figure is read as [`Budget::observe_used`] reads it, at
    /// `now_ns`, where our clock and the venue's may be on either side of a
    /// boundary. Sliding windows and token buckets book the figure at `now_ns`,
    /// as [`Budget::observe_used`] does: later is never less careful there.
    pub fn observe_used_at(
        &mut self,
        bucket: BucketId,
        used: u64,
        counted_ns: i64,
        now_ns: i64,
    ) -> Result<(), ForeignId> {
        self.observe(bucket, used, Some(counted_ns), now_ns)
    }

    /// A usage figure, stamped (`counted_ns`) or not.
    fn observe(
        &mut self,
        bucket: BucketId,
        used: u64,
        counted_ns: Option<i64>,
        now_ns: i64,
    ) -> Result<(), ForeignId> {
        self.own(bucket)?;
        let now = self.clock(now_ns);
        let seq = self.seq;
        self.change(bucket, now, |b| {
            let local = b.used_at(now);
            b.stats.observes = b.stats.observes.saturating_add(1);
            b.stats.observed = used;
            b.stats.observed_at = counted_ns;
            b.stats.drift = i64::try_from(used)
                .unwrap_or(i64::MAX)
                .saturating_sub(i64::try_from(local).unwrap_or(i64::MAX));
            // What the figure holds beyond the units the venue surely still counts
            // came from another sender and stays a whole window from now. A ring
            // keeps its oldest slot until the whole slot has left the window, so
            // part of it may be gone at the venue; near a fixed boundary the figure
            // may be the neighbouring window's, which may hold less than ours; a
            // token bucket compares exact times, not its count rounded up.
            let limit = b.stats.limit;
            let raised = match &mut b.state {
                State::Sliding(ring) => {
                    let sure = ring.surely_counted();
                    if used > sure {
                        ring.add((used - sure).min(limit));
                    }
                    used > sure
                }
                State::Fixed(windows) => {
                    let at = windows.figure_time(counted_ns, now);
                    let raise = used > windows.least_counted(at);
                    if raise {
                        windows.raise_to(used, limit, at);
                    }
                    raise
                }
                State::Token(gcra) => gcra.raise_to(used.min(local.saturating_add(limit)), now),
                State::InFlight(_) | State::Gate => false,
            };
            if raised {
                b.raised_seq = seq;
            }
        })
    }

    /// The server throttled this scope (a 429 or its body code), and the verdict that
    /// applies, for the venue adapter to return.
    ///
    /// - A server wait above zero and within the bucket's cap ([`Spec::max_wait`]):
    ///   holds the bucket for that wait plus the budget's hold guard (the clock
    ///   uncertainty, [`Builder::hold_guard`]).
    /// - No wait, or a wait of zero or less (`Retry-After: 0`, a past date, a reset
    ///   time already gone): holds for one window of the bucket (one second for gates
    ///   and in-flight limits), as if the server had named none: sending into a 429
    ///   again at once is what venues ban for.
    ///
    /// Either way the count is kept (venues count throttled requests too) and the
    /// answer is [`Verdict::Throttled`] with the end of the hold in force.
    ///
    /// A wait above the cap is no throttle: the bucket is halted as a ban (counted in
    /// [`Stats::bans`], only [`Budget::clear_halt`] resumes it) and the answer is
    /// [`Verdict::Banned`] with the venue's end, `now + wait`, saturating.
    ///
    /// An id of another budget is refused with [`ForeignId`], changing nothing.
    pub fn throttled(
        &mut self,
        bucket: BucketId,
        wait_ns: Option<i64>,
        now_ns: i64,
    ) -> Result<Verdict, ForeignId> {
        self.own(bucket)?;
        let guard_ns = self.hold_guard_ns;
        let now = self.clock(now_ns);
        self.change(bucket, now, |b| match wait_ns {
            Some(wait) if wait > b.max_wait_ns => {
                let until_ns = now.saturating_add(wait);
                b.halt(until_ns);
                Verdict::Banned { bucket, until_ns }
            }
            _ => {
                let hold = match wait_ns {
                    Some(wait) if wait > 0 => wait.saturating_add(guard_ns),
                    _ => b.window_ns(),
                };
                b.hold_until_ns = b.hold_until_ns.max(now.saturating_add(hold));
                b.stats.throttles += 1;
                Verdict::Throttled {
                    bucket,
                    until_ns: b.hold_until_ns,
                }
            }
        })
    }

    /// The venue banned this scope until `until_ns` (its word, on the caller's clock).
    /// Halts the bucket: the end of the venue's wait does not resume it, only
    /// [`Budget::clear_halt`] does. Halting the IP gate stops every request and
    /// connect.
    pub fn banned(
        &mut self,
        bucket: BucketId,
        until_ns: i64,
        now_ns: i64,
    ) -> Result<(), ForeignId> {
        self.own(bucket)?;
        let now = self.clock(now_ns);
        self.change(bucket, now, |b| b.halt(until_ns))
    }

    /// A person's decision to resume a halted scope.
    pub fn clear_halt(&mut self, bucket: BucketId) -> Result<(), ForeignId> {
        let now = self.now_ns;
        self.change(bucket, now, |b| b.halted = false)
    }

    /// Realigns a fixed-window bucket's windows to `phase_ns` (what
    /// [`Spec::phase`](crate::Spec::phase) set at build), for a venue clock
    /// re-anchored since. `Ok(false)`: the bucket has no fixed windows, nothing
    /// changed. Conservative, never minting budget: the current window stretches
    /// to the first new boundary at or after its end, so units counted in it stay
    /// counted until the later of the old and the new window's end; from there
    /// the windows follow the new phase.
    ///
    /// ```
    /// # use ergon_core::{Budget, Class, Part, Spec};
    /// let mut b = Budget::builder();
    /// let w = b.add("w", Spec::fixed(2, 1_000)).unwrap();
    /// let mut budget = b.build(0).unwrap();
    /// let _t = budget.try_charge(&[Part::new(w, 2)], Class::Normal, 0).unwrap();
    /// assert_eq!(budget.set_phase(w, 500, 100), Ok(true)); // windows now end at 500
    /// // The two units stay counted past 500, up to the old end at 1000.
    /// assert!(budget.try_charge(&[Part::new(w, 1)], Class::Normal, 700).is_err());
    /// assert!(budget.try_charge(&[Part::new(w, 1)], Class::Normal, 1_500).is_ok());
    /// ```
    pub fn set_phase(
        &mut self,
        bucket: BucketId,
        phase_ns: i64,
        now_ns: i64,
    ) -> Result<bool, ForeignId> {
        let now = self.clock(now_ns);
        self.change(bucket, now, |b| match b.fixed_mut() {
            Some(windows) => {
                windows.set_phase(phase_ns, now);
                true
            }
            None => false,
        })
    }

    /// The window and the phase (`window_ns`, `phase_ns`) of a fixed-window
    /// bucket, to compute its phase for [`Budget::set_phase`]; `None` for other
    /// buckets. Windows start at `phase_ns + n·window_ns`.
    pub fn fixed_window(&self, bucket: BucketId) -> Result<Option<(i64, i64)>, ForeignId> {
        Ok(self.own(bucket)?.fixed_window())
    }

    /// The guard of a fixed-window bucket: how far from a boundary a charge
    /// counts on both sides of it, the clock error plus one-way latency its
    /// windows absorb; `None` for other buckets.
    ///
    /// ```
    /// use ergon_core::{Budget, Spec};
    /// let mut b = Budget::builder();
    /// let orders = b.add("orders_1s", Spec::fixed(10, 1_000).guard(30)).unwrap();
    /// let budget = b.build(0).unwrap();
    /// assert_eq!(budget.fixed_guard(orders).unwrap(), Some(30));
    /// ```
    pub fn fixed_guard(&self, bucket: BucketId) -> Result<Option<i64>, ForeignId> {
        Ok(self.own(bucket)?.fixed_guard())
    }

    /// The fixed windows of `bucket` a charge at `now_ns` counts in (within the
    /// guard of a boundary, both sides of it), for a caller that splits the
    /// bucket among its users and must count their shares as the bucket counts;
    /// `None` for other buckets.
    ///
    /// ```
    /// use ergon_core::{Budget, Spec};
    /// let mut b = Budget::builder();
    /// let orders = b.add("orders_1s", Spec::fixed(10, 1_000).guard(30)).unwrap();
    /// let budget = b.build(0).unwrap();
    /// let at = budget.counts_in(orders, 1_980).unwrap().unwrap();
    /// assert_eq!((at.index, at.previous, at.next), (1, false, true));
    /// assert_eq!(at.indices().collect::<Vec<_>>(), [1, 2]);
    /// assert_eq!((at.clear_of(1), at.clear_of(2)), (2_030, 3_030));
    /// ```
    pub fn counts_in(&self, bucket: BucketId, now_ns: i64) -> Result<Option<CountsIn>, ForeignId> {
        Ok(self.own(bucket)?.counts_in(now_ns))
    }

    /// The halted buckets.
    pub fn halted(&self) -> impl Iterator<Item = BucketId> + '_ {
        self.ids().filter(|id| self.buckets[id.index()].halted)
    }

    /// Whether `bucket` is halted.
    pub fn is_halted(&self, bucket: BucketId) -> Result<bool, ForeignId> {
        Ok(self.own(bucket)?.halted)
    }

    /// Tickets and flights this budget handed out and has not had back through
    /// [`Budget::refund`] or [`Budget::complete`].
    ///
    /// The rule: every ticket ends in exactly one of `refund` or `sent` then
    /// `complete`. A ticket or flight dropped instead (the types are `#[must_use]`,
    /// but a binding can still be dropped) keeps its in-flight units for good; this
    /// count is how a driver sees it: with nothing in flight it must be 0, and one
    /// that only grows is a leak.
    pub fn receipts_outstanding(&self) -> u64 {
        self.seq - self.returned
    }

    /// Distinct part lists held by outstanding tickets and flights of
    /// [`Budget::try_charge`], at most [`MAX_LISTS`](crate::MAX_LISTS): at that
    /// figure another list takes the entry of the least recently charged one that
    /// charges no in-flight bucket, or is refused with
    /// [`Why::Receipts`](crate::Why::Receipts) if every list held charges one.
    pub fn lists_held(&self) -> usize {
        self.lists.held()
    }

    /// The parts `ticket` charged: its part list for a ticket of
    /// [`Budget::try_charge`], its shape's parts as registered
    /// ([`Budget::shape_parts`]) for one of [`Budget::try_charge_shape`].
    /// [`ForeignId`] for a ticket of another budget (or of a clone, charged after
    /// the clone was made), and for a ticket whose list the budget gave up for
    /// another (see [`MAX_LISTS`](crate::MAX_LISTS)).
    pub fn ticket_parts(&self, ticket: &Ticket) -> Result<&[Part], ForeignId> {
        self.receipt_parts(ticket.budget, ticket.shape, ticket.list, ticket.gen)
    }

    /// The parts `flight` charged, as [`Budget::ticket_parts`] gives them.
    pub fn flight_parts(&self, flight: &Flight) -> Result<&[Part], ForeignId> {
        self.receipt_parts(flight.budget, flight.shape, flight.list, flight.gen)
    }

    fn receipt_parts(&self, tag: u16, shape: u8, list: u8, gen: u32) -> Result<&[Part], ForeignId> {
        if tag != self.tag {
            return Err(ForeignId);
        }
        if shape != NO_SHAPE {
            return self.shape_parts(crate::Shape {
                budget: tag,
                index: shape,
            });
        }
        self.lists.get(list, gen).ok_or(ForeignId)
    }

    /// Moves every window to `now_ns`. Call it while idle: the catch-up walk of a ring
    /// after a long gap then happens here instead of on the next charge.
    pub fn tick(&mut self, now_ns: i64) {
        let now = self.clock(now_ns);
        let seq = self.seq;
        let lanes = self
            .lanes
            .iter_mut()
            .zip(self.rooms.iter_mut().zip(&mut self.back));
        for (b, (lane, (room, back))) in self.buckets.iter_mut().zip(lanes) {
            // A bucket whose lane still holds has nothing to catch up.
            if !lane.open_at(now) {
                b.sync(back, *room, now, seq);
                b.open_lane(lane, room, now, seq);
            }
        }
        self.lanes_changed();
    }

    /// The next instant the budget has work of its own: a lane closes, a hold ends,
    /// a window rolls (a sliding window's slot, so that [`Budget::tick`] walks its
    /// ring off the send path; a fixed window that holds a count). A driver parks
    /// until then (or until its own next event) and calls [`Budget::tick`]. `None`:
    /// nothing to do until something is charged or said. An instant at or before
    /// `now_ns` means: tick now.
    ///
    /// Halts end only by a person's [`Budget::clear_halt`], and a token bucket's
    /// room grows continuously: neither gives a timeout (a refusal's `ready_at_ns`
    /// says when a charge passes).
    ///
    /// ```
    /// # use ergon_core::{Budget, Spec};
    /// let mut b = Budget::builder();
    /// let w = b.add("w", Spec::sliding(10, 1_000, 10)).unwrap();
    /// let mut budget = b.build(0).unwrap();
    /// assert_eq!(budget.poll_timeout(5), Some(100)); // the first slot rolls at 100
    /// budget.tick(100);
    /// assert_eq!(budget.poll_timeout(100), Some(200));
    /// ```
    pub fn poll_timeout(&self, now_ns: i64) -> Option<i64> {
        let now = now_ns.max(self.now_ns);
        self.buckets
            .iter()
            .zip(self.lanes.iter().zip(&self.rooms))
            .filter_map(|(b, (lane, room))| b.next_event(lane, *room, now))
            .min()
    }

    /// A snapshot of one bucket at the latest time the budget has seen.
    pub fn stats(&self, bucket: BucketId) -> Result<Stats, ForeignId> {
        let b = self.own(bucket)?;
        // Read what the lane charged without touching the live bucket.
        let mut b = b.clone();
        let i = bucket.index() % MAX_BUCKETS;
        let mut back = self.back[i];
        b.settle(&mut back, self.rooms[i], self.seq);
        // Refusals repeated from a shape's memory are booked when it is replaced.
        self.pending_refusals(bucket, &mut b.stats.refusals);
        Ok(Stats {
            used: b.used_at(self.now_ns),
            held_until_ns: (self.now_ns < b.hold_until_ns).then_some(b.hold_until_ns),
            halted: b.halted,
            ..b.stats
        })
    }

    /// Checks a part list once (at start-up) against this budget's buckets and the
    /// capacity of a ticket.
    pub fn validate_parts(&self, parts: &[Part]) -> Result<(), ConfigError> {
        validate_parts(parts, self.tag, self.buckets.len())
    }

    /// The bucket declared under `name`.
    pub fn bucket(&self, name: &str) -> Option<BucketId> {
        self.buckets
            .iter()
            .position(|b| b.name.as_str() == name)
            .map(|i| self.id(i))
    }

    /// The name `bucket` was declared under.
    pub fn name(&self, bucket: BucketId) -> Result<&str, ForeignId> {
        Ok(self.own(bucket)?.name.as_str())
    }

    /// The spec `bucket` was declared with (to write it down: a recorded trace).
    pub fn spec(&self, bucket: BucketId) -> Result<Spec, ForeignId> {
        Ok(self.own(bucket)?.spec)
    }

    /// Every bucket, in declaration order.
    pub fn ids(&self) -> impl Iterator<Item = BucketId> {
        let tag = self.tag;
        (0..self.buckets.len() as u8).map(move |index| BucketId { budget: tag, index })
    }

    /// The latest time the budget has seen.
    pub fn now_ns(&self) -> i64 {
        self.now_ns
    }
}
