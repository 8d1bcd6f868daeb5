//! Builder validation: every configuration that cannot make a sound budget is refused
//! with the error that says what to fix, and `TooBig` for costs that can never pass.

use ergon_core::{
    Budget, Class, ConfigError, Part, Spec, Why, MAX_BUCKETS, MAX_NAME, MAX_PARTS, MAX_SLOTS,
};

fn add(spec: Spec) -> Result<(), ConfigError> {
    Budget::builder().add("x", spec).map(|_| ())
}

#[test]
fn zero_limits_and_windows() {
    assert_eq!(add(Spec::sliding(0, 1000, 10)), Err(ConfigError::ZeroLimit));
    assert_eq!(add(Spec::sliding(10, 0, 1)), Err(ConfigError::ZeroWindow));
    assert_eq!(
        add(Spec::sliding(10, -1000, 10)),
        Err(ConfigError::ZeroWindow)
    );
    assert_eq!(add(Spec::fixed(0, 1000)), Err(ConfigError::ZeroLimit));
    assert_eq!(add(Spec::fixed(10, 0)), Err(ConfigError::ZeroWindow));
    assert_eq!(add(Spec::token(0, 10)), Err(ConfigError::ZeroWindow));
    assert_eq!(add(Spec::token(10, 0)), Err(ConfigError::ZeroLimit));
    assert_eq!(add(Spec::token_every(0, 10)), Err(ConfigError::ZeroWindow));
    assert_eq!(add(Spec::in_flight(0)), Err(ConfigError::ZeroLimit));
    assert_eq!(add(Spec::gate()), Ok(()));
}

#[test]
fn slots() {
    assert_eq!(add(Spec::sliding(10, 1000, 0)), Err(ConfigError::ZeroSlots));
    assert_eq!(
        add(Spec::sliding(10, 1000, 7)),
        Err(ConfigError::SlotsDoNotDivideWindow)
    );
    assert_eq!(
        add(Spec::sliding(10, 999, 10)),
        Err(ConfigError::SlotsDoNotDivideWindow)
    );
    let too_many = MAX_SLOTS as u32 + 1;
    assert_eq!(
        add(Spec::sliding(10, 1000 * i64::from(too_many), too_many)),
        Err(ConfigError::TooManySlots)
    );
    assert_eq!(add(Spec::sliding(10, 64_000, MAX_SLOTS as u32)), Ok(()));
    assert_eq!(add(Spec::sliding(10, 1, 1)), Ok(()));
}

#[test]
fn guards_and_options() {
    assert_eq!(
        add(Spec::fixed(10, 100).guard(50)),
        Err(ConfigError::GuardTooWide)
    );
    assert_eq!(
        add(Spec::fixed(10, 100).guard(-1)),
        Err(ConfigError::GuardTooWide)
    );
    assert_eq!(add(Spec::fixed(10, 100).guard(49)), Ok(()));
    assert_eq!(add(Spec::fixed(10, 100).phase(-12_345)), Ok(()));
    assert_eq!(
        add(Spec::sliding(10, 100, 10).guard(1)),
        Err(ConfigError::OptionNotForKind)
    );
    assert_eq!(
        add(Spec::token(10, 10).phase(1)),
        Err(ConfigError::OptionNotForKind)
    );
    assert!(Budget::builder().hold_guard(-1).is_err());
}

#[test]
fn headroom() {
    assert_eq!(add(Spec::sliding(10, 100, 10).headroom(2, 5)), Ok(()));
    assert_eq!(add(Spec::sliding(10, 100, 10).headroom(0, 9)), Ok(()));
    assert_eq!(
        add(Spec::sliding(10, 100, 10).headroom(6, 5)),
        Err(ConfigError::BadHeadroom)
    );
    assert_eq!(
        add(Spec::sliding(10, 100, 10).headroom(2, 10)),
        Err(ConfigError::BadHeadroom)
    );
    assert_eq!(
        add(Spec::token(10, 4).headroom(1, 4)),
        Err(ConfigError::BadHeadroom)
    );
    assert_eq!(add(Spec::in_flight(3).headroom(1, 2)), Ok(()));
    assert_eq!(
        add(Spec::gate().headroom(0, 1)),
        Err(ConfigError::BadHeadroom)
    );
}

#[test]
fn names_and_capacity() {
    let mut b = Budget::builder();
    b.add("weight", Spec::gate()).unwrap();
    assert_eq!(
        b.add("weight", Spec::in_flight(1)),
        Err(ConfigError::DuplicateName)
    );
    assert_eq!(b.add("", Spec::gate()), Err(ConfigError::EmptyName));
    let long = "n".repeat(MAX_NAME + 1);
    assert_eq!(b.add(&long, Spec::gate()), Err(ConfigError::NameTooLong));
    assert!(b.add(&"n".repeat(MAX_NAME), Spec::gate()).is_ok());
    let mut b = Budget::builder();
    for i in 0..MAX_BUCKETS {
        b.add(&format!("b{i}"), Spec::gate()).unwrap();
    }
    assert_eq!(
        b.add("one more", Spec::gate()),
        Err(ConfigError::TooManyBuckets)
    );
    assert_eq!(
        Budget::builder().build(0).err(),
        Some(ConfigError::NoBuckets)
    );
}

#[test]
fn too_long_for_the_clock() {
    assert_eq!(
        add(Spec::token_every(i64::MAX / 2, 10)),
        Err(ConfigError::TooLong)
    );
    assert_eq!(
        add(Spec::token_every(1, u64::MAX)),
        Err(ConfigError::TooLong)
    );
}

#[test]
fn every_error_says_what_to_fix() {
    for e in [
        ConfigError::ZeroLimit,
        ConfigError::ZeroWindow,
        ConfigError::ZeroSlots,
        ConfigError::TooManySlots,
        ConfigError::SlotsDoNotDivideWindow,
        ConfigError::GuardTooWide,
        ConfigError::BadHeadroom,
        ConfigError::OptionNotForKind,
        ConfigError::TooLong,
        ConfigError::DuplicateName,
        ConfigError::EmptyName,
        ConfigError::NameTooLong,
        ConfigError::TooManyBuckets,
        ConfigError::TooManyParts,
        ConfigError::UnknownBucket,
        ConfigError::NoBuckets,
    ] {
        assert!(e.to_string().len() > 15, "{e:?}");
    }
}

#[test]
fn parts_are_validated_once_and_refused_on_the_charge_path() {
    let mut b = Budget::builder();
    let w = b.add("w", Spec::sliding(10, 1000, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    let mut other = Budget::builder();
    other.add("a", Spec::gate()).unwrap();
    let foreign = other.add("b", Spec::gate()).unwrap();

    let nine = [Part::new(w, 0); MAX_PARTS + 1];
    assert_eq!(budget.validate_parts(&nine), Err(ConfigError::TooManyParts));
    assert_eq!(
        budget.validate_parts(&[Part::new(foreign, 1)]),
        Err(ConfigError::UnknownBucket)
    );
    assert_eq!(budget.validate_parts(&[Part::new(w, 1); MAX_PARTS]), Ok(()));

    let l = budget.try_charge(&nine, Class::Urgent, 0).unwrap_err();
    assert_eq!((l.why, l.ready_at_ns), (Why::TooBig, i64::MAX));
    let l = budget
        .try_charge(&[Part::new(foreign, 1)], Class::Urgent, 0)
        .unwrap_err();
    assert_eq!((l.bucket, l.why), (foreign, Why::Foreign));
    assert_eq!(budget.stats(w).unwrap().used, 0);
}

#[test]
fn too_big_is_refused_at_once_for_every_kind() {
    let mut b = Budget::builder();
    let ids = [
        b.add("s", Spec::sliding(5, 1000, 10)).unwrap(),
        b.add("f", Spec::fixed(5, 1000)).unwrap(),
        b.add("t", Spec::token_every(10, 5)).unwrap(),
        b.add("c", Spec::in_flight(5)).unwrap(),
    ];
    let g = b.add("g", Spec::gate()).unwrap();
    let mut budget = b.build(0).unwrap();
    for id in ids {
        let l = budget
            .try_charge(&[Part::new(id, 6)], Class::Urgent, 0)
            .unwrap_err();
        assert_eq!(
            (l.bucket, l.why, l.ready_at_ns),
            (id, Why::TooBig, i64::MAX)
        );
        assert_eq!(budget.stats(id).unwrap().refusals.too_big, 1);
        // Two parts each within the limit, too big together.
        let l = budget
            .try_charge(&[Part::new(id, 3), Part::new(id, 3)], Class::Urgent, 0)
            .unwrap_err();
        assert_eq!(l.why, Why::TooBig);
        assert!(budget
            .try_charge(&[Part::new(id, 5)], Class::Urgent, 0)
            .is_ok());
    }
    // A gate counts nothing: any cost passes.
    assert!(budget
        .try_charge(&[Part::new(g, u32::MAX)], Class::Bulk, 0)
        .is_ok());
}

#[test]
fn a_part_naming_a_bucket_of_another_budget_is_refused_not_a_panic() {
    let mut big = Budget::builder();
    let mut foreign = None;
    for i in 0..6 {
        foreign = Some(big.add(&format!("b{i}"), Spec::gate()).unwrap());
    }
    let foreign = foreign.unwrap();
    let mut b = Budget::builder();
    let a = b.add("a", Spec::sliding(1, 1000, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    let _fills_a = budget
        .try_charge(&[Part::new(a, 1)], Class::Urgent, 0)
        .unwrap();
    // `a` is full, so the refusal is explained part by part, the foreign one included.
    let refused = budget
        .try_charge(&[Part::new(a, 1), Part::new(foreign, 0)], Class::Urgent, 1)
        .unwrap_err();
    assert_eq!(refused.why, Why::Foreign);
    assert_eq!(refused.bucket, foreign);
    assert_eq!(
        budget.validate_parts(&[Part::new(foreign, 0)]),
        Err(ConfigError::UnknownBucket)
    );
}

#[test]
fn limits_above_i64_max_are_refused() {
    assert_eq!(
        add(Spec::sliding(u64::MAX, 1000, 10)),
        Err(ConfigError::TooLong)
    );
    assert_eq!(add(Spec::in_flight(1 << 63)), Err(ConfigError::TooLong));
    assert_eq!(add(Spec::fixed(i64::MAX as u64, 1000)), Ok(()));
}
