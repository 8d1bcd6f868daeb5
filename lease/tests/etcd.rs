//! Issue 29 against a real etcd: a three-member cluster on loopback started by the
//! test, hosts in threads (a lease thread and a loop thread each) charging one
//! leased bucket at many times their share. Real time, short TTLs (2 s, window 1 s);
//! every wait polls with a deadline, every check counts what the venue would have
//! counted in any window across all hosts.
// Real threads and the lease thread: not a loom model (tests/loom_handoff.rs is).
#![cfg(not(ergon_loom))]

mod common;

use std::time::{Duration, Instant};

use common::{etcd_or_skip, wait_for, Cluster, Fleet, Node, SAFE, TTL, WINDOW};
use ergon_lease::etcd::{Client, Compare, Op};

#[test]
fn lease_grant_keepalive_revoke_and_the_txn_compare() {
    if !etcd_or_skip() {
        return;
    }
    let cluster = Cluster::start();
    let mut c = Client::new(&cluster.urls(), Duration::from_millis(500)).unwrap();
    let (id, ttl) = c.lease_grant(2).unwrap();
    assert_eq!(ttl, 2);
    assert!(c.keepalive(id).unwrap() > 0);
    c.put(b"/t/k", b"v", id).unwrap();
    let (kvs, _) = c.range_prefix(b"/t/").unwrap();
    assert_eq!((kvs.len(), kvs[0].lease), (1, id));
    c.lease_revoke(id).unwrap();
    assert_eq!(c.keepalive(id).unwrap(), 0, "a revoked lease is gone");
    assert!(
        c.range_prefix(b"/t/").unwrap().0.is_empty(),
        "its keys went with it"
    );

    // The compare the allocator's write depends on: a write computed from a
    // revision that has moved does not apply.
    let put = |v: &[u8]| Op::Put {
        key: b"/t/table".to_vec(),
        value: v.to_vec(),
        lease: 0,
    };
    assert!(c
        .txn(
            &[Compare::ModRevision(b"/t/table".to_vec(), 0)],
            &[put(b"a")]
        )
        .unwrap());
    let rev = c.range_prefix(b"/t/table").unwrap().0[0].mod_revision;
    assert!(c
        .txn(
            &[Compare::ModRevision(b"/t/table".to_vec(), rev)],
            &[put(b"b")]
        )
        .unwrap());
    assert!(
        !c.txn(
            &[Compare::ModRevision(b"/t/table".to_vec(), rev)],
            &[put(b"c")]
        )
        .unwrap(),
        "a second writer from the same revision is refused"
    );
    assert_eq!(c.range_prefix(b"/t/table").unwrap().0[0].value, b"b");
    assert!(c
        .txn(&[Compare::Absent(b"/t/table".to_vec())], &[put(b"d")])
        .is_ok_and(|ok| !ok));
}

/// Three hosts at many times their share: the venue never counts more than the
/// account limit, and together they use at least 85 % of it. Then demand moves,
/// then a host dies.
#[test]
fn three_hosts_share_the_account_demand_moves_and_a_dead_hosts_share_returns() {
    if !etcd_or_skip() {
        return;
    }
    let cluster = Cluster::start();
    let account = 300;
    let mut fleet = Fleet::start(&cluster.urls(), "share", account, 3);
    let share = (account - 3 * SAFE) / 3 + SAFE;
    wait_for(
        "each host near an equal share",
        Duration::from_secs(20),
        || fleet.limits().iter().all(|&l| l + 2 >= share),
    );
    // What --stats shows: the grant, the demand, a fresh lease, one allocator.
    let views: Vec<_> = fleet
        .nodes
        .iter()
        .map(|n| {
            n.lease
                .as_ref()
                .unwrap()
                .shared(0)
                .unwrap()
                .view(Instant::now())
        })
        .collect();
    assert_eq!(views.iter().filter(|v| v.allocator).count(), 1, "{views:?}");
    for v in &views {
        assert!(v.grant > 0 && v.limit >= SAFE + v.grant.min(1), "{v:?}");
        assert!(v.refused > 0, "at many times its share, refused: {v:?}");
        assert!(
            v.lease_age_ns.is_some_and(|a| a < TTL.as_nanos() as i64),
            "{v:?}"
        );
    }
    // Together they use at least 85 % of the account: a last window that full comes
    // within a few windows (a loaded machine starves a loop thread now and then;
    // grants that did not add up to the pool would never get there).
    let mut best = 0;
    let took = wait_for(
        "a window with 85 % of the account used",
        10 * WINDOW,
        || {
            best = best.max(fleet.venue_count().1);
            best * 100 >= account * 85
        },
    );
    eprintln!("{best} of {account} used in one window, {took:?} into the steady state");
    fleet.assert_never_over();

    // Host 2 goes idle: its grant follows its demand down, the others' up.
    fleet.nodes[2]
        .busy
        .store(false, std::sync::atomic::Ordering::Relaxed);
    let took = wait_for(
        "host 2's share goes to the others",
        3 * WINDOW + 4 * TTL,
        || {
            let l = fleet.limits();
            l[2] <= SAFE + 10 && l[0] > share + 30 && l[1] > share + 30
        },
    );
    eprintln!("idle host's share moved in {took:?}: {:?}", fleet.limits());
    fleet.nodes[2]
        .busy
        .store(true, std::sync::atomic::Ordering::Relaxed);
    wait_for("host 2 gets its share back", 3 * WINDOW + 4 * TTL, || {
        fleet.limits()[2] + 2 >= share
    });
    fleet.assert_never_over();

    // Host 0 dies without revoking: its share returns after its lease and one window.
    let before = fleet.limits();
    let killed = Instant::now();
    fleet.nodes[0].crash();
    let returned = wait_for(
        "the dead host's share returns",
        4 * TTL + 4 * WINDOW,
        || {
            let l = fleet.limits();
            l[1] > before[1] + 30 && l[2] > before[2] + 30
        },
    );
    eprintln!(
        "dead host's share returned after {returned:?}: {:?}",
        fleet.limits()
    );
    // Its lease ran from its last renewal (at most one period before the kill).
    assert!(
        killed.elapsed() >= TTL + WINDOW - Duration::from_millis(500),
        "returned after {returned:?}: before its lease and one window"
    );
    fleet.assert_never_over();

    // Host 1 stops cleanly: the safe share at once, its units to host 2 after the
    // revoke and one window.
    let before = fleet.limits();
    let stopped = Instant::now();
    fleet.nodes[1].lease.take().unwrap().stop();
    let at_once = stopped.elapsed();
    assert_eq!(fleet.limits()[1], SAFE, "the safe share before the revoke");
    let moved = wait_for(
        "a stopped host's share returns",
        4 * WINDOW + 2 * TTL,
        || fleet.limits()[2] > before[2] + 60,
    );
    eprintln!(
        "stop took {at_once:?}; its share returned {moved:?} later: {:?}",
        fleet.limits()
    );
    assert!(at_once + moved >= WINDOW, "returned before one window");
    fleet.assert_never_over();
}

/// SIGKILL of the etcd leader, then SIGSTOP of the whole cluster for longer than
/// the TTL: hosts keep sending within their safe shares, never over the account
/// limit, and get their grants back when etcd returns.
#[test]
fn leader_killed_then_cluster_stopped_hosts_fall_back_and_resume() {
    if !etcd_or_skip() {
        return;
    }
    let mut cluster = Cluster::start();
    let account = 300;
    let fleet = Fleet::start(&cluster.urls(), "fail", account, 3);
    let share = (account - 3 * SAFE) / 3 + SAFE;
    let granted = || fleet.limits().iter().all(|&l| l + 2 >= share);
    wait_for("grants", Duration::from_secs(20), granted);

    let leader = cluster.leader().expect("a leader");
    cluster.kill(leader);
    // Real etcd's lease TTL runs on its clock, not ours: waited out.
    std::thread::sleep(TTL);
    wait_for(
        "grants after the leader's death",
        Duration::from_secs(20),
        granted,
    );
    fleet.assert_never_over();

    cluster.signal_all("STOP");
    let stopped = Instant::now();
    let fell = wait_for(
        "every host on its safe share",
        TTL + Duration::from_secs(2),
        || fleet.limits().iter().all(|&l| l == SAFE),
    );
    eprintln!("fell back {fell:?} after SIGSTOP");
    // Still sending, within the safe shares.
    // A venue window of sends on real time (the fleet runs on it): waited out.
    std::thread::sleep(WINDOW + WINDOW / 2);
    let (_, recent) = fleet.venue_count();
    assert!(
        recent > 0 && recent <= 3 * SAFE,
        "{recent} in the last window"
    );
    while stopped.elapsed() < TTL + Duration::from_secs(1) {
        // Real etcd's TTL must pass on its clock: no hand-off, waited out.
        std::thread::sleep(Duration::from_millis(50));
    }
    cluster.signal_all("CONT");
    let back = wait_for("grants after SIGCONT", Duration::from_secs(30), granted);
    eprintln!("grants back {back:?} after SIGCONT: {:?}", fleet.limits());
    fleet.assert_never_over();
}

/// Two allocators that read the same snapshot (the election failed them, or one
/// is slow): the second write is refused by the revision compare and applies only
/// after a fresh read.
#[test]
fn two_allocators_racing_from_one_snapshot_write_once() {
    use ergon_lease::rule::encode_report;
    use ergon_lease::store::{read_bucket, write_demand, write_table};
    use ergon_lease::{Allocator, Config, Demand, Table};

    if !etcd_or_skip() {
        return;
    }
    let cluster = Cluster::start();
    let mut c = Client::new(&cluster.urls(), Duration::from_millis(500)).unwrap();
    let prefix = "/race/acct/orders/";
    for (host, wants) in [("a", 80), ("b", 10)] {
        let (lease, _) = c.lease_grant(10).unwrap();
        let demand = Demand {
            used: wants,
            refused: 0,
        };
        write_demand(
            &mut c,
            prefix,
            host,
            &encode_report(demand, 0, 0, lease),
            lease,
        )
        .unwrap();
    }
    let config = Config {
        limit: 100,
        window_ns: 1_000_000_000,
        floor: 5,
        margin_ns: 0,
        hold_ns: 10_000_000_000,
    };
    let mut one = Allocator::new(config).unwrap();
    let mut two = Allocator::new(config).unwrap();
    let snap = read_bucket(&mut c, prefix).unwrap().snapshot;
    assert_eq!(snap.reports.len(), 2);
    let w1 = one.allocate(&snap, 0).expect("a first table");
    let w2 = two
        .allocate(&snap, 0)
        .expect("the same table, computed again");
    assert!(write_table(&mut c, prefix, &w1).unwrap());
    assert!(
        !write_table(&mut c, prefix, &w2).unwrap(),
        "a write from a stale revision applied"
    );
    let read = read_bucket(&mut c, prefix).unwrap().snapshot;
    assert_eq!(read.table, w1.table);
    assert!(read.table.held() <= 100);
    // Demand moves; the second allocator, from a fresh read, writes.
    let (lease, _) = c.lease_grant(10).unwrap();
    let demand = Demand {
        used: 90,
        refused: 0,
    };
    write_demand(
        &mut c,
        prefix,
        "b",
        &encode_report(demand, 0, 0, lease),
        lease,
    )
    .unwrap();
    let fresh = read_bucket(&mut c, prefix).unwrap().snapshot;
    let w3 = two.allocate(&fresh, 1).expect("a new table");
    assert!(write_table(&mut c, prefix, &w3).unwrap());
    let t: Table = read_bucket(&mut c, prefix).unwrap().snapshot.table;
    assert!(t.held() <= 100, "{t:?}");
}

/// Issue 40: each host keeps its connection to etcd alive. Three hosts for a few
/// seconds: the calls a round makes, and the connections each host opened (one per
/// endpoint it used, not one per call).
#[test]
fn connections_are_kept_alive_calls_per_round_counted() {
    if !etcd_or_skip() {
        return;
    }
    let cluster = Cluster::start();
    let fleet = Fleet::start(&cluster.urls(), "conns", 300, 3);
    // Until every host has done five rounds (each on the lease thread's own clock).
    let rounds = |n: &Node| n.lease.as_ref().map_or(0, |l| l.status().rounds);
    wait_for("five rounds a host", Duration::from_secs(20), || {
        fleet.nodes.iter().all(|n| rounds(n) >= 5)
    });
    for n in &fleet.nodes {
        let s = n.lease.as_ref().unwrap().status();
        let per_round = s.etcd_calls as f64 / s.rounds.max(1) as f64;
        eprintln!(
            "{} rounds, {} calls ({per_round:.1} a round), {} connections",
            s.rounds, s.etcd_calls, s.etcd_connects
        );
        assert!(s.rounds >= 5, "{s:?}");
        assert!(
            s.etcd_connects <= 3,
            "a connection per call, not kept alive: {s:?}"
        );
        // A keepalive and a read a round at least; writes only on change.
        assert!(s.etcd_calls >= 2 * s.rounds, "{s:?}");
    }
    fleet.assert_never_over();
}

/// Issue 40: etcd keeps every revision until compacted and refuses every write past
/// its quota (NOSPACE). Rounds of 20 simulated hosts (each: a read of the bucket, its
/// demand written, the allocator's table when it changes, the compaction check, the
/// calls the lease thread makes) against a 4 MiB quota: twice the revisions the
/// quota holds uncompacted, and no NOSPACE. Uncompacted, these rounds write about
/// 210 bytes a revision (a 2 MiB quota refused the write at revision 10,023 when
/// the compaction came too late: `NOSPACE` at round 9,629). `ERGON_LEASE_ROUNDS`
/// sets the rounds (default 40,000; 100,000 by hand).
#[test]
fn many_rounds_against_a_small_quota_never_run_out_of_space() {
    use ergon_lease::rule::encode_report;
    use ergon_lease::store::{publish_demand, read_bucket, write_table, Compactor, Published};
    use ergon_lease::{Allocator, Config, Demand};

    if !etcd_or_skip() {
        return;
    }
    const QUOTA: i64 = 4 << 20;
    let rounds: i64 = std::env::var("ERGON_LEASE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40_000);
    // On tmpfs when there is one: etcd fsyncs every write.
    let shm = std::path::PathBuf::from("/dev/shm");
    let base = if shm.is_dir() {
        shm
    } else {
        std::env::temp_dir()
    };
    let quota = QUOTA.to_string();
    let cluster = Cluster::start_with(1, base, &["--quota-backend-bytes", &quota]);
    let mut c = Client::new(&cluster.urls(), Duration::from_secs(2)).unwrap();
    let prefix = "/quota/acct/orders/";
    let hosts: Vec<(String, i64)> = (0..20)
        .map(|h| (format!("host-{h}"), c.lease_grant(600).unwrap().0))
        .collect();
    let config = Config {
        limit: 1_000,
        window_ns: 1_000_000_000,
        floor: 5,
        margin_ns: 0,
        hold_ns: 0,
    };
    let mut alloc = Allocator::new(config).unwrap();
    let mut compactor = Compactor::default();
    let (mut compactions, mut revision) = (0, 0);
    let started = Instant::now();
    for r in 0..rounds {
        let (host, lease) = &hosts[(r % 20) as usize];
        let read = read_bucket(&mut c, prefix).expect("a read");
        revision = read.revision;
        let demand = Demand {
            used: (r % 97) as u64,
            refused: 0,
        };
        let report = encode_report(demand, read.snapshot.table.epoch, 10, *lease);
        let w = publish_demand(&mut c, prefix, host, &report, *lease)
            .unwrap_or_else(|e| panic!("round {r}, revision {revision}: {e}"));
        assert_eq!(w, Published::Written);
        if r % 20 == 0 {
            if let Some(w) = alloc.allocate(&read.snapshot, r) {
                write_table(&mut c, prefix, &w)
                    .unwrap_or_else(|e| panic!("round {r}, revision {revision}: {e}"));
            }
            if compactor.after(&mut c, revision).unwrap().is_some() {
                compactions += 1;
            }
        }
    }
    let took = started.elapsed();
    let (calls, connects) = c.counts();
    eprintln!(
        "{rounds} rounds in {took:?}: revision {revision}, {compactions} compactions, \
         {calls} calls on {connects} connections"
    );
    assert!(
        revision >= 2 * QUOTA / 210,
        "the quota would have held these revisions uncompacted: not a test"
    );
    assert!(compactions >= 2);
}
