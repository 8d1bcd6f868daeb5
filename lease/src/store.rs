//! The keys of one leased bucket in etcd, read and written through [`Client`].
//!
//! Under `/<prefix>/<account>/<bucket>/`:
//! - `table`: the grant table ([`Table`]), written by the allocator only, in one
//!   transaction comparing its `mod_revision` (the prefix's version key); attached to
//!   no lease, so a dead host's held units outlive it.
//! - `demand/<host>`: `used refused acked` ([`crate::rule::encode_report`]), attached
//!   to the host's lease, so it goes when the lease expires.
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
}

/// Reads every key of the bucket under `prefix` (ending in `/`) in one range. A
/// table that does not parse is an error; a demand key that does not parse is
/// skipped (that host gets no grant until it writes a good one).
pub fn read_bucket(client: &mut Client, prefix: &str) -> Result<BucketRead, EtcdError> {
    let (kvs, _) = client.range_prefix(prefix.as_bytes())?;
    let table_key = format!("{prefix}table");
    let demand_prefix = format!("{prefix}demand/");
    let alloc_key = format!("{prefix}allocator");
    let mut out = BucketRead::default();
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

/// Writes the host's demand key, attached to its lease.
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
