//! Sizing a load: which limit a mix of requests exhausts first, and how many mixes
//! a second it admits. For a strategy that offers a multiple of what its venue
//! allows (the excess is then refused locally, never by the venue).

use ergon_core::{BucketId, Budget, Part};

/// The limit that `mix` (each request's parts, with how many of it one mix holds)
/// exhausts first over `horizon_ns`, as its bucket and window, and how many mixes
/// a second that limit admits. `windows` are the counted limits
/// ([`Account::windows`](super::Account::windows)); a window longer than the
/// horizon admits its whole limit within it. None if the mix charges none of them.
pub fn binding(
    budget: &Budget,
    windows: &[(BucketId, i64)],
    mix: &[(&[Part], f64)],
    horizon_ns: i64,
) -> Option<((BucketId, i64), f64)> {
    let per_s = |&(bucket, window): &(BucketId, i64)| {
        let cost: f64 = mix
            .iter()
            .flat_map(|(parts, n)| parts.iter().map(move |p| (p, *n)))
            .filter(|(p, _)| p.bucket == bucket)
            .map(|(p, n)| f64::from(p.cost) * n)
            .sum();
        let limit = budget.stats(bucket).ok()?.limit as f64;
        let span_s = window.min(horizon_ns).max(1) as f64 / 1e9;
        (cost > 0.0).then(|| ((bucket, window), limit / span_s / cost))
    };
    windows
        .iter()
        .filter_map(per_s)
        .min_by(|x, y| x.1.total_cmp(&y.1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ergon_core::Spec;

    #[test]
    fn the_scarcest_limit_binds() {
        const SEC: i64 = 1_000_000_000;
        let mut b = Budget::builder();
        let weight = b.add("weight", Spec::sliding(6000, 60 * SEC, 60)).unwrap();
        let orders = b.add("orders", Spec::sliding(100, 10 * SEC, 10)).unwrap();
        let day = b.add("day", Spec::sliding(1000, 86_400 * SEC, 24)).unwrap();
        let budget = b.build(0).unwrap();
        let windows = [(weight, 60 * SEC), (orders, 10 * SEC), (day, 86_400 * SEC)];
        let order = [
            Part::new(weight, 1),
            Part::new(orders, 1),
            Part::new(day, 1),
        ];
        let read = [Part::new(weight, 5)];
        let mix: [(&[Part], f64); 2] = [(&order, 2.0), (&read, 1.0)];
        // orders: 10/s / 2 = 5 mixes/s; weight: 100/s / 7 = 14.3; the day's 1000
        // within a 10 s horizon: 100/s / 2 = 50.
        let ((bucket, window), n) = binding(&budget, &windows, &mix, 10 * SEC).unwrap();
        assert_eq!((bucket, window), (orders, 10 * SEC));
        assert!((n - 5.0).abs() < 1e-9, "{n}");
        // Over a day the day's limit binds: 1000 / 86400 / 2.
        let (b2, _) = binding(&budget, &windows, &mix, 86_400 * SEC).unwrap();
        assert_eq!(b2.0, day);
        assert!(binding(&budget, &windows, &[], SEC).is_none());
    }
}
