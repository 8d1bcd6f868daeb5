//! Answers: the venue's answer or the transport's failure of a request, and the
//! settle rule that follows.

use super::reconcile::{items_of, seen_in};
use super::{widen, Gateway, MAX_RESENDS, OPEN_PAGES, OPEN_PAGE_TRIES, SKEWS_TO_REANCHOR};
use crate::endpoints::Account;
use crate::events::{Event, Expiry};
use crate::ledger::{Key, Stage};
use crate::wire::Wire;
use arrayvec::ArrayVec;
use ergon_core::{Flight, Verdict};
use ergon_io::client::{RequestId, Sent};
use ergon_venues::adapt;
use ergon_venues::adapt::Request as Kind;
use ergon_venues::endpoint::OrderState;
use ergon_venues::response::Response;

impl<E: Account> Gateway<E> {
    /// The answer to `id`. Returns the event it makes, if any (an `Applied` borrows
    /// the answer's body).
    pub fn on_response<'r, W: Wire>(
        &mut self,
        w: &mut W,
        id: RequestId,
        r: Response<'r>,
        flight: Flight,
    ) -> Option<Event<'r>> {
        let now = w.now();
        let Some(key) = self.ledger.unbind(id) else {
            let flight = match self.on_sync_answer(w, id, &r, flight) {
                Ok(()) => return None,
                Err(f) => f,
            };
            if let Some((open_id, sent_at_ns)) = self.open {
                if open_id == id {
                    self.open = None;
                    // The page this answers (0: the first).
                    let page = self.open_page;
                    let kind = self.open_req.kind().unwrap_or(Kind::Read(0));
                    let v = self.venue.on_response(kind, &r, w.budget(), now);
                    self.trace.observed(now, w.budget());
                    if let Ok(v) = &v {
                        self.trace.verdict(now, v);
                    }
                    let _ = w.budget().complete(flight, now);
                    self.trace.done(now, self.trace.open);
                    if !matches!(v, Ok(Verdict::Done)) {
                        self.open_page_failed();
                        return None;
                    }
                    (self.open_page, self.open_fails) = (0, 0);
                    if page == 0 {
                        self.stats.polls += 1;
                        self.open_walk_at = sent_at_ns;
                    }
                    if !self.watch.is_empty() {
                        let (ledger, watch, pending, stats) = (
                            &self.ledger,
                            &mut self.watch,
                            &mut self.pending,
                            &mut self.stats,
                        );
                        self.venue.open_ids(r.body, &mut |id| {
                            // Open: it rests on the book, filled in part or not.
                            seen_in(ledger, watch, pending, stats, id, OrderState::Other, now);
                        });
                    }
                    // Every page of the poll is the caller's (on main only the
                    // first was: a client reading the event missed every order
                    // behind the 50 newest on Bybit).
                    let more = self.venue.next_page(r.body).is_some();
                    self.next_open_page(r.body, page, now);
                    return Some(Event::OpenOrders {
                        age_ns: now.saturating_sub(self.open_walk_at).max(0),
                        body: r.body,
                        page: u8::try_from(page).unwrap_or(u8::MAX),
                        more,
                    });
                }
            }
            let _ = w.budget().complete(flight, now);
            if self.time.is_some_and(|t| t.0 == id) {
                self.trace.done(now, self.trace.time);
            }
            if let Some((time_id, sent_at)) = self.time {
                if time_id == id {
                    self.time = None;
                    self.on_time(w, sent_at, now, &r);
                }
            }
            return None;
        };
        let e = self.ledger.get(key)?;
        let stage = e.stage;
        let kind = if stage == Stage::Query {
            e.query.kind()
        } else {
            e.req.kind()
        };
        let kind = kind.unwrap_or(Kind::Read(0));
        // Before the adapter reads the answer: its usage figures are then mapped
        // on the corrected clock.
        if stage != Stage::Query && kind.is_write() {
            self.check_clock(w, key, r.body, now);
        }
        let verdict = match self.venue.on_response(kind, &r, w.budget(), now) {
            Ok(v) => v,
            Err(adapt::Error::BadHeader { verdict, .. }) => verdict,
            Err(_) => Verdict::Unknown,
        };
        self.trace.observed(now, w.budget());
        self.trace.verdict(now, &verdict);
        let _ = w.budget().complete(flight, now);
        self.trace.done(now, self.trace.slot(key));
        let items = match self.ledger.get(key) {
            Some(e) if e.stage != Stage::Query => items_of(&e.req, self.venue.batch_items()),
            _ => ArrayVec::new(),
        };
        self.answered(w, key, r, verdict, &items)
    }

    /// What follows the verdict on `key`'s answer `r` (its flight completed): the
    /// settle rule, for an answer over HTTP or the WebSocket API alike.
    /// `items`: the verdicts of its parts the answer named (see
    /// [`Gateway::read_items`]).
    pub(super) fn answered<'r, W: Wire>(
        &mut self,
        w: &mut W,
        key: Key,
        r: Response<'r>,
        verdict: Verdict,
        items: &[Verdict],
    ) -> Option<Event<'r>> {
        let e = self.ledger.get(key)?;
        let (stage, tag, label) = (e.stage, e.tag, e.req.label());
        let write = e.req.kind().is_some_and(|k| k.is_write());
        self.count_verdict(&verdict);
        self.labels.answered(label, &verdict);
        if stage == Stage::Query {
            return self.on_query(w, key, &r, verdict).map(widen);
        }
        let verdict = match verdict {
            // A read may be asked again: nothing to reconcile.
            Verdict::Unknown if !write => Verdict::NotRun,
            // Parts with different fates (some refused, some not run): each ends
            // with its own, and the request is never re-sent whole. Only parts
            // that all met the same fate (all not run: it may go again) end as
            // one. A ban halts whatever the parts.
            v if !matches!(v, Verdict::Banned { .. })
                && items.iter().any(|i| Some(i) != items.first()) =>
            {
                Verdict::Done
            }
            v => v,
        };
        if verdict != Verdict::ClockSkew {
            self.skews = 0;
        }
        match verdict {
            // A request of several parts whose answer named each part's fate:
            // an Item each (queued), the unknown ones reconciled each by its own
            // id; never re-sent whole, never Applied as a whole.
            Verdict::Done => match self.read_items(key, items) {
                Some(0) => {
                    self.ledger.remove(key);
                    self.stats.applied += 1;
                    self.push(Event::BatchSettled { tag });
                    None
                }
                Some(_) => self.after(w, key, Verdict::Unknown, true).map(widen),
                None => {
                    self.ledger.remove(key);
                    self.stats.applied += 1;
                    Some(Event::Applied { tag, body: r.body })
                }
            },
            Verdict::Rejected => {
                self.ledger.remove(key);
                self.stats.rejected += 1;
                self.note_rejected(tag, r.body);
                Some(Event::Rejected { tag })
            }
            _ => {
                let mut resends = 0;
                if let Some(e) = self.ledger.get_mut(key) {
                    e.resends = e.resends.saturating_add(1);
                    resends = e.resends;
                }
                if verdict == Verdict::ClockSkew {
                    self.skews += 1;
                    if self.skews >= SKEWS_TO_REANCHOR {
                        self.reanchor(w);
                    }
                }
                let not_run = matches!(
                    verdict,
                    Verdict::NotRun | Verdict::ClockSkew | Verdict::Throttled { .. }
                );
                if not_run && resends > MAX_RESENDS {
                    return self.expire(key, Expiry::Resends).map(widen);
                }
                if matches!(verdict, Verdict::NotRun | Verdict::ClockSkew) {
                    // Spaced, re-signed when due (see `after`): never the same bytes
                    // at once.
                    return self.space(w, key, verdict, resends).map(widen);
                }
                self.after(w, key, verdict, true).map(widen)
            }
        }
    }

    /// Request `id` failed in the transport; `sent` says whether a byte left.
    pub fn on_error<W: Wire>(
        &mut self,
        w: &mut W,
        id: RequestId,
        sent: Sent,
    ) -> Option<Event<'static>> {
        let now = w.now();
        let bound = self.ledger.unbind(id);
        let tid = match (bound, self.time, self.open) {
            (Some(key), _, _) => self.trace.slot(key),
            (None, Some((t, _)), _) if t == id => self.trace.time,
            (None, _, Some((o, _))) if o == id => self.trace.open,
            _ => 0,
        };
        let maybe = match sent {
            Sent::No(t) => {
                let _ = w.budget().refund(t, now);
                self.trace.refund(now, tid);
                false
            }
            Sent::Maybe(f) => {
                let _ = w.budget().complete(f, now);
                self.trace.done(now, tid);
                true
            }
        };
        let Some(key) = bound else {
            self.on_sync_error(id);
            if self.time.is_some_and(|t| t.0 == id) {
                self.time = None;
            }
            if self.open.is_some_and(|t| t.0 == id) {
                self.open = None;
                self.open_page_failed();
            }
            return None;
        };
        self.failed(w, key, maybe)
    }

    /// What follows a transport failure of `key`'s request (settled already):
    /// `maybe` a byte left. A query is asked again; a write that may have run is
    /// reconciled; anything else surely did not run.
    pub(super) fn failed<W: Wire>(
        &mut self,
        w: &mut W,
        key: Key,
        maybe: bool,
    ) -> Option<Event<'static>> {
        let now = w.now();
        let e = self.ledger.get_mut(key)?;
        if e.stage == Stage::Query {
            return self.requery(key, now, now, false);
        }
        let verdict = if maybe && e.req.kind().is_some_and(|k| k.is_write()) {
            Verdict::Unknown
        } else {
            Verdict::NotRun
        };
        self.labels.answered(e.req.label(), &verdict);
        self.after(w, key, verdict, true)
    }
}

impl<E: Account> Gateway<E> {
    /// After page `page` of a poll of open orders: the next page is due now if
    /// the venue says one follows and the walk is within [`OPEN_PAGES`]. Each page is its own request, charged as the
    /// first. Pages only add sightings: an order that moves between pages while
    /// the walk runs is at worst not seen by this poll, never read as gone.
    fn next_open_page(&mut self, body: &[u8], page: usize, now: i64) {
        let Some(cursor) = self.venue.next_page(body) else {
            return;
        };
        if self.open_restart {
            return;
        }
        self.open_cursor.clear();
        if page + 1 >= OPEN_PAGES || self.open_cursor.try_extend_from_slice(cursor).is_err() {
            return;
        }
        self.open_page = page + 1;
        self.open_once = Some(self.open_once.map_or(now, |at| at.min(now)));
    }

    /// A page of a walk failed (no answer, or an error): the next poll asks
    /// that page again, by the same cursor (Bybit's names the last order seen,
    /// so it stays good), up to [`OPEN_PAGE_TRIES`] times; then the walk starts
    /// again from the first page. The sim's faults cut most walks of several
    /// pages, and restarting each from the first page never reached the oldest
    /// orders (seed 1011 `--venue bybit`).
    fn open_page_failed(&mut self) {
        if self.open_page == 0 {
            return;
        }
        self.open_fails += 1;
        if self.open_fails >= OPEN_PAGE_TRIES {
            (self.open_page, self.open_fails) = (0, 0);
        }
    }
}
