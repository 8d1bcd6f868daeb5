//! Submit latency of the shared-memory gateway against the in-process boundary,
//! in the same run: `cargo bench -p ergon-gateway --bench shm_rtt [-- SAMPLES]`.
//!
//! - **shm**: the strategy side encodes a real call (a new limit order, the
//!   codec the gateway reads) into the shared ring of fixed slots
//!   (`boundary::shm_ring`); the gateway side pops and decodes it (then it would
//!   prepare, sign and `write`), and answers an encoded event into the event ring.
//! - **in-process**: the same through the boundary's ring (`boundary::ring`, what
//!   `gateway::remote` uses between strategy threads and the loop), the order
//!   passed as a value.
//!
//! Each mode runs busy-polled (both sides spin) and parked (the loop side sleeps on
//! the eventfd handshake, `boundary::wake`: the same flag-then-eventfd protocol the
//! shared regions use). One-way = the strategy's clock at submit to the loop's
//! clock when it has decoded the call (the same monotonic clock on one host);
//! round trip = submit to the event decoded back. In both, the loop side then
//! does what the gateway does before its `write`: Binance Spot's endpoint
//! prepares and signs the order (HMAC-SHA256) and the budget charges it, so
//! one-way is submit in the strategy → the request ready for `write`. Beside them: one `write` of a
//! 200-byte request on a loopback TCP connection (what comes after, and
//! dominates). The two sides are two threads on two cores: shared memory between
//! processes is the same cache lines as between threads.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use ergon_core::{Budget, Class};
use ergon_gateway::shm::{decode_call, decode_event, encode_call, encode_event, Call, ShmEvent};
use ergon_gateway::{Account, Boot, Keys};
use ergon_io::boundary::ring::bounded;
use ergon_io::boundary::shm_ring::heap;
use ergon_io::boundary::wake::pair;
use ergon_io::clock::now_ns;
use ergon_venues::adapt::Clock;
use ergon_venues::binance_spot::BinanceSpot;
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, NewOrder, OrderType, Side, Symbol, TimeInForce,
};
use ergon_venues::endpoint::{Endpoints, Prepared};

fn order() -> NewOrder<'static> {
    NewOrder {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Decimal::new("49999.95").ok(),
        quantity: Decimal::new("0.010").unwrap(),
        client_order_id: ClientOrderId::new("mm12345q678").unwrap(),
        reduce_only: false,
    }
}

/// What the gateway's loop does with a call before its `write`: Binance Spot's
/// endpoint prepares and signs it (HMAC-SHA256), the budget charges it (refunded
/// here, so the bench never runs out).
struct Loop {
    venue: BinanceSpot,
    budget: Budget,
    req: Prepared,
}

impl Loop {
    fn new() -> Loop {
        let info = br#"{"rateLimits":[
            {"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,"limit":6000},
            {"rateLimitType":"ORDERS","interval":"SECOND","intervalNum":10,"limit":100},
            {"rateLimitType":"ORDERS","interval":"DAY","intervalNum":1,"limit":200000}]}"#;
        let boot = Boot {
            clock: Clock::anchor(0, 1_790_000_000_000),
            limits: Some(info.to_vec()),
        };
        let keys = Keys {
            api_key: "bench-key",
            secret: b"bench-secret",
            passphrase: None,
        };
        let mut b = Budget::builder();
        let venue = BinanceSpot::declare(&boot, &mut b, &keys, 30_000_000).unwrap();
        Loop {
            venue,
            budget: b.build(0).unwrap(),
            req: Prepared::with_capacity(1024),
        }
    }

    /// Prepares, signs and charges `o`: the request is ready for `write`.
    fn ready(&mut self, o: &NewOrder<'_>) {
        let now = now_ns();
        self.venue.new_order(&mut self.req, o, now).unwrap();
        let t = self
            .budget
            .try_charge(self.req.parts(), Class::Normal, now)
            .unwrap();
        std::hint::black_box(self.req.target());
        self.budget.refund(t, now).unwrap();
    }
}

fn pct(v: &mut [i64], p: f64) -> f64 {
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p) as usize] as f64 / 1000.0
}

struct Run {
    one_way: Vec<i64>,
    rtt: Vec<i64>,
}

fn report(name: &str, mut r: Run) -> f64 {
    let p50 = pct(&mut r.one_way, 0.5);
    println!(
        "{name:<22} one-way p50 {p50:>6.2} us p99 {:>6.2} us | round trip p50 {:>6.2} us p99 {:>6.2} us",
        pct(&mut r.one_way, 0.99),
        pct(&mut r.rtt, 0.5),
        pct(&mut r.rtt, 0.99)
    );
    p50
}

/// The shared-memory rings, with the real codec both ways.
fn shm(n: usize, parked: bool) -> Run {
    let (mut sub_p, mut sub_c) = heap(64, 256).unwrap();
    let (mut ev_p, mut ev_c) = heap(256, 4096).unwrap();
    let (mut parker, waker) = pair().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let server = thread::spawn(move || {
        let mut one_way = Vec::with_capacity(n);
        let mut lp = Loop::new();
        let mut buf = [0u8; 256];
        while !st.load(Ordering::Relaxed) {
            let got = sub_c
                .pop(|b| {
                    buf[..b.len()].copy_from_slice(b);
                    b.len()
                })
                .unwrap();
            let Some(len) = got else {
                if parked && parker.prepare_park(|| sub_c.ready() || st.load(Ordering::Relaxed)) {
                    parker.wait(Some(std::time::Duration::from_millis(50)));
                    parker.unpark();
                }
                continue;
            };
            let (call, _, tag) = decode_call(&buf[..len]).unwrap();
            let Call::NewOrder(o) = call else { panic!() };
            lp.ready(&o);
            one_way.push(now_ns() - tag as i64);
            ev_p.push(|s| encode_event(&ShmEvent::Applied { tag }, &[], s))
                .unwrap();
        }
        one_way
    });
    let o = order();
    let mut rtt = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = now_ns();
        sub_p
            .push(|s| encode_call(&Call::NewOrder(o), Class::Normal, t0 as u64, s).unwrap())
            .unwrap();
        waker.notify();
        loop {
            if let Some(ev) = ev_c.pop(|b| decode_event(b).unwrap().0).unwrap() {
                std::hint::black_box(ev);
                break;
            }
            std::hint::spin_loop();
        }
        rtt.push(now_ns() - t0);
        if parked {
            // Let the loop side park again before the next submit.
            thread::sleep(std::time::Duration::from_micros(200));
        }
    }
    stop.store(true, Ordering::Relaxed);
    waker.notify();
    Run {
        one_way: server.join().unwrap(),
        rtt,
    }
}

/// The in-process boundary's ring, the order passed as a value.
fn in_process(n: usize, parked: bool) -> Run {
    let (sub_p, mut sub_c) = bounded::<(NewOrder<'static>, Class, u64)>(64).unwrap();
    let (ev_p, mut ev_c) = bounded::<(u64, Vec<u8>)>(256).unwrap();
    let (mut parker, waker) = pair().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let server = thread::spawn(move || {
        let mut one_way = Vec::with_capacity(n);
        let mut lp = Loop::new();
        while !st.load(Ordering::Relaxed) {
            let Some((o, _, tag)) = sub_c.pop() else {
                if parked && parker.prepare_park(|| sub_c.ready() || st.load(Ordering::Relaxed)) {
                    parker.wait(Some(std::time::Duration::from_millis(50)));
                    parker.unpark();
                }
                continue;
            };
            lp.ready(&o);
            one_way.push(now_ns() - tag as i64);
            // remote.rs hands an owned body back (empty for a place's event here).
            ev_p.push((tag, Vec::new())).unwrap();
        }
        one_way
    });
    let o = order();
    let mut rtt = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = now_ns();
        sub_p.push((o, Class::Normal, t0 as u64)).unwrap();
        waker.notify();
        loop {
            if let Some(ev) = ev_c.pop() {
                std::hint::black_box(ev);
                break;
            }
            std::hint::spin_loop();
        }
        rtt.push(now_ns() - t0);
        if parked {
            thread::sleep(std::time::Duration::from_micros(200));
        }
    }
    stop.store(true, Ordering::Relaxed);
    waker.notify();
    Run {
        one_way: server.join().unwrap(),
        rtt,
    }
}

/// One `write` of a 200-byte request on a loopback TCP connection.
fn loopback_write(n: usize) -> f64 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    c.set_nodelay(true).unwrap();
    let (mut s, _) = l.accept().unwrap();
    let reader = thread::spawn(move || {
        let mut b = [0u8; 65536];
        while matches!(s.read(&mut b), Ok(k) if k > 0) {}
    });
    let req = [b'x'; 200];
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = now_ns();
        c.write_all(&req).unwrap();
        v.push(now_ns() - t0);
    }
    drop(c);
    reader.join().unwrap();
    pct(&mut v, 0.5)
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20_000);
    // Warm-up.
    let _ = (shm(2_000, false), in_process(2_000, false));
    let s = report("shm, busy", shm(n, false));
    let i = report("in-process, busy", in_process(n, false));
    let parked = (n / 10).max(100);
    let sp = report("shm, parked", shm(parked, true));
    let ip = report("in-process, parked", in_process(parked, true));
    let w = loopback_write(n);
    println!("loopback write(200 B)  p50 {w:>6.2} us");
    println!(
        "ratio shm / in-process one-way p50: busy {:.2}, parked {:.2}",
        s / i.max(1e-9),
        sp / ip.max(1e-9)
    );
}
