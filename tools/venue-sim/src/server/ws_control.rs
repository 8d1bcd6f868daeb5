//! What the WebSocket connections of the emulator (Binance's WebSocket API with
//! its user data stream, Bybit's private stream, Deribit's and Hyperliquid's
//! WebSockets) do alike: their timeouts, answer the client's control frames,
//! read more bytes, write a text or a close frame. Each connection maps the
//! outcome to its own reasons for ending.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::ws::frame::{encode, OP_CLOSE, OP_PING, OP_PONG, OP_TEXT};

/// How long a read waits before a connection's loop looks at its clock, its
/// events and the stop flag.
const TICK: Duration = Duration::from_millis(2);
/// Longest a write to a client may block.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Sets an upgraded connection's read tick and write bound.
pub(crate) fn set_timeouts(stream: &TcpStream) {
    let _ = stream.set_read_timeout(Some(TICK));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
}

/// Writes a close frame with `code` (a failure is the end anyway).
pub(crate) fn close(stream: &mut TcpStream, code: u16) {
    let _ = stream.write_all(&encode(OP_CLOSE, &code.to_be_bytes()));
}

/// Writes a text frame; whether it went.
pub(crate) fn send_text(stream: &mut TcpStream, text: &str) -> bool {
    stream.write_all(&encode(OP_TEXT, text.as_bytes())).is_ok()
}

/// What a frame or a read left of the connection.
pub(crate) enum Step {
    /// Go on.
    Open,
    /// Closed by either side.
    Closed,
    /// The socket failed.
    Failed,
}

/// Answers a control frame: a ping with its pong, a pong by settling its ping and
/// every older one (RFC 6455 §5.5.3 lets a client answer only the latest ping), a
/// close with a close echoing its code. Any other opcode is left to the caller.
pub(crate) fn control(
    stream: &mut TcpStream,
    opcode: u8,
    payload: &[u8],
    awaiting: &mut VecDeque<(Vec<u8>, i64)>,
) -> Step {
    match opcode {
        OP_PING if stream.write_all(&encode(OP_PONG, payload)).is_err() => Step::Failed,
        OP_PONG => {
            if let Some(i) = awaiting.iter().position(|(p, _)| *p == payload) {
                awaiting.drain(..=i);
            }
            Step::Open
        }
        OP_CLOSE => {
            let code = payload
                .get(..2)
                .map_or(1000, |c| u16::from_be_bytes([c[0], c[1]]));
            close(stream, code);
            Step::Closed
        }
        _ => Step::Open,
    }
}

/// Reads what the socket has into `buf` (a read timeout is not an error: the
/// connection's loop has pings and events to look after).
pub(crate) fn read_more(stream: &mut TcpStream, chunk: &mut [u8], buf: &mut Vec<u8>) -> Step {
    match stream.read(chunk) {
        Ok(0) => Step::Closed,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Step::Open
        }
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Step::Open,
        Err(e) if e.kind() == ErrorKind::Interrupted => Step::Open,
        Err(_) => Step::Failed,
    }
}
