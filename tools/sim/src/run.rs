//! One run: the real [`Gateway`] on Binance Spot, driven on a simulated clock by a
//! random strategy, against the emulator's venue engine ([`SansIo`]) through a
//! faulty network ([`Fate`]), all from one seed. After every step the events are
//! checked as they come (one final event per request); at the end, against the
//! venue's truth ([`crate::check`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{IpAddr, Ipv4Addr};

use ergon_core::{Budget, Builder, Class, Flight, Ticket};
use ergon_gateway::{Event, Gateway, Prepared, Wire, WATCH_NS};
use ergon_io::client::{Refused, RequestId, Sent};
use ergon_io::http::Request;
use ergon_venue_sim::http::Response as SimResponse;
use ergon_venue_sim::sansio::{Admitted, Received, SansIo};
use ergon_venue_sim::{
    Account as SimAccount, Config, Interval, LimitType, RateLimit, ED25519_TEST_PRIVATE_PEM,
};
use ergon_venues::adapt::Clock;
use ergon_venues::binance_replace::ReplaceMode;
use ergon_venues::binance_spot::{Auth, BinanceSpot};
use ergon_venues::endpoint::{
    is_pem_private_key, CancelReplace, ClientOrderId, Decimal, Ed25519Key, Endpoints, NewOrder,
    OrderRef, OrderType, Side, Symbol, TimeInForce,
};
use ergon_venues::response::{Header, Response};

use crate::blind::Blind;
use crate::check::{Final, Kind, Ledger};
use crate::net::{encode, Fate};
use crate::rng::Rng;
use crate::ws::{self, Lane, WsStep};

mod digest;
pub mod hub;
mod params;
mod restart;

use digest::Digest;
pub use params::{Outcome, Params};

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;
/// Our clock at the start, and the venue's UTC ms then.
const T0: i64 = 1_000 * SEC;
const VENUE_MS0: i64 = 1_700_000_000_000;
/// After the strategy stops, how long every request has to end.
pub const DRAIN_NS: i64 = 600 * SEC;
/// How often a polling run reads the venue's open orders (the daemon polls
/// every 500 ms; every 5 s keeps the simulation fast, an answer holding every
/// resting order, and the watch, 120 s, still sees 24 polls).
const POLL_EVERY_NS: i64 = 5 * SEC;
/// Mixed into the seed for the polling draw (a stream of its own).
const POLLS_STREAM: u64 = 0x0b5e_55ed_1a7e_0000;
/// Mixed into the seed for the other sender on the IP.
const OTHERS_STREAM: u64 = 0x07e3_5e4d_e500_0000;
/// The gateway's guard around fixed windows' boundaries, ms.
const GUARD_MS: i64 = 30;
/// Mixed into the seed for a venue clock step beyond the guard.
const STEP_STREAM: u64 = 0x5e9c_10c4_57e9_0000;
/// Mixed into the seed for the WebSocket lane's draw and network.
const WS_STREAM: u64 = 0x5eb5_0c6e_7000_0000;
/// Mixed into the seed for the Ed25519 key's draw (a stream of its own: the
/// other runs stay what they were).
const LOGON_STREAM: u64 = 0x106e_d255_1900_0000;
const IP: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

enum Step {
    Tick,
    /// The venue bans the IP for this many ms (injected).
    Ban(i64),
    /// A person clears the gateway's halts.
    ClearHalts,
    Arrive(usize),
    Execute(usize, Box<Admitted>),
    Reply(usize, SimResponse),
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
struct Out {
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
struct Net {
    budget: Budget,
    now: i64,
    rng: Rng,
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

/// The simulation's whole state.
struct Sim {
    gw: Gateway<BinanceSpot>,
    net: Net,
    venue: SansIo,
    queue: BinaryHeap<Reverse<(i64, u64)>>,
    steps: Vec<Option<Step>>,
    ledger: Ledger,
    req: Prepared,
    p: Params,
    out: Outcome,
    end_at: i64,
    clock: VenueClock,
    blind: Blind,
    /// The gateway has heard a ban (a 418) and no person has cleared it since.
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
}

/// How the venue's clock moves against ours.
#[derive(Clone, Copy, Default)]
struct VenueClock {
    /// Drift, in parts per million (ms of venue per ms of ours, minus one).
    drift_ppm: i64,
    /// One step: at our time, by this many ms.
    jump: Option<(i64, i64)>,
}

/// The venue's limits: small, so that the strategy runs near them.
fn venue_config() -> Config {
    let mut c = Config::binance_spot();
    c.rate_limits = vec![
        RateLimit::new(LimitType::RequestWeight, Interval::Second, 1, 60),
        RateLimit::new(LimitType::Orders, Interval::Second, 1, 10),
        RateLimit::new(LimitType::Orders, Interval::Day, 1, 1_000_000),
        RateLimit::new(LimitType::RawRequests, Interval::Minute, 5, 1_000_000),
    ];
    c
}

impl Sim {
    /// The venue's clock: ours plus its offset, which drifts (`drift_ppm`) and
    /// may jump once (`jump`: at, by ms).
    fn venue_ms(&self) -> i64 {
        let since = self.net.now - T0;
        let drift = since / 1_000 * self.clock.drift_ppm / 1_000_000_000;
        let jump = match self.clock.jump {
            Some((at, by)) if self.net.now >= at => by,
            _ => 0,
        };
        VENUE_MS0 + since / MS + drift + jump
    }

    fn at(&mut self, t: i64, s: Step) {
        self.steps.push(Some(s));
        self.queue.push(Reverse((t, self.steps.len() as u64 - 1)));
    }

    /// Latency of one leg, 0.2 to 3 ms.
    fn leg(&mut self) -> i64 {
        self.net.rng.range(200_000, 3 * MS)
    }

    /// Schedules what the network does with each request written this step.
    fn schedule_fresh(&mut self) {
        for i in std::mem::take(&mut self.net.fresh) {
            self.out.writes += 1;
            if self.ban_heard && self.net.outs[i].fate != Fate::NotWritten {
                let t = self.net.now;
                self.out.violations.push(format!(
                    "t={t}: a request written after the gateway heard a ban, before a person cleared it"
                ));
            }
            let now = self.net.now;
            self.digest.word(self.net.outs[i].fate as u64);
            self.digest.bytes(&self.net.outs[i].raw);
            match self.net.outs[i].fate {
                Fate::NotWritten => {
                    let t = now + self.leg();
                    self.at(t, Step::Fail(i));
                }
                Fate::LostBefore => {
                    let t = now + self.net.rng.range(MS, 500 * MS);
                    self.at(t, Step::Fail(i));
                }
                _ => {
                    let t = now + self.leg();
                    self.at(t, Step::Arrive(i));
                }
            }
        }
    }

    /// An answer leaves the venue now: it reaches the gateway unless the request's
    /// deadline comes first (then the transport fails it there).
    fn answer(&mut self, i: usize, r: SimResponse) {
        let t = self.net.now + self.leg();
        let deadline = self.net.outs[i].deadline;
        match t > deadline {
            true => self.at(deadline.max(self.net.now), Step::Fail(i)),
            false => self.at(t, Step::Reply(i, r)),
        }
    }

    fn arrive(&mut self, i: usize) {
        self.net.outs[i].arrived_at = Some(self.net.now);
        let now_ms = self.venue_ms();
        let fate = self.net.outs[i].fate;
        let a = match self.venue.admit(&self.net.outs[i].raw, IP, now_ms) {
            Received::Answer(r) => return self.answer(i, r),
            Received::Run(a) => a,
        };
        match fate {
            Fate::Queued => {
                let t = self.net.now + self.net.rng.range(10 * MS, 8 * SEC);
                self.at(t, Step::Execute(i, Box::new(a)));
            }
            Fate::QueuedCut => {
                let t = self.net.now + self.net.rng.range(10 * MS, 4 * SEC);
                self.at(t, Step::Execute(i, Box::new(a)));
                let cut = self.net.now + self.leg();
                self.at(cut, Step::Fail(i));
            }
            Fate::AnswerLost => {
                self.venue.execute(a, now_ms);
                let t = self.net.now + self.leg();
                self.at(t, Step::Fail(i));
            }
            Fate::ErrorAfterRun => {
                self.venue.execute(a, now_ms);
                let r = self.venue.server_error(true);
                self.answer(i, r);
            }
            Fate::ErrorNoRun => {
                self.venue.drop_unexecuted(a);
                let r = self.venue.server_error(false);
                self.answer(i, r);
            }
            _ => {
                let r = self.venue.execute(a, now_ms);
                self.answer(i, r);
            }
        }
    }

    fn reply(&mut self, i: usize, r: &SimResponse) {
        let o = &mut self.net.outs[i];
        if o.reported {
            return;
        }
        o.reported = true;
        let (id, flight) = (o.id, o.flight.take().expect("a written request"));
        self.ban_heard |= r.status == 418;
        self.digest.word(u64::from(r.status));
        self.digest.bytes(r.body.as_bytes());
        self.see_step(i, r);
        let mut hs: Vec<(String, String)> = r.headers.clone();
        hs.push(("Content-Type".into(), r.content_type.into()));
        let headers: Vec<Header<'_>> = hs
            .iter()
            .map(|(k, v)| Header {
                name: k.as_bytes(),
                value: v.as_bytes(),
            })
            .collect();
        let resp = Response {
            status: r.status,
            headers: &headers,
            body: r.body.as_bytes(),
        };
        if let Some(e) = self.gw.on_response(&mut self.net, id, resp, flight) {
            self.on_event(&e);
        }
    }

    fn fail(&mut self, i: usize) {
        let o = &mut self.net.outs[i];
        if o.reported {
            return;
        }
        o.reported = true;
        let sent = match (o.ticket.take(), o.flight.take()) {
            (Some(t), _) => Sent::No(t),
            (None, Some(f)) => Sent::Maybe(f),
            (None, None) => return,
        };
        let id = o.id;
        if let Some(e) = self.gw.on_error(&mut self.net, id, sent) {
            self.on_event(&e);
        }
    }

    /// Tracks what the gateway could know of the venue clock's step (`Blind`)
    /// as answer `i` reaches it.
    fn see_step(&mut self, i: usize, r: &SimResponse) {
        let o = &self.net.outs[i];
        if o.arrived_at
            .is_some_and(|t| self.blind.blind(o.written_at, t))
        {
            self.blind.refused(r.status, r.body.contains("-1015"));
        }
        let stamped = r.body.contains("\"transactTime\"") || r.body.contains("\"serverTime\"");
        if stamped && self.blind.dates(o.written_at, self.net.now) {
            self.blind.seen(self.net.now);
        }
    }

    /// An event the gateway returned or queued, checked as it comes.
    fn take(&mut self, ev: Option<Option<Final>>) {
        if let Some(Some(f)) = ev {
            self.digest.event(&f);
            if let Err(v) = self.ledger.on_event(f, self.net.now) {
                self.out.violations.push(v);
            }
        }
    }

    /// An event of the gateway: the process faults' bookkeeping, then the checks.
    fn on_event(&mut self, e: &Event<'_>) {
        if self.hub_run() {
            return self.hub_event(*e);
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
        self.drive_ws();
        while let Some(e) = self.gw.poll_event() {
            self.on_event(&e);
        }
        self.hub_turn();
        self.schedule_fresh();
    }

    /// Drives the WebSocket lane, if the run has one: its events are checked,
    /// what it wrote goes on its way.
    fn drive_ws(&mut self) {
        let Some(mut lane) = self.ws.take() else {
            return;
        };
        let (mut got, mut sched) = (Vec::new(), Vec::new());
        let take = &mut |e| got.push(e);
        lane.drive(
            &mut self.gw,
            &mut self.net,
            self.ban_heard,
            take,
            &mut sched,
        );
        self.ws = Some(lane);
        // As the daemon's driver hands the lane's events to its hub: the
        // process's bookkeeping (journal, recovery), then the checks.
        for e in got {
            self.on_event(&e);
        }
        for (t, s) in sched {
            self.at(t, Step::Ws(s));
        }
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

    /// One step of the WebSocket lane's network.
    fn ws_step(&mut self, s: Option<WsStep>) {
        let Some(mut lane) = self.ws.take() else {
            return;
        };
        let (now, now_ms) = (self.net.now, self.venue_ms());
        let mut sched = Vec::new();
        match s {
            Some(s) => lane.step(
                s,
                &mut self.gw,
                &mut self.venue,
                (now, now_ms),
                &mut self.ban_heard,
                &mut self.blind,
                &mut sched,
                &mut self.out.violations,
            ),
            None => lane.random_drop(now, &mut sched),
        }
        self.ws = Some(lane);
        for (t, s) in sched {
            self.at(t, Step::Ws(s));
        }
    }

    /// The strategy: places near the book, cancels what it believes rests.
    /// A limit order of `cid` near the book, at a random price and side.
    fn new_order(&mut self, cid: ClientOrderId, price: &mut String) -> NewOrder<'static> {
        let cents = 3_000_000 + self.net.rng.range(-500, 500);
        *price = format!("{}.{:02}", cents / 100, cents % 100);
        NewOrder {
            symbol: Symbol::new("BTCUSDT").expect("symbol"),
            side: if cents % 2 == 0 {
                Side::Buy
            } else {
                Side::Sell
            },
            order_type: OrderType::Limit(TimeInForce::Gtc),
            price: None,
            quantity: Decimal::new("0.010").expect("qty"),
            client_order_id: cid,
            reduce_only: false,
        }
    }

    /// The strategy: places near the book, cancels or cancel-replaces what it
    /// believes rests.
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
        if self.hub_run() {
            return self.hub_tick();
        }
        let roll = self.net.rng.next_u64() % 100;
        let target = match roll < 50 {
            true => self.ledger.pick_resting(&mut self.net.rng),
            false => None,
        };
        let tag = self.ledger.next_tag();
        let symbol = Symbol::new("BTCUSDT").expect("symbol");
        let mut price = String::new();
        let prepared = match target {
            Some(old) if roll < 35 => {
                let cid = ClientOrderId::new(&old).expect("an id we issued");
                let r = OrderRef {
                    symbol,
                    client_order_id: cid,
                };
                self.ledger.submitted(tag, Kind::Cancel, cid.as_str());
                self.gw.venue_mut().cancel(&mut self.req, &r, now).is_ok()
            }
            Some(old) => {
                let Ok(cid) = self.gw.next_client_order_id() else {
                    return;
                };
                let mut new = self.new_order(cid, &mut price);
                // One in ten asks a price above BTCUSDT's maxPrice (1,000,000):
                // the venue refuses the new part after the cancel ran.
                if self.net.rng.chance(100) {
                    price = "2000000.00".into();
                }
                new.price = Decimal::new(&price).ok();
                let old = ClientOrderId::new(&old).expect("an id we issued");
                let r = CancelReplace { cancel: old, new };
                self.ledger
                    .submitted_replace(tag, Kind::Replace, cid.as_str(), Some(old.as_str()));
                self.gw
                    .venue_mut()
                    .cancel_replace(&mut self.req, &r, now)
                    .is_ok()
            }
            None => {
                let Ok(cid) = self.gw.next_client_order_id() else {
                    return;
                };
                let mut o = self.new_order(cid, &mut price);
                o.price = Decimal::new(&price).ok();
                self.ledger.submitted(tag, Kind::Place, cid.as_str());
                self.gw
                    .venue_mut()
                    .new_order(&mut self.req, &o, now)
                    .is_ok()
            }
        };
        if !prepared {
            self.ledger.unprepared(tag);
            return;
        }
        if !self.journal_new(tag) {
            return;
        }
        if let Err(e) = self
            .gw
            .submit(&mut self.net, &mut self.req, Class::Normal, tag)
        {
            self.on_event(&e);
        }
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
            Step::Other => self.other(),
            Step::Kill => {
                self.kill();
                self.ws_process_died();
            }
            Step::Restart => self.restart(),
            Step::Turn => {}
            Step::Ws(s) => self.ws_step(Some(s)),
            Step::WsDrop => self.ws_step(None),
            Step::Hub(s) => self.hub_step(s),
        }
        self.drain_gateway();
    }

    /// Another sender on the IP (a second process, a script) reads the book: it
    /// spends the IP's weight the gateway shares, and backs off as the venue says
    /// when refused (so a ban is never its doing). It stops with the strategy.
    fn other(&mut self) {
        let now_ms = self.venue_ms();
        let raw = b"GET /api/v3/depth?symbol=BTCUSDT&limit=5 HTTP/1.1\r\nHost: sim\r\n\r\n";
        let wait = match self.venue.admit(raw, IP, now_ms) {
            Received::Answer(r) => {
                let after = r
                    .headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("retry-after"));
                after.and_then(|(_, v)| v.parse::<i64>().ok()).unwrap_or(1) * SEC
            }
            Received::Run(a) => {
                self.out.other_reads += 1;
                self.venue.execute(a, now_ms);
                self.other_every
            }
        };
        let t = self.net.now + wait.max(self.other_every);
        if t < self.end_at {
            self.at(t, Step::Other);
        }
    }
}

/// The gateway's Binance Spot account: its limits from the venue's `info`
/// (exchangeInfo) into `b`, its clock anchored at `now` on the venue's
/// `venue_ms`, signed with `keys` (API key, and an HMAC secret or an Ed25519
/// private key's PKCS#8 PEM).
fn spot(
    info: &str,
    keys: &(String, String),
    b: &mut Builder,
    now: i64,
    venue_ms: i64,
) -> BinanceSpot {
    BinanceSpot::from_exchange_info(
        info.as_bytes(),
        b,
        Clock::anchor(now, venue_ms),
        GUARD_MS * MS,
    )
    .expect("the venue's exchangeInfo")
    .with_auth(match is_pem_private_key(keys.1.as_bytes()) {
        true => {
            let key = Ed25519Key::from_pkcs8_pem(&keys.1).expect("an Ed25519 key");
            Auth::ed25519(&keys.0, key, 5_000).expect("keys")
        }
        false => Auth::new(&keys.0, keys.1.as_bytes(), 5_000).expect("keys"),
    })
}

/// Runs `seed` under `p`.
pub fn run(seed: u64, p: &Params) -> Outcome {
    // Half the runs send over the WebSocket API lane as the daemon does (HTTP
    // while it is down), drawn from a stream of their own.
    let mut ws_rng = Rng::new(seed ^ WS_STREAM);
    let drawn = ws_rng.chance(500);
    // An eighth of the runs drive the shared-memory hub instead (no lane).
    let (hub_on, hub_rng) = hub::draw(seed, p);
    // A lane a directed test asks for wins over a hub the seed drew.
    let hub_on = hub_on && (p.hub.is_some() || p.ws_lane != Some(true));
    let has_lane = p.ws_lane.unwrap_or(drawn) && !hub_on;
    // One lane run in twenty signs with an Ed25519 key (the emulator's test
    // key, its public key given to the venue): the lane logs on before its
    // user data subscription, on every connection, and sends orders unsigned.
    // Few, because such a run costs about five times the CPU of an HMAC one
    // (every request is still signed, and verified, with Ed25519 as a REST
    // request first): in half the lane runs it doubled the simulator's CPU.
    let logon = Rng::new(seed ^ LOGON_STREAM).chance(50);
    let mut cfg = venue_config();
    if p.ed25519.unwrap_or(has_lane && logon) {
        cfg.accounts = vec![SimAccount::ed25519_test()];
    }
    let account = cfg.accounts[0].clone();
    let mut venue = SansIo::new(cfg);
    let info = match venue.admit(
        b"GET /api/v3/exchangeInfo HTTP/1.1\r\nHost: sim\r\n\r\n",
        IP,
        VENUE_MS0,
    ) {
        Received::Answer(r) => r.body,
        Received::Run(a) => venue.execute(a, VENUE_MS0).body,
    };
    let mut b = Budget::builder();
    let secret = match account.ed25519_public_key {
        Some(_) => ED25519_TEST_PRIVATE_PEM.to_string(),
        None => account.secret.clone(),
    };
    let keys = (account.api_key.clone(), secret);
    let acct = spot(&info, &keys, &mut b, T0, VENUE_MS0);
    let ws_connects = has_lane.then(|| ws::declare(&mut b));
    let budget = b.build(T0).expect("budget");
    let lane = ws_connects.map(|c| ws::lane(&acct, c, &budget, seed));
    let mut gw = Gateway::new(acct, "BTCUSDT", 64, 1024).expect("gateway");
    if let Some(lane) = lane {
        gw.set_ws_api(lane);
    }
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
    let mut sim = Sim {
        gw,
        net,
        venue,
        queue: BinaryHeap::new(),
        steps: Vec::new(),
        ledger: Ledger::default(),
        req: Prepared::with_capacity(1024),
        p: *p,
        out: Outcome::default(),
        end_at: T0 + p.seconds * SEC,
        clock: VenueClock::default(),
        blind: Blind::default(),
        ban_heard: false,
        other_every: 0,
        proc: None,
        shm: None,
        ws: ws_connects.map(|_| Lane::new(ws_rng.next_u64(), p.faults, IP)),
        digest: Digest::default(),
    };
    // The venue's clock drifts up to 200 ppm either way (4 ms over 20 s); in a
    // fifth of the runs it also steps by up to 20 ms, inside the gateway's 30 ms
    // guard. Binance counts every interval by its own server time ("a 1 MINUTE
    // interval starts every minute", developers.binance.com/docs/
    // binance-spot-api-docs/rest-api/limits) and states no bound on how that
    // clock moves against UTC or ours (it publishes it, `GET /api/v3/time`
    // `serverTime`, and refuses a `timestamp` 1000 ms ahead of it or older than
    // `recvWindow`: .../rest-api/request-security). NTP corrections, leap smears
    // and a failover to another matching engine step it, so in a tenth of the
    // runs (a stream of its own: the other runs stay what they were) the step is
    // 30 to 250 ms either way instead: beyond the guard, where the venue's
    // windows move away from the budget's until the gateway re-anchors.
    if p.faults {
        let r = &mut sim.net.rng;
        sim.clock.drift_ppm = r.range(-200, 201);
        let by = match r.next_u64() % 5 {
            0 => r.range(-20, 21),
            _ => 0,
        };
        if by != 0 {
            sim.clock.jump = Some((T0 + r.range(0, p.seconds * SEC), by));
        }
        let mut steps = Rng::new(seed ^ STEP_STREAM);
        if steps.chance(100) {
            let by = steps.range(30, 251);
            let by = if steps.chance(500) { -by } else { by };
            sim.clock.jump = Some((T0 + steps.range(0, p.seconds * SEC), by));
        }
    }
    if let Some((at_ms, by)) = p.force_step {
        sim.clock.jump = Some((T0 + at_ms * MS, by));
    }
    sim.blind = Blind::new(sim.clock.jump, GUARD_MS);
    // Half the runs cancel-replace with ALLOW_FAILURE (the new order is tried
    // whether the cancel ran or not), half with the default STOP_ON_FAILURE.
    let allow_failure = sim.net.rng.chance(500);
    if allow_failure {
        sim.gw
            .venue_mut()
            .set_replace_mode(ReplaceMode::AllowFailure);
    }
    sim.at(T0, Step::Tick);
    // A third of the runs meet a ban; a person clears the halt after it ends, or
    // (one in two) is away for the rest of the run.
    let ban = match p.force_ban {
        Some((at_s, secs, cleared)) => Some((T0 + at_s * SEC, secs * 1_000, cleared)),
        None if p.faults && p.bans && sim.net.rng.chance(333) => {
            let at = T0 + sim.net.rng.range(0, p.seconds * SEC);
            let ms = sim.net.rng.range(2_000, 30_000);
            Some((at, ms, sim.net.rng.chance(500)))
        }
        None => None,
    };
    if let Some((at, ms, cleared)) = ban {
        sim.at(at, Step::Ban(ms));
        if cleared {
            let clear = at + ms * MS + sim.net.rng.range(0, 10 * SEC);
            sim.at(clear, Step::ClearHalts);
        }
    }
    // Half the runs poll the venue's open orders as the daemon does: an order whose
    // request ended Unresolved and that rests at the venue is then owed a Late
    // within the watch. Drawn from its own stream of the seed, so the runs that do
    // not poll stay what they were.
    let polls = p.faults && Rng::new(seed ^ POLLS_STREAM).chance(500);
    if polls {
        sim.gw.poll_open_orders(POLL_EVERY_NS);
    }
    // A quarter of the runs share the IP with another sender reading the book
    // every 100 to 500 ms: 10 to 50 of the IP's 60 weight a second. The gateway
    // may meet 429s it did not cause then, never a ban.
    let mut others = Rng::new(seed ^ OTHERS_STREAM);
    if p.faults && others.chance(250) {
        sim.other_every = others.range(100 * MS, 500 * MS);
        sim.at(T0 + others.range(0, SEC), Step::Other);
    }
    // A share of the runs run the shared-memory hub and its client processes;
    // the others may kill the gateway and restart it on the daemon's files
    // (with its WebSocket lane, in the runs that have one).
    if hub_on {
        sim.arm_hub(seed, hub_rng, polls);
    } else {
        let start = restart::Start {
            keys,
            allow_failure,
            polls,
        };
        sim.arm_kills(seed, start);
    }
    // The WebSocket API connection drops up to twice at random, whatever it
    // holds in flight.
    if let Some(lane) = sim.ws.as_mut() {
        let n = ws_rng.next_u64() % 3;
        let drops: Vec<i64> = (0..n)
            .filter_map(|_| lane.drop_at(T0, p.seconds * SEC))
            .collect();
        for t in drops {
            sim.at(t, Step::WsDrop);
        }
    }
    let uncleared_ban = ban.is_some_and(|(_, _, cleared)| !cleared);
    let stop_at = sim.end_at + DRAIN_NS;
    let mut settled = false;
    let mut awaiting: Option<Vec<u64>> = None;
    loop {
        let next_q = sim.queue.peek().map(|Reverse((t, _))| *t);
        let next_w = sim.ws.as_ref().and(sim.gw.ws_deadline());
        let next_g = match sim.dead() {
            true => None,
            false => match (sim.gw.poll_timeout(), next_w) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        };
        let next = match (next_q, next_g) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => match a.or(b) {
                Some(t) => t,
                None => break,
            },
        };
        if next > stop_at {
            break;
        }
        sim.net.now = sim.net.now.max(next);
        sim.out.steps += 1;
        match next_q {
            Some(t) if t <= sim.net.now => {
                let Reverse((_, k)) = sim.queue.pop().expect("peeked");
                let s = sim.steps[k as usize].take().expect("each step once");
                sim.digest.step(sim.net.now, Some(&s));
                sim.step(s);
            }
            _ => {
                sim.digest.step(sim.net.now, None);
                sim.drain_gateway();
            }
        }
        if sim.gw.in_flight() == 0 && sim.queue.is_empty() && sim.net.now >= sim.end_at {
            // With polls, on while a Late may still be owed: an order that ended
            // Unresolved rests at the venue and its watch has not had its time.
            let watched_until = sim
                .ledger
                .last_unresolved_ns()
                .saturating_add(WATCH_NS + SEC);
            // Which orders are owed one is read from the venue once, at the drain.
            let owed = match (polls, &awaiting) {
                (false, _) => &[][..],
                (true, Some(tags)) => &tags[..],
                (true, None) => awaiting.insert(sim.ledger.owed_late(&sim.venue.orders())),
            };
            if sim.net.now >= watched_until || owed.iter().all(|&t| sim.ledger.has_late(t)) {
                settled = true;
                break;
            }
        }
    }
    sim.out.throttled = sim.gw.stats().throttled;
    let kills = sim.proc.as_ref().map_or(0, |p| p.kills);
    sim.out.throttled += sim.proc.as_ref().map_or(0, |p| p.throttled);
    sim.out.kills = kills;
    sim.out.recovered = sim.proc.as_ref().map_or((0, 0), |p| p.recovered());
    sim.out.blind_throttled = (sim.blind.throttled, sim.blind.orders);
    sim.out.blind_bans = sim.blind.bans;
    sim.hub_end();
    let mut out = std::mem::take(&mut sim.out);
    out.digest = sim.digest.value();
    out.tally = sim.ledger.tally();
    out.ws = sim.gw.ws_api().map(|l| *l.stats());
    out.clients = sim.shm.as_ref().map(|s| s.stats);
    out.ws_logons = sim
        .ws
        .as_ref()
        .map_or((0, 0), |l| (l.logons, l.unsigned_orders));
    let (report, orders) = (sim.venue.report(), sim.venue.orders());
    out.violations.extend(sim.ledger.at_end(
        &report,
        &orders,
        sim.gw.in_flight(),
        out.bans + out.blind_bans,
        // A restart's bootstrap holds until the dead process's charges leave
        // it room: a refusal is a failure of its own, never an excuse.
        sim.other_every > 0,
        out.blind_throttled,
    ));
    // A Late is owed where nothing excused it: the gateway polled, no ban stayed
    // uncleared (its halt keeps the watch and refuses the polls; a ban the
    // gateway heard and nobody cleared, as an injected one), no watch was
    // dropped for room, and the run lasted past every watch.
    // A kill drops the watches (the next life queries what its journal kept).
    let uncleared_ban = uncleared_ban || sim.ban_heard;
    // So does a hub client's (the gateway polls only while one that asked is on).
    let kills = kills + out.clients.map_or(0, |c| c.kills);
    let owed =
        polls && !uncleared_ban && sim.gw.stats().watch_dropped == 0 && settled && kills == 0;
    out.violations.extend(sim.ledger.lates_owed(&orders, owed));
    out
}
