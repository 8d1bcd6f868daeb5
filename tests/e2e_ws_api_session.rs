//! The Binance Spot WebSocket API session (ergon-venues) on ergon-io's WebSocket
//! session, over a real loopback socket, against the venue emulator's `/ws-api/v3`:
//! frames the venue accepts, answers matched by id with `rateLimits` raising the
//! budget to the venue's counts, the user data stream's `executionReport` on the
//! same connection, and a drop after the venue executed an order and before its
//! answer: the id is Unknown, reconciled by client order id on the next connection,
//! never re-sent, and the venue counts no duplicate.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use ergon_core::{Budget, Class, Verdict};
use ergon_io::ws::{Session as WsSession, Upgrade, WsConfig, WsEvent};
use ergon_venue_sim::{Config, Fault, Interval, LimitType, RateLimit, Server};
use ergon_venue_sim::{DEFAULT_API_KEY, DEFAULT_API_SECRET};
use ergon_venues::adapt::{Clock, Request, Venue};
use ergon_venues::binance_spot::BinanceSpot;
use ergon_venues::binance_spot_ws::{Call, Fate, Incoming, Session};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, NewOrder, OrderRef, OrderState, OrderType, Side, Symbol, TimeInForce,
};

const WAIT: Duration = Duration::from_secs(10);

/// Owned events of one pump.
#[derive(Debug)]
enum Ev {
    Open,
    Text(String),
    Outcome(u64, Verdict),
    Closed,
}

struct Conn {
    tcp: TcpStream,
    ws: WsSession,
}

struct Clocked {
    t0: Instant,
}

impl Clocked {
    fn now(&self) -> i64 {
        i64::try_from(self.t0.elapsed().as_nanos()).unwrap()
    }
}

impl Conn {
    fn open(addr: SocketAddr, ws: WsSession, budget: &mut Budget, clock: &Clocked) -> Conn {
        let tcp = TcpStream::connect(addr).unwrap();
        tcp.set_nodelay(true).unwrap();
        let mut c = Conn { tcp, ws };
        let host = addr.to_string();
        let req = Upgrade {
            host: &host,
            path: "/ws-api/v3",
            headers: &[],
        };
        c.ws.connect(&req, Class::Normal, budget, clock.now())
            .unwrap();
        let evs = c.until(budget, clock, |e| matches!(e, Ev::Open));
        assert!(matches!(evs.last(), Some(Ev::Open)), "{evs:?}");
        c
    }

    /// Writes what is queued, reads once (up to 50 ms), returns the events.
    fn pump(&mut self, budget: &mut Budget, clock: &Clocked) -> Vec<Ev> {
        while let Some(out) = self.ws.poll_transmit() {
            match self.tcp.write(out) {
                Ok(n) => self.ws.handle_written(n, budget, clock.now()),
                Err(_) => {
                    self.ws.handle_transport_closed(budget, clock.now());
                    break;
                }
            }
        }
        self.tcp
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let buf = self.ws.read_buf();
        match self.tcp.read(buf) {
            Ok(0) => self.ws.handle_transport_closed(budget, clock.now()),
            Ok(n) => self.ws.handle_read(n),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => self.ws.handle_transport_closed(budget, clock.now()),
        }
        let mut evs = Vec::new();
        while let Some(e) = self.ws.poll_event(budget, clock.now()) {
            evs.push(match e {
                WsEvent::Open => Ev::Open,
                WsEvent::Text(t) => Ev::Text(t.to_owned()),
                WsEvent::Outcome(o) => Ev::Outcome(o.id, o.verdict),
                WsEvent::Closed(_) => Ev::Closed,
                _ => continue,
            });
        }
        evs
    }

    /// Pumps until an event satisfies `done`; every event on the way.
    fn until(
        &mut self,
        budget: &mut Budget,
        clock: &Clocked,
        done: impl Fn(&Ev) -> bool,
    ) -> Vec<Ev> {
        let end = Instant::now() + WAIT;
        let mut all = Vec::new();
        while Instant::now() < end {
            for e in self.pump(budget, clock) {
                let stop = done(&e);
                all.push(e);
                if stop {
                    return all;
                }
            }
        }
        panic!("no such event within {WAIT:?}: {all:?}");
    }
}

/// `GET /api/v3/exchangeInfo` over a plain HTTP/1.1 connection.
fn exchange_info(addr: SocketAddr) -> Vec<u8> {
    let mut t = TcpStream::connect(addr).unwrap();
    t.write_all(b"GET /api/v3/exchangeInfo HTTP/1.1\r\nHost: sim\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut all = Vec::new();
    t.read_to_end(&mut all).unwrap();
    let at = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(all.starts_with(b"HTTP/1.1 200"));
    all[at..].to_vec()
}

fn cid(s: &str) -> ClientOrderId {
    ClientOrderId::new(s).unwrap()
}

fn order(id: &str) -> NewOrder<'static> {
    NewOrder {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(Decimal::new("49000").unwrap()),
        quantity: Decimal::new("0.01").unwrap(),
        client_order_id: cid(id),
        reduce_only: false,
    }
}

/// Prepares `call`, sends it as an ergon-io request (charging its parts), marks
/// it written once queued, and returns its id.
fn send(
    s: &mut Session,
    c: &mut Conn,
    call: &Call<'_>,
    buf: &mut Vec<u8>,
    budget: &mut Budget,
    clock: &Clocked,
) -> u64 {
    let p = s.prepare(call, buf, clock.now()).unwrap();
    let text = std::str::from_utf8(buf).unwrap();
    c.ws.send_request(p.id, text, &p.parts, Class::Normal, budget, clock.now())
        .unwrap();
    assert!(s.sent(p.id));
    p.id
}

/// Pumps until the answer to `id`; returns it with every execution seen on the way.
fn answer_to(
    id: u64,
    s: &mut Session,
    c: &mut Conn,
    budget: &mut Budget,
    clock: &Clocked,
    execs: &mut Vec<(ClientOrderId, OrderState)>,
) -> (ergon_venues::binance_spot_ws::Answer, serde_json::Value) {
    let end = Instant::now() + WAIT;
    while Instant::now() < end {
        for e in c.pump(budget, clock) {
            let Ev::Text(t) = e else {
                panic!("unexpected {e:?}");
            };
            match s.on_frame(t.as_bytes(), budget, clock.now()).unwrap() {
                Incoming::Answer(a) => {
                    assert_eq!(a.id, id, "{t}");
                    assert!(c.ws.resolve(a.id, budget, clock.now()));
                    return (a, serde_json::from_str(&t).unwrap());
                }
                Incoming::Execution(x) => execs.push((x.client_order_id, x.state)),
                Incoming::OtherEvent(_) => {}
                _ => {}
            }
        }
    }
    panic!("no answer to {id}");
}

/// The venue's count of `kind` per `interval` in an answer's `rateLimits`.
fn venue_count(v: &serde_json::Value, kind: &str, interval: &str) -> u64 {
    v["rateLimits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["rateLimitType"] == kind && l["interval"] == interval)
        .unwrap()["count"]
        .as_u64()
        .unwrap()
}

#[test]
fn orders_over_the_websocket_api_session_and_a_drop_reconciled_without_a_duplicate() {
    let mut cfg = Config::binance_spot();
    // Weight per day: no window edge inside the test.
    cfg.rate_limits[0] = RateLimit::new(LimitType::RequestWeight, Interval::Day, 1, 100_000);
    // The second order placement executes, then the connection drops unanswered.
    cfg.faults.script = vec![(2, Fault::ExecuteThenClose)];
    let server = Server::start(cfg).unwrap();
    let addr = server.addr();
    let clock = Clocked { t0: Instant::now() };

    let info = exchange_info(addr);
    let mut b = Budget::builder();
    let spot = BinanceSpot::from_exchange_info(
        &info,
        &mut b,
        Clock::anchor(clock.now(), server.clock().now_ms()),
        50_000_000,
    )
    .unwrap();
    let connect = spot.parts(Request::Connect).unwrap();
    let mut budget = b.build(clock.now()).unwrap();
    let w = budget.bucket("REQUEST_WEIGHT_1D").unwrap();
    let o10 = budget.bucket("ORDERS_10S").unwrap();
    let mut s = Session::with_defaults(
        spot,
        Some((DEFAULT_API_KEY, DEFAULT_API_SECRET.as_bytes())),
        64,
    )
    .unwrap();
    let io = WsSession::new(WsConfig::default(), &budget, &connect, &[], 7).unwrap();
    let mut c = Conn::open(addr, io, &mut budget, &clock);
    let mut buf = Vec::with_capacity(1024);
    let mut execs = Vec::new();

    // time: Done; the budget's weight is raised to the venue's count (exchangeInfo
    // 20 over REST + connect 2 + time 1, more than the 1 charged here).
    let id = send(&mut s, &mut c, &Call::Time, &mut buf, &mut budget, &clock);
    let (a, v) = answer_to(id, &mut s, &mut c, &mut budget, &clock, &mut execs);
    assert_eq!(a.verdict, Ok(Verdict::Done), "{v}");
    let count = venue_count(&v, "REQUEST_WEIGHT", "DAY");
    assert_eq!(count, 23, "{v}");
    assert_eq!(budget.stats(w).unwrap().used, count);

    let id = send(
        &mut s,
        &mut c,
        &Call::Subscribe,
        &mut buf,
        &mut budget,
        &clock,
    );
    let (a, v) = answer_to(id, &mut s, &mut c, &mut budget, &clock, &mut execs);
    assert_eq!(a.verdict, Ok(Verdict::Done), "{v}");

    let id = send(
        &mut s,
        &mut c,
        &Call::Place(order("ws-1")),
        &mut buf,
        &mut budget,
        &clock,
    );
    let (a, v) = answer_to(id, &mut s, &mut c, &mut budget, &clock, &mut execs);
    assert_eq!(a.verdict, Ok(Verdict::Done), "{v}");
    assert_eq!(a.client_order_id, Some(cid("ws-1")));
    assert_eq!(
        budget.stats(o10).unwrap().used,
        venue_count(&v, "ORDERS", "SECOND")
    );
    assert_eq!(
        budget.stats(w).unwrap().used,
        venue_count(&v, "REQUEST_WEIGHT", "DAY")
    );
    // The executionReport of ws-1 on the same connection (before or after its answer).
    if !execs.contains(&(cid("ws-1"), OrderState::New)) {
        let t = c.until(&mut budget, &clock, |e| matches!(e, Ev::Text(_)));
        for e in t {
            if let Ev::Text(t) = e {
                if let Ok(Incoming::Execution(x)) =
                    s.on_frame(t.as_bytes(), &mut budget, clock.now())
                {
                    execs.push((x.client_order_id, x.state));
                }
            }
        }
    }
    assert!(execs.contains(&(cid("ws-1"), OrderState::New)), "{execs:?}");

    // ws-2: the venue executes it and drops the connection before answering.
    let lost = send(
        &mut s,
        &mut c,
        &Call::Place(order("ws-2")),
        &mut buf,
        &mut budget,
        &clock,
    );
    let evs = c.until(&mut budget, &clock, |e| matches!(e, Ev::Closed));
    let io_unknown: Vec<u64> = evs
        .iter()
        .filter_map(|e| match e {
            Ev::Outcome(id, Verdict::Unknown) => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(io_unknown, vec![lost], "{evs:?}");
    let fates: Vec<Fate> = s.on_disconnect().collect();
    assert_eq!(
        fates,
        vec![Fate::Unknown {
            id: lost,
            kind: Request::Order,
            client_order_id: Some(cid("ws-2")),
            deadline_ns: match fates.first() {
                Some(Fate::Unknown { deadline_ns, .. }) => *deadline_ns,
                _ => 0,
            },
        }]
    );

    // Reconcile on the next connection by client order id: it exists, so no re-send.
    let io = WsSession::new(WsConfig::default(), &budget, &connect, &[], 8).unwrap();
    let mut c = Conn::open(addr, io, &mut budget, &clock);
    let q = Call::Status(OrderRef {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        client_order_id: cid("ws-2"),
    });
    let id = send(&mut s, &mut c, &q, &mut buf, &mut budget, &clock);
    let (a, v) = answer_to(id, &mut s, &mut c, &mut budget, &clock, &mut execs);
    assert_eq!(a.verdict, Ok(Verdict::Done), "{v}");
    assert_eq!(v["result"]["clientOrderId"], "ws-2", "{v}");
    assert_eq!(v["result"]["status"], "NEW", "{v}");

    let rep = server.stop();
    assert_eq!((rep.executions, rep.duplicates), (2, 0));
    assert_eq!(rep.faults.execute_then_close, 1);
}
