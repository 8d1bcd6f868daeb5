//! The book's first-hour quoter (examples/quoter.rs), run as written against the
//! venue emulator for 10 s, in-process and then attached to a real
//! `ergon-gateway` process: quotes rest every second, no client order id runs
//! twice, and at the end every quote has been cancelled (the emulator holds no
//! open order).

#[path = "common/proc.rs"]
mod proc;
#[allow(dead_code)]
#[path = "../../../examples/quoter.rs"]
mod quoter;
#[path = "common/ready.rs"]
mod ready;

use std::process::{Command, Stdio};

use ergon_gateway::{Keys, Start};
use ergon_venue_sim::{Config, Server};

const SECONDS: u64 = 10;

/// Each second quotes both sides; nothing stays unknown, nothing runs twice, and
/// the book is empty once the quoter has stopped.
fn quoted_and_left_clean(s: &Server, c: &quoter::quoting::Counts) {
    assert!(
        c.rested >= 2 * (SECONDS - 1),
        "both sides quoted every second: {c:?}"
    );
    assert_eq!(c.unknown, 0, "{c:?}");
    assert_eq!(
        c.cancels,
        c.cancelled + c.refused,
        "every cancel ended: {c:?}"
    );
    let r = s.report();
    assert_eq!(r.duplicates, 0, "no client order id ran twice");
    let open: Vec<_> = s
        .orders()
        .into_iter()
        .filter(|o| o.status == "NEW")
        .collect();
    assert!(open.is_empty(), "quotes left on the book: {open:?}");
}

#[test]
fn the_quoter_quotes_in_process_and_stops_clean() {
    let s = Server::start(Config::binance_spot()).expect("emulator");
    let c = s.config();
    let a = &c.accounts[0];
    let keys = Keys {
        api_key: &a.api_key,
        secret: a.secret.as_bytes(),
        passphrase: None,
    };
    let start = Start::new(s.addr(), s.addr().to_string());
    let counts = quoter::in_process(&start, &keys, SECONDS).expect("quoter");
    quoted_and_left_clean(&s, &counts);
}

#[test]
fn the_quoter_quotes_through_the_daemon_and_stops_clean() {
    let s = Server::start(Config::binance_spot()).expect("emulator");
    let c = s.config();
    let a = &c.accounts[0];
    let name = format!("quoter-test-{}", std::process::id());
    let journal = std::env::temp_dir().join(format!("ergon-test-{name}.journal"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_ergon-gateway"))
        .args(["--venue", "binance-spot", "--base"])
        .arg(format!("http://{}", s.addr()))
        .args(["--api-key", &a.api_key, "--name", &name, "--journal"])
        .arg(&journal)
        .env("ERGON_API_SECRET", &a.secret)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ergon-gateway");
    let out = ready::ready(&mut child, &name).expect("the gateway serves");
    let _gateway = proc::Proc { child, _out: out };
    let counts = quoter::through_daemon(&name, "quoter", SECONDS).expect("quoter");
    quoted_and_left_clean(&s, &counts);
    // Issue 47: the quoter asks for no open-orders polls, so none is sent for it
    // (on main the daemon polled twice a second for nobody).
    let polls = s
        .report()
        .by_endpoint
        .get("GET /api/v3/openOrders")
        .copied();
    assert_eq!(polls, None, "{:?}", s.report().by_endpoint);
    let stats = ergon_gateway::shm::read_stats(&name).expect("stats");
    assert!(stats.contains("open_orders polls=0 asked_by=0"), "{stats}");
    for ext in ["", ".owners"] {
        let _ = std::fs::remove_file(format!("{}{ext}", journal.display()));
    }
}
