//! The gateway's steady state allocates nothing on plain HTTP: 10,000 orders, each
//! prepared by the venue's endpoint into a reused buffer, submitted, sent on a
//! keep-alive loopback connection, answered and delivered as an Applied event,
//! counted by a global allocator on the loop thread after a warm-up; and the same
//! with the gateway recording a replay trace (the writer thread is not watched).
//! Every order carries a label, and the counters by label are published for a
//! monitoring thread every turn: neither allocates. The strategy is wrapped in
//! `observe::Observed`, which publishes the stats for `--metrics` and `/health`
//! every turn here: that allocates nothing either.

mod common;

use std::io::{Read, Write};
use std::sync::Arc;

use arrayvec::ArrayString;
use common::alloc::{self, Counting};
use ergon_gateway::observe::{self, PublishClients};
use ergon_gateway::{
    record, Account, Api, Control, Driver, Event, Gateway, Label, Prepared, Strategy,
};
use ergon_io::client::PoolConfig;
use ergon_io::core::{Budget, Class};
use ergon_io::event_loop::{EventLoop, LoopConfig};
use ergon_venues::adapt::{Clock, Request as Kind, Venue};
use ergon_venues::binance_spot::{Auth, BinanceSpot};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Endpoints, NewOrder, OrderType, Side, Symbol, TimeInForce,
};

#[global_allocator]
static GLOBAL: Counting = Counting::new();

const WARMUP: u64 = 1_000;
const MEASURED: u64 = 10_000;
const INFO: &[u8] = br#"{"rateLimits":[{"rateLimitType":"REQUEST_WEIGHT","interval":"SECOND","intervalNum":1,"limit":10000000},{"rateLimitType":"ORDERS","interval":"SECOND","intervalNum":1,"limit":10000000},{"rateLimitType":"RAW_REQUESTS","interval":"SECOND","intervalNum":1,"limit":10000000}]}"#;

struct Orders {
    req: Prepared,
    label: Label,
    started: bool,
    applied: u64,
    other: u64,
    at_warm: u64,
    at_end: u64,
}

impl Orders {
    fn next(&mut self, api: &mut Api<'_, '_, BinanceSpot>) {
        let mut id = ArrayString::<24>::new();
        let _ = core::fmt::write(&mut id, format_args!("q{}", self.applied));
        let o = NewOrder {
            symbol: Symbol::new("BTCUSDT").unwrap(),
            side: Side::Buy,
            order_type: OrderType::Limit(TimeInForce::Gtc),
            price: Some(Decimal::new("49995.00").unwrap()),
            quantity: Decimal::new("0.010").unwrap(),
            client_order_id: ClientOrderId::new(&id).unwrap(),
            reduce_only: false,
        };
        let now = api.now();
        api.venue_mut().new_order(&mut self.req, &o, now).unwrap();
        self.req.set_label(self.label);
        if let Err(e) = api.submit(&mut self.req, Class::Normal, self.applied) {
            panic!("refused: {e:?}");
        }
    }
}

impl Strategy<BinanceSpot> for Orders {
    fn on_event(&mut self, api: &mut Api<'_, '_, BinanceSpot>, ev: Event<'_>) {
        match ev {
            Event::Applied { tag, body } => {
                assert_eq!((tag, body), (self.applied, &b"{\"orderId\":1}"[..]));
                self.applied += 1;
            }
            // The first order may find the connection still opening: refunded and
            // retried inside the gateway.
            Event::Retrying { .. } => {
                self.other += 1;
                return;
            }
            e => panic!("{e:?}"),
        }
        if self.applied == WARMUP {
            self.at_warm = alloc::total();
        }
        if self.applied == WARMUP + MEASURED {
            self.at_end = alloc::total();
            api.stop();
            return;
        }
        self.next(api);
    }

    fn on_turn(&mut self, api: &mut Api<'_, '_, BinanceSpot>) {
        if !self.started && api.venue().parts(Kind::Order).is_ok() {
            self.started = true;
            self.next(api);
        }
    }
}

impl PublishClients for Orders {}

/// Answers every request (headers, then `Content-Length` bytes) with one order.
fn serve(listener: std::net::TcpListener) {
    let (mut s, _) = listener.accept().unwrap();
    s.set_nodelay(true).unwrap();
    let reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-MBX-USED-WEIGHT-1S: 1\r\nContent-Length: 13\r\n\r\n{\"orderId\":1}";
    let mut buf = vec![0u8; 1 << 16];
    let mut have = 0;
    loop {
        match s.read(&mut buf[have..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => have += n,
        }
        let Some(end) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        if have >= end + 4 + len {
            assert_eq!(have, end + 4 + len, "the client pipelined");
            have = 0;
            s.write_all(reply).unwrap();
        }
    }
}

#[test]
fn submit_to_event_allocates_nothing_in_steady_state() {
    // One after the other: the count is shared by every watched thread.
    round_trips(false);
    round_trips(true);
}

fn round_trips(record: bool) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || serve(listener));

    let now = ergon_io::clock::now_ns();
    let mut b = Budget::builder();
    let clock = Clock::anchor(now, 1_700_000_000_000);
    let venue = BinanceSpot::from_exchange_info(INFO, &mut b, clock, 30_000_000)
        .unwrap()
        .with_auth(Auth::new("k3y", b"s3cret", 5_000).unwrap());
    let mut pc = PoolConfig::new(addr, addr.to_string());
    pc.connect_parts = venue.parts(Kind::Connect).unwrap().to_vec();
    let mut lp = EventLoop::new(LoopConfig::default(), b.build(now).unwrap()).unwrap();
    let pool = lp.add_pool(pc).unwrap();
    let mut gateway = Gateway::new(venue, "BTCUSDT", 16, 1024).unwrap();
    let label = gateway.label("trade:order").unwrap();
    let labels = gateway.label_reader();
    let writer = record.then(|| {
        let decl = record::Declarations::of(lp.budget());
        let (recorder, writer) = record::start_to(std::io::sink(), decl, 1 << 16).unwrap();
        gateway.record(recorder);
        writer
    });
    let (observed, reader) = observe::observe(Orders {
        req: Prepared::with_capacity(1024),
        label,
        started: false,
        applied: 0,
        other: 0,
        at_warm: 0,
        at_end: 0,
    });
    let observed = observed.with_period(0);
    let mut d = Driver {
        gateway,
        strategy: observed,
        pool,
        control: Arc::new(Control::default()),
    };
    alloc::watch(true);
    let before = alloc::total();
    drop(std::hint::black_box(Box::new(7u64)));
    assert!(
        alloc::total() > before,
        "the counting allocator counts nothing"
    );
    lp.run(&mut d).unwrap();
    alloc::watch(false);
    let s = d.strategy.inner();
    assert_eq!(s.applied, WARMUP + MEASURED);
    assert!(s.other <= 1, "{} retries", s.other);
    assert_eq!(d.gateway.stats().sent, WARMUP + MEASURED);
    assert_eq!(d.gateway.in_flight(), 0);
    let counts = *d.gateway.labels().counts(label);
    assert_eq!(
        (counts.requests, counts.done),
        (WARMUP + MEASURED, WARMUP + MEASURED)
    );
    // The last turn's publication for the metrics thread: the counters and the
    // labels of one turn (the metrics compare their totals).
    let ops = reader.read_ops();
    assert_eq!(ops.gateway.sent, WARMUP + MEASURED);
    assert_eq!(ops.in_flight, 0);
    let published = labels.read();
    assert_eq!(published.now_ns, ops.now_ns, "labels of the counters' turn");
    assert_eq!(published.rows[0].0.as_str(), "trade:order");
    assert_eq!(published.rows[0].1, counts);
    println!(
        "allocations in {MEASURED} submit -> Applied round trips after warm-up \
         (recording: {record}): {}",
        s.at_end - s.at_warm
    );
    if let Some(w) = writer {
        let w = w.finish().unwrap();
        // A charge, a sent, the answer's usage figure (one observe) and a complete
        // per order, a charge and a refund per send handed back, a charge, a sent
        // and a complete per connect of the pool (a charge per one refused): all
        // of them, or counted drops.
        let c = lp.client().counters();
        assert!(c.connects >= 1, "the pool connected: {c:?}");
        let connects = 3 * c.connects + c.connects_limited;
        let expected = 4 * (WARMUP + MEASURED) + 2 * s.other + connects;
        assert_eq!(w.events + w.dropped, expected, "{w:?}");
    }
    assert_eq!(
        s.at_end - s.at_warm,
        0,
        "the gateway's steady state allocates"
    );
    drop(lp);
    server.join().unwrap();
}

/// Account's readers are the venue's: a Binance time answer anchors the clock.
#[test]
fn the_time_reader_reads_server_time() {
    assert_eq!(
        <BinanceSpot as Account>::read_time(br#"{"serverTime":1700000000123}"#),
        Some(1_700_000_000_123)
    );
    assert_eq!(<BinanceSpot as Account>::read_time(b"{}"), None);
}
