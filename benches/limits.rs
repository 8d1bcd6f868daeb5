//! criterion: ergon next to governor on the same work, for users who prefer criterion
//! to `limit_bench` (io/benches), which pins, checks the CPU and counts allocations.
//!
//! The Binance-like budget: weight 6000/min and raw requests 61000/5 min (sliding, 60
//! slots), orders 100/10 s and 200000/day (fixed, 20 ms guard); governor gets one
//! limiter per bucket with the same rate and burst, checked in a row. Every batch of
//! `common::BATCH` calls starts from the same state, set up outside the timed region, so
//! a steady charge never drifts into refusals however many iterations criterion asks
//! for.
//!
//! `cargo bench --bench limits`

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

mod common;

use common::batched;
use criterion::Criterion;
use ergon_core::{BucketId, Budget, Class, Part, Spec};
use governor::clock::{Clock, FakeRelativeClock, QuantaClock};
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

const SEC: i64 = 1_000_000_000;
const STEADY_NS: i64 = SEC / 2;
/// Just under one turn of the weight ring: the next charge walks 60 cells.
const IDLE_GAP_NS: i64 = 60 * SEC;

type Limiter<C> = RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<<C as Clock>::Instant>>;

struct Binance {
    fresh: Budget,
    full: Budget,
    order: [Part; 4],
    weight: BucketId,
}

fn binance() -> Binance {
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
    let _ = fresh.try_charge(&order, Class::Normal, 0).unwrap().sent();
    let mut full = fresh.clone();
    while full.try_charge(&order, Class::Normal, 0).is_ok() {}
    Binance {
        fresh,
        full,
        order,
        weight,
    }
}

fn quotas() -> [Quota; 4] {
    let q = |period: Duration, burst: u32| {
        Quota::with_period(period)
            .unwrap()
            .allow_burst(NonZeroU32::new(burst).unwrap())
    };
    [
        q(Duration::from_secs(60) / 6000, 6000),
        q(Duration::from_secs(300) / 61_000, 61_000),
        q(Duration::from_secs(10) / 100, 100),
        q(Duration::from_secs(86_400) / 200_000, 200_000),
    ]
}

fn limiters<C: Clock + Clone, const N: usize>(quotas: &[Quota], clock: &C) -> [Limiter<C>; N] {
    std::array::from_fn(|i| RateLimiter::direct_with_clock(quotas[i], clock.clone()))
}

fn charge(budget: &mut Budget, parts: &[Part], now: i64) {
    match budget.try_charge(black_box(parts), Class::Normal, black_box(now)) {
        Ok(ticket) => drop(black_box(ticket)),
        Err(limited) => drop(black_box(limited)),
    }
}

fn check_all<C: Clock>(limiters: &[Limiter<C>]) {
    black_box(limiters.iter().all(|l| l.check().is_ok()));
}

fn steady(c: &mut Criterion) {
    let b = binance();
    let q = quotas();
    let fake = FakeRelativeClock::default();

    let mut g = c.benchmark_group("steady_4_part");
    g.bench_function("ergon", |bench| {
        let mut budget = b.fresh.clone();
        bench.iter_custom(|iters| {
            batched(
                iters,
                &mut budget,
                |s| s.clone_from(&b.fresh),
                |s| charge(s, &b.order, STEADY_NS),
            )
        })
    });
    g.bench_function("governor_4_limiters", |bench| {
        let mut l: [Limiter<FakeRelativeClock>; 4] = limiters(&q, &fake);
        bench.iter_custom(|iters| {
            batched(
                iters,
                &mut l,
                |s| *s = limiters(&q, &fake),
                |s| check_all(s),
            )
        })
    });
    g.finish();

    let mut g = c.benchmark_group("steady_1_part");
    let one = [Part::new(b.weight, 1)];
    g.bench_function("ergon", |bench| {
        let mut budget = b.fresh.clone();
        bench.iter_custom(|iters| {
            batched(
                iters,
                &mut budget,
                |s| s.clone_from(&b.fresh),
                |s| charge(s, &one, STEADY_NS),
            )
        })
    });
    g.bench_function("governor_1_limiter", |bench| {
        let mut l: [Limiter<FakeRelativeClock>; 1] = limiters(&q, &fake);
        bench.iter_custom(|iters| {
            batched(
                iters,
                &mut l,
                |s| *s = limiters(&q, &fake),
                |s| check_all(s),
            )
        })
    });
    g.finish();

    let mut g = c.benchmark_group("clock_read_per_call");
    let tsc = quanta::Clock::new();
    let base = tsc.raw();
    g.bench_function("ergon_quanta", |bench| {
        // The budget and the offset that puts the clock at STEADY_NS when a batch starts.
        let mut state = (b.fresh.clone(), 0i64);
        bench.iter_custom(|iters| {
            batched(
                iters,
                &mut state,
                |(budget, offset)| {
                    budget.clone_from(&b.fresh);
                    *offset = STEADY_NS - tsc.delta_as_nanos(base, tsc.raw()) as i64;
                },
                |(budget, offset)| {
                    let now = tsc.delta_as_nanos(base, tsc.raw()) as i64 + *offset;
                    charge(budget, &b.order, now)
                },
            )
        })
    });
    g.bench_function("governor_4_limiters_quanta", |bench| {
        let clock = QuantaClock::default();
        let mut l: [Limiter<QuantaClock>; 4] = limiters(&q, &clock);
        bench.iter_custom(|iters| {
            batched(
                iters,
                &mut l,
                |s| *s = limiters(&q, &clock),
                |s| check_all(s),
            )
        })
    });
    g.finish();
}

fn refusals_and_refunds(c: &mut Criterion) {
    let b = binance();
    let q = quotas();
    let fake = FakeRelativeClock::default();

    let mut g = c.benchmark_group("refused");
    g.bench_function("ergon_4_part", |bench| {
        let mut budget = b.full.clone();
        bench.iter(|| charge(&mut budget, &b.order, STEADY_NS))
    });
    g.bench_function("governor_1_limiter", |bench| {
        let l: [Limiter<FakeRelativeClock>; 1] = limiters(&q[2..], &fake);
        while l[0].check().is_ok() {}
        bench.iter(|| check_all(&l))
    });
    g.finish();

    c.bench_function("refund_cycle/ergon_4_part", |bench| {
        let mut budget = b.fresh.clone();
        bench.iter(|| {
            let t = budget
                .try_charge(black_box(&b.order), Class::Normal, black_box(STEADY_NS))
                .unwrap();
            budget.refund(t, STEADY_NS).unwrap();
        })
    });
}

fn idle(c: &mut Criterion) {
    let b = binance();
    let at = STEADY_NS + IDLE_GAP_NS;
    let mut g = c.benchmark_group("after_60s_idle");
    g.bench_function("no_tick", |bench| {
        let mut budget = b.fresh.clone();
        bench.iter_custom(|iters| {
            batched(
                iters,
                &mut budget,
                |s| s.clone_from(&b.fresh),
                |s| charge(s, &b.order, at),
            )
        })
    });
    g.bench_function("tick_during_gap", |bench| {
        let mut budget = b.fresh.clone();
        bench.iter_custom(|iters| {
            batched(
                iters,
                &mut budget,
                |s| {
                    s.clone_from(&b.fresh);
                    s.tick(at);
                },
                |s| charge(s, &b.order, at),
            )
        })
    });
    g.finish();
}

fn main() {
    // What criterion_group!/criterion_main! expand to, without their undocumented
    // public function.
    let mut c = Criterion::default().configure_from_args();
    steady(&mut c);
    refusals_and_refunds(&mut c);
    idle(&mut c);
    c.final_summary();
}
