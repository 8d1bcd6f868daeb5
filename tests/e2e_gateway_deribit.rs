//! The gateway on Deribit against the emulator's `deribit` profile: credit pools
//! refilled continuously (matching-engine requests from their own, dearer pool),
//! `too_many_requests` (10028, HTTP 429 and the connection closed) on an empty pool.
//!
//! A strategy offers three times what each pool sustains (orders and cancels at 3x
//! the matching-engine refill, book reads at 3x the other pool's) for a few
//! seconds: the gateway refuses the excess locally, the venue never answers 10028,
//! and each pool is used at 90% or more of what it allowed over the run (its burst
//! plus its refill for the time that passed).

#[path = "common/machine.rs"]
mod machine;
use std::sync::Arc;

use ergon_core::Class;
use ergon_gateway::{
    self as gateway, Account, Api, Control, Event, Gateway, Keys, Prepared, Start, Strategy,
};
use ergon_venue_sim::{Config, Server};
use ergon_venues::deribit::{self, Deribit};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Endpoints, NewOrder, OrderRef, OrderType, Side, Symbol, TimeInForce,
};

const SEC: i64 = 1_000_000_000;
const SYMBOL: &str = "BTC-PERPETUAL";
/// How long load is offered.
const RUN_NS: i64 = 4 * SEC;
/// Before the first request: the bootstrap's time read paid 500 credits from the
/// IP's pool, which the gateway's budget (built after it) never saw; the pool has
/// refilled them 50 ms later.
const SETTLE_NS: i64 = 100_000_000;

/// Orders at 3x the matching-engine refill, reads at 3x the other pool's.
struct Load {
    matching_every: i64,
    read_every: i64,
    req: Prepared,
    started: Option<i64>,
    next_matching: i64,
    next_read: i64,
    /// The order resting (placed and not yet canceled) and whether a matching
    /// request is in flight.
    resting: Option<u64>,
    in_flight: bool,
    seq: u64,
    offered: [u64; 2],
    limited: [u64; 2],
    finals: u64,
    submitted: u64,
    ended_at: i64,
    /// Final events other than Applied (Expired after a venue's 10028).
    other: u64,
}

const ORDER: u64 = 1 << 32;
const CANCEL: u64 = 2 << 32;
const READ: u64 = 3 << 32;

impl Load {
    fn tick(&mut self, api: &mut Api<'_, '_, Deribit>) {
        let now = api.now();
        let started = *self.started.get_or_insert(now + SETTLE_NS);
        if now < started {
            api.set_timer(1, started).unwrap();
            return;
        }
        if now >= started + RUN_NS {
            if self.ended_at == 0 {
                self.ended_at = now;
            }
            if self.finals == self.submitted {
                api.stop();
            }
            return;
        }
        let symbol = Symbol::new(SYMBOL).unwrap();
        while self.next_matching <= now {
            self.next_matching = self.next_matching.max(started) + self.matching_every;
            self.offered[0] += 1;
            if self.in_flight {
                continue;
            }
            let v = api.venue_mut();
            let tag = match self.resting {
                Some(k) => {
                    let id = ClientOrderId::new(&format!("d{k}")).unwrap();
                    let r = OrderRef {
                        symbol,
                        client_order_id: id,
                    };
                    v.cancel(&mut self.req, &r, now).unwrap();
                    CANCEL | k
                }
                None => {
                    self.seq += 1;
                    let o = NewOrder {
                        symbol,
                        side: Side::Buy,
                        order_type: OrderType::Limit(TimeInForce::Gtc),
                        price: Some(Decimal::new("40000").unwrap()),
                        quantity: Decimal::new("10").unwrap(),
                        client_order_id: ClientOrderId::new(&format!("d{}", self.seq)).unwrap(),
                        reduce_only: false,
                    };
                    v.new_order(&mut self.req, &o, now).unwrap();
                    ORDER | self.seq
                }
            };
            match api.submit(&mut self.req, Class::Normal, tag) {
                Ok(()) => {
                    self.submitted += 1;
                    self.in_flight = true;
                }
                Err(Event::Limited { .. }) => self.limited[0] += 1,
                Err(e) => panic!("{e:?}"),
            }
        }
        while self.next_read <= now {
            self.next_read = self.next_read.max(started) + self.read_every;
            self.offered[1] += 1;
            api.venue_mut()
                .book(&mut self.req, symbol, 10, now)
                .unwrap();
            match api.submit(&mut self.req, Class::Normal, READ) {
                Ok(()) => self.submitted += 1,
                Err(Event::Limited { .. }) => self.limited[1] += 1,
                Err(e) => panic!("{e:?}"),
            }
        }
        let next = self.next_matching.min(self.next_read);
        api.set_timer(1, next).unwrap();
    }
}

impl Strategy<Deribit> for Load {
    fn on_event(&mut self, api: &mut Api<'_, '_, Deribit>, ev: Event<'_>) {
        let tag = ev.tag();
        let applied = match ev {
            Event::Applied { .. } => true,
            Event::Retrying { .. } => return,
            // A request the venue throttled, whose deadline passed before the pool
            // had room again.
            Event::Expired { .. } => false,
            e => panic!("{e:?}"),
        };
        self.finals += 1;
        self.other += u64::from(!applied);
        match tag & !0xffff_ffff {
            ORDER if applied => self.resting = Some(tag & 0xffff_ffff),
            // A cancel that did not run leaves the order resting: cancel it again.
            CANCEL if applied => self.resting = None,
            _ => {}
        }
        if tag & !0xffff_ffff != READ {
            self.in_flight = false;
        }
        if self.ended_at != 0 && self.finals == self.submitted {
            api.stop();
        }
    }

    fn on_timer(&mut self, api: &mut Api<'_, '_, Deribit>, _token: u64) {
        self.tick(api);
    }

    fn on_turn(&mut self, api: &mut Api<'_, '_, Deribit>) {
        if self.started.is_none() {
            self.tick(api);
        }
    }
}

/// Runs the load against the emulator with `c`; the strategy, the gateway's counts
/// and the emulator's report.
fn run(c: Config) -> (Load, ergon_gateway::Stats, ergon_venue_sim::Report) {
    let server = Server::start(c.clone()).unwrap();
    let start = Start::new(server.addr(), server.addr().to_string());
    let a = &c.accounts[0];
    let keys = Keys {
        api_key: &a.api_key,
        secret: a.secret.as_bytes(),
        passphrase: None,
    };
    let (mut lp, gw, pool) = Gateway::start(&start, SYMBOL, |boot, b| {
        Deribit::declare(boot, b, &keys, 0)
    })
    .unwrap();
    let d = deribit::Config::default();
    let load = Load {
        matching_every: SEC / (3 * i64::from(d.matching_per_s)),
        read_every: SEC * i64::from(d.credit_cost) / (3 * i64::from(d.credits_per_s)),
        req: Prepared::with_capacity(1024),
        started: None,
        next_matching: 0,
        next_read: 0,
        resting: None,
        in_flight: false,
        seq: 0,
        offered: [0; 2],
        limited: [0; 2],
        finals: 0,
        submitted: 0,
        ended_at: 0,
        other: 0,
    };
    let dr = gateway::run(&mut lp, gw, pool, load, Arc::new(Control::default())).unwrap();
    let stats = *dr.gateway.stats();
    (dr.strategy, stats, server.stop())
}

#[test]
fn deribit_stays_inside_its_credit_pools_at_three_times_the_demand() {
    let _machine = machine::alone();
    let (s, g, r) = run(Config::deribit());
    let d = deribit::Config::default();
    assert_eq!(r.throttled, 0, "no too_many_requests: {r:?}");
    assert_eq!((r.bans, g.throttled, g.banned), (0, 0, 0), "{g:?}");
    assert!(
        s.limited[0] > 0 && s.limited[1] > 0,
        "the excess refused locally"
    );
    assert_eq!(
        (s.finals, s.other),
        (s.submitted, 0),
        "every request applied"
    );
    // Each pool: what it paid over what it allowed from the first request to the
    // end of the load (its burst, and its refill for the time that passed).
    let secs = (s.ended_at - s.started.unwrap()) as f64 / SEC as f64;
    let pool = |name: &str| r.credits.iter().find(|p| p.pool == name).unwrap();
    for (name, max, refill, cost) in [
        ("matching", d.matching_burst, u64::from(d.matching_per_s), 1),
        (
            "non-matching",
            d.credits_max,
            u64::from(d.credits_per_s),
            u64::from(d.credit_cost),
        ),
    ] {
        let allowed = (max as f64 + refill as f64 * secs) / cost as f64;
        let used = pool(name).paid as f64 / allowed;
        println!(
            "{name}: paid {} of {allowed:.0} allowed: {used:.3}",
            pool(name).paid
        );
        assert_eq!(pool(name).refused, 0, "{name}");
        assert!(
            used >= 0.9,
            "{name}: paid {} of {allowed:.0} allowed ({used:.3})",
            pool(name).paid
        );
    }
}

/// A venue whose matching-engine pool is half what the adapter was told (an
/// account on a lower tier than configured): its 10028 (HTTP 429, the connection
/// closed) holds the pool, what it refused is re-sent only inside its deadline,
/// nothing runs twice, and the 10028s stay few instead of repeating.
#[test]
fn a_too_many_requests_holds_the_pool_and_nothing_runs_twice() {
    let _machine = machine::shared();
    let mut c = Config::deribit();
    c.credits.matching_max = 10_000;
    let (s, g, r) = run(c);
    let refused = r
        .credits
        .iter()
        .find(|p| p.pool == "matching")
        .unwrap()
        .refused;
    println!(
        "10028s: {refused}, gateway throttled {}, expired {}",
        g.throttled, s.other
    );
    assert!(refused >= 1, "the venue refused with 10028: {r:?}");
    assert!(refused <= 6, "a hold after each: {refused} 10028s");
    assert!(g.throttled >= 1, "{g:?}");
    assert_eq!(r.bans, 0);
    assert_eq!(s.finals, s.submitted, "every request ended");
    assert_eq!((r.duplicates, r.duplicate_rejects), (0, 0), "{r:?}");
}
