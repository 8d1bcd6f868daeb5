//! The ledger: one preallocated slab of the requests a gateway has accepted and not
//! yet settled, keyed by the client's request id while one is on the wire.
//!
//! It also indexes the client order ids its entries name, so the gateway can tell
//! at submit whether an id is still live ([`Ledger::holds_id`]).
//!
//! It allocates only in [`Ledger::new`]: the slots, their request buffers, the free
//! list and the two open-addressed indexes (request ids, client order ids) are all
//! sized there. It never reads a clock
//! and never touches a budget: the gateway applies the settle rule
//! ([`crate`]) and the ledger only keeps what that rule needs.

use arrayvec::ArrayVec;
use ergon_core::{Class, Verdict};
use ergon_venues::endpoint::{ClientOrderId, Prepared, MAX_BATCH, MAX_CLIENT_ORDER_ID};

use super::events::Tag;
use ergon_io::client::RequestId;

/// A free slot of the ledger, the next one taken ([`Ledger::vacant_slot`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Vacant(u32);

/// A slot of the ledger, valid until the entry is removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(u32);

impl Key {
    /// The slot's index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where an accepted request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The request is on the wire (bound to its request id).
    Wire,
    /// It surely did not run; it is charged and sent again at `at_ns` if its
    /// deadline has not passed.
    Retry,
    /// Its outcome is unknown; its query by client order id goes out at `at_ns`.
    Reconcile,
    /// Its query is on the wire (bound to the query's request id).
    Query,
}

/// What the ledger keeps of one request: what a re-send and a reconcile need.
#[derive(Debug)]
pub struct Entry {
    /// The caller's tag.
    pub tag: Tag,
    /// The class it was charged at (and is charged again at).
    pub class: Class,
    /// The request itself: its bytes, deadline and client order id.
    pub req: Prepared,
    /// The query that reconciles it (its buffer is reused).
    pub query: Prepared,
    /// Where it stands.
    pub stage: Stage,
    /// The last verdict read for it (what `resend` is asked about).
    pub verdict: Verdict,
    /// When its next step is due ([`Stage::Retry`], [`Stage::Reconcile`]).
    pub at_ns: i64,
    /// How many answers said it did not run (each allowing a re-send).
    pub resends: u8,
    /// When its outcome became unknown (the first [`Stage::Reconcile`]).
    pub unknown_since_ns: i64,
    /// After this (the gateway's clock) the venue can no longer run it; None if
    /// the venue states no bound ([`crate::Account::not_found_after`]).
    pub not_found_after: Option<i64>,
    /// Reconcile queries answered so far without settling it.
    pub queries: u8,
    /// When the query by client order id of the current round was sent (the
    /// round's [`Entry::closed`] query keeps it: a NotFound is as old as the
    /// round's first look).
    pub query_sent_ns: i64,
    /// Whether the query due or on the wire is the venue's query of closed
    /// orders ([`Endpoints::query_closed_order`]), asked after its query by id
    /// answered NotFound.
    ///
    /// [`Endpoints::query_closed_order`]: ergon_venues::endpoint::Endpoints::query_closed_order
    pub closed: bool,
    /// The deadline it was submitted with: never re-sent after it, however often
    /// it is re-signed (each re-sign moves [`Prepared::deadline_ns`]).
    pub resend_until: i64,
    /// A batch being reconciled: the items whose fate is still unknown (bit `i`
    /// for item `i`); 0 for anything else.
    pub items: u32,
    /// The item of [`Entry::items`] whose query is due or on the wire.
    pub item: u8,
    /// The `(closed, item)` whose query [`Entry::query`] holds when the budget
    /// refused it: the next try of the same query charges these parts first and
    /// writes (signs, stamps) it again only once charged. None otherwise.
    pub query_refused: Option<(bool, u8)>,
    /// When its request (or query) was last handed to the transport: no byte of
    /// it left before, so the venue handled it after (the clock check of
    /// [`Account::answer_time`](crate::Account::answer_time)).
    pub sent_ns: i64,
}

#[derive(Debug)]
struct Slot {
    live: bool,
    wire: Option<RequestId>,
    /// The hashes of the client order ids it put in the id index at insert.
    ids: ArrayVec<u64, MAX_BATCH>,
    entry: Entry,
}

/// The slab and its id index. See the module doc.
#[derive(Debug)]
pub struct Ledger {
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Open addressing, linear probing, backward-shift removal: (request id, slot).
    index: Vec<Option<(u64, u32)>>,
    mask: usize,
    /// The same over the client order ids the entries name: (id hash, slot), one
    /// per id, duplicates kept.
    ids: Vec<Option<(u64, u32)>>,
    ids_mask: usize,
    len: usize,
}

impl Ledger {
    /// A ledger of `capacity` slots (at least 1), each with request buffers of
    /// `bytes` bytes.
    pub fn new(capacity: usize, bytes: usize) -> Self {
        let capacity = capacity.max(1);
        let slots = (0..capacity)
            .map(|_| Slot {
                live: false,
                wire: None,
                ids: ArrayVec::new(),
                entry: Entry {
                    tag: 0,
                    class: Class::Normal,
                    req: Prepared::with_capacity(bytes),
                    query: Prepared::with_capacity(bytes),
                    stage: Stage::Wire,
                    verdict: Verdict::Unknown,
                    at_ns: 0,
                    resends: 0,
                    unknown_since_ns: 0,
                    not_found_after: None,
                    queries: 0,
                    query_sent_ns: 0,
                    closed: false,
                    resend_until: 0,
                    items: 0,
                    item: 0,
                    query_refused: None,
                    sent_ns: 0,
                },
            })
            .collect();
        let buckets = (capacity * 2).next_power_of_two();
        // At most MAX_BATCH ids per entry, at most half full.
        let id_buckets = (capacity * MAX_BATCH * 2).next_power_of_two();
        Ledger {
            slots,
            free: (0..capacity as u32).rev().collect(),
            index: vec![None; buckets],
            mask: buckets - 1,
            ids: vec![None; id_buckets],
            ids_mask: id_buckets - 1,
            len: 0,
        }
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many entries it can hold.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Takes a free slot for a request: `req` is swapped in (the caller gets the
    /// slot's old buffer back, to prepare the next request in). None if every slot
    /// is taken.
    pub fn insert(&mut self, tag: Tag, class: Class, req: &mut Prepared) -> Option<Key> {
        self.insert_hashed(tag, class, req, None)
    }

    /// [`Ledger::insert`], with the hash of `req`'s first client order id when the
    /// caller has it (the duplicate check made it).
    pub(crate) fn insert_hashed(
        &mut self,
        tag: Tag,
        class: Class,
        req: &mut Prepared,
        first: Option<IdHash>,
    ) -> Option<Key> {
        let i = self.vacant_slot()?;
        self.lend(i).swap_with(req);
        Some(self.occupy_slot(i, tag, class, first))
    }

    /// The request buffer of the free slot the next insert or [`Ledger::occupy`]
    /// takes, lent to prepare a request in place (it holds that slot's last
    /// request, or nothing); None if every slot is taken. The slot stays free
    /// until it is occupied: whatever is written in it meanwhile is left there,
    /// unread, for the next preparation to write over.
    pub fn vacant(&mut self) -> Option<&mut Prepared> {
        let i = self.vacant_slot()?;
        Some(self.lend(i))
    }

    /// The request prepared in the buffer [`Ledger::vacant`] lends, as it stands.
    pub fn lent(&self) -> Option<&Prepared> {
        let i = self.vacant_slot()?;
        Some(&self.slots[i.0 as usize].entry.req)
    }

    /// Takes the free slot whose buffer [`Ledger::vacant`] lent, with the request
    /// prepared in it: no buffer changes hands. None if every slot is taken.
    pub fn occupy(&mut self, tag: Tag, class: Class) -> Option<Key> {
        let i = self.vacant_slot()?;
        Some(self.occupy_slot(i, tag, class, None))
    }

    /// The free slot the next insert takes (the free list's top), if any: what
    /// [`Ledger::lend`] and [`Ledger::occupy_slot`] take, valid until the ledger
    /// changes otherwise.
    #[inline]
    pub(crate) fn vacant_slot(&self) -> Option<Vacant> {
        self.free.last().map(|&i| Vacant(i))
    }

    /// The request buffer of the free slot `i` ([`Ledger::vacant`]).
    #[inline]
    pub(crate) fn lend(&mut self, i: Vacant) -> &mut Prepared {
        &mut self.slots[i.0 as usize].entry.req
    }

    /// The request prepared in the free slot `i`.
    #[inline]
    pub(crate) fn lent_at(&self, i: Vacant) -> &Prepared {
        &self.slots[i.0 as usize].entry.req
    }

    /// Takes the free slot `i` ([`Ledger::vacant_slot`], the ledger unchanged
    /// since) with the request prepared in it. `first` is the hash of its first
    /// client order id when the caller has it (so it is not hashed twice).
    pub(crate) fn occupy_slot(
        &mut self,
        Vacant(i): Vacant,
        tag: Tag,
        class: Class,
        first: Option<IdHash>,
    ) -> Key {
        debug_assert_eq!(self.free.last(), Some(&i), "the free list's top");
        self.free.pop();
        let slot = &mut self.slots[i as usize];
        slot.live = true;
        slot.wire = None;
        let e = &mut slot.entry;
        e.tag = tag;
        e.class = class;
        e.stage = Stage::Wire;
        e.verdict = Verdict::Unknown;
        e.at_ns = 0;
        e.resends = 0;
        e.unknown_since_ns = 0;
        e.not_found_after = None;
        e.queries = 0;
        e.query_sent_ns = 0;
        e.closed = false;
        e.resend_until = e.req.deadline_ns();
        e.items = 0;
        e.item = 0;
        e.query_refused = None;
        slot.ids.clear();
        for (k, id) in e.req.client_order_ids().iter().enumerate() {
            let h = match first {
                Some(IdHash(h)) if k == 0 => h,
                _ => IdHash::of(id).0,
            };
            // At most MAX_BATCH ids in a Prepared: the push cannot fail.
            let _ = slot.ids.try_push(h);
            let mut at = home(h, self.ids_mask);
            while self.ids[at].is_some() {
                at = (at + 1) & self.ids_mask;
            }
            self.ids[at] = Some((h, i));
        }
        self.len += 1;
        Key(i)
    }

    /// Whether a live entry names `id` (as the order it places, cancels, amends
    /// or queries).
    pub fn holds_id(&self, id: &ClientOrderId) -> bool {
        self.holds_id_hashed(id, IdHash::of(id))
    }

    /// [`Ledger::holds_id`], `h` being `id`'s hash.
    #[inline]
    pub(crate) fn holds_id_hashed(&self, id: &ClientOrderId, IdHash(h): IdHash) -> bool {
        let mut at = home(h, self.ids_mask);
        while let Some((other, slot)) = self.ids[at] {
            if other == h {
                let e = &self.slots[slot as usize].entry;
                if e.req.client_order_ids().contains(id) {
                    return true;
                }
            }
            at = (at + 1) & self.ids_mask;
        }
        false
    }

    /// Whether request `tag`'s live entry names `id` (its request is still in
    /// flight: a batch or cancel-replace whose other parts are being settled).
    pub fn holds_tag_id(&self, tag: Tag, id: &ClientOrderId) -> bool {
        let IdHash(h) = IdHash::of(id);
        let mut at = home(h, self.ids_mask);
        while let Some((other, slot)) = self.ids[at] {
            if other == h {
                let e = &self.slots[slot as usize].entry;
                if e.tag == tag && e.req.client_order_ids().contains(id) {
                    return true;
                }
            }
            at = (at + 1) & self.ids_mask;
        }
        false
    }

    /// The entry in `key`'s slot, if it is live.
    pub fn get(&self, key: Key) -> Option<&Entry> {
        self.slots
            .get(key.index())
            .filter(|s| s.live)
            .map(|s| &s.entry)
    }

    /// The entry in `key`'s slot, if it is live, to change.
    pub fn get_mut(&mut self, key: Key) -> Option<&mut Entry> {
        self.slots
            .get_mut(key.index())
            .filter(|s| s.live)
            .map(|s| &mut s.entry)
    }

    /// The entry in `key`'s slot, known live (the caller just looked it up or
    /// occupied it).
    #[inline]
    pub(crate) fn live_mut(&mut self, key: Key) -> &mut Entry {
        let s = &mut self.slots[key.index()];
        debug_assert!(s.live, "a live slot");
        &mut s.entry
    }

    /// Records that `key`'s request (or query) is on the wire as `id`. False if the
    /// slot is not live or is already bound.
    pub fn bind(&mut self, key: Key, id: RequestId) -> bool {
        match self.slots.get_mut(key.index()) {
            Some(s) if s.live && s.wire.is_none() => s.wire = Some(id),
            _ => return false,
        }
        self.index_bound(key, id);
        true
    }

    /// `key`'s request (or query) handed to the transport at `now_ns` as `id`:
    /// when, a request's stage [`Stage::Wire`] (a query's stays
    /// [`Stage::Query`]), and [`Ledger::bind`], with one look-up of the slot.
    /// False if the slot is not live (nothing changed) or is already bound (the
    /// time and stage recorded all the same).
    pub(crate) fn bind_sent(&mut self, key: Key, id: RequestId, now_ns: i64) -> bool {
        let Some(s) = self.slots.get_mut(key.index()).filter(|s| s.live) else {
            return false;
        };
        if s.entry.stage != Stage::Query {
            s.entry.stage = Stage::Wire;
        }
        s.entry.sent_ns = now_ns;
        if s.wire.is_some() {
            return false;
        }
        s.wire = Some(id);
        self.index_bound(key, id);
        true
    }

    /// [`Ledger::bind_sent`] of the request in the slot `key` just occupied: live,
    /// its stage [`Stage::Wire`] and not yet bound, so none of that is asked.
    #[inline]
    pub(crate) fn bind_fresh(&mut self, key: Key, id: RequestId, now_ns: i64) {
        let s = &mut self.slots[key.index()];
        debug_assert!(
            s.live && s.wire.is_none() && s.entry.stage == Stage::Wire,
            "a just-occupied slot"
        );
        s.entry.sent_ns = now_ns;
        s.wire = Some(id);
        self.index_bound(key, id);
    }

    /// Enters `id` in the index of request ids, bound to `key`.
    fn index_bound(&mut self, key: Key, id: RequestId) {
        let mut h = home(id.0, self.mask);
        while let Some((other, _)) = self.index[h] {
            debug_assert_ne!(other, id.0, "request ids are unique");
            h = (h + 1) & self.mask;
        }
        self.index[h] = Some((id.0, key.0));
    }

    /// The entry `id` is bound to, left bound (an answer read before it settles).
    pub fn bound(&self, id: RequestId) -> Option<Key> {
        let mut h = home(id.0, self.mask);
        loop {
            match self.index[h] {
                None => return None,
                Some((k, slot)) if k == id.0 => return Some(Key(slot)),
                Some(_) => h = (h + 1) & self.mask,
            }
        }
    }

    /// The entry `id` was bound to, now unbound (the transport reported on it).
    pub fn unbind(&mut self, id: RequestId) -> Option<Key> {
        let mut h = home(id.0, self.mask);
        loop {
            match self.index[h] {
                None => return None,
                Some((k, slot)) if k == id.0 => {
                    remove_at(&mut self.index, self.mask, h);
                    self.slots[slot as usize].wire = None;
                    return Some(Key(slot));
                }
                Some(_) => h = (h + 1) & self.mask,
            }
        }
    }

    /// Frees `key`'s slot; the entry's buffers stay for the next request. False if
    /// it is not live or still bound to a request on the wire.
    pub fn remove(&mut self, key: Key) -> bool {
        match self.slots.get_mut(key.index()) {
            Some(s) if s.live && s.wire.is_none() => s.live = false,
            _ => return false,
        }
        for k in 0..self.slots[key.index()].ids.len() {
            let h = self.slots[key.index()].ids[k];
            let mut at = home(h, self.ids_mask);
            while let Some(pair) = self.ids[at] {
                if pair == (h, key.0) {
                    remove_at(&mut self.ids, self.ids_mask, at);
                    break;
                }
                at = (at + 1) & self.ids_mask;
            }
        }
        self.free.push(key.0);
        self.len -= 1;
        true
    }

    /// The live entries not on the wire whose step is due at `now_ns`, lowest slot
    /// first; and the earliest step due later (`i64::MAX` if none).
    pub fn due(&self, now_ns: i64, out: &mut impl FnMut(Key)) -> i64 {
        let mut next = i64::MAX;
        for (i, s) in self.slots.iter().enumerate() {
            if !s.live || s.wire.is_some() {
                continue;
            }
            if matches!(s.entry.stage, Stage::Retry | Stage::Reconcile) {
                if s.entry.at_ns <= now_ns {
                    out(Key(i as u32));
                } else {
                    next = next.min(s.entry.at_ns);
                }
            }
        }
        next
    }
}

/// Where key `k` starts probing in an index of `mask + 1` buckets.
fn home(k: u64, mask: usize) -> usize {
    (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask
}

/// A client order id's hash, as the ledger's id index keys it: its length, then
/// its bytes eight at a time (a folded multiply a word), the last
/// word ending at the id's end (overlapping the one before: no byte at a time);
/// an id shorter than a word is one word, zero-padded. Made once a submit for an
/// order's one id (the duplicate check's is the insert's); a byte at a time it
/// was ~5 instructions a byte. Only an index's probe start: equal hashes are
/// told apart by comparing the ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IdHash(u64);

/// [`IdHash`]'s start for each id length: the length mixed in on its own (xored
/// into the first word, a length one apart would cancel a first byte that
/// differs by as much), at compile time.
const ID_SEEDS: [u64; MAX_CLIENT_ORDER_ID + 1] = {
    let mut seeds = [0; MAX_CLIENT_ORDER_ID + 1];
    let mut n = 0;
    while n < seeds.len() {
        seeds[n] = id_mix(0xcbf2_9ce4_8422_2325, n as u64);
        n += 1;
    }
    seeds
};

/// One word into [`IdHash`]'s state: a folded multiply (the 128-bit product's
/// halves xored: every bit reaches every bit, one `mul`); a 64-bit multiply
/// carries only upwards, and overlapping words cancelled in it.
const fn id_mix(h: u64, w: u64) -> u64 {
    // An odd multiplier with bits all over (the golden ratio's).
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let p = (h ^ w) as u128 * K as u128;
    p as u64 ^ (p >> 64) as u64
}

impl IdHash {
    /// `id`'s hash.
    #[inline]
    pub(crate) fn of(id: &ClientOrderId) -> Self {
        let b = id.as_str().as_bytes();
        let h = ID_SEEDS.get(b.len()).copied().unwrap_or(0);
        let Some(last) = b.len().checked_sub(8) else {
            let mut x = [0u8; 8];
            for (x, &c) in x.iter_mut().zip(b) {
                *x = c;
            }
            return IdHash(id_mix(h, u64::from_le_bytes(x)));
        };
        let word = |w: &[u8]| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&w[..8]);
            u64::from_le_bytes(x)
        };
        // Every whole word that ends before the id does, then the last 8 bytes.
        let h = b[..b.len() - 1]
            .chunks_exact(8)
            .fold(h, |h, w| id_mix(h, word(w)));
        IdHash(id_mix(h, word(&b[last..])))
    }
}

/// Backward-shift removal from an open-addressed index: no tombstones, so
/// lookups stay short for good.
fn remove_at(index: &mut [Option<(u64, u32)>], mask: usize, mut hole: usize) {
    index[hole] = None;
    let mut j = (hole + 1) & mask;
    while let Some((k, slot)) = index[j] {
        let home = home(k, mask);
        // Move it into the hole if its home is not in (hole, j].
        let dist_j = j.wrapping_sub(home) & mask;
        let dist_hole = hole.wrapping_sub(home) & mask;
        if dist_hole < dist_j {
            index[hole] = Some((k, slot));
            index[j] = None;
            hole = j;
        }
        j = (j + 1) & mask;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u64),
        Occupy(u64),
        Bind(usize),
        Unbind(usize),
        UnbindUnknown(u64),
        Remove(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => any::<u64>().prop_map(Op::Insert),
            2 => any::<u64>().prop_map(Op::Occupy),
            3 => any::<usize>().prop_map(Op::Bind),
            3 => any::<usize>().prop_map(Op::Unbind),
            1 => any::<u64>().prop_map(Op::UnbindUnknown),
            2 => any::<usize>().prop_map(Op::Remove),
        ]
    }

    proptest! {
        /// The ledger against a map: same entries, same bindings, same refusals.
        #[test]
        fn the_ledger_agrees_with_a_map(ops in proptest::collection::vec(op(), 1..400), cap in 1usize..12) {
            let mut l = Ledger::new(cap, 16);
            // key -> (tag, bound id)
            let mut model: HashMap<Key, (u64, Option<u64>)> = HashMap::new();
            let mut next_id = 1u64 << 40;
            let mut p = Prepared::with_capacity(16);
            for op in ops {
                match op {
                    Op::Insert(tag) => {
                        let k = l.insert(tag, Class::Normal, &mut p);
                        prop_assert_eq!(k.is_some(), model.len() < cap);
                        if let Some(k) = k {
                            prop_assert!(model.insert(k, (tag, None)).is_none());
                        }
                    }
                    Op::Occupy(tag) => {
                        // Lent the free slot's buffer, then taken with it.
                        let free = model.len() < cap;
                        prop_assert_eq!(l.vacant().is_some(), free);
                        prop_assert_eq!(l.lent().is_some(), free);
                        let k = l.occupy(tag, Class::Normal);
                        prop_assert_eq!(k.is_some(), free);
                        if let Some(k) = k {
                            prop_assert!(model.insert(k, (tag, None)).is_none());
                        }
                    }
                    Op::Bind(i) => {
                        let keys: Vec<Key> = model.keys().copied().collect();
                        if keys.is_empty() { continue; }
                        let k = keys[i % keys.len()];
                        // Ids come from a client: unique, not dense.
                        next_id += 1 + (i as u64 % 7) * 1_000;
                        let ok = l.bind(k, RequestId(next_id));
                        let m = model.get_mut(&k).unwrap();
                        prop_assert_eq!(ok, m.1.is_none());
                        if ok { m.1 = Some(next_id); }
                    }
                    Op::Unbind(i) => {
                        let bound: Vec<(Key, u64)> = model.iter().filter_map(|(k, v)| v.1.map(|id| (*k, id))).collect();
                        if bound.is_empty() { continue; }
                        let (k, id) = bound[i % bound.len()];
                        prop_assert_eq!(l.unbind(RequestId(id)), Some(k));
                        prop_assert_eq!(l.unbind(RequestId(id)), None);
                        model.get_mut(&k).unwrap().1 = None;
                    }
                    Op::UnbindUnknown(id) => {
                        let known = model.values().any(|v| v.1 == Some(id));
                        if !known { prop_assert_eq!(l.unbind(RequestId(id)), None); }
                    }
                    Op::Remove(i) => {
                        let key = Key((i % cap) as u32);
                        let expect = model.get(&key).is_some_and(|v| v.1.is_none());
                        prop_assert_eq!(l.remove(key), expect);
                        if expect { model.remove(&key); }
                    }
                }
                prop_assert_eq!(l.len(), model.len());
                for (k, (tag, _)) in &model {
                    prop_assert_eq!(l.get(*k).map(|e| e.tag), Some(*tag));
                }
            }
        }
    }

    /// Ids of every length up to the longest, differing in one byte anywhere or
    /// in two, all hash apart (equal hashes would only cost a probe: the ids are
    /// compared).
    #[test]
    fn id_hashes_tell_ids_apart() {
        let mut seen = std::collections::HashSet::new();
        let mut see = |s: &[u8]| {
            let id = ClientOrderId::new(std::str::from_utf8(s).unwrap()).unwrap();
            seen.insert((id, IdHash::of(&id).0));
        };
        for len in 1..=ergon_venues::endpoint::MAX_CLIENT_ORDER_ID {
            for at in 0..len {
                for c in [b'a', b'b', b'0', b'-', b'9', b'_'] {
                    let mut s = vec![b'x'; len];
                    s[at] = c;
                    see(&s);
                    for (then, d) in (at + 1..len).zip([b'a', b'-'].into_iter().cycle()) {
                        let mut t = s.clone();
                        t[then] = d;
                        see(&t);
                    }
                }
            }
        }
        let ids: std::collections::HashSet<_> = seen.iter().map(|(id, _)| *id).collect();
        let hashes: std::collections::HashSet<_> = seen.iter().map(|(_, h)| *h).collect();
        assert_eq!(ids.len(), hashes.len(), "no two of these ids hash alike");
    }

    #[test]
    fn insert_swaps_the_buffer_and_due_finds_steps() {
        let mut l = Ledger::new(2, 64);
        let mut p = Prepared::with_capacity(64);
        let k = l.insert(7, Class::Urgent, &mut p).unwrap();
        assert_eq!(l.get(k).unwrap().tag, 7);
        assert_eq!(l.get(k).unwrap().class, Class::Urgent);
        let e = l.get_mut(k).unwrap();
        e.stage = Stage::Retry;
        e.at_ns = 100;
        let mut seen = Vec::new();
        assert_eq!(l.due(50, &mut |k| seen.push(k)), 100);
        assert!(seen.is_empty());
        assert_eq!(l.due(100, &mut |k| seen.push(k)), i64::MAX);
        assert_eq!(seen, vec![k]);
        assert!(l.bind(k, RequestId(9)));
        assert!(!l.remove(k), "a bound entry is not removed");
        assert_eq!(l.unbind(RequestId(9)), Some(k));
        assert!(l.remove(k));
        assert!(l.get(k).is_none());
    }
}
