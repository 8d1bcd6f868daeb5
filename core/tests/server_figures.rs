//! Issue 12, item 10: a server figure (a usage header, an extra cost known from the
//! answer) is clamped to what the bucket can hold, so a huge one fills the bucket
//! for one window, like any full bucket, instead of freezing it for good.

use ergon_core::{Budget, Class, Part, Spec, Why};

const SEC: i64 = 1_000_000_000;

fn budget() -> (Budget, [ergon_core::BucketId; 3]) {
    let mut b = Budget::builder();
    let t = b.add("t", Spec::token(10, 20)).unwrap(); // window: 20 units at 0.1 s = 2 s
    let w = b.add("w", Spec::sliding(100, 10 * SEC, 10)).unwrap();
    let f = b.add("f", Spec::fixed(100, 10 * SEC)).unwrap();
    (b.build(0).unwrap(), [t, w, f])
}

/// The window after which a full bucket of each kind has drained, from `at`.
fn drained(at: i64) -> [i64; 3] {
    [at + 2 * SEC, at + 11 * SEC, 20 * SEC]
}

#[test]
fn a_huge_usage_figure_recovers_within_one_window() {
    for figure in [101, 1 << 40, u64::MAX] {
        let (mut budget, ids) = budget();
        let at = 5 * SEC;
        for (id, ready) in ids.into_iter().zip(drained(at)) {
            budget.observe_used(id, figure, at).unwrap();
            let s = budget.stats(id).unwrap();
            assert_eq!(s.used, s.limit, "a figure fills the bucket, no more");
            assert!(s.drift > 0, "the drift keeps the server's figure");
            assert_eq!((s.observes, s.observed), (1, figure), "the figure as given");
            let l = budget
                .clone()
                .try_charge(&[Part::new(id, 1)], Class::Urgent, at + 1)
                .unwrap_err();
            assert_eq!(l.why, Why::Full);
            assert!(l.ready_at_ns <= ready, "{figure}: {l:?} not by {ready}");
            assert!(budget
                .clone()
                .try_charge(&[Part::new(id, 1)], Class::Urgent, ready)
                .is_ok());
        }
    }
}

#[test]
fn a_huge_extra_cost_recovers_within_one_window() {
    let (mut budget, ids) = budget();
    let at = 5 * SEC;
    for (id, ready) in ids.into_iter().zip(drained(at)) {
        for _ in 0..3 {
            budget.charge_after(id, u32::MAX, at).unwrap();
        }
        let s = budget.stats(id).unwrap();
        assert_eq!(s.used, s.limit);
        assert_eq!(s.charged_after, 3 * u64::from(u32::MAX));
        let l = budget
            .clone()
            .try_charge(&[Part::new(id, 1)], Class::Urgent, at + 1)
            .unwrap_err();
        assert!(l.ready_at_ns <= ready, "{l:?} not by {ready}");
        assert!(budget
            .clone()
            .try_charge(&[Part::new(id, 1)], Class::Urgent, ready)
            .is_ok());
    }
}

/// A figure within the limit is taken as it is: the clamp never lowers a count.
#[test]
fn a_figure_within_the_limit_is_kept_exactly() {
    let (mut budget, [t, w, f]) = budget();
    budget.observe_used(t, 7, SEC).unwrap();
    budget.observe_used(w, 70, SEC).unwrap();
    budget.observe_used(f, 70, SEC).unwrap();
    budget.charge_after(w, 20, SEC).unwrap();
    assert_eq!(budget.stats(t).unwrap().used, 7);
    assert_eq!(budget.stats(w).unwrap().used, 90);
    assert_eq!(budget.stats(f).unwrap().used, 70);
    budget.charge_after(w, 20, SEC).unwrap();
    assert_eq!(budget.stats(w).unwrap().used, 100);
}

#[test]
fn every_figure_read_is_counted_even_one_below_the_local_count() {
    let (mut budget, [t, ..]) = budget();
    let _sent = budget
        .try_charge(&[Part::new(t, 5)], Class::Urgent, SEC)
        .unwrap();
    budget.observe_used(t, 2, SEC).unwrap();
    budget.observe_used(t, 3, SEC).unwrap();
    let s = budget.stats(t).unwrap();
    assert_eq!((s.observes, s.observed, s.used), (2, 3, 5), "{s:?}");
}
