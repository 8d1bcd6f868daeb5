//! criterion: the cost of one charge against 1, 2, 4, 8 and 16 buckets, ergon next to
//! governor checking as many limiters in a row.
//!
//! Every bucket is a sliding window of 60 slots (the ring: the kind with the most
//! state). A ticket carries at most [`MAX_PARTS`] (8) parts, so the 16-bucket point is
//! two charges of 8 parts for ergon: say so when quoting it.
//!
//! `cargo bench --bench scaling`

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

mod common;

use common::batched;
use criterion::{BenchmarkId, Criterion};
use ergon_core::{Budget, Class, Part, Spec, MAX_PARTS};
use governor::clock::{Clock, FakeRelativeClock};
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

const SEC: i64 = 1_000_000_000;
const SIZES: [usize; 5] = [1, 2, 4, 8, 16];

type Limiter = RateLimiter<
    NotKeyed,
    InMemoryState,
    FakeRelativeClock,
    NoOpMiddleware<<FakeRelativeClock as Clock>::Instant>,
>;

fn scaling(c: &mut Criterion) {
    let mut g = c.benchmark_group("buckets");
    let fake = FakeRelativeClock::default();
    let quota = Quota::with_period(Duration::from_millis(10))
        .unwrap()
        .allow_burst(NonZeroU32::new(6000).unwrap());
    for n in SIZES {
        let mut b = Budget::builder();
        let parts: Vec<Part> = (0..n)
            .map(|i| {
                let id = b
                    .add(&format!("b{i}"), Spec::sliding(6000, 60 * SEC, 60))
                    .unwrap();
                Part::new(id, 1)
            })
            .collect();
        let fresh = b.build(0).unwrap();
        let charges: Vec<&[Part]> = parts.chunks(MAX_PARTS).collect();
        g.bench_with_input(BenchmarkId::new("ergon", n), &n, |bench, _| {
            let mut budget = fresh.clone();
            bench.iter_custom(|iters| {
                batched(
                    iters,
                    &mut budget,
                    |s| s.clone_from(&fresh),
                    |s| {
                        for parts in &charges {
                            match s.try_charge(black_box(parts), Class::Normal, black_box(SEC / 2))
                            {
                                Ok(t) => drop(black_box(t)),
                                Err(l) => drop(black_box(l)),
                            }
                        }
                    },
                )
            })
        });
        g.bench_with_input(BenchmarkId::new("governor", n), &n, |bench, _| {
            let make = || -> Vec<Limiter> {
                (0..n)
                    .map(|_| RateLimiter::direct_with_clock(quota, fake.clone()))
                    .collect()
            };
            let mut limiters = make();
            bench.iter_custom(|iters| {
                batched(
                    iters,
                    &mut limiters,
                    |s| *s = make(),
                    |s| {
                        black_box(s.iter().all(|l| l.check().is_ok()));
                    },
                )
            })
        });
    }
    g.finish();
}

fn main() {
    // What criterion_group!/criterion_main! expand to, without their undocumented
    // public function.
    let mut c = Criterion::default().configure_from_args();
    scaling(&mut c);
    c.final_summary();
}
