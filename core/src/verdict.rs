//! What became of a request, and the one re-send rule.
//!
//! Only what surely did not run (Throttled, NotRun, ClockSkew) is charged again, and
//! only inside its deadline. Unknown is never re-sent: it is reconciled (by client
//! order id). Done and Rejected are final. The rule itself is
//! [`Budget::resend`](crate::Budget::resend).

use crate::ticket::{BucketId, Limited, Ticket};

/// What became of a request, as its venue adapter reads the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// It ran and succeeded.
    Done,
    /// The venue refused it for a business reason (bad price, no balance ...): it did
    /// not run, and sending the same thing again would be refused again.
    Rejected,
    /// The venue throttled it: it did not run. `bucket` is held until `until_ns`.
    Throttled {
        /// The scope the venue throttled.
        bucket: BucketId,
        /// End of the hold, on the caller's clock.
        until_ns: i64,
    },
    /// The venue banned the scope: it did not run, and `bucket` is halted until a
    /// person clears it. `until_ns` is the venue's own end of the ban.
    Banned {
        /// The scope halted.
        bucket: BucketId,
        /// The venue's end of the ban, on the caller's clock.
        until_ns: i64,
    },
    /// Surely not run (a documented "not executed" answer).
    NotRun,
    /// It may or may not have run: reconcile, never re-send.
    Unknown,
    /// Refused for its timestamp: it did not run; the clock offset needs a look.
    ClockSkew,
}

/// What to do with a request after its verdict.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub enum Resend {
    /// Send it again now: the budget is charged for it.
    Send(Ticket),
    /// It may be sent again, but not now: the budget refused it.
    Wait(Limited),
    /// Its deadline has passed: do not send it.
    Stale,
    /// It may have run: find out by its client order id. Never re-send it.
    Reconcile,
    /// The answer is final (Done or Rejected): sending it again would be a new
    /// request, not a re-send.
    Final,
}
