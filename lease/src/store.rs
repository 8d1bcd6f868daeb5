//! The keys of one leased bucket in etcd, read and written through [`Client`].
//!
//! Under `/<prefix>/<account>/<bucket>/`:
//! - `table`: the grant table ([`Table`]) with the safe shares reserved, written by
//!   the allocator (and by [`release_host`]), in one transaction comparing its
//!   `mod_revision`; attached to no lease, so a dead host's held units and its
//!   reservation outlive it.
//! - `demand/<host>`: `used refused acked safe pid` ([`crate::rule::encode_report`]),
//!   attached to the host's lease, so it goes when the lease expires; one process
//!   per name: written only while absent or attached to the writer's own lease
//!   ([`publish_demand`]).
//! - `allocator`: the allocator's host name, attached to its lease; taken with a
//!   transaction `create_revision == 0`.

use crate::etcd::{Client, Compare, EtcdError, Op};
use crate::rule::{self, Snapshot, Table, Write};

/// What one range over a bucket's prefix holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BucketRead {
    /// The table at its revision and every live host's report.
    pub snapshot: Snapshot,
    /// Who holds the allocator key (host, lease), if anyone.
    pub allocator: Option<(String, i64)>,
    /// The store's revision at the read.
    pub revision: i64,
}

/// Reads every key of the bucket under `prefix` (ending in `/`) in one range. A
/// table that does not parse is an error; a demand key that does not parse is
/// skipped (that host gets no grant until it writes a good one).
pub fn read_bucket(client: &mut Client, prefix: &str) -> Result<BucketRead, EtcdError> {
    let (kvs, revision) = client.range_prefix(prefix.as_bytes())?;
    let table_key = format!("{prefix}table");
    let demand_prefix = format!("{prefix}demand/");
    let alloc_key = format!("{prefix}allocator");
    let mut out = BucketRead {
        revision,
        ..BucketRead::default()
    };
    for kv in &kvs {
        let key = String::from_utf8_lossy(&kv.key);
        let value = String::from_utf8_lossy(&kv.value);
        if key == table_key {
            out.snapshot.revision = kv.mod_revision;
            out.snapshot.table =
                Table::decode(&value).map_err(|e| EtcdError::BadAnswer(e.to_string()))?;
        } else if let Some(name) = key.strip_prefix(&demand_prefix) {
            if let Ok(r) = rule::decode_report(name, kv.lease, &value) {
                out.snapshot.reports.push(r);
            }
        } else if key == alloc_key {
            out.allocator = Some((value.into_owned(), kv.lease));
        }
    }
    Ok(out)
}

/// Revisions of history written between two compactions.
pub const COMPACT_EVERY: i64 = 10_000;
/// Revisions of history kept below the current one at a compaction.
pub const COMPACT_KEEP: i64 = 1_000;

/// Keeps etcd's history short: every write adds a revision (about 110 bytes each
/// for these keys), and etcd keeps them all until compacted, then refuses every
/// write past its quota (NOSPACE: 2 GiB by default, a few days of a fleet's
/// rounds). Whoever holds the allocator key of an account's first leased bucket
/// calls [`Compactor::after`] with each read's revision: every
/// [`COMPACT_EVERY`] revisions it compacts all but the last [`COMPACT_KEEP`].
/// Nothing here reads history: the compares are on the keys' current revisions.
#[derive(Clone, Copy, Debug, Default)]
pub struct Compactor {
    done: i64,
}

impl Compactor {
    /// Compacts below `revision - COMPACT_KEEP` if [`COMPACT_EVERY`] revisions were
    /// written since the last compaction; the revision compacted to, if it did.
    pub fn after(&mut self, client: &mut Client, revision: i64) -> Result<Option<i64>, EtcdError> {
        if revision.saturating_sub(self.done) < COMPACT_EVERY {
            return Ok(None);
        }
        let to = revision - COMPACT_KEEP;
        client.compact(to)?;
        self.done = to;
        Ok(Some(to))
    }
}

/// Writes `write.table` in one transaction that applies only if the table key is
/// still at `write.revision`. Whether it applied.
pub fn write_table(client: &mut Client, prefix: &str, write: &Write) -> Result<bool, EtcdError> {
    let key = format!("{prefix}table").into_bytes();
    client.txn(
        &[Compare::ModRevision(key.clone(), write.revision)],
        &[Op::Put {
            key,
            value: write.table.encode().into_bytes(),
            lease: 0,
        }],
    )
}

/// Takes the allocator key for `host` under `lease` if nobody holds it. Whether
/// it was taken.
pub fn take_allocator(
    client: &mut Client,
    prefix: &str,
    host: &str,
    lease: i64,
) -> Result<bool, EtcdError> {
    let key = format!("{prefix}allocator").into_bytes();
    client.txn(
        &[Compare::Absent(key.clone())],
        &[Op::Put {
            key,
            value: host.as_bytes().to_vec(),
            lease,
        }],
    )
}

/// What [`publish_demand`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Published {
    /// The demand key is written, attached to the caller's lease.
    Written,
    /// The key is attached to another live lease: another process of the name.
    Taken {
        /// Its lease.
        lease: i64,
        /// Its pid, as its report says (its lease if unreadable).
        pid: i64,
    },
}

/// Writes the host's demand key, attached to `lease`, only if the key is absent or
/// already attached to `lease` (each in one transaction): a second process under
/// the same name is told, never overwritten.
pub fn publish_demand(
    client: &mut Client,
    prefix: &str,
    host: &str,
    report: &str,
    lease: i64,
) -> Result<Published, EtcdError> {
    let key = format!("{prefix}demand/{host}").into_bytes();
    let put = Op::Put {
        key: key.clone(),
        value: report.as_bytes().to_vec(),
        lease,
    };
    if client.txn(
        &[Compare::Lease(key.clone(), lease)],
        std::slice::from_ref(&put),
    )? {
        return Ok(Published::Written);
    }
    if client.txn(&[Compare::Absent(key.clone())], &[put])? {
        return Ok(Published::Written);
    }
    let (kvs, _) = client.range_prefix(&key)?;
    match kvs.iter().find(|kv| kv.key == key) {
        Some(kv) if kv.lease != lease => {
            let text = String::from_utf8_lossy(&kv.value);
            let pid = rule::decode_report(host, kv.lease, &text).map_or(kv.lease, |r| r.pid);
            Ok(Published::Taken {
                lease: kv.lease,
                pid,
            })
        }
        // Gone or ours between the compares: the next round writes it.
        _ => Err(EtcdError::BadAnswer(format!(
            "the demand key of {host} moved under the write; written next round"
        ))),
    }
}

/// Writes the host's demand key, attached to its lease, whatever holds it (tests
/// and tools; the lease thread uses [`publish_demand`]).
pub fn write_demand(
    client: &mut Client,
    prefix: &str,
    host: &str,
    report: &str,
    lease: i64,
) -> Result<(), EtcdError> {
    client.put(
        format!("{prefix}demand/{host}").as_bytes(),
        report.as_bytes(),
        lease,
    )
}

/// Why [`release_host`] released nothing.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReleaseError {
    /// etcd did not answer, or answered with something unreadable.
    Etcd(EtcdError),
    /// The host still holds a lease: stop it first (a running host uses its safe
    /// share whether or not etcd answers).
    Running,
    /// The table reserves nothing for the host.
    NotReserved,
    /// The table kept changing under the write (an allocator at work); try again.
    Busy,
}

impl std::fmt::Display for ReleaseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReleaseError::Etcd(e) => write!(f, "{e}"),
            ReleaseError::Running => {
                f.write_str("the host holds a lease: stop its gateway first, then release it")
            }
            ReleaseError::NotReserved => f.write_str("no safe share is reserved for the host"),
            ReleaseError::Busy => f.write_str("the grant table kept changing; try again"),
        }
    }
}

impl std::error::Error for ReleaseError {}

/// Releases the safe share reserved for `host` under `prefix` (ending in `/`), a
/// host whose gateway is stopped for good. Its process may instead be cut off from
/// etcd and still sending: it goes on using the reservation until the hold after
/// the last table it read ([`crate::Config::hold_ns`]), so the units stay held
/// until hold + window + margin after the allocator saw the release, then return
/// to the pool. Refused while the host's demand key lives (its lease); the write
/// applies only if the table and the demand key are as read (a host that starts
/// between the read and the write makes it fail, and the next try refuses). The
/// units released.
pub fn release_host(client: &mut Client, prefix: &str, host: &str) -> Result<u64, ReleaseError> {
    let demand_key = format!("{prefix}demand/{host}").into_bytes();
    let table_key = format!("{prefix}table").into_bytes();
    for _ in 0..5 {
        let read = read_bucket(client, prefix).map_err(ReleaseError::Etcd)?;
        let snap = read.snapshot;
        if snap.reports.iter().any(|r| r.host == host) {
            return Err(ReleaseError::Running);
        }
        let units = snap.table.reserve(host);
        let table = snap.table.release(host).ok_or(ReleaseError::NotReserved)?;
        let applied = client
            .txn(
                &[
                    Compare::ModRevision(table_key.clone(), snap.revision),
                    Compare::Absent(demand_key.clone()),
                ],
                &[Op::Put {
                    key: table_key.clone(),
                    value: table.encode().into_bytes(),
                    lease: 0,
                }],
            )
            .map_err(ReleaseError::Etcd)?;
        if applied {
            return Ok(units);
        }
    }
    Err(ReleaseError::Busy)
}

/// Releases the safe shares reserved for `host` in every leased bucket of the
/// account under `account_prefix` (`/<prefix>/<account>/`), as [`release_host`]
/// does for one: (bucket, units released) for each bucket that reserved any.
/// Refused as a whole while the host's lease lives in any bucket.
pub fn release_account(
    client: &mut Client,
    account_prefix: &str,
    host: &str,
) -> Result<Vec<(String, u64)>, ReleaseError> {
    let (kvs, _) = client
        .range_prefix(account_prefix.as_bytes())
        .map_err(ReleaseError::Etcd)?;
    let mut buckets: Vec<String> = kvs
        .iter()
        .filter_map(|kv| {
            let key = String::from_utf8_lossy(&kv.key);
            let rest = key.strip_prefix(account_prefix)?;
            let bucket = rest.strip_suffix("/table")?;
            (!bucket.contains('/')).then(|| bucket.to_owned())
        })
        .collect();
    buckets.sort();
    let demand = |b: &str| format!("{account_prefix}{b}/demand/{host}");
    let running = kvs.iter().any(|kv| {
        let key = String::from_utf8_lossy(&kv.key);
        buckets.iter().any(|b| key == demand(b))
    });
    if running {
        return Err(ReleaseError::Running);
    }
    let mut out = Vec::new();
    for b in buckets {
        match release_host(client, &format!("{account_prefix}{b}/"), host) {
            Ok(units) => out.push((b, units)),
            Err(ReleaseError::NotReserved) => {}
            Err(e) => return Err(e),
        }
    }
    if out.is_empty() {
        return Err(ReleaseError::NotReserved);
    }
    Ok(out)
}

/// Hands the reservation of process `pid` of `host` over at a clean stop
/// ([`Table::hand_over`]): written only if the table is as read and the host's
/// demand key is still attached to `lease` (this process's, alive), in one
/// transaction. Call only once the process's budget refuses every charge of the
/// bucket (closed) and `used` is what it counted in its last window. The units
/// left reserved for the next process of the name, or `None` if there is nothing
/// to hand over (then the next process waits as after a crash).
pub fn hand_over(
    client: &mut Client,
    prefix: &str,
    host: &str,
    lease: i64,
    pid: i64,
    used: u64,
) -> Result<Option<u64>, EtcdError> {
    let demand_key = format!("{prefix}demand/{host}").into_bytes();
    let table_key = format!("{prefix}table").into_bytes();
    for _ in 0..5 {
        let snap = read_bucket(client, prefix)?.snapshot;
        // The lease gone (its demand key with it): nothing proves who spends.
        let ours = snap
            .reports
            .iter()
            .any(|r| r.host == host && r.lease == lease);
        let Some(table) = snap.table.hand_over(host, pid, used).filter(|_| ours) else {
            return Ok(None);
        };
        let applied = client.txn(
            &[
                Compare::ModRevision(table_key.clone(), snap.revision),
                Compare::Lease(demand_key.clone(), lease),
            ],
            &[Op::Put {
                key: table_key.clone(),
                value: table.encode().into_bytes(),
                lease: 0,
            }],
        )?;
        if applied {
            return Ok(Some(table.reserve(host)));
        }
    }
    Err(EtcdError::BadAnswer(format!(
        "{prefix}table kept changing under the hand-over"
    )))
}
