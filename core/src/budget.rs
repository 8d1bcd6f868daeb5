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
//! Never allocates, locks, logs or reads a clock.

use arrayvec::{ArrayString, ArrayVec};

use crate::fixed::Windows;
use crate::gcra::Gcra;
use crate::ring::Ring;
use crate::spec::{validate_parts, Kind, Spec};
use crate::stats::Stats;
use crate::ticket::{BucketId, Charged, Class, Flight, ForeignId, Limited, Part, Ticket, Why};
use crate::verdict::Verdict;
use crate::{Builder, ConfigError, MAX_BUCKETS, MAX_NAME, MAX_PARTS};

/// How long a throttle without a server wait holds a gate or an in-flight limit,
/// which have no window of their own.
const GATE_HOLD_NS: i64 = 1_000_000_000;

/// The floor of the default [`Spec::max_wait`]: 5 minutes.
const DEFAULT_MAX_WAIT_NS: i64 = 300_000_000_000;

// Inline on purpose: the ring lives in the bucket so the budget never allocates and a
// charge touches one cache-friendly array of buckets.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
enum State {
    Sliding(Ring),
    Fixed(Windows),
    Token(Gcra),
    InFlight(u64),
    Gate,
}

/// The fast path of one bucket. See the module docs.
#[derive(Clone, Copy, Debug)]
struct Lane {
    /// The lane holds before this instant; `i64::MIN` closes it.
    until_ns: i64,
    /// Units Urgent may still charge before `until_ns`.
    room: u64,
    /// `room` when the lane opened: `base - room` is what the lane has charged.
    base: u64,
    /// When the lane opened: its charges count as made then (same slot, same windows).
    at_ns: i64,
    /// Units each class must leave, by [`Class::index`] (0 for Urgent).
    headroom: [u64; 3],
}

impl Lane {
    const CLOSED: i64 = i64::MIN;
}

#[derive(Clone, Debug)]
struct Bucket {
    lane: Lane,
    state: State,
    /// Units each class may use, by [`Class::index`].
    allowances: [u64; 3],
    /// Holds end here; `i64::MIN` when none was ever set.
    hold_until_ns: i64,
    /// The budget's charge sequence when `observe_used` last raised the count: the
    /// server's figure excludes every request not yet sent, so a ticket charged
    /// before the raise and refunded after it must not take its units back from the
    /// raised count (that would mint them).
    raised_seq: u64,
    /// The longest server wait read as a throttle; a longer one halts.
    max_wait_ns: i64,
    halted: bool,
    name: ArrayString<MAX_NAME>,
    stats: Stats,
}

impl Bucket {
    fn new(name: ArrayString<MAX_NAME>, spec: &Spec, now: i64) -> Self {
        let state = match spec.kind() {
            Kind::Sliding {
                window_ns, slots, ..
            } => State::Sliding(Ring::new(window_ns, slots, now)),
            Kind::Fixed {
                window_ns,
                phase_ns,
                guard_ns,
                ..
            } => State::Fixed(Windows::new(window_ns, phase_ns, guard_ns, now)),
            Kind::Token { interval_ns, .. } => State::Token(Gcra::new(interval_ns, now)),
            Kind::InFlight { .. } => State::InFlight(0),
            Kind::Gate => State::Gate,
        };
        let allowances = spec.allowances();
        let mut bucket = Bucket {
            lane: Lane {
                until_ns: Lane::CLOSED,
                room: 0,
                base: 0,
                at_ns: now,
                headroom: allowances.map(|a| allowances[0] - a),
            },
            state,
            allowances,
            hold_until_ns: i64::MIN,
            raised_seq: 0,
            max_wait_ns: 0,
            halted: false,
            name,
            stats: Stats {
                limit: spec.limit(),
                ..Stats::default()
            },
        };
        bucket.max_wait_ns = spec.max_wait_ns().unwrap_or_else(|| {
            bucket
                .window_ns()
                .saturating_mul(2)
                .max(DEFAULT_MAX_WAIT_NS)
        });
        bucket.open_lane(now);
        bucket
    }

    /// Books what the lane charged into the bucket's state, as made when the lane
    /// opened. Call before anything reads or moves the state.
    #[inline]
    fn settle(&mut self) {
        let lane = &mut self.lane;
        let charged = lane.base - lane.room;
        if charged == 0 {
            return;
        }
        lane.base = lane.room;
        match &mut self.state {
            State::Sliding(ring) => ring.add(charged),
            State::Fixed(windows) => windows.add(charged, lane.at_ns),
            State::InFlight(outstanding) => *outstanding += charged,
            // A token lane never opens; a gate counts nothing.
            State::Token(_) | State::Gate => {}
        }
        self.stats.admitted += charged;
    }

    /// Settles, then moves the state to `now`.
    #[inline]
    fn sync(&mut self, now: i64) {
        self.settle();
        self.advance(now);
    }

    /// Opens the lane at `now` from the (settled, advanced) state, or closes it where
    /// a charge needs the full check.
    fn open_lane(&mut self, now: i64) {
        let limit = self.allowances[0];
        let steady = if self.halted || now < self.hold_until_ns {
            None
        } else {
            match &self.state {
                State::Sliding(ring) => Some((ring.used(), ring.steady_until_ns())),
                State::Fixed(windows) => Some(windows.steady(now)),
                State::InFlight(outstanding) => Some((*outstanding, i64::MAX)),
                State::Gate => Some((0, i64::MAX)),
                State::Token(_) => None,
            }
        };
        let lane = &mut self.lane;
        lane.at_ns = now;
        match steady {
            Some((used, until)) if used <= limit => {
                lane.room = if matches!(self.state, State::Gate) {
                    u64::MAX
                } else {
                    limit - used
                };
                lane.until_ns = until;
            }
            _ => {
                lane.room = 0;
                lane.until_ns = Lane::CLOSED;
            }
        }
        lane.base = lane.room;
    }

    #[inline]
    fn advance(&mut self, now: i64) {
        match &mut self.state {
            State::Sliding(ring) => ring.advance(now),
            State::Fixed(windows) => windows.advance(now),
            _ => {}
        }
    }

    /// Whether `cost` passes at `now` for `class`. The bucket must be advanced.
    #[inline]
    fn admits(&self, cost: u64, class: Class, now: i64) -> bool {
        if self.halted || now < self.hold_until_ns {
            return false;
        }
        let allowance = self.allowances[class.index()];
        match &self.state {
            State::Sliding(ring) => ring.used() + cost <= allowance,
            State::Fixed(windows) => windows.fits(cost, allowance, now),
            State::Token(gcra) => cost <= allowance && gcra.fits(cost, allowance, now),
            State::InFlight(outstanding) => outstanding + cost <= allowance,
            State::Gate => true,
        }
    }

    /// Why `cost` does not pass at `now`, and when it will. The bucket must be advanced.
    fn refusal(&self, cost: u64, class: Class, now: i64) -> Option<(Why, i64)> {
        if self.halted {
            return Some((Why::Halted, i64::MAX));
        }
        let allowance = self.allowances[class.index()];
        if cost > allowance && !matches!(self.state, State::Gate) {
            return Some((Why::TooBig, i64::MAX));
        }
        let full_until = match &self.state {
            State::Sliding(ring) if ring.used() + cost > allowance => {
                Some(ring.ready_at(cost, allowance))
            }
            State::Fixed(windows) if !windows.fits(cost, allowance, now) => {
                Some(windows.ready_at(cost, allowance, now))
            }
            State::Token(gcra) if !gcra.fits(cost, allowance, now) => {
                Some(gcra.ready_at(cost, allowance))
            }
            State::InFlight(outstanding) if outstanding + cost > allowance => Some(i64::MAX),
            _ => None,
        };
        let held_until = (now < self.hold_until_ns).then_some(self.hold_until_ns);
        match (held_until, full_until) {
            (None, None) => None,
            (Some(h), Some(f)) if f > h => Some((Why::Full, f)),
            (Some(h), _) => Some((Why::Held, h)),
            (None, Some(f)) => Some((Why::Full, f)),
        }
    }

    #[inline]
    fn commit(&mut self, cost: u64, now: i64, seq: u64) {
        match &mut self.state {
            State::Sliding(ring) => ring.add(cost),
            State::Fixed(windows) => windows.add(cost, now),
            State::Token(gcra) => gcra.add(cost, now, seq),
            State::InFlight(outstanding) => *outstanding += cost,
            State::Gate => {}
        }
        self.stats.admitted += cost;
    }

    fn refund(&mut self, cost: u64, at: i64, seq: u64) {
        match &mut self.state {
            State::Sliding(ring) => ring.refund(cost, at),
            State::Fixed(windows) => windows.refund(cost, at),
            State::Token(gcra) => gcra.refund(seq),
            State::InFlight(outstanding) => *outstanding = outstanding.saturating_sub(cost),
            State::Gate => {}
        }
    }

    fn used_at(&self, now: i64) -> u64 {
        match &self.state {
            State::Sliding(ring) => ring.used_at(now),
            State::Fixed(windows) => windows.used_at(now),
            State::Token(gcra) => gcra.used_at(now),
            State::InFlight(outstanding) => *outstanding,
            State::Gate => 0,
        }
    }

    /// Halts after a ban the venue says ends at `until_ns`.
    fn halt(&mut self, until_ns: i64) {
        self.halted = true;
        self.stats.bans += 1;
        self.stats.ban_until_ns = Some(until_ns);
    }

    /// The most a server figure may make this bucket count: its limit (the burst for
    /// token buckets). A figure above it (a usage header of 10^18, a huge extra cost)
    /// fills the bucket, which drains within one window like any full bucket;
    /// unclamped it would push a token bucket's clock to the end of time.
    fn capacity(&self) -> u64 {
        self.stats.limit
    }

    fn window_ns(&self) -> i64 {
        match &self.state {
            State::Sliding(ring) => ring.window_ns(),
            State::Fixed(windows) => windows.window_ns(),
            State::Token(gcra) => gcra
                .interval_ns()
                .saturating_mul(self.stats.limit.min(i64::MAX as u64) as i64),
            State::InFlight(_) | State::Gate => GATE_HOLD_NS,
        }
    }
}

/// The total cost of the parts naming the bucket of `parts[i]`, or `None` if an
/// earlier part names it too (it was counted there). A charge that lists a bucket
/// twice is checked and charged once, for the sum. Only the cold paths (repeated
/// buckets, refusals) scan like this.
#[cold]
#[inline(never)]
fn combined(parts: &[Part], i: usize) -> Option<u64> {
    let bucket = parts[i].bucket;
    if parts[..i].iter().any(|p| p.bucket == bucket) {
        return None;
    }
    Some(
        parts[i..]
            .iter()
            .filter(|p| p.bucket == bucket)
            .map(|p| u64::from(p.cost))
            .sum(),
    )
}

/// A fixed set of rate limits, charged all or none. See the [crate] docs.
#[derive(Clone, Debug)]
pub struct Budget {
    now_ns: i64,
    hold_guard_ns: i64,
    /// Charges admitted so far: the sequence number of the last ticket.
    seq: u64,
    /// Tickets and flights given back (refunded or completed) so far.
    returned: u64,
    /// The tag every id, ticket and flight of this budget carries.
    tag: u16,
    buckets: ArrayVec<Bucket, MAX_BUCKETS>,
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
        Budget {
            now_ns,
            hold_guard_ns,
            seq: 0,
            returned: 0,
            tag,
            buckets: specs
                .iter()
                .map(|(name, spec)| Bucket::new(*name, spec, now_ns))
                .collect(),
        }
    }

    /// Reads `now_ns` as no earlier than any time already seen.
    #[inline]
    fn clock(&mut self, now_ns: i64) -> i64 {
        if now_ns > self.now_ns {
            self.now_ns = now_ns;
        }
        self.now_ns
    }

    /// The bucket `id` names, or `None` for an id of another budget.
    fn bucket_mut(&mut self, id: BucketId) -> Option<&mut Bucket> {
        if id.budget != self.tag {
            return None;
        }
        self.buckets.get_mut(id.index())
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

    /// Charges every part, all or none.
    ///
    /// On refusal nothing is charged anywhere; [`Limited`] names the bucket that is
    /// ready last and when this same charge would pass if nothing else is charged.
    /// A part naming a bucket of another budget is refused as [`Why::Foreign`]; more
    /// than [`MAX_PARTS`] parts as [`Why::TooBig`]. Check part lists once with
    /// [`Budget::validate_parts`], or register them as a [`Shape`](crate::Shape).
    ///
    /// ```
    /// # use ergon_core::{Budget, Class, Part, Spec, Why};
    /// let mut b = Budget::builder();
    /// let w = b.add("w", Spec::sliding(2, 1_000, 10)).unwrap();
    /// let mut budget = b.build(0).unwrap();
    /// let t1 = budget.try_charge(&[Part::new(w, 2)], Class::Normal, 0).unwrap();
    /// let no = budget.try_charge(&[Part::new(w, 1)], Class::Normal, 5).unwrap_err();
    /// assert_eq!((no.why, no.ready_at_ns), (Why::Full, 1_100));
    /// # let _ = t1.sent();
    /// ```
    #[inline]
    pub fn try_charge(
        &mut self,
        parts: &[Part],
        class: Class,
        now_ns: i64,
    ) -> Result<Ticket, Limited> {
        let now = self.clock(now_ns);
        if parts.len() <= MAX_PARTS {
            // The lanes: reserve each part's cost in turn (a repeated bucket sees the
            // earlier reservation), and give the reservations back if one lane is
            // closed or short, for the full check to decide.
            let headroom = class.index();
            let mut reserved = 0;
            for part in parts {
                if part.bucket.budget != self.tag {
                    break;
                }
                let Some(bucket) = self.buckets.get_mut(part.bucket.index()) else {
                    break;
                };
                let lane = &mut bucket.lane;
                let cost = u64::from(part.cost);
                if now >= lane.until_ns || cost + lane.headroom[headroom] > lane.room {
                    break;
                }
                lane.room -= cost;
                reserved += 1;
            }
            if reserved == parts.len() {
                self.seq += 1;
                return Ok(self.ticket(parts, now, self.seq));
            }
            for part in &parts[..reserved] {
                self.buckets[part.bucket.index()].lane.room += u64::from(part.cost);
            }
        }
        self.charge_slow(parts, class, now)
    }

    /// [`Budget::try_charge`] past the lanes: every bucket named is settled and
    /// moved to `now`, checked in full, and its lane reopened whatever the outcome.
    #[cold]
    #[inline(never)]
    fn charge_slow(&mut self, parts: &[Part], class: Class, now: i64) -> Result<Ticket, Limited> {
        for part in parts {
            if let Some(bucket) = self.bucket_mut(part.bucket) {
                bucket.sync(now);
            }
        }
        let result = self.charge_full(parts, class, now);
        for part in parts {
            if let Some(bucket) = self.bucket_mut(part.bucket) {
                bucket.open_lane(now);
            }
        }
        result
    }

    /// The full check and commit, on settled buckets.
    fn charge_full(&mut self, parts: &[Part], class: Class, now: i64) -> Result<Ticket, Limited> {
        if parts.len() > MAX_PARTS {
            return Err(self.refuse(parts[MAX_PARTS].bucket, i64::MAX, Why::TooBig));
        }
        // One optimistic pass: each part at its own cost, finding repeated buckets on
        // the way (a bitmask over the at most 32 bucket indices). A refusal found here
        // stands, since a repeat only adds cost; on a repeat the summing path decides
        // from the start (advancing a bucket twice at the same instant changes nothing).
        const _: () = assert!(MAX_BUCKETS <= 32, "the mask holds one bit per bucket");
        let mut seen = 0u32;
        for part in parts {
            let bit = 1u32.checked_shl(u32::from(part.bucket.index)).unwrap_or(0);
            if seen & bit != 0 {
                return self.charge_repeated(parts, class, now);
            }
            seen |= bit;
            let Some(bucket) = self.bucket_mut(part.bucket) else {
                return Err(self.refuse(part.bucket, i64::MAX, Why::Foreign));
            };
            bucket.advance(now);
            if !bucket.admits(u64::from(part.cost), class, now) {
                return Err(self.explain(parts, class, now));
            }
        }
        self.seq += 1;
        let seq = self.seq;
        for part in parts {
            self.buckets[part.bucket.index()].commit(u64::from(part.cost), now, seq);
        }
        Ok(self.ticket(parts, now, seq))
    }

    /// [`Budget::try_charge`] for a charge naming some bucket more than once: each
    /// bucket is checked and charged once, for the sum of its parts.
    #[cold]
    #[inline(never)]
    fn charge_repeated(
        &mut self,
        parts: &[Part],
        class: Class,
        now: i64,
    ) -> Result<Ticket, Limited> {
        for i in 0..parts.len() {
            let Some(cost) = combined(parts, i) else {
                continue;
            };
            let id = parts[i].bucket;
            let Some(bucket) = self.bucket_mut(id) else {
                return Err(self.refuse(id, i64::MAX, Why::Foreign));
            };
            bucket.advance(now);
            if !bucket.admits(cost, class, now) {
                return Err(self.explain(parts, class, now));
            }
        }
        self.seq += 1;
        let seq = self.seq;
        for (i, part) in parts.iter().enumerate() {
            if let Some(cost) = combined(parts, i) {
                self.buckets[part.bucket.index()].commit(cost, now, seq);
            }
        }
        Ok(self.ticket(parts, now, seq))
    }

    /// The receipt of a charge just committed.
    #[inline]
    fn ticket(&self, parts: &[Part], now: i64, seq: u64) -> Ticket {
        let mut charged = Charged::new();
        charged
            .try_extend_from_slice(parts)
            .expect("parts.len() <= MAX_PARTS was checked");
        Ticket {
            at_ns: now,
            seq,
            budget: self.tag,
            parts: charged,
        }
    }

    /// The refusal of a charge some part of which did not pass: every part is asked,
    /// so the answer names the bucket that will be ready last. Halts come first, then
    /// costs that can never pass.
    ///
    /// The check stopped at the first part refused, so the parts after it are
    /// advanced here: asked unadvanced, they would answer from windows already past.
    #[cold]
    fn explain(&mut self, parts: &[Part], class: Class, now: i64) -> Limited {
        let mut worst: Option<(BucketId, Why, i64)> = None;
        for i in 0..parts.len() {
            let Some(cost) = combined(parts, i) else {
                continue;
            };
            let id = parts[i].bucket;
            let refusal = match self.bucket_mut(id) {
                Some(bucket) => {
                    bucket.advance(now);
                    bucket.refusal(cost, class, now)
                }
                None => Some((Why::Foreign, i64::MAX)),
            };
            let Some((why, ready)) = refusal else {
                continue;
            };
            let rank = |why: Why| match why {
                Why::Foreign => 3,
                Why::Halted => 2,
                Why::TooBig => 1,
                Why::Full | Why::Held => 0,
            };
            let better = match worst {
                None => true,
                Some((_, w, r)) => (rank(why), ready) > (rank(w), r),
            };
            if better {
                worst = Some((id, why, ready));
            }
        }
        let (bucket, why, ready) = worst.expect("explain is called on a refused charge");
        self.refuse(bucket, ready, why)
    }

    fn refuse(&mut self, bucket: BucketId, ready_at_ns: i64, why: Why) -> Limited {
        if let Some(b) = self.bucket_mut(bucket) {
            let r = &mut b.stats.refusals;
            match why {
                Why::Full => r.full += 1,
                Why::Held => r.held += 1,
                Why::Halted => r.halted += 1,
                Why::TooBig => r.too_big += 1,
                // No bucket of this budget to count it on.
                Why::Foreign => {}
            }
        }
        Limited {
            bucket,
            ready_at_ns,
            why,
        }
    }

    /// Gives back a charge whose request never left: no connection, not one byte
    /// written. A part whose window already passed is not touched (it no longer
    /// counts anyway). A token bucket gets its units back only if no other charge
    /// came after this one: anything else could mint budget. A rate bucket whose
    /// count `observe_used` raised after this charge keeps it: the server's figure
    /// never included this request, so taking it off would undercount.
    ///
    /// A ticket of another budget is refused with [`ForeignId`], changing nothing.
    pub fn refund(&mut self, ticket: Ticket, now_ns: i64) -> Result<(), ForeignId> {
        if ticket.budget != self.tag {
            return Err(ForeignId);
        }
        self.returned += 1;
        let now = self.clock(now_ns);
        for (i, part) in ticket.parts.iter().enumerate() {
            let first = !ticket.parts[..i].iter().any(|p| p.bucket == part.bucket);
            let _own = self.change(part.bucket, now, |bucket| {
                let raised_since = ticket.seq <= bucket.raised_seq;
                if !raised_since || matches!(bucket.state, State::InFlight(_)) {
                    bucket.refund(u64::from(part.cost), ticket.at_ns, ticket.seq);
                }
                if first {
                    bucket.stats.refunds += 1;
                }
            });
        }
        Ok(())
    }

    /// Settles `bucket` and moves it to `now`, lets `f` change it, then reopens its
    /// lane. Every change outside the charge path goes through here.
    fn change<R>(
        &mut self,
        bucket: BucketId,
        now: i64,
        f: impl FnOnce(&mut Bucket) -> R,
    ) -> Result<R, ForeignId> {
        let b = self.bucket_mut(bucket).ok_or(ForeignId)?;
        b.sync(now);
        let result = f(b);
        b.open_lane(now);
        Ok(result)
    }

    /// The answer to a sent request arrived, or its outcome was settled: releases its
    /// in-flight limits. Rate limits keep the charge: the venue counted the request.
    ///
    /// Every flight must come back here, once: a flight dropped instead keeps its
    /// in-flight units for good, and shows in [`Budget::receipts_outstanding`]. A
    /// flight of another budget is refused with [`ForeignId`], changing nothing.
    pub fn complete(&mut self, flight: Flight, now_ns: i64) -> Result<(), ForeignId> {
        if flight.budget != self.tag {
            return Err(ForeignId);
        }
        self.returned += 1;
        let now = self.clock(now_ns);
        for part in &flight.parts {
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
    /// drains. Like every server figure it is clamped so that the count stays within
    /// what the bucket can hold (its limit, the burst for token buckets): a huge
    /// figure fills the bucket for one window, not for ever. In-flight limits and
    /// gates have nothing to add to.
    pub fn charge_after(
        &mut self,
        bucket: BucketId,
        cost: u32,
        now_ns: i64,
    ) -> Result<(), ForeignId> {
        self.own(bucket)?;
        let now = self.clock(now_ns);
        self.change(bucket, now, |b| {
            let cap = b.capacity();
            let cost = u64::from(cost);
            match &mut b.state {
                State::Sliding(ring) => ring.add(cost.min(cap.saturating_sub(ring.used()))),
                State::Fixed(windows) => windows.add_capped(cost, now, cap),
                State::Token(gcra) => gcra.add_capped(cost, now, cap),
                State::InFlight(_) | State::Gate => return,
            }
            b.stats.charged_after += cost;
        })
    }

    /// The server's count for this scope (a usage header such as
    /// `X-MBX-USED-WEIGHT-1M`). Raises the local count to it, never lowers it; other
    /// senders on the same IP show up here. The difference is kept as drift. A figure
    /// above what the bucket can hold (its limit, the burst for token buckets) raises
    /// it only to full, which drains within one window.
    pub fn observe_used(
        &mut self,
        bucket: BucketId,
        used: u64,
        now_ns: i64,
    ) -> Result<(), ForeignId> {
        self.own(bucket)?;
        let now = self.clock(now_ns);
        let seq = self.seq;
        self.change(bucket, now, |b| {
            let local = b.used_at(now);
            b.stats.drift = i64::try_from(used)
                .unwrap_or(i64::MAX)
                .saturating_sub(i64::try_from(local).unwrap_or(i64::MAX));
            let used = used.min(b.capacity());
            if used <= local {
                return;
            }
            if !matches!(b.state, State::InFlight(_) | State::Gate) {
                b.raised_seq = seq;
            }
            match &mut b.state {
                State::Sliding(ring) => ring.add(used - local),
                State::Fixed(windows) => windows.raise_to(used, now),
                State::Token(gcra) => gcra.raise_to(used, now),
                State::InFlight(_) | State::Gate => {}
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

    /// Moves every window to `now_ns`. Call it while idle: the catch-up walk of a ring
    /// after a long gap then happens here instead of on the next charge.
    pub fn tick(&mut self, now_ns: i64) {
        let now = self.clock(now_ns);
        for b in &mut self.buckets {
            // A bucket whose lane still holds has nothing to catch up.
            if now >= b.lane.until_ns {
                b.sync(now);
                b.open_lane(now);
            }
        }
    }

    /// A snapshot of one bucket at the latest time the budget has seen.
    pub fn stats(&self, bucket: BucketId) -> Result<Stats, ForeignId> {
        let b = self.own(bucket)?;
        // Read what the lane charged without touching the live bucket.
        let mut b = b.clone();
        b.settle();
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
