//! The venue's account figures the gateway reads on its own
//! ([`Account::sync_request`]: Hyperliquid's `userRateLimit`, the address
//! budget): at most every [`Account::sync_every_ns`], at [`Class::Bulk`] (the
//! class that never takes the headroom, so never inside a burst; at
//! [`Class::Normal`] once two periods went without an answer, so strategies
//! that keep the budget full cannot starve it), its answer
//! read by the adapter alone. Nothing retries it but the next period. The
//! account may put an action of its own in the same slot (Hyperliquid's
//! `reserveRequestWeight`) and ask for the next read at once
//! ([`Account::sync_again`]).

use ergon_core::Class;
use ergon_io::client::RequestId;
use ergon_venues::adapt::Request as Kind;
use ergon_venues::endpoint::Prepared;
use ergon_venues::response::Response;

use super::{Gateway, RETRY_GAP_NS};
use crate::endpoints::Account;
use crate::wire::{encode, Wire};
use ergon_core::Flight;

/// The sync read: on the wire (its id and deadline), and when it is next due.
#[derive(Debug)]
pub(super) struct Sync {
    on_wire: Option<(RequestId, i64)>,
    next_at: i64,
    req: Prepared,
    /// When the last answer came (or the first attempt was made).
    since: Option<i64>,
}

impl Default for Sync {
    fn default() -> Self {
        Sync {
            on_wire: None,
            next_at: i64::MIN,
            req: Prepared::with_capacity(256),
            since: None,
        }
    }
}

impl<E: Account> Gateway<E> {
    /// When the sync read is next due (None: the venue has none, or it is on
    /// the wire).
    pub(super) fn sync_timeout(&self) -> Option<i64> {
        self.venue.sync_every_ns()?;
        Some(match self.sync.on_wire {
            Some((_, deadline)) => deadline,
            None => self.sync.next_at,
        })
    }

    /// Sends the sync read if it is due and the budget has room at Bulk.
    pub(super) fn poll_sync<W: Wire>(&mut self, w: &mut W) {
        let Some(every) = self.venue.sync_every_ns() else {
            return;
        };
        let now = w.now();
        // An answer that never came (the loop that sent it ended first, the
        // connection went): forgotten at its deadline.
        if self
            .sync
            .on_wire
            .is_some_and(|(_, deadline)| now > deadline)
        {
            self.sync.on_wire = None;
            self.sync.next_at = now;
        }
        if self.sync.on_wire.is_some() || now < self.sync.next_at {
            return;
        }
        self.sync.next_at = now.saturating_add(every.max(1));
        // At Bulk: never inside a burst. But strategies that keep the budget
        // full below Bulk's headroom would starve it (the address budget never
        // read again, no forecast): two periods without an answer, it goes at
        // Normal.
        let since = *self.sync.since.get_or_insert(now);
        let class = if now.saturating_sub(since) >= every.saturating_mul(2) {
            Class::Normal
        } else {
            Class::Bulk
        };
        if self.venue.sync_request(&mut self.sync.req, now).is_err() {
            return;
        }
        let ticket = match self
            .shapes
            .charge(w.budget(), self.sync.req.parts(), 0, class, now)
        {
            Ok(t) => t,
            // No room at Bulk (a burst, or the higher classes' headroom): again
            // when the budget says, at least a second on, at most a period.
            Err(l) => {
                self.venue.sync_unsent();
                self.sync.next_at = l
                    .ready_at_ns
                    .clamp(now.saturating_add(1_000_000_000), self.sync.next_at);
                return;
            }
        };
        let mut ticket = Some(ticket);
        let deadline = self.sync.req.deadline_ns();
        let sent = encode(&self.sync.req, |r| {
            ticket.take().map(|t| w.send(r, t, deadline))
        });
        self.note_connects(w);
        match sent.flatten() {
            Some(Ok(id)) => {
                self.stats.sent += 1;
                self.sync.on_wire = Some((id, deadline));
            }
            Some(Err(refused)) => {
                // Not written (no connection ready): again shortly.
                let _ = w.budget().refund(refused.into_ticket(), now);
                self.venue.sync_unsent();
                self.sync.next_at = now.saturating_add(RETRY_GAP_NS);
            }
            None => {
                if let Some(t) = ticket {
                    let _ = w.budget().refund(t, now);
                }
                self.venue.sync_unsent();
            }
        }
    }

    /// The sync read's answer, if `id` is it: read by the adapter, and the
    /// flight completed. `Err` gives the flight back: not the sync read.
    pub(super) fn on_sync_answer<W: Wire>(
        &mut self,
        w: &mut W,
        id: RequestId,
        r: &Response<'_>,
        flight: Flight,
    ) -> Result<(), Flight> {
        if self.sync.on_wire.map(|(i, _)| i) != Some(id) {
            return Err(flight);
        }
        self.sync.on_wire = None;
        let now = w.now();
        self.sync.since = Some(now);
        let kind = self.sync.req.kind().unwrap_or(Kind::Read(0));
        let _ = self.venue.on_response(kind, r, w.budget(), now);
        let _ = w.budget().complete(flight, now);
        if self.venue.sync_again() {
            self.sync.next_at = now;
        }
        Ok(())
    }

    /// The sync read failed on the transport (settled by the caller): the next
    /// period asks again.
    pub(super) fn on_sync_error(&mut self, id: RequestId) {
        if self.sync.on_wire.map(|(i, _)| i) == Some(id) {
            self.sync.on_wire = None;
        }
    }
}
