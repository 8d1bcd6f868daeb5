//! The table of requests in flight on one WebSocket connection, which the
//! venues' sessions share ([`crate::binance_spot_ws`], [`crate::deribit_ws`]):
//! request ids (from 1, never 0), each in any free slot (the id modulo the
//! table's length when that one is free, so a lookup usually reads one slot),
//! each request prepared or written, and what becomes of each when the
//! connection drops ([`Fate`]). A request whose answer is slow holds its own slot
//! and nothing else: the table refuses only when every slot is held.
//!
//! Sized once; nothing here allocates after [`Table::new`].

use crate::adapt::Request;
use crate::endpoint::ClientOrderId;

/// What became of a request when its connection dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Written without an answer: the venue may have run it. Reconcile by client
    /// order id; never re-send.
    Unknown {
        /// The request id.
        id: u64,
        /// The request kind.
        kind: Request<'static>,
        /// The client order id to reconcile by.
        client_order_id: Option<ClientOrderId>,
        /// Its deadline: after it, a query that finds nothing means it never
        /// landed.
        deadline_ns: i64,
    },
    /// Prepared, never written: refund its `Ticket`.
    NotWritten {
        /// The request id.
        id: u64,
    },
}

/// One request in the table; `X` is what the session keeps besides (Deribit:
/// which of its own calls it is).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot<X> {
    pub(crate) id: u64,
    pub(crate) kind: Request<'static>,
    pub(crate) deadline_ns: i64,
    pub(crate) client_order_id: Option<ClientOrderId>,
    pub(crate) extra: X,
    written: bool,
}

impl<X> Slot<X> {
    /// Request `id`, prepared (not yet written).
    pub(crate) fn prepared(
        id: u64,
        kind: Request<'static>,
        deadline_ns: i64,
        client_order_id: Option<ClientOrderId>,
        extra: X,
    ) -> Self {
        Slot {
            id,
            kind,
            deadline_ns,
            client_order_id,
            extra,
            written: false,
        }
    }
}

/// The table: see the module doc.
#[derive(Clone, Debug)]
pub(crate) struct Table<X> {
    next_id: u64,
    slots: Vec<Option<Slot<X>>>,
    /// How many slots are held.
    held: usize,
}

impl<X: Copy> Table<X> {
    /// A table of `capacity` slots (at least 1).
    pub(crate) fn new(capacity: usize) -> Self {
        Table {
            next_id: 1,
            slots: vec![None; capacity.max(1)],
            held: 0,
        }
    }

    fn slot_of(&self, id: u64) -> usize {
        // The table is at most usize::MAX long, so the remainder fits.
        (id % self.slots.len() as u64) as usize
    }

    /// Where request `id` is, if in the table: its own slot first, then the others
    /// (it took another one because its own was held).
    fn find(&self, id: u64) -> Option<usize> {
        let at = self.slot_of(id);
        if self.slots[at].is_some_and(|s| s.id == id) {
            return Some(at);
        }
        self.slots
            .iter()
            .position(|s| s.is_some_and(|s| s.id == id))
    }

    /// How many requests are in the table (prepared or written, unanswered).
    pub(crate) fn in_flight(&self) -> usize {
        self.held
    }

    /// The next request id, if a slot is free (else the table is full).
    pub(crate) fn next(&self) -> Option<u64> {
        (self.held < self.slots.len()).then_some(self.next_id)
    }

    /// Reserves a slot for `slot` (its id from [`Table::next`]: a slot is free)
    /// and moves the next id past it.
    pub(crate) fn reserve(&mut self, slot: Slot<X>) {
        self.next_id = slot.id.wrapping_add(1).max(1);
        let own = self.slot_of(slot.id);
        let at = match self.slots[own] {
            None => Some(own),
            Some(_) => self.slots.iter().position(Option::is_none),
        };
        if let Some(at) = at {
            self.slots[at] = Some(slot);
            self.held += 1;
        }
    }

    /// Request `id`, if in the table.
    pub(crate) fn get(&self, id: u64) -> Option<Slot<X>> {
        self.find(id).and_then(|at| self.slots[at])
    }

    /// Takes request `id` out of the table (answered).
    pub(crate) fn take(&mut self, id: u64) -> Option<Slot<X>> {
        let at = self.find(id)?;
        self.held -= 1;
        self.slots[at].take()
    }

    /// Marks request `id` written; `false` if it is not in the table.
    pub(crate) fn sent(&mut self, id: u64) -> bool {
        match self.find(id).and_then(|at| self.slots[at].as_mut()) {
            Some(s) => {
                s.written = true;
                true
            }
            None => false,
        }
    }

    /// Frees request `id`, prepared but not written; `false` if it is not in the
    /// table or was written (a written request leaves only by its answer or by
    /// [`Table::drain`]).
    pub(crate) fn unsent(&mut self, id: u64) -> bool {
        match self.find(id) {
            Some(at) if self.slots[at].is_some_and(|s| !s.written) => {
                self.slots[at] = None;
                self.held -= 1;
                true
            }
            _ => false,
        }
    }

    /// The connection dropped: yields every request in the table once, and
    /// empties it.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = Fate> + '_ {
        self.held = 0;
        self.slots
            .iter_mut()
            .filter_map(Option::take)
            .map(|s| match s.written {
                true => Fate::Unknown {
                    id: s.id,
                    kind: s.kind,
                    client_order_id: s.client_order_id,
                    deadline_ns: s.deadline_ns,
                },
                false => Fate::NotWritten { id: s.id },
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(id: u64) -> Slot<()> {
        Slot::prepared(id, Request::Order, 7, None, ())
    }

    #[test]
    fn ids_slots_and_fates() {
        let mut t: Table<()> = Table::new(2);
        assert_eq!(t.next(), Some(1));
        t.reserve(slot(1));
        assert_eq!(t.next(), Some(2));
        t.reserve(slot(2));
        // Every slot is held.
        assert_eq!(t.next(), None);
        assert!(t.sent(1));
        assert!(!t.unsent(1), "a written request leaves by its answer");
        assert!(t.unsent(2));
        assert_eq!(t.in_flight(), 1);
        assert!(t.get(3).is_none() && t.get(1).is_some());
        let fates: Vec<Fate> = t.drain().collect();
        assert_eq!(
            fates,
            [Fate::Unknown {
                id: 1,
                kind: Request::Order,
                client_order_id: None,
                deadline_ns: 7
            }]
        );
        assert_eq!(t.in_flight(), 0);
        assert_eq!(t.next(), Some(3));
        t.reserve(slot(3));
        assert!(t.take(3).is_some());
        assert!(t.take(3).is_none());
    }

    /// Issue 39, item 4: on main id `n` could only take slot `n % capacity`, so
    /// one request never answered stopped the table `capacity - 1` ids later,
    /// with every other slot free, until its deadline dropped the connection.
    #[test]
    fn one_slow_answer_holds_only_its_own_slot() {
        let mut t: Table<()> = Table::new(4);
        let first = t.next().unwrap();
        t.reserve(slot(first));
        assert!(t.sent(first));
        // A thousand others come and go while the first is never answered.
        for _ in 0..1_000 {
            let id = t.next().expect("three slots are free");
            t.reserve(slot(id));
            assert!(t.sent(id));
            assert!(t.get(id).is_some());
            assert_eq!(t.in_flight(), 2);
            assert!(t.take(id).is_some());
        }
        assert!(t.get(first).is_some(), "the slow one still waits");
        // Three in flight besides it fill the table, and only then.
        for _ in 0..3 {
            let id = t.next().unwrap();
            t.reserve(slot(id));
        }
        assert_eq!(t.next(), None);
        assert_eq!(t.in_flight(), 4);
        assert_eq!(t.take(first).map(|s| s.id), Some(first));
        assert!(t.next().is_some());
        assert_eq!(t.drain().count(), 3);
        assert_eq!(t.in_flight(), 0);
    }

    #[test]
    fn ids_wrap_past_zero() {
        let mut t: Table<()> = Table::new(3);
        t.reserve(slot(u64::MAX));
        assert_eq!(t.next(), Some(1));
    }
}
