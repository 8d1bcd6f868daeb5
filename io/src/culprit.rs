//! Who is at fault for an error, and so what the caller does about it.
//!
//! Every public error type of this crate has a `culprit()` method, an exhaustive
//! `match` over its variants, so a new variant cannot be added without deciding
//! whose fault it is. A variant that wraps another error asks the wrapped one.

/// Who is at fault for a failure: the one question a caller must answer before
/// deciding to retry, reconnect, fix code or call a person.
///
/// Whether a request may have run is a separate question, answered by
/// [`Sent`](crate::client::Sent) (or the boundary's [`SentKind`](crate::boundary::handle::SentKind)):
/// a [`Culprit`] never says a request surely did not run.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Culprit {
    /// The venue or server (or the process at the other end of a shared ring)
    /// misbehaved, refused or closed: bytes that do not parse, a certificate that
    /// does not verify, a reset, a close. Reconnect, and reconcile what may have run.
    Peer,
    /// The machine: a socket, file-descriptor, epoll, eventfd or CPU-pinning call
    /// failed, or the network stack ignored a binding. Retry later, or alert: the
    /// host needs attention.
    Os,
    /// A bug or a bad argument in the calling code: a malformed request, a bad
    /// configuration, an unknown id, a call in the wrong state. Fix the code or the
    /// configuration; never retry as is, it fails the same way.
    Caller,
    /// ergon refused by its own rule: the budget, a full queue or mailbox, no
    /// connection ready, a method libcurl would re-send, a halted loop. Nothing
    /// left; wait (the budget says until when) or ask a person.
    Policy,
    /// Time ran out: the request's deadline, a connect or handshake timeout. The
    /// re-send rule decides (a request that may have run is reconciled, never
    /// re-sent blindly).
    Deadline,
}

impl core::fmt::Display for Culprit {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Culprit::Peer => "peer",
            Culprit::Os => "os",
            Culprit::Caller => "caller",
            Culprit::Policy => "policy",
            Culprit::Deadline => "deadline",
        })
    }
}

/// The culprit of an `std::io::ErrorKind` from a socket: what the peer did to the
/// connection (reset, refused, aborted, ended early) is the peer's; the rest
/// (no address, no descriptors, no route, out of memory ...) is the machine's.
pub(crate) fn of_io_kind(kind: std::io::ErrorKind) -> Culprit {
    use std::io::ErrorKind as K;
    match kind {
        K::ConnectionReset
        | K::ConnectionRefused
        | K::ConnectionAborted
        | K::BrokenPipe
        | K::UnexpectedEof => Culprit::Peer,
        _ => Culprit::Os,
    }
}
