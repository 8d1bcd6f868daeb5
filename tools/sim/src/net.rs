//! The network between the gateway and the venue: what becomes of each request
//! written, drawn from the run's generator, and the bytes it carries.
//!
//! A fate says where the request is lost, if anywhere, and what the transport
//! reports: a request never written is `Sent::No` (refunded); one written and
//! lost, or whose answer is lost or comes after its deadline, is `Sent::Maybe`
//! (reconciled, never re-sent); only a request the venue answered is answered.

use ergon_io::http::Request;

use crate::rng::Rng;

/// What becomes of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Reaches the venue, runs, and its answer comes back.
    Delivered,
    /// Never written: the connection failed first (the transport says `Sent::No`).
    NotWritten,
    /// Written, lost before the venue: the connection dies (`Sent::Maybe`).
    LostBefore,
    /// Runs at the venue; the connection dies before its answer (`Sent::Maybe`).
    AnswerLost,
    /// Held in the venue's queue for a while, then runs (or is refused past its
    /// recvWindow); its answer may come after the deadline.
    Queued,
    /// Held in the venue's queue; the connection dies before it runs, so the
    /// gateway hears nothing while it may still run (within its recvWindow).
    QueuedCut,
    /// The venue runs it, then answers 5xx.
    ErrorAfterRun,
    /// The venue answers 5xx without running it.
    ErrorNoRun,
}

impl Fate {
    /// Draws a fate: with `faults` off every request is delivered.
    pub fn draw(rng: &mut Rng, faults: bool) -> Fate {
        if !faults {
            return Fate::Delivered;
        }
        match rng.next_u64() % 100 {
            0..=69 => Fate::Delivered,
            70..=74 => Fate::NotWritten,
            75..=79 => Fate::LostBefore,
            80..=84 => Fate::AnswerLost,
            85..=88 => Fate::Queued,
            89..=92 => Fate::QueuedCut,
            93..=95 => Fate::ErrorAfterRun,
            _ => Fate::ErrorNoRun,
        }
    }
}

/// The HTTP/1.1 bytes of `req`, as a client writes them.
pub fn encode(req: &Request<'_>) -> Vec<u8> {
    let mut head = format!("{} {} HTTP/1.1\r\nHost: sim\r\n", req.method, req.target);
    for (k, v) in req.headers {
        head.push_str(k);
        head.push_str(": ");
        head.push_str(v);
        head.push_str("\r\n");
    }
    if !req.body.is_empty() || !matches!(req.method, "GET" | "HEAD" | "DELETE" | "OPTIONS") {
        head.push_str(&format!("Content-Length: {}\r\n", req.body.len()));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(req.body);
    out
}
