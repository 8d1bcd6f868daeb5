//! Client order ids across a gateway restart, with real processes (issue 26,
//! item 10): the `ergon-gateway` binary against the venue emulator (in this
//! process, on loopback) and a strategy process (this test binary run again in a
//! client role, `role` below) that takes every id from the gateway.
//!
//! The client places orders under issued ids, the gateway is SIGKILLed and
//! started again on the same journal, and the client (same name) places more;
//! then the gateway stops cleanly (SIGTERM) and a third one does the same: no id
//! of a later life is one of an earlier one's, and the emulator counts no
//! duplicate. On main the shared-memory example named its ids after its pid,
//! and there was no issuer to ask.
//!
//! No test sleeps to let time pass for a verdict: each waits on `ready NAME`, on
//! the client's output lines, or on process exit.

#[path = "common/proc.rs"]
mod proc;
#[path = "common/ready.rs"]
mod ready;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ergon_core::Class;
use ergon_gateway::shm::{Call, ShmClient, ShmEvent, ShmSubmitError};
use ergon_venue_sim::{Config, Server};
use ergon_venues::endpoint::{Decimal, NewOrder, OrderType, Side, Symbol, TimeInForce};

/// A gateway process and its stdout.
/// A gateway process, killed when dropped.
type Gw = proc::Proc;

fn gateway(s: &Server, name: &str, journal: &std::path::Path) -> Gw {
    let c = s.config();
    let a = &c.accounts[0];
    let mut child = Command::new(env!("CARGO_BIN_EXE_ergon-gateway"))
        .args(["--venue", "binance-spot", "--base"])
        .arg(format!("http://{}", s.addr()))
        .args(["--api-key", &a.api_key])
        .env("ERGON_API_SECRET", &a.secret)
        .args(["--name", name, "--journal"])
        .arg(journal)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn ergon-gateway");
    let out = ready::ready(&mut child, name)
        .unwrap_or_else(|e| panic!("the gateway did not start: {e:?}"));
    Gw { child, _out: out }
}

/// Runs the client role to its end: the ids it placed.
fn place(gw: &str, me: &str, n: usize) -> Vec<String> {
    let o = Command::new(std::env::current_exe().expect("exe"))
        .args(["--ignored", "--exact", "role", "--nocapture", "--quiet"])
        .env("ERGON_IDS_ROLE", format!("{gw} {me} {n}"))
        .stderr(Stdio::inherit())
        .output()
        .expect("client");
    assert!(o.status.success(), "client: {:?}", o.status);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("ids "))
        .unwrap_or_else(|| panic!("no ids line in {text:?}"));
    line.split(',').map(String::from).collect()
}

#[test]
fn ids_issued_after_a_gateway_restart_never_repeat_the_first_lifes() {
    let s = Server::start(Config::binance_spot()).expect("emulator");
    let name = format!("ids-{}", std::process::id());
    let journal = std::env::temp_dir().join(format!("ergon-test-{name}.journal"));
    let _ = std::fs::remove_file(&journal);

    let mut gw = gateway(&s, &name, &journal);
    let first = place(&name, "mm", 6);
    gw.child.kill().expect("kill");
    gw.child.wait().expect("wait");
    let mut gw2 = gateway(&s, &name, &journal);
    let second = place(&name, "mm", 6);
    // A clean stop (SIGTERM, exit 0) keeps the journal and its epoch.
    let pid = gw2.child.id().to_string();
    let term = Command::new("kill").args(["-TERM", &pid]).status();
    assert!(term.expect("kill").success());
    assert_eq!(gw2.child.wait().expect("wait").code(), Some(0));
    assert!(journal.exists(), "a clean stop keeps the journal");
    let _gw3 = gateway(&s, &name, &journal);
    let third = place(&name, "mm", 3);
    let _ = std::fs::remove_file(&journal);

    eprintln!("first {first:?}\nsecond {second:?}\nthird {third:?}");
    assert_eq!((first.len(), second.len(), third.len()), (6, 6, 3));
    let mut all: Vec<&String> = first.iter().chain(&second).chain(&third).collect();
    all.sort();
    all.dedup();
    assert_eq!(
        all.len(),
        15,
        "an id repeated: {first:?} {second:?} {third:?}"
    );
    // Each life's epoch (the first 12 hex digits) is above the one before.
    assert!(second[0][..12] > first[0][..12], "{first:?} {second:?}");
    assert!(third[0][..12] > second[0][..12], "{second:?} {third:?}");
    let r = s.report();
    assert_eq!(r.duplicates, 0, "{r:?}");
    assert_eq!(r.executions, 15, "{r:?}");
}

// ---- the client role: run as `role` by the test above ----

#[test]
#[ignore = "a client process's role, run by the test above"]
fn role() {
    let Ok(spec) = std::env::var("ERGON_IDS_ROLE") else {
        return;
    };
    let a: Vec<&str> = spec.split(' ').collect();
    let (gw, me, n): (&str, &str, usize) = (a[0], a[1], a[2].parse().expect("n"));
    let until = Instant::now() + Duration::from_secs(60);
    // The tests start a role once its gateway said `ready NAME`: no retry.
    let mut c = ShmClient::attach(gw, me, false).expect("attach");
    let symbol = Symbol::new("BTCUSDT").expect("symbol");
    let mut ids = Vec::new();
    for tag in 0..n as u64 {
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
                Ok(()) => break,
                Err(ShmSubmitError::Busy | ShmSubmitError::Full) => {
                    c.wait(10);
                }
                Err(e) => panic!("submit: {e}"),
            }
        }
        ids.push(id.as_str().to_string());
    }
    // Every order's final event: each must have run once.
    let mut applied = 0;
    while c.in_flight() > 0 && Instant::now() < until && !c.is_gone() {
        c.wait(100);
        while let Some((ev, _)) = c.poll() {
            match ev {
                ShmEvent::Applied { .. } => applied += 1,
                e if e.is_final() => panic!("not applied: {e:?}"),
                _ => {}
            }
        }
    }
    assert_eq!(applied, n, "every order applied");
    let mut o = std::io::stdout();
    let _ = writeln!(o, "ids {}", ids.join(","));
    let _ = o.flush();
}
