//! RFC 6455 on the server side: the upgrade handshake, client frames in (masked)
//! and server frames out (unmasked).
//!
//! The frame code is the emulator's own, not `ergon_io::ws`: a shared bug would
//! pass both sides. Pure functions: no socket, no clock, and never a panic on bytes
//! from a client (a bad frame is [`Parsed::Bad`] with the close code to send).

use base64::Engine;
use sha1::{Digest, Sha1};

use crate::http::{Request, Response};

/// Largest frame accepted from a client.
const MAX_FRAME: usize = 16 * 1024;

/// Text frame.
pub(crate) const OP_TEXT: u8 = 0x1;
/// Close frame.
pub(crate) const OP_CLOSE: u8 = 0x8;
/// Ping frame.
pub(crate) const OP_PING: u8 = 0x9;
/// Pong frame.
pub(crate) const OP_PONG: u8 = 0xA;

/// Whether `req` asks for a WebSocket upgrade.
pub(crate) fn is_upgrade(req: &Request) -> bool {
    req.header("upgrade")
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// Checks the RFC 6455 parts of an upgrade request; returns the accept key.
pub(crate) fn check_handshake(req: &Request) -> Result<String, Response> {
    let bad = |m: &str| Response::error(400, -1000, m);
    if req.method != "GET" {
        return Err(bad("WebSocket upgrade must be a GET."));
    }
    let upgrade_token = req.header("connection").is_some_and(|v| {
        v.split(',')
            .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
    });
    if !upgrade_token {
        return Err(bad("Connection: Upgrade missing."));
    }
    if req.header("sec-websocket-version") != Some("13") {
        return Err(bad("Sec-WebSocket-Version must be 13."));
    }
    let Some(key) = req.header("sec-websocket-key") else {
        return Err(bad("Sec-WebSocket-Key missing."));
    };
    let decoded = base64::engine::general_purpose::STANDARD.decode(key);
    if decoded.map(|d| d.len()).ok() != Some(16) {
        return Err(bad("Sec-WebSocket-Key is not 16 bytes in base64."));
    }
    let mut h = Sha1::new();
    h.update(key.as_bytes());
    h.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    Ok(base64::engine::general_purpose::STANDARD.encode(h.finalize()))
}

/// The 101 answer to an upgrade whose accept key is `accept`.
pub(crate) fn switching(accept: &str) -> String {
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    )
}

/// A server frame (never masked).
pub(crate) fn encode(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 10);
    out.push(0x80 | opcode);
    match payload.len() {
        n if n < 126 => out.push(n as u8),
        n if n <= 0xFFFF => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
    out
}

/// A client frame, unmasked.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Frame {
    pub(crate) opcode: u8,
    pub(crate) payload: Vec<u8>,
}

/// What the receive buffer holds.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    Frame(Frame, usize),
    Partial,
    /// Close with this code.
    Bad(u16),
}

/// Parses one client frame from `buf`.
pub(crate) fn parse(buf: &[u8]) -> Parsed {
    if buf.len() < 2 {
        return Parsed::Partial;
    }
    let (b0, b1) = (buf[0], buf[1]);
    let opcode = b0 & 0x0F;
    if b0 & 0x70 != 0 || !matches!(opcode, 0..=2 | 8..=10) {
        return Parsed::Bad(1002);
    }
    if b1 & 0x80 == 0 {
        return Parsed::Bad(1002); // a client must mask
    }
    let (len, mut at) = match b1 & 0x7F {
        126 => {
            let Some(b) = buf.get(2..4) else {
                return Parsed::Partial;
            };
            (u64::from(u16::from_be_bytes([b[0], b[1]])), 4)
        }
        127 => {
            let Some(b) = buf.get(2..10) else {
                return Parsed::Partial;
            };
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            (u64::from_be_bytes(a), 10)
        }
        n => (u64::from(n), 2),
    };
    if opcode >= 8 && (len > 125 || b0 & 0x80 == 0) {
        return Parsed::Bad(1002);
    }
    if len > MAX_FRAME as u64 {
        return Parsed::Bad(1009);
    }
    let len = len as usize;
    let Some(m) = buf.get(at..at + 4) else {
        return Parsed::Partial;
    };
    let mask = [m[0], m[1], m[2], m[3]];
    at += 4;
    let Some(p) = buf.get(at..at + len) else {
        return Parsed::Partial;
    };
    let payload = p.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]).collect();
    Parsed::Frame(Frame { opcode, payload }, at + len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [1u8, 2, 3, 4];
        let mut out = vec![0x80 | opcode, 0x80 | payload.len() as u8];
        out.extend_from_slice(&mask);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        out
    }

    #[test]
    fn client_frames_parse_and_bad_ones_are_refused() {
        let f = masked(OP_PING, b"hi");
        assert_eq!(
            parse(&f),
            Parsed::Frame(
                Frame {
                    opcode: OP_PING,
                    payload: b"hi".to_vec()
                },
                f.len()
            )
        );
        assert_eq!(parse(&f[..3]), Parsed::Partial);
        assert_eq!(parse(&encode(OP_TEXT, b"x")), Parsed::Bad(1002), "unmasked");
        assert_eq!(
            parse(&[0x83, 0x80, 0, 0, 0, 0]),
            Parsed::Bad(1002),
            "opcode 3"
        );
        assert_eq!(
            parse(&[0x09, 0x80, 0, 0, 0, 0]),
            Parsed::Bad(1002),
            "fragmented ping"
        );
        let big = [0x82u8, 0xFF, 0, 0, 0, 0, 0, 1, 0, 0];
        assert_eq!(parse(&big), Parsed::Bad(1009));
        assert_eq!(encode(OP_TEXT, &[0; 200])[1], 126);
    }
}
