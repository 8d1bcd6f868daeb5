//! Counters by label: whose requests spent the budget.
//!
//! A caller registers up to [`MAX_LABELS`] names (`trade:order`, `mon:book`,
//! `mon:account` ...) with [`Gateway::label`](super::Gateway::label) and labels each
//! prepared request ([`Prepared::set_label`](ergon_venues::endpoint::Prepared::set_label)).
//! The label rides on the request into the ledger, so the submit signature, the
//! ledger and the strategy threads behind the boundary need nothing more, and the
//! label of a re-send or a reconcile query is the request's own. Per label the
//! gateway counts requests, the cost charged (in total and per bucket), refusals by
//! reason and answers by verdict in one fixed table ([`Labels`]).
//!
//! The loop publishes the table through a seqlock ([`LabelPublisher`], at most
//! every [`PUBLISH_EVERY_NS`]); a monitoring thread reads it ([`LabelReader`]) and
//! turns two snapshots into text ([`LabelMonitor`]): one breakdown line per label
//! that had traffic in between, and a saturation line for each bucket that refused
//! in between, naming the labels that spent it. Two labels reading the same data
//! (an `exchangeInfo` stampede from two subsystems) show up there side by side.
//!
//! What this must never do: allocate, lock or format on the loop thread after
//! construction (the table and the publication buffer are sized up front).

use arrayvec::{ArrayString, ArrayVec};
use ergon_core::{Part, Verdict, Why, MAX_BUCKETS, MAX_PARTS};
use ergon_venues::endpoint::Label;

use ergon_io::boundary::seqlock::{seqlock, SeqReader, SeqWriter};

/// Labels a gateway can register.
pub const MAX_LABELS: usize = 16;
/// Longest label name, bytes.
pub const MAX_LABEL_NAME: usize = 32;
/// The loop publishes the table at most this often.
pub const PUBLISH_EVERY_NS: i64 = 100_000_000;

/// Rows of the table: one per label, and the last for unlabeled requests.
const ROWS: usize = MAX_LABELS + 1;

/// Keyed part lists whose charges are counted per list (see [`Labels::submitted`]).
const MAX_LISTS: usize = 8;

/// Why a label could not be registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LabelError {
    /// The name is empty, longer than [`MAX_LABEL_NAME`], or not printable ASCII
    /// without spaces.
    BadName,
    /// [`MAX_LABELS`] labels are registered already.
    Full,
}

impl core::fmt::Display for LabelError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LabelError::BadName => write!(
                f,
                "a label is 1 to {MAX_LABEL_NAME} bytes of printable ASCII without spaces"
            ),
            LabelError::Full => write!(f, "at most {MAX_LABELS} labels"),
        }
    }
}

impl std::error::Error for LabelError {}

impl LabelError {
    /// Always [`Culprit::Caller`](ergon_io::Culprit::Caller): a name or a number
    /// of labels over documented bounds.
    pub fn culprit(&self) -> ergon_io::Culprit {
        match self {
            LabelError::BadName | LabelError::Full => ergon_io::Culprit::Caller,
        }
    }
}

/// One label's counters, since the gateway started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LabelCounts {
    /// Submits (refused ones included).
    pub requests: u64,
    /// Cost charged, summed over every bucket a charge named (first sends,
    /// re-sends and reconcile queries).
    pub weight: u64,
    /// Submits the budget refused: the bucket was full.
    pub refused_full: u64,
    /// ... the scope was held after a throttle.
    pub refused_held: u64,
    /// ... the scope was halted after a ban.
    pub refused_halted: u64,
    /// ... the request was larger than a limit.
    pub refused_too_big: u64,
    /// Answers by verdict: done.
    pub done: u64,
    /// ... rejected.
    pub rejected: u64,
    /// ... throttled.
    pub throttled: u64,
    /// ... banned.
    pub banned: u64,
    /// ... not run.
    pub not_run: u64,
    /// ... unknown (transport failures that may have run included).
    pub unknown: u64,
    /// ... refused for its timestamp.
    pub clock_skew: u64,
}

const COUNT_WORDS: usize = 13;

impl LabelCounts {
    /// Every local refusal.
    pub fn refused(&self) -> u64 {
        self.refused_full + self.refused_held + self.refused_halted + self.refused_too_big
    }

    /// Every answer.
    pub fn answers(&self) -> u64 {
        self.done
            + self.rejected
            + self.throttled
            + self.banned
            + self.not_run
            + self.unknown
            + self.clock_skew
    }

    fn words(&self) -> [u64; COUNT_WORDS] {
        [
            self.requests,
            self.weight,
            self.refused_full,
            self.refused_held,
            self.refused_halted,
            self.refused_too_big,
            self.done,
            self.rejected,
            self.throttled,
            self.banned,
            self.not_run,
            self.unknown,
            self.clock_skew,
        ]
    }

    fn from_words(w: &[u64]) -> Self {
        let g = |i: usize| w.get(i).copied().unwrap_or(0);
        LabelCounts {
            requests: g(0),
            weight: g(1),
            refused_full: g(2),
            refused_held: g(3),
            refused_halted: g(4),
            refused_too_big: g(5),
            done: g(6),
            rejected: g(7),
            throttled: g(8),
            banned: g(9),
            not_run: g(10),
            unknown: g(11),
            clock_skew: g(12),
        }
    }

    /// `self - earlier`, counter by counter (saturating: a reset reads as 0).
    pub fn since(&self, earlier: &LabelCounts) -> LabelCounts {
        let (a, b) = (self.words(), earlier.words());
        let mut d = [0u64; COUNT_WORDS];
        for i in 0..COUNT_WORDS {
            d[i] = a[i].saturating_sub(b[i]);
        }
        LabelCounts::from_words(&d)
    }
}

/// The fixed table: names, counters, cost per bucket, refusals per bucket.
#[derive(Clone, Debug)]
pub struct Labels {
    names: ArrayVec<ArrayString<MAX_LABEL_NAME>, MAX_LABELS>,
    counts: [LabelCounts; ROWS],
    /// Cost per bucket charged part by part.
    spent: [[u64; MAX_BUCKETS]; ROWS],
    refused_on: [u64; MAX_BUCKETS],
    /// Part lists named by a key ([`Prepared::parts_key`]; 0: a free place),
    /// with their parts and weight: a submit charging one counts it once in
    /// `by_list`, and its cost per bucket is added to `spent`'s where the table
    /// is read ([`Labels::spent`]).
    ///
    /// [`Prepared::parts_key`]: ergon_venues::endpoint::Prepared::parts_key
    list_keys: [u64; MAX_LISTS],
    list_parts: [ArrayVec<Part, MAX_PARTS>; MAX_LISTS],
    list_weights: [u64; MAX_LISTS],
    by_list: [[u64; MAX_LISTS]; ROWS],
}

impl Default for Labels {
    fn default() -> Self {
        Labels {
            names: ArrayVec::new(),
            counts: [LabelCounts::default(); ROWS],
            spent: [[0; MAX_BUCKETS]; ROWS],
            refused_on: [0; MAX_BUCKETS],
            list_keys: [0; MAX_LISTS],
            list_parts: std::array::from_fn(|_| ArrayVec::new()),
            list_weights: [0; MAX_LISTS],
            by_list: [[0; MAX_LISTS]; ROWS],
        }
    }
}

fn row(label: Label, registered: usize) -> usize {
    match label.index() {
        Some(i) if usize::from(i) < registered => usize::from(i),
        _ => MAX_LABELS,
    }
}

impl Labels {
    /// The label named `name`: the one registered under it, else a new one.
    pub fn register(&mut self, name: &str) -> Result<Label, LabelError> {
        let ok = !name.is_empty() && name.bytes().all(|c| c.is_ascii_graphic());
        let name = ArrayString::from(name)
            .ok()
            .filter(|_| ok)
            .ok_or(LabelError::BadName)?;
        if let Some(i) = self.names.iter().position(|n| *n == name) {
            return Ok(Label::new(i as u8));
        }
        let i = self.names.len();
        self.names.try_push(name).map_err(|_| LabelError::Full)?;
        Ok(Label::new(i as u8))
    }

    /// The registered names, by index.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.names.iter().map(|n| n.as_str())
    }

    /// `label`'s counters (an unregistered label's are the unlabeled row's).
    pub fn counts(&self, label: Label) -> &LabelCounts {
        &self.counts[row(label, self.names.len())]
    }

    /// A submit under `label` charging `parts`: admitted (`refused` None) or
    /// refused for `why` on `bucket`. `key` names the list as
    /// [`Prepared::parts_key`] does (0: no key): an admitted list with a key is
    /// counted once, not part by part (what it spent per bucket is the same).
    ///
    /// [`Prepared::parts_key`]: ergon_venues::endpoint::Prepared::parts_key
    pub fn submitted(
        &mut self,
        label: Label,
        parts: &[Part],
        key: u64,
        refused: Option<(Why, usize)>,
    ) {
        let Some((why, bucket)) = refused else {
            self.admitted(label, parts, key);
            return;
        };
        let c = &mut self.counts[row(label, self.names.len())];
        c.requests += 1;
        match why {
            Why::Held => c.refused_held += 1,
            Why::Halted => c.refused_halted += 1,
            Why::Closed => c.refused_full += 1,
            Why::TooBig => c.refused_too_big += 1,
            // Full, and a charge naming a foreign bucket (never the gateway's).
            _ => c.refused_full += 1,
        }
        if why == Why::Full {
            if let Some(n) = self.refused_on.get_mut(bucket) {
                *n += 1;
            }
        }
    }

    /// [`Labels::submitted`] of a submit the budget admitted.
    #[inline]
    pub fn admitted(&mut self, label: Label, parts: &[Part], key: u64) {
        let r = row(label, self.names.len());
        self.counts[r].requests += 1;
        match self.list(key, parts) {
            Some(i) => {
                self.counts[r].weight += self.list_weights[i];
                self.by_list[r][i] += 1;
            }
            None => self.charge_parts(r, parts),
        }
    }

    /// A charge under `label` that passed (a first send, a re-send, a query).
    pub fn charged(&mut self, label: Label, parts: &[Part]) {
        self.charge_parts(row(label, self.names.len()), parts);
    }

    /// `parts` charged under row `r`, part by part.
    fn charge_parts(&mut self, r: usize, parts: &[Part]) {
        for p in parts {
            let cost = u64::from(p.cost);
            self.counts[r].weight += cost;
            if let Some(s) = self.spent[r].get_mut(p.bucket.index()) {
                *s += cost;
            }
        }
    }

    /// The index of the list `key` names (kept now if it is new and there is
    /// room); None for key 0, or when every place is taken.
    #[inline]
    fn list(&mut self, key: u64, parts: &[Part]) -> Option<usize> {
        if key == 0 {
            return None;
        }
        match self.list_keys.iter().position(|&k| k == key) {
            Some(i) => Some(i),
            None => self.keep_list(key, parts),
        }
    }

    /// Keeps the list `key` names in a free place, if there is one.
    #[cold]
    fn keep_list(&mut self, key: u64, parts: &[Part]) -> Option<usize> {
        let i = self.list_keys.iter().position(|&k| k == 0)?;
        self.list_parts[i] = ArrayVec::try_from(parts).ok()?;
        self.list_weights[i] = parts.iter().map(|p| u64::from(p.cost)).sum();
        self.list_keys[i] = key;
        Some(i)
    }

    /// The cost row `r` charged per bucket: part by part, and each kept list
    /// times the submits that charged it.
    fn spent(&self, r: usize) -> [u64; MAX_BUCKETS] {
        let mut spent = self.spent[r];
        for (parts, &n) in self.list_parts.iter().zip(&self.by_list[r]) {
            for p in parts {
                if let Some(s) = spent.get_mut(p.bucket.index()) {
                    *s += n * u64::from(p.cost);
                }
            }
        }
        spent
    }

    /// An answer (or a transport failure) under `label`, as its verdict.
    pub fn answered(&mut self, label: Label, verdict: &Verdict) {
        let c = &mut self.counts[row(label, self.names.len())];
        match verdict {
            Verdict::Done => c.done += 1,
            Verdict::Rejected => c.rejected += 1,
            Verdict::Throttled { .. } => c.throttled += 1,
            Verdict::Banned { .. } => c.banned += 1,
            Verdict::NotRun => c.not_run += 1,
            Verdict::ClockSkew => c.clock_skew += 1,
            _ => c.unknown += 1,
        }
    }
}

// The publication: a head, then per row its name (4 words), counts and cost per
// bucket, then the Full refusals per bucket.
const HEAD_WORDS: usize = 2;
const NAME_WORDS: usize = MAX_LABEL_NAME / 8;
const ROW_WORDS: usize = NAME_WORDS + COUNT_WORDS + MAX_BUCKETS;
/// Words in one publication.
pub const LABEL_WORDS: usize = HEAD_WORDS + ROWS * ROW_WORDS + MAX_BUCKETS;

/// One consistent publication of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelSnapshot {
    /// The loop's clock when it published (0: nothing published yet).
    pub now_ns: i64,
    /// Registered labels, then the unlabeled row (named `-`): name, counters,
    /// cost charged per bucket index.
    pub rows: ArrayVec<(ArrayString<MAX_LABEL_NAME>, LabelCounts, [u64; MAX_BUCKETS]), ROWS>,
    /// Submits refused because each bucket was full, by bucket index.
    pub refused_on: [u64; MAX_BUCKETS],
}

impl Default for LabelSnapshot {
    fn default() -> Self {
        LabelSnapshot {
            now_ns: 0,
            rows: ArrayVec::new(),
            refused_on: [0; MAX_BUCKETS],
        }
    }
}

/// Builds the loop's publisher and a reader for monitoring threads.
pub fn label_channel() -> (LabelPublisher, LabelReader) {
    let (w, r) = seqlock::<LABEL_WORDS>();
    (
        LabelPublisher {
            writer: w,
            words: Box::new([0; LABEL_WORDS]),
            last_ns: i64::MIN,
        },
        LabelReader { reader: r },
    )
}

/// The loop's side (not `Clone`).
#[derive(Debug)]
pub struct LabelPublisher {
    writer: SeqWriter<LABEL_WORDS>,
    words: Box<[u64; LABEL_WORDS]>,
    last_ns: i64,
}

impl LabelPublisher {
    /// Publishes `labels` stamped `now_ns`, unless it did less than
    /// [`PUBLISH_EVERY_NS`] ago.
    pub fn publish(&mut self, labels: &Labels, now_ns: i64) {
        if now_ns.saturating_sub(self.last_ns) >= PUBLISH_EVERY_NS {
            self.publish_now(labels, now_ns);
        }
    }

    /// Publishes `labels` stamped `now_ns` now, whatever the period: the last
    /// publication of a run, or one in the same turn as the budget's counters.
    pub fn publish_now(&mut self, labels: &Labels, now_ns: i64) {
        self.last_ns = now_ns;
        let w = &mut *self.words;
        let n = labels.names.len();
        w[0] = now_ns as u64;
        w[1] = n as u64;
        for r in 0..ROWS {
            let at = HEAD_WORDS + r * ROW_WORDS;
            let mut name = [0u8; MAX_LABEL_NAME];
            let text = labels.names.get(r).map_or("-", |s| s.as_str());
            name[..text.len()].copy_from_slice(text.as_bytes());
            for (k, chunk) in name.chunks_exact(8).enumerate() {
                let mut b = [0u8; 8];
                b.copy_from_slice(chunk);
                w[at + k] = u64::from_le_bytes(b);
            }
            let c = HEAD_WORDS + r * ROW_WORDS + NAME_WORDS;
            w[c..c + COUNT_WORDS].copy_from_slice(&labels.counts[r].words());
            w[c + COUNT_WORDS..c + COUNT_WORDS + MAX_BUCKETS].copy_from_slice(&labels.spent(r));
        }
        let at = HEAD_WORDS + ROWS * ROW_WORDS;
        w[at..].copy_from_slice(&labels.refused_on);
        self.writer.publish(w);
    }
}

/// A monitoring thread's side; clone one per thread.
#[derive(Clone, Debug)]
pub struct LabelReader {
    reader: SeqReader<LABEL_WORDS>,
}

impl LabelReader {
    /// The latest publication, consistent as a whole.
    pub fn read(&self) -> LabelSnapshot {
        let mut w = Box::new([0u64; LABEL_WORDS]);
        self.reader.read(&mut w);
        let mut out = LabelSnapshot {
            now_ns: w[0] as i64,
            ..LabelSnapshot::default()
        };
        let n = (w[1] as usize).min(MAX_LABELS);
        for r in (0..n).chain([MAX_LABELS]) {
            let at = HEAD_WORDS + r * ROW_WORDS;
            let mut name = [0u8; MAX_LABEL_NAME];
            for k in 0..NAME_WORDS {
                name[k * 8..k * 8 + 8].copy_from_slice(&w[at + k].to_le_bytes());
            }
            let len = name.iter().position(|&b| b == 0).unwrap_or(MAX_LABEL_NAME);
            let text = core::str::from_utf8(&name[..len]).unwrap_or("?");
            let c = at + NAME_WORDS;
            let mut spent = [0u64; MAX_BUCKETS];
            spent.copy_from_slice(&w[c + COUNT_WORDS..c + COUNT_WORDS + MAX_BUCKETS]);
            out.rows.push((
                ArrayString::from(text).unwrap_or_default(),
                LabelCounts::from_words(&w[c..c + COUNT_WORDS]),
                spent,
            ));
        }
        let at = HEAD_WORDS + ROWS * ROW_WORDS;
        out.refused_on.copy_from_slice(&w[at..]);
        out
    }
}

/// Turns successive snapshots into text lines, for a monitoring thread.
#[derive(Clone, Debug)]
pub struct LabelMonitor {
    buckets: Vec<String>,
    last: LabelSnapshot,
}

impl LabelMonitor {
    /// A monitor that names buckets by index from `buckets` (the budget's names).
    pub fn new(buckets: Vec<String>) -> Self {
        LabelMonitor {
            buckets,
            last: LabelSnapshot::default(),
        }
    }

    /// The lines for what happened between the last snapshot given and `now`:
    /// a breakdown line per label with requests or answers in between, and a
    /// saturation line per bucket that refused in between (the labels that spent
    /// it, largest first). Nothing when there was no traffic.
    pub fn lines(&mut self, now: &LabelSnapshot) -> Vec<String> {
        let mut out = Vec::new();
        let secs = (now.now_ns - self.last.now_ns) as f64 / 1e9;
        let before = |name: &str| {
            self.last
                .rows
                .iter()
                .find(|r| r.0.as_str() == name)
                .map(|r| (r.1, r.2))
                .unwrap_or((LabelCounts::default(), [0; MAX_BUCKETS]))
        };
        let mut spent_now: Vec<(String, [u64; MAX_BUCKETS])> = Vec::new();
        for (name, counts, spent) in &now.rows {
            let (c0, s0) = before(name.as_str());
            let d = counts.since(&c0);
            let mut ds = [0u64; MAX_BUCKETS];
            for i in 0..MAX_BUCKETS {
                ds[i] = spent[i].saturating_sub(s0[i]);
            }
            spent_now.push((name.to_string(), ds));
            if d.requests == 0 && d.answers() == 0 {
                continue;
            }
            out.push(format!(
                "label {name} ({secs:.1}s): requests={} weight={} refused={} (full={} held={} halted={} too_big={}) answers: done={} rejected={} throttled={} banned={} not_run={} unknown={} clock_skew={}",
                d.requests, d.weight, d.refused(), d.refused_full, d.refused_held,
                d.refused_halted, d.refused_too_big, d.done, d.rejected, d.throttled,
                d.banned, d.not_run, d.unknown, d.clock_skew
            ));
        }
        for b in 0..MAX_BUCKETS {
            let refused = now.refused_on[b].saturating_sub(self.last.refused_on[b]);
            if refused == 0 {
                continue;
            }
            let mut by: Vec<(&str, u64)> = spent_now
                .iter()
                .map(|(n, s)| (n.as_str(), s[b]))
                .filter(|&(_, s)| s > 0)
                .collect();
            by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            let total: u64 = by.iter().map(|x| x.1).sum();
            let spent: Vec<String> = by
                .iter()
                .map(|(n, s)| format!("{n} {s} ({:.0}%)", *s as f64 * 100.0 / total as f64))
                .collect();
            let name = self.buckets.get(b).map_or("?", |s| s.as_str());
            out.push(format!(
                "saturated {name} ({secs:.1}s): refused={refused}; spent by {}",
                if spent.is_empty() {
                    "-".to_string()
                } else {
                    spent.join(", ")
                }
            ));
        }
        self.last = now.clone();
        out
    }
}

/// A monitoring thread started by [`spawn_monitor`]: it prints the lines of a
/// [`LabelMonitor`] to stderr every period while there is traffic, and keeps them.
#[derive(Debug)]
pub struct MonitorThread {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: std::thread::JoinHandle<Vec<String>>,
}

impl MonitorThread {
    /// Stops the thread after one last report (what happened since the previous
    /// one) and returns every line it printed.
    pub fn finish(self) -> Vec<String> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.handle.join().unwrap_or_default()
    }
}

/// Starts a thread that reads `reader` every `every` and prints what
/// [`LabelMonitor::lines`] says, naming buckets as `budget` does. The loop keeps
/// running at its own pace: the thread only reads the published snapshot.
pub fn spawn_monitor(
    reader: LabelReader,
    budget: &ergon_core::Budget,
    every: std::time::Duration,
) -> std::io::Result<MonitorThread> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let names = budget
        .ids()
        .map(|id| budget.name(id).unwrap_or("?").to_string())
        .collect();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let stopped = std::sync::Arc::clone(&stop);
    let handle = std::thread::Builder::new()
        .name("ergon-labels".into())
        .spawn(move || {
            let mut mon = LabelMonitor::new(names);
            let mut all = Vec::new();
            let step = every.min(std::time::Duration::from_millis(50));
            loop {
                let t0 = std::time::Instant::now();
                while t0.elapsed() < every && !stopped.load(Ordering::SeqCst) {
                    std::thread::sleep(step);
                }
                let last = stopped.load(Ordering::SeqCst);
                for line in mon.lines(&reader.read()) {
                    eprintln!("{line}");
                    all.push(line);
                }
                if last {
                    return all;
                }
            }
        })?;
    Ok(MonitorThread { stop, handle })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ergon_core::{Budget, Spec};

    proptest::proptest! {
        /// Submits of keyed lists (more keys than are kept, and key 0) count
        /// what submits of the same lists part by part count: every label's
        /// counters and what each row spent per bucket, as published.
        #[test]
        fn a_keyed_list_counts_what_its_parts_count(
            submits in proptest::collection::vec((0u8..3, 0u64..12, 0u8..4), 1..200),
        ) {
            let mut b = Budget::builder();
            let ids: Vec<_> = (0..3)
                .map(|i| b.add(&format!("b{i}"), Spec::fixed(100, 1_000)).unwrap())
                .collect();
            let lists = [
                vec![Part::new(ids[0], 1), Part::new(ids[1], 1)],
                vec![Part::new(ids[0], 5)],
                vec![Part::new(ids[2], 2), Part::new(ids[0], 3), Part::new(ids[1], 1)],
            ];
            let (mut keyed, mut plain) = (Labels::default(), Labels::default());
            for l in [&mut keyed, &mut plain] {
                l.register("a").unwrap();
                l.register("b").unwrap();
            }
            for (label, key, refused) in submits {
                // A key names one list; label 2 is unregistered.
                let parts = &lists[(key % 3) as usize];
                let label = Label::new(label);
                let refused = (refused == 3).then_some((Why::Full, 1));
                keyed.submitted(label, parts, key, refused);
                plain.submitted(label, parts, 0, refused);
            }
            for r in 0..ROWS {
                proptest::prop_assert_eq!(keyed.counts[r], plain.counts[r]);
                proptest::prop_assert_eq!(keyed.spent(r), plain.spent(r));
            }
            proptest::prop_assert_eq!(keyed.refused_on, plain.refused_on);
        }
    }

    #[test]
    fn registration_is_by_name_and_bounded() {
        let mut l = Labels::default();
        let a = l.register("trade:order").unwrap();
        assert_eq!(
            l.register("trade:order"),
            Ok(a),
            "the same name, the same label"
        );
        assert_eq!(l.register(""), Err(LabelError::BadName));
        assert_eq!(l.register("a b"), Err(LabelError::BadName));
        assert_eq!(l.register(&"x".repeat(33)), Err(LabelError::BadName));
        for i in 1..MAX_LABELS {
            l.register(&format!("l{i}")).unwrap();
        }
        assert_eq!(l.register("one-more"), Err(LabelError::Full));
        assert_eq!(l.names().count(), MAX_LABELS);
    }

    #[test]
    fn counts_go_to_their_label_and_the_monitor_names_who_spent_a_full_bucket() {
        let mut b = Budget::builder();
        let w = b
            .add("weight", Spec::sliding(10, 1_000_000_000, 10))
            .unwrap();
        let o = b
            .add("orders", Spec::sliding(10, 1_000_000_000, 10))
            .unwrap();
        let mut l = Labels::default();
        let order = l.register("trade:order").unwrap();
        let book = l.register("mon:book").unwrap();
        let (mut publisher, reader) = label_channel();
        let mut mon = LabelMonitor::new(vec!["weight".into(), "orders".into()]);
        publisher.publish(&l, 1);
        assert!(mon.lines(&reader.read()).is_empty(), "no traffic, no line");

        let place = [Part::new(w, 1), Part::new(o, 1)];
        let read = [Part::new(w, 5)];
        for _ in 0..3 {
            l.submitted(order, &place, 0, None);
            l.answered(order, &Verdict::Done);
        }
        l.submitted(book, &read, 0, None);
        l.answered(book, &Verdict::Unknown);
        l.submitted(book, &read, 0, Some((Why::Full, w.index())));
        l.submitted(Label::NONE, &read, 0, Some((Why::Held, w.index())));
        l.submitted(Label::new(9), &read, 0, None);
        assert_eq!(l.counts(order).weight, 6);
        assert_eq!(
            (l.counts(book).requests, l.counts(book).refused_full),
            (2, 1)
        );
        assert_eq!(
            l.counts(Label::NONE).requests,
            2,
            "unregistered counts unlabeled"
        );

        // Inside PUBLISH_EVERY_NS nothing new is published.
        publisher.publish(&l, 2);
        assert_eq!(reader.read().now_ns, 1);
        publisher.publish(&l, 1 + 2_000_000_000);
        let lines = mon.lines(&reader.read());
        assert_eq!(lines.len(), 4, "{lines:#?}");
        assert!(
            lines[0].starts_with("label trade:order (2.0s): requests=3 weight=6 refused=0"),
            "{}",
            lines[0]
        );
        assert!(lines[0].contains("done=3 rejected=0"), "{}", lines[0]);
        assert!(
            lines[1].starts_with("label mon:book (2.0s): requests=2 weight=5 refused=1 (full=1 "),
            "{}",
            lines[1]
        );
        assert!(lines[1].contains("unknown=1"), "{}", lines[1]);
        assert!(
            lines[2].starts_with("label - (2.0s): requests=2 weight=5 refused=1 (full=0 held=1"),
            "{}",
            lines[2]
        );
        assert_eq!(
            lines[3],
            "saturated weight (2.0s): refused=1; spent by - 5 (38%), mon:book 5 (38%), trade:order 3 (23%)"
        );
        // Nothing new: no line.
        publisher.publish(&l, 1 + 4_000_000_000);
        assert!(mon.lines(&reader.read()).is_empty());
    }
}
