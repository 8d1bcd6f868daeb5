//! What a budget did over a replay, kept for the picture: per bucket, its use after
//! every event that changed it, the refusals, holds and halts, the throttles and bans
//! the venue answered, and how much of the use each label spent. Filled by the replay
//! after each event, read by [`crate::plot`]; it never changes a decision.

use std::collections::{HashMap, VecDeque};

use ergon_core::{Budget, Kind, Limited, Part, Why};

use crate::trace::Declaration;

/// The history of one budget over a replay, buckets in declaration order.
#[derive(Debug, Default)]
pub struct Timeline {
    /// One track per bucket.
    pub buckets: Vec<Track>,
    /// Every label seen on a charge, in order of first use; index 0 is unlabelled.
    pub labels: Vec<String>,
    /// Time of the first and of the last event, nanoseconds.
    pub span: Option<(i64, i64)>,
    label_index: HashMap<String, usize>,
}

/// One bucket's history.
#[derive(Debug)]
pub struct Track {
    /// The bucket's name.
    pub name: String,
    /// Its kind, as declared.
    pub kind: Kind,
    /// Units Urgent, Normal and Bulk may use (the limit, then the limit less each
    /// class's headroom); zeros for gates.
    pub allowances: [u64; 3],
    /// `(t, used)` after each event that changed it.
    pub used: Vec<(i64, u64)>,
    /// Each refusal this bucket reported.
    pub refusals: Vec<Refusal>,
    /// `[from, until)` of each hold after a throttle.
    pub holds: Vec<(i64, i64)>,
    /// Each halt after a ban, from its start until it was cleared (`None`: never).
    pub halts: Vec<(i64, Option<i64>)>,
    /// When the venue throttled this bucket.
    pub throttles: Vec<i64>,
    /// When the venue banned it.
    pub bans: Vec<i64>,
    /// `(t, units per label)` after each event that changed them: the units admitted
    /// under each label still inside the bucket's window (outstanding, for in-flight
    /// limits; the time to drain a full burst, for token buckets). Indexed like
    /// [`Timeline::labels`]; a shorter vector means zero for the labels after it.
    pub by_label: Vec<(i64, Vec<u64>)>,
    live: VecDeque<Live>,
    sums: Vec<u64>,
}

/// One refusal.
#[derive(Clone, Copy, Debug)]
pub struct Refusal {
    /// When.
    pub t: i64,
    /// Why.
    pub why: Why,
    /// The bucket's use at that time.
    pub used: u64,
}

/// Units admitted under a label and still counted by the bucket.
#[derive(Debug)]
struct Live {
    t: i64,
    id: String,
    cost: u64,
    label: usize,
}

/// What the replay did with one event, as far as the timeline cares.
pub(crate) enum Seen {
    Admitted {
        id: String,
        parts: Vec<Part>,
        label: Option<String>,
    },
    Refused(Limited),
    /// Refunded: its units leave every bucket.
    Ended(String),
    /// Completed: its units leave the in-flight buckets.
    Completed(String),
    Throttled(ergon_core::BucketId),
    Banned(ergon_core::BucketId),
    Other,
}

impl Timeline {
    pub(crate) fn record(&mut self, t: i64, budget: &Budget, declared: &[Declaration], seen: Seen) {
        if self.buckets.is_empty() {
            self.buckets = declared.iter().map(Track::new).collect();
            self.labels.push(String::new());
        }
        self.span = Some((self.span.map_or(t, |(start, _)| start), t));
        let mut refused = None;
        match seen {
            Seen::Admitted { id, parts, label } => {
                let label = self.label(label);
                for part in parts.iter().filter(|p| p.cost > 0) {
                    self.buckets[part.bucket.index()].admit(t, &id, part.cost, label);
                }
            }
            Seen::Refused(limited) => refused = Some(limited),
            Seen::Ended(id) => self.buckets.iter_mut().for_each(|b| b.release(&id)),
            Seen::Completed(id) => self
                .buckets
                .iter_mut()
                .filter(|b| matches!(b.kind, Kind::InFlight { .. }))
                .for_each(|b| b.release(&id)),
            Seen::Throttled(b) => self.buckets[b.index()].throttles.push(t),
            Seen::Banned(b) => self.buckets[b.index()].bans.push(t),
            Seen::Other => {}
        }
        for (id, track) in budget.ids().zip(&mut self.buckets) {
            // The budget's own ids: never foreign.
            let Ok(stats) = budget.stats(id) else {
                continue;
            };
            if let Some(limited) = refused.filter(|l| l.bucket == id) {
                track.refusals.push(Refusal {
                    t,
                    why: limited.why,
                    used: stats.used,
                });
            }
            track.after(t, stats);
        }
    }

    fn label(&mut self, label: Option<String>) -> usize {
        let Some(label) = label else { return 0 };
        if let Some(&i) = self.label_index.get(&label) {
            return i;
        }
        self.labels.push(label.clone());
        self.label_index.insert(label, self.labels.len() - 1);
        self.labels.len() - 1
    }
}

impl Track {
    fn new(d: &Declaration) -> Self {
        let kind = d.spec.kind();
        let limit = match kind {
            Kind::Sliding { limit, .. } | Kind::Fixed { limit, .. } | Kind::InFlight { limit } => {
                limit
            }
            Kind::Token { burst, .. } => burst,
            Kind::Gate => 0,
        };
        let [normal, bulk] = d.headroom;
        Track {
            name: d.name.clone(),
            kind,
            allowances: [
                limit,
                limit.saturating_sub(normal),
                limit.saturating_sub(bulk),
            ],
            used: Vec::new(),
            refusals: Vec::new(),
            holds: Vec::new(),
            halts: Vec::new(),
            throttles: Vec::new(),
            bans: Vec::new(),
            by_label: Vec::new(),
            live: VecDeque::new(),
            sums: Vec::new(),
        }
    }

    fn admit(&mut self, t: i64, id: &str, cost: u32, label: usize) {
        if matches!(self.kind, Kind::Gate) {
            return;
        }
        if self.sums.len() <= label {
            self.sums.resize(label + 1, 0);
        }
        self.sums[label] += u64::from(cost);
        self.live.push_back(Live {
            t,
            id: id.to_owned(),
            cost: u64::from(cost),
            label,
        });
    }

    fn release(&mut self, id: &str) {
        let sums = &mut self.sums;
        self.live.retain(|l| {
            let keep = l.id != id;
            if !keep {
                sums[l.label] -= l.cost;
            }
            keep
        });
    }

    /// Samples the bucket after an event at `t`.
    fn after(&mut self, t: i64, stats: ergon_core::Stats) {
        while let Some(first) = self.live.front() {
            if !left_window(self.kind, first.t, t) {
                break;
            }
            self.sums[first.label] -= first.cost;
            self.live.pop_front();
        }
        if self.used.last().map(|&(_, u)| u) != Some(stats.used) {
            self.used.push((t, stats.used));
        }
        if self.by_label.last().map(|(_, s)| s) != Some(&self.sums) {
            self.by_label.push((t, self.sums.clone()));
        }
        if let Some(until) = stats.held_until_ns {
            match self.holds.last_mut() {
                Some((_, end)) if *end >= t => *end = (*end).max(until),
                _ => self.holds.push((t, until)),
            }
        }
        let open = matches!(self.halts.last(), Some((_, None)));
        if stats.halted && !open {
            self.halts.push((t, None));
        } else if !stats.halted && open {
            if let Some((_, end)) = self.halts.last_mut() {
                *end = Some(t);
            }
        }
    }
}

/// Whether units admitted at `at` no longer count at `now`, by the bucket's kind.
fn left_window(kind: Kind, at: i64, now: i64) -> bool {
    match kind {
        Kind::Sliding { window_ns, .. } => at <= now.saturating_sub(window_ns),
        Kind::Fixed {
            window_ns,
            phase_ns,
            ..
        } => at < now - now.wrapping_sub(phase_ns).rem_euclid(window_ns),
        Kind::Token { interval_ns, burst } => {
            let drain = interval_ns.saturating_mul(i64::try_from(burst).unwrap_or(i64::MAX));
            at <= now.saturating_sub(drain)
        }
        Kind::InFlight { .. } | Kind::Gate => false,
    }
}
