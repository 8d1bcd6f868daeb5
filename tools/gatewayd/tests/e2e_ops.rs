//! Operating the gateway, end to end: the `ergon-gateway` binary with `--metrics`
//! and a config file, against the venue emulator (in this process, on loopback),
//! a strategy attached over shared memory from this process.
//!
//! The scripted sequence: healthy at start; another sender's weight makes the
//! venue answer a 429; a client flooding orders past the order limit is refused
//! locally until `/health` says "degraded: budget" for that bucket, and 200 again
//! when it stops; a ban halts the gateway (`/health` 503 "halted", `--stats` prints
//! the same line) until `clear-halt`; the emulator stopped makes the venue
//! unreachable. Each `/metrics` scrape is parsed back by the format's rules
//! (`# TYPE` and `# HELP` before a family's samples, counters `_total`, label
//! syntax, one `# EOF` at the end) and each family checked for its values.
//!
//! No test sleeps to let time pass for a verdict: each polls `/health` or
//! `/metrics` with a bounded deadline.

#[path = "common/ready.rs"]
mod ready;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use ergon_core::Class;
use ergon_gateway::shm::{Call, ShmClient, ShmEvent};
use ergon_venue_sim::{Config, Interval, LimitType, RateLimit, Server};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, NewOrder, OrderType, Side, Symbol, TimeInForce,
};

const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn sim() -> Server {
    let mut c = Config::binance_spot();
    c.rate_limits = vec![
        RateLimit::new(LimitType::RequestWeight, Interval::Second, 1, 1000),
        RateLimit::new(LimitType::Orders, Interval::Second, 1, 5),
        RateLimit::new(LimitType::Orders, Interval::Day, 1, 1_000_000),
        RateLimit::new(LimitType::RawRequests, Interval::Minute, 5, 1_000_000),
    ];
    Server::start(c).expect("emulator")
}

struct Gw {
    child: Child,
    _out: BufReader<ChildStdout>,
    metrics: SocketAddr,
    dir: std::path::PathBuf,
}

impl Drop for Gw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn unique(test: &str) -> String {
    format!("ops-{test}-{}", std::process::id())
}

/// The gateway, its settings from a config file but for the name, given as a flag
/// (which overrides the file's).
fn gateway(s: &Server, name: &str) -> Gw {
    let c = s.config();
    let a = &c.accounts[0];
    let dir = std::env::temp_dir().join(format!("ergon-{name}"));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("gateway.toml");
    let toml = format!(
        "venue = \"binance-spot\"\nbase = \"http://{}\"\napi-key = \"{}\"\napi-secret = \"{}\"\n\
         name = \"from-the-file\"\njournal = \"{}\"\nmetrics = \"127.0.0.1:0\"\n\
         degraded-pct = 50\ndegraded-secs = 1\nunreachable-secs = 1.5\n",
        s.addr(),
        a.api_key,
        a.secret,
        dir.join("journal").display()
    );
    std::fs::write(&file, toml).expect("write");
    // It holds the secret: the gateway refuses it unless private.
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ergon-gateway"))
        .args(["--config", file.to_str().expect("path"), "--name", name])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ergon-gateway");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    let metrics = loop {
        line.clear();
        assert!(
            err.read_line(&mut line).expect("stderr") > 0,
            "no metrics line"
        );
        if let Some(url) = line.trim().strip_prefix("metrics http://") {
            break url.trim_end_matches("/metrics").parse().expect("addr");
        }
    };
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let out = ready::ready(&mut child, name)
        .unwrap_or_else(|e| panic!("the gateway did not start: {e:?}"));
    Gw {
        child,
        _out: out,
        metrics,
        dir,
    }
}

/// One request; the status code and the body.
fn http(addr: SocketAddr, raw: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(raw).expect("write");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    let code = head
        .split(' ')
        .nth(1)
        .expect("status")
        .parse()
        .expect("code");
    (code, body.to_string())
}

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    http(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
    )
}

/// A sample's name and labels, as `name{k="v",...}` with labels sorted.
type Key = String;

/// Parses an OpenMetrics text exposition by the format's rules, panicking on a
/// breach; the samples by `name{sorted labels}`.
fn parse(text: &str) -> BTreeMap<Key, f64> {
    let name_ok = |n: &str| {
        !n.is_empty()
            && n.chars().enumerate().all(|(i, c)| {
                c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit())
            })
    };
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut helps = std::collections::BTreeSet::new();
    let mut out = BTreeMap::new();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.last(), Some(&"# EOF"), "ends with # EOF");
    assert!(text.ends_with("# EOF\n"));
    for line in &lines[..lines.len() - 1] {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut p = rest.splitn(3, ' ');
            let (kind, fam, what) = (p.next(), p.next(), p.next());
            let fam = fam.expect("a family").to_string();
            assert!(name_ok(&fam), "{line}");
            match kind {
                Some("TYPE") => {
                    let t = what.expect("a type");
                    assert!(["counter", "gauge"].contains(&t), "{line}");
                    assert!(types.insert(fam, t.into()).is_none(), "one TYPE: {line}");
                }
                Some("HELP") => assert!(helps.insert(fam), "one HELP: {line}"),
                Some("UNIT") => {}
                _ => panic!("unknown comment {line}"),
            }
            continue;
        }
        assert!(*line != "# EOF", "one # EOF, at the end");
        let (series, value) = line.rsplit_once(' ').expect("name and value");
        let value: f64 = value.parse().expect("a number");
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (n, l.strip_suffix('}').expect("labels close")),
            None => (series, ""),
        };
        assert!(name_ok(name), "{line}");
        let fam = types
            .keys()
            .filter(|f| name == f.as_str() || name.strip_prefix(f.as_str()) == Some("_total"))
            .max_by_key(|f| f.len())
            .unwrap_or_else(|| panic!("a sample before its # TYPE: {line}"));
        assert!(helps.contains(fam), "# HELP for {fam}");
        if types[fam] == "counter" {
            assert!(name.ends_with("_total"), "a counter's sample: {line}");
            assert!(value >= 0.0);
        }
        // Labels: k="v" pairs, comma separated, values with \\ \" \n escapes.
        let mut pairs = Vec::new();
        let mut rest = labels;
        while !rest.is_empty() {
            let (k, r) = rest.split_once("=\"").expect("k=\"");
            assert!(name_ok(k) && !k.contains(':'), "label name {k}: {line}");
            let mut v = String::new();
            let mut chars = r.char_indices();
            let end = loop {
                match chars.next().expect("a closing quote") {
                    (_, '\\') => match chars.next().expect("an escape") {
                        (_, 'n') => v.push('\n'),
                        (_, c @ ('\\' | '"')) => v.push(c),
                        (_, c) => panic!("bad escape \\{c}: {line}"),
                    },
                    (i, '"') => break i,
                    (_, c) => v.push(c),
                }
            };
            pairs.push(format!("{k}=\"{v}\""));
            rest = &r[end + 1..];
            rest = rest.strip_prefix(',').unwrap_or(rest);
        }
        pairs.sort();
        let key = format!("{name}{{{}}}", pairs.join(","));
        assert!(
            out.insert(key, value).is_none(),
            "one sample per series: {line}"
        );
    }
    out
}

/// `/metrics` asked for in OpenMetrics (without an `Accept`, the classic format).
fn get_openmetrics(addr: SocketAddr) -> (u16, String) {
    http(
        addr,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n",
    )
}

fn scrape(gw: &Gw) -> BTreeMap<Key, f64> {
    let (code, body) = get_openmetrics(gw.metrics);
    assert_eq!(code, 200, "{body}");
    parse(&body)
}

/// Sum of the samples of `name` whose labels contain every `want` pair.
fn sum(m: &BTreeMap<Key, f64>, name: &str, want: &[(&str, &str)]) -> f64 {
    m.iter()
        .filter(|(k, _)| k.starts_with(&format!("{name}{{")))
        .filter(|(k, _)| {
            want.iter()
                .all(|(a, b)| k.contains(&format!("{a}=\"{b}\"")))
        })
        .map(|(_, v)| v)
        .sum()
}

/// Polls `f` until it returns Some, for at most `secs`.
fn until<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        // What it polls (/metrics, /health, the venue) is published on its own time: no hand-off.
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn health_with(gw: &Gw, code: u16, needle: &str) -> String {
    until(15, needle, || {
        let (c, body) = get(gw.metrics, "/health");
        (c == code && body.contains(needle)).then_some(body)
    })
}

fn order(id: ClientOrderId) -> NewOrder<'static> {
    NewOrder {
        symbol: Symbol::new("BTCUSDT").expect("symbol"),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Decimal::new("49000.00").ok(),
        quantity: Decimal::new("0.001").expect("decimal"),
        client_order_id: id,
        reduce_only: false,
    }
}

/// Submits one order and reads events until its final one; whether it was
/// refused locally (Limited).
fn one_order(c: &mut ShmClient, n: &mut u64) -> bool {
    *n += 1;
    let id = c.next_client_order_id().expect("id");
    c.submit(&Call::NewOrder(order(id)), Class::Normal, *n)
        .expect("submit");
    until(10, "a final event", || {
        c.wait(50);
        let mut limited = None;
        while let Some((ev, _)) = c.poll() {
            if ev.is_final() {
                limited = Some(matches!(ev, ShmEvent::Limited { .. }));
            }
        }
        limited
    })
}

fn stats_text(name: &str) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_ergon-gateway"))
        .args(["--stats", "--name", name, "--once"])
        .output()
        .expect("run");
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn metrics_and_health_follow_a_429_a_refusal_flood_a_ban_and_a_dead_venue() {
    let s = sim();
    let name = unique("seq");
    let gw = gateway(&s, &name);

    // Healthy at start; the published snapshot is there.
    health_with(&gw, 200, "ok");
    let m = until(10, "a first publication", || {
        let m = scrape(&gw);
        m.contains_key("ergon_ledger_in_flight{}").then_some(m)
    });
    assert_eq!(m["ergon_healthy{}"], 1.0);
    assert_eq!(m["ergon_bucket_limit{bucket=\"ORDERS_1S\"}"], 5.0);
    assert_eq!(
        m["ergon_bucket_limit{bucket=\"REQUEST_WEIGHT_1S\"}"],
        1000.0
    );
    assert_eq!(sum(&m, "ergon_bucket_halted", &[]), 0.0);
    assert!(
        m.contains_key("ergon_label_requests_total{label=\"-\"}"),
        "{m:?}"
    );
    assert!(stats_text(&name).contains("\nhealth ok\n"));

    // It asks for the open-orders polls (opt-in since issue 47): they are the
    // traffic that tells, at the end, that the venue is gone.
    let asks = ergon_gateway::shm::AttachOptions::new().open_orders(true);
    let mut c = ShmClient::attach_with(&name, "quoter\"1", asks).expect("attach");
    let mut n = 0;
    assert!(!one_order(&mut c, &mut n), "the first order is sent");

    // A 429: another sender's weight on the IP, then an order.
    s.add_weight(LOCAL, 5_000);
    one_order(&mut c, &mut n);
    let m = until(10, "a 429 in the metrics", || {
        let m = scrape(&gw);
        (sum(&m, "ergon_answers_total", &[("verdict", "throttled")]) >= 1.0).then_some(m)
    });
    assert!(sum(&m, "ergon_bucket_throttles_total", &[]) >= 1.0, "{m:?}");
    let throttled = m["ergon_answers_total{verdict=\"throttled\"}"] as u64;
    assert!(s.report().throttled >= throttled, "the venue's 429s");

    // Refusals: orders far past 5 a second, until health says degraded.
    let body = until(20, "degraded: budget", || {
        for _ in 0..5 {
            one_order(&mut c, &mut n);
        }
        let (code, body) = get(gw.metrics, "/health");
        if code != 503 || !body.contains("degraded: budget: bucket ORDERS_1S") {
            return None;
        }
        // The same reason, as a series (the window may have moved on: try again).
        let m = scrape(&gw);
        let reason = "ergon_health_reason{bucket=\"ORDERS_1S\",kind=\"degraded_budget\"}";
        (m.get(reason) == Some(&1.0) && m["ergon_healthy{}"] == 0.0).then_some(body)
    });
    assert!(
        body.lines().all(|l| l.starts_with("degraded: budget: ")),
        "{body}"
    );
    // The loop publishes every 100 ms: the scrape that has every submit.
    let client = [("client", "quoter\"1")];
    let m = until(10, "every submit published", || {
        let m = scrape(&gw);
        (sum(&m, "ergon_client_submits_total", &client) == n as f64).then_some(m)
    });
    let refused = sum(
        &m,
        "ergon_bucket_refusals_total",
        &[("bucket", "ORDERS_1S")],
    );
    assert!(refused >= 1.0, "{m:?}");
    assert_eq!(sum(&m, "ergon_client_attached", &client), 1.0);
    assert!(sum(&m, "ergon_client_limited_total", &client) >= 1.0);
    assert_eq!(sum(&m, "ergon_client_events_dropped_total", &client), 0.0);
    assert!(sum(&m, "ergon_label_refusals_total", &[("label", "-")]) >= refused);
    // It clears once the flood stops.
    health_with(&gw, 200, "ok");

    // A ban: halted until a person clears it; --stats says the same.
    s.ban(LOCAL, 300);
    one_order(&mut c, &mut n);
    let body = health_with(&gw, 503, "halted: bucket ");
    let bucket = body
        .lines()
        .find_map(|l| l.strip_prefix("halted: bucket "))
        .and_then(|l| l.split(' ').next())
        .expect("a bucket")
        .to_string();
    assert!(stats_text(&name).contains(&format!("\nhealth halted: bucket {bucket} since ")));
    let m = scrape(&gw);
    assert_eq!(
        m[&format!("ergon_bucket_halted{{bucket=\"{bucket}\"}}")],
        1.0
    );
    assert!(m[&format!("ergon_bucket_bans_total{{bucket=\"{bucket}\"}}")] >= 1.0);
    assert!(m["ergon_answers_total{verdict=\"banned\"}"] >= 1.0);
    assert_eq!(m["ergon_healthy{}"], 0.0);
    // Cleared only once the venue's own ban is over (else the next request is
    // banned again).
    until(10, "the venue's ban over", || {
        let (code, _) = http(
            s.addr(),
            b"GET /api/v3/ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        (code != 418).then_some(())
    });
    until(15, "the halt cleared", || {
        let _ = Command::new(env!("CARGO_BIN_EXE_ergon-gateway"))
            .args(["clear-halt", &bucket, "--name", &name])
            .output();
        let (code, _) = get(gw.metrics, "/health");
        (code == 200).then_some(())
    });
    let m = scrape(&gw);
    assert_eq!(sum(&m, "ergon_bucket_halted", &[]), 0.0);
    assert!(m["ergon_ledger_in_flight{}"] >= 0.0);
    assert!(m.contains_key("ergon_reconciles_total{outcome=\"found\"}"));
    assert!(m.contains_key("ergon_resends_total{}"));
    assert!(m.contains_key("ergon_unresolved_total{}"));
    assert!(m.contains_key("ergon_late_total{}"));
    // No --share: each client may use a whole bucket.
    let shares: Vec<f64> = m
        .iter()
        .filter(|(k, _)| k.starts_with("ergon_client_share_ratio{"))
        .map(|(_, v)| *v)
        .collect();
    assert!(
        !shares.is_empty() && shares.iter().all(|&v| v == 1.0),
        "{shares:?}"
    );

    // The venue gone: requests go out (the polls the client asked for),
    // nothing answers.
    s.stop();
    health_with(&gw, 503, "venue unreachable: ");
    drop(c);
    // And the transport backs off: connects fail in a row, each wait about
    // double the last (it retried every 20 ms: 486 attempts in 10 s). Once the
    // next attempt is half a second away, only a handful have failed.
    let said = |body: &str| -> Option<(u32, f64)> {
        let line = body.lines().find(|l| l.starts_with("reconnecting: "))?;
        let failures = line["reconnecting: ".len()..]
            .split(' ')
            .next()?
            .parse()
            .ok()?;
        let next = line
            .split("next attempt in ")
            .nth(1)?
            .strip_suffix(" s")?
            .parse()
            .ok()?;
        Some((failures, next))
    };
    let (failures, next) = until(15, "a backoff of half a second", || {
        let (_, body) = get(gw.metrics, "/health");
        said(&body).filter(|&(_, next)| next >= 0.5)
    });
    assert!(
        (2..=10).contains(&failures),
        "{failures} failures, next in {next} s"
    );
    drop(gw);
}

#[test]
fn the_http_side_answers_only_metrics_and_health_and_survives_bad_input() {
    let s = sim();
    let gw = gateway(&s, &unique("http"));
    assert_eq!(get(gw.metrics, "/nope").0, 404);
    assert_eq!(
        http(gw.metrics, b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n").0,
        404
    );
    assert_eq!(http(gw.metrics, b"\x00\x01garbage\r\n\r\n").0, 400);
    // A request head past the bound is refused, not buffered.
    let mut big = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
    big.extend(vec![b'a'; 20_000]);
    let mut st = TcpStream::connect(gw.metrics).expect("connect");
    let _ = st.write_all(&big);
    let mut text = String::new();
    let _ = st.read_to_string(&mut text);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    // The buckets are there once the loop published (the idle connection below
    // used to hold the answer for a second, long enough for that, on the code
    // that served one connection at a time).
    until(10, "a first publication", || {
        get(gw.metrics, "/metrics")
            .1
            .contains("ergon_bucket_used")
            .then_some(())
    });
    // A client that connects and says nothing does not stop the others.
    let _idle = TcpStream::connect(gw.metrics).expect("connect");
    let (code, body) = http(
        gw.metrics,
        b"GET /metrics?x=1 HTTP/1.1\r\nAccept: application/openmetrics-text\r\n\r\n",
    );
    assert_eq!(code, 200);
    parse(&body);
    assert!(body.contains("# TYPE ergon_bucket_used gauge"));
}

#[test]
fn a_config_file_with_an_unknown_key_is_refused_with_its_line() {
    let dir = std::env::temp_dir().join(unique("cfg"));
    std::fs::create_dir_all(&dir).expect("dir");
    let bin = env!("CARGO_BIN_EXE_ergon-gateway");
    for (text, want) in [
        (
            "name = \"x\"\nmax-client = 4\n",
            ":2: key `max-client`: unknown field",
        ),
        (
            "name = \"x\"\n\ncpu = \"two\"\n",
            ":3: key `cpu`: invalid type",
        ),
        ("share = 500\n", ":1: key `share`: --share \"500\""),
        ("metrics = \"localhost\"\n", ":1: key `metrics`: --metrics"),
    ] {
        let f = dir.join("g.toml");
        std::fs::write(&f, text).expect("write");
        let o = Command::new(bin)
            .args(["--config", f.to_str().expect("path"), "--name", "x"])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(2), "{text}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{text}: {err}");
    }
    std::fs::remove_dir_all(&dir).expect("rm");
}

/// The whole answer to `raw`: head and body.
fn http_raw(addr: SocketAddr, raw: &[u8]) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(raw).expect("write");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    (head.to_string(), body.to_string())
}

/// `promtool check metrics` (Prometheus's own linter, Debian's 2.42) on a scrape
/// in each format the `Accept` header chooses: the classic 0.0.4 text without one
/// (as `curl` and older scrapers ask), OpenMetrics when asked. Where promtool is
/// missing the test says so and checks the rest, unless
/// `ERGON_REQUIRE_PROMTOOL=1` (as `.ci/run` sets), which fails it.
#[test]
fn promtool_accepts_a_scrape_in_each_format() {
    let s = sim();
    let name = unique("promtool");
    let gw = gateway(&s, &name);
    until(10, "a first publication", || {
        scrape(&gw)
            .contains_key("ergon_ledger_in_flight{}")
            .then_some(())
    });
    let asks = [
        ("", "text/plain; version=0.0.4; charset=utf-8"),
        (
            "Accept: text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n",
            "text/plain; version=0.0.4; charset=utf-8",
        ),
        (
            "Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
    ];
    let promtool = Command::new("promtool").arg("--version").output().is_ok();
    if !promtool {
        assert!(
            std::env::var_os("ERGON_REQUIRE_PROMTOOL").is_none(),
            "ERGON_REQUIRE_PROMTOOL is set and promtool is missing"
        );
        eprintln!("skipped: no promtool (Debian: apt-get install prometheus)");
    }
    for (accept, ctype) in asks {
        let req = format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{accept}\r\n");
        let (head, body) = http_raw(gw.metrics, req.as_bytes());
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.contains(&format!("Content-Type: {ctype}")), "{head}");
        assert!(!body.contains("{}"), "no empty label sets: {body}");
        assert!(!body.contains(".."), "no HELP ending in '..': {body}");
        assert!(
            body.contains("ergon_protection_armed{why=\"no_switch\"} 0"),
            "the switch's gauges on a venue without one: {body}"
        );
        let classic = ctype.starts_with("text/plain");
        assert_eq!(body.ends_with("# EOF\n"), !classic, "{body}");
        assert_eq!(
            body.contains("# TYPE ergon_requests_sent_total counter"),
            classic,
            "{body}"
        );
        if !promtool {
            continue;
        }
        let (ok, said) = run_promtool(&["check", "metrics"], &body);
        if classic {
            assert!(ok, "promtool check metrics ({ctype}): {said}\n{body}");
            continue;
        }
        // promtool 2.42 lints only the classic format (expfmt's text parser): on
        // OpenMetrics all it may say is that a counter's `_total` samples have no
        // HELP of their own (OpenMetrics names the family `x`, not `x_total`).
        for line in said.lines().filter(|l| !l.trim().is_empty()) {
            let base = line
                .strip_suffix(" no help text")
                .and_then(|n| n.strip_suffix("_total"))
                .unwrap_or_else(|| panic!("promtool check metrics: {said}"));
            assert!(body.contains(&format!("# TYPE {base} counter")), "{line}");
        }
        // Prometheus's own OpenMetrics parser, as promtool's backfill runs it (it
        // wants a timestamp on each sample: one is appended).
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs();
        let stamped: String = body
            .lines()
            .map(|l| match l.starts_with('#') {
                true => format!("{l}\n"),
                false => format!("{l} {ts}\n"),
            })
            .collect();
        let dir = gw.dir.join("backfill");
        let file = gw.dir.join("scrape.om");
        std::fs::write(&file, stamped).expect("write");
        let args = ["tsdb", "create-blocks-from", "openmetrics"];
        let (ok, said) = run_promtool_file(&args, &file, &dir);
        assert!(ok, "promtool {args:?}: {said}\n{body}");
    }
}

/// `promtool ARGS` with `input` on stdin: whether it exited 0, and what it said.
fn run_promtool(args: &[&str], input: &str) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).expect("write");
    drop(stdin);
    let out = child.wait_with_output().expect("promtool");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), said)
}

/// `promtool ARGS FILE DIR`: whether it exited 0, and what it said.
fn run_promtool_file(
    args: &[&str],
    file: &std::path::Path,
    dir: &std::path::Path,
) -> (bool, String) {
    let out = Command::new("promtool")
        .args(args)
        .arg(file)
        .arg(dir)
        .output()
        .expect("promtool");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), said)
}
