//! A three-member etcd cluster on loopback for the real-etcd tests (ergon-lease's
//! and the gateway's): temporary data directories, members killed on drop, the
//! leader found by asking, SIGSTOP and SIGCONT of every member. Included by path
//! (`#[path = ".../lease/tests/support/cluster.rs"] mod cluster;`), one copy for
//! both crates.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ergon_lease::etcd::Client;
use ergon_lease::secure::Security;

#[path = "etcd_bin.rs"]
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
        // Real etcd members and hosts give no hand-off for these states: poll.
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
    /// How the test's clients reach the members.
    pub security: Security,
}

impl Cluster {
    /// Three members, healthy (etcd installed first if it is missing).
    pub fn start() -> Cluster {
        Cluster::start_with(3, std::env::temp_dir(), &[])
    }

    /// `n` members with their data under `base` and `extra` flags each, healthy.
    pub fn start_with(n: usize, base: PathBuf, extra: &[&str]) -> Cluster {
        Cluster::start_secure(n, base, extra, Security::default())
    }

    /// [`Cluster::start_with`], clients on `https://` when `security` has TLS files
    /// (the TLS flags are among `extra`), answering clients that use `security`.
    pub fn start_secure(n: usize, base: PathBuf, extra: &[&str], security: Security) -> Cluster {
        let scheme = if security.tls.is_some() {
            "https"
        } else {
            "http"
        };
        etcd_bin::ensure_etcd();
        let dir = base.join(format!(
            "ergon-lease-etcd-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
        let initial: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, p))| format!("m{i}=http://127.0.0.1:{p}"))
            .collect();
        let token = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut members = Vec::new();
        for (i, (c, p)) in ports.iter().enumerate() {
            let client_url = format!("{scheme}://127.0.0.1:{c}");
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
                .args(extra)
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
        let cluster = Cluster {
            members,
            dir,
            security,
        };
        for url in cluster.urls() {
            wait_for("an etcd member answers", Duration::from_secs(60), || {
                cluster
                    .client(&[&url])
                    .and_then(|mut c| c.range_prefix(b"/health-check/"))
                    .is_ok()
            });
        }
        cluster
    }

    /// A client of `urls` as the test's clients reach the members.
    pub fn client(&self, urls: &[&str]) -> Result<Client, ergon_lease::etcd::EtcdError> {
        Client::with_security(urls, Duration::from_millis(500), &self.security)
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
            let Ok(mut c) = self.client(&[&m.client_url]) else {
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
