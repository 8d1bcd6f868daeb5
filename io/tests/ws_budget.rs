//! The budget on a WebSocket over real sockets: a connect storm refused by the
//! budget rather than the server, and a request pending when the connection drops
//! reported Unknown. (A ping flood faster than the message limit runs on jumped
//! time in `ws_pong_clock.rs`: it only needs time to pass.)

mod ws_common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ergon_io::core::{Class, Part, Spec, Verdict, Why};
use ergon_io::ws::{Cause, ConnectError, Session, WsConfig, WsEvent};
use ws_common::*;

#[test]
fn connect_storm_is_refused_by_the_budget_not_the_server() {
    let stop = Arc::new(AtomicBool::new(false));
    let accepted = Arc::new(AtomicUsize::new(0));
    let (stop2, accepted2) = (stop.clone(), accepted.clone());
    let (addr, server) = serve(move |l| {
        l.set_nonblocking(true).unwrap();
        let mut peers = Vec::new();
        while !stop2.load(Ordering::SeqCst) {
            match l.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    let mut p = Peer::from_stream(s);
                    p.handshake();
                    accepted2.fetch_add(1, Ordering::SeqCst);
                    peers.push(p);
                }
                // Non-blocking accept, polled so the stop flag is seen.
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    });
    // Three connects per minute.
    let (mut d, limits) = driver_with(WsConfig::default(), 3, 10);
    let (mut opened, mut refused) = (0, Vec::new());
    for _ in 0..10 {
        match d.connect(addr, &REQ) {
            Ok(()) => {
                let evs = d.run_until(IO_TIMEOUT, |e| *e == Ev::Open);
                assert_eq!(evs, vec![Ev::Open]);
                opened += 1;
                // The connection drops; the caller reconnects at once.
                d.stream = None;
                let now = d.now();
                d.session.handle_transport_closed(&mut d.budget, now);
                let evs = d.run_until_closed();
                assert_eq!(evs, vec![Ev::Closed(Cause::Transport, None, String::new())]);
            }
            Err(ConnectError::Limited(l)) => refused.push(l),
            Err(e) => panic!("{e:?}"),
        }
    }
    stop.store(true, Ordering::SeqCst);
    server.join().unwrap();
    assert_eq!(opened, 3);
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        3,
        "the server saw only admitted connects"
    );
    assert_eq!(refused.len(), 7);
    for l in &refused {
        assert_eq!((l.bucket, l.why), (limits.connects, Why::Full));
        assert!(l.ready_at_ns >= 60 * SEC, "{l:?}");
    }
    assert_eq!(d.session.stats().connects_refused, 7);
    let st = d.budget.stats(limits.connects).unwrap();
    assert_eq!((st.admitted, st.refusals.full), (3, 7));

    // A ban on the IP gate stops every connect, whatever the connect bucket says.
    let now = d.now();
    d.budget.banned(limits.ip, now + 60 * SEC, now).unwrap();
    match d.connect(addr, &REQ) {
        Err(ConnectError::Limited(l)) => assert_eq!((l.bucket, l.why), (limits.ip, Why::Halted)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn request_pending_when_the_connection_drops_is_unknown() {
    let (addr, server) = serve(|l| {
        let mut p = Peer::accept(&l);
        p.handshake();
        let one = p.read_frame().unwrap();
        p.write_frame(true, 0x1, b"ack 1");
        let two = p.read_frame().unwrap();
        // Request 2 reached the venue; the connection drops before its answer.
        drop(p);
        (one.payload, two.payload)
    });
    // Requests charge an order bucket and an in-flight limit besides the message.
    let mut b = ergon_io::core::Budget::builder();
    let ip = b.add("ip", Spec::gate()).unwrap();
    let connects = b
        .add("ws_connects", Spec::sliding(10, 60 * SEC, 60))
        .unwrap();
    let messages = b.add("ws_messages", Spec::sliding(100, SEC, 4)).unwrap();
    let orders = b.add("orders", Spec::sliding(50, 10 * SEC, 10)).unwrap();
    let inflight = b.add("inflight", Spec::in_flight(5)).unwrap();
    let budget = b.build(0).unwrap();
    let session = Session::new(
        WsConfig::default(),
        &budget,
        &[Part::new(ip, 0), Part::new(connects, 1)],
        &[Part::new(ip, 0), Part::new(messages, 1)],
        7,
    )
    .unwrap();
    let order = [Part::new(orders, 1), Part::new(inflight, 1)];
    let mut d = Driver::new(session, budget);
    d.connect(addr, &REQ).unwrap();
    d.run_until(IO_TIMEOUT, |e| *e == Ev::Open);

    let now = d.now();
    d.session
        .send_request(1, "order 1", &order, Class::Normal, &mut d.budget, now)
        .unwrap();
    let evs = d.run_until(IO_TIMEOUT, |e| matches!(e, Ev::Text(_)));
    assert_eq!(evs, vec![Ev::Text("ack 1".into())]);
    let now = d.now();
    assert!(d.session.resolve(1, &mut d.budget, now));
    assert_eq!(d.budget.stats(inflight).unwrap().used, 0);

    d.session
        .send_request(2, "order 2", &order, Class::Normal, &mut d.budget, now)
        .unwrap();
    assert_eq!(
        d.session
            .send_request(2, "again", &order, Class::Normal, &mut d.budget, now),
        Err(ergon_io::ws::SendError::DuplicateId)
    );
    d.flush();
    assert_eq!(d.session.pending_requests(), 1);
    let (one, two) = server.join().unwrap();
    assert_eq!((one, two), (b"order 1".to_vec(), b"order 2".to_vec()));

    // Request 3 is queued but the loop learns of the drop before writing it.
    d.session
        .send_request(3, "order 3", &order, Class::Normal, &mut d.budget, now)
        .unwrap();
    assert_eq!(d.budget.stats(inflight).unwrap().used, 2);
    d.stream = None;
    let now = d.now();
    d.session.handle_transport_closed(&mut d.budget, now);
    let mut seen = Vec::new();
    let mut flights = Vec::new();
    let mut cause = None;
    while let Some(ev) = d.session.poll_event(&mut d.budget, now) {
        match ev {
            WsEvent::Outcome(o) => {
                seen.push((o.id, o.verdict));
                flights.extend(o.flight);
            }
            WsEvent::Closed(c) => cause = Some(c.cause),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seen, vec![(3, Verdict::NotRun), (2, Verdict::Unknown)]);
    assert_eq!(cause, Some(Cause::Transport));
    // Request 3 was refunded everywhere; request 2 keeps its charge, and its
    // in-flight unit until the caller has reconciled it.
    let st = d.budget.stats(orders).unwrap();
    assert_eq!((st.admitted, st.refunds, st.used), (3, 1, 2));
    assert_eq!(d.budget.stats(inflight).unwrap().used, 1);
    assert_eq!(flights.len(), 1);
    assert_eq!(
        d.budget
            .resend(&Verdict::Unknown, &order, Class::Normal, i64::MAX, now),
        ergon_io::core::Resend::Reconcile
    );
    for f in flights {
        d.budget.complete(f, now).unwrap();
    }
    assert_eq!(d.budget.stats(inflight).unwrap().used, 0);
}
