//! A server that never answers: the request fails with Sent::Maybe once its
//! deadline passed, and its connection is closed, never reused; a connect that
//! never completes fails at its connect timeout. Deadlines on jumped time
//! ([`EventLoop::turn_at`]): nothing here waits for time to pass, only for
//! sockets.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::driver::{order, Answer, Driver, SentKind, SEC};
use common::server::Server;
use ergon_io::client::{ClientHandler, Error, PoolId, RequestId, Sent};
use ergon_io::core::{Class, Flight, Part};
use ergon_io::event_loop::{Context, EventLoop};
use ergon_io::http::Request;
use ergon_venues::response::Response;

/// Sends one request as soon as the pool takes it; records how it ended.
struct One<'r> {
    pool: PoolId,
    parts: [Part; 1],
    req: Request<'r>,
    deadline_ns: i64,
    id: Option<RequestId>,
    answer: Option<Answer>,
}

impl<'r> One<'r> {
    fn new(d: &Driver, req: Request<'r>, deadline_ns: i64) -> Self {
        One {
            pool: d.pool,
            parts: [Part::new(d.requests, 1)],
            req,
            deadline_ns,
            id: None,
            answer: None,
        }
    }
}

impl ClientHandler for One<'_> {
    fn on_response(&mut self, cx: &mut Context<'_>, id: RequestId, r: Response<'_>, f: Flight) {
        assert_eq!(Some(id), self.id);
        cx.complete(f);
        self.answer = Some(Answer::Response {
            status: r.status,
            body: r.body.to_vec(),
        });
    }

    fn on_error(&mut self, cx: &mut Context<'_>, id: RequestId, sent: Sent, error: Error) {
        assert_eq!(Some(id), self.id);
        let sent = if cx.settle(sent) {
            SentKind::Maybe
        } else {
            SentKind::No
        };
        self.answer = Some(Answer::Error { sent, error });
    }

    fn on_turn(&mut self, cx: &mut Context<'_>) {
        if self.id.is_some() {
            return;
        }
        let now = cx.now();
        let ticket = cx
            .budget()
            .try_charge(&self.parts, Class::Normal, now)
            .unwrap();
        match cx.request(self.pool, &self.req, ticket, now + self.deadline_ns) {
            Ok(id) => self.id = Some(id),
            Err(busy) => cx.refund(busy.into_ticket()),
        }
    }
}

/// Turns at `now` (time stands still) until `done` holds: waits for sockets,
/// never for time. Bounded in real time so a bug fails instead of hanging.
fn turns_at<H: ClientHandler>(lp: &mut EventLoop, h: &mut H, now: i64, done: impl Fn(&H) -> bool) {
    let end = Instant::now() + Duration::from_secs(20);
    while !done(h) {
        assert!(Instant::now() < end, "never happened");
        lp.turn_at(h, now).unwrap();
    }
}

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
    let reconnect = 1_000_000;
    let mut d = Driver::new(server.addr, |pc| pc.reconnect_delay_ns = reconnect);
    d.wait_ready();
    let deadline = 300_000_000;
    let mut h = One::new(&d, order("id=slow"), deadline);
    // Written on the first turn, on an idle connection, at t0.
    let t0 = d.lp.now();
    d.lp.turn_at(&mut h, t0).unwrap();
    assert!(h.id.is_some(), "an idle connection takes the request");
    // The server has it: nothing more comes before the deadline, however long
    // the machine takes.
    assert!(server.wait_for(|log| log.conns_with(b"id=slow") == vec![0]));
    d.lp.turn_at(&mut h, t0 + deadline - 1).unwrap();
    assert_eq!(h.answer, None, "one nanosecond before its deadline");
    d.lp.turn_at(&mut h, t0 + deadline).unwrap();
    assert_eq!(
        h.answer,
        Some(Answer::Error {
            sent: SentKind::Maybe,
            error: Error::Timeout
        })
    );
    assert_eq!(d.lp.client().counters().timeouts, 1);
    // The server sees the connection closed.
    assert!(server.wait_for(|_| saw_close.load(Ordering::Acquire)));
    // The next request goes out on a new connection, opened after the
    // reconnect delay; time stands there until it is answered.
    let mut h = One::new(&d, order("id=next"), 10 * SEC);
    turns_at(&mut d.lp, &mut h, t0 + deadline + reconnect, |h| {
        h.answer.is_some()
    });
    assert_eq!(h.answer, Some(Answer::ok(b"id=next")));
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
    let connect_timeout = 200_000_000;
    let mut d = Driver::new(addr, |pc| {
        pc.connect_timeout_ns = connect_timeout;
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
    // The pool's connect starts on the first turn, at t0, and hangs.
    let pool = d.pool;
    let t0 = d.lp.now();
    let mut idle = Idle;
    d.lp.turn_at(&mut idle, t0).unwrap();
    assert_eq!(d.lp.client().idle(pool), 0, "requests find the pool busy");
    d.lp.turn_at(&mut idle, t0 + connect_timeout - 1).unwrap();
    assert_eq!(d.lp.client().counters().connect_failures, 0);
    assert_eq!(d.lp.client().idle(pool), 0);
    // Not refused at once: it fails exactly when the connect timeout runs out.
    d.lp.turn_at(&mut idle, t0 + connect_timeout).unwrap();
    assert_eq!(d.lp.client().counters().connect_failures, 1);
    assert_eq!(d.lp.client().counters().connected, 0);
    drop(fillers);
}

/// Sends nothing.
struct Idle;

impl ClientHandler for Idle {
    fn on_response(&mut self, _: &mut Context<'_>, _: RequestId, _: Response<'_>, _: Flight) {
        panic!("no request was sent");
    }
    fn on_error(&mut self, _: &mut Context<'_>, _: RequestId, _: Sent, _: Error) {
        panic!("no request was sent");
    }
}
