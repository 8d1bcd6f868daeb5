//! Invariant 8: a halt lasts until `clear_halt`, whatever the time; a hold ends at its
//! time. The driver checks every admission against the model's halts and holds, and
//! the hold end after every `throttled`, over random histories; the examples pin the
//! edges.

mod common;

use common::*;
use ergon_core::{Budget, Class, ConfigError, Part, Spec, Verdict, Why, DEFAULT_HOLD_GUARD_NS};
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
        budget.banned(ip, ban_end, 5).unwrap();
        let parts = [Part::new(w, 1), Part::new(ip, 0)];
        let l = budget.try_charge(&parts, class_of(class), 5 + later).unwrap_err();
        prop_assert_eq!((l.bucket, l.why, l.ready_at_ns), (ip, Why::Halted, i64::MAX));
        prop_assert_eq!(budget.stats(ip).unwrap().ban_until_ns, Some(ban_end));
        prop_assert_eq!(budget.halted().collect::<Vec<_>>(), vec![ip]);
        budget.clear_halt(ip).unwrap();
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
        budget.throttled(w, Some(wait), at).unwrap();
        let end = at + wait + guard;
        let parts = [Part::new(w, 1)];
        if end > at {
            let l = budget.clone().try_charge(&parts, Class::Urgent, end - 1).unwrap_err();
            prop_assert_eq!((l.why, l.ready_at_ns), (Why::Held, end));
        }
        prop_assert!(budget.try_charge(&parts, Class::Urgent, end).is_ok());
        prop_assert_eq!(budget.stats(w).unwrap().held_until_ns, None);
        prop_assert_eq!(budget.stats(w).unwrap().throttles, 1);
    }
}

#[test]
fn a_throttle_without_a_wait_holds_for_one_window() {
    let mut b = Budget::builder();
    b.hold_guard(0).unwrap();
    let w = b.add("w", Spec::sliding(10, 1000, 10)).unwrap();
    let f = b.add("f", Spec::fixed(10, 500)).unwrap();
    let c = b.add("c", Spec::in_flight(3)).unwrap();
    let mut budget = b.build(0).unwrap();
    for (id, end) in [(w, 1100), (f, 600), (c, 1_000_000_100)] {
        budget.throttled(id, None, 100).unwrap();
        assert_eq!(budget.stats(id).unwrap().held_until_ns, Some(end));
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
    b.hold_guard(0).unwrap();
    let w = b.add("w", Spec::sliding(10, 1000, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    budget.throttled(w, Some(5000), 0).unwrap();
    budget.throttled(w, Some(10), 100).unwrap();
    assert_eq!(budget.stats(w).unwrap().held_until_ns, Some(5000));
    // A negative wait holds like none (one window, to 1200): the longer hold stays.
    budget.throttled(w, Some(-50), 200).unwrap();
    assert_eq!(budget.stats(w).unwrap().held_until_ns, Some(5000));
}

/// Issue 12, item 3: `Retry-After: 0`, a past date or a reset time already gone
/// holds for one window, as if the server had named no wait, not for nothing.
#[test]
fn a_zero_or_past_wait_holds_for_one_window() {
    for wait in [0, -1, -5_000_000_000, i64::MIN] {
        let mut b = Budget::builder();
        let w = b.add("w", Spec::sliding(10, 1000, 10)).unwrap();
        let f = b.add("f", Spec::fixed(10, 500)).unwrap();
        let ip = b.add("ip", Spec::gate()).unwrap();
        let mut budget = b.build(0).unwrap();
        for (id, end) in [(w, 1100), (f, 600), (ip, 1_000_000_100)] {
            let v = budget.throttled(id, Some(wait), 100).unwrap();
            assert_eq!(
                v,
                Verdict::Throttled {
                    bucket: id,
                    until_ns: end
                },
                "wait {wait}"
            );
            assert_eq!(budget.stats(id).unwrap().held_until_ns, Some(end));
            let l = budget
                .clone()
                .try_charge(&[Part::new(id, 1)], Class::Urgent, end - 1)
                .unwrap_err();
            assert_eq!((l.why, l.ready_at_ns), (Why::Held, end));
        }
    }
}

/// Issue 12, item 3: the hold guard defaults to 50 ms, so a server wait never ends
/// exactly when the venue's does.
#[test]
fn the_hold_guard_defaults_to_50_ms() {
    assert_eq!(DEFAULT_HOLD_GUARD_NS, 50_000_000);
    let mut b = Budget::builder();
    let w = b.add("w", Spec::sliding(10, 1000, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    let v = budget.throttled(w, Some(1_000), 0).unwrap();
    assert_eq!(
        v,
        Verdict::Throttled {
            bucket: w,
            until_ns: 1_000 + 50_000_000
        }
    );
}

/// Issue 12, item 2: a server wait above the bucket's cap halts it as a ban (the
/// alerting path sees it; only a person resumes it), whatever the class.
#[test]
fn a_wait_above_the_cap_halts_as_a_ban() {
    const SEC: i64 = 1_000_000_000;
    let mut b = Budget::builder();
    let w = b.add("w", Spec::sliding(10, 60 * SEC, 10)).unwrap();
    let long = b.add("long", Spec::fixed(10, 86_400 * SEC)).unwrap();
    let capped = b.add("capped", Spec::gate().max_wait(10 * SEC)).unwrap();
    let mut budget = b.build(0).unwrap();
    // The default cap: the longer of 5 minutes and two windows.
    assert_eq!(
        budget.throttled(w, Some(300 * SEC), 0).unwrap(),
        Verdict::Throttled {
            bucket: w,
            until_ns: 300 * SEC + DEFAULT_HOLD_GUARD_NS
        }
    );
    assert!(!budget.is_halted(w).unwrap());
    assert_eq!(
        budget.throttled(long, Some(2 * 86_400 * SEC), 0).unwrap(),
        Verdict::Throttled {
            bucket: long,
            until_ns: 2 * 86_400 * SEC + DEFAULT_HOLD_GUARD_NS
        }
    );
    assert_eq!(
        budget.throttled(w, Some(300 * SEC + 1), 7).unwrap(),
        Verdict::Banned {
            bucket: w,
            until_ns: 300 * SEC + 8
        }
    );
    assert_eq!(
        budget.throttled(capped, Some(10 * SEC + 1), 7).unwrap(),
        Verdict::Banned {
            bucket: capped,
            until_ns: 10 * SEC + 8
        }
    );
    // A far-future wait saturates instead of overflowing.
    assert_eq!(
        budget
            .throttled(long, Some(i64::MAX), i64::MAX - 5)
            .unwrap(),
        Verdict::Banned {
            bucket: long,
            until_ns: i64::MAX
        }
    );
    for id in [w, capped, long] {
        let s = budget.stats(id).unwrap();
        assert!(s.halted);
        assert_eq!(s.bans, 1);
        let l = budget
            .clone()
            .try_charge(&[Part::new(id, 0)], Class::Urgent, i64::MAX)
            .unwrap_err();
        assert_eq!(l.why, Why::Halted);
    }
    assert_eq!(budget.stats(w).unwrap().throttles, 1);
    assert_eq!(budget.stats(w).unwrap().ban_until_ns, Some(300 * SEC + 8));
    budget.clear_halt(w).unwrap();
    assert!(budget
        .try_charge(&[Part::new(w, 1)], Class::Urgent, 400 * SEC)
        .is_ok());
}

#[test]
fn a_max_wait_of_zero_or_less_is_refused() {
    let mut b = Budget::builder();
    assert_eq!(
        b.add("w", Spec::gate().max_wait(0)),
        Err(ConfigError::OptionNotForKind)
    );
    assert_eq!(
        b.add("w", Spec::gate().max_wait(-1)),
        Err(ConfigError::OptionNotForKind)
    );
}

#[test]
fn a_halted_gate_stops_every_request_that_names_it() {
    let mut b = Budget::builder();
    b.hold_guard(0).unwrap();
    let ip = b.add("ip", Spec::gate()).unwrap();
    let w = b.add("w", Spec::sliding(10, 1000, 10)).unwrap();
    let other = b.add("other", Spec::sliding(10, 1000, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    budget.banned(ip, 1000, 0).unwrap();
    assert!(budget.is_halted(ip).unwrap());
    // Halt ranks above a cost that could never pass and above a full bucket.
    let l = budget
        .try_charge(&[Part::new(w, 11), Part::new(ip, 0)], Class::Urgent, 1)
        .unwrap_err();
    assert_eq!((l.bucket, l.why), (ip, Why::Halted));
    assert_eq!(budget.stats(ip).unwrap().refusals.halted, 1);
    // A request that does not charge the gate is not stopped by it.
    assert!(budget
        .try_charge(&[Part::new(other, 1)], Class::Urgent, 2)
        .is_ok());
    // Holds under a halt still end at their time, but the halt stays.
    budget.throttled(ip, Some(5), 2).unwrap();
    let l = budget
        .try_charge(&[Part::new(ip, 0)], Class::Urgent, 1_000_000)
        .unwrap_err();
    assert_eq!(l.why, Why::Halted);
    budget.clear_halt(ip).unwrap();
    assert!(budget
        .try_charge(&[Part::new(ip, 0)], Class::Urgent, 1_000_000)
        .is_ok());
    assert_eq!(budget.stats(ip).unwrap().bans, 1);
}
