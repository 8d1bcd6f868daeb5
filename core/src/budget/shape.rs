//! Shapes: part lists registered once, charged through the lanes with nothing to
//! check but the lanes, receipts that copy nothing.
//!
//! A [`ShapeRow`] keeps, per merged part, the bucket index and each class's need
//! (the cost plus the headroom that class must leave), all computed at
//! registration. [`Budget::try_charge_shape`] checks once that no open lane has
//! ended (the budget keeps the earliest end), then per part compares the need with
//! its lane's room (a closed lane has none) and subtracts the cost: one short loop
//! over at most [`MAX_PARTS`] entries, no bounds checks (a `u8` bucket index into
//! the 256 rooms; a shape index into the fixed rows, whose unregistered entries
//! point at a room that is always 0), no headroom lookups. Its ticket holds the
//! shape, the sequence number and the time.
//!
//! Off the fast path, a refusal whose every lane is open answers from the lanes,
//! starting at the part that did not pass (only the short buckets are settled and
//! asked when they will have room); a closed lane, a hold or a halt takes the full
//! path of [`Budget::try_charge`]. A refund whose charge is still in every lane
//! gives the units back to the lanes, inline in [`Budget::refund`].
//!
//! Never allocates, locks, logs or reads a clock.

use super::bucket::add_refusals;
use super::charge::rank;
use super::Budget;
use crate::stats::Refusals;
use crate::ticket::{
    BucketId, Charged, Class, ForeignId, Limited, Part, Shape, Ticket, Why, NO_LIST,
};
use crate::{ConfigError, MAX_BUCKETS, MAX_PARTS, MAX_SHAPES};

/// The room an unregistered shape row points at: past every bucket, so always 0.
pub(super) const NO_ROOM: u8 = u8::MAX;
const _: () = assert!(
    MAX_BUCKETS <= NO_ROOM as usize,
    "NO_ROOM is no bucket's room"
);

/// One registered shape. See the module docs.
///
/// `repr(C)`, cache-line aligned: the length, the indices and the Urgent need
/// (the cost) of the first six parts share the first line, and a class's need
/// of the first four parts lies in the second, so that a charge of up to four
/// parts reads two lines of its row.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub(super) struct ShapeRow {
    len: u8,
    /// Bucket indices, repeated buckets merged, in first-seen order.
    index: [u8; MAX_PARTS],
    /// `need[class][k]`: the cost of part `k` plus the headroom `class` must leave
    /// in its bucket. `need[0]` (Urgent, no headroom) is the cost.
    need: [[u64; MAX_PARTS]; 3],
    /// The merged parts, for the full path.
    parts: [Part; MAX_PARTS],
    /// The last refusal of this shape from the lanes, and the budget's stamp then
    /// (see [`Budget::stamp`]).
    refused: Refused,
}

/// A refusal remembered for one shape: asked again for the same class while the
/// budget's stamp has not moved (nothing was charged, refunded, settled, opened,
/// ticked or said since) and before its `ready_at_ns`, the answer is the same, so
/// it is given again without asking the buckets.
#[derive(Clone, Copy, Debug)]
struct Refused {
    /// The budget's stamp when it was computed; [`Refused::NONE`]'s never matches.
    stamp: u64,
    class: Class,
    limited: Limited,
    /// Times it was given again, not yet counted in its bucket's stats (booked
    /// when it is replaced; [`Budget::stats`] adds them).
    hits: u64,
}

impl Refused {
    /// No refusal remembered: no stamp reaches `u64::MAX`.
    const NONE: Refused = Refused {
        stamp: u64::MAX,
        class: Class::Urgent,
        limited: Limited {
            bucket: NO_PART.bucket,
            ready_at_ns: i64::MIN,
            why: Why::Full,
        },
        hits: 0,
    };
}

const NO_PART: Part = Part {
    bucket: BucketId {
        budget: 0,
        index: 0,
    },
    cost: 0,
};

impl ShapeRow {
    /// An unregistered row: one part on [`NO_ROOM`], whose room is 0 for good, so
    /// that the lanes refuse a shape not registered (yet) with no check of its
    /// index, and the slow path says why.
    pub(super) const EMPTY: ShapeRow = ShapeRow {
        len: 1,
        index: [NO_ROOM; MAX_PARTS],
        need: [[0; MAX_PARTS]; 3],
        parts: [NO_PART; MAX_PARTS],
        refused: Refused::NONE,
    };

    #[inline]
    fn len(&self) -> usize {
        usize::from(self.len).min(MAX_PARTS)
    }

    /// The merged parts, as a fixed array and the length in use (a plain copy).
    pub(super) fn parts_array(&self) -> ([Part; MAX_PARTS], usize) {
        (self.parts, self.len())
    }

    /// The merged parts.
    pub(super) fn parts(&self) -> Charged {
        self.parts[..self.len()].iter().copied().collect()
    }
}

/// Merges repeated buckets of `parts` (first-seen order, costs summed) after
/// checking each names one of the `buckets` buckets of the budget tagged `tag`.
pub(super) fn merge(parts: &[Part], tag: u16, buckets: usize) -> Result<Charged, ConfigError> {
    if parts.len() > MAX_PARTS {
        return Err(ConfigError::TooManyParts);
    }
    let mut merged = Charged::new();
    for part in parts {
        if part.bucket.budget != tag || part.bucket.index() >= buckets {
            return Err(ConfigError::UnknownBucket);
        }
        match merged.iter_mut().find(|p| p.bucket == part.bucket) {
            Some(p) => {
                p.cost = p
                    .cost
                    .checked_add(part.cost)
                    .ok_or(ConfigError::ShapeCostTooBig)?;
            }
            None => merged.push(*part),
        }
    }
    Ok(merged)
}

impl Budget {
    /// Registers a request kind: validated now (every part a bucket of this
    /// budget, at most [`MAX_PARTS`], a bucket named twice merged into one part),
    /// charged later by [`Budget::try_charge_shape`] with no check but the lanes.
    /// At most [`MAX_SHAPES`] per budget; [`Builder::shape`](crate::Builder::shape)
    /// registers them before the budget is built.
    pub fn shape(&mut self, parts: &[Part]) -> Result<Shape, ConfigError> {
        let merged = merge(parts, self.tag, self.buckets.len())?;
        let index = usize::from(self.shape_count);
        if index >= MAX_SHAPES {
            return Err(ConfigError::TooManyShapes);
        }
        let mut row = ShapeRow::EMPTY;
        row.len = merged.len() as u8;
        for (k, part) in merged.iter().enumerate() {
            let i = part.bucket.index();
            row.index[k] = i as u8;
            row.parts[k] = *part;
            let headroom = self.lanes[i % MAX_BUCKETS].headroom;
            for (class, need) in row.need.iter_mut().enumerate() {
                need[k] = u64::from(part.cost) + headroom[class];
            }
        }
        self.shapes[index] = row;
        self.shape_count += 1;
        Ok(Shape {
            budget: self.tag,
            index: index as u8,
        })
    }

    /// The first shape registered with `parts` (compared merged, as registered),
    /// if any: for a caller that registers the kinds it meets as it meets them
    /// and may find one registered already (by a copy of this budget it
    /// started from). `None` for a list no shape has, or one this budget
    /// cannot take.
    ///
    /// ```
    /// use ergon_core::{Budget, Part, Spec};
    /// let mut b = Budget::builder();
    /// let w = b.add("w", Spec::fixed(10, 1_000)).unwrap();
    /// let mut budget = b.build(0).unwrap();
    /// assert_eq!(budget.find_shape(&[Part::new(w, 1)]), None);
    /// let shape = budget.shape(&[Part::new(w, 1)]).unwrap();
    /// assert_eq!(budget.clone().find_shape(&[Part::new(w, 1)]), Some(shape));
    /// ```
    pub fn find_shape(&self, parts: &[Part]) -> Option<Shape> {
        let merged = merge(parts, self.tag, self.buckets.len()).ok()?;
        let count = usize::from(self.shape_count).min(MAX_SHAPES);
        let index = self.shapes[..count]
            .iter()
            .position(|row| row.parts[..row.len()] == merged[..])?;
        Some(Shape {
            budget: self.tag,
            index: index as u8,
        })
    }

    /// The parts of `shape`, as registered (repeated buckets merged).
    pub fn shape_parts(&self, shape: Shape) -> Result<&[Part], ForeignId> {
        if shape.budget != self.tag || shape.index >= self.shape_count {
            return Err(ForeignId);
        }
        let row = &self.shapes[usize::from(shape.index) % MAX_SHAPES];
        Ok(&row.parts[..row.len()])
    }

    /// [`Budget::try_charge`] for a registered shape, all or none, with the same
    /// answers: the same admissions, the same refusals (bucket, reason, ready time),
    /// the same effect on every bucket. The ticket holds the shape, the sequence
    /// number and the time, not a copy of the parts.
    ///
    /// A shape of another budget is refused as [`Why::Foreign`] (its `bucket` is an
    /// id of that other budget).
    #[inline]
    pub fn try_charge_shape(
        &mut self,
        shape: Shape,
        class: Class,
        now_ns: i64,
    ) -> Result<Ticket, Limited> {
        let now = self.clock(now_ns);
        // A shape index not registered finds a row whose one lane is closed: no
        // check of the index here, `shape_missed` says why.
        if now < self.lanes_until && shape.budget == self.tag {
            return match self.take_lanes(shape, class) {
                Ok(()) => Ok(self.shape_ticket(shape, now)),
                Err(k) => self.shape_short(shape, class, now, k),
            };
        }
        self.shape_missed(shape, class, now)
    }

    /// Takes each part's cost from its lane if every lane has the need. Else
    /// `Err(k)`: part `k` is short or its lane closed, and the parts before it
    /// took their costs, which the caller gives back ([`Budget::give_back`]).
    /// Every lane ended must already have been seen to.
    #[inline(always)]
    fn take_lanes(&mut self, shape: Shape, class: Class) -> Result<(), usize> {
        let row = &self.shapes[usize::from(shape.index) % MAX_SHAPES];
        let need = &row.need[class.index()];
        // Indexed, not zipped: the indices are bounded by `len` (at most
        // MAX_PARTS), so the compiler drops the bounds checks, and one counter
        // drives all three arrays.
        #[allow(clippy::needless_range_loop)]
        for k in 0..row.len() {
            // A `u8` index into the 256 rooms: no bounds check, no mask.
            let room = &mut self.rooms[usize::from(row.index[k])];
            if need[k] >= *room {
                return Err(k);
            }
            *room -= row.need[0][k];
        }
        Ok(())
    }

    /// The receipt of a shape just charged.
    #[inline(always)]
    fn shape_ticket(&mut self, shape: Shape, now: i64) -> Ticket {
        self.seq += 1;
        Ticket {
            at_ns: now,
            seq: self.seq,
            budget: self.tag,
            shape: shape.index,
            list: NO_LIST,
            gen: 0,
        }
    }

    /// Gives back what the first `k` parts of `shape` took from their lanes.
    #[inline(always)]
    fn give_back(&mut self, shape: Shape, k: usize) {
        let row = &self.shapes[usize::from(shape.index) % MAX_SHAPES];
        for (&i, &cost) in row.index.iter().zip(&row.need[0]).take(k) {
            self.rooms[usize::from(i)] += cost;
        }
    }

    /// [`Budget::try_charge_shape`] when part `k` did not pass its lane, no lane
    /// having ended: the parts before `k` give back what they took; then the same
    /// refusal as last time if nothing moved since (see [`Refused`]), else
    /// [`Budget::shape_refuse`]. Small, so that a repeated refusal pays a short
    /// prologue.
    #[cold]
    #[inline(never)]
    fn shape_short(
        &mut self,
        shape: Shape,
        class: Class,
        now: i64,
        k: usize,
    ) -> Result<Ticket, Limited> {
        self.give_back(shape, k);
        let stamp = self.stamp();
        let last = &mut self.shapes[usize::from(shape.index) % MAX_SHAPES].refused;
        // Nothing moved since this same refusal, and its lanes still hold (the
        // caller checked `now` against their earliest end): the buckets would
        // answer the same.
        if last.stamp == stamp && last.class == class && now < last.limited.ready_at_ns {
            last.hits += 1;
            return Err(last.limited);
        }
        self.shape_refuse(shape, class, now, k)
    }

    /// [`Budget::shape_short`] with nothing remembered: the parts before `k`
    /// passed, so their lanes are open and not short. If every later lane is open
    /// too (a closed lane has no room, an open one at least 1), the refusal comes
    /// from the short buckets alone, as [`Budget::try_charge`]'s explanation would
    /// give it, and is remembered; anything else takes [`Budget::shape_missed`].
    #[cold]
    #[inline(never)]
    fn shape_refuse(
        &mut self,
        shape: Shape,
        class: Class,
        now: i64,
        k: usize,
    ) -> Result<Ticket, Limited> {
        let si = usize::from(shape.index) % MAX_SHAPES;
        match self.refuse_short(si, k, class, now) {
            Some(limited) => {
                let stamp = self.stamp();
                let old = core::mem::replace(
                    &mut self.shapes[si].refused,
                    Refused {
                        stamp,
                        class,
                        limited,
                        hits: 0,
                    },
                );
                self.count_hits(&old);
                Err(limited)
            }
            None => self.shape_missed(shape, class, now),
        }
    }

    /// Books the repeats of a remembered refusal into its bucket's stats.
    fn count_hits(&mut self, refused: &Refused) {
        if refused.hits == 0 {
            return;
        }
        if let Some(bucket) = self.buckets.get_mut(refused.limited.bucket.index()) {
            bucket.count_refusals(refused.limited.why, refused.hits);
        }
    }

    /// The repeats of remembered refusals by `bucket` not yet in its stats, by
    /// reason, added to `refusals`.
    pub(super) fn pending_refusals(&self, bucket: BucketId, refusals: &mut Refusals) {
        let n = usize::from(self.shape_count).min(MAX_SHAPES);
        for row in &self.shapes[..n] {
            let r = &row.refused;
            if r.hits != 0 && r.limited.bucket == bucket {
                add_refusals(refusals, r.limited.why, r.hits);
            }
        }
    }

    /// The refusal of shape row `si` from its parts `from..` (the earlier ones
    /// passed), every lane open at `now`: the short buckets are settled and asked
    /// (an open lane's bucket is already at `now`: same slot, same windows), the
    /// one ready last named. `None` if a lane is closed or none refuses after all.
    #[inline(always)]
    fn refuse_short(&mut self, si: usize, from: usize, class: Class, now: i64) -> Option<Limited> {
        let seq = self.seq;
        let row = &self.shapes[si];
        let mut worst: Option<(usize, Why, i64)> = None;
        for k in from..row.len() {
            let i = usize::from(row.index[k]);
            let room = self.rooms[i];
            if room == 0 {
                // A closed lane (or an unregistered row): the full path decides.
                return None;
            }
            if row.need[class.index()][k] < room {
                continue;
            }
            let bucket = self.buckets.get_mut(i)?;
            if bucket.settle(&mut self.back[i], room, seq) {
                self.last_settle_seq = seq;
            }
            let Some((why, ready)) = bucket.refusal_cached(row.need[0][k], class, now) else {
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

    #[cold]
    fn foreign_shape(&self, shape: Shape) -> Limited {
        Limited {
            bucket: BucketId {
                budget: shape.budget,
                index: u8::MAX,
            },
            ready_at_ns: i64::MAX,
            why: Why::Foreign,
        }
    }

    /// [`Budget::try_charge_shape`] past the lanes: a refusal from the lanes if
    /// every lane is open, else the full path.
    #[cold]
    #[inline(never)]
    fn shape_missed(&mut self, shape: Shape, class: Class, now: i64) -> Result<Ticket, Limited> {
        if shape.budget != self.tag || shape.index >= self.shape_count {
            return Err(self.foreign_shape(shape));
        }
        if now >= self.lanes_until {
            // A lane ended: reopen every ended lane (what an idle tick would have
            // done), then try the lanes again.
            self.tick(now);
            if now < self.lanes_until {
                match self.take_lanes(shape, class) {
                    Ok(()) => return Ok(self.shape_ticket(shape, now)),
                    Err(k) => self.give_back(shape, k),
                }
            }
        }
        let si = usize::from(shape.index) % MAX_SHAPES;
        // Before the earliest end, an open lane is one with room.
        if now < self.lanes_until {
            if let Some(refused) = self.refuse_short(si, 0, class, now) {
                return Err(refused);
            }
        }
        let parts = self.shapes[si].parts();
        self.charge_slow(&parts, class, now, false)
            .map(|ticket| Ticket {
                shape: shape.index,
                ..ticket
            })
    }

    /// [`Budget::refund`] of a shape's ticket. A charge still in every lane (no lane
    /// settled since: the common case of a request refused before any byte left)
    /// goes back to the lanes; any other through the full path.
    pub(super) fn refund_shape(&mut self, ticket: Ticket, now_ns: i64) -> Result<(), ForeignId> {
        if ticket.shape >= self.shape_count {
            return Err(ForeignId);
        }
        let row = &self.shapes[usize::from(ticket.shape) % MAX_SHAPES];
        let n = row.len();
        // No lane settled since the charge: it is in every lane. Else ask each.
        let in_lanes = ticket.seq > self.last_settle_seq
            || row.index[..n].iter().all(|&i| {
                self.buckets
                    .get(usize::from(i))
                    .is_some_and(|b| b.settled_seq < ticket.seq)
            });
        if !in_lanes {
            let parts = row.parts();
            self.refund_parts(&parts, ticket.at_ns, ticket.seq, now_ns);
            return Ok(());
        }
        self.refund_to_lanes(ticket.shape, now_ns);
        Ok(())
    }

    /// Gives a registered shape's charge, still in every lane, back to the lanes:
    /// each part's units to its room, counted in its lane's `Back` (settled into
    /// the bucket's stats with the lane).
    #[inline(always)]
    pub(super) fn refund_to_lanes(&mut self, shape: u8, now_ns: i64) {
        self.returned += 1;
        self.clock(now_ns);
        let row = &self.shapes[usize::from(shape) % MAX_SHAPES];
        #[allow(clippy::needless_range_loop)]
        for k in 0..row.len() {
            // A `u8` index into the 256 rooms: no bounds check, no mask.
            let i = usize::from(row.index[k]);
            let cost = row.need[0][k];
            self.rooms[i] += cost;
            let back = &mut self.back[i];
            back.units += cost;
            back.tickets += 1;
        }
    }
}
