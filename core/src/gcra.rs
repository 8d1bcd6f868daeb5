//! Token buckets as GCRA: one `i64` theoretical arrival time.
//!
//! Admitting `n` units at `t` moves the TAT to `max(TAT, t) + n·T`; it is allowed
//! while `TAT - t <= allowance·T`. Over any span Δt at most `burst + Δt/T` units pass.

#[derive(Clone, Debug)]
pub(crate) struct Gcra {
    interval_ns: i64,
    tat: i64,
    /// The ticket sequence of the last charge, and the TAT before it: a refund of
    /// that very charge restores it exactly. Any other refund would have to know
    /// what came after it, so it gives nothing back (conservative, never minting).
    last_seq: u64,
    tat_before: i64,
}

impl Gcra {
    pub(crate) fn new(interval_ns: i64, now: i64) -> Self {
        Gcra {
            interval_ns,
            tat: now,
            last_seq: 0,
            tat_before: now,
        }
    }

    pub(crate) fn interval_ns(&self) -> i64 {
        self.interval_ns
    }

    /// The time `units` take to drain, saturating: a charge is bounded by the burst
    /// (whose span the builder checked fits), but a server figure is not.
    fn span(&self, units: u64) -> i64 {
        i64::try_from(units)
            .unwrap_or(i64::MAX)
            .saturating_mul(self.interval_ns)
    }

    /// In `i128`: `charge_after` may have pushed the TAT to the end of the clock's
    /// range, and an overflow here would wrap into admitting.
    #[inline]
    pub(crate) fn fits(&self, cost: u64, allowance: u64, now: i64) -> bool {
        i128::from(self.tat.max(now)) + i128::from(self.span(cost)) - i128::from(now)
            <= i128::from(self.span(allowance))
    }

    /// Call only when it does not fit now, with `cost <= allowance`.
    pub(crate) fn ready_at(&self, cost: u64, allowance: u64) -> i64 {
        let ready =
            i128::from(self.tat) + i128::from(self.span(cost)) - i128::from(self.span(allowance));
        i64::try_from(ready).unwrap_or(i64::MAX)
    }

    #[inline]
    pub(crate) fn add(&mut self, cost: u64, now: i64, seq: u64) {
        self.tat_before = self.tat;
        self.last_seq = seq;
        self.tat = self.tat.max(now).saturating_add(self.span(cost));
    }

    /// A server figure: adds `cost` as a charge no ticket can refund. If the debt
    /// would then take longer than `max_wait_ns` to drain, it keeps only that much
    /// and returns when the whole debt would have drained: the caller halts the
    /// bucket, since no throttle lasts that long.
    pub(crate) fn add_debt(&mut self, cost: u64, now: i64, max_wait_ns: i64) -> Option<i64> {
        let whole = i128::from(self.tat.max(now)) + i128::from(self.span(cost));
        let ceiling = i128::from(now) + i128::from(max_wait_ns);
        self.add(cost, now, 0);
        if whole <= ceiling {
            return None;
        }
        self.tat = i64::try_from(ceiling).unwrap_or(i64::MAX);
        Some(i64::try_from(whole).unwrap_or(i64::MAX))
    }

    pub(crate) fn refund(&mut self, seq: u64) {
        if seq != 0 && seq == self.last_seq {
            self.tat = self.tat_before;
            self.last_seq = 0;
        }
    }

    /// Units not yet drained at `now`, rounded up.
    pub(crate) fn used_at(&self, now: i64) -> u64 {
        let ahead = self.tat.saturating_sub(now);
        if ahead <= 0 {
            0
        } else {
            (ahead as u64).div_ceil(self.interval_ns as u64)
        }
    }

    /// Raises the count to the server's figure: the TAT to `now + used·T` if that
    /// is later (exact, not the count rounded up). Whether it moved.
    pub(crate) fn raise_to(&mut self, used: u64, now: i64) -> bool {
        let raised = now.saturating_add(self.span(used));
        if raised <= self.tat {
            return false;
        }
        self.tat = raised;
        self.last_seq = 0;
        true
    }
}
