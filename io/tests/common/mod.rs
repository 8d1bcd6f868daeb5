//! Test support shared by the io tests: a driver for the sans-IO connection and
//! loopback servers run on threads inside the tests.
#![allow(dead_code)]

pub mod alloc;
pub mod driver;
pub mod faults;
pub mod server;
#[cfg(feature = "tls")]
pub mod tls;

use ergon_io::http::{Conn, Headers, Limits, ParseError, Progress, Request};

/// A response copied out of the connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// What `finish` said: may the connection carry another request.
    pub reusable: bool,
}

/// What feeding a response gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Complete(Parsed),
    Error(ParseError),
    /// All bytes fed, no EOF, not complete.
    Partial,
    /// EOF before a complete response.
    Truncated,
}

/// Sends a `method` request on a fresh connection, then feeds `bytes` in pieces of
/// `step` bytes, then EOF if `eof`.
pub fn feed(limits: Limits, method: &str, bytes: &[u8], step: usize, eof: bool) -> Outcome {
    let mut conn = Conn::new(limits);
    conn.send(
        &Request {
            method,
            target: "/",
            headers: &[],
            body: b"",
        },
        "h",
    )
    .unwrap();
    let n = conn.transmit().len();
    conn.handle_written(n);
    assert!(conn.transmit().is_empty());
    let mut at = 0;
    let mut done = false;
    while at < bytes.len() {
        let buf = conn.recv_buf();
        let n = step.min(bytes.len() - at).min(buf.len());
        assert!(n > 0, "no room to read into");
        buf[..n].copy_from_slice(&bytes[at..at + n]);
        at += n;
        match conn.handle_recv(n) {
            Ok(Progress::Partial) => {}
            Ok(Progress::Complete) => {
                done = true;
                break;
            }
            Err(e) => return Outcome::Error(e),
        }
    }
    if !done {
        if !eof {
            return Outcome::Partial;
        }
        if conn.handle_eof().is_none() {
            return Outcome::Truncated;
        }
    }
    let mut hs = Headers::new();
    let r = conn.response(&mut hs).expect("complete");
    let parsed = Parsed {
        status: r.status,
        headers: r
            .headers
            .iter()
            .map(|h| {
                (
                    String::from_utf8_lossy(h.name).into_owned(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect(),
        body: r.body.to_vec(),
        reusable: false,
    };
    drop(hs);
    let reusable = conn.finish();
    Outcome::Complete(Parsed { reusable, ..parsed })
}

/// Feeds `bytes` whole and in every piece size that matters (1, 2, 3, 7 bytes),
/// asserts every way gives the same outcome, and returns it.
pub fn parse(method: &str, bytes: &[u8], eof: bool) -> Outcome {
    parse_limits(Limits::default(), method, bytes, eof)
}

/// [`parse`] with other limits.
pub fn parse_limits(limits: Limits, method: &str, bytes: &[u8], eof: bool) -> Outcome {
    let whole = feed(limits, method, bytes, bytes.len().max(1), eof);
    for step in [1, 2, 3, 7] {
        let split = feed(limits, method, bytes, step, eof);
        // Leftover bytes are only seen when they arrive with the end of the answer.
        let same = match (&whole, &split) {
            (Outcome::Complete(a), Outcome::Complete(b)) => {
                Parsed {
                    reusable: a.reusable,
                    ..b.clone()
                } == *a
            }
            (a, b) => a == b,
        };
        assert!(same, "step {step}: {split:?} != whole {whole:?}");
    }
    whole
}

/// The parsed response, or a panic naming what came instead.
pub fn complete(o: Outcome) -> Parsed {
    match o {
        Outcome::Complete(p) => p,
        other => panic!("expected a complete response, got {other:?}"),
    }
}
