//! The gateway's events routed to the client whose request they end, and the
//! journal's orders recovered at start ([`Recovery`]).

use ergon_gateway::shm::{fate_bytes, item_fates, ShmEvent, FATE_BYTES};
use ergon_gateway::{Account, Api, Event, ItemFate, OPEN_PAGES};

/// Events a client's ring takes beside its own: only into room beyond what its
/// requests in flight may need (three events each).
fn room_beyond_own(c: &super::Client) -> bool {
    c.conn.is_some() && c.events.free() > 3 * c.tags.len()
}
use super::late::{keep, Unresolved};
use super::Hub;
use crate::shm::recovery::{outcome_unknown, Recovery};

impl Hub {
    /// Delivers one gateway event to the client whose request it is about.
    pub(super) fn route<E: Account>(&mut self, api: &mut Api<'_, '_, E>, ev: Event<'_>) {
        let gtag = ev.tag();
        if let Event::OpenOrders {
            age_ns,
            body,
            page,
            more,
        } = ev
        {
            // Only to the clients that asked for the polls; each hears of its
            // own orders only (and of an earlier gateway life's, that the
            // owners file does not name), every page of a poll in one event.
            for k in 0..self.clients.len() {
                if !self.clients[k].as_ref().is_some_and(|c| c.open_orders) {
                    continue;
                }
                self.own_ids(api, k, body);
                let Some(c) = self.clients[k].as_mut() else {
                    continue;
                };
                if !c.listing.add(page, &self.ids) {
                    continue; // a page of a walk whose start it missed
                }
                // The last page, or the last the walk asks (`OPEN_PAGES`).
                if more && usize::from(page) + 1 < OPEN_PAGES {
                    continue;
                }
                // A client that does not read misses polls, never an event of
                // its own.
                if room_beyond_own(c) {
                    let ids = core::mem::take(&mut c.listing.ids);
                    c.push(&ShmEvent::OpenOrders { age_ns }, &ids);
                    c.listing.ids = ids;
                }
            }
            return;
        }
        if let Event::Protection { .. } | Event::ProtectionFired = ev {
            // The switch is every client's: its orders are the ones it cancels.
            let (note, _) = ShmEvent::of(&ev);
            for c in self.clients.iter_mut().flatten() {
                if room_beyond_own(c) {
                    c.push(&note, &[]);
                }
            }
            return;
        }
        if Recovery::owns(gtag) {
            self.recovery.on_event(self.journal.as_mut(), &ev);
            return;
        }
        if let Event::Late { found, .. } = ev {
            // Its local id may serve another request by now, and its name
            // another process or slot: routed by the gateway's tag it had.
            return self.route_late(gtag, found);
        }
        let (k, gen, l) = ((gtag >> 48) as usize, (gtag >> 32) as u16, gtag as u32);
        // The answer to a client's own open-orders call lists the account's
        // orders: it gets the ids it may see, as the polls do, not the body.
        let listing = self
            .clients
            .get(k)
            .and_then(Option::as_ref)
            .is_some_and(|c| c.gen == gen && c.lists.get(l as usize) == Some(&true));
        if let (true, Event::Applied { body, .. }) = (listing, &ev) {
            self.own_ids(api, k, body);
        }
        let Some(c) = self.clients.get_mut(k).and_then(Option::as_mut) else {
            return;
        };
        if c.gen != gen {
            return;
        }
        let Some(Some(tag)) = c.tags.get(l as usize).copied() else {
            return;
        };
        // Its parts' fates, the body of its final BatchSettled (given back below).
        let settled = match ev {
            Event::BatchSettled { .. } => core::mem::take(&mut c.parts[l as usize]),
            _ => Vec::new(),
        };
        // The same event (ShmEvent::of), under the client's own tag.
        let (sev, body): (ShmEvent, &[u8]) = match ev {
            Event::Applied { .. } if listing => (ShmEvent::Applied { tag }, &self.ids[..]),
            Event::Limited { .. } => {
                c.stats.limited += 1;
                (ShmEvent::of(&ev).0.with_tag(tag), &[])
            }
            Event::Applied { .. }
            | Event::Rejected { .. }
            | Event::DuplicateId { .. }
            | Event::Retrying { .. }
            | Event::Expired { .. }
            | Event::Reconciling { .. }
            | Event::Reconciled { .. }
            | Event::Halted { .. } => {
                let (sev, body) = ShmEvent::of(&ev);
                (sev.with_tag(tag), body)
            }
            Event::Unresolved { .. } => {
                let u = Unresolved { gtag, tag, left: 1 };
                keep(&mut c.unresolved, c.tags.len(), u);
                (ShmEvent::Unresolved { tag }, &[])
            }
            // Routed above.
            Event::Late { .. } | Event::OpenOrders { .. } => return,
            // A part's fate waits for its request's final event, which carries
            // them all (it always has room in the ring; a step may not).
            Event::Item { item, fate, .. } => {
                let kept = &mut c.parts[l as usize];
                if kept.len() + FATE_BYTES <= kept.capacity() {
                    kept.extend_from_slice(&fate_bytes(item, fate));
                }
                return;
            }
            Event::BatchSettled { .. } => {
                // Each part left Unresolved may still turn up Late, under the
                // request's tag (on main its Late was dropped: only a whole
                // request's Unresolved was kept for one).
                let left = item_fates(&settled)
                    .filter(|f| matches!(f, Ok((_, ItemFate::Unresolved))))
                    .count();
                if let Ok(left @ 1..) = u8::try_from(left) {
                    keep(
                        &mut c.unresolved,
                        c.tags.len(),
                        Unresolved { gtag, tag, left },
                    );
                }
                (ShmEvent::BatchSettled { tag }, &settled[..])
            }
            Event::Protection { .. } | Event::ProtectionFired => return, // routed above
        };
        if sev.is_final() {
            // An order whose outcome stays unknown keeps its entry: the next start
            // queries it (its id stays held here meanwhile); a part's too.
            let part0 = item_fates(&settled)
                .any(|f| f == Ok((0, ItemFate::Unresolved)))
                .then_some(ItemFate::Unresolved);
            let unknown = outcome_unknown(&ev, part0);
            if let (Some(j), Some(e), false) =
                (&mut self.journal, c.journal[l as usize].take(), unknown)
            {
                j.clear(e);
            }
            c.tags[l as usize] = None;
            c.retrying[l as usize] = false;
            c.lists[l as usize] = false;
            c.free.push(l);
            c.stats.finals += 1;
            c.settled_at = api.now();
        } else {
            let repeat = matches!(sev, ShmEvent::Retrying { .. }) && c.retrying[l as usize];
            if repeat || !c.room_for_steps() {
                c.stats.merged_steps += 1;
                return;
            }
            c.retrying[l as usize] = matches!(sev, ShmEvent::Retrying { .. });
        }
        c.push(&sev, body);
        if settled.capacity() != 0 {
            let mut kept = settled;
            kept.clear();
            c.parts[l as usize] = kept;
        }
    }
}
