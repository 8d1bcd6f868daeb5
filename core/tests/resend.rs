//! Invariant 9, the re-send rule: Unknown is always Reconcile; Done and Rejected are
//! Final; a ban is Wait(Halted); for what surely did not run (Throttled, NotRun,
//! ClockSkew) Stale once the deadline is reached, else Send (charged) or Wait.

mod common;

use common::*;
use ergon_core::{Budget, Class, Part, Resend, Spec, Verdict, Why};
use proptest::prelude::*;

const CHECKS: Checks = Checks {
    safety: true,
    all_or_none: false,
    ready_at: false,
    clock_twin: false,
    refund: false,
    holds: false,
    resend: true,
    shapes: false,
};

const RESENDS: Mix = Mix {
    resend: 6,
    ..Mix::ALL
};

proptest! {
    #![proptest_config(cases(300))]

    /// In any history; a Send is a charge like any other (the safety model books it).
    #[test]
    fn the_rule_holds_in_any_history(
        cfg in cfg_strategy(),
        ops in ops_strategy(RESENDS, 200),
    ) {
        let mut d = Driver::new(&cfg, CHECKS);
        d.run(&ops);
    }

    /// Unknown is Reconcile whatever the time, the deadline and the budget's state,
    /// and charges nothing.
    #[test]
    fn unknown_is_always_reconcile(now in any::<i64>(), deadline in any::<i64>(), halt in any::<bool>()) {
        let mut b = Budget::builder();
        let w = b.add("w", Spec::sliding(1, 1000, 10)).unwrap();
        let mut budget = b.build(0).unwrap();
        if halt {
            budget.banned(w, 0, 0).unwrap();
        }
        let before = budget.stats(w).unwrap();
        let r = budget.resend(&Verdict::Unknown, &[Part::new(w, 1)], Class::Urgent, deadline, now);
        prop_assert_eq!(r, Resend::Reconcile);
        prop_assert_eq!(budget.stats(w).unwrap(), before);
    }

    /// Past the deadline: Stale, and nothing is charged.
    #[test]
    fn past_the_deadline_is_stale(deadline in -1000i64..1000, past in 0i64..1000, v in 0u8..3) {
        let mut b = Budget::builder();
        let w = b.add("w", Spec::sliding(10, 1000, 10)).unwrap();
        let mut budget = b.build(-5000).unwrap();
        let verdict = [
            Verdict::NotRun,
            Verdict::ClockSkew,
            Verdict::Throttled { bucket: w, until_ns: 0 },
        ][usize::from(v)];
        let r = budget.resend(&verdict, &[Part::new(w, 1)], Class::Urgent, deadline, deadline + past);
        prop_assert_eq!(r, Resend::Stale);
        prop_assert_eq!(budget.stats(w).unwrap().admitted, 0);
    }
}

#[test]
fn what_did_not_run_is_sent_or_waits() {
    let mut b = Budget::builder();
    let w = b.add("w", Spec::sliding(1, 1000, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    let order = [Part::new(w, 1)];
    for verdict in [
        Verdict::NotRun,
        Verdict::ClockSkew,
        Verdict::Throttled {
            bucket: w,
            until_ns: 0,
        },
    ] {
        let mut budget = budget.clone();
        let Resend::Send(ticket) = budget.resend(&verdict, &order, Class::Urgent, 100, 0) else {
            panic!("room and time: send");
        };
        assert_eq!(budget.ticket_parts(&ticket).unwrap(), &order);
        assert_eq!(budget.stats(w).unwrap().used, 1);
        // The bucket is now full: the same request waits, with an exact ready time.
        match budget.resend(&verdict, &order, Class::Urgent, 5000, 1) {
            Resend::Wait(l) => assert_eq!((l.why, l.ready_at_ns), (Why::Full, 1100)),
            other => panic!("{other:?}"),
        }
        let _ = ticket.sent();
    }
    assert_eq!(
        budget.resend(&Verdict::Done, &order, Class::Urgent, 100, 0),
        Resend::Final
    );
    assert_eq!(
        budget.resend(&Verdict::Rejected, &order, Class::Urgent, 100, 0),
        Resend::Final
    );
    let banned = Verdict::Banned {
        bucket: w,
        until_ns: 50,
    };
    match budget.resend(&banned, &order, Class::Urgent, 100, 0) {
        Resend::Wait(l) => assert_eq!((l.bucket, l.why, l.ready_at_ns), (w, Why::Halted, i64::MAX)),
        other => panic!("{other:?}"),
    }
    assert_eq!(budget.stats(w).unwrap().admitted, 0);
}

/// The deadline is judged on the budget's clock: a caller's clock that steps back
/// cannot make a stale request fresh.
#[test]
fn a_clock_stepping_back_does_not_unstale() {
    let mut b = Budget::builder();
    let w = b.add("w", Spec::sliding(10, 1000, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    budget.tick(500);
    let r = budget.resend(
        &Verdict::NotRun,
        &[Part::new(w, 1)],
        Class::Urgent,
        400,
        300,
    );
    assert_eq!(r, Resend::Stale);
}
