//! Issue 40, item 4, against a real etcd: a process stopped between its turn and
//! its submits (SIGSTOP, a VM pause), made deterministic: the test is host 2's
//! loop, so the stop falls exactly after the turn that read its grant and before
//! the charges that would use it. Its lease thread is stopped with it (as SIGSTOP
//! stops every thread) and the test resumes it only once etcd shows its lease gone
//! and the two other hosts' grants took its units: no sleep for luck, every wait
//! is on a condition. The submits then admit nothing (the grant's deadline holds
//! at the charge, not only at the next turn), and the venue's count across the
//! three hosts never goes over the account.
#![cfg(not(ergon_loom))]

mod common;

use std::time::{Duration, Instant};

use common::{etcd_or_skip, wait_for, Cluster, Fleet, HOLD, SAFE, TTL, WINDOW};
use ergon_core::{Budget, Class, Part, Spec};
use ergon_lease::etcd::Client;
use ergon_lease::{BucketLease, LeaseConfig, LeaseThread, Leased};

const ACCOUNT: u64 = 100;

/// The most of `charges` (instants, ns) in any one window.
fn most_in_a_window(mut all: Vec<i64>) -> usize {
    all.sort_unstable();
    let w = WINDOW.as_nanos() as i64;
    let (mut most, mut lo) = (0, 0);
    for hi in 0..all.len() {
        while all[hi] - all[lo] > w {
            lo += 1;
        }
        most = most.max(hi - lo + 1);
    }
    most
}

#[test]
fn a_process_stopped_between_its_turn_and_its_submits_sends_nothing_on_a_gone_grant() {
    if !etcd_or_skip() {
        return;
    }
    let cluster = Cluster::start();
    let fleet = Fleet::start(&cluster.urls(), "stop", ACCOUNT, 2);
    let origin = fleet.origin;
    let lease = LeaseThread::spawn(
        LeaseConfig {
            endpoints: cluster.urls(),
            security: Default::default(),
            prefix: "stop".into(),
            account: "acct".into(),
            host: "host-2".into(),
            ttl: TTL,
            margin: Duration::from_millis(500),
            hold: HOLD,
            period: Duration::from_millis(200),
            timeout: Duration::from_millis(300),
            buckets: vec![BucketLease {
                name: "orders".into(),
                limit: ACCOUNT,
                safe: SAFE,
                floor: 10,
                window: WINDOW,
            }],
        },
        origin,
    )
    .expect("the lease thread starts");
    lease
        .wait_reserved(Duration::from_secs(30))
        .expect("reserved");
    let mut b = Budget::builder();
    let id = b
        .add("orders", Spec::sliding(SAFE, WINDOW.as_nanos() as i64, 10))
        .unwrap();
    let mut budget = b.build(0).unwrap();
    let mut leased = Leased::new(lease.shared(0).unwrap(), id);
    let mut mine: Vec<i64> = Vec::new();
    let ns = |t: Instant| t.saturating_duration_since(origin).as_nanos() as i64;
    let mut charge = |budget: &mut Budget, n: u64, at: i64| {
        let mut admitted = 0;
        for _ in 0..n {
            if let Ok(t) = budget.try_charge(&[Part::new(id, 1)], Class::Normal, at) {
                budget.complete(t.sent(), at).unwrap();
                mine.push(at);
                admitted += 1;
            }
        }
        admitted
    };

    // Host 2's loop, flooding, until its turn reads a grant above its safe share.
    let start = Instant::now();
    let limit = loop {
        let now = Instant::now();
        let l = leased.poll(&mut budget, now, ns(now)).unwrap_or(0);
        if l > SAFE + 5 {
            break l; // the turn: the grant read
        }
        charge(&mut budget, 4, ns(now));
        let s = budget.stats(id).unwrap();
        leased.report(s.admitted, s.refusals.full);
        assert!(start.elapsed() < Duration::from_secs(20), "no grant: {l}");
        // One send turn on real time; the grant comes from real etcd (no hand-off).
        std::thread::sleep(Duration::from_millis(2));
    };

    // Stopped here, between the turn and its submits, with its lease thread.
    lease.crash();
    let others_before: u64 = fleet.limits().iter().sum();
    let mut etcd = Client::new(&cluster.urls(), Duration::from_millis(500)).unwrap();
    let gone = wait_for("host 2's lease gone in etcd", 3 * TTL, || {
        let (kvs, _) = etcd.range_prefix(b"/stop/acct/orders/demand/").unwrap();
        !kvs.iter().any(|kv| kv.key.ends_with(b"/host-2"))
    });
    // Its grant's units went to the others: the limit it read would now go over.
    let took = wait_for("the others took host 2's grant", 10 * WINDOW, || {
        fleet.limits().iter().sum::<u64>() + limit > ACCOUNT
    });

    // Resumed: the submits of that turn, on the grant it read.
    let now = Instant::now();
    let admitted = charge(&mut budget, limit, ns(now));
    eprintln!(
        "host 2 read a limit of {limit} (safe share {SAFE}); stopped, its lease gone \
         {gone:?} later, the others' limits {others_before} -> {:?} after {took:?}; \
         resumed, its submits admitted {admitted}",
        fleet.limits()
    );
    assert_eq!(admitted, 0, "submits on a grant whose lease is gone");
    // Its next turn: the safe share only (its hold runs), never the grant.
    let now = Instant::now();
    let l = leased.poll(&mut budget, now, ns(now)).unwrap();
    assert!(l <= SAFE, "after its lease went, limit {l}");
    charge(&mut budget, limit, ns(now));

    let mut all = mine.clone();
    for n in &fleet.nodes {
        all.extend(n.charges.lock().unwrap().iter());
    }
    let most = most_in_a_window(all);
    eprintln!("venue: at most {most} in one window (account {ACCOUNT})");
    assert!(most as u64 <= ACCOUNT, "{most} in one window");
}
