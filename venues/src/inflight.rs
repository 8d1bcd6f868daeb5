//! The table of requests in flight on one WebSocket connection, which the
//! venues' sessions share ([`crate::binance_spot_ws`], [`crate::deribit_ws`]):
//! request ids (from 1, never 0), one slot per id (the id modulo the table's
//! length: the next id waits while its slot is held), each request prepared or
//! written, and what becomes of each when the connection drops ([`Fate`]).
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
}

impl<X: Copy> Table<X> {
    /// A table of `capacity` slots (at least 1).
    pub(crate) fn new(capacity: usize) -> Self {
        Table {
            next_id: 1,
            slots: vec![None; capacity.max(1)],
        }
    }

    fn slot_of(&self, id: u64) -> usize {
        // The table is at most usize::MAX long, so the remainder fits.
        (id % self.slots.len() as u64) as usize
    }

    /// How many requests are in the table (prepared or written, unanswered).
    pub(crate) fn in_flight(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    /// The next request id, if its slot is free (else the table is full for it).
    pub(crate) fn next(&self) -> Option<u64> {
        let id = self.next_id;
        self.slots[self.slot_of(id)].is_none().then_some(id)
    }

    /// Reserves `slot` (its id from [`Table::next`]) and moves the next id past it.
    pub(crate) fn reserve(&mut self, slot: Slot<X>) {
        self.next_id = slot.id.wrapping_add(1).max(1);
        let at = self.slot_of(slot.id);
        self.slots[at] = Some(slot);
    }

    /// Request `id`, if in the table.
    pub(crate) fn get(&self, id: u64) -> Option<Slot<X>> {
        self.slots[self.slot_of(id)].filter(|s| s.id == id)
    }

    /// Takes request `id` out of the table (answered).
    pub(crate) fn take(&mut self, id: u64) -> Option<Slot<X>> {
        let at = self.slot_of(id);
        match self.slots[at] {
            Some(s) if s.id == id => self.slots[at].take(),
            _ => None,
        }
    }

    /// Marks request `id` written; `false` if it is not in the table.
    pub(crate) fn sent(&mut self, id: u64) -> bool {
        let at = self.slot_of(id);
        match &mut self.slots[at] {
            Some(s) if s.id == id => {
                s.written = true;
                true
            }
            _ => false,
        }
    }

    /// Frees request `id`, prepared but not written; `false` if it is not in the
    /// table or was written (a written request leaves only by its answer or by
    /// [`Table::drain`]).
    pub(crate) fn unsent(&mut self, id: u64) -> bool {
        let at = self.slot_of(id);
        match self.slots[at] {
            Some(s) if s.id == id && !s.written => {
                self.slots[at] = None;
                true
            }
            _ => false,
        }
    }

    /// The connection dropped: yields every request in the table once, and
    /// empties it.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = Fate> + '_ {
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
        // Id 3 takes slot 1, still held by request 1.
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

    #[test]
    fn ids_wrap_past_zero() {
        let mut t: Table<()> = Table::new(3);
        t.reserve(slot(u64::MAX));
        assert_eq!(t.next(), Some(1));
    }
}
