//! A charge that names a bucket more than once is checked and charged once, for the
//! sum; a charge whose buckets are all different takes the fast path. Both must give
//! the same answers.

use ergon_core::{BucketId, Budget, Class, Part, Spec, Why};

fn budget(n: usize) -> (Budget, Vec<BucketId>) {
    let mut b = Budget::builder();
    let ids = (0..n)
        .map(|i| {
            b.add(&format!("b{i}"), Spec::sliding(10, 1_000, 10))
                .unwrap()
        })
        .collect();
    (b.build(0).unwrap(), ids)
}

#[test]
fn a_repeated_bucket_is_checked_for_the_sum() {
    let (mut budget, ids) = budget(2);
    let _ = budget
        .try_charge(&[Part::new(ids[0], 2)], Class::Urgent, 1)
        .unwrap()
        .sent();
    // Each part alone fits (2 + 5 <= 10); together on one bucket they do not.
    let parts = [
        Part::new(ids[0], 5),
        Part::new(ids[1], 1),
        Part::new(ids[0], 5),
    ];
    let no = budget.try_charge(&parts, Class::Urgent, 1).unwrap_err();
    assert_eq!((no.bucket, no.why), (ids[0], Why::Full));
    assert_eq!(budget.stats(ids[0]).unwrap().used, 2);
    assert_eq!(budget.stats(ids[1]).unwrap().used, 0);

    let parts = [
        Part::new(ids[0], 3),
        Part::new(ids[1], 1),
        Part::new(ids[0], 5),
    ];
    let t = budget.try_charge(&parts, Class::Urgent, 1).unwrap();
    assert_eq!(budget.stats(ids[0]).unwrap().used, 10);
    assert_eq!(budget.stats(ids[1]).unwrap().used, 1);
    budget.refund(t, 2).unwrap();
    assert_eq!(budget.stats(ids[0]).unwrap().used, 2);
    assert_eq!(budget.stats(ids[1]).unwrap().used, 0);
}

#[test]
fn distinct_buckets_are_charged_each_their_cost() {
    let (mut budget, ids) = budget(32);
    let parts: Vec<Part> = ids[24..].iter().map(|&id| Part::new(id, 3)).collect();
    let _ = budget.try_charge(&parts, Class::Urgent, 1).unwrap().sent();
    for &id in &ids[24..] {
        assert_eq!(budget.stats(id).unwrap().used, 3);
    }
    assert_eq!(budget.stats(ids[0]).unwrap().used, 0);
    // One bucket short of room refuses the whole charge.
    let _ = budget
        .try_charge(&[Part::new(ids[31], 7)], Class::Urgent, 1)
        .unwrap()
        .sent();
    let no = budget.try_charge(&parts, Class::Urgent, 1).unwrap_err();
    assert_eq!((no.bucket, no.why), (ids[31], Why::Full));
    assert_eq!(budget.stats(ids[24]).unwrap().used, 3);
}

#[test]
fn a_bucket_of_another_budget_is_foreign_whatever_its_index() {
    let (mut small, ids) = budget(2);
    let (_, big_ids) = budget(32);
    for foreign in [big_ids[0], big_ids[2], big_ids[31]] {
        let no = small
            .try_charge(
                &[Part::new(ids[0], 1), Part::new(foreign, 1)],
                Class::Urgent,
                1,
            )
            .unwrap_err();
        assert_eq!((no.bucket, no.why), (foreign, Why::Foreign));
        assert_eq!(small.stats(ids[0]).unwrap().used, 0);
    }
}
