//! Submit: a request charged, entered in the ledger and handed to the transport.

use super::{Gateway, QUERY_CLASS, RETRY_GAP_NS};
use crate::endpoints::Account;
use crate::events::{wait_ns, Event, Expiry, Tag};
use crate::ledger::{IdHash, Key, Stage, Vacant};
use crate::wire::Wire;
use crate::ws_api::{Unsent, WS_BIT};
use ergon_core::{Class, Ticket, Verdict, Why};
use ergon_io::client::RequestId;
use ergon_venues::adapt::{self, Request as Kind};
use ergon_venues::endpoint::{ClientOrderId, Prepared};

impl<E: Account> Gateway<E> {
    /// Charges and sends `req` at `class`, under `tag`. `req` is swapped into the
    /// ledger: the caller gets another buffer back to prepare the next request in.
    /// [`Gateway::submit_with`] prepares in the ledger's own buffer instead (no
    /// swap: the fast path).
    ///
    /// `Err` is the request's one and final event, at once: [`Event::Limited`]
    /// (nothing sent, nothing charged), [`Event::Expired`] (its deadline has passed),
    /// [`Event::DuplicateId`] (an order it places has a client order id that is
    /// live here, or that another order of the same batch places: nothing
    /// charged or sent; a reconcile by that id could not tell the two apart) or [`Event::Rejected`] (the adapter has
    /// no parts for it). On `Ok` its events come later.
    pub fn submit<W: Wire>(
        &mut self,
        w: &mut W,
        req: &mut Prepared,
        class: Class,
        tag: Tag,
    ) -> Result<(), Event<'static>> {
        let now = w.now();
        if req.is_empty() {
            self.stats.rejected += 1;
            return Err(Event::Rejected { tag });
        }
        self.admit(w, None, Some(req), class, tag, now, |gw, w, req, a| {
            let Some(key) = req.and_then(|req| gw.ledger.insert_hashed(tag, class, req, a.first))
            else {
                // The budget's own ticket: never foreign.
                let _ = w.budget().refund(a.ticket, now);
                gw.trace.refund(now, a.tid);
                gw.stats.ledger_full += 1;
                return Err(Event::Limited {
                    tag,
                    why: Why::Full,
                    ready_in_ns: RETRY_GAP_NS,
                });
            };
            gw.trace.set(key, a.tid);
            gw.send_fresh(w, key, a.ticket);
            Ok(())
        })
    }

    /// [`Gateway::submit`] without a buffer of the caller's: `prepare` writes the
    /// request straight into the buffer of the ledger slot it will take, given
    /// the adapter as it stands (its signatures deferred if
    /// [`Gateway::venue_mut`] was called) and that buffer. No request changes
    /// buffers: the fast path from decision to wire, e.g.
    /// `gw.submit_with(w, Class::Normal, tag, |venue, req| venue.new_order_from(&t, req, &fill, now))`.
    ///
    /// The buffer's bytes hold the slot's last request (so a template's order of
    /// the same layout is rewritten in place), but it is lent emptied
    /// ([`Prepared::clear`]): a `prepare` that says `Ok` without writing a
    /// request is [`Event::Rejected`], never a second send of that last request.
    ///
    /// `Err` is the request's one and final event, at once, as [`Gateway::submit`]'s,
    /// but for two: [`Event::Limited`] with [`Why::Full`] when every slot is taken
    /// is answered before `prepare` is called (so before any charge), and
    /// [`Event::Rejected`] also when `prepare` fails. On any `Err` the slot stays
    /// free and nothing else changed but the counts of the refusal (what
    /// `prepare` wrote stays in the free slot's buffer, unread).
    pub fn submit_with<W: Wire>(
        &mut self,
        w: &mut W,
        class: Class,
        tag: Tag,
        prepare: impl for<'p> FnOnce(&mut E, &'p mut Prepared) -> Result<&'p Prepared, adapt::Error>,
    ) -> Result<(), Event<'static>> {
        let now = w.now();
        let Some(slot) = self.ledger.vacant_slot() else {
            self.stats.ledger_full += 1;
            return Err(Event::Limited {
                tag,
                why: Why::Full,
                ready_in_ns: RETRY_GAP_NS,
            });
        };
        let req = self.ledger.lend(slot);
        // The slot's last request stays in its bytes (to be written over in
        // place), but is no longer one to send: a `prepare` that writes nothing
        // and says Ok is Rejected, never a second send of that request.
        req.clear();
        if prepare(&mut self.venue, req).is_err() || req.is_empty() {
            self.stats.rejected += 1;
            return Err(Event::Rejected { tag });
        }
        self.admit(w, Some(slot), None, class, tag, now, |gw, w, _, a| {
            // The slot lent is still free: nothing took it since.
            let key = gw.ledger.occupy_slot(slot, tag, class, a.first);
            gw.trace.set(key, a.tid);
            gw.send_fresh(w, key, a.ticket);
            Ok(())
        })
    }

    /// The checks and the charge of a submit, of the request prepared in the
    /// ledger's free slot `lent` or else `caller`'s: its deadline, the client
    /// order ids it places, the budget, counted by label and traced. Admitted,
    /// `then` is given the gateway, `caller` and what was admitted (handed on,
    /// not returned: the ticket is not copied out and back); `Err` is the
    /// request's final event, nothing charged.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn admit<W: Wire>(
        &mut self,
        w: &mut W,
        lent: Option<Vacant>,
        caller: Option<&mut Prepared>,
        class: Class,
        tag: Tag,
        now: i64,
        then: impl FnOnce(
            &mut Self,
            &mut W,
            Option<&mut Prepared>,
            Admitted,
        ) -> Result<(), Event<'static>>,
    ) -> Result<(), Event<'static>> {
        let Some(req) = lent.map(|i| self.ledger.lent_at(i)).or(caller.as_deref()) else {
            self.stats.rejected += 1;
            return Err(Event::Rejected { tag });
        };
        if now >= req.deadline_ns() {
            self.stats.expired += 1;
            return Err(Event::Expired {
                tag,
                why: Expiry::Deadline,
            });
        }
        let first = match placed(req) {
            // One id (an order) repeats nothing: no walk for it, and its hash
            // is the ledger's.
            [id] => {
                let h = IdHash::of(id);
                if self.id_is_live_hashed(id, h, now) {
                    self.stats.duplicate_ids += 1;
                    return Err(Event::DuplicateId { tag });
                }
                Some(h)
            }
            ids => {
                let repeated = ids.iter().enumerate().any(|(i, id)| ids[..i].contains(id));
                if repeated || ids.iter().any(|id| self.id_is_live(id, now)) {
                    self.stats.duplicate_ids += 1;
                    return Err(Event::DuplicateId { tag });
                }
                None
            }
        };
        let charged = self
            .shapes
            .charge(w.budget(), req.parts(), req.parts_key(), class, now);
        let tid = if self.trace.keeps_charges() {
            let admitted = charged.is_ok();
            self.trace
                .charge(now, req.parts(), class, req.label(), admitted)
        } else {
            0
        };
        match charged {
            Ok(ticket) => {
                self.labels
                    .admitted(req.label(), req.parts(), req.parts_key());
                let a = Admitted { ticket, tid, first };
                then(self, w, caller, a)
            }
            Err(l) => {
                let refused = Some((l.why, l.bucket.index()));
                self.labels
                    .submitted(req.label(), req.parts(), req.parts_key(), refused);
                self.stats.count_limited(l.why);
                Err(Event::Limited {
                    tag,
                    why: l.why,
                    ready_in_ns: wait_ns(l.ready_at_ns, now),
                })
            }
        }
    }

    /// Reconciles an order a previous gateway left in flight (its journal):
    /// `query` is its query by client order id, prepared now. It enters the ledger
    /// with an unknown outcome under the same rule as any other: its events are
    /// [`Event::Reconciled`] (found; or not found by a query sent after
    /// [`Account::lost_not_found_after`]) or [`Event::Unresolved`], under `tag`.
    /// `Err` is [`Event::Limited`] (every slot taken: try again later) or
    /// [`Event::Rejected`] (`query` names no order).
    pub fn recover<W: Wire>(
        &mut self,
        w: &mut W,
        query: &mut Prepared,
        tag: Tag,
    ) -> Result<(), Event<'static>> {
        let now = w.now();
        if query.client_order_id().is_none() {
            self.stats.rejected += 1;
            return Err(Event::Rejected { tag });
        }
        let bound = self.venue.lost_not_found_after(query);
        let Some(key) = self.ledger.insert(tag, QUERY_CLASS, query) else {
            self.stats.ledger_full += 1;
            return Err(Event::Limited {
                tag,
                why: Why::Full,
                ready_in_ns: RETRY_GAP_NS,
            });
        };
        if let Some(e) = self.ledger.get_mut(key) {
            e.stage = Stage::Reconcile;
            e.at_ns = now;
            e.unknown_since_ns = now;
            e.not_found_after = bound;
        }
        self.stats.unknown += 1;
        self.query(w, key);
        Ok(())
    }

    /// Sends `key`'s request with `ticket`; a send the transport hands back is
    /// refunded and retried (it surely did not run).
    pub(super) fn send<W: Wire>(&mut self, w: &mut W, key: Key, ticket: ergon_core::Ticket) {
        let now = w.now();
        // The slot's trace id is read only where a refusal needs it.
        let Some(e) = self.ledger.get_mut(key) else {
            let _ = w.budget().refund(ticket, now);
            self.trace.refund(now, self.trace.slot(key));
            return;
        };
        let query = e.stage == Stage::Query;
        self.send_live::<W, false>(w, key, ticket, query, now);
    }

    /// The first send of the request in the slot `key` just occupied
    /// ([`crate::Ledger`]'s `occupy_slot`): live, its stage [`Stage::Wire`], not
    /// yet bound, so no look-up of the slot and no query to choose.
    #[inline(always)]
    fn send_fresh<W: Wire>(&mut self, w: &mut W, key: Key, ticket: ergon_core::Ticket) {
        debug_assert!(
            self.ledger.get(key).is_some_and(|e| e.stage == Stage::Wire),
            "a just-occupied slot"
        );
        let now = w.now();
        self.send_live::<W, true>(w, key, ticket, false, now);
    }

    /// [`Gateway::send`] of the live slot `key`: its query when `query`, else its
    /// request; `FRESH` when the slot was just occupied (not yet bound).
    #[inline(always)]
    fn send_live<W: Wire, const FRESH: bool>(
        &mut self,
        w: &mut W,
        key: Key,
        ticket: ergon_core::Ticket,
        query: bool,
        now: i64,
    ) {
        let e = self.ledger.live_mut(key);
        let req = if query { &mut e.query } else { &mut e.req };
        let deadline = req.deadline_ns();
        // Over the WebSocket API when it is open and the request has a twin there.
        let ticket = match self.ws.as_mut() {
            Some(lane) => match lane.try_send(req, ticket, w.budget(), now) {
                Ok(id) => {
                    self.stats.sent += 1;
                    self.ledger.bind_sent(key, RequestId(WS_BIT | id), now);
                    return;
                }
                Err(Unsent::Elsewhere(t)) => t,
                Err(Unsent::Busy(t)) => {
                    self.handed_back(w, key, t, self.trace.slot(key));
                    return;
                }
            },
            None => ticket,
        };
        // Prepared with its signature pending (every Binance request lent by
        // `venue_mut`: signed only once charged), it goes over HTTP: signed now,
        // the bytes a signing preparation writes (the same timestamp).
        if req.signature_pending() && self.venue.sign_pending(req).is_err() {
            self.unsignable(w, key, ticket, self.trace.slot(key));
            return;
        }
        let sent = w.send_prepared(req, ticket, deadline);
        self.trace.connects(&*w, &self.venue);
        match sent {
            Ok(id) => {
                self.stats.sent += 1;
                if FRESH {
                    self.ledger.bind_fresh(key, id, now);
                } else {
                    self.ledger.bind_sent(key, id, now);
                }
            }
            Err(refused) => {
                let tid = self.trace.slot(key);
                self.handed_back(w, key, refused.into_ticket(), tid);
            }
        }
    }

    /// `key`'s request, prepared with its signature pending, cannot be signed
    /// by this gateway's adapter (another adapter's, or no key): refunded, and
    /// never sent. A request ends [`Event::Rejected`] (it never ran); a query
    /// (never written pending by the gateway) goes back to reconciling.
    fn unsignable<W: Wire>(&mut self, w: &mut W, key: Key, ticket: ergon_core::Ticket, tid: u64) {
        let Some(e) = self.ledger.get(key) else {
            return;
        };
        if e.stage == Stage::Query {
            self.handed_back(w, key, ticket, tid);
            return;
        }
        let (tag, now) = (e.tag, w.now());
        let _ = w.budget().refund(ticket, now);
        self.trace.refund(now, tid);
        self.ledger.remove(key);
        self.stats.rejected += 1;
        self.push(Event::Rejected { tag });
    }

    /// The transport handed `key`'s request back unsent (busy): refunded, and
    /// tried again after a gap (a query goes back to reconciling).
    pub(super) fn handed_back<W: Wire>(
        &mut self,
        w: &mut W,
        key: Key,
        ticket: ergon_core::Ticket,
        tid: u64,
    ) {
        let now = w.now();
        let _ = w.budget().refund(ticket, now);
        self.trace.refund(now, tid);
        self.stats.busy += 1;
        let Some(e) = self.ledger.get_mut(key) else {
            return;
        };
        let at = now + RETRY_GAP_NS;
        e.at_ns = at;
        if e.stage == Stage::Query {
            e.stage = Stage::Reconcile;
        } else {
            e.stage = Stage::Retry;
            e.verdict = Verdict::NotRun;
            let tag = e.tag;
            self.push(Event::Retrying {
                tag,
                in_ns: RETRY_GAP_NS,
            });
        }
        self.next_due = self.next_due.min(at);
    }
}

/// What a submit's checks and charge admitted ([`Gateway::admit`]).
struct Admitted {
    /// The budget's ticket.
    ticket: Ticket,
    /// The charge's trace id (0: not recording).
    tid: u64,
    /// The hash of the one client order id an order places.
    first: Option<IdHash>,
}

/// The client order ids of the orders `req` places: a new order's, a
/// cancel-replace's new one (its first), every order of a batch.
pub(super) fn placed(req: &Prepared) -> &[ClientOrderId] {
    let ids = req.client_order_ids();
    match req.kind() {
        Some(Kind::Order | Kind::CancelReplace) => &ids[..ids.len().min(1)],
        Some(Kind::Batch(_)) => ids,
        _ => &[],
    }
}
