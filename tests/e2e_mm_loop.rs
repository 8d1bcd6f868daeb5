//! End to end: the market-making example, a strategy over the gateway (budget,
//! native client, Binance Spot endpoints, one ledger) against the venue emulator on loopback, with limits of one
//! second served from exchangeInfo so ten windows take ten seconds.
//!
//! 1. Demand 3x the limits for at least 10 windows: zero 429s, zero bans, the
//!    binding limit used at 90% or more.
//! 2. Faults (5% execute-then-close, 5% close-before-execute, 2% 5xx after
//!    executing): no duplicate execution, every Unknown reconciled, the venue's count
//!    never above what the local budget admitted.
//! 3. Venue clock offset of +/-200 ms with the guard set to match: zero 429s.
//! 4. Another sender on the same IP: the loop follows the usage headers; no ban.
//! 5. A ban forced by the venue: the loop stops sending and connecting at once,
//!    alerts, and resumes only after the halt is cleared.

#[path = "../lease/tests/support/cluster.rs"]
mod cluster;
mod common;
#[path = "common/machine.rs"]
mod machine;
#[allow(dead_code)]
#[path = "../examples/mm_loop.rs"]
mod mm_loop;
#[path = "../tools/gatewayd/tests/common/proc.rs"]
mod proc;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::{go, no_429_no_ban, venue_utilization};
use ergon_venue_sim::{Config, Fault, Interval, LimitType, RateLimit, Report, Server};
use mm_loop::{parse_args, run, to_json, Control, Options, Summary};

const ORDERS_1S: RateLimit = RateLimit::new(LimitType::Orders, Interval::Second, 1, 20);
const WEIGHT_1S: RateLimit = RateLimit::new(LimitType::RequestWeight, Interval::Second, 1, 150);

fn sim() -> Config {
    let mut c = Config::binance_spot();
    c.rate_limits = vec![
        WEIGHT_1S,
        ORDERS_1S,
        RateLimit::new(LimitType::Orders, Interval::Day, 1, 1_000_000),
        RateLimit::new(LimitType::RawRequests, Interval::Minute, 5, 1_000_000),
    ];
    c
}

fn options(duration_s: f64, sim: Config) -> Options {
    Options {
        duration_s,
        demand: 3.0,
        quiet: true,
        guard_ms: 30,
        sim,
        ..Options::default()
    }
}

#[test]
fn three_times_the_demand_for_ten_windows_no_429_and_the_limit_used() {
    let _machine = machine::alone();
    let (s, r) = go(&options(11.5, sim()));
    no_429_no_ban(&s, &r);
    assert!(
        s.gw.limited_full > 0,
        "demand above the limit is refused locally: {s:?}"
    );
    let (orders, n) = venue_utilization(&r, &ORDERS_1S);
    let (weight, m) = venue_utilization(&r, &WEIGHT_1S);
    assert!(n >= 10 && m >= 10, "{n} and {m} full windows");
    let binding = orders.max(weight);
    assert!(
        binding >= 0.9,
        "binding limit used at {binding:.3} (orders {orders:.3}, weight {weight:.3})"
    );
    assert_eq!(r.duplicates, 0);
    assert_eq!(s.gw.unknown, 0);
}

#[test]
fn faults_cause_no_duplicate_and_every_unknown_is_reconciled() {
    let _machine = machine::shared();
    let mut c = sim();
    c.faults.seed = 7;
    c.faults.chances = vec![
        (Fault::ExecuteThenClose, 0.05),
        (Fault::CloseBeforeExecute, 0.05),
        (Fault::ServerErrorAfterExecute, 0.02),
    ];
    let (s, r) = go(&options(6.0, c));
    let injected = r.faults.execute_then_close
        + r.faults.close_before_execute
        + r.faults.server_error_after_execute;
    assert!(injected >= 3, "faults injected: {:?}", r.faults);
    assert!(s.gw.unknown > 0, "faults made outcomes unknown: {s:?}");
    assert_eq!(
        s.gw.reconciled, s.gw.unknown,
        "every Unknown reconciled: {s:?}"
    );
    assert_eq!(r.duplicates, 0, "no order executed twice");
    assert_eq!(
        r.duplicate_rejects, 0,
        "no Unknown order re-sent under its id"
    );
    no_429_no_ban(&s, &r);
}

#[test]
fn a_venue_clock_off_by_200_ms_either_way_gives_no_429() {
    let _machine = machine::shared();
    for offset in [200, -200] {
        let mut c = sim();
        c.clock_offset_ms = offset;
        let mut o = options(4.0, c);
        o.guard_ms = 250;
        let (s, r) = go(&o);
        no_429_no_ban(&s, &r);
        assert_eq!(r.timestamp_rejects, 0, "offset {offset}");
        assert_eq!(s.gw.clock_skew, 0);
        assert!(s.gw.applied > 20, "offset {offset}: the loop worked: {s:?}");
    }
}

#[test]
fn another_sender_on_the_ip_is_followed_through_the_headers() {
    let _machine = machine::shared();
    let mut c = sim();
    c.other_sender_weight_per_s = 40;
    let (s, r) = go(&options(5.0, c));
    assert!(
        s.weight_drift > 0,
        "the headers showed weight the loop did not send: {s:?}"
    );
    assert_eq!(r.bans, 0);
    assert_eq!(s.gw.banned, 0);
    // The other sender adds weight between two answers, so a 429 can slip in at a
    // window's edge; the loop then holds and never earns a ban.
    assert!(r.throttled <= 5, "429s: {}", r.throttled);
}

#[test]
fn a_forced_ban_halts_sending_and_connecting_until_cleared() {
    let _machine = machine::shared();
    let server = Arc::new(Server::start(sim()).unwrap());
    let control = Arc::new(Control::default());
    let o = options(30.0, sim());
    let (srv, ctl) = (Arc::clone(&server), Arc::clone(&control));
    let runner = thread::spawn(move || run(&o, ctl, Some(srv)));

    // Polls the emulator's report until `ok`, for at most `ms`.
    let wait_for = |ms: u64, ok: &dyn Fn(&Report) -> bool| {
        let t0 = std::time::Instant::now();
        while t0.elapsed() < Duration::from_millis(ms) {
            let r = server.report();
            if ok(&r) {
                return r;
            }
            thread::sleep(Duration::from_millis(20));
        }
        server.report()
    };
    let r = wait_for(5_000, &|r| r.executions > 10);
    assert!(r.executions > 10, "the loop is trading");
    let ban_ms = 2_500;
    let banned_at = std::time::Instant::now();
    server.ban(IpAddr::V4(Ipv4Addr::LOCALHOST), ban_ms);
    let before = wait_for(2_000, &|r| r.banned_requests >= 1);
    assert!(before.banned_requests >= 1, "the loop met the ban");
    // Let answers already in flight land, then nothing may arrive.
    thread::sleep(Duration::from_millis(200));
    let before = server.report();
    thread::sleep(Duration::from_millis(1_500));
    let during = server.report();
    assert_eq!(during.requests, before.requests, "no request while halted");
    assert_eq!(
        during.connections, before.connections,
        "no connect while halted"
    );
    // The venue's ban ends; the loop stays halted until a person clears it.
    let left = Duration::from_millis(ban_ms as u64 + 200).saturating_sub(banned_at.elapsed());
    thread::sleep(left);
    assert_eq!(
        server.report().requests,
        during.requests,
        "still halted after the venue's ban"
    );

    control.clear_halt();
    let after = wait_for(3_000, &|r| r.executions > during.executions);
    assert!(
        after.requests > during.requests,
        "resumed after the halt was cleared"
    );
    assert!(after.executions > during.executions);
    control.stop();
    let s = runner.join().unwrap().unwrap();
    assert!(s.gw.banned >= 1, "{s:?}");
    assert_eq!(s.gw.halts_cleared, 1);
    assert_eq!(s.alerts, 1, "one alert for the halt");
    assert!(s.gw.limited_halted > 0, "the budget refused while halted");
    let r = server.report();
    assert_eq!(r.bans, 1, "the forced one only");
}

#[test]
fn against_an_external_base_it_signs_with_the_given_key() {
    let _machine = machine::shared();
    let mut c = sim();
    c.accounts = vec![ergon_venue_sim::Account {
        ed25519_public_key: None,
        api_key: "external-key".into(),
        secret: "external-secret".into(),
    }];
    let server = Server::start(c).unwrap();
    let mut o = options(2.0, sim());
    o.base = Some(server.base_url());
    o.api_key = Some("external-key".into());
    o.api_secret = Some("external-secret".into());
    let s = run(&o, Arc::new(Control::default()), None).unwrap();
    assert!(s.venue.is_none(), "no emulator of its own");
    let r = server.stop();
    assert!(r.executions > 0, "orders went through: {s:?}");
    assert_eq!(
        (r.signature_rejects, r.api_key_rejects, r.timestamp_rejects),
        (0, 0, 0)
    );
    assert_eq!(r.throttled + r.order_rate_limited, 0);

    let mut wrong = o.clone();
    wrong.api_secret = Some("not-the-secret".into());
    wrong.duration_s = 1.0;
    let server = Server::start({
        let mut c = sim();
        c.accounts[0].api_key = "external-key".into();
        c.accounts[0].secret = "external-secret".into();
        c
    })
    .unwrap();
    wrong.base = Some(server.base_url());
    let s = run(&wrong, Arc::new(Control::default()), None).unwrap();
    assert!(
        s.gw.rejected > 0,
        "the venue refused what a wrong secret signed: {s:?}"
    );
    assert!(
        server.stop().signature_rejects > 0,
        "a wrong secret is refused by the venue"
    );
}

#[test]
fn the_command_line_is_the_documented_one() {
    let _machine = machine::shared();
    let args = |s: &str| parse_args(s.split_whitespace().map(String::from));
    let o = args("--venue binance-spot --base http://127.0.0.1:9 --duration 3 --demand 2.5 --cpu 0 --api-key k --api-secret s --json").unwrap();
    assert_eq!(o.base.as_deref(), Some("http://127.0.0.1:9"));
    assert_eq!(
        (o.duration_s, o.demand, o.cpu, o.json),
        (3.0, 2.5, Some(0), true)
    );
    assert_eq!(
        (o.api_key.as_deref(), o.api_secret.as_deref()),
        (Some("k"), Some("s"))
    );
    assert!(args("--demand 0").is_err());
    assert!(args("--duration -1").is_err());
    assert!(args("--frobnicate").is_err());
    // --etcd as ergon-gateway takes it (issue 29).
    let leased = args("--etcd http://a:2379,http://b:2379 --account main --safe-share 25 --hosts 3 --host h1 --lease-ttl 5").unwrap();
    assert_eq!(
        leased.lease.etcd,
        Some(vec!["http://a:2379".into(), "http://b:2379".into()])
    );
    assert_eq!(
        (
            leased.lease.account.as_deref(),
            leased.lease.safe_share,
            leased.lease.hosts
        ),
        (Some("main"), Some(0.25), Some(3))
    );
    assert_eq!(
        (leased.lease.host.as_deref(), leased.lease.ttl_s),
        (Some("h1"), 5)
    );
    // The flags alone: the safe shares are reserved in etcd, so the
    // number of hosts is not needed (`--hosts`, which was, is still taken).
    let plain = args("--etcd http://a:2379 --account main --safe-share 25").unwrap();
    assert_eq!(
        (plain.lease.account.as_deref(), plain.lease.safe_share),
        (Some("main"), Some(0.25))
    );
    for bad in [
        "--etcd http://a:2379 --account main",
        "--etcd http://a:2379 --safe-share 25",
        "--account main --safe-share 25 --hosts 3",
        "--etcd http://a:2379 --account main --safe-share 60 --hosts 3",
        "--etcd http://a:2379 --account main --safe-share 25 --hosts 3 --gateway g",
    ] {
        assert!(args(bad).is_err(), "{bad}");
    }

    let no_keys = args("--base http://127.0.0.1:9").unwrap();
    let e = run(&no_keys, Arc::new(Control::default()), None).unwrap_err();
    assert!(e.contains("--api-key"), "{e}");
    let kraken = args("--venue kraken").unwrap();
    assert!(run(&kraken, Arc::new(Control::default()), None)
        .unwrap_err()
        .contains("binance-spot, bybit, okx or hyperliquid"));
    let tls = args("--base https://api.binance.com --api-key k --api-secret s").unwrap();
    assert!(run(&tls, Arc::new(Control::default()), None)
        .unwrap_err()
        .contains("https"));

    let v = to_json(&Summary::default());
    for k in [
        "sent",
        "applied",
        "refused",
        "throttled",
        "unknown",
        "reconciled",
        "utilization",
        "alerts",
    ] {
        assert!(v.get(k).is_some(), "--json lacks {k}");
    }
}

/// The least share of its binding limit a 3 s run at 3x demand must use, from a
/// model of what holds a unit back, not from one run's reading (issue 43: CI read
/// 26 of Bybit's 30 `/v5/order/create` units, 0.867, on a loaded machine; alone
/// 28 or 29). Each of the window's units is used again at most every
/// `W + w + P + J`: the window W (1 s), the budget's slot w (W / 20: a unit
/// counts until its slot's end plus W, the ring's documented conservatism), the
/// strategy's cycle P (a unit freed between cycles waits for the next: at 3x
/// demand Bybit's cycle is about 68 ms; 70 taken) and the loop's scheduling delay
/// J on a loaded 2-core machine (100 ms allowed: the CI reading implies about
/// 150 ms on the chains that lost a unit, so it may still fail on a machine
/// loaded beyond that). The 5 % `ExecuteThenClose` faults hold nothing of the
/// limit: the venue counted the order and so does the budget, and its reconcile
/// (one query, found) charges other buckets; measured on seed 3 alone, the same
/// run read 0.967 (3 s) and 1.0 (5 s) with the faults, 0.933 and 0.96 without.
/// Nothing here is the gateway's loss but the slot, which is by design.
const MIN_UTILIZATION: f64 = 1.0 / (1.0 + 0.05 + 0.07 + 0.10);

#[test]
fn bybit_and_okx_run_through_the_gateway_at_three_times_the_demand() {
    let _machine = machine::alone();
    for venue in ["bybit", "okx"] {
        let mut o = parse_args(["--venue", venue].map(String::from).into_iter()).unwrap();
        o.duration_s = 3.0;
        o.quiet = true;
        o.sim.faults.seed = 3;
        o.sim.faults.chances = vec![(Fault::ExecuteThenClose, 0.05)];
        let (s, r) = go(&o);
        no_429_no_ban(&s, &r);
        assert!(
            s.gw.limited_full > 0,
            "{venue}: the excess refused locally: {s:?}"
        );
        assert!(
            s.utilization >= MIN_UTILIZATION,
            "{venue}: {} used at {} (the model's least: {MIN_UTILIZATION:.3})",
            s.binding,
            s.utilization
        );
        assert!(r.faults.execute_then_close > 0, "{venue}: faults injected");
        assert_eq!(
            s.gw.reconciled, s.gw.unknown,
            "{venue}: every unknown reconciled"
        );
        assert_eq!((r.duplicates, r.duplicate_rejects), (0, 0), "{venue}");
        assert!(r.executions > 20, "{venue}: it traded: {r:?}");
    }
}

/// Issue 29 with the gateway in the strategy's process: two `mm_loop --etcd`
/// processes (two "hosts") at 3x demand on one account of 40 orders a second, its
/// order limits leased through a three-member etcd cluster (safe share 25 %, 10
/// each; pool 20; TTL 2 s). Each host's budget admits more than its safe share
/// (the demand each publishes in etcd: its budget's own count), which only a grant
/// allows; the grants never sum above the pool; the venue never counts more than
/// the limit and answers no 429.
#[test]
fn two_mm_loop_processes_lease_one_accounts_orders_through_etcd() {
    use std::io::BufRead;
    use std::time::Instant;
    let _machine = machine::alone();
    const ORDERS: RateLimit = RateLimit::new(LimitType::Orders, Interval::Second, 1, 40);
    const SAFE: u64 = 10;
    let cluster = cluster::Cluster::start();
    let mut c = sim();
    c.rate_limits = vec![
        RateLimit::new(LimitType::RequestWeight, Interval::Second, 1, 10_000),
        ORDERS,
        RateLimit::new(LimitType::Orders, Interval::Day, 1, 1_000_000),
        RateLimit::new(LimitType::RawRequests, Interval::Minute, 5, 1_000_000),
    ];
    let server = Server::start(c).expect("emulator");
    let account = server.config().accounts[0].clone();
    let etcd = cluster.urls().join(",");
    let mut loops: Vec<proc::Proc> = (0..2)
        .map(|i| {
            let args = format!(
                "--base http://{} --api-key {} --api-secret {} --duration 8 --demand 3 --json \
                 --etcd {etcd} --account acct --safe-share 25 --host h{i} --lease-ttl 2",
                server.addr(),
                account.api_key,
                account.secret
            );
            let mut child = std::process::Command::new(std::env::current_exe().expect("exe"))
                .args([
                    "--ignored",
                    "--exact",
                    "mm_loop_role",
                    "--nocapture",
                    "--quiet",
                ])
                .env("ERGON_MM_LOOP_ARGS", args)
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("spawn mm_loop");
            let out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
            proc::Proc { child, _out: out }
        })
        .collect();
    // What each host's budget admitted in its last window, as it published it
    // (`used refused acked safe`), and the grant table (`host lease grant held
    // since` rows, then `safe host units` reservations).
    let mut etcd = ergon_lease::etcd::Client::new(&cluster.urls(), Duration::from_millis(500))
        .expect("etcd client");
    let prefix = b"/ergon/acct/ORDERS_1S/";
    let mut most = [0u64; 2];
    let until = Instant::now() + Duration::from_secs(7);
    while most.iter().any(|&u| u <= SAFE) && Instant::now() < until {
        let (kvs, _) = etcd.range_prefix(prefix).expect("range");
        for kv in &kvs {
            let key = String::from_utf8_lossy(&kv.key);
            let value = String::from_utf8_lossy(&kv.value);
            if let Some(host) = key.strip_prefix("/ergon/acct/ORDERS_1S/demand/h") {
                let used: u64 = value
                    .split(' ')
                    .next()
                    .and_then(|u| u.parse().ok())
                    .unwrap_or(0);
                let i: usize = host.parse().expect("h0 or h1");
                most[i] = most[i].max(used);
            } else if key.ends_with("/table") {
                let grants: u64 = value
                    .lines()
                    .skip(1)
                    .filter(|l| !l.starts_with("safe "))
                    .filter_map(|l| l.split(' ').nth(2)?.parse::<u64>().ok())
                    .sum();
                assert!(grants <= ORDERS.limit - 2 * SAFE, "{value}");
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let summaries: Vec<serde_json::Value> = loops
        .iter_mut()
        .map(|p| {
            let mut line = String::new();
            loop {
                line.clear();
                let n = p._out.read_line(&mut line).expect("read");
                assert!(n > 0, "mm_loop exited without its summary");
                if let Some(json) = line.trim().strip_prefix("summary ") {
                    return serde_json::from_str(json).expect("json");
                }
            }
        })
        .collect();
    let r = server.report();
    let w = &r.limit(&ORDERS).expect("orders").windows;
    eprintln!("{summaries:?}\norders windows {w:?}\nmost admitted in a window, per host: {most:?}");
    assert_eq!(
        (r.throttled, r.order_rate_limited, r.bans),
        (0, 0, 0),
        "{r:?}"
    );
    assert!(
        r.limit(&ORDERS).expect("orders").peak <= ORDERS.limit,
        "{w:?}"
    );
    for s in &summaries {
        assert_eq!(
            (&s["throttled"], &s["banned"]),
            (&0.into(), &0.into()),
            "{s}"
        );
    }
    assert!(
        most.iter().all(|&u| u > SAFE),
        "a host never used more than its safe share of {SAFE}: {most:?}"
    );
}

/// One `mm_loop` process of the test above: the example's command line
/// (`ERGON_MM_LOOP_ARGS`), run as its `main` runs it; the `--json` summary on one
/// line.
#[test]
#[ignore = "an mm_loop process, run by two_mm_loop_processes_lease_one_accounts_orders_through_etcd"]
fn mm_loop_role() {
    let Ok(args) = std::env::var("ERGON_MM_LOOP_ARGS") else {
        return;
    };
    let o = parse_args(args.split_whitespace().map(String::from)).expect("arguments");
    let s = run(&o, Arc::new(Control::default()), None).expect("the loop runs");
    println!("summary {}", to_json(&s));
}
