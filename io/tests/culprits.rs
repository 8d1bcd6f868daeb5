//! Every public error type says who is at fault ([`Culprit`]): one test per type
//! walks every variant and checks its culprit against the mapping the variants'
//! docs state, and a few failures are produced for real (a bad boundary
//! configuration, a full queue) to check the culprit they come back with. The
//! gateway's error types are checked the same way in `gateway/tests/culprits.rs`.

use std::io::ErrorKind;
use std::net::SocketAddr;

use ergon_core::{Budget, Class, ConfigError, Limited, Part, Spec, Ticket};
use ergon_io::boundary::handle::{Outcome, Refusal, SentKind, SubmitError};
use ergon_io::boundary::ring::{bounded, CapacityError, Full};
use ergon_io::boundary::shm_ring::{BadGeometry, Corrupt, PushError, ShmFull};
use ergon_io::boundary::{build, BoundaryConfig, BuildError};
use ergon_io::client::{Error, PoolError, Refused};
use ergon_io::event_loop::LoopError;
use ergon_io::http::{InvalidRequest, ParseError};
#[cfg(feature = "tls")]
use ergon_io::tls::{TlsConfigError, TlsError};
use ergon_io::ws::{Cause, ConnectError, HandshakeError, ProtocolError, SendError, SetupError};
use ergon_io::Culprit::{self, Caller, Deadline, Os, Peer, Policy};

/// Asserts each `(error, culprit)` pair, naming the error that disagrees.
fn check<E: core::fmt::Debug>(cases: &[(E, Culprit)], culprit: impl Fn(&E) -> Culprit) {
    for (e, want) in cases {
        assert_eq!(culprit(e), *want, "{e:?}");
    }
}

/// A budget with room for many charges, and a refusal from a one-request bucket.
fn budget() -> (Budget, Part, Limited) {
    let mut b = Budget::builder();
    let many = b
        .add("many", Spec::sliding(1_000, 1_000_000_000, 10))
        .unwrap();
    let one = b.add("one", Spec::sliding(1, 1_000_000_000, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    let first = budget.try_charge(&[Part::new(one, 1)], Class::Normal, 0);
    let limited = budget
        .try_charge(&[Part::new(one, 1)], Class::Normal, 0)
        .unwrap_err();
    budget.refund(first.unwrap(), 0).unwrap();
    (budget, Part::new(many, 1), limited)
}

fn ticket(budget: &mut Budget, part: Part) -> Ticket {
    budget.try_charge(&[part], Class::Normal, 0).unwrap()
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

#[test]
fn pool_error() {
    let (asked, got) = (addr("10.0.0.1:0"), addr("10.0.0.2:40000"));
    check(
        &[
            (Error::Io(ErrorKind::ConnectionReset), Peer),
            (Error::Io(ErrorKind::ConnectionRefused), Peer),
            (Error::Io(ErrorKind::ConnectionAborted), Peer),
            (Error::Io(ErrorKind::BrokenPipe), Peer),
            (Error::Io(ErrorKind::UnexpectedEof), Peer),
            (Error::Io(ErrorKind::AddrNotAvailable), Os),
            (Error::Io(ErrorKind::OutOfMemory), Os),
            (Error::Io(ErrorKind::PermissionDenied), Os),
            (Error::Closed, Peer),
            (Error::Truncated, Peer),
            (Error::Parse(ParseError::BadHead), Peer),
            (Error::Timeout, Deadline),
            (Error::ConnectTimeout, Deadline),
            #[cfg(feature = "tls")]
            (Error::Tls(TlsError::UnknownIssuer), Peer),
            (Error::LocalAddr { asked, got }, Os),
            #[cfg(feature = "curl")]
            (Error::CurlResend, Policy),
            #[cfg(feature = "curl")]
            (
                Error::Curl(ergon_io::pool::CurlError::Transfer(28)),
                Deadline,
            ),
        ],
        Error::culprit,
    );
}

#[cfg(feature = "curl")]
#[test]
fn curl_error() {
    use ergon_io::pool::CurlError::{Multi, Transfer};
    check(
        &[
            (Transfer(28), Deadline),
            (Transfer(7), Peer),
            (Transfer(52), Peer),
            (Transfer(56), Peer),
            (Transfer(60), Peer),
            (Transfer(3), Caller),
            (Transfer(43), Caller),
            (Transfer(6), Os),
            (Transfer(27), Os),
            (Multi(3), Os),
            (Multi(4), Os),
        ],
        ergon_io::pool::CurlError::culprit,
    );
}

#[test]
fn pool_config_error() {
    check(
        &[
            (PoolError::NoConnections, Caller),
            (PoolError::BadHost, Caller),
            (PoolError::BuffersTooSmall, Caller),
            (PoolError::TooManyPools, Caller),
        ],
        PoolError::culprit,
    );
}

#[test]
fn refused() {
    let (mut b, part, _) = budget();
    let cases = [
        (Refused::Busy(ticket(&mut b, part)), Policy),
        (
            Refused::Invalid(ticket(&mut b, part), InvalidRequest::Target),
            Caller,
        ),
        (Refused::UnknownPool(ticket(&mut b, part)), Caller),
        (Refused::Expired(ticket(&mut b, part)), Deadline),
    ];
    for (r, want) in cases {
        assert_eq!(r.culprit(), want, "{r:?}");
        b.refund(r.into_ticket(), 0).unwrap();
    }
}

#[test]
fn invalid_request() {
    use InvalidRequest::*;
    check(
        &[
            (Method, Caller),
            (Target, Caller),
            (HeaderName, Caller),
            (HeaderValue, Caller),
            (ReservedHeader, Caller),
            (TooLarge, Caller),
            (NotIdle, Caller),
        ],
        InvalidRequest::culprit,
    );
}

#[test]
fn parse_error() {
    use ParseError::*;
    check(
        &[
            (BadHead, Peer),
            (BadVersion, Peer),
            (BadStatus, Peer),
            (HeadTooLarge, Peer),
            (TooManyHeaders, Peer),
            (LineTooLong, Peer),
            (BadContentLength, Peer),
            (BadFraming, Peer),
            (BadChunkSize, Peer),
            (ChunkTooLarge, Peer),
            (BadChunkEnd, Peer),
            (BadTrailer, Peer),
            (ResponseTooLarge, Peer),
            (Upgrade, Peer),
            (Unsolicited, Peer),
        ],
        ParseError::culprit,
    );
}

#[test]
fn loop_error() {
    check(
        &[
            (LoopError::Epoll(ErrorKind::OutOfMemory), Os),
            (LoopError::CpuNotAllowed(3), Caller),
            (
                LoopError::Pin {
                    cpu: 1,
                    ran_on: Some(0),
                },
                Os,
            ),
            (LoopError::Pool(PoolError::BadHost), Caller),
            (LoopError::TimersFull, Caller),
        ],
        LoopError::culprit,
    );
}

#[cfg(feature = "tls")]
#[test]
fn tls_errors() {
    use TlsError::*;
    check(
        &[
            (UnknownIssuer, Peer),
            (NotValidForName, Peer),
            (Expired, Peer),
            (BadCertificate, Peer),
            (Alert, Peer),
            (Protocol, Peer),
            (Incompatible, Peer),
        ],
        TlsError::culprit,
    );
    check(
        &[
            (TlsConfigError::BadServerName("a b".into()), Caller),
            (TlsConfigError::CaFile("/nowhere: not found".into()), Caller),
            (
                TlsConfigError::Rustls(rustls::Error::General("refused".into())),
                Caller,
            ),
        ],
        TlsConfigError::culprit,
    );
    // A name rustls refuses comes back as the caller's.
    let e = ergon_io::tls::TlsConfig::webpki_roots("not a name").unwrap_err();
    assert_eq!(e.culprit(), Caller, "{e}");
}

#[test]
fn ws_handshake_and_protocol() {
    use HandshakeError::*;
    check(
        &[
            (Malformed, Peer),
            (TooLarge, Peer),
            (Status(429), Peer),
            (Status(418), Peer),
            (MissingUpgrade, Peer),
            (MissingConnection, Peer),
            (MissingAccept, Peer),
            (BadAccept, Peer),
            (Unrequested, Peer),
        ],
        HandshakeError::culprit,
    );
    use ProtocolError::*;
    check(
        &[
            (ReservedBits, Peer),
            (BadOpcode(3), Peer),
            (MaskedFrame, Peer),
            (UnmaskedFrame, Peer),
            (ControlTooLong, Peer),
            (ControlFragmented, Peer),
            (NonMinimalLength, Peer),
            (BadLength, Peer),
            (FrameTooBig, Peer),
            (MessageTooBig, Peer),
            (InvalidUtf8, Peer),
            (UnexpectedContinuation, Peer),
            (UnfinishedMessage, Peer),
            (BadClosePayload, Peer),
            (BadCloseCode(1005), Peer),
        ],
        ProtocolError::culprit,
    );
}

#[test]
fn ws_session_errors() {
    let (_, _, limited) = budget();
    check(
        &[
            (SetupError::Parts(ConfigError::ZeroLimit), Caller),
            (SetupError::Bounds, Caller),
        ],
        SetupError::culprit,
    );
    check(
        &[
            (ConnectError::Limited(limited), Policy),
            (ConnectError::Busy, Caller),
            (ConnectError::BadRequest, Caller),
            (ConnectError::UnknownSession, Caller),
            (ConnectError::Unattached, Caller),
            (
                ConnectError::LocalAddr {
                    asked: addr("10.0.0.1:0"),
                    got: addr("10.0.0.2:1"),
                },
                Os,
            ),
        ],
        ConnectError::culprit,
    );
    check(
        &[
            (SendError::Limited(limited), Policy),
            (SendError::NotOpen, Caller),
            (SendError::Full, Policy),
            (SendError::TooBig, Caller),
            (SendError::BadCloseCode(1005), Caller),
            (SendError::TooManyPending, Policy),
            (SendError::DuplicateId, Caller),
            (SendError::TooManyParts, Caller),
        ],
        SendError::culprit,
    );
}

/// The WebSocket errors are `std::error::Error`s with a message that names the
/// session's trouble (they can go up as `Box<dyn Error>`).
#[test]
fn ws_errors_say_what_went_wrong() {
    let boxed: Box<dyn std::error::Error> = Box::new(SetupError::Bounds);
    assert_eq!(boxed.to_string(), "websocket bound too small to work");
    let lane = ConnectError::LocalAddr {
        asked: addr("10.0.0.1:0"),
        got: addr("10.0.0.2:1"),
    };
    assert_eq!(
        lane.to_string(),
        "websocket lane refused: bound to 10.0.0.1:0, left from 10.0.0.2:1"
    );
    assert_eq!(
        SendError::BadCloseCode(1005).to_string(),
        "websocket close code 1005 may not be sent"
    );
    let (_, _, limited) = budget();
    let text = SendError::Limited(limited).to_string();
    assert!(
        text.starts_with("websocket frame refused by the budget (")
            && text.ends_with(&format!("ready at {} ns)", limited.ready_at_ns)),
        "{text}"
    );
}

#[test]
fn ws_close_cause() {
    let cases = [
        (Cause::Peer, Some(Peer)),
        (Cause::Local, None),
        (Cause::Protocol(ProtocolError::InvalidUtf8), Some(Peer)),
        (Cause::Handshake(HandshakeError::Status(429)), Some(Peer)),
        (Cause::Transport, Some(Peer)),
        (Cause::Timeout, Some(Deadline)),
    ];
    for (c, want) in cases {
        assert_eq!(c.culprit(), want, "{c:?}");
    }
    #[cfg(feature = "tls")]
    assert_eq!(Cause::Tls(TlsError::Alert).culprit(), Some(Peer));
}

#[test]
fn boundary_errors() {
    check(
        &[
            (BuildError::Capacity(CapacityError::Invalid(3)), Caller),
            (BuildError::Handles(0), Caller),
            (BuildError::PerTurn, Caller),
            (BuildError::Size(2 << 30), Caller),
            (BuildError::EventFd(ErrorKind::OutOfMemory), Os),
        ],
        BuildError::culprit,
    );
    check(
        &[(CapacityError::Invalid(3), Caller)],
        CapacityError::culprit,
    );
    check(
        &[
            (SubmitError::QueueFull, Policy),
            (SubmitError::Outstanding, Policy),
            (SubmitError::TooLarge { need: 9, max: 8 }, Caller),
            (SubmitError::TooManyHeaders, Caller),
            (SubmitError::TooManyParts, Caller),
            (SubmitError::Stopped, Policy),
        ],
        SubmitError::culprit,
    );
    check(
        &[
            (Refusal::Busy, Policy),
            (Refusal::Invalid(InvalidRequest::HeaderName), Caller),
            (Refusal::UnknownPool, Caller),
            (Refusal::Expired, Deadline),
            (Refusal::Shutdown, Policy),
        ],
        Refusal::culprit,
    );
    let (_, _, limited) = budget();
    let outcomes = [
        (Outcome::Response, None),
        (Outcome::Limited(limited), Some(Policy)),
        (Outcome::Refused(Refusal::Expired), Some(Deadline)),
        (Outcome::Refused(Refusal::UnknownPool), Some(Caller)),
        (
            Outcome::Failed {
                sent: SentKind::Maybe,
                error: Error::Closed,
            },
            Some(Peer),
        ),
        (
            Outcome::Failed {
                sent: SentKind::No,
                error: Error::ConnectTimeout,
            },
            Some(Deadline),
        ),
    ];
    for (o, want) in outcomes {
        assert_eq!(o.culprit(), want, "{o:?}");
    }
    // Produced for real: a configuration build refuses, a full queue.
    let bad = BoundaryConfig {
        handles: 0,
        ..BoundaryConfig::default()
    };
    assert_eq!(build(bad).map(|_| ()).unwrap_err().culprit(), Caller);
    assert_eq!(bounded::<u8>(3).map(|_| ()).unwrap_err().culprit(), Caller);
    let (tx, _rx) = bounded::<u8>(2).unwrap();
    tx.push(1).unwrap();
    tx.push(2).unwrap();
    let full: Full<u8> = tx.push(3).unwrap_err();
    assert_eq!(full.culprit(), Policy);
}

#[test]
fn shm_ring_errors() {
    assert_eq!(ShmFull.culprit(), Policy);
    assert_eq!(Corrupt.culprit(), Peer);
    assert_eq!(BadGeometry.culprit(), Caller);
    check(
        &[(PushError::Full, Policy), (PushError::Corrupt, Peer)],
        PushError::culprit,
    );
}
