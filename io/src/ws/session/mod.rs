//! The sans-IO WebSocket client session: handshake, frames, control frames, the
//! close handshake, and the budget charged for every frame it writes.
//!
//! Never reads a clock, never touches a socket, never allocates after
//! [`Session::new`] (all buffers are sized there and reused across reconnects), never
//! panics on bytes from the peer.

use arrayvec::ArrayVec;
use ergon_core::{Budget, Class, Flight, Part, Ticket, Verdict, MAX_PARTS};
use ergon_venues::response::{Header, Response};

use super::accept::{encode_key, KEY_LEN};
use super::frame::{frame_len, Opcode, MAX_CONTROL, MAX_HEADER};
use super::handshake::{self, Body, HandshakeError, Upgrade};
use super::ProtocolError;
use crate::culprit::Culprit;

mod error;
mod read;
mod write;

pub use error::{ConnectError, SendError, SetupError};

/// Frames written into the send buffer whose first byte has not left yet.
const MAX_QUEUED: usize = 64;
/// Requests on the wire awaiting their answer, at most: a session refuses more
/// with [`SendError::TooManyPending`].
pub const MAX_PENDING: usize = 64;
/// Longest close reason: a control payload less the 2-byte code.
const MAX_REASON: usize = MAX_CONTROL - 2;
/// How often a pong or close refused for a halt (no ready time) is tried again.
const HALT_RETRY_NS: i64 = 1_000_000_000;

/// Bounds and timeouts of a [`Session`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WsConfig {
    /// Largest message accepted, fragmented or not; a larger frame or message fails
    /// the connection with 1009. Also the largest frame.
    pub max_message: usize,
    /// Largest upgrade response header.
    pub max_handshake: usize,
    /// Send buffer: the most bytes queued and not yet written.
    pub tx_capacity: usize,
    /// From [`Session::connect`] to a valid 101.
    pub handshake_timeout_ns: i64,
    /// From our close frame to the server's.
    pub close_timeout_ns: i64,
    /// The class automatic pongs are charged with. Urgent by default: a venue cuts
    /// a connection whose pongs stop, and a pong may use the headroom kept for
    /// protective closes. Close frames the session owes (echoes, protocol errors)
    /// are always Urgent.
    pub pong_class: Class,
}

impl Default for WsConfig {
    fn default() -> Self {
        WsConfig {
            max_message: 1 << 20,
            max_handshake: 8 << 10,
            tx_capacity: 64 << 10,
            handshake_timeout_ns: 10_000_000_000,
            close_timeout_ns: 5_000_000_000,
            pong_class: Class::Urgent,
        }
    }
}

/// Where the session is. Drive order and transitions are in [`Session`]'s docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Never connected.
    Idle,
    /// The upgrade request is out (or queued); waiting for the 101.
    Handshaking,
    /// Messages flow both ways.
    Open,
    /// We sent a close frame; waiting for the server's.
    Closing,
    /// Over. Flush [`Session::poll_transmit`] (a close frame may be owed), then close
    /// the socket once [`Session::is_finished`]; [`Session::connect`] may start again.
    Closed,
}

/// Why the connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Cause {
    /// The server closed; we echo its close frame.
    Peer,
    /// We closed and the server answered.
    Local,
    /// The server broke the protocol; we sent (or tried to send) a close with the
    /// error's code.
    Protocol(ProtocolError),
    /// The upgrade failed.
    Handshake(HandshakeError),
    /// The transport ended (EOF, reset, failed connect) before the close handshake.
    Transport,
    /// No 101 within the handshake timeout, no answer to our close within the
    /// close timeout, or the caller gave up on a silent peer
    /// ([`Session::handle_abandoned`]).
    Timeout,
    /// TLS failed (a certificate that does not verify, a bad record, an alert). A
    /// failure in the TLS handshake comes before any byte of the upgrade request.
    #[cfg(feature = "tls")]
    Tls(crate::tls::TlsError),
}

impl Cause {
    /// Who ended the connection, or None for [`Cause::Local`] (the caller closed
    /// it and the server answered: nothing failed). Peer, Protocol and Transport
    /// are [`Culprit::Peer`], Timeout [`Culprit::Deadline`], Handshake and Tls
    /// the wrapped error's culprit.
    pub fn culprit(&self) -> Option<Culprit> {
        match self {
            Cause::Local => None,
            Cause::Peer | Cause::Protocol(_) | Cause::Transport => Some(Culprit::Peer),
            Cause::Handshake(e) => Some(e.culprit()),
            Cause::Timeout => Some(Culprit::Deadline),
            #[cfg(feature = "tls")]
            Cause::Tls(e) => Some(e.culprit()),
        }
    }
}

/// The end of a connection, as [`WsEvent::Closed`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Closed<'a> {
    /// Why it ended.
    pub cause: Cause,
    /// The close code the server sent (for [`Cause::Peer`] and [`Cause::Local`]),
    /// or the one we sent for a protocol error; `None` if there was none.
    pub code: Option<u16>,
    /// The server's close reason (empty if none).
    pub reason: &'a str,
}

/// What became of a request sent with [`Session::send_request`] when the
/// connection ended before [`Session::resolve`] was called for it.
#[derive(Debug, PartialEq, Eq)]
pub struct WsOutcome {
    /// The caller's id of the request.
    pub id: u64,
    /// [`Verdict::NotRun`] if not one byte of it was written (its charge was
    /// refunded); [`Verdict::Unknown`] if it was (the caller reconciles it, never
    /// re-sends it).
    pub verdict: Verdict,
    /// For Unknown: the flight, to [`Budget::complete`] once reconciled (it releases
    /// in-flight limits the request charged).
    pub flight: Option<Flight>,
}

/// What [`Session::poll_event`] hands out. Borrowed payloads live until the next
/// call on the session.
#[derive(Debug, PartialEq, Eq)]
pub enum WsEvent<'a> {
    /// The handshake succeeded.
    Open,
    /// A complete text message (reassembled if it was fragmented).
    Text(&'a str),
    /// A complete binary message.
    Binary(&'a [u8]),
    /// A pong from the server (the payload of our ping, or a heartbeat).
    Pong(&'a [u8]),
    /// A request's outcome, settled by the end of its connection.
    Outcome(WsOutcome),
    /// The connection ended; the last event of a connection.
    Closed(Closed<'a>),
}

/// Counters of one session, over its life (all connections).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WsStats {
    /// Connect attempts admitted by the budget.
    pub connects: u64,
    /// Connect attempts the budget refused.
    pub connects_refused: u64,
    /// Frames charged and queued (pongs and closes included).
    pub frames_sent: u64,
    /// Frames refunded because not one byte of them was written.
    pub frames_refunded: u64,
    /// Text and binary messages received.
    pub messages_received: u64,
    /// Pings received.
    pub pings_received: u64,
    /// Pongs queued.
    pub pongs_sent: u64,
    /// Pongs that could not go when their ping came (budget or send buffer).
    pub pongs_delayed: u64,
    /// Pings answered by the pong of a later ping (RFC 6455 §5.5.3 allows answering
    /// only the latest).
    pub pongs_coalesced: u64,
    /// Pongs still owed when the connection ended.
    pub pongs_abandoned: u64,
    /// Close frames that could not go at once.
    pub closes_delayed: u64,
    /// Close frames still owed at the close timeout or transport end.
    pub closes_abandoned: u64,
}

/// A frame in the send buffer whose first byte has not been written yet.
#[derive(Debug)]
struct Queued {
    /// Offset of its first byte in the stream of bytes ever queued.
    start: u64,
    /// Offset just past its last byte.
    end: u64,
    what: What,
    ticket: Ticket,
}

/// A request whose first byte was written, awaiting [`Session::resolve`].
#[derive(Debug)]
struct Pending {
    id: u64,
    flight: Flight,
    /// Offset just past its last byte in the stream of bytes ever queued.
    end: u64,
    /// When its last byte was written (`i64::MAX`: part of it still waits in
    /// the send buffer).
    written_ns: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum What {
    Frame,
    Request(u64),
    Handshake,
}

/// A control frame owed to the peer (a pong, or the close echo).
#[derive(Clone, Copy, Debug)]
struct Owed {
    payload: [u8; MAX_CONTROL],
    len: u8,
    /// Try again at this time; `i64::MAX` while waiting for send-buffer space.
    ready_ns: i64,
    /// Give up at this time (closes only).
    deadline_ns: i64,
    delayed: bool,
}

impl Owed {
    fn new(payload: &[u8], now: i64, deadline_ns: i64) -> Self {
        let mut p = [0u8; MAX_CONTROL];
        let len = payload.len().min(MAX_CONTROL);
        p[..len].copy_from_slice(&payload[..len]);
        Owed {
            payload: p,
            len: len as u8,
            ready_ns: now,
            deadline_ns,
            delayed: false,
        }
    }

    fn payload(&self) -> &[u8] {
        &self.payload[..usize::from(self.len)]
    }
}

#[derive(Clone, Copy, Debug)]
struct CloseInfo {
    cause: Cause,
    code: Option<u16>,
    reason: [u8; MAX_REASON],
    reason_len: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Src {
    Rx,
    Msg,
}

#[derive(Clone, Copy, Debug)]
enum Deliver {
    Text(Src, usize, usize),
    Binary(Src, usize, usize),
    Pong(usize, usize),
}

enum Step {
    /// More bytes are needed.
    Need,
    /// Something changed (a control frame handled, a fragment stored, a failure):
    /// look again.
    Again,
    Deliver(Deliver),
}

/// xoshiro256** seeded through splitmix64: masking keys and handshake nonces from
/// the caller's seed, no global state.
#[derive(Clone, Debug)]
struct Rng([u64; 4]);

impl Rng {
    fn new(mut seed: u64) -> Self {
        let mut s = [0u64; 4];
        for x in &mut s {
            seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            *x = z ^ (z >> 31);
        }
        Rng(s)
    }

    fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let out = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }
}

/// A WebSocket client connection, sans IO, whose every outgoing frame is charged.
///
/// The session owns its buffers (sized once in [`Session::new`], reused by every
/// connection) but not the [`Budget`]: a budget is shared by all connections on an
/// IP, so every call that may charge or settle takes it, with the time.
///
/// Drive order, the same for the event loop and the tests:
/// 1. [`connect`](Session::connect) (charges the connect parts; refused means open
///    no socket), then open the transport.
/// 2. Bytes read go in through [`read_buf`](Session::read_buf) +
///    [`handle_read`](Session::handle_read) (or [`handle_input`](Session::handle_input)).
/// 3. **After any input, drain [`poll_event`](Session::poll_event) until `None`, then
///    [`poll_transmit`](Session::poll_transmit) until `None`**, reporting each write
///    with [`handle_written`](Session::handle_written). Pongs and close echoes are
///    queued while events are polled.
/// 4. Wake at [`poll_timeout`](Session::poll_timeout) and call
///    [`handle_timeout`](Session::handle_timeout) (delayed pongs, timeouts), then
///    step 3 again.
/// 5. When the transport ends, [`handle_transport_closed`](Session::handle_transport_closed);
///    when [`is_finished`](Session::is_finished), close the transport.
///
/// A frame's charge is refunded if the connection ends before its first byte was
/// written, and kept from then on. A request written but unanswered when the
/// connection ends is reported [`Verdict::Unknown`].
#[derive(Debug)]
pub struct Session {
    config: WsConfig,
    connect_parts: ArrayVec<Part, MAX_PARTS>,
    message_parts: ArrayVec<Part, MAX_PARTS>,
    rng: Rng,
    state: State,
    rx: Box<[u8]>,
    rx_start: usize,
    rx_end: usize,
    msg: Box<[u8]>,
    msg_len: usize,
    frag: Option<Opcode>,
    tx: Box<[u8]>,
    tx_start: usize,
    tx_end: usize,
    /// Bytes ever queued / written, over the session's life.
    tx_queued: u64,
    tx_written: u64,
    queue: ArrayVec<Queued, MAX_QUEUED>,
    requests_queued: usize,
    pending: ArrayVec<Pending, MAX_PENDING>,
    /// How many of `pending` still have bytes in the send buffer (`written_ns`
    /// is `i64::MAX`): [`Session::handle_written`] looks for them only when
    /// there are some.
    unwritten: usize,
    /// The highest request id ever queued (none yet: `None`): a higher one is
    /// neither queued nor pending ([`Session::is_taken`]).
    highest_id: Option<u64>,
    outcomes: ArrayVec<WsOutcome, { MAX_QUEUED + MAX_PENDING }>,
    key: [u8; KEY_LEN],
    /// The handshake or close deadline.
    deadline_ns: i64,
    pong: Option<Owed>,
    close_owed: Option<Owed>,
    close_sent: bool,
    opened: bool,
    closed_pending: bool,
    last_close: CloseInfo,
    stats: WsStats,
    /// The last upgrade's non-101 answer (head, then the de-chunked body), at
    /// most `max_handshake` bytes; see [`Session::rejection`].
    rejected: Box<[u8]>,
    rejected_status: Option<u16>,
    rejected_head: usize,
    rejected_len: usize,
}

impl Session {
    /// A session whose connect attempts charge `connect_parts` (the IP gate and the
    /// venue's connect bucket) and whose frames charge `message_parts` (the message
    /// bucket of this connection, usually with the IP gate at cost 0). `seed` feeds
    /// the masking keys and handshake nonces: take it from the OS (getrandom) in
    /// production, a constant in tests.
    pub fn new(
        config: WsConfig,
        budget: &Budget,
        connect_parts: &[Part],
        message_parts: &[Part],
        seed: u64,
    ) -> Result<Self, SetupError> {
        budget
            .validate_parts(connect_parts)
            .map_err(SetupError::Parts)?;
        budget
            .validate_parts(message_parts)
            .map_err(SetupError::Parts)?;
        if config.max_message < MAX_CONTROL
            || config.tx_capacity < frame_len(MAX_CONTROL, true)
            || config.max_handshake < 128
            || config.handshake_timeout_ns <= 0
            || config.close_timeout_ns <= 0
        {
            return Err(SetupError::Bounds);
        }
        let rx_len = (config.max_message + MAX_HEADER).max(config.max_handshake);
        Ok(Session {
            config,
            connect_parts: connect_parts.iter().copied().collect(),
            message_parts: message_parts.iter().copied().collect(),
            rng: Rng::new(seed),
            state: State::Idle,
            rx: vec![0; rx_len].into_boxed_slice(),
            rx_start: 0,
            rx_end: 0,
            msg: vec![0; config.max_message].into_boxed_slice(),
            msg_len: 0,
            frag: None,
            tx: vec![0; config.tx_capacity].into_boxed_slice(),
            tx_start: 0,
            tx_end: 0,
            tx_queued: 0,
            tx_written: 0,
            queue: ArrayVec::new(),
            requests_queued: 0,
            pending: ArrayVec::new(),
            unwritten: 0,
            highest_id: None,
            outcomes: ArrayVec::new(),
            key: [0; KEY_LEN],
            deadline_ns: i64::MAX,
            pong: None,
            close_owed: None,
            close_sent: false,
            opened: false,
            closed_pending: false,
            last_close: CloseInfo {
                cause: Cause::Transport,
                code: None,
                reason: [0; MAX_REASON],
                reason_len: 0,
            },
            stats: WsStats::default(),
            rejected: vec![0; config.max_handshake].into_boxed_slice(),
            rejected_status: None,
            rejected_head: 0,
            rejected_len: 0,
        })
    }

    /// The server's answer to the last upgrade when it was not 101 (the
    /// connection ended with [`Cause::Handshake`]`(`[`HandshakeError::Status`]`)`):
    /// status, headers (into `headers`, as many as fit) and body (de-chunked, at
    /// most [`WsConfig::max_handshake`] bytes with the head). Hand it to the venue
    /// adapter like any HTTP answer: a 418 halts the IP gate, a 429 holds with its
    /// wait, and the next [`Session::connect`] is then refused by the budget until
    /// it may go. None if the last upgrade was not answered that way; kept until
    /// the next connect.
    pub fn rejection<'a>(&'a self, headers: &'a mut [Header<'a>]) -> Option<Response<'a>> {
        let status = self.rejected_status?;
        let head = &self.rejected[..self.rejected_head];
        let mut parsed = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut parsed);
        let mut n = 0;
        if let Ok(httparse::Status::Complete(_)) = resp.parse(head) {
            for (slot, h) in headers.iter_mut().zip(resp.headers.iter()) {
                *slot = Header {
                    name: h.name.as_bytes(),
                    value: h.value.trim_ascii(),
                };
                n += 1;
            }
        }
        Some(Response {
            status,
            headers: &headers[..n],
            body: &self.rejected[self.rejected_head..self.rejected_len],
        })
    }

    /// If the receive buffer starts with a non-101 answer, keeps it (see
    /// [`Session::rejection`]) and ends the connection with its status. The body
    /// is taken as far as it arrived: whole when framed and complete, up to the
    /// end of the connection when unframed, cut at the bound otherwise.
    fn reject(&mut self, budget: &mut Budget, now: i64) -> bool {
        let avail = &self.rx[self.rx_start..self.rx_end];
        let Some((status, head, body)) = handshake::read_rejection(avail) else {
            return false;
        };
        let out = &mut self.rejected;
        let cap = out.len();
        let head_n = head.min(cap);
        out[..head_n].copy_from_slice(&avail[..head_n]);
        let mut w = head_n;
        let rest = &avail[head..];
        let mut put = |bytes: &[u8]| {
            let n = bytes.len().min(cap - w);
            out[w..w + n].copy_from_slice(&bytes[..n]);
            w += n;
        };
        match body {
            Body::Length(len) => put(&rest[..len.min(rest.len())]),
            Body::Chunked => {
                if handshake::walk_chunks(rest, |a, b| put(&rest[a..b])).is_none() {
                    // Cut short: the raw bytes, as they came.
                    w = head_n;
                    let n = rest.len().min(cap - w);
                    out[w..w + n].copy_from_slice(&rest[..n]);
                    w += n;
                }
            }
            Body::UntilClose => put(rest),
        }
        self.rejected_status = Some(status);
        self.rejected_head = head_n;
        self.rejected_len = w;
        let cause = Cause::Handshake(HandshakeError::Status(status));
        self.finish(cause, None, b"", None, budget, now);
        true
    }

    /// Where the session is.
    pub fn state(&self) -> State {
        self.state
    }

    /// The session's counters.
    pub fn stats(&self) -> WsStats {
        self.stats
    }

    /// Requests written and awaiting [`Session::resolve`].
    pub fn pending_requests(&self) -> usize {
        self.pending.len()
    }

    /// Starts a connection: charges the connect parts with `class` and queues the
    /// upgrade request (with a fresh random key). On `Err` nothing was charged and no
    /// socket should be opened. If the transport then fails before the request is
    /// written, [`Session::handle_transport_closed`] refunds the charge.
    pub fn connect(
        &mut self,
        req: &Upgrade<'_>,
        class: Class,
        budget: &mut Budget,
        now_ns: i64,
    ) -> Result<(), ConnectError> {
        let undrained = self.closed_pending || !self.outcomes.is_empty();
        if !matches!(self.state, State::Idle | State::Closed) || undrained {
            return Err(ConnectError::Busy);
        }
        let len = handshake::request_len(req);
        if !handshake::valid(req) || len > self.tx.len() {
            return Err(ConnectError::BadRequest);
        }
        let ticket = match budget.try_charge(&self.connect_parts, class, now_ns) {
            Ok(t) => t,
            Err(limited) => {
                self.stats.connects_refused += 1;
                return Err(ConnectError::Limited(limited));
            }
        };
        self.stats.connects += 1;
        self.rejected_status = None;
        self.rejected_head = 0;
        self.rejected_len = 0;
        // Settles what the last connection still owed (its socket is gone).
        self.handle_transport_closed(budget, now_ns);
        self.rx_start = 0;
        self.rx_end = 0;
        self.msg_len = 0;
        self.frag = None;
        self.tx_start = 0;
        self.tx_end = 0;
        self.tx_written = self.tx_queued;
        self.pong = None;
        self.close_owed = None;
        self.close_sent = false;
        self.opened = false;
        let mut raw = [0u8; 16];
        raw[..8].copy_from_slice(&self.rng.next_u64().to_le_bytes());
        raw[8..].copy_from_slice(&self.rng.next_u64().to_le_bytes());
        self.key = encode_key(&raw);
        let n = handshake::write_request(req, &self.key, &mut self.tx);
        // Empty here (the last connection's frames were settled just above); a
        // full queue is refused rather than a panic on the loop thread.
        if let Err(e) = self.queue.try_push(Queued {
            start: self.tx_queued,
            end: self.tx_queued + n as u64,
            what: What::Handshake,
            ticket,
        }) {
            let own = budget.refund(e.element().ticket, now_ns);
            debug_assert!(
                own.is_ok(),
                "the session charges on the budget it is driven with"
            );
            return Err(ConnectError::Busy);
        }
        self.tx_end = n;
        self.tx_queued += n as u64;
        self.state = State::Handshaking;
        self.deadline_ns = now_ns.saturating_add(self.config.handshake_timeout_ns);
        Ok(())
    }

    /// When [`Session::handle_timeout`] wants to be called: a handshake or close
    /// deadline, or a delayed pong or close frame that the budget will admit then.
    pub fn poll_timeout(&self) -> Option<i64> {
        let mut t = match self.state {
            State::Handshaking | State::Closing => self.deadline_ns,
            _ => i64::MAX,
        };
        if let Some(p) = &self.pong {
            t = t.min(p.ready_ns);
        }
        if let Some(c) = &self.close_owed {
            t = t.min(c.ready_ns).min(c.deadline_ns);
        }
        (t != i64::MAX).then_some(t)
    }

    /// Time passed: fails a handshake or close past its deadline, sends delayed
    /// control frames the budget now admits.
    pub fn handle_timeout(&mut self, budget: &mut Budget, now_ns: i64) {
        if matches!(self.state, State::Handshaking | State::Closing) && now_ns >= self.deadline_ns {
            // A non-101 answer whose body never ended is still the venue's word.
            let rejected = self.state == State::Handshaking && self.reject(budget, now_ns);
            if !rejected {
                self.finish(Cause::Timeout, None, b"", None, budget, now_ns);
            }
        }
        self.flush_owed(budget, now_ns);
    }

    /// The transport ended (EOF, error, or a connect that failed). Settles the
    /// connection if it was not over: unwritten frames refunded, written requests
    /// Unknown, [`WsEvent::Closed`] with [`Cause::Transport`].
    pub fn handle_transport_closed(&mut self, budget: &mut Budget, now_ns: i64) {
        self.transport_ended(Cause::Transport, budget, now_ns);
    }

    /// The caller gave the connection up (a request unanswered past its deadline,
    /// a peer silent past the caller's limit: a half-open connection) and closed
    /// its transport: like [`Session::handle_transport_closed`], with
    /// [`Cause::Timeout`]. Written requests are Unknown, unwritten ones refunded.
    pub fn handle_abandoned(&mut self, budget: &mut Budget, now_ns: i64) {
        self.transport_ended(Cause::Timeout, budget, now_ns);
    }

    /// The TLS layer under the connection failed with `e` (the transport is gone
    /// with it): like [`Session::handle_transport_closed`], with [`Cause::Tls`].
    #[cfg(feature = "tls")]
    pub fn handle_tls_failed(&mut self, e: crate::tls::TlsError, budget: &mut Budget, now_ns: i64) {
        self.transport_ended(Cause::Tls(e), budget, now_ns);
    }

    fn transport_ended(&mut self, cause: Cause, budget: &mut Budget, now_ns: i64) {
        // The end of the connection ends a non-101 answer's unframed body.
        let rejected = self.state == State::Handshaking && self.reject(budget, now_ns);
        match self.state {
            State::Idle => {}
            _ if rejected => {}
            State::Closed => self.drop_unsent(budget, now_ns),
            _ => self.finish(cause, None, b"", None, budget, now_ns),
        }
        if self.close_owed.take().is_some() {
            self.stats.closes_abandoned += 1;
        }
        self.tx_start = 0;
        self.tx_end = 0;
        self.tx_written = self.tx_queued;
    }

    /// The connection is over and everything owed to the peer was written: close the
    /// transport.
    pub fn is_finished(&self) -> bool {
        self.state == State::Closed && self.close_owed.is_none() && self.tx_start == self.tx_end
    }
}
