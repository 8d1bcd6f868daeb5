//! Changing a bucket's limit after construction: a leased bucket's limit is its
//! current grant (the `ergon-lease` crate), which moves while the budget runs.
//!
//! Never allocates; a refused change leaves the budget as it was.

use super::Budget;
use crate::spec::ConfigError;
use crate::ticket::BucketId;

impl Budget {
    /// Sets the limit of `bucket` (the burst of a token bucket) to `limit` at `now_ns`.
    ///
    /// A limit of zero closes the bucket: every charge naming it is refused as
    /// [`Why::Closed`](crate::Why::Closed) until a limit above zero is set, its
    /// count and spec kept as they were; `stats.limit` reads 0. A gate takes no
    /// limit, zero included.
    ///
    /// The bucket keeps what it counted: lowered below its current count, it refuses
    /// until enough of that count leaves its window; raised, the new room is usable at
    /// once. Class headroom stays as declared, so the limit must stay above Bulk's
    /// headroom. Tickets and shapes charged or registered before stay valid.
    ///
    /// Refused, changing nothing (the clock included), with the error
    /// [`Builder::add`](crate::Builder::add) would give the same spec:
    /// [`ConfigError::TooLong`] (above `i64::MAX`, or a
    /// burst too long for the clock), [`ConfigError::BadHeadroom`] (not above the
    /// headroom), [`ConfigError::OptionNotForKind`] (a gate has no limit) and
    /// [`ConfigError::UnknownBucket`] (an id of another budget).
    pub fn set_limit(
        &mut self,
        bucket: BucketId,
        limit: u64,
        now_ns: i64,
    ) -> Result<(), ConfigError> {
        self.set_limit_until(bucket, limit, i64::MAX, now_ns)
    }

    /// [`Budget::set_limit`], for a limit that holds only before `until_ns` (on the
    /// budget's clock): from then on the bucket is closed ([`Why::Closed`]) until a
    /// limit is set again, whether or not the caller got to set it. A leased limit
    /// is a grant with a deadline (`ergon-lease`): the deadline holds at every
    /// charge, not only when the loop next applies a limit; it costs the send path
    /// nothing (the bucket's lane ends there).
    ///
    /// [`Why::Closed`]: crate::Why::Closed
    pub fn set_limit_until(
        &mut self,
        bucket: BucketId,
        limit: u64,
        until_ns: i64,
        now_ns: i64,
    ) -> Result<(), ConfigError> {
        let old = self
            .own(bucket)
            .map_err(|_| ConfigError::UnknownBucket)?
            .spec;
        // Closing keeps the spec (its count and headroom stay as they were).
        let spec = old
            .with_limit(if limit == 0 { old.limit() } else { limit })
            .ok_or(ConfigError::OptionNotForKind)?;
        spec.validate()?;
        let now = self.clock(now_ns);
        self.change(bucket, now, |b| {
            b.spec = spec;
            b.allowances = spec.allowances();
            b.stats.limit = limit;
            b.closed = limit == 0;
            b.closes_at_ns = until_ns;
        })
        .map_err(|_| ConfigError::UnknownBucket)
    }
}
