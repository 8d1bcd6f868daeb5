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
//!
//! No test sleeps to let time pass for a verdict: each waits on `ready NAME`, on
//! the client's output lines, on the emulator's report, the gateway's stats or
//! process exit.

#[path = "common/proc.rs"]
mod proc;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ergon_core::Class;
use ergon_gateway::shm::{Call, ShmClient, ShmSubmitError};
use ergon_venue_sim::{Config, Fault, Server};
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
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    if line.trim() == format!("ready {name}") {
        // Its stderr is not read again: let it go to ours.
        let mut err = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = err.read_to_end(&mut b);
            let _ = std::io::stderr().write_all(&b);
        });
        return Ok(Gw { child, _out: out });
    }
    let mut err = String::new();
    let _ = child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err);
    let code = child.wait().expect("wait").code();
    Err((code, format!("{line}{err}")))
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
    let until = Instant::now() + Duration::from_secs(30);
    while !done(&s.report()) {
        assert!(Instant::now() < until, "{what}: {:?}", s.report());
        std::thread::sleep(Duration::from_millis(1));
    }
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
    let mut c = loop {
        match ShmClient::attach(gw, me, false) {
            Ok(c) => break c,
            Err(e) if Instant::now() > until => panic!("attach: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
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
