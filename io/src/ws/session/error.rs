//! Why a session refused: to be built, to connect, to send.

use ergon_core::{ConfigError, Limited};

use crate::culprit::Culprit;

/// Why a [`super::Session`] could not be built.
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

/// Why a connect was not started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectError {
    /// The budget refused the connect parts: nothing was charged, no socket should
    /// be opened.
    Limited(Limited),
    /// A connection is still in progress (not [`super::State::Idle`] or [`super::State::Closed`]),
    /// or the events of the last one were not all polled. [`Culprit::Caller`]:
    /// the state is the caller's to see ([`super::Session::state`]).
    Busy,
    /// The request has a line break, a path without `/`, a bad header name, one of
    /// our own WebSocket headers, or does not fit the send buffer.
    BadRequest,
    /// No session with this id in the [`WsClient`](crate::ws::WsClient).
    UnknownSession,
    /// The [`WsClient`](crate::ws::WsClient) is not attached to a loop
    /// ([`WsClient::attach`](crate::ws::WsClient::attach)): no socket of it could be
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
    /// Not [`super::State::Open`]. [`Culprit::Caller`]: the state changes only inside
    /// calls the caller makes, and each change is an event it polls (a server
    /// that closed is [`super::WsEvent::Closed`] first).
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
