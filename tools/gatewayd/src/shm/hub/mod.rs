//! The gateway's side: a [`Strategy`] that serves strategy processes over shared
//! memory. It owns the listening socket, one region per client name, and the
//! stats region that `ergon-gateway --stats` reads. Wake-ups go over each
//! client's own connection (a one-byte message each way: the client's doorbell
//! when the loop is parked, the gateway's wake when the client waits), sent
//! with `MSG_DONTWAIT` on the gateway's own end: nothing a client does to a
//! descriptor it holds can make the loop block, and no descriptor is shared
//! between clients.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};

use ergon_core::{BucketId, Class};
use ergon_venues::binance_spot_ws::Execution;
use ergon_venues::endpoint::{IdFormat, Prepared};

use super::halts::HaltLog;
use super::journal::{Journal, JournalOwner};
use super::owners::OwnerLog;
use super::recovery::Recovery;
use super::share::Use;
use ergon_gateway::observe::{ClientStats, Lease, PublishClients};
use ergon_gateway::shm::os::{self, Epoll};
use ergon_gateway::shm::region::{Region, SUBMIT_SLOT};
use ergon_gateway::shm::stats::StatsWriter;
use ergon_gateway::shm::{encode_event, ShmEvent};
use ergon_gateway::{Account, Api, Event, Strategy, Tag};
use ergon_io::boundary::shm_ring::{PushError, ShmConsumer, ShmProducer};
use ergon_io::event_loop::{EventLoop, Interest, LoopError, Readiness};

mod attach;
mod calls;
mod conns;
mod events;
mod late;
mod listen;

/// The token under which [`Hub::attach`] watches the hub's epoll set.
pub const HUB_TOKEN: u64 = (1 << 62) + 2;

const LISTENER: u64 = 0;
const CONN0: u64 = 16;
/// Connections accepted per readiness of the listener.
const ACCEPTS_PER_CALL: usize = 64;
/// Messages read from one connection per readiness.
const MSGS_PER_CALL: usize = 16;
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
    /// An id of an earlier life of this journal's gateway (its boot epoch is
    /// older, and this journal holds it: an order that life left in flight)
    /// that no block in the owners file names (none was kept: a journal from
    /// before the file, or a failed write), so nobody can be told its owner.
    /// An older id this journal does not hold is `Nobody`'s: another gateway
    /// on the account issued it (issue 41, item 5).
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
    /// The gateway's name: its sockets are `@ergon-gateway/NAME` (abstract) and
    /// `gateway-NAME.sock` in [`HubConfig::socket_dir`].
    pub name: String,
    /// The gateway's private runtime directory, where its socket file goes
    /// (`ergon_gateway::shm::rundir::socket_file`). None: the abstract name
    /// only, and another uid holding it keeps the hub from starting.
    pub socket_dir: Option<std::path::PathBuf>,
    /// Client names served at once (attached or keeping outcomes).
    pub max_clients: usize,
    /// Requests one client may have in flight (its submit ring's slots).
    pub in_flight: usize,
    /// How long the outcomes of a client that went away are kept for it to
    /// attach again under its name, after its last request settled.
    pub keep_ns: i64,
    /// How long a client name not attached stays in the owners file (its uid
    /// binding and its id blocks), ms (`--forget-names DAYS`).
    pub forget_names_ms: i64,
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
            socket_dir: None,
            max_clients: 16,
            in_flight: 64,
            keep_ns: 300_000 * MS,
            share: None,
            per_turn: 16,
            forget_names_ms: i64::from(super::owners::FORGET_NAMES_DAYS) * 86_400_000,
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

struct Client {
    name: String,
    /// The uid its name is bound to (the first that held it): no other may
    /// attach under it.
    uid: u32,
    gen: u16,
    /// The connection it is attached on: its index and that connection's
    /// generation (an index is reused by later connections; the generation is not).
    conn: Option<(usize, u64)>,
    memfd: OwnedFd,
    /// The connection it is attached on (-1: detached): its wake-ups go there,
    /// never blocking. Owned by that connection; set and cleared with `conn`.
    sock: RawFd,
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
    /// Local id -> the fates of its parts so far ([`fate_bytes`] each),
    /// given with its final `BatchSettled` (pre-sized: never grows).
    parts: Vec<Vec<u8>>,
    /// Requests that ended `Unresolved` and may still turn up `Late`: the
    /// gateway's tag and the client's, oldest first, at most `in_flight` (their
    /// local ids are reused at once, so a `Late` is routed by this, never by
    /// `tags`).
    unresolved: std::collections::VecDeque<late::Unresolved>,
    detached_at: Option<i64>,
    /// When the last of its requests settled (its final event routed): a
    /// detached client's outcomes are kept `keep_ns` after the later of this
    /// and its detach, so one that settles after `keep_ns` still waits for it.
    settled_at: i64,
    /// Its submit ring was found corrupt (an index or a length out of range,
    /// written by the client): never read again, never a reason not to park,
    /// and the slot freed as soon as nothing of it is in flight.
    broken: bool,
    /// The blocks of client order ids issued to it in this gateway's life
    /// (sequences `from..end` of the hub's epoch), the latest [`BLOCKS_KEPT`].
    blocks: std::collections::VecDeque<(u64, u64)>,
    /// Per bucket index, for the share ceiling: its charges over the bucket's
    /// last window (time, units; a sliding window, as the budget counts) and
    /// their sum.
    used: Vec<Use>,
    stats: ClientStats,
    /// It asked, at its last attach, for the open-orders polls.
    open_orders: bool,
    /// Its own ids of the poll's pages so far (a paged venue's poll comes as
    /// one event a page; a client hears one a poll).
    listing: Listing,
}

/// A client's own open ids of one poll's pages so far, one a line: at most
/// what one event slot carries (pre-sized; never grows).
struct Listing {
    ids: Vec<u8>,
    /// The last page added (None: no poll's first page yet).
    page: Option<u8>,
}

impl Listing {
    fn new() -> Listing {
        Listing {
            ids: Vec::with_capacity(ergon_gateway::shm::region::EVENT_SLOT),
            page: None,
        }
    }

    /// Adds page `page`'s `ids` (page 0 starts a poll afresh); false for a page
    /// that does not follow the last one added (a walk whose start was missed).
    /// Ids past the slot's room are left out (the event would cut them).
    fn add(&mut self, page: u8, ids: &[u8]) -> bool {
        match page {
            0 => self.ids.clear(),
            p if self.page != Some(p - 1) => return false,
            _ => {}
        }
        self.page = Some(page);
        for line in ids.split_inclusive(|&b| b == b'\n') {
            if self.ids.len() + line.len() > self.ids.capacity() {
                break;
            }
            self.ids.extend_from_slice(line);
        }
        true
    }
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
        if self.sock >= 0 {
            fence(Ordering::SeqCst);
            if self.region.header().client_sleeping.load(Ordering::Relaxed) != 0 {
                os::wake(self.sock);
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
    /// connection not attached [`SILENT_CONN_NS`] after it was accepted is
    /// closed, whatever it said.
    opened_at: i64,
    heard: bool,
}

/// The deadline of a connection's whole exchange: one not attached this long
/// after it was accepted is closed, whether it said nothing or a command (a
/// `stats` said once does not keep it open). Connections held open must not
/// keep the descriptors and the room attaches need.
pub const SILENT_CONN_NS: i64 = 1_000_000_000;
/// Connections not attached (still to say who they are, or that only read the
/// stats or cleared a halt) one uid may hold at once: a further one closes that
/// uid's oldest, so a uid holding connections open keeps out nobody, not even
/// itself.
pub const PENDING_PER_UID: usize = 8;
/// After the listener fails for want of descriptors (`EMFILE`, `ENFILE`), it is
/// left alone this long, instead of waking the loop for ever.
const ACCEPT_BACKOFF_NS: i64 = 100_000_000;

/// The loop side of the shared-memory gateway: a [`Strategy`] over the gateway.
pub struct Hub {
    cfg: HubConfig,
    /// The listening sockets (none once stopping): the socket file, then the
    /// abstract name (`listen::listeners`).
    listeners: Vec<OwnedFd>,
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
    /// Orders a dead gateway left in flight, on their way to a definite answer.
    recovery: Recovery,
    /// Dropped names' requests that ended unresolved, for their next process
    /// (at most `max_clients × in_flight`, the oldest going first).
    orphans: std::collections::VecDeque<late::Orphan>,
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
    /// Connections that said something but were not attached within
    /// `SILENT_CONN_NS` (1 s), closed then.
    pub expired: u64,
    /// Connections closed for a newer one of their uid over [`PENDING_PER_UID`],
    /// or for another uid's at the cap of connections, or refused at that cap.
    pub capped: u64,
    /// Times the listener was paused (no descriptor left).
    pub accept_pauses: u64,
}

fn owned_msg(e: &dyn core::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl Hub {
    /// Listens on its socket file in [`HubConfig::socket_dir`] and on
    /// `@ergon-gateway/NAME` (`listen::listeners`), and sets up the stats region.
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
        let listeners =
            listen::listeners(&cfg.name, cfg.socket_dir.as_deref()).map_err(|e| owned_msg(&e))?;
        let ep = Epoll::new()?;
        for (i, l) in listeners.iter().enumerate() {
            ep.add(l.as_raw_fd(), LISTENER + i as u64)?;
        }
        let stats = StatsWriter::create(&cfg.name)?;
        let (journal, recover) = match &cfg.journal {
            Some(path) => {
                let cap = cfg.max_clients * cfg.in_flight;
                let owner = cfg
                    .journal_owner
                    .clone()
                    .unwrap_or_else(|| JournalOwner::new("", "", ""));
                let wall_ms = u64::try_from(ergon_gateway::wall::ms()).unwrap_or(0);
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
                let now_ms = ergon_gateway::wall::ms();
                let mut log = OwnerLog::open(&p, now_ms)
                    .map_err(|e| owned_msg(&format!("owners file {e}")))?;
                log.expire(now_ms, cfg.forget_names_ms);
                Some(log)
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
            listeners,
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
            recovery: Recovery::new(recover),
            orphans: std::collections::VecDeque::new(),
            owner: os::euid(),
            refused: 0,
            next_conn_gen: 1,
            listen_paused_until: None,
            silent_closed: 0,
            expired: 0,
            capped: 0,
            accept_pauses: 0,
        })
    }

    /// Watches the hub's descriptors on `lp` (under [`HUB_TOKEN`]); call once
    /// before running the loop.
    pub fn attach(&self, lp: &mut EventLoop) -> Result<(), LoopError> {
        lp.watch_fd(self.ep.fd(), HUB_TOKEN, Interest::READ)
    }

    /// The boot epoch its journal keeps for this start (None: no journal): give it
    /// to the gateway ([`ergon_gateway::Gateway::set_boot_epoch`]) before it serves.
    pub fn boot_epoch(&self) -> Option<u64> {
        self.journal.as_ref().map(Journal::epoch)
    }

    /// The slot client `name` holds (the top bits of its requests' gateway
    /// tags), if the hub serves it: a name dropped and attached again may
    /// hold another.
    pub fn slot_of(&self, name: &str) -> Option<usize> {
        self.clients
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.name == name))
    }

    /// Each client's name, whether it is attached, and its counts.
    pub fn clients(&self) -> impl Iterator<Item = (&str, bool, ClientStats)> + '_ {
        self.clients
            .iter()
            .flatten()
            .map(|c| (c.name.as_str(), c.conn.is_some(), c.stats))
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
            self.recovery.pending(),
            self.recovery.recovered.0,
            self.recovery.recovered.1,
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
        let asked = self.clients.iter().flatten();
        let asked = asked.filter(|c| c.open_orders && c.conn.is_some()).count();
        text += &format!("open_orders polls={} asked_by={asked}", g.polls);
        let spent: Vec<_> = api.open_orders_spent().to_vec();
        for (id, units) in spent {
            text += &format!(" {}={units}", api.budget().name(id).unwrap_or("?"));
        }
        text.push('\n');
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
        if let Err(e) = log.sync(b, now, ergon_gateway::wall::ms()) {
            eprintln!(
                "ergon-gateway: warning: halts file {}: {e}: a restart would not come up halted",
                log.path().display()
            );
        }
    }

    fn expire(&mut self, now: i64) {
        for k in 0..self.clients.len() {
            let drop = self.clients[k].as_ref().is_some_and(|c| {
                c.conn.is_none()
                    && c.in_flight() == 0
                    && (c.broken
                        || c.detached_at
                            .is_some_and(|t| now - t.max(c.settled_at) >= self.cfg.keep_ns))
            });
            if drop {
                self.drop_client(k);
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
        self.recovery
            .step(api, &mut self.req, self.journal.as_mut());
        // The open-orders polls only while a client that asked is attached (the
        // gateway still polls while it watches an unresolved order's id).
        let wanted = self
            .clients
            .iter()
            .flatten()
            .any(|c| c.open_orders && c.conn.is_some());
        api.want_open_orders(wanted);
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
            for l in self.listeners.drain(..) {
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
                t if t < CONN0 => self.accept(api.now()),
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
        // A broken ring looks ready for ever: it must not keep the loop awake.
        let pending = self
            .clients
            .iter()
            .flatten()
            .any(|c| !c.broken && c.submit.ready());
        if pending {
            for c in self.clients.iter().flatten() {
                c.region.header().gw_sleeping.store(0, Ordering::Relaxed);
            }
        }
        !pending
    }
}

impl PublishClients for Hub {
    fn each_client(&self, f: &mut dyn FnMut(&str, bool, &ClientStats)) {
        for (name, attached, stats) in self.clients() {
            f(name, attached, &stats);
        }
    }

    fn lease(&self) -> Option<Lease> {
        self.lease_held().map(|held| match held {
            true => Lease::Held,
            false => Lease::Lost,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Listing;

    #[test]
    fn a_polls_pages_are_listed_together_from_its_first_page_only() {
        let mut l = Listing::new();
        assert!(!l.add(1, b"x\n"), "a walk whose first page was missed");
        assert!(l.add(0, b"a\nb\n"));
        assert!(l.add(1, b"c\n"));
        assert_eq!(l.ids, b"a\nb\nc\n");
        assert!(!l.add(3, b"d\n"), "a page skipped");
        assert!(l.add(0, b"e\n"), "a new poll starts afresh");
        assert_eq!(l.ids, b"e\n");
        // Never past one event slot, and whole ids only.
        let cap = l.ids.capacity();
        let many = b"0123456789abcdef\n".repeat(cap / 17 + 10);
        assert!(l.add(1, &many));
        assert!(l.ids.len() <= cap && l.ids.ends_with(b"\n"));
        assert_eq!(l.ids.capacity(), cap, "never grows");
    }
}
