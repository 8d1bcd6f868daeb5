//! `--etcd`: the account's limits leased through etcd (issue 29), one meaning for
//! `ergon-gateway` and for a strategy that runs the gateway in its own process
//! (`mm_loop --etcd`).
//!
//! [`LeaseFlags`] parses and checks the flags; [`LeaseFlags::start`] picks the
//! venue's account-wide buckets ([`Account::account_wide`]), puts each at the safe
//! share, starts the lease thread and waits until etcd reserved the safe share for
//! this host; [`Leases::on_turn`] applies the grants on the loop thread. Nothing
//! here runs on the send path: `on_turn` reads atomics and, when a grant changed,
//! calls `Budget::set_limit`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ergon_core::{BucketId, Budget, Kind};
use ergon_lease::{BucketLease, LeaseConfig, LeaseThread, Leased, Shared};

use ergon_gateway::Account;

/// The command line's lease flags: `--etcd URL[,URL...] --account NAME
/// --safe-share PCT [--host NAME] [--lease-ttl SECS]`. `--hosts N`, which an
/// earlier version needed, is still taken and checked, and changes nothing: the
/// safe shares are reserved in etcd, whatever the number of hosts.
#[derive(Clone, Debug, PartialEq)]
pub struct LeaseFlags {
    /// `--etcd`: the etcd endpoints (none: nothing is leased).
    pub etcd: Option<Vec<String>>,
    /// `--account`: the venue account's name in the keys.
    pub account: Option<String>,
    /// `--safe-share`: this host's share of each leased limit outside the pool (0..1).
    pub safe_share: Option<f64>,
    /// `--hosts`: taken for compatibility (1 to 64); the safe shares are reserved
    /// in etcd, so it changes nothing.
    pub hosts: Option<u64>,
    /// `--host`: this host's name among them (default: the caller's).
    pub host: Option<String>,
    /// `--lease-ttl`, seconds (default 10).
    pub ttl_s: u64,
    /// `--etcd-ca`, `--etcd-cert`, `--etcd-key` (PEM files: TLS with a client
    /// certificate, for `https://` endpoints; all three or none), `--etcd-user`
    /// and `--etcd-password-file` (etcd's auth; both or none). The key and the
    /// password file follow the secrets' rule: ours, mode 0600, no link.
    pub tls: [Option<String>; 3],
    /// `--etcd-user` and `--etcd-password-file`.
    pub user: [Option<String>; 2],
}

impl Default for LeaseFlags {
    fn default() -> Self {
        LeaseFlags {
            etcd: None,
            account: None,
            safe_share: None,
            hosts: None,
            host: None,
            ttl_s: 10,
            tls: [None, None, None],
            user: [None, None],
        }
    }
}

/// The leased buckets of one budget: the lease thread, and each bucket's loop side.
pub type Started = (LeaseThread, Vec<(BucketId, Arc<Shared>)>);

impl LeaseFlags {
    /// Whether `flag` is one of these.
    pub fn takes(flag: &str) -> bool {
        matches!(
            flag,
            "--etcd"
                | "--account"
                | "--safe-share"
                | "--hosts"
                | "--host"
                | "--lease-ttl"
                | "--etcd-ca"
                | "--etcd-cert"
                | "--etcd-key"
                | "--etcd-user"
                | "--etcd-password-file"
        )
    }

    /// Applies `flag` with its value; the error names the flag and the value.
    pub fn set(&mut self, flag: &str, v: &str) -> Result<(), String> {
        let num = |lo: f64, hi: f64| crate::config::flag_number(flag, v, lo, hi);
        match flag {
            "--etcd" => self.etcd = Some(v.split(',').map(str::to_owned).collect()),
            "--account" => self.account = Some(v.to_owned()),
            "--safe-share" => self.safe_share = Some(num(0.01, 50.0)? / 100.0),
            "--hosts" => self.hosts = Some(num(1.0, 64.0)? as u64),
            "--host" => self.host = Some(v.to_owned()),
            "--lease-ttl" => self.ttl_s = num(2.0, 300.0)? as u64,
            "--etcd-ca" => self.tls[0] = Some(v.to_owned()),
            "--etcd-cert" => self.tls[1] = Some(v.to_owned()),
            "--etcd-key" => self.tls[2] = Some(v.to_owned()),
            "--etcd-user" => self.user[0] = Some(v.to_owned()),
            "--etcd-password-file" => self.user[1] = Some(v.to_owned()),
            _ => return Err(format!("unknown argument {flag:?}")),
        }
        Ok(())
    }

    /// Checks that the flags go together: `--account`, `--safe-share` (and the old
    /// `--hosts`) only with `--etcd`, and `--etcd` only with both.
    pub fn check(&self) -> Result<(), String> {
        self.security()?;
        let secured = self.tls.iter().chain(&self.user).any(Option::is_some);
        if secured && self.etcd.is_none() {
            return Err("--etcd-ca, --etcd-cert, --etcd-key, --etcd-user and \
                        --etcd-password-file go with --etcd"
                .into());
        }
        let any = self.account.is_some() || self.safe_share.is_some() || self.hosts.is_some();
        let all = self.account.is_some() && self.safe_share.is_some();
        match (&self.etcd, any, all) {
            (None, true, _) => Err("--account, --safe-share and --hosts go with --etcd".into()),
            (Some(_), _, false) => Err("--etcd needs --account NAME and --safe-share PCT".into()),
            _ => Ok(()),
        }
    }

    /// How to reach etcd: TLS and a user as the flags say, or why they do not go
    /// together.
    pub fn security(&self) -> Result<ergon_lease::secure::Security, String> {
        use ergon_lease::secure::{Security, TlsFiles, User};
        let tls = match &self.tls {
            [None, None, None] => None,
            [Some(ca), Some(cert), Some(key)] => Some(TlsFiles {
                ca: ca.into(),
                cert: cert.into(),
                key: key.into(),
            }),
            _ => return Err("--etcd-ca, --etcd-cert and --etcd-key go together".into()),
        };
        let user = match &self.user {
            [None, None] => None,
            [Some(name), Some(file)] => Some(User {
                name: name.clone(),
                password_file: file.into(),
            }),
            _ => return Err("--etcd-user and --etcd-password-file go together".into()),
        };
        Ok(Security { tls, user })
    }

    /// The etcd endpoints and the account `release-host` needs, or why not.
    pub fn release_target(&self) -> Result<(&[String], &str), String> {
        match (&self.etcd, &self.account) {
            (Some(etcd), Some(account)) => Ok((etcd, account)),
            _ => Err("release-host needs --etcd URL[,URL...] and --account NAME".into()),
        }
    }

    /// With `--etcd`: each limit the venue counts per account
    /// ([`Account::account_wide`]: Binance's `ORDERS_*`, Bybit's and OKX's order
    /// endpoints) is set to the safe share at once, left out of the venue's own
    /// account-wide counts ([`Account::lease_bucket`]), and leased: etcd reserves
    /// this host's safe share by name, and the rest of the limit is the pool the
    /// hosts' grants divide. Returns once every safe share is reserved (nothing may
    /// be sent before), or fails after `wait`. `host` names this host unless
    /// `--host` does. `None` without `--etcd`.
    pub fn start<E: Account>(
        &self,
        budget: &mut Budget,
        venue: &mut E,
        host: &str,
        wait: Duration,
    ) -> Result<Option<Started>, String> {
        let (Some(etcd), Some(account), Some(pct)) = (&self.etcd, &self.account, self.safe_share)
        else {
            return Ok(None);
        };
        let mut ids = Vec::new();
        let mut buckets = Vec::new();
        for id in budget.ids().collect::<Vec<_>>() {
            let bucket = budget.name(id).unwrap_or("").to_owned();
            let Ok(spec) = budget.spec(id) else { continue };
            let (limit, window_ns) = match spec.kind() {
                Kind::Fixed {
                    limit, window_ns, ..
                }
                | Kind::Sliding {
                    limit, window_ns, ..
                } => (limit, window_ns),
                _ => continue,
            };
            if !venue.account_wide(id) {
                continue;
            }
            let safe = ((limit as f64) * pct).floor() as u64;
            if safe == 0 {
                return Err(format!(
                    "--safe-share: {bucket} allows {limit} per window; its share rounds to 0"
                ));
            }
            budget
                .set_limit(id, safe, 0)
                .map_err(|e| format!("{bucket}: the safe share {safe}: {e}"))?;
            // The venue's order counts are the account's: they must not raise it.
            if !venue.lease_bucket(id) {
                return Err(format!("--etcd: the adapter does not know {bucket}"));
            }
            ids.push(id);
            buckets.push(BucketLease {
                name: lease_name(&bucket),
                limit,
                safe,
                floor: 1,
                window: Duration::from_nanos(window_ns as u64),
            });
        }
        if buckets.is_empty() {
            return Err("--etcd: the venue declared no account-wide limit to lease".into());
        }
        let ttl = Duration::from_secs(self.ttl_s);
        let config = LeaseConfig {
            endpoints: etcd.clone(),
            security: self.security()?,
            prefix: PREFIX.into(),
            account: account.clone(),
            host: self.host.clone().unwrap_or_else(|| host.to_owned()),
            ttl,
            margin: ttl / 5,
            // A host cut off from etcd keeps its safe share this long after its
            // last read, then stops; a released reservation, or one whose process
            // went (a restart under the same name), passes on this plus a window
            // and the margin after the allocator saw it.
            hold: ttl * HOLD_TTLS,
            // Ten rounds a TTL: a grant moves after about six rounds plus one
            // window (demand published, shrink written, read and acknowledged,
            // the acknowledgement seen, the units freed, the raise read), so at
            // 2 s and a 1 s window it follows demand within 3 windows.
            period: ttl / 10,
            timeout: Duration::from_millis(500),
            buckets,
        };
        let lease = LeaseThread::spawn(config, Instant::now()).map_err(|e| e.to_string())?;
        // Said at once when it waits: for what, and until about when (a restart
        // after a crash waits the hold, longer than the default --start-timeout).
        let first = wait.min(Duration::from_secs(1));
        let reserved = lease.wait_reserved(first).or_else(|_| {
            eprintln!(
                "ergon-gateway: waiting for etcd to reserve this host's safe share (at most \
                 --start-timeout {wait:?}): {}",
                lease.waiting().join("; ")
            );
            lease.wait_reserved(wait.saturating_sub(first))
        });
        reserved.map_err(|e| {
            format!(
                "--etcd: --start-timeout {wait:?}: {e}. A host joining an account whose pool is in use waits until \
                 the others' grants shrank and aged one window of each leased limit; \
                 `ergon-gateway release-host` gives back the share of a host stopped for good"
            )
        })?;
        let shared = (0..ids.len()).filter_map(|i| lease.shared(i));
        let leases = ids.into_iter().zip(shared).collect();
        Ok(Some((lease, leases)))
    }
}

/// The first element of every key the gateways write in etcd.
const PREFIX: &str = "ergon";

/// The reservation's hold, in TTLs (60 s at the default TTL of 10 s).
pub const HOLD_TTLS: u32 = 6;

/// `ergon-gateway release-host HOST`: gives back the safe shares etcd reserves for
/// `host` in every leased limit of `--account` (a host stopped for good; refused
/// while its lease lives). Each (bucket, units) released; the units stay held one
/// more window, then return to the pool.
pub fn release_host(flags: &LeaseFlags, host: &str) -> Result<Vec<(String, u64)>, String> {
    let (etcd, account) = flags.release_target()?;
    if !ergon_lease::rule::valid_host(host) || !ergon_lease::rule::valid_host(account) {
        return Err(format!(
            "release-host {host:?} --account {account:?}: 1 to 64 bytes of A-Z a-z 0-9 . _ -"
        ));
    }
    let mut client =
        ergon_lease::etcd::Client::with_security(etcd, Duration::from_secs(2), &flags.security()?)
            .map_err(|e| format!("--etcd: {e}"))?;
    ergon_lease::store::release_account(&mut client, &format!("/{PREFIX}/{account}/"), host)
        .map_err(|e| format!("release-host {host}: {e}"))
}

/// A clean stop (SIGTERM, everything in flight settled): hands this process's
/// reservations over ([`LeaseThread::hand_over`]), so that a gateway started
/// again under the same `--host` gets them at once, less what this one counted in
/// the window, rather than hold + window + margin later as after a crash. `leased`
/// are the leased buckets as [`LeaseFlags::start`] returned them; `now_ns` the
/// budget's clock. One line for the log: what passed on, per bucket.
pub fn hand_over(
    thread: LeaseThread,
    budget: &mut Budget,
    leased: &[BucketId],
    now_ns: i64,
) -> String {
    let names: Vec<String> = leased
        .iter()
        .map(|&id| lease_name(budget.name(id).unwrap_or("?")))
        .collect();
    match thread.hand_over(budget, leased, now_ns) {
        Ok(handed) => {
            let each: Vec<String> = names
                .iter()
                .zip(&handed)
                .map(|(b, h)| match h {
                    Some(units) => format!("{b} {units} now"),
                    None => format!("{b} after hold + window + margin"),
                })
                .collect();
            format!(
                "reservations handed over to the next process of this --host: {}",
                each.join(", ")
            )
        }
        Err(e) => format!(
            "reservations not handed over ({e}): the next process of this --host \
             waits hold + window + margin, as after a crash"
        ),
    }
}

/// The etcd key part of a bucket named `bucket` (`ergon-lease` takes letters,
/// digits, `.`, `_` and `-`): an endpoint's path with its slashes as dots
/// (`/v5/order/create` → `v5.order.create`); `ORDERS_10S` as it is.
pub fn lease_name(bucket: &str) -> String {
    bucket.trim_start_matches('/').replace('/', ".")
}

/// The loop's side of the leased buckets when the strategy runs the gateway in its
/// own process (the hub does the same for `ergon-gateway`'s clients). Dropping it
/// stops the lease thread.
#[derive(Debug)]
pub struct Leases {
    /// Kept until the loop ends: dropping it stops the thread and revokes the lease.
    _thread: LeaseThread,
    leased: Vec<(BucketId, Leased)>,
}

impl Leases {
    /// The loop's side of what [`LeaseFlags::start`] started.
    pub fn new((thread, shared): Started) -> Self {
        let leased = shared
            .into_iter()
            .map(|(id, s)| (id, Leased::new(s, id)))
            .collect();
        Leases {
            _thread: thread,
            leased,
        }
    }

    /// Once per turn of the loop, before its submits: applies each grant (or the
    /// safe share past the renewal deadline) and publishes the budget's counters
    /// for the demand. A limit the budget refuses leaves the last one in force.
    pub fn on_turn(&mut self, budget: &mut Budget, now_ns: i64) {
        let at = Instant::now();
        for (id, l) in &mut self.leased {
            let _ = l.poll(budget, at, now_ns);
            let s = budget.stats(*id).unwrap_or_default();
            l.report(s.admitted, s.refusals.full);
        }
    }
}
