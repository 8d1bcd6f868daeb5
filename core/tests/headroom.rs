//! Invariant 5, headroom: Bulk never pushes a bucket past `L − H(bulk)`, Normal never
//! past `L − H(normal)`; Urgent can use all of `L`. Checked against the reference
//! log for every kind over random histories (the driver checks every admission
//! against its class's allowance), and on each kind directly.

mod common;

use common::*;
use ergon_core::{Budget, Class, Part, Spec, Why};
use proptest::prelude::*;

const CHECKS: Checks = Checks {
    safety: true,
    all_or_none: false,
    ready_at: false,
    clock_twin: false,
    refund: false,
    holds: false,
    resend: false,
};

/// Every bucket has headroom.
fn with_headroom() -> impl Strategy<Value = Cfg> {
    cfg_strategy().prop_map(|mut cfg| {
        for (i, b) in cfg.buckets.iter_mut().enumerate() {
            if b.limit > 1 && !b.is_gate() {
                let bulk = 1 + (i as u64) % (b.limit - 1);
                b.headroom = (bulk / 2, bulk);
            }
        }
        cfg
    })
}

proptest! {
    #![proptest_config(cases(300))]

    #[test]
    fn no_class_uses_more_than_its_allowance(
        cfg in with_headroom(),
        ops in ops_strategy(Mix::ALL, 200),
    ) {
        let mut d = Driver::new(&cfg, CHECKS);
        d.run(&ops);
    }

    /// Filling with one class, then the next: each stops exactly at its allowance,
    /// and Urgent reaches the whole limit.
    #[test]
    fn each_class_fills_exactly_to_its_allowance(
        kind in 0usize..4,
        limit in 2u64..30,
        normal in 0u64..30,
        bulk in 0u64..30,
    ) {
        let bulk = 1 + bulk % (limit - 1);
        let normal = normal % (bulk + 1);
        let spec = [
            Spec::sliding(limit, 1000, 10),
            Spec::fixed(limit, 1000),
            Spec::token_every(1000, limit),
            Spec::in_flight(limit),
        ][kind]
            .headroom(normal, bulk);
        let mut b = Budget::builder();
        let id = b.add("x", spec).unwrap();
        let mut budget = b.build(0).unwrap();
        let mut fill = |class: Class| {
            let mut n = 0;
            while budget.try_charge(&[Part::new(id, 1)], class, 1).is_ok() {
                n += 1;
                prop_assert!(n <= limit);
            }
            Ok(n)
        };
        prop_assert_eq!(fill(Class::Bulk)?, limit - bulk);
        prop_assert_eq!(fill(Class::Normal)?, bulk - normal);
        prop_assert_eq!(fill(Class::Urgent)?, normal);
        prop_assert_eq!(budget.stats(id).unwrap().used, limit);
    }
}

/// A cost above the class's allowance is TooBig at once, though Urgent could pass it.
#[test]
fn above_the_class_allowance_is_too_big() {
    let mut b = Budget::builder();
    let w = b
        .add("w", Spec::sliding(10, 1000, 10).headroom(2, 5))
        .unwrap();
    let mut budget = b.build(0).unwrap();
    let l = budget
        .try_charge(&[Part::new(w, 6)], Class::Bulk, 0)
        .unwrap_err();
    assert_eq!((l.why, l.ready_at_ns), (Why::TooBig, i64::MAX));
    let l = budget
        .try_charge(&[Part::new(w, 9)], Class::Normal, 0)
        .unwrap_err();
    assert_eq!(l.why, Why::TooBig);
    assert_eq!(budget.stats(w).unwrap().refusals.too_big, 2);
    assert!(budget
        .try_charge(&[Part::new(w, 10)], Class::Urgent, 0)
        .is_ok());
    let l = budget
        .try_charge(&[Part::new(w, 11)], Class::Urgent, 0)
        .unwrap_err();
    assert_eq!(l.why, Why::TooBig);
}
