//! Order entry over the venue's WebSocket, inside the gateway: one connection on
//! the same event loop, budget and egress lane as the gateway's HTTP pool, whose
//! requests live in the same ledger. Three venues have one
//! ([`crate::lane_api`]): Binance Spot's WebSocket API (`/ws-api/v3`, with the
//! order stream), Binance USD-M futures' (`/ws-fapi/v1`, order entry only) and
//! Deribit's JSON-RPC over WebSocket (`/ws/api/v2`, where cancel-on-disconnect
//! covers the orders sent over it).
//!
//! A request the venue's REST adapter prepared goes over this connection as its
//! WebSocket twin ([`LaneApi::prepare_rest`]: the same parameters and deadline,
//! the same parts) when the connection is ready ([`WsLane::ready`]), else over
//! HTTP; the ledger binds it to `WS_BIT | id`, so one settle rule covers both:
//! never written → refunded (the WebSocket session hands it back or refunds it at
//! the drop); written → completed; the answer read by the adapter by the REST rules
//! (holds, halts, `rateLimits` raising the buckets); a drop after the frame left →
//! Unknown → reconciled by client order id (here or over HTTP), never re-sent.
//! A new order is written from a template its venue session prepared once for its
//! kind ([`LaneApi::prepare_text`]: Binance fills in only the request id, price,
//! quantity, client order id and the REST timestamp, unsigned once logged on),
//! as text the connection takes without a UTF-8 check; other requests by the
//! builder ([`LaneApi::prepare_rest`]).
//!
//! On every open the connection is set up ([`LaneApi::setup`]): Binance
//! subscribes it to the user data stream (`userDataStream.subscribe.signature`,
//! weight 2; each `executionReport` reaches the strategy as
//! [`Strategy::on_order_update`](super::Strategy::on_order_update)), and orders
//! go at once; Deribit authenticates it (`public/auth`), enables
//! cancel-on-disconnect for it and sets its heartbeat, and orders go only then
//! (each heartbeat `test_request` is answered). A drop re-connects (charged)
//! after a backoff and sets it up again; the orders whose answers were lost are
//! reconciled.
//!
//! Binance's charges (Binance Spot WebSocket API "Rate limits",
//! <https://developers.binance.com/docs/binance-spot-api-docs/websocket-api/rate-limits>,
//! and `web-socket-api.md` of <https://github.com/binance/binance-spot-api-docs>):
//! a connect weighs 2 on every REQUEST_WEIGHT limit ("Connecting to WebSocket API
//! costs 2 weight") and counts on a local bucket of 300 connects per 5 minutes per
//! IP ("There is a limit of 300 connections per attempt every 5 minutes. The
//! connection is per IP address."), always with the IP gate, so a halt stops every
//! connect; each request frame charges its REST twin's parts (the docs give the
//! WebSocket API no per-connection message limit of its own, unlike the 5 a second
//! of the market streams); pongs charge the IP gate. Deribit's: a connect counts
//! a connection and a session of the key (the local 300 per 5 minutes too), and
//! each request its REST twin's credits.
//!
//! Every request written keeps its deadline here, as over HTTP: an answer missing
//! at a deadline, or a connection silent for [`WsApiStart::silent_ns`] (the lane
//! pings after a third of it without a frame), means a dead or half-open connection: it
//! is given up at once ([`WsClient::abort`]), so every written request ends
//! Unknown and is reconciled, every unwritten one is refunded and sent again, and
//! the lane connects again. A request table that is full while the connection is
//! open hands the request back to be retried here, never to HTTP behind the
//! lane's back; a drop noticed while writing is driven in the next turn.
//!
//! Nothing here reads a clock; the steady state (submit → frame → answer → event)
//! allocates nothing: the frame buffer and the report are sized at construction.

use std::net::SocketAddr;

use arrayvec::ArrayVec;

use ergon_core::{Budget, Class, Flight, Part, Ticket, Verdict};
use ergon_venues::endpoint::{Prepared, Text};
use ergon_venues::response::Header;

use crate::lane_api::{Framed, LaneApi, Unprepared};

use super::url::{resolve, UrlError};
use ergon_io::event_loop::{Readiness, Registry};
use ergon_io::ws::{self, Cause, ConnectError, HandshakeError, WsClient, WsId};
use ergon_io::Culprit;

/// The descriptor and timer token of the gateway's WebSocket API connection on the
/// loop (the loop keeps the top bit of descriptor tokens); a strategy's tokens
/// must differ.
pub const WS_API: u64 = (1 << 62) - 2;

/// The request ids the ledger gives WebSocket API requests: `WS_BIT | id` (the
/// HTTP client's ids never reach it).
pub(crate) const WS_BIT: u64 = 1 << 63;

/// Connects per IP per 5 minutes, as documented (the local bucket's limit).
pub const CONNECTS_PER_5MIN: u64 = 300;

const SEC: i64 = 1_000_000_000;
/// By default, a connection with no frame from the venue for this long is dead:
/// given up, its requests reconciled. The lane pings after a third of it without
/// a frame, so two pings go unanswered first. Binance pings every 20 s and cuts
/// a connection whose pong is a minute late ("WebSocket API general info",
/// <https://developers.binance.com/docs/binance-spot-api-docs/websocket-api/general-api-information>):
/// a trading lane wants to know much sooner that its peer is gone.
pub const SILENT_NS: i64 = 15 * SEC;
/// The first re-connect waits this long; each failure in a row doubles it.
const FIRST_BACKOFF_NS: i64 = 50_000_000;
const MAX_BACKOFF_NS: i64 = 5 * SEC;

/// Where the connection stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WsState {
    /// The upgrade is out.
    Connecting,
    /// Requests go over it.
    Open,
    /// Dropped; it connects again (charged) at its retry time. Requests go over
    /// HTTP meanwhile.
    Down,
    /// The venue does not serve the WebSocket API here (the first upgrade was
    /// answered with a non-101 that is not a throttle or ban): every request goes
    /// over HTTP for good.
    Unavailable,
}

/// What the connection did, counted since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WsApiStats {
    /// Connects admitted by the budget (each charged).
    pub connects: u64,
    /// Connects the budget refused (nothing charged, nothing sent).
    pub connects_refused: u64,
    /// Connections opened.
    pub opens: u64,
    /// Connections that ended.
    pub drops: u64,
    /// Requests written as frames (first sends, re-sends and queries).
    pub requests: u64,
    /// Of them, new orders written from their kind's prepared template (the rest
    /// by the builder).
    pub templated: u64,
    /// Requests handed to HTTP while the lane said open: the connection had just
    /// dropped, or the request could not go as a frame.
    pub to_http: u64,
    /// Answers read.
    pub answers: u64,
    /// Setups the venue confirmed (Binance: the logon, the user data stream
    /// subscribed).
    pub subscribed: u64,
    /// Authentications the venue revoked (Binance: `session.logon`, -2015).
    pub revoked: u64,
    /// Setup requests the budget refused, tried again when it had room.
    pub setup_retries: u64,
    /// `executionReport` events delivered.
    pub executions: u64,
    /// Frames that could not be read (nothing changed).
    pub bad_frames: u64,
    /// Requests handed back because the connection's request table or send
    /// buffer was full (retried, never moved to HTTP).
    pub busy: u64,
    /// Pings the lane sent.
    pub pings: u64,
    /// Connections given up: a request unanswered at its deadline.
    pub deadlines: u64,
    /// Connections given up: no frame for [`WsApiStart::silent_ns`].
    pub silences: u64,
}

/// Why [`WsLane::try_send`] handed a request's ticket back.
#[derive(Debug)]
pub(crate) enum Unsent {
    /// The lane does not take it (not open, or no twin): it goes over HTTP.
    Elsewhere(Ticket),
    /// The lane is open but full: refund it and retry later, on the lane.
    Busy(Ticket),
}

/// Where the gateway's WebSocket API is.
#[derive(Clone, Debug)]
pub struct WsApiStart {
    /// The venue's address.
    pub addr: SocketAddr,
    /// The Host header.
    pub host: String,
    /// The path (`/ws-api/v3`).
    pub path: String,
    /// Subscribe to the user data stream on every open.
    pub stream: bool,
    /// How long the venue may say nothing before the connection counts as dead
    /// ([`SILENT_NS`] unless changed; at least a millisecond).
    pub silent_ns: i64,
}

impl WsApiStart {
    /// `ws://HOST:PORT/PATH` (resolved here, once); `wss://` is refused until the
    /// gateway's pools take TLS.
    pub fn from_url(url: &str, stream: bool) -> Result<Self, UrlError> {
        let rest = match url.split_once("://") {
            Some(("ws", rest)) => rest,
            Some(("wss", _)) => return Err(UrlError::Tls("wss")),
            _ => return Err(UrlError::form(url, "ws://HOST:PORT/PATH")),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/ws-api/v3"),
        };
        let addr = resolve(authority)?;
        Ok(WsApiStart {
            addr,
            host: authority.to_string(),
            path: path.to_string(),
            stream,
            silent_ns: SILENT_NS,
        })
    }

    /// The WebSocket API at `url`, or by default on the gateway's own venue
    /// (`ws://HOST:PORT/ws-api/v3` of `start`'s host and address).
    pub fn of(start: &super::Start, url: Option<&str>, stream: bool) -> Result<Self, UrlError> {
        WsApiStart::of_path(start, url, "/ws-api/v3", stream)
    }

    /// The same, with the venue's own default `path` (Deribit: `/ws/api/v2`).
    pub fn of_path(
        start: &super::Start,
        url: Option<&str>,
        path: &str,
        stream: bool,
    ) -> Result<Self, UrlError> {
        match url {
            Some(u) => WsApiStart::from_url(u, stream),
            None => Ok(WsApiStart {
                addr: start.addr,
                host: start.host.clone(),
                path: path.into(),
                stream,
                silent_ns: SILENT_NS,
            }),
        }
    }
}

/// Why a [`WsLane`] could not be built. Nothing was charged or opened.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WsLaneError {
    /// The WebSocket session refused its configuration or its parts; its
    /// culprit.
    Session(ws::SetupError),
    /// The connection could not take the egress lane's address; its culprit.
    Lane(ConnectError),
    /// The venue's session has no parts for the connect or its frames.
    /// [`Culprit::Caller`].
    Parts(ergon_venues::adapt::Error),
    /// More connect parts than one request holds. [`Culprit::Caller`].
    TooManyParts,
}

impl WsLaneError {
    /// Who is at fault: the wrapped session or connection error's culprit, else
    /// [`Culprit::Caller`] (the venue's parts the caller declared).
    pub fn culprit(&self) -> Culprit {
        match self {
            WsLaneError::Session(e) => e.culprit(),
            WsLaneError::Lane(e) => e.culprit(),
            WsLaneError::Parts(_) | WsLaneError::TooManyParts => Culprit::Caller,
        }
    }
}

impl core::fmt::Display for WsLaneError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WsLaneError::Session(e) => write!(f, "WebSocket API session: {e:?}"),
            WsLaneError::Lane(e) => write!(f, "{e:?}"),
            WsLaneError::Parts(e) => write!(f, "{e}"),
            WsLaneError::TooManyParts => f.write_str("WebSocket API connect: too many parts"),
        }
    }
}

impl std::error::Error for WsLaneError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WsLaneError::Session(e) => Some(e),
            WsLaneError::Lane(e) => Some(e),
            WsLaneError::Parts(_) | WsLaneError::TooManyParts => None,
        }
    }
}

/// One thing the connection reported during a drive, in order.
#[derive(Debug)]
pub(crate) enum Item {
    /// A text frame at `bytes[start..end]`.
    Text(usize, usize),
    /// A request's fate at a drop: NotRun (refunded) or Unknown (its flight).
    Outcome(u64, Verdict, Option<Flight>),
    /// The handshake succeeded.
    Open,
    /// The connection ended.
    Closed(Cause),
}

/// What one drive of the WebSocket API connection reported: handed to the gateway
/// item by item, then given back (its buffers are reused by the next drive).
#[derive(Debug, Default)]
pub struct WsReport {
    pub(crate) bytes: Vec<u8>,
    pub(crate) items: Vec<Item>,
}

/// The gateway's WebSocket API connection. See the module doc.
#[derive(Debug)]
pub struct WsLane {
    client: WsClient,
    id: WsId,
    pub(crate) api: Box<dyn LaneApi>,
    host: String,
    path: String,
    state: WsState,
    pub(crate) watched: bool,
    ever_open: bool,
    retry_at: i64,
    backoff_ns: i64,
    stream: bool,
    /// The setup request on the wire ([`LaneApi::setup`]).
    pub(crate) sub_req: Option<u64>,
    /// The setup step it is.
    setup_step: u8,
    /// The setup of the open connection is done.
    set_up: bool,
    /// The venue confirmed a setup request of the open connection.
    confirmed: bool,
    /// A heartbeat answer on the wire ([`LaneApi::test_reply`]).
    pub(crate) test_req: Option<u64>,
    /// A setup request the budget refused is tried again at this time.
    setup_retry_at: Option<i64>,
    /// Why the stream or the connection is not available, once.
    pub(crate) why: Option<String>,
    frame: Vec<u8>,
    /// The frame of a new order written from its template: handed to the
    /// connection as it is (text by construction, no UTF-8 scan).
    text: Text,
    report: Option<WsReport>,
    pub(crate) stats: WsApiStats,
    /// What the setup or heartbeat request charged last.
    sub_parts: ergon_venues::adapt::Parts,
    connect_parts: ergon_venues::adapt::Parts,
    /// The session's refunded frames when the last connect was charged: more at
    /// its close means the handshake never left (refunded).
    refunded_at_connect: u64,
    /// Each request on the wire and its deadline.
    deadlines: ArrayVec<(u64, i64), { ws::MAX_PENDING }>,
    /// When the venue was last heard on the open connection.
    heard_at: i64,
    /// When the lane pings next if nothing is heard.
    ping_at: i64,
    /// [`WsApiStart::silent_ns`].
    silent_ns: i64,
}

/// What the lane did with a request of its own's charge (a setup request, a
/// heartbeat answer), for the record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SubCharge {
    /// Not asked (none due, or the request could not be prepared).
    None,
    /// Asked and refused by the budget, which has room at this time.
    Refused(i64),
    /// Admitted, then refunded: the frame was not written.
    Refunded,
    /// Admitted and queued, with this request id: it settles with its answer
    /// or outcome.
    Sent(u64),
}

impl WsLane {
    /// A connection to `at` for `api`, whose connects charge `connect_parts` and
    /// whose frames charge `message_parts` on `budget`; `local_addr` is the
    /// gateway's egress lane. Everything it needs is allocated here.
    pub fn new(
        api: Box<dyn LaneApi>,
        at: &WsApiStart,
        budget: &Budget,
        connect_parts: &[Part],
        message_parts: &[Part],
        local_addr: Option<SocketAddr>,
        seed: u64,
    ) -> Result<Self, WsLaneError> {
        let session = ws::Session::new(
            ws::WsConfig::default(),
            budget,
            connect_parts,
            message_parts,
            seed,
        )
        .map_err(WsLaneError::Session)?;
        let mut client = WsClient::new(1);
        let id = client.add(session, at.addr);
        client
            .set_local_addr(id, local_addr)
            .map_err(WsLaneError::Lane)?;
        let mut connect = ergon_venues::adapt::Parts::new();
        connect
            .try_extend_from_slice(connect_parts)
            .map_err(|_| WsLaneError::TooManyParts)?;
        Ok(WsLane {
            client,
            id,
            api,
            host: at.host.clone(),
            path: at.path.clone(),
            state: WsState::Down,
            watched: false,
            ever_open: false,
            retry_at: i64::MIN,
            backoff_ns: FIRST_BACKOFF_NS,
            stream: at.stream,
            sub_req: None,
            setup_step: 0,
            set_up: false,
            confirmed: false,
            test_req: None,
            setup_retry_at: None,
            why: None,
            frame: Vec::with_capacity(2048),
            text: Text::with_capacity(2048),
            report: Some(WsReport {
                bytes: Vec::with_capacity(256 << 10),
                items: Vec::with_capacity(512),
            }),
            stats: WsApiStats::default(),
            sub_parts: ergon_venues::adapt::Parts::new(),
            connect_parts: connect,
            refunded_at_connect: 0,
            deadlines: ArrayVec::new(),
            heard_at: 0,
            ping_at: i64::MAX,
            silent_ns: at.silent_ns.max(1_000_000),
        })
    }

    /// Where the connection stands.
    pub fn state(&self) -> WsState {
        self.state
    }

    /// What it did so far.
    pub fn stats(&self) -> &WsApiStats {
        &self.stats
    }

    /// Whether the user data stream is subscribed on the open connection.
    pub fn streaming(&self) -> bool {
        self.stream && self.set_up
    }

    /// Whether the setup of the open connection is done ([`LaneApi::setup`]).
    pub fn is_set_up(&self) -> bool {
        self.state == WsState::Open && self.set_up
    }

    /// Whether orders go over the open connection (its setup done, or not
    /// needed first).
    pub fn ready(&self) -> bool {
        self.state == WsState::Open && (self.set_up || self.api.orders_before_setup())
    }

    /// Whether the venue refused the connection's setup (an order lane that
    /// authenticates first then carries nothing).
    pub fn refused(&self) -> bool {
        self.why.is_some() && !self.set_up && !self.api.orders_before_setup()
    }

    /// When the venue was last heard on the open connection, once its setup is
    /// done.
    pub fn set_up_heard(&self) -> Option<i64> {
        (self.state == WsState::Open && self.set_up).then_some(self.heard_at)
    }

    /// Why the WebSocket API (or its stream) is not available, if it is not.
    pub fn why(&self) -> Option<&str> {
        self.why.as_deref()
    }

    /// Puts the connection on an in-memory transport ([`ws::Pipe`]) instead of
    /// a socket, before its first connect: no loop watches it; a deterministic
    /// simulation moves its bytes ([`WsLane::pipe_mut`]) and drives it with
    /// [`Gateway::drive_ws`](crate::Gateway::drive_ws), the same code the
    /// loop's driver runs.
    pub fn use_pipe(&mut self) {
        // Its own id: always known.
        let _ = self.client.use_pipe(self.id);
        self.watched = true;
    }

    /// The in-memory transport, if the connection is on one.
    pub fn pipe_mut(&mut self) -> Option<&mut ws::Pipe> {
        self.client.pipe_mut(self.id)
    }

    /// Lets the loop watch the connection's socket under [`WS_API`].
    pub(crate) fn attach(&mut self, registry: Registry) {
        self.client.attach(registry, WS_API);
    }

    /// The earliest time it wants a drive: a session deadline, a re-connect, a
    /// request's deadline, a ping, the silence limit; at once if the connection
    /// ended inside a write and its events wait to be driven out.
    pub fn next_deadline(&self) -> Option<i64> {
        let mine = match self.state {
            WsState::Down => Some(self.retry_at.max(0)),
            WsState::Open if self.session_state() == Some(ws::State::Closed) => Some(0),
            WsState::Open => {
                let first = self.deadlines.iter().map(|&(_, at)| at).min();
                let quiet = self
                    .ping_at
                    .min(self.heard_at.saturating_add(self.silent_ns))
                    .min(self.setup_retry_at.unwrap_or(i64::MAX));
                Some(first.map_or(quiet, |f| f.min(quiet)))
            }
            WsState::Connecting | WsState::Unavailable => None,
        };
        match (self.client.next_deadline(), mine) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn session_state(&self) -> Option<ws::State> {
        self.client.session(self.id).map(ws::Session::state)
    }

    /// Sends `req` as its twin under `ticket` if the connection is open and `req`
    /// has a twin: its id. Else the ticket comes back, unsent, saying where the
    /// request goes instead.
    pub(crate) fn try_send(
        &mut self,
        req: &Prepared,
        ticket: Ticket,
        budget: &mut Budget,
        now: i64,
    ) -> Result<u64, Unsent> {
        if !self.ready() {
            return Err(Unsent::Elsewhere(ticket));
        }
        if self.session_state() != Some(ws::State::Open) {
            // It dropped inside an earlier write; the next turn drives that out.
            self.stats.to_http += 1;
            return Err(Unsent::Elsewhere(ticket));
        }
        if self.deadlines.is_full() {
            self.stats.busy += 1;
            return Err(Unsent::Busy(ticket));
        }
        // A new order from its template, as text; anything else by the builder.
        let prepared = match self.api.prepare_text(req, &mut self.text) {
            Ok(Some(id)) => Ok((id, true)),
            Ok(None) => self
                .api
                .prepare_rest(req, &mut self.frame)
                .map(|id| (id, false)),
            Err(e) => Err(e),
        };
        let (id, templated) = match prepared {
            Ok(x) => x,
            Err(Unprepared::Busy) => {
                self.stats.busy += 1;
                return Err(Unsent::Busy(ticket));
            }
            Err(Unprepared::Elsewhere) => return Err(Unsent::Elsewhere(ticket)),
        };
        // The lane's id is its own client's: never None, refused like a full queue.
        let sent = match (self.client.session_mut(self.id), templated) {
            // The template's frame is text by construction: no scan.
            (Some(session), true) => session.send_request_text_charged(id, &self.text, ticket),
            (Some(session), false) => {
                let text = core::str::from_utf8(&self.frame).unwrap_or("");
                session.send_request_charged(id, text, ticket)
            }
            (None, _) => Err((ws::SendError::NotOpen, ticket)),
        };
        match sent {
            Ok(()) => {
                self.api.sent(id);
                // Room checked above: the session holds no more than MAX_PENDING.
                let _ = self.deadlines.try_push((id, req.deadline_ns()));
                self.client.flush(self.id, budget, now);
                self.stats.requests += 1;
                self.stats.templated += u64::from(templated);
                Ok(id)
            }
            Err((ws::SendError::Full | ws::SendError::TooManyPending, t)) => {
                self.api.unsent(id);
                self.stats.busy += 1;
                Err(Unsent::Busy(t))
            }
            Err((_, t)) => {
                self.api.unsent(id);
                self.stats.to_http += 1;
                Err(Unsent::Elsewhere(t))
            }
        }
    }

    /// When the last byte of request `id`'s frame was written to the socket or
    /// pipe, while it awaits its answer ([`ws::Session::written_at`]): `None` if
    /// part of it still waits in the session's send buffer, or it is not pending.
    pub fn written_at(&self, id: u64) -> Option<i64> {
        self.client.session(self.id)?.written_at(id)
    }

    /// Request `id` ended (answered, or its fate reported at a drop): its deadline
    /// no longer applies.
    pub(crate) fn forget(&mut self, id: u64) {
        if let Some(i) = self.deadlines.iter().position(|&(r, _)| r == id) {
            self.deadlines.swap_remove(i);
        }
    }

    /// What a connect charges.
    pub(crate) fn connect_parts(&self) -> &[Part] {
        &self.connect_parts
    }

    /// What the last setup or heartbeat request charged.
    pub(crate) fn sub_parts(&self) -> &[Part] {
        &self.sub_parts
    }

    /// Whether the handshake of the connect charged last was refunded (never
    /// written) by the session when it closed.
    pub(crate) fn connect_refunded(&self) -> bool {
        self.frames_refunded() > self.refunded_at_connect
    }

    /// Frames the session refunded so far because none of their bytes left (its own
    /// session: always known; 0 if it were not).
    fn frames_refunded(&self) -> u64 {
        self.client
            .session(self.id)
            .map_or(0, |s| s.stats().frames_refunded)
    }

    /// Connects if it is down and its retry time has come. A connect the budget
    /// refuses (a halt, the connect limit) is tried again later at no cost.
    /// Whether the budget admitted a connect charge, if one was asked (the record).
    pub(crate) fn connect_if_due(&mut self, budget: &mut Budget, now: i64) -> Option<bool> {
        if self.state != WsState::Down || now < self.retry_at {
            return None;
        }
        self.refunded_at_connect = self.frames_refunded();
        let req = ws::Upgrade {
            host: &self.host,
            path: &self.path,
            headers: &[],
        };
        match self
            .client
            .connect(self.id, &req, Class::Urgent, budget, now)
        {
            Ok(()) => {
                self.stats.connects += 1;
                self.state = WsState::Connecting;
                Some(true)
            }
            Err(ConnectError::Limited(l)) => {
                self.stats.connects_refused += 1;
                self.retry_at = l.ready_at_ns.clamp(now + 1, now + self.backoff_ns.max(SEC));
                Some(false)
            }
            Err(e @ ConnectError::LocalAddr { .. }) => {
                self.state = WsState::Unavailable;
                self.why = Some(format!("the WebSocket API's egress lane: {e:?}"));
                None
            }
            Err(_) => {
                self.retry_at = now + self.backoff_ns;
                None
            }
        }
    }

    /// Handles the socket's readiness (`ready`, as the loop reported it under
    /// [`WS_API`]) if any, then the session's timeouts and writes, and collects
    /// what the connection reported; the report to hand to the gateway, then to
    /// give back ([`WsLane::restore`]).
    pub(crate) fn drive(
        &mut self,
        budget: &mut Budget,
        now: i64,
        ready: Option<Readiness>,
    ) -> WsReport {
        let mut report = self.report.take().unwrap_or_default();
        report.bytes.clear();
        report.items.clear();
        let heard = core::cell::Cell::new(false);
        let on = &mut |_: WsId, ev: ws::WsEvent<'_>, _: &mut Budget| match ev {
            ws::WsEvent::Text(t) => {
                heard.set(true);
                let start = report.bytes.len();
                report.bytes.extend_from_slice(t.as_bytes());
                report.items.push(Item::Text(start, report.bytes.len()));
            }
            ws::WsEvent::Outcome(o) => report.items.push(Item::Outcome(o.id, o.verdict, o.flight)),
            ws::WsEvent::Open => report.items.push(Item::Open),
            ws::WsEvent::Closed(c) => report.items.push(Item::Closed(c.cause)),
            ws::WsEvent::Binary(_) | ws::WsEvent::Pong(_) => heard.set(true),
        };
        if let Some(ready) = ready {
            self.client.handle_ready(WS_API, ready, budget, now, on);
        }
        self.client.handle_timeout(budget, now, on);
        if self.state == WsState::Open && self.session_state() == Some(ws::State::Open) {
            if heard.get() {
                self.heard_at = now;
                self.ping_at = now.saturating_add(self.silent_ns / 3);
            }
            let late = self.deadlines.iter().any(|&(_, at)| at <= now);
            let silent = now >= self.heard_at.saturating_add(self.silent_ns);
            if late || silent {
                match late {
                    true => self.stats.deadlines += 1,
                    false => self.stats.silences += 1,
                }
                self.client.abort(self.id, budget, now, on);
            } else if now >= self.ping_at {
                self.ping(budget, now);
            }
        }
        report
    }

    /// Pings the venue (charged like any frame; a refusal is tried again at the
    /// next ping time, and silence still ends the connection).
    fn ping(&mut self, budget: &mut Budget, now: i64) {
        self.ping_at = now.saturating_add(self.silent_ns / 3);
        let Some(session) = self.client.session_mut(self.id) else {
            return;
        };
        if session.send_ping(b"", Class::Urgent, budget, now).is_ok() {
            self.stats.pings += 1;
            self.client.flush(self.id, budget, now);
        }
    }

    /// Gives the report back for the next drive.
    pub(crate) fn restore(&mut self, report: WsReport) {
        self.report = Some(report);
    }

    /// The connection opened: its setup begins ([`LaneApi::setup`]: Binance
    /// subscribes to the user data stream, if asked). What became of the first
    /// setup request's charge.
    pub(crate) fn on_open(&mut self, budget: &mut Budget, now: i64) -> SubCharge {
        self.state = WsState::Open;
        self.heard_at = now;
        self.ping_at = now.saturating_add(self.silent_ns / 3);
        self.ever_open = true;
        self.backoff_ns = FIRST_BACKOFF_NS;
        self.stats.opens += 1;
        self.setup_step = 0;
        self.set_up = false;
        self.confirmed = false;
        self.setup_retry_at = None;
        self.next_setup(budget, now)
    }

    /// Sends again the setup request the budget refused, once its time came
    /// (what became of its charge).
    pub(crate) fn setup_due(&mut self, budget: &mut Budget, now: i64) -> SubCharge {
        match self.setup_retry_at {
            Some(at) if at <= now && self.state == WsState::Open => {
                self.setup_retry_at = None;
                self.next_setup(budget, now)
            }
            _ => SubCharge::None,
        }
    }

    /// Sends the setup request due, or marks the setup done if none is.
    fn next_setup(&mut self, budget: &mut Budget, now: i64) -> SubCharge {
        while self.setup_step < u8::MAX && self.api.setup_skip(self.setup_step) {
            self.setup_step += 1;
        }
        match self
            .api
            .setup(self.setup_step, self.stream, &mut self.frame, now)
        {
            Some(f) => {
                let charge = self.send_own(f, budget, now);
                match charge {
                    SubCharge::Sent(id) => self.sub_req = Some(id),
                    SubCharge::Refused(at) => {
                        // The setup waits for room, never dropped: Deribit takes
                        // no order over the lane before it.
                        self.setup_retry_at = Some(at);
                        self.stats.setup_retries += 1;
                    }
                    SubCharge::Refunded | SubCharge::None => {}
                }
                charge
            }
            None => {
                self.set_up = true;
                if self.confirmed {
                    self.stats.subscribed += 1;
                }
                SubCharge::None
            }
        }
    }

    /// Charges and sends a request of the lane's own written into the frame
    /// buffer: what became of its charge.
    fn send_own(&mut self, f: Framed, budget: &mut Budget, now: i64) -> SubCharge {
        self.sub_parts = f.parts;
        let ticket = match budget.try_charge(&self.sub_parts, Class::Urgent, now) {
            Ok(t) => t,
            Err(l) => {
                // No room now: a setup is tried again when there is
                // ([`WsLane::setup_due`]).
                self.api.unsent(f.id);
                let at = l.ready_at_ns.clamp(now + 1, now + self.backoff_ns.max(SEC));
                return SubCharge::Refused(at);
            }
        };
        let text = core::str::from_utf8(&self.frame).unwrap_or("");
        let sent = match self.client.session_mut(self.id) {
            Some(session) => session.send_request_charged(f.id, text, ticket),
            None => Err((ws::SendError::NotOpen, ticket)),
        };
        match sent {
            Ok(()) => {
                self.api.sent(f.id);
                let _ = self.deadlines.try_push((f.id, f.deadline_ns));
                self.client.flush(self.id, budget, now);
                SubCharge::Sent(f.id)
            }
            Err((_, t)) => {
                self.api.unsent(f.id);
                // Never written: its own ticket.
                let _ = budget.refund(t, now);
                SubCharge::Refunded
            }
        }
    }

    /// The answer to the setup request: the next one (what became of its
    /// charge), or why the setup stopped.
    pub(crate) fn on_setup_answer(
        &mut self,
        verdict: Verdict,
        frame: &[u8],
        budget: &mut Budget,
        now: i64,
    ) -> SubCharge {
        self.sub_req = None;
        match self.api.setup_answer(self.setup_step, verdict, frame) {
            Ok(()) => {
                self.confirmed = true;
                self.setup_step = self.setup_step.saturating_add(1);
                self.next_setup(budget, now)
            }
            Err(why) => {
                self.why.get_or_insert(why);
                SubCharge::None
            }
        }
    }

    /// The venue revoked the connection's authentication: no order goes over
    /// it ([`WsLane::ready`] is false until the next open's setup, and the venue's
    /// order entry is halted by [`LaneApi::halt_order_entry`]); [`WsLane::why`]
    /// names the reason.
    pub(crate) fn on_revoked(&mut self, code: i64, budget: &mut Budget, now: i64) {
        self.set_up = false;
        self.stats.revoked += 1;
        let what = self.api.halt_order_entry(budget, now);
        self.why = Some(if what.is_empty() {
            format!("the venue revoked the connection's authentication ({code})")
        } else {
            what
        });
    }

    /// The venue asked for a sign of life: its answer (what became of its
    /// charge).
    pub(crate) fn on_test_request(&mut self, budget: &mut Budget, now: i64) -> SubCharge {
        let Some(f) = self.api.test_reply(&mut self.frame, now) else {
            return SubCharge::None;
        };
        let charge = self.send_own(f, budget, now);
        if let SubCharge::Sent(id) = charge {
            self.test_req = Some(id);
        }
        charge
    }

    /// The connection ended: every request it held was reported (Outcome items);
    /// the venue's table is emptied; a non-101 upgrade answer goes to the adapter
    /// like any HTTP answer (a 418 halts); it connects again after a backoff, or
    /// never if the venue does not serve the WebSocket API.
    pub(crate) fn on_closed(&mut self, cause: Cause, budget: &mut Budget, now: i64) {
        self.api.on_disconnect();
        // Every request it held was reported (Outcome items before this one).
        self.deadlines.clear();
        self.ping_at = i64::MAX;
        self.sub_req = None;
        self.test_req = None;
        self.set_up = false;
        self.setup_retry_at = None;
        self.stats.drops += 1;
        if let Cause::Handshake(HandshakeError::Status(status)) = cause {
            let mut headers = [Header {
                name: b"",
                value: b"",
            }; 16];
            let session = self.client.session(self.id);
            if let Some(r) = session.and_then(|s| s.rejection(&mut headers)) {
                self.api.on_refused_upgrade(&r, budget, now);
            }
            if !self.ever_open && !matches!(status, 418 | 429) {
                self.state = WsState::Unavailable;
                self.why = Some(format!("the WebSocket API upgrade was answered {status}"));
                return;
            }
        }
        self.state = WsState::Down;
        self.retry_at = now + self.backoff_ns;
        self.backoff_ns = (self.backoff_ns * 2).min(MAX_BACKOFF_NS);
    }

    /// Completes the flight of the answer to `id` (its in-flight limits).
    pub(crate) fn resolve(&mut self, id: u64, budget: &mut Budget, now: i64) -> bool {
        self.forget(id);
        self.client
            .session_mut(self.id)
            .is_some_and(|s| s.resolve(id, budget, now))
    }
}
