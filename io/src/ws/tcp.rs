//! WebSocket sessions over non-blocking TCP sockets, on the event loop: the thin
//! I/O shell around [`Session`]. Never blocks, never allocates after
//! [`WsClient::add`]; see [`WsClient`] for how to drive it.

use std::net::SocketAddr;
use std::os::raw::c_int;

use ergon_core::{Budget, Class};

use super::{ConnectError, Event, Request, Session, State};
use crate::sys;

/// Reads per socket per drive: bounds the time one busy connection takes.
const MAX_READS: usize = 16;

const IN: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
const OUT: u32 = libc::EPOLLOUT as u32;

/// A session of a [`WsClient`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WsId(usize);

#[derive(Debug)]
struct Conn {
    session: Session,
    addr: SocketAddr,
    fd: Option<c_int>,
    connecting: bool,
    /// EPOLLOUT is in the interest set.
    want_out: bool,
}

/// WebSocket sessions over non-blocking TCP sockets, on the [`event_loop`].
///
/// [`WsClient`] owns the sockets of its sessions and an epoll instance of its own;
/// that epoll's descriptor ([`WsClient::fd`]) is registered once with
/// [`EventLoop::watch_fd`], so a readable socket makes it readable and the loop
/// calls [`ClientHandler::on_fd`]. The handler then calls [`WsClient::drive`]; after
/// it queues frames it calls [`WsClient::flush`]; it keeps a loop timer at
/// [`WsClient::next_deadline`] and drives again when it fires. The shell follows the
/// session's drive order: read → drain events → write.
///
/// It never blocks and never allocates after [`WsClient::add`]; it makes only the
/// syscalls the bytes need (recv, send, epoll), none when a frame is queued until
/// [`WsClient::flush`].
///
/// ```no_run
/// use ergon_core::{response::Response, Budget, Class, Flight, Part, Spec};
/// use ergon_io::client::{ClientHandler, Error, RequestId, Sent};
/// use ergon_io::event_loop::{Config, Context, EventLoop, Interest, Readiness};
/// use ergon_io::ws::{self, Event, Request, Session, WsClient, WsId};
///
/// const WS_FD: u64 = 1;
/// const WS_TIMER: u64 = 2;
///
/// struct App {
///     ws: WsClient,
///     id: WsId,
/// }
///
/// impl App {
///     fn pump(&mut self, cx: &mut Context<'_>) {
///         let now = cx.now();
///         self.ws
///             .drive(cx.budget(), now, &mut |_id, ev, _budget| {
///                 if let Event::Text(t) = ev {
///                     println!("{t}");
///                 }
///             })
///             .expect("our own epoll");
///         if let Some(at) = self.ws.next_deadline() {
///             let _ = cx.set_timer(WS_TIMER, at);
///         }
///     }
/// }
///
/// impl ClientHandler for App {
///     fn on_response(&mut self, _: &mut Context<'_>, _: RequestId, _: Response<'_>, _: Flight) {}
///     fn on_error(&mut self, _: &mut Context<'_>, _: RequestId, _: Sent, _: Error) {}
///     fn on_fd(&mut self, cx: &mut Context<'_>, token: u64, _ready: Readiness) {
///         if token == WS_FD {
///             self.pump(cx);
///         }
///     }
///     fn on_timer(&mut self, cx: &mut Context<'_>, token: u64) {
///         if token == WS_TIMER {
///             self.pump(cx);
///         }
///     }
/// }
///
/// let mut b = Budget::builder();
/// let ip = b.add("ip", Spec::gate()).unwrap();
/// let connects = b.add("ws_connects", Spec::sliding(300, 300_000_000_000, 60)).unwrap();
/// let messages = b.add("ws_messages", Spec::sliding(5, 1_000_000_000, 10)).unwrap();
/// let now = ergon_io::clock::now_ns();
/// let mut budget = b.build(now).unwrap();
/// let session = Session::new(
///     ws::Config::default(),
///     &budget,
///     &[Part::new(ip, 0), Part::new(connects, 1)],
///     &[Part::new(ip, 0), Part::new(messages, 1)],
///     now as u64, // seed from the OS in production
/// )
/// .unwrap();
/// let mut ws = WsClient::new(1).unwrap();
/// let id = ws.add(session, "127.0.0.1:9443".parse().unwrap());
/// let req = Request { host: "127.0.0.1:9443", path: "/ws", headers: &[] };
/// ws.connect(id, &req, Class::Normal, &mut budget, now).unwrap();
/// let mut lp = EventLoop::new(Config::default(), budget).unwrap();
/// lp.watch_fd(ws.fd(), WS_FD, Interest::READ).unwrap();
/// lp.run(&mut App { ws, id }).unwrap();
/// ```
///
/// [`event_loop`]: crate::event_loop
/// [`EventLoop::watch_fd`]: crate::event_loop::EventLoop::watch_fd
/// [`ClientHandler::on_fd`]: crate::client::ClientHandler::on_fd
#[derive(Debug)]
pub struct WsClient {
    epfd: c_int,
    conns: Vec<Conn>,
    events: Vec<libc::epoll_event>,
}

impl WsClient {
    /// A client for up to `max_sessions` sessions (the readiness events taken per
    /// drive). Fails with the `errno` of `epoll_create1`.
    pub fn new(max_sessions: usize) -> Result<Self, i32> {
        let epfd = sys::epoll_create()?;
        Ok(WsClient {
            epfd,
            conns: Vec::with_capacity(max_sessions),
            events: vec![libc::epoll_event { events: 0, u64: 0 }; max_sessions.max(1)],
        })
    }

    /// The descriptor to register with
    /// [`EventLoop::watch_fd`](crate::event_loop::EventLoop::watch_fd): readable
    /// when a socket of this client is ready.
    pub fn fd(&self) -> c_int {
        self.epfd
    }

    /// Adds a session that connects to `addr` (setup time: may allocate).
    pub fn add(&mut self, session: Session, addr: SocketAddr) -> WsId {
        self.conns.push(Conn {
            session,
            addr,
            fd: None,
            connecting: false,
            want_out: false,
        });
        WsId(self.conns.len() - 1)
    }

    /// The session `id`, to read its state and stats.
    pub fn session(&self, id: WsId) -> &Session {
        &self.conns[id.0].session
    }

    /// The session `id`, to queue frames; then [`WsClient::flush`].
    pub fn session_mut(&mut self, id: WsId) -> &mut Session {
        &mut self.conns[id.0].session
    }

    /// Charges the connect parts ([`Session::connect`]) and, only if admitted, opens
    /// a non-blocking socket. A connect that fails at once ends the session with
    /// [`Cause::Transport`](super::Cause::Transport) on the next drive, its charge
    /// refunded: no request byte left.
    pub fn connect(
        &mut self,
        id: WsId,
        req: &Request<'_>,
        class: Class,
        budget: &mut Budget,
        now_ns: i64,
    ) -> Result<(), ConnectError> {
        let c = &mut self.conns[id.0];
        c.session.connect(req, class, budget, now_ns)?;
        if let Some(old) = c.fd.take() {
            // The last connection's socket, kept for a close frame still owed.
            sys::close(old);
        }
        match sys::connect(&c.addr) {
            sys::Connecting::Started(fd) => {
                if sys::epoll_ctl(self.epfd, libc::EPOLL_CTL_ADD, fd, IN | OUT, id.0 as u64)
                    .is_err()
                {
                    sys::close(fd);
                    c.session.handle_transport_closed(budget, now_ns);
                    return Ok(());
                }
                c.fd = Some(fd);
                c.connecting = true;
                c.want_out = true;
            }
            sys::Connecting::NotSent(_) | sys::Connecting::Failed(_) => {
                c.session.handle_transport_closed(budget, now_ns);
            }
        }
        Ok(())
    }

    /// Handles what is ready: completes connects, reads, hands every event to
    /// `on_event`, fires due session timeouts, writes. Call it when the loop says
    /// [`WsClient::fd`] is readable and when the timer at
    /// [`WsClient::next_deadline`] fires. Fails only if this client's own epoll
    /// cannot be read (`errno`); the sessions are then still served for timeouts
    /// and writes.
    pub fn drive(
        &mut self,
        budget: &mut Budget,
        now_ns: i64,
        on_event: &mut dyn FnMut(WsId, Event<'_>, &mut Budget),
    ) -> Result<(), i32> {
        let waited = sys::epoll_wait(self.epfd, &mut self.events, 0);
        let n = *waited.as_ref().unwrap_or(&0);
        for k in 0..n {
            let ev = self.events[k];
            let i = ev.u64 as usize;
            if i < self.conns.len() {
                self.ready(i, ev.events, budget, now_ns, on_event);
            }
        }
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            if c.session.poll_timeout().is_some_and(|t| t <= now_ns) {
                c.session.handle_timeout(budget, now_ns);
            }
            self.events_out(i, budget, now_ns, on_event);
            self.write(i, budget, now_ns);
            self.events_out(i, budget, now_ns, on_event);
        }
        waited.map(|_| ())
    }

    /// Writes what session `id` has queued (after a send).
    pub fn flush(&mut self, id: WsId, budget: &mut Budget, now_ns: i64) {
        self.write(id.0, budget, now_ns);
    }

    /// The earliest time a session wants [`WsClient::drive`] called regardless of
    /// readiness (a delayed pong, a handshake or close deadline).
    pub fn next_deadline(&self) -> Option<i64> {
        self.conns
            .iter()
            .filter_map(|c| c.session.poll_timeout())
            .min()
    }

    fn ready(
        &mut self,
        i: usize,
        bits: u32,
        budget: &mut Budget,
        now: i64,
        on_event: &mut dyn FnMut(WsId, Event<'_>, &mut Budget),
    ) {
        let Some(fd) = self.conns[i].fd else { return };
        if self.conns[i].connecting {
            let failed = bits & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;
            if !failed && bits & OUT == 0 {
                return;
            }
            if failed || sys::so_error(fd) != 0 {
                self.lost(i, budget, now);
                self.events_out(i, budget, now, on_event);
                return;
            }
            self.conns[i].connecting = false;
            self.write(i, budget, now);
        }
        if bits & OUT != 0 {
            self.write(i, budget, now);
        }
        for _ in 0..MAX_READS {
            let Some(fd) = self.conns[i].fd else { break };
            let c = &mut self.conns[i];
            let buf = c.session.read_buf();
            if buf.is_empty() {
                // Complete frames wait to be polled: poll, then read on.
                self.events_out(i, budget, now, on_event);
                if self.conns[i].session.read_buf().is_empty() {
                    break;
                }
                continue;
            }
            match sys::recv(fd, buf) {
                Ok(sys::Read::Data(n)) => {
                    c.session.handle_read(n);
                    self.events_out(i, budget, now, on_event);
                }
                Ok(sys::Read::WouldBlock) => break,
                Ok(sys::Read::Eof) | Err(_) => {
                    self.lost(i, budget, now);
                    break;
                }
            }
        }
        self.events_out(i, budget, now, on_event);
        self.write(i, budget, now);
    }

    fn events_out(
        &mut self,
        i: usize,
        budget: &mut Budget,
        now: i64,
        on_event: &mut dyn FnMut(WsId, Event<'_>, &mut Budget),
    ) {
        let c = &mut self.conns[i];
        while let Some(ev) = c.session.poll_event(budget, now) {
            on_event(WsId(i), ev, budget);
        }
    }

    fn write(&mut self, i: usize, budget: &mut Budget, now: i64) {
        let c = &mut self.conns[i];
        let Some(fd) = c.fd else { return };
        if c.connecting {
            return;
        }
        let mut blocked = false;
        while let Some(bytes) = c.session.poll_transmit() {
            match sys::send(fd, bytes) {
                Ok(0) => {
                    blocked = true;
                    break;
                }
                Ok(n) => c.session.handle_written(n, budget, now),
                Err(_) => {
                    self.lost(i, budget, now);
                    return;
                }
            }
        }
        if blocked != c.want_out {
            let interest = if blocked { IN | OUT } else { IN };
            if sys::epoll_ctl(self.epfd, libc::EPOLL_CTL_MOD, fd, interest, i as u64).is_err() {
                // A socket we can no longer watch would stall: end it.
                self.lost(i, budget, now);
                return;
            }
            c.want_out = blocked;
        }
        if c.session.is_finished() {
            sys::close(fd);
            c.fd = None;
            c.session.handle_transport_closed(budget, now);
        }
    }

    /// The transport of session `i` ended: close it, settle the session.
    fn lost(&mut self, i: usize, budget: &mut Budget, now: i64) {
        let c = &mut self.conns[i];
        if let Some(fd) = c.fd.take() {
            sys::close(fd);
        }
        c.connecting = false;
        c.want_out = false;
        if c.session.state() != State::Idle {
            c.session.handle_transport_closed(budget, now);
        }
    }
}

impl Drop for WsClient {
    fn drop(&mut self) {
        for c in &mut self.conns {
            if let Some(fd) = c.fd.take() {
                sys::close(fd);
            }
        }
        sys::close(self.epfd);
    }
}
