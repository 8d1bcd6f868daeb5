//! WebSocket sessions over non-blocking TCP sockets, plain (`ws://`) or TLS
//! (`wss://`, rustls through [`crate::tls`]), on the event loop: the thin I/O shell
//! around [`Session`], its sockets watched by the loop's own epoll (never an
//! epoll of its own). Never blocks; over plain TCP never allocates after
//! [`WsClient::add`] (over TLS rustls allocates per record: see [`WsClient`]); never
//! writes a byte of the upgrade request before the TLS handshake verified the
//! server. See [`WsClient`] for how to drive it.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU32, Ordering};

use ergon_core::{Budget, Class};

use super::{ConnectError, Pipe, Session, State, Upgrade, WsEvent};
use crate::handler::{Interest, Readiness, Registry};
use crate::sys;
use crate::tls::{Fault, Input, Plain, Session as Tls};
#[cfg(feature = "tls")]
use crate::tls::{TlsConfig, TlsError};

/// Reads per socket per drive: bounds the time one busy connection takes.
const MAX_READS: usize = 16;
/// Turns of plaintext-in, records-out per write over TLS: each turn moves bytes
/// into rustls or drains it, so this only bounds a pathological peer.
const MAX_TLS_TURNS: usize = 64;

const OUT: u32 = libc::EPOLLOUT as u32;

/// A session of a [`WsClient`]: the client that made it and the session's
/// index there. An id given to another client is unknown to it (an error or
/// `None`, never another client's session or a panic).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WsId {
    client: u32,
    index: usize,
}

/// The tag of the next [`WsClient`]: ids of two clients never compare equal.
static NEXT_CLIENT: AtomicU32 = AtomicU32::new(0);

#[derive(Debug)]
struct Conn {
    session: Session,
    addr: SocketAddr,
    /// The socket of the current connection; closed when dropped.
    sock: Option<OwnedFd>,
    /// `sock`'s raw descriptor, for the system calls.
    fd: Option<c_int>,
    connecting: bool,
    /// EPOLLOUT is in the interest set.
    want_out: bool,
    /// `wss://`: what each connection's TLS session is built from.
    #[cfg(feature = "tls")]
    tls_config: Option<TlsConfig>,
    /// The TLS session of the current connection (`wss://`, once TCP connected).
    tls: Option<Tls>,
    /// The egress lane: every connect binds to it and is verified.
    local_addr: Option<SocketAddr>,
    /// Set when the lane was refused for good (an ignored binding).
    refused: Option<ConnectError>,
    /// The transport is in memory instead of a socket ([`WsClient::use_pipe`]).
    pipe: Option<Pipe>,
}

/// WebSocket sessions over non-blocking TCP sockets, on the [`event_loop`].
///
/// [`WsClient`] owns the sockets of its sessions; the loop's own epoll watches
/// them (no epoll of the client's: [`WsClient::attach`] gives it the loop's
/// [`Registry`] and a token per session). A ready socket reaches
/// [`ClientHandler::on_fd`] with its session's token; the handler hands it to
/// [`WsClient::handle_ready`], which moves the bytes and hands the readiness to
/// the sans-IO [`Session`]. After it queues frames the handler calls
/// [`WsClient::flush`]; it keeps a loop timer at [`WsClient::next_deadline`] and
/// calls [`WsClient::handle_timeout`] when it fires. The shell follows the
/// session's drive order: read → drain events → write.
///
/// Egress lanes ([`WsClient::set_local_addr`]): a session's connects leave from
/// its lane's bound address and are verified after connect, as an HTTP pool's
/// are; a binding that does not hold refuses the lane for good. Unknown ids are
/// errors ([`ConnectError::UnknownSession`]) or `None` ([`WsClient::session`]).
///
/// It never blocks and never allocates after [`WsClient::add`]; it makes only the
/// syscalls the bytes need (recv, send, epoll_ctl), none when a frame is queued
/// until [`WsClient::flush`].
///
/// `wss://` ([`WsClient::add_tls`]): once TCP connects, the rustls handshake runs
/// first (certificate and name verified, as [`TlsConfig`] says); the upgrade
/// request goes into rustls only after it, so a server that fails verification
/// never receives a byte of it, and the connect charge is refunded
/// ([`Cause::Tls`](super::Cause::Tls)). A frame counts as written (its charge
/// kept, a request Unknown if the connection drops) once rustls has taken its
/// bytes: rustls writes them on its own from then on, so this errs on the safe
/// side. Known cost: rustls's buffered API allocates a buffer per TLS record, one
/// for each record written and one for each record read (measured in
/// `io/tests/ws_tls.rs`: 2 allocations per echoed message), so over TLS the send
/// path is not allocation-free; plain TCP is.
///
/// ```no_run
/// use ergon_core::{Budget, Class, Flight, Part, Spec};
/// use ergon_venues::response::Response;
/// use ergon_io::client::{ClientHandler, Error, RequestId, Sent};
/// use ergon_io::event_loop::{Context, EventLoop, LoopConfig, Readiness};
/// use ergon_io::ws::{self, Session, Upgrade, WsClient, WsEvent, WsId};
///
/// const WS_SOCKET: u64 = 1;
/// const WS_TIMER: u64 = 2;
///
/// struct App {
///     ws: WsClient,
///     id: WsId,
/// }
///
/// fn print(_id: WsId, ev: WsEvent<'_>, _budget: &mut Budget) {
///     if let WsEvent::Text(t) = ev {
///         println!("{t}");
///     }
/// }
///
/// impl App {
///     fn rearm(&mut self, cx: &mut Context<'_>) {
///         if let Some(at) = self.ws.next_deadline() {
///             let _ = cx.set_timer(WS_TIMER, at);
///         }
///     }
/// }
///
/// impl ClientHandler for App {
///     fn on_response(&mut self, _: &mut Context<'_>, _: RequestId, _: Response<'_>, _: Flight) {}
///     fn on_error(&mut self, _: &mut Context<'_>, _: RequestId, _: Sent, _: Error) {}
///     fn on_fd(&mut self, cx: &mut Context<'_>, token: u64, ready: Readiness) {
///         let now = cx.now();
///         if self.ws.handle_ready(token, ready, cx.budget(), now, &mut print) {
///             self.rearm(cx);
///         }
///     }
///     fn on_timer(&mut self, cx: &mut Context<'_>, token: u64) {
///         if token == WS_TIMER {
///             let now = cx.now();
///             self.ws.handle_timeout(cx.budget(), now, &mut print);
///             self.rearm(cx);
///         }
///     }
/// }
///
/// let mut b = Budget::builder();
/// let ip = b.add("ip", Spec::gate()).unwrap();
/// let connects = b.add("ws_connects", Spec::sliding(300, 300_000_000_000, 60)).unwrap();
/// let messages = b.add("ws_messages", Spec::sliding(5, 1_000_000_000, 10)).unwrap();
/// let now = ergon_io::clock::now_ns();
/// let budget = b.build(now).unwrap();
/// let session = Session::new(
///     ws::WsConfig::default(),
///     &budget,
///     &[Part::new(ip, 0), Part::new(connects, 1)],
///     &[Part::new(ip, 0), Part::new(messages, 1)],
///     now as u64, // seed from the OS in production
/// )
/// .unwrap();
/// let mut lp = EventLoop::new(LoopConfig::default(), budget).unwrap();
/// let mut ws = WsClient::new(1);
/// let id = ws.add(session, "127.0.0.1:9443".parse().unwrap());
/// ws.attach(lp.registry().unwrap(), WS_SOCKET);
/// let req = Upgrade { host: "127.0.0.1:9443", path: "/ws", headers: &[] };
/// let now = lp.now();
/// ws.connect(id, &req, Class::Normal, lp.budget_mut(), now).unwrap();
/// lp.run(&mut App { ws, id }).unwrap();
/// ```
///
/// [`event_loop`]: crate::event_loop
/// [`ClientHandler::on_fd`]: crate::client::ClientHandler::on_fd
#[derive(Debug)]
pub struct WsClient {
    conns: Vec<Conn>,
    /// Stamped on this client's ids.
    tag: u32,
    /// The loop's epoll and the token of session 0 ([`WsClient::attach`]).
    watch: Option<(Registry, u64)>,
}

impl WsClient {
    /// A client with room for `max_sessions` sessions; it connects nothing until
    /// [`attach`](Self::attach)ed to a loop.
    pub fn new(max_sessions: usize) -> Self {
        WsClient {
            conns: Vec::with_capacity(max_sessions),
            tag: NEXT_CLIENT.fetch_add(1, Ordering::Relaxed),
            watch: None,
        }
    }

    /// Puts the sockets of the connects from now on in the loop's epoll: session
    /// `k` (in the order of [`add`](Self::add)) under token `token + k`, so its
    /// readiness reaches [`ClientHandler::on_fd`](crate::client::ClientHandler::on_fd)
    /// with that token; hand it to [`WsClient::handle_ready`]. The handler keeps
    /// `token..token + sessions` for this client (below 2^63). A connection
    /// already open stays where it was watched.
    pub fn attach(&mut self, registry: Registry, token: u64) {
        self.watch = Some((registry, token));
    }

    /// Adds a session that connects to `addr` (setup time: may allocate).
    pub fn add(&mut self, session: Session, addr: SocketAddr) -> WsId {
        self.conns.push(Conn {
            session,
            addr,
            sock: None,
            fd: None,
            connecting: false,
            want_out: false,
            #[cfg(feature = "tls")]
            tls_config: None,
            tls: None,
            local_addr: None,
            refused: None,
            pipe: None,
        });
        WsId {
            client: self.tag,
            index: self.conns.len() - 1,
        }
    }

    /// The index of session `id`, if it is one of this client's.
    fn index(&self, id: WsId) -> Option<usize> {
        (id.client == self.tag && id.index < self.conns.len()).then_some(id.index)
    }

    /// The index of the session watched under `token`, if any.
    fn index_of_token(&self, token: u64) -> Option<usize> {
        let (_, base) = self.watch.as_ref()?;
        let i = usize::try_from(token.checked_sub(*base)?).ok()?;
        (i < self.conns.len()).then_some(i)
    }

    /// Puts session `id` on an egress lane: from its next connect on, the socket
    /// is bound to `local` (port 0 for any port) before it connects, and its local
    /// address is read back once connected. If it is not the one asked (some
    /// stacks ignore a binding; an unspecified address never verifies), the
    /// connection is dropped before a byte of the upgrade request is written (its
    /// charge refunded) and the lane is refused for good
    /// ([`ConnectError::LocalAddr`], [`WsClient::refused`]), as an HTTP pool's is:
    /// a connect charged to one IP's budget never leaves from another IP.
    pub fn set_local_addr(
        &mut self,
        id: WsId,
        local: Option<SocketAddr>,
    ) -> Result<(), ConnectError> {
        let i = self.index(id).ok_or(ConnectError::UnknownSession)?;
        self.conns[i].local_addr = local;
        Ok(())
    }

    /// Why session `id`'s lane was refused for good, if it was.
    pub fn refused(&self, id: WsId) -> Option<ConnectError> {
        self.index(id).and_then(|i| self.conns[i].refused)
    }

    /// Puts session `id` on an in-memory transport ([`Pipe`]) instead of a
    /// socket: from its next connect on, no socket is opened and no loop is
    /// needed; the caller moves the bytes ([`WsClient::pipe_mut`]) and drives
    /// the session with [`WsClient::handle_timeout`], which reads what the peer
    /// delivered and settles a transport the peer cut. For a deterministic
    /// simulation of the code that drives the client.
    pub fn use_pipe(&mut self, id: WsId) -> Result<(), ConnectError> {
        let i = self.index(id).ok_or(ConnectError::UnknownSession)?;
        self.conns[i].pipe = Some(Pipe::default());
        Ok(())
    }

    /// Session `id`'s in-memory transport, if it is on one.
    pub fn pipe_mut(&mut self, id: WsId) -> Option<&mut Pipe> {
        let i = self.index(id)?;
        self.conns[i].pipe.as_mut()
    }

    /// Adds a `wss://` session that connects to `addr` and runs TLS over it,
    /// verified as `tls` says ([`TlsConfig::webpki_roots`] for a venue), before the
    /// upgrade request (setup time: may allocate).
    #[cfg(feature = "tls")]
    pub fn add_tls(&mut self, session: Session, addr: SocketAddr, tls: TlsConfig) -> WsId {
        let id = self.add(session, addr);
        self.conns[id.index].tls_config = Some(tls);
        id
    }

    /// The session `id`, to read its state and stats; None for an id of another
    /// client.
    pub fn session(&self, id: WsId) -> Option<&Session> {
        self.index(id).map(|i| &self.conns[i].session)
    }

    /// The session `id`, to queue frames (then [`WsClient::flush`]); None for an
    /// id of another client.
    pub fn session_mut(&mut self, id: WsId) -> Option<&mut Session> {
        let i = self.index(id)?;
        Some(&mut self.conns[i].session)
    }

    /// Charges the connect parts ([`Session::connect`]) and, only if admitted, opens
    /// a non-blocking socket. A connect that fails at once ends the session with
    /// [`Cause::Transport`](super::Cause::Transport) on the next drive, its charge
    /// refunded: no request byte left. Over TLS the same holds for a TLS handshake
    /// that fails ([`Cause::Tls`](super::Cause::Tls)) or does not end within the
    /// session's handshake timeout.
    pub fn connect(
        &mut self,
        id: WsId,
        req: &Upgrade<'_>,
        class: Class,
        budget: &mut Budget,
        now_ns: i64,
    ) -> Result<(), ConnectError> {
        let i = self.index(id).ok_or(ConnectError::UnknownSession)?;
        if self.conns[i].pipe.is_some() {
            let c = &mut self.conns[i];
            c.session.connect(req, class, budget, now_ns)?;
            c.close();
            if let Some(p) = c.pipe.as_mut() {
                p.start();
            }
            self.write(i, budget, now_ns);
            return Ok(());
        }
        let Some((registry, base)) = self.watch.as_ref() else {
            return Err(ConnectError::Unattached);
        };
        let token = base.wrapping_add(i as u64);
        let c = &mut self.conns[i];
        if let Some(e) = c.refused {
            return Err(e);
        }
        c.session.connect(req, class, budget, now_ns)?;
        // The last connection's socket, kept for a close frame still owed.
        c.close();
        c.tls = None;
        match sys::connect_from(&c.addr, c.local_addr.as_ref()) {
            sys::Connecting::Started(sock) => {
                let fd = sock.as_raw_fd();
                if registry.add(fd, token, Interest::BOTH).is_err() {
                    drop(sock);
                    c.session.handle_transport_closed(budget, now_ns);
                    return Ok(());
                }
                c.fd = Some(fd);
                c.sock = Some(sock);
                c.connecting = true;
                c.want_out = true;
            }
            sys::Connecting::NotSent(_) | sys::Connecting::Failed(_) => {
                c.session.handle_transport_closed(budget, now_ns);
            }
        }
        Ok(())
    }

    /// Handles the readiness the loop reported under `token` (to
    /// [`ClientHandler::on_fd`](crate::client::ClientHandler::on_fd)): completes
    /// a connect (its lane verified), reads, hands every event to `on_event`,
    /// writes. `false`, and nothing done, if `token` is not one of this client's
    /// sessions.
    pub fn handle_ready(
        &mut self,
        token: u64,
        ready: Readiness,
        budget: &mut Budget,
        now_ns: i64,
        on_event: &mut dyn FnMut(WsId, WsEvent<'_>, &mut Budget),
    ) -> bool {
        let Some(i) = self.index_of_token(token) else {
            return false;
        };
        self.ready(i, ready.0, budget, now_ns, on_event);
        true
    }

    /// Fires the session timeouts due at `now_ns`, hands every event to
    /// `on_event` and writes what is queued, for every session. Call it when the
    /// timer at [`WsClient::next_deadline`] fires.
    pub fn handle_timeout(
        &mut self,
        budget: &mut Budget,
        now_ns: i64,
        on_event: &mut dyn FnMut(WsId, WsEvent<'_>, &mut Budget),
    ) {
        for i in 0..self.conns.len() {
            self.pipe_in(i, budget, now_ns, on_event);
            let c = &mut self.conns[i];
            if c.session.poll_timeout().is_some_and(|t| t <= now_ns) {
                c.session.handle_timeout(budget, now_ns);
            }
            self.events_out(i, budget, now_ns, on_event);
            self.write(i, budget, now_ns);
            self.events_out(i, budget, now_ns, on_event);
        }
    }

    /// Writes what session `id` has queued (after a send). Nothing for an id of
    /// another client.
    pub fn flush(&mut self, id: WsId, budget: &mut Budget, now_ns: i64) {
        if let Some(i) = self.index(id) {
            self.write(i, budget, now_ns);
        }
    }

    /// Gives session `id`'s connection up at once (its peer is silent: a request
    /// unanswered past its deadline, no frame within the caller's limit): closes
    /// the socket without a close handshake (a half-open peer would never answer
    /// one), settles the session ([`Session::handle_abandoned`]: every written
    /// request Unknown, every unwritten one refunded) and hands those events to
    /// `on_event`. Nothing for an id of another client or a session not
    /// connected.
    pub fn abort(
        &mut self,
        id: WsId,
        budget: &mut Budget,
        now_ns: i64,
        on_event: &mut dyn FnMut(WsId, WsEvent<'_>, &mut Budget),
    ) {
        let Some(i) = self.index(id) else { return };
        let c = &mut self.conns[i];
        if matches!(c.session.state(), State::Idle | State::Closed) {
            return;
        }
        c.end_transport();
        c.session.handle_abandoned(budget, now_ns);
        self.events_out(i, budget, now_ns, on_event);
    }

    /// The earliest time a session wants [`WsClient::handle_timeout`] called regardless of
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
        on_event: &mut dyn FnMut(WsId, WsEvent<'_>, &mut Budget),
    ) {
        let Some(fd) = self.conns[i].fd else { return };
        if self.conns[i].connecting {
            let failed = bits & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;
            if !failed && bits & OUT == 0 {
                return;
            }
            if failed || sys::so_error(fd) != 0 || !self.lane_holds(i, fd) {
                self.lost(i, budget, now);
                self.events_out(i, budget, now, on_event);
                return;
            }
            self.conns[i].connecting = false;
            if let Err(e) = self.start_tls(i) {
                self.tls_failed(i, e, budget, now);
                self.events_out(i, budget, now, on_event);
                return;
            }
            self.write(i, budget, now);
        }
        if bits & OUT != 0 {
            self.write(i, budget, now);
        }
        if self.conns[i].tls.is_some() {
            self.read_tls(i, budget, now, on_event);
        } else {
            self.read_plain(i, budget, now, on_event);
        }
        self.events_out(i, budget, now, on_event);
        self.write(i, budget, now);
    }

    fn read_plain(
        &mut self,
        i: usize,
        budget: &mut Budget,
        now: i64,
        on_event: &mut dyn FnMut(WsId, WsEvent<'_>, &mut Budget),
    ) {
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
    }

    /// [`read_plain`](Self::read_plain) over TLS: records in, plaintext into the
    /// session. Decrypted plaintext is always drained before returning, since no
    /// readiness event would come for it.
    fn read_tls(
        &mut self,
        i: usize,
        budget: &mut Budget,
        now: i64,
        on_event: &mut dyn FnMut(WsId, WsEvent<'_>, &mut Budget),
    ) {
        for _ in 0..MAX_READS {
            if !self.plaintext_in(i, budget, now, on_event) {
                return;
            }
            let c = &mut self.conns[i];
            let (Some(fd), Some(t)) = (c.fd, c.tls.as_mut()) else {
                return;
            };
            let handshaking = t.is_handshaking();
            match t.read_records(fd) {
                Ok(Input::WouldBlock) => return,
                Ok(Input::Eof) => {
                    self.plaintext_in(i, budget, now, on_event);
                    self.lost(i, budget, now);
                    return;
                }
                Ok(Input::Data { .. }) => {
                    // A finished handshake lets the upgrade request go; rustls may
                    // also owe the peer records (its Finished, a key update).
                    if (handshaking && !t.is_handshaking()) || t.wants_write() {
                        self.write(i, budget, now);
                    }
                }
                Err(f) => {
                    self.fault(i, f, budget, now);
                    return;
                }
            }
        }
        self.plaintext_in(i, budget, now, on_event);
    }

    /// Moves the plaintext rustls holds into the session, polling events as it
    /// goes. `false` if the connection ended.
    fn plaintext_in(
        &mut self,
        i: usize,
        budget: &mut Budget,
        now: i64,
        on_event: &mut dyn FnMut(WsId, WsEvent<'_>, &mut Budget),
    ) -> bool {
        loop {
            let c = &mut self.conns[i];
            let Some(t) = c.tls.as_mut() else {
                return false;
            };
            let buf = c.session.read_buf();
            if buf.is_empty() {
                // Complete frames wait to be polled: poll, then read on.
                self.events_out(i, budget, now, on_event);
                if self.conns[i].session.read_buf().is_empty() {
                    return true;
                }
                continue;
            }
            match t.read_plaintext(buf) {
                Plain::None => return true,
                Plain::Closed | Plain::Truncated => {
                    // close_notify, or the socket ended without it.
                    self.lost(i, budget, now);
                    return false;
                }
                Plain::Data(n) => {
                    c.session.handle_read(n);
                    self.events_out(i, budget, now, on_event);
                }
            }
        }
    }

    fn events_out(
        &mut self,
        i: usize,
        budget: &mut Budget,
        now: i64,
        on_event: &mut dyn FnMut(WsId, WsEvent<'_>, &mut Budget),
    ) {
        let id = WsId {
            client: self.tag,
            index: i,
        };
        let c = &mut self.conns[i];
        while let Some(ev) = c.session.poll_event(budget, now) {
            on_event(id, ev, budget);
        }
    }

    fn write(&mut self, i: usize, budget: &mut Budget, now: i64) {
        let c = &mut self.conns[i];
        if let Some(p) = c.pipe.as_mut() {
            if !p.is_connected() {
                return;
            }
            while let Some(bytes) = c.session.poll_transmit() {
                let n = p.write(bytes);
                if n == 0 {
                    break;
                }
                c.session.handle_written(n, budget, now);
            }
            if c.session.is_finished() {
                c.close();
                c.session.handle_transport_closed(budget, now);
            }
            return;
        }
        let Some(fd) = c.fd else { return };
        if c.connecting {
            return;
        }
        if c.tls.is_some() {
            return self.write_tls(i, budget, now);
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
            let interest = if blocked {
                Interest::BOTH
            } else {
                Interest::READ
            };
            if !rewatch(&self.watch, i, fd, interest) {
                // A socket we can no longer watch would stall: end it.
                self.lost(i, budget, now);
                return;
            }
            c.want_out = blocked;
        }
        if c.session.is_finished() {
            c.close();
            c.session.handle_transport_closed(budget, now);
        }
    }

    /// [`write`](Self::write) over TLS: while the handshake runs only its records
    /// go out; after it, the session's bytes go into rustls and records to the
    /// socket.
    fn write_tls(&mut self, i: usize, budget: &mut Budget, now: i64) {
        let c = &mut self.conns[i];
        let (Some(fd), Some(t)) = (c.fd, c.tls.as_mut()) else {
            return;
        };
        let mut blocked = false;
        let mut failed = false;
        for _ in 0..MAX_TLS_TURNS {
            if !t.is_handshaking() {
                if let Some(bytes) = c.session.poll_transmit() {
                    let n = t.take_plaintext(bytes);
                    if n > 0 {
                        // rustls writes them on its own from here: counted as
                        // written (see the type's docs).
                        c.session.handle_written(n, budget, now);
                    }
                }
            }
            match t.write_records(fd) {
                Ok((_, true)) => {
                    blocked = true;
                    break;
                }
                Ok((_, false)) => {}
                Err(_) => {
                    failed = true;
                    break;
                }
            }
            if t.is_handshaking() || c.session.poll_transmit().is_none() {
                break;
            }
        }
        if failed {
            self.lost(i, budget, now);
            return;
        }
        if blocked != c.want_out {
            let interest = if blocked {
                Interest::BOTH
            } else {
                Interest::READ
            };
            if !rewatch(&self.watch, i, fd, interest) {
                self.lost(i, budget, now);
                return;
            }
            c.want_out = blocked;
        }
        // Over when the session says so and rustls wrote all it holds; a session
        // that ended inside the TLS handshake (its timeout) owes nothing.
        if c.session.is_finished() && (t.is_handshaking() || !blocked) {
            if !t.is_handshaking() {
                t.send_close_notify();
                let _ = t.write_records(fd);
            }
            c.close();
            c.tls = None;
            c.want_out = false;
            c.session.handle_transport_closed(budget, now);
        }
    }

    /// Whether connection `i`'s socket left from its lane's address (always, with
    /// no lane). A binding that did not hold refuses the lane for good.
    fn lane_holds(&mut self, i: usize, fd: c_int) -> bool {
        let c = &mut self.conns[i];
        let Some(asked) = c.local_addr else {
            return true;
        };
        match sys::local_addr(fd) {
            Ok(got) if sys::same_lane(asked, got) => true,
            Ok(got) => {
                c.refused = Some(ConnectError::LocalAddr { asked, got });
                false
            }
            Err(_) => false,
        }
    }

    /// Starts the TLS session of connection `i` if it is `wss://`.
    #[cfg(feature = "tls")]
    fn start_tls(&mut self, i: usize) -> Result<(), TlsError> {
        let c = &mut self.conns[i];
        if let Some(cfg) = c.tls_config.as_ref() {
            c.tls = Some(Tls::new(cfg)?);
        }
        Ok(())
    }

    #[cfg(not(feature = "tls"))]
    fn start_tls(&mut self, _: usize) -> Result<(), core::convert::Infallible> {
        Ok(())
    }

    /// A TLS read of connection `i` failed.
    fn fault(&mut self, i: usize, f: Fault, budget: &mut Budget, now: i64) {
        match f {
            Fault::Io(_) => self.lost(i, budget, now),
            #[cfg(feature = "tls")]
            Fault::Tls(e) => self.tls_failed(i, e, budget, now),
        }
    }

    /// TLS failed on connection `i`: send the alert rustls queued (best effort),
    /// close, settle the session with [`Cause::Tls`](super::Cause::Tls).
    #[cfg(feature = "tls")]
    fn tls_failed(&mut self, i: usize, e: TlsError, budget: &mut Budget, now: i64) {
        let c = &mut self.conns[i];
        if let (Some(fd), Some(t)) = (c.fd, c.tls.as_mut()) {
            let _ = t.write_records(fd);
        }
        c.close();
        c.tls = None;
        c.connecting = false;
        c.want_out = false;
        if c.session.state() != State::Idle {
            c.session.handle_tls_failed(e, budget, now);
        }
    }

    #[cfg(not(feature = "tls"))]
    fn tls_failed(&mut self, _: usize, e: core::convert::Infallible, _: &mut Budget, _: i64) {
        match e {}
    }

    /// Session `i`'s in-memory transport, if any: reads what the peer
    /// delivered (events out as they come), then settles a transport the peer
    /// cut.
    fn pipe_in(
        &mut self,
        i: usize,
        budget: &mut Budget,
        now: i64,
        on_event: &mut dyn FnMut(WsId, WsEvent<'_>, &mut Budget),
    ) {
        loop {
            let c = &mut self.conns[i];
            let Some(p) = c.pipe.as_mut() else { return };
            if p.inbox().is_empty() {
                break;
            }
            let n = c.session.handle_input(p.inbox());
            p.consumed(n);
            self.events_out(i, budget, now, on_event);
            if n == 0 && self.conns[i].session.read_buf().is_empty() {
                break;
            }
        }
        self.write(i, budget, now);
        if self.conns[i].pipe.as_ref().is_some_and(Pipe::is_cut) {
            self.lost(i, budget, now);
            self.events_out(i, budget, now, on_event);
        }
    }

    /// The transport of session `i` ended: close it, settle the session.
    fn lost(&mut self, i: usize, budget: &mut Budget, now: i64) {
        let c = &mut self.conns[i];
        c.end_transport();
        if c.session.state() != State::Idle {
            c.session.handle_transport_closed(budget, now);
        }
    }
}

impl Conn {
    /// Closes the socket, if any (leaving the client's epoll with it).
    fn close(&mut self) {
        self.fd = None;
        self.sock = None;
        if let Some(p) = self.pipe.as_mut() {
            p.end();
        }
    }

    /// Closes the socket and forgets the transport's state (TLS, a connect in
    /// progress, a wish to write).
    fn end_transport(&mut self) {
        self.close();
        self.tls = None;
        self.connecting = false;
        self.want_out = false;
    }
}

/// Watches session `i`'s socket `fd` for `interest` in the loop's epoll; false if
/// the loop cannot.
fn rewatch(watch: &Option<(Registry, u64)>, i: usize, fd: c_int, interest: Interest) -> bool {
    watch.as_ref().is_some_and(|(registry, base)| {
        registry
            .modify(fd, base.wrapping_add(i as u64), interest)
            .is_ok()
    })
}
