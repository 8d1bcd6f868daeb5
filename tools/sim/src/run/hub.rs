//! The shared-memory hub: in a share of the runs (`Params::hub`) the strategy's
//! orders come from one or two simulated client processes, each through the
//! real [`ShmClient`] (its memfd region, its submit and event rings, its
//! connection) to the daemon's real [`Hub`], which the run drives as the
//! daemon's loop does, through [`Api::hosted`] on the simulated clock and
//! network. The hub listens on an abstract socket and a socket file in a
//! private directory of the run, both named from the process id, a counter
//! and the seed, and removed with the run.
//!
//! Determinism: one thread drives everything, and nothing is read by timing.
//! The hub's per-turn work (its submits, its events) is in its own fixed
//! order; its descriptors are polled ([`Hub`]'s `on_fd`) only where a
//! connection changed: right after a process dies (its hang-up, the only one
//! pending) and while one attaches. An attach waits for the hub's answer in
//! [`ShmClient::attach_in`], so it runs on a scoped thread while this one polls
//! the hub until it returns; the hub does the same (accept, read the command,
//! answer) however many empty polls come between, at the same simulated time.
//! No doorbell is ever rung: the hub is never told it parks (`before_park` is
//! not called), so its `gw_sleeping` flag stays clear and no client writes its
//! connection, and no client waits (so the hub never wakes one).
//!
//! Process faults: a client process dies at a random step (everything it held
//! dropped: its mapping, its descriptors): at once, right after its next
//! submit (before the hub took it), at the next turn the hub routed it an
//! event (outcomes waiting in its ring), or halfway through writing its next
//! submit (the slot at its ring's published tail holds the message's length
//! and half its bytes, written into the region's memfd where the documented
//! layout puts it; the tail never advanced), or between its next submit's
//! push and its entry in its flight table (the one call `ShmClient::submit`
//! makes of both; the entry undone through the memfd), the hub having taken
//! the request before it heard the hang-up or not; often with requests at the
//! venue. Later a new process of the same name attaches again.
//! Half the names' processes read their ring only every 1 to 100 ms (the hub
//! turning several times between two reads: their events wait in the ring);
//! each live process reads what waits before the run's end checks. The hub
//! keeps a dead name's outcomes `--keep` (half the runs 50 ms to 2 s) after
//! its last request settled; a process told `new` only after that. Checked: it is told
//! `reattached`; the flight table it finds holds exactly the requests its name
//! submitted whose final event no process read, but those pushed by a process
//! that died before their entry; each of them (those too) ends with
//! exactly one final event, read by the new process (the ledger's checks: once
//! per request, none lost, each agreeing with the venue); the other client's
//! orders keep flowing. A second process attaching under a name whose process
//! lives is refused (`err a client of that name is attached`) and the first
//! keeps its requests. A submit written halfway never runs and is never
//! answered, and the name's next submit takes its slot (checked by reading the
//! slot back: the torn write was where the ring writes).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ergon_core::Class;
use ergon_gateway::shm::region::{
    FlightEntry, EVENTS_PER_REQUEST, EVENT_SLOT, SLOTS_AT, SUBMIT_SLOT,
};
use ergon_gateway::shm::{encode_call, AttachOptions, Call, ShmClient, ShmEvent, ShmSubmitError};
use ergon_gateway::{Api, Control, Event, Host, Strategy};
use ergon_gatewayd::shm::{Hub, HubConfig, HUB_TOKEN};
use ergon_io::boundary::shm_ring::LEN_BYTES;
use ergon_io::event_loop::Readiness;
use ergon_venues::endpoint::{CancelReplace, ClientOrderId, Decimal, OrderRef, Symbol};

use super::{Net, Params, Sim, Step, MS, SEC};
use crate::check::{Final, Kind, What};
use crate::rng::Rng;

/// Mixed into the seed for the hub's draw and its faults (a stream of its own:
/// the runs without the hub stay what they were).
const HUB_STREAM: u64 = 0x5b0b_c11e_a700_0000;
/// Runs of this process so far: names of their own for two runs of one seed.
static RUNS: AtomicU64 = AtomicU64::new(0);
/// Whether run `seed` serves its strategy through the hub (an eighth of the
/// runs, from a stream of their own, or as `p.hub` says; such a run has no
/// WebSocket lane and no gateway kills), and the stream for its faults.
pub(super) fn draw(seed: u64, p: &Params) -> (bool, Rng) {
    let mut rng = Rng::new(seed ^ HUB_STREAM);
    let drawn = rng.chance(125);
    (p.hub.unwrap_or(drawn), rng)
}

/// Requests one client may have in flight (its ring's slots).
const IN_FLIGHT: usize = 64;

/// A step of the hub's processes.
pub(crate) enum HubStep {
    /// Client `c`'s process dies, as `Death` says.
    Kill(usize, Death),
    /// A new process of client `c` attaches.
    Attach(usize),
    /// A second process tries client `c`'s name while the first lives.
    Twin(usize),
}

/// When a dying process dies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Death {
    /// At once.
    Now,
    /// Right after its next submit, before the hub takes it.
    AfterSubmit,
    /// At the next turn the hub routed it an event, before it reads it.
    Unread,
    /// Halfway through writing its next submit into its ring's slot, before
    /// it published it.
    Torn,
    /// Between its next submit's push (published in the ring) and its entry
    /// in its flight table (the one call `ShmClient::submit` makes of both):
    /// the hub takes it after it heard the hang-up.
    Pushed,
    /// As `Pushed`, but the hub took the request (and routed what it queued)
    /// before the process died: the mirror order.
    Taken,
}

/// One client name and its process.
struct Client {
    name: String,
    /// Its live process (None: dead, a new one to attach).
    live: Option<ShmClient>,
    /// Its name's requests whose final event no process of it read.
    open: BTreeSet<u64>,
    /// How the live process is to die, if it is.
    dying: Option<Death>,
    /// The hub routed it an event this turn.
    routed: bool,
    /// Processes of it that attached so far.
    lives: u32,
    /// Submits its processes pushed (its submit ring's published tail).
    pushed: u64,
    /// A process of it died halfway through a submit: the next one's submit
    /// must land in that slot (the torn write's place checked).
    torn_slot: bool,
    /// Of `open`, the requests pushed by a process that died before their
    /// flight-table entry: in no flight table a later process finds, yet
    /// their final event is its to read.
    untabled: BTreeSet<u64>,
    /// When its last process died.
    died_at: i64,
    /// When the hub was last handed a final event of one of its requests.
    settled_at: i64,
    /// The hub's slot and generation of it (from its requests' gateway tags).
    gen: Option<(usize, u16)>,
    /// Its processes read their ring at most this often (0: at every turn
    /// of the hub), so that the hub turns several times between two reads;
    /// and when the live one reads next.
    lag_ns: i64,
    read_at: i64,
}

/// The hub and its clients in a run that has them.
pub(super) struct Shm {
    hub: Hub,
    control: Control,
    gateway: String,
    dir: PathBuf,
    clients: Vec<Client>,
    /// Each placed order's client.
    owner: HashMap<String, usize>,
    /// Submits written halfway, never published (their tags and client order
    /// ids): never to run, never to be answered.
    torn: Vec<(u64, String)>,
    rng: Rng,
    /// What its processes went through.
    pub(super) stats: HubRun,
    /// Its clients ask for the open-orders polls.
    open_orders: bool,
    /// The hub's `keep_ns` (`--keep`): how long a dead client's outcomes wait
    /// for it after its last request settled.
    keep_ns: i64,
    /// When the hub last turned (its expiry runs in its turn).
    turned_at: i64,
    /// The (slot, generation) of the lives the hub dropped after `--keep`: no
    /// request of one may end after it (its outcome would reach nobody).
    dropped: Vec<(usize, u16)>,
}

/// What the hub's client processes went through in a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HubRun {
    /// Client processes killed.
    pub kills: u64,
    /// Processes that attached under a name whose earlier process died.
    pub again: u64,
    /// Second processes of a live name, refused.
    pub twins: u64,
    /// Final events a client read while another client's process was dead.
    pub served_while_other_dead: u64,
    /// Processes killed halfway through writing a submit, and of them, those
    /// whose slot the name's next submit was seen to take.
    pub torn: (u64, u64),
    /// Processes killed between a submit's push and its flight-table entry:
    /// before the hub took it, and after (`Death::Pushed`, `Death::Taken`).
    pub untabled: (u64, u64),
    /// Final events of such requests read by a later process of the name.
    pub untabled_read: u64,
    /// Such requests whose final event went with their name, dropped after
    /// `--keep` before a process of it came back.
    pub untabled_expired: u64,
    /// Client names whose processes read their ring only every 1 to 100 ms
    /// (the hub turning several times between two reads), and the most final
    /// events one read of such a process found waiting.
    pub slow: (u64, u64),
    /// Names whose outcomes the hub dropped after `--keep` (the next process
    /// told `new`), and the requests whose final event went with them.
    pub expired: (u64, u64),
}

impl Drop for Shm {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Host for Net {
    fn set_timer(&mut self, _token: u64, _at_ns: i64) {
        // The hub is turned at every step: its timer wakes nothing here.
    }

    fn stop(&mut self) {}
}

/// `Net` as a [`Host`]'s transport: the run's own.
impl Net {
    fn host(&mut self) -> &mut dyn Host {
        self
    }
}

impl Sim {
    /// Whether this run's orders come through the hub.
    pub(super) fn hub_run(&self) -> bool {
        self.shm.is_some()
    }

    /// Sets up the hub and its clients for run `seed` (`n` clients) and
    /// schedules their processes' faults.
    pub(super) fn arm_hub(&mut self, seed: u64, rng: Rng, open_orders: bool) {
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let gateway = format!("sim-{pid}-{run}-{seed}");
        let dir = std::env::temp_dir().join(format!("ergon-sim-hub-{pid}-{run}-seed-{seed}"));
        let base = std::path::Path::new("/dev/shm");
        let dir = match base.is_dir() {
            true => base.join(format!("ergon-sim-hub-{pid}-{run}-seed-{seed}")),
            false => dir,
        };
        let _ = std::fs::remove_dir_all(&dir);
        use std::os::unix::fs::DirBuilderExt;
        if let Err(e) = std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            self.out.violations.push(format!("{}: {e}", dir.display()));
            return;
        }
        // Half the runs keep a dead client's outcomes 50 ms to 2 s (a process
        // returns 1 ms to 3 s after it died, so some return after it); the
        // others the daemon's default, 300 s.
        let mut rng = rng;
        let keep_ns = match rng.chance(500) {
            true => rng.range(50 * MS, 2 * SEC),
            false => HubConfig::default().keep_ns,
        };
        let cfg = HubConfig {
            name: gateway.clone(),
            socket_dir: Some(dir.clone()),
            max_clients: 4,
            in_flight: IN_FLIGHT,
            keep_ns,
            // The daemon's files: its journal, and beside it the owners file,
            // which keeps a dropped name's ids its own.
            journal: Some(dir.join("journal")),
            ..HubConfig::default()
        };
        let hub = match Hub::bind(cfg, None) {
            Ok(h) => h,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                self.out.violations.push(format!("hub: {e}"));
                return;
            }
        };
        let n = rng.range(1, 3) as usize;
        let clients = (0..n)
            .map(|c| Client {
                name: format!("c{c}-{pid}-{run}"),
                live: None,
                open: BTreeSet::new(),
                dying: None,
                routed: false,
                lives: 0,
                pushed: 0,
                torn_slot: false,
                untabled: BTreeSet::new(),
                died_at: 0,
                settled_at: 0,
                gen: None,
                lag_ns: 0,
                read_at: 0,
            })
            .collect();
        self.shm = Some(Box::new(Shm {
            hub,
            control: Control::default(),
            gateway,
            dir,
            clients,
            owner: HashMap::new(),
            torn: Vec::new(),
            open_orders,
            rng,
            stats: HubRun::default(),
            keep_ns,
            turned_at: 0,
            dropped: Vec::new(),
        }));
        for c in 0..n {
            self.hub_attach(c);
        }
        // Each client's process dies up to three times; a second process tries
        // its name while it lives, now and then.
        let span = self.p.seconds * SEC;
        let mut sched = Vec::new();
        if let Some(s) = self.shm.as_mut() {
            for c in 0..n {
                for _ in 0..s.rng.range(0, 4) {
                    let death = match s.rng.next_u64() % 6 {
                        0 => Death::Now,
                        1 => Death::AfterSubmit,
                        2 => Death::Unread,
                        3 => Death::Torn,
                        4 => Death::Pushed,
                        _ => Death::Taken,
                    };
                    sched.push((s.rng.range(0, span), HubStep::Kill(c, death)));
                }
                if s.rng.chance(500) {
                    sched.push((s.rng.range(0, span), HubStep::Twin(c)));
                }
            }
        }
        // Half the names' processes read their ring only every 1 to 100 ms.
        if let Some(s) = self.shm.as_mut() {
            for cl in &mut s.clients {
                if s.rng.chance(500) {
                    cl.lag_ns = s.rng.range(MS, 100 * MS);
                    s.stats.slow.0 += 1;
                }
            }
        }
        let t0 = self.net.now;
        for (t, s) in sched {
            self.at(t0 + t, Step::Hub(s));
        }
    }

    /// One step of the hub's processes.
    pub(super) fn hub_step(&mut self, s: HubStep) {
        match s {
            HubStep::Kill(c, Death::Now) => self.hub_kill(c),
            HubStep::Kill(c, death) => {
                if let Some(cl) = self.shm.as_mut().and_then(|s| s.clients.get_mut(c)) {
                    if cl.live.is_some() {
                        cl.dying = Some(death);
                    }
                }
            }
            HubStep::Attach(c) => self.hub_attach(c),
            HubStep::Twin(c) => self.hub_twin(c),
        }
    }

    /// Client `c`'s process dies: everything it held is dropped; the hub hears
    /// its connection hang up; a new process attaches later.
    fn hub_kill(&mut self, c: usize) {
        let Some(s) = self.shm.as_mut() else { return };
        let Some(cl) = s.clients.get_mut(c) else {
            return;
        };
        if cl.live.take().is_none() {
            return;
        }
        cl.dying = None;
        cl.died_at = self.net.now;
        s.stats.kills += 1;
        // A new process 1 ms to 3 s later, or (one in four) 3 to 10 s.
        let t = self.net.now
            + match s.rng.chance(250) {
                true => s.rng.range(3 * SEC, 10 * SEC),
                false => s.rng.range(MS, 3 * SEC),
            };
        self.hub_poll_fds();
        self.at(t, Step::Hub(HubStep::Attach(c)));
    }

    /// The hub polls its descriptors (accepts, commands, hang-ups).
    fn hub_poll_fds(&mut self) {
        let Some(s) = self.shm.as_mut() else { return };
        let mut api = Api::hosted(&mut self.gw, self.net.host(), &s.control);
        s.hub.on_fd(&mut api, HUB_TOKEN, Readiness::READABLE);
    }

    /// Attaches a process under client `c`'s name on a scoped thread, the hub
    /// polled here until it returns.
    fn hub_try_attach(&mut self, c: usize) -> Option<std::io::Result<ShmClient>> {
        let s = self.shm.as_mut()?;
        let (dir, gateway) = (s.dir.clone(), s.gateway.clone());
        let name = s.clients.get(c)?.name.clone();
        let opts = AttachOptions::new().open_orders(s.open_orders);
        let (gw, net) = (&mut self.gw, &mut self.net);
        let got = std::thread::scope(|sc| {
            let h = sc.spawn(|| ShmClient::attach_in(Some(&dir), &gateway, &name, opts));
            let mut spins = 0u32;
            while !h.is_finished() {
                let mut api = Api::hosted(gw, net.host(), &s.control);
                s.hub.on_fd(&mut api, HUB_TOKEN, Readiness::READABLE);
                spins += 1;
                match spins < 64 {
                    true => std::thread::yield_now(),
                    false => std::thread::sleep(Duration::from_micros(50)),
                }
            }
            h.join()
        });
        // What the attach left (a refused twin's hang-up) is heard now.
        self.hub_poll_fds();
        match got {
            Ok(r) => Some(r),
            Err(_) => Some(Err(std::io::Error::other("the attach thread panicked"))),
        }
    }

    /// A new process of client `c` attaches: told whether it is again, it
    /// finds its name's requests in flight, and reads what waits for it.
    fn hub_attach(&mut self, c: usize) {
        let now = self.net.now;
        let again = self
            .shm
            .as_ref()
            .and_then(|s| s.clients.get(c))
            .is_some_and(|cl| cl.lives > 0);
        let client = match self.hub_try_attach(c) {
            Some(Ok(client)) => client,
            Some(Err(e)) => {
                self.out
                    .violations
                    .push(format!("t={now}: client c{c} could not attach: {e}"));
                return;
            }
            None => return,
        };
        let Some(s) = self.shm.as_mut() else { return };
        let Some(cl) = s.clients.get_mut(c) else {
            return;
        };
        if again {
            s.stats.again += 1;
            // Its outcomes are kept `--keep` after its last request settled
            // (docs/book/src/daemon.md, "Crash cases"; `HubConfig::keep_ns`),
            // then dropped at a turn of the hub: told `new` only after a turn
            // past that, its unread final events gone with the name (owed
            // none now, and none may come).
            let kept_until = cl.died_at.max(cl.settled_at) + s.keep_ns;
            match (client.reattached(), s.turned_at >= kept_until) {
                (true, _) => {}
                (false, false) => self.out.violations.push(format!(
                    "t={now}: client {} attached again and was told it is new (its outcomes not kept): died at {}, last request settled at {}, kept until {kept_until} (--keep {} ms)",
                    cl.name, cl.died_at, cl.settled_at, s.keep_ns / MS
                )),
                (false, true) => {
                    s.stats.expired.0 += 1;
                    s.stats.expired.1 += cl.open.len() as u64;
                    for &tag in &cl.open {
                        self.ledger.lost_with_process(tag);
                    }
                    cl.open.clear();
                    s.stats.untabled_expired += cl.untabled.len() as u64;
                    cl.untabled.clear();
                    s.dropped.extend(cl.gen.take());
                    // A new region: its rings start at 0, a torn slot gone with the old.
                    cl.pushed = 0;
                    cl.torn_slot = false;
                    // Its earlier processes' orders stay the name's (the
                    // owners file keeps their blocks): the strategy goes on
                    // cancelling and replacing them through the new process,
                    // and a `NotYours` is a violation.
                }
            }
        }
        let table: BTreeSet<u64> = client.in_flight_tags().collect();
        let tabled: BTreeSet<u64> = cl.open.difference(&cl.untabled).copied().collect();
        if table != tabled {
            self.out.violations.push(format!(
                "t={now}: client {} attached again: its flight table holds {table:?}, its requests without a final event read are {:?} (of them {:?} pushed by a process that died before their entry)",
                cl.name, cl.open, cl.untabled
            ));
        }
        cl.live = Some(client);
        cl.routed = false;
        cl.lives += 1;
    }

    /// A second process attaches under client `c`'s name while the first
    /// lives: refused, and the first keeps everything.
    fn hub_twin(&mut self, c: usize) {
        let now = self.net.now;
        let lives = self
            .shm
            .as_ref()
            .and_then(|s| s.clients.get(c))
            .is_some_and(|cl| cl.live.is_some());
        if !lives {
            return;
        }
        match self.hub_try_attach(c) {
            Some(Ok(_twin)) => self.out.violations.push(format!(
                "t={now}: a second process attached as client c{c} while the first lives"
            )),
            Some(Err(e)) if e.to_string().contains("a client of that name is attached") => {
                if let Some(s) = self.shm.as_mut() {
                    s.stats.twins += 1;
                }
            }
            Some(Err(e)) => self.out.violations.push(format!(
                "t={now}: a second process of client c{c}: refused for the wrong reason: {e}"
            )),
            None => {}
        }
    }

    /// A gateway event: to the hub, which routes it to its client's ring.
    pub(super) fn hub_event(&mut self, e: Event<'_>) {
        let Some(s) = self.shm.as_mut() else { return };
        let k = (e.tag() >> 48) as usize;
        let gen = (e.tag() >> 32) as u16 & 0x7fff;
        let fin = e.is_final() && !matches!(e, Event::OpenOrders { .. });
        if fin && s.dropped.contains(&(k, gen)) {
            let now = self.net.now;
            self.out.violations.push(format!(
                "t={now}: a request of a client life (slot {k}) the hub dropped after --keep ended now: its outcome reaches nobody"
            ));
        }
        // The name in that slot (a name dropped and attached again may hold
        // another slot than its first).
        let c = s
            .clients
            .iter()
            .position(|cl| s.hub.slot_of(&cl.name) == Some(k));
        if let Some(cl) = c.and_then(|c| s.clients.get_mut(c)) {
            cl.routed = true;
            if fin {
                cl.gen = Some((k, gen));
                cl.settled_at = self.net.now;
            }
        }
        let mut api = Api::hosted(&mut self.gw, self.net.host(), &s.control);
        s.hub.on_event(&mut api, e);
    }

    /// The hub's turn (its clients' submits taken, in its own order), then each
    /// live process reads its ring, unless it dies first.
    pub(super) fn hub_turn(&mut self) {
        let Some(s) = self.shm.as_mut() else { return };
        let mut api = Api::hosted(&mut self.gw, self.net.host(), &s.control);
        s.hub.on_turn(&mut api);
        s.turned_at = self.net.now;
        let n = s.clients.len();
        // What its submits queued, routed in the same turn (the driver's drain).
        while let Some(e) = self.gw.poll_event() {
            self.hub_event(e);
        }
        for c in 0..n {
            let die = self.shm.as_ref().is_some_and(|s| {
                let cl = &s.clients[c];
                cl.routed && cl.dying == Some(Death::Unread)
            });
            if die {
                self.hub_kill(c);
                continue;
            }
            // A slow process reads only when its time comes.
            let now = self.net.now;
            let due = self.shm.as_mut().is_some_and(|s| {
                let cl = &mut s.clients[c];
                let due = now >= cl.read_at;
                if due {
                    cl.read_at = now + cl.lag_ns;
                }
                due
            });
            if due {
                self.hub_read(c);
            }
        }
    }

    /// Client `c`'s live process reads every event waiting in its ring.
    fn hub_read(&mut self, c: usize) {
        let now = self.net.now;
        let mut got = Vec::new();
        let Some(s) = self.shm.as_mut() else { return };
        let other_dead = s
            .clients
            .iter()
            .enumerate()
            .any(|(o, cl)| o != c && cl.live.is_none());
        let cl = &mut s.clients[c];
        cl.routed = false;
        let Some(client) = cl.live.as_mut() else {
            return;
        };
        let mut finals = 0;
        while let Some((ev, _)) = client.poll() {
            let what = match ev {
                ShmEvent::Applied { .. } => What::Applied,
                ShmEvent::Rejected { .. } => What::Rejected,
                ShmEvent::DuplicateId { .. } => What::DuplicateId,
                ShmEvent::Limited { .. } => What::Limited,
                ShmEvent::Expired { .. } => What::Expired,
                ShmEvent::Halted { .. } => What::Halted,
                ShmEvent::Reconciled { found, .. } => What::Reconciled(found),
                ShmEvent::Unresolved { .. } => What::Unresolved,
                ShmEvent::BatchSettled { .. } => What::BatchSettled,
                ShmEvent::Late { .. } => What::Late,
                ShmEvent::Item { item, fate, .. } => What::Item(item, fate),
                ShmEvent::NotYours { tag } | ShmEvent::Lost { tag } => {
                    self.out.violations.push(format!(
                        "t={now}: client {}: {ev:?} for its own request {tag}",
                        cl.name
                    ));
                    cl.open.remove(&tag);
                    continue;
                }
                _ => continue,
            };
            let tag = ev.tag();
            if s.torn.iter().any(|(t, _)| *t == tag) {
                self.out.violations.push(format!(
                    "t={now}: client {}: {ev:?} for a submit written halfway and never published",
                    cl.name
                ));
            }
            if ev.is_final() {
                cl.open.remove(&tag);
                s.stats.untabled_read += u64::from(cl.untabled.remove(&tag));
                finals += 1;
                s.stats.served_while_other_dead += u64::from(other_dead);
            }
            got.push(Final { tag, what });
        }
        if cl.lag_ns > 0 {
            s.stats.slow.1 = s.stats.slow.1.max(finals);
        }
        for f in got {
            self.take(Some(Some(f)));
        }
    }

    /// The strategy's action through client processes: one picked at random
    /// places, cancels or cancel-replaces one of its own orders.
    pub(super) fn hub_tick(&mut self) {
        let now = self.net.now;
        let Some(s) = self.shm.as_mut() else { return };
        let n = s.clients.len();
        let c = self.net.rng.range(0, n as i64) as usize;
        let roll = self.net.rng.next_u64() % 100;
        let target = match roll < 50 {
            true => self.ledger.pick_resting(&mut self.net.rng),
            false => None,
        };
        let target = target.filter(|cid| s.owner.get(cid) == Some(&c));
        let Some(client) = s.clients[c].live.as_mut() else {
            return; // its process is dead: its turn passes
        };
        let tag = self.ledger.next_tag();
        let symbol = Symbol::new("BTCUSDT").expect("symbol");
        let mut price = String::new();
        let cid = match client.next_client_order_id() {
            Ok(id) => id,
            Err(_) => return,
        };
        let (kind, placed) = match (&target, roll < 35) {
            (Some(old), true) => {
                let id = ClientOrderId::new(old).expect("an id we issued");
                self.ledger.submitted(tag, Kind::Cancel, id.as_str());
                (Kind::Cancel, None)
            }
            (Some(old), false) => {
                let old_id = ClientOrderId::new(old).expect("an id we issued");
                self.ledger.submitted_replace(
                    tag,
                    Kind::Replace,
                    cid.as_str(),
                    Some(old_id.as_str()),
                );
                (Kind::Replace, Some(cid))
            }
            (None, _) => {
                self.ledger.submitted(tag, Kind::Place, cid.as_str());
                (Kind::Place, Some(cid))
            }
        };
        let mut o = self.new_order(cid, &mut price);
        if kind == Kind::Replace && self.net.rng.chance(100) {
            price = "2000000.00".into();
        }
        o.price = Decimal::new(&price).ok();
        let call = match (kind, &target) {
            (Kind::Cancel, Some(old)) => Call::Cancel(OrderRef {
                symbol,
                client_order_id: ClientOrderId::new(old).expect("an id we issued"),
            }),
            (Kind::Replace, Some(old)) => Call::CancelReplace(CancelReplace {
                cancel: ClientOrderId::new(old).expect("an id we issued"),
                new: o,
            }),
            _ => Call::NewOrder(o),
        };
        let Some(s) = self.shm.as_mut() else { return };
        let cl = &mut s.clients[c];
        if cl.dying == Some(Death::Torn) {
            self.ledger.unprepared(tag);
            if let Some(id) = placed {
                s.torn.push((tag, id.as_str().to_string()));
            }
            match torn_write(cl, &call, tag) {
                Ok(()) => {
                    s.stats.torn.0 += 1;
                    cl.torn_slot = true;
                }
                Err(e) => self
                    .out
                    .violations
                    .push(format!("t={now}: client {}: the torn write: {e}", cl.name)),
            }
            return self.hub_kill(c);
        }
        let Some(client) = cl.live.as_mut() else {
            return;
        };
        match client.submit(&call, Class::Normal, tag) {
            Ok(()) => {
                if std::mem::take(&mut cl.torn_slot) {
                    match slot_holds(cl, &call, tag) {
                        Ok(true) => s.stats.torn.1 += 1,
                        Ok(false) => self.out.violations.push(format!(
                            "t={now}: client {}: its submit after a torn write is not in the torn slot (the simulator's model of the ring)",
                            cl.name
                        )),
                        Err(e) => self
                            .out
                            .violations
                            .push(format!("t={now}: client {}: {e}", cl.name)),
                    }
                }
                cl.pushed += 1;
                cl.open.insert(tag);
                if let Some(id) = placed {
                    s.owner.insert(id.as_str().to_string(), c);
                }
                if matches!(cl.dying, Some(Death::Pushed | Death::Taken)) {
                    // Dead before its flight-table entry: undone where the
                    // client wrote it, as if never written.
                    match unentry(cl, tag) {
                        Ok(true) => {}
                        Ok(false) => self.out.violations.push(format!(
                            "t={now}: client {}: its submit {tag} is not in its flight table",
                            cl.name
                        )),
                        Err(e) => self
                            .out
                            .violations
                            .push(format!("t={now}: client {}: {e}", cl.name)),
                    }
                    cl.untabled.insert(tag);
                }
            }
            Err(ShmSubmitError::Busy | ShmSubmitError::Full) => {
                self.ledger.unprepared(tag);
                return;
            }
            Err(e) => {
                self.ledger.unprepared(tag);
                self.out.violations.push(format!(
                    "t={now}: client {} could not submit: {e:?}",
                    cl.name
                ));
                return;
            }
        }
        match cl.dying {
            Some(Death::AfterSubmit) => self.hub_kill(c),
            Some(Death::Pushed) => {
                s.stats.untabled.0 += 1;
                self.hub_kill(c);
            }
            Some(Death::Taken) => {
                s.stats.untabled.1 += 1;
                self.hub_take();
                self.hub_kill(c);
            }
            _ => {}
        }
    }

    /// The hub's turn between a client's push and that client's next step (it
    /// takes what was pushed): what the turn queued is routed, nothing read.
    fn hub_take(&mut self) {
        let Some(s) = self.shm.as_mut() else { return };
        let mut api = Api::hosted(&mut self.gw, self.net.host(), &s.control);
        s.hub.on_turn(&mut api);
        s.turned_at = self.net.now;
        while let Some(e) = self.gw.poll_event() {
            self.hub_event(e);
        }
    }

    /// At the end: every client's process alive, nothing left in its flight
    /// table (each request's final event read); no submit written halfway ran.
    pub(super) fn hub_end(&mut self) {
        // Each live process reads what waits in its ring before the checks (a
        // slow one may not have had its time since the last events).
        for c in 0..self.shm.as_ref().map_or(0, |s| s.clients.len()) {
            self.hub_read(c);
        }
        let Some(s) = self.shm.as_ref() else { return };
        let orders = self.venue.orders();
        for (tag, cid) in &s.torn {
            if orders.iter().any(|o| &o.client_id == cid) {
                self.out.violations.push(format!(
                    "tag {tag} ({cid}): written halfway into its slot, never published, and it ran at the venue"
                ));
            }
        }
        for cl in &s.clients {
            match &cl.live {
                None => self
                    .out
                    .violations
                    .push(format!("client {}: no process at the end", cl.name)),
                Some(p) if p.in_flight() > 0 || !cl.open.is_empty() => {
                    self.out.violations.push(format!(
                        "client {}: {} requests in its flight table, {:?} without a final event read, at the end",
                        cl.name,
                        p.in_flight(),
                        cl.open
                    ))
                }
                Some(_) => {}
            }
        }
    }
}

/// The memfd of client `cl`'s region, as this process (the hub) holds it.
fn region_file(cl: &Client) -> std::io::Result<std::fs::File> {
    let want = format!("/memfd:ergon-gateway-{} (deleted)", cl.name);
    for e in std::fs::read_dir("/proc/self/fd")? {
        let path = e?.path();
        if std::fs::read_link(&path).is_ok_and(|l| l.as_os_str() == want.as_str()) {
            return std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path);
        }
    }
    Err(std::io::Error::other(format!("no region {want}")))
}

/// Whether the slot at client `cl`'s published tail holds `call` (`tag`) as a
/// submit encodes it, length first.
fn slot_holds(cl: &Client, call: &Call<'_>, tag: u64) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let mut msg = [0u8; SUBMIT_SLOT - LEN_BYTES];
    let n = encode_call(call, Class::Normal, tag, &mut msg)
        .ok_or_else(|| std::io::Error::other("a call too big for a slot"))?;
    let at = SLOTS_AT + (cl.pushed % IN_FLIGHT as u64) as usize * SUBMIT_SLOT;
    let mut got = [0u8; SUBMIT_SLOT];
    region_file(cl)?.read_exact_at(&mut got, at as u64)?;
    Ok(got[..LEN_BYTES] == (n as u32).to_le_bytes() && got[LEN_BYTES..LEN_BYTES + n] == msg[..n])
}

/// Undoes request `tag`'s entry in client `cl`'s flight table (at the end of
/// the region, [`FlightEntry`]'s 16 bytes each: tag, used), through the
/// region's memfd: what a process that died after its push and before the
/// entry leaves. False if no entry in use holds `tag`.
fn unentry(cl: &Client, tag: u64) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let table = SLOTS_AT + IN_FLIGHT * (SUBMIT_SLOT + EVENTS_PER_REQUEST * EVENT_SLOT);
    let entry = std::mem::size_of::<FlightEntry>();
    let f = region_file(cl)?;
    let mut got = vec![0u8; IN_FLIGHT * entry];
    f.read_exact_at(&mut got, table as u64)?;
    for (i, e) in got.chunks_exact(entry).enumerate() {
        let (t, used) = e.split_at(8);
        if t == tag.to_le_bytes() && used != [0; 8] {
            f.write_all_at(&[0; 16], (table + i * entry) as u64)?;
            return Ok(true);
        }
    }
    Ok(false)
}

/// What a process killed halfway through a submit leaves: the slot at its
/// ring's published tail holds the message's length and the first half of its
/// bytes (the rest what an earlier message left), and the tail is never
/// advanced. Written into the region's memfd at the slot's place in its
/// documented layout ([`SLOTS_AT`], [`SUBMIT_SLOT`]), as the client's mapping
/// would.
fn torn_write(cl: &Client, call: &Call<'_>, tag: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut msg = [0u8; SUBMIT_SLOT - LEN_BYTES];
    let n = encode_call(call, Class::Normal, tag, &mut msg)
        .ok_or_else(|| std::io::Error::other("a call too big for a slot"))?;
    let at = SLOTS_AT + (cl.pushed % IN_FLIGHT as u64) as usize * SUBMIT_SLOT;
    let f = region_file(cl)?;
    f.write_all_at(&(n as u32).to_le_bytes(), at as u64)?;
    f.write_all_at(&msg[..n / 2], (at + LEN_BYTES) as u64)
}
