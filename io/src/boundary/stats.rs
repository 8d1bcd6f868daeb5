//! The stats snapshot the loop publishes through the seqlock: every bucket's
//! [`Stats`] and the client's counters, flattened to 64-bit words.
//!
//! The loop calls [`StatsPublisher::publish`] from its own thread, at a rate it
//! chooses (not on every turn: a reader needs a quiet moment to copy); a monitoring
//! thread calls [`StatsReader::read`] and gets one publication, never a mix.
//!
//! What this must never do: touch the live budget from another thread, allocate
//! after [`stats_channel`], or make the loop wait.

use ergon_core::{Budget, Refusals, Stats, MAX_BUCKETS};

use super::seqlock::{seqlock, SeqReader, SeqWriter};

/// The client's counters, as the loop counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientCounters {
    /// Requests taken from the submit queue.
    pub requests: u64,
    /// Requests that failed with `Sent::No` (not one byte written; refunded).
    pub sent_no: u64,
    /// Requests that failed with `Sent::Maybe` (may have run; reconcile).
    pub sent_maybe: u64,
    /// Requests refused because no connection was free.
    pub busy: u64,
    /// Requests that ran past their deadline.
    pub timeouts: u64,
}

/// One consistent publication.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The loop's clock when it published.
    pub now_ns: i64,
    /// Publications so far, this one included (0: nothing published yet).
    pub version: u64,
    /// The client's counters.
    pub client: ClientCounters,
    buckets: [Stats; MAX_BUCKETS],
    bucket_count: usize,
}

impl Default for Snapshot {
    fn default() -> Self {
        Self {
            now_ns: 0,
            version: 0,
            client: ClientCounters::default(),
            buckets: [Stats::default(); MAX_BUCKETS],
            bucket_count: 0,
        }
    }
}

impl Snapshot {
    /// Every bucket's stats, indexed like `BucketId`s.
    pub fn buckets(&self) -> &[Stats] {
        &self.buckets[..self.bucket_count]
    }
}

const HEAD_WORDS: usize = 7;
const BUCKET_WORDS: usize = 17;
/// Words in one publication.
pub const SNAPSHOT_WORDS: usize = HEAD_WORDS + MAX_BUCKETS * BUCKET_WORDS;

const F_HELD: u64 = 1;
const F_HALTED: u64 = 2;
const F_BAN: u64 = 4;
const F_STAMPED: u64 = 8;

fn encode_bucket(s: &Stats, w: &mut [u64]) {
    let mut flags = 0;
    if s.held_until_ns.is_some() {
        flags |= F_HELD;
    }
    if s.halted {
        flags |= F_HALTED;
    }
    if s.ban_until_ns.is_some() {
        flags |= F_BAN;
    }
    if s.observed_at.is_some() {
        flags |= F_STAMPED;
    }
    let words: [u64; BUCKET_WORDS] = [
        s.used,
        s.limit,
        s.admitted,
        s.charged_after,
        s.held_until_ns.unwrap_or(0) as u64,
        s.ban_until_ns.unwrap_or(0) as u64,
        flags,
        u64::from(s.bans) | (u64::from(s.throttles) << 32),
        s.refusals.full,
        s.refusals.held,
        s.refusals.halted,
        s.refusals.too_big,
        s.refunds,
        s.drift as u64,
        s.observes,
        s.observed,
        s.observed_at.unwrap_or(0) as u64,
    ];
    w.copy_from_slice(&words);
}

fn decode_bucket(w: &[u64]) -> Stats {
    let flags = w[6];
    Stats {
        used: w[0],
        limit: w[1],
        admitted: w[2],
        charged_after: w[3],
        held_until_ns: (flags & F_HELD != 0).then_some(w[4] as i64),
        halted: flags & F_HALTED != 0,
        ban_until_ns: (flags & F_BAN != 0).then_some(w[5] as i64),
        bans: w[7] as u32,
        throttles: (w[7] >> 32) as u32,
        refusals: Refusals {
            full: w[8],
            held: w[9],
            halted: w[10],
            too_big: w[11],
        },
        refunds: w[12],
        drift: w[13] as i64,
        observes: w[14],
        observed: w[15],
        observed_at: (flags & F_STAMPED != 0).then_some(w[16] as i64),
    }
}

/// Builds the loop's publisher and a reader for monitoring threads.
pub fn stats_channel() -> (StatsPublisher, StatsReader) {
    let (w, r) = seqlock::<SNAPSHOT_WORDS>();
    (
        StatsPublisher {
            writer: w,
            words: Box::new([0; SNAPSHOT_WORDS]),
        },
        StatsReader { reader: r },
    )
}

/// The loop's side (not `Clone`).
#[derive(Debug)]
pub struct StatsPublisher {
    writer: SeqWriter<SNAPSHOT_WORDS>,
    words: Box<[u64; SNAPSHOT_WORDS]>,
}

impl StatsPublisher {
    /// Publishes every bucket of `budget` and `client`, stamped `now_ns`.
    pub fn publish(&mut self, budget: &Budget, client: &ClientCounters, now_ns: i64) {
        let w = &mut *self.words;
        let mut count = 0;
        // Ids from `ids()` are the budget's own: `stats` answers every one.
        let own = budget.ids().filter_map(|id| budget.stats(id).ok());
        for stats in own.take(MAX_BUCKETS) {
            let at = HEAD_WORDS + count * BUCKET_WORDS;
            encode_bucket(&stats, &mut w[at..at + BUCKET_WORDS]);
            count += 1;
        }
        w[..HEAD_WORDS].copy_from_slice(&[
            now_ns as u64,
            count as u64,
            client.requests,
            client.sent_no,
            client.sent_maybe,
            client.busy,
            client.timeouts,
        ]);
        self.writer.publish(w);
    }
}

/// A monitoring thread's side; clone one per thread.
#[derive(Clone, Debug)]
pub struct StatsReader {
    reader: SeqReader<SNAPSHOT_WORDS>,
}

impl StatsReader {
    /// The latest publication, consistent as a whole. Copies into `scratch` (a
    /// caller's buffer, so reading allocates nothing) and decodes into `out`.
    pub fn read_into(&self, scratch: &mut [u64; SNAPSHOT_WORDS], out: &mut Snapshot) {
        let version = self.reader.read(scratch);
        let count = (scratch[1] as usize).min(MAX_BUCKETS);
        out.now_ns = scratch[0] as i64;
        out.version = version;
        out.client = ClientCounters {
            requests: scratch[2],
            sent_no: scratch[3],
            sent_maybe: scratch[4],
            busy: scratch[5],
            timeouts: scratch[6],
        };
        out.bucket_count = count;
        for (i, b) in out.buckets[..count].iter_mut().enumerate() {
            let at = HEAD_WORDS + i * BUCKET_WORDS;
            *b = decode_bucket(&scratch[at..at + BUCKET_WORDS]);
        }
    }

    /// The latest publication (allocates its scratch buffer; see `read_into`).
    pub fn read(&self) -> Snapshot {
        let mut scratch = Box::new([0; SNAPSHOT_WORDS]);
        let mut out = Snapshot::default();
        self.read_into(&mut scratch, &mut out);
        out
    }
}
