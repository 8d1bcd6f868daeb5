//! Invariant 6: a clock that goes backwards neither mints nor withholds budget. The
//! budget reads an earlier time as the latest it has seen, so a budget fed a clock
//! that steps back answers exactly as a twin fed `max(seen, now)` at every step:
//! same admissions, same refusals with the same `ready_at_ns`, same stats.

mod common;

use common::*;
use ergon_core::{Budget, Class, Part, Spec, Why};
use proptest::prelude::*;

const CHECKS: Checks = Checks {
    safety: true,
    all_or_none: false,
    ready_at: false,
    clock_twin: true,
    refund: false,
    holds: false,
    resend: false,
};

const BACK: Mix = Mix {
    back: 6,
    ..Mix::ALL
};

proptest! {
    #![proptest_config(cases(300))]

    #[test]
    fn a_clock_stepping_back_reads_as_the_latest_time(
        cfg in cfg_strategy(),
        ops in ops_strategy(BACK, 200),
    ) {
        let mut d = Driver::new(&cfg, CHECKS);
        d.run(&ops);
    }
}

/// Stepping back after a charge does not drop it early (minting) ...
#[test]
fn stepping_back_does_not_drop_a_charge_early() {
    for spec in [
        Spec::sliding(1, 100, 10),
        Spec::fixed(1, 100),
        Spec::token_every(100, 1),
    ] {
        let mut b = Budget::builder();
        let w = b.add("w", spec).unwrap();
        let mut budget = b.build(0).unwrap();
        let _ = budget
            .try_charge(&[Part::new(w, 1)], Class::Urgent, 50)
            .unwrap()
            .sent();
        // Far back, then forward to just before the charge expires.
        assert!(budget
            .try_charge(&[Part::new(w, 1)], Class::Urgent, -10_000)
            .is_err());
        assert!(budget
            .try_charge(&[Part::new(w, 1)], Class::Urgent, 99)
            .is_err());
        assert_eq!(budget.stats(w).unwrap().used, 1);
    }
}

/// ... nor holds it longer: after a step back, the charge expires at the same time.
#[test]
fn stepping_back_does_not_withhold() {
    let mut b = Budget::builder();
    let w = b.add("w", Spec::sliding(1, 100, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    let _ = budget
        .try_charge(&[Part::new(w, 1)], Class::Urgent, 0)
        .unwrap()
        .sent();
    let l = budget
        .try_charge(&[Part::new(w, 1)], Class::Urgent, 60)
        .unwrap_err();
    assert_eq!((l.why, l.ready_at_ns), (Why::Full, 110));
    // The clock steps back 50: the refusal still says 110, and 110 passes.
    let l = budget
        .try_charge(&[Part::new(w, 1)], Class::Urgent, 10)
        .unwrap_err();
    assert_eq!((l.why, l.ready_at_ns), (Why::Full, 110));
    assert_eq!(budget.now_ns(), 60);
    assert!(budget
        .try_charge(&[Part::new(w, 1)], Class::Urgent, 110)
        .is_ok());
}

/// A ticket charged after a step back is stamped with the latest time seen, so its
/// refund goes back to the slot that holds it.
#[test]
fn a_ticket_after_a_step_back_refunds_to_its_slot() {
    let mut b = Budget::builder();
    let w = b.add("w", Spec::sliding(2, 100, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    budget.tick(95);
    let ticket = budget
        .try_charge(&[Part::new(w, 2)], Class::Urgent, 5)
        .unwrap();
    assert_eq!(ticket.charged_at_ns(), 95);
    budget.refund(ticket, 96).unwrap();
    assert_eq!(budget.stats(w).unwrap().used, 0);
}

proptest! {
    #![proptest_config(cases(100))]

    /// Times at either end of the clock's range: nothing panics (a debug build checks
    /// every overflow), and a refusal's ready time is later than now (or the end of
    /// the range).
    #[test]
    fn times_at_the_ends_of_the_range_do_not_panic(
        cfg in cfg_strategy(),
        start in prop_oneof![Just(i64::MIN), Just(i64::MAX - 1_000_000), Just(-1i64 << 62)],
        ops in prop::collection::vec((0u8..6, any::<u8>(), 0u32..8, 0i64..100_000), 1..100),
    ) {
        let (mut budget, ids) = Cfg { start, ..cfg }.build();
        let mut now = start;
        let mut tickets = vec![];
        for (op, b, cost, dt) in ops {
            now = now.saturating_add(dt);
            let id = ids[usize::from(b) % ids.len()];
            match op {
                0 | 1 => match budget.try_charge(&[Part::new(id, cost)], Class::Urgent, now) {
                    Ok(t) => tickets.push(t),
                    // At the very end of the range a time can only saturate to it.
                    Err(l) => prop_assert!(l.ready_at_ns > now || l.ready_at_ns == i64::MAX, "{l:?} at {now}"),
                },
                2 => if let Some(t) = tickets.pop() { budget.refund(t, now).unwrap() },
                3 => { budget.throttled(id, Some(dt), now).unwrap(); }
                4 => budget.charge_after(id, cost, now).unwrap(),
                _ => budget.observe_used(id, u64::from(cost) * 3, now).unwrap(),
            }
            let _ = budget.stats(id).unwrap();
        }
    }
}
