//! The part lists of outstanding ad-hoc tickets: a [`Ticket`](crate::Ticket) of
//! [`Budget::try_charge`](crate::Budget::try_charge) names an entry of this table
//! instead of carrying its parts, so that every ticket is small (a shape's names its
//! row the same way).
//!
//! Lists are interned: the tickets of one part list share one entry, counted by
//! `refs`, so a caller that charges a handful of request kinds holds a handful of
//! entries however many of its tickets are outstanding. An entry whose tickets all
//! came back stays as it is (the next charge of the same list finds it) until
//! another list needs its place.
//!
//! The table never refuses a charge the venue would take. When every entry holds a
//! list with tickets outstanding, a new list takes the entry of the list charged
//! least recently among those that charge no in-flight bucket: those lists' tickets
//! only need their parts to be refunded, and a refund of one of them (a request
//! never written, at least [`MAX_LISTS`] distinct lists ago) then gives nothing back
//! and its units stay counted until their windows pass, as if it had been sent: an
//! over-count, never an under-count. A list that charges an in-flight bucket keeps
//! its entry while it has tickets out (its flights must release their units); only
//! when every entry holds one of those is a new list refused with [`Why::Receipts`],
//! i.e. with [`MAX_LISTS`] distinct in-flight lists outstanding at once.
//!
//! Each entry carries a generation, bumped when it takes another list; a ticket
//! carries the generation it was charged under. A ticket of an older generation was
//! charged here and its list was given up (it is counted back, nothing given back);
//! one of a newer generation than the entry's was charged by a clone made before the
//! charge, and is refused, never read as another list.
//!
//! Never allocates, locks, logs or reads a clock.
//!
//! [`Why::Receipts`]: crate::Why::Receipts

use crate::ticket::{BucketId, Part};
use crate::{MAX_LISTS, MAX_PARTS};

const _: () = assert!(MAX_LISTS.is_power_of_two() && MAX_LISTS <= 256);

/// One interned part list.
#[derive(Clone, Copy, Debug)]
pub(super) struct List {
    /// Tickets and flights outstanding on this list.
    refs: u64,
    /// The budget's charge sequence when this list was last charged.
    last: u64,
    /// Bumped every time the entry takes another list.
    gen: u32,
    len: u8,
    /// The list charges an in-flight bucket: its entry is never given up while
    /// tickets are out (their flights release units through it).
    pinned: bool,
    parts: [Part; MAX_PARTS],
}

impl List {
    const EMPTY: List = List {
        refs: 0,
        last: 0,
        gen: 0,
        len: 0,
        pinned: false,
        parts: [Part {
            bucket: BucketId {
                budget: 0,
                index: 0,
            },
            cost: 0,
        }; MAX_PARTS],
    };

    #[inline(always)]
    fn parts(&self) -> &[Part] {
        &self.parts[..usize::from(self.len).min(MAX_PARTS)]
    }
}

/// The table. See the module docs.
#[derive(Clone, Debug)]
pub(super) struct Lists {
    rows: [List; MAX_LISTS],
    /// One bit per in-flight bucket, by index.
    in_flight: u32,
}

/// What [`Lists::take`] found for a ticket.
#[derive(Clone, Copy, Debug)]
pub(super) enum Taken {
    /// The ticket's parts (a fixed array and the length in use, a plain copy).
    Parts([Part; MAX_PARTS], usize),
    /// The ticket's list was given up for another (see the module docs): nothing
    /// to give back.
    GivenUp,
    /// Not a ticket of this table (a clone's, charged after the clone was made).
    Unknown,
}

impl Lists {
    /// An empty table for a budget whose in-flight buckets are the bits of
    /// `in_flight` (by index).
    pub(super) fn new(in_flight: u32) -> Self {
        Lists {
            rows: [List::EMPTY; MAX_LISTS],
            in_flight,
        }
    }
}

/// The hash of a part list's buckets and costs, one part at a time from
/// `parts.len()`: [`Budget::try_charge`](crate::Budget::try_charge) mixes it in its
/// lane loop, where each part is loaded anyway.
#[inline(always)]
pub(super) fn mix(h: u64, p: &Part) -> u64 {
    let word = u64::from(p.bucket.index) | u64::from(p.cost) << 8;
    (h ^ word).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The hash of `parts`, as [`mix`] builds it.
pub(super) fn hash(parts: &[Part]) -> u64 {
    parts.iter().fold(parts.len() as u64, mix)
}

/// Whether the first `parts.len()` of `row` are `parts`: every part compared, no
/// early exit. The buckets' tags are this budget's on both sides.
#[inline(always)]
fn same(row: &[Part; MAX_PARTS], parts: &[Part]) -> bool {
    let mut diff = 0;
    for (r, p) in row.iter().zip(parts) {
        diff |= (r.cost ^ p.cost) | u32::from(r.bucket.index ^ p.bucket.index);
    }
    diff == 0
}

impl Lists {
    /// Counts one more ticket on `parts` (at most [`MAX_PARTS`], every part naming a
    /// bucket of this budget: the caller checked), whose [`hash`] is `h`, charged
    /// as the budget's charge number `seq`, storing the list if no entry holds it.
    /// Returns the entry and its generation, or `None` if every entry holds another
    /// list that charges an in-flight bucket and has tickets outstanding (nothing
    /// changed).
    #[inline(always)]
    pub(super) fn hold(&mut self, parts: &[Part], h: u64, seq: u64) -> Option<(u8, u32)> {
        let at = (h >> 56) as usize % MAX_LISTS;
        let row = &mut self.rows[at];
        if usize::from(row.len) == parts.len() && same(&row.parts, parts) {
            row.refs += 1;
            row.last = seq;
            return Some((at as u8, row.gen));
        }
        self.probe(parts, at, seq)
    }

    /// [`Lists::hold`] past the list's first entry: the first entry in probe order
    /// that holds the list, or else has no ticket outstanding (then it takes it);
    /// failing both, the entry of the least recently charged list that is not
    /// pinned (see the module docs).
    #[cold]
    #[inline(never)]
    fn probe(&mut self, parts: &[Part], at: usize, seq: u64) -> Option<(u8, u32)> {
        let mut free = None;
        for step in 0..MAX_LISTS {
            let i = (at + step) % MAX_LISTS;
            let row = &mut self.rows[i];
            if row.parts() == parts {
                row.refs += 1;
                row.last = seq;
                return Some((i as u8, row.gen));
            }
            if row.refs == 0 && free.is_none() {
                free = Some(i);
            }
        }
        let i = match free {
            Some(i) => i,
            None => {
                self.rows
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| !r.pinned)
                    .min_by_key(|(_, r)| r.last)?
                    .0
            }
        };
        let in_flight = self.in_flight;
        let pinned = parts.iter().any(|p| {
            let bit = 1u32.checked_shl(u32::from(p.bucket.index)).unwrap_or(0);
            p.cost > 0 && in_flight & bit != 0
        });
        let row = &mut self.rows[i];
        row.gen = row.gen.wrapping_add(1);
        row.len = parts.len() as u8;
        row.parts[..parts.len()].copy_from_slice(parts);
        row.refs = 1;
        row.last = seq;
        row.pinned = pinned;
        Some((i as u8, row.gen))
    }

    /// The parts of the ticket that holds entry `list` under generation `gen`, or
    /// `None` if the entry no longer holds that list for it.
    #[inline]
    pub(super) fn get(&self, list: u8, gen: u32) -> Option<&[Part]> {
        let row = self.rows.get(usize::from(list))?;
        (row.gen == gen && row.refs > 0).then(|| row.parts())
    }

    /// A ticket or flight on entry `list` under generation `gen` came back: one
    /// fewer outstanding, and its parts. [`Taken::GivenUp`] if the entry took
    /// another list since (nothing changed), [`Taken::Unknown`] for a generation
    /// the entry never had or a list with nothing outstanding.
    #[inline]
    pub(super) fn take(&mut self, list: u8, gen: u32) -> Taken {
        let Some(row) = self.rows.get_mut(usize::from(list)) else {
            return Taken::Unknown;
        };
        // Generations are compared on the circle, so that the wrap after 2^32
        // lists taken by one entry reads as "older".
        let behind = row.gen.wrapping_sub(gen) as i32;
        if behind > 0 {
            return Taken::GivenUp;
        }
        if behind < 0 || row.refs == 0 {
            return Taken::Unknown;
        }
        row.refs -= 1;
        Taken::Parts(row.parts, usize::from(row.len).min(MAX_PARTS))
    }

    /// Entries holding a list with tickets outstanding.
    pub(super) fn held(&self) -> usize {
        self.rows.iter().filter(|r| r.refs > 0).count()
    }
}
