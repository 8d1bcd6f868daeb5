//! Test support for the real-etcd tests: the three-member etcd cluster
//! (`support/cluster.rs`, shared with the gateway's tests), and "hosts": a lease
//! thread each plus a loop thread that charges a leased bucket as fast as it may and
//! records the instant of every unit admitted, so the test can count what the venue
//! would have counted in any window, across all hosts.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ergon_core::{Budget, Class, Part, Spec};
use ergon_lease::secure::Security;
use ergon_lease::{BucketLease, LeaseConfig, LeaseThread, Leased};

#[path = "../support/cluster.rs"]
mod cluster;
pub use cluster::{etcd_or_skip, wait_for, Cluster};

pub const WINDOW: Duration = Duration::from_secs(1);
pub const TTL: Duration = Duration::from_secs(2);
pub const SAFE: u64 = 10;
/// The reservation's hold: six TTLs, as the gateway takes.
pub const HOLD: Duration = Duration::from_secs(12);

/// One host: its lease thread and a loop thread charging one leased bucket.
pub struct Node {
    pub lease: Option<LeaseThread>,
    pub busy: Arc<AtomicBool>,
    pub stop: Arc<AtomicBool>,
    /// Instants (ns from the fleet's origin) of every unit admitted.
    pub charges: Arc<Mutex<Vec<i64>>>,
    /// The limit in force.
    pub limit: Arc<std::sync::atomic::AtomicU64>,
    join: Option<JoinHandle<()>>,
}

pub struct Fleet {
    pub origin: Instant,
    pub nodes: Vec<Node>,
    pub account: u64,
}

impl Fleet {
    /// `hosts` hosts on `urls` sharing `account` units per window, each with [`SAFE`].
    pub fn start(urls: &[String], prefix: &str, account: u64, hosts: usize) -> Fleet {
        Fleet::start_secure(urls, prefix, account, hosts, &Security::default())
    }

    /// [`Fleet::start`], reaching etcd as `security` says.
    pub fn start_secure(
        urls: &[String],
        prefix: &str,
        account: u64,
        hosts: usize,
        security: &Security,
    ) -> Fleet {
        let origin = Instant::now();
        let nodes = (0..hosts)
            .map(|i| {
                Node::start(
                    urls,
                    security,
                    prefix,
                    &format!("host-{i}"),
                    account,
                    origin,
                )
            })
            .collect();
        Fleet {
            origin,
            nodes,
            account,
        }
    }

    /// The most units admitted across all hosts in any closed window of one
    /// [`WINDOW`] (what the venue counts), and the units admitted in the last
    /// `span` before now.
    pub fn venue_count(&self) -> (u64, u64) {
        let mut all: Vec<i64> = Vec::new();
        for n in &self.nodes {
            all.extend(n.charges.lock().unwrap().iter());
        }
        all.sort_unstable();
        let w = WINDOW.as_nanos() as i64;
        let (mut most, mut lo) = (0, 0);
        for hi in 0..all.len() {
            while all[hi] - all[lo] > w {
                lo += 1;
            }
            most = most.max(hi - lo + 1);
        }
        let now = self.origin.elapsed().as_nanos() as i64;
        let recent = all.iter().filter(|&&t| t > now - w).count();
        (most as u64, recent as u64)
    }

    /// Asserts the venue never counted more than the account limit.
    pub fn assert_never_over(&self) {
        let (most, recent) = self.venue_count();
        eprintln!(
            "venue: at most {most} in one window (limit {}), {recent} in the last",
            self.account
        );
        assert!(
            most <= self.account,
            "the venue counted {most} in one window, the account limit is {}",
            self.account
        );
    }

    pub fn limits(&self) -> Vec<u64> {
        self.nodes
            .iter()
            .map(|n| n.limit.load(Ordering::Relaxed))
            .collect()
    }
}

impl Node {
    /// A host of an account of `account` units per window, charging once its safe
    /// share is reserved.
    pub fn start(
        urls: &[String],
        security: &Security,
        prefix: &str,
        host: &str,
        account: u64,
        origin: Instant,
    ) -> Node {
        let config = LeaseConfig {
            endpoints: urls.to_vec(),
            security: security.clone(),
            prefix: prefix.to_owned(),
            account: "acct".into(),
            host: host.to_owned(),
            ttl: TTL,
            margin: Duration::from_millis(500),
            hold: HOLD,
            period: Duration::from_millis(200),
            timeout: Duration::from_millis(300),
            buckets: vec![BucketLease {
                name: "orders".into(),
                limit: account,
                safe: SAFE,
                floor: 10,
                window: WINDOW,
            }],
        };
        let lease = LeaseThread::spawn(config, origin).expect("the lease thread starts");
        lease
            .wait_reserved(Duration::from_secs(30))
            .expect("the safe share reserved");
        let shared = lease.shared(0).unwrap();
        let busy = Arc::new(AtomicBool::new(true));
        let stop = Arc::new(AtomicBool::new(false));
        let charges = Arc::new(Mutex::new(Vec::new()));
        let limit = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let join = {
            let (busy, stop, charges, limit) =
                (busy.clone(), stop.clone(), charges.clone(), limit.clone());
            std::thread::spawn(move || {
                let mut b = Budget::builder();
                let w = WINDOW.as_nanos() as i64;
                let id = b.add("orders", Spec::sliding(SAFE, w, 10)).unwrap();
                let mut budget = b.build(0).unwrap();
                let mut leased = Leased::new(shared, id);
                while !stop.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    let ns = now.saturating_duration_since(origin).as_nanos() as i64;
                    if let Ok(l) = leased.poll(&mut budget, now, ns) {
                        limit.store(l, Ordering::Relaxed);
                    }
                    if busy.load(Ordering::Relaxed) {
                        for _ in 0..2 {
                            if let Ok(t) = budget.try_charge(&[Part::new(id, 1)], Class::Normal, ns)
                            {
                                budget.complete(t.sent(), ns).unwrap();
                                charges.lock().unwrap().push(ns);
                            }
                        }
                    }
                    let s = budget.stats(id).unwrap();
                    leased.report(s.admitted, s.refusals.full);
                    // A host's pace on real time: real etcd's leases run on it, nothing to jump.
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        };
        Node {
            lease: Some(lease),
            busy,
            stop,
            charges,
            limit,
            join: Some(join),
        }
    }

    /// Stops the loop; the lease thread dies without revoking (SIGKILL).
    pub fn crash(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
        if let Some(l) = self.lease.take() {
            l.crash();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}
