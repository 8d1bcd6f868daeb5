//! Declaring buckets: [`Spec`] says what one limit is, and [`ConfigError`] what
//! cannot make a budget. The [`Builder`](crate::Builder) (in the budget's module)
//! validates a set of specs and builds the budget; nothing on the charge path checks
//! configuration.

use core::fmt;

use crate::MAX_SLOTS;

/// What kind of limit a bucket models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// At most `limit` units in any window of `window_ns`, counted over a slotted ring
    /// of `slots` slots (OKX, Bybit, Hyperliquid). Conservative: a charge at `t` counts
    /// until `t + window_ns` has fully passed; the price is at most one slot.
    Sliding {
        /// Units per window.
        limit: u64,
        /// Window length.
        window_ns: i64,
        /// Slots the window is cut into; must divide `window_ns`.
        slots: u32,
    },
    /// At most `limit` units per window, windows aligned to `phase_ns` (the venue's
    /// clock boundaries, expressed on the caller's clock: Binance minute, 10 s, day).
    /// A charge within `guard_ns` of a boundary counts on both sides of it, which
    /// covers the clock offset and one-way latency between the caller and the venue.
    Fixed {
        /// Units per window.
        limit: u64,
        /// Window length.
        window_ns: i64,
        /// A window boundary, on the caller's clock (any one; taken modulo the window).
        phase_ns: i64,
        /// Uncertainty of the boundary; less than half the window.
        guard_ns: i64,
    },
    /// A sustained rate with a burst (GCRA): one unit every `interval_ns`, at most
    /// `burst` units at once.
    Token {
        /// Time one unit takes to drain.
        interval_ns: i64,
        /// Units that may go at once after idling.
        burst: u64,
    },
    /// At most `limit` units awaiting an answer; released by
    /// [`Budget::complete`](crate::Budget::complete) or a refund.
    InFlight {
        /// Units outstanding at most.
        limit: u64,
    },
    /// No count: a scope that only carries holds and halts (the IP scope every
    /// request and connect charges).
    Gate,
}

/// One bucket's declaration: its [`Kind`] and its class headroom.
///
/// ```
/// use ergon_core::Spec;
/// let weight = Spec::sliding(1200, 60_000_000_000, 60).headroom(100, 400);
/// let orders = Spec::fixed(50, 10_000_000_000).phase(0).guard(20_000_000);
/// # let _ = (weight, orders);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec {
    kind: Kind,
    headroom_normal: u64,
    headroom_bulk: u64,
    /// The longest server wait still read as a throttle; 0 for the default.
    max_wait_ns: i64,
    misapplied: bool,
}

impl Spec {
    const fn of(kind: Kind) -> Self {
        Spec {
            kind,
            headroom_normal: 0,
            headroom_bulk: 0,
            max_wait_ns: 0,
            misapplied: false,
        }
    }

    /// `limit` units in any window of `window_ns`, over a ring of `slots` slots.
    pub const fn sliding(limit: u64, window_ns: i64, slots: u32) -> Self {
        Self::of(Kind::Sliding {
            limit,
            window_ns,
            slots,
        })
    }

    /// `limit` units per window of `window_ns`, aligned to 0 with no guard; see
    /// [`Spec::phase`] and [`Spec::guard`].
    pub const fn fixed(limit: u64, window_ns: i64) -> Self {
        Self::of(Kind::Fixed {
            limit,
            window_ns,
            phase_ns: 0,
            guard_ns: 0,
        })
    }

    /// `rate_per_s` units per second sustained, `burst` at once. The drain interval
    /// is rounded up to the nanosecond, so the bucket never admits more than asked.
    pub const fn token(rate_per_s: u32, burst: u64) -> Self {
        let interval_ns = if rate_per_s == 0 {
            0
        } else {
            (1_000_000_000 + rate_per_s as i64 - 1) / rate_per_s as i64
        };
        Self::token_every(interval_ns, burst)
    }

    /// One unit every `interval_ns` sustained, `burst` at once.
    pub const fn token_every(interval_ns: i64, burst: u64) -> Self {
        Self::of(Kind::Token { interval_ns, burst })
    }

    /// At most `limit` units awaiting an answer.
    pub const fn in_flight(limit: u64) -> Self {
        Self::of(Kind::InFlight { limit })
    }

    /// A gate: holds and halts only.
    pub const fn gate() -> Self {
        Self::of(Kind::Gate)
    }

    /// The window boundary of a fixed bucket, on the caller's clock.
    pub const fn phase(mut self, phase_ns: i64) -> Self {
        match &mut self.kind {
            Kind::Fixed { phase_ns: p, .. } => *p = phase_ns,
            _ => self.misapplied = true,
        }
        self
    }

    /// The boundary uncertainty of a fixed bucket.
    pub const fn guard(mut self, guard_ns: i64) -> Self {
        match &mut self.kind {
            Kind::Fixed { guard_ns: g, .. } => *g = guard_ns,
            _ => self.misapplied = true,
        }
        self
    }

    /// Units that Normal may not use (`normal`) and that Bulk may not use (`bulk`);
    /// Urgent may use the whole limit. `normal <= bulk < limit`.
    pub const fn headroom(mut self, normal: u64, bulk: u64) -> Self {
        self.headroom_normal = normal;
        self.headroom_bulk = bulk;
        self
    }

    /// The longest server wait [`Budget::throttled`](crate::Budget::throttled) still
    /// reads as a throttle. A longer one (a `Retry-After` of years, a reset time in
    /// 2099) is no throttle: it halts the bucket as a ban, so that the alerting path
    /// sees it and a person decides ([`Budget::clear_halt`](crate::Budget::clear_halt)),
    /// instead of a hold that silently freezes every class for good.
    ///
    /// Default: the longer of 5 minutes and two of the bucket's windows (for a token
    /// bucket, the time its burst takes to drain; for in-flight limits and gates, one
    /// second). Must be above zero.
    pub const fn max_wait(mut self, max_wait_ns: i64) -> Self {
        if max_wait_ns <= 0 {
            self.misapplied = true;
        }
        self.max_wait_ns = max_wait_ns;
        self
    }

    /// The cap on server waits given by [`Spec::max_wait`], if any.
    pub(crate) const fn max_wait_ns(&self) -> Option<i64> {
        if self.max_wait_ns > 0 {
            Some(self.max_wait_ns)
        } else {
            None
        }
    }

    /// The kind declared.
    pub const fn kind(&self) -> Kind {
        self.kind
    }

    /// The headroom declared, `[normal, bulk]` (see [`Spec::headroom`]).
    pub const fn class_headroom(&self) -> [u64; 2] {
        [self.headroom_normal, self.headroom_bulk]
    }

    /// The units each class may use, Urgent first; gates have none.
    pub(crate) fn allowances(&self) -> [u64; 3] {
        let limit = self.limit();
        [
            limit,
            limit - self.headroom_normal,
            limit - self.headroom_bulk,
        ]
    }

    /// The limit in units (burst for token buckets, 0 for gates).
    pub(crate) const fn limit(&self) -> u64 {
        match self.kind {
            Kind::Sliding { limit, .. } | Kind::Fixed { limit, .. } => limit,
            Kind::InFlight { limit } => limit,
            Kind::Token { burst, .. } => burst,
            Kind::Gate => 0,
        }
    }

    /// The same spec with another limit (burst for token buckets); `None` for a
    /// gate, which has no limit. Check the result with [`Spec::validate`].
    pub(crate) const fn with_limit(mut self, new: u64) -> Option<Self> {
        match &mut self.kind {
            Kind::Sliding { limit, .. } | Kind::Fixed { limit, .. } => *limit = new,
            Kind::InFlight { limit } => *limit = new,
            Kind::Token { burst, .. } => *burst = new,
            Kind::Gate => return None,
        }
        Some(self)
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.misapplied {
            return Err(ConfigError::OptionNotForKind);
        }
        match self.kind {
            Kind::Sliding {
                limit,
                window_ns,
                slots,
            } => {
                nonzero(limit, window_ns)?;
                if slots == 0 {
                    return Err(ConfigError::ZeroSlots);
                }
                if slots as usize > MAX_SLOTS {
                    return Err(ConfigError::TooManySlots);
                }
                if window_ns % i64::from(slots) != 0 {
                    return Err(ConfigError::SlotsDoNotDivideWindow);
                }
            }
            Kind::Fixed {
                limit,
                window_ns,
                guard_ns,
                ..
            } => {
                nonzero(limit, window_ns)?;
                if guard_ns < 0 || guard_ns.saturating_mul(2) >= window_ns {
                    return Err(ConfigError::GuardTooWide);
                }
            }
            Kind::Token { interval_ns, burst } => {
                nonzero(burst, interval_ns)?;
                let burst = i64::try_from(burst).map_err(|_| ConfigError::TooLong)?;
                // The whole burst, plus one more burst of margin for charge_after,
                // must fit the clock's range.
                if interval_ns
                    .checked_mul(burst)
                    .and_then(|t| t.checked_mul(4))
                    .is_none()
                {
                    return Err(ConfigError::TooLong);
                }
            }
            Kind::InFlight { limit } => nonzero(limit, 1)?,
            Kind::Gate => {}
        }
        let limit = self.limit();
        let headroom_given = self.headroom_normal != 0 || self.headroom_bulk != 0;
        if headroom_given
            && (matches!(self.kind, Kind::Gate)
                || self.headroom_normal > self.headroom_bulk
                || self.headroom_bulk >= limit)
        {
            return Err(ConfigError::BadHeadroom);
        }
        Ok(())
    }
}

fn nonzero(limit: u64, window_ns: i64) -> Result<(), ConfigError> {
    if limit == 0 {
        return Err(ConfigError::ZeroLimit);
    }
    // Costs and headroom add up in u64 on the charge path without overflow checks.
    if limit > i64::MAX as u64 {
        return Err(ConfigError::TooLong);
    }
    if window_ns <= 0 {
        return Err(ConfigError::ZeroWindow);
    }
    Ok(())
}

/// A configuration that cannot make a budget. Every variant says what to fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A limit (or burst) of zero: nothing could ever pass.
    ZeroLimit,
    /// A window, or a token interval, of zero or less.
    ZeroWindow,
    /// A sliding window of zero slots.
    ZeroSlots,
    /// More slots than [`MAX_SLOTS`](crate::MAX_SLOTS).
    TooManySlots,
    /// The slots do not cut the window into equal whole nanoseconds.
    SlotsDoNotDivideWindow,
    /// A fixed window's guard is negative or not less than half the window.
    GuardTooWide,
    /// Headroom on a gate, Normal's headroom above Bulk's, or Bulk's not below the limit.
    BadHeadroom,
    /// `phase` or `guard` given for a bucket that is not fixed, or a `max_wait` of
    /// zero or less.
    OptionNotForKind,
    /// A window or burst too long for the nanosecond clock, or a limit above `i64::MAX`.
    TooLong,
    /// Two buckets with one name.
    DuplicateName,
    /// A bucket with an empty name.
    EmptyName,
    /// A name longer than [`MAX_NAME`](crate::MAX_NAME) bytes.
    NameTooLong,
    /// More buckets than [`MAX_BUCKETS`](crate::MAX_BUCKETS).
    TooManyBuckets,
    /// More parts than [`MAX_PARTS`](crate::MAX_PARTS).
    TooManyParts,
    /// A part names a bucket this budget does not have (an id of another budget).
    UnknownBucket,
    /// A budget with no bucket.
    NoBuckets,
    /// More shapes than [`MAX_SHAPES`](crate::MAX_SHAPES).
    TooManyShapes,
    /// A shape names one bucket in several parts whose costs add up past `u32::MAX`.
    ShapeCostTooBig,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            ConfigError::ZeroLimit => "the limit is zero: nothing could ever pass",
            ConfigError::ZeroWindow => "the window (or token interval) must be above zero",
            ConfigError::ZeroSlots => "a sliding window needs at least one slot",
            ConfigError::TooManySlots => "more slots than MAX_SLOTS (64)",
            ConfigError::SlotsDoNotDivideWindow => {
                "the slots do not divide the window into whole nanoseconds"
            }
            ConfigError::GuardTooWide => "the guard must be at least 0 and below half the window",
            ConfigError::BadHeadroom => {
                "headroom must satisfy normal <= bulk < limit, and gates take none"
            }
            ConfigError::OptionNotForKind => {
                "phase and guard apply to fixed windows only, and max_wait must be above zero"
            }
            ConfigError::TooLong => {
                "the window, burst or limit is too large (limits go up to i64::MAX)"
            }
            ConfigError::DuplicateName => "two buckets have the same name",
            ConfigError::EmptyName => "a bucket name is empty",
            ConfigError::NameTooLong => "a bucket name is longer than MAX_NAME (32) bytes",
            ConfigError::TooManyBuckets => "more buckets than MAX_BUCKETS (32)",
            ConfigError::TooManyParts => "more parts than MAX_PARTS (8)",
            ConfigError::UnknownBucket => "a part names a bucket this budget does not have",
            ConfigError::NoBuckets => "a budget needs at least one bucket",
            ConfigError::TooManyShapes => "more shapes than MAX_SHAPES (32)",
            ConfigError::ShapeCostTooBig => "a shape's costs for one bucket add up past u32::MAX",
        };
        f.write_str(text)
    }
}
