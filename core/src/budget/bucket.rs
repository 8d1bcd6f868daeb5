//! One bucket: its state by kind, its lane bookkeeping, and the full check.
//!
//! The hot half of a lane ([`Lane`]: its end and its room) lives in the budget's
//! fixed array of lanes, so the charge paths touch one small array; the rest
//! (what the lane had when it opened, when, and the class headroom) lives here.
//! Every method that reads or moves the state takes the bucket's lane.

use arrayvec::ArrayString;

use crate::fixed::{CountsIn, Windows};
use crate::gcra::Gcra;
use crate::ring::Ring;
use crate::spec::{Kind, Spec};
use crate::stats::{Refusals, Stats};
use crate::ticket::{Class, Why};
use crate::MAX_NAME;

/// How long a throttle without a server wait holds a gate or an in-flight limit,
/// which have no window of their own.
const GATE_HOLD_NS: i64 = 1_000_000_000;

/// The floor of the default [`Spec::max_wait`]: 5 minutes.
const DEFAULT_MAX_WAIT_NS: i64 = 300_000_000_000;

// Inline on purpose: the ring lives in the bucket so the budget never allocates and a
// charge touches one cache-friendly array of buckets.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub(super) enum State {
    Sliding(Ring),
    Fixed(Windows),
    Token(Gcra),
    InFlight(u64),
    Gate,
}

/// The fast path of one bucket: see the module docs of the budget. Its room is
/// kept apart, in the budget's array of rooms (one `u64` per bucket, so that the
/// charge loops address it directly): one more than the units Urgent may still
/// charge before `until_ns`, and 0 for a closed lane. A need passes while
/// `need < room`, so a closed lane refuses every need, 0 included, with no look
/// at `until_ns`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Lane {
    /// The lane holds before this instant; `i64::MIN` closes it.
    pub(super) until_ns: i64,
    /// Units each class must leave, by [`Class::index`] (0 for Urgent).
    pub(super) headroom: [u64; 3],
}

/// What refunds gave back into one lane since it last settled. Kept beside the
/// rooms, in the budget's array by bucket index, so that a refund into the lanes
/// adds to it with one address per part.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Back {
    /// Units refunded (admitted counts them).
    pub(super) units: u64,
    /// Tickets refunded.
    pub(super) tickets: u64,
}

impl Lane {
    pub(super) const CLOSED: i64 = i64::MIN;

    /// A closed lane, for the slots of the lane array no bucket uses.
    pub(super) const fn closed() -> Self {
        Lane {
            until_ns: Lane::CLOSED,
            headroom: [0; 3],
        }
    }

    /// Whether the lane is open at `now`.
    #[inline]
    pub(super) fn open_at(&self, now: i64) -> bool {
        now < self.until_ns
    }
}

/// Why a cost does not pass, and when it will; `None` if it passes.
pub(super) type Refusal = Option<(Why, i64)>;

#[derive(Clone, Debug)]
pub(super) struct Bucket {
    pub(super) state: State,
    /// The lane's room when it opened: `base - room` is what the lane has charged.
    pub(super) lane_base: u64,
    /// When the lane opened: its charges count as made then (same slot, same windows).
    pub(super) lane_at_ns: i64,
    /// The budget's charge sequence when the lane last settled or opened: a ticket
    /// with a higher sequence was charged through the lane and is not in the state
    /// yet, so its refund can go back to the lane.
    pub(super) settled_seq: u64,
    /// Units each class may use, by [`Class::index`].
    pub(super) allowances: [u64; 3],
    /// Holds end here; `i64::MIN` when none was ever set.
    pub(super) hold_until_ns: i64,
    /// The budget's charge sequence when `observe_used` last raised the count: the
    /// server's figure excludes every request not yet sent, so a ticket charged
    /// before the raise and refunded after it must not take its units back from the
    /// raised count (that would mint them).
    pub(super) raised_seq: u64,
    /// The longest server wait read as a throttle; a longer one halts.
    pub(super) max_wait_ns: i64,
    /// The last refusal asked of an open lane (cost, class, answer), valid until
    /// the state moves: a short lane asked again in the same slot or guard region
    /// answers the same.
    refusal_cache: Option<(u64, Class, Refusal)>,
    pub(super) halted: bool,
    /// A limit of zero: nothing passes (see [`Why::Closed`]).
    pub(super) closed: bool,
    /// The limit holds before this instant only; from it on the bucket is closed
    /// until a limit is set again (`i64::MAX`: no end).
    pub(super) closes_at_ns: i64,
    pub(super) name: ArrayString<MAX_NAME>,
    /// As declared (for [`super::Budget::spec`]).
    pub(super) spec: Spec,
    pub(super) stats: Stats,
}

impl Bucket {
    /// The bucket, its lane and its room, open at `now`.
    pub(super) fn new(name: ArrayString<MAX_NAME>, spec: &Spec, now: i64) -> (Self, Lane, u64) {
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
        let mut lane = Lane {
            headroom: allowances.map(|a| allowances[0] - a),
            ..Lane::closed()
        };
        let mut bucket = Bucket {
            state,
            lane_base: 0,
            lane_at_ns: now,
            settled_seq: 0,
            allowances,
            hold_until_ns: i64::MIN,
            raised_seq: 0,
            max_wait_ns: 0,
            refusal_cache: None,
            halted: false,
            closed: false,
            closes_at_ns: i64::MAX,
            name,
            spec: *spec,
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
        let mut room = 0;
        bucket.open_lane(&mut lane, &mut room, now, 0);
        (bucket, lane, room)
    }

    /// Books what the lane charged into the bucket's state, as made when the lane
    /// opened. Call before anything reads or moves the state; `seq` is the budget's
    /// charge sequence now.
    /// Whether anything was booked (tickets charged through the lane are now in
    /// the state).
    #[inline]
    pub(super) fn settle(&mut self, back: &mut Back, room: u64, seq: u64) -> bool {
        if back.tickets != 0 {
            // Refunded units were admitted too (as on the full path).
            self.stats.admitted += back.units;
            self.stats.refunds += back.tickets;
            *back = Back::default();
        }
        let charged = self.lane_base - room;
        if charged == 0 {
            // No ticket's units wait in the lane: none is settled by this.
            return false;
        }
        self.settled_seq = seq;
        self.refusal_cache = None;
        self.lane_base = room;
        match &mut self.state {
            State::Sliding(ring) => ring.add(charged),
            State::Fixed(windows) => windows.add(charged, self.lane_at_ns),
            State::InFlight(outstanding) => *outstanding += charged,
            // A token lane never opens; a gate counts nothing.
            State::Token(_) | State::Gate => {}
        }
        self.stats.admitted += charged;
        true
    }

    /// Settles, then moves the state to `now`.
    #[inline]
    pub(super) fn sync(&mut self, back: &mut Back, room: u64, now: i64, seq: u64) {
        self.settle(back, room, seq);
        self.settled_seq = seq;
        self.advance(now);
    }

    /// Opens the lane at `now` from the (settled, advanced) state, or closes it where
    /// a charge needs the full check.
    pub(super) fn open_lane(&mut self, lane: &mut Lane, room: &mut u64, now: i64, seq: u64) {
        let limit = self.allowances[0];
        let steady = if self.halted || self.is_closed(now) || now < self.hold_until_ns {
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
        self.lane_at_ns = now;
        self.settled_seq = seq;
        self.refusal_cache = None;
        match steady {
            Some((used, until)) if used <= limit => {
                // Limits are at most i64::MAX: the one more never overflows.
                *room = if matches!(self.state, State::Gate) {
                    u64::MAX
                } else {
                    limit - used + 1
                };
                lane.until_ns = until.min(self.closes_at_ns);
            }
            _ => {
                *room = 0;
                lane.until_ns = Lane::CLOSED;
            }
        }
        self.lane_base = *room;
    }

    #[inline]
    pub(super) fn advance(&mut self, now: i64) {
        match &mut self.state {
            State::Sliding(ring) => ring.advance(now),
            State::Fixed(windows) => windows.advance(now),
            _ => {}
        }
    }

    /// Whether `cost` passes at `now` for `class`. The bucket must be advanced.
    #[inline]
    pub(super) fn admits(&self, cost: u64, class: Class, now: i64) -> bool {
        if self.halted || self.is_closed(now) || now < self.hold_until_ns {
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
    pub(super) fn refusal(&self, cost: u64, class: Class, now: i64) -> Option<(Why, i64)> {
        if self.halted {
            return Some((Why::Halted, i64::MAX));
        }
        if self.is_closed(now) {
            return Some((Why::Closed, i64::MAX));
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

    /// [`Bucket::refusal`] for a bucket whose lane is open at `now` and settled:
    /// asked again with the same cost and class before the lane moves, it answers
    /// from the last time (the state and the slot or guard region are the same).
    pub(super) fn refusal_cached(
        &mut self,
        cost: u64,
        class: Class,
        now: i64,
    ) -> Option<(Why, i64)> {
        match self.refusal_cache {
            Some((c, k, answer)) if c == cost && k == class => answer,
            _ => {
                let answer = self.refusal(cost, class, now);
                self.refusal_cache = Some((cost, class, answer));
                answer
            }
        }
    }

    /// Counts a refusal by this bucket in its stats.
    pub(super) fn count_refusal(&mut self, why: Why) {
        self.count_refusals(why, 1);
    }

    /// Counts `n` refusals by this bucket, all for `why`, in its stats.
    pub(super) fn count_refusals(&mut self, why: Why, n: u64) {
        add_refusals(&mut self.stats.refusals, why, n);
    }

    #[inline]
    pub(super) fn commit(&mut self, cost: u64, now: i64, seq: u64) {
        match &mut self.state {
            State::Sliding(ring) => ring.add(cost),
            State::Fixed(windows) => windows.add(cost, now),
            State::Token(gcra) => gcra.add(cost, now, seq),
            State::InFlight(outstanding) => *outstanding += cost,
            State::Gate => {}
        }
        self.stats.admitted += cost;
    }

    pub(super) fn refund(&mut self, cost: u64, at: i64, seq: u64) {
        match &mut self.state {
            State::Sliding(ring) => ring.refund(cost, at),
            State::Fixed(windows) => windows.refund(cost, at),
            State::Token(gcra) => gcra.refund(seq),
            State::InFlight(outstanding) => *outstanding = outstanding.saturating_sub(cost),
            State::Gate => {}
        }
    }

    pub(super) fn used_at(&self, now: i64) -> u64 {
        match &self.state {
            State::Sliding(ring) => ring.used_at(now),
            State::Fixed(windows) => windows.used_at(now),
            State::Token(gcra) => gcra.used_at(now),
            State::InFlight(outstanding) => *outstanding,
            State::Gate => 0,
        }
    }

    /// Halts after a ban the venue says ends at `until_ns`.
    pub(super) fn halt(&mut self, until_ns: i64) {
        self.halted = true;
        self.stats.bans += 1;
        self.stats.ban_until_ns = Some(until_ns);
    }

    /// The fixed windows, if this bucket is one.
    pub(super) fn fixed_mut(&mut self) -> Option<&mut Windows> {
        match &mut self.state {
            State::Fixed(windows) => Some(windows),
            _ => None,
        }
    }

    /// The window and phase of a fixed-window bucket.
    pub(super) fn fixed_window(&self) -> Option<(i64, i64)> {
        match &self.state {
            State::Fixed(windows) => Some((windows.window_ns(), windows.phase_ns())),
            _ => None,
        }
    }

    /// The guard of a fixed-window bucket.
    pub(super) fn fixed_guard(&self) -> Option<i64> {
        match &self.state {
            State::Fixed(windows) => Some(windows.guard_ns()),
            _ => None,
        }
    }

    pub(super) fn counts_in(&self, now: i64) -> Option<CountsIn> {
        match &self.state {
            State::Fixed(windows) => Some(windows.counts_in(now)),
            _ => None,
        }
    }

    pub(super) fn window_ns(&self) -> i64 {
        match &self.state {
            State::Sliding(ring) => ring.window_ns(),
            State::Fixed(windows) => windows.window_ns(),
            State::Token(gcra) => gcra
                .interval_ns()
                .saturating_mul(self.stats.limit.min(i64::MAX as u64) as i64),
            State::InFlight(_) | State::Gate => GATE_HOLD_NS,
        }
    }

    /// The next instant this bucket has work of its own at, seen from `now` with
    /// its lane: a hold ends, a lane closes or a ring's slot rolls (so that
    /// [`Budget::tick`](crate::Budget::tick) walks the ring off the send path), a
    /// fixed window holding a count rolls. `None`: nothing until something is
    /// charged or said (halted, a gate, an in-flight limit, an empty fixed window,
    /// a token bucket, whose room grows continuously: a refusal's `ready_at` says
    /// when).
    pub(super) fn next_event(&self, lane: &Lane, room: u64, now: i64) -> Option<i64> {
        let own = self.own_event(lane, room, now);
        if now < self.closes_at_ns && self.closes_at_ns != i64::MAX {
            return Some(own.map_or(self.closes_at_ns, |t| t.min(self.closes_at_ns)));
        }
        own
    }

    /// Whether the bucket refuses everything at `now` (see [`Why::Closed`]).
    #[inline]
    pub(super) fn is_closed(&self, now: i64) -> bool {
        self.closed || now >= self.closes_at_ns
    }

    fn own_event(&self, lane: &Lane, room: u64, now: i64) -> Option<i64> {
        if self.halted || self.is_closed(now) {
            return None;
        }
        if now < self.hold_until_ns {
            return Some(self.hold_until_ns);
        }
        let lane_charged = self.lane_base != room;
        match &self.state {
            State::Sliding(ring) => Some(ring.steady_until_ns()),
            State::Fixed(windows) if lane_charged || !windows.is_empty() => {
                Some(if lane.open_at(now) {
                    lane.until_ns
                } else {
                    windows.next_edge(now)
                })
            }
            _ => None,
        }
    }
}

/// Adds `n` refusals for `why` to `refusals`.
pub(super) fn add_refusals(refusals: &mut Refusals, why: Why, n: u64) {
    let count = match why {
        Why::Full | Why::Closed => &mut refusals.full,
        Why::Held => &mut refusals.held,
        Why::Halted => &mut refusals.halted,
        Why::TooBig => &mut refusals.too_big,
        // No bucket of this budget to count it on, or no bucket refused it.
        Why::Foreign | Why::Receipts => return,
    };
    *count = count.saturating_add(n);
}
