//! Invariant 3: all or none. A refused `try_charge` leaves every bucket exactly as it
//! was: used, holds, halts and what every class could still charge, compared before
//! and after (only the refusal counters may move).

mod common;

use common::*;
use ergon_core::{Budget, Class, Part, Spec, Why};
use proptest::prelude::*;

const CHECKS: Checks = Checks {
    safety: false,
    all_or_none: true,
    ready_at: false,
    clock_twin: false,
    refund: false,
    holds: false,
    resend: false,
};

proptest! {
    #![proptest_config(cases(150))]

    #[test]
    fn a_refused_charge_changes_no_bucket(
        cfg in cfg_strategy(),
        ops in ops_strategy(Mix::ALL, 150),
    ) {
        let mut d = Driver::new(&cfg, CHECKS);
        d.run(&ops);
    }
}

/// The part that refuses comes last: the parts before it passed their check and must
/// not have been charged.
#[test]
fn parts_before_the_refusing_one_are_not_charged() {
    let mut b = Budget::builder();
    let w = b.add("w", Spec::sliding(10, 1000, 10)).unwrap();
    let f = b.add("f", Spec::fixed(10, 1000)).unwrap();
    let t = b.add("t", Spec::token_every(10, 10)).unwrap();
    let c = b.add("c", Spec::in_flight(10)).unwrap();
    let small = b.add("small", Spec::sliding(1, 1000, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    let _ = budget
        .try_charge(&[Part::new(small, 1)], Class::Urgent, 0)
        .unwrap()
        .sent();
    let before = fingerprint(&budget);
    let parts = [
        Part::new(w, 4),
        Part::new(f, 4),
        Part::new(t, 4),
        Part::new(c, 4),
        Part::new(small, 1),
    ];
    for _ in 0..5 {
        let l = budget.try_charge(&parts, Class::Urgent, 5).unwrap_err();
        assert_eq!((l.bucket, l.why), (small, Why::Full));
    }
    assert_eq!(fingerprint(&budget), before);
    for id in [w, f, t, c] {
        assert_eq!(budget.stats(id).unwrap().used, 0);
        assert_eq!(budget.stats(id).unwrap().admitted, 0);
    }
    assert_eq!(budget.stats(small).unwrap().refusals.full, 5);
}

/// Two parts naming one bucket are checked for their sum: each alone would fit, the
/// two together do not, and neither is charged.
#[test]
fn a_bucket_named_twice_is_checked_for_the_sum() {
    let mut b = Budget::builder();
    let w = b.add("w", Spec::sliding(5, 1000, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    let l = budget
        .try_charge(&[Part::new(w, 3), Part::new(w, 3)], Class::Urgent, 0)
        .unwrap_err();
    assert_eq!(l.why, Why::TooBig);
    let _ = budget
        .try_charge(&[Part::new(w, 3)], Class::Urgent, 0)
        .unwrap()
        .sent();
    let l = budget
        .try_charge(&[Part::new(w, 1), Part::new(w, 2)], Class::Urgent, 0)
        .unwrap_err();
    assert_eq!(l.why, Why::Full);
    assert_eq!(budget.stats(w).unwrap().used, 3);
}
