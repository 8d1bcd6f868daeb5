//! The native transport under the [`Pool`] (the sockets and TLS sessions the
//! event loop's epoll drives, and nothing else), and the [`Client`] that drives
//! it beside the libcurl transport.
//!
//! Every rule (which connection carries a request, deadlines, keep-alive,
//! reconnects, connect charges, lanes) lives in the sans-IO [`Pool`]; this
//! module only does what the pool cannot: system calls. It applies the pool's
//! [`Transmit`]s (open a socket bound to the lane's address, close one), moves
//! request bytes from [`Pool::transmit`] to the socket (through rustls when the
//! pool speaks TLS) and response bytes from the socket into [`Pool::recv_buf`],
//! verifies a lane's binding after connect (`getsockname`), and reports each
//! outcome back as a `handle_*` call.
//!
//! libcurl is a sibling transport, not a branch inside the pool or here: the
//! client holds the native side (the pool and its sockets) and the libcurl
//! transport (`curl`; without the feature, a stand-in that carries nothing and
//! compiles away) and asks one then the other, verb by verb. A pool with
//! `PoolConfig::curl` has no slots in the pool, and its requests go to the
//! libcurl transport under the same contract. Both report in the one
//! [`Output`] type and take their [`RequestId`]s from the pool's one counter
//! (see the `curl` module doc).
//!
//! The loop polls [`Client::poll_output`] after every input and hands each
//! [`Output`] to its handler; nothing here calls the handler.
//!
//! The send path ([`Client::request`]) allocates nothing, takes no lock and logs
//! nothing; it makes two system calls: a peek that drops a connection the server
//! closed while idle (so it is never written to), and the write. Over TLS the
//! peek is a read into the session (an idle TLS connection receives session
//! tickets that must be taken in), and rustls's buffered API allocates per record
//! (see [`crate::tls`]).

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::raw::c_int;

use ergon_core::{Budget, Ticket};
use ergon_venues::endpoint::Prepared;
use ergon_venues::response::Response;

use crate::curl::{CurlTransport, Finished};
use crate::http::{unsendable, with_prepared, Headers, ParseError, Request};
use crate::pool::{
    ConnId, Counters, Error, Pool, PoolConfig, PoolError, PoolEvent, PoolId, Refused, RequestId,
    Transmit,
};
use crate::sys::{self, same_lane, Connecting, Read};
use crate::tls::{Fault, Input, Plain, Session};

const EV_READ: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
const EV_WRITE: u32 = libc::EPOLLOUT as u32;
const EV_END: u32 = (libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32;

/// One output of the client, for the loop to hand to its handler: a response's
/// bytes are in a [`Body`] (read it with [`Client::view`], then
/// [`Client::release`] and, after the handler, [`Client::restore`]).
pub(crate) type Output = crate::output::Output<Body>;

/// Where a response's bytes are while the handler reads them.
#[derive(Debug)]
pub(crate) enum Body {
    /// A native connection's receive buffer, taken out of it.
    Conn(ConnId, Vec<u8>),
    /// A finished libcurl transfer.
    Curl(Finished),
}

#[derive(Debug)]
struct Sock {
    /// The socket; closed when dropped (or replaced).
    sock: Option<OwnedFd>,
    /// `sock`'s raw descriptor for the system calls, -1 without a socket.
    fd: c_int,
    want_write: bool,
    tls: Option<Session>,
}

impl Sock {
    /// Takes `sock` as this slot's socket; returns its raw descriptor.
    fn open(&mut self, sock: OwnedFd) -> c_int {
        self.fd = sock.as_raw_fd();
        self.sock = Some(sock);
        self.want_write = false;
        self.tls = None;
        self.fd
    }

    /// Closes the socket, if any (leaving epoll with it).
    fn close(&mut self) {
        self.sock = None;
        self.fd = -1;
        self.want_write = false;
        self.tls = None;
    }
}

/// The client: the [`Pool`] and the transports under it, owned by the event loop.
///
/// Every method asks the libcurl transport first whether the pool, token or
/// body is its own (a constant `false` without the feature, so the native path
/// compiles as if it were not there), and otherwise runs the native side.
/// Drive order: after any input ([`request`](Self::request), `handle_event`,
/// `handle_timeout`), drain `poll_output` while `has_output` says so; park no
/// later than `poll_timeout`.
#[derive(Debug)]
pub struct Client {
    epfd: c_int,
    pool: Pool,
    socks: Vec<Sock>,
    /// The sibling transport for libcurl pools.
    curl: CurlTransport,
}

impl Client {
    pub(crate) fn new(epfd: c_int) -> Self {
        Client {
            epfd,
            pool: Pool::new(),
            socks: Vec::new(),
            curl: CurlTransport::new(epfd),
        }
    }

    pub(crate) fn add_pool(&mut self, cfg: PoolConfig, now: i64) -> Result<PoolId, PoolError> {
        let id = self.pool.add_pool(cfg, now)?;
        self.curl.add_pool(&self.pool, id);
        while self.socks.len() < self.pool.slots() {
            self.socks.push(Sock {
                sock: None,
                fd: -1,
                want_write: false,
                tls: None,
            });
        }
        Ok(id)
    }

    pub(crate) fn epfd(&self) -> c_int {
        self.epfd
    }

    /// The sans-IO pool under this client.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// What the client did so far.
    pub fn counters(&self) -> &Counters {
        self.pool.counters()
    }

    /// How many connections of `pool` are open and idle now.
    pub fn idle(&self, pool: PoolId) -> usize {
        if self.curl.carries(pool) {
            return self.curl.idle(pool);
        }
        self.pool.idle(pool)
    }

    /// Why `pool` was refused for good, if it was (see [`Error::LocalAddr`]).
    pub fn refused(&self, pool: PoolId) -> Option<Error> {
        self.pool.refused(pool)
    }

    /// How many requests are in flight now.
    pub fn in_flight(&self) -> usize {
        self.pool.in_flight() + self.curl.in_flight()
    }

    /// Sends `req` on an idle connection of `pool`, or hands the ticket back.
    ///
    /// `deadline_ns` is on the loop's clock: a request already past it is refused
    /// ([`Refused::Expired`]); when it passes before the response is complete, the
    /// request fails with [`Error::Timeout`] and its connection is closed. A write
    /// error found here is reported as a failure of the request once the current
    /// handler call returns.
    pub fn request(
        &mut self,
        pool: PoolId,
        req: &Request<'_>,
        ticket: Ticket,
        deadline_ns: i64,
        now: i64,
    ) -> Result<RequestId, Refused> {
        if self.curl.carries(pool) {
            let books = &mut self.pool;
            return self
                .curl
                .request(books, pool, req, ticket, deadline_ns, now);
        }
        let socks = &mut self.socks;
        let (id, conn) = self
            .pool
            .request(pool, req, ticket, deadline_ns, now, |c| idle_open(socks, c))?;
        if let Err(e) = self.flush(conn) {
            self.pool.handle_error(conn, Error::os(e), now);
        }
        Ok(id)
    }

    /// Sends a prepared request as [`Client::request`] does: copied out as it is
    /// when its adapter wrote it as HTTP/1.1 ([`Prepared::http`]) and the pool is
    /// ours, else encoded from its method, target, headers and body. An empty
    /// `req` is refused ([`InvalidRequest::Method`](crate::http::InvalidRequest::Method)), one whose signature is
    /// pending too ([`InvalidRequest::Unsigned`](crate::http::InvalidRequest::Unsigned)).
    pub fn request_prepared(
        &mut self,
        pool: PoolId,
        req: &Prepared,
        ticket: Ticket,
        deadline_ns: i64,
        now: i64,
    ) -> Result<RequestId, Refused> {
        let http = req.http().filter(|_| !req.signature_pending());
        let Some(h) = http.filter(|_| !self.curl.carries(pool)) else {
            return with_prepared(req, ticket, |r, t| {
                self.request(pool, r, t, deadline_ns, now)
            })
            .unwrap_or_else(|t| Err(Refused::Invalid(t, unsendable(req))));
        };
        let socks = &mut self.socks;
        let (id, conn) = self
            .pool
            .request(pool, &h, ticket, deadline_ns, now, |c| idle_open(socks, c))?;
        if let Err(e) = self.flush(conn) {
            self.pool.handle_error(conn, Error::os(e), now);
        }
        Ok(id)
    }

    /// Writes what `conn` offers; the first byte out turns the ticket into a
    /// flight.
    fn flush(&mut self, conn: ConnId) -> Result<(), i32> {
        let i = conn.0;
        if self.socks[i].tls.is_some() {
            return self.flush_tls(conn);
        }
        let epfd = self.epfd;
        let s = &mut self.socks[i];
        loop {
            let out = self.pool.transmit(conn);
            if out.is_empty() {
                if s.want_write {
                    s.want_write = false;
                    sys::epoll_ctl(epfd, libc::EPOLL_CTL_MOD, s.fd, EV_READ, i as u64)?;
                }
                return Ok(());
            }
            match sys::send(s.fd, out)? {
                0 => {
                    if !s.want_write {
                        s.want_write = true;
                        sys::epoll_ctl(
                            epfd,
                            libc::EPOLL_CTL_MOD,
                            s.fd,
                            EV_READ | EV_WRITE,
                            i as u64,
                        )?;
                    }
                    return Ok(());
                }
                n => self.pool.handle_written(conn, n),
            }
        }
    }

    /// [`flush`](Self::flush) over TLS: plaintext into the session, records to the
    /// socket. The first record byte written after the request's plaintext went
    /// into the session turns the ticket into a flight (a record queued before it,
    /// if any, only makes that conservative: Maybe, never a wrong No).
    fn flush_tls(&mut self, conn: ConnId) -> Result<(), i32> {
        let i = conn.0;
        let epfd = self.epfd;
        let s = &mut self.socks[i];
        let Some(t) = s.tls.as_mut() else {
            return Ok(());
        };
        // Bounded: each turn either moves plaintext into the session or drains it.
        for _ in 0..1024 {
            let out = self.pool.transmit(conn);
            if !out.is_empty() {
                let n = t.take_plaintext(out);
                self.pool.handle_buffered(conn, n);
            }
            let (wrote, blocked) = match t.write_records(s.fd) {
                Ok(w) => w,
                Err(f) => {
                    // Records that left before the error may reach the server:
                    // the request is Maybe, never a refundable No.
                    if f.written > 0 {
                        self.pool.handle_sent(conn);
                    }
                    return Err(f.errno);
                }
            };
            if wrote > 0 {
                self.pool.handle_sent(conn);
            }
            if blocked {
                if !s.want_write {
                    s.want_write = true;
                    sys::epoll_ctl(
                        epfd,
                        libc::EPOLL_CTL_MOD,
                        s.fd,
                        EV_READ | EV_WRITE,
                        i as u64,
                    )?;
                }
                return Ok(());
            }
            if self.pool.transmit(conn).is_empty() {
                break;
            }
        }
        if s.want_write {
            s.want_write = false;
            sys::epoll_ctl(epfd, libc::EPOLL_CTL_MOD, s.fd, EV_READ, i as u64)?;
        }
        Ok(())
    }

    /// Does what the pool asked of the transports: close sockets, open them.
    #[inline]
    fn apply(&mut self, budget: &mut Budget, now: i64) {
        if self.pool.has_transmit() {
            self.apply_transmits(budget, now);
        }
    }

    fn apply_transmits(&mut self, budget: &mut Budget, now: i64) {
        while let Some(t) = self.pool.poll_transmit() {
            match t {
                Transmit::Close { conn } => {
                    if let Some(s) = self.socks.get_mut(conn.0) {
                        s.close();
                    }
                }
                Transmit::Connect { conn, addr, local } => {
                    self.open(conn, addr, local, budget, now);
                }
            }
        }
    }

    fn open(
        &mut self,
        conn: ConnId,
        addr: std::net::SocketAddr,
        local: Option<std::net::SocketAddr>,
        budget: &mut Budget,
        now: i64,
    ) {
        match sys::connect_from(&addr, local.as_ref()) {
            Connecting::Started(sock) => {
                self.pool.handle_connect_started(conn, budget, now);
                let fd = self.socks[conn.0].open(sock);
                let added = sys::epoll_ctl(
                    self.epfd,
                    libc::EPOLL_CTL_ADD,
                    fd,
                    EV_READ | EV_WRITE,
                    conn.0 as u64,
                );
                if let Err(e) = added {
                    self.pool
                        .handle_connect_failed(conn, Error::os(e), budget, now);
                }
            }
            // Nothing left: the pool refunds the connect's charge.
            Connecting::NotSent(e) => {
                self.pool
                    .handle_connect_failed(conn, Error::os(e), budget, now);
            }
            Connecting::Failed(e) => {
                self.pool.handle_connect_started(conn, budget, now);
                self.pool
                    .handle_connect_failed(conn, Error::os(e), budget, now);
            }
        }
    }

    /// Readiness of the socket with epoll token `token`.
    pub(crate) fn handle_event(&mut self, token: u64, events: u32, budget: &mut Budget, now: i64) {
        if self.curl.owns(token) {
            return self.curl.handle_event(token, events, now);
        }
        let Ok(i) = usize::try_from(token) else {
            return;
        };
        if !self.socks.get(i).is_some_and(|s| s.sock.is_some()) {
            return;
        }
        let conn = ConnId(i);
        if self.pool.is_connecting(conn) {
            if self.socks[i].tls.is_some() {
                self.handshake(conn, budget, now);
            } else {
                self.connected(conn, events, budget, now);
            }
        } else if self.pool.is_idle(conn) {
            // Anything on an idle connection ends it: the server closed it, or
            // sent bytes that answer nothing. Over TLS, records that carry no
            // data (session tickets) are taken in and the connection stays.
            let s = &mut self.socks[i];
            let fd = s.fd;
            if !s.tls.as_mut().is_some_and(|t| tls_idle_ok(t, fd)) {
                self.pool.handle_stale(conn, now);
            }
        } else if self.pool.is_busy(conn) {
            if events & EV_WRITE != 0 && self.socks[i].want_write {
                if let Err(e) = self.flush(conn) {
                    self.pool.handle_error(conn, Error::os(e), now);
                    return self.apply(budget, now);
                }
            }
            if events & (EV_READ | EV_END) != 0 {
                self.read(conn, now);
            }
        }
        self.apply(budget, now);
    }

    /// A connecting socket is ready: connected or failed; the lane's binding
    /// checked; TLS started if the pool speaks it.
    fn connected(&mut self, conn: ConnId, events: u32, budget: &mut Budget, now: i64) {
        if events & (EV_WRITE | EV_END) == 0 {
            return;
        }
        let i = conn.0;
        let fd = self.socks[i].fd;
        let e = sys::so_error(fd);
        let e = if e == 0 && events & EV_END != 0 {
            libc::ECONNRESET
        } else {
            e
        };
        let e = if e == 0 {
            sys::epoll_ctl(self.epfd, libc::EPOLL_CTL_MOD, fd, EV_READ, i as u64)
                .err()
                .unwrap_or(0)
        } else {
            e
        };
        if e != 0 {
            return self
                .pool
                .handle_connect_failed(conn, Error::os(e), budget, now);
        }
        let Some(cfg) = self.pool.pool_of(conn).and_then(|p| self.pool.config(p)) else {
            return;
        };
        if let Some(asked) = cfg.local_addr {
            match sys::local_addr(fd) {
                Ok(got) if same_lane(asked, got) => {}
                Ok(got) => {
                    return self
                        .pool
                        .handle_bad_binding(conn, Error::LocalAddr { asked, got })
                }
                Err(e) => {
                    return self
                        .pool
                        .handle_connect_failed(conn, Error::os(e), budget, now)
                }
            }
        }
        match start_tls(cfg) {
            Ok(None) => self.pool.handle_connected(conn, now),
            Ok(Some(t)) => {
                self.socks[i].tls = Some(t);
                self.handshake(conn, budget, now);
            }
            Err(e) => self.pool.handle_connect_failed(conn, e, budget, now),
        }
    }

    /// Drives `conn`'s handshake as far as the socket allows.
    fn handshake(&mut self, conn: ConnId, budget: &mut Budget, now: i64) {
        let i = conn.0;
        let epfd = self.epfd;
        let s = &mut self.socks[i];
        let fd = s.fd;
        let Some(t) = s.tls.as_mut() else {
            return;
        };
        let mut done = Err(Error::ConnectTimeout);
        // Bounded: a handshake is a few flights; anything longer waits for events.
        for _ in 0..64 {
            let blocked = match t.write_records(fd) {
                Ok((_, blocked)) => blocked,
                Err(f) => {
                    done = Err(Error::os(f.errno));
                    break;
                }
            };
            if blocked != s.want_write {
                let ev = if blocked { EV_READ | EV_WRITE } else { EV_READ };
                if let Err(e) = sys::epoll_ctl(epfd, libc::EPOLL_CTL_MOD, fd, ev, i as u64) {
                    done = Err(Error::os(e));
                    break;
                }
                s.want_write = blocked;
            }
            if blocked {
                return;
            }
            if !t.is_handshaking() {
                done = Ok(());
                break;
            }
            match t.read_records(fd) {
                Ok(Input::WouldBlock) => return,
                Ok(Input::Eof) => {
                    done = Err(Error::Closed);
                    break;
                }
                Ok(Input::Data { .. }) => {}
                Err(f) => {
                    done = Err(fault(f));
                    break;
                }
            }
        }
        match done {
            Ok(()) => self.pool.handle_connected(conn, now),
            Err(e) => self.pool.handle_connect_failed(conn, e, budget, now),
        }
    }

    /// Socket bytes into the busy `conn`'s response.
    fn read(&mut self, conn: ConnId, now: i64) {
        if self.socks[conn.0].tls.is_some() {
            return self.read_tls(conn, now);
        }
        let fd = self.socks[conn.0].fd;
        // Bounded: a fast server cannot keep the loop on one connection for ever.
        for _ in 0..64 {
            let buf = self.pool.recv_buf(conn);
            let room = buf.len();
            if room == 0 {
                let e = Error::Parse(ParseError::ResponseTooLarge);
                return self.pool.handle_error(conn, e, now);
            }
            match sys::recv(fd, buf) {
                Ok(Read::Data(n)) => {
                    if !self.pool.handle_recv(conn, n, now) || n < room {
                        return;
                    }
                }
                Ok(Read::WouldBlock) => return,
                Ok(Read::Eof) => return self.pool.handle_eof(conn, false, now),
                Err(e) => return self.pool.handle_error(conn, Error::os(e), now),
            }
        }
    }

    /// [`read`](Self::read) over TLS: records in, plaintext into the connection.
    fn read_tls(&mut self, conn: ConnId, now: i64) {
        let i = conn.0;
        // Bounded in socket reads; decrypted plaintext is always drained before
        // returning, since no event would come for it.
        let mut reads = 0;
        loop {
            let fd = self.socks[i].fd;
            let Some(t) = self.socks[i].tls.as_mut() else {
                return;
            };
            let buf = self.pool.recv_buf(conn);
            if buf.is_empty() {
                let e = Error::Parse(ParseError::ResponseTooLarge);
                return self.pool.handle_error(conn, e, now);
            }
            match t.read_plaintext(buf) {
                Plain::Closed => return self.pool.handle_eof(conn, false, now),
                // Without close_notify, a body read until the close may have been
                // cut short by anyone on the path: never a complete answer (the
                // request left: Sent::Maybe). Any other unfinished answer is Closed.
                Plain::Truncated => return self.pool.handle_eof(conn, true, now),
                Plain::Data(n) => {
                    if self.pool.handle_recv(conn, n, now) {
                        continue;
                    }
                    return;
                }
                Plain::None => {}
            }
            if reads == 64 {
                return;
            }
            reads += 1;
            match t.read_records(fd) {
                Ok(Input::WouldBlock) => return,
                // The socket ended: rustls now says whether close_notify came
                // (Closed) or not (Truncated), after the plaintext it holds.
                Ok(Input::Eof) => continue,
                Ok(Input::Data { .. }) => {
                    if t.wants_write() {
                        if let Err(e) = self.flush(conn) {
                            return self.pool.handle_error(conn, Error::os(e), now);
                        }
                    }
                }
                Err(f) => return self.pool.handle_error(conn, fault(f), now),
            }
        }
    }

    /// Deadlines, idle timeouts, reconnects and libcurl's own work, once per turn.
    pub(crate) fn handle_timeout(&mut self, budget: &mut Budget, now: i64) {
        self.curl.handle_timeout(&mut self.pool, budget, now);
        self.pool.handle_timeout(budget, now);
        self.apply(budget, now);
    }

    /// The earliest time the client needs the loop to wake for.
    pub(crate) fn poll_timeout(&self) -> Option<i64> {
        let native = self.pool.poll_timeout();
        match self.curl.poll_timeout() {
            Some(at) => Some(native.map_or(at, |n| n.min(at))),
            None => native,
        }
    }

    /// Whether [`poll_output`](Self::poll_output) may have anything (the loop
    /// asks after every input; most of the time the answer is no).
    #[inline]
    pub(crate) fn has_output(&self) -> bool {
        self.curl.has_output() || self.pool.has_output()
    }

    /// The next output for the handler, if any.
    pub(crate) fn poll_output(&mut self, budget: &mut Budget, now: i64) -> Option<Output> {
        self.apply(budget, now);
        if let Some(e) = self.pool.poll_event() {
            return Some(match e {
                PoolEvent::Ready(p) => Output::Ready(p),
                PoolEvent::ConnectError(p, e) => Output::ConnectError(p, e),
                PoolEvent::Failed { id, sent, error } => Output::Failed { id, sent, error },
                PoolEvent::Response { id, conn, flight } => {
                    let buf = self.pool.take_buffer(conn);
                    Output::Response {
                        id,
                        flight,
                        body: Body::Conn(conn, buf),
                    }
                }
            });
        }
        self.curl
            .poll_output(&mut self.pool, budget, now)
            .map(|out| out.map_body(Body::Curl))
    }

    /// The response in `body`.
    pub(crate) fn view<'h, 'a: 'h>(
        &self,
        body: &'a Body,
        headers: &'h mut Headers<'a>,
    ) -> Response<'h> {
        match body {
            Body::Conn(conn, buf) => self.pool.response_in(*conn, buf, headers),
            Body::Curl(f) => CurlTransport::view(f, headers),
        }
    }

    /// The exchange of `body` ended: its connection is idle again or closed.
    pub(crate) fn release(&mut self, body: &Body, now: i64) {
        match body {
            Body::Conn(conn, _) => self.pool.release(*conn, now),
            Body::Curl(_) => {}
        }
    }

    /// Gives `body`'s buffer back to its connection (or transfer).
    pub(crate) fn restore(&mut self, body: Body) {
        match body {
            Body::Conn(conn, buf) => self.pool.restore_buffer(conn, buf),
            Body::Curl(f) => self.curl.restore(f),
        }
    }

    /// Installs an already connected descriptor as slot `i`'s idle connection, so
    /// tests can reach failure paths a TCP peer cannot produce on demand.
    #[cfg(test)]
    pub(crate) fn adopt(&mut self, i: usize, sock: OwnedFd, now: i64) {
        let fd = self.socks[i].open(sock);
        sys::epoll_ctl(self.epfd, libc::EPOLL_CTL_ADD, fd, EV_READ, i as u64).unwrap();
        self.pool.adopt(ConnId(i), now);
    }

    /// Closes every connection (the loop is shutting down). In-flight requests
    /// are reported as failed.
    pub(crate) fn close_all(&mut self, now: i64) {
        self.pool.close_all(now);
        self.curl.close_all();
    }
}

/// A TLS session for a connection of a pool that speaks TLS.
#[cfg(feature = "tls")]
fn start_tls(cfg: &PoolConfig) -> Result<Option<Session>, Error> {
    match cfg.tls.as_ref() {
        None => Ok(None),
        Some(tls) => Session::new(tls).map(Some).map_err(Error::Tls),
    }
}

#[cfg(not(feature = "tls"))]
fn start_tls(_: &PoolConfig) -> Result<Option<Session>, Error> {
    Ok(None)
}

/// Whether an idle TLS connection is still usable: records that carry no data
/// (session tickets, key updates) are taken in; data, a close or an error end it.
/// Whether the idle connection `c` may be written to: its socket has nothing to
/// read and was not closed (a peek), or its TLS session is idle and open.
fn idle_open(socks: &mut [Sock], c: ConnId) -> bool {
    let Some(s) = socks.get_mut(c.0) else {
        return false;
    };
    let fd = s.fd;
    match s.tls.as_mut() {
        None => matches!(sys::peek(fd), Ok(Read::WouldBlock)),
        Some(t) => tls_idle_ok(t, fd),
    }
}

fn tls_idle_ok(t: &mut Session, fd: c_int) -> bool {
    // Bounded: a peer sending records without end is not idle.
    for _ in 0..16 {
        match t.read_records(fd) {
            Ok(Input::WouldBlock) => return true,
            Ok(Input::Data {
                plaintext: false,
                closed: false,
            }) => {}
            Ok(_) | Err(_) => return false,
        }
    }
    false
}

fn fault(f: Fault) -> Error {
    match f {
        Fault::Io(e) => Error::os(e),
        #[cfg(feature = "tls")]
        Fault::Tls(e) => Error::Tls(e),
    }
}
