//! Credit pools refilled continuously (a leaky bucket, as Deribit describes its
//! limits): a request takes its cost if the pool holds it, else it is refused and
//! nothing is taken. Kept in thousandths of a credit so a refill of any rate over
//! any whole number of milliseconds is exact. Nothing here reads a clock.

/// One pool's fill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CreditPool {
    /// Credits held, in thousandths.
    milli: u64,
    /// The venue time `milli` was last brought up to date.
    at: i64,
}

/// A pool's size, refill and what one request costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PoolSpec {
    pub(crate) max: u64,
    pub(crate) refill_per_s: u64,
    pub(crate) cost: u64,
}

impl CreditPool {
    /// A full pool at `now`.
    pub(crate) fn full(spec: PoolSpec, now: i64) -> Self {
        CreditPool {
            milli: spec.max.saturating_mul(1_000),
            at: now,
        }
    }

    fn refill(&mut self, spec: PoolSpec, now: i64) {
        let dt = u64::try_from(now - self.at).unwrap_or(0);
        // refill_per_s credits a second is refill_per_s thousandths a millisecond.
        self.milli = self
            .milli
            .saturating_add(spec.refill_per_s.saturating_mul(dt))
            .min(spec.max.saturating_mul(1_000));
        self.at = self.at.max(now);
    }

    /// Takes one request's cost at `now`: the credits left, or when the pool will
    /// hold the cost again.
    pub(crate) fn take(&mut self, spec: PoolSpec, now: i64) -> Result<u64, i64> {
        self.refill(spec, now);
        let cost = spec.cost.saturating_mul(1_000);
        if self.milli < cost {
            let short = cost - self.milli;
            let wait = short.div_ceil(spec.refill_per_s.max(1));
            return Err(now.saturating_add(i64::try_from(wait).unwrap_or(i64::MAX)));
        }
        self.milli -= cost;
        Ok(self.milli / 1_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_pays_its_burst_then_refills_continuously() {
        let spec = PoolSpec {
            max: 50_000,
            refill_per_s: 10_000,
            cost: 500,
        };
        let mut p = CreditPool::full(spec, 0);
        for i in 0..100 {
            assert!(p.take(spec, 0).is_ok(), "burst request {i}");
        }
        assert_eq!(p.take(spec, 0), Err(50), "500 credits come back in 50 ms");
        assert_eq!(p.take(spec, 49), Err(50));
        assert_eq!(p.take(spec, 50), Ok(0));
        // 20 a second sustained: one every 50 ms.
        for k in 2..22 {
            assert!(p.take(spec, k * 50).is_ok());
        }
        assert_eq!(p.take(spec, 10_000_000), Ok(49_500), "never above the max");
        assert_eq!(
            p.take(spec, 5),
            Ok(49_000),
            "a clock going back refills nothing"
        );
    }
}
