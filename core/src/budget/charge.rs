//! The charge path: [`Budget::try_charge`] through the lanes, the full check past
//! them, the refusal's explanation, and [`Budget::refund`].
//!
//! Never allocates, locks, logs or reads a clock.

use super::bucket::State;
use super::lists::{self, Taken};
use super::Budget;
use crate::ticket::{BucketId, Class, ForeignId, Limited, Part, Ticket, Why, NO_LIST, NO_SHAPE};
use crate::{MAX_BUCKETS, MAX_PARTS};

/// How a refusal ranks when several parts refuse: halts first, then costs that can
/// never pass, then the one ready last.
pub(super) fn rank(why: Why) -> u8 {
    match why {
        // Never asked of a bucket: a full table of lists is met after every
        // bucket admitted.
        Why::Foreign | Why::Receipts => 3,
        Why::Halted | Why::Closed => 2,
        Why::TooBig => 1,
        Why::Full | Why::Held => 0,
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

impl Budget {
    /// Charges every part, all or none.
    ///
    /// On refusal nothing is charged anywhere; [`Limited`] names the bucket that is
    /// ready last and when this same charge would pass if nothing else is charged.
    /// A part naming a bucket of another budget is refused as [`Why::Foreign`]; more
    /// than [`MAX_PARTS`] parts as [`Why::TooBig`]. Check part lists once with
    /// [`Budget::validate_parts`], or register them as a [`Shape`](crate::Shape).
    ///
    /// The budget keeps the part list for the ticket (one entry per distinct list,
    /// shared by all its tickets). With [`MAX_LISTS`](crate::MAX_LISTS) distinct
    /// lists held, a new list takes the entry of the least recently charged list
    /// that charges no in-flight bucket (a refund of one of that list's tickets
    /// then gives nothing back); only if every entry holds a list that charges an
    /// in-flight bucket, with tickets or flights outstanding, is a new list refused
    /// as [`Why::Receipts`] after every bucket admitted it: nothing is charged, and
    /// it passes once some come back.
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
    #[inline(always)]
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
            // The list's hash for the table of lists, mixed in as the parts go by.
            let mut h = parts.len() as u64;
            for part in parts {
                // A foreign id, or an index past the buckets (only a foreign id has
                // one), takes the full path, which refuses it.
                if part.bucket.budget != self.tag || part.bucket.index() >= self.buckets.len() {
                    break;
                }
                let i = part.bucket.index() % MAX_BUCKETS;
                let lane = &self.lanes[i];
                let room = &mut self.rooms[i];
                let cost = u64::from(part.cost);
                if now >= lane.until_ns || cost + lane.headroom[headroom] >= *room {
                    break;
                }
                *room -= cost;
                reserved += 1;
                h = lists::mix(h, part);
            }
            if reserved == parts.len() {
                // A full table of lists takes the full path, which refuses.
                if let Some((list, gen)) = self.lists.hold(parts, h, self.seq) {
                    self.seq += 1;
                    return Ok(self.ticket(now, self.seq, list, gen));
                }
            }
            return self.lanes_missed(parts, reserved, class, now);
        }
        self.charge_slow(parts, class, now, true)
    }

    /// [`Budget::try_charge`] when the lanes took only the first `reserved` parts:
    /// gives those back, then answers a refusal from the lanes if every lane is open,
    /// else takes the full path. Out of line, so the lane loop keeps its registers.
    #[cold]
    #[inline(never)]
    fn lanes_missed(
        &mut self,
        parts: &[Part],
        reserved: usize,
        class: Class,
        now: i64,
    ) -> Result<Ticket, Limited> {
        for part in parts.iter().take(reserved) {
            self.rooms[part.bucket.index() % MAX_BUCKETS] += u64::from(part.cost);
        }
        if let Some(refused) = self.refuse_open(parts, class, now) {
            return Err(refused);
        }
        self.charge_slow(parts, class, now, true)
    }

    /// The refusal of a part list whose every lane is open at `now` and some short,
    /// from the short buckets alone (an open lane's bucket is already at `now`: same
    /// slot, same windows), the one ready last named, as [`Budget::explain`] would
    /// after the full check. `None` (the full path decides) for a foreign or
    /// repeated bucket, a closed or ended lane, or no refusal after all.
    #[inline(always)]
    fn refuse_open(&mut self, parts: &[Part], class: Class, now: i64) -> Option<Limited> {
        let seq = self.seq;
        let mut seen = 0u32;
        let mut worst: Option<(usize, Why, i64)> = None;
        for part in parts {
            let i = part.bucket.index();
            if part.bucket.budget != self.tag || i >= self.buckets.len() {
                return None;
            }
            let i = i % MAX_BUCKETS;
            let bit = 1u32 << i;
            if seen & bit != 0 {
                return None;
            }
            seen |= bit;
            let lane = &self.lanes[i];
            let room = self.rooms[i];
            if !lane.open_at(now) || room == 0 {
                return None;
            }
            let cost = u64::from(part.cost);
            if cost + lane.headroom[class.index()] < room {
                continue;
            }
            let bucket = self.buckets.get_mut(i)?;
            if bucket.settle(&mut self.back[i], room, seq) {
                self.last_settle_seq = seq;
            }
            let Some((why, ready)) = bucket.refusal_cached(cost, class, now) else {
                continue;
            };
            if !matches!(worst, Some((_, w, r)) if (rank(w), r) >= (rank(why), ready)) {
                worst = Some((i, why, ready));
            }
        }
        let (i, why, ready) = worst?;
        self.buckets.get_mut(i)?.count_refusal(why);
        Some(Limited {
            bucket: self.id(i),
            ready_at_ns: ready,
            why,
        })
    }

    /// [`Budget::try_charge`] past the lanes: every bucket named is settled and
    /// moved to `now`, checked in full, and its lane reopened whatever the outcome.
    /// `hold`: the ticket keeps the list in the budget's table (a part list's; a
    /// shape's names its row instead, and gets `NO_LIST`).
    #[cold]
    #[inline(never)]
    pub(super) fn charge_slow(
        &mut self,
        parts: &[Part],
        class: Class,
        now: i64,
        hold: bool,
    ) -> Result<Ticket, Limited> {
        let seq = self.seq;
        for part in parts {
            if let Some((bucket, _, room, back)) = self.bucket_mut(part.bucket) {
                bucket.sync(back, *room, now, seq);
            }
        }
        let result = self.charge_full(parts, class, now, hold);
        let seq = self.seq;
        for part in parts {
            if let Some((bucket, lane, room, _)) = self.bucket_mut(part.bucket) {
                let old = lane.until_ns;
                bucket.open_lane(lane, room, now, seq);
                let new = lane.until_ns;
                self.lane_moved(old, new);
            }
        }
        self.last_settle_seq = self.seq;
        result
    }

    /// The full check and commit, on settled buckets.
    fn charge_full(
        &mut self,
        parts: &[Part],
        class: Class,
        now: i64,
        hold: bool,
    ) -> Result<Ticket, Limited> {
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
                return self.charge_repeated(parts, class, now, hold);
            }
            seen |= bit;
            let Some((bucket, ..)) = self.bucket_mut(part.bucket) else {
                return Err(self.refuse(part.bucket, i64::MAX, Why::Foreign));
            };
            bucket.advance(now);
            if !bucket.admits(u64::from(part.cost), class, now) {
                return Err(self.explain(parts, class, now));
            }
        }
        let (list, gen) = self.hold_list(parts, hold)?;
        self.seq += 1;
        let seq = self.seq;
        for part in parts {
            self.buckets[part.bucket.index()].commit(u64::from(part.cost), now, seq);
        }
        Ok(self.ticket(now, seq, list, gen))
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
        hold: bool,
    ) -> Result<Ticket, Limited> {
        for i in 0..parts.len() {
            let Some(cost) = combined(parts, i) else {
                continue;
            };
            let id = parts[i].bucket;
            let Some((bucket, ..)) = self.bucket_mut(id) else {
                return Err(self.refuse(id, i64::MAX, Why::Foreign));
            };
            bucket.advance(now);
            if !bucket.admits(cost, class, now) {
                return Err(self.explain(parts, class, now));
            }
        }
        let (list, gen) = self.hold_list(parts, hold)?;
        self.seq += 1;
        let seq = self.seq;
        for (i, part) in parts.iter().enumerate() {
            if let Some(cost) = combined(parts, i) {
                self.buckets[part.bucket.index()].commit(cost, now, seq);
            }
        }
        Ok(self.ticket(now, seq, list, gen))
    }

    /// The entry of the table of lists a part list's ticket holds (see
    /// [`Why::Receipts`]), taken before anything is committed; `NO_LIST` if not
    /// `hold` (a shape's ticket).
    fn hold_list(&mut self, parts: &[Part], hold: bool) -> Result<(u8, u32), Limited> {
        if !hold {
            return Ok((NO_LIST, 0));
        }
        self.lists
            .hold(parts, lists::hash(parts), self.seq)
            .ok_or_else(|| Limited {
                bucket: parts.first().map_or(
                    BucketId {
                        budget: self.tag,
                        index: u8::MAX,
                    },
                    |p| p.bucket,
                ),
                ready_at_ns: i64::MAX,
                why: Why::Receipts,
            })
    }

    /// The receipt of a part list just committed, held in entry `list`.
    #[inline(always)]
    fn ticket(&self, now: i64, seq: u64, list: u8, gen: u32) -> Ticket {
        Ticket {
            at_ns: now,
            seq,
            budget: self.tag,
            shape: NO_SHAPE,
            list,
            gen,
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
                Some((bucket, ..)) => {
                    bucket.advance(now);
                    bucket.refusal(cost, class, now)
                }
                None => Some((Why::Foreign, i64::MAX)),
            };
            let Some((why, ready)) = refusal else {
                continue;
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

    pub(super) fn refuse(&mut self, bucket: BucketId, ready_at_ns: i64, why: Why) -> Limited {
        if let Some((b, ..)) = self.bucket_mut(bucket) {
            b.count_refusal(why);
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
    /// never included this request, so taking it off would undercount. A ticket of
    /// a part list the budget gave up for another (see
    /// [`MAX_LISTS`](crate::MAX_LISTS)) gives nothing back: its units stay counted
    /// until their windows pass, as if it had been sent.
    ///
    /// A ticket of another budget (or of a clone of this one, charged after the
    /// clone was made) is refused with [`ForeignId`], changing nothing.
    #[inline]
    pub fn refund(&mut self, ticket: Ticket, now_ns: i64) -> Result<(), ForeignId> {
        // The common case: a shape's ticket charged through the lanes, no lane
        // settled since (a part list's ticket has shape NO_SHAPE, past every shape).
        if ticket.budget == self.tag
            && ticket.shape < self.shape_count
            && ticket.seq > self.last_settle_seq
        {
            self.refund_to_lanes(ticket.shape, now_ns);
            return Ok(());
        }
        self.refund_slow(ticket, now_ns)
    }

    /// [`Budget::refund`] past the lanes of a shape.
    #[cold]
    #[inline(never)]
    fn refund_slow(&mut self, ticket: Ticket, now_ns: i64) -> Result<(), ForeignId> {
        if ticket.budget != self.tag {
            return Err(ForeignId);
        }
        if ticket.shape != NO_SHAPE {
            return self.refund_shape(ticket, now_ns);
        }
        let (parts, n) = match self.lists.take(ticket.list, ticket.gen) {
            Taken::Parts(parts, n) => (parts, n),
            // Its list was given up for another (see `lists`): the request counts
            // as if it had been sent, until its windows pass.
            Taken::GivenUp => {
                self.returned += 1;
                return Ok(());
            }
            Taken::Unknown => return Err(ForeignId),
        };
        let parts = &parts[..n];
        if ticket.seq > self.last_settle_seq {
            // Charged through the lanes, and no lane settled since: the units are
            // still in the lanes, and go back there.
            self.returned += 1;
            self.clock(now_ns);
            for (k, part) in parts.iter().enumerate() {
                let i = part.bucket.index() % MAX_BUCKETS;
                let cost = u64::from(part.cost);
                self.rooms[i] += cost;
                let back = &mut self.back[i];
                back.units += cost;
                if !parts[..k].iter().any(|p| p.bucket == part.bucket) {
                    back.tickets += 1;
                }
            }
            return Ok(());
        }
        self.refund_parts(parts, ticket.at_ns, ticket.seq, now_ns);
        Ok(())
    }

    /// [`Budget::refund`] of a ticket of this budget, given its parts: each bucket
    /// is settled, given back what the ticket charged it, and reopened.
    pub(super) fn refund_parts(&mut self, parts: &[Part], at_ns: i64, seq: u64, now_ns: i64) {
        self.returned += 1;
        let now = self.clock(now_ns);
        for (i, part) in parts.iter().enumerate() {
            let first = !parts[..i].iter().any(|p| p.bucket == part.bucket);
            let _own = self.change(part.bucket, now, |bucket| {
                let raised_since = seq <= bucket.raised_seq;
                if !raised_since || matches!(bucket.state, State::InFlight(_)) {
                    bucket.refund(u64::from(part.cost), at_ns, seq);
                }
                if first {
                    bucket.stats.refunds += 1;
                }
            });
        }
    }
}
