//! `--metrics 127.0.0.1:PORT`: `/metrics` in the OpenMetrics text format (encoded by
//! the official `prometheus-client` crate) when the scraper's `Accept` asks for it,
//! the classic text format 0.0.4 otherwise ([`crate::exposition`]), and `/health`
//! ([`crate::health`]), served
//! by a thread of its own that reads only what the loop published
//! ([`ergon_gateway::observe`]). The same thread answers `ergon-gateway --stats` with the
//! health lines on the abstract socket `@ergon-gateway-health/NAME`, to the
//! gateway's own user only (`SO_PEERCRED`).
//!
//! The families (prefix `ergon_`; counters end in `_total`):
//!
//! | family | labels | what |
//! |---|---|---|
//! | `bucket_used`, `bucket_limit` | bucket | the local count and the limit |
//! | `bucket_admitted_total` | bucket | charges admitted |
//! | `bucket_refusals_total` | bucket, reason (full, held, halted, too_big) | charges refused |
//! | `bucket_held` | bucket | 1 while a throttle holds it |
//! | `bucket_throttles_total`, `bucket_bans_total` | bucket | throttles (holds) and bans received |
//! | `bucket_halted` | bucket | 1 while a ban halts it (until `clear-halt`) |
//! | `bucket_drift` | bucket | the venue's last figure minus the local count then |
//! | `label_requests_total`, `label_weight_total` | label | submits and cost charged, by label |
//! | `label_refusals_total` | label, reason | local refusals by label |
//! | `label_answers_total` | label, verdict | answers by verdict |
//! | `ledger_in_flight` | | requests in the ledger |
//! | `requests_sent_total`, `resends_total`, `expired_total` | | sends, re-sends, deadlines passed |
//! | `answers_total` | verdict (applied, rejected, throttled, banned, clock_skew) | the gateway's answers |
//! | `unknown_total`, `reconcile_queries_total` | | unknown outcomes, reconcile queries |
//! | `reconciles_total` | outcome (found, not_found) | unknown outcomes settled |
//! | `unresolved_total`, `late_total` | | outcomes left unknown (`Unresolved`), and of those the orders that appeared after all (`Late`) |
//! | `client_attached` | client | 1 while attached |
//! | `client_share_ratio` | client | the most of each bucket the client may use (`--share`; 1 without) |
//! | `client_submits_total`, `client_accepted_total`, `client_limited_total`, `client_over_share_total`, `client_finals_total` | client | each client's calls |
//! | `client_events_dropped_total` | client | events that found its ring full (must stay 0) |
//! | `protection_armed`, `protection_lapsed` | why (none where a switch publishes) | the dead man's switch; 0 with `why` (`no_switch`, `not_published`) where none publishes |
//! | `protection_armed_until_seconds` | | the switch's end, where one publishes |
//! | `lease_lost` | | the etcd lease, when it publishes |
//! | `address_requests_used`, `address_requests_cap`, `address_requests_surplus`, `address_budget_forecast_hours` | | the venue's address budget (Hyperliquid's `userRateLimit`, read once a minute), once read; the forecast once two readings show it shrinking |
//! | `healthy`, `health_reason` | kind, bucket | 1 when `/health` is 200; one series per reason |
//! | `snapshot_age_seconds` | | since the loop last published (a stuck loop shows here) |
//!
//! The HTTP side is deliberately small (`crate::http`): many connections at once on
//! one thread, none able to hold it, each request bounded in bytes
//! ([`MAX_REQUEST`]) and its whole exchange in time ([`IO_TIMEOUT`]), `GET /metrics`
//! and `GET /health` only (anything else 404), `Connection: close`. Bad input is an
//! answer or a closed connection, never a panic.
//!
//! What this must never do: touch the loop, its budget or its gateway; block the
//! loop (it only reads seqlocks, which never stop the writer).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ergon_core::Stats as BucketStats;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::exposition::{self, Format};
use crate::health::{self, HealthConfig, HealthMonitor, Reason};
use crate::http;
use ergon_gateway::labels::{LabelReader, LabelSnapshot};
use ergon_gateway::observe::{
    ClientStats, ObservedReader, OpsSnapshot, Protection, PublishedClient,
};

pub use crate::http::{IO_TIMEOUT, MAX_REQUEST};
/// How often the thread takes a snapshot for health when nobody asks.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The `Content-Type` of `/metrics` in OpenMetrics (the classic format's is
/// [`exposition::CLASSIC`]; the scraper's `Accept` chooses).
pub const CONTENT_TYPE: &str = exposition::OPENMETRICS;

type Labels = Vec<(String, String)>;

/// `\`, `"` and line feeds escaped for a label value (the encoder writes values
/// as given).
fn esc(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn l(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), esc(v))).collect()
}

/// A family of gauges or counters filled once per scrape.
struct Fams<'r> {
    reg: &'r mut Registry,
}

impl Fams<'_> {
    /// Registers `metric` under `name`; the encoder ends `help` with its own
    /// period, so one written here is dropped (a HELP line never ends in "..").
    fn register(
        &mut self,
        name: &str,
        help: &str,
        metric: impl prometheus_client::registry::Metric,
    ) {
        self.reg.register(name, help.trim_end_matches('.'), metric);
    }

    /// Whether `rows` is one sample without labels: written as a metric of its
    /// own (`name 1`), not as a family (`name{} 1`).
    fn bare<T>(rows: &[(Labels, T)]) -> bool {
        rows.len() == 1 && rows[0].0.is_empty()
    }

    /// One family of `M` from `rows`, each value put in by `set`.
    fn rows<M, V: Copy>(&mut self, name: &str, help: &str, rows: &[(Labels, V)], set: fn(&M, V))
    where
        M: prometheus_client::registry::Metric + Default,
        Family<Labels, M>: prometheus_client::registry::Metric,
    {
        if Self::bare(rows) {
            let m = M::default();
            set(&m, rows[0].1);
            return self.register(name, help, m);
        }
        let f = Family::<Labels, M>::default();
        for (k, v) in rows {
            set(&f.get_or_create(k), *v);
        }
        self.register(name, help, f);
    }

    fn gauge(&mut self, name: &str, help: &str, rows: &[(Labels, i64)]) {
        self.rows::<Gauge, _>(name, help, rows, |g, v| {
            g.set(v);
        });
    }

    fn gauge_f(&mut self, name: &str, help: &str, rows: &[(Labels, f64)]) {
        self.rows::<Gauge<f64, std::sync::atomic::AtomicU64>, _>(name, help, rows, |g, v| {
            g.set(v);
        });
    }

    fn counter(&mut self, name: &str, help: &str, rows: &[(Labels, u64)]) {
        self.rows::<Counter, _>(name, help, rows, |c, v| {
            c.inc_by(v);
        });
    }

    /// One gauge without labels.
    fn gauge1(&mut self, name: &str, help: &str, v: i64) {
        self.gauge(name, help, &[(Labels::new(), v)]);
    }

    /// One counter without labels.
    fn counter1(&mut self, name: &str, help: &str, v: u64) {
        self.counter(name, help, &[(Labels::new(), v)]);
    }
}

/// Everything one scrape shows.
#[derive(Clone, Debug, Default)]
pub struct View<'a> {
    /// Bucket names, indexed like the budget's ids.
    pub names: &'a [String],
    /// Every bucket's stats.
    pub buckets: &'a [BucketStats],
    /// The gateway's own state.
    pub ops: Option<&'a OpsSnapshot>,
    /// The counters by label, where published.
    pub labels: Option<&'a LabelSnapshot>,
    /// The health reasons now.
    pub reasons: &'a [Reason],
    /// Seconds since the loop last published.
    pub age_secs: Option<f64>,
    /// Each client's share ceiling (`--share`), if any.
    pub share: Option<f64>,
}

/// The two gauges of the dead man's switch: name and help.
const ARMED: (&str, &str) = (
    "protection_armed",
    "1 while the dead man's switch is armed.",
);
const LAPSED: (&str, &str) = (
    "protection_lapsed",
    "1 when the switch could not be refreshed in time.",
);

/// One row per bucket of `v`, labelled with its name, valued by `get`.
fn per_bucket<T>(v: &View<'_>, get: fn(&BucketStats) -> T) -> Vec<(Labels, T)> {
    v.buckets
        .iter()
        .enumerate()
        .map(|(i, b)| (l(&[("bucket", &bucket_name(v, i))]), get(b)))
        .collect()
}

/// Bucket `i`'s name, `#i` where `v` names none.
fn bucket_name(v: &View<'_>, i: usize) -> String {
    v.names.get(i).cloned().unwrap_or_else(|| format!("#{i}"))
}

/// One row per published client of `o`, labelled with its name, valued by `get`.
fn per_client<T>(o: &OpsSnapshot, get: impl Fn(&PublishedClient) -> T) -> Vec<(Labels, T)> {
    o.clients
        .iter()
        .map(|c| (l(&[("client", &c.name)]), get(c)))
        .collect()
}

/// The OpenMetrics text of `v` (ends with `# EOF`).
pub fn render(v: &View<'_>) -> String {
    let mut reg = Registry::with_prefix("ergon");
    let mut f = Fams { reg: &mut reg };
    let per = |get: fn(&BucketStats) -> i64| per_bucket(v, get);
    let per_c = |get: fn(&BucketStats) -> u64| per_bucket(v, get);
    f.gauge(
        "bucket_used",
        "Units the bucket counts now.",
        &per(|b| b.used as i64),
    );
    f.gauge(
        "bucket_limit",
        "The bucket's limit.",
        &per(|b| b.limit as i64),
    );
    f.counter(
        "bucket_admitted",
        "Charges admitted.",
        &per_c(|b| b.admitted),
    );
    let mut refusals = Vec::new();
    for (i, b) in v.buckets.iter().enumerate() {
        let r = b.refusals;
        for (why, n) in [
            ("full", r.full),
            ("held", r.held),
            ("halted", r.halted),
            ("too_big", r.too_big),
        ] {
            refusals.push((l(&[("bucket", &bucket_name(v, i)), ("reason", why)]), n));
        }
    }
    f.counter("bucket_refusals", "Charges refused, by reason.", &refusals);
    let held = |b: &BucketStats| i64::from(b.held_until_ns.is_some());
    f.gauge(
        "bucket_held",
        "1 while a throttle holds the bucket.",
        &per(held),
    );
    let throttles = |b: &BucketStats| u64::from(b.throttles);
    f.counter(
        "bucket_throttles",
        "Throttles (holds) received.",
        &per_c(throttles),
    );
    f.counter(
        "bucket_bans",
        "Bans received.",
        &per_c(|b| u64::from(b.bans)),
    );
    let halted = |b: &BucketStats| i64::from(b.halted);
    let help = "1 while a ban halts the bucket (until clear-halt).";
    f.gauge("bucket_halted", help, &per(halted));
    let help = "The venue's last figure minus the local count at that moment.";
    f.gauge("bucket_drift", help, &per(|b| b.drift));
    if let Some(ls) = v.labels.filter(|s| s.now_ns != 0) {
        let (mut req, mut weight, mut refused, mut answers) = (vec![], vec![], vec![], vec![]);
        for (label, c, _) in &ls.rows {
            let lb = |extra: &[(&str, &str)]| {
                let mut x = vec![("label", label.as_str())];
                x.extend_from_slice(extra);
                l(&x)
            };
            req.push((lb(&[]), c.requests));
            weight.push((lb(&[]), c.weight));
            for (why, n) in [
                ("full", c.refused_full),
                ("held", c.refused_held),
                ("halted", c.refused_halted),
                ("too_big", c.refused_too_big),
            ] {
                refused.push((lb(&[("reason", why)]), n));
            }
            for (verdict, n) in [
                ("done", c.done),
                ("rejected", c.rejected),
                ("throttled", c.throttled),
                ("banned", c.banned),
                ("not_run", c.not_run),
                ("unknown", c.unknown),
                ("clock_skew", c.clock_skew),
            ] {
                answers.push((lb(&[("verdict", verdict)]), n));
            }
        }
        f.counter("label_requests", "Submits by label.", &req);
        f.counter("label_weight", "Cost charged by label.", &weight);
        f.counter("label_refusals", "Local refusals by label.", &refused);
        f.counter("label_answers", "Answers by label and verdict.", &answers);
    }
    if let Some(o) = v.ops.filter(|o| o.now_ns != 0) {
        let g = &o.gateway;
        f.gauge1(
            "ledger_in_flight",
            "Requests in the ledger.",
            o.in_flight as i64,
        );
        for (name, help, n) in [
            ("requests_sent", "Requests handed to the transport.", g.sent),
            ("resends", "Re-sends of what surely did not run.", g.resent),
            ("expired", "Requests whose deadline passed.", g.expired),
            ("unknown", "Writes whose outcome was unknown.", g.unknown),
            ("reconcile_queries", "Reconcile queries sent.", g.queries),
        ] {
            f.counter1(name, help, n);
        }
        f.counter(
            "reconciles",
            "Unknown outcomes settled by a query.",
            &[
                (l(&[("outcome", "found")]), g.reconciled_found),
                (
                    l(&[("outcome", "not_found")]),
                    g.reconciled.saturating_sub(g.reconciled_found),
                ),
            ],
        );
        let help = "Unknown outcomes the venue's answers could not settle (Unresolved)";
        f.counter1("unresolved", help, g.unresolved);
        let help = "Unresolved orders that appeared after all (Late)";
        f.counter1("late", help, g.late);
        f.counter(
            "answers",
            "The gateway's answers by verdict.",
            &[
                (l(&[("verdict", "applied")]), g.applied),
                (l(&[("verdict", "rejected")]), g.rejected),
                (l(&[("verdict", "throttled")]), g.throttled),
                (l(&[("verdict", "banned")]), g.banned),
                (l(&[("verdict", "clock_skew")]), g.clock_skew),
            ],
        );
        let attached = per_client(o, |c| i64::from(c.attached));
        f.gauge(
            "client_attached",
            "1 while the client is attached.",
            &attached,
        );
        let share = per_client(o, |_| v.share.unwrap_or(1.0));
        let help = "The most of each bucket the client may use in a window.";
        f.gauge_f("client_share_ratio", help, &share);
        type Get = fn(&ClientStats) -> u64;
        let calls: [(&str, &str, Get); 6] = [
            ("client_submits", "Calls taken from its ring.", |s| {
                s.submitted
            }),
            ("client_accepted", "Calls accepted.", |s| s.accepted),
            ("client_limited", "Calls the budget refused.", |s| s.limited),
            ("client_over_share", "Calls refused by its share.", |s| {
                s.over_share
            }),
            ("client_finals", "Final events delivered.", |s| s.finals),
            (
                "client_events_dropped",
                "Events that found its ring full (must stay 0).",
                |s| s.lost_events,
            ),
        ];
        for (name, help, get) in calls {
            f.counter(name, help, &per_client(o, |c| get(&c.stats)));
        }
        if let Some(a) = o.address {
            for (name, help, n) in [
                (
                    "address_requests_used",
                    "Requests counted against the address.",
                    a.used,
                ),
                (
                    "address_requests_cap",
                    "The address's cap, earned by volume.",
                    a.cap,
                ),
                (
                    "address_requests_surplus",
                    "Requests bought for the address.",
                    a.surplus,
                ),
            ] {
                f.gauge1(name, help, i64::try_from(n).unwrap_or(i64::MAX));
            }
            if let Some(h) = a.forecast_hours {
                f.gauge_f(
                    "address_budget_forecast_hours",
                    "Hours until the address budget runs out at the recent pace.",
                    &[(Labels::new(), h)],
                );
            }
        }
        if o.lease != ergon_gateway::observe::Lease::Absent {
            let lost = i64::from(o.lease == ergon_gateway::observe::Lease::Lost);
            f.gauge1("lease_lost", "1 when the etcd lease is lost.", lost);
        }
    }
    // The dead man's switch, on every gateway: where none publishes (a venue
    // without one, protection off, or the loop not yet published), both gauges
    // are 0 with a `why`, so dashboards and alerts see every gateway.
    let protection = v
        .ops
        .filter(|o| o.now_ns != 0)
        .map_or(Protection::Absent, |o| o.protection);
    match protection {
        Protection::Absent => {
            let why = if v.ops.is_some_and(|o| o.now_ns != 0) {
                "no_switch"
            } else {
                "not_published"
            };
            let zero = [(l(&[("why", why)]), 0)];
            f.gauge(ARMED.0, ARMED.1, &zero);
            f.gauge(LAPSED.0, LAPSED.1, &zero);
        }
        Protection::Armed { armed_until_ns } | Protection::Lapsed { armed_until_ns } => {
            let lapsed = matches!(protection, Protection::Lapsed { .. });
            f.gauge1(ARMED.0, ARMED.1, i64::from(!lapsed));
            f.gauge1(LAPSED.0, LAPSED.1, i64::from(lapsed));
            f.gauge_f(
                "protection_armed_until_seconds",
                "The switch's end on the loop's clock.",
                &[(Labels::new(), armed_until_ns as f64 / 1e9)],
            );
        }
    }
    let healthy = i64::from(v.reasons.is_empty());
    f.gauge1("healthy", "1 when /health answers 200.", healthy);
    let reasons: Vec<_> = v
        .reasons
        .iter()
        .map(|r| {
            (
                l(&[("kind", r.kind()), ("bucket", r.bucket().unwrap_or(""))]),
                1,
            )
        })
        .collect();
    f.gauge(
        "health_reason",
        "One series per health reason now.",
        &reasons,
    );
    if let Some(age) = v.age_secs {
        f.gauge_f(
            "snapshot_age_seconds",
            "Since the loop last published.",
            &[(Labels::new(), age)],
        );
    }
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &reg);
    out
}

/// What the metrics thread reads, and how it judges health.
pub struct Source {
    /// The loop's publications.
    pub observed: ObservedReader,
    /// The counters by label, where published.
    pub labels: Option<LabelReader>,
    /// Bucket names, indexed like the budget's ids.
    pub names: Vec<String>,
    /// Health thresholds.
    pub health: HealthConfig,
    /// Each client's share ceiling (`--share`), if any.
    pub share: Option<f64>,
    /// The gateway's private runtime directory: the health socket file goes
    /// there (`ergon_gateway::shm::rundir::health_file`). None: the abstract
    /// name only.
    pub runtime_dir: Option<std::path::PathBuf>,
}

impl core::fmt::Debug for Source {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Source")
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

struct State {
    src: Source,
    monitor: HealthMonitor,
    t0: Instant,
    /// Loop time of the last publication, and when this thread first saw it.
    last: (i64, Instant),
    buckets: Vec<BucketStats>,
    ops: OpsSnapshot,
    reasons: Vec<Reason>,
}

impl State {
    fn sample(&mut self) {
        let snap = self.src.observed.stats.read();
        self.buckets = snap.buckets().to_vec();
        self.ops = self.src.observed.read_ops();
        if snap.now_ns != self.last.0 {
            self.last = (snap.now_ns, Instant::now());
        }
        let mono = self.t0.elapsed().as_nanos() as i64;
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        self.reasons = self.monitor.observe(mono, wall, &self.buckets, &self.ops);
    }

    /// The answer to a complete HTTP request.
    fn answer(&mut self, ask: http::Ask<'_>) -> http::Answer {
        let text = "text/plain; charset=utf-8";
        match ask {
            http::Ask::Metrics(head) => {
                let format = Format::negotiate(exposition::header(head, "accept"));
                let body = self.metrics();
                let body = match format {
                    Format::OpenMetrics => body,
                    Format::Classic => exposition::to_classic(&body),
                };
                ("200 OK", format.content_type(), body)
            }
            http::Ask::Health => {
                self.sample();
                let status = if self.reasons.is_empty() {
                    "200 OK"
                } else {
                    "503 Service Unavailable"
                };
                (status, text, health::body(&self.reasons))
            }
            http::Ask::NotFound => ("404 Not Found", text, "not found\n".to_string()),
        }
    }

    fn metrics(&mut self) -> String {
        self.sample();
        let labels = self.src.labels.as_ref().map(LabelReader::read);
        render(&View {
            names: &self.src.names,
            buckets: &self.buckets,
            ops: Some(&self.ops),
            labels: labels.as_ref(),
            reasons: &self.reasons,
            age_secs: (self.last.0 != 0).then(|| self.last.1.elapsed().as_secs_f64()),
            share: self.src.share,
        })
    }
}

/// The running metrics and health thread.
#[derive(Debug)]
pub struct MetricsThread {
    /// Where `/metrics` is served, if `--metrics` was given (the port chosen when
    /// asked for port 0).
    pub addr: Option<SocketAddr>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl MetricsThread {
    /// Stops the thread and waits for it (it notices within [`SAMPLE_EVERY`]).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The health socket file in the runtime directory `dir` (its owner's alone,
/// 0600), a stale one of this uid replaced, anything else refused.
fn health_file_listener(dir: &std::path::Path, name: &str) -> io::Result<UnixListener> {
    let file = ergon_gateway::shm::rundir::health_file(name);
    let shown = dir.join(&file);
    let fail = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", shown.display()));
    let pd = crate::shm::PrivateDir::open(dir).map_err(fail)?;
    // Its errors name the path already.
    pd.clear_socket(&file)?;
    let l = UnixListener::bind(ergon_gateway::shm::os::at_path(pd.fd(), &file)).map_err(fail)?;
    ergon_gateway::shm::os::chmod_at(pd.fd(), &file, 0o600).map_err(fail)?;
    Ok(l)
}

/// The abstract socket name `--stats` asks for the health lines.
pub fn health_socket(name: &str) -> String {
    format!("ergon-gateway-health/{name}")
}

/// Starts the thread: `/metrics` and `/health` on `addr` if given, and the health
/// lines for `--stats` on `@ergon-gateway-health/NAME`.
pub fn spawn(name: &str, addr: Option<SocketAddr>, src: Source) -> io::Result<MetricsThread> {
    if addr.is_some_and(|a| a.ip().is_unspecified()) {
        eprintln!(
            "ergon-gateway: warning: --metrics on {}: every host that reaches this port reads the client names and usage in /metrics; bind a loopback or private address",
            addr.map(|a| a.to_string()).unwrap_or_default()
        );
    }
    let tcp = addr.map(TcpListener::bind).transpose()?;
    let bound = tcp.as_ref().map(TcpListener::local_addr).transpose()?;
    let mut unix = Vec::with_capacity(2);
    if let Some(dir) = &src.runtime_dir {
        unix.push(health_file_listener(dir, name)?);
    }
    {
        use std::os::linux::net::SocketAddrExt;
        let a = std::os::unix::net::SocketAddr::from_abstract_name(health_socket(name))?;
        match UnixListener::bind_addr(&a) {
            Ok(l) => unix.push(l),
            // Anyone can take an abstract name first: that must not keep the
            // gateway from trading. `--stats` refuses a holder of another uid,
            // and finds the socket file first.
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                let served = match src.runtime_dir.is_some() {
                    true => "--stats reads the health lines from the runtime directory's socket",
                    false => "--stats shows no health lines",
                };
                eprintln!(
                    "ergon-gateway: warning: @{} is taken{}: {served}",
                    health_socket(name),
                    holder(&a).map_or(String::new(), |u| format!(" by uid {u}"))
                );
            }
            Err(e) => return Err(e),
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let state = State {
        monitor: HealthMonitor::new(src.health, src.names.clone()),
        src,
        t0: Instant::now(),
        last: (0, Instant::now()),
        buckets: Vec::new(),
        ops: OpsSnapshot::default(),
        reasons: Vec::new(),
    };
    let handle = std::thread::Builder::new()
        .name("ergon-metrics".into())
        .spawn(move || serve(tcp, unix, state, &flag))?;
    Ok(MetricsThread {
        addr: bound,
        stop,
        handle: Some(handle),
    })
}

fn serve(tcp: Option<TcpListener>, unix: Vec<UnixListener>, mut st: State, stop: &AtomicBool) {
    let mut http = match tcp.map(http::Server::new).transpose() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("ergon-gateway: warning: --metrics: {e}: /metrics is not served");
            None
        }
    };
    let mut fds = Vec::with_capacity(2 + http::MAX_CONNS);
    let mut next = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        fds.clear();
        fds.extend(unix.iter().map(|u| libc::pollfd {
            fd: u.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }));
        if let Some(h) = &http {
            h.poll_fds(&mut fds);
        }
        // Until the next sample, or the next connection's deadline if sooner.
        let now = Instant::now();
        let wake = http
            .as_ref()
            .and_then(http::Server::next_deadline)
            .map_or(next, |d| d.min(next));
        let ms = wake.saturating_duration_since(now).as_millis().min(1000) as libc::c_int;
        // SAFETY: `fds` is a live array of pollfd of the length passed.
        #[allow(unsafe_code)]
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if Instant::now() >= next {
            st.sample();
            next = Instant::now() + SAMPLE_EVERY;
        }
        for (u, p) in unix.iter().zip(&fds) {
            if n <= 0 || p.revents == 0 {
                continue;
            }
            let peer = u.accept().ok().filter(|(s, _)| same_user(s));
            if let Some((mut s, _)) = peer {
                st.sample();
                let _ = s.set_write_timeout(Some(IO_TIMEOUT));
                let _ = s.write_all(health::body(&st.reasons).as_bytes());
            }
        }
        if let Some(h) = &mut http {
            // Deadlines pass without readiness too: handled on every turn.
            h.handle(&fds[unix.len()..], Instant::now(), &mut |ask| {
                st.answer(ask)
            });
        }
    }
}

/// Whether the peer of `s` runs as this process's user (the health lines are for
/// the gateway's owner, as `--stats` is).
fn same_user(s: &UnixStream) -> bool {
    // SAFETY: geteuid cannot fail.
    #[allow(unsafe_code)]
    let me = unsafe { libc::geteuid() };
    peer_uid(s) == Some(me)
}

/// The uid of the process listening on the abstract address `a`, if one is.
fn holder(a: &std::os::unix::net::SocketAddr) -> Option<u32> {
    peer_uid(&UnixStream::connect_addr(a).ok()?)
}

/// The uid the kernel recorded for the peer of `s` (`SO_PEERCRED`).
#[allow(unsafe_code)]
fn peer_uid(s: &UnixStream) -> Option<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
    };
    let mut len = core::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are live, `len` is the size of `cred`.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(cred.uid)
}

/// The health lines of the gateway `name`, run by `gateway_uid`, for `--stats`
/// (each `health ...`), or None if it serves none (an older gateway, none
/// running, or a process of another uid holding the name: nothing of it is read).
pub fn read_health(name: &str, gateway_uid: u32) -> Option<String> {
    read_health_in(None, name, gateway_uid)
}

/// [`read_health`] of the gateway whose runtime directory is `dir`: its health
/// socket file there first (None: where the clients look,
/// `ergon_gateway::shm::rundir::client_dirs`), if a socket of `gateway_uid`;
/// then the abstract name.
pub fn read_health_in(
    dir: Option<&std::path::Path>,
    name: &str,
    gateway_uid: u32,
) -> Option<String> {
    use ergon_gateway::shm::{os, rundir};
    use std::os::linux::net::SocketAddrExt;
    let file = rundir::health_file(name);
    let in_dir = rundir::client_dirs(name, gateway_uid, dir)
        .into_iter()
        .find_map(|d| {
            let d = os::open_dir(&d).ok()?;
            let (mode, uid) = os::stat_at(d.as_raw_fd(), &file).ok()??;
            (mode & libc::S_IFMT == libc::S_IFSOCK && uid == gateway_uid).then_some(())?;
            UnixStream::connect(os::at_path(d.as_raw_fd(), &file)).ok()
        })
        .filter(|s| peer_uid(s) == Some(gateway_uid));
    let s = match in_dir {
        Some(s) => s,
        None => {
            let a = std::os::unix::net::SocketAddr::from_abstract_name(health_socket(name)).ok()?;
            UnixStream::connect_addr(&a).ok()?
        }
    };
    if peer_uid(&s) != Some(gateway_uid) {
        return None;
    }
    s.set_read_timeout(Some(IO_TIMEOUT)).ok()?;
    let mut text = String::new();
    s.take(64 * 1024).read_to_string(&mut text).ok()?;
    Some(text.lines().map(|l| format!("health {l}\n")).collect())
}

/// The command line's flags for metrics and health (`--metrics ADDR`,
/// `--degraded-pct P`, `--degraded-secs S`, `--unreachable-secs S`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpsFlags {
    /// Where to serve `/metrics` and `/health` (none: not served over HTTP).
    pub metrics: Option<SocketAddr>,
    /// Health thresholds.
    pub health: HealthConfig,
}

impl OpsFlags {
    /// Whether `flag` is one of these.
    pub fn takes(flag: &str) -> bool {
        matches!(
            flag,
            "--metrics" | "--degraded-pct" | "--degraded-secs" | "--unreachable-secs"
        )
    }

    /// Applies `flag` with its value; the error names the flag and the value.
    pub fn set(&mut self, flag: &str, v: &str) -> Result<(), String> {
        let num = |lo: f64, hi: f64| crate::config::flag_number(flag, v, lo, hi);
        match flag {
            "--metrics" => {
                self.metrics = Some(v.parse().map_err(|_| {
                    format!("{flag} {v:?}: expected an address and port, as 127.0.0.1:9100")
                })?)
            }
            "--degraded-pct" => self.health.degraded_pct = num(0.0, 100.0)?,
            "--degraded-secs" => self.health.degraded_secs = num(0.1, 86_400.0)?,
            "--unreachable-secs" => self.health.unreachable_secs = num(0.1, 86_400.0)?,
            _ => return Err(format!("unknown argument {flag:?}")),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(esc("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
