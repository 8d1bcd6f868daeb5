//! The sans-IO WebSocket client session: handshake, frames, control frames, the
//! close handshake, and the budget charged for every frame it writes.
//!
//! Never reads a clock, never touches a socket, never allocates after
//! [`Session::new`] (all buffers are sized there and reused across reconnects), never
//! panics on bytes from the peer.

use arrayvec::ArrayVec;
use ergon_core::{Budget, Class, ConfigError, Flight, Limited, Part, Ticket, Verdict, MAX_PARTS};
use ergon_venues::response::{Header, Response};

use super::accept::{encode_key, KEY_LEN};
use super::frame::{self, close_code_valid, frame_len, Opcode, Role, MAX_CONTROL, MAX_HEADER};
use super::handshake::{self, Body, HandshakeError, Upgrade};
use super::ProtocolError;
use crate::culprit::Culprit;

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

/// Why a [`Session`] could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SetupError {
    /// The connect or message parts do not fit the budget.
    Parts(ConfigError),
    /// A bound too small to work: `max_message` under 125, `tx_capacity` under one
    /// full control frame, `max_handshake` under 128, or a timeout not positive.
    Bounds,
}

impl SetupError {
    /// Always [`Culprit::Caller`]: the configuration the caller wrote.
    pub fn culprit(&self) -> Culprit {
        match self {
            SetupError::Parts(_) | SetupError::Bounds => Culprit::Caller,
        }
    }
}

impl core::fmt::Display for SetupError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SetupError::Parts(e) => write!(f, "websocket parts do not fit the budget: {e}"),
            SetupError::Bounds => f.write_str("websocket bound too small to work"),
        }
    }
}

impl std::error::Error for SetupError {}

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

/// Why a connect was not started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectError {
    /// The budget refused the connect parts: nothing was charged, no socket should
    /// be opened.
    Limited(Limited),
    /// A connection is still in progress (not [`State::Idle`] or [`State::Closed`]),
    /// or the events of the last one were not all polled. [`Culprit::Caller`]:
    /// the state is the caller's to see ([`Session::state`]).
    Busy,
    /// The request has a line break, a path without `/`, a bad header name, one of
    /// our own WebSocket headers, or does not fit the send buffer.
    BadRequest,
    /// No session with this id in the [`WsClient`](super::WsClient).
    UnknownSession,
    /// The [`WsClient`](super::WsClient) is not attached to a loop
    /// ([`WsClient::attach`](super::WsClient::attach)): no socket of it could be
    /// watched. Nothing was charged.
    Unattached,
    /// The session's egress lane was refused for good: a connect bound to
    /// `asked` left from `got` (the stack ignored the binding). No connect is
    /// tried again: no frame may leave from an IP whose budget is not the one
    /// charged.
    LocalAddr {
        /// The local address the lane asked to bind.
        asked: std::net::SocketAddr,
        /// The address the socket actually had.
        got: std::net::SocketAddr,
    },
}

impl ConnectError {
    /// Who is at fault: Limited is [`Culprit::Policy`], LocalAddr [`Culprit::Os`]
    /// (see [`Error::LocalAddr`](crate::client::Error::LocalAddr)), the rest
    /// [`Culprit::Caller`].
    pub fn culprit(&self) -> Culprit {
        match self {
            ConnectError::Limited(_) => Culprit::Policy,
            ConnectError::Busy
            | ConnectError::BadRequest
            | ConnectError::UnknownSession
            | ConnectError::Unattached => Culprit::Caller,
            ConnectError::LocalAddr { .. } => Culprit::Os,
        }
    }
}

impl core::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ConnectError::Limited(l) => write!(
                f,
                "websocket connect refused by the budget ({:?} {:?}, ready at {} ns)",
                l.bucket, l.why, l.ready_at_ns
            ),
            ConnectError::Busy => f.write_str("websocket session busy with a connection"),
            ConnectError::BadRequest => f.write_str("invalid websocket upgrade request"),
            ConnectError::UnknownSession => f.write_str("unknown websocket session"),
            ConnectError::Unattached => f.write_str("websocket client not attached to a loop"),
            ConnectError::LocalAddr { asked, got } => {
                write!(
                    f,
                    "websocket lane refused: bound to {asked}, left from {got}"
                )
            }
        }
    }
}

impl std::error::Error for ConnectError {}

/// Why a frame was not queued. Nothing was charged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// The budget refused: send it later (at `ready_at_ns`) or not at all.
    Limited(Limited),
    /// Not [`State::Open`]. [`Culprit::Caller`]: the state changes only inside
    /// calls the caller makes, and each change is an event it polls (a server
    /// that closed is [`WsEvent::Closed`] first).
    NotOpen,
    /// The send buffer or its frame queue is full: write out first.
    /// [`Culprit::Policy`]: a bound, waited out by writing.
    Full,
    /// Larger than the send buffer, or a control payload over 125 bytes.
    TooBig,
    /// A close code we may not send.
    BadCloseCode(u16),
    /// Too many requests awaiting an answer.
    TooManyPending,
    /// A request with this id is already pending.
    DuplicateId,
    /// The message parts and the request's parts together are more than a
    /// ticket holds (`ergon_core::MAX_PARTS`).
    TooManyParts,
}

impl SendError {
    /// Who is at fault: the budget and the bounds one waits out (Limited, Full,
    /// TooManyPending) are [`Culprit::Policy`]; the rest [`Culprit::Caller`].
    pub fn culprit(&self) -> Culprit {
        match self {
            SendError::Limited(_) | SendError::Full | SendError::TooManyPending => Culprit::Policy,
            SendError::NotOpen
            | SendError::TooBig
            | SendError::BadCloseCode(_)
            | SendError::DuplicateId
            | SendError::TooManyParts => Culprit::Caller,
        }
    }
}

impl core::fmt::Display for SendError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SendError::Limited(l) => write!(
                f,
                "websocket frame refused by the budget ({:?} {:?}, ready at {} ns)",
                l.bucket, l.why, l.ready_at_ns
            ),
            SendError::NotOpen => f.write_str("websocket not open"),
            SendError::Full => f.write_str("websocket send buffer full"),
            SendError::TooBig => f.write_str("websocket message too big"),
            SendError::BadCloseCode(c) => write!(f, "websocket close code {c} may not be sent"),
            SendError::TooManyPending => f.write_str("too many websocket requests pending"),
            SendError::DuplicateId => f.write_str("websocket request id already pending"),
            SendError::TooManyParts => f.write_str("too many parts for one ticket"),
        }
    }
}

impl std::error::Error for SendError {}

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
    what: What,
    ticket: Ticket,
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
    pending: ArrayVec<(u64, Flight), MAX_PENDING>,
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

    /// The free part of the receive buffer: read into it, then call
    /// [`Session::handle_read`]. Empty while a complete frame waits to be polled.
    pub fn read_buf(&mut self) -> &mut [u8] {
        if self.rx_start > 0 {
            self.rx.copy_within(self.rx_start..self.rx_end, 0);
            self.rx_end -= self.rx_start;
            self.rx_start = 0;
        }
        &mut self.rx[self.rx_end..]
    }

    /// `n` bytes were read into [`Session::read_buf`]. Bytes that arrive while
    /// [`State::Closed`] or [`State::Idle`] are dropped.
    pub fn handle_read(&mut self, n: usize) {
        if matches!(self.state, State::Idle | State::Closed) {
            self.rx_start = 0;
            self.rx_end = 0;
            return;
        }
        self.rx_end = (self.rx_end + n).min(self.rx.len());
    }

    /// Copies as much of `bytes` as the receive buffer takes; returns how much.
    /// Poll events, then hand in the rest.
    pub fn handle_input(&mut self, bytes: &[u8]) -> usize {
        let buf = self.read_buf();
        let n = buf.len().min(bytes.len());
        buf[..n].copy_from_slice(&bytes[..n]);
        self.handle_read(n);
        n
    }

    /// The next event, or `None` when more input (or time) is needed. Handles pings
    /// (queueing the pong, charged), close frames and protocol errors on the way.
    pub fn poll_event(&mut self, budget: &mut Budget, now_ns: i64) -> Option<WsEvent<'_>> {
        self.flush_owed(budget, now_ns);
        loop {
            if !self.outcomes.is_empty() {
                return Some(WsEvent::Outcome(self.outcomes.remove(0)));
            }
            if self.closed_pending {
                self.closed_pending = false;
                let info = &self.last_close;
                let reason =
                    std::str::from_utf8(&info.reason[..usize::from(info.reason_len)]).unwrap_or("");
                return Some(WsEvent::Closed(Closed {
                    cause: info.cause,
                    code: info.code,
                    reason,
                }));
            }
            if self.opened {
                self.opened = false;
                return Some(WsEvent::Open);
            }
            let step = match self.state {
                State::Handshaking => self.step_handshake(budget, now_ns),
                State::Open | State::Closing => self.step_frame(budget, now_ns),
                State::Idle | State::Closed => Step::Need,
            };
            match step {
                Step::Need => return None,
                Step::Again => continue,
                Step::Deliver(d) => {
                    if let Deliver::Text(src, a, b) = d {
                        if std::str::from_utf8(self.slice(src, a, b)).is_err() {
                            self.fail(ProtocolError::InvalidUtf8, budget, now_ns);
                            continue;
                        }
                    }
                    self.stats.messages_received += u64::from(!matches!(d, Deliver::Pong(..)));
                    return Some(self.deliver(d));
                }
            }
        }
    }

    fn slice(&self, src: Src, a: usize, b: usize) -> &[u8] {
        match src {
            Src::Rx => &self.rx[a..b],
            Src::Msg => &self.msg[a..b],
        }
    }

    fn deliver(&self, d: Deliver) -> WsEvent<'_> {
        match d {
            // Checked by the caller just before; "" is unreachable.
            Deliver::Text(src, a, b) => {
                WsEvent::Text(std::str::from_utf8(self.slice(src, a, b)).unwrap_or(""))
            }
            Deliver::Binary(src, a, b) => WsEvent::Binary(self.slice(src, a, b)),
            Deliver::Pong(a, b) => WsEvent::Pong(&self.rx[a..b]),
        }
    }

    fn step_handshake(&mut self, budget: &mut Budget, now: i64) -> Step {
        let avail = &self.rx[self.rx_start..self.rx_end];
        match handshake::read_response(avail, &self.key) {
            Ok(Some(n)) => {
                self.rx_start += n;
                self.state = State::Open;
                self.deadline_ns = i64::MAX;
                self.opened = true;
                Step::Again
            }
            Ok(None) if avail.len() >= self.config.max_handshake => {
                self.finish(
                    Cause::Handshake(HandshakeError::TooLarge),
                    None,
                    b"",
                    None,
                    budget,
                    now,
                );
                Step::Again
            }
            Ok(None) => Step::Need,
            Err(HandshakeError::Status(_)) => {
                // Not 101: the venue's word (a ban, a throttle with its wait) is in
                // the status, the headers and the body. Wait for the whole body.
                let complete = match handshake::read_rejection(avail) {
                    Some((_, head, Body::Length(n))) => avail.len() >= head.saturating_add(n),
                    Some((_, head, Body::Chunked)) => {
                        handshake::walk_chunks(&avail[head..], |_, _| {}).is_some()
                    }
                    _ => false,
                };
                if complete || avail.len() >= self.config.max_handshake {
                    self.reject(budget, now);
                    return Step::Again;
                }
                Step::Need
            }
            Err(e) => {
                self.finish(Cause::Handshake(e), None, b"", None, budget, now);
                Step::Again
            }
        }
    }

    fn step_frame(&mut self, budget: &mut Budget, now: i64) -> Step {
        let avail = &self.rx[self.rx_start..self.rx_end];
        let max = self.config.max_message as u64;
        let (h, hl) = match frame::parse_header(avail, Role::Client, max) {
            Ok(Some(x)) => x,
            Ok(None) => return Step::Need,
            Err(e) => {
                self.fail(e, budget, now);
                return Step::Again;
            }
        };
        // h.len <= max_message, a usize.
        let total = hl + h.len as usize;
        if avail.len() < total {
            return Step::Need;
        }
        let (a, b) = (self.rx_start + hl, self.rx_start + total);
        self.rx_start += total;
        match h.opcode {
            Opcode::Text | Opcode::Binary => {
                if self.frag.is_some() {
                    self.fail(ProtocolError::UnfinishedMessage, budget, now);
                    return Step::Again;
                }
                if h.fin {
                    return Step::Deliver(if h.opcode == Opcode::Text {
                        Deliver::Text(Src::Rx, a, b)
                    } else {
                        Deliver::Binary(Src::Rx, a, b)
                    });
                }
                self.msg[..b - a].copy_from_slice(&self.rx[a..b]);
                self.msg_len = b - a;
                self.frag = Some(h.opcode);
                Step::Again
            }
            Opcode::Continuation => {
                let Some(first) = self.frag else {
                    self.fail(ProtocolError::UnexpectedContinuation, budget, now);
                    return Step::Again;
                };
                let len = b - a;
                if self.msg_len + len > self.config.max_message {
                    self.fail(ProtocolError::MessageTooBig, budget, now);
                    return Step::Again;
                }
                self.msg[self.msg_len..self.msg_len + len].copy_from_slice(&self.rx[a..b]);
                self.msg_len += len;
                if !h.fin {
                    return Step::Again;
                }
                self.frag = None;
                let n = self.msg_len;
                self.msg_len = 0;
                Step::Deliver(if first == Opcode::Text {
                    Deliver::Text(Src::Msg, 0, n)
                } else {
                    Deliver::Binary(Src::Msg, 0, n)
                })
            }
            Opcode::Ping => {
                self.on_ping(a, b, budget, now);
                Step::Again
            }
            Opcode::Pong => Step::Deliver(Deliver::Pong(a, b)),
            Opcode::Close => {
                self.on_close(a, b, budget, now);
                Step::Again
            }
        }
    }

    fn on_ping(&mut self, a: usize, b: usize, budget: &mut Budget, now: i64) {
        self.stats.pings_received += 1;
        if self.close_sent {
            // After our close no frame may follow it.
            self.stats.pongs_abandoned += 1;
            return;
        }
        let delayed = match self.pong {
            Some(old) => {
                self.stats.pongs_coalesced += 1;
                old.delayed
            }
            None => false,
        };
        let mut owed = Owed::new(&self.rx[a..b], now, i64::MAX);
        owed.delayed = delayed;
        self.pong = Some(owed);
        self.flush_pong(budget, now);
    }

    fn on_close(&mut self, a: usize, b: usize, budget: &mut Budget, now: i64) {
        let (code, reason_at) = match b - a {
            0 => (None, a),
            1 => return self.fail(ProtocolError::BadClosePayload, budget, now),
            _ => {
                let code = u16::from_be_bytes([self.rx[a], self.rx[a + 1]]);
                if !close_code_valid(code) {
                    return self.fail(ProtocolError::BadCloseCode(code), budget, now);
                }
                (Some(code), a + 2)
            }
        };
        let mut reason = [0u8; MAX_REASON];
        let reason_len = b - reason_at;
        reason[..reason_len].copy_from_slice(&self.rx[reason_at..b]);
        if std::str::from_utf8(&reason[..reason_len]).is_err() {
            return self.fail(ProtocolError::InvalidUtf8, budget, now);
        }
        let reason = &reason[..reason_len];
        let cause = if self.close_sent {
            Cause::Local
        } else {
            Cause::Peer
        };
        if self.close_sent && !self.queue.is_empty() {
            // Both sides closed at once and ours (the last frame queued after
            // close()) has not left: it is refunded with the rest, and the echo
            // below takes its place.
            self.close_sent = false;
        }
        if self.close_sent {
            self.finish(cause, code, reason, None, budget, now);
        } else {
            let echo = code.map(u16::to_be_bytes);
            let echo: &[u8] = echo.as_ref().map_or(&[], |c| c.as_slice());
            let mut owed = [0u8; 2];
            owed[..echo.len()].copy_from_slice(echo);
            self.finish(cause, code, reason, Some(&owed[..echo.len()]), budget, now);
        }
    }

    /// Fails the connection for a peer's protocol error: close frame with its code.
    fn fail(&mut self, e: ProtocolError, budget: &mut Budget, now: i64) {
        let code = e.close_code();
        self.finish(
            Cause::Protocol(e),
            Some(code),
            b"",
            Some(&code.to_be_bytes()),
            budget,
            now,
        );
    }

    /// Ends the connection: refunds what never left, reports pending requests,
    /// queues the close frame owed (if any and none was sent) and the Closed event.
    fn finish(
        &mut self,
        cause: Cause,
        code: Option<u16>,
        reason: &[u8],
        echo: Option<&[u8]>,
        budget: &mut Budget,
        now: i64,
    ) {
        self.drop_unsent(budget, now);
        for (id, flight) in self.pending.drain(..) {
            self.outcomes.push(WsOutcome {
                id,
                verdict: Verdict::Unknown,
                flight: Some(flight),
            });
        }
        if self.pong.take().is_some() {
            self.stats.pongs_abandoned += 1;
        }
        self.frag = None;
        self.msg_len = 0;
        self.rx_start = 0;
        self.rx_end = 0;
        let mut info = CloseInfo {
            cause,
            code,
            reason: [0; MAX_REASON],
            reason_len: 0,
        };
        let n = reason.len().min(MAX_REASON);
        info.reason[..n].copy_from_slice(&reason[..n]);
        info.reason_len = n as u8;
        self.last_close = info;
        self.closed_pending = true;
        self.state = State::Closed;
        self.deadline_ns = i64::MAX;
        if let (Some(payload), false) = (echo, self.close_sent) {
            let deadline = now.saturating_add(self.config.close_timeout_ns);
            self.close_owed = Some(Owed::new(payload, now, deadline));
            self.flush_close(budget, now);
        }
    }

    /// Drops every queued frame not one byte of which was written: refunds its
    /// charge, and reports a request among them as NotRun.
    fn drop_unsent(&mut self, budget: &mut Budget, now: i64) {
        if let Some(first) = self.queue.first() {
            let keep = (first.start - self.tx_written) as usize;
            self.tx_end = self.tx_start + keep;
            self.tx_queued = self.tx_written + keep as u64;
        }
        for q in self.queue.drain(..) {
            let own = budget.refund(q.ticket, now);
            debug_assert!(own.is_ok(), "a session is driven with one budget");
            self.stats.frames_refunded += 1;
            if let What::Request(id) = q.what {
                self.outcomes.push(WsOutcome {
                    id,
                    verdict: Verdict::NotRun,
                    flight: None,
                });
            }
        }
        self.requests_queued = 0;
    }

    /// Bytes waiting to be written, if any.
    pub fn poll_transmit(&self) -> Option<&[u8]> {
        (self.tx_start < self.tx_end).then(|| &self.tx[self.tx_start..self.tx_end])
    }

    /// `n` bytes of [`Session::poll_transmit`] were written. A frame whose first
    /// byte left is now counted by the venue: its charge is kept, and a request
    /// becomes pending until [`Session::resolve`].
    pub fn handle_written(&mut self, n: usize, budget: &mut Budget, now_ns: i64) {
        let n = n.min(self.tx_end - self.tx_start);
        self.tx_start += n;
        self.tx_written += n as u64;
        if self.tx_start == self.tx_end {
            self.tx_start = 0;
            self.tx_end = 0;
        }
        while self
            .queue
            .first()
            .is_some_and(|q| q.start < self.tx_written)
        {
            let q = self.queue.remove(0);
            let flight = q.ticket.sent();
            match q.what {
                What::Frame | What::Handshake => {
                    let own = budget.complete(flight, now_ns);
                    debug_assert!(own.is_ok(), "a session is driven with one budget");
                }
                What::Request(id) => {
                    self.requests_queued -= 1;
                    self.pending.push((id, flight));
                }
            }
        }
        // Owed frames waiting for space may fit now.
        for owed in [&mut self.pong, &mut self.close_owed].into_iter().flatten() {
            if owed.ready_ns == i64::MAX {
                owed.ready_ns = now_ns;
            }
        }
        self.flush_owed(budget, now_ns);
    }

    /// The answer to request `id` arrived: releases its in-flight limits. `false` if
    /// no written request has this id (it may not have left yet).
    pub fn resolve(&mut self, id: u64, budget: &mut Budget, now_ns: i64) -> bool {
        match self.pending.iter().position(|(i, _)| *i == id) {
            Some(at) => {
                let (_, flight) = self.pending.swap_remove(at);
                let own = budget.complete(flight, now_ns);
                debug_assert!(own.is_ok(), "a session is driven with one budget");
                true
            }
            None => false,
        }
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

    /// Queues a text message, charging the message parts.
    pub fn send_text(
        &mut self,
        text: &str,
        class: Class,
        budget: &mut Budget,
        now_ns: i64,
    ) -> Result<(), SendError> {
        self.send(
            Opcode::Text,
            text.as_bytes(),
            What::Frame,
            &[],
            class,
            budget,
            now_ns,
        )
    }

    /// Queues a binary message, charging the message parts.
    pub fn send_binary(
        &mut self,
        data: &[u8],
        class: Class,
        budget: &mut Budget,
        now_ns: i64,
    ) -> Result<(), SendError> {
        self.send(
            Opcode::Binary,
            data,
            What::Frame,
            &[],
            class,
            budget,
            now_ns,
        )
    }

    /// Queues a ping (at most 125 bytes), charging the message parts.
    pub fn send_ping(
        &mut self,
        payload: &[u8],
        class: Class,
        budget: &mut Budget,
        now_ns: i64,
    ) -> Result<(), SendError> {
        self.send(
            Opcode::Ping,
            payload,
            What::Frame,
            &[],
            class,
            budget,
            now_ns,
        )
    }

    /// Queues a request (a venue's WebSocket API call) as a text message, charging the
    /// message parts and `parts` together, all or none. Call [`Session::resolve`]
    /// when its answer arrives; if the connection ends first, [`WsEvent::Outcome`] says
    /// NotRun (never written, refunded) or Unknown (written: reconcile).
    pub fn send_request(
        &mut self,
        id: u64,
        text: &str,
        parts: &[Part],
        class: Class,
        budget: &mut Budget,
        now_ns: i64,
    ) -> Result<(), SendError> {
        if self.pending.len() + self.requests_queued >= MAX_PENDING {
            return Err(SendError::TooManyPending);
        }
        let queued = self.queue.iter().any(|q| q.what == What::Request(id));
        if queued || self.pending.iter().any(|(i, _)| *i == id) {
            return Err(SendError::DuplicateId);
        }
        self.send(
            Opcode::Text,
            text.as_bytes(),
            What::Request(id),
            parts,
            class,
            budget,
            now_ns,
        )?;
        self.requests_queued += 1;
        Ok(())
    }

    /// Queues a request under a charge the caller already made: `ticket` covers
    /// the frame (the request's parts, with [`Session::message_parts`] if the venue
    /// counts frames). Otherwise as [`Session::send_request`]: [`Session::resolve`]
    /// on its answer; if the connection ends first, [`WsEvent::Outcome`] says NotRun
    /// (never written: the session refunds `ticket`) or Unknown (written:
    /// reconcile). On `Err` nothing was queued and `ticket` comes back, unsent.
    pub fn send_request_charged(
        &mut self,
        id: u64,
        text: &str,
        ticket: Ticket,
    ) -> Result<(), (SendError, Ticket)> {
        if self.state != State::Open {
            return Err((SendError::NotOpen, ticket));
        }
        if self.pending.len() + self.requests_queued >= MAX_PENDING {
            return Err((SendError::TooManyPending, ticket));
        }
        let queued = self.queue.iter().any(|q| q.what == What::Request(id));
        if queued || self.pending.iter().any(|(i, _)| *i == id) {
            return Err((SendError::DuplicateId, ticket));
        }
        let need = frame_len(text.len(), true);
        if need > self.tx.len() {
            return Err((SendError::TooBig, ticket));
        }
        if self.queue.is_full() || !self.make_room(need) {
            return Err((SendError::Full, ticket));
        }
        self.push_frame(Opcode::Text, text.as_bytes(), What::Request(id), ticket);
        self.requests_queued += 1;
        Ok(())
    }

    /// What each frame charges (the message bucket and the IP gate, as built).
    pub fn message_parts(&self) -> &[Part] {
        &self.message_parts
    }

    /// Starts the close handshake: queues a close frame with `code` and `reason`
    /// (at most 123 bytes), charged like any frame. The server's answer ends the
    /// connection ([`Cause::Local`]); none within the close timeout, [`Cause::Timeout`].
    pub fn close(
        &mut self,
        code: u16,
        reason: &str,
        class: Class,
        budget: &mut Budget,
        now_ns: i64,
    ) -> Result<(), SendError> {
        if !close_code_valid(code) {
            return Err(SendError::BadCloseCode(code));
        }
        if reason.len() > MAX_REASON {
            return Err(SendError::TooBig);
        }
        let mut payload = [0u8; MAX_CONTROL];
        payload[..2].copy_from_slice(&code.to_be_bytes());
        payload[2..2 + reason.len()].copy_from_slice(reason.as_bytes());
        let len = 2 + reason.len();
        self.send(
            Opcode::Close,
            &payload[..len],
            What::Frame,
            &[],
            class,
            budget,
            now_ns,
        )?;
        if self.pong.take().is_some() {
            // No frame may follow our close.
            self.stats.pongs_abandoned += 1;
        }
        self.close_sent = true;
        self.state = State::Closing;
        self.deadline_ns = now_ns.saturating_add(self.config.close_timeout_ns);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        opcode: Opcode,
        payload: &[u8],
        what: What,
        extra: &[Part],
        class: Class,
        budget: &mut Budget,
        now: i64,
    ) -> Result<(), SendError> {
        if self.state != State::Open {
            return Err(SendError::NotOpen);
        }
        self.queue_frame(opcode, payload, what, extra, class, budget, now)
    }

    /// Charges and queues one masked frame, in any state.
    #[allow(clippy::too_many_arguments)]
    fn queue_frame(
        &mut self,
        opcode: Opcode,
        payload: &[u8],
        what: What,
        extra: &[Part],
        class: Class,
        budget: &mut Budget,
        now: i64,
    ) -> Result<(), SendError> {
        let need = frame_len(payload.len(), true);
        if (opcode.is_control() && payload.len() > MAX_CONTROL) || need > self.tx.len() {
            return Err(SendError::TooBig);
        }
        if self.queue.is_full() || !self.make_room(need) {
            return Err(SendError::Full);
        }
        // A ticket holds MAX_PARTS parts: more is the caller's mistake, refused
        // before anything is charged (never a panic on the loop thread).
        let mut parts = ArrayVec::<Part, MAX_PARTS>::new();
        if parts
            .try_extend_from_slice(&self.message_parts)
            .and_then(|()| parts.try_extend_from_slice(extra))
            .is_err()
        {
            return Err(SendError::TooManyParts);
        }
        let ticket = budget
            .try_charge(&parts, class, now)
            .map_err(SendError::Limited)?;
        self.push_frame(opcode, payload, what, ticket);
        Ok(())
    }

    /// Writes one masked frame under `ticket` (room checked by the caller).
    fn push_frame(&mut self, opcode: Opcode, payload: &[u8], what: What, ticket: Ticket) {
        let need = frame_len(payload.len(), true);
        let mask = (self.rng.next_u64() as u32).to_ne_bytes();
        let n = frame::encode(
            &mut self.tx[self.tx_end..],
            true,
            opcode,
            payload,
            Some(mask),
        )
        .unwrap_or(0);
        debug_assert_eq!(n, need, "make_room guaranteed the space");
        self.queue.push(Queued {
            start: self.tx_queued,
            what,
            ticket,
        });
        self.tx_end += n;
        self.tx_queued += n as u64;
        self.stats.frames_sent += 1;
    }

    /// Makes `need` contiguous bytes free at the end of the send buffer.
    fn make_room(&mut self, need: usize) -> bool {
        if self.tx.len() - self.tx_end >= need {
            return true;
        }
        if self.tx.len() - (self.tx_end - self.tx_start) < need {
            return false;
        }
        self.tx.copy_within(self.tx_start..self.tx_end, 0);
        self.tx_end -= self.tx_start;
        self.tx_start = 0;
        true
    }

    fn flush_owed(&mut self, budget: &mut Budget, now: i64) {
        self.flush_pong(budget, now);
        self.flush_close(budget, now);
    }

    /// Sends the owed pong if its time has come and the budget admits it; else
    /// keeps it, with the time to try again.
    fn flush_pong(&mut self, budget: &mut Budget, now: i64) {
        let Some(owed) = self.pong else { return };
        if now < owed.ready_ns || self.state != State::Open {
            return;
        }
        let class = self.config.pong_class;
        match self.queue_frame(
            Opcode::Pong,
            owed.payload(),
            What::Frame,
            &[],
            class,
            budget,
            now,
        ) {
            Ok(()) => {
                self.pong = None;
                self.stats.pongs_sent += 1;
            }
            Err(e) => {
                if let Some(p) = self.pong.as_mut() {
                    p.ready_ns = retry_at(e, now);
                    if !p.delayed {
                        p.delayed = true;
                        self.stats.pongs_delayed += 1;
                    }
                }
            }
        }
    }

    /// Sends the owed close frame (an echo, or ours after a protocol error) if the
    /// budget admits it, gives it up at its deadline.
    fn flush_close(&mut self, budget: &mut Budget, now: i64) {
        let Some(owed) = self.close_owed else { return };
        if now >= owed.deadline_ns {
            self.close_owed = None;
            self.stats.closes_abandoned += 1;
            return;
        }
        if now < owed.ready_ns {
            return;
        }
        match self.queue_frame(
            Opcode::Close,
            owed.payload(),
            What::Frame,
            &[],
            Class::Urgent,
            budget,
            now,
        ) {
            Ok(()) => {
                self.close_owed = None;
                self.close_sent = true;
            }
            Err(e) => {
                if let Some(c) = self.close_owed.as_mut() {
                    c.ready_ns = retry_at(e, now);
                    if !c.delayed {
                        c.delayed = true;
                        self.stats.closes_delayed += 1;
                    }
                }
            }
        }
    }
}

/// When to try an owed control frame again after `e`: when the budget says, in a
/// second after a halt (a person may clear it), once there is room after a full
/// buffer (`i64::MAX`: [`Session::handle_written`] wakes it).
fn retry_at(e: SendError, now: i64) -> i64 {
    match e {
        SendError::Limited(l) if l.ready_at_ns != i64::MAX => {
            l.ready_at_ns.max(now.saturating_add(1))
        }
        SendError::Limited(_) => now.saturating_add(HALT_RETRY_NS),
        _ => i64::MAX,
    }
}
