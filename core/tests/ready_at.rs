//! Invariant 7: a refusal's `ready_at_ns` is exact. Charging the same parts at
//! `ready_at_ns` passes if nothing else happened; one nanosecond earlier it is refused
//! (Full or Held). Multi-part charges included: the answer names the bucket ready last.

mod common;

use common::*;
use ergon_core::{Budget, Class, Part, Spec, Why};
use proptest::prelude::*;

const CHECKS: Checks = Checks {
    safety: false,
    all_or_none: false,
    ready_at: true,
    clock_twin: false,
    refund: false,
    holds: false,
    resend: false,
};

proptest! {
    #![proptest_config(cases(300))]

    #[test]
    fn ready_at_is_exact_after_any_history(
        cfg in cfg_strategy(),
        ops in ops_strategy(Mix::ALL, 200),
    ) {
        let mut d = Driver::new(&cfg, CHECKS);
        d.run(&ops);
    }
}

/// Refused, `ready_at_ns`, refused 1 ns before, admitted at it.
fn exact(budget: &Budget, parts: &[Part], class: Class, now: i64) -> (Why, i64) {
    let l = budget.clone().try_charge(parts, class, now).unwrap_err();
    let before = budget.clone().try_charge(parts, class, l.ready_at_ns - 1);
    assert!(before.is_err(), "passed 1 ns before {l:?}");
    assert!(
        budget
            .clone()
            .try_charge(parts, class, l.ready_at_ns)
            .is_ok(),
        "refused at {l:?}"
    );
    (l.why, l.ready_at_ns)
}

#[test]
fn sliding_ready_when_the_charges_slot_leaves_the_window() {
    let mut b = Budget::builder();
    let w = b.add("w", Spec::sliding(3, 100, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    for t in [5, 37, 38] {
        let _ = budget
            .try_charge(&[Part::new(w, 1)], Class::Normal, t)
            .unwrap()
            .sent();
    }
    // The charge at 5 (slot 0) counts until slot 0 has wholly left the window: 110.
    assert_eq!(
        exact(&budget, &[Part::new(w, 1)], Class::Normal, 50),
        (Why::Full, 110)
    );
    // Two units need the slot of 37 and 38 gone too: 130.
    assert_eq!(
        exact(&budget, &[Part::new(w, 2)], Class::Normal, 50),
        (Why::Full, 140)
    );
}

#[test]
fn fixed_window_full_only_on_the_previous_side_is_ready_at_the_guard_end() {
    let mut b = Budget::builder();
    let f = b.add("f", Spec::fixed(2, 100).guard(10)).unwrap();
    let mut budget = b.build(0).unwrap();
    let _ = budget
        .try_charge(&[Part::new(f, 2)], Class::Urgent, 50)
        .unwrap()
        .sent();
    // At 103 the window [100, 200) is empty, but within the guard the previous window
    // counts too: ready at 110, not at the next boundary.
    assert_eq!(
        exact(&budget, &[Part::new(f, 1)], Class::Urgent, 103),
        (Why::Full, 110)
    );
}

#[test]
fn fixed_window_full_is_ready_after_the_next_boundary_guard() {
    let mut b = Budget::builder();
    let f = b.add("f", Spec::fixed(2, 100).phase(30).guard(10)).unwrap();
    let mut budget = b.build(0).unwrap();
    // In the trailing guard of [30, 130): counts in [130, 230) too, which in turn
    // counts within the leading guard of [230, 330): ready at 240.
    let _ = budget
        .try_charge(&[Part::new(f, 2)], Class::Urgent, 125)
        .unwrap()
        .sent();
    assert_eq!(
        exact(&budget, &[Part::new(f, 1)], Class::Urgent, 126),
        (Why::Full, 240)
    );
    // In the middle: ready at the next boundary plus its guard.
    let mut b = Budget::builder();
    let f = b.add("f", Spec::fixed(2, 100).phase(30).guard(10)).unwrap();
    let mut budget = b.build(0).unwrap();
    let _ = budget
        .try_charge(&[Part::new(f, 2)], Class::Urgent, 60)
        .unwrap()
        .sent();
    assert_eq!(
        exact(&budget, &[Part::new(f, 1)], Class::Urgent, 61),
        (Why::Full, 140)
    );
}

#[test]
fn token_ready_when_enough_has_drained() {
    let mut b = Budget::builder();
    let t = b.add("t", Spec::token_every(10, 4)).unwrap();
    let mut budget = b.build(0).unwrap();
    let _ = budget
        .try_charge(&[Part::new(t, 4)], Class::Urgent, 0)
        .unwrap()
        .sent();
    assert_eq!(
        exact(&budget, &[Part::new(t, 1)], Class::Urgent, 1),
        (Why::Full, 10)
    );
    assert_eq!(
        exact(&budget, &[Part::new(t, 3)], Class::Urgent, 1),
        (Why::Full, 30)
    );
}

#[test]
fn a_multi_part_charge_is_ready_when_its_last_bucket_is() {
    let mut b = Budget::builder();
    b.hold_guard(0).unwrap();
    let w = b.add("w", Spec::sliding(1, 100, 4)).unwrap();
    let t = b.add("t", Spec::token_every(60, 1)).unwrap();
    let f = b.add("f", Spec::fixed(1, 1000)).unwrap();
    let g = b.add("g", Spec::gate()).unwrap();
    let mut budget = b.build(0).unwrap();
    let all = [Part::new(w, 1), Part::new(t, 1), Part::new(g, 0)];
    let _ = budget.try_charge(&all, Class::Urgent, 0).unwrap().sent();
    budget.throttled(g, Some(90), 0).unwrap();
    // w is ready at 125, t at 60, the hold on g ends at 90: the charge at 125, and
    // the refusal names w.
    let l = budget
        .clone()
        .try_charge(&all, Class::Urgent, 1)
        .unwrap_err();
    assert_eq!((l.bucket, l.why, l.ready_at_ns), (w, Why::Full, 125));
    assert_eq!(exact(&budget, &all, Class::Urgent, 1), (Why::Full, 125));
    // A hold that ends last names the gate, as Held.
    budget.throttled(g, Some(300), 0).unwrap();
    let l = budget
        .clone()
        .try_charge(&all, Class::Urgent, 1)
        .unwrap_err();
    assert_eq!((l.bucket, l.why, l.ready_at_ns), (g, Why::Held, 300));
    assert_eq!(exact(&budget, &all, Class::Urgent, 1), (Why::Held, 300));
    // A fixed bucket full until its next window.
    let _ = budget
        .try_charge(&[Part::new(f, 1)], Class::Urgent, 500)
        .unwrap()
        .sent();
    let with_f = [Part::new(w, 1), Part::new(f, 1), Part::new(g, 0)];
    assert_eq!(
        exact(&budget, &with_f, Class::Urgent, 501),
        (Why::Full, 1000)
    );
}

/// A charge refused on its first part still answers from the current windows of
/// the parts after it (they were not yet advanced when the check stopped).
#[test]
fn a_refusal_on_an_early_part_reads_the_later_parts_at_now() {
    let mut b = Budget::builder();
    b.hold_guard(0).unwrap();
    let f = b.add("f", Spec::fixed(5, 67).phase(19).guard(16)).unwrap();
    let g = b.add("g", Spec::gate()).unwrap();
    let mut budget = b.build(18).unwrap();
    let _ = budget
        .try_charge(&[Part::new(f, 3)], Class::Urgent, 168)
        .unwrap()
        .sent();
    budget.throttled(g, Some(2), 236).unwrap();
    // At 236 the window [220, 287) of f is empty: only the hold on g refuses.
    let parts = [Part::new(g, 0), Part::new(f, 3)];
    let l = budget
        .clone()
        .try_charge(&parts, Class::Urgent, 236)
        .unwrap_err();
    assert_eq!((l.bucket, l.why, l.ready_at_ns), (g, Why::Held, 238));
    assert_eq!(exact(&budget, &parts, Class::Urgent, 236), (Why::Held, 238));
}
