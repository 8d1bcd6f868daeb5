//! Test support for the real-etcd tests: a three-member etcd cluster on loopback
//! ports (temporary data directories, killed on drop), and "hosts": a lease thread
//! each plus a loop thread that charges a leased bucket as fast as it may and
//! records the instant of every unit admitted, so the test can count what the venue
//! would have counted in any window, across all hosts.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ergon_core::{Budget, Class, Part, Spec};
use ergon_lease::etcd::Client;
use ergon_lease::{BucketLease, LeaseConfig, LeaseThread, Leased};

#[path = "../support/etcd_bin.rs"]
mod etcd_bin;

/// Whether the real-etcd tests run: always, installing etcd when it is missing,
/// unless `ERGON_LEASE_SKIP_ETCD=1` says to skip them (they say so).
pub fn etcd_or_skip() -> bool {
    if std::env::var("ERGON_LEASE_SKIP_ETCD").as_deref() == Ok("1") {
        eprintln!("real-etcd tests skipped (ERGON_LEASE_SKIP_ETCD=1)");
        return false;
    }
    etcd_bin::ensure_etcd();
    true
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Polls `f` every 20 ms until it holds or `limit` passes; the time it took.
pub fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}

pub struct Member {
    pub name: String,
    pub client_url: String,
    child: Option<Child>,
}

pub struct Cluster {
    pub members: Vec<Member>,
    dir: PathBuf,
}

impl Cluster {
    /// Three members, healthy.
    pub fn start() -> Cluster {
        let dir = std::env::temp_dir().join(format!(
            "ergon-lease-etcd-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let initial: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, p))| format!("m{i}=http://127.0.0.1:{p}"))
            .collect();
        let token = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut members = Vec::new();
        for (i, (c, p)) in ports.iter().enumerate() {
            let client_url = format!("http://127.0.0.1:{c}");
            let peer_url = format!("http://127.0.0.1:{p}");
            let log = std::fs::File::create(dir.join(format!("m{i}.log"))).unwrap();
            let child = Command::new("etcd")
                .args(["--name", &format!("m{i}")])
                .args(["--data-dir", &dir.join(format!("m{i}")).to_string_lossy()])
                .args(["--listen-client-urls", &client_url])
                .args(["--advertise-client-urls", &client_url])
                .args(["--listen-peer-urls", &peer_url])
                .args(["--initial-advertise-peer-urls", &peer_url])
                .args(["--initial-cluster", &initial.join(",")])
                .args(["--initial-cluster-token", &token])
                .args(["--initial-cluster-state", "new"])
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("etcd starts");
            members.push(Member {
                name: format!("m{i}"),
                client_url,
                child: Some(child),
            });
        }
        let cluster = Cluster { members, dir };
        for url in cluster.urls() {
            wait_for("an etcd member answers", Duration::from_secs(60), || {
                Client::new(&[&url], Duration::from_millis(500))
                    .and_then(|mut c| c.range_prefix(b"/health-check/"))
                    .is_ok()
            });
        }
        cluster
    }

    pub fn urls(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client_url.clone()).collect()
    }

    /// The index of the leader, as the members say.
    pub fn leader(&self) -> Option<usize> {
        for (i, m) in self.members.iter().enumerate() {
            if m.child.is_none() {
                continue;
            }
            let Ok(mut c) = Client::new(&[&m.client_url], Duration::from_millis(500)) else {
                continue;
            };
            let Ok(v) = c.call("/v3/maintenance/status", &serde_json::json!({})) else {
                continue;
            };
            let leader = v["leader"].as_str().unwrap_or("");
            if !leader.is_empty() && v["header"]["member_id"].as_str() == Some(leader) {
                return Some(i);
            }
            let _ = i;
        }
        None
    }

    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends `signal` (STOP, CONT) to every running member.
    pub fn signal_all(&self, signal: &str) {
        for m in &self.members {
            if let Some(c) = &m.child {
                let ok = Command::new("kill")
                    .args([&format!("-{signal}"), &c.id().to_string()])
                    .status()
                    .is_ok_and(|s| s.success());
                assert!(ok, "kill -{signal} {}", c.id());
            }
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.signal_all("CONT");
        for i in 0..self.members.len() {
            self.kill(i);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub const WINDOW: Duration = Duration::from_secs(1);
pub const TTL: Duration = Duration::from_secs(2);
pub const SAFE: u64 = 10;

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
        let origin = Instant::now();
        let pool = account - SAFE * hosts as u64;
        let nodes = (0..hosts)
            .map(|i| Node::start(urls, prefix, &format!("host-{i}"), pool, origin))
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
    pub fn start(urls: &[String], prefix: &str, host: &str, pool: u64, origin: Instant) -> Node {
        let config = LeaseConfig {
            endpoints: urls.to_vec(),
            prefix: prefix.to_owned(),
            account: "acct".into(),
            host: host.to_owned(),
            ttl: TTL,
            margin: Duration::from_millis(500),
            period: Duration::from_millis(200),
            timeout: Duration::from_millis(300),
            buckets: vec![BucketLease {
                name: "orders".into(),
                pool,
                safe: SAFE,
                floor: 10,
                window: WINDOW,
            }],
        };
        let lease = LeaseThread::spawn(config, origin).expect("the lease thread starts");
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
