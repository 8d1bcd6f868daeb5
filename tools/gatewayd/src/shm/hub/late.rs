//! Where a [`Event::Late`](ergon_gateway::Event::Late) goes: to the client
//! name whose request ended unresolved — a single request's `Unresolved`, or a
//! batch's or a cancel-replace's `BatchSettled` with parts left
//! `Unresolved` (one `Late` per such part at most) — through its process of the
//! moment: the same one, the next one after a hang-up (the same region), or
//! the next one after the hub dropped the name (a new region, in whichever
//! slot: the name's unresolved requests wait for it here meanwhile, and a
//! `Late` that came while no process of the name was served is handed to the
//! next at its attach).

use std::collections::VecDeque;

use ergon_gateway::shm::ShmEvent;
use ergon_gateway::Tag;
use ergon_venues::endpoint::OrderState;

use super::Hub;

/// A request that ended unresolved and may still turn up `Late`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Unresolved {
    /// The gateway's tag it had (its local id may serve another request by now).
    pub(super) gtag: Tag,
    /// The client's own tag: the one its `Late` carries.
    pub(super) tag: Tag,
    /// How many `Late`s may still come: 1 for a single request, the parts left
    /// `Unresolved` for a request of several.
    pub(super) left: u8,
}

/// A dropped name's unresolved request, kept for the name's next process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Orphan {
    name: String,
    u: Unresolved,
    /// The `Late`s that came while no process of the name was served: handed
    /// to its next one at its attach.
    seen: Vec<OrderState>,
}

/// Pushes `u` to `list`, dropping the oldest when it holds `cap` already.
pub(super) fn keep(list: &mut VecDeque<Unresolved>, cap: usize, u: Unresolved) {
    if list.len() >= cap {
        list.pop_front();
    }
    list.push_back(u);
}

impl Hub {
    /// Routes a `Late` of the gateway's tag `gtag`: to the client whose
    /// unresolved request it is about (its slot's first, then any other: a
    /// dropped name's requests move to its next process), else kept for a
    /// dropped name not served now. At most once per part left unresolved.
    pub(super) fn route_late(&mut self, gtag: Tag, found: OrderState) {
        let k = (gtag >> 48) as usize;
        let order = std::iter::once(k).chain((0..self.clients.len()).filter(|&o| o != k));
        for o in order {
            let Some(c) = self.clients.get_mut(o).and_then(Option::as_mut) else {
                continue;
            };
            let Some(i) = c.unresolved.iter().position(|u| u.gtag == gtag) else {
                continue;
            };
            let tag = c.unresolved[i].tag;
            c.unresolved[i].left -= 1;
            if c.unresolved[i].left == 0 {
                c.unresolved.remove(i);
            }
            c.push(&ShmEvent::Late { tag, found }, &[]);
            return;
        }
        if let Some(i) = self.orphans.iter().position(|o| o.u.gtag == gtag) {
            let o = &mut self.orphans[i];
            o.seen.push(found);
            o.u.left -= 1;
        }
    }

    /// Drops client `k` (for `--keep`, or for a new name at `--max-clients`):
    /// its unresolved requests wait for the name's next process.
    pub(super) fn drop_client(&mut self, k: usize) {
        let Some(c) = self.clients.get_mut(k).and_then(Option::take) else {
            return;
        };
        let cap = self.cfg.max_clients * self.cfg.in_flight;
        for u in c.unresolved {
            if self.orphans.len() >= cap {
                self.orphans.pop_front();
            }
            self.orphans.push_back(Orphan {
                name: c.name.clone(),
                u,
                seen: Vec::new(),
            });
        }
    }

    /// Client `k`, a new region of its name: takes the name's orphans, and
    /// hears the `Late`s that came for them meanwhile.
    pub(super) fn adopt(&mut self, k: usize) {
        let Some(c) = self.clients.get_mut(k).and_then(Option::as_mut) else {
            return;
        };
        let cap = c.tags.len();
        let mut i = 0;
        while i < self.orphans.len() {
            if self.orphans[i].name != c.name {
                i += 1;
                continue;
            }
            let Some(o) = self.orphans.remove(i) else {
                break;
            };
            for found in o.seen {
                c.push(
                    &ShmEvent::Late {
                        tag: o.u.tag,
                        found,
                    },
                    &[],
                );
            }
            if o.u.left > 0 {
                keep(&mut c.unresolved, cap, o.u);
            }
        }
    }
}
