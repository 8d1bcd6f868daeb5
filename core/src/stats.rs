//! What a bucket has been through: counters kept on the side of the charge path.

/// Refusals of one bucket, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refusals {
    /// No room.
    pub full: u64,
    /// Held after a throttle.
    pub held: u64,
    /// Halted after a ban.
    pub halted: u64,
    /// Cost above what the class may ever use.
    pub too_big: u64,
}

/// A snapshot of one bucket, from [`Budget::stats`](crate::Budget::stats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Units counted at the budget's latest time (outstanding units for in-flight).
    pub used: u64,
    /// The limit (the burst for token buckets; 0 for gates).
    pub limit: u64,
    /// Units admitted by `try_charge`, over the budget's life.
    pub admitted: u64,
    /// Units added by `charge_after`.
    pub charged_after: u64,
    /// End of the current hold, if one is in force at the budget's latest time.
    pub held_until_ns: Option<i64>,
    /// Halted until a person clears it.
    pub halted: bool,
    /// The venue's end of the last ban, as the adapter read it (informational: the
    /// halt does not end there).
    pub ban_until_ns: Option<i64>,
    /// Bans received.
    pub bans: u32,
    /// Throttles received (each starts or extends a hold).
    pub throttles: u32,
    /// Refusals reported on this bucket.
    pub refusals: Refusals,
    /// Tickets refunded that charged this bucket.
    pub refunds: u64,
    /// The last server-reported usage minus the local count at that moment:
    /// positive means another sender on the scope, or a local count behind.
    pub drift: i64,
    /// Server-reported usage figures read ([`Budget::observe_used`] calls), over the
    /// budget's life.
    ///
    /// [`Budget::observe_used`]: crate::Budget::observe_used
    pub observes: u64,
    /// The last server-reported figure, as the venue gave it (before capping).
    pub observed: u64,
    /// The venue's stamp of that figure on the budget's clock, as given to
    /// [`Budget::observe_used_at`]; `None` for an unstamped figure
    /// ([`Budget::observe_used`]). A recording of the budget's calls needs it to
    /// make the same decisions again.
    ///
    /// [`Budget::observe_used_at`]: crate::Budget::observe_used_at
    /// [`Budget::observe_used`]: crate::Budget::observe_used
    pub observed_at: Option<i64>,
}
