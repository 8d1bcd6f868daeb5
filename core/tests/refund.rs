//! Invariant 4: a refund returns exactly what was charged, to the slot still in the
//! window; once that slot has left the window it changes nothing. Token buckets give
//! back exactly when no other charge came after; otherwise nothing (conservative: a
//! refund never mints).
//!
//! "Exactly" is checked as an equivalence: a budget that charged and refunded is
//! indistinguishable (used, holds, what every class could charge) from a clone that
//! never charged.

mod common;

use common::*;
use ergon_core::{Budget, Class, Part, Spec};
use proptest::prelude::*;

const CHECKS: Checks = Checks {
    safety: true,
    all_or_none: false,
    ready_at: false,
    clock_twin: false,
    refund: true,
    holds: false,
    resend: false,
};

fn charge_parts() -> impl Strategy<Value = (Vec<(u8, u32)>, u8)> {
    (
        prop::collection::vec((any::<u8>(), 0u32..=MAX_LIMIT as u32 / 2), 1..5),
        any::<u8>(),
    )
}

proptest! {
    #![proptest_config(cases(300))]

    /// Random histories with refunds among everything else: a refund gives back at
    /// most what its ticket charged (in-flight: exactly), and the safety model, which
    /// forgets refunded charges, still holds.
    #[test]
    fn refunds_in_any_history_never_mint(
        cfg in cfg_strategy(),
        ops in ops_strategy(Mix::ALL, 200),
    ) {
        let mut d = Driver::new(&cfg, CHECKS);
        d.run(&ops);
    }

    /// After any history, a charge refunded `later` ns afterwards (no other charge in
    /// between) leaves the budget as if it had never been made.
    #[test]
    fn refund_is_as_if_never_charged(
        cfg in cfg_strategy(),
        prelude in ops_strategy(Mix::PLAIN, 60),
        (parts, class) in charge_parts(),
        later in prop_oneof![0i64..5, 0i64..400],
    ) {
        let mut d = Driver::new(&cfg, Checks::default());
        d.run(&prelude);
        let t = d.now.max(d.caller);
        let parts: Vec<Part> = parts.iter().map(|&(b, c)| Part::new(d.ids[usize::from(b) % d.ids.len()], c)).collect();
        let mut never = d.budget.clone();
        let class = class_of(class);
        if let Ok(ticket) = d.budget.try_charge(&parts, class, t) {
            d.budget.tick(t + later);
            never.tick(t + later);
            d.budget.refund(ticket, t + later).unwrap();
            prop_assert_eq!(fingerprint(&d.budget), fingerprint(&never));
        }
    }

    /// A refund after the charge's slot (sliding) or windows (fixed) have passed
    /// changes nothing.
    #[test]
    fn refund_after_the_window_changes_nothing(
        cfg in cfg_with(prop_oneof![
            (1i64..40, 1u32..9).prop_map(|(slot, slots)| RKind::Sliding { window: slot * i64::from(slots), slots }),
            (2i64..200, 0i64..200, any::<u16>()).prop_map(|(window, phase, g)| RKind::Fixed {
                window, phase, guard: i64::from(g) % ((window + 1) / 2),
            }),
        ]),
        prelude in ops_strategy(Mix::PLAIN, 60),
        (parts, class) in charge_parts(),
        extra in 0i64..100,
        again in any::<bool>(),
    ) {
        let mut d = Driver::new(&cfg, Checks::default());
        d.run(&prelude);
        let t = d.now.max(d.caller);
        let parts: Vec<Part> = parts.iter().map(|&(b, c)| Part::new(d.ids[usize::from(b) % d.ids.len()], c)).collect();
        if let Ok(ticket) = d.budget.try_charge(&parts, class_of(class), t) {
            // Past every window: the longest window plus one slot, plus the guard.
            let past = cfg.buckets.iter().map(|b| match b.kind {
                RKind::Sliding { window, slots } => window + window / i64::from(slots),
                RKind::Fixed { window, guard, .. } => 2 * window + guard,
                _ => 0,
            }).max().unwrap();
            d.budget.tick(t + past + extra);
            // A new charge may sit in the very cell the old one used.
            if again {
                let _ = d.budget.try_charge(&parts, Class::Urgent, t + past + extra).map(|t| t.sent());
            }
            let before = fingerprint(&d.budget);
            d.budget.refund(ticket, t + past + extra).unwrap();
            prop_assert_eq!(fingerprint(&d.budget), before);
        }
    }
}

#[test]
fn sliding_refund_goes_back_to_its_slot_until_it_leaves() {
    let mut b = Budget::builder();
    let w = b.add("w", Spec::sliding(4, 100, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    let early = budget
        .try_charge(&[Part::new(w, 3)], Class::Urgent, 5)
        .unwrap();
    let late = budget
        .try_charge(&[Part::new(w, 1)], Class::Urgent, 50)
        .unwrap();
    // At 109 the slot of 5 still counts; the refund takes its 3 units off.
    budget.refund(early, 109).unwrap();
    assert_eq!(budget.stats(w).unwrap().used, 1);
    assert!(budget
        .try_charge(&[Part::new(w, 3)], Class::Urgent, 109)
        .is_ok());
    // At 160 the slot of 50 has left: refunding it does nothing (and cannot take
    // units from the charge made since in the same cell of the ring).
    let _ = budget
        .try_charge(&[Part::new(w, 1)], Class::Urgent, 160)
        .unwrap()
        .sent();
    let used = budget.stats(w).unwrap().used;
    assert_eq!(used, 4);
    budget.refund(late, 160).unwrap();
    assert_eq!(budget.stats(w).unwrap().used, used);
    assert_eq!(budget.stats(w).unwrap().refunds, 2);
}

#[test]
fn token_refund_is_exact_when_last_and_never_mints_otherwise() {
    let mut b = Budget::builder();
    let t = b.add("t", Spec::token_every(10, 4)).unwrap();
    let mut budget = b.build(0).unwrap();
    let first = budget
        .try_charge(&[Part::new(t, 2)], Class::Urgent, 0)
        .unwrap();
    let second = budget
        .try_charge(&[Part::new(t, 2)], Class::Urgent, 0)
        .unwrap();
    // The first is not the last charge: its refund gives nothing back.
    let before = fingerprint(&budget);
    budget.refund(first, 1).unwrap();
    assert_eq!(fingerprint(&budget), before);
    // The second is the last: exact.
    let mut never = Budget::builder();
    let t2 = never.add("t", Spec::token_every(10, 4)).unwrap();
    let mut never = never.build(0).unwrap();
    let _ = never
        .try_charge(&[Part::new(t2, 2)], Class::Urgent, 0)
        .unwrap()
        .sent();
    never.tick(1);
    budget.refund(second, 1).unwrap();
    assert_eq!(fingerprint(&budget), fingerprint(&never));
    // charge_after in between also makes the refund give nothing.
    let third = budget
        .try_charge(&[Part::new(t, 1)], Class::Urgent, 1)
        .unwrap();
    budget.charge_after(t, 1, 1).unwrap();
    let before = fingerprint(&budget);
    budget.refund(third, 1).unwrap();
    assert_eq!(fingerprint(&budget), before);
}

#[test]
fn in_flight_refund_and_complete_release() {
    let mut b = Budget::builder();
    let c = b.add("c", Spec::in_flight(2)).unwrap();
    let mut budget = b.build(0).unwrap();
    let a = budget
        .try_charge(&[Part::new(c, 1)], Class::Urgent, 0)
        .unwrap();
    let z = budget
        .try_charge(&[Part::new(c, 1)], Class::Urgent, 0)
        .unwrap();
    assert!(budget
        .try_charge(&[Part::new(c, 1)], Class::Urgent, 10_000)
        .is_err());
    budget.refund(a, 1).unwrap();
    assert_eq!(budget.stats(c).unwrap().used, 1);
    let flight = z.sent();
    assert_eq!(budget.stats(c).unwrap().used, 1);
    budget.complete(flight, 2).unwrap();
    assert_eq!(budget.stats(c).unwrap().used, 0);
}

/// The server's figure never includes a request that was not sent: a refund after
/// `observe_used` raised the count must not take the units off the raised count.
#[test]
fn a_refund_after_a_server_figure_keeps_the_figure() {
    for spec in [
        Spec::sliding(20, 1000, 10),
        Spec::fixed(20, 1000),
        Spec::token_every(100, 20),
    ] {
        let mut b = Budget::builder();
        let w = b.add("w", spec).unwrap();
        let mut budget = b.build(0).unwrap();
        let unsent = budget
            .try_charge(&[Part::new(w, 2)], Class::Urgent, 10)
            .unwrap();
        // Others on the IP used 10; ours was never sent, so it is not in the figure.
        budget.observe_used(w, 10, 11).unwrap();
        assert_eq!(budget.stats(w).unwrap().used, 10);
        budget.refund(unsent, 12).unwrap();
        assert_eq!(budget.stats(w).unwrap().used, 10, "{spec:?}");
        assert_eq!(budget.stats(w).unwrap().refunds, 1);
        // A figure that raises nothing leaves refunds exact.
        let t = budget
            .try_charge(&[Part::new(w, 3)], Class::Urgent, 13)
            .unwrap();
        budget.observe_used(w, 5, 14).unwrap();
        budget.refund(t, 15).unwrap();
        assert_eq!(budget.stats(w).unwrap().used, 10, "{spec:?}");
    }
}

/// The refund counter counts tickets: one that names a bucket twice counts once.
#[test]
fn a_ticket_naming_a_bucket_twice_is_one_refund() {
    let mut b = Budget::builder();
    let w = b.add("w", Spec::sliding(10, 1000, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    let t = budget
        .try_charge(&[Part::new(w, 2), Part::new(w, 3)], Class::Urgent, 0)
        .unwrap();
    assert_eq!(budget.stats(w).unwrap().used, 5);
    budget.refund(t, 1).unwrap();
    assert_eq!(budget.stats(w).unwrap().used, 0);
    assert_eq!(budget.stats(w).unwrap().refunds, 1);
}
