//! The promises, checked from outside the gateway: every request ends with
//! exactly one final event (checked as each event comes), and at the end every
//! final event agrees with what the venue holds, no client order id ran twice,
//! and the venue never counted more than its limits.

use std::collections::BTreeMap;

use ergon_gateway::{Event, OrderState};
use ergon_venue_sim::report::{OrderView, Report};

use crate::rng::Rng;

/// What a request was for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A new order.
    Place,
    /// A cancel of one order.
    Cancel,
}

/// An event, owned, reduced to what the checks read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Final {
    /// The request's tag.
    pub tag: u64,
    /// What it says.
    pub what: What,
}

/// What an event says of its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum What {
    /// The venue ran it.
    Applied,
    /// Refused by the venue: it did not run.
    Rejected,
    /// Refused locally: the id is live.
    DuplicateId,
    /// Refused locally by the budget: nothing sent.
    Limited,
    /// Surely did not run; not sent again.
    Expired,
    /// A ban: it did not run.
    Halted,
    /// Reconciled: found in this state, or (None) it never ran.
    Reconciled(Option<OrderState>),
    /// Its outcome stays unknown.
    Unresolved,
    /// A batch settled item by item.
    BatchSettled,
    /// After Unresolved: the order showed up.
    Late,
}

impl What {
    fn is_final(self) -> bool {
        !matches!(self, What::Late)
    }
}

impl Final {
    /// The checks' view of `e`; None for a step (Retrying, Reconciling, an item)
    /// or the gateway's own events.
    pub fn of(e: &Event<'_>) -> Option<Final> {
        let (tag, what) = match *e {
            Event::Applied { tag, .. } => (tag, What::Applied),
            Event::Rejected { tag } => (tag, What::Rejected),
            Event::DuplicateId { tag } => (tag, What::DuplicateId),
            Event::Limited { tag, .. } => (tag, What::Limited),
            Event::Expired { tag, .. } => (tag, What::Expired),
            Event::Halted { tag, .. } => (tag, What::Halted),
            Event::Reconciled { tag, found } => (tag, What::Reconciled(found)),
            Event::Unresolved { tag } => (tag, What::Unresolved),
            Event::BatchSettled { tag } => (tag, What::BatchSettled),
            Event::Late { tag, .. } => (tag, What::Late),
            _ => return None,
        };
        Some(Final { tag, what })
    }
}

struct Req {
    kind: Kind,
    cid: String,
    finals: Vec<What>,
    lates: u32,
}

/// The strategy's requests and their events.
#[derive(Default)]
pub struct Ledger {
    next: u64,
    reqs: BTreeMap<u64, Req>,
    cancelled: Vec<String>,
}

impl Ledger {
    /// A fresh tag.
    pub fn next_tag(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Request `tag` is submitted.
    pub fn submitted(&mut self, tag: u64, kind: Kind, cid: &str) {
        if kind == Kind::Cancel {
            self.cancelled.push(cid.to_string());
        }
        let (finals, lates, cid) = (Vec::new(), 0, cid.to_string());
        self.reqs.insert(
            tag,
            Req {
                kind,
                cid,
                finals,
                lates,
            },
        );
    }

    /// Request `tag` could not be prepared: it never existed.
    pub fn unprepared(&mut self, tag: u64) {
        if let Some(r) = self.reqs.remove(&tag) {
            if r.kind == Kind::Cancel {
                self.cancelled.retain(|c| *c != r.cid);
            }
        }
    }

    /// A placed order the strategy may believe rests (ran, not yet cancelled).
    pub fn pick_resting(&mut self, rng: &mut Rng) -> Option<String> {
        let live: Vec<&Req> = self
            .reqs
            .values()
            .filter(|r| {
                r.kind == Kind::Place
                    && matches!(
                        r.finals.first(),
                        Some(What::Applied | What::Reconciled(Some(_)))
                    )
                    && !self.cancelled.contains(&r.cid)
            })
            .collect();
        if live.is_empty() {
            return None;
        }
        let i = rng.range(0, live.len() as i64) as usize;
        Some(live[i].cid.clone())
    }

    /// One event, checked: one final event per request, a Late only after an
    /// Unresolved and at most once.
    pub fn on_event(&mut self, f: Final, now: i64) -> Result<(), String> {
        let Some(r) = self.reqs.get_mut(&f.tag) else {
            return Ok(()); // the gateway's own (open orders, the switch)
        };
        if f.what == What::Late {
            r.lates += 1;
            return match (r.finals.first(), r.lates) {
                (Some(What::Unresolved), 1) => Ok(()),
                (first, n) => Err(format!(
                    "t={now}: tag {} ({:?} {}): Late #{n} after {first:?}",
                    f.tag, r.kind, r.cid
                )),
            };
        }
        debug_assert!(f.what.is_final());
        r.finals.push(f.what);
        match r.finals.len() {
            1 => Ok(()),
            _ => Err(format!(
                "t={now}: tag {} ({:?} {}): a second final event: {:?}",
                f.tag, r.kind, r.cid, r.finals
            )),
        }
    }

    /// How many requests ended with each kind of final event, by name.
    pub fn tally(&self) -> BTreeMap<String, u64> {
        let mut t = BTreeMap::new();
        for r in self.reqs.values() {
            let name = match r.finals.first() {
                Some(What::Reconciled(Some(_))) => "Reconciled(found)".to_string(),
                Some(What::Reconciled(None)) => "Reconciled(never ran)".to_string(),
                Some(w) => format!("{w:?}"),
                None => "none".to_string(),
            };
            *t.entry(format!("{:?} {name}", r.kind)).or_insert(0) += 1;
            if r.lates > 0 {
                *t.entry(format!("{:?} Late", r.kind)).or_insert(0) += 1;
            }
        }
        t
    }

    /// The checks at the end, against the venue's truth.
    /// `injected`: bans the run itself made (not the gateway's doing).
    pub fn at_end(
        &self,
        report: &Report,
        orders: &[OrderView],
        in_flight: usize,
        injected: u64,
    ) -> Vec<String> {
        let mut v = Vec::new();
        if report.duplicates > 0 {
            v.push(format!(
                "{} client order ids executed twice at the venue",
                report.duplicates
            ));
        }
        if in_flight > 0 {
            v.push(format!(
                "{in_flight} requests still in the ledger after the drain"
            ));
        }
        if report.throttled > 0 || report.order_rate_limited > 0 || report.bans > injected {
            v.push(format!(
                "the venue answered 429 {} times ({} order-rate), banned {} times",
                report.throttled, report.order_rate_limited, report.bans
            ));
        }
        for l in &report.limits {
            if l.windows_over > 0 {
                v.push(format!(
                    "the venue counted over {:?}: {} windows",
                    l.rate_limit, l.windows_over
                ));
            }
        }
        let find = |cid: &str| orders.iter().find(|o| o.client_id == cid);
        for (tag, r) in &self.reqs {
            let Some(first) = r.finals.first() else {
                v.push(format!(
                    "tag {tag} ({:?} {}): no final event",
                    r.kind, r.cid
                ));
                continue;
            };
            let at_venue = find(&r.cid);
            let wrong = match (r.kind, first) {
                (Kind::Place, What::Applied | What::Reconciled(Some(_))) => at_venue.is_none(),
                (
                    Kind::Place,
                    What::Rejected
                    | What::DuplicateId
                    | What::Limited
                    | What::Expired
                    | What::Halted
                    | What::Reconciled(None),
                ) => at_venue.is_some(),
                (Kind::Cancel, What::Applied) => at_venue.map_or(true, |o| o.status != "CANCELED"),
                _ => false,
            };
            if wrong {
                v.push(format!(
                    "tag {tag} ({:?} {}): final {first:?} but the venue holds {:?}",
                    r.kind,
                    r.cid,
                    at_venue.map(|o| o.status.as_str())
                ));
            }
        }
        v
    }
}
