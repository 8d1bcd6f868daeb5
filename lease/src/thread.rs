//! The lease thread: holds the host's etcd lease, publishes its demand, reads its
//! grants, and, while it holds the allocator key, re-divides the pool.
//!
//! One thread per gateway, never the loop thread: every call here blocks on the
//! network. It hands limits to the loop through [`Shared`] only.
//!
//! The keys it reads and writes are described in [`crate::store`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ergon_core::{BucketId, Budget};

use crate::etcd::{Client, EtcdError};
use crate::handoff::Shared;
use crate::rule::{self, Allocator, Config, Demand, Host, RuleError};
use crate::store;

/// One leased bucket.
#[derive(Clone, Debug)]
pub struct BucketLease {
    /// The bucket's name in the keys (`[A-Za-z0-9._-]`).
    pub name: String,
    /// The account's limit, shared by every host (the same on each).
    pub limit: u64,
    /// This host's safe share, reserved for it in etcd outside the pool; at least 1.
    pub safe: u64,
    /// The least grant a live host gets (when the pool allows).
    pub floor: u64,
    /// The bucket's window.
    pub window: Duration,
}

/// The lease thread's configuration.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// etcd endpoints, `http://host:port` (`https://host:port` with TLS).
    pub endpoints: Vec<String>,
    /// TLS files and an etcd user (none by default: plain HTTP, no auth).
    pub security: crate::secure::Security,
    /// The first path element of every key.
    pub prefix: String,
    /// The venue account.
    pub account: String,
    /// This host's name, unique among the hosts of the account.
    pub host: String,
    /// The lease's TTL, whole seconds (etcd's unit), at least 1.
    pub ttl: Duration,
    /// Subtracted from the renewal deadline and from the reservation's hold, and
    /// added to every wait before units are freed: clock rate differences, the
    /// loop's turn, the delay between a charge and its write.
    pub margin: Duration,
    /// How long this host may go on using its safe share after the last grant
    /// table it read that reserved it ([`crate::Config::hold_ns`]); the same on
    /// every host of the account. A host cut off from etcd this long stops
    /// sending; a released reservation, or one whose process went, returns to
    /// others hold + window + margin after the allocator saw it. At least the TTL.
    pub hold: Duration,
    /// How often to renew, publish and allocate.
    pub period: Duration,
    /// Each request to etcd is given up on one endpoint after this.
    pub timeout: Duration,
    /// The leased buckets.
    pub buckets: Vec<BucketLease>,
}

/// A configuration the lease thread cannot run with.
#[derive(Debug)]
#[non_exhaustive]
pub enum LeaseError {
    /// A field is out of range; the text says which and why.
    Config(String),
    /// An endpoint is malformed.
    Etcd(EtcdError),
    /// A name or a rule parameter is invalid.
    Rule(RuleError),
}

impl std::fmt::Display for LeaseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeaseError::Config(e) => write!(f, "lease configuration: {e}"),
            LeaseError::Etcd(e) => write!(f, "{e}"),
            LeaseError::Rule(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LeaseError {}

/// What a monitor sees of one leased bucket (`--stats`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BucketStatus {
    /// The bucket.
    pub name: String,
    /// The grant read last (usable or not).
    pub grant: u64,
    /// The limit in force in the budget.
    pub limit: u64,
    /// The demand published last.
    pub demand: Demand,
    /// The epoch of the table applied last.
    pub epoch: u64,
    /// Whether this host is the allocator.
    pub allocator: bool,
    /// The safe share the table reserves for this host (0 until it does).
    pub reserved: u64,
    /// While nothing is reserved for this process: what it waits for, and until
    /// about when.
    pub waiting: Option<String>,
}

/// What a monitor sees of the lease thread.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// The lease held (0 for none).
    pub lease: i64,
    /// Time since the last successful renewal was sent, if any.
    pub lease_age: Option<Duration>,
    /// Each bucket.
    pub buckets: Vec<BucketStatus>,
    /// The last error from etcd, if the last round had one.
    pub last_error: Option<String>,
    /// Rounds run.
    pub rounds: u64,
    /// Calls made to etcd, over the thread's life.
    pub etcd_calls: u64,
    /// TCP connections opened to etcd, over the thread's life (kept alive
    /// between calls).
    pub etcd_connects: u64,
    /// The revision etcd's history was last compacted to by this host (0: never).
    pub compacted: i64,
}

/// What a clean stop handed over, per bucket in the configuration's order: the
/// units left reserved for the next process of the name, or `None` where nothing
/// was handed over (that bucket's reservation passes on as after a crash).
pub type HandedOver = Vec<Option<u64>>;

/// The running lease thread. Dropping it stops the thread and revokes the lease.
#[derive(Debug)]
pub struct LeaseThread {
    stop: Arc<AtomicBool>,
    revoke: Arc<AtomicBool>,
    /// Set by [`LeaseThread::hand_over`]: each bucket's units counted in the last
    /// window, its budget closed.
    handover: Arc<Mutex<Option<Vec<u64>>>>,
    status: Arc<Mutex<Status>>,
    shared: Vec<Arc<Shared>>,
    join: Option<JoinHandle<Option<Result<HandedOver, EtcdError>>>>,
}

impl LeaseThread {
    /// Checks `config` and starts the thread. `origin` is the instant the loop's
    /// [`crate::Leased::poll`] measures from too.
    pub fn spawn(config: LeaseConfig, origin: Instant) -> Result<Self, LeaseError> {
        let bad = |s: &str| Err(LeaseError::Config(s.to_owned()));
        let names = [&config.prefix, &config.account, &config.host];
        if names.iter().any(|n| !rule::valid_host(n)) {
            return bad("prefix, account and host: 1 to 64 bytes of A-Z a-z 0-9 . _ -");
        }
        if config.ttl.as_secs() < 1 || config.ttl.subsec_nanos() != 0 {
            return bad("the TTL is whole seconds, at least 1");
        }
        if config.margin >= config.ttl {
            return bad("the margin must be below the TTL");
        }
        if config.period.is_zero() || config.period * 2 > config.ttl.saturating_sub(config.margin) {
            return bad("the period must be above 0 and at most half of TTL minus margin");
        }
        if config.hold < config.ttl {
            return bad("the hold must be at least the TTL");
        }
        if config.buckets.is_empty() {
            return bad("no leased bucket");
        }
        for b in &config.buckets {
            if !rule::valid_host(&b.name) || b.safe == 0 || b.window.is_zero() {
                return bad("each bucket: a valid name, a safe share of at least 1, a window");
            }
            if b.safe >= b.limit {
                return bad("each bucket: a safe share below the account's limit");
            }
        }
        let client = Client::with_security(&config.endpoints, config.timeout, &config.security)
            .map_err(LeaseError::Etcd)?;
        let mut buckets = Vec::new();
        for b in &config.buckets {
            let allocator = Allocator::new(Config {
                limit: b.limit,
                window_ns: dur_ns(b.window),
                floor: b.floor,
                margin_ns: dur_ns(config.margin),
                hold_ns: dur_ns(config.hold),
            })
            .map_err(LeaseError::Rule)?;
            let host = Host::new(
                &config.host,
                b.limit,
                b.safe,
                dur_ns(config.margin),
                dur_ns(config.hold),
            )
            .map_err(LeaseError::Rule)?;
            buckets.push(Lane {
                prefix: format!("/{}/{}/{}/", config.prefix, config.account, b.name),
                shared: Shared::new(b.safe, origin),
                host,
                allocator,
                acks: Vec::new(),
                acked: 0,
                last_counters: None,
                demand: Demand::default(),
                is_allocator: false,
                other: None,
            });
        }
        let shared = buckets.iter().map(|l| l.shared.clone()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let status = Arc::new(Mutex::new(Status::default()));
        let mut worker = Worker {
            config,
            client,
            origin,
            lease: None,
            renewed_at: None,
            lanes: buckets,
            status: status.clone(),
            revision: 0,
            compactor: store::Compactor::default(),
            compacted: 0,
        };
        let revoke = Arc::new(AtomicBool::new(true));
        let handover = Arc::new(Mutex::new(None));
        let (stop2, revoke2, handover2) = (stop.clone(), revoke.clone(), handover.clone());
        let join = std::thread::Builder::new()
            .name("ergon-lease".into())
            .spawn(move || worker.run(&stop2, &revoke2, &handover2))
            .map_err(|e| LeaseError::Config(format!("cannot start the thread: {e}")))?;
        Ok(LeaseThread {
            stop,
            revoke,
            handover,
            status,
            shared,
            join: Some(join),
        })
    }

    /// The shared state of bucket `i` (in the configuration's order), for
    /// [`crate::Leased::new`] on the loop thread.
    pub fn shared(&self, i: usize) -> Option<Arc<Shared>> {
        self.shared.get(i).cloned()
    }

    /// A copy of the thread's status.
    pub fn status(&self) -> Status {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits until etcd reserved this host's safe share in every bucket (a host
    /// uses nothing before), checking every 10 ms, for at most `limit`. The error
    /// says what the lease thread saw last.
    pub fn wait_reserved(&self, limit: Duration) -> Result<(), LeaseError> {
        let start = Instant::now();
        loop {
            if self.shared.iter().all(|s| s.safe_share() > 0) {
                return Ok(());
            }
            if start.elapsed() >= limit {
                let s = self.status();
                let waiting: Vec<String> =
                    s.buckets.into_iter().filter_map(|b| b.waiting).collect();
                let why = match (s.last_error, waiting.is_empty()) {
                    (Some(e), true) => e,
                    (Some(e), false) => format!("{}; etcd: {e}", waiting.join("; ")),
                    (None, false) => waiting.join("; "),
                    (None, true) => "the pool has no free units for it yet, or the name's \
                         reservation still belongs to a previous process of this name (it \
                         passes to this one hold + window + margin after that one's lease \
                         went)"
                        .into(),
                };
                return Err(LeaseError::Config(format!(
                    "no safe share reserved in etcd within {limit:?} ({} rounds): {why}",
                    s.rounds
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// What each bucket whose safe share is not reserved for this process yet waits
    /// for, and until about when (empty once every one is reserved).
    /// etcd's last error, if the last round had one, comes last.
    pub fn waiting(&self) -> Vec<String> {
        let s = self.status();
        let waiting = s.buckets.into_iter().filter_map(|b| b.waiting);
        waiting
            .chain(s.last_error.map(|e| format!("etcd: {e}")))
            .collect()
    }

    /// Stops the thread: the loop falls to the safe share at its next poll, and once
    /// it has (within one period), the lease is revoked so its units return one
    /// window later; if the loop does not poll in time, the lease is left to run out.
    pub fn stop(mut self) {
        self.halt();
    }

    /// Stops the thread without revoking the lease, as if the process died: the
    /// lease runs out on etcd's side and the host's units return one window later.
    pub fn crash(mut self) {
        self.revoke.store(false, Ordering::Relaxed);
        self.halt();
    }

    /// A clean stop that hands this process's reservations over, so that the next
    /// process of its name gets them at once rather than hold + window + margin
    /// later ([`crate::clean_stop`]). Call once this process sends nothing more
    /// (its loop returned, everything in flight answered or given up): it closes
    /// each leased bucket of `budget` (`buckets[i]` is the configuration's bucket
    /// `i`) at `now_ns` so that nothing more can be charged, reads what each
    /// counted in its window, writes the hand-over guarded by this process's lease,
    /// and revokes the lease. A bucket not handed over (etcd unreachable, the lease
    /// gone) passes on as after a crash.
    pub fn hand_over(
        mut self,
        budget: &mut Budget,
        buckets: &[BucketId],
        now_ns: i64,
    ) -> Result<HandedOver, LeaseError> {
        if buckets.len() != self.shared.len() {
            return Err(LeaseError::Config(format!(
                "hand-over: {} buckets given for {} leased",
                buckets.len(),
                self.shared.len()
            )));
        }
        let mut used = Vec::with_capacity(buckets.len());
        for &id in buckets {
            let closed = budget.set_limit(id, 0, now_ns).and_then(|()| {
                budget
                    .stats(id)
                    .map_err(|_| ergon_core::ConfigError::UnknownBucket)
            });
            match closed {
                Ok(s) => used.push(s.used),
                Err(e) => {
                    return Err(LeaseError::Config(format!(
                        "hand-over: a leased bucket cannot be closed ({e}); the \
                         reservation passes on as after a crash"
                    )))
                }
            }
        }
        if let Ok(mut h) = self.handover.lock() {
            *h = Some(used);
        }
        self.stop.store(true, Ordering::Relaxed);
        match self.join.take().map(JoinHandle::join) {
            Some(Ok(Some(Ok(handed)))) => Ok(handed),
            Some(Ok(Some(Err(e)))) => Err(LeaseError::Etcd(e)),
            _ => Err(LeaseError::Config(
                "hand-over: the lease thread ended without it".into(),
            )),
        }
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

impl Drop for LeaseThread {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Whether a demand's count (used, or refused: each is read, the split as much as
/// the sum) moved enough to be written again: by more than an eighth of the
/// larger, or by more than one unit.
fn moved(old: u64, new: u64) -> bool {
    old.abs_diff(new) > (old.max(new) / 8).max(1)
}

/// The error of a process whose name another live process holds in etcd.
fn taken(host: &str, theirs: i64, their_pid: i64, ours: i64, pid: Option<i64>) -> EtcdError {
    EtcdError::BadAnswer(format!(
        "host name {host:?} is held by another running process (pid {their_pid:x}, lease \
         {theirs:x}); this process (pid {:x}, lease {ours:x}) uses nothing under that name: \
         stop one of them, or give each host its own --host",
        pid.unwrap_or(ours)
    ))
}

fn dur_ns(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// One bucket's state on the lease thread.
struct Lane {
    prefix: String,
    shared: Arc<Shared>,
    host: Host,
    allocator: Allocator,
    /// Posts not yet applied by the loop: (post seq, table epoch).
    acks: Vec<(u64, u64)>,
    /// The epoch the loop applied last.
    acked: u64,
    /// The loop's counters a window ago, and when.
    last_counters: Option<(i64, u64, u64)>,
    demand: Demand,
    is_allocator: bool,
    /// The process the table reserves this name's share for, when not this one
    /// (negative: handed over at a clean stop), and when this one first saw it.
    other: Option<(i64, Instant)>,
}

struct Worker {
    config: LeaseConfig,
    client: Client,
    origin: Instant,
    lease: Option<i64>,
    renewed_at: Option<Instant>,
    lanes: Vec<Lane>,
    status: Arc<Mutex<Status>>,
    /// The store's revision at the last read.
    revision: i64,
    compactor: store::Compactor,
    compacted: i64,
}

impl Worker {
    fn run(
        &mut self,
        stop: &AtomicBool,
        revoke: &AtomicBool,
        handover: &Mutex<Option<Vec<u64>>>,
    ) -> Option<Result<HandedOver, EtcdError>> {
        let mut rounds = 0;
        while !stop.load(Ordering::Relaxed) {
            let started = Instant::now();
            let error = self.round().err().map(|e| e.to_string());
            rounds += 1;
            self.publish_status(error, rounds);
            let next = started + self.config.period;
            // Short sleeps: a stop is seen within 50 ms, and acks go out soon
            // after the loop applies a lowered grant.
            while !stop.load(Ordering::Relaxed) && Instant::now() < next {
                std::thread::sleep(Duration::from_millis(10).min(self.config.period));
                self.post_acks_only();
            }
        }
        if let Some(used) = handover.lock().ok().and_then(|mut h| h.take()) {
            return Some(self.hand_over(&used));
        }
        if let Some(id) = self.lease.filter(|_| revoke.load(Ordering::Relaxed)) {
            // A revoked lease frees this host's units one window later, but the
            // loop could go on using its grant until its deadline: first the safe
            // share, and revoke only once the loop uses it; else the lease runs out.
            let posts: Vec<u64> = self
                .lanes
                .iter()
                .map(|l| l.shared.post(l.shared.safe_share(), i64::MIN))
                .collect();
            let until = Instant::now() + self.config.period;
            let applied = loop {
                let all = self
                    .lanes
                    .iter()
                    .zip(&posts)
                    .all(|(l, &seq)| l.shared.applied() >= seq);
                if all || Instant::now() >= until {
                    break all;
                }
                std::thread::sleep(Duration::from_millis(1));
            };
            if applied {
                let _ = self.client.lease_revoke(id);
            }
        }
        None
    }

    /// The budget refuses every leased charge and counted `used[i]` of bucket `i`
    /// in its window: hands each reservation over, then revokes the lease (its
    /// grants return a window plus the margin after the allocator sees it gone).
    fn hand_over(&mut self, used: &[u64]) -> Result<HandedOver, EtcdError> {
        let Some(lease) = self.lease else {
            return Ok(vec![None; self.lanes.len()]);
        };
        let mut out = Vec::new();
        let mut first_error = None;
        for (lane, &used) in self.lanes.iter().zip(used) {
            let Some(pid) = lane.host.pid() else {
                out.push(None);
                continue;
            };
            let host = &self.config.host;
            match store::hand_over(&mut self.client, &lane.prefix, host, lease, pid, used) {
                Ok(left) => out.push(left),
                Err(e) => {
                    out.push(None);
                    first_error.get_or_insert(e);
                }
            }
        }
        let revoked = self.client.lease_revoke(lease);
        match first_error {
            Some(e) => Err(e),
            None => revoked.map(|()| out),
        }
    }

    fn now_ns(&self, t: Instant) -> i64 {
        dur_ns(t.saturating_duration_since(self.origin))
    }

    fn round(&mut self) -> Result<(), EtcdError> {
        self.renew()?;
        let mut first_error = None;
        for i in 0..self.lanes.len() {
            if let Err(e) = self.bucket_round(i) {
                first_error.get_or_insert(e);
            }
        }
        // One compactor per account: the first bucket's allocator.
        if self.lanes[0].is_allocator {
            match self.compactor.after(&mut self.client, self.revision) {
                Ok(Some(to)) => self.compacted = to,
                Ok(None) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn renew(&mut self) -> Result<(), EtcdError> {
        let ttl_s = self.config.ttl.as_secs() as i64;
        let sent = Instant::now();
        let sent_ns = self.now_ns(sent);
        if let Some(id) = self.lease {
            let left = self.client.keepalive(id);
            match left {
                Ok(ttl) if ttl > 0 => {
                    self.renewed_at = Some(sent);
                    for lane in &mut self.lanes {
                        lane.host.on_renewed(ttl * 1_000_000_000, sent_ns);
                        lane.repost();
                    }
                    return Ok(());
                }
                Ok(_) | Err(EtcdError::Server { status: 404, .. }) => {
                    self.lease = None;
                    self.renewed_at = None;
                    for lane in &mut self.lanes {
                        lane.host.on_lease_lost();
                        lane.repost();
                    }
                }
                Err(e) => {
                    // Keep the lease: it may still be alive. The loop falls back at
                    // the deadline on its own.
                    for lane in &mut self.lanes {
                        lane.repost();
                    }
                    return Err(e);
                }
            }
        }
        let sent = Instant::now();
        let sent_ns = self.now_ns(sent);
        let (id, ttl) = self.client.lease_grant(ttl_s)?;
        self.lease = Some(id);
        self.renewed_at = Some(sent);
        for lane in &mut self.lanes {
            lane.host.on_lease(id, ttl * 1_000_000_000, sent_ns);
            lane.is_allocator = false;
            lane.acks.clear();
            lane.repost();
        }
        Ok(())
    }

    fn bucket_round(&mut self, i: usize) -> Result<(), EtcdError> {
        let Some(lease) = self.lease else {
            return Ok(());
        };
        let now = Instant::now();
        let now_ns = self.now_ns(now);
        let host = self.config.host.clone();
        let window_ns = dur_ns(self.config.buckets[i].window);
        let lane = &mut self.lanes[i];
        let read = store::read_bucket(&mut self.client, &lane.prefix)?;
        self.revision = self.revision.max(read.revision);
        let mut snap = read.snapshot;
        let mine = lane.host.pid();
        let other = snap
            .table
            .reserves
            .iter()
            .find(|r| r.host == host && Some(r.pid) != mine)
            .map(|r| r.pid);
        lane.other = match (other, lane.other) {
            (Some(p), Some((q, at))) if p == q => Some((q, at)),
            (Some(p), _) => Some((p, now)),
            (None, _) => None,
        };
        // Another live process under this name: use nothing, say who.
        if let Some(r) = snap
            .reports
            .iter()
            .find(|r| r.host == host && r.lease != lease)
        {
            lane.host.on_name_taken();
            lane.repost();
            return Err(taken(&host, r.lease, r.pid, lease, lane.host.pid()));
        }
        // Apply the table; acknowledge once the loop uses it.
        if let Some(epoch) = lane.host.on_table(&snap.table, now_ns) {
            let seq = lane.repost();
            // One entry per new epoch: a loop that stops polling leaves a short list.
            if lane.acks.last().map_or(lane.acked, |&(_, e)| e) < epoch {
                lane.acks.push((seq, epoch));
            }
        }
        lane.collect_acks();
        // Demand: the counters' change over at least half a window (demand that
        // moves shows within about half a window), or five periods for a long
        // window (a day's limit must not wait half a day for its first demand),
        // scaled to one window.
        let (admitted, refused) = lane.shared.counters();
        let measure_ns = (window_ns / 2).min(dur_ns(self.config.period).saturating_mul(5));
        match lane.last_counters {
            Some((at, a0, r0)) => {
                let span = (now_ns - at).max(1);
                if span >= measure_ns {
                    let scale = |d: u64| (u128::from(d) * window_ns as u128 / span as u128) as u64;
                    lane.demand = Demand {
                        used: scale(admitted.saturating_sub(a0)),
                        refused: scale(refused.saturating_sub(r0)),
                    };
                    lane.last_counters = Some((now_ns, admitted, refused));
                }
            }
            None => lane.last_counters = Some((now_ns, admitted, refused)),
        }
        let pid = lane.host.pid().unwrap_or(lease);
        // Demand is soft state: written when it moved by more than a step, or when
        // what the allocator must know exactly (the acknowledged epoch, the safe
        // share, the pid) changed, or when the key is not there under this lease.
        // A fleet's writes then grow with its changes, not with its hosts.
        let due = snap
            .reports
            .iter()
            .find(|r| r.host == host && r.lease == lease)
            .map_or(true, |r| {
                r.acked != lane.acked
                    || r.safe != lane.host.safe()
                    || r.pid != pid
                    || moved(r.demand.used, lane.demand.used)
                    || moved(r.demand.refused, lane.demand.refused)
            });
        let report = rule::encode_report(lane.demand, lane.acked, lane.host.safe(), pid);
        let published = if due {
            store::publish_demand(&mut self.client, &lane.prefix, &host, &report, lease)?
        } else {
            store::Published::Written
        };
        match published {
            store::Published::Written => lane.host.on_published(),
            store::Published::Taken {
                lease: theirs,
                pid: their_pid,
            } => {
                lane.host.on_name_taken();
                lane.repost();
                return Err(taken(&host, theirs, their_pid, lease, Some(pid)));
            }
        }
        // The allocator key: ours, someone else's, or free.
        lane.is_allocator = match read.allocator {
            Some((holder, l)) => holder == host && l == lease,
            None => store::take_allocator(&mut self.client, &lane.prefix, &host, lease)?,
        };
        if lane.is_allocator {
            // The demand just written is part of the snapshot.
            if let Some(r) = snap.reports.iter_mut().find(|r| r.host == host) {
                r.demand = lane.demand;
                r.acked = lane.acked;
                r.lease = lease;
                r.safe = lane.host.safe();
                r.pid = pid;
            } else {
                snap.reports.push(rule::Report {
                    host: host.clone(),
                    lease,
                    demand: lane.demand,
                    acked: lane.acked,
                    safe: lane.host.safe(),
                    pid,
                });
            }
            if let Some(w) = lane.allocator.allocate(&snap, now_ns) {
                store::write_table(&mut self.client, &lane.prefix, &w)?;
            }
        }
        if let Some(theirs) = lane.host.limit_mismatch() {
            return Err(EtcdError::BadAnswer(format!(
                "{}: the grant table divides an account limit of {theirs}, this host is \
                 configured with {}: no grant is used until every host is configured alike",
                lane.prefix, self.config.buckets[i].limit
            )));
        }
        Ok(())
    }

    fn post_acks_only(&mut self) {
        let Some(lease) = self.lease else { return };
        for i in 0..self.lanes.len() {
            let lane = &mut self.lanes[i];
            let before = lane.acked;
            lane.collect_acks();
            if lane.acked != before && !lane.host.name_taken() {
                let pid = lane.host.pid().unwrap_or(lease);
                let report = rule::encode_report(lane.demand, lane.acked, lane.host.safe(), pid);
                // Only under this process's own key: a name taken shows next round.
                let _ = store::publish_demand(
                    &mut self.client,
                    &lane.prefix,
                    &self.config.host,
                    &report,
                    lease,
                );
            }
        }
    }

    fn publish_status(&self, error: Option<String>, rounds: u64) {
        let renewed_ns = self.renewed_at.map_or(i64::MIN, |t| self.now_ns(t));
        for l in &self.lanes {
            l.shared.show(
                l.host.grant(),
                l.demand.used,
                l.demand.refused,
                renewed_ns,
                l.acked,
                l.is_allocator,
            );
        }
        let status = Status {
            lease: self.lease.unwrap_or(0),
            lease_age: self.renewed_at.map(|t| t.elapsed()),
            buckets: self
                .config
                .buckets
                .iter()
                .zip(&self.lanes)
                .map(|(b, l)| BucketStatus {
                    name: b.name.clone(),
                    grant: l.host.grant(),
                    limit: l.shared.in_force(),
                    demand: l.demand,
                    epoch: l.acked,
                    allocator: l.is_allocator,
                    reserved: l.host.safe_share(),
                    waiting: (l.host.safe_share() == 0).then(|| self.waiting(b, l)),
                })
                .collect(),
            last_error: error,
            rounds,
            etcd_calls: self.client.counts().0,
            etcd_connects: self.client.counts().1,
            compacted: self.compacted,
        };
        if let Ok(mut s) = self.status.lock() {
            *s = status;
        }
    }
}

impl Worker {
    /// What `lane` (of `bucket`) waits for before its safe share is reserved for
    /// this process, and until about when.
    fn waiting(&self, bucket: &BucketLease, lane: &Lane) -> String {
        let host = &self.config.host;
        let (margin, hold, window) = (self.config.margin, self.config.hold, bucket.window);
        let name = &bucket.name;
        let Some((pid, seen)) = lane.other else {
            return format!(
                "{name}: no free units for its safe share yet (the others' grants \
                 shrink first, and their units age one window, {window:?})"
            );
        };
        // The allocator sees what this process saw within about a period.
        let (what, wait) = if pid < 0 {
            (
                format!(
                    "was handed over at a clean stop by the previous process of this name \
                     (pid {:x}); what it counted in its last window returns a window and \
                     the margin after the allocator saw it",
                    pid.saturating_neg()
                ),
                window + margin,
            )
        } else {
            (
                format!(
                    "still belongs to a previous process of this name (pid {pid:x}), which \
                     may still be spending it (crashed, or cut off from etcd); it passes to \
                     this one hold + window + margin after the allocator saw that one gone"
                ),
                hold + window + margin,
            )
        };
        let at = seen + wait + self.config.period;
        let left = at.saturating_duration_since(Instant::now());
        format!(
            "{name}: the reservation of {host} {what} ({wait:?}): at about {}, in {:.0?}",
            utc(std::time::SystemTime::now() + left),
            left
        )
    }
}

/// `HH:MM:SS UTC` of `t`, and how many days after today's date.
fn utc(t: std::time::SystemTime) -> String {
    let secs = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    };
    let s = secs(t);
    let days = (s / 86_400).saturating_sub(secs(std::time::SystemTime::now()) / 86_400);
    let clock = format!("{:02}:{:02}:{:02} UTC", s / 3600 % 24, s / 60 % 60, s % 60);
    match days {
        0 => clock,
        1 => format!("{clock} tomorrow"),
        d => format!("{clock} in {d} days"),
    }
}

impl Lane {
    /// Posts the host's reservation, limit and deadline to the loop; the post's
    /// sequence number.
    fn repost(&mut self) -> u64 {
        self.shared
            .reserve_until(self.host.safe_share(), self.host.reserve_until());
        let limit = self.host.safe_share().saturating_add(self.host.grant());
        let deadline = if self.host.lease().is_some() {
            self.host.deadline()
        } else {
            i64::MIN
        };
        self.shared.post(limit, deadline)
    }

    /// The epochs the loop now applies.
    fn collect_acks(&mut self) {
        let applied = self.shared.applied();
        while let Some(&(seq, epoch)) = self.acks.first() {
            if applied < seq {
                break;
            }
            self.acked = self.acked.max(epoch);
            self.acks.remove(0);
        }
    }
}
