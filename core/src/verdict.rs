//! What became of a request, and the one re-send rule.
//!
//! Only what surely did not run (Throttled, NotRun, ClockSkew) is charged again, and
//! only inside its deadline. Unknown is never re-sent: it is reconciled (by client
//! order id). Done and Rejected are final.

use crate::budget::Budget;
use crate::ticket::{BucketId, Class, Limited, Part, Ticket, Why};

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

impl Budget {
    /// The re-send rule: what may be done with a request after `verdict`.
    ///
    /// Unknown is always [`Resend::Reconcile`], whatever the time. Done and Rejected
    /// are [`Resend::Final`]. A Banned scope stays halted: [`Resend::Wait`]. For what
    /// surely did not run (Throttled, NotRun, ClockSkew): [`Resend::Stale`] once
    /// `now_ns >= deadline_ns` (`now_ns` read as no earlier than any time the
    /// budget has seen), else the charge is tried again, [`Resend::Send`] with
    /// its ticket or [`Resend::Wait`].
    ///
    /// ```
    /// # use ergon_core::{Budget, Class, Part, Resend, Spec, Verdict};
    /// let mut b = Budget::builder();
    /// let w = b.add("w", Spec::sliding(10, 1_000, 10)).unwrap();
    /// let mut budget = b.build(0).unwrap();
    /// let order = [Part::new(w, 1)];
    /// assert_eq!(budget.resend(&Verdict::Unknown, &order, Class::Urgent, 500, 10), Resend::Reconcile);
    /// assert_eq!(budget.resend(&Verdict::NotRun, &order, Class::Urgent, 500, 600), Resend::Stale);
    /// assert!(matches!(budget.resend(&Verdict::NotRun, &order, Class::Urgent, 500, 10), Resend::Send(_)));
    /// ```
    pub fn resend(
        &mut self,
        verdict: &Verdict,
        parts: &[Part],
        class: Class,
        deadline_ns: i64,
        now_ns: i64,
    ) -> Resend {
        match *verdict {
            Verdict::Unknown => Resend::Reconcile,
            Verdict::Done | Verdict::Rejected => Resend::Final,
            Verdict::Banned { bucket, .. } => Resend::Wait(Limited {
                bucket,
                ready_at_ns: i64::MAX,
                why: Why::Halted,
            }),
            Verdict::Throttled { .. } | Verdict::NotRun | Verdict::ClockSkew => {
                // The deadline is judged on the budget's clock: a caller's clock that
                // stepped back must not make a stale request fresh again.
                if self.now_ns().max(now_ns) >= deadline_ns {
                    return Resend::Stale;
                }
                match self.try_charge(parts, class, now_ns) {
                    Ok(ticket) => Resend::Send(ticket),
                    Err(limited) => Resend::Wait(limited),
                }
            }
        }
    }
}
