//! The hand-off between the lease thread and the loop thread: a few atomics per
//! leased bucket, no lock, no allocation, no system call on the loop's side.
//!
//! The lease thread posts the bucket's limit (safe share plus grant) and the instant
//! until which it holds (its renewal deadline), and the safe share reserved for the
//! host once a table shows it, with the instant its hold ends; the loop, once per
//! turn, applies the limit with [`Budget::set_limit_until`], so that the budget
//! itself closes the bucket at the next deadline, at any charge, even one made
//! before the loop's next turn (a process stopped between its turn and its
//! submits). At its next turn the loop falls back to the reserved safe share by
//! itself, even if the lease thread is stuck in a call to etcd, and to nothing
//! once the hold ends: a limit of zero closes the bucket. The loop publishes what
//! it applied (the lease thread acknowledges a lowered grant only after that) and
//! its counters (the demand).
//!
//! The posted pair is a seqlock on atomics (Boehm, "Can seqlocks get along with
//! programming language memory models?"): one writer (the lease thread); a reader
//! that sees a write under way keeps what it had for one more turn. Every atomic
//! comes from `crate::sync`, so the loom model (`tests/loom_handoff.rs`) checks
//! this very code.

use crate::sync::{fence, Arc, AtomicI64, AtomicU64, Ordering};
use std::time::Instant;

use ergon_core::{BucketId, Budget, ConfigError};

/// The state shared by the two threads for one leased bucket.
#[derive(Debug)]
pub struct Shared {
    origin: Instant,
    safe: u64,
    /// The safe share the table reserves for the host (0 until one does).
    reserved: AtomicU64,
    /// The reservation is usable before this instant (its hold's end).
    reserved_until: AtomicI64,
    /// Even when no post is under way.
    seq: AtomicU64,
    limit: AtomicU64,
    deadline_ns: AtomicI64,
    /// The `seq` of the last post the loop applied.
    applied: AtomicU64,
    /// The limit in force in the budget.
    in_force: AtomicU64,
    /// The budget's cumulative admitted units and refusals, as the loop last saw.
    admitted: AtomicU64,
    refused: AtomicU64,
    /// What a monitor shows, written by the lease thread each round.
    grant: AtomicU64,
    demand_used: AtomicU64,
    demand_refused: AtomicU64,
    renewed_ns: AtomicI64,
    epoch: AtomicU64,
    allocator: AtomicU64,
}

/// What a monitor (`--stats`) shows of one leased bucket; read from atomics only,
/// so the loop thread may read it too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct View {
    /// The limit in force in the budget (safe share plus usable grant).
    pub limit: u64,
    /// The grant read last (usable or not).
    pub grant: u64,
    /// Units used in the last window, as published.
    pub used: u64,
    /// Refusals in the last window, as published.
    pub refused: u64,
    /// Nanoseconds since the last successful renewal was sent; `None` without a lease.
    pub lease_age_ns: Option<i64>,
    /// The epoch of the grant table the budget uses.
    pub epoch: u64,
    /// Whether this host is the allocator.
    pub allocator: bool,
    /// The safe share reserved for this host (0 until a table reserves it).
    pub reserved: u64,
}

impl Shared {
    /// The shared state of a bucket whose safe share is `safe`; times are measured
    /// from `origin` (the same `Instant` for both threads). Nothing is usable
    /// before the lease thread posts a reservation ([`Shared::reserve`]).
    pub fn new(safe: u64, origin: Instant) -> Arc<Self> {
        Arc::new(Shared {
            origin,
            safe,
            reserved: AtomicU64::new(0),
            reserved_until: AtomicI64::new(i64::MIN),
            seq: AtomicU64::new(0),
            limit: AtomicU64::new(0),
            deadline_ns: AtomicI64::new(i64::MIN),
            applied: AtomicU64::new(0),
            in_force: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            grant: AtomicU64::new(0),
            demand_used: AtomicU64::new(0),
            demand_refused: AtomicU64::new(0),
            renewed_ns: AtomicI64::new(i64::MIN),
            epoch: AtomicU64::new(0),
            allocator: AtomicU64::new(0),
        })
    }

    /// Nanoseconds from the origin to `t` (saturating).
    pub fn ns(&self, t: Instant) -> i64 {
        i64::try_from(t.saturating_duration_since(self.origin).as_nanos()).unwrap_or(i64::MAX)
    }

    /// The safe share this host asks for.
    pub fn safe(&self) -> u64 {
        self.safe
    }

    /// Lease thread: the table reserves `units` for this host (0: none, or none any
    /// more), with no end ([`Shared::reserve_until`] with `i64::MAX`).
    pub fn reserve(&self, units: u64) {
        self.reserve_until(units, i64::MAX);
    }

    /// Lease thread: the table reserves `units` for this host's process, usable
    /// before `until_ns` (the end of its hold, on this origin's clock). Without a
    /// grant the loop uses at most the smaller of this and the safe share, and
    /// nothing from `until_ns` on.
    pub fn reserve_until(&self, units: u64, until_ns: i64) {
        // A reader that sees these units sees this end (release/acquire); one that
        // sees the old units with this end sees less than it may use, as units only
        // drop to 0, with an end of i64::MIN.
        let until_ns = if units == 0 { i64::MIN } else { until_ns };
        self.reserved_until.store(until_ns, Ordering::Relaxed);
        self.reserved.store(units, Ordering::Release);
    }

    /// Any thread: the safe share the loop may use without a grant (while its hold
    /// lasts).
    pub fn safe_share(&self) -> u64 {
        self.safe.min(self.reserved.load(Ordering::Acquire))
    }

    /// Any thread: the safe share usable at `now_ns`, and the end of its hold.
    fn safe_share_at(&self, now_ns: i64) -> (u64, i64) {
        let units = self.safe_share();
        let until = self.reserved_until.load(Ordering::Relaxed);
        if now_ns < until {
            (units, until)
        } else {
            (0, i64::MIN)
        }
    }

    /// Lease thread: posts `limit`, usable before `deadline_ns`. Returns the post's
    /// sequence number (see [`Shared::applied`]). One writer only.
    pub fn post(&self, limit: u64, deadline_ns: i64) -> u64 {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        self.limit.store(limit, Ordering::Relaxed);
        self.deadline_ns.store(deadline_ns, Ordering::Relaxed);
        self.seq.store(s + 2, Ordering::Release);
        s + 2
    }

    /// Lease thread: the sequence number of the last post the budget uses.
    pub fn applied(&self) -> u64 {
        self.applied.load(Ordering::Acquire)
    }

    /// Lease thread or monitor: the limit in force in the budget.
    pub fn in_force(&self) -> u64 {
        self.in_force.load(Ordering::Relaxed)
    }

    /// Lease thread: the loop's counters (cumulative units admitted, refusals).
    pub fn counters(&self) -> (u64, u64) {
        (
            self.admitted.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
        )
    }

    /// Lease thread: what a monitor shows (see [`View`]); `renewed_ns` is the send
    /// time of the last successful renewal on this origin's clock (`i64::MIN` for
    /// none).
    pub fn show(
        &self,
        grant: u64,
        used: u64,
        refused: u64,
        renewed_ns: i64,
        epoch: u64,
        allocator: bool,
    ) {
        self.grant.store(grant, Ordering::Relaxed);
        self.demand_used.store(used, Ordering::Relaxed);
        self.demand_refused.store(refused, Ordering::Relaxed);
        self.renewed_ns.store(renewed_ns, Ordering::Relaxed);
        self.epoch.store(epoch, Ordering::Relaxed);
        self.allocator
            .store(u64::from(allocator), Ordering::Relaxed);
    }

    /// Any thread: what a monitor shows at `now`. Fields may come from two rounds.
    pub fn view(&self, now: Instant) -> View {
        let renewed = self.renewed_ns.load(Ordering::Relaxed);
        View {
            limit: self.in_force(),
            grant: self.grant.load(Ordering::Relaxed),
            used: self.demand_used.load(Ordering::Relaxed),
            refused: self.demand_refused.load(Ordering::Relaxed),
            lease_age_ns: (renewed != i64::MIN).then(|| self.ns(now).saturating_sub(renewed)),
            epoch: self.epoch.load(Ordering::Relaxed),
            allocator: self.allocator.load(Ordering::Relaxed) != 0,
            reserved: self.reserved.load(Ordering::Relaxed),
        }
    }

    /// The last post, read consistently: (sequence number, limit, deadline), or
    /// `None` while a post is under way (read again next turn).
    pub fn last_post(&self) -> Option<(u64, u64, i64)> {
        let s1 = self.seq.load(Ordering::Acquire);
        if s1 % 2 == 1 {
            return None;
        }
        let limit = self.limit.load(Ordering::Relaxed);
        let deadline = self.deadline_ns.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        let s2 = self.seq.load(Ordering::Relaxed);
        (s1 == s2).then_some((s1, limit, deadline))
    }
}

/// The loop's side of one leased bucket. Call [`Leased::poll`] once per turn.
#[derive(Debug)]
pub struct Leased {
    shared: Arc<Shared>,
    bucket: BucketId,
    seen: u64,
    limit: u64,
    deadline_ns: i64,
    in_force: u64,
    /// The instant (origin clock) the limit in force drops on its own.
    in_force_until: i64,
}

impl Leased {
    /// The loop's side of `bucket` in a budget, sharing `shared` with the lease
    /// thread. The bucket keeps its declared limit until the first
    /// [`Leased::poll`], which closes it if the lease thread posted no reservation
    /// or grant yet: declare it at the safe share, and start sending only once
    /// [`Shared::safe_share`] is above 0.
    pub fn new(shared: Arc<Shared>, bucket: BucketId) -> Self {
        Leased {
            shared,
            bucket,
            seen: 0,
            limit: 0,
            deadline_ns: i64::MIN,
            // Unknown: the first poll applies whatever it finds, zero included.
            in_force: u64::MAX,
            in_force_until: i64::MIN,
        }
    }

    /// Applies the posted limit, or the reserved safe share once its deadline
    /// passed, or nothing (a closed bucket) once the reservation's hold ended or
    /// before anything is reserved, at `now` (the instant the loop read) and
    /// `budget_now_ns` (the budget's clock at that instant). The limit is set until
    /// the instant it would drop on its own ([`Budget::set_limit_until`]), so the
    /// budget refuses past it at any charge. Returns the limit in force. Never
    /// blocks, allocates or calls the system; a limit the budget refuses (not above
    /// the class headroom) closes the bucket and is returned as the error.
    pub fn poll(
        &mut self,
        budget: &mut Budget,
        now: Instant,
        budget_now_ns: i64,
    ) -> Result<u64, ConfigError> {
        if let Some((seq, limit, deadline)) = self.shared.last_post() {
            if seq != self.seen {
                self.seen = seq;
                self.limit = limit;
                self.deadline_ns = deadline;
            }
        }
        let now_ns = self.shared.ns(now);
        let (safe, safe_until) = self.shared.safe_share_at(now_ns);
        let reserved = self.shared.safe_share();
        let (want, until) = if now_ns < self.deadline_ns {
            // The grant and the reservation (part of the posted limit), each until
            // its own end.
            if safe > 0 {
                (self.limit, self.deadline_ns.min(safe_until))
            } else {
                (self.limit.saturating_sub(reserved), self.deadline_ns)
            }
        } else {
            (self.limit.min(safe), safe_until)
        };
        if want != self.in_force || until != self.in_force_until {
            // The end on the budget's clock: the same span from this instant.
            let left = until.saturating_sub(now_ns);
            let end = if until == i64::MAX {
                i64::MAX
            } else {
                budget_now_ns.saturating_add(left)
            };
            if let Err(e) = budget.set_limit_until(self.bucket, want, end, budget_now_ns) {
                // Never the old limit: closed until a limit the budget takes.
                let _ = budget.set_limit(self.bucket, 0, budget_now_ns);
                self.in_force = 0;
                self.in_force_until = i64::MIN;
                self.shared.in_force.store(0, Ordering::Relaxed);
                return Err(e);
            }
            self.in_force = want;
            self.in_force_until = until;
            self.shared.in_force.store(want, Ordering::Relaxed);
        }
        // After set_limit: the lease thread may now acknowledge what was posted.
        self.shared.applied.store(self.seen, Ordering::Release);
        Ok(self.in_force)
    }

    /// Publishes the budget's counters for this bucket (cumulative units admitted and
    /// refusals, from [`Budget::stats`]); the lease thread turns them into demand.
    pub fn report(&self, admitted: u64, refused: u64) {
        self.shared.admitted.store(admitted, Ordering::Relaxed);
        self.shared.refused.store(refused, Ordering::Relaxed);
    }
}
