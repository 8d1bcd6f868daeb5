//! A server that never answers: the request fails with Sent::Maybe once its
//! deadline passed, and its connection is closed, never reused.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::driver::{order, Answer, Driver, SentKind, SEC};
use common::server::Server;
use ergon_io::client::Error;

#[test]
fn a_request_past_its_deadline_fails_maybe_sent_and_its_connection_is_closed() {
    let saw_close = Arc::new(AtomicBool::new(false));
    let flag = saw_close.clone();
    let server = Server::start(move |p| {
        if p.no == 0 {
            p.read_request().unwrap();
            // Never answer; the client's close ends the wait.
            let _ = p.read_request();
            flag.store(true, Ordering::Release);
        } else {
            p.echo();
        }
    });
    let mut d = Driver::new(server.addr, |pc| pc.reconnect_delay_ns = 1_000_000);
    d.wait_ready();
    let deadline = Duration::from_millis(300);
    let start = Instant::now();
    let (a, _) = d.send(&order("id=slow"), deadline.as_nanos() as i64);
    assert!(start.elapsed() >= deadline, "failed before its deadline");
    assert_eq!(
        a,
        Answer::Error {
            sent: SentKind::Maybe,
            error: Error::Timeout
        }
    );
    assert_eq!(d.lp.client().counters().timeouts, 1);
    // The server sees the connection closed.
    assert!(server.wait_for(|_| saw_close.load(Ordering::Acquire)));
    // The next request goes out on a new connection.
    let (a, _) = d.send(&order("id=next"), 10 * SEC);
    assert_eq!(a, Answer::ok(b"id=next"));
    let log = server.log.lock().unwrap();
    assert_eq!(log.conns_with(b"id=slow"), vec![0]);
    assert_eq!(log.conns_with(b"id=next"), vec![1]);
}

#[test]
fn a_connect_that_never_completes_times_out_and_requests_stay_busy() {
    // A listener whose backlog is full: further SYNs go unanswered, so the connect
    // hangs until the connect timeout.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut fillers = Vec::new();
    let mut d = Driver::new(addr, |pc| {
        pc.connect_timeout_ns = 200_000_000;
        pc.reconnect_delay_ns = 50_000_000;
    });
    // Fill the accept queue so our pool's SYN is dropped (bounded attempts).
    // Full once two connects in a row get no answer (one slow connect on a loaded
    // machine is no proof).
    let mut misses = 0;
    for _ in 0..4000 {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)) {
            Ok(s) => {
                fillers.push(s);
                misses = 0;
            }
            Err(_) => {
                misses += 1;
                if misses == 2 {
                    break;
                }
            }
        }
    }
    let full = misses == 2;
    assert!(
        full,
        "could not fill the accept queue: no hanging connect to test against"
    );
    let start = Instant::now();
    let pool = d.pool;
    let mut busy_seen = false;
    d.run_until(|cx| {
        busy_seen |= cx.client().idle(pool) == 0;
        cx.client().counters().connect_failures > 0
    });
    assert!(busy_seen);
    // Not refused at once: it failed only when the connect timeout ran out.
    assert!(start.elapsed() >= Duration::from_millis(200));
    assert_eq!(d.lp.client().counters().connected, 0);
    drop(fillers);
}
