//! The Binance Spot profile: its venue's limits, its account, its strategy
//! (places near the book, cancels and cancel-replaces what it believes rests),
//! and the steps only its runs have: the WebSocket API lane ([`crate::ws`]),
//! the shared-memory hub ([`super::hub`]) and another sender on the IP.

use ergon_core::{BucketId, Budget, Builder, Class};
use ergon_gateway::{Event, Gateway, WsLane};
use ergon_venue_sim::sansio::{Received, SansIo};
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

use super::adapter::Adapter;
use super::{hub, restart, Outcome, Params, Sim, Step, GUARD_MS, IP, MS, SEC, T0, VENUE_MS0};
use crate::check::Kind;
use crate::rng::Rng;
use crate::ws::{self, Lane, WsStep};

/// Mixed into the seed for the other sender on the IP.
const OTHERS_STREAM: u64 = 0x07e3_5e4d_e500_0000;
/// Mixed into the seed for the WebSocket lane's draw and network.
const WS_STREAM: u64 = 0x5eb5_0c6e_7000_0000;
/// Mixed into the seed for the Ed25519 key's draw (a stream of its own: the
/// other runs stay what they were).
const LOGON_STREAM: u64 = 0x106e_d255_1900_0000;
/// The venue's exchangeInfo, which the bootstrap reads.
const EXCHANGE_INFO: &[u8] = b"GET /api/v3/exchangeInfo HTTP/1.1\r\nHost: sim\r\n\r\n";

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

impl Adapter for BinanceSpot {
    const NAME: &'static str = "binance-spot";
    const BAN_STATUS: u16 = 418;
    const BOOT_READ: &'static [u8] = EXCHANGE_INFO;
    const REQUEST_BYTES: usize = 1024;

    /// Its limits from the venue's `info` (exchangeInfo), signed with an HMAC
    /// secret or an Ed25519 private key's PKCS#8 PEM.
    fn open_account(
        info: &str,
        keys: &(String, String),
        allow_failure: bool,
        b: &mut Builder,
        now: i64,
        venue_ms: i64,
    ) -> Self {
        let mut acct = BinanceSpot::from_exchange_info(
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
        });
        if allow_failure {
            acct.set_replace_mode(ReplaceMode::AllowFailure);
        }
        acct
    }

    fn act(sim: &mut Sim<Self>) {
        sim.spot_act();
    }

    fn hosted(sim: &mut Sim<Self>, e: &Event<'_>) -> bool {
        if !sim.hub_run() {
            return false;
        }
        sim.hub_event(*e);
        true
    }

    fn before_events(sim: &mut Sim<Self>) {
        sim.drive_ws();
    }

    fn after_events(sim: &mut Sim<Self>) {
        sim.hub_turn();
    }

    fn own_step(sim: &mut Sim<Self>, s: Step) {
        match s {
            Step::Other => sim.other(),
            Step::Ws(s) => sim.ws_step(Some(s)),
            Step::WsDrop => sim.ws_step(None),
            Step::Hub(s) => sim.hub_step(s),
            _ => {}
        }
    }

    fn order_limited(body: &str) -> bool {
        body.contains("-1015")
    }

    fn stamped(body: &str) -> bool {
        body.contains("\"transactTime\"") || body.contains("\"serverTime\"")
    }

    fn lane(acct: &Self, connects: BucketId, budget: &Budget, seed: u64) -> Option<WsLane> {
        Some(ws::lane(acct, connects, budget, seed))
    }
}

impl Sim {
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
    pub(super) fn new_order(
        &mut self,
        cid: ClientOrderId,
        price: &mut String,
    ) -> NewOrder<'static> {
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
    fn spot_act(&mut self) {
        if self.hub_run() {
            return self.hub_tick();
        }
        let now = self.net.now;
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

/// Runs `seed` under `p` on Binance Spot.
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
    let info = match venue.admit(EXCHANGE_INFO, IP, VENUE_MS0) {
        Received::Answer(r) => r.body,
        Received::Run(a) => venue.execute(a, VENUE_MS0).body,
    };
    let mut b = Budget::builder();
    let secret = match account.ed25519_public_key {
        Some(_) => ED25519_TEST_PRIVATE_PEM.to_string(),
        None => account.secret.clone(),
    };
    let keys = (account.api_key.clone(), secret);
    let acct = BinanceSpot::open_account(&info, &keys, false, &mut b, T0, VENUE_MS0);
    let ws_connects = has_lane.then(|| ws::declare(&mut b));
    let budget = b.build(T0).expect("budget");
    let lane = ws_connects.map(|c| ws::lane(&acct, c, &budget, seed));
    let mut gw = Gateway::new(acct, "BTCUSDT", 64, BinanceSpot::REQUEST_BYTES).expect("gateway");
    if let Some(lane) = lane {
        gw.set_ws_api(lane);
    }
    let mut sim = Sim::new(gw, budget, venue, seed, p);
    sim.ws = ws_connects.map(|_| Lane::new(ws_rng.next_u64(), p.faults, IP));
    sim.arm_clock(seed, true);
    // Half the runs cancel-replace with ALLOW_FAILURE (the new order is tried
    // whether the cancel ran or not), half with the default STOP_ON_FAILURE.
    let allow_failure = sim.net.rng.chance(500);
    if allow_failure {
        sim.gw
            .venue_mut()
            .set_replace_mode(ReplaceMode::AllowFailure);
    }
    sim.at(T0, Step::Tick);
    let ban = sim.arm_ban();
    let polls = sim.arm_polls(seed);
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
    let settled = sim.drive(polls);
    sim.hub_end();
    sim.finish(polls, ban, settled)
}
