//! One bucket and the two moves the server-figure tests make on it: a charge
//! whose request left, and whether a charge would pass.

use ergon_core::{BucketId, Budget, Class, Part, Spec};

/// A budget of the one bucket `spec`, built at 0.
pub fn one(spec: Spec) -> (Budget, BucketId) {
    let mut b = Budget::builder();
    let id = b.add("x", spec).unwrap();
    (b.build(0).unwrap(), id)
}

/// A charge whose request left: no refund exists for it.
pub fn send(budget: &mut Budget, id: BucketId, cost: u32, t: i64) {
    let _flight = budget
        .try_charge(&[Part::new(id, cost)], Class::Urgent, t)
        .unwrap()
        .sent();
}

/// Whether `cost` would pass at `t` (charged on a copy).
pub fn admits(budget: &Budget, id: BucketId, cost: u32, t: i64) -> bool {
    budget
        .clone()
        .try_charge(&[Part::new(id, cost)], Class::Urgent, t)
        .is_ok()
}
