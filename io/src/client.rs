//! The native HTTP/1.1 client: per-origin pools of keep-alive connections that never
//! write a request twice.
//!
//! [`Context::request`](crate::event_loop::Context::request) returns at once, with a
//! [`RequestId`] or with the [`Ticket`] handed back ([`Refused::Busy`]) when no
//! connection of the pool is ready. Every accepted request ends in exactly one
//! call: [`ClientHandler::on_response`] with the [`Flight`], or
//! [`ClientHandler::on_error`] with [`Sent::No`] (not one byte was written: refund
//! the ticket) or [`Sent::Maybe`] (it may have run: reconcile).
//!
//! Why a request cannot be written twice, by construction: it is encoded once into
//! its connection's send buffer, whose position only moves forward; the ticket (or
//! flight) travels with that connection and leaves it only to be reported; a
//! connection that failed is closed and its buffers reset before it carries
//! anything again; and nothing here keeps a request to send later. There is no
//! retry path to misuse: re-sending is the caller's decision
//! ([`Budget::resend`](ergon_core::Budget::resend)).
//!
//! The send path (`request`) allocates nothing, takes no lock and logs nothing; it
//! makes two system calls: a peek that drops a connection the server closed while
//! idle (so it is never written to), and the write. Over TLS the peek is a read into
//! the session (an idle TLS connection receives session tickets that must be taken
//! in), and rustls's buffered API allocates per record (see [`crate::tls`]).
//!
//! A pool with `PoolConfig::curl` set (feature `curl`) sends through libcurl under
//! the same contract instead; see the `curl` module for what it refuses and why.
//!
//! Where later layers plug in: bytes move between a socket and its
//! [`Conn`] in exactly two places, `Client::flush` (the
//! [`Conn::transmit`](crate::http::Conn::transmit) bytes out, the first byte out
//! turning the ticket into a flight) and `Client::read` (socket bytes into
//! [`Conn::recv_buf`](crate::http::Conn::recv_buf)). TLS goes between them as
//! another sans-IO state machine (plaintext from `transmit` into the TLS writer,
//! records to the socket; records from the socket, plaintext into `recv_buf`), with
//! a handshake phase between connecting and idle so a failed handshake happens
//! before any request byte: such a connection never becomes idle, never carries a
//! request, and the caller keeps (and refunds) the ticket. See [`crate::tls`].
//!
//! Egress lanes: [`PoolConfig::local_addr`] binds every connection of a pool to a
//! local address before it connects, so trading and monitoring traffic leave from
//! different IPs and each IP gets its own budget. Some stacks silently ignore a
//! binding, so after each connect the client reads the socket's local address back
//! (`getsockname`); if it differs from the one asked, the pool is refused for good
//! ([`Error::LocalAddr`], [`Client::refused`]): no request ever leaves from an IP
//! whose budget is not the one charged. Venues count limits per source IP: two
//! budgets that believe they own the same real IP each spend the whole limit, so
//! together they send twice what the venue allows, a guaranteed 429 storm (and
//! then a ban). One budget per IP, one IP per budget.
//!
//! Module shape: the ids, the pool configuration, the outcomes and the errors
//! live in a leaf module (`pool`, re-exported here), so the libcurl transport
//! depends on it and not on the client. The client and the event loop still call
//! each other: results reach the handler through the loop's [`Context`] while the
//! client is borrowed. A sans-IO pool whose events the loop polls (issue 14) is
//! what removes that last cycle.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::raw::c_int;

use ergon_core::{Budget, Flight, Ticket};
use ergon_venues::response::{Header, Response};

#[cfg(feature = "curl")]
use crate::curl::{Curl, Ended, CURL_TOKEN};
use crate::event_loop::{Context, Ctl, Readiness};
use crate::http::{Conn, ParseError, Progress, Request, MAX_HEADERS};
pub use crate::pool::{Error, PoolConfig, PoolError, PoolId, Refused, RequestId, Sent};
use crate::sys::{self, same_lane, Connecting, Read};
use crate::tls::{Fault, Input, Plain, Session};

/// What the caller does with answers. Every method runs on the loop thread; they
/// may call back into the [`Context`] (send the next request, set timers, stop).
pub trait ClientHandler {
    /// The response to `id`. The view borrows the connection's buffer: copy out what
    /// must outlive the call. Complete (or otherwise settle) the `flight`.
    fn on_response(
        &mut self,
        cx: &mut Context<'_>,
        id: RequestId,
        response: Response<'_>,
        flight: Flight,
    );

    /// Request `id` failed; `sent` says whether any byte left. Its connection is
    /// closed and will not be reused.
    fn on_error(&mut self, cx: &mut Context<'_>, id: RequestId, sent: Sent, error: Error);

    /// libcurl wrote request `id` `copies` more times than asked (it re-sends on
    /// a reused connection that died before any reply byte; see the `curl`
    /// module). Every copy was already charged to the budget on the request's
    /// own parts ([`Budget::charge_after`]): the venue counted each one. Called
    /// just before the request's [`on_response`](Self::on_response) or
    /// [`on_error`](Self::on_error). The native client never calls it.
    fn on_resent(&mut self, _cx: &mut Context<'_>, _id: RequestId, _copies: u32) {}

    /// A new connection of `pool` is open and idle.
    fn on_ready(&mut self, _cx: &mut Context<'_>, _pool: PoolId) {}

    /// A connect of `pool` failed; the pool tries again after its reconnect delay.
    fn on_connect_error(&mut self, _cx: &mut Context<'_>, _pool: PoolId, _error: Error) {}

    /// A timer set with [`Context::set_timer`] is due.
    fn on_timer(&mut self, _cx: &mut Context<'_>, _token: u64) {}

    /// A descriptor watched with
    /// [`EventLoop::watch_fd`](crate::event_loop::EventLoop::watch_fd) is ready.
    fn on_fd(&mut self, _cx: &mut Context<'_>, _token: u64, _ready: Readiness) {}

    /// Once per loop turn, after events, timers and the pools were handled.
    fn on_turn(&mut self, _cx: &mut Context<'_>) {}

    /// The loop is about to block in epoll (never called in busy-poll mode). Return
    /// false if work arrived meanwhile: the loop then polls instead of blocking.
    fn before_park(&mut self, _cx: &mut Context<'_>) -> bool {
        true
    }
}

/// What the client did, counted since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Requests accepted.
    pub requests: u64,
    /// Responses delivered.
    pub responses: u64,
    /// Errors reported with [`Sent::No`].
    pub sent_no: u64,
    /// Errors reported with [`Sent::Maybe`].
    pub sent_maybe: u64,
    /// Requests refused as [`Refused::Busy`].
    pub busy: u64,
    /// Requests that hit their deadline.
    pub timeouts: u64,
    /// Connect attempts started (each one charged).
    pub connects: u64,
    /// Connects that completed.
    pub connected: u64,
    /// Connects that failed or timed out.
    pub connect_failures: u64,
    /// Connects the budget refused.
    pub connects_limited: u64,
    /// Idle connections dropped because the server closed them (or sent unasked).
    pub stale: u64,
    /// Extra copies of requests a libcurl pool wrote on its own (each charged to
    /// the budget after the fact; see [`ClientHandler::on_resent`]).
    pub resent: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Down {
        retry_at: i64,
    },
    Connecting {
        deadline: i64,
    },
    /// TCP is up; the TLS handshake runs until `deadline` (the connect's).
    Handshaking {
        deadline: i64,
    },
    Idle {
        since: i64,
    },
    Busy {
        deadline: i64,
    },
    /// Failed inside a handler call; reported when it returns.
    Failed(Error),
}

#[derive(Debug)]
enum InFlight {
    Unsent(RequestId, Ticket),
    Sent(RequestId, Flight),
}

#[derive(Debug)]
struct Slot {
    pool: u16,
    /// The socket; closed when dropped (or replaced).
    sock: Option<OwnedFd>,
    /// `sock`'s raw descriptor for the system calls, -1 without a socket.
    fd: c_int,
    phase: Phase,
    conn: Conn,
    flight: Option<InFlight>,
    opened_at: i64,
    want_write: bool,
    tls: Option<Session>,
}

#[derive(Debug)]
struct Pool {
    cfg: PoolConfig,
    slots: core::ops::Range<usize>,
    /// Set when the pool was refused for good (an ignored local binding).
    refused: Option<Error>,
    /// A libcurl pool's transfers.
    #[cfg(feature = "curl")]
    transfers: core::ops::Range<usize>,
}

const EV_READ: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
const EV_WRITE: u32 = libc::EPOLLOUT as u32;
const EV_END: u32 = (libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32;

/// The client: every pool's connections, owned by the event loop.
#[derive(Debug)]
pub struct Client {
    epfd: c_int,
    pools: Vec<Pool>,
    slots: Vec<Slot>,
    next_id: u64,
    dirty: Vec<usize>,
    counters: Counters,
    #[cfg(feature = "curl")]
    curl: Curl,
    #[cfg(feature = "curl")]
    curl_ended: Vec<usize>,
}

impl Client {
    pub(crate) fn new(epfd: c_int) -> Self {
        Client {
            epfd,
            pools: Vec::new(),
            slots: Vec::new(),
            next_id: 1,
            dirty: Vec::new(),
            counters: Counters::default(),
            #[cfg(feature = "curl")]
            curl: Curl::new(epfd),
            #[cfg(feature = "curl")]
            curl_ended: Vec::new(),
        }
    }

    pub(crate) fn add_pool(&mut self, cfg: PoolConfig, now: i64) -> Result<PoolId, PoolError> {
        if cfg.connections == 0 {
            return Err(PoolError::NoConnections);
        }
        if cfg.host.is_empty() || !cfg.host.bytes().all(|b| b > 0x20 && b < 0x7f) {
            return Err(PoolError::BadHost);
        }
        if cfg.limits.max_response < 64 || cfg.limits.max_request < 64 {
            return Err(PoolError::BuffersTooSmall);
        }
        let id = u16::try_from(self.pools.len()).map_err(|_| PoolError::TooManyPools)?;
        let start = self.slots.len();
        #[cfg(feature = "curl")]
        let transfers = match cfg.curl {
            Some(_) => {
                let r = self.curl.add_pool(id, cfg.connections, &cfg.limits);
                self.curl_ended.reserve(r.len());
                r
            }
            None => 0..0,
        };
        #[cfg(feature = "curl")]
        let native = cfg.curl.is_none();
        #[cfg(not(feature = "curl"))]
        let native = true;
        for _ in 0..if native { cfg.connections } else { 0 } {
            self.slots.push(Slot {
                pool: id,
                sock: None,
                fd: -1,
                phase: Phase::Down { retry_at: now },
                conn: Conn::new(cfg.limits),
                flight: None,
                opened_at: now,
                want_write: false,
                tls: None,
            });
        }
        self.dirty.reserve(self.slots.len());
        self.pools.push(Pool {
            cfg,
            slots: start..self.slots.len(),
            refused: None,
            #[cfg(feature = "curl")]
            transfers,
        });
        Ok(PoolId(id))
    }

    pub(crate) fn epfd(&self) -> c_int {
        self.epfd
    }

    /// What the client did so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// How many connections of `pool` are open and idle now.
    pub fn idle(&self, pool: PoolId) -> usize {
        self.pools.get(pool.index()).map_or(0, |p| {
            #[cfg(feature = "curl")]
            if p.cfg.curl.is_some() {
                return self.curl.idle(p.transfers.clone());
            }
            self.slots[p.slots.clone()]
                .iter()
                .filter(|s| matches!(s.phase, Phase::Idle { .. }))
                .count()
        })
    }

    /// Why `pool` was refused for good, if it was (see [`Error::LocalAddr`]).
    pub fn refused(&self, pool: PoolId) -> Option<Error> {
        self.pools.get(pool.index()).and_then(|p| p.refused)
    }

    /// How many requests are in flight now.
    pub fn in_flight(&self) -> usize {
        let native = self.slots.iter().filter(|s| s.flight.is_some()).count();
        #[cfg(feature = "curl")]
        return native + self.curl.in_flight();
        #[cfg(not(feature = "curl"))]
        native
    }

    /// Sends `req` on an idle connection of `pool`, or hands the ticket back.
    ///
    /// `deadline_ns` is on the loop's clock: a request already past it is refused
    /// ([`Refused::Expired`]); when it passes before the response is complete, the
    /// request fails with [`Error::Timeout`] and its connection is closed. A write error found here is reported through
    /// [`ClientHandler::on_error`] once the current handler call returns.
    pub fn request(
        &mut self,
        pool: PoolId,
        req: &Request<'_>,
        ticket: Ticket,
        deadline_ns: i64,
        now: i64,
    ) -> Result<RequestId, Refused> {
        let Some(p) = self.pools.get(pool.index()) else {
            return Err(Refused::UnknownPool(ticket));
        };
        if deadline_ns <= now {
            return Err(Refused::Expired(ticket));
        }
        #[cfg(feature = "curl")]
        if let Some(curl) = p.cfg.curl {
            if let Err(e) = self.curl.validate(req, &p.cfg.host) {
                return Err(Refused::Invalid(ticket, e));
            }
            let id = RequestId(self.next_id);
            let range = p.transfers.clone();
            return match self
                .curl
                .request(range, &p.cfg, curl, req, id, ticket, deadline_ns, now)
            {
                Ok(()) => {
                    self.next_id += 1;
                    self.counters.requests += 1;
                    Ok(id)
                }
                Err(t) => {
                    self.counters.busy += 1;
                    Err(Refused::Busy(t))
                }
            };
        }
        let (range, idle_timeout, max_age, delay) = (
            p.slots.clone(),
            p.cfg.idle_timeout_ns,
            p.cfg.max_age_ns,
            p.cfg.reconnect_delay_ns,
        );
        let mut chosen = None;
        for i in range {
            let s = &mut self.slots[i];
            let Phase::Idle { since } = s.phase else {
                continue;
            };
            if now - since >= idle_timeout || now - s.opened_at >= max_age {
                self.drop_conn(i, now);
                continue;
            }
            let open = match s.tls.as_mut() {
                None => matches!(sys::peek(s.fd), Ok(Read::WouldBlock)),
                Some(t) => tls_idle_ok(t, s.fd),
            };
            if open {
                chosen = Some(i);
                break;
            }
            // Closed by the server (or talking unasked) while idle: never write
            // to it.
            self.counters.stale += 1;
            self.drop_conn(i, now + delay);
        }
        let Some(i) = chosen else {
            self.counters.busy += 1;
            return Err(Refused::Busy(ticket));
        };
        let host = &self.pools[pool.index()].cfg.host;
        let s = &mut self.slots[i];
        if let Err(e) = s.conn.send(req, host) {
            return Err(Refused::Invalid(ticket, e));
        }
        let id = RequestId(self.next_id);
        self.next_id += 1;
        s.flight = Some(InFlight::Unsent(id, ticket));
        s.phase = Phase::Busy {
            deadline: deadline_ns,
        };
        self.counters.requests += 1;
        if let Err(e) = self.flush(i) {
            self.fail_later(i, Error::os(e));
        }
        Ok(id)
    }

    /// Writes what the connection offers; the first byte out turns the ticket into
    /// a flight.
    fn flush(&mut self, i: usize) -> Result<(), i32> {
        if self.slots[i].tls.is_some() {
            return self.flush_tls(i);
        }
        let epfd = self.epfd;
        let s = &mut self.slots[i];
        loop {
            let out = s.conn.transmit();
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
                n => {
                    s.conn.handle_written(n);
                    mark_sent(&mut s.flight);
                }
            }
        }
    }

    /// [`flush`](Self::flush) over TLS: plaintext into the session, records to the
    /// socket. The first record byte written after the request's plaintext went
    /// into the session turns the ticket into a flight (a record queued before it,
    /// if any, only makes that conservative: Maybe, never a wrong No).
    fn flush_tls(&mut self, i: usize) -> Result<(), i32> {
        let epfd = self.epfd;
        let s = &mut self.slots[i];
        let Some(t) = s.tls.as_mut() else {
            return Ok(());
        };
        // Bounded: each turn either moves plaintext into the session or drains it.
        for _ in 0..1024 {
            let out = s.conn.transmit();
            if !out.is_empty() {
                let n = t.take_plaintext(out);
                s.conn.handle_written(n);
            }
            let (wrote, blocked) = match t.write_records(s.fd) {
                Ok(w) => w,
                Err(f) => {
                    // Records that left before the error may reach the server:
                    // the request is Maybe, never a refundable No.
                    if f.written > 0 {
                        mark_sent(&mut s.flight);
                    }
                    return Err(f.errno);
                }
            };
            if wrote > 0 {
                mark_sent(&mut s.flight);
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
            if s.conn.transmit().is_empty() {
                break;
            }
        }
        if s.want_write {
            s.want_write = false;
            sys::epoll_ctl(epfd, libc::EPOLL_CTL_MOD, s.fd, EV_READ, i as u64)?;
        }
        Ok(())
    }

    /// Closes slot `i`'s connection; it reopens at `retry_at`.
    fn drop_conn(&mut self, i: usize, retry_at: i64) {
        let s = &mut self.slots[i];
        s.close();
        s.conn.reset();
        s.want_write = false;
        s.tls = None;
        s.phase = Phase::Down { retry_at };
    }

    fn fail_later(&mut self, i: usize, e: Error) {
        let s = &mut self.slots[i];
        s.close();
        s.conn.break_off();
        s.phase = Phase::Failed(e);
        self.dirty.push(i);
    }

    fn fail_now<H: ClientHandler + ?Sized>(
        &mut self,
        i: usize,
        e: Error,
        budget: &mut Budget,
        ctl: &mut Ctl,
        h: &mut H,
        now: i64,
    ) {
        let delay = self.pools[usize::from(self.slots[i].pool)]
            .cfg
            .reconnect_delay_ns;
        self.drop_conn(i, now + delay);
        let (id, sent) = match self.slots[i].flight.take() {
            Some(InFlight::Unsent(id, t)) => {
                self.counters.sent_no += 1;
                (id, Sent::No(t))
            }
            Some(InFlight::Sent(id, f)) => {
                self.counters.sent_maybe += 1;
                (id, Sent::Maybe(f))
            }
            None => return,
        };
        h.on_error(&mut Context::new(self, budget, ctl, now), id, sent, e);
    }

    /// Reports failures that happened inside handler calls.
    pub(crate) fn drain<H: ClientHandler + ?Sized>(
        &mut self,
        budget: &mut Budget,
        ctl: &mut Ctl,
        h: &mut H,
        now: i64,
    ) {
        while let Some(i) = self.dirty.pop() {
            if let Phase::Failed(e) = self.slots[i].phase {
                self.fail_now(i, e, budget, ctl, h, now);
            }
        }
        #[cfg(feature = "curl")]
        self.curl_report(CurlStep::Failed, budget, ctl, h, now);
    }

    /// Runs libcurl (or only collects requests it refused) and reports what ended.
    #[cfg(feature = "curl")]
    fn curl_report<H: ClientHandler + ?Sized>(
        &mut self,
        step: CurlStep,
        budget: &mut Budget,
        ctl: &mut Ctl,
        h: &mut H,
        now: i64,
    ) {
        if !self.curl.busy() {
            return;
        }
        let mut ended = core::mem::take(&mut self.curl_ended);
        ended.clear();
        match step {
            CurlStep::Failed => self.curl.failed_now(&mut ended),
            CurlStep::Perform => {
                let (pools, counters) = (&self.pools, &mut self.counters);
                self.curl.drive(now, &mut ended, |pool, n| {
                    counters.connects += u64::from(n);
                    for p in &pools[usize::from(pool)].cfg.connect_parts {
                        let own = budget.charge_after(p.bucket, p.cost.saturating_mul(n), now);
                        debug_assert!(own.is_ok(), "pools charge the budget they are driven with");
                    }
                });
            }
            CurlStep::Abort => self.curl.abort_all(&mut ended),
        }
        for &k in &ended {
            let Some(end) = self.curl.take(k) else {
                continue;
            };
            let (id, ticket, resent) = match &end {
                Ended::Response(id, ticket, _, n) | Ended::Error(id, ticket, _, _, n) => {
                    (*id, ticket, *n)
                }
            };
            if resent > 0 {
                // The venue counted every copy: charge each, after the fact.
                for p in ticket.parts() {
                    let own = budget.charge_after(p.bucket, p.cost.saturating_mul(resent), now);
                    debug_assert!(own.is_ok(), "pools charge the budget they are driven with");
                }
                self.counters.resent += u64::from(resent);
                h.on_resent(&mut Context::new(self, budget, ctl, now), id, resent);
            }
            match end {
                Ended::Response(id, ticket, f, _) => {
                    self.counters.responses += 1;
                    let mut headers = [Header {
                        name: &[],
                        value: &[],
                    }; MAX_HEADERS];
                    let response = f.response(&mut headers);
                    h.on_response(
                        &mut Context::new(self, budget, ctl, now),
                        id,
                        response,
                        ticket.sent(),
                    );
                    self.curl.restore(f);
                }
                Ended::Error(id, ticket, sent, e, _) => {
                    let sent = if sent {
                        self.counters.sent_maybe += 1;
                        Sent::Maybe(ticket.sent())
                    } else {
                        self.counters.sent_no += 1;
                        Sent::No(ticket)
                    };
                    if e == Error::Timeout {
                        self.counters.timeouts += 1;
                    }
                    h.on_error(&mut Context::new(self, budget, ctl, now), id, sent, e);
                }
            }
        }
        self.curl_ended = ended;
    }

    /// Readiness of slot `i`'s socket.
    pub(crate) fn handle_event<H: ClientHandler + ?Sized>(
        &mut self,
        i: usize,
        events: u32,
        budget: &mut Budget,
        ctl: &mut Ctl,
        h: &mut H,
        now: i64,
    ) {
        #[cfg(feature = "curl")]
        if i as u64 & CURL_TOKEN != 0 {
            self.curl
                .on_socket((i as u64 & !CURL_TOKEN) as c_int, events, now);
            return;
        }
        let Some(s) = self.slots.get_mut(i) else {
            return;
        };
        let pool = PoolId(s.pool);
        let delay = self.pools[pool.index()].cfg.reconnect_delay_ns;
        match s.phase {
            Phase::Connecting { deadline } => {
                if events & (EV_WRITE | EV_END) == 0 {
                    return;
                }
                let e = sys::so_error(s.fd);
                let e = if e == 0 && events & EV_END != 0 {
                    libc::ECONNRESET
                } else {
                    e
                };
                let e = if e == 0 {
                    sys::epoll_ctl(self.epfd, libc::EPOLL_CTL_MOD, s.fd, EV_READ, i as u64)
                        .err()
                        .unwrap_or(0)
                } else {
                    e
                };
                if e != 0 {
                    self.connect_failed(i, Error::os(e), budget, ctl, h, now);
                    return;
                }
                if let Some(asked) = self.pools[pool.index()].cfg.local_addr {
                    match sys::local_addr(s.fd) {
                        Ok(got) if same_lane(asked, got) => {}
                        Ok(got) => {
                            self.refuse_pool(
                                pool,
                                Error::LocalAddr { asked, got },
                                budget,
                                ctl,
                                h,
                                now,
                            );
                            return;
                        }
                        Err(e) => {
                            self.connect_failed(i, Error::os(e), budget, ctl, h, now);
                            return;
                        }
                    }
                }
                match self.start_tls(i) {
                    Ok(false) => {}
                    Ok(true) => {
                        self.slots[i].phase = Phase::Handshaking { deadline };
                        self.handshake(i, budget, ctl, h, now);
                        return;
                    }
                    Err(e) => {
                        self.connect_failed(i, e, budget, ctl, h, now);
                        return;
                    }
                }
                self.ready(i, budget, ctl, h, now);
            }
            Phase::Handshaking { .. } => self.handshake(i, budget, ctl, h, now),
            Phase::Idle { .. } => {
                // Anything on an idle connection ends it: the server closed it, or
                // sent bytes that answer nothing. Over TLS, records that carry no
                // data (session tickets) are taken in and the connection stays.
                let fd = s.fd;
                if let Some(t) = s.tls.as_mut() {
                    if tls_idle_ok(t, fd) {
                        return;
                    }
                }
                self.counters.stale += 1;
                self.drop_conn(i, now + delay);
            }
            Phase::Busy { .. } => {
                if events & EV_WRITE != 0 && s.want_write {
                    if let Err(e) = self.flush(i) {
                        self.fail_now(i, Error::os(e), budget, ctl, h, now);
                        return;
                    }
                }
                if events & (EV_READ | EV_END) != 0 {
                    self.read(i, budget, ctl, h, now);
                }
            }
            Phase::Down { .. } | Phase::Failed(_) => {}
        }
    }

    /// Slot `i`'s connection is open (and its handshake done): idle, announced.
    fn ready<H: ClientHandler + ?Sized>(
        &mut self,
        i: usize,
        budget: &mut Budget,
        ctl: &mut Ctl,
        h: &mut H,
        now: i64,
    ) {
        let s = &mut self.slots[i];
        let pool = PoolId(s.pool);
        s.phase = Phase::Idle { since: now };
        s.opened_at = now;
        self.counters.connected += 1;
        h.on_ready(&mut Context::new(self, budget, ctl, now), pool);
    }

    /// A connect (or its handshake) failed: close, retry after the delay, report.
    fn connect_failed<H: ClientHandler + ?Sized>(
        &mut self,
        i: usize,
        e: Error,
        budget: &mut Budget,
        ctl: &mut Ctl,
        h: &mut H,
        now: i64,
    ) {
        let pool = PoolId(self.slots[i].pool);
        let delay = self.pools[pool.index()].cfg.reconnect_delay_ns;
        self.counters.connect_failures += 1;
        self.drop_conn(i, now + delay);
        h.on_connect_error(&mut Context::new(self, budget, ctl, now), pool, e);
    }

    /// Refuses `pool` for good: every connection closed, none reopened.
    fn refuse_pool<H: ClientHandler + ?Sized>(
        &mut self,
        pool: PoolId,
        e: Error,
        budget: &mut Budget,
        ctl: &mut Ctl,
        h: &mut H,
        now: i64,
    ) {
        self.counters.connect_failures += 1;
        let p = &mut self.pools[pool.index()];
        p.refused = Some(e);
        for i in p.slots.clone() {
            // An idle pool has no request in flight; a busy connection of a pool
            // refused later finishes its request and is not reused (see deliver).
            if self.slots[i].flight.is_none() {
                self.drop_conn(i, i64::MAX);
            }
        }
        h.on_connect_error(&mut Context::new(self, budget, ctl, now), pool, e);
    }

    /// Starts a TLS session on slot `i` if its pool wants one.
    #[cfg(feature = "tls")]
    fn start_tls(&mut self, i: usize) -> Result<bool, Error> {
        let s = &mut self.slots[i];
        let Some(cfg) = self.pools[usize::from(s.pool)].cfg.tls.as_ref() else {
            return Ok(false);
        };
        s.tls = Some(Session::new(cfg).map_err(Error::Tls)?);
        Ok(true)
    }

    #[cfg(not(feature = "tls"))]
    fn start_tls(&mut self, _: usize) -> Result<bool, Error> {
        Ok(false)
    }

    /// Drives slot `i`'s handshake as far as the socket allows.
    fn handshake<H: ClientHandler + ?Sized>(
        &mut self,
        i: usize,
        budget: &mut Budget,
        ctl: &mut Ctl,
        h: &mut H,
        now: i64,
    ) {
        let epfd = self.epfd;
        let s = &mut self.slots[i];
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
            Ok(()) => self.ready(i, budget, ctl, h, now),
            Err(e) => self.connect_failed(i, e, budget, ctl, h, now),
        }
    }

    fn read<H: ClientHandler + ?Sized>(
        &mut self,
        i: usize,
        budget: &mut Budget,
        ctl: &mut Ctl,
        h: &mut H,
        now: i64,
    ) {
        if self.slots[i].tls.is_some() {
            return self.read_tls(i, budget, ctl, h, now);
        }
        // Bounded: a fast server cannot keep the loop on one connection for ever.
        for _ in 0..64 {
            let s = &mut self.slots[i];
            let fd = s.fd;
            let buf = s.conn.recv_buf();
            let room = buf.len();
            if room == 0 {
                self.fail_now(
                    i,
                    Error::Parse(ParseError::ResponseTooLarge),
                    budget,
                    ctl,
                    h,
                    now,
                );
                return;
            }
            let step = match sys::recv(fd, buf) {
                Ok(Read::Data(n)) => match s.conn.handle_recv(n) {
                    Ok(Progress::Partial) if n < room => return,
                    Ok(Progress::Partial) => continue,
                    Ok(Progress::Complete) => Ok(()),
                    Err(e) => Err(Error::Parse(e)),
                },
                Ok(Read::WouldBlock) => return,
                Ok(Read::Eof) => match s.conn.handle_eof() {
                    Some(_) => Ok(()),
                    None => Err(Error::Closed),
                },
                Err(e) => Err(Error::os(e)),
            };
            match step {
                Ok(()) => self.deliver(i, budget, ctl, h, now),
                Err(e) => self.fail_now(i, e, budget, ctl, h, now),
            }
            return;
        }
    }

    /// [`read`](Self::read) over TLS: records in, plaintext into the connection.
    fn read_tls<H: ClientHandler + ?Sized>(
        &mut self,
        i: usize,
        budget: &mut Budget,
        ctl: &mut Ctl,
        h: &mut H,
        now: i64,
    ) {
        // Bounded in socket reads; decrypted plaintext is always drained before
        // returning, since no event would come for it.
        let mut reads = 0;
        let step = loop {
            let s = &mut self.slots[i];
            let fd = s.fd;
            let Some(t) = s.tls.as_mut() else {
                return;
            };
            let buf = s.conn.recv_buf();
            if buf.is_empty() {
                break Err(Error::Parse(ParseError::ResponseTooLarge));
            }
            match t.read_plaintext(buf) {
                Plain::Closed => {
                    break match s.conn.handle_eof() {
                        Some(_) => Ok(()),
                        None => Err(Error::Closed),
                    }
                }
                // Without close_notify, a body read until the close may have been
                // cut short by anyone on the path: never a complete answer (the
                // request left: Sent::Maybe). Any other unfinished answer is Closed.
                Plain::Truncated => {
                    break Err(match s.conn.handle_eof() {
                        Some(_) => Error::Truncated,
                        None => Error::Closed,
                    })
                }
                Plain::Data(n) => match s.conn.handle_recv(n) {
                    Ok(Progress::Partial) => continue,
                    Ok(Progress::Complete) => break Ok(()),
                    Err(e) => break Err(Error::Parse(e)),
                },
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
                        if let Err(e) = self.flush(i) {
                            break Err(Error::os(e));
                        }
                    }
                }
                Err(f) => break Err(fault(f)),
            }
        };
        match step {
            Ok(()) => self.deliver(i, budget, ctl, h, now),
            Err(e) => self.fail_now(i, e, budget, ctl, h, now),
        }
    }

    fn deliver<H: ClientHandler + ?Sized>(
        &mut self,
        i: usize,
        budget: &mut Budget,
        ctl: &mut Ctl,
        h: &mut H,
        now: i64,
    ) {
        let s = &mut self.slots[i];
        let (id, flight) = match s.flight.take() {
            Some(InFlight::Sent(id, f)) => (id, f),
            other => {
                // An answer before any byte of the request left answers nothing.
                s.flight = other;
                self.fail_now(
                    i,
                    Error::Parse(ParseError::Unsolicited),
                    budget,
                    ctl,
                    h,
                    now,
                );
                return;
            }
        };
        let pool = &self.pools[usize::from(s.pool)];
        let (max_age, refused) = (pool.cfg.max_age_ns, pool.refused.is_some());
        let buf = s.conn.take_buffer();
        let mut headers = [Header {
            name: &[],
            value: &[],
        }; MAX_HEADERS];
        let response = s.conn.response_in(&buf, &mut headers);
        let reusable = s.conn.finish() && now - s.opened_at < max_age && !refused;
        if reusable {
            s.phase = Phase::Idle { since: now };
        } else {
            self.drop_conn(i, if refused { i64::MAX } else { now });
        }
        self.counters.responses += 1;
        h.on_response(
            &mut Context::new(self, budget, ctl, now),
            id,
            response,
            flight,
        );
        self.slots[i].conn.restore_buffer(buf);
    }

    /// Deadlines, idle timeouts and reconnects, once per loop turn.
    pub(crate) fn service<H: ClientHandler + ?Sized>(
        &mut self,
        budget: &mut Budget,
        ctl: &mut Ctl,
        h: &mut H,
        now: i64,
    ) {
        #[cfg(feature = "curl")]
        self.curl_report(CurlStep::Perform, budget, ctl, h, now);
        for i in 0..self.slots.len() {
            let pool = usize::from(self.slots[i].pool);
            let cfg = &self.pools[pool].cfg;
            let (idle_timeout, max_age, delay) =
                (cfg.idle_timeout_ns, cfg.max_age_ns, cfg.reconnect_delay_ns);
            match self.slots[i].phase {
                Phase::Busy { deadline } if deadline <= now => {
                    self.counters.timeouts += 1;
                    self.fail_now(i, Error::Timeout, budget, ctl, h, now);
                }
                Phase::Connecting { deadline } | Phase::Handshaking { deadline }
                    if deadline <= now =>
                {
                    self.counters.connect_failures += 1;
                    self.drop_conn(i, now + delay);
                    h.on_connect_error(
                        &mut Context::new(self, budget, ctl, now),
                        PoolId(pool as u16),
                        Error::ConnectTimeout,
                    );
                }
                Phase::Idle { since }
                    if now - since >= idle_timeout || now - self.slots[i].opened_at >= max_age =>
                {
                    self.drop_conn(i, now);
                }
                _ => {}
            }
            if let Phase::Down { retry_at } = self.slots[i].phase {
                if retry_at <= now {
                    self.connect(i, budget, ctl, h, now);
                }
            }
        }
    }

    fn connect<H: ClientHandler + ?Sized>(
        &mut self,
        i: usize,
        budget: &mut Budget,
        ctl: &mut Ctl,
        h: &mut H,
        now: i64,
    ) {
        let pool = usize::from(self.slots[i].pool);
        if self.pools[pool].refused.is_some() {
            self.slots[i].phase = Phase::Down { retry_at: i64::MAX };
            return;
        }
        let cfg = &self.pools[pool].cfg;
        let delay = cfg.reconnect_delay_ns;
        let ticket = match budget.try_charge(&cfg.connect_parts, cfg.connect_class, now) {
            Ok(t) => t,
            Err(limited) => {
                // Look again when the budget says, at least once a second (a halt
                // reports no end).
                let at = limited.ready_at_ns.clamp(now + 1, now + 1_000_000_000);
                self.counters.connects_limited += 1;
                self.slots[i].phase = Phase::Down { retry_at: at };
                return;
            }
        };
        let error = match sys::connect_from(&cfg.addr, cfg.local_addr.as_ref()) {
            Connecting::Started(sock) => {
                let own = budget.complete(ticket.sent(), now);
                debug_assert!(
                    own.is_ok(),
                    "the pool charges connects on the budget it is driven with"
                );
                self.counters.connects += 1;
                let s = &mut self.slots[i];
                let fd = s.open(sock);
                s.conn.reset();
                s.want_write = false;
                s.opened_at = now;
                s.phase = Phase::Connecting {
                    deadline: now + cfg.connect_timeout_ns,
                };
                match sys::epoll_ctl(
                    self.epfd,
                    libc::EPOLL_CTL_ADD,
                    fd,
                    EV_READ | EV_WRITE,
                    i as u64,
                ) {
                    Ok(()) => return,
                    Err(e) => {
                        self.drop_conn(i, now + delay);
                        e
                    }
                }
            }
            Connecting::NotSent(e) => {
                let own = budget.refund(ticket, now);
                debug_assert!(
                    own.is_ok(),
                    "the pool charges connects on the budget it is driven with"
                );
                self.slots[i].phase = Phase::Down {
                    retry_at: now + delay,
                };
                e
            }
            Connecting::Failed(e) => {
                let own = budget.complete(ticket.sent(), now);
                debug_assert!(
                    own.is_ok(),
                    "the pool charges connects on the budget it is driven with"
                );
                self.counters.connects += 1;
                self.slots[i].phase = Phase::Down {
                    retry_at: now + delay,
                };
                e
            }
        };
        self.counters.connect_failures += 1;
        h.on_connect_error(
            &mut Context::new(self, budget, ctl, now),
            PoolId(pool as u16),
            Error::os(error),
        );
    }

    /// Installs an already connected descriptor as slot `i`'s idle connection, so
    /// tests can reach failure paths a TCP peer cannot produce on demand.
    #[cfg(test)]
    pub(crate) fn adopt(&mut self, i: usize, sock: OwnedFd, now: i64) {
        self.drop_conn(i, i64::MAX);
        let s = &mut self.slots[i];
        let fd = s.open(sock);
        sys::epoll_ctl(self.epfd, libc::EPOLL_CTL_ADD, fd, EV_READ, i as u64).unwrap();
        s.phase = Phase::Idle { since: now };
        s.opened_at = now;
    }

    /// The earliest time the client needs the loop to wake for.
    pub(crate) fn next_deadline(&self) -> Option<i64> {
        let mut next: Option<i64> = None;
        for s in &self.slots {
            let cfg = &self.pools[usize::from(s.pool)].cfg;
            let at = match s.phase {
                Phase::Down { retry_at } => retry_at,
                Phase::Connecting { deadline }
                | Phase::Handshaking { deadline }
                | Phase::Busy { deadline } => deadline,
                Phase::Idle { since } => {
                    (since + cfg.idle_timeout_ns).min(s.opened_at + cfg.max_age_ns)
                }
                Phase::Failed(_) => i64::MIN,
            };
            next = Some(next.map_or(at, |n| n.min(at)));
        }
        #[cfg(feature = "curl")]
        if let Some(at) = self.curl.next_deadline() {
            next = Some(next.map_or(at, |n| n.min(at)));
        }
        next
    }

    /// Closes every connection (the loop is shutting down). In-flight requests are
    /// reported as failed.
    pub(crate) fn close_all<H: ClientHandler + ?Sized>(
        &mut self,
        budget: &mut Budget,
        ctl: &mut Ctl,
        h: &mut H,
        now: i64,
    ) {
        for i in 0..self.slots.len() {
            if self.slots[i].flight.is_some() {
                self.fail_now(i, Error::Closed, budget, ctl, h, now);
            }
            self.drop_conn(i, i64::MAX);
        }
        #[cfg(feature = "curl")]
        self.curl_report(CurlStep::Abort, budget, ctl, h, now);
    }
}

impl Slot {
    /// Takes `sock` as this slot's socket; returns its raw descriptor.
    fn open(&mut self, sock: OwnedFd) -> c_int {
        self.fd = sock.as_raw_fd();
        self.sock = Some(sock);
        self.fd
    }

    /// Closes the socket, if any (leaving epoll with it).
    fn close(&mut self) {
        self.sock = None;
        self.fd = -1;
    }
}

/// Whether an idle TLS connection is still usable: records that carry no data
/// (session tickets, key updates) are taken in; data, a close or an error end it.
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

/// What [`Client::curl_report`] does.
#[cfg(feature = "curl")]
#[derive(Clone, Copy)]
enum CurlStep {
    /// Collect only the requests that failed before reaching libcurl.
    Failed,
    /// Run libcurl and collect what ended.
    Perform,
    /// End everything (shutdown).
    Abort,
}

/// The first byte of a request left: its ticket becomes a flight (no refund
/// from here).
fn mark_sent(flight: &mut Option<InFlight>) {
    *flight = match flight.take() {
        Some(InFlight::Unsent(id, t)) => Some(InFlight::Sent(id, t.sent())),
        other => other,
    };
}

fn fault(f: Fault) -> Error {
    match f {
        Fault::Io(e) => Error::os(e),
        #[cfg(feature = "tls")]
        Fault::Tls(e) => Error::Tls(e),
    }
}
