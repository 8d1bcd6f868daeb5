//! The cases: ergon and governor on the same work.
//!
//! Every case starts each batch from the same state, set up untimed by
//! [`Case::prepare`] (a copy of a budget built once; fresh governor limiters), so a
//! run of any length measures the same path: a steady charge never drifts into
//! refusals, an idle case always walks the same ring. Only [`Case::timed_calls`] is
//! timed; it is never inlined, so `callgrind --toggle-collect='*timed_calls*'` counts
//! exactly its instructions.
//!
//! The Binance-like budget: request weight 6000 per minute and raw requests 61000
//! per 5 minutes (sliding windows of 60 slots, so the idle cases exercise the ring),
//! orders 100 per 10 s and 200000 per day (fixed windows, 20 ms guard). Governor
//! gets one limiter per bucket with the same rate and burst, checked in a row.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use ergon_core::{BucketId, Budget, Class, Part, Spec};
use governor::clock::{Clock, FakeRelativeClock, QuantaClock};
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

const SEC: i64 = 1_000_000_000;
/// Where every batch of the steady cases runs: mid-slot, mid-window.
const STEADY_NS: i64 = SEC / 2;
/// Just under one turn of the weight ring (60 slots of 1 s, 61 cells): the next
/// charge walks 60 cells of it (and 12 of the raw-request ring).
const IDLE_GAP_NS: i64 = 60 * SEC;
/// Most calls a batch may have: the orders/10 s limit less the one order every
/// batch starts with, so a steady batch never refuses.
pub const MAX_BATCH: usize = 99;

/// What a case's calls should do; anything else means the case measures the wrong
/// path, and the run fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Every call admitted.
    Admit,
    /// Every call refused.
    Refuse,
    /// Not a charge (tick).
    Nothing,
}

/// One benchmark case.
pub trait Case {
    /// Its name on the command line and in the report.
    fn name(&self) -> &'static str;
    /// What it measures, for the table's legend.
    fn what(&self) -> &'static str;
    /// What its calls must do.
    fn expect(&self) -> Expect;
    /// Untimed: brings the state to where every batch starts.
    fn prepare(&mut self);
    /// Timed: `n` calls. Returns how many were refused.
    fn timed_calls(&mut self, n: usize) -> u64;
}

/// The four buckets of the Binance-like budget.
struct Binance {
    fresh: Budget,
    order: [Part; 4],
    weight: BucketId,
    full: Budget,
}

impl Binance {
    fn new() -> Self {
        let mut b = Budget::builder();
        let weight = b.add("weight", Spec::sliding(6000, 60 * SEC, 60)).unwrap();
        let raw = b
            .add("raw_requests", Spec::sliding(61_000, 300 * SEC, 60))
            .unwrap();
        let orders = b
            .add("orders_10s", Spec::fixed(100, 10 * SEC).guard(20_000_000))
            .unwrap();
        let day = b
            .add(
                "orders_day",
                Spec::fixed(200_000, 86_400 * SEC).guard(20_000_000),
            )
            .unwrap();
        let mut fresh = b.build(0).unwrap();
        let order = [
            Part::new(weight, 1),
            Part::new(raw, 1),
            Part::new(orders, 1),
            Part::new(day, 1),
        ];
        // One charge at 0, so the rings hold something to walk over.
        let _ = fresh.try_charge(&order, Class::Normal, 0).unwrap().sent();
        let mut full = fresh.clone();
        while full.try_charge(&order, Class::Normal, 0).is_ok() {}
        Binance {
            fresh,
            order,
            weight,
            full,
        }
    }
}

/// The clock a user's send path reads: quanta's TSC clock, as ns since a base.
#[derive(Clone)]
pub struct TscClock {
    clock: quanta::Clock,
    base: u64,
}

impl TscClock {
    /// A clock whose 0 is now.
    pub fn new() -> Self {
        let clock = quanta::Clock::new();
        let base = clock.raw();
        TscClock { clock, base }
    }

    /// ns since the base.
    #[inline(always)]
    pub fn now_ns(&self) -> i64 {
        self.clock.delta_as_nanos(self.base, self.clock.raw()) as i64
    }

    /// A raw reading, for timing batches.
    #[inline(always)]
    pub fn raw(&self) -> u64 {
        self.clock.raw()
    }

    /// ns between two raw readings.
    pub fn delta_ns(&self, start: u64, end: u64) -> u64 {
        self.clock.delta_as_nanos(start, end)
    }
}

/// How an ergon case gets its time.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Time {
    /// A number the caller already has (ergon's API: time is a parameter).
    Fake,
    /// A quanta clock read per call.
    Clock,
}

/// What an ergon case does per call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Work {
    Charge4,
    Charge1,
    Refused,
    Refund,
    /// First charge after an idle gap, with the walk on the send path.
    IdleWalk,
    /// The same, with `tick` called (untimed) during the gap.
    IdleTick,
    /// `tick` itself after the gap: where the walk goes.
    Tick,
}

struct Ergon {
    name: &'static str,
    what: &'static str,
    work: Work,
    time: Time,
    b: Binance,
    budget: Budget,
    clock: TscClock,
    /// Added to the clock so a batch starts at its case's instant.
    offset: i64,
}

impl Ergon {
    fn new(
        name: &'static str,
        what: &'static str,
        work: Work,
        time: Time,
        clock: &TscClock,
    ) -> Self {
        let b = Binance::new();
        let budget = b.fresh.clone();
        Ergon {
            name,
            what,
            work,
            time,
            b,
            budget,
            clock: clock.clone(),
            offset: 0,
        }
    }

    /// The instant every batch starts at.
    fn start_ns(&self) -> i64 {
        match self.work {
            Work::IdleWalk | Work::IdleTick | Work::Tick => STEADY_NS + IDLE_GAP_NS,
            _ => STEADY_NS,
        }
    }

    #[inline(always)]
    fn now(&self) -> i64 {
        match self.time {
            Time::Fake => black_box(self.offset),
            Time::Clock => self.clock.now_ns() + self.offset,
        }
    }
}

impl Case for Ergon {
    fn name(&self) -> &'static str {
        self.name
    }

    fn what(&self) -> &'static str {
        self.what
    }

    fn expect(&self) -> Expect {
        match self.work {
            Work::Refused => Expect::Refuse,
            Work::Tick => Expect::Nothing,
            _ => Expect::Admit,
        }
    }

    fn prepare(&mut self) {
        let source = if self.work == Work::Refused {
            &self.b.full
        } else {
            &self.b.fresh
        };
        self.budget.clone_from(source);
        self.offset = match self.time {
            Time::Fake => self.start_ns(),
            Time::Clock => self.start_ns() - self.clock.now_ns(),
        };
        if self.work == Work::IdleTick {
            let now = self.now();
            self.budget.tick(now);
        }
    }

    #[inline(never)]
    fn timed_calls(&mut self, n: usize) -> u64 {
        // The work and the clock are chosen once, outside the loop, so the loop holds
        // only the calls (and the clock read, where the case has one).
        let offset = self.offset;
        let clock = &self.clock;
        match self.time {
            Time::Fake => calls(&mut self.budget, &self.b, self.work, n, || {
                black_box(offset)
            }),
            Time::Clock => calls(&mut self.budget, &self.b, self.work, n, || {
                clock.now_ns() + offset
            }),
        }
    }
}

#[inline(always)]
fn calls(budget: &mut Budget, b: &Binance, work: Work, n: usize, now: impl Fn() -> i64) -> u64 {
    let mut refused = 0;
    let order = black_box(&b.order[..]);
    let one = [Part::new(b.weight, 1)];
    let one = black_box(&one[..]);
    match work {
        Work::Charge4 | Work::Refused | Work::IdleWalk | Work::IdleTick => {
            for _ in 0..n {
                match budget.try_charge(order, Class::Normal, now()) {
                    Ok(ticket) => drop(black_box(ticket)),
                    Err(limited) => {
                        black_box(limited);
                        refused += 1;
                    }
                }
            }
        }
        Work::Charge1 => {
            for _ in 0..n {
                match budget.try_charge(one, Class::Normal, now()) {
                    Ok(ticket) => drop(black_box(ticket)),
                    Err(limited) => {
                        black_box(limited);
                        refused += 1;
                    }
                }
            }
        }
        Work::Refund => {
            for _ in 0..n {
                let t = now();
                match budget.try_charge(order, Class::Normal, t) {
                    Ok(ticket) => {
                        if budget.refund(black_box(ticket), t).is_err() {
                            refused += 1;
                        }
                    }
                    Err(limited) => {
                        black_box(limited);
                        refused += 1;
                    }
                }
            }
        }
        Work::Tick => {
            for _ in 0..n {
                budget.tick(now());
            }
        }
    }
    refused
}

type Limiter<C> = RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<<C as Clock>::Instant>>;

/// The Binance-like limits as governor quotas: same rate and burst per bucket.
fn binance_quotas() -> [Quota; 4] {
    let q = |period: Duration, burst: u32| {
        Quota::with_period(period)
            .expect("non-zero period")
            .allow_burst(NonZeroU32::new(burst).expect("non-zero burst"))
    };
    [
        q(Duration::from_secs(60) / 6000, 6000),
        q(Duration::from_secs(300) / 61_000, 61_000),
        q(Duration::from_secs(10) / 100, 100),
        q(Duration::from_secs(86_400) / 200_000, 200_000),
    ]
}

/// `N` governor limiters checked in a row, as a user would stack them.
struct Governor<C: Clock + Clone, const N: usize> {
    name: &'static str,
    what: &'static str,
    clock: C,
    quotas: [Quota; N],
    limiters: [Limiter<C>; N],
    /// Exhaust the last limiter in prepare: every call is refused.
    refuse: bool,
}

impl<C: Clock + Clone, const N: usize> Governor<C, N> {
    fn new(
        name: &'static str,
        what: &'static str,
        clock: C,
        quotas: [Quota; N],
        refuse: bool,
    ) -> Self {
        let limiters =
            std::array::from_fn(|i| RateLimiter::direct_with_clock(quotas[i], clock.clone()));
        Governor {
            name,
            what,
            clock,
            quotas,
            limiters,
            refuse,
        }
    }
}

impl<C: Clock + Clone, const N: usize> Case for Governor<C, N> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn what(&self) -> &'static str {
        self.what
    }

    fn expect(&self) -> Expect {
        if self.refuse {
            Expect::Refuse
        } else {
            Expect::Admit
        }
    }

    fn prepare(&mut self) {
        for (l, q) in self.limiters.iter_mut().zip(self.quotas) {
            *l = RateLimiter::direct_with_clock(q, self.clock.clone());
        }
        if self.refuse {
            let last = &self.limiters[N - 1];
            while last.check().is_ok() {}
        }
    }

    #[inline(never)]
    fn timed_calls(&mut self, n: usize) -> u64 {
        let mut refused = 0;
        let limiters = black_box(&self.limiters);
        for _ in 0..n {
            // Stacked limiters cannot be all-or-none: stop at the first refusal.
            if !limiters.iter().all(|l| black_box(l.check()).is_ok()) {
                refused += 1;
            }
        }
        refused
    }
}

/// Every case, in report order.
pub fn all(clock: &TscClock) -> Vec<Box<dyn Case>> {
    let q = binance_quotas();
    let fake = FakeRelativeClock::default;
    vec![
        Box::new(Ergon::new(
            "charge4",
            "ergon: 4-part order charge, steady path",
            Work::Charge4,
            Time::Fake,
            clock,
        )),
        Box::new(Governor::new(
            "gov4",
            "governor: 4 limiters in a row, fake clock",
            fake(),
            q,
            false,
        )),
        Box::new(Ergon::new(
            "charge1",
            "ergon: 1-part charge (weight), steady path",
            Work::Charge1,
            Time::Fake,
            clock,
        )),
        Box::new(Governor::new(
            "gov1",
            "governor: 1 limiter (weight), fake clock",
            fake(),
            [q[0]],
            false,
        )),
        Box::new(Ergon::new(
            "refused",
            "ergon: 4-part charge refused (orders/10s full)",
            Work::Refused,
            Time::Fake,
            clock,
        )),
        Box::new(Governor::new(
            "gov_refused",
            "governor: 1 limiter refusing (orders/10s)",
            fake(),
            [q[2]],
            true,
        )),
        Box::new(Ergon::new(
            "refund",
            "ergon: 4-part charge then refund",
            Work::Refund,
            Time::Fake,
            clock,
        )),
        Box::new(Ergon::new(
            "idle_walk",
            "ergon: 4-part charges after 60 s idle, no tick (walk on send path)",
            Work::IdleWalk,
            Time::Fake,
            clock,
        )),
        Box::new(Ergon::new(
            "idle_tick",
            "ergon: 4-part charges after 60 s idle, tick during the gap",
            Work::IdleTick,
            Time::Fake,
            clock,
        )),
        Box::new(Ergon::new(
            "tick",
            "ergon: tick after 60 s idle (the walk, off the send path)",
            Work::Tick,
            Time::Fake,
            clock,
        )),
        Box::new(Ergon::new(
            "charge4_clock",
            "ergon: 4-part steady charge, quanta clock read per call",
            Work::Charge4,
            Time::Clock,
            clock,
        )),
        Box::new(Governor::new(
            "gov4_clock",
            "governor: 4 limiters in a row, quanta clock",
            QuantaClock::default(),
            q,
            false,
        )),
        Box::new(Ergon::new(
            "idle_walk_clock",
            "ergon: after 60 s idle, no tick, quanta clock per call",
            Work::IdleWalk,
            Time::Clock,
            clock,
        )),
        Box::new(Ergon::new(
            "idle_tick_clock",
            "ergon: after 60 s idle, tick, quanta clock per call",
            Work::IdleTick,
            Time::Clock,
            clock,
        )),
    ]
}

/// A small deterministic generator for the agreement check.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// Counts of the agreement check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Agreement {
    /// Decisions compared.
    pub decisions: u64,
    /// Of which admitted by both.
    pub admitted: u64,
    /// Of which refused by both.
    pub refused: u64,
}

/// ergon token buckets and governor limiters with the same rate and burst, driven on
/// the same fake clock by the same random charges of one unit: where their semantics
/// coincide (GCRA, one bucket, one unit) every decision must be the same. Returns the
/// first disagreement as an error.
pub fn agreement(steps: u64, seed: u64) -> Result<Agreement, String> {
    // (interval ns, burst): Binance orders/10 s and per-second shapes, and odd ones.
    let shapes: [(u64, u32); 4] = [
        (100_000_000, 100),
        (10_000_000, 50),
        (333_333, 7),
        (1_000, 1),
    ];
    let mut b = Budget::builder();
    let ids: Vec<BucketId> = shapes
        .iter()
        .enumerate()
        .map(|(i, &(t, burst))| {
            b.add(
                &format!("t{i}"),
                Spec::token_every(t as i64, u64::from(burst)),
            )
            .map_err(|e| format!("agreement budget: {e:?}"))
        })
        .collect::<Result<_, _>>()?;
    let mut budget = b.build(0).map_err(|e| format!("agreement budget: {e:?}"))?;
    let clock = FakeRelativeClock::default();
    let limiters: Vec<Limiter<FakeRelativeClock>> = shapes
        .iter()
        .map(|&(t, burst)| {
            let quota = Quota::with_period(Duration::from_nanos(t))
                .expect("non-zero")
                .allow_burst(NonZeroU32::new(burst).expect("non-zero"));
            RateLimiter::direct_with_clock(quota, clock.clone())
        })
        .collect();
    let mut rng = XorShift(seed | 1);
    let mut now: u64 = 0;
    let mut out = Agreement::default();
    for step in 0..steps {
        let i = (rng.next() % shapes.len() as u64) as usize;
        // Mostly bursts at one instant, sometimes a wait of up to two intervals.
        if rng.next() & 3 == 0 {
            let dt = rng.next() % (2 * shapes[i].0);
            now += dt;
            clock.advance(Duration::from_nanos(dt));
        }
        let e = budget
            .try_charge(&[Part::new(ids[i], 1)], Class::Urgent, now as i64)
            .map(|t| drop(t.sent()))
            .is_ok();
        let g = limiters[i].check().is_ok();
        if e != g {
            return Err(format!(
                "step {step}: bucket {i} (1 per {} ns, burst {}) at {now} ns: ergon {}, governor {}",
                shapes[i].0,
                shapes[i].1,
                if e { "admits" } else { "refuses" },
                if g { "admits" } else { "refuses" },
            ));
        }
        out.decisions += 1;
        if e {
            out.admitted += 1;
        } else {
            out.refused += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ergon_and_governor_agree_on_gcra() {
        let a = agreement(200_000, 7).unwrap();
        assert_eq!(a.decisions, 200_000);
        // Both outcomes occur often, or the check proves nothing.
        assert!(a.admitted > 20_000 && a.refused > 20_000, "{a:?}");
    }

    #[test]
    fn every_case_does_what_it_expects() {
        let clock = TscClock::new();
        for mut case in all(&clock) {
            case.prepare();
            let refused = case.timed_calls(MAX_BATCH);
            let want = match case.expect() {
                Expect::Admit | Expect::Nothing => 0,
                Expect::Refuse => MAX_BATCH as u64,
            };
            assert_eq!(refused, want, "{}", case.name());
        }
    }
}
