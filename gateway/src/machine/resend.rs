//! Re-sends: what surely did not run goes again under the budget's re-send rule,
//! spaced and inside its deadline; what ran unknown goes to reconcile.

use super::reconcile::parts_of;
use super::{Gateway, RESEND_BACKOFF_MAX_NS, RESEND_BACKOFF_NS};
use crate::endpoints::Account;
use crate::events::{wait_ns, Event, Expiry};
use crate::ledger::{Key, Stage};
use crate::wire::Wire;
use ergon_core::{Limited, Resend, Verdict, Why};

impl<E: Account> Gateway<E> {
    /// What follows a verdict that is not Done or Rejected: the re-send rule. With
    /// `announce`, a Retrying event is given when it waits or goes again.
    pub(super) fn after<W: Wire>(
        &mut self,
        w: &mut W,
        key: Key,
        verdict: Verdict,
        announce: bool,
    ) -> Option<Event<'static>> {
        let now = w.now();
        let e = self.ledger.get_mut(key)?;
        let tag = e.tag;
        e.verdict = verdict;
        // A venue's "not run": a fresh timestamp and signature (on the clock as
        // re-anchored), never the stale bytes. An adapter that cannot re-sign sends
        // the same bytes, except after a clock skew (they can never pass).
        if verdict != Verdict::Unknown {
            let resigned = self.venue.restamp(&mut e.req, now).is_ok();
            if !resigned && verdict == Verdict::ClockSkew {
                return self.expire(key, Expiry::Unsigned);
            }
        }
        let r = w
            .budget()
            .resend(&verdict, e.req.parts(), e.class, e.resend_until, now);
        match r {
            Resend::Send(ticket) => {
                let tid = self
                    .trace
                    .charge(now, e.req.parts(), e.class, e.req.label(), true);
                self.labels.charged(e.req.label(), e.req.parts());
                self.trace.set(key, tid);
                self.stats.resent += 1;
                self.send(w, key, ticket);
                let waiting = self
                    .ledger
                    .get(key)
                    .is_some_and(|e| e.stage == Stage::Retry);
                (announce && !waiting).then_some(Event::Retrying { tag, in_ns: 0 })
            }
            Resend::Wait(Limited {
                why: Why::Halted,
                bucket,
                ..
            }) => {
                self.ledger.remove(key);
                self.stats.halted += 1;
                Some(Event::Halted {
                    tag,
                    bucket: bucket.index(),
                })
            }
            Resend::Wait(l) if l.ready_at_ns < e.resend_until => {
                e.stage = Stage::Retry;
                e.at_ns = l.ready_at_ns.max(now + 1);
                self.next_due = self.next_due.min(e.at_ns);
                announce.then_some(Event::Retrying {
                    tag,
                    in_ns: wait_ns(e.at_ns, now),
                })
            }
            Resend::Wait(_) | Resend::Stale | Resend::Final => {
                self.ledger.remove(key);
                self.stats.expired += 1;
                Some(Event::Expired {
                    tag,
                    why: Expiry::Deadline,
                })
            }
            Resend::Reconcile => {
                self.stats.unknown += 1;
                e.stage = Stage::Reconcile;
                e.at_ns = now;
                e.unknown_since_ns = now;
                e.queries = 0;
                e.not_found_after = self.venue.not_found_after(&e.req);
                // A request of several parts is reconciled part by part, each by
                // its own id (all of them when the whole answer was lost): "the
                // new order was not found" says nothing about the cancel.
                let n = parts_of(&e.req);
                if e.items == 0 && n > 0 {
                    e.items = (1u32 << n) - 1;
                }
                e.item = e.items.trailing_zeros().min(31) as u8;
                self.next_due = now;
                self.query(w, key);
                Some(Event::Reconciling { tag })
            }
        }
    }

    /// Ends `key`'s request [`Event::Expired`] for `why`.
    pub(super) fn expire(&mut self, key: Key, why: Expiry) -> Option<Event<'static>> {
        let tag = self.ledger.get(key)?.tag;
        self.ledger.remove(key);
        self.stats.expired += 1;
        Some(Event::Expired { tag, why })
    }

    /// Schedules `key`'s re-send after the `n`th "not run" answer, after a jittered
    /// backoff; Expired if that is past its deadline.
    pub(super) fn space<W: Wire>(
        &mut self,
        w: &mut W,
        key: Key,
        verdict: Verdict,
        n: u8,
    ) -> Option<Event<'static>> {
        let now = w.now();
        let gap = self.backoff(
            n.saturating_sub(1),
            RESEND_BACKOFF_NS,
            RESEND_BACKOFF_MAX_NS,
        );
        let e = self.ledger.get_mut(key)?;
        let at = now + gap;
        if at >= e.resend_until {
            return self.expire(key, Expiry::Deadline);
        }
        e.stage = Stage::Retry;
        e.verdict = verdict;
        e.at_ns = at;
        let tag = e.tag;
        self.next_due = self.next_due.min(at);
        Some(Event::Retrying { tag, in_ns: gap })
    }
}
