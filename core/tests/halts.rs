//! Invariant 8: a halt lasts until `clear_halt`, whatever the time; a hold ends at its
//! time. The driver checks every admission against the model's halts and holds, and
//! the hold end after every `throttled`, over random histories; the examples pin the
//! edges.

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
    holds: true,
    resend: false,
};

const HOLDS: Mix = Mix {
    holds: 4,
    halts: 3,
    ..Mix::ALL
};

proptest! {
    #![proptest_config(cases(300))]

    #[test]
    fn holds_and_halts_in_any_history(
        cfg in cfg_strategy(),
        ops in ops_strategy(HOLDS, 200),
    ) {
        let mut d = Driver::new(&cfg, CHECKS);
        d.run(&ops);
    }

    /// Halted is refused at any later time, by any class, whatever the cost, until
    /// cleared.
    #[test]
    fn a_halt_outlasts_any_time(later in 0i64..i64::MAX / 2, ban_end in any::<i64>(), class in 0u8..3) {
        let mut b = Budget::builder();
        let ip = b.add("ip", Spec::gate()).unwrap();
        let w = b.add("w", Spec::sliding(10, 1000, 10)).unwrap();
        let mut budget = b.build(0).unwrap();
        budget.banned(ip, ban_end, 5);
        let parts = [Part::new(w, 1), Part::new(ip, 0)];
        let l = budget.try_charge(&parts, class_of(class), 5 + later).unwrap_err();
        prop_assert_eq!((l.bucket, l.why, l.ready_at_ns), (ip, Why::Halted, i64::MAX));
        prop_assert_eq!(budget.stats(ip).ban_until_ns, Some(ban_end));
        prop_assert_eq!(budget.halted().collect::<Vec<_>>(), vec![ip]);
        budget.clear_halt(ip);
        prop_assert!(budget.try_charge(&parts, class_of(class), 5 + later).is_ok());
        prop_assert_eq!(budget.halted().count(), 0);
    }

    /// A hold with a server wait ends at now + wait + hold guard, to the nanosecond.
    #[test]
    fn a_hold_ends_at_its_time(wait in 0i64..1_000_000, guard in 0i64..1_000, at in 0i64..1_000_000) {
        let mut b = Budget::builder();
        b.hold_guard(guard).unwrap();
        let w = b.add("w", Spec::sliding(10, 1000, 10)).unwrap();
        let mut budget = b.build(0).unwrap();
        budget.throttled(w, Some(wait), at);
        let end = at + wait + guard;
        let parts = [Part::new(w, 1)];
        if end > at {
            let l = budget.clone().try_charge(&parts, Class::Urgent, end - 1).unwrap_err();
            prop_assert_eq!((l.why, l.ready_at_ns), (Why::Held, end));
        }
        prop_assert!(budget.try_charge(&parts, Class::Urgent, end).is_ok());
        prop_assert_eq!(budget.stats(w).held_until_ns, None);
        prop_assert_eq!(budget.stats(w).throttles, 1);
    }
}

#[test]
fn a_throttle_without_a_wait_holds_for_one_window() {
    let mut b = Budget::builder();
    let w = b.add("w", Spec::sliding(10, 1000, 10)).unwrap();
    let f = b.add("f", Spec::fixed(10, 500)).unwrap();
    let c = b.add("c", Spec::in_flight(3)).unwrap();
    let mut budget = b.build(0).unwrap();
    for (id, end) in [(w, 1100), (f, 600), (c, 1_000_000_100)] {
        budget.throttled(id, None, 100);
        assert_eq!(budget.stats(id).held_until_ns, Some(end));
        let l = budget
            .clone()
            .try_charge(&[Part::new(id, 1)], Class::Urgent, end - 1)
            .unwrap_err();
        assert_eq!((l.why, l.ready_at_ns), (Why::Held, end));
        assert!(budget
            .clone()
            .try_charge(&[Part::new(id, 1)], Class::Urgent, end)
            .is_ok());
    }
}

#[test]
fn a_shorter_throttle_does_not_cut_a_longer_hold() {
    let mut b = Budget::builder();
    let w = b.add("w", Spec::sliding(10, 1000, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    budget.throttled(w, Some(500), 0);
    budget.throttled(w, Some(10), 100);
    assert_eq!(budget.stats(w).held_until_ns, Some(500));
    // A negative wait is read as none left: the hold stays.
    budget.throttled(w, Some(-50), 200);
    assert_eq!(budget.stats(w).held_until_ns, Some(500));
}

#[test]
fn a_halted_gate_stops_every_request_that_names_it() {
    let mut b = Budget::builder();
    let ip = b.add("ip", Spec::gate()).unwrap();
    let w = b.add("w", Spec::sliding(10, 1000, 10)).unwrap();
    let other = b.add("other", Spec::sliding(10, 1000, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    budget.banned(ip, 1000, 0);
    assert!(budget.is_halted(ip));
    // Halt ranks above a cost that could never pass and above a full bucket.
    let l = budget
        .try_charge(&[Part::new(w, 11), Part::new(ip, 0)], Class::Urgent, 1)
        .unwrap_err();
    assert_eq!((l.bucket, l.why), (ip, Why::Halted));
    assert_eq!(budget.stats(ip).refusals.halted, 1);
    // A request that does not charge the gate is not stopped by it.
    assert!(budget
        .try_charge(&[Part::new(other, 1)], Class::Urgent, 2)
        .is_ok());
    // Holds under a halt still end at their time, but the halt stays.
    budget.throttled(ip, Some(5), 2);
    let l = budget
        .try_charge(&[Part::new(ip, 0)], Class::Urgent, 1_000_000)
        .unwrap_err();
    assert_eq!(l.why, Why::Halted);
    budget.clear_halt(ip);
    assert!(budget
        .try_charge(&[Part::new(ip, 0)], Class::Urgent, 1_000_000)
        .is_ok());
    assert_eq!(budget.stats(ip).bans, 1);
}
