//! The gateway's side: a [`Strategy`] that serves strategy processes over shared
//! memory. It owns the listening socket, one region per client name with the
//! client's own two eventfds (its doorbell, which it writes when the loop is
//! parked, and its wake, which the gateway writes when it waits), and the stats
//! region that `ergon-gateway --stats` reads. No descriptor is shared between
//! clients: one that reads (drains) or floods what it was handed touches its own
//! wake-ups only.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};

use arrayvec::ArrayVec;
use ergon_core::{BucketId, Class, Part, Why};
use ergon_venues::binance_spot_ws::Execution;
use ergon_venues::endpoint::{ClientOrderId, IdFormat, OrderRef, Prepared, Symbol};

use super::codec::{decode_call, encode_event, Call, ShmEvent};
use super::halts::HaltLog;
use super::journal::{Found, Journal, JournalOwner};
use super::os::{self, Epoll, Recv};
use super::owners::OwnerLog;
use super::region::{Region, SUBMIT_SLOT};
use super::share::Use;
use super::stats::StatsWriter;
use crate::{Account, Api, Event, Strategy, Tag, OPEN_ORDERS};
use ergon_io::boundary::shm_ring::{PushError, ShmConsumer, ShmProducer, LEN_BYTES};
use ergon_io::event_loop::{EventLoop, Interest, LoopError, Readiness};

/// The token under which [`Hub::attach`] watches the hub's epoll set.
pub const HUB_TOKEN: u64 = (1 << 62) + 2;

const LISTENER: u64 = 0;
/// The tag bit of the queries of what a dead gateway left in flight.
const RECOVER: u64 = 1 << 47;
/// Client `k`'s doorbell is watched under `DOORBELL0 + k`.
const DOORBELL0: u64 = 1 << 32;
const CONN0: u64 = 16;
const MS: i64 = 1_000_000;
/// Client order ids handed to a client at each attach (2^32: more than it can
/// place in one life).
const ID_BLOCK: u64 = 1 << 32;
/// Id blocks a client keeps (one per attach, the latest): a client that attached
/// more often in one gateway life than this loses its oldest block, whose orders
/// it can then no longer act on through this gateway.
const BLOCKS_KEPT: usize = 64;

/// Whose a client order id is, as the hub can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// In a block issued to client `k` in this gateway's life.
    Client(usize),
    /// An id of an earlier gateway's life (its boot epoch is older) that no
    /// block in the owners file names (none was kept: a journal from before the
    /// file, or a failed write), so nobody can be told its owner.
    Earlier,
    /// Not an id this gateway or an earlier one issued, or of no block kept.
    Nobody,
}

/// The word of an id form in the attach answer (`ok new N ids FORM EPOCH FROM END`).
fn id_form_word(f: IdFormat) -> &'static str {
    match f {
        IdFormat::Hex => "hex",
        IdFormat::Cloid => "cloid",
        IdFormat::Uuid => "uuid",
    }
}

/// How a hub serves its clients.
#[derive(Clone, Debug)]
pub struct HubConfig {
    /// The gateway's name: its socket is `@ergon-gateway/NAME` (abstract).
    pub name: String,
    /// Client names served at once (attached or keeping outcomes).
    pub max_clients: usize,
    /// Requests one client may have in flight (its submit ring's slots).
    pub in_flight: usize,
    /// How long the outcomes of a client that went away are kept for it to
    /// attach again under its name, after its last request settled.
    pub keep_ns: i64,
    /// Each client's ceiling, as a fraction of every bucket's limit per window.
    /// None: the fair share, one over the number of clients attached at the
    /// time of the call, rounded up (a lone client may use everything; with two, neither
    /// can take more than half, so one cannot take the headroom kept for the
    /// others' Urgent calls).
    pub share: Option<f64>,
    /// The most privileged class a client may use: a call of a higher class is
    /// charged as this one (None: any; `Some(Class::Normal)` keeps the Urgent
    /// headroom for the gateway's own reconcile queries).
    pub class_ceiling: Option<Class>,
    /// Submits taken from one client per loop turn (round robin between clients).
    pub per_turn: usize,
    /// The journal of orders in flight (see the module's crash cases): written
    /// before each new order is sent, read by the next gateway on the same file.
    pub journal: Option<std::path::PathBuf>,
    /// The account the journal's entries belong to (written in its header; a
    /// journal with live entries of another is refused). None: an account that
    /// names no venue, base URL or key.
    pub journal_owner: Option<JournalOwner>,
    /// The halts file ([`HaltLog`]): brought up to date at the turn a ban halts a
    /// bucket or a `clear-halt` resumes one.
    pub halts: Option<HaltLog>,
    /// Buckets whose limit is an account-wide grant leased through etcd
    /// (`ergon_lease`): each turn the hub applies what the lease thread posted, and
    /// its stats show the grant, the demand and the lease's age.
    pub leases: Vec<(BucketId, std::sync::Arc<ergon_lease::Shared>)>,
    /// Uids besides the gateway's own (effective) uid that may connect: every
    /// other peer is refused at accept, by the uid the kernel recorded for it
    /// (`SO_PEERCRED`), before it can send a command.
    pub allow_uids: Vec<u32>,
    /// Gids whose members (by the peer's primary gid, as `SO_PEERCRED` gives it)
    /// may connect too.
    pub allow_gids: Vec<u32>,
}

impl Default for HubConfig {
    fn default() -> Self {
        HubConfig {
            name: "ergon".into(),
            max_clients: 16,
            in_flight: 64,
            keep_ns: 300_000 * MS,
            share: None,
            per_turn: 16,
            class_ceiling: None,
            journal: None,
            journal_owner: None,
            halts: None,
            leases: Vec::new(),
            allow_uids: Vec::new(),
            allow_gids: Vec::new(),
        }
    }
}

/// One client's counts (they appear in the stats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Calls taken from its submit ring.
    pub submitted: u64,
    /// Accepted by the gateway (charged and sent, or queued to send).
    pub accepted: u64,
    /// Refused by its share ceiling.
    pub over_share: u64,
    /// Step events not delivered: a `Retrying` repeated, or no ring room beyond
    /// what its requests in flight need for their final events.
    pub merged_steps: u64,
    /// Refused by the budget.
    pub limited: u64,
    /// Calls that did not decode or that the venue's endpoints refused.
    pub bad: u64,
    /// Final events delivered.
    pub finals: u64,
    /// Events that found its event ring full (must stay 0).
    pub lost_events: u64,
    /// Calls refused because a client order id they name is not in its blocks
    /// ([`ShmEvent::NotYours`]).
    pub not_yours: u64,
    /// Attaches under its name.
    pub attaches: u64,
}

struct Client {
    name: String,
    gen: u16,
    /// The connection it is attached on: its index and that connection's
    /// generation (an index is reused by later connections; the generation is not).
    conn: Option<(usize, u64)>,
    memfd: OwnedFd,
    /// Its doorbell: it writes it after a push when the loop is parked; the
    /// hub's epoll watches it (under `DOORBELL0 + k`). Its own, so another client
    /// cannot drain (steal) the wake-ups of its submits.
    doorbell: OwnedFd,
    wake: OwnedFd,
    region: Region,
    submit: ShmConsumer,
    events: ShmProducer,
    /// Local id -> the client's tag, for requests in flight.
    tags: Vec<Option<Tag>>,
    /// Local id -> its journal entry (new orders only).
    journal: Vec<Option<u32>>,
    free: Vec<u32>,
    /// Local id -> whether the last event it was given is a `Retrying` (repeats
    /// are merged: the first says it, the final ends it).
    retrying: Vec<bool>,
    /// Local id -> whether it is an open-orders call (its answer is cut down to
    /// the client's own ids).
    lists: Vec<bool>,
    /// Requests that ended `Unresolved` and may still turn up `Late`: the
    /// gateway's tag and the client's, oldest first, at most `in_flight` (their
    /// local ids are reused at once, so a `Late` is routed by this, never by
    /// `tags`).
    unresolved: std::collections::VecDeque<(Tag, Tag)>,
    detached_at: Option<i64>,
    /// The blocks of client order ids issued to it in this gateway's life
    /// (sequences `from..end` of the hub's epoch), the latest [`BLOCKS_KEPT`].
    blocks: std::collections::VecDeque<(u64, u64)>,
    /// Per bucket index, for the share ceiling: its charges over the bucket's
    /// last window (time, units; a sliding window, as the budget counts) and
    /// their sum.
    used: Vec<Use>,
    stats: ClientStats,
}

impl Client {
    fn in_flight(&self) -> usize {
        self.tags.len() - self.free.len()
    }

    /// Whether a step event (not a final one) may take a slot of the event ring:
    /// only beyond the room every request in flight needs for its final event,
    /// so that a client that reads slowly (or is detached) loses steps, never an
    /// end.
    fn room_for_steps(&self) -> bool {
        self.events.free() > self.in_flight()
    }

    fn push(&mut self, ev: &ShmEvent, body: &[u8]) {
        match self.events.push(|slot| encode_event(ev, body, slot)) {
            Ok(()) => {}
            Err(PushError::Full | PushError::Corrupt) => self.stats.lost_events += 1,
        }
        if self.conn.is_some() {
            fence(Ordering::SeqCst);
            if self.region.header().client_sleeping.load(Ordering::Relaxed) != 0 {
                os::signal(self.wake.as_raw_fd());
            }
        }
    }
}

struct Conn {
    fd: OwnedFd,
    client: Option<usize>,
    /// The peer's uid, from the kernel (`SO_PEERCRED`).
    uid: u32,
    /// Why this peer may not use the gateway (None: it may): the answer to its
    /// first command, after which the connection is closed.
    refusal: Option<String>,
    /// This connection's generation: unique for the hub's life.
    gen: u64,
    /// When it was accepted, and whether it has said anything since: a
    /// connection silent for [`SILENT_CONN_NS`] is closed.
    opened_at: i64,
    heard: bool,
}

/// A connection that sends nothing this long after it was accepted is closed:
/// idle connections must not hold the descriptors attaches need.
pub const SILENT_CONN_NS: i64 = 1_000_000_000;
/// After the listener fails for want of descriptors (`EMFILE`, `ENFILE`), it is
/// left alone this long, instead of waking the loop for ever.
const ACCEPT_BACKOFF_NS: i64 = 100_000_000;

/// The loop side of the shared-memory gateway: a [`Strategy`] over the gateway.
pub struct Hub {
    cfg: HubConfig,
    listener: Option<OwnedFd>,
    ep: Epoll,
    conns: Vec<Option<Conn>>,
    clients: Vec<Option<Client>>,
    gens: Vec<u16>,
    req: Prepared,
    buf: [u8; SUBMIT_SLOT],
    ids: Vec<u8>,
    windows: Option<Vec<(BucketId, i64)>>,
    stats: StatsWriter,
    /// The form and boot epoch of the ids it hands out (from the first block).
    id_space: Option<(IdFormat, u64)>,
    next_stats: i64,
    stop: Option<&'static AtomicBool>,
    stopping: bool,
    next_client: usize,
    timer_at: i64,
    journal: Option<Journal>,
    halts: Option<HaltLog>,
    /// The blocks of ids each client name was issued, kept beside the journal
    /// across lives ([`OwnerLog`]).
    owners: Option<OwnerLog>,
    /// Orders a dead gateway left in flight, still to query (entry, order).
    recover: Vec<(u32, Found)>,
    recover_in_flight: usize,
    /// Orders of a dead gateway queried (and of them, found at the venue).
    pub recovered: (u64, u64),
    /// The loop's side of each leased bucket (from [`HubConfig::leases`]).
    leased: Vec<ergon_lease::Leased>,
    /// The last refusal of a leased limit by the budget, for the stats.
    lease_error: Option<ergon_core::ConfigError>,
    /// The gateway's effective uid: its owner, the one peer that may clear a halt.
    owner: u32,
    /// Connections refused at accept (a peer neither the owner nor allowed).
    pub refused: u64,
    /// The generation the next accepted connection gets.
    next_conn_gen: u64,
    /// While the listener is out of the hub's epoll (too many connections, or
    /// no descriptor left), when to watch it again.
    listen_paused_until: Option<i64>,
    /// Connections closed for saying nothing within `SILENT_CONN_NS` (1 s).
    pub silent_closed: u64,
    /// Times the listener was paused (connections at their cap, or no
    /// descriptor left).
    pub accept_pauses: u64,
}

fn owned_msg(e: &dyn core::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl Hub {
    /// Binds `@ergon-gateway/NAME` and sets up the doorbell and the stats region.
    /// `stop`: a flag (set by a SIGTERM handler) after which the hub stops
    /// accepting, settles what is in flight, and stops the loop.
    pub fn bind(mut cfg: HubConfig, stop: Option<&'static AtomicBool>) -> io::Result<Hub> {
        if cfg.max_clients == 0 || cfg.max_clients > 255 {
            return Err(owned_msg(&"--max-clients must be 1..=255"));
        }
        if let Some(s) = cfg.share {
            if !(s > 0.0 && s <= 1.0) {
                return Err(owned_msg(&"a share must be in (0, 1]"));
            }
        }
        let listener = os::listen(&cfg.name).map_err(|e| {
            owned_msg(&format!(
                "cannot listen on @ergon-gateway/{}: {e} (another gateway of that name?)",
                cfg.name
            ))
        })?;
        let ep = Epoll::new()?;
        ep.add(listener.as_raw_fd(), LISTENER)?;
        let stats = StatsWriter::create(&cfg.name)?;
        let (journal, recover) = match &cfg.journal {
            Some(path) => {
                let cap = cfg.max_clients * cfg.in_flight;
                let owner = cfg
                    .journal_owner
                    .clone()
                    .unwrap_or_else(|| JournalOwner::new("", "", ""));
                let wall_ms = u64::try_from(crate::wall::ms()).unwrap_or(0);
                let (j, live) = Journal::open(path, cap, wall_ms, &owner)
                    .map_err(|e| owned_msg(&format!("journal {}: {e}", path.display())))?;
                (Some(j), live)
            }
            None => (None, Vec::new()),
        };
        // Whose ids were whose in earlier lives: beside the journal.
        let owners = match &cfg.journal {
            Some(path) => {
                let mut p = path.as_os_str().to_owned();
                p.push(".owners");
                let p = std::path::PathBuf::from(p);
                Some(OwnerLog::open(&p).map_err(|e| owned_msg(&format!("owners file {e}")))?)
            }
            None => None,
        };
        let leased = cfg
            .leases
            .iter()
            .map(|(id, shared)| ergon_lease::Leased::new(shared.clone(), *id))
            .collect();
        Ok(Hub {
            halts: cfg.halts.take(),
            owners,
            leased,
            lease_error: None,
            clients: (0..cfg.max_clients).map(|_| None).collect(),
            gens: vec![0; cfg.max_clients],
            cfg,
            listener: Some(listener),
            ep,
            conns: Vec::new(),
            req: Prepared::with_capacity(1024),
            buf: [0; SUBMIT_SLOT],
            ids: Vec::with_capacity(4096),
            windows: None,
            stats,
            id_space: None,
            next_stats: 0,
            stop,
            stopping: false,
            next_client: 0,
            timer_at: 0,
            journal,
            recover,
            recover_in_flight: 0,
            recovered: (0, 0),
            owner: os::euid(),
            refused: 0,
            next_conn_gen: 1,
            listen_paused_until: None,
            silent_closed: 0,
            accept_pauses: 0,
        })
    }

    /// Watches the hub's descriptors on `lp` (under [`HUB_TOKEN`]); call once
    /// before running the loop.
    pub fn attach(&self, lp: &mut EventLoop) -> Result<(), LoopError> {
        lp.watch_fd(self.ep.fd(), HUB_TOKEN, Interest::READ)
    }

    /// The boot epoch its journal keeps for this start (None: no journal): give it
    /// to the gateway ([`crate::Gateway::set_boot_epoch`]) before it serves.
    pub fn boot_epoch(&self) -> Option<u64> {
        self.journal.as_ref().map(Journal::epoch)
    }

    /// Each client's name, whether it is attached, and its counts.
    pub fn clients(&self) -> impl Iterator<Item = (&str, bool, ClientStats)> + '_ {
        self.clients
            .iter()
            .flatten()
            .map(|c| (c.name.as_str(), c.conn.is_some(), c.stats))
    }

    fn reply(fd: &OwnedFd, text: &str, fds: &[i32]) {
        let _ = os::send_fds(fd.as_raw_fd(), text.as_bytes(), fds);
    }

    /// Most connections at once: an attached one per client, and as many again
    /// still to say who they are.
    fn max_conns(&self) -> usize {
        2 * self.cfg.max_clients + 16
    }

    /// Stops watching the listener until `until` (or until a connection closes,
    /// for a pause at the cap): a listener the loop cannot drain would wake it for
    /// ever.
    fn pause_listener(&mut self, until: i64) {
        if self.listen_paused_until.is_none() {
            if let Some(l) = &self.listener {
                self.ep.remove(l.as_raw_fd());
            }
            self.accept_pauses += 1;
        }
        self.listen_paused_until = Some(until);
    }

    /// Watches the listener again once its pause is over and there is room.
    fn resume_listener(&mut self, now: i64) {
        let over = self.listen_paused_until.is_some_and(|t| now >= t);
        let room = self.conns.iter().flatten().count() < self.max_conns();
        if over && room {
            if let Some(l) = &self.listener {
                let _ = self.ep.add(l.as_raw_fd(), LISTENER);
            }
            self.listen_paused_until = None;
        }
    }

    /// Closes the connections that said nothing within [`SILENT_CONN_NS`].
    fn close_silent(&mut self, now: i64) {
        for i in 0..self.conns.len() {
            let silent = self.conns[i]
                .as_ref()
                .is_some_and(|c| !c.heard && now - c.opened_at >= SILENT_CONN_NS);
            if silent {
                self.silent_closed += 1;
                self.close(i, now);
            }
        }
    }

    fn accept(&mut self, now: i64) {
        loop {
            if self.conns.iter().flatten().count() >= self.max_conns() {
                // Until one closes (or the silent ones are dropped).
                return self.pause_listener(now);
            }
            let r = match &self.listener {
                Some(l) => os::accept(l),
                None => return,
            };
            let fd = match r {
                Ok(Some(fd)) => fd,
                Ok(None) => return,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    return self.pause_listener(now + ACCEPT_BACKOFF_NS);
                }
                // A peer gone before it was accepted (ECONNABORTED) and the like.
                Err(_) => return,
            };
            // The kernel's record of who connected; what the peer says is not
            // asked. A refused peer's first command is answered with the refusal
            // and its connection closed then (closing it now, its command unread,
            // would reset the connection before the answer could be read).
            let peer = os::peer_cred(&fd);
            let refusal = match &peer {
                Ok(p) if self.allowed(*p) => None,
                Ok(p) => Some(format!(
                    "err not allowed: uid {} gid {} is neither the gateway's owner (uid {}) nor in --allow-uid/--allow-gid",
                    p.uid, p.gid, self.owner
                )),
                Err(e) => Some(format!("err not allowed: no peer credentials: {e}")),
            };
            self.refused += u64::from(refusal.is_some());
            let uid = peer.as_ref().map_or(u32::MAX, |p| p.uid);
            let i = match self.conns.iter().position(Option::is_none) {
                Some(i) => i,
                None => {
                    self.conns.push(None);
                    self.conns.len() - 1
                }
            };
            if self.ep.add(fd.as_raw_fd(), CONN0 + i as u64).is_ok() {
                self.next_conn_gen += 1;
                self.conns[i] = Some(Conn {
                    fd,
                    client: None,
                    uid,
                    refusal,
                    gen: self.next_conn_gen,
                    opened_at: now,
                    heard: false,
                });
            }
        }
    }

    /// Whether a peer may use the gateway at all: its owner, a listed uid, or a
    /// listed (primary) gid.
    fn allowed(&self, p: os::PeerCred) -> bool {
        p.uid == self.owner
            || self.cfg.allow_uids.contains(&p.uid)
            || self.cfg.allow_gids.contains(&p.gid)
    }

    fn close(&mut self, i: usize, now: i64) {
        if let Some(c) = self.conns.get_mut(i).and_then(Option::take) {
            self.ep.remove(c.fd.as_raw_fd());
            if let Some(k) = c.client {
                // Only a client attached on this very connection is detached.
                if let Some(cl) = self.clients[k]
                    .as_mut()
                    .filter(|cl| cl.conn == Some((i, c.gen)))
                {
                    cl.conn = None;
                    cl.detached_at = Some(now);
                }
            }
        }
    }

    fn on_conn<E: Account>(&mut self, api: &mut Api<'_, '_, E>, i: usize) {
        let now = api.now();
        let mut buf = [0u8; 256];
        let r = match self.conns.get(i).and_then(Option::as_ref) {
            Some(c) => os::recv_fds(c.fd.as_raw_fd(), &mut buf),
            None => return,
        };
        let n = match r {
            Ok(Recv::Msg(n, _)) => n,
            Ok(Recv::Empty) => return,
            Ok(Recv::Closed) | Err(_) => return self.close(i, now),
        };
        if let Some(c) = self.conns[i].as_mut() {
            c.heard = true;
        }
        if let Some(why) = self.conns[i].as_ref().and_then(|c| c.refusal.clone()) {
            self.answer(i, &why);
            return self.close(i, now);
        }
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        let mut words = text.split_whitespace();
        match (words.next(), words.next()) {
            (Some("attach"), Some(name)) if !self.stopping => self.attach_client(api, i, name),
            (Some("attach"), _) => self.answer(i, "err stopping or no name"),
            (Some("stats"), _) => {
                if let Some(c) = self.conns[i].as_ref() {
                    Self::reply(&c.fd, "ok stats", &[self.stats.fd()]);
                }
            }
            (Some("clear-halt"), Some(_))
                if self.conns[i].as_ref().is_some_and(|c| c.uid != self.owner) =>
            {
                let msg = format!(
                    "err clear-halt is for the gateway's owner (uid {}) only",
                    self.owner
                );
                self.answer(i, &msg);
            }
            (Some("clear-halt"), Some(bucket)) => {
                let b = api.budget();
                let msg = match b.bucket(bucket) {
                    None => format!("err no bucket named {bucket:?}"),
                    Some(id) if !b.halted().any(|h| h == id) => {
                        format!("err {bucket} is not halted")
                    }
                    Some(id) => match b.clear_halt(id) {
                        Ok(()) => format!("ok cleared {bucket}"),
                        Err(e) => format!("err {e}"),
                    },
                };
                // The record goes before the answer: a restart after `ok` never
                // comes up halted again.
                self.sync_halts(api);
                self.answer(i, &msg);
            }
            _ => self.answer(i, "err unknown command"),
        }
    }

    fn answer(&self, i: usize, text: &str) {
        if let Some(c) = self.conns.get(i).and_then(Option::as_ref) {
            Self::reply(&c.fd, text, &[]);
        }
    }

    fn attach_client<E: Account>(&mut self, api: &mut Api<'_, '_, E>, i: usize, name: &str) {
        // One client per connection: a second attach would leave the first one
        // "attached" for ever (its hang-up detaches only one).
        if self.conns[i].as_ref().is_some_and(|c| c.client.is_some()) {
            return self.answer(i, "err already attached on this connection");
        }
        let found = self
            .clients
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.name == name));
        let (k, again) = match found {
            Some(k) if self.clients[k].as_ref().is_some_and(|c| c.conn.is_some()) => {
                return self.answer(i, "err a client of that name is attached");
            }
            Some(k) => (k, true),
            None => match self.clients.iter().position(Option::is_none) {
                Some(k) => match self.new_client(k, name) {
                    Ok(c) => {
                        self.clients[k] = Some(c);
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
                    if let Err(e) = log.record(&c.name, b.epoch(), from, end) {
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
                &[
                    c.memfd.as_raw_fd(),
                    c.doorbell.as_raw_fd(),
                    c.wake.as_raw_fd(),
                ],
            );
        }
    }

    fn new_client(&mut self, k: usize, name: &str) -> io::Result<Client> {
        let (memfd, region) = Region::create(name, self.cfg.in_flight)?;
        let doorbell = os::eventfd()?;
        self.ep.add(doorbell.as_raw_fd(), DOORBELL0 + k as u64)?;
        // 15 bits: bit 47 of a tag is RECOVER.
        self.gens[k] = (self.gens[k] + 1) & 0x7fff;
        Ok(Client {
            name: name.to_string(),
            gen: self.gens[k],
            conn: None,
            memfd,
            doorbell,
            wake: os::eventfd()?,
            submit: region.submit_consumer()?,
            events: region.event_producer()?,
            tags: vec![None; self.cfg.in_flight],
            journal: vec![None; self.cfg.in_flight],
            free: (0..self.cfg.in_flight as u32).rev().collect(),
            retrying: vec![false; self.cfg.in_flight],
            lists: vec![false; self.cfg.in_flight],
            unresolved: std::collections::VecDeque::with_capacity(self.cfg.in_flight),
            region,
            detached_at: None,
            blocks: std::collections::VecDeque::with_capacity(BLOCKS_KEPT),
            used: Vec::new(),
            stats: ClientStats::default(),
        })
    }

    /// The gateway tag of client `k`'s local id `l`.
    fn tag_of(k: usize, gen: u16, l: u32) -> Tag {
        ((k as u64) << 48) | (u64::from(gen) << 32) | u64::from(l)
    }

    /// The client name the owners file says an earlier life's id (boot epoch
    /// `epoch`, sequence `seq`) was issued to.
    fn earlier_owner(&self, epoch: u64, seq: u64) -> Option<&str> {
        self.owners.as_ref()?.owner(epoch, seq)
    }

    /// Whose `id` is: the client whose block holds it, an earlier gateway life's,
    /// or nobody's.
    fn owner(&self, id: &ClientOrderId) -> Owner {
        let Some((format, epoch)) = self.id_space else {
            return Owner::Nobody;
        };
        match crate::ids::read_id(format, id) {
            // An earlier life's: the client of the name its block was issued to
            // (nobody while it is not attached), if the owners file says.
            Some((e, seq)) if e < epoch => match self.earlier_owner(e, seq) {
                Some(name) => self
                    .clients
                    .iter()
                    .position(|c| c.as_ref().is_some_and(|c| c.name == name))
                    .map_or(Owner::Nobody, Owner::Client),
                None => Owner::Earlier,
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
                .map_or(Owner::Nobody, Owner::Client),
            _ => Owner::Nobody,
        }
    }

    /// Whether client `k` may make `call`: every client order id it names is
    /// from `k`'s blocks; an order it cancels or queries may also be of an
    /// earlier gateway life (that the owners file does not name), never one it places.
    fn may(&self, k: usize, call: &Call<'_>) -> bool {
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

    /// Checks client `k`'s share of every part's bucket; Some(ready_at) if over.
    fn over_share<E: Account>(
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

    fn take_submits<E: Account>(&mut self, api: &mut Api<'_, '_, E>, k: usize) {
        for _ in 0..self.cfg.per_turn {
            let Some(c) = self.clients[k].as_mut() else {
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
                    // A corrupt ring: this client cannot be served any more.
                    c.stats.bad += 1;
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

    fn one<E: Account>(
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
    fn own_ids<E: Account>(&mut self, api: &Api<'_, '_, E>, k: usize, body: &[u8]) {
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

    /// Delivers one gateway event to the client whose request it is about.
    fn route<E: Account>(&mut self, api: &mut Api<'_, '_, E>, ev: Event<'_>) {
        let gtag = ev.tag();
        if gtag == OPEN_ORDERS {
            if let Event::OpenOrders {
                sent_at_ns, body, ..
            } = ev
            {
                let age_ns = api.now() - sent_at_ns;
                // Each client hears of its own orders only (and of an earlier
                // gateway life's, that the owners file does not name).
                for k in 0..self.clients.len() {
                    self.own_ids(api, k, body);
                    let Some(c) = self.clients[k].as_mut() else {
                        continue;
                    };
                    // Only into room beyond what its requests in flight may need
                    // (three events each): a client that does not read misses
                    // polls, never an event of its own.
                    if c.conn.is_some() && c.events.free() > 3 * c.tags.len() {
                        c.push(&ShmEvent::OpenOrders { age_ns }, &self.ids);
                    }
                }
            }
            return;
        }
        if gtag & RECOVER != 0 && gtag != OPEN_ORDERS {
            if ev.is_final() {
                // Only a definite answer clears the entry (found, or NotFound under
                // the venue's bound); any other end leaves it for the next start.
                if let (Some(j), Event::Reconciled { .. }) = (&mut self.journal, &ev) {
                    j.clear(gtag as u32);
                }
                self.recover_in_flight = self.recover_in_flight.saturating_sub(1);
                self.recovered.0 += 1;
                let found = match ev {
                    Event::Applied { .. } => true,
                    Event::Reconciled { found, .. } => found.is_some(),
                    _ => false,
                };
                self.recovered.1 += u64::from(found);
            }
            return;
        }
        let now = api.now();
        let rel = |at: i64| if at == i64::MAX { at } else { at - now };
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
        if let Event::Late { found, .. } = ev {
            // Its local id may serve another request by now: routed by the
            // gateway's tag it had, at most once.
            if let Some(i) = c.unresolved.iter().position(|&(g, _)| g == gtag) {
                if let Some((_, tag)) = c.unresolved.remove(i) {
                    c.push(&ShmEvent::Late { tag, found }, &[]);
                }
            }
            return;
        }
        let Some(Some(tag)) = c.tags.get(l as usize).copied() else {
            return;
        };
        let (sev, body): (ShmEvent, &[u8]) = match ev {
            Event::Applied { .. } if listing => (ShmEvent::Applied { tag }, &self.ids[..]),
            Event::Applied { body, .. } => (ShmEvent::Applied { tag }, body),
            Event::Rejected { .. } => (ShmEvent::Rejected { tag }, &[]),
            Event::DuplicateId { .. } => (ShmEvent::DuplicateId { tag }, &[]),
            Event::Limited {
                why, ready_at_ns, ..
            } => {
                c.stats.limited += 1;
                let ready_in_ns = rel(ready_at_ns);
                (
                    ShmEvent::Limited {
                        tag,
                        why,
                        ready_in_ns,
                    },
                    &[],
                )
            }
            Event::Retrying { at_ns, .. } => (
                ShmEvent::Retrying {
                    tag,
                    in_ns: rel(at_ns),
                },
                &[],
            ),
            Event::Expired { .. } => (ShmEvent::Expired { tag }, &[]),
            Event::Reconciling { .. } => (ShmEvent::Reconciling { tag }, &[]),
            Event::Reconciled { found, .. } => (ShmEvent::Reconciled { tag, found }, &[]),
            Event::Unresolved { .. } => {
                if c.unresolved.len() == c.tags.len() {
                    c.unresolved.pop_front();
                }
                c.unresolved.push_back((gtag, tag));
                (ShmEvent::Unresolved { tag }, &[])
            }
            Event::Late { .. } => return, // routed above
            Event::Halted { bucket, .. } => (
                ShmEvent::Halted {
                    tag,
                    bucket: bucket.index(),
                },
                &[],
            ),
            Event::OpenOrders { .. } => return,
            // The protocol has no batch: no client's request has items.
            Event::Item { .. } | Event::BatchSettled { .. } => return,
            // The switch's notes are the gateway's own (its --stats shows them).
            Event::Protection { .. } | Event::ProtectionFired => return,
        };
        if sev.is_final() {
            // An order whose outcome stays unknown keeps its entry: the next start
            // queries it (its id stays held here meanwhile).
            let unknown = matches!(sev, ShmEvent::Unresolved { .. });
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
        } else {
            let repeat = matches!(sev, ShmEvent::Retrying { .. }) && c.retrying[l as usize];
            if repeat || !c.room_for_steps() {
                c.stats.merged_steps += 1;
                return;
            }
            c.retrying[l as usize] = matches!(sev, ShmEvent::Retrying { .. });
        }
        c.push(&sev, body);
    }

    /// Queries each order a dead gateway left in flight (by client order id). One
    /// whose query cannot be prepared stays in the journal for the next start.
    fn recover<E: Account>(&mut self, api: &mut Api<'_, '_, E>) {
        while let Some((i, f)) = self.recover.pop() {
            let now = api.now();
            let (Ok(symbol), Ok(id)) = (Symbol::new(&f.symbol), ClientOrderId::new(&f.id)) else {
                continue;
            };
            let it = OrderRef {
                symbol,
                client_order_id: id,
            };
            if api
                .venue_mut()
                .query_order(&mut self.req, &it, now)
                .is_err()
            {
                continue;
            }
            // Reconciled under the gateway's rule: NotFound only after the venue's
            // bound, else Unresolved (never "it never ran" from one early query).
            match api.recover(&mut self.req, RECOVER | u64::from(i)) {
                Ok(()) => self.recover_in_flight += 1,
                Err(Event::Limited { .. }) => {
                    // No room now: again next turn.
                    self.recover.push((i, f));
                    return;
                }
                Err(ev) => {
                    self.recover_in_flight += 1;
                    self.route(api, ev);
                }
            }
        }
    }

    fn publish<E: Account>(&mut self, api: &mut Api<'_, '_, E>) {
        let now = api.now();
        if now < self.next_stats {
            return;
        }
        self.next_stats = now + 100 * MS;
        let mut text = String::with_capacity(2048);
        let g = *api.stats();
        text += &format!(
            "gateway {} journal_live={} recovering={} recovered={} recovered_found={} in_flight={} sent={} applied={} rejected={} unknown={} reconciled={} throttled={} banned={} refused={}\n",
            self.cfg.name,
            self.journal.as_ref().map_or(0, Journal::live),
            self.recover.len() + self.recover_in_flight,
            self.recovered.0,
            self.recovered.1,
            api.in_flight(),
            g.sent,
            g.applied,
            g.rejected,
            g.unknown,
            g.reconciled,
            g.throttled,
            g.banned,
            self.refused
        );
        let at = std::time::Instant::now();
        for ((id, shared), l) in self.cfg.leases.iter().zip(&self.leased) {
            let s = api.budget().stats(*id).unwrap_or_default();
            l.report(s.admitted, s.refusals.full);
            let v = shared.view(at);
            text += &format!(
                "lease {} grant={} limit={} used={} refused={} lease_age_ms={} epoch={} allocator={} error={} safe={}\n",
                api.budget().name(*id).unwrap_or("?"),
                v.grant,
                v.limit,
                v.used,
                v.refused,
                v.lease_age_ns.map_or(-1, |a| a / 1_000_000),
                v.epoch,
                v.allocator,
                self.lease_error.map_or("none".into(), |e| e.to_string().replace(' ', "_")),
                v.reserved,
            );
        }
        let b = api.budget();
        let ids: Vec<BucketId> = b.ids().collect();
        for &id in &ids {
            let s = b.stats(id).unwrap_or_default();
            text += &format!(
                "bucket {} used={} limit={} admitted={} held={} halted={} bans={}\n",
                b.name(id).unwrap_or("?"),
                s.used,
                s.limit,
                s.admitted,
                s.held_until_ns.is_some_and(|t| t > now),
                s.halted,
                s.bans
            );
        }
        for c in self.clients.iter().flatten() {
            let s = c.stats;
            text += &format!(
                "client {} {} in_flight={} submitted={} accepted={} over_share={} limited={} bad={} not_yours={} finals={} lost_events={} merged_steps={}",
                c.name,
                if c.conn.is_some() { "attached" } else { "detached" },
                c.in_flight(),
                s.submitted,
                s.accepted,
                s.over_share,
                s.limited,
                s.bad,
                s.not_yours,
                s.finals,
                s.lost_events,
                s.merged_steps
            );
            for (i, u) in c.used.iter().enumerate() {
                let Some(&id) = ids.get(i) else { continue };
                let w = self
                    .windows
                    .as_ref()
                    .and_then(|ws| ws.iter().find(|(b, _)| *b == id))
                    .map_or(1, |x| x.1);
                let used: u64 = u
                    .charges
                    .iter()
                    .filter(|(t, _)| *t > now - w)
                    .map(|(_, c)| u64::from(*c))
                    .sum();
                if used > 0 {
                    let limit = b.stats(id).map_or(1, |s| s.limit.max(1));
                    let pct = used as f64 * 100.0 / limit as f64;
                    text += &format!(" {}={pct:.0}%", b.name(id).unwrap_or("?"));
                }
            }
            text.push('\n');
        }
        self.stats.write(text.as_bytes());
    }

    /// Whether every leased bucket's grant is in force (its lease thread's last
    /// post is before its deadline); `None` without leases. A lost lease is the
    /// fall back to the safe share, which the loop makes by itself.
    pub fn lease_held(&self) -> Option<bool> {
        if self.cfg.leases.is_empty() {
            return None;
        }
        let at = std::time::Instant::now();
        Some(self.cfg.leases.iter().all(|(_, shared)| {
            shared
                .last_post()
                .is_some_and(|(seq, _, deadline)| seq > 0 && deadline > shared.ns(at))
        }))
    }

    /// Applies each leased bucket's limit at a fresh instant (the grant, the safe
    /// share past the renewal deadline, or nothing past the reservation's hold);
    /// a limit the budget refuses closes the bucket and is kept for the stats.
    fn repoll_leases<E: Account>(&mut self, api: &mut Api<'_, '_, E>) {
        if self.leased.is_empty() {
            return;
        }
        let (at, now) = (std::time::Instant::now(), api.now());
        for l in &mut self.leased {
            if let Err(e) = l.poll(api.budget(), at, now) {
                self.lease_error = Some(e);
            }
        }
    }

    /// Brings the halts file up to date when the budget's halts changed; a file
    /// that cannot be written is said on stderr (the halt itself stands).
    fn sync_halts<E: Account>(&mut self, api: &mut Api<'_, '_, E>) {
        let Some(log) = &mut self.halts else { return };
        let now = api.now();
        let b = api.budget();
        if !log.changed(b) {
            return;
        }
        if let Err(e) = log.sync(b, now, crate::wall::ms()) {
            eprintln!(
                "ergon-gateway: warning: halts file {}: {e}: a restart would not come up halted",
                log.path().display()
            );
        }
    }

    fn expire(&mut self, now: i64) {
        for slot in &mut self.clients {
            let drop = slot.as_ref().is_some_and(|c| {
                c.conn.is_none()
                    && c.in_flight() == 0
                    && c.detached_at.is_some_and(|t| now - t >= self.cfg.keep_ns)
            });
            if drop {
                // Out of the epoll set before it closes: the client may still
                // hold the doorbell, and a registration outliving our descriptor
                // would report it under the slot's next client.
                if let Some(c) = slot.take() {
                    self.ep.remove(c.doorbell.as_raw_fd());
                }
            }
        }
    }
}

impl<E: Account> Strategy<E> for Hub {
    /// The update goes to the client whose block its client order id comes from
    /// (for a cancel, the cancelled order's: `C`), and to no other; one of an
    /// earlier gateway life (that the owners file does not name) to every attached
    /// client; one of an id nobody was issued (an order placed elsewhere on the
    /// account) to none. Into room beyond what its requests in flight may need
    /// (as the polls): a client that does not read misses updates (its polls
    /// cover them), never an event of its own.
    fn on_order_update(&mut self, _api: &mut Api<'_, '_, E>, update: &Execution) {
        let ev = ShmEvent::OrderUpdate(*update);
        let owner = match self.owner(&update.client_order_id) {
            Owner::Nobody => update
                .orig_client_order_id
                .map_or(Owner::Nobody, |id| self.owner(&id)),
            o => o,
        };
        for (k, c) in self.clients.iter_mut().enumerate() {
            let Some(c) = c.as_mut() else { continue };
            let to = match owner {
                Owner::Client(o) => o == k,
                Owner::Earlier => true,
                Owner::Nobody => false,
            };
            if to && c.conn.is_some() && c.events.free() > 3 * c.tags.len() {
                c.push(&ev, &[]);
            }
        }
    }

    fn on_event(&mut self, api: &mut Api<'_, '_, E>, event: Event<'_>) {
        self.route(api, event);
    }

    fn on_turn(&mut self, api: &mut Api<'_, '_, E>) {
        // The grants the lease thread posted, or the safe share past the renewal
        // deadline, or nothing: before any submit of this turn.
        self.repoll_leases(api);
        for c in self.clients.iter().flatten() {
            c.region.header().gw_sleeping.store(0, Ordering::Relaxed);
        }
        self.recover(api);
        let n = self.clients.len();
        // New submits go on while what a dead gateway left in flight is settled:
        // waiting (up to the venue's NotFound bound) would not make a strategy any
        // safer, since nothing tells it those outcomes, and a journal's id cannot
        // be placed again (DuplicateId). The recovery queries were charged first.
        for j in 0..n {
            let k = (self.next_client + j) % n;
            if self.clients[k].is_some() {
                // The grants again, on a fresh instant, right before the charges:
                // a loop stopped since the turn began (SIGSTOP, a VM pause) must
                // not charge a grant past its deadline (issue 40, item 4). One
                // clock read per client batch, none per submit.
                self.repoll_leases(api);
                self.take_submits(api, k);
            }
        }
        self.next_client = (self.next_client + 1) % n.max(1);
        let now = api.now();
        self.expire(now);
        self.close_silent(now);
        self.resume_listener(now);
        self.sync_halts(api);
        self.publish(api);
        if !self.stopping && self.stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
            self.stopping = true;
            if let Some(l) = self.listener.take() {
                self.ep.remove(l.as_raw_fd());
            }
        }
        if self.stopping && api.in_flight() == 0 {
            api.stop();
        }
        // Wake up now and then for the stats, the keep time and a stop signal.
        if self.timer_at <= now {
            self.timer_at = now + 100 * MS;
            let _ = api.set_timer(HUB_TOKEN, self.timer_at);
        }
    }

    fn on_fd(&mut self, api: &mut Api<'_, '_, E>, token: u64, _ready: Readiness) {
        if token != HUB_TOKEN {
            return;
        }
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 32];
        let n = self.ep.ready(&mut evs);
        for e in &evs[..n] {
            let token = e.u64;
            match token {
                LISTENER => self.accept(api.now()),
                t if t >= DOORBELL0 => {
                    let k = (t - DOORBELL0) as usize;
                    if let Some(c) = self.clients.get(k).and_then(Option::as_ref) {
                        os::drain(c.doorbell.as_raw_fd());
                    }
                }
                t => self.on_conn(api, (t - CONN0) as usize),
            }
        }
    }

    fn before_park(&mut self, _api: &mut Api<'_, '_, E>) -> bool {
        for c in self.clients.iter().flatten() {
            c.region.header().gw_sleeping.store(1, Ordering::Relaxed);
        }
        // Pairs with the client's fence after its push.
        fence(Ordering::SeqCst);
        let pending = self.clients.iter().flatten().any(|c| c.submit.ready());
        if pending {
            for c in self.clients.iter().flatten() {
                c.region.header().gw_sleeping.store(0, Ordering::Relaxed);
            }
        }
        !pending
    }
}
