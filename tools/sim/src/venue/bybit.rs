//! A run on Bybit v5 (linear): the real [`Gateway`] with the Bybit adapter, its
//! batches (`POST /v5/order/create-batch`, up to 20 orders, each placed or
//! refused on its own and each counted on the create limit), single orders and
//! cancels, against the emulator's Bybit profile driven without sockets
//! ([`SansIo`]), through the same faulty network as the Binance Spot runs
//! ([`Fate`]), from one seed.
//!
//! The venue's rules are the emulator's (`tools/venue-sim/src/profiles/bybit`):
//! per-UID limits over a rolling second (create 40 orders, an account above
//! the documented default of 10 so that a batch of 20 fits; cancel 10, the
//! real-time query 50, the history 50; over one, HTTP 200 `retCode` 10006), the
//! IP's requests in any 5 s (here 200, lowered from the documented 600 so that
//! the strategy runs near it; over it, a 403 and a ban of 10 minutes), a batch's
//! items placed in order, a refused one (a price off the 0.1 tick, 10001; an
//! `orderLinkId` already used, 110072, also by an earlier item of the same
//! batch) refused alone. Bybit states no time after which a request it accepted
//! can no longer run: an unknown outcome found nowhere ends Unresolved.
//!
//! Not here (the Binance Spot runs have them): kills and restarts, the
//! WebSocket lanes, another sender on the IP, open-orders polls, venue clock
//! steps (the clock drifts), cancel-replace (Bybit's is an amend in place) and
//! batch cancels (the emulator has no `/v5/order/cancel-batch` yet).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use ergon_core::{Budget, Class, Flight, Ticket};
use ergon_gateway::{Event, Gateway, ItemFate, Prepared, Wire};
use ergon_io::client::{Refused, RequestId, Sent};
use ergon_io::http::Request;
use ergon_venue_sim::http::Response as SimResponse;
use ergon_venue_sim::sansio::{Admitted, Received, SansIo};
use ergon_venue_sim::{Config, Interval, LimitType, RateLimit, BYBIT_LIMITS};
use ergon_venues::adapt::Clock;
use ergon_venues::bybit::{self, Auth, Bybit};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Endpoints, NewOrder, OrderRef, OrderType, Side, Symbol, TimeInForce,
};
use ergon_venues::response::{Header, Response};

use crate::check::{Final, Kind, Ledger, What};
use crate::net::{encode, Fate};
use crate::rng::Rng;
use crate::run::{Outcome, Params, DRAIN_NS};

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;
/// Our clock at the start, and the venue's UTC ms then.
const T0: i64 = 1_000 * SEC;
const VENUE_MS0: i64 = 1_700_000_000_000;
/// The IP's requests in any 5 s, the venue's and the adapter's.
const IP_PER_5S: u64 = 200;
/// Orders created per rolling second per UID, the venue's and the adapter's: an
/// account above the documented default of 10 (Bybit raises a UID's limits by
/// its tier, and says each in `X-Bapi-Limit`), so that a batch of 20 fits.
const CREATE_PER_S: u64 = 40;
/// Most orders in one batch (Bybit linear).
const MAX_BATCH: i64 = bybit::MAX_BATCH_ORDERS as i64;
/// Items priced off the tick, per mille (the venue refuses each alone).
const OFF_TICK_PER_MILLE: u64 = 40;
/// Batches that repeat an earlier item's client order id, per mille.
const REPEAT_PER_MILLE: u64 = 50;
/// The daemon's default `--guard-ms`: rolling windows kept this much longer.
const GUARD_NS: i64 = 30 * MS;
const IP: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// The venue's limits: Bybit's documented ones ([`BYBIT_LIMITS`]) with the IP's
/// lowered to [`IP_PER_5S`] and the create limit raised to [`CREATE_PER_S`].
fn venue_config() -> Config {
    let mut c = Config::bybit();
    c.rate_limits = BYBIT_LIMITS.to_vec();
    for l in &mut c.rate_limits {
        match l.kind {
            LimitType::RawRequests => {
                *l = RateLimit::new(l.kind, Interval::Second, 5, IP_PER_5S).rolling();
            }
            LimitType::BybitCreate => {
                *l = RateLimit::new(l.kind, Interval::Second, 1, CREATE_PER_S).rolling();
            }
            _ => {}
        }
    }
    c
}

enum Step {
    Tick,
    Ban(i64),
    ClearHalts,
    Arrive(usize),
    Execute(usize, Box<Admitted>),
    Reply(usize, SimResponse),
    Fail(usize),
}

/// One request as the network holds it.
struct Out {
    id: RequestId,
    raw: Vec<u8>,
    fate: Fate,
    deadline: i64,
    ticket: Option<Ticket>,
    flight: Option<Flight>,
    reported: bool,
}

/// The gateway's transport: each write gets a fate; nothing is sent twice.
struct Net {
    budget: Budget,
    now: i64,
    rng: Rng,
    faults: bool,
    outs: Vec<Out>,
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
        });
        self.fresh.push(self.outs.len() - 1);
        Ok(id)
    }
}

struct Sim {
    gw: Gateway<Bybit>,
    net: Net,
    venue: SansIo,
    queue: BinaryHeap<Reverse<(i64, u64)>>,
    steps: Vec<Option<Step>>,
    ledger: Ledger,
    req: Prepared,
    p: Params,
    out: Outcome,
    end_at: i64,
    drift_ppm: i64,
    /// The gateway has heard a ban (a 403) and no person has cleared it since.
    ban_heard: bool,
    /// Client order ids the strategy believes rest (placed, not yet cancelled).
    resting: Vec<String>,
}

impl Sim {
    /// The venue's clock: ours, drifting by `drift_ppm`.
    fn venue_ms(&self) -> i64 {
        let since = self.net.now - T0;
        VENUE_MS0 + since / MS + since / 1_000 * self.drift_ppm / 1_000_000_000
    }

    fn at(&mut self, t: i64, s: Step) {
        self.steps.push(Some(s));
        self.queue.push(Reverse((t, self.steps.len() as u64 - 1)));
    }

    /// Latency of one leg, 0.2 to 3 ms.
    fn leg(&mut self) -> i64 {
        self.net.rng.range(200_000, 3 * MS)
    }

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

    /// An answer leaves the venue now: it reaches the gateway unless the
    /// request's deadline comes first (then the transport fails it there).
    fn answer(&mut self, i: usize, r: SimResponse) {
        let t = self.net.now + self.leg();
        let deadline = self.net.outs[i].deadline;
        match t > deadline {
            true => self.at(deadline.max(self.net.now), Step::Fail(i)),
            false => self.at(t, Step::Reply(i, r)),
        }
    }

    fn arrive(&mut self, i: usize) {
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
        // "403, access too frequent": Bybit's ban.
        self.ban_heard |= r.status == 403;
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

    /// An event of the gateway: the strategy's view of what rests, then the
    /// checks.
    fn on_event(&mut self, e: &Event<'_>) {
        let Some(f) = Final::of(e) else {
            return;
        };
        let placed = match f.what {
            What::Applied | What::Reconciled(Some(_)) => match self.ledger.kind_of(f.tag) {
                Some(Kind::Place) => self.ledger.placed_cid(f.tag),
                _ => None,
            },
            What::Item(i, ItemFate::Applied | ItemFate::Found(_)) => self.ledger.item_cid(f.tag, i),
            _ => None,
        };
        // Each order is heard placed once (a batch repeating an id is refused
        // before it is sent).
        if let Some(cid) = placed {
            self.resting.push(cid.to_string());
        }
        if let Err(v) = self.ledger.on_event(f, self.net.now) {
            self.out.violations.push(v);
        }
    }

    fn drain_gateway(&mut self) {
        if self.gw.poll_timeout().is_some_and(|t| t <= self.net.now) {
            self.gw.poll(&mut self.net);
        }
        while let Some(e) = self.gw.poll_event() {
            self.on_event(&e);
        }
        self.schedule_fresh();
    }

    /// A limit order of `cid` at `price` that rests away from the mid (50,000).
    fn order<'a>(&mut self, cid: ClientOrderId, price: &'a str, side: Side) -> NewOrder<'a> {
        NewOrder {
            symbol: Symbol::new("BTCUSDT").expect("symbol"),
            side,
            order_type: OrderType::Limit(TimeInForce::Gtc),
            price: Decimal::new(price).ok(),
            quantity: Decimal::new("0.010").expect("qty"),
            client_order_id: cid,
            reduce_only: false,
        }
    }

    /// A price on the 0.1 tick that rests on `side`, or (`off_tick`) one 0.05
    /// off it.
    fn price(&mut self, side: Side, off_tick: bool) -> String {
        let k = self.net.rng.range(0, 1_000);
        let tenths = match side {
            Side::Buy => 499_000 - k,
            Side::Sell => 501_000 + k,
        };
        match off_tick {
            true => format!("{}.{}5", tenths / 10, tenths % 10),
            false => format!("{}.{}", tenths / 10, tenths % 10),
        }
    }

    fn side(&mut self) -> Side {
        match self.net.rng.chance(500) {
            true => Side::Buy,
            false => Side::Sell,
        }
    }

    /// The strategy: single orders, batches of 1 to 20 orders (some items
    /// refused by the venue alone), cancels of what it believes rests.
    fn tick(&mut self) {
        if self.net.now >= self.end_at || self.out.actions >= self.p.max_actions {
            return;
        }
        let now = self.net.now;
        self.out.actions += 1;
        let t = now + self.net.rng.range(MS, 60 * MS);
        self.at(t, Step::Tick);
        let roll = self.net.rng.next_u64() % 100;
        let tag = self.ledger.next_tag();
        let prepared = match roll {
            0..=29 if !self.resting.is_empty() => {
                let i = self.net.rng.range(0, self.resting.len() as i64) as usize;
                let cid = self.resting.swap_remove(i);
                let cid = ClientOrderId::new(&cid).expect("an id we issued");
                let r = OrderRef {
                    symbol: Symbol::new("BTCUSDT").expect("symbol"),
                    client_order_id: cid,
                };
                self.ledger.submitted(tag, Kind::Cancel, cid.as_str());
                self.gw.venue_mut().cancel(&mut self.req, &r, now).is_ok()
            }
            0..=64 => self.prepare_batch(tag),
            _ => {
                let Ok(cid) = self.gw.next_client_order_id() else {
                    return;
                };
                let side = self.side();
                let off = self.net.rng.chance(OFF_TICK_PER_MILLE);
                let price = self.price(side, off);
                let o = self.order(cid, &price, side);
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
        if let Err(e) = self
            .gw
            .submit(&mut self.net, &mut self.req, Class::Normal, tag)
        {
            self.on_event(&e);
        }
    }

    /// Prepares a batch of 1 to 20 orders under `tag`: a few items priced off
    /// the tick, and in some batches an item that repeats an earlier one's
    /// client order id.
    fn prepare_batch(&mut self, tag: u64) -> bool {
        let n = self.net.rng.range(1, MAX_BATCH + 1) as usize;
        let mut cids = Vec::with_capacity(n);
        for _ in 0..n {
            match self.gw.next_client_order_id() {
                Ok(c) => cids.push(c),
                Err(_) => return false,
            }
        }
        if n >= 2 && self.net.rng.chance(REPEAT_PER_MILLE) {
            let to = self.net.rng.range(1, n as i64) as usize;
            let from = self.net.rng.range(0, to as i64) as usize;
            cids[to] = cids[from];
        }
        let mut quotes = Vec::with_capacity(n);
        for _ in 0..n {
            let side = self.side();
            let off = self.net.rng.chance(OFF_TICK_PER_MILLE);
            quotes.push((side, self.price(side, off)));
        }
        let orders: Vec<NewOrder<'_>> = cids
            .iter()
            .zip(&quotes)
            .map(|(c, (side, p))| NewOrder {
                symbol: Symbol::new("BTCUSDT").expect("symbol"),
                side: *side,
                order_type: OrderType::Limit(TimeInForce::Gtc),
                price: Decimal::new(p).ok(),
                quantity: Decimal::new("0.010").expect("qty"),
                client_order_id: *c,
                reduce_only: false,
            })
            .collect();
        let names = cids.iter().map(|c| c.as_str().to_string()).collect();
        self.ledger.submitted_batch(tag, names);
        let now = self.net.now;
        self.gw
            .venue_mut()
            .batch_orders(&mut self.req, &orders, now)
            .is_ok()
    }

    fn step(&mut self, s: Step) {
        match s {
            Step::Tick => self.tick(),
            Step::Ban(ms) => {
                self.out.bans += 1;
                let now_ms = self.venue_ms();
                self.venue.ban(IP, ms, now_ms);
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
        }
        self.drain_gateway();
    }
}

/// Runs `seed` under `p` on Bybit.
pub fn run(seed: u64, p: &Params) -> Outcome {
    let cfg = venue_config();
    let account = cfg.accounts[0].clone();
    let venue = SansIo::new(cfg);
    let mut b = Budget::builder();
    let limits = bybit::Config {
        ip_per_5s: IP_PER_5S,
        create_per_s: CREATE_PER_S,
        ..bybit::Config::default()
    };
    let clock = Clock::anchor(T0, VENUE_MS0);
    // The daemon's default guard (`--guard-ms 30`), as its declare passes it.
    let acct = Bybit::guarded(&mut b, clock, limits, GUARD_NS)
        .expect("buckets")
        .with_auth(Auth::new(&account.api_key, account.secret.as_bytes(), 5_000).expect("keys"));
    let budget = b.build(T0).expect("budget");
    let mut gw = Gateway::new(acct, "BTCUSDT", 64, 4096).expect("gateway");
    gw.set_seed(seed);
    gw.set_boot_epoch(1).expect("epoch");
    let mut sim = Sim {
        gw,
        net: Net {
            budget,
            now: T0,
            rng: Rng::new(seed),
            faults: p.faults,
            outs: Vec::new(),
            fresh: Vec::new(),
        },
        venue,
        queue: BinaryHeap::new(),
        steps: Vec::new(),
        ledger: Ledger::default(),
        req: Prepared::with_capacity(4096),
        p: *p,
        out: Outcome::default(),
        end_at: T0 + p.seconds * SEC,
        drift_ppm: 0,
        ban_heard: false,
        resting: Vec::new(),
    };
    if p.faults {
        sim.drift_ppm = sim.net.rng.range(-200, 201);
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
    let stop_at = sim.end_at + DRAIN_NS;
    loop {
        let next_q = sim.queue.peek().map(|Reverse((t, _))| *t);
        let next = match (next_q, sim.gw.poll_timeout()) {
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
                sim.step(s);
            }
            _ => sim.drain_gateway(),
        }
        if sim.gw.in_flight() == 0 && sim.queue.is_empty() && sim.net.now >= sim.end_at {
            break;
        }
    }
    sim.out.throttled = sim.gw.stats().throttled;
    let mut out = sim.out;
    out.tally = sim.ledger.tally();
    let (report, orders) = (sim.venue.report(), sim.venue.orders());
    out.violations.extend(sim.ledger.at_end(
        &report,
        &orders,
        sim.gw.in_flight(),
        out.bans,
        false,
        (0, 0),
    ));
    out
}
