//! WebSocket (RFC 6455) client whose every outgoing frame is charged to the budget.
//!
//! Venues count WebSocket frames and connect attempts (Binance Spot: 5 messages a
//! second per connection, pings and pongs included; 300 connects per 5 minutes per
//! IP; over the limit the connection is cut and repeats get the IP banned). A client
//! that answers pings on its own can break those limits without the application
//! sending a thing. [`Session`] therefore charges every frame it writes, automatic
//! pongs included, and delays (never drops) a pong the budget cannot pay for yet.
//!
//! Layout: [`frame`] is the pure codec (bytes in, header out; frame out into a
//! caller's buffer); [`Session`] is the sans-IO client (handshake, reassembly,
//! control frames, close handshake, budget). Neither reads a clock, touches a socket
//! or allocates after [`Session::new`]: the event loop (or a test driver) moves the
//! bytes and passes the time in. [`WsClient`] is the thin I/O shell: sessions over
//! non-blocking TCP sockets, plain or TLS (`wss://`, [`WsClient::add_tls`], the
//! rustls layer of the HTTP client, verification always on), whose sockets the
//! [`event_loop`](crate::event_loop)'s own epoll watches.

mod accept;
pub mod frame;
mod handshake;
mod pipe;
mod session;
mod tcp;

pub use handshake::{HandshakeError, Upgrade};
pub use pipe::Pipe;
pub use session::{
    Cause, Closed, ConnectError, SendError, Session, SetupError, State, WsConfig, WsEvent,
    WsOutcome, WsStats, MAX_PENDING,
};
pub use tcp::{WsClient, WsId};

/// What the peer did wrong: a frame or message that breaks RFC 6455 or our bounds.
/// The connection is failed with the close code of [`ProtocolError::close_code`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProtocolError {
    /// RSV1-3 set with no extension negotiated.
    ReservedBits,
    /// A reserved opcode (3-7, 0xB-0xF).
    BadOpcode(u8),
    /// A masked frame sent to a client.
    MaskedFrame,
    /// An unmasked frame sent to a server.
    UnmaskedFrame,
    /// A control frame with more than 125 payload bytes.
    ControlTooLong,
    /// A control frame without FIN.
    ControlFragmented,
    /// A length in a longer form than needed.
    NonMinimalLength,
    /// A 64-bit length with its most significant bit set.
    BadLength,
    /// A frame longer than the bound on a message.
    FrameTooBig,
    /// A fragmented message growing past the bound on a message.
    MessageTooBig,
    /// A text message or close reason that is not UTF-8.
    InvalidUtf8,
    /// A continuation frame with no message started.
    UnexpectedContinuation,
    /// A new text or binary frame while a fragmented message is unfinished.
    UnfinishedMessage,
    /// A close frame with a one-byte payload.
    BadClosePayload,
    /// A close code a peer may not send.
    BadCloseCode(u16),
}

impl ProtocolError {
    /// Always [`Culprit::Peer`](crate::Culprit::Peer): a frame the peer sent.
    pub fn culprit(&self) -> crate::Culprit {
        match self {
            ProtocolError::ReservedBits
            | ProtocolError::BadOpcode(_)
            | ProtocolError::MaskedFrame
            | ProtocolError::UnmaskedFrame
            | ProtocolError::ControlTooLong
            | ProtocolError::ControlFragmented
            | ProtocolError::NonMinimalLength
            | ProtocolError::BadLength
            | ProtocolError::FrameTooBig
            | ProtocolError::MessageTooBig
            | ProtocolError::InvalidUtf8
            | ProtocolError::UnexpectedContinuation
            | ProtocolError::UnfinishedMessage
            | ProtocolError::BadClosePayload
            | ProtocolError::BadCloseCode(_) => crate::Culprit::Peer,
        }
    }

    /// The close code we send for it: 1007 for bad UTF-8, 1009 for size, else 1002.
    pub const fn close_code(self) -> u16 {
        match self {
            ProtocolError::InvalidUtf8 => 1007,
            ProtocolError::FrameTooBig | ProtocolError::MessageTooBig => 1009,
            _ => 1002,
        }
    }
}

impl core::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ProtocolError::ReservedBits => f.write_str("reserved bits set"),
            ProtocolError::BadOpcode(op) => write!(f, "reserved opcode {op:#x}"),
            ProtocolError::MaskedFrame => f.write_str("masked frame from the server"),
            ProtocolError::UnmaskedFrame => f.write_str("unmasked frame from the client"),
            ProtocolError::ControlTooLong => f.write_str("control frame over 125 bytes"),
            ProtocolError::ControlFragmented => f.write_str("fragmented control frame"),
            ProtocolError::NonMinimalLength => f.write_str("length not minimally encoded"),
            ProtocolError::BadLength => f.write_str("64-bit length with the high bit set"),
            ProtocolError::FrameTooBig => f.write_str("frame over the message bound"),
            ProtocolError::MessageTooBig => f.write_str("message over the message bound"),
            ProtocolError::InvalidUtf8 => f.write_str("invalid UTF-8 in text"),
            ProtocolError::UnexpectedContinuation => f.write_str("continuation without a message"),
            ProtocolError::UnfinishedMessage => f.write_str("new message inside a fragmented one"),
            ProtocolError::BadClosePayload => f.write_str("close payload of one byte"),
            ProtocolError::BadCloseCode(c) => write!(f, "close code {c} not allowed"),
        }
    }
}

impl std::error::Error for ProtocolError {}
