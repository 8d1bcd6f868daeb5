//! The sans-IO [`Pool`] on simulated time against an in-memory peer: no socket,
//! no thread, no sleep. The harness plays the transport (it applies the pool's
//! transmits, carries request bytes out and answer bytes in) and jumps the
//! clock straight to the pool's next [`Pool::poll_timeout`], so deadlines, idle
//! expiry, maximum age, reconnect backoff, connect timeouts, connect charges and
//! a lane's refusal are each tested at the exact nanosecond they are due, and one
//! nanosecond before.

use ergon_io::client::{Error, PoolConfig, PoolId, Refused, RequestId, Sent};
use ergon_io::core::{BucketId, Budget, Class, Part, Spec, Ticket};
use ergon_io::http::Request;
use ergon_io::pool::{ConnId, Pool, PoolEvent, Transmit};

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;
const T0: i64 = 1_000 * SEC;

/// The pool, its budget, the simulated clock and the transport's side.
struct Sim {
    pool: Pool,
    budget: Budget,
    orders: BucketId,
    connects: BucketId,
    now: i64,
    /// Every transmit the pool asked for, in order, with the time.
    transmits: Vec<(i64, Transmit)>,
    /// Every event, in order.
    events: Vec<PoolEvent>,
    /// Connects the transport completes at once (else they hang until told).
    auto_connect: bool,
}

impl Sim {
    /// A pool of `cfg` started at `T0`, its connects completed by the transport
    /// at once.
    fn new(cfg: impl FnOnce(&mut PoolConfig, BucketId)) -> (Sim, PoolId) {
        Sim::build(cfg, true)
    }

    /// As [`Sim::new`], connects left hanging unless `auto_connect`.
    fn build(cfg: impl FnOnce(&mut PoolConfig, BucketId), auto_connect: bool) -> (Sim, PoolId) {
        let mut b = Budget::builder();
        let orders = b.add("orders", Spec::sliding(100, SEC, 10)).unwrap();
        let connects = b.add("connects", Spec::sliding(100, SEC, 10)).unwrap();
        let budget = b.build(T0).unwrap();
        let mut pool = Pool::new();
        let mut c = PoolConfig::new("192.0.2.1:443".parse().unwrap(), "venue.test");
        c.connect_parts = vec![Part::new(connects, 1)];
        c.idle_timeout_ns = 30 * SEC;
        c.max_age_ns = 600 * SEC;
        c.reconnect_delay_ns = 20 * MS;
        c.connect_timeout_ns = 5 * SEC;
        cfg(&mut c, connects);
        let id = pool.add_pool(c, T0).unwrap();
        let mut sim = Sim {
            pool,
            budget,
            orders,
            connects,
            now: T0,
            transmits: Vec::new(),
            events: Vec::new(),
            auto_connect,
        };
        sim.jump(T0);
        (sim, id)
    }

    /// The drive invariant: after any input, drain transmits, then events.
    fn drain(&mut self) {
        while let Some(t) = self.pool.poll_transmit() {
            self.transmits.push((self.now, t));
            if let Transmit::Connect { conn, .. } = t {
                self.pool
                    .handle_connect_started(conn, &mut self.budget, self.now);
                if self.auto_connect {
                    self.pool.handle_connected(conn, self.now);
                }
            }
        }
        while let Some(e) = self.pool.poll_event() {
            self.events.push(e);
        }
    }

    /// Moves the clock to `to` and lets the pool's deadlines run.
    fn jump(&mut self, to: i64) {
        assert!(to >= self.now, "time only moves forward");
        self.now = to;
        self.pool.handle_timeout(&mut self.budget, to);
        self.drain();
    }

    /// Jumps to the pool's next deadline (bounded: a pool that always has
    /// something due now would spin, and fails here instead).
    fn next(&mut self) -> i64 {
        let at = self.pool.poll_timeout().expect("the pool has a deadline");
        self.jump(at.max(self.now));
        at
    }

    fn charge(&mut self) -> Ticket {
        self.budget
            .try_charge(&[Part::new(self.orders, 1)], Class::Normal, self.now)
            .unwrap()
    }

    fn request(&mut self, pool: PoolId, deadline: i64) -> Result<(RequestId, ConnId), Refused> {
        let t = self.charge();
        let req = Request {
            method: "POST",
            target: "/order",
            headers: &[],
            body: b"id=1",
        };
        let r = self
            .pool
            .request(pool, &req, t, deadline, self.now, |_| true);
        self.drain();
        r
    }

    /// The peer reads every request byte.
    fn write_all(&mut self, conn: ConnId) -> Vec<u8> {
        let bytes = self.pool.transmit(conn).to_vec();
        self.pool.handle_written(conn, bytes.len());
        self.drain();
        bytes
    }

    /// The peer answers `bytes`.
    fn answer(&mut self, conn: ConnId, bytes: &[u8]) -> bool {
        let buf = self.pool.recv_buf(conn);
        buf[..bytes.len()].copy_from_slice(bytes);
        let more = self.pool.handle_recv(conn, bytes.len(), self.now);
        self.drain();
        more
    }

    /// Reads the response event's body and ends its exchange, as the loop does.
    fn deliver(&mut self, conn: ConnId) -> (u16, Vec<u8>) {
        let buf = self.pool.take_buffer(conn);
        let mut headers = ergon_io::http::Headers::new();
        let r = self.pool.response_in(conn, &buf, &mut headers);
        let out = (r.status, r.body.to_vec());
        drop(headers);
        self.pool.release(conn, self.now);
        self.pool.restore_buffer(conn, buf);
        self.drain();
        out
    }

    /// The slot of the first connect the pool asked for.
    fn first_conn(&self) -> ConnId {
        self.transmits
            .iter()
            .find_map(|(_, t)| match t {
                Transmit::Connect { conn, .. } => Some(*conn),
                Transmit::Close { .. } => None,
            })
            .expect("a connect")
    }

    fn connects_at(&self) -> Vec<i64> {
        self.transmits
            .iter()
            .filter(|(_, t)| matches!(t, Transmit::Connect { .. }))
            .map(|(at, _)| *at)
            .collect()
    }

    fn closes(&self) -> usize {
        self.transmits
            .iter()
            .filter(|(_, t)| matches!(t, Transmit::Close { .. }))
            .count()
    }

    fn used(&self, bucket: BucketId) -> u64 {
        self.budget.stats(bucket).unwrap().used
    }
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

#[test]
fn a_request_is_answered_and_its_connection_kept_alive_for_the_next() {
    let (mut sim, pool) = Sim::new(|_, _| {});
    assert_eq!(sim.events, vec![PoolEvent::Ready(pool)]);
    let (id, conn) = sim.request(pool, T0 + SEC).unwrap();
    let sent = sim.write_all(conn);
    assert!(sent.starts_with(b"POST /order HTTP/1.1\r\n"), "{sent:?}");
    // A driver's misuse changes nothing: no buffer leaves a connection before
    // its answer, and a stray one given back is dropped.
    assert!(sim.pool.take_buffer(conn).is_empty());
    sim.pool.restore_buffer(conn, Vec::new());
    assert!(!sim.answer(conn, OK));
    let Some(PoolEvent::Response {
        id: got,
        conn: c,
        flight,
    }) = sim.events.pop()
    else {
        panic!("{:?}", sim.events);
    };
    assert_eq!((got, c), (id, conn));
    assert_eq!(sim.deliver(conn), (200, b"ok".to_vec()));
    sim.budget.complete(flight, sim.now).unwrap();
    assert!(sim.pool.is_idle(conn));
    // The next request goes on the same connection: no new connect.
    let (_, again) = sim.request(pool, T0 + SEC).unwrap();
    assert_eq!(again, conn);
    assert_eq!(sim.connects_at(), vec![T0]);
    assert_eq!(sim.pool.counters().responses, 1);
}

#[test]
fn a_deadline_fires_at_its_nanosecond_and_the_bytes_written_decide_sent() {
    let (mut sim, pool) = Sim::new(|_, _| {});
    let deadline = T0 + 250 * MS;
    let (id, conn) = sim.request(pool, deadline).unwrap();
    sim.write_all(conn);
    assert_eq!(sim.pool.poll_timeout(), Some(deadline));
    sim.jump(deadline - 1);
    assert_eq!(sim.events.len(), 1, "only Ready before the deadline");
    sim.jump(deadline);
    let Some(PoolEvent::Failed {
        id: got,
        sent,
        error,
    }) = sim.events.pop()
    else {
        panic!("{:?}", sim.events);
    };
    assert_eq!((got, error), (id, Error::Timeout));
    assert!(sent.maybe(), "bytes left: Maybe, never a refund");
    assert_eq!(sim.pool.counters().timeouts, 1);
    // The connection closed, and reopens after the reconnect delay, not before.
    assert_eq!(sim.closes(), 1);
    sim.jump(deadline + 20 * MS - 1);
    assert_eq!(sim.connects_at(), vec![T0]);
    sim.jump(deadline + 20 * MS);
    assert_eq!(sim.connects_at(), vec![T0, deadline + 20 * MS]);
}

#[test]
fn a_request_that_never_left_times_out_as_sent_no_and_its_refund_restores_the_budget() {
    let (mut sim, pool) = Sim::new(|_, _| {});
    let (_, _conn) = sim.request(pool, T0 + SEC).unwrap();
    assert_eq!(sim.used(sim.orders), 1);
    // The transport never gets a byte out.
    sim.next();
    let Some(PoolEvent::Failed { sent, error, .. }) = sim.events.pop() else {
        panic!("{:?}", sim.events);
    };
    assert_eq!(error, Error::Timeout);
    let Sent::No(ticket) = sent else {
        panic!("nothing was written: {sent:?}");
    };
    sim.budget.refund(ticket, sim.now).unwrap();
    assert_eq!(sim.used(sim.orders), 0);
    assert_eq!(sim.pool.counters().sent_no, 1);
}

#[test]
fn an_idle_connection_expires_at_its_idle_timeout_and_reopens_at_once() {
    let (mut sim, _) = Sim::new(|c, _| c.idle_timeout_ns = 2 * SEC);
    assert_eq!(sim.pool.poll_timeout(), Some(T0 + 2 * SEC));
    sim.jump(T0 + 2 * SEC - 1);
    assert_eq!(sim.closes(), 0);
    assert_eq!(sim.next(), T0 + 2 * SEC);
    assert_eq!(sim.closes(), 1);
    assert_eq!(sim.connects_at(), vec![T0, T0 + 2 * SEC]);
    // Each connect was charged: two in all, the first already out of the 1 s
    // window.
    assert_eq!(sim.pool.counters().connects, 2);
    assert_eq!(sim.used(sim.connects), 1);
}

/// The request path checks an idle connection's expiry itself: a request that
/// comes before the pool's timeout ran never goes on a connection idle too long
/// or too old, and takes one a nanosecond short of either.
#[test]
fn a_request_never_takes_an_idle_connection_past_its_expiry() {
    // (idle timeout, maximum age, when the connection opened at T0 expires)
    for (idle, age, expiry) in [
        (2 * SEC, 600 * SEC, T0 + 2 * SEC),
        (60 * SEC, 10 * SEC, T0 + 10 * SEC),
    ] {
        for at in [expiry - 1, expiry] {
            let (mut sim, pool) = Sim::new(|c, _| {
                c.idle_timeout_ns = idle;
                c.max_age_ns = age;
            });
            // No `jump`: the pool's timeout has not run at `at`.
            sim.now = at;
            let r = sim.request(pool, at + SEC);
            if at < expiry {
                assert!(r.is_ok(), "idle {idle}, age {age}, at {at}: {r:?}");
                assert_eq!(sim.closes(), 0);
            } else {
                assert!(
                    matches!(r, Err(Refused::Busy(_))),
                    "idle {idle}, age {age}, at {at}: {r:?}"
                );
                assert_eq!(sim.closes(), 1);
            }
        }
    }
}

#[test]
fn a_connection_past_its_maximum_age_is_not_reused_after_its_answer() {
    let (mut sim, pool) = Sim::new(|c, _| {
        c.max_age_ns = 10 * SEC;
        c.idle_timeout_ns = 60 * SEC;
    });
    sim.jump(T0 + 9 * SEC);
    let (_, conn) = sim.request(pool, T0 + 20 * SEC).unwrap();
    sim.write_all(conn);
    sim.jump(T0 + 10 * SEC);
    sim.answer(conn, OK);
    assert_eq!(sim.deliver(conn).0, 200);
    assert!(!sim.pool.is_idle(conn), "too old to carry another request");
    assert_eq!(sim.closes(), 1);
}

#[test]
fn a_failed_connect_backs_off_by_the_reconnect_delay() {
    let (mut sim, pool) = Sim::build(|c, _| c.reconnect_delay_ns = 300 * MS, false);
    let conn = sim.first_conn();
    assert!(sim.pool.is_connecting(conn));
    let refused = Error::Io(std::io::ErrorKind::ConnectionRefused);
    sim.pool
        .handle_connect_failed(conn, refused, &mut sim.budget, sim.now);
    sim.drain();
    assert_eq!(sim.events, vec![PoolEvent::ConnectError(pool, refused)]);
    assert_eq!(sim.pool.poll_timeout(), Some(T0 + 300 * MS));
    sim.jump(T0 + 300 * MS - 1);
    assert_eq!(sim.connects_at(), vec![T0]);
    assert_eq!(sim.next(), T0 + 300 * MS);
    assert_eq!(sim.connects_at(), vec![T0, T0 + 300 * MS]);
    // The refused attempt had left: its charge stays, as does the new one's.
    assert_eq!(sim.used(sim.connects), 2);
    assert_eq!(sim.pool.counters().connect_failures, 1);
}

#[test]
fn a_connect_that_never_completes_times_out_and_keeps_its_charge() {
    let (mut sim, pool) = Sim::build(|c, _| c.connect_timeout_ns = SEC, false);
    let conn = sim.first_conn();
    assert_eq!(sim.pool.poll_timeout(), Some(T0 + SEC));
    sim.jump(T0 + SEC - 1);
    assert!(sim.pool.is_connecting(conn));
    assert!(sim.events.is_empty());
    sim.jump(T0 + SEC);
    assert_eq!(
        sim.events,
        vec![PoolEvent::ConnectError(pool, Error::ConnectTimeout)]
    );
    assert_eq!(sim.closes(), 1);
    assert_eq!(sim.used(sim.connects), 1);
    assert_eq!(sim.next(), T0 + SEC + 20 * MS);
    assert!(sim.pool.is_connecting(conn));
}

#[test]
fn connects_the_budget_refuses_wait_until_it_has_room() {
    let (mut sim, pool) = Sim::new(|c, connects| {
        c.connections = 2;
        // One connect per second on its own bucket.
        c.connect_parts = vec![Part::new(connects, 100)];
    });
    assert_eq!(
        sim.connects_at(),
        vec![T0],
        "the second waits for the window"
    );
    assert!(sim.pool.counters().connects_limited >= 1);
    assert_eq!(sim.pool.idle(pool), 1);
    let second = sim.next();
    assert!(second > T0 && second <= T0 + SEC, "{}", second - T0);
    // Jump until the window let it through (bounded).
    for _ in 0..20 {
        if sim.connects_at().len() == 2 {
            break;
        }
        sim.next();
    }
    assert_eq!(sim.connects_at().len(), 2);
    // Not before the first connect's charge left the window.
    assert!(*sim.connects_at().last().unwrap() >= T0 + SEC);
    assert_eq!(sim.pool.idle(pool), 2);
}

#[test]
fn a_binding_that_does_not_hold_refuses_the_pool_for_good() {
    let (mut sim, pool) = Sim::build(
        |c, _| {
            c.connections = 2;
            c.local_addr = Some("10.0.0.7:0".parse().unwrap());
        },
        false,
    );
    let Some((_, Transmit::Connect { local, .. })) = sim.transmits.first().copied() else {
        panic!("{:?}", sim.transmits);
    };
    assert_eq!(
        local,
        Some("10.0.0.7:0".parse().unwrap()),
        "connects carry the lane"
    );
    let conn = sim.first_conn();
    let e = Error::LocalAddr {
        asked: "10.0.0.7:0".parse().unwrap(),
        got: "10.0.0.8:40000".parse().unwrap(),
    };
    sim.pool.handle_bad_binding(conn, e);
    sim.drain();
    assert_eq!(sim.events.last(), Some(&PoolEvent::ConnectError(pool, e)));
    assert_eq!(sim.pool.refused(pool), Some(e));
    let connects = sim.connects_at().len();
    // An hour later nothing reconnected, and nothing is due.
    sim.jump(T0 + 3600 * SEC);
    assert_eq!(sim.connects_at().len(), connects);
    assert_eq!(sim.pool.idle(pool), 0);
    let t = sim.charge();
    let req = Request::get("/x");
    let refused = sim
        .pool
        .request(pool, &req, t, sim.now + SEC, sim.now, |_| true);
    assert!(matches!(refused, Err(Refused::Busy(_))), "{refused:?}");
}

#[test]
fn a_stale_idle_connection_is_dropped_and_never_written() {
    let (mut sim, pool) = Sim::new(|_, _| {});
    let t = sim.charge();
    let req = Request::get("/x");
    let r = sim
        .pool
        .request(pool, &req, t, sim.now + SEC, sim.now, |_| false);
    sim.drain();
    let Err(Refused::Busy(t)) = r else {
        panic!("{r:?}");
    };
    sim.budget.refund(t, sim.now).unwrap();
    assert_eq!(sim.pool.counters().stale, 1);
    assert_eq!(sim.closes(), 1);
    // Reopened after the reconnect delay.
    assert_eq!(sim.next(), T0 + 20 * MS);
    assert_eq!(sim.pool.idle(pool), 1);
}

#[test]
fn bytes_before_any_request_byte_left_answer_nothing() {
    let (mut sim, pool) = Sim::new(|_, _| {});
    let (_, conn) = sim.request(pool, T0 + SEC).unwrap();
    // The peer answers before one request byte left.
    sim.answer(conn, OK);
    let Some(PoolEvent::Failed { sent, error, .. }) = sim.events.pop() else {
        panic!("{:?}", sim.events);
    };
    assert_eq!(error, Error::Parse(ergon_io::http::ParseError::Unsolicited));
    assert!(!sent.maybe());
}

mod model {
    //! Random operation sequences against the pool, checked against the simplest
    //! model of its contract: every accepted request ends exactly once; it ends
    //! [`Sent::No`] exactly when no byte of it was written; and by its deadline.

    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Op {
        Request { deadline_ms: i64 },
        Write { which: usize, max: usize },
        Answer { which: usize },
        Eof { which: usize },
        Stale { slot: usize },
        Jump { ms: i64 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1i64..3_000).prop_map(|deadline_ms| Op::Request { deadline_ms }),
            (any::<usize>(), 1usize..200).prop_map(|(which, max)| Op::Write { which, max }),
            any::<usize>().prop_map(|which| Op::Answer { which }),
            any::<usize>().prop_map(|which| Op::Eof { which }),
            (0usize..3).prop_map(|slot| Op::Stale { slot }),
            (0i64..1_500).prop_map(|ms| Op::Jump { ms }),
        ]
    }

    /// What the model knows of a request in flight.
    struct Open {
        conn: ConnId,
        written: usize,
        deadline: i64,
    }

    /// Settles every event: checks it against the model, completes or refunds.
    fn settle(sim: &mut Sim, open: &mut BTreeMap<RequestId, Open>) {
        for e in std::mem::take(&mut sim.events) {
            match e {
                PoolEvent::Response { id, conn, flight } => {
                    let o = open.remove(&id).expect("a response to a request in flight");
                    assert_eq!(o.conn, conn);
                    assert!(o.written > 0, "answered before a byte of it left");
                    sim.deliver(conn);
                    sim.budget.complete(flight, sim.now).unwrap();
                }
                PoolEvent::Failed { id, sent, .. } => {
                    let o = open.remove(&id).expect("a failure of a request in flight");
                    match sent {
                        Sent::No(t) => {
                            assert_eq!(o.written, 0, "Sent::No after bytes left");
                            sim.budget.refund(t, sim.now).unwrap();
                        }
                        Sent::Maybe(f) => {
                            assert!(o.written > 0, "Sent::Maybe with nothing written");
                            sim.budget.complete(f, sim.now).unwrap();
                        }
                    }
                }
                PoolEvent::Ready(_) | PoolEvent::ConnectError(..) => {}
            }
        }
        for o in open.values() {
            assert!(o.deadline > sim.now, "a request outlived its deadline");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn every_request_ends_once_by_its_deadline_and_sent_says_what_left(
            ops in proptest::collection::vec(op(), 1..60)
        ) {
            let (mut sim, pool) = Sim::new(|c, _| {
                c.connections = 3;
                c.idle_timeout_ns = 2 * SEC;
                c.max_age_ns = 5 * SEC;
            });
            let mut open: BTreeMap<RequestId, Open> = BTreeMap::new();
            for op in ops {
                let pick = |which: usize, open: &BTreeMap<RequestId, Open>| {
                    open.keys().nth(which % open.len().max(1)).copied()
                };
                match op {
                    Op::Request { deadline_ms } => {
                        let deadline = sim.now + deadline_ms * MS;
                        match sim.request(pool, deadline) {
                            Ok((id, conn)) => {
                                let o = Open { conn, written: 0, deadline };
                                prop_assert!(open.insert(id, o).is_none());
                            }
                            Err(r) => sim.budget.refund(r.into_ticket(), sim.now).unwrap(),
                        }
                    }
                    Op::Write { which, max } => {
                        if let Some(id) = pick(which, &open) {
                            let conn = open[&id].conn;
                            let n = sim.pool.transmit(conn).len().min(max);
                            sim.pool.handle_written(conn, n);
                            sim.drain();
                            if let Some(o) = open.get_mut(&id) {
                                o.written += n;
                            }
                        }
                    }
                    Op::Answer { which } => {
                        if let Some(id) = pick(which, &open) {
                            let conn = open[&id].conn;
                            if sim.pool.recv_buf(conn).len() >= OK.len() {
                                sim.answer(conn, OK);
                            }
                        }
                    }
                    Op::Eof { which } => {
                        if let Some(id) = pick(which, &open) {
                            let conn = open[&id].conn;
                            sim.pool.handle_eof(conn, false, sim.now);
                            sim.drain();
                        }
                    }
                    Op::Stale { slot } => {
                        sim.pool.handle_stale(ConnId::new(slot), sim.now);
                        sim.drain();
                    }
                    Op::Jump { ms } => {
                        // Time passes in steps no longer than the next deadline, as a
                        // loop parked on poll_timeout would see it.
                        let to = sim.now + ms * MS;
                        while sim.now < to {
                            let next = sim.pool.poll_timeout().unwrap_or(to).clamp(sim.now, to);
                            sim.jump(next.max(sim.now + 1).min(to));
                            settle(&mut sim, &mut open);
                        }
                    }
                }
                settle(&mut sim, &mut open);
            }
            // Past every deadline nothing is left in flight.
            let end = sim.now + 4 * SEC;
            while sim.now < end {
                let next = sim.pool.poll_timeout().unwrap_or(end).clamp(sim.now + 1, end);
                sim.jump(next);
                settle(&mut sim, &mut open);
            }
            prop_assert!(open.is_empty());
            prop_assert_eq!(sim.pool.in_flight(), 0);
        }
    }
}

/// The pool's connections, in the order of their first connect.
fn conns(sim: &Sim) -> Vec<ConnId> {
    let mut out = Vec::new();
    for (_, t) in &sim.transmits {
        if let Transmit::Connect { conn, .. } = t {
            if !out.contains(conn) {
                out.push(*conn);
            }
        }
    }
    out
}

/// When `conn` started its connects.
fn connects_of(sim: &Sim, conn: ConnId) -> Vec<i64> {
    sim.transmits
        .iter()
        .filter(|(_, t)| matches!(t, Transmit::Connect { conn: c, .. } if *c == conn))
        .map(|(at, _)| *at)
        .collect()
}

/// Issue 45: a venue that refuses every connect got one attempt every 20 ms
/// (486 in 10 s). Now the wait doubles per failure in a row, from the reconnect
/// delay up to `reconnect_max_ns`, drawn from the upper half of each step: over
/// 10 s with 20 ms and 5 s, at least 9 attempts (every wait at its most: 20, 40,
/// ... 2,560, 5,000 ms) and at most 13 (every wait at its least: 20, 20, 40, ...
/// 1,280, then 2,500 ms). The counters say how many failed in a row and when the
/// next attempt is; a connect that completes resets the backoff.
#[test]
fn connects_to_a_dead_venue_back_off_exponentially_with_jitter_up_to_a_cap() {
    let (mut sim, _) = Sim::build(
        |c, _| {
            c.connections = 2;
            c.reconnect_max_ns = 5 * SEC;
        },
        false,
    );
    let end = T0 + 10 * SEC;
    let refused = Error::Io(std::io::ErrorKind::ConnectionRefused);
    loop {
        for conn in conns(&sim) {
            if sim.pool.is_connecting(conn) {
                sim.pool
                    .handle_connect_failed(conn, refused, &mut sim.budget, sim.now);
            }
        }
        sim.drain();
        let at = sim.pool.poll_timeout().expect("a retry is due");
        if at > end {
            break;
        }
        sim.jump(at);
    }
    let slots = conns(&sim);
    assert_eq!(slots.len(), 2);
    for &conn in &slots {
        let times = connects_of(&sim, conn);
        assert!(
            (9..=13).contains(&times.len()),
            "{} attempts in 10 s: {times:?}",
            times.len()
        );
        let gaps: Vec<i64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps[0], 20 * MS, "one failure: the reconnect delay itself");
        for (k, g) in gaps.iter().enumerate().skip(1) {
            let full = ((20 * MS) << k).min(5 * SEC);
            assert!(
                *g >= full / 2 && *g <= full,
                "wait {k}: {g} of at most {full}"
            );
        }
    }
    assert_ne!(
        connects_of(&sim, slots[0]),
        connects_of(&sim, slots[1]),
        "jitter: the slots do not retry in step"
    );
    let c = sim.pool.counters();
    assert!(c.failing_in_row >= 8, "{c:?}");
    assert!(
        c.retry_at_ns > end && c.retry_at_ns <= end + 5 * SEC,
        "{c:?}"
    );

    // The venue is back: a connect completes and the backoff resets.
    let at = sim.pool.poll_timeout().expect("a retry");
    sim.jump(at);
    let conn = *slots
        .iter()
        .find(|&&c| sim.pool.is_connecting(c))
        .expect("a slot retries");
    sim.pool.handle_connected(conn, sim.now);
    sim.drain();
    assert_eq!(sim.pool.counters().failing_in_row, 0);
    assert_eq!(sim.pool.counters().retry_at_ns, 0);
}
