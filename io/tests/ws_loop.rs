//! The WebSocket session on the event loop over real TCP sockets: messages, a
//! server ping answered, the close handshake, reconnects from inside the loop
//! refused by the connect budget, a refused TCP connect refunded, and egress
//! lanes: each connect leaves from its lane's address, the loop's own epoll
//! watching the sockets.

mod ws_common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ergon_io::core::{Class, Why};
use ergon_io::event_loop::{Context, EventLoop};
use ergon_io::ws::{Cause, ConnectError, Upgrade, WsConfig};
use ws_common::app::{on_loop, App, React};
use ws_common::*;

/// What the test app does on each event; runs after `drive` returns, when the
/// session may be used again.
enum Then {
    Nothing,
    Reply(String),
    Reconnect,
    Stop,
}

impl React for Then {
    fn run(self, app: &mut App<Then>, cx: &mut Context<'_>, now: i64) {
        match self {
            Then::Nothing => {}
            Then::Reply(text) => {
                let s = app.ws.session_mut(app.id).unwrap();
                s.send_text(&text, Class::Normal, cx.budget(), now).unwrap();
                app.ws.flush(app.id, cx.budget(), now);
            }
            Then::Reconnect => {
                let req = REQ_LOOP;
                match app
                    .ws
                    .connect(app.id, &req, Class::Normal, cx.budget(), now)
                {
                    Ok(()) => {}
                    Err(e) => {
                        app.refused.push(e);
                        cx.stop();
                    }
                }
            }
            Then::Stop => cx.stop(),
        }
    }
}

const REQ_LOOP: Upgrade<'static> = Upgrade {
    host: "127.0.0.1",
    path: "/loop",
    headers: &[],
};

/// Builds a loop with a budget and a WsClient of one session connected to `addr`.
fn setup(
    addr: std::net::SocketAddr,
    connects: u64,
    react: fn(&Ev) -> Then,
) -> (EventLoop, App<Then>, Limits) {
    setup_with(addr, connects, 100, react)
}

fn setup_with(
    addr: std::net::SocketAddr,
    connects: u64,
    messages: u64,
    react: fn(&Ev) -> Then,
) -> (EventLoop, App<Then>, Limits) {
    on_loop(
        WsConfig::default(),
        (connects, messages),
        &REQ_LOOP,
        |ws, session| ws.add(session, addr),
        react,
    )
}

#[test]
fn messages_ping_and_close_on_the_event_loop() {
    let (addr, server) = serve(|l| {
        let mut p = Peer::accept(&l);
        p.handshake();
        assert!(p.request.starts_with("GET /loop HTTP/1.1\r\n"));
        p.write_frame(true, 0x1, b"hello");
        p.write_frame(true, 0x9, b"are you there");
        let mut got = Vec::new();
        for _ in 0..2 {
            let f = p.read_frame().unwrap();
            got.push((f.opcode, f.payload));
        }
        got.sort();
        p.write_frame(true, 0x8, &1000u16.to_be_bytes());
        let (code, _) = p.read_until_close();
        p.expect_eof();
        (got, code)
    });
    let (mut lp, mut app, limits) = setup(addr, 10, |ev| match ev {
        Ev::Text(t) => Then::Reply(format!("echo: {t}")),
        Ev::Closed(..) => Then::Stop,
        _ => Then::Nothing,
    });
    lp.run(&mut app).unwrap();
    assert_eq!(
        app.events,
        vec![
            Ev::Open,
            Ev::Text("hello".into()),
            Ev::Closed(Cause::Peer, Some(1000), String::new())
        ]
    );
    // The close echo is written and the socket closed after the Closed event.
    let (got, code) = server.join().unwrap();
    assert_eq!(
        got,
        vec![
            (0x1, b"echo: hello".to_vec()),
            (0xA, b"are you there".to_vec())
        ]
    );
    assert_eq!(code, Some(1000));
    // Reply, pong and close echo: three frames charged.
    assert_eq!(lp.budget().stats(limits.messages).unwrap().admitted, 3);
    assert_eq!(app.ws.session(app.id).unwrap().stats().pongs_sent, 1);
}

#[test]
fn reconnects_inside_the_loop_stop_at_the_connect_budget() {
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let (addr, server) = serve(move |l| {
        let mut accepted = 0;
        l.set_nonblocking(true).unwrap();
        while !stop2.load(Ordering::SeqCst) {
            match l.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    let mut p = Peer::from_stream(s);
                    p.handshake();
                    accepted += 1;
                    // The venue drops the connection right away.
                    drop(p);
                }
                // Non-blocking accept, polled so the stop flag is seen.
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        accepted
    });
    let (mut lp, mut app, limits) = setup(addr, 3, |ev| match ev {
        Ev::Closed(..) => Then::Reconnect,
        _ => Then::Nothing,
    });
    lp.run(&mut app).unwrap();
    stop.store(true, Ordering::SeqCst);
    let opens = app.events.iter().filter(|e| **e == Ev::Open).count();
    assert_eq!(opens, 3, "{:?}", app.events);
    assert_eq!(app.refused.len(), 1);
    match app.refused[0] {
        ConnectError::Limited(l) => assert_eq!((l.bucket, l.why), (limits.connects, Why::Full)),
        e => panic!("{e:?}"),
    }
    assert_eq!(
        server.join().unwrap(),
        3,
        "the server saw only admitted connects"
    );
}

#[test]
fn refused_tcp_connect_is_refunded_on_the_loop() {
    // Port 1: nobody listens there.
    let addr = "127.0.0.1:1".parse().unwrap();
    let (mut lp, mut app, limits) = setup(addr, 10, |ev| match ev {
        Ev::Closed(..) => Then::Stop,
        _ => Then::Nothing,
    });
    lp.run(&mut app).unwrap();
    assert_eq!(
        app.events,
        vec![Ev::Closed(Cause::Transport, None, String::new())]
    );
    let st = lp.budget().stats(limits.connects).unwrap();
    assert_eq!((st.admitted, st.refunds, st.used), (1, 1, 0));
}

#[test]
fn ping_flood_on_the_loop_pongs_paced_by_loop_timers() {
    const PINGS: usize = 30;
    let (addr, server) = serve(|l| {
        let mut p = Peer::accept(&l);
        p.handshake();
        let last = format!("ping-{}", PINGS - 1).into_bytes();
        // Until the pong of the last ping (it may take a window or two).
        let got = p.record_frames(move |f| f.opcode == 0xA && f.payload == last);
        p.ping_every_20ms(PINGS);
        let frames = got.join().unwrap();
        p.write_frame(true, 0x8, &1000u16.to_be_bytes());
        let (code, _) = p.read_until_close();
        (frames, code)
    });
    let (mut lp, mut app, limits) = setup_with(addr, 10, 5, |ev| match ev {
        Ev::Closed(..) => Then::Stop,
        _ => Then::Nothing,
    });
    lp.run(&mut app).unwrap();
    let (frames, code) = server.join().unwrap();
    // The echo of the server's close was owed too, and paced like the rest.
    assert_eq!(code, Some(1000));
    let window = Duration::from_millis(950);
    for (i, f) in frames.iter().enumerate() {
        let n = frames[i..]
            .iter()
            .take_while(|g| g.at.duration_since(f.at) < window)
            .count();
        assert!(n <= 5, "{n} frames within {window:?} from frame {i}");
    }
    let st = app.ws.session(app.id).unwrap().stats();
    assert_eq!(st.pings_received, PINGS as u64);
    assert!(st.pongs_delayed >= 1 && st.pongs_coalesced >= 1, "{st:?}");
    assert_eq!(
        st.pongs_sent + st.pongs_coalesced + st.pongs_abandoned,
        st.pings_received
    );
    assert_eq!(st.pongs_sent as usize, frames.len());
    assert_eq!(
        lp.budget().stats(limits.messages).unwrap().admitted,
        st.frames_sent
    );
}

/// A session on an egress lane connects from the lane's address (the server sees
/// it as the peer); a binding the stack does not keep refuses the lane for good,
/// before a byte of the upgrade request is written.
fn on_lane(
    local: &str,
) -> (
    EventLoop,
    App<Then>,
    Limits,
    std::thread::JoinHandle<Option<std::net::SocketAddr>>,
) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Both cases connect (the refused lane is dropped after connect), so a
    // blocking accept; the loop's own deadline fails the test if none comes.
    let server = std::thread::spawn(move || {
        let (s, from) = listener.accept().ok()?;
        let mut p = Peer::from_stream(s);
        // A lane whose binding did not hold is dropped before the upgrade.
        if from.ip() == "127.0.0.1".parse::<std::net::IpAddr>().unwrap() {
            p.expect_eof();
            assert!(p.request.is_empty());
            return Some(from);
        }
        p.handshake();
        p.write_frame(true, 0x8, &1000u16.to_be_bytes());
        let _ = p.read_until_close();
        Some(from)
    });
    let local: std::net::SocketAddr = format!("{local}:0").parse().unwrap();
    let (lp, app, limits) = on_loop(
        WsConfig::default(),
        (10, 100),
        &REQ_LOOP,
        |ws, session| {
            let id = ws.add(session, addr);
            ws.set_local_addr(id, Some(local)).unwrap();
            id
        },
        |ev| match ev {
            Ev::Closed(..) => Then::Stop,
            _ => Then::Nothing,
        },
    );
    (lp, app, limits, server)
}

#[test]
fn a_websocket_on_a_lane_connects_from_the_lane_address() {
    let (mut lp, mut app, limits, server) = on_lane("127.0.0.2");
    lp.run(&mut app).unwrap();
    assert_eq!(
        app.events,
        vec![Ev::Open, Ev::Closed(Cause::Peer, Some(1000), String::new())]
    );
    let from = server.join().unwrap().expect("the server saw a connect");
    assert_eq!(from.ip().to_string(), "127.0.0.2");
    assert_eq!(app.ws.refused(app.id), None);
    assert_eq!(lp.budget().stats(limits.connects).unwrap().admitted, 1);
}

#[test]
fn a_websocket_lane_whose_binding_does_not_hold_is_refused() {
    // The wildcard binds, but the socket ends up on 127.0.0.1: the binding was not
    // kept as asked, as on a stack that ignores it.
    let (mut lp, mut app, limits, server) = on_lane("0.0.0.0");
    lp.run(&mut app).unwrap();
    assert_eq!(
        app.events,
        vec![Ev::Closed(Cause::Transport, None, String::new())]
    );
    let Some(ConnectError::LocalAddr { asked, got }) = app.ws.refused(app.id) else {
        panic!("expected LocalAddr, got {:?}", app.ws.refused(app.id));
    };
    assert_eq!(asked.ip().to_string(), "0.0.0.0");
    assert_eq!(got.ip().to_string(), "127.0.0.1");
    // The upgrade never left: the connect charge came back.
    assert_eq!(lp.budget().stats(limits.connects).unwrap().used, 0);
    server.join().unwrap();
    // Refused for good: the next connect is refused before any charge.
    let now = lp.now();
    let budget = lp.budget_mut();
    assert_eq!(
        app.ws
            .connect(app.id, &REQ_LOOP, Class::Normal, budget, now),
        Err(ConnectError::LocalAddr { asked, got })
    );
    assert_eq!(lp.budget().stats(limits.connects).unwrap().admitted, 1);
}

#[test]
fn an_unknown_session_id_is_an_error_not_a_panic() {
    let (mut lp, mut app, _, server) = on_lane("127.0.0.2");
    lp.run(&mut app).unwrap();
    server.join().unwrap();
    // Ids of another client, one with the index of this client's session.
    let mut other = ergon_io::ws::WsClient::new(4);
    let (budget, limits) = budget(10, 10);
    let mut ids = Vec::new();
    for _ in 0..3 {
        let s = ergon_io::ws::Session::new(
            WsConfig::default(),
            &budget,
            &limits.connect_parts(),
            &limits.message_parts(),
            1,
        )
        .unwrap();
        ids.push(other.add(s, "127.0.0.1:9".parse().unwrap()));
    }
    // ids[0] has the index of app's own session: still another client's.
    let own = app.ws.session(app.id).unwrap().stats();
    let now = lp.now();
    for &foreign in &ids {
        assert!(app.ws.session(foreign).is_none());
        assert!(app.ws.session_mut(foreign).is_none());
        assert_eq!(app.ws.refused(foreign), None);
        assert_eq!(
            app.ws.set_local_addr(foreign, None),
            Err(ConnectError::UnknownSession)
        );
        let budget = lp.budget_mut();
        assert_eq!(
            app.ws
                .connect(foreign, &REQ_LOOP, Class::Normal, budget, now),
            Err(ConnectError::UnknownSession)
        );
        app.ws.flush(foreign, budget, now);
    }
    // The other client's ids still work there; app's session was not touched.
    assert!(other.session(ids[0]).is_some());
    assert_eq!(app.ws.session(app.id).unwrap().stats(), own);
}

#[test]
fn a_client_not_on_a_loop_refuses_connects_before_any_charge() {
    let (mut budget, limits) = budget(10, 10);
    let s = ergon_io::ws::Session::new(
        WsConfig::default(),
        &budget,
        &limits.connect_parts(),
        &limits.message_parts(),
        1,
    )
    .unwrap();
    let mut ws = ergon_io::ws::WsClient::new(1);
    let id = ws.add(s, "127.0.0.1:9".parse().unwrap());
    assert_eq!(
        ws.connect(id, &REQ_LOOP, Class::Normal, &mut budget, 0),
        Err(ConnectError::Unattached)
    );
    assert_eq!(budget.stats(limits.connects).unwrap().admitted, 0);
}

/// Two sessions of one client on the loop, each on its own lane (its own
/// source address and its own connect bucket).
struct Lanes {
    ws: ergon_io::ws::WsClient,
    opened: usize,
    deadline: std::time::Instant,
}

impl ergon_io::client::ClientHandler for Lanes {
    fn on_response(
        &mut self,
        _: &mut Context<'_>,
        _: ergon_io::client::RequestId,
        _: ergon_venues::response::Response<'_>,
        _: ergon_io::core::Flight,
    ) {
        unreachable!("no HTTP here");
    }
    fn on_error(
        &mut self,
        _: &mut Context<'_>,
        _: ergon_io::client::RequestId,
        _: ergon_io::client::Sent,
        _: ergon_io::client::Error,
    ) {
        unreachable!("no HTTP here");
    }
    fn on_fd(&mut self, cx: &mut Context<'_>, token: u64, ready: ergon_io::event_loop::Readiness) {
        let now = cx.now();
        let opened = &mut self.opened;
        let mine = self
            .ws
            .handle_ready(token, ready, cx.budget(), now, &mut |_, ev, _| {
                if ev == ergon_io::ws::WsEvent::Open {
                    *opened += 1;
                }
            });
        assert!(mine, "only the client's sockets are watched");
        if self.opened == 2 {
            cx.stop();
        }
    }
    fn on_turn(&mut self, _: &mut Context<'_>) {
        assert!(std::time::Instant::now() < self.deadline, "never opened");
    }
}

#[test]
fn each_websocket_connect_leaves_from_the_address_of_the_lane_it_was_charged_to() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Records each upgrade's path with the peer address it came from.
    let server = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut peers = Vec::new();
        for _ in 0..2 {
            let (s, from) = listener.accept().unwrap();
            let mut p = Peer::from_stream(s);
            p.handshake();
            let path = p.request.split(' ').nth(1).unwrap_or("").to_string();
            seen.push((path, from.ip().to_string()));
            peers.push(p);
        }
        seen.sort();
        seen
    });
    let mut b = ergon_io::core::Budget::builder();
    let spec = ergon_io::core::Spec::sliding(10, 60 * SEC, 60);
    let lane_a = b.add("connects_127.0.0.2", spec).unwrap();
    let lane_b = b.add("connects_127.0.0.3", spec).unwrap();
    let msgs = b.add("messages", spec).unwrap();
    let mut lp = EventLoop::new(
        ergon_io::event_loop::LoopConfig::default(),
        b.build(ergon_io::clock::now_ns()).unwrap(),
    )
    .unwrap();
    let mut ws = ergon_io::ws::WsClient::new(2);
    let message = [ergon_io::core::Part::new(msgs, 1)];
    let mut ids = Vec::new();
    for (lane, ip) in [(lane_a, "127.0.0.2"), (lane_b, "127.0.0.3")] {
        let connect = [ergon_io::core::Part::new(lane, 1)];
        let s = ergon_io::ws::Session::new(WsConfig::default(), lp.budget(), &connect, &message, 7)
            .unwrap();
        let id = ws.add(s, addr);
        ws.set_local_addr(id, Some(format!("{ip}:0").parse().unwrap()))
            .unwrap();
        ids.push(id);
    }
    ws.attach(lp.registry().unwrap(), 40);
    let now = lp.now();
    for (id, path) in ids.iter().zip(["/a", "/b"]) {
        let req = Upgrade {
            host: "127.0.0.1",
            path,
            headers: &[],
        };
        ws.connect(*id, &req, Class::Normal, lp.budget_mut(), now)
            .unwrap();
    }
    let mut h = Lanes {
        ws,
        opened: 0,
        deadline: std::time::Instant::now() + IO_TIMEOUT,
    };
    lp.run(&mut h).unwrap();
    // The connect charged to lane A (path /a) came from lane A's address, B's
    // from B's; each lane's bucket paid for its own connect only.
    assert_eq!(
        server.join().unwrap(),
        vec![
            ("/a".to_string(), "127.0.0.2".to_string()),
            ("/b".to_string(), "127.0.0.3".to_string())
        ]
    );
    assert_eq!(lp.budget().stats(lane_a).unwrap().admitted, 1);
    assert_eq!(lp.budget().stats(lane_b).unwrap().admitted, 1);
    for id in ids {
        assert_eq!(h.ws.refused(id), None);
    }
}
