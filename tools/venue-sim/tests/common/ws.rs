//! A raw WebSocket client for the emulator's tests: the upgrade and masked client
//! frames written by hand, so the tests see exactly the bytes the emulator
//! writes.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// RFC 6455 §1.3's example `Sec-WebSocket-Key`.
pub const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

/// An upgraded connection and the bytes read past the upgrade answer.
pub struct RawWs {
    pub stream: TcpStream,
    pub buf: Vec<u8>,
}

/// Upgrades to `path` with this `Sec-WebSocket-Key` (none if `None`), reads
/// waiting at most `wait`; the status code, and the connection on 101 (its
/// `Sec-WebSocket-Accept` checked against RFC 6455's example for [`KEY`]).
pub fn upgrade(
    addr: SocketAddr,
    path: &str,
    key: Option<&str>,
    wait: Duration,
) -> (u16, Option<RawWs>) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_nodelay(true).unwrap();
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut req = format!(
        "GET {path} HTTP/1.1\r\nHost: sim\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
    );
    if let Some(k) = key {
        req.push_str(&format!("Sec-WebSocket-Key: {k}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut r = httparse::Response::new(&mut headers);
        if let Ok(httparse::Status::Complete(n)) = r.parse(&buf) {
            let code = r.code.unwrap();
            if code != 101 {
                return (code, None);
            }
            let accept = r
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("sec-websocket-accept"))
                .map(|h| String::from_utf8_lossy(h.value).into_owned());
            if key == Some(KEY) {
                // RFC 6455 §1.3's example answer.
                assert_eq!(accept.as_deref(), Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
            }
            buf.drain(..n);
            return (101, Some(RawWs { stream, buf }));
        }
        let got = stream.read(&mut chunk).expect("upgrade answer");
        assert!(got > 0, "closed during the upgrade");
        buf.extend_from_slice(&chunk[..got]);
    }
}

impl RawWs {
    /// Writes one masked client frame (a write error is left to the next read).
    pub fn send_frame(&mut self, opcode: u8, payload: &[u8]) {
        let mask = [0x12u8, 0x34, 0x56, 0x78];
        let mut f = vec![0x80 | opcode];
        match payload.len() {
            n if n < 126 => f.push(0x80 | n as u8),
            n if n <= 0xFFFF => {
                f.push(0x80 | 126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                f.push(0x80 | 127);
                f.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        f.extend_from_slice(&mask);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        let _ = self.stream.write_all(&f);
    }
}
