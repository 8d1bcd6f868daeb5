//! The journal across gateway restarts, with real processes (issue 27, items 11
//! and 12): the `ergon-gateway` binary against the venue emulator (in this
//! process, on loopback) and a strategy process (this test binary run again in a
//! client role, `role` below).
//!
//! 1. A gateway killed with orders in flight leaves them in its journal; one
//!    started on it with another API key is refused (exit 1, an error naming the
//!    journal and the key's hash), the file untouched; the right key recovers
//!    every order. On main the other key started and queried them on its account.
//! 2. A recovery that ends without a definite answer (Bybit states no bound
//!    after which "not found" means "never ran": `Unresolved`) leaves the entries
//!    in the journal, and a clean stop keeps them for the next start. On main
//!    they were cleared at `Unresolved`.
//!    An order of a live gateway that ends `Unresolved` keeps its entry too.
//! 3. A gateway SIGKILLed after using a whole window of the account's order limit
//!    and restarted at once: the restarted one sends nothing more in that window
//!    (every order refused locally, ready by the window's end), and the emulator
//!    answers no 429. On main its budget started empty and the venue throttled it.
//! 4. The venue's usage figures in the bootstrap's answers seed the budget: a
//!    gateway started on an IP whose weight another process (or a gateway just
//!    killed) used counts that use before its first send. On main it started at 0.
//! 5. A gateway SIGKILLed after filling the IP's weight window and restarted at
//!    once sends its bootstrap reads only once the dead one's charges leave
//!    room for them (issue 43's simulator finding): no 429, no ban. On main
//!    they went out at once and drew a 429.
//!
//! No test sleeps to let time pass for a verdict: each waits on `ready NAME`, on
//! the client's output lines, on the emulator's report, the gateway's stats or
//! process exit.

#[path = "common/proc.rs"]
mod proc;
#[path = "common/ready.rs"]
mod ready;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ergon_core::Class;
use ergon_gateway::shm::{Call, ShmClient, ShmEvent, ShmSubmitError};
use ergon_venue_sim::{Config, Fault, Interval, LimitType, RateLimit, Server};
use ergon_venues::endpoint::{Decimal, NewOrder, OrderType, Side, Symbol, TimeInForce};

/// A gateway process, killed when dropped.
type Gw = proc::Proc;

/// Where one test's gateways keep their files.
struct Dir(PathBuf);

impl Dir {
    fn new(test: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("ergon-e2e-jnl-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        Dir(d)
    }

    fn journal(&self) -> PathBuf {
        self.0.join("journal")
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts a gateway; `Err((exit code, stderr))` if it exits before `ready`.
fn try_gateway(
    s: &Server,
    venue: &str,
    name: &str,
    key: &str,
    dir: &Dir,
) -> Result<Gw, (Option<i32>, String)> {
    let c = s.config();
    let a = &c.accounts[0];
    let mut child = Command::new(env!("CARGO_BIN_EXE_ergon-gateway"))
        .args(["--venue", venue, "--base"])
        .arg(format!("http://{}", s.addr()))
        .args(["--api-key", key, "--protection", "off"])
        .env("ERGON_API_SECRET", &a.secret)
        .args(["--name", name, "--runtime-dir"])
        .arg(&dir.0)
        .arg("--journal")
        .arg(dir.journal())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ergon-gateway");
    let out = ready::ready(&mut child, name)?;
    // Its stderr is not read again: let it go to ours.
    let mut err = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        let _ = std::io::stderr().write_all(&b);
    });
    Ok(Gw { child, _out: out })
}

fn gateway(s: &Server, venue: &str, name: &str, dir: &Dir) -> Gw {
    let key = s.config().accounts[0].api_key.clone();
    try_gateway(s, venue, name, &key, dir).unwrap_or_else(|e| panic!("not ready: {e:?}"))
}

fn sigkill(gw: &mut Gw) {
    gw.child.kill().expect("kill");
    gw.child.wait().expect("wait");
}

fn sigterm(gw: &mut Gw) {
    let pid = gw.child.id().to_string();
    let term = Command::new("kill").args(["-TERM", &pid]).status();
    assert!(term.expect("kill").success());
    assert_eq!(
        gw.child.wait().expect("wait").code(),
        Some(0),
        "SIGTERM: exit 0"
    );
}

/// The gateway's stats line once `done` holds for it (read every 10 ms, 60 s at
/// most: then the last one read).
fn stats_until(name: &str, done: impl Fn(&str) -> bool) -> String {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let o = Command::new(env!("CARGO_BIN_EXE_ergon-gateway"))
            .args(["--stats", "--once", "--name", name])
            .output()
            .expect("stats");
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let line = text
            .lines()
            .find(|l| l.starts_with("gateway "))
            .unwrap_or("")
            .to_string();
        if done(&line) || Instant::now() > until {
            return line;
        }
        // No hand-off: the gateway publishes its stats every 100 ms; poll them.
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A client process in the `role` test.
struct Client(proc::Proc);

fn client(args: &[&str]) -> Client {
    let mut child = Command::new(std::env::current_exe().expect("exe"))
        .args(["--ignored", "--exact", "role", "--nocapture", "--quiet"])
        .env("ERGON_JNL_ROLE", args.join(" "))
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn client");
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    Client(proc::Proc { child, _out: out })
}

impl Client {
    /// The rest of the next line the role printed that starts with `prefix`.
    fn line(&mut self, prefix: &str) -> String {
        let mut l = String::new();
        loop {
            l.clear();
            let n = self.0._out.read_line(&mut l).expect("read");
            assert!(n > 0, "client exited before printing {prefix:?}");
            if let Some(rest) = l.trim().strip_prefix(prefix) {
                return rest.trim().to_string();
            }
        }
    }
}

/// Waits until the emulator's report says `done`.
fn venue_until(s: &Server, what: &str, done: impl Fn(&ergon_venue_sim::Report) -> bool) {
    let r = s.wait_report(Duration::from_secs(30), &done);
    assert!(done(&r), "{what}: {r:?}");
}

#[test]
fn a_journal_of_another_api_key_is_refused_and_the_right_key_recovers_it() {
    let mut c = Config::binance_spot();
    c.faults.chances = vec![(Fault::Delay, 1.0)];
    c.faults.delay_ms = 3_000;
    let s = Server::start(c).expect("emulator");
    let name = format!("jnlkey-{}", std::process::id());
    let dir = Dir::new("key");
    let mut gw = gateway(&s, "binance-spot", &name, &dir);
    let mut cl = client(&["place", &name, "mm", "2"]);
    assert_eq!(cl.line("submitted "), "2");
    venue_until(&s, "the orders never reached the venue", |r| {
        r.faults.delay >= 2
    });
    sigkill(&mut gw);
    drop(cl);
    let before = std::fs::read(dir.journal()).expect("the journal");
    let requests = s.report().requests;

    let refused = try_gateway(&s, "binance-spot", &name, "another-api-key", &dir);
    let (code, err) = match refused {
        Ok(_) => panic!("a gateway of another API key started on the journal"),
        Err(e) => e,
    };
    eprintln!("{err}");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&dir.journal().display().to_string()),
        "names the journal: {err}"
    );
    assert!(
        err.contains("API key of SHA-256"),
        "says what differs: {err}"
    );
    assert!(!err.contains("another-api-key"), "no key in words: {err}");
    assert_eq!(std::fs::read(dir.journal()).expect("journal"), before);
    assert_eq!(
        s.report().requests,
        requests,
        "refused before it sent anything"
    );

    let _gw = gateway(&s, "binance-spot", &name, &dir);
    let stats = stats_until(&name, |l| l.contains(" recovering=0 "));
    eprintln!("{stats}");
    assert!(stats.contains(" recovered=2 "), "{stats}");
    assert!(stats.contains(" journal_live=0 "), "{stats}");
    assert_eq!(s.report().duplicates, 0);
}

#[test]
fn a_recovery_without_a_definite_answer_leaves_its_entries_for_the_next_start() {
    // Bybit: no time after which "not found" means "never ran". Orders the
    // venue never executes (the connection closed before): every query says
    // not found, and the recovery ends Unresolved.
    let mut c = Config::bybit();
    c.faults.chances = vec![(Fault::CloseBeforeExecute, 1.0)];
    let s = Server::start(c).expect("emulator");
    let name = format!("jnlunres-{}", std::process::id());
    let dir = Dir::new("unresolved");
    let mut gw = gateway(&s, "bybit", &name, &dir);
    let mut cl = client(&["place", &name, "mm", "2"]);
    assert_eq!(cl.line("submitted "), "2");
    venue_until(&s, "the orders never reached the venue", |r| {
        r.faults.close_before_execute >= 2
    });
    // Killed while it reconciles them (for 10 s): both in its journal.
    sigkill(&mut gw);
    drop(cl);

    let mut gw2 = gateway(&s, "bybit", &name, &dir);
    let stats = stats_until(&name, |l| l.contains(" recovered=2 "));
    eprintln!("{stats}");
    assert!(stats.contains(" recovering=0 "), "{stats}");
    assert!(
        stats.contains(" recovered_found=0 "),
        "nothing to find: {stats}"
    );
    assert!(
        stats.contains(" journal_live=2 "),
        "an Unresolved recovery cleared its entry: {stats}"
    );
    // A clean stop keeps them; the next start queries them again.
    sigterm(&mut gw2);
    let _gw3 = gateway(&s, "bybit", &name, &dir);
    let stats = stats_until(&name, |l| !l.is_empty());
    eprintln!("{stats}");
    assert!(stats.contains(" journal_live=2 "), "{stats}");
    assert!(
        stats.contains(" recovering=2 ") || stats.contains(" recovered=2 "),
        "{stats}"
    );
    assert_eq!(s.report().executions, 0);
}

/// An order of this life that ends Unresolved (Bybit: no bound; the venue never
/// ran it) keeps its journal entry through a clean stop: the next start queries
/// it. On main its entry was cleared at Unresolved.
#[test]
fn an_order_that_ends_unresolved_stays_in_the_journal_for_the_next_start() {
    let mut c = Config::bybit();
    c.faults.chances = vec![(Fault::CloseBeforeExecute, 1.0)];
    let s = Server::start(c).expect("emulator");
    let name = format!("jnllive-{}", std::process::id());
    let dir = Dir::new("live");
    let mut gw = gateway(&s, "bybit", &name, &dir);
    let mut cl = client(&["flood", &name, "mm", "1"]);
    let r = cl.line("result ");
    assert!(r.starts_with("applied=0 limited=0 other=1 "), "{r}");
    // Settled (a snapshot of after its final event), and still journaled.
    let stats = stats_until(&name, |l| l.contains(" in_flight=0 "));
    assert!(stats.contains(" in_flight=0 "), "{stats}");
    assert!(
        stats.contains(" journal_live=1 "),
        "cleared at Unresolved: {stats}"
    );
    sigterm(&mut gw);
    let _gw2 = gateway(&s, "bybit", &name, &dir);
    let stats = stats_until(&name, |l| !l.is_empty());
    eprintln!("{stats}");
    assert!(stats.contains(" journal_live=1 "), "{stats}");
    assert_eq!(s.report().executions, 0);
}

/// The account's order limit of this test: 20 orders per 10 s window (fixed
/// windows on the venue clock, as Binance counts them).
const ORDERS_10S: u64 = 20;
const WINDOW_MS: i64 = 10_000;

/// Jumps the venue's clock ([`Server::advance_clock`]) to the start of one of
/// its `window_ms` windows, before any gateway reads it (a gateway anchors its
/// clock on the venue's `time` at start): the test starts in a fresh window
/// without waiting for one on the wall clock.
fn to_a_window_start(s: &Server, window_ms: i64) {
    let now = s.clock().now_ms();
    s.advance_clock(window_ms - now.rem_euclid(window_ms));
}

/// The venue's clock now, UTC ms (the wall clock plus what the test jumped).
fn venue_ms(s: &Server) -> i64 {
    s.clock().now_ms()
}

#[test]
fn a_gateway_killed_after_using_a_window_restarts_into_what_is_left_of_it() {
    killed_after_a_window("budget", true);
}

/// Without the charges file (a gateway that kept none ran on this journal): the
/// account's order limit starts full for one window.
#[test]
fn without_a_record_of_charges_the_order_limit_starts_full_for_one_window() {
    killed_after_a_window("unrecorded", false);
}

/// A gateway uses a whole window of the order limit and is SIGKILLed, another
/// starts at once (`kept`: on the charges file the first one left; else with
/// it removed) and a client tries 4 orders in the same window.
fn killed_after_a_window(test: &str, kept: bool) {
    let mut c = Config::binance_spot();
    c.rate_limits = vec![
        RateLimit::new(LimitType::RequestWeight, Interval::Minute, 1, 100_000),
        RateLimit::new(LimitType::Orders, Interval::Second, 10, ORDERS_10S),
        RateLimit::new(LimitType::Orders, Interval::Day, 1, 1_000_000),
        RateLimit::new(LimitType::RawRequests, Interval::Minute, 5, 1_000_000),
    ];
    let s = Server::start(c).expect("emulator");
    let name = format!("jnl{test}-{}", std::process::id());
    let dir = Dir::new(test);
    // At the start of a venue window: the gateway starts and floods in it.
    to_a_window_start(&s, WINDOW_MS);
    let window = venue_ms(&s) / WINDOW_MS;
    let mut gw = gateway(&s, "binance-spot", &name, &dir);
    let mut first = client(&["flood", &name, "mm", &ORDERS_10S.to_string()]);
    let used = first.line("result ");
    assert!(
        used.starts_with(&format!("applied={ORDERS_10S} ")),
        "{used}"
    );
    sigkill(&mut gw);
    drop(first);
    if !kept {
        std::fs::remove_file(dir.0.join("journal.charges")).expect("the charges file");
    }

    let _gw2 = gateway(&s, "binance-spot", &name, &dir);
    let mut second = client(&["flood", &name, "mm2", "4"]);
    let after = second.line("result ");
    let done = venue_ms(&s);
    eprintln!(
        "first life: {used}; second: {after}, {} ms into the window",
        done % WINDOW_MS
    );
    assert_eq!(
        done / WINDOW_MS,
        window,
        "the machine took longer than a window: nothing to conclude"
    );
    let r = s.report();
    assert_eq!(r.order_rate_limited, 0, "the venue throttled orders: {r:?}");
    assert_eq!(r.throttled, 0, "429s: {r:?}");
    assert_eq!(r.responses.get(&429).copied().unwrap_or(0), 0, "{r:?}");
    assert!(after.starts_with("applied=0 limited=4 "), "{after}");
    // Refused until the window's end, not for good.
    let ready: i64 = after
        .split(' ')
        .find_map(|w| w.strip_prefix("ready_in_ms="))
        .and_then(|v| v.parse().ok())
        .expect("ready_in_ms");
    assert!(ready <= WINDOW_MS + 1_000, "{after}");
    assert_eq!(r.executions, ORDERS_10S, "{r:?}");
    if !kept {
        return; // held a window from its start: into the venue's next one
    }
    // The next window: it sends again. The gateway, a real process, reads the
    // real clock: that window comes only as time passes.
    let next_window_ms = (window + 1) * WINDOW_MS + 200;
    let wait_ms = next_window_ms - venue_ms(&s);
    std::thread::sleep(Duration::from_millis(wait_ms.max(0).unsigned_abs()));
    let mut third = client(&["flood", &name, "mm3", "3"]);
    let next = third.line("result ");
    eprintln!("next window: {next} at {}", venue_ms(&s) % WINDOW_MS);
    assert!(next.starts_with("applied=3 "), "{next}");
}

/// The IP's weight limit of the next test: 60 per 5 s (fixed windows on the
/// venue clock, as Binance counts them; a short window keeps the test short).
const WEIGHT_5S: u64 = 60;
const WEIGHT_WINDOW_MS: i64 = 5_000;

/// A gateway that fills the IP's weight window and is SIGKILLed, restarted at
/// once: its bootstrap reads (`time` and `exchangeInfo`, 21 weight by Binance's
/// documentation) wait until the dead one's charges, kept in the charges file
/// with their limits, leave room for them; the venue answers no 429 and bans
/// nothing. On main they went out at once into the full window: a 429 (and a
/// venue that bans what keeps coming inside its Retry-After).
#[test]
fn a_restart_into_a_full_weight_window_reads_nothing_before_there_is_room() {
    let mut c = Config::binance_spot();
    c.rate_limits = vec![
        RateLimit::new(LimitType::RequestWeight, Interval::Second, 5, WEIGHT_5S),
        RateLimit::new(LimitType::Orders, Interval::Second, 10, 1_000),
        RateLimit::new(LimitType::Orders, Interval::Day, 1, 1_000_000),
        RateLimit::new(LimitType::RawRequests, Interval::Minute, 5, 1_000_000),
    ];
    let s = Server::start(c).expect("emulator");
    let name = format!("jnlboot-{}", std::process::id());
    let dir = Dir::new("boot");
    // At the start of a venue window: the gateway starts and fills it.
    to_a_window_start(&s, WEIGHT_WINDOW_MS);
    let window = venue_ms(&s) / WEIGHT_WINDOW_MS;
    let mut gw = gateway(&s, "binance-spot", &name, &dir);
    // More orders than the window's weight: the gateway fills it and refuses the rest.
    let mut first = client(&["flood", &name, "mm", &WEIGHT_5S.to_string()]);
    let used = first.line("result ");
    sigkill(&mut gw);
    drop(first);
    let killed = venue_ms(&s) / WEIGHT_WINDOW_MS;
    let _gw2 = gateway(&s, "binance-spot", &name, &dir);
    let r = s.report();
    eprintln!("first life: {used}; {r:?}");
    assert_eq!(
        killed, window,
        "the machine took longer than a window: nothing to conclude"
    );
    assert!(
        !used.contains(" limited=0 "),
        "the window was not filled: {used}"
    );
    assert_eq!(r.throttled, 0, "429s: {r:?}");
    assert_eq!(r.responses.get(&429).copied().unwrap_or(0), 0, "{r:?}");
    assert_eq!(r.responses.get(&418).copied().unwrap_or(0), 0, "{r:?}");
}

#[test]
fn the_usage_figures_of_the_bootstrap_seed_the_budget() {
    use ergon_gateway::{Account, Gateway, Keys, Start};
    let mut c = Config::binance_spot();
    c.rate_limits = vec![
        RateLimit::new(LimitType::RequestWeight, Interval::Minute, 1, 6_000),
        RateLimit::new(LimitType::Orders, Interval::Second, 10, 100),
        RateLimit::new(LimitType::Orders, Interval::Day, 1, 1_000_000),
        RateLimit::new(LimitType::RawRequests, Interval::Minute, 5, 1_000_000),
    ];
    let s = Server::start(c).expect("emulator");
    let a = s.config().accounts[0].clone();
    // At a minute's start: the venue's figure is this minute's when the gateway reads it.
    to_a_window_start(&s, 60_000);
    s.add_weight(std::net::Ipv4Addr::LOCALHOST.into(), 5_000);
    let start = Start::from_base(&format!("http://{}", s.addr())).expect("start");
    let keys = Keys {
        api_key: &a.api_key,
        secret: a.secret.as_bytes(),
        passphrase: None,
    };
    let (lp, _gw, _pool) = Gateway::start(&start, "BTCUSDT", |boot, b| {
        ergon_venues::binance_spot::BinanceSpot::declare(boot, b, &keys, 30_000_000)
    })
    .expect("started");
    let budget = lp.budget();
    let id = budget
        .bucket("REQUEST_WEIGHT_1M")
        .expect("the weight bucket");
    let used = budget.stats(id).expect("stats").used;
    assert!(
        used >= 5_000,
        "the budget ignores the venue's figure of 5000 and more: {used}"
    );
}

// ---- the client role: run as `role` by the tests above ----

#[test]
#[ignore = "a client process's role, run by the tests above"]
fn role() {
    let Ok(spec) = std::env::var("ERGON_JNL_ROLE") else {
        return;
    };
    let a: Vec<&str> = spec.split(' ').collect();
    let (what, gw, me, n): (&str, &str, &str, usize) = (a[0], a[1], a[2], a[3].parse().expect("n"));
    let until = Instant::now() + Duration::from_secs(60);
    // The tests start a role once its gateway said `ready NAME`: no retry.
    let mut c = ShmClient::attach(gw, me, false).expect("attach");
    let symbol = Symbol::new("BTCUSDT").expect("symbol");
    let mut out = std::io::stdout();
    match what {
        "place" => {
            for tag in 0..n as u64 {
                submit(&mut c, symbol, tag);
            }
            let _ = writeln!(out, "submitted {n}");
            let _ = out.flush();
            // Until the gateway is killed.
            while !c.is_gone() && Instant::now() < until {
                c.wait(100);
                while c.poll().is_some() {}
            }
        }
        "flood" => {
            // One at a time, each to its final event.
            let (mut applied, mut limited, mut other, mut ready_ms) = (0, 0, 0, 0i64);
            for tag in 0..n as u64 {
                submit(&mut c, symbol, tag);
                let ev = loop {
                    assert!(Instant::now() < until && !c.is_gone(), "no final event");
                    match c.poll() {
                        Some((ev, _)) if ev.is_final() => break ev,
                        Some(_) => {}
                        None => {
                            c.wait(10);
                        }
                    }
                };
                match ev {
                    ShmEvent::Applied { .. } => applied += 1,
                    ShmEvent::Limited { ready_in_ns, .. } => {
                        limited += 1;
                        ready_ms = ready_ms.max(ready_in_ns / 1_000_000);
                    }
                    _ => other += 1,
                }
            }
            let _ = writeln!(
                out,
                "result applied={applied} limited={limited} other={other} ready_in_ms={ready_ms}"
            );
            let _ = out.flush();
        }
        other => panic!("no role {other:?}"),
    }
}

fn submit(c: &mut ShmClient, symbol: Symbol<'_>, tag: u64) {
    let id = c.next_client_order_id().expect("an issued id");
    let o = NewOrder {
        symbol,
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Decimal::new("49000.00").ok(),
        quantity: Decimal::new("0.001").expect("decimal"),
        client_order_id: id,
        reduce_only: false,
    };
    loop {
        match c.submit(&Call::NewOrder(o), Class::Normal, tag) {
            Ok(()) => return,
            Err(ShmSubmitError::Busy | ShmSubmitError::Full) => {
                c.wait(10);
            }
            Err(e) => panic!("submit: {e}"),
        }
    }
}
