//! Issue 40: etcd writes grow with changes, not with hosts. Simulated hosts in this
//! process (a real lease thread each, three leased buckets, one loop thread charging
//! at a steady rate for all of them) against a real three-member cluster, at the
//! gateway's default timing (TTL 10 s, a round a second): the etcd writes a second
//! (revisions, each a Raft write) in steady state, for 3, 20 and 100 hosts.
//!
//! The default run measures 3 and 20 hosts; `ERGON_LEASE_WRITES_100=1` adds 100 (a
//! minute and more on a 2-core machine). Each size warms up, then is measured, for
//! `ERGON_LEASE_WRITES_SECS` seconds each (10 by default, CI's; the book's figures
//! are of 20). Prints `hosts N: W writes/s, C calls a round` with `-- --nocapture`.
#![cfg(not(ergon_loom))]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{etcd_or_skip, wait_for, Cluster};
use ergon_core::{Budget, Class, Part, Spec};
use ergon_lease::etcd::Client;
use ergon_lease::{BucketLease, LeaseConfig, LeaseThread, Leased};

const BUCKETS: [(&str, u64); 3] = [("orders1s", 1), ("orders10s", 10), ("orders60s", 60)];
const SAFE: u64 = 10;

/// Steady-state etcd writes a second and calls a round, for `hosts` hosts.
fn measure(urls: &[String], hosts: usize) -> (f64, f64) {
    let origin = Instant::now();
    let prefix = format!("w{hosts}");
    let limit = hosts as u64 * SAFE * 4;
    let threads: Vec<LeaseThread> = (0..hosts)
        .map(|h| {
            let config = LeaseConfig {
                endpoints: urls.to_vec(),
                security: Default::default(),
                prefix: prefix.clone(),
                account: "acct".into(),
                host: format!("host-{h}"),
                ttl: Duration::from_secs(10),
                margin: Duration::from_secs(2),
                hold: Duration::from_secs(60),
                period: Duration::from_secs(1),
                timeout: Duration::from_secs(2),
                buckets: BUCKETS
                    .iter()
                    .map(|&(name, secs)| BucketLease {
                        name: name.into(),
                        limit,
                        safe: SAFE,
                        floor: 1,
                        window: Duration::from_secs(secs),
                    })
                    .collect(),
            };
            LeaseThread::spawn(config, origin).expect("a lease thread")
        })
        .collect();
    for t in &threads {
        t.wait_reserved(Duration::from_secs(120))
            .expect("every safe share reserved");
    }
    // One loop for every host: each bucket charged at a steady rate near its
    // equal share, so demand moves only with noise.
    let stop = Arc::new(AtomicBool::new(false));
    let mut hosts_loop: Vec<(Budget, Vec<Leased>)> = threads
        .iter()
        .map(|t| {
            let mut b = Budget::builder();
            let ids: Vec<_> = BUCKETS
                .iter()
                .map(|&(name, secs)| {
                    b.add(name, Spec::sliding(SAFE, secs as i64 * 1_000_000_000, 10))
                        .unwrap()
                })
                .collect();
            let budget = b.build(0).unwrap();
            let leased = ids
                .iter()
                .enumerate()
                .map(|(i, &id)| Leased::new(t.shared(i).unwrap(), id))
                .collect();
            (budget, leased)
        })
        .collect();
    let looper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut turn: u64 = 0;
            while !stop.load(Ordering::Relaxed) {
                let now = Instant::now();
                let ns = now.saturating_duration_since(origin).as_nanos() as i64;
                for (budget, leased) in &mut hosts_loop {
                    for l in leased.iter_mut() {
                        let _ = l.poll(budget, now, ns);
                    }
                    let ids: Vec<_> = budget.ids().collect();
                    for (i, id) in ids.into_iter().enumerate() {
                        // One unit every other turn: 100 a second per bucket.
                        if turn % 2 == 0 {
                            if let Ok(t) = budget.try_charge(&[Part::new(id, 1)], Class::Normal, ns)
                            {
                                budget.complete(t.sent(), ns).unwrap();
                            }
                        }
                        let s = budget.stats(id).unwrap();
                        leased[i].report(s.admitted, s.refusals.full);
                    }
                }
                turn += 1;
                // A host's pace on real time: real etcd's leases run on it.
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let mut c = Client::new(urls, Duration::from_secs(2)).unwrap();
    let revision = |c: &mut Client| c.range_prefix(b"/nothing/").unwrap().1;
    // Warm up: demand measured (over five rounds at most), grants settled.
    let span = Duration::from_secs(
        std::env::var("ERGON_LEASE_WRITES_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(10),
    );
    // The figure is per real second of etcd writes: the span is the measurement.
    std::thread::sleep(span);
    let rounds0: u64 = threads.iter().map(|t| t.status().rounds).sum();
    let calls0: u64 = threads.iter().map(|t| t.status().etcd_calls).sum();
    let (r0, t0) = (revision(&mut c), Instant::now());
    // The measured span.
    std::thread::sleep(span);
    let (r1, t1) = (revision(&mut c), Instant::now());
    let rounds1: u64 = threads.iter().map(|t| t.status().rounds).sum();
    let calls1: u64 = threads.iter().map(|t| t.status().etcd_calls).sum();
    stop.store(true, Ordering::Relaxed);
    looper.join().unwrap();
    for t in threads {
        t.stop();
    }
    let writes = (r1 - r0) as f64 / (t1 - t0).as_secs_f64();
    let calls = (calls1 - calls0) as f64 / (rounds1 - rounds0).max(1) as f64;
    eprintln!("hosts {hosts}: {writes:.1} writes/s, {calls:.1} calls a round");
    (writes, calls)
}

#[test]
fn writes_grow_with_changes_not_with_hosts() {
    if !etcd_or_skip() {
        return;
    }
    let cluster = Cluster::start();
    let urls = cluster.urls();
    wait_for("a leader", Duration::from_secs(20), || {
        cluster.leader().is_some()
    });
    let mut sizes = vec![3, 20];
    if std::env::var("ERGON_LEASE_WRITES_100").as_deref() == Ok("1") {
        sizes.push(100);
    }
    for hosts in sizes {
        let (writes, _) = measure(&urls, hosts);
        // Each host's three demand keys once a round would be 3 × hosts a second.
        assert!(
            writes < 100.0 && writes < hosts as f64 * 3.0,
            "{hosts} hosts: {writes:.1} writes/s"
        );
    }
}
