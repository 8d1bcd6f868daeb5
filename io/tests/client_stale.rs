//! A keep-alive connection the server closed while idle is never written to: the
//! next request goes out on a fresh connection and reaches the server once.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::driver::{order, Answer, Driver, SEC};
use common::server::Server;
use ergon_io::client::{ClientHandler, Error, PoolId, RequestId, Sent};
use ergon_io::core::{Class, Flight, Part};
use ergon_io::event_loop::{Context, Interest, Readiness};
use ergon_venues::response::Response;

/// Answers one request per connection, then closes it once `close` is set.
fn server(close: Arc<AtomicBool>, closed: Arc<AtomicBool>) -> Server {
    Server::start(move |p| {
        let Some(req) = p.read_request() else { return };
        let at = common::server::find(&req, b"\r\n\r\n").unwrap() + 4;
        let body = req[at..].to_vec();
        p.respond(&body);
        if p.no == 0 {
            while !close.load(Ordering::Acquire) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let _ = p.stream.shutdown(std::net::Shutdown::Both);
            closed.store(true, Ordering::Release);
        } else {
            p.echo();
        }
    })
}

/// The [`server`], its `close` and `closed` flags, and a driver whose first
/// request (`id=first`) was answered on connection 0.
fn first_answered() -> (Server, Arc<AtomicBool>, Arc<AtomicBool>, Driver) {
    let (close, closed) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let server = server(close.clone(), closed.clone());
    let mut d = Driver::new(server.addr, |pc| pc.reconnect_delay_ns = 1_000_000);
    let (a, _) = d.send(&order("id=first"), 10 * SEC);
    assert_eq!(a, Answer::ok(b"id=first"));
    (server, close, closed, d)
}

#[test]
fn the_loop_drops_a_connection_closed_while_idle() {
    let (server, close, closed, mut d) = first_answered();
    close.store(true, Ordering::Release);
    assert!(server.wait_for(|_| closed.load(Ordering::Acquire)));
    let (a, _) = d.send(&order("id=second"), 10 * SEC);
    assert_eq!(a, Answer::ok(b"id=second"));
    assert_eq!(d.lp.client().counters().stale, 1);
    let log = server.log.lock().unwrap();
    assert_eq!(log.count(b"id=second"), 1);
    assert_eq!(log.conns_with(b"id=second"), vec![1]);
}

/// Sends from a pipe's readiness, which epoll reports before the connection's EOF:
/// the send path itself must find the connection dead.
struct FromPipe {
    pipe: i32,
    pool: PoolId,
    parts: [Part; 1],
    busy: u32,
    sent: bool,
    body: Option<Vec<u8>>,
}

impl FromPipe {
    fn try_send(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        let t = cx
            .budget()
            .try_charge(&self.parts, Class::Normal, now)
            .unwrap();
        match cx.request(self.pool, &order("id=second"), t, now + 10 * SEC) {
            Ok(_) => self.sent = true,
            Err(r) => {
                self.busy += 1;
                cx.budget().refund(r.into_ticket(), now).unwrap();
            }
        }
    }
}

impl ClientHandler for FromPipe {
    fn on_response(&mut self, cx: &mut Context<'_>, _: RequestId, r: Response<'_>, f: Flight) {
        let now = cx.now();
        cx.budget().complete(f, now).unwrap();
        self.body = Some(r.body.to_vec());
        cx.stop();
    }
    fn on_error(&mut self, _: &mut Context<'_>, _: RequestId, sent: Sent, e: Error) {
        panic!("the request failed: {e} ({sent:?})");
    }
    fn on_fd(&mut self, cx: &mut Context<'_>, token: u64, ready: Readiness) {
        assert_eq!(token, 7);
        assert!(ready.readable());
        let mut b = [0u8; 1];
        // SAFETY: reading one byte into a live buffer from our own pipe.
        assert_eq!(
            unsafe { libc::read(self.pipe, b.as_mut_ptr().cast(), 1) },
            1
        );
        assert!(!self.sent);
        self.try_send(cx);
        assert!(
            !self.sent,
            "the request went out on the connection the server closed"
        );
    }
    fn on_turn(&mut self, cx: &mut Context<'_>) {
        if self.busy > 0 && !self.sent {
            self.try_send(cx);
        }
    }
}

#[test]
fn the_send_path_never_writes_to_a_connection_closed_while_idle() {
    let (server, close, closed, mut d) = first_answered();

    let mut fds = [0i32; 2];
    // SAFETY: fds is a live two-int array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    d.lp.watch_fd(fds[0], 7, Interest::READ).unwrap();
    // The pipe becomes ready first, then the server closes: epoll lists the pipe
    // first, so the request is tried before the loop sees the EOF.
    // SAFETY: writing one byte from a live buffer into our own pipe.
    assert_eq!(unsafe { libc::write(fds[1], b"x".as_ptr().cast(), 1) }, 1);
    close.store(true, Ordering::Release);
    assert!(server.wait_for(|_| closed.load(Ordering::Acquire)));
    std::thread::sleep(std::time::Duration::from_millis(20));

    let mut h = FromPipe {
        pipe: fds[0],
        pool: d.pool,
        parts: [Part::new(d.requests, 1)],
        busy: 0,
        sent: false,
        body: None,
    };
    d.lp.run(&mut h).unwrap();
    assert_eq!(h.body.as_deref(), Some(&b"id=second"[..]));
    assert!(h.busy >= 1);
    assert_eq!(d.lp.client().counters().stale, 1);
    d.lp.unwatch_fd(fds[0]).unwrap();
    // SAFETY: closing our own pipe.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    let log = server.log.lock().unwrap();
    assert_eq!(log.count(b"id=second"), 1);
    assert_eq!(log.conns_with(b"id=second"), vec![1]);
}
