//! Zero allocations per request across the boundary in steady state: on the
//! submitting thread (submit, poll, drop the answer) and on the loop thread
//! (take, charge, send, copy the answer, deliver), counted by a global allocator
//! over 2,000 round trips after a warm-up.

use std::thread;
use std::time::{Duration, Instant};

#[path = "common/alloc.rs"]
mod alloc;

use alloc::Counting;
use ergon_io::boundary::handle::Outcome;
use ergon_io::boundary::{build, BoundaryConfig};
use ergon_io::client::PoolConfig;
use ergon_io::clock;
use ergon_io::core::{Budget, Class, Part, Spec};
use ergon_io::event_loop::{EventLoop, LoopConfig};
use ergon_io::http::Request;

#[global_allocator]
static GLOBAL: Counting = Counting::gated();

const WARMUP: usize = 200;
const MEASURED: usize = 2_000;

/// A keep-alive server answering every request head with a small 200 and a header.
fn serve() -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            s.set_nodelay(true).unwrap();
            thread::spawn(move || {
                let (mut buf, mut have) = ([0u8; 8192], 0);
                loop {
                    match s.read(&mut buf[have..]) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => have += n,
                    }
                    while let Some(end) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
                        let body_len = 5; // every request below carries "hello"
                        if have < end + 4 + body_len {
                            break;
                        }
                        let reply =
                            b"HTTP/1.1 200 OK\r\nX-Used: 7\r\nContent-Length: 4\r\n\r\npong";
                        if s.write_all(reply).is_err() {
                            return;
                        }
                        buf.copy_within(end + 4 + body_len..have, 0);
                        have -= end + 4 + body_len;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn no_allocation_per_request_on_either_side() {
    let addr = serve();
    let mut b = Budget::builder();
    let weight = b
        .add("weight", Spec::sliding(1 << 40, 60_000_000_000, 60))
        .unwrap();
    let budget = b.build(clock::now_ns()).unwrap();
    let (mut service, handles, _stats, stopper) = build(BoundaryConfig {
        handles: 1,
        per_handle: 4,
        // A publication every turn: the stats path is exercised too.
        stats_every_ns: 0,
        ..BoundaryConfig::default()
    })
    .unwrap();
    let (pool_tx, pool_rx) = std::sync::mpsc::channel();
    let lp = thread::spawn(move || {
        alloc::watch(true);
        let mut lp = EventLoop::new(LoopConfig::default(), budget).unwrap();
        pool_tx
            .send(lp.add_pool(PoolConfig::new(addr, "127.0.0.1")).unwrap())
            .unwrap();
        service.attach(&mut lp).unwrap();
        lp.run(&mut service).unwrap();
    });
    let pool = pool_rx.recv().unwrap();
    let mut h = handles.into_iter().next().unwrap();
    alloc::watch(true);

    let parts = [Part::new(weight, 1)];
    let headers = [("X-Key", "abc"), ("Content-Type", "text/plain")];
    let req = Request {
        method: "POST",
        target: "/api/v3/order?symbol=BTCUSDT",
        headers: &headers,
        body: b"hello",
    };
    let give_up = Instant::now() + Duration::from_secs(60);
    let mut ok = 0;
    while ok < WARMUP + MEASURED {
        assert!(Instant::now() < give_up, "stuck after {ok} answers");
        if ok == WARMUP {
            alloc::open(true);
        }
        let deadline = clock::now_ns() + 10_000_000_000;
        h.submit(pool, &req, &parts, Class::Normal, deadline)
            .unwrap();
        loop {
            if let Some(a) = h.poll() {
                match a.outcome() {
                    Outcome::Response => {
                        assert_eq!(a.body(), b"pong");
                        assert_eq!(a.header("x-used"), Some(&b"7"[..]));
                        ok += 1;
                    }
                    // The connection was still opening during the warm-up.
                    other => assert!(ok < WARMUP, "{other:?} in steady state"),
                }
                break;
            }
            thread::yield_now();
        }
    }
    alloc::open(false);
    stopper.stop();
    lp.join().unwrap();
    assert_eq!(alloc::total(), 0, "allocations over {MEASURED} round trips");
}
