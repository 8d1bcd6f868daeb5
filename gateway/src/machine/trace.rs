//! The recording side of a gateway (see [`Trace`]).

use crate::endpoints::Account;
use crate::ledger::Key;
use crate::record::{Kind as Rec, Record, Recorder, Writer, NO_LABEL};
use crate::shm::ChargeLog;
use crate::wire::Wire;
use ergon_core::{BucketId, Budget, Class, Part, Verdict};
use ergon_venues::adapt::Request as Kind;
use ergon_venues::endpoint::Label;

/// The recording side of a gateway: the recorder, if on, and the trace id of each
/// ledger slot's current charge (and of the poll's and the time read's).
#[derive(Debug, Default)]
pub(super) struct Trace {
    pub(super) recorder: Option<Recorder>,
    /// The writer thread, when the gateway started it ([`Gateway::record_to`]).
    pub(super) writer: Option<Writer>,
    pub(super) next: u64,
    pub(super) slots: Vec<u64>,
    pub(super) open: u64,
    pub(super) time: u64,
    /// The WebSocket API's connect charge until its handshake settles.
    pub(super) ws_connect: u64,
    /// The WebSocket API's subscribe request's charge until it settles.
    pub(super) ws_sub: u64,
    /// The transport's connect charges as last recorded ([`Wire::connects`]).
    pub(super) connects: (u64, u64),
    /// Each bucket's count of usage figures read ([`ergon_core::Stats::observes`])
    /// as last recorded, by bucket index.
    pub(super) observes: Vec<u64>,
    /// Where each admitted charge is kept for the next start
    /// ([`Gateway::keep_charges`]).
    pub(super) charges: Option<ChargeLog>,
}

impl Trace {
    /// Records a charge of `parts` at `class` under `label`; its trace id (0: not
    /// recording).
    /// `admitted` is what the live budget decided (the line's `"live"`).
    pub(super) fn charge(
        &mut self,
        now: i64,
        parts: &[Part],
        class: Class,
        label: Label,
        admitted: bool,
    ) -> u64 {
        // Before the request leaves: stores into the mapped file, nothing more.
        if let (Some(log), true) = (&self.charges, admitted) {
            log.add(parts, now);
        }
        let Some(r) = &self.recorder else {
            return 0;
        };
        self.next += 1;
        let mut p = [(0u8, 0u32); ergon_core::MAX_PARTS];
        for (slot, part) in p.iter_mut().zip(parts) {
            // Bucket indices fit a u8: a budget has at most 255 buckets.
            *slot = (part.bucket.index() as u8, part.cost);
        }
        let n = parts.len().min(p.len());
        let label = label.index().unwrap_or(NO_LABEL);
        r.push(Record::charge(now, self.next, class, label, &p[..n]).live(admitted));
        self.next
    }

    /// Whether [`Trace::charge`] has anything to do (a charge log or a
    /// recorder): the submit asks first, and with neither (the usual gateway)
    /// pays two loads, not a call.
    #[inline]
    pub(super) fn keeps_charges(&self) -> bool {
        self.charges.is_some() || self.recorder.is_some()
    }

    /// Records the transport's connect charges since the last call (see
    /// [`Gateway::note_connects`]), at `venue`'s connect parts, Urgent (the pool's).
    pub(super) fn connects<W: Wire, E: Account>(&mut self, w: &W, venue: &E) {
        if self.recorder.is_none() {
            return;
        }
        let (left, refused) = w.connects();
        let (left0, refused0) = core::mem::replace(&mut self.connects, (left, refused));
        if (left0, refused0) == (left, refused) {
            return;
        }
        let Ok(parts) = venue.parts(Kind::Connect) else {
            return;
        };
        let now = w.now();
        for _ in left0..left {
            let tid = self.charge(now, &parts, Class::Urgent, Label::NONE, true);
            self.done(now, tid);
        }
        for _ in refused0..refused {
            self.charge(now, &parts, Class::Urgent, Label::NONE, false);
        }
    }

    /// Records a refund of charge `id`.
    pub(super) fn refund(&self, now: i64, id: u64) {
        if let (Some(r), true) = (&self.recorder, id != 0) {
            r.push(Record::lifecycle(now, Rec::Refund, id));
        }
    }

    /// Records the completion of charge `id`: the trace's `sent` then `complete`
    /// (the transport marks a send inside the client; a completed request was sent).
    pub(super) fn done(&self, now: i64, id: u64) {
        if let (Some(r), true) = (&self.recorder, id != 0) {
            r.push(Record::lifecycle(now, Rec::Sent, id));
            r.push(Record::lifecycle(now, Rec::Complete, id));
        }
    }

    /// Records the usage figures the adapter fed `budget` since the last call: one
    /// observe line per bucket whose count of figures moved, with its last figure.
    pub(super) fn observed(&mut self, now: i64, budget: &Budget) {
        let Some(r) = &self.recorder else {
            return;
        };
        for id in budget.ids() {
            let (Ok(s), Some(seen)) = (budget.stats(id), self.observes.get_mut(id.index())) else {
                continue;
            };
            if s.observes != *seen {
                *seen = s.observes;
                let used = i64::try_from(s.observed).unwrap_or(i64::MAX);
                r.push(Record::observe(now, id.index() as u8, used, s.observed_at));
            }
        }
    }

    /// Records a fixed window's new phase.
    pub(super) fn phase(&self, now: i64, bucket: BucketId, phase_ns: i64) {
        if let Some(r) = &self.recorder {
            r.push(Record::bucket(
                now,
                Rec::Phase,
                bucket.index() as u8,
                phase_ns,
            ));
        }
    }

    /// Records a throttle or ban the verdict says the budget took.
    /// A hold is kept in the charges file too, for the next start.
    pub(super) fn verdict(&self, now: i64, v: &Verdict) {
        if let (Some(log), Verdict::Throttled { bucket, until_ns }) = (&self.charges, *v) {
            log.hold(bucket, until_ns);
        }
        let Some(r) = &self.recorder else {
            return;
        };
        let (kind, bucket, until) = match *v {
            Verdict::Throttled { bucket, until_ns } => (Rec::Throttled, bucket, until_ns),
            Verdict::Banned { bucket, until_ns } => (Rec::Banned, bucket, until_ns),
            _ => return,
        };
        let wait = until.saturating_sub(now).max(0);
        r.push(Record::bucket(now, kind, bucket.index() as u8, wait));
    }

    pub(super) fn slot(&self, key: Key) -> u64 {
        self.slots.get(key.index()).copied().unwrap_or(0)
    }

    pub(super) fn set(&mut self, key: Key, id: u64) {
        if let Some(s) = self.slots.get_mut(key.index()) {
            *s = id;
        }
    }
}
