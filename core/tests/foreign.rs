//! Issue 12, item 11: ids, tickets and flights carry their budget's tag. One of
//! another budget is refused with an error on every API that takes one, and changes
//! nothing; flights never completed show in `receipts_outstanding`.

use ergon_core::{Budget, Class, ForeignId, Part, Resend, Spec, Verdict, Why};

/// Two budgets declared alike: each id of one names a bucket of the same index in
/// the other, which is exactly what used to be accepted silently.
fn twins() -> (
    Budget,
    Budget,
    [ergon_core::BucketId; 2],
    [ergon_core::BucketId; 2],
) {
    let build = || {
        let mut b = Budget::builder();
        let w = b.add("w", Spec::sliding(10, 1000, 10)).unwrap();
        let c = b.add("c", Spec::in_flight(2)).unwrap();
        (b.build(0).unwrap(), [w, c])
    };
    let (a, ida) = build();
    let (b, idb) = build();
    (a, b, ida, idb)
}

#[test]
fn an_id_of_another_budget_is_refused_everywhere() {
    let (mut a, b, [w, c], [bw, bc]) = twins();
    assert_eq!(w.index(), bw.index());
    assert_ne!(w, bw, "same index, another budget: another id");
    let before = (a.stats(w).unwrap(), a.stats(c).unwrap(), a.now_ns());

    let l = a
        .try_charge(&[Part::new(bw, 1)], Class::Urgent, 5)
        .unwrap_err();
    assert_eq!(
        (l.bucket, l.why, l.ready_at_ns),
        (bw, Why::Foreign, i64::MAX)
    );
    // Mixed with an own part: still refused, the own bucket not charged.
    let l = a
        .try_charge(&[Part::new(w, 1), Part::new(bc, 1)], Class::Urgent, 5)
        .unwrap_err();
    assert_eq!((l.bucket, l.why), (bc, Why::Foreign));
    let r = a.resend(&Verdict::NotRun, &[Part::new(bw, 1)], Class::Urgent, 100, 5);
    assert!(matches!(r, Resend::Wait(l) if l.why == Why::Foreign));
    // A refused charge reads the time, like any refusal, and changes no bucket.
    assert_eq!(
        (a.stats(w).unwrap(), a.stats(c).unwrap()),
        (before.0, before.1)
    );
    let before = (a.stats(w).unwrap(), a.stats(c).unwrap(), a.now_ns());

    assert_eq!(a.stats(bw), Err(ForeignId));
    assert_eq!(a.name(bw), Err(ForeignId));
    assert_eq!(a.is_halted(bw), Err(ForeignId));
    assert_eq!(a.observe_used(bw, 5, 10), Err(ForeignId));
    assert_eq!(a.charge_after(bw, 5, 10), Err(ForeignId));
    assert_eq!(a.throttled(bw, None, 10), Err(ForeignId));
    assert_eq!(a.banned(bw, 20, 10), Err(ForeignId));
    assert_eq!(a.clear_halt(bw), Err(ForeignId));
    assert!(a.validate_parts(&[Part::new(bw, 1)]).is_err());

    // Nothing changed, the clock included.
    assert_eq!(
        (a.stats(w).unwrap(), a.stats(c).unwrap(), a.now_ns()),
        before
    );
    assert_eq!(b.name(bw), Ok("w"));
}

#[test]
fn a_ticket_or_flight_of_another_budget_is_refused() {
    let (mut a, mut b, [_, c], [_, bc]) = twins();
    let t = b.try_charge(&[Part::new(bc, 2)], Class::Urgent, 0).unwrap();
    assert_eq!(a.refund(t, 1), Err(ForeignId));
    let f = b
        .try_charge(&[Part::new(bc, 0)], Class::Urgent, 0)
        .unwrap()
        .sent();
    assert_eq!(a.complete(f, 1), Err(ForeignId));
    assert_eq!(a.receipts_outstanding(), 0);
    assert_eq!(a.stats(c).unwrap().refunds, 0);
    assert_eq!(a.now_ns(), 0);
}

/// The rule: every ticket ends in a refund, or in sent then complete. One dropped
/// instead keeps its in-flight units, and the budget shows it.
#[test]
fn receipts_never_given_back_are_counted() {
    let (mut a, _, [w, c], _) = twins();
    let order = [Part::new(w, 1), Part::new(c, 1)];
    assert_eq!(a.receipts_outstanding(), 0);
    let t1 = a.try_charge(&order, Class::Urgent, 0).unwrap();
    let t2 = a.try_charge(&order, Class::Urgent, 0).unwrap();
    assert_eq!(a.receipts_outstanding(), 2);
    a.refund(t1, 1).unwrap();
    assert_eq!(a.receipts_outstanding(), 1);
    let f2 = t2.sent();
    a.complete(f2, 2).unwrap();
    assert_eq!(a.receipts_outstanding(), 0);
    // A flight dropped without complete: its in-flight unit stays taken.
    let lost = a.try_charge(&order, Class::Urgent, 3).unwrap().sent();
    drop(lost);
    assert_eq!(a.receipts_outstanding(), 1);
    assert_eq!(a.stats(c).unwrap().used, 1);
}
