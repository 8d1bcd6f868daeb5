//! Sans-IO HTTP/1.1: bytes in, events out, time as a parameter.
//!
//! [`Conn`] is one client connection's protocol state: it encodes one request at a
//! time into a reused buffer, hands the bytes to write out through
//! [`Conn::transmit`], and parses the answer in place from a preallocated receive
//! buffer. It never touches a socket, a clock or the allocator after
//! [`Conn::new`]; the client in [`crate::client`] (and later TLS) drives it.
//!
//! Nothing here may panic on bytes from the network: every malformed input is a
//! [`ParseError`], and the caller closes the connection.

mod conn;
mod decode;
mod encode;

pub use conn::{Conn, Outgoing, Progress};
pub use decode::MAX_HEADERS;

/// Room for one response's headers while it is read: the caller makes it empty
/// (`Headers::new()`, no initialisation and no allocation) and the response's
/// [`Header`](ergon_venues::response::Header)s borrow from it.
pub type Headers<'a> = arrayvec::ArrayVec<ergon_venues::response::Header<'a>, MAX_HEADERS>;
#[cfg(feature = "curl")]
pub(crate) use encode::encode;
pub use encode::{unsendable, with_prepared, HostLine, InvalidRequest, Request};

/// Bounds on what one connection accepts and buffers.
///
/// Every buffer is allocated once, at [`Conn::new`], from these sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest status line plus headers (and, separately, trailers), in bytes.
    pub max_head: usize,
    /// Most headers in one response (at most [`MAX_HEADERS`]).
    pub max_headers: usize,
    /// Longest single header line or chunk-size line, in bytes.
    pub max_line: usize,
    /// Largest single chunk of a chunked body, in bytes.
    pub max_chunk: u64,
    /// Size of the receive buffer: the largest response (head and body) accepted.
    pub max_response: usize,
    /// Size of the send buffer: the largest request accepted.
    pub max_request: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head: 16 * 1024,
            max_headers: MAX_HEADERS,
            max_line: 8 * 1024,
            max_chunk: 16 * 1024 * 1024,
            max_response: 4 * 1024 * 1024,
            max_request: 64 * 1024,
        }
    }
}

/// What was wrong with the bytes the server sent. The connection is closed after any
/// of these; none is the caller's fault.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParseError {
    /// The status line or a header line is not valid HTTP/1.x.
    BadHead,
    /// The version is not HTTP/1.0 or HTTP/1.1.
    BadVersion,
    /// The status code is not three digits in 100..=999.
    BadStatus,
    /// Status line and headers (or trailers) exceed [`Limits::max_head`].
    HeadTooLarge,
    /// More headers than [`Limits::max_headers`].
    TooManyHeaders,
    /// A header or chunk-size line is longer than [`Limits::max_line`].
    LineTooLong,
    /// A Content-Length that is not a decimal number, or two that differ.
    BadContentLength,
    /// Both Transfer-Encoding and Content-Length: a request-smuggling shape.
    BadFraming,
    /// A chunk-size line that is not hex digits with optional extensions.
    BadChunkSize,
    /// A chunk larger than [`Limits::max_chunk`].
    ChunkTooLarge,
    /// Chunk data not followed by CRLF.
    BadChunkEnd,
    /// A trailer line that is not a header field.
    BadTrailer,
    /// The response does not fit [`Limits::max_response`].
    ResponseTooLarge,
    /// A 101 Switching Protocols: this client never asks for an upgrade.
    Upgrade,
    /// Bytes arrived that answer no request (on an idle connection, or after a
    /// complete response).
    Unsolicited,
}

impl core::fmt::Display for ParseError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = match self {
            ParseError::BadHead => "malformed status line or header",
            ParseError::BadVersion => "unsupported HTTP version",
            ParseError::BadStatus => "malformed status code",
            ParseError::HeadTooLarge => "response head too large",
            ParseError::TooManyHeaders => "too many headers",
            ParseError::LineTooLong => "line too long",
            ParseError::BadContentLength => "malformed or conflicting Content-Length",
            ParseError::BadFraming => "both Transfer-Encoding and Content-Length",
            ParseError::BadChunkSize => "malformed chunk size",
            ParseError::ChunkTooLarge => "chunk too large",
            ParseError::BadChunkEnd => "chunk data not followed by CRLF",
            ParseError::BadTrailer => "malformed trailer",
            ParseError::ResponseTooLarge => "response too large",
            ParseError::Upgrade => "unexpected 101 Switching Protocols",
            ParseError::Unsolicited => "bytes that answer no request",
        };
        f.write_str(s)
    }
}

impl std::error::Error for ParseError {}

impl ParseError {
    /// Always [`Culprit::Peer`](crate::Culprit::Peer): the server's bytes (a
    /// response over the caller's [`Limits`] included: the limits are the
    /// contract, the server broke it).
    pub fn culprit(&self) -> crate::Culprit {
        match self {
            ParseError::BadHead
            | ParseError::BadVersion
            | ParseError::BadStatus
            | ParseError::HeadTooLarge
            | ParseError::TooManyHeaders
            | ParseError::LineTooLong
            | ParseError::BadContentLength
            | ParseError::BadFraming
            | ParseError::BadChunkSize
            | ParseError::ChunkTooLarge
            | ParseError::BadChunkEnd
            | ParseError::BadTrailer
            | ParseError::ResponseTooLarge
            | ParseError::Upgrade
            | ParseError::Unsolicited => crate::Culprit::Peer,
        }
    }
}
