//! The part lists of outstanding ad-hoc tickets: a [`Ticket`](crate::Ticket) of
//! [`Budget::try_charge`](crate::Budget::try_charge) names an entry of this table
//! instead of carrying its parts, so that every ticket is small (a shape's names its
//! row the same way).
//!
//! Lists are interned: the tickets of one part list share one entry, counted by
//! `refs`, so a caller that charges a handful of request kinds holds a handful of
//! entries however many of its tickets are outstanding. An entry whose tickets all
//! came back stays as it is (the next charge of the same list finds it) until
//! another list needs its place. When every entry a list may use holds another list
//! with tickets outstanding, the charge is refused with [`Why::Receipts`] and nothing
//! is charged (see [`MAX_LISTS`]).
//!
//! Each entry carries a generation, bumped when it takes another list; a ticket
//! carries the generation it was charged under, so a ticket this table no longer
//! knows (one of a clone made before the charge) is refused, never read as another
//! list.
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
    /// Bumped every time the entry takes another list.
    gen: u32,
    len: u8,
    parts: [Part; MAX_PARTS],
}

impl List {
    const EMPTY: List = List {
        refs: 0,
        gen: 0,
        len: 0,
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
}

impl Default for Lists {
    fn default() -> Self {
        Lists {
            rows: [List::EMPTY; MAX_LISTS],
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
    /// bucket of this budget: the caller checked), whose [`hash`] is `h`, storing
    /// the list if no entry holds it. Returns the entry and its generation, or
    /// `None` if every entry holds another list with tickets outstanding (nothing
    /// changed).
    #[inline(always)]
    pub(super) fn hold(&mut self, parts: &[Part], h: u64) -> Option<(u8, u32)> {
        let at = (h >> 56) as usize % MAX_LISTS;
        let row = &mut self.rows[at];
        if usize::from(row.len) == parts.len() && same(&row.parts, parts) {
            row.refs += 1;
            return Some((at as u8, row.gen));
        }
        self.probe(parts, at)
    }

    /// [`Lists::hold`] past the list's first entry: the first entry in probe order
    /// that holds the list, or else has no ticket outstanding (then it takes it).
    #[cold]
    #[inline(never)]
    fn probe(&mut self, parts: &[Part], at: usize) -> Option<(u8, u32)> {
        for step in 0..MAX_LISTS {
            let i = (at + step) % MAX_LISTS;
            let row = &mut self.rows[i];
            if row.parts() == parts {
                row.refs += 1;
                return Some((i as u8, row.gen));
            }
            if row.refs == 0 {
                row.gen = row.gen.wrapping_add(1);
                row.len = parts.len() as u8;
                row.parts[..parts.len()].copy_from_slice(parts);
                row.refs = 1;
                return Some((i as u8, row.gen));
            }
        }
        None
    }

    /// The parts of the ticket that holds entry `list` under generation `gen`, or
    /// `None` if the entry no longer holds that list for it.
    #[inline]
    pub(super) fn get(&self, list: u8, gen: u32) -> Option<&[Part]> {
        let row = self.rows.get(usize::from(list))?;
        (row.gen == gen && row.refs > 0).then(|| row.parts())
    }

    /// A ticket or flight on entry `list` under generation `gen` came back: one
    /// fewer outstanding, and its parts (a fixed array and the length in use, a
    /// plain copy). `None` if the entry no longer holds that list for it (nothing
    /// changed).
    #[inline]
    pub(super) fn take(&mut self, list: u8, gen: u32) -> Option<([Part; MAX_PARTS], usize)> {
        let row = self.rows.get_mut(usize::from(list))?;
        if row.gen != gen || row.refs == 0 {
            return None;
        }
        row.refs -= 1;
        Some((row.parts, usize::from(row.len).min(MAX_PARTS)))
    }

    /// Entries holding a list with tickets outstanding.
    pub(super) fn held(&self) -> usize {
        self.rows.iter().filter(|r| r.refs > 0).count()
    }
}
