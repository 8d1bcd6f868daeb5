//! Attaching a client: its region, its name (bound to the uid that first held
//! it) and its blocks of client order ids, and whose orders a call may name.

use std::io;
use std::os::fd::AsRawFd;

use ergon_gateway::observe::ClientStats;
use ergon_gateway::shm::region::Region;
use ergon_gateway::shm::{Asked, Call, FATE_BYTES};
use ergon_gateway::{Account, Api, Tag};
use ergon_venues::endpoint::{ClientOrderId, MAX_BATCH};

use super::{id_form_word, Client, Hub, Owner, BLOCKS_KEPT, ID_BLOCK};

impl Hub {
    pub(super) fn attach_client<E: Account>(
        &mut self,
        api: &mut Api<'_, '_, E>,
        i: usize,
        name: &str,
        asked: Asked,
    ) {
        // One client per connection: a second attach would leave the first one
        // "attached" for ever (its hang-up detaches only one).
        if self.conns[i].as_ref().is_some_and(|c| c.client.is_some()) {
            return self.answer(i, "err already attached on this connection");
        }
        let Some(uid) = self.conns[i].as_ref().map(|c| c.uid) else {
            return;
        };
        // Names past --forget-names go first: theirs is no binding any more.
        if let Some(log) = &mut self.owners {
            log.expire(ergon_gateway::wall::ms(), self.cfg.forget_names_ms);
        }
        let found = self
            .clients
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.name == name));
        // A name is a capability (its region, its events, its orders): bound to
        // the uid that first held it, here or in the owners file.
        let bound = match found.and_then(|k| self.clients[k].as_ref()) {
            Some(c) => Some(c.uid),
            None => self.owners.as_ref().and_then(|o| o.uid_of(name)),
        };
        if let Some(b) = bound.filter(|&b| b != uid) {
            return self.answer(
                i,
                &format!("err the client name {name} belongs to uid {b}, not uid {uid}"),
            );
        }
        let (k, again) = match found {
            Some(k) if self.clients[k].as_ref().is_some_and(|c| c.conn.is_some()) => {
                return self.answer(i, "err a client of that name is attached");
            }
            Some(k) if self.clients[k].as_ref().is_some_and(|c| c.broken) => {
                return self.answer(
                    i,
                    &format!("err the client {name} wrote its submit ring out of range: it is dropped once its requests in flight end; attach again then"),
                );
            }
            Some(k) => (k, true),
            None => match self.free_slot() {
                Some(k) => match self.new_client(k, name, uid) {
                    Ok(c) => {
                        self.clients[k] = Some(c);
                        self.adopt(k);
                        (k, false)
                    }
                    Err(e) => return self.answer(i, &format!("err {e}")),
                },
                None => return self.answer(i, "err --max-clients reached"),
            },
        };
        let Some(c) = self.clients[k].as_mut() else {
            return;
        };
        let Some(conn_gen) = self.conns[i].as_ref().map(|c| c.gen) else {
            return;
        };
        c.conn = Some((i, conn_gen));
        c.open_orders = asked.open_orders;
        c.sock = self.conns[i].as_ref().map_or(-1, |c| c.fd.as_raw_fd());
        c.detached_at = None;
        c.stats.attaches += 1;
        // A fresh block of ids at every attach: a client that restarted under
        // the same name must not issue its earlier life's ids again.
        let ids = match api.id_block(ID_BLOCK) {
            Ok(b) => {
                let (from, end) = b.remaining();
                self.id_space = Some((b.format(), b.epoch()));
                if c.blocks.len() == BLOCKS_KEPT {
                    c.blocks.pop_front();
                }
                c.blocks.push_back((from, end));
                if let Some(log) = &mut self.owners {
                    let now_ms = ergon_gateway::wall::ms();
                    if let Err(e) = log.record(&c.name, c.uid, b.epoch(), (from, end), now_ms) {
                        eprintln!(
                            "ergon-gateway: warning: owners file: {e}: after a restart, any client may act on {}'s orders",
                            c.name
                        );
                    }
                }
                let form = id_form_word(b.format());
                format!(" ids {form} {} {from} {end}", b.epoch())
            }
            Err(_) => String::new(),
        };
        if let Some(conn) = self.conns[i].as_mut() {
            conn.client = Some(k);
            let word = if again { "reattached" } else { "new" };
            Self::reply(
                &conn.fd,
                &format!("ok {word} {}{ids}", c.region.in_flight),
                &[c.memfd.as_raw_fd()],
            );
        }
    }

    /// A slot for a new client name: an empty one, else the one of the client
    /// detached longest with nothing in flight (its unread events go; its ids
    /// stay its name's in the owners file), so that names whose processes are
    /// gone hold no slot another attach needs (issue 41, item 9). None when every
    /// slot is attached or has requests in flight.
    fn free_slot(&mut self) -> Option<usize> {
        if let Some(k) = self.clients.iter().position(Option::is_none) {
            return Some(k);
        }
        let k = self
            .clients
            .iter()
            .enumerate()
            .filter_map(|(k, c)| c.as_ref().map(|c| (k, c)))
            .filter(|(_, c)| c.conn.is_none() && c.in_flight() == 0)
            .min_by_key(|(_, c)| c.detached_at)
            .map(|(k, _)| k)?;
        self.drop_client(k);
        Some(k)
    }

    pub(super) fn new_client(&mut self, k: usize, name: &str, uid: u32) -> io::Result<Client> {
        let (memfd, region) = Region::create(name, self.cfg.in_flight)?;
        // 15 bits: bit 47 of a tag is RECOVER.
        self.gens[k] = (self.gens[k] + 1) & 0x7fff;
        Ok(Client {
            name: name.to_string(),
            uid,
            gen: self.gens[k],
            conn: None,
            memfd,
            sock: -1,
            submit: region.submit_consumer()?,
            events: region.event_producer()?,
            tags: vec![None; self.cfg.in_flight],
            journal: vec![None; self.cfg.in_flight],
            free: (0..self.cfg.in_flight as u32).rev().collect(),
            retrying: vec![false; self.cfg.in_flight],
            lists: vec![false; self.cfg.in_flight],
            // Not `vec![..; n]`: a clone keeps no capacity.
            parts: (0..self.cfg.in_flight)
                .map(|_| Vec::with_capacity(MAX_BATCH * FATE_BYTES))
                .collect(),
            unresolved: std::collections::VecDeque::with_capacity(self.cfg.in_flight),
            region,
            detached_at: None,
            settled_at: 0,
            broken: false,
            blocks: std::collections::VecDeque::with_capacity(BLOCKS_KEPT),
            used: Vec::new(),
            stats: ClientStats::default(),
            open_orders: false,
            listing: super::Listing::new(),
        })
    }

    /// The gateway tag of client `k`'s local id `l`.
    pub(super) fn tag_of(k: usize, gen: u16, l: u32) -> Tag {
        ((k as u64) << 48) | (u64::from(gen) << 32) | u64::from(l)
    }

    /// The client name the owners file says an id (boot epoch `epoch`,
    /// sequence `seq`) was issued to: of an earlier life, or of this one to a
    /// name the hub has dropped since (for `--keep` or `--max-clients`).
    pub(super) fn named_owner(&self, epoch: u64, seq: u64) -> Option<&str> {
        self.owners.as_ref()?.owner(epoch, seq)
    }

    /// Whose `id` is: the client whose block holds it, an earlier gateway life's,
    /// or nobody's. An id of this life issued to a name the hub dropped since
    /// stays that name's (the owners file keeps its blocks): the client now
    /// serving the name, in whichever slot, owns it; nobody while none does.
    pub(super) fn owner(&self, id: &ClientOrderId) -> Owner {
        let Some((format, epoch)) = self.id_space else {
            return Owner::Nobody;
        };
        match ergon_gateway::ids::read_id(format, id) {
            // An earlier life's: the client of the name its block was issued to
            // (nobody while it is not attached), if the owners file says.
            Some((e, seq)) if e < epoch => match self.named_owner(e, seq) {
                Some(name) => self
                    .clients
                    .iter()
                    .position(|c| c.as_ref().is_some_and(|c| c.name == name))
                    .map_or(Owner::Nobody, Owner::Client),
                None if self.journal.as_ref().is_some_and(|j| j.holds(id)) => Owner::Earlier,
                None => Owner::Nobody,
            },
            Some((e, seq)) if e == epoch => self
                .clients
                .iter()
                .position(|c| {
                    c.as_ref().is_some_and(|c| {
                        c.blocks
                            .iter()
                            .any(|&(from, end)| (from..end).contains(&seq))
                    })
                })
                .or_else(|| {
                    // Issued to a name dropped since: still the name's.
                    let name = self.named_owner(e, seq)?;
                    self.slot_of(name)
                })
                .map_or(Owner::Nobody, Owner::Client),
            _ => Owner::Nobody,
        }
    }

    /// Whether client `k` may make `call`: every client order id it names is
    /// from `k`'s blocks; an order it cancels or queries may also be of an
    /// earlier gateway life (that the owners file does not name), never one it places.
    pub(super) fn may(&self, k: usize, call: &Call<'_>) -> bool {
        let mine = |id: &ClientOrderId| self.owner(id) == Owner::Client(k);
        let mine_or_earlier =
            |id: &ClientOrderId| matches!(self.owner(id), Owner::Earlier) || mine(id);
        match call {
            Call::NewOrder(o) => mine(&o.client_order_id),
            Call::Cancel(o) | Call::Query(o) => mine_or_earlier(&o.client_order_id),
            Call::CancelReplace(c) => mine_or_earlier(&c.cancel) && mine(&c.new.client_order_id),
            Call::OpenOrders(_) | Call::Book { .. } | Call::Account => true,
        }
    }
}
