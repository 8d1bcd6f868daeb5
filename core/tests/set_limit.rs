//! Issue 29: `Budget::set_limit`, the hot-path side of a leased bucket (its limit is
//! its grant). Lowering takes effect at once and keeps the window's count; raising
//! gives the new room at once; bad input is refused and changes nothing.

use ergon_core::{BucketId, Budget, Class, ConfigError, Part, Spec, Why};

const SEC: i64 = 1_000_000_000;

fn budget() -> (Budget, [BucketId; 5]) {
    let mut b = Budget::builder();
    let s = b.add("sliding", Spec::sliding(100, 10 * SEC, 10)).unwrap();
    let f = b
        .add("fixed", Spec::fixed(100, 10 * SEC).guard(SEC / 100))
        .unwrap();
    let t = b.add("token", Spec::token(10, 100)).unwrap();
    let i = b.add("inflight", Spec::in_flight(100)).unwrap();
    let g = b.add("gate", Spec::gate()).unwrap();
    (b.build(0).unwrap(), [s, f, t, i, g])
}

/// Charges one unit at a time at `now` until refused; the units admitted.
fn fill(budget: &mut Budget, id: BucketId, class: Class, now: i64) -> u64 {
    let mut n = 0;
    while budget.try_charge(&[Part::new(id, 1)], class, now).is_ok() {
        n += 1;
        assert!(n <= 1_000, "never refused");
    }
    n
}

#[test]
fn lowering_keeps_the_count_and_refuses_at_once() {
    let (mut budget, ids) = budget();
    for id in &ids[..4] {
        for _ in 0..30 {
            let _ticket = budget
                .try_charge(&[Part::new(*id, 1)], Class::Urgent, SEC)
                .unwrap();
        }
        // Below the count already charged: nothing more passes in this window.
        budget.set_limit(*id, 20, SEC + 1).unwrap();
        let refused = budget
            .try_charge(&[Part::new(*id, 1)], Class::Urgent, SEC + 2)
            .unwrap_err();
        assert_eq!(refused.why, Why::Full, "{id:?}");
        let s = budget.stats(*id).unwrap();
        assert_eq!((s.limit, s.used), (20, 30), "{id:?}: the count is kept");
    }
}

#[test]
fn lowering_above_the_count_leaves_exactly_the_difference() {
    let (mut budget, ids) = budget();
    for id in &ids[..4] {
        for _ in 0..30 {
            let _ticket = budget
                .try_charge(&[Part::new(*id, 1)], Class::Urgent, SEC)
                .unwrap();
        }
        budget.set_limit(*id, 50, SEC).unwrap();
        assert_eq!(fill(&mut budget, *id, Class::Urgent, SEC), 20, "{id:?}");
    }
}

#[test]
fn raising_gives_the_new_room_at_once() {
    let (mut budget, ids) = budget();
    for id in &ids[..4] {
        assert_eq!(fill(&mut budget, *id, Class::Urgent, SEC), 100, "{id:?}");
        budget.set_limit(*id, 130, SEC).unwrap();
        assert_eq!(fill(&mut budget, *id, Class::Urgent, SEC), 30, "{id:?}");
        assert_eq!(budget.stats(*id).unwrap().limit, 130);
    }
}

#[test]
fn a_lowered_sliding_limit_frees_room_only_as_the_count_leaves_its_window() {
    let (mut budget, [s, ..]) = budget();
    assert_eq!(fill(&mut budget, s, Class::Urgent, 0), 100);
    budget.set_limit(s, 40, SEC).unwrap();
    let refused = budget
        .try_charge(&[Part::new(s, 1)], Class::Urgent, 5 * SEC)
        .unwrap_err();
    assert!(refused.ready_at_ns >= 10 * SEC, "{refused:?}");
    // The window has passed: the new, lower limit is the whole room.
    assert_eq!(fill(&mut budget, s, Class::Urgent, 11 * SEC), 40);
}

#[test]
fn headroom_is_kept_under_a_new_limit() {
    let mut b = Budget::builder();
    let id = b
        .add("h", Spec::sliding(100, 10 * SEC, 10).headroom(10, 20))
        .unwrap();
    let mut budget = b.build(0).unwrap();
    budget.set_limit(id, 50, 0).unwrap();
    assert_eq!(fill(&mut budget, id, Class::Bulk, 0), 30);
    assert_eq!(fill(&mut budget, id, Class::Normal, 0), 10);
    assert_eq!(fill(&mut budget, id, Class::Urgent, 0), 10);
    assert_eq!(
        budget.set_limit(id, 20, 0),
        Err(ConfigError::BadHeadroom),
        "a limit not above Bulk's headroom"
    );
}

/// Issue 40: a limit of zero closes the bucket, whatever its kind: every charge and
/// every shape naming it is refused as `Closed` (never "the old limit stays"), the
/// count is kept, and a limit above zero opens it again.
#[test]
fn a_limit_of_zero_closes_the_bucket_and_a_new_limit_opens_it() {
    let (mut budget, ids) = budget();
    for id in &ids[..4] {
        let _kept = budget
            .try_charge(&[Part::new(*id, 1)], Class::Urgent, SEC)
            .unwrap();
        budget.set_limit(*id, 0, SEC).unwrap();
        let full_before = budget.stats(*id).unwrap().refusals.full;
        for class in [Class::Urgent, Class::Normal, Class::Bulk] {
            let l = budget
                .try_charge(&[Part::new(*id, 1)], class, 2 * SEC)
                .unwrap_err();
            assert_eq!(
                (l.bucket, l.why, l.ready_at_ns),
                (*id, Why::Closed, i64::MAX)
            );
        }
        let st = budget.stats(*id).unwrap();
        assert_eq!(st.limit, 0, "{id:?}");
        assert_eq!(st.refusals.full, full_before + 3, "counted as no room");
        // Far later, still closed: no window or refill opens it.
        let l = budget
            .try_charge(&[Part::new(*id, 1)], Class::Urgent, 1_000 * SEC)
            .unwrap_err();
        assert_eq!(l.why, Why::Closed);
        budget.set_limit(*id, 5, 1_000 * SEC).unwrap();
        assert!(
            fill(&mut budget, *id, Class::Urgent, 1_000 * SEC) >= 1,
            "{id:?}"
        );
    }
    // A shape naming a closed bucket is refused too.
    let s = ids[0];
    let shape = budget.shape(&[Part::new(s, 1)]).unwrap();
    budget.set_limit(s, 0, 2_000 * SEC).unwrap();
    let l = budget
        .try_charge_shape(shape, Class::Urgent, 2_000 * SEC)
        .unwrap_err();
    assert_eq!((l.bucket, l.why), (s, Why::Closed));
    budget.set_limit(s, 100, 2_000 * SEC).unwrap();
    assert!(budget
        .try_charge_shape(shape, Class::Urgent, 2_000 * SEC)
        .is_ok());
}

/// Issue 40: a limit set until an instant closes the bucket at that instant, at the
/// charge, without another call: a leased grant's deadline holds at admission, not
/// only when the loop next applies a limit.
#[test]
fn a_limit_set_until_an_instant_closes_at_that_instant() {
    let (mut budget, ids) = budget();
    for (k, id) in ids[..4].iter().enumerate() {
        let t = 100 * SEC * k as i64; // each on its own span of the budget's clock
        budget
            .set_limit_until(*id, 50, t + 5 * SEC, t + SEC)
            .unwrap();
        let ok = budget.try_charge(&[Part::new(*id, 1)], Class::Urgent, t + 5 * SEC - 1);
        assert!(ok.is_ok(), "{id:?} before its end");
        let l = budget
            .try_charge(&[Part::new(*id, 1)], Class::Urgent, t + 5 * SEC)
            .unwrap_err();
        assert_eq!(
            (l.bucket, l.why, l.ready_at_ns),
            (*id, Why::Closed, i64::MAX)
        );
        budget.set_limit(*id, 50, t + 6 * SEC).unwrap();
        assert!(budget
            .try_charge(&[Part::new(*id, 1)], Class::Urgent, t + 6 * SEC)
            .is_ok());
    }
    // A shape, charged through its lane from before the end: refused at the end.
    let s = ids[0];
    let shape = budget.shape(&[Part::new(s, 1)]).unwrap();
    let t = 1_000 * SEC;
    budget.set_limit_until(s, 100, t + 20 * SEC, t).unwrap();
    assert!(budget.try_charge_shape(shape, Class::Urgent, t).is_ok());
    assert!(budget.poll_timeout(t).is_some_and(|e| e <= t + 20 * SEC));
    let l = budget
        .try_charge_shape(shape, Class::Urgent, t + 20 * SEC)
        .unwrap_err();
    assert_eq!((l.bucket, l.why), (s, Why::Closed));
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let (mut budget, [s, _, t, _, g]) = budget();
    let _ticket = budget
        .try_charge(&[Part::new(s, 7)], Class::Urgent, SEC)
        .unwrap();
    let cases = [
        (g, 0, ConfigError::OptionNotForKind),
        (s, u64::MAX, ConfigError::TooLong),
        (t, 1 << 62, ConfigError::TooLong),
        (g, 10, ConfigError::OptionNotForKind),
    ];
    for (id, limit, error) in cases {
        let before = format!("{:?}", budget);
        // A later clock too: a refused call must not move the budget's time.
        assert_eq!(
            budget.set_limit(id, limit, 9 * SEC),
            Err(error),
            "{id:?} {limit}"
        );
        assert_eq!(format!("{:?}", budget), before, "{id:?} {limit}: changed");
    }
    // Every builder takes a fresh tag: an id of another budget is foreign.
    let mut other = Budget::builder();
    let foreign = other.add("x", Spec::sliding(10, SEC, 1)).unwrap();
    assert_eq!(
        budget.set_limit(foreign, 10, SEC),
        Err(ConfigError::UnknownBucket)
    );
}

#[test]
fn set_limit_does_not_allocate() {
    let (mut budget, ids) = budget();
    let start = allocations();
    COUNTING.with(|c| c.set(true));
    for n in 0..10_000u64 {
        let id = ids[(n % 5) as usize];
        let now = (n as i64) * (SEC / 1000);
        let _ = budget.set_limit(id, 1 + n % 150, now);
        let _ = budget.try_charge(&[Part::new(id, 1)], Class::Normal, now);
    }
    COUNTING.with(|c| c.set(false));
    assert_eq!(allocations() - start, 0);
}

#[path = "support/alloc.rs"]
mod alloc;
use alloc::{allocations, COUNTING};
