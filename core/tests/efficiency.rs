//! Invariant 2, efficiency: conservative must not mean wasteful. Under saturating
//! unit demand (every nanosecond, units are charged one by one until refused):
//!
//! - a sliding bucket of S slots admits at least `L·(1 − 1/S) − 1` per window in
//!   steady state (a charge is held one slot past its window at most, so the ring
//!   turns every S + 1 slots: `L·S/(S + 1)` per window);
//! - a fixed bucket admits `L` in every window: the guard delays the window's first
//!   admission to the end of its leading guard, but costs no units when demand is
//!   saturating;
//! - a token bucket admits `burst + Δt / interval` over Δt, less one unit.

use ergon_core::{Budget, Class, Part, Spec};
use proptest::prelude::*;

/// Charges units one by one at each nanosecond of `[from, to)`, until refused, and
/// returns the times of the units admitted.
fn saturate(budget: &mut Budget, spec_limit: u64, from: i64, to: i64) -> Vec<i64> {
    let id = budget.ids().next().unwrap();
    let mut admitted = vec![];
    for t in from..to {
        for _ in 0..=spec_limit {
            match budget.try_charge(&[Part::new(id, 1)], Class::Urgent, t) {
                Ok(ticket) => {
                    let _ = ticket.sent();
                    admitted.push(t);
                }
                Err(_) => break,
            }
        }
    }
    admitted
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        rng_seed: prop::test_runner::RngSeed::Fixed(0x6566_6669),
        ..ProptestConfig::default()
    })]

    #[test]
    fn sliding_admits_all_but_one_slot(
        limit in 1u64..40,
        slots in 1u32..16,
        slot in 1i64..30,
        start in -100i64..100,
    ) {
        let window = slot * i64::from(slots);
        let mut b = Budget::builder();
        b.add("w", Spec::sliding(limit, window, slots)).unwrap();
        let mut budget = b.build(start).unwrap();
        let windows = 24;
        let admitted = saturate(&mut budget, limit, start, start + windows * window);
        // Steady state: skip the first two windows.
        let steady = admitted.iter().filter(|&&t| t >= start + 2 * window).count() as f64;
        let per_window = steady / (windows - 2) as f64;
        let floor = limit as f64 * (1.0 - 1.0 / f64::from(slots)) - 1.0;
        prop_assert!(
            per_window >= floor,
            "{per_window} per window < {floor} (L {limit}, S {slots}, slot {slot})"
        );
        // And never more than the limit (the safety side of the same run).
        prop_assert!(per_window <= limit as f64);
    }

    #[test]
    fn fixed_admits_the_limit_in_every_window(
        limit in 1u64..40,
        window in 2i64..300,
        phase in 0i64..300,
        guard in 0i64..150,
    ) {
        let guard = guard % ((window + 1) / 2);
        let mut b = Budget::builder();
        b.add("f", Spec::fixed(limit, window).phase(phase).guard(guard)).unwrap();
        let mut budget = b.build(0).unwrap();
        let windows = 12;
        let admitted = saturate(&mut budget, limit, 0, (windows + 1) * window);
        let first = phase.rem_euclid(window);
        for n in 1..windows {
            let (s, e) = (first + n * window, first + (n + 1) * window);
            let inside = admitted.iter().filter(|&&t| s <= t && t < e).count() as u64;
            prop_assert_eq!(inside, limit, "window [{}, {}) guard {}", s, e, guard);
            // All at the end of the leading guard, the first instant it may.
            prop_assert!(admitted.iter().filter(|&&t| s <= t && t < e).all(|&t| t == s + guard));
        }
    }

    #[test]
    fn token_admits_its_rate(interval in 1i64..50, burst in 1u64..20, span in 100i64..3000) {
        let mut b = Budget::builder();
        b.add("t", Spec::token_every(interval, burst)).unwrap();
        let mut budget = b.build(0).unwrap();
        let admitted = saturate(&mut budget, burst, 0, span).len() as i64;
        let ideal = burst as i64 + (span - 1) / interval;
        prop_assert!(admitted >= ideal - 1 && admitted <= ideal, "{admitted} vs {ideal}");
    }
}
