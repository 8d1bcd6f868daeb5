//! [`Budget::resend`]: the one re-send rule, applied to a [`Verdict`].

use super::Budget;
use crate::ticket::{Class, Limited, Part, Why};
use crate::verdict::{Resend, Verdict};

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
