//! Zero allocation after construction: a counting global allocator watches one
//! million mixed operations (charges of every class and size, refunds, sent/complete,
//! `charge_after`, `observe_used`, throttles, bans, ticks, stats, re-sends) and
//! asserts that not one of them allocated.
//!
//! Only allocations made by this test's thread while counting is on are counted, so
//! the test harness's own threads cannot disturb the figure. The release run (CI)
//! does one million operations; a debug run does fewer to stay quick.

use ergon_core::{Budget, Class, Part, Resend, Spec, Verdict};

#[path = "support/alloc.rs"]
mod alloc;
use alloc::{allocations, COUNTING};

#[cfg(not(debug_assertions))]
const OPERATIONS: u64 = 1_000_000;
#[cfg(debug_assertions)]
const OPERATIONS: u64 = 50_000;

/// A small xorshift: deterministic, and no allocation of its own.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn a_million_mixed_operations_allocate_nothing() {
    const MS: i64 = 1_000_000;
    let mut b = Budget::builder();
    b.hold_guard(5 * MS).unwrap();
    let weight = b
        .add(
            "weight",
            Spec::sliding(1200, 60_000 * MS, 60).headroom(100, 300),
        )
        .unwrap();
    let orders = b
        .add(
            "orders10s",
            Spec::fixed(50, 10_000 * MS)
                .phase(3 * MS)
                .guard(20 * MS)
                .headroom(5, 10),
        )
        .unwrap();
    let smooth = b.add("smooth", Spec::token(200, 40)).unwrap();
    let conc = b.add("conc", Spec::in_flight(16)).unwrap();
    let ip = b.add("ip", Spec::gate()).unwrap();
    let fine = b.add("fine", Spec::sliding(30, 64 * MS, 64)).unwrap();
    let mut shapes = [
        b.shape(&[Part::new(weight, 1), Part::new(orders, 1), Part::new(ip, 0)])
            .unwrap(),
        b.shape(&[Part::new(weight, 2), Part::new(conc, 1)])
            .unwrap(),
        b.shape(&[
            Part::new(smooth, 1),
            Part::new(fine, 1),
            Part::new(weight, 1),
        ])
        .unwrap(),
        b.shape(&[Part::new(fine, 1), Part::new(fine, 1)]).unwrap(),
    ];
    let mut budget = b.build(0).unwrap();
    let ids = [weight, orders, smooth, conc, ip, fine];

    // Everything the loop uses is made before counting starts.
    let mut tickets: [Option<ergon_core::Ticket>; 16] = Default::default();
    let mut flights: [Option<ergon_core::Flight>; 16] = Default::default();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut now: i64 = 0;
    let (mut ok, mut refused, mut resent, mut shaped) = (0u64, 0u64, 0u64, 0u64);
    let mut parts = [Part::new(ip, 0); 4];

    COUNTING.with(|c| c.set(true));
    for _ in 0..OPERATIONS {
        // Mostly small steps, sometimes a long idle gap, sometimes a step back.
        now += match rng.below(100) {
            0 => 70_000 * MS,
            1..=3 => -(rng.below(5 * MS as u64) as i64),
            _ => rng.below(2 * MS as u64) as i64,
        };
        let slot = rng.below(16) as usize;
        let class = [Class::Urgent, Class::Normal, Class::Bulk][rng.below(3) as usize];
        match rng.below(20) {
            0..=7 => {
                let n = 1 + rng.below(4) as usize;
                for p in parts.iter_mut().take(n) {
                    *p = Part::new(ids[rng.below(6) as usize], rng.below(4) as u32);
                }
                let charged = if rng.below(2) == 0 {
                    shaped += 1;
                    // Now and then a shape registered while running (until full).
                    if rng.below(20_000) == 0 {
                        if let Ok(s) = budget.shape(&parts[..n]) {
                            shapes[0] = s;
                        }
                    }
                    budget.try_charge_shape(shapes[rng.below(4) as usize], class, now)
                } else {
                    budget.try_charge(&parts[..n], class, now)
                };
                match charged {
                    Ok(t) => {
                        ok += 1;
                        // A ticket displaced from its slot is sent, then completed.
                        if let Some(old) = tickets[slot].replace(t) {
                            budget.complete(old.sent(), now).unwrap();
                        }
                    }
                    Err(_) => refused += 1,
                }
            }
            8 | 9 => {
                if let Some(t) = tickets[slot].take() {
                    budget.refund(t, now).unwrap();
                }
            }
            10 | 11 => {
                if let Some(t) = tickets[slot].take() {
                    if let Some(f) = flights[slot].replace(t.sent()) {
                        budget.complete(f, now).unwrap();
                    }
                }
            }
            12 => {
                if let Some(f) = flights[slot].take() {
                    budget.complete(f, now).unwrap();
                }
            }
            13 => budget
                .charge_after(ids[rng.below(6) as usize], rng.below(3) as u32, now)
                .unwrap(),
            14 => budget
                .observe_used(ids[rng.below(6) as usize], rng.below(1300), now)
                .unwrap(),
            15 => {
                let wait = (rng.below(2) == 0).then(|| rng.below(10 * MS as u64) as i64);
                budget
                    .throttled(ids[rng.below(6) as usize], wait, now)
                    .unwrap();
            }
            16 => {
                let id = ids[rng.below(6) as usize];
                if rng.below(50) == 0 {
                    budget.banned(id, now + 1000 * MS, now).unwrap();
                } else {
                    budget.clear_halt(id).unwrap();
                }
            }
            17 => {
                std::hint::black_box(budget.poll_timeout(now));
                budget.tick(now);
            }
            18 => {
                let s = budget.stats(ids[rng.below(6) as usize]).unwrap();
                std::hint::black_box(s);
                std::hint::black_box(budget.halted().count());
            }
            _ => {
                let verdict = match rng.below(4) {
                    0 => Verdict::NotRun,
                    1 => Verdict::Unknown,
                    2 => Verdict::ClockSkew,
                    _ => Verdict::Throttled {
                        bucket: weight,
                        until_ns: now + MS,
                    },
                };
                let order = [Part::new(weight, 1), Part::new(orders, 1), Part::new(ip, 0)];
                match budget.resend(&verdict, &order, class, now + 5 * MS, now) {
                    Resend::Send(t) => {
                        resent += 1;
                        budget.refund(t, now).unwrap();
                    }
                    other => {
                        let _ = std::hint::black_box(other);
                    }
                }
            }
        }
    }
    COUNTING.with(|c| c.set(false));

    let allocations = allocations();
    println!(
        "{OPERATIONS} operations: {ok} charges admitted ({shaped} shapes tried), {refused} refused, {resent} re-sent, {allocations} allocations"
    );
    assert_eq!(allocations, 0, "the budget allocated after construction");
    // The mix really exercised both paths.
    assert!(ok > OPERATIONS / 20 && refused > OPERATIONS / 100 && resent > 0);
    assert!(shaped > OPERATIONS / 10);
}

/// The counter works: the same allocator sees an allocation made while counting.
#[test]
fn the_counter_sees_an_allocation() {
    COUNTING.with(|c| c.set(true));
    let before = allocations();
    let v = std::hint::black_box(vec![1u8; 64]);
    let after = allocations();
    COUNTING.with(|c| c.set(false));
    drop(v);
    assert_eq!(after, before + 1);
}
