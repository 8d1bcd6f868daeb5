//! Shapes (issue 17): a shape charged is the same parts charged through
//! `try_charge`, in every history, against the reference model; refusals from the
//! lanes and refunds into the lanes change nothing a caller can see; `poll_timeout`
//! names the next instant the budget has work.

mod common;

use common::*;
use ergon_core::{Budget, Class, ConfigError, ForeignId, Part, Spec, Why, MAX_PARTS};
use proptest::prelude::*;

const ALL: Checks = Checks {
    safety: true,
    all_or_none: true,
    ready_at: true,
    clock_twin: false,
    refund: true,
    holds: true,
    resend: true,
    shapes: true,
};

/// Mostly charges and refunds, so that most refunds find their charge still in
/// its lanes.
const CHARGES: Mix = Mix {
    charge: 12,
    lifecycle: 6,
    clock: 3,
    ..Mix::ALL
};

proptest! {
    #![proptest_config(cases(150))]

    /// Every operation on a budget whose charges are shapes gives the answers and
    /// the state of the same operations with part lists, and the model's
    /// invariants hold throughout.
    #[test]
    fn a_shape_charges_as_its_parts(cfg in cfg_strategy(), ops in ops_strategy(Mix::ALL, 200)) {
        let mut d = Driver::new(&cfg, ALL);
        d.run(&ops);
    }

    #[test]
    fn shape_charges_and_refunds_as_their_parts(cfg in cfg_strategy(), ops in ops_strategy(CHARGES, 200)) {
        let mut d = Driver::new(&cfg, ALL);
        d.run(&ops);
        prop_assume!(d.shaped.as_ref().unwrap().shaped > 0);
    }
}

/// A sliding window of 10, 10 slots of 100 ns; a fixed window of 5; a gate.
fn three() -> (Budget, [ergon_core::BucketId; 3]) {
    let mut b = Budget::builder();
    let w = b
        .add("w", Spec::sliding(10, 1000, 10).headroom(2, 4))
        .unwrap();
    let f = b.add("f", Spec::fixed(5, 1000).guard(10)).unwrap();
    let ip = b.add("ip", Spec::gate()).unwrap();
    (b.build(0).unwrap(), [w, f, ip])
}

#[test]
fn a_refusal_from_the_lanes_is_the_full_paths() {
    let (mut budget, [w, f, ip]) = three();
    let parts = [Part::new(w, 2), Part::new(f, 1), Part::new(ip, 0)];
    let shape = budget.shape(&parts).unwrap();
    for t in [0, 10, 20, 30] {
        let _ = budget
            .try_charge_shape(shape, Class::Urgent, t)
            .unwrap()
            .sent();
    }
    // w has 2 left: Urgent fits, Normal (headroom 2) does not; f has 1 left.
    let mut by_parts = budget.clone();
    let from_lanes = budget
        .try_charge_shape(shape, Class::Normal, 50)
        .unwrap_err();
    let full = by_parts.try_charge(&parts, Class::Normal, 50).unwrap_err();
    assert_eq!(from_lanes, full);
    assert_eq!((from_lanes.bucket, from_lanes.why), (w, Why::Full));
    for id in [w, f, ip] {
        assert_eq!(budget.stats(id), by_parts.stats(id));
    }
    // A cost no class may ever pay ranks above a full bucket.
    let big = budget.shape(&[Part::new(w, 1), Part::new(f, 6)]).unwrap();
    let l = budget.try_charge_shape(big, Class::Urgent, 60).unwrap_err();
    assert_eq!((l.bucket, l.why, l.ready_at_ns), (f, Why::TooBig, i64::MAX));
}

#[test]
fn a_refund_still_in_its_lanes_is_as_if_never_charged() {
    let (mut budget, [w, f, ip]) = three();
    let shape = budget
        .shape(&[Part::new(w, 3), Part::new(f, 1), Part::new(ip, 0)])
        .unwrap();
    let fresh = budget.clone();
    let t = budget.try_charge_shape(shape, Class::Normal, 5).unwrap();
    assert_eq!(budget.receipts_outstanding(), 1);
    budget.refund(t, 6).unwrap();
    assert_eq!(budget.receipts_outstanding(), 0);
    for id in [w, f] {
        let s = budget.stats(id).unwrap();
        assert_eq!((s.used, s.refunds), (0, 1));
        assert_eq!(
            s.admitted,
            fresh.stats(id).unwrap().admitted + if id == w { 3 } else { 1 }
        );
    }
    // After a settle (a server figure), the same refund takes the full path, with
    // the same effect as for a part list.
    let t = budget.try_charge_shape(shape, Class::Normal, 7).unwrap();
    budget.observe_used(w, 5, 8).unwrap();
    budget.refund(t, 9).unwrap();
    assert_eq!(budget.stats(f).unwrap().used, 0);
    assert_eq!(
        budget.stats(w).unwrap().used,
        5,
        "the raised count keeps the charge"
    );
}

#[test]
fn a_shape_is_validated_once_and_merged() {
    let (mut budget, [w, f, _]) = three();
    let shape = budget
        .shape(&[Part::new(w, 1), Part::new(f, 1), Part::new(w, 2)])
        .unwrap();
    assert_eq!(
        budget.shape_parts(shape).unwrap(),
        &[Part::new(w, 3), Part::new(f, 1)]
    );
    let (_, [ow, ..]) = three();
    assert_eq!(
        budget.shape(&[Part::new(ow, 1)]),
        Err(ConfigError::UnknownBucket)
    );
    assert_eq!(
        budget.shape(&[Part::new(w, 1); MAX_PARTS + 1]),
        Err(ConfigError::TooManyParts)
    );
    assert_eq!(
        budget.shape(&[Part::new(w, u32::MAX), Part::new(w, 1)]),
        Err(ConfigError::ShapeCostTooBig)
    );
    while budget.shape(&[Part::new(w, 1)]).is_ok() {}
    assert_eq!(
        budget.shape(&[Part::new(w, 1)]),
        Err(ConfigError::TooManyShapes)
    );
}

#[test]
fn a_shape_of_another_budget_is_refused() {
    let (mut a, _) = three();
    let (mut b, [bw, ..]) = three();
    let foreign = b.shape(&[Part::new(bw, 1)]).unwrap();
    let l = a.try_charge_shape(foreign, Class::Urgent, 1).unwrap_err();
    assert_eq!((l.why, l.ready_at_ns), (Why::Foreign, i64::MAX));
    assert_eq!(a.shape_parts(foreign), Err(ForeignId));
    let t = b.try_charge_shape(foreign, Class::Urgent, 1).unwrap();
    assert_eq!(a.refund(t, 2), Err(ForeignId));
    assert_eq!(a.receipts_outstanding(), 0);
}

/// A clone registers a shape the original never did (same tag, an index past the
/// original's shapes): the original's lanes are all open, yet it refuses the shape
/// as foreign and charges nothing (its unregistered row points at a closed room).
#[test]
fn a_shape_not_registered_here_is_refused_with_open_lanes() {
    let (mut a, [w, f, ip]) = three();
    let mut b = a.clone();
    let s = b
        .shape(&[Part::new(w, 1), Part::new(f, 1), Part::new(ip, 0)])
        .unwrap();
    a.tick(1);
    let before = a.stats(w).unwrap();
    let l = a.try_charge_shape(s, Class::Urgent, 1).unwrap_err();
    assert_eq!((l.why, l.ready_at_ns), (Why::Foreign, i64::MAX));
    assert_eq!(a.stats(w).unwrap(), before);
    assert_eq!(a.stats(f).unwrap().used, 0);
    assert_eq!(a.receipts_outstanding(), 0);
    // The same shape registered on the original now charges it.
    let s2 = a
        .shape(&[Part::new(w, 1), Part::new(f, 1), Part::new(ip, 0)])
        .unwrap();
    let t = a.try_charge_shape(s2, Class::Urgent, 1).unwrap();
    assert_eq!(a.stats(w).unwrap().used, 1);
    a.refund(t, 1).unwrap();
    assert_eq!(a.stats(w).unwrap().used, 0);
}

#[test]
fn the_builder_registers_shapes() {
    let mut b = Budget::builder();
    let w = b.add("w", Spec::in_flight(2)).unwrap();
    let s = b.shape(&[Part::new(w, 1)]).unwrap();
    let mut budget = b.build(0).unwrap();
    let f1 = budget.try_charge_shape(s, Class::Urgent, 0).unwrap().sent();
    let _f2 = budget.try_charge_shape(s, Class::Urgent, 0).unwrap().sent();
    assert_eq!(
        budget
            .try_charge_shape(s, Class::Urgent, 0)
            .unwrap_err()
            .why,
        Why::Full
    );
    budget.complete(f1, 1).unwrap();
    assert_eq!(budget.stats(w).unwrap().used, 1);
    assert!(budget.try_charge_shape(s, Class::Urgent, 1).is_ok());
}

#[test]
fn poll_timeout_names_the_next_instant_of_work() {
    let mut b = Budget::builder();
    b.hold_guard(0).unwrap();
    let w = b.add("w", Spec::sliding(10, 1000, 10)).unwrap();
    let f = b.add("f", Spec::fixed(5, 1000).guard(10)).unwrap();
    let t = b.add("t", Spec::token_every(10, 5)).unwrap();
    let ip = b.add("ip", Spec::gate()).unwrap();
    let mut budget = b.build(0).unwrap();
    // The ring's slot rolls every 100; an empty fixed window, a token bucket and a
    // gate have nothing to do.
    assert_eq!(budget.poll_timeout(5), Some(100));
    let _ = budget
        .try_charge(&[Part::new(f, 1), Part::new(t, 1)], Class::Urgent, 5)
        .unwrap()
        .sent();
    // The charge is in the fixed window's leading guard, which ends at 10.
    assert_eq!(budget.poll_timeout(5), Some(10));
    // A hold on the gate ends first.
    budget.throttled(ip, Some(50), 10).unwrap();
    assert_eq!(budget.poll_timeout(10), Some(60));
    budget.tick(60);
    assert_eq!(budget.poll_timeout(60), Some(100));
    // Past the slot without a tick: tick now.
    assert_eq!(budget.poll_timeout(150), Some(100));
    budget.tick(150);
    assert_eq!(budget.poll_timeout(150), Some(200));
    // A fixed window holding a count: its guard edge at 990.
    let mut only_f = Budget::builder();
    let f = only_f.add("f", Spec::fixed(5, 1000).guard(10)).unwrap();
    let mut only_f = only_f.build(0).unwrap();
    assert_eq!(only_f.poll_timeout(0), None);
    let _ = only_f
        .try_charge(&[Part::new(f, 1)], Class::Urgent, 500)
        .unwrap()
        .sent();
    assert_eq!(only_f.poll_timeout(500), Some(990));
    // A halt gives no timeout: a person ends it.
    only_f.banned(f, 2000, 600).unwrap();
    assert_eq!(only_f.poll_timeout(600), None);
    assert!(budget.stats(w).is_ok());
}
