//! Zero allocations per request in steady state: 10,000 requests on one keep-alive
//! connection, after a warm-up, counted by a global allocator on the loop thread.

mod common;

use std::io::{Read, Write};

use common::alloc::{self, Counting};
use common::driver::{Driver, SEC};
use ergon_io::client::{ClientHandler, Error, PoolId, RequestId, Sent};
use ergon_io::core::{Class, Flight, Part};
use ergon_io::event_loop::Context;
use ergon_io::http::Request;
use ergon_venues::response::Response;

#[global_allocator]
static GLOBAL: Counting = Counting::new();

const WARMUP: u64 = 1_000;
const MEASURED: u64 = 10_000;

struct Loop {
    pool: PoolId,
    parts: [Part; 2],
    done: u64,
    at_warm: u64,
    at_end: u64,
    bytes: usize,
}

impl Loop {
    fn send(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        let t = cx
            .budget()
            .try_charge(&self.parts, Class::Normal, now)
            .unwrap();
        let headers = [("X-MBX-APIKEY", "k3y"), ("Accept", "application/json")];
        let req = Request {
            method: "POST",
            target: "/api/v3/order?symbol=BTCUSDT",
            headers: &headers,
            body: b"side=BUY&qty=1",
        };
        if let Err(r) = cx.request(self.pool, &req, t, now + 10 * SEC) {
            panic!("refused: {r:?}");
        }
    }
}

impl ClientHandler for Loop {
    fn on_response(&mut self, cx: &mut Context<'_>, _: RequestId, r: Response<'_>, f: Flight) {
        let now = cx.now();
        cx.budget().complete(f, now).unwrap();
        assert_eq!(r.status, 200);
        self.bytes += r.body.len() + r.header("x-mbx-used-weight-1m").map_or(0, <[u8]>::len);
        self.done += 1;
        if self.done == WARMUP {
            self.at_warm = alloc::total();
        }
        if self.done == WARMUP + MEASURED {
            self.at_end = alloc::total();
            cx.stop();
            return;
        }
        self.send(cx);
    }
    fn on_error(&mut self, _: &mut Context<'_>, _: RequestId, _: Sent, e: Error) {
        panic!("request failed: {e}");
    }
    fn on_ready(&mut self, cx: &mut Context<'_>, _: PoolId) {
        if self.done == 0 {
            self.send(cx);
        }
    }
}

#[test]
fn no_allocation_per_request_in_steady_state() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_nodelay(true).unwrap();
        let reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-MBX-USED-WEIGHT-1M: 1\r\nContent-Length: 11\r\n\r\n{\"ok\":true}";
        let mut buf = [0u8; 4096];
        let mut have = 0;
        loop {
            match s.read(&mut buf[have..]) {
                Ok(0) | Err(_) => return,
                Ok(n) => have += n,
            }
            // Each request ends with its 14-byte body after the blank line.
            if let Some(end) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
                if have >= end + 4 + 14 {
                    assert_eq!(have, end + 4 + 14, "the client pipelined");
                    have = 0;
                    s.write_all(reply).unwrap();
                }
            }
        }
    });
    let mut d = Driver::new(addr, |_| {});
    let mut h = Loop {
        pool: d.pool,
        parts: [Part::new(d.requests, 1), Part::new(d.connects, 0)],
        done: 0,
        at_warm: 0,
        at_end: 0,
        bytes: 0,
    };
    alloc::watch(true);
    // The counter sees this thread's allocations.
    let before = alloc::total();
    drop(std::hint::black_box(Box::new(7u64)));
    assert!(
        alloc::total() > before,
        "the counting allocator counts nothing"
    );
    d.lp.run(&mut h).unwrap();
    alloc::watch(false);
    assert_eq!(h.done, WARMUP + MEASURED);
    assert_eq!(d.lp.client().counters().connected, 1);
    assert_eq!(h.bytes, 12 * h.done as usize);
    let per_request = (h.at_end - h.at_warm) as f64 / MEASURED as f64;
    println!(
        "allocations in {MEASURED} requests after warm-up: {} ({per_request} per request)",
        h.at_end - h.at_warm
    );
    assert_eq!(h.at_end - h.at_warm, 0, "the send/receive path allocates");
    drop(d);
    server.join().unwrap();
}
