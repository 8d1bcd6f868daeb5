//! The calls a client pushes on its submit ring: its fair share, the
//! endpoints that prepare them, and the submit to the gateway.

use arrayvec::ArrayVec;
use ergon_core::{Class, Part, Why};
use ergon_gateway::shm::region::SUBMIT_SLOT;
use ergon_gateway::shm::{decode_call, Call, ShmEvent};
use ergon_gateway::{Account, Api, Tag};
use ergon_io::boundary::shm_ring::LEN_BYTES;
use ergon_venues::endpoint::ClientOrderId;

use super::{Hub, Owner};
use crate::shm::share::Use;

impl Hub {
    /// Checks client `k`'s share of every part's bucket; Some(ready_at) if over.
    pub(super) fn over_share<E: Account>(
        &mut self,
        api: &mut Api<'_, '_, E>,
        k: usize,
        parts: &[Part],
        commit: bool,
    ) -> Option<i64> {
        let attached = self
            .clients
            .iter()
            .flatten()
            .filter(|c| c.conn.is_some())
            .count();
        // `--share`: at most that fraction (rounded down). Without it the fair
        // share, one over the clients attached, rounded up so that the shares
        // cover the whole limit (three clients of a limit of 20 may use 7 each, not
        // 6: 18 of 20 would leave units unused). The fair share of a lone client
        // is everything: no ceiling but the budget's. Its charges are still kept,
        // for when another one attaches.
        let explicit = self.cfg.share;
        let cap_of = move |avail: u64| match explicit {
            Some(s) => Some(((avail as f64) * s).floor() as u64),
            None if attached > 1 => Some(avail.div_ceil(attached as u64)),
            None => None,
        };
        let now = api.now();
        let windows = self.windows.get_or_insert_with(|| api.venue().windows());
        self.clients[k].as_ref()?;
        for p in parts {
            let Some(&(_, w)) = windows.iter().find(|(b, _)| *b == p.bucket) else {
                continue;
            };
            let w = w.max(1);
            let i = p.bucket.index();
            let cost = u64::from(p.cost);
            // Fixed windows: the windows the budget counts this charge in.
            let at = api.budget().counts_in(p.bucket, now).ok().flatten();
            // The share is of what the bucket can give the clients: units the
            // budget counts beyond theirs (another sender on the IP, a venue
            // figure above the local count) are nobody's share, so a client that
            // floods cannot take its full share of the nominal limit and leave
            // the others less than theirs.
            let ours: u64 = self
                .clients
                .iter_mut()
                .flatten()
                .filter_map(|c| c.used.get_mut(i))
                .map(|u| match at {
                    Some(at) => {
                        u.forget_before(at.index);
                        u.in_window(at.index)
                    }
                    None => {
                        u.evict(now, w);
                        u.sum
                    }
                })
                .sum();
            let (limit, counted) = api
                .budget()
                .stats(p.bucket)
                .map_or((0, 0), |s| (s.limit, s.used));
            let foreign = counted.saturating_sub(ours);
            let cap = cap_of(limit.saturating_sub(foreign));
            let c = self.clients[k].as_mut()?;
            if c.used.len() <= i {
                c.used.resize(i + 1, Use::default());
            }
            let u = &mut c.used[i];
            if let Some(at) = at {
                if commit {
                    u.add_in(at, cost);
                    continue;
                }
                let Some(cap) = cap else { continue };
                // The first window over the cap: room again once a charge no
                // longer counts in it.
                let over = at.indices().find(|&x| u.in_window(x) + cost > cap);
                if let Some(x) = over {
                    return Some(at.clear_of(x));
                }
                continue;
            }
            u.evict(now, w);
            if commit {
                u.charges.push_back((now, p.cost));
                u.sum += cost;
            } else if let Some(cap) = cap.filter(|&cap| u.sum + cost > cap) {
                // Room again once the oldest charges leave the window.
                let mut need = u.sum + cost - cap;
                let mut at = now;
                for &(t, c) in &u.charges {
                    at = t + w;
                    need = need.saturating_sub(u64::from(c));
                    if need == 0 {
                        break;
                    }
                }
                return Some(at);
            }
        }
        None
    }

    pub(super) fn take_submits<E: Account>(&mut self, api: &mut Api<'_, '_, E>, k: usize) {
        for _ in 0..self.cfg.per_turn {
            let Some(c) = self.clients[k].as_mut().filter(|c| !c.broken) else {
                return;
            };
            let buf = &mut self.buf;
            let got = c.submit.pop(|b| {
                buf[..b.len()].copy_from_slice(b);
                b.len()
            });
            let n = match got {
                Ok(Some(n)) => n,
                Ok(None) => return,
                Err(_) => {
                    // A corrupt ring: this client cannot be served any more
                    // (and its ring, ready for ever, is not read again).
                    c.stats.bad += 1;
                    c.broken = true;
                    // Its own connection only (checked by generation in close).
                    if let Some((i, g)) = c.conn {
                        if self
                            .conns
                            .get(i)
                            .and_then(Option::as_ref)
                            .is_some_and(|c| c.gen == g)
                        {
                            self.close(i, api.now());
                        }
                    }
                    return;
                }
            };
            c.stats.submitted += 1;
            let msg = self.buf;
            let (call, class, tag) = match decode_call(&msg[..n.min(SUBMIT_SLOT - LEN_BYTES)]) {
                Ok(x) => x,
                Err(_) => {
                    c.stats.bad += 1;
                    continue;
                }
            };
            if self.stopping {
                // Stopping (SIGTERM): nothing new is sent, or a client that keeps
                // submitting would keep the gateway from ever settling and exiting.
                // A final refusal that never passes here; nothing charged or sent.
                c.stats.limited += 1;
                let ev = ShmEvent::Limited {
                    tag,
                    why: Why::Halted,
                    ready_in_ns: i64::MAX,
                };
                c.push(&ev, &[]);
                continue;
            }
            // Urgent = 0 < Normal = 1 < Bulk = 2: a larger number is less privileged.
            let class = match self.cfg.class_ceiling {
                Some(c) if (class as u8) < (c as u8) => c,
                _ => class,
            };
            self.one(api, k, &call, class, tag);
        }
    }

    pub(super) fn one<E: Account>(
        &mut self,
        api: &mut Api<'_, '_, E>,
        k: usize,
        call: &Call<'_>,
        class: Class,
        tag: Tag,
    ) {
        let now = api.now();
        if !self.may(k, call) {
            if let Some(c) = self.clients[k].as_mut() {
                c.stats.not_yours += 1;
                c.push(&ShmEvent::NotYours { tag }, &[]);
            }
            return;
        }
        let v = api.venue_mut();
        let req = &mut self.req;
        let prepared = match call {
            Call::NewOrder(o) => v.new_order(req, o, now),
            Call::Cancel(o) => v.cancel(req, o, now),
            Call::CancelReplace(c) => v.cancel_replace(req, c, now),
            Call::Query(o) => v.query_order(req, o, now),
            Call::OpenOrders(s) => v.open_orders(req, *s, now),
            Call::Book { symbol, depth } => v.book(req, *symbol, *depth, now),
            Call::Account => v.account(req, now),
        }
        .is_ok();
        let Some(c) = self.clients[k].as_mut() else {
            return;
        };
        if !prepared {
            c.stats.bad += 1;
            c.push(&ShmEvent::Rejected { tag }, &[]);
            return;
        }
        let Some(l) = c.free.pop() else {
            // More in flight than its ring allows: a client bug.
            c.stats.limited += 1;
            let ev = ShmEvent::Limited {
                tag,
                why: Why::Full,
                ready_in_ns: 0,
            };
            c.push(&ev, &[]);
            return;
        };
        let gen = c.gen;
        let parts: ArrayVec<Part, 8> = self.req.parts().iter().copied().take(8).collect();
        if let Some(ready_at_ns) = self.over_share(api, k, &parts, false) {
            let Some(c) = self.clients[k].as_mut() else {
                return;
            };
            c.free.push(l);
            c.stats.over_share += 1;
            let ev = ShmEvent::Limited {
                tag,
                why: Why::Full,
                ready_in_ns: ready_at_ns - now,
            };
            c.push(&ev, &[]);
            return;
        }
        let new = match call {
            Call::NewOrder(o) => Some(o),
            Call::CancelReplace(c) => Some(&c.new),
            _ => None,
        };
        let held = match (&self.journal, new) {
            (Some(j), Some(o)) => j.holds(&o.client_order_id),
            _ => false,
        };
        if held {
            if let Some(c) = self.clients[k].as_mut() {
                c.free.push(l);
                c.push(&ShmEvent::DuplicateId { tag }, &[]);
            }
            return;
        }
        let entry = match (&mut self.journal, new) {
            (Some(j), Some(o)) => j.record(o.symbol.as_str(), o.client_order_id.as_str()),
            _ => None,
        };
        if let Some(c) = self.clients[k].as_mut() {
            c.tags[l as usize] = Some(tag);
            c.journal[l as usize] = entry;
            c.lists[l as usize] = matches!(call, Call::OpenOrders(_));
        }
        match api.submit(&mut self.req, class, Self::tag_of(k, gen, l)) {
            Ok(()) => {
                self.over_share(api, k, &parts, true);
                if let Some(c) = self.clients[k].as_mut() {
                    c.stats.accepted += 1;
                }
            }
            Err(ev) => self.route(api, ev),
        }
    }

    /// Fills `self.ids` with the client order ids of an open-orders answer
    /// (`body`) that client `k` may see, one a line: its own, and an earlier
    /// gateway life's (that the owners file does not name).
    pub(super) fn own_ids<E: Account>(&mut self, api: &Api<'_, '_, E>, k: usize, body: &[u8]) {
        let mut ids = core::mem::take(&mut self.ids);
        ids.clear();
        api.venue().open_ids(body, &mut |id| {
            let mine = core::str::from_utf8(id)
                .ok()
                .and_then(|t| ClientOrderId::new(t).ok())
                .map(|id| self.owner(&id))
                .is_some_and(|o| o == Owner::Earlier || o == Owner::Client(k));
            if mine {
                ids.extend_from_slice(id);
                ids.push(b'\n');
            }
        });
        self.ids = ids;
    }
}
