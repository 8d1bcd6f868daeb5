//! The pool: what a pool of connections to one origin is, what a request's end
//! can be, and [`Pool`], the sans-IO state machine that runs every pool's
//! connections (phases, deadlines, keep-alive, reconnects, connect charges, lanes).
//!
//! A leaf: it imports no transport, no event loop and no system call, so the
//! native client's shell ([`crate::client`]), the libcurl transport (`curl`,
//! feature `curl`) and the event loop all depend on it and not on each other.
//! The ids, outcomes and errors are re-exported from [`crate::client`], where
//! callers name them.

use std::net::SocketAddr;

use ergon_core::{Class, Flight, Part, Ticket};

use crate::culprit::{of_io_kind, Culprit};
use crate::http::{InvalidRequest, Limits, ParseError};

mod machine;

#[cfg(feature = "tls")]
use crate::tls::{TlsConfig, TlsError};
pub use machine::{ConnId, Pool, PoolEvent, Transmit};

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
    /// Connect failures in a row of the slot that failed last (0 once one of
    /// its connects completes): the reconnect backoff's exponent.
    pub failing_in_row: u32,
    /// When that slot tries again, on the pool's clock (0: none is waiting).
    pub retry_at_ns: i64,
    /// Idle connections dropped because the server closed them (or sent unasked).
    pub stale: u64,
    /// Extra copies of requests a libcurl pool wrote on its own (each charged to
    /// the budget after the fact; see
    /// [`ClientHandler::on_resent`](crate::event_loop::ClientHandler::on_resent)).
    pub resent: u64,
}

/// The id of one accepted request, unique for the client's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

/// A pool of connections to one origin, as returned by
/// [`EventLoop::add_pool`](crate::event_loop::EventLoop::add_pool).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PoolId(pub(crate) u16);

impl PoolId {
    /// The pool's index, in the order pools were added.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// Whether any byte of a failed request left.
#[derive(Debug, PartialEq, Eq)]
pub enum Sent {
    /// Not one byte was written: the request surely did not run. Refund the ticket.
    No(Ticket),
    /// At least one byte was written: the server may have run it. Complete the
    /// flight and reconcile; never assume it did not run.
    Maybe(Flight),
}

impl Sent {
    /// Whether any byte may have left.
    pub fn maybe(&self) -> bool {
        matches!(self, Sent::Maybe(_))
    }
}

/// Why a request failed or a connect did not succeed.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// A socket error, as the operating system reported it (`ConnectionReset`,
    /// `BrokenPipe`, `ConnectionRefused`, `AddrNotAvailable` ...). Its
    /// [`Culprit`] depends on the kind: what the server did to the connection
    /// (reset, refused, aborted, broken pipe, early EOF) is [`Culprit::Peer`],
    /// the rest (no address, no descriptor, no route ...) [`Culprit::Os`].
    Io(std::io::ErrorKind),
    /// The server closed the connection before a complete response.
    Closed,
    /// Over TLS, the connection ended without close_notify while the body was
    /// read until the close: the body may have been cut, so it is not an answer.
    Truncated,
    /// The server sent bytes that are not a valid response.
    Parse(ParseError),
    /// The request's deadline passed before its response was complete.
    Timeout,
    /// A connect (TLS handshake included) did not complete within the pool's
    /// connect timeout.
    ConnectTimeout,
    /// The TLS handshake or session failed (a certificate that does not verify,
    /// an alert, a protocol violation).
    #[cfg(feature = "tls")]
    Tls(TlsError),
    /// The socket's local address after connect is not the one the pool asked
    /// for: the stack ignored the binding. The pool is refused for good.
    /// [`Culprit::Os`]: ergon refuses the lane by rule, but the fault is the
    /// host's network configuration, and only a person can fix it.
    LocalAddr {
        /// The address the pool asked to bind.
        asked: SocketAddr,
        /// The address the socket actually had.
        got: SocketAddr,
    },
    /// A libcurl pool refused a method libcurl may send twice on its own (see
    /// [`crate::curl`]); nothing was sent.
    #[cfg(feature = "curl")]
    CurlResend,
    /// libcurl failed (see [`CurlError`]).
    #[cfg(feature = "curl")]
    Curl(CurlError),
}

impl Error {
    /// The error of a failed system call, from its `errno`.
    pub(crate) fn os(errno: i32) -> Self {
        Error::Io(std::io::Error::from_raw_os_error(errno).kind())
    }
}

impl Error {
    /// A one-word kind for logs and the `send` example: `io`, `reset`, `refused`,
    /// `closed`, `truncated`, `parse`, `timeout`, `connect-timeout`, `tls` or `local-addr`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Io(std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe) => {
                "reset"
            }
            Error::Io(std::io::ErrorKind::ConnectionRefused) => "refused",
            Error::Io(_) => "io",
            Error::Closed => "closed",
            Error::Truncated => "truncated",
            Error::Parse(_) => "parse",
            Error::Timeout => "timeout",
            Error::ConnectTimeout => "connect-timeout",
            #[cfg(feature = "tls")]
            Error::Tls(_) => "tls",
            Error::LocalAddr { .. } => "local-addr",
            #[cfg(feature = "curl")]
            Error::CurlResend => "curl-resend",
            #[cfg(feature = "curl")]
            Error::Curl(_) => "curl",
        }
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Io(kind) => write!(f, "{kind}"),
            Error::Closed => f.write_str("connection closed before a complete response"),
            Error::Truncated => {
                f.write_str("TLS ended without close_notify inside a body read until close")
            }
            Error::Parse(p) => write!(f, "invalid response: {p}"),
            Error::Timeout => f.write_str("request deadline passed"),
            Error::ConnectTimeout => f.write_str("connect timed out"),
            #[cfg(feature = "tls")]
            Error::Tls(e) => write!(f, "TLS: {e}"),
            Error::LocalAddr { asked, got } => {
                write!(f, "bound to {asked} but the socket has {got}")
            }
            #[cfg(feature = "curl")]
            Error::CurlResend => f.write_str(
                "libcurl may send this method twice on its own: refused \
                 (curl_allow_non_idempotent_methods is off)",
            ),
            #[cfg(feature = "curl")]
            Error::Curl(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// Who is at fault (see each variant's doc where it is not plain).
    pub fn culprit(&self) -> Culprit {
        match self {
            Error::Io(kind) => of_io_kind(*kind),
            Error::Closed | Error::Truncated => Culprit::Peer,
            Error::Parse(e) => e.culprit(),
            Error::Timeout | Error::ConnectTimeout => Culprit::Deadline,
            #[cfg(feature = "tls")]
            Error::Tls(e) => e.culprit(),
            Error::LocalAddr { .. } => Culprit::Os,
            #[cfg(feature = "curl")]
            Error::CurlResend => Culprit::Policy,
            #[cfg(feature = "curl")]
            Error::Curl(e) => e.culprit(),
        }
    }
}

/// Why a [`PoolConfig`] was refused (the caller's mistake).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolError {
    /// `connections` is 0.
    NoConnections,
    /// The Host value is empty or not visible ASCII without spaces.
    BadHost,
    /// `max_request` or `max_response` under 64 bytes.
    BuffersTooSmall,
    /// More pools than a [`PoolId`] can number.
    TooManyPools,
}

impl core::fmt::Display for PoolError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            PoolError::NoConnections => "a pool needs at least one connection",
            PoolError::BadHost => "the Host value must be visible ASCII without spaces",
            PoolError::BuffersTooSmall => "buffers under 64 bytes",
            PoolError::TooManyPools => "too many pools",
        })
    }
}

impl std::error::Error for PoolError {}

impl PoolError {
    /// Always [`Culprit::Caller`]: a configuration the caller wrote.
    pub fn culprit(&self) -> Culprit {
        match self {
            PoolError::NoConnections
            | PoolError::BadHost
            | PoolError::BuffersTooSmall
            | PoolError::TooManyPools => Culprit::Caller,
        }
    }
}

/// A request the client did not accept; the ticket comes back unsent, to refund.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// No connection of the pool is ready now (all busy, connecting or down).
    /// [`Culprit::Policy`]: the pool's size is the rule; wait for `on_ready`.
    Busy(Ticket),
    /// The request cannot be encoded (the caller's mistake).
    Invalid(Ticket, InvalidRequest),
    /// No such pool.
    UnknownPool(Ticket),
    /// The deadline had already passed: a late request is not sent at all.
    Expired(Ticket),
}

impl Refused {
    /// Who is at fault: Busy is [`Culprit::Policy`], Invalid the request's
    /// [`InvalidRequest::culprit`], UnknownPool [`Culprit::Caller`], Expired
    /// [`Culprit::Deadline`].
    pub fn culprit(&self) -> Culprit {
        match self {
            Refused::Busy(_) => Culprit::Policy,
            Refused::Invalid(_, e) => e.culprit(),
            Refused::UnknownPool(_) => Culprit::Caller,
            Refused::Expired(_) => Culprit::Deadline,
        }
    }

    /// The unsent ticket, to refund.
    pub fn into_ticket(self) -> Ticket {
        match self {
            Refused::Busy(t)
            | Refused::Invalid(t, _)
            | Refused::UnknownPool(t)
            | Refused::Expired(t) => t,
        }
    }
}

/// One origin's pool: where to connect and how.
#[derive(Clone, Debug)]
pub struct PoolConfig {
    /// The server address (resolve names before; nothing here blocks on DNS).
    pub addr: SocketAddr,
    /// The Host header value (`name` or `name:port`).
    pub host: String,
    /// How many connections the pool keeps open ahead of need.
    pub connections: usize,
    /// What every connect charges (the IP gate, the venue's connect bucket).
    pub connect_parts: Vec<Part>,
    /// The class connects are charged at.
    pub connect_class: Class,
    /// How long a connect may take.
    pub connect_timeout_ns: i64,
    /// A connection idle this long is closed and replaced (set it below the
    /// server's own keep-alive timeout).
    pub idle_timeout_ns: i64,
    /// A connection this old is replaced when it next becomes idle.
    pub max_age_ns: i64,
    /// Wait before reopening after a failure, so a dead server is not hammered:
    /// the first wait after a connect fails. Each further failure in a row
    /// doubles it, up to [`reconnect_max_ns`](Self::reconnect_max_ns), and the
    /// wait is drawn from its upper half ("equal jitter"), so the pools of many
    /// processes that lost one venue together do not reconnect in step.
    pub reconnect_delay_ns: i64,
    /// The longest wait between two connect attempts of a slot whose connects
    /// keep failing.
    pub reconnect_max_ns: i64,
    /// Buffer sizes and parsing bounds of every connection.
    pub limits: Limits,
    /// The egress lane: bind every connection to this local address (port 0 for
    /// any port) and verify the binding after connect. None: the OS picks. An
    /// unspecified address (0.0.0.0) never verifies: the socket ends up on a real
    /// one, and the pool is refused at its first connect.
    pub local_addr: Option<SocketAddr>,
    /// Speak TLS on every connection of the pool (handshake before idle).
    #[cfg(feature = "tls")]
    pub tls: Option<TlsConfig>,
    /// Send through libcurl instead of the native connections (see
    /// [`crate::curl`]); `connections` is then the most requests in flight.
    #[cfg(feature = "curl")]
    pub curl: Option<CurlConfig>,
}

impl PoolConfig {
    /// One connection to `addr`, sending `Host: host`, with conservative defaults:
    /// connect timeout 5 s, idle timeout 30 s, maximum age 10 min, reconnect delay
    /// 20 ms doubling to at most 5 s while connects keep failing, default
    /// [`Limits`], connects charged nothing at [`Class::Normal`], no
    /// local binding, plain TCP.
    pub fn new(addr: SocketAddr, host: impl Into<String>) -> Self {
        PoolConfig {
            addr,
            host: host.into(),
            connections: 1,
            connect_parts: Vec::new(),
            connect_class: Class::Normal,
            connect_timeout_ns: 5_000_000_000,
            idle_timeout_ns: 30_000_000_000,
            max_age_ns: 600_000_000_000,
            reconnect_delay_ns: 20_000_000,
            reconnect_max_ns: 5_000_000_000,
            limits: Limits::default(),
            local_addr: None,
            #[cfg(feature = "tls")]
            tls: None,
            #[cfg(feature = "curl")]
            curl: None,
        }
    }

    /// How many connection slots the [`Pool`] runs for this pool:
    /// `connections`, or none for a libcurl pool, whose transfers live in the
    /// libcurl transport.
    pub(crate) fn native_connections(&self) -> usize {
        #[cfg(feature = "curl")]
        if self.curl.is_some() {
            return 0;
        }
        self.connections
    }
}

#[cfg(feature = "curl")]
/// How a pool uses libcurl.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CurlConfig {
    /// Let POST, PUT, PATCH and other non-idempotent methods through, knowing that
    /// libcurl may send them twice on its own. Off by default.
    pub curl_allow_non_idempotent_methods: bool,
}

/// How libcurl failed: a `CURLcode` of a transfer, or a `CURLMcode` of the multi
/// handle, kept apart (the two number spaces overlap).
#[cfg(feature = "curl")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CurlError {
    /// A transfer's `CURLcode` (7 is `CURLE_COULDNT_CONNECT`, 28
    /// `CURLE_OPERATION_TIMEDOUT` ...). The code is libcurl's identity of the
    /// error, kept as libcurl numbers it; its [`Culprit`] is decided per code
    /// ([`CurlError::culprit`]).
    Transfer(i64),
    /// The multi handle's `CURLMcode`: ergon's own use of libcurl's multi
    /// interface failed. [`Culprit::Os`] (out of memory, a socket or poll call, or
    /// libcurl's internal error): nothing the caller passed reaches it.
    Multi(i32),
}

#[cfg(feature = "curl")]
impl CurlError {
    /// Who is at fault. A transfer's `CURLcode`: a timeout (28) is
    /// [`Culprit::Deadline`]; the server refusing, closing, answering nothing or
    /// garbage, or failing TLS verification (7, 8, 16, 18, 35, 51, 52, 55, 56, 60,
    /// 92, 95) is [`Culprit::Peer`]; a URL, option or argument libcurl refuses
    /// (1, 3, 43, 48) is [`Culprit::Caller`]; the rest (resolving, memory, local
    /// sockets, libcurl's internals) is [`Culprit::Os`]. A multi handle's code is
    /// [`Culprit::Os`].
    pub fn culprit(&self) -> Culprit {
        match self {
            CurlError::Transfer(code) => match code {
                28 => Culprit::Deadline,
                7 | 8 | 16 | 18 | 35 | 51 | 52 | 55 | 56 | 60 | 92 | 95 => Culprit::Peer,
                1 | 3 | 43 | 48 => Culprit::Caller,
                _ => Culprit::Os,
            },
            CurlError::Multi(_) => Culprit::Os,
        }
    }
}

#[cfg(feature = "curl")]
impl core::fmt::Display for CurlError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CurlError::Transfer(code) => write!(f, "libcurl transfer error {code}"),
            CurlError::Multi(code) => write!(f, "libcurl multi error {code}"),
        }
    }
}
