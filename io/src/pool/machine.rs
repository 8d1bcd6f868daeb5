//! [`Pool`]: every pool's connections as one sans-IO state machine.

use std::collections::VecDeque;
use std::net::SocketAddr;

use ergon_core::{Budget, Flight, Ticket};
use ergon_venues::response::Response;

use super::{Counters, Error, PoolConfig, PoolError, PoolId, Refused, RequestId, Sent};
use crate::http::{Conn, Headers, HostLine, Outgoing, ParseError, Progress};

/// One connection slot, numbered across every pool in the order they were added.
/// A slot keeps its number while its transport connection comes and goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnId(pub(crate) usize);

impl ConnId {
    /// The slot numbered `index` (a driver that keeps its own table by index,
    /// such as a test harness; an index with no slot is ignored by every call).
    pub fn new(index: usize) -> Self {
        ConnId(index)
    }

    /// The slot's index.
    pub fn index(self) -> usize {
        self.0
    }
}

/// What the pool asks its driver to do to the transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transmit {
    /// Open a connection for `conn` to `addr`, bound to `local` when set (the
    /// egress lane; verify the binding once connected). The connect was charged:
    /// report [`Pool::handle_connect_started`] once the attempt left, then
    /// [`Pool::handle_connected`] or [`Pool::handle_connect_failed`].
    Connect {
        /// The slot.
        conn: ConnId,
        /// The server.
        addr: SocketAddr,
        /// The lane's local address, if any.
        local: Option<SocketAddr>,
    },
    /// Close `conn`'s transport connection (TLS session included); the slot
    /// carries nothing until the pool asks to connect it again.
    Close {
        /// The slot.
        conn: ConnId,
    },
}

/// What the pool tells its caller. Every accepted request ends in exactly one
/// [`PoolEvent::Response`] or [`PoolEvent::Failed`].
#[derive(Debug, PartialEq, Eq)]
pub enum PoolEvent {
    /// A new connection of the pool is open and idle.
    Ready(PoolId),
    /// A connect of the pool failed (or the pool was refused for good: see
    /// [`Error::LocalAddr`]).
    ConnectError(PoolId, Error),
    /// Request `id` was answered; the response waits in `conn` (read it with
    /// [`Pool::take_buffer`], [`Pool::response_in`], [`Pool::release`] and
    /// [`Pool::restore_buffer`], in that order). Settle the `flight`.
    Response {
        /// The request.
        id: RequestId,
        /// The connection holding the response.
        conn: ConnId,
        /// The request's flight, to complete.
        flight: Flight,
    },
    /// Request `id` failed; `sent` says whether any byte left. Its connection
    /// was closed and is not reused.
    Failed {
        /// The request.
        id: RequestId,
        /// Whether any byte left: refund [`Sent::No`], reconcile [`Sent::Maybe`].
        sent: Sent,
        /// Why.
        error: Error,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Down {
        retry_at: i64,
    },
    /// The transport connects (TCP, then the TLS handshake) until `deadline`.
    Connecting {
        deadline: i64,
    },
    /// Open and free until `expires`: idle too long or too old from then
    /// (computed once, when it goes idle).
    Idle {
        expires: i64,
    },
    Busy {
        deadline: i64,
    },
    /// The response is complete and reported; it leaves with [`Pool::release`].
    Answered,
}

/// A slot's request: its ticket, and whether a byte of it left. Once `sent`, the
/// ticket leaves only as a [`Flight`] (no refund): [`Ticket::sent`] is applied in
/// the event that reports the request, so the send path sets a flag instead of
/// moving the ticket.
#[derive(Debug)]
struct InFlight {
    id: RequestId,
    ticket: Ticket,
    sent: bool,
}

#[derive(Debug)]
struct Slot {
    pool: u16,
    phase: Phase,
    conn: Conn,
    flight: Option<InFlight>,
    /// The charge of the connect under way, until it left.
    connect: Option<Ticket>,
    opened_at: i64,
    /// The receive buffer is out ([`Pool::take_buffer`]) until restored.
    taken: bool,
    /// Connect failures in a row (the reconnect backoff's exponent).
    failures: u32,
}

#[derive(Debug)]
struct Origin {
    cfg: PoolConfig,
    /// `cfg.host`'s header line.
    host: HostLine,
    slots: core::ops::Range<usize>,
    /// Set when the pool was refused for good (an ignored local binding).
    refused: Option<Error>,
}

/// Every pool's connections: phases, deadlines, keep-alive, reconnects, connect
/// charges and lanes, with no socket, no system call and no clock.
///
/// quinn-proto's shape. Input goes in through `handle_*` (and [`request`]),
/// each taking `now`; output comes out through [`poll_transmit`] (what to do to
/// the transport), [`poll_event`] (what to tell the caller) and
/// [`poll_timeout`] (when to call [`handle_timeout`] next). The bytes of a
/// request come out of [`transmit`] and go back as [`handle_written`]; response
/// bytes go into [`recv_buf`] and are announced with [`handle_recv`].
///
/// Drive invariant: after any input, drain [`poll_transmit`] and then
/// [`poll_event`] until each says `None`, and call [`handle_timeout`] once
/// [`poll_timeout`] has passed. The event loop's shell, the tests' simulated
/// harness and any other driver do exactly that. Nothing here calls back: a
/// failure found inside [`request`] is an event like any other.
///
/// A request cannot be written twice: it is encoded once into its slot's send
/// buffer, whose position only moves forward; its ticket (or flight) stays with
/// that slot and leaves only in an event; a slot that failed is reset before it
/// carries anything again; and nothing here keeps a request to send later.
///
/// [`request`]: Pool::request
/// [`poll_transmit`]: Pool::poll_transmit
/// [`poll_event`]: Pool::poll_event
/// [`poll_timeout`]: Pool::poll_timeout
/// [`handle_timeout`]: Pool::handle_timeout
/// [`transmit`]: Pool::transmit
/// [`handle_written`]: Pool::handle_written
/// [`recv_buf`]: Pool::recv_buf
/// [`handle_recv`]: Pool::handle_recv
#[derive(Debug)]
pub struct Pool {
    origins: Vec<Origin>,
    slots: Vec<Slot>,
    /// The id the next accepted request gets. Crate-visible, as `counters`:
    /// the libcurl transport numbers its requests from here too, so ids are
    /// unique across transports (the native path mints inline, as here).
    pub(crate) next_id: u64,
    /// Crate-visible: the libcurl transport counts its requests here too, so
    /// the counters tell one story across transports.
    pub(crate) counters: Counters,
    events: VecDeque<PoolEvent>,
    transmits: VecDeque<Transmit>,
    /// No slot has work for [`handle_timeout`](Pool::handle_timeout) before this
    /// instant: a lower bound of [`poll_timeout`](Pool::poll_timeout), lowered
    /// wherever a phase with a time is entered and made exact by each scan, so a
    /// turn with nothing due costs one comparison.
    wake: i64,
}

impl Default for Pool {
    fn default() -> Self {
        Pool::new()
    }
}

impl Pool {
    /// An empty pool set.
    pub fn new() -> Self {
        Pool {
            origins: Vec::new(),
            slots: Vec::new(),
            next_id: 1,
            counters: Counters::default(),
            events: VecDeque::new(),
            transmits: VecDeque::new(),
            wake: i64::MAX,
        }
    }

    /// Adds a pool of `cfg.connections` slots (none for a libcurl pool, whose
    /// transfers live in the libcurl transport); each connects on the first
    /// [`handle_timeout`](Self::handle_timeout) at or after `now`. Setup time:
    /// allocates.
    pub fn add_pool(&mut self, cfg: PoolConfig, now: i64) -> Result<PoolId, PoolError> {
        if cfg.connections == 0 {
            return Err(PoolError::NoConnections);
        }
        let host = HostLine::new(&cfg.host).ok_or(PoolError::BadHost)?;
        if cfg.limits.max_response < 64 || cfg.limits.max_request < 64 {
            return Err(PoolError::BuffersTooSmall);
        }
        let id = u16::try_from(self.origins.len()).map_err(|_| PoolError::TooManyPools)?;
        let start = self.slots.len();
        for _ in 0..cfg.native_connections() {
            self.slots.push(Slot {
                pool: id,
                phase: Phase::Down { retry_at: now },
                conn: Conn::new(cfg.limits),
                flight: None,
                connect: None,
                opened_at: now,
                taken: false,
                failures: 0,
            });
        }
        // Room for every slot's worst turn (a failure, a connect error, a close and
        // a connect each) and every libcurl transfer: nothing grows on the send path.
        self.wake_at(now);
        let room = 4 * (self.slots.len() + cfg.connections);
        self.events
            .reserve(room.saturating_sub(self.events.capacity()));
        self.transmits
            .reserve(room.saturating_sub(self.transmits.capacity()));
        self.origins.push(Origin {
            cfg,
            host,
            slots: start..self.slots.len(),
            refused: None,
        });
        Ok(PoolId(id))
    }

    /// `pool`'s configuration.
    pub fn config(&self, pool: PoolId) -> Option<&PoolConfig> {
        self.origins.get(pool.index()).map(|o| &o.cfg)
    }

    /// The pool `conn` belongs to.
    pub fn pool_of(&self, conn: ConnId) -> Option<PoolId> {
        self.slots.get(conn.0).map(|s| PoolId(s.pool))
    }

    /// How many slots all pools have.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// What the pool did so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// How many connections of `pool` are open and idle now.
    pub fn idle(&self, pool: PoolId) -> usize {
        self.origins.get(pool.index()).map_or(0, |o| {
            self.slots[o.slots.clone()]
                .iter()
                .filter(|s| matches!(s.phase, Phase::Idle { .. }))
                .count()
        })
    }

    /// Whether `conn` is open and idle.
    pub fn is_idle(&self, conn: ConnId) -> bool {
        self.slots
            .get(conn.0)
            .is_some_and(|s| matches!(s.phase, Phase::Idle { .. }))
    }

    /// Whether `conn` carries a request whose response is not complete.
    pub fn is_busy(&self, conn: ConnId) -> bool {
        self.slots
            .get(conn.0)
            .is_some_and(|s| matches!(s.phase, Phase::Busy { .. }))
    }

    /// Whether `conn` is connecting (its transport or its TLS handshake).
    pub fn is_connecting(&self, conn: ConnId) -> bool {
        self.slots
            .get(conn.0)
            .is_some_and(|s| matches!(s.phase, Phase::Connecting { .. }))
    }

    /// Why `pool` was refused for good, if it was (see [`Error::LocalAddr`]).
    pub fn refused(&self, pool: PoolId) -> Option<Error> {
        self.origins.get(pool.index()).and_then(|o| o.refused)
    }

    /// How many requests of the native slots are in flight now.
    pub fn in_flight(&self) -> usize {
        self.slots.iter().filter(|s| s.flight.is_some()).count()
    }

    /// Puts `req` on an idle connection of `pool`, or hands the ticket back.
    /// `req` is a [`Request`](crate::http::Request) (encoded) or an [`Http`](ergon_venues::endpoint::Http)
    /// (a request its adapter wrote as HTTP/1.1 already, valid on the wire by
    /// construction: copied with the pool's `Host` line, the same bytes).
    /// `is_open` is the driver's look at an idle connection's transport (a peek:
    /// false when the server closed it or sent bytes unasked, and it is then
    /// dropped as stale instead of written to). On success the request waits in
    /// the returned slot's [`transmit`](Self::transmit): write it now.
    ///
    /// `deadline_ns`: a request already past it is refused ([`Refused::Expired`]);
    /// when it passes before the response is complete, the request fails with
    /// [`Error::Timeout`] and its connection is closed.
    #[inline]
    pub fn request<R: Outgoing + ?Sized>(
        &mut self,
        pool: PoolId,
        req: &R,
        ticket: Ticket,
        deadline_ns: i64,
        now: i64,
        mut is_open: impl FnMut(ConnId) -> bool,
    ) -> Result<(RequestId, ConnId), Refused> {
        let Some(o) = self.origins.get(pool.index()) else {
            return Err(Refused::UnknownPool(ticket));
        };
        if deadline_ns <= now {
            return Err(Refused::Expired(ticket));
        }
        let (range, delay) = (o.slots.clone(), o.cfg.reconnect_delay_ns);
        let mut chosen = None;
        for i in range {
            let s = &self.slots[i];
            let Phase::Idle { expires } = s.phase else {
                continue;
            };
            if now >= expires {
                self.drop_conn(i, now);
                continue;
            }
            if is_open(ConnId(i)) {
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
        let host = &self.origins[pool.index()].host;
        let s = &mut self.slots[i];
        if let Err(e) = req.put_on(&mut s.conn, host) {
            return Err(Refused::Invalid(ticket, e));
        }
        let id = RequestId(self.next_id);
        self.next_id += 1;
        s.flight = Some(InFlight {
            id,
            ticket,
            sent: false,
        });
        s.phase = Phase::Busy {
            deadline: deadline_ns,
        };
        self.wake_at(deadline_ns);
        self.counters.requests += 1;
        Ok((id, ConnId(i)))
    }

    /// The request bytes of `conn` still to be written (empty when all left).
    #[inline]
    pub fn transmit(&self, conn: ConnId) -> &[u8] {
        self.slots.get(conn.0).map_or(&[], |s| s.conn.transmit())
    }

    /// `n` bytes of [`transmit`](Self::transmit) left (or, over TLS, went into a
    /// record that left). The first byte out turns the ticket into a flight: no
    /// refund from here.
    #[inline]
    pub fn handle_written(&mut self, conn: ConnId, n: usize) {
        let Some(s) = self.slots.get_mut(conn.0) else {
            return;
        };
        s.conn.handle_written(n);
        if n > 0 {
            mark_sent(&mut s.flight);
        }
    }

    /// Takes `n` bytes of `conn`'s request out of [`transmit`](Self::transmit)
    /// without anything having left yet (they went into a TLS session's plaintext
    /// buffer); [`handle_sent`](Self::handle_sent) says when a record left.
    pub fn handle_buffered(&mut self, conn: ConnId, n: usize) {
        if let Some(s) = self.slots.get_mut(conn.0) {
            s.conn.handle_written(n);
        }
    }

    /// Bytes of `conn` left on the wire (a TLS record carrying, or queued after,
    /// the request's plaintext): the ticket becomes a flight.
    pub fn handle_sent(&mut self, conn: ConnId) {
        if let Some(s) = self.slots.get_mut(conn.0) {
            mark_sent(&mut s.flight);
        }
    }

    /// Where to put `conn`'s next response bytes. Empty when no response is
    /// awaited or the response outgrew its buffer (then report
    /// [`Error::Parse`]`(`[`ParseError::ResponseTooLarge`]`)` if it is busy).
    pub fn recv_buf(&mut self, conn: ConnId) -> &mut [u8] {
        match self.slots.get_mut(conn.0) {
            Some(s) => s.conn.recv_buf(),
            None => &mut [],
        }
    }

    /// `n` bytes were put into [`recv_buf`](Self::recv_buf). Returns true while
    /// the response is incomplete and the connection healthy (read on); a complete
    /// response becomes [`PoolEvent::Response`], bad bytes [`PoolEvent::Failed`].
    pub fn handle_recv(&mut self, conn: ConnId, n: usize, now: i64) -> bool {
        let Some(s) = self.slots.get_mut(conn.0) else {
            return false;
        };
        if !matches!(s.phase, Phase::Busy { .. }) {
            return false;
        }
        match s.conn.handle_recv(n) {
            Ok(Progress::Partial) => true,
            Ok(Progress::Complete) => {
                self.answer(conn.0, now);
                false
            }
            Err(e) => {
                self.fail(conn.0, Error::Parse(e), now);
                false
            }
        }
    }

    /// `conn`'s transport ended. `truncated`: over TLS, without close_notify, so
    /// a body read until the close may have been cut short by anyone on the path
    /// and is not an answer. A busy connection's request then ends (a response
    /// read until the close, or [`Error::Closed`]); an idle one is dropped as
    /// stale.
    pub fn handle_eof(&mut self, conn: ConnId, truncated: bool, now: i64) {
        let Some(s) = self.slots.get_mut(conn.0) else {
            return;
        };
        match s.phase {
            Phase::Busy { .. } => match (s.conn.handle_eof(), truncated) {
                (Some(_), false) => self.answer(conn.0, now),
                (Some(_), true) => self.fail(conn.0, Error::Truncated, now),
                (None, _) => self.fail(conn.0, Error::Closed, now),
            },
            Phase::Idle { .. } => self.handle_stale(conn, now),
            Phase::Connecting { .. } => self.handle_connect_failed_at(conn.0, Error::Closed, now),
            Phase::Down { .. } | Phase::Answered => {}
        }
    }

    /// An idle `conn` became readable: the server closed it or sent bytes that
    /// answer nothing. It is dropped (reopened after the reconnect delay).
    pub fn handle_stale(&mut self, conn: ConnId, now: i64) {
        let Some(s) = self.slots.get(conn.0) else {
            return;
        };
        if matches!(s.phase, Phase::Idle { .. }) {
            self.counters.stale += 1;
            let delay = self.delay(conn.0);
            self.drop_conn(conn.0, now + delay);
        }
    }

    /// `conn`'s transport failed (a write or read error). Its request, if any,
    /// ends in [`PoolEvent::Failed`] with [`Sent::No`] or [`Sent::Maybe`]; a connect
    /// under way ends in [`PoolEvent::ConnectError`].
    pub fn handle_error(&mut self, conn: ConnId, error: Error, now: i64) {
        let Some(s) = self.slots.get(conn.0) else {
            return;
        };
        match s.phase {
            Phase::Connecting { .. } => self.handle_connect_failed_at(conn.0, error, now),
            Phase::Down { .. } => {}
            _ => self.fail(conn.0, error, now),
        }
    }

    /// The connect of `conn` left (the attempt reached the network): its charge
    /// stays.
    pub fn handle_connect_started(&mut self, conn: ConnId, budget: &mut Budget, now: i64) {
        if let Some(t) = self.slots.get_mut(conn.0).and_then(|s| s.connect.take()) {
            let own = budget.complete(t.sent(), now);
            debug_assert!(own.is_ok(), "the pool charges the budget it is driven with");
            self.counters.connects += 1;
        }
    }

    /// The connect of `conn` failed. If it never left (the socket could not even
    /// be made), its charge is refunded. It is tried again after the reconnect
    /// delay.
    pub fn handle_connect_failed(
        &mut self,
        conn: ConnId,
        error: Error,
        budget: &mut Budget,
        now: i64,
    ) {
        let Some(s) = self.slots.get_mut(conn.0) else {
            return;
        };
        if let Some(t) = s.connect.take() {
            let own = budget.refund(t, now);
            debug_assert!(own.is_ok(), "the pool charges the budget it is driven with");
        }
        if matches!(s.phase, Phase::Connecting { .. }) {
            self.handle_connect_failed_at(conn.0, error, now);
        }
    }

    /// `conn`'s transport is up, its binding verified and its handshake done: it
    /// is idle ([`PoolEvent::Ready`]).
    pub fn handle_connected(&mut self, conn: ConnId, now: i64) {
        let Some(s) = self.slots.get_mut(conn.0) else {
            return;
        };
        if !matches!(s.phase, Phase::Connecting { .. }) {
            return;
        }
        s.opened_at = now;
        s.failures = 0;
        let pool = s.pool;
        self.counters.connected += 1;
        self.counters.failing_in_row = 0;
        self.counters.retry_at_ns = 0;
        self.events.push_back(PoolEvent::Ready(PoolId(pool)));
        self.wake_idle(conn.0, now);
    }

    /// `conn`'s transport left from an address other than its lane's: its pool
    /// is refused for good. Every connection without a request closes for good;
    /// a busy one finishes its request and is not reused.
    pub fn handle_bad_binding(&mut self, conn: ConnId, error: Error) {
        let Some(s) = self.slots.get(conn.0) else {
            return;
        };
        let pool = s.pool;
        self.counters.connect_failures += 1;
        let o = &mut self.origins[usize::from(pool)];
        o.refused = Some(error);
        for i in o.slots.clone() {
            if self.slots[i].flight.is_none() {
                self.drop_conn(i, i64::MAX);
            }
        }
        self.events
            .push_back(PoolEvent::ConnectError(PoolId(pool), error));
    }

    /// Deadlines, idle expiry, maximum age and reconnects due at `now`. A connect
    /// is charged here (`budget`); one the budget refuses is tried again when it
    /// says (at least once a second: a halt reports no end).
    #[inline]
    pub fn handle_timeout(&mut self, budget: &mut Budget, now: i64) {
        if now >= self.wake {
            self.expire(budget, now);
        }
    }

    /// [`handle_timeout`](Self::handle_timeout)'s scan, once something is due.
    fn expire(&mut self, budget: &mut Budget, now: i64) {
        for i in 0..self.slots.len() {
            match self.slots[i].phase {
                Phase::Busy { deadline } if deadline <= now => {
                    self.counters.timeouts += 1;
                    self.fail(i, Error::Timeout, now);
                }
                Phase::Connecting { deadline } if deadline <= now => {
                    if let Some(t) = self.slots[i].connect.take() {
                        // Never reported as left: it may have; keep the charge.
                        let own = budget.complete(t.sent(), now);
                        debug_assert!(own.is_ok(), "the pool charges the budget it is driven with");
                    }
                    self.handle_connect_failed_at(i, Error::ConnectTimeout, now);
                }
                Phase::Idle { expires } if expires <= now => {
                    self.drop_conn(i, now);
                }
                _ => {}
            }
            if let Phase::Down { retry_at } = self.slots[i].phase {
                if retry_at <= now {
                    self.connect(i, budget, now);
                }
            }
        }
        self.wake = self.poll_timeout().unwrap_or(i64::MAX);
    }

    /// The earliest time [`handle_timeout`](Self::handle_timeout) has work.
    pub fn poll_timeout(&self) -> Option<i64> {
        self.slots
            .iter()
            .filter_map(|s| match s.phase {
                Phase::Down { retry_at } => Some(retry_at),
                Phase::Connecting { deadline } | Phase::Busy { deadline } => Some(deadline),
                Phase::Idle { expires } => Some(expires),
                Phase::Answered => None,
            })
            .min()
    }

    /// Whether [`poll_transmit`](Self::poll_transmit) or
    /// [`poll_event`](Self::poll_event) has anything (a cheap check for drivers
    /// that poll after every input).
    #[inline]
    pub fn has_output(&self) -> bool {
        !self.events.is_empty() || !self.transmits.is_empty()
    }

    /// Whether [`poll_transmit`](Self::poll_transmit) has anything.
    #[inline]
    pub fn has_transmit(&self) -> bool {
        !self.transmits.is_empty()
    }

    /// The next thing to do to the transport.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// The next thing to tell the caller.
    pub fn poll_event(&mut self) -> Option<PoolEvent> {
        self.events.pop_front()
    }

    /// Takes the buffer of an answered `conn` out (no allocation), so the
    /// response can be read while the pool is used elsewhere. Empty for a
    /// connection that is not answered (nothing is taken then).
    pub fn take_buffer(&mut self, conn: ConnId) -> Vec<u8> {
        match self.slots.get_mut(conn.0) {
            Some(s) if s.phase == Phase::Answered && !s.taken => {
                s.taken = true;
                s.conn.take_buffer()
            }
            _ => Vec::new(),
        }
    }

    /// The response of `conn`, answered and not yet released, over its taken
    /// buffer (an empty response for a slot that does not exist).
    pub fn response_in<'h, 'a: 'h>(
        &self,
        conn: ConnId,
        buf: &'a [u8],
        headers: &'h mut Headers<'a>,
    ) -> Response<'h> {
        match self.slots.get(conn.0) {
            Some(s) => s.conn.response_in(buf, headers),
            None => Response {
                status: 0,
                headers: &[],
                body: &[],
            },
        }
    }

    /// Ends an answered `conn`'s exchange: idle again if it may carry another
    /// request (keep-alive, younger than the maximum age, pool not refused),
    /// else closed.
    pub fn release(&mut self, conn: ConnId, now: i64) {
        let Some(s) = self.slots.get_mut(conn.0) else {
            return;
        };
        if s.phase != Phase::Answered {
            return;
        }
        let o = &self.origins[usize::from(s.pool)];
        let refused = o.refused.is_some();
        let reusable = s.conn.finish() && now - s.opened_at < o.cfg.max_age_ns && !refused;
        if reusable {
            self.wake_idle(conn.0, now);
        } else {
            self.drop_conn(conn.0, if refused { i64::MAX } else { now });
        }
    }

    /// Returns the buffer taken by [`take_buffer`](Self::take_buffer) (any
    /// other buffer, or one given twice, is dropped).
    pub fn restore_buffer(&mut self, conn: ConnId, buf: Vec<u8>) {
        if let Some(s) = self.slots.get_mut(conn.0) {
            if s.taken {
                s.taken = false;
                s.conn.restore_buffer(buf);
            }
        }
    }

    /// Every request in flight fails with [`Error::Closed`] and every connection
    /// closes for good (the driver is shutting down).
    pub fn close_all(&mut self, now: i64) {
        for i in 0..self.slots.len() {
            if self.slots[i].flight.is_some() {
                self.fail(i, Error::Closed, now);
            }
            self.drop_conn(i, i64::MAX);
        }
    }

    /// Makes `conn` an open, idle connection (a test installs a socket pair).
    #[cfg(test)]
    pub(crate) fn adopt(&mut self, conn: ConnId, now: i64) {
        if let Some(s) = self.slots.get_mut(conn.0) {
            s.conn.reset();
            s.opened_at = now;
            self.wake_idle(conn.0, now);
        }
    }

    /// Some slot has work at `at`.
    #[inline]
    fn wake_at(&mut self, at: i64) {
        self.wake = self.wake.min(at);
    }

    /// Slot `i` goes idle at `since`: it expires when idle too long or too old.
    fn wake_idle(&mut self, i: usize, since: i64) {
        let s = &mut self.slots[i];
        let cfg = &self.origins[usize::from(s.pool)].cfg;
        let expires = since
            .saturating_add(cfg.idle_timeout_ns)
            .min(s.opened_at.saturating_add(cfg.max_age_ns));
        s.phase = Phase::Idle { expires };
        self.wake_at(expires);
    }

    fn delay(&self, i: usize) -> i64 {
        self.origins[usize::from(self.slots[i].pool)]
            .cfg
            .reconnect_delay_ns
    }

    fn connect(&mut self, i: usize, budget: &mut Budget, now: i64) {
        let o = &self.origins[usize::from(self.slots[i].pool)];
        if o.refused.is_some() {
            self.slots[i].phase = Phase::Down { retry_at: i64::MAX };
            return;
        }
        let cfg = &o.cfg;
        match budget.try_charge(&cfg.connect_parts, cfg.connect_class, now) {
            Ok(t) => {
                let s = &mut self.slots[i];
                s.connect = Some(t);
                s.conn.reset();
                s.opened_at = now;
                let deadline = now + cfg.connect_timeout_ns;
                s.phase = Phase::Connecting { deadline };
                self.transmits.push_back(Transmit::Connect {
                    conn: ConnId(i),
                    addr: cfg.addr,
                    local: cfg.local_addr,
                });
                self.wake_at(deadline);
            }
            Err(limited) => {
                let at = limited.ready_at_ns.clamp(now + 1, now + 1_000_000_000);
                self.counters.connects_limited += 1;
                self.slots[i].phase = Phase::Down { retry_at: at };
                self.wake_at(at);
            }
        }
    }

    fn handle_connect_failed_at(&mut self, i: usize, e: Error, now: i64) {
        let s = &mut self.slots[i];
        s.failures = s.failures.saturating_add(1);
        let failures = s.failures;
        let cfg = &self.origins[usize::from(s.pool)].cfg;
        let wait = reconnect_wait(
            cfg.reconnect_delay_ns,
            cfg.reconnect_max_ns,
            failures,
            i,
            now,
        );
        let at = now.saturating_add(wait);
        self.counters.connect_failures += 1;
        self.counters.failing_in_row = failures;
        self.counters.retry_at_ns = at;
        self.drop_conn(i, at);
        self.events
            .push_back(PoolEvent::ConnectError(PoolId(self.slots[i].pool), e));
    }

    /// A complete response on slot `i`: reported, or, if no byte of the request
    /// left, it answers nothing and the connection fails.
    fn answer(&mut self, i: usize, _now: i64) {
        let s = &mut self.slots[i];
        match s.flight.take() {
            Some(InFlight {
                id,
                ticket,
                sent: true,
            }) => {
                s.phase = Phase::Answered;
                self.counters.responses += 1;
                self.events.push_back(PoolEvent::Response {
                    id,
                    conn: ConnId(i),
                    flight: ticket.sent(),
                });
            }
            other => {
                s.flight = other;
                self.fail(i, Error::Parse(ParseError::Unsolicited), _now);
            }
        }
    }

    /// Closes slot `i` and reports its request, if any, as failed.
    fn fail(&mut self, i: usize, e: Error, now: i64) {
        let delay = self.delay(i);
        self.drop_conn(i, now + delay);
        let (id, sent) = match self.slots[i].flight.take() {
            Some(InFlight {
                id,
                ticket,
                sent: false,
            }) => {
                self.counters.sent_no += 1;
                (id, Sent::No(ticket))
            }
            Some(InFlight {
                id,
                ticket,
                sent: true,
            }) => {
                self.counters.sent_maybe += 1;
                (id, Sent::Maybe(ticket.sent()))
            }
            None => return,
        };
        self.events
            .push_back(PoolEvent::Failed { id, sent, error: e });
    }

    /// Closes slot `i`'s connection (if it had one); it reopens at `retry_at`.
    fn drop_conn(&mut self, i: usize, retry_at: i64) {
        let s = &mut self.slots[i];
        let had = !matches!(s.phase, Phase::Down { .. });
        s.conn.reset();
        s.phase = Phase::Down { retry_at };
        self.wake_at(retry_at);
        if had {
            self.transmits
                .push_back(Transmit::Close { conn: ConnId(i) });
        }
    }
}

/// The wait after the `failures`-th connect failure in a row of slot `slot` at
/// `now`: `first` after one failure (a blip reconnects at once); after more,
/// `first` doubled per earlier failure, at most `max`, drawn from the upper half
/// of that (equal jitter: at least half, so the backoff still grows; slots and
/// processes not in step). The draw is a hash of (slot, failures, now): no
/// state, and the same inputs give the same wait, as the simulator needs.
pub(crate) fn reconnect_wait(first: i64, max: i64, failures: u32, slot: usize, now: i64) -> i64 {
    let first = first.max(1);
    let max = max.max(first);
    if failures <= 1 {
        return first.min(max);
    }
    let shift = failures.saturating_sub(1).min(40);
    let full = first.saturating_mul(1i64 << shift).min(max);
    let half = full / 2;
    let mut z = (now as u64) ^ ((slot as u64) << 32) ^ u64::from(failures);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    half + (z % (full - half + 1) as u64) as i64
}

/// The first byte of a request left: its ticket is a flight from here (no
/// refund).
#[inline]
fn mark_sent(flight: &mut Option<InFlight>) {
    if let Some(f) = flight {
        f.sent = true;
    }
}
