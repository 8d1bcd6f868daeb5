//! The part lists the gateway charges, each registered once as a [`Shape`] of the
//! budget and charged with [`Budget::try_charge_shape`]: a compare and a
//! subtraction per bucket, and a ticket that names its shape. A list charged with
//! [`Budget::try_charge`] costs more (the budget keeps it in its table of part
//! lists) and is refused as [`Why::Receipts`] when that table is taken.
//!
//! A prepared request's parts depend on its kind and its cost, so a venue's
//! gateway sees a handful of distinct lists. Each new one is registered as it is
//! first charged (or found registered: [`Budget::find_shape`]); once the budget
//! has no shape left (its owner registers its own too) or [`MAX_CACHED`] are
//! kept, a new list is charged as a list, as before.
//!
//! A template's request names its list with a key
//! ([`Prepared::parts_key`](ergon_venues::endpoint::Prepared::parts_key)): a key
//! seen before finds its shape at once, with no comparison of the lists (~60
//! instructions an order).

use arrayvec::ArrayVec;
use ergon_core::{Budget, Class, ConfigError, Limited, Part, Shape, Ticket, Why, MAX_PARTS};

/// Part lists kept with their shape.
pub const MAX_CACHED: usize = 16;

/// Part-list keys kept with their list's shape (the newest replacing the oldest).
pub const MAX_KEYS: usize = 4;

/// The shapes registered for the part lists charged so far.
#[derive(Debug, Default)]
pub struct Shapes {
    rows: ArrayVec<(ArrayVec<Part, MAX_PARTS>, Shape), MAX_CACHED>,
    /// The budget refused a shape for want of room: no more are asked for.
    full: bool,
    /// Keys of part lists seen, with their list's shape (a key names one list).
    keys: ArrayVec<(u64, Shape), MAX_KEYS>,
    /// Where the next key goes once `keys` is full.
    next_key: usize,
    /// The key charged last and its shape (one of `keys`): a steady order flow
    /// charges one list, found with one compare.
    last: Option<(u64, Shape)>,
}

impl Shapes {
    /// Charges `parts` to `budget`, all or none: with its shape where it has one
    /// (registered now if it is new and there is room), else as a list. The
    /// answers are [`Budget::try_charge`]'s. `key` names the list (0: no key;
    /// a non-zero key must name no other list): a key seen before finds its
    /// shape without comparing lists.
    #[inline(always)]
    pub fn charge(
        &mut self,
        budget: &mut Budget,
        parts: &[Part],
        key: u64,
        class: Class,
        now: i64,
    ) -> Result<Ticket, Limited> {
        // The key charged last: its shape, charged inline (a steady flow).
        match self.last {
            Some((last, shape)) if last == key && key != 0 => {
                match budget.try_charge_shape(shape, class, now) {
                    Err(l) if l.why == Why::Foreign => self.foreign(budget, parts, class, now),
                    charged => charged,
                }
            }
            _ => self.charge_found(budget, parts, key, class, now),
        }
    }

    /// [`Shapes::charge`] of a list whose key was not the last one charged.
    #[inline(never)]
    fn charge_found(
        &mut self,
        budget: &mut Budget,
        parts: &[Part],
        key: u64,
        class: Class,
        now: i64,
    ) -> Result<Ticket, Limited> {
        let Some(shape) = self.keyed(key).or_else(|| {
            let shape = self.shape_of(budget, parts)?;
            if key != 0 {
                self.remember(key, shape);
            }
            Some(shape)
        }) else {
            return budget.try_charge(parts, class, now);
        };
        match budget.try_charge_shape(shape, class, now) {
            Err(l) if l.why == Why::Foreign => self.foreign(budget, parts, class, now),
            charged => charged,
        }
    }

    /// Shapes of another budget (the gateway moved to a new one): forgets them
    /// and charges the list.
    #[cold]
    fn foreign(
        &mut self,
        budget: &mut Budget,
        parts: &[Part],
        class: Class,
        now: i64,
    ) -> Result<Ticket, Limited> {
        self.rows.clear();
        self.keys.clear();
        self.last = None;
        self.full = false;
        budget.try_charge(parts, class, now)
    }

    /// The shape of the list `key` names, if the key was seen (never for 0).
    #[inline]
    fn keyed(&mut self, key: u64) -> Option<Shape> {
        match (key, self.last) {
            (0, _) => None,
            (k, Some((last, shape))) if k == last => Some(shape),
            (k, _) => {
                let shape = self.keys.iter().find(|(x, _)| *x == k).map(|(_, s)| *s)?;
                self.last = Some((k, shape));
                Some(shape)
            }
        }
    }

    /// Keeps `key`'s shape, in place of the oldest key when full.
    fn remember(&mut self, key: u64, shape: Shape) {
        self.last = Some((key, shape));
        if self.keys.try_push((key, shape)).is_err() {
            self.keys[self.next_key % MAX_KEYS] = (key, shape);
            self.next_key = (self.next_key + 1) % MAX_KEYS;
        }
    }

    fn shape_of(&mut self, budget: &mut Budget, parts: &[Part]) -> Option<Shape> {
        if let Some((_, shape)) = self.rows.iter().find(|(p, _)| p.as_slice() == parts) {
            return Some(*shape);
        }
        if self.rows.is_full() || parts.len() > MAX_PARTS {
            return None;
        }
        // Registered already (the budget is a copy of one that had it)?
        if let Some(shape) = budget.find_shape(parts) {
            self.rows.push((parts.iter().copied().collect(), shape));
            return Some(shape);
        }
        if self.full {
            return None;
        }
        match budget.shape(parts) {
            Ok(shape) => {
                self.rows.push((parts.iter().copied().collect(), shape));
                Some(shape)
            }
            Err(ConfigError::TooManyShapes) => {
                self.full = true;
                None
            }
            // A list the budget cannot take: charged as a list, which says why.
            Err(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ergon_core::{Spec, MAX_SHAPES};

    fn budget() -> (Budget, Part, Part) {
        let mut b = Budget::builder();
        let w = b.add("w", Spec::fixed(100, 1_000)).unwrap();
        let o = b.add("o", Spec::fixed(3, 1_000)).unwrap();
        (b.build(0).unwrap(), Part::new(w, 2), Part::new(o, 1))
    }

    /// The same answers as the list's, with a shape's ticket, and one shape per
    /// distinct list.
    #[test]
    fn a_list_is_charged_as_its_shape_with_the_lists_answers() {
        let (mut shaped, w, o) = budget();
        let mut listed = shaped.clone();
        let mut shapes = Shapes::default();
        for t in 0..5 {
            let a = shapes.charge(&mut shaped, &[w, o], 0, Class::Normal, t);
            let b = listed.try_charge(&[w, o], Class::Normal, t);
            match (a, b) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(shaped.ticket_parts(&a), listed.ticket_parts(&b));
                    let _ = (a.sent(), b.sent());
                }
                (Err(a), Err(b)) => assert_eq!(a, b),
                (a, b) => panic!("{a:?} vs {b:?}"),
            }
        }
        let _ = shapes
            .charge(&mut shaped, &[w], 0, Class::Normal, 6)
            .unwrap()
            .sent();
        assert_eq!(shapes.rows.len(), 2);
        assert_eq!(
            shaped.lists_held(),
            0,
            "no list kept: every charge was a shape"
        );
    }

    /// A copy of the budget from before the shape was registered (a shape row it
    /// does not have): the list is charged, and the shape registered in it; a
    /// copy that has it is found, not registered twice.
    #[test]
    fn a_budget_without_the_shape_gets_it_again() {
        let (fresh, w, o) = budget();
        let mut shapes = Shapes::default();
        let mut first = fresh.clone();
        let _ = shapes
            .charge(&mut first, &[w, o], 0, Class::Normal, 0)
            .unwrap()
            .sent();
        let mut again = fresh.clone();
        let t = shapes
            .charge(&mut again, &[w, o], 0, Class::Normal, 1)
            .unwrap();
        assert_eq!(again.ticket_parts(&t).unwrap(), [w, o]);
        let _ = t.sent();
        let _ = shapes
            .charge(&mut again, &[w, o], 0, Class::Normal, 2)
            .unwrap()
            .sent();
        assert_eq!(again.find_shape(&[w, o]), shapes.rows.first().map(|r| r.1));
        let mut registered = fresh.clone();
        let shape = registered.shape(&[w, o]).unwrap();
        let mut found = Shapes::default();
        let _ = found
            .charge(&mut registered, &[w, o], 0, Class::Normal, 0)
            .unwrap()
            .sent();
        assert_eq!(found.rows[0].1, shape);
        assert!(registered.shape_parts(shape).is_ok());
    }

    /// With the budget's shapes all taken, a new list is charged as a list.
    #[test]
    fn without_room_for_a_shape_a_list_is_charged_as_a_list() {
        let (mut budget, w, o) = budget();
        for _ in 0..MAX_SHAPES {
            budget.shape(&[w]).unwrap();
        }
        let mut shapes = Shapes::default();
        let t = shapes
            .charge(&mut budget, &[w, o], 0, Class::Normal, 0)
            .unwrap();
        assert!(shapes.full && shapes.rows.is_empty());
        assert_eq!(budget.ticket_parts(&t).unwrap(), [w, o]);
        let _ = t.sent();
    }

    /// A key finds its own list's shape among several, the oldest key gives way
    /// when more are seen than kept, and a budget of another builder (shapes of
    /// the old one are foreign to it) is charged the list, keys forgotten.
    #[test]
    fn a_key_finds_its_lists_shape() {
        let (mut first, w, o) = budget();
        let mut shapes = Shapes::default();
        let lists: [&[Part]; 2] = [&[w, o], &[w]];
        for t in 0..(3 * MAX_KEYS as i64) {
            // Keys 1..=2*MAX_KEYS: more than are kept; key k names list k % 2.
            let key = 1 + (t as u64 % (2 * MAX_KEYS as u64));
            let list = lists[(key % 2) as usize];
            let ticket = shapes
                .charge(&mut first, list, key, Class::Normal, t * 1_000)
                .unwrap();
            assert_eq!(first.ticket_parts(&ticket).unwrap(), list, "key {key}");
            let _ = ticket.sent();
        }
        assert_eq!(shapes.keys.len(), MAX_KEYS);
        assert_eq!(first.lists_held(), 0, "every charge was a shape");
        // Key 2 is kept (with this budget's shape): on another budget it is
        // foreign, the list is charged, and the keys are forgotten.
        let (mut other, w2, o2) = budget();
        assert_ne!(
            other.find_shape(&[w2, o2]),
            shapes.keyed(2),
            "another budget"
        );
        for t in 0..2 {
            let ticket = shapes
                .charge(&mut other, &[w2, o2], 2, Class::Normal, t)
                .unwrap();
            assert_eq!(other.ticket_parts(&ticket).unwrap(), [w2, o2]);
            let _ = ticket.sent();
        }
        assert_eq!(shapes.keyed(2), other.find_shape(&[w2, o2]));
        assert_eq!(shapes.keys.len(), 1);
    }
}
