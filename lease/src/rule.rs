//! The allocation rule, sans-IO: what each host may use of an account-wide pool.
//!
//! Nothing here performs I/O, reads a clock or sleeps: `now` is a parameter (i64 ns
//! on the caller's monotonic clock), and what must be written to etcd comes out as a
//! value ([`Write`]) that the etcd layer turns into one transaction.
//!
//! Two halves:
//! - [`Allocator`]: one at a time per account and bucket. Feed it a [`Snapshot`] (the
//!   grant table as read, with its revision, and the live hosts' reports); it answers
//!   with the table to write, guarded by that revision.
//! - [`Host`]: one per gateway. Feed it its lease's renewals and the tables it reads;
//!   [`Host::usable`] is the grant it may use now, [`Host::poll_timeout`] the instant
//!   that changes on its own (the renewal deadline).
//!
//! The account's limit is split in two: each host's **safe share**, reserved for it
//! by name in the table, for one process of that name at a time, and usable with or
//! without etcd for the hold ([`Config::hold_ns`]) after the last table read that
//! showed it; and the **pool**, the rest, divided among the live hosts by demand as
//! grants. A host asks for its safe share in its report; the allocator reserves it
//! only from units nobody holds, and the host uses nothing before it reads its
//! reservation. A reservation is never dropped by the allocator: only
//! [`Table::release`] frees it, hold + window + margin after the allocator saw the
//! release (the host may be cut off rather than stopped).
//!
//! The unit that spends is a **process**, not a host name: a restarted process
//! starts with an empty budget, so its name's reservation passes to it only hold +
//! window + margin after the allocator last saw the previous process report, and a
//! process whose name another live lease holds uses nothing
//! ([`Host::on_name_taken`]).
//!
//! The invariants, which the property test (`tests/allocation.rs`) checks against a
//! reference of what each host could have spent in any window:
//! - Every table written keeps `Σ held + Σ reserved ≤ limit`; a host's grant is at
//!   most its held.
//! - A grant is raised only with units no host holds.
//! - A lowered grant stays held (others cannot get its units) until one window plus
//!   the margin after the allocator saw the host acknowledge it, or saw the host's
//!   lease gone: a request charged before may be written up to the margin later.
//! - A reservation is usable by its process only (its pid), for at most the hold
//!   after the last table read that showed it; released, or left by its process,
//!   it passes on only hold + window + margin after the allocator saw that.
//! - A host uses a grant only until its renewal deadline: the send time of its last
//!   successful renewal plus the TTL etcd answered, minus a margin. etcd cannot expire
//!   the lease before that.
//! - A write applies only if the table is still at the revision it was computed
//!   from ([`Write::applies_at`]), so two racing allocators cannot both act on one
//!   stale table.

use std::collections::BTreeMap;
use std::fmt;

/// The allocation's fixed parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// The account's limit: units per window shared by every host, safe shares
    /// included.
    pub limit: u64,
    /// The bucket's window: units spent count at the venue this long.
    pub window_ns: i64,
    /// Each live host's grant is at least this (or an equal split of the pool when
    /// the floors do not fit).
    pub floor: u64,
    /// Added to every wait before units are freed (a shrink one window after its
    /// acknowledgement, a gone host's grant one window after its lease): at least
    /// the hosts' renewal margin, and at least the longest a request charged
    /// before a shrink may wait before it is written (it counts at the venue one
    /// window from its write, not its charge).
    pub margin_ns: i64,
    /// How long a process may go on using its safe share after the last table it
    /// read that reserved it for that process ([`Host::safe_share`]): a host cut off
    /// from etcd keeps sending this long, then stops. A reservation its process
    /// no longer reports under, or released by an operator, returns only `hold +
    /// window + margin` after the allocator first saw that, since its process may
    /// be cut off rather than stopped. Every host of an account uses the same.
    pub hold_ns: i64,
}

impl Config {
    /// Checks the parameters: a window above zero, a margin and a hold at least 0.
    pub fn validate(&self) -> Result<(), RuleError> {
        if self.window_ns <= 0 {
            return Err(RuleError::ZeroWindow);
        }
        if self.margin_ns < 0 || self.hold_ns < 0 {
            return Err(RuleError::Malformed(format!(
                "a negative margin ({}) or hold ({})",
                self.margin_ns, self.hold_ns
            )));
        }
        Ok(())
    }

    /// How long after the allocator first saw a reservation's process gone (or a
    /// release) its units may go to another process: hold + window + margin.
    fn orphan_wait(&self) -> i64 {
        self.hold_ns
            .saturating_add(self.window_ns)
            .saturating_add(self.margin_ns)
    }

    /// How long after the allocator first saw reservation `pid`'s process gone it
    /// may pass on: the margin for one handed over at a clean stop (a negative
    /// pid, [`Table::hand_over`]), else [`Config::orphan_wait`].
    fn pass_wait(&self, pid: i64) -> i64 {
        if pid < 0 {
            self.margin_ns
        } else {
            self.orphan_wait()
        }
    }
}

/// A configuration or a table the rule cannot use. Every variant says what to fix.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuleError {
    /// The window is zero or negative.
    ZeroWindow,
    /// A stored table or report does not parse; the text says where.
    Malformed(String),
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleError::ZeroWindow => f.write_str("the window must be above zero"),
            RuleError::Malformed(what) => write!(f, "malformed lease record: {what}"),
        }
    }
}

impl std::error::Error for RuleError {}

/// What a host reports of its last window: units it used and units it was refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Demand {
    /// Units charged in the last window.
    pub used: u64,
    /// Units refused in the last window (what it would have used with more).
    pub refused: u64,
}

impl Demand {
    /// What the host wants per window.
    pub fn wants(&self) -> u64 {
        self.used.saturating_add(self.refused)
    }
}

/// One live host as the allocator reads it (its demand key, attached to its lease).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The host's name.
    pub host: String,
    /// The etcd lease the host's keys are attached to.
    pub lease: i64,
    /// Its demand.
    pub demand: Demand,
    /// The epoch of the last table the host applied (0 if none).
    pub acked: u64,
    /// The safe share the host asks to have reserved.
    pub safe: u64,
    /// The process: the id of the first lease it held. A process keeps it across
    /// the new leases it takes after losing one; a restarted process has another.
    pub pid: i64,
}

/// One host's row of the grant table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The host's name.
    pub host: String,
    /// The lease the grant belongs to: a host with another lease must not use it.
    pub lease: i64,
    /// Units per window the host may use.
    pub grant: u64,
    /// Units reserved for the host: at least the grant, more while a lowered grant
    /// may still be in use or still counts at the venue.
    pub held: u64,
    /// The epoch of the table that last lowered the grant: the shrink is done once
    /// the host acknowledged this epoch (or a later one) and one window passed.
    pub since: u64,
}

/// A safe share reserved for a host by name, for one process of that name at a
/// time: it outlives the process's leases.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reserve {
    /// The host's name.
    pub host: String,
    /// Units per window the host may use without a grant, with or without etcd.
    pub units: u64,
    /// The process that may use it ([`Report::pid`]); 0 for none (a table written
    /// before processes were told apart). Another process of the name gets it only
    /// [`Config::hold_ns`] + window + margin after the allocator saw this one gone.
    pub pid: i64,
}

/// The grant table: one key in etcd, written only by the allocator (or by
/// [`Table::release`]), in one transaction, never attached to a lease (a dead
/// host's units must stay held past its lease).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    /// Incremented by every write.
    pub epoch: u64,
    /// The account limit the allocator divided: a host configured with another
    /// limit uses no grant from this table (a misconfigured host could otherwise
    /// over-allocate).
    pub limit: u64,
    /// Rows, sorted by host name.
    pub entries: Vec<Entry>,
    /// Safe shares, sorted by host name, one per host.
    pub reserves: Vec<Reserve>,
}

impl Table {
    /// The row of `host` under `lease`.
    pub fn entry(&self, host: &str, lease: i64) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|e| e.host == host && e.lease == lease)
    }

    /// Units held by every row.
    pub fn held(&self) -> u64 {
        self.entries.iter().map(|e| e.held).sum()
    }

    /// Units reserved as safe shares.
    pub fn reserved(&self) -> u64 {
        self.reserves.iter().map(|r| r.units).sum()
    }

    /// The safe share reserved for `host` (0 for none), whichever its process.
    pub fn reserve(&self, host: &str) -> u64 {
        self.reserves
            .iter()
            .find(|r| r.host == host)
            .map_or(0, |r| r.units)
    }

    /// The safe share reserved for process `pid` of `host` (0 for none, or for
    /// another process of the name).
    pub fn reserve_for(&self, host: &str, pid: i64) -> u64 {
        self.reserves
            .iter()
            .find(|r| r.host == host && r.pid == pid)
            .map_or(0, |r| r.units)
    }

    /// The table after an operator released the safe share of `host`. Its units
    /// stay held under lease 0, which no host holds, and the allocator frees them
    /// only [`Config::hold_ns`] + window + margin after it sees the table: the
    /// host's process may be cut off from etcd rather than stopped, and it uses its
    /// reservation until `hold` after the last table it read. `None` if `host` has
    /// no reservation.
    pub fn release(&self, host: &str) -> Option<Table> {
        let units = self.reserve(host);
        if units == 0 {
            return None;
        }
        let mut t = self.clone();
        t.epoch += 1;
        t.reserves.retain(|r| r.host != host);
        match t
            .entries
            .iter_mut()
            .find(|e| e.host == host && e.lease == 0)
        {
            Some(e) => e.held = e.held.saturating_add(units),
            None => t.entries.push(Entry {
                host: host.to_owned(),
                lease: 0,
                grant: 0,
                held: units,
                since: 0,
            }),
        }
        sort_rows(&mut t.entries);
        Some(t)
    }

    /// The text stored in etcd: a first line `epoch N limit L`, then one line per row
    /// `host lease grant held since`, then one per reservation `safe host units pid`.
    /// Host names have no whitespace ([`valid_host`]).
    pub fn encode(&self) -> String {
        let mut s = format!("epoch {} limit {}\n", self.epoch, self.limit);
        for e in &self.entries {
            s.push_str(&format!(
                "{} {} {} {} {}\n",
                e.host, e.lease, e.grant, e.held, e.since
            ));
        }
        for r in &self.reserves {
            s.push_str(&format!("safe {} {} {}\n", r.host, r.units, r.pid));
        }
        s
    }

    /// Parses [`Table::encode`]'s text. A reservation without a pid (`safe host
    /// units`, as written before processes were told apart) belongs to no process.
    pub fn decode(text: &str) -> Result<Table, RuleError> {
        let bad = |what: &str| RuleError::Malformed(format!("grant table: {what}"));
        let mut lines = text.lines();
        let (epoch, limit) = lines
            .next()
            .and_then(|l| l.strip_prefix("epoch "))
            .and_then(|l| l.split_once(" limit "))
            .and_then(|(e, p)| Some((e.parse().ok()?, p.parse().ok()?)))
            .ok_or_else(|| bad("no `epoch N limit L` first line"))?;
        let mut entries = Vec::new();
        let mut reserves: Vec<Reserve> = Vec::new();
        for line in lines {
            let f: Vec<&str> = line.split(' ').collect();
            let num = |s: &str| {
                s.parse::<u64>()
                    .map_err(|_| bad(&format!("{s:?} in {line:?}")))
            };
            if let ["safe", host, units, ref pid @ ..] = f[..] {
                let pid = match pid {
                    [] => 0,
                    [p] => p
                        .parse()
                        .map_err(|_| bad(&format!("pid {p:?} in {line:?}")))?,
                    _ => return Err(bad(&format!("reservation {line:?}"))),
                };
                let r = Reserve {
                    host: host.to_owned(),
                    units: num(units)?,
                    pid,
                };
                if !valid_host(host) || reserves.iter().any(|o| o.host == host) {
                    return Err(bad(&format!("reservation {line:?}")));
                }
                reserves.push(r);
                continue;
            }
            let [host, lease, grant, held, since] = f[..] else {
                return Err(bad(&format!("line {line:?} has not 5 fields")));
            };
            let e = Entry {
                host: host.to_owned(),
                lease: lease
                    .parse()
                    .map_err(|_| bad(&format!("lease {lease:?}")))?,
                grant: num(grant)?,
                held: num(held)?,
                since: num(since)?,
            };
            if !valid_host(host) || e.grant > e.held {
                return Err(bad(&format!("row {line:?}")));
            }
            entries.push(e);
        }
        reserves.sort_by(|a, b| a.host.cmp(&b.host));
        Ok(Table {
            epoch,
            limit,
            entries,
            reserves,
        })
    }
}

/// Sorts a table's rows as it stores them: by host name, then lease.
pub(crate) fn sort_rows(rows: &mut [Entry]) {
    rows.sort_by(|a, b| (&a.host, a.lease).cmp(&(&b.host, b.lease)));
}

/// Whether `name` can name a host: 1 to 64 bytes of `[A-Za-z0-9._-]`.
pub fn valid_host(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A host's demand key: `used refused acked safe pid`.
pub fn encode_report(demand: Demand, acked: u64, safe: u64, pid: i64) -> String {
    format!(
        "{} {} {} {} {}",
        demand.used, demand.refused, acked, safe, pid
    )
}

/// Parses [`encode_report`]'s text into a [`Report`] for `host` under `lease`. A
/// report without a pid (four fields, an earlier version) names its lease.
pub fn decode_report(host: &str, lease: i64, text: &str) -> Result<Report, RuleError> {
    let bad = || RuleError::Malformed(format!("demand of {host}: {text:?}"));
    let f: Vec<&str> = text.split(' ').collect();
    let (nums, pid) = match f[..] {
        [a, b, c, d] => ([a, b, c, d], lease),
        [a, b, c, d, p] => ([a, b, c, d], p.parse().map_err(|_| bad())?),
        _ => return Err(bad()),
    };
    let n: Vec<u64> = nums
        .iter()
        .map(|n| n.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    Ok(Report {
        host: host.to_owned(),
        lease,
        demand: Demand {
            used: n[0],
            refused: n[1],
        },
        acked: n[2],
        safe: n[3],
        pid,
    })
}

/// What the allocator read: the table at its revision, and every live host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The table's revision (etcd's `mod_revision` of the table key; 0 if absent).
    pub revision: i64,
    /// The table as read.
    pub table: Table,
    /// Every host whose lease is alive, with its demand.
    pub reports: Vec<Report>,
}

/// A table to write, only if the table key is still at `revision`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// The revision the table was computed from: etcd's compare
    /// `mod_revision(table) == revision`.
    pub revision: i64,
    /// The new table.
    pub table: Table,
}

impl Write {
    /// The compare of the etcd transaction: whether this write may apply to a table
    /// key now at `current`. Every store (etcd's txn, the test's model) applies it.
    pub fn applies_at(&self, current: i64) -> bool {
        current == self.revision
    }
}

/// What the allocator saw of one row, on its own clock.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    /// When it first saw the host acknowledge the row's `since` epoch.
    acked_at: Option<(u64, i64)>,
    /// When it first saw the host's lease gone.
    gone_at: Option<i64>,
}

/// The allocator: re-divides the pool by demand. Drive order: read a [`Snapshot`],
/// call [`Allocator::allocate`], write the [`Write`] it returns in one transaction
/// comparing its revision; on a failed compare, read again. Call again by
/// [`Allocator::poll_timeout`] (a held shrink to release) or when demand moves.
///
/// Its memory of when it saw an acknowledgement or a lease go is its own: a new
/// allocator starts seeing those later, which only holds units longer.
#[derive(Debug)]
pub struct Allocator {
    config: Config,
    seen: BTreeMap<(String, i64), Seen>,
    /// Reservations whose process it does not see report: host → (pid, since when).
    orphans: BTreeMap<String, (i64, i64)>,
}

impl Allocator {
    /// An allocator for `config`.
    pub fn new(config: Config) -> Result<Self, RuleError> {
        config.validate()?;
        Ok(Allocator {
            config,
            seen: BTreeMap::new(),
            orphans: BTreeMap::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> Config {
        self.config
    }

    /// The earliest instant a held shrink, a gone host's units or a reservation
    /// can pass on.
    pub fn poll_timeout(&self) -> Option<i64> {
        let wait = self.config.window_ns.saturating_add(self.config.margin_ns);
        let orphan = self.config.orphan_wait();
        let rows = self
            .seen
            .iter()
            .flat_map(|((_, lease), s)| {
                let gone = if *lease == 0 { orphan } else { wait };
                [
                    s.acked_at.map(|(_, t)| t.saturating_add(wait)),
                    s.gone_at.map(|t| t.saturating_add(gone)),
                ]
            })
            .flatten();
        let reserves = self
            .orphans
            .values()
            .map(|&(pid, t)| t.saturating_add(self.config.pass_wait(pid)));
        rows.chain(reserves).min()
    }

    /// The table to write after `snap` at `now`, or `None` if nothing changes.
    pub fn allocate(&mut self, snap: &Snapshot, now: i64) -> Option<Write> {
        // Units spent under a shrunk grant, or by a host whose lease went, count at
        // the venue one window from their write: the margin covers charge to write.
        let wait = self.config.window_ns.saturating_add(self.config.margin_ns);
        let orphan_wait = self.config.orphan_wait();
        let alive = |e: &Entry| {
            snap.reports
                .iter()
                .find(|r| r.host == e.host && r.lease == e.lease)
        };
        let epoch = snap.table.epoch + 1;
        let mut rows: Vec<Entry> = Vec::new();
        let mut kept = BTreeMap::new();
        // Observe and release.
        for e in &snap.table.entries {
            let key = (e.host.clone(), e.lease);
            let mut seen = self.seen.get(&key).copied().unwrap_or_default();
            let mut e = e.clone();
            match alive(&e) {
                None => {
                    let gone = *seen.gone_at.get_or_insert(now);
                    // Lease 0: a released reservation, whose process may be cut
                    // off rather than stopped, and uses it up to its hold.
                    let after = if e.lease == 0 { orphan_wait } else { wait };
                    if now >= gone.saturating_add(after) {
                        continue; // its units count nowhere any more
                    }
                }
                Some(r) => {
                    seen.gone_at = None;
                    if e.held > e.grant {
                        if r.acked >= e.since {
                            let at = match seen.acked_at {
                                Some((since, at)) if since == e.since => at,
                                _ => now,
                            };
                            seen.acked_at = Some((e.since, at));
                            if now >= at.saturating_add(wait) {
                                e.held = e.grant;
                                seen.acked_at = None;
                            }
                        }
                    } else {
                        seen.acked_at = None;
                    }
                }
            }
            kept.insert(key, seen);
            rows.push(e);
        }
        // New hosts.
        for r in &snap.reports {
            if !rows.iter().any(|e| e.host == r.host && e.lease == r.lease) {
                rows.push(Entry {
                    host: r.host.clone(),
                    lease: r.lease,
                    grant: 0,
                    held: 0,
                    since: 0,
                });
                kept.insert((r.host.clone(), r.lease), Seen::default());
            }
        }
        sort_rows(&mut rows);
        self.seen = kept;

        // Safe shares: reserved only from units nobody holds; what cannot be
        // reserved yet is kept out of the pool, so grants shrink to make room.
        let limit = self.config.limit;
        let mut reserves = snap.table.reserves.clone();
        let held: u64 = rows.iter().map(|e| e.held).sum();
        let mut reserved: u64 = reserves.iter().map(|r| r.units).sum();
        let mut waiting = 0u64;
        // A reservation passes to another process of its name only once the one it
        // was for has not reported for hold + window + margin: it may be cut off,
        // not stopped, and go on using it until its hold ends.
        let mut orphans = BTreeMap::new();
        for x in &mut reserves {
            if snap
                .reports
                .iter()
                .any(|r| r.host == x.host && r.pid == x.pid)
            {
                continue;
            }
            let since = match self.orphans.get(&x.host) {
                Some(&(pid, at)) if pid == x.pid => at,
                _ => now,
            };
            // Handed over at a clean stop (a negative pid): never back to the
            // process that handed it, to the next one after the margin.
            let next = snap
                .reports
                .iter()
                .find(|r| r.host == x.host && r.pid != x.pid.saturating_neg());
            match next {
                Some(r) if now >= since.saturating_add(self.config.pass_wait(x.pid)) => {
                    x.pid = r.pid
                }
                _ => {
                    orphans.insert(x.host.clone(), (x.pid, since));
                }
            }
        }
        self.orphans = orphans;
        for r in &snap.reports {
            let have = match reserves.iter().find(|x| x.host == r.host) {
                Some(x) if x.pid != r.pid => continue, // another process's, for now
                Some(x) => x.units,
                None => 0,
            };
            let more = r.safe.saturating_sub(have);
            if more == 0 {
                continue;
            }
            if held.saturating_add(reserved).saturating_add(more) <= limit {
                reserved += more;
                match reserves.iter_mut().find(|x| x.host == r.host) {
                    Some(x) => x.units = r.safe,
                    None => reserves.push(Reserve {
                        host: r.host.clone(),
                        units: r.safe,
                        pid: r.pid,
                    }),
                }
            } else {
                waiting = waiting.saturating_add(more);
            }
        }
        reserves.sort_by(|a, b| a.host.cmp(&b.host));
        let pool = limit.saturating_sub(reserved).saturating_sub(waiting);

        // Targets for the live rows; lower first, then raise from what is free.
        let live: Vec<usize> = (0..rows.len())
            .filter(|&i| alive(&rows[i]).is_some())
            .collect();
        let wants: Vec<u64> = live
            .iter()
            .map(|&i| alive(&rows[i]).map_or(0, |r| r.demand.wants()))
            .collect();
        let targets = share(pool, self.config.floor, &wants);
        let mut need = vec![0u64; rows.len()];
        for (&i, &target) in live.iter().zip(&targets) {
            let e = &mut rows[i];
            if target < e.grant {
                e.grant = target;
                e.since = epoch;
                if let Some(s) = self.seen.get_mut(&(e.host.clone(), e.lease)) {
                    s.acked_at = None;
                }
            } else if target > e.grant {
                // Up to what it holds costs nothing; past that, free units.
                e.grant = target.min(e.held);
                need[i] = target - e.grant;
            }
        }
        let held: u64 = rows.iter().map(|e| e.held).sum();
        let free = pool.saturating_sub(held);
        let total: u64 = need.iter().sum();
        for (e, &n) in rows.iter_mut().zip(&need) {
            let give = if total <= free {
                n
            } else {
                (u128::from(n) * u128::from(free) / u128::from(total)) as u64
            };
            e.grant += give;
            e.held = e.held.max(e.grant);
        }
        if rows == snap.table.entries
            && reserves == snap.table.reserves
            && snap.table.limit == limit
        {
            return None;
        }
        Some(Write {
            revision: snap.revision,
            table: Table {
                epoch,
                limit,
                entries: rows,
                reserves,
            },
        })
    }
}

/// Doorman's proportional share with a floor: if every want fits, each gets its
/// want; otherwise each gets an equal share, and what the hosts below it leave is
/// split among the others in proportion to what they want above it. Every host
/// gets at least `floor` (or the equal share, if the floors do not fit). The
/// targets never sum above `pool`.
pub fn share(pool: u64, floor: u64, wants: &[u64]) -> Vec<u64> {
    let n = wants.len() as u64;
    if n == 0 {
        return Vec::new();
    }
    let equal = pool / n;
    let floor = floor.min(equal);
    let wants: Vec<u64> = wants.iter().map(|&w| w.max(floor)).collect();
    let sum: u128 = wants.iter().map(|&w| u128::from(w)).sum();
    if sum <= u128::from(pool) {
        return wants;
    }
    let left: u64 =
        wants.iter().map(|&w| equal.saturating_sub(w)).sum::<u64>() + (pool - equal * n);
    let extra: u128 = wants
        .iter()
        .map(|&w| u128::from(w.saturating_sub(equal)))
        .sum();
    let mut targets: Vec<u64> = wants
        .iter()
        .map(|&w| {
            if w <= equal {
                w
            } else {
                let over = u128::from(w - equal);
                let more = (over * u128::from(left) / extra) as u64;
                equal + more.min(w - equal)
            }
        })
        .collect();
    // What the rounding down left: one unit each, in order, to hosts wanting more.
    let mut rest = pool.saturating_sub(targets.iter().sum());
    while rest > 0 {
        let before = rest;
        for (t, &w) in targets.iter_mut().zip(&wants) {
            if rest > 0 && *t < w {
                *t += 1;
                rest -= 1;
            }
        }
        if rest == before {
            break;
        }
    }
    targets
}

/// One host's side: which grant it may use, and until when. Drive order: after
/// creating a lease call [`Host::on_lease`]; after each successful keepalive
/// [`Host::on_renewed`] with the instant the keepalive was *sent*; when etcd says
/// the lease is gone, [`Host::on_lease_lost`]; for each table read,
/// [`Host::on_table`] with the instant the read was sent, then apply
/// [`Host::limit`] to the budget and acknowledge the epoch it returns only once the
/// budget uses it. When etcd shows the host's name held by another process's lease,
/// [`Host::on_name_taken`]; once its own demand is written, [`Host::on_published`].
/// At [`Host::poll_timeout`] the limit drops on its own: re-read [`Host::limit`]
/// then.
///
/// The safe share is usable once a table read reserves it for this process
/// ([`Host::safe_share`]), and from then on whether etcd answers or not, for at
/// most the hold after the last read that showed it ([`Host::reserve_until`]):
/// past that, a host cut off from etcd uses nothing, so that an operator's
/// release, or another process of its name, is safe after a bounded wait. Before
/// a read reserves it, the host may use nothing.
#[derive(Clone, Debug)]
pub struct Host {
    name: String,
    limit: u64,
    safe: u64,
    /// The safe share reserved for this process in the last table read.
    reserved: u64,
    /// The reservation may be used before this instant (host clock).
    reserve_until: i64,
    margin_ns: i64,
    hold_ns: i64,
    /// The process: its first lease.
    pid: Option<i64>,
    /// etcd shows the name held by another process's lease.
    taken: bool,
    /// The limit of the last table read, when it was not ours.
    mismatch: Option<u64>,
    lease: Option<i64>,
    /// The grant may be used before this instant (host clock).
    deadline: i64,
    grant: u64,
    epoch: u64,
}

impl Host {
    /// A host named `name`, configured with the account's `limit`, a safe share of
    /// `safe` units per window (reserved for it outside the pool), a renewal
    /// margin of `margin_ns` (clock rate differences, the keepalive's transit, the
    /// loop's turn) and the account's hold ([`Config::hold_ns`]).
    pub fn new(
        name: &str,
        limit: u64,
        safe: u64,
        margin_ns: i64,
        hold_ns: i64,
    ) -> Result<Self, RuleError> {
        if !valid_host(name) {
            return Err(RuleError::Malformed(format!(
                "host name {name:?}: 1 to 64 bytes of A-Z a-z 0-9 . _ -"
            )));
        }
        Ok(Host {
            name: name.to_owned(),
            limit,
            safe,
            reserved: 0,
            reserve_until: i64::MIN,
            margin_ns: margin_ns.max(0),
            hold_ns: hold_ns.max(0),
            pid: None,
            taken: false,
            mismatch: None,
            lease: None,
            deadline: i64::MIN,
            grant: 0,
            epoch: 0,
        })
    }

    /// The host's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lease held, if any.
    pub fn lease(&self) -> Option<i64> {
        self.lease
    }

    /// The process's id in etcd ([`Report::pid`]): its first lease; `None` before.
    pub fn pid(&self) -> Option<i64> {
        self.pid
    }

    /// A new lease `id` was granted with `ttl_ns`, asked at `sent_at`. No grant
    /// belongs to it yet. The first names the process.
    pub fn on_lease(&mut self, id: i64, ttl_ns: i64, sent_at: i64) {
        self.lease = Some(id);
        self.pid.get_or_insert(id);
        self.grant = 0;
        self.epoch = 0;
        self.deadline = self.deadline_after(sent_at, ttl_ns);
    }

    /// A keepalive sent at `sent_at` was answered with `ttl_ns` left.
    pub fn on_renewed(&mut self, ttl_ns: i64, sent_at: i64) {
        if ttl_ns <= 0 {
            self.on_lease_lost();
            return;
        }
        self.deadline = self.deadline.max(self.deadline_after(sent_at, ttl_ns));
    }

    fn deadline_after(&self, sent_at: i64, ttl_ns: i64) -> i64 {
        sent_at
            .saturating_add(ttl_ns)
            .saturating_sub(self.margin_ns)
    }

    /// etcd says the lease is gone: its grant is gone with it.
    pub fn on_lease_lost(&mut self) {
        self.lease = None;
        self.grant = 0;
        self.deadline = i64::MIN;
    }

    /// etcd shows this host's name held by another process's live lease: this
    /// process uses nothing (neither grant nor reservation) until its own demand
    /// is written again ([`Host::on_published`]).
    pub fn on_name_taken(&mut self) {
        self.taken = true;
        self.reserved = 0;
        self.grant = 0;
    }

    /// This process's demand key was written: the name is its own.
    pub fn on_published(&mut self) {
        self.taken = false;
    }

    /// Whether etcd showed the name held by another process, last.
    pub fn name_taken(&self) -> bool {
        self.taken
    }

    /// A table was read, the read sent at `sent_at`. Returns the epoch to
    /// acknowledge (once the budget uses [`Host::limit`]), or `None` for a table
    /// older than one already applied (or while the name is another process's).
    pub fn on_table(&mut self, table: &Table, sent_at: i64) -> Option<u64> {
        let lease = self.lease?;
        let pid = self.pid?;
        if table.epoch < self.epoch || self.taken {
            return None;
        }
        self.epoch = table.epoch;
        self.reserved = table.reserve_for(&self.name, pid);
        if self.reserved > 0 {
            // The table was current at some instant after the send.
            self.reserve_until = sent_at
                .saturating_add(self.hold_ns)
                .saturating_sub(self.margin_ns);
        }
        // A table divided from another limit than ours: no grant from it (its
        // reservation for us is counted in it, and stays usable).
        let used = !table.entries.is_empty() || !table.reserves.is_empty();
        self.mismatch = (table.limit != self.limit && used).then_some(table.limit);
        self.grant = match self.mismatch {
            Some(_) => 0,
            None => table.entry(&self.name, lease).map_or(0, |e| e.grant),
        };
        Some(table.epoch)
    }

    /// The account limit of the last table read, if it was not the one this host
    /// is configured with (every host of an account must be configured alike).
    pub fn limit_mismatch(&self) -> Option<u64> {
        self.mismatch
    }

    /// The safe share this host asks to have reserved.
    pub fn safe(&self) -> u64 {
        self.safe
    }

    /// The safe share reserved for this process in the last table read (as
    /// configured, at most); usable before [`Host::reserve_until`] only.
    pub fn safe_share(&self) -> u64 {
        self.safe.min(self.reserved)
    }

    /// The instant the reservation stops being usable unless a table read shows
    /// it again: the last such read's send time plus the hold, minus the margin.
    pub fn reserve_until(&self) -> i64 {
        if self.safe_share() > 0 {
            self.reserve_until
        } else {
            i64::MIN
        }
    }

    /// The safe share it may use at `now`.
    pub fn usable_safe(&self, now: i64) -> u64 {
        if now < self.reserve_until() {
            self.safe_share()
        } else {
            0
        }
    }

    /// The grant as last read (whether usable or not).
    pub fn grant(&self) -> u64 {
        self.grant
    }

    /// The grant it may use at `now`: 0 from its renewal deadline on.
    pub fn usable(&self, now: i64) -> u64 {
        if self.lease.is_some() && now < self.deadline {
            self.grant
        } else {
            0
        }
    }

    /// The bucket's limit at `now`: the usable safe share plus the usable grant.
    pub fn limit(&self, now: i64) -> u64 {
        self.usable_safe(now).saturating_add(self.usable(now))
    }

    /// The next instant the limit drops on its own (the grant at the renewal
    /// deadline, the safe share at the end of its hold), while either is usable.
    pub fn poll_timeout(&self, now: i64) -> Option<i64> {
        let grant = (self.usable(now) > 0).then_some(self.deadline);
        let safe = (self.usable_safe(now) > 0).then_some(self.reserve_until());
        grant.into_iter().chain(safe).min()
    }

    /// The instant of the renewal deadline (`i64::MIN` without a lease).
    pub fn deadline(&self) -> i64 {
        self.deadline
    }
}
