//! Reconcile: an unknown outcome settled by queries of each client order id it
//! names, bounded in count and in time; ids that stay unknown are watched.

use super::{
    Gateway, Stats, Watched, HALT_CHECK_NS, MAX_QUERIES, QUERY_BACKOFF_MAX_NS, QUERY_BACKOFF_NS,
    QUERY_CLASS, REFUSED_QUERIES_NS, RETRY_GAP_NS, SKEWS_TO_REANCHOR,
};
use crate::endpoints::Account;
use crate::events::{Event, ItemFate};
use crate::ledger::{Entry, Key, Ledger, Stage};
use crate::wire::Wire;
use crate::ws_api::WsLane;
use arrayvec::ArrayVec;
use ergon_core::{BucketId, Verdict, Why};
use ergon_venues::adapt::Request as Kind;
use ergon_venues::endpoint::{
    ClientOrderId, Lookup, OrderRef, OrderState, Prepared, Symbol, MAX_BATCH,
};
use ergon_venues::response::Response;
use std::collections::VecDeque;

impl<E: Account> Gateway<E> {
    /// Ends `key`'s request [`Event::Unresolved`]: frees its slot and watches its
    /// client order id (if it has one) for [`super::WATCH_NS`].
    /// `halted`: a halt of that bucket refused its queries; its id is watched
    /// until the halt is cleared, and for the watch's time after.
    pub(super) fn unresolve(
        &mut self,
        key: Key,
        now: i64,
        halted: Option<BucketId>,
    ) -> Option<Event<'static>> {
        let e = self.ledger.get(key)?;
        let (tag, batch, id) = (e.tag, e.items != 0, queried_id(e).copied());
        if !batch {
            self.ledger.remove(key);
        }
        self.stats.unresolved += 1;
        if let Some(id) = id {
            self.watch.retain(|w| w.until_ns > now);
            if self.watch.len() == self.watch.capacity() {
                // Full: the one whose watch ends first goes.
                if let Some(i) = (0..self.watch.len()).min_by_key(|&i| self.watch[i].until_ns) {
                    self.watch.swap_remove(i);
                    self.stats.watch_dropped += 1;
                }
            }
            let until_ns = match halted {
                Some(_) => i64::MAX,
                None => now.saturating_add(self.watch_ns),
            };
            if halted.is_some() {
                let at = now.saturating_add(HALT_CHECK_NS);
                self.halt_check = Some(self.halt_check.map_or(at, |t| t.min(at)));
            }
            self.watch.push(Watched {
                id,
                tag,
                until_ns,
                halted,
            });
        }
        if batch {
            return self.next_item(key, now, ItemFate::Unresolved);
        }
        Some(Event::Unresolved { tag })
    }

    /// The item of a batch being reconciled that `key`'s queries were about ended
    /// `fate`: its [`Event::Item`], then the next unknown item's query, or, after
    /// the last, [`Event::BatchSettled`] (both queued, in that order).
    pub(super) fn next_item(
        &mut self,
        key: Key,
        now: i64,
        fate: ItemFate,
    ) -> Option<Event<'static>> {
        let e = self.ledger.get_mut(key)?;
        let (tag, item) = (e.tag, e.item);
        e.items &= !(1 << item);
        // Grows past its reserve only for a batch's items (rare, off the send path).
        self.pending.push_back(Event::Item { tag, item, fate });
        if e.items != 0 {
            e.item = e.items.trailing_zeros() as u8;
            e.queries = 0;
            e.closed = false;
            e.stage = Stage::Reconcile;
            e.at_ns = now;
            self.next_due = self.next_due.min(now);
            return None;
        }
        self.ledger.remove(key);
        // A request of several parts is one Reconciling, so one reconciled (its
        // parts' finds are in their Items).
        self.stats.reconciled += u64::from(fate != ItemFate::Unresolved);
        self.pending.push_back(Event::BatchSettled { tag });
        None
    }

    /// A request of several parts (a batch, a two-step cancel-replace) answered
    /// Done with its parts' verdicts `items` (the adapter's
    /// [`Venue::batch_items`](ergon_venues::adapt::Venue::batch_items), in the
    /// order of its client order ids): queues an [`Event::Item`] for each part the
    /// answer settled and returns the unknown ones (bit `i` for part `i`; a part
    /// the answer does not list is unknown), which `key`'s entry keeps to
    /// reconcile each by its own id. None: the request has no parts, or the answer
    /// named none (the request's verdict is all there is).
    pub(super) fn read_items(&mut self, key: Key, items: &[Verdict]) -> Option<u32> {
        let e = self.ledger.get_mut(key)?;
        let n = parts_of(&e.req);
        if n == 0 || items.is_empty() {
            return None;
        }
        let unknown = (0..n)
            .filter(|&i| items.get(i).map_or(true, |v| *v == Verdict::Unknown))
            .fold(0u32, |m, i| m | 1 << i);
        e.items = unknown;
        for (i, v) in items.iter().take(n).enumerate() {
            let fate = match v {
                Verdict::Unknown => continue,
                Verdict::Done => ItemFate::Applied,
                Verdict::Rejected => ItemFate::Rejected,
                _ => ItemFate::NotRun,
            };
            // Grows past its reserve only for a request's parts (rare, off the
            // send path).
            self.pending.push_back(Event::Item {
                tag: e.tag,
                item: i as u8,
                fate,
            });
        }
        Some(unknown)
    }

    /// An order `id` seen at the venue in `state` at `now`: if it is watched, an
    /// [`Event::Late`] is queued and the watch ends (not while its request is in
    /// flight: see [`seen_in`]).
    pub(super) fn seen(&mut self, id: &[u8], state: OrderState, now: i64) {
        seen_in(
            &self.ledger,
            &mut self.watch,
            &mut self.pending,
            &mut self.stats,
            id,
            state,
            now,
        );
    }

    /// Writes `key`'s query by client order id (its query of closed orders if
    /// [`Entry::closed`](crate::ledger::Entry::closed)); whether it could.
    pub(super) fn write_query(&mut self, key: Key, now: i64) -> bool {
        // Over the lane when it is ready: its REST signature is made only if it
        // goes over HTTP after all ([`Gateway::send`]).
        let lane = self.ws.as_ref().is_some_and(WsLane::ready);
        self.venue.defer_signatures(lane);
        let Some(e) = self.ledger.get_mut(key) else {
            return false;
        };
        e.query_refused = None;
        // The request's own symbol; the gateway's for one that names none.
        let symbol = match e.req.symbol() {
            Some(s) => Ok(s),
            None => Symbol::new(self.symbol.as_str()),
        };
        let (Some(&client_order_id), Ok(symbol)) = (queried_id(e), symbol) else {
            return false;
        };
        let order = OrderRef {
            symbol,
            client_order_id,
        };
        match e.closed {
            true => self.venue.query_closed_order(&mut e.query, &order, now),
            false => self.venue.query_order(&mut e.query, &order, now),
        }
        .is_ok()
    }

    /// Sends `key`'s query by client order id, or schedules it.
    pub(super) fn query<W: Wire>(&mut self, w: &mut W, key: Key) {
        let now = w.now();
        // The same query the budget refused last time (same order, same kind):
        // its parts are known, so the budget is asked first and the query is
        // written (signed, stamped now) only once charged. A refused try signs
        // nothing: under a throttle most tries are refused, and each signature
        // (an Ed25519 one above all) was spent for nothing.
        let again = self
            .ledger
            .get(key)
            .is_some_and(|e| e.query_refused == Some((e.closed, e.item)));
        let written = again || self.write_query(key, now);
        let Some(e) = self.ledger.get_mut(key) else {
            return;
        };
        e.query_refused = None;
        // A write that names no order (a cancel-all) cannot be asked about by id:
        // it ends Unresolved at once, never a loop of queries that cannot be written.
        if !written && e.req.client_order_id().is_none() {
            if let Some(ev) = self.unresolve(key, now, None) {
                self.push(ev);
            }
            return;
        }
        // Its own class, never the request's Urgent (see QUERY_CLASS).
        let class = QUERY_CLASS;
        let charged = match written {
            true => 'charge: {
                let charged = self.shapes.charge(
                    w.budget(),
                    e.query.parts(),
                    e.query.parts_key(),
                    class,
                    now,
                );
                // Written now that it is charged: the same order and endpoint as
                // the write that succeeded, so this one does too; were it ever to
                // fail, the charge is given back and it is looked at again later.
                if again && charged.is_ok() && !self.write_query(key, now) {
                    if let Ok(t) = charged {
                        let _ = w.budget().refund(t, now);
                    }
                    break 'charge Err((Why::Full, None, now + 5 * RETRY_GAP_NS));
                }
                let Some(e) = self.ledger.get(key) else {
                    return;
                };
                let tid =
                    self.trace
                        .charge(now, e.query.parts(), class, e.req.label(), charged.is_ok());
                if charged.is_ok() {
                    self.labels.charged(e.req.label(), e.query.parts());
                }
                self.trace.set(key, tid);
                charged.map_err(|l| (l.why, Some(l.bucket), l.ready_at_ns))
            }
            // A query that cannot be written settles nothing: look again later.
            _ => Err((Why::Full, None, now + 5 * RETRY_GAP_NS)),
        };
        let Some(e) = self.ledger.get_mut(key) else {
            return;
        };
        match charged {
            Ok(ticket) => {
                e.stage = Stage::Query;
                if !e.closed {
                    e.query_sent_ns = now;
                }
                self.stats.queries += 1;
                self.send(w, key, ticket);
            }
            Err((why, bucket, ready_at)) => {
                // A halt has no ready time, and only a person ends it: nothing can
                // be asked until then, so the request ends now (its id watched
                // until the halt is cleared) rather than hold its slot, and a
                // stop, for ever. A query refused for any other reason is tried
                // again while the budget's ready time falls inside the
                // reconcile's time.
                let halted = bucket.filter(|_| why == Why::Halted);
                let until = reconcile_until(e);
                if halted.is_some() || now >= until || ready_at >= until {
                    self.stats.unresolved_refused += 1;
                    if let Some(ev) = self.unresolve(key, now, halted) {
                        self.push(ev);
                    }
                    return;
                }
                // Written and refused by the budget: the next try charges first.
                e.query_refused = bucket.map(|_| (e.closed, e.item));
                e.at_ns = ready_at.clamp(now + 1, now + 5 * RETRY_GAP_NS);
                e.stage = Stage::Reconcile;
                self.next_due = self.next_due.min(e.at_ns);
            }
        }
    }

    pub(super) fn on_query<W: Wire>(
        &mut self,
        w: &mut W,
        key: Key,
        r: &Response<'_>,
        v: Verdict,
    ) -> Option<Event<'static>> {
        let now = w.now();
        // A query counts toward re-anchoring like any request.
        if v == Verdict::ClockSkew {
            self.skews += 1;
            if self.skews >= SKEWS_TO_REANCHOR {
                self.reanchor(w);
            }
        } else {
            self.skews = 0;
        }
        let lookup = match v {
            // The query was refused before it looked: it settles nothing.
            Verdict::Throttled { .. } | Verdict::Banned { .. } | Verdict::ClockSkew => {
                Lookup::Unknown
            }
            _ => self.venue.read_order(r),
        };
        let e = self.ledger.get_mut(key)?;
        let tag = e.tag;
        // Where the venue keeps closed orders apart (Bybit's history), a NotFound
        // from the query by id is asked there before it counts; the next round
        // starts with the query by id again.
        let closed = core::mem::replace(&mut e.closed, false);
        if lookup == Lookup::NotFound && !closed {
            e.closed = true;
            // Written here to learn whether the venue has such a query; written
            // again, freshly stamped, when the next poll sends it.
            let has = self.write_query(key, now);
            let e = self.ledger.get_mut(key)?;
            e.closed = has;
            if has {
                e.stage = Stage::Reconcile;
                e.at_ns = now;
                self.next_due = self.next_due.min(now);
                return None;
            }
        }
        let e = self.ledger.get(key)?;
        let batch = e.items != 0;
        let found = match lookup {
            // A cancel's order found live says the cancel did not run only if
            // the venue can no longer run it: where the venue states no such
            // bound (Bybit) the cancel may still be in its queue, so it is asked
            // about again like a NotFound, and ends Unresolved if it stays live.
            // (Where the venue states one, the find is taken at once, as before:
            // see the book's simulation chapter.)
            Lookup::Found(info)
                if cancels(e)
                    && matches!(
                        info.state,
                        OrderState::New | OrderState::PartiallyFilled | OrderState::Pending
                    )
                    && e.not_found_after.is_none() =>
            {
                return self.requery(key, now, now, true);
            }
            Lookup::Found(info) => Some(info.state),
            // "Not found" is "never ran" only from a query sent once the venue
            // could no longer run the request.
            Lookup::NotFound if e.not_found_after.is_some_and(|b| e.query_sent_ns >= b) => None,
            Lookup::NotFound | Lookup::Unknown => {
                let not_found = lookup == Lookup::NotFound;
                let until = match v {
                    Verdict::Throttled { until_ns, .. } => until_ns,
                    _ => now,
                };
                return self.requery(key, now, until, not_found);
            }
        };
        if batch {
            // Counted once, when its last part settles (see `next_item`).
            let fate = found.map_or(ItemFate::NeverRan, ItemFate::Found);
            return self.next_item(key, now, fate);
        }
        self.stats.reconciled += 1;
        self.stats.reconciled_found += u64::from(found.is_some());
        self.ledger.remove(key);
        Some(Event::Reconciled { tag, found })
    }

    /// Schedules `key`'s next reconcile query, not before `not_before` (a hold),
    /// after a backoff; or ends it [`Event::Unresolved`] once its queries are spent
    /// or, where the venue states no bound, its time to be found has passed.
    /// `not_found` says the last answer was NotFound (then the query at the
    /// venue's bound, the one that settles, is not put off past it).
    pub(super) fn requery(
        &mut self,
        key: Key,
        now: i64,
        not_before: i64,
        not_found: bool,
    ) -> Option<Event<'static>> {
        let e = self.ledger.get_mut(key)?;
        e.closed = false;
        e.queries = e.queries.saturating_add(1);
        let (n, bound, since) = (e.queries, e.not_found_after, e.unknown_since_ns);
        let out_of_time = bound.is_none() && now >= since.saturating_add(self.unresolved_after_ns);
        if n >= MAX_QUERIES || out_of_time {
            return self.unresolve(key, now, None);
        }
        let mut at = now + self.backoff(n - 1, QUERY_BACKOFF_NS, QUERY_BACKOFF_MAX_NS);
        if let (Some(b), true) = (bound, not_found) {
            at = at.min(b);
        }
        let at = at.max(not_before).max(now + 1);
        let e = self.ledger.get_mut(key)?;
        e.stage = Stage::Reconcile;
        e.at_ns = at;
        self.next_due = self.next_due.min(at);
        None
    }
}

/// [`Gateway::seen`] on the gateway's fields (callable while the venue is borrowed).
/// A part of a batch or cancel-replace left Unresolved is watched at once, while
/// its request settles its other parts: its Late waits until the request's
/// final event ([`Event::BatchSettled`]) is out, as every Late comes about a
/// request no longer in flight (the watch stays; a later sighting gives it).
pub(super) fn seen_in(
    ledger: &Ledger,
    watch: &mut Vec<Watched>,
    pending: &mut VecDeque<Event<'static>>,
    stats: &mut Stats,
    id: &[u8],
    state: OrderState,
    now: i64,
) {
    let hit = watch.iter().position(|w| {
        w.until_ns > now && w.id.as_str().as_bytes() == id && !ledger.holds_tag_id(w.tag, &w.id)
    });
    if let Some(i) = hit {
        let w = watch.swap_remove(i);
        stats.late += 1;
        // Sized for three events per slot; the watch list holds at most one per slot.
        pending.push_back(Event::Late {
            tag: w.tag,
            found: state,
        });
    }
}

/// The client order id `e`'s reconcile query asks about: the item's under
/// reconcile of a batch, else the request's own.
pub(super) fn queried_id(e: &Entry) -> Option<&ClientOrderId> {
    match e.items {
        0 => e.req.client_order_id(),
        _ => e.req.client_order_ids().get(usize::from(e.item)),
    }
}

/// Whether `e`'s query is about a cancel: a cancel's (a batch cancel's every
/// order), or a two-step cancel-replace's part 1 (the cancelled order).
fn cancels(e: &Entry) -> bool {
    match e.req.kind() {
        Some(Kind::Cancel) => true,
        Some(Kind::CancelReplace) => e.items != 0 && e.item == 1,
        _ => false,
    }
}

/// When a reconcile whose queries the budget keeps refusing (a hold, no idle
/// connection, a query it cannot write) ends Unresolved: [`REFUSED_QUERIES_NS`]
/// after the venue's bound where it states one, else after its outcome became
/// unknown.
fn reconcile_until(e: &Entry) -> i64 {
    let from = e.not_found_after.unwrap_or(e.unknown_since_ns);
    from.max(e.unknown_since_ns)
        .saturating_add(REFUSED_QUERIES_NS)
}

/// How many parts `req` has, each with its own fate and client order id: a
/// batch's orders; a batch cancel's orders (a cancel naming several ids, Bybit
/// `cancel-batch`, OKX `cancel-batch-orders`); a cancel-replace of two steps
/// (it names two ids: the new order's, then the cancelled one's) its new order
/// and its cancel; 0 for a request of one part (an amend in place names one
/// id).
pub(super) fn parts_of(req: &Prepared) -> usize {
    let n = req.client_order_ids().len().min(MAX_BATCH);
    match req.kind() {
        Some(Kind::Batch(_)) => n,
        Some(Kind::Cancel) if n >= 2 => n,
        Some(Kind::CancelReplace) if n >= 2 => 2,
        _ => 0,
    }
}

/// The verdicts of `req`'s parts in `items` (the adapter's last answer), copied:
/// none for a request of one part.
pub(super) fn items_of(req: &Prepared, items: &[Verdict]) -> ArrayVec<Verdict, MAX_BATCH> {
    let n = match parts_of(req) {
        0 => 0,
        _ => items.len().min(MAX_BATCH),
    };
    items[..n].iter().copied().collect()
}
