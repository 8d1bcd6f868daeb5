//! Faults: scripted and seeded, each doing what it says to the order registry.

mod common;

use std::io::ErrorKind;
use std::time::Duration;

use common::{order_params, Client};
use ergon_venue_sim::{Config, Fault, Server};

fn exists(s: &Server, cid: &str) -> bool {
    let mut c = Client::connect(s.addr());
    let r = c
        .signed(
            s,
            "GET",
            "/api/v3/order",
            &format!("symbol=BTCUSDT&origClientOrderId={cid}"),
        )
        .unwrap();
    match (r.status, r.code()) {
        (200, _) => true,
        (400, -2013) => false,
        _ => panic!("unexpected {r:?}"),
    }
}

#[test]
fn scripted_faults_do_what_they_say() {
    let mut cfg = Config::binance_spot();
    cfg.faults.script = vec![
        (1, Fault::CloseBeforeExecute),
        (2, Fault::ExecuteThenClose),
        (3, Fault::ServerErrorAfterExecute),
        (4, Fault::ServerErrorNoExecute),
        (5, Fault::Delay),
    ];
    cfg.faults.delay_ms = 1_500;
    let s = Server::start(cfg).unwrap();
    let place = |cid: &str, timeout_ms: u64| {
        let mut c = Client::with_timeout(s.addr(), Duration::from_millis(timeout_ms));
        c.signed(&s, "POST", "/api/v3/order", &order_params(cid))
    };

    let e = place("f1", 5_000).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
    assert!(!exists(&s, "f1"), "closed before executing");

    let e = place("f2", 5_000).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
    assert!(exists(&s, "f2"), "executed, then closed");

    let r = place("f3", 5_000).unwrap();
    assert_eq!((r.status, r.code()), (503, -1006));
    assert!(exists(&s, "f3"), "5xx after executing");

    let r = place("f4", 5_000).unwrap();
    assert_eq!((r.status, r.code()), (503, -1007));
    assert!(!exists(&s, "f4"), "5xx without executing");

    let e = place("f5", 300).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "{e:?}"
    );
    assert!(
        !exists(&s, "f5"),
        "held past the client's deadline, not run yet"
    );
    std::thread::sleep(Duration::from_millis(1_500));
    assert!(exists(&s, "f5"), "runs after the delay");

    // The script is spent: the sixth order is served normally.
    assert_eq!(place("f6", 5_000).unwrap().status, 200);

    let rep = s.stop();
    for f in Fault::ALL {
        assert_eq!(rep.faults.get(f), 1, "{f:?}");
    }
    assert_eq!(rep.executions, 4, "f2, f3, f5, f6");
    assert_eq!(rep.duplicates, 0);
    assert_eq!(rep.responses.get(&503), Some(&2));
}

fn run_seeded(seed: u64) -> (Vec<String>, ergon_venue_sim::Report) {
    let mut cfg = Config::binance_spot();
    cfg.faults.seed = seed;
    cfg.faults.chances = vec![
        (Fault::CloseBeforeExecute, 0.25),
        (Fault::ServerErrorNoExecute, 0.25),
        (Fault::ExecuteThenClose, 0.1),
    ];
    let s = Server::start(cfg).unwrap();
    let mut outcomes = Vec::new();
    let mut c = Client::connect(s.addr());
    for i in 0..40 {
        // Reads are not eligible under the default scope: they never fault.
        assert_eq!(c.get("/api/v3/ping").status, 200);
        match c.signed(&s, "POST", "/api/v3/order", &order_params(&format!("p{i}"))) {
            Ok(r) => outcomes.push(r.status.to_string()),
            Err(_) => {
                outcomes.push("closed".into());
                c = Client::connect(s.addr());
            }
        }
    }
    (outcomes, s.stop())
}

#[test]
fn chances_are_drawn_from_a_seeded_generator() {
    let (a, ra) = run_seeded(42);
    let (b, _) = run_seeded(42);
    assert_eq!(a, b, "same seed, same faults");
    let (c, _) = run_seeded(43);
    assert_ne!(a, c, "another seed, other faults");
    let faulted = a.iter().filter(|o| *o != "200").count() as u64;
    assert!((5..=35).contains(&faulted), "{a:?}");
    assert_eq!(
        ra.faults.close_before_execute
            + ra.faults.server_error_no_execute
            + ra.faults.execute_then_close,
        faulted
    );
    assert_eq!(
        ra.executions,
        40 - ra.faults.close_before_execute - ra.faults.server_error_no_execute
    );
    assert_eq!(ra.duplicates, 0);
}
