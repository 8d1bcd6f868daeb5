//! One run: the real [`Gateway`] driven on a simulated clock by a random
//! strategy, against the emulator's venue engine ([`SansIo`]) through a faulty
//! network ([`Fate`](crate::net::Fate)), all from one seed. After every step
//! the events are checked as they come (one final event per request); at the
//! end, against the venue's truth ([`crate::check`]).
//!
//! One driver ([`Sim`]) runs every profile: what differs (the venue's account
//! and rules, the strategy, the steps only one profile has) is its adapter's
//! ([`adapter::Adapter`]): Binance Spot ([`spot`]), Bybit
//! ([`crate::venue::bybit`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{IpAddr, Ipv4Addr};

use ergon_core::{Budget, Flight, Ticket};
use ergon_gateway::{Event, Gateway, Prepared, Wire, WATCH_NS};
use ergon_io::client::{Refused, RequestId};
use ergon_io::http::Request;
use ergon_venue_sim::http::Response as SimResponse;
use ergon_venue_sim::sansio::{Admitted, SansIo};
use ergon_venues::binance_spot::BinanceSpot;

use crate::blind::Blind;
use crate::check::{Final, Ledger};
use crate::net::{encode, Fate};
use crate::rng::Rng;
use crate::ws::{Lane, WsStep};

pub(crate) mod adapter;
mod digest;
pub mod hub;
mod params;
pub(crate) mod restart;
mod spot;
mod wire;

use adapter::Adapter;
use digest::Digest;
pub use params::{Outcome, Params};
pub use spot::run;

pub(crate) const MS: i64 = 1_000_000;
pub(crate) const SEC: i64 = 1_000 * MS;
/// Our clock at the start, and the venue's UTC ms then.
pub(crate) const T0: i64 = 1_000 * SEC;
pub(crate) const VENUE_MS0: i64 = 1_700_000_000_000;
/// After the strategy stops, how long every request has to end.
pub const DRAIN_NS: i64 = 600 * SEC;
/// How often a polling run reads the venue's open orders (the daemon polls
/// every 500 ms; every 5 s keeps the simulation fast, an answer holding every
/// resting order, and the watch, 120 s, still sees 24 polls).
const POLL_EVERY_NS: i64 = 5 * SEC;
/// Mixed into the seed for the polling draw (a stream of its own).
const POLLS_STREAM: u64 = 0x0b5e_55ed_1a7e_0000;
/// The gateway's guard around fixed windows' boundaries (and, on rolling
/// windows, their extra length), ms: the daemon's default `--guard-ms`.
pub(crate) const GUARD_MS: i64 = 30;
/// Mixed into the seed for a venue clock step beyond the guard.
const STEP_STREAM: u64 = 0x5e9c_10c4_57e9_0000;
pub(crate) const IP: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// A step of a run, at its time on the queue.
pub(crate) enum Step {
    /// The strategy acts.
    Tick,
    /// The venue bans the IP for this many ms (injected).
    Ban(i64),
    /// A person clears the gateway's halts.
    ClearHalts,
    /// Request `i` reaches the venue.
    Arrive(usize),
    /// The venue runs request `i`, admitted earlier and held.
    Execute(usize, Box<Admitted>),
    /// The venue's answer to request `i` reaches the gateway.
    Reply(usize, SimResponse),
    /// The transport fails request `i`.
    Fail(usize),
    /// Another sender on the gateway's IP reads the book (weight 5).
    Other,
    /// The gateway's process dies.
    Kill,
    /// A new gateway process starts on the dead one's files.
    Restart,
    /// A turn of the loop with nothing else to do (a recovery waiting for room).
    Turn,
    /// The WebSocket lane's network ([`crate::ws`]).
    Ws(WsStep),
    /// The WebSocket API connection drops, whatever it holds.
    WsDrop,
    /// The hub's client processes ([`hub`]).
    Hub(hub::HubStep),
}

/// One request as the network holds it.
pub(crate) struct Out {
    id: RequestId,
    raw: Vec<u8>,
    fate: Fate,
    deadline: i64,
    ticket: Option<Ticket>,
    flight: Option<Flight>,
    /// The transport has reported on it (answer or error): nothing more reaches
    /// the gateway.
    reported: bool,
    /// When the gateway wrote it, and when it reached the venue.
    written_at: i64,
    arrived_at: Option<i64>,
}

/// The gateway's transport: each write gets a fate; nothing is sent twice.
pub(crate) struct Net {
    pub(crate) budget: Budget,
    pub(crate) now: i64,
    pub(crate) rng: Rng,
    faults: bool,
    outs: Vec<Out>,
    /// Requests written this step, to schedule.
    fresh: Vec<usize>,
}

impl Wire for Net {
    fn now(&self) -> i64 {
        self.now
    }

    fn budget(&mut self) -> &mut Budget {
        &mut self.budget
    }

    fn send(
        &mut self,
        req: &Request<'_>,
        t: Ticket,
        deadline_ns: i64,
    ) -> Result<RequestId, Refused> {
        let fate = Fate::draw(&mut self.rng, self.faults);
        let id = RequestId(self.outs.len() as u64 + 1);
        let (ticket, flight) = match fate {
            Fate::NotWritten => (Some(t), None),
            _ => (None, Some(t.sent())),
        };
        self.outs.push(Out {
            id,
            raw: encode(req),
            fate,
            deadline: deadline_ns,
            ticket,
            flight,
            reported: false,
            written_at: self.now,
            arrived_at: None,
        });
        self.fresh.push(self.outs.len() - 1);
        Ok(id)
    }
}

/// The simulation's whole state, on the venue whose adapter is `A`.
pub(crate) struct Sim<A: Adapter = BinanceSpot> {
    pub(crate) gw: Gateway<A>,
    pub(crate) net: Net,
    pub(crate) venue: SansIo,
    queue: BinaryHeap<Reverse<(i64, u64)>>,
    steps: Vec<Option<Step>>,
    pub(crate) ledger: Ledger,
    pub(crate) req: Prepared,
    pub(crate) p: Params,
    pub(crate) out: Outcome,
    pub(crate) end_at: i64,
    clock: VenueClock,
    blind: Blind,
    /// The gateway has heard a ban and no person has cleared it since.
    ban_heard: bool,
    /// Another sender on the IP reads the book this often (0: there is none).
    other_every: i64,
    /// The process faults, in the runs that have them.
    proc: Option<Box<restart::Proc>>,
    /// The WebSocket lane, in the runs that have one.
    ws: Option<Lane>,
    /// The shared-memory hub and its clients, in the runs that have them.
    shm: Option<Box<hub::Shm>>,
    /// What the run did so far, hashed.
    digest: Digest,
    /// Client order ids the strategy believes rest, where it keeps its own
    /// list (Bybit: placed, not yet cancelled).
    pub(crate) resting: Vec<String>,
}

/// How the venue's clock moves against ours.
#[derive(Clone, Copy, Default)]
struct VenueClock {
    /// Drift, in parts per million (ms of venue per ms of ours, minus one).
    drift_ppm: i64,
    /// One step: at our time, by this many ms.
    jump: Option<(i64, i64)>,
}

/// An injected ban: when, for how many ms, and whether a person clears the
/// halt after it.
pub(crate) type Ban = Option<(i64, i64, bool)>;

impl<A: Adapter> Sim<A> {
    /// A run of `seed` under `p` of gateway `gw` (its budget `budget`)
    /// against `venue`, at the start.
    pub(crate) fn new(
        gw: Gateway<A>,
        budget: Budget,
        venue: SansIo,
        seed: u64,
        p: &Params,
    ) -> Sim<A> {
        let mut gw = gw;
        gw.set_seed(seed);
        gw.set_boot_epoch(1).expect("epoch");
        let net = Net {
            budget,
            now: T0,
            rng: Rng::new(seed),
            faults: p.faults,
            outs: Vec::new(),
            fresh: Vec::new(),
        };
        Sim {
            gw,
            net,
            venue,
            queue: BinaryHeap::new(),
            steps: Vec::new(),
            ledger: Ledger::default(),
            req: Prepared::with_capacity(A::REQUEST_BYTES),
            p: *p,
            out: Outcome::default(),
            end_at: T0 + p.seconds * SEC,
            clock: VenueClock::default(),
            blind: Blind::default(),
            ban_heard: false,
            other_every: 0,
            proc: None,
            ws: None,
            shm: None,
            digest: Digest::default(),
            resting: Vec::new(),
        }
    }

    /// The venue's clock: ours plus its offset, which drifts (`drift_ppm`) and
    /// may jump once (`jump`: at, by ms).
    pub(crate) fn venue_ms(&self) -> i64 {
        let since = self.net.now - T0;
        let drift = since / 1_000 * self.clock.drift_ppm / 1_000_000_000;
        let jump = match self.clock.jump {
            Some((at, by)) if self.net.now >= at => by,
            _ => 0,
        };
        VENUE_MS0 + since / MS + drift + jump
    }

    /// Schedules step `s` at our time `t`.
    pub(crate) fn at(&mut self, t: i64, s: Step) {
        self.steps.push(Some(s));
        self.queue.push(Reverse((t, self.steps.len() as u64 - 1)));
    }

    /// An event the gateway returned or queued, checked as it comes.
    fn take(&mut self, ev: Option<Option<Final>>) {
        if let Some(Some(f)) = ev {
            A::heard(self, &f);
            self.digest.event(&f);
            if let Err(v) = self.ledger.on_event(f, self.net.now) {
                self.out.violations.push(v);
            }
        }
    }

    /// An event of the gateway: the process faults' bookkeeping, then the checks.
    pub(crate) fn on_event(&mut self, e: &Event<'_>) {
        if A::hosted(self, e) {
            return;
        }
        self.see(e);
        self.take(Some(Final::of(e)));
    }

    fn drain_gateway(&mut self) {
        if self.dead() {
            return;
        }
        if self.gw.poll_timeout().is_some_and(|t| t <= self.net.now) {
            self.gw.poll(&mut self.net);
        }
        self.proc_turn();
        A::before_events(self);
        while let Some(e) = self.gw.poll_event() {
            self.on_event(&e);
        }
        A::after_events(self);
        self.schedule_fresh();
    }

    /// The gateway's process died with its WebSocket lane, if the run has one.
    fn ws_process_died(&mut self) {
        let mut sched = Vec::new();
        if let Some(lane) = self.ws.as_mut() {
            lane.process_died(self.net.now, &mut sched);
        }
        for (t, s) in sched {
            self.at(t, Step::Ws(s));
        }
    }

    /// The strategy's turn: it acts (as its profile draws) and comes back in 1
    /// to 60 ms, until the run's end or its last action.
    fn tick(&mut self) {
        if self.net.now >= self.end_at || self.out.actions >= self.p.max_actions {
            return;
        }
        let now = self.net.now;
        if self.dead() {
            // The strategy waits for the gateway to come back.
            self.at(now + 10 * MS, Step::Tick);
            return;
        }
        self.out.actions += 1;
        let t = now + self.net.rng.range(MS, 60 * MS);
        self.at(t, Step::Tick);
        A::act(self);
    }

    fn step(&mut self, s: Step) {
        match s {
            Step::Tick => self.tick(),
            Step::Ban(ms) => {
                self.out.bans += 1;
                let now_ms = self.venue_ms();
                self.venue.ban(IP, ms, now_ms);
            }
            Step::ClearHalts if self.dead() => {
                // The person waits for the gateway to come back.
                self.at(self.net.now + SEC, Step::ClearHalts);
            }
            Step::ClearHalts => {
                self.ban_heard = false;
                self.gw.clear_halts(&mut self.net);
            }
            Step::Arrive(i) => self.arrive(i),
            Step::Execute(i, a) => {
                let r = self.venue.execute(*a, self.venue_ms());
                if self.net.outs[i].fate == Fate::Queued {
                    self.answer(i, r);
                }
            }
            Step::Reply(i, r) => self.reply(i, &r),
            Step::Fail(i) => self.fail(i),
            Step::Kill => {
                self.kill();
                self.ws_process_died();
            }
            Step::Restart => self.restart(),
            Step::Turn => {}
            s => A::own_step(self, s),
        }
        self.drain_gateway();
    }

    /// The venue's clock drifts up to 200 ppm either way (4 ms over 20 s); in a
    /// fifth of the runs it also steps by up to 20 ms, inside the gateway's 30
    /// ms guard; with `beyond`, in a tenth of the runs (a stream of its own)
    /// by 30 to 250 ms either way instead.
    pub(crate) fn arm_clock(&mut self, seed: u64, beyond: bool) {
        // Binance counts every interval by its own server time ("a 1 MINUTE
        // interval starts every minute", developers.binance.com/docs/
        // binance-spot-api-docs/rest-api/limits) and states no bound on how that
        // clock moves against UTC or ours (it publishes it, `GET /api/v3/time`
        // `serverTime`, and refuses a `timestamp` 1000 ms ahead of it or older than
        // `recvWindow`: .../rest-api/request-security). NTP corrections, leap smears
        // and a failover to another matching engine step it: beyond the guard,
        // the venue's windows move away from the budget's until the gateway
        // re-anchors.
        let p = self.p;
        if p.faults {
            let r = &mut self.net.rng;
            self.clock.drift_ppm = r.range(-200, 201);
            let by = match r.next_u64() % 5 {
                0 => r.range(-20, 21),
                _ => 0,
            };
            if by != 0 {
                self.clock.jump = Some((T0 + r.range(0, p.seconds * SEC), by));
            }
            let mut steps = Rng::new(seed ^ STEP_STREAM);
            if beyond && steps.chance(100) {
                let by = steps.range(30, 251);
                let by = if steps.chance(500) { -by } else { by };
                self.clock.jump = Some((T0 + steps.range(0, p.seconds * SEC), by));
            }
        }
        if let Some((at_ms, by)) = p.force_step {
            self.clock.jump = Some((T0 + at_ms * MS, by));
        }
        self.blind = Blind::new(self.clock.jump, GUARD_MS);
    }

    /// A third of the runs meet a ban; a person clears the halt after it ends,
    /// or (one in two) is away for the rest of the run. Returns the ban.
    pub(crate) fn arm_ban(&mut self) -> Ban {
        let p = self.p;
        let ban = match p.force_ban {
            Some((at_s, secs, cleared)) => Some((T0 + at_s * SEC, secs * 1_000, cleared)),
            None if p.faults && p.bans && self.net.rng.chance(333) => {
                let at = T0 + self.net.rng.range(0, p.seconds * SEC);
                let ms = self.net.rng.range(2_000, 30_000);
                Some((at, ms, self.net.rng.chance(500)))
            }
            None => None,
        };
        if let Some((at, ms, cleared)) = ban {
            self.at(at, Step::Ban(ms));
            if cleared {
                let clear = at + ms * MS + self.net.rng.range(0, 10 * SEC);
                self.at(clear, Step::ClearHalts);
            }
        }
        ban
    }

    /// Half the runs poll the venue's open orders as the daemon does: an order
    /// whose request ended Unresolved and that rests at the venue is then owed
    /// a Late within the watch. Drawn from its own stream of the seed, so the
    /// runs that do not poll stay what they were. Whether this one does.
    pub(crate) fn arm_polls(&mut self, seed: u64) -> bool {
        let polls = self.p.faults && Rng::new(seed ^ POLLS_STREAM).chance(500);
        if polls {
            self.gw.poll_open_orders(POLL_EVERY_NS);
        }
        polls
    }

    /// Runs the steps until every request ended after the strategy stopped (or
    /// the drain's end). Whether the run settled (with `polls`: no Late still
    /// owed within its watch).
    pub(crate) fn drive(&mut self, polls: bool) -> bool {
        let stop_at = self.end_at + DRAIN_NS;
        let mut awaiting: Option<Vec<u64>> = None;
        loop {
            let next_q = self.queue.peek().map(|Reverse((t, _))| *t);
            let next_w = self.ws.as_ref().and(self.gw.ws_deadline());
            let next_g = match self.dead() {
                true => None,
                false => match (self.gw.poll_timeout(), next_w) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                },
            };
            let next = match (next_q, next_g) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => match a.or(b) {
                    Some(t) => t,
                    None => return false,
                },
            };
            // A gateway down at the drain's end waits for its restart: the
            // daemon starts again only past a ban its halts file records (Bybit's
            // 403: 10 minutes, longer than the drain), and the orders its journal
            // keeps end in that next life.
            if next > stop_at && !self.dead() {
                return false;
            }
            self.net.now = self.net.now.max(next);
            self.out.steps += 1;
            match next_q {
                Some(t) if t <= self.net.now => {
                    let Reverse((_, k)) = self.queue.pop().expect("peeked");
                    let s = self.steps[k as usize].take().expect("each step once");
                    self.digest.step(self.net.now, Some(&s));
                    self.step(s);
                }
                _ => {
                    self.digest.step(self.net.now, None);
                    self.drain_gateway();
                }
            }
            if self.gw.in_flight() == 0 && self.queue.is_empty() && self.net.now >= self.end_at {
                // With polls, on while a Late may still be owed: an order that ended
                // Unresolved rests at the venue and its watch has not had its time.
                let watched_until = self
                    .ledger
                    .last_unresolved_ns()
                    .saturating_add(WATCH_NS + SEC);
                // Which orders are owed one is read from the venue once, at the drain.
                let owed = match (polls, &awaiting) {
                    (false, _) => &[][..],
                    (true, Some(tags)) => &tags[..],
                    (true, None) => awaiting.insert(self.ledger.owed_late(&self.venue.orders())),
                };
                if self.net.now >= watched_until || owed.iter().all(|&t| self.ledger.has_late(t)) {
                    return true;
                }
            }
        }
    }

    /// What the run saw, with the end's checks against the venue's truth
    /// (`polls`: the run polled open orders; `ban`: the one it injected;
    /// `settled`: [`Sim::drive`]'s).
    pub(crate) fn finish(&mut self, polls: bool, ban: Ban, settled: bool) -> Outcome {
        let uncleared_ban = ban.is_some_and(|(_, _, cleared)| !cleared);
        self.out.throttled = self.gw.stats().throttled;
        let kills = self.proc.as_ref().map_or(0, |p| p.kills);
        self.out.throttled += self.proc.as_ref().map_or(0, |p| p.throttled);
        self.out.kills = kills;
        self.out.recovered = self.proc.as_ref().map_or((0, 0), |p| p.recovered());
        self.out.blind_throttled = (self.blind.throttled, self.blind.orders);
        self.out.blind_bans = self.blind.bans;
        let mut out = std::mem::take(&mut self.out);
        out.digest = self.digest.value();
        out.tally = self.ledger.tally();
        out.ws = self.gw.ws_api().map(|l| *l.stats());
        out.clients = self.shm.as_ref().map(|s| s.stats);
        out.ws_logons = self
            .ws
            .as_ref()
            .map_or((0, 0), |l| (l.logons, l.unsigned_orders));
        let (report, orders) = (self.venue.report(), self.venue.orders());
        out.violations.extend(self.ledger.at_end(
            &report,
            &orders,
            self.gw.in_flight(),
            out.bans + out.blind_bans,
            // A restart's bootstrap holds until the dead process's charges leave
            // it room: a refusal is a failure of its own, never an excuse.
            self.other_every > 0,
            out.blind_throttled,
        ));
        // A Late is owed where nothing excused it: the gateway polled, no ban stayed
        // uncleared (its halt keeps the watch and refuses the polls; a ban the
        // gateway heard and nobody cleared, as an injected one), no watch was
        // dropped for room, and the run lasted past every watch.
        // A kill drops the watches (the next life queries what its journal kept).
        let uncleared_ban = uncleared_ban || self.ban_heard;
        // So does a hub client's (the gateway polls only while one that asked is on).
        let kills = kills + out.clients.map_or(0, |c| c.kills);
        let owed =
            polls && !uncleared_ban && self.gw.stats().watch_dropped == 0 && settled && kills == 0;
        out.violations.extend(self.ledger.lates_owed(&orders, owed));
        out
    }
}
