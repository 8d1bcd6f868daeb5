//! `Server::wait_report` and `Server::wait_orders`: the hand-off a test waits on
//! instead of polling the emulator with sleeps. A change of the venue's state
//! wakes the wait at once; nothing else ends it before its limit.

mod common;

use std::time::{Duration, Instant};

use common::{order_params, Client};
use ergon_venue_sim::{Config, Server};

/// Far longer than a change takes to wake the wait: a wait that ended only at
/// its limit (nobody woke it) fails the elapsed-time checks below.
const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn a_request_from_another_thread_wakes_the_wait_at_once() {
    let s = Server::start(Config::binance_spot()).unwrap();
    let addr = s.addr();
    let t0 = Instant::now();
    std::thread::scope(|sc| {
        let waiter = sc.spawn(|| s.wait_report(LIMIT, |r| r.executions >= 1));
        let placer = sc.spawn(|| {
            let mut c = Client::connect(addr);
            c.signed(&s, "POST", "/api/v3/order", &order_params("w1"))
                .unwrap()
        });
        assert_eq!(placer.join().unwrap().status, 200);
        let r = waiter.join().unwrap();
        assert_eq!(r.executions, 1, "the report the wait saw hold");
    });
    assert!(t0.elapsed() < LIMIT / 4, "woken: {:?}", t0.elapsed());
    let orders = s.wait_orders(LIMIT, |o| o.len() == 1);
    assert_eq!(orders.len(), 1);
    assert!(t0.elapsed() < LIMIT / 4, "already true: no wait");
}

#[test]
fn a_wait_nothing_ends_returns_at_its_limit_with_the_last_report() {
    let s = Server::start(Config::binance_spot()).unwrap();
    let t0 = Instant::now();
    let limit = Duration::from_millis(50);
    let r = s.wait_report(limit, |r| r.requests > 0);
    assert!(t0.elapsed() >= limit, "{:?}", t0.elapsed());
    assert_eq!(r.requests, 0);
    assert!(s.wait_orders(limit, |o| !o.is_empty()).is_empty());
}
