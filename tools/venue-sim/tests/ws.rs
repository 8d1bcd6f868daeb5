//! The emulator's legacy listenKey stream (`--listen-key on`; off by default, as
//! on the venue since 2026-02-20) through a raw client written here: listenKey
//! endpoints, `executionReport` events for placed,
//! canceled and filled orders, the 5-messages-a-second cut, the per-IP connect
//! limit and its ban, and the server's pings.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use common::{order_params, Client};
use ergon_venue_sim::{Config, Server, DEFAULT_API_KEY};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(10);

/// A raw WebSocket client: its own framing, blocking reads with a timeout.
struct Ws {
    stream: TcpStream,
    buf: Vec<u8>,
}

/// What one read brought.
#[derive(Debug, PartialEq)]
enum In {
    Frame(u8, Vec<u8>),
    /// The connection ended without a close frame (a cut).
    Eof,
    Timeout,
}

/// Sends the upgrade; returns the status line's code and, on 101, the client.
/// The emulator with the removed listenKey stream switched on.
fn legacy() -> Config {
    let mut c = Config::binance_spot();
    c.listen_key = true;
    c
}

fn upgrade(addr: SocketAddr, path: &str, key: Option<&str>) -> (u16, Option<Ws>) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream.set_nodelay(true).unwrap();
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
            // RFC 6455 §1.3's example key and accept.
            if key == Some("dGhlIHNhbXBsZSBub25jZQ==") {
                assert_eq!(accept.as_deref(), Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
            }
            buf.drain(..n);
            return (101, Some(Ws { stream, buf }));
        }
        let got = stream.read(&mut chunk).expect("upgrade answer");
        assert!(got > 0, "closed during the upgrade");
        buf.extend_from_slice(&chunk[..got]);
    }
}

impl Ws {
    fn send(&mut self, opcode: u8, payload: &[u8]) -> std::io::Result<()> {
        let mask = [0x37u8, 0xfa, 0x21, 0x3d];
        let mut f = vec![0x80 | opcode, 0x80 | payload.len() as u8];
        f.extend_from_slice(&mask);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.stream.write_all(&f)
    }

    fn read(&mut self, timeout: Duration) -> In {
        let until = Instant::now() + timeout;
        let mut chunk = [0u8; 8192];
        loop {
            if self.buf.len() >= 2 {
                assert_eq!(self.buf[1] & 0x80, 0, "a server frame is never masked");
                let (len, at) = match self.buf[1] & 0x7f {
                    126 if self.buf.len() >= 4 => {
                        (u16::from_be_bytes([self.buf[2], self.buf[3]]) as usize, 4)
                    }
                    126 | 127 => (usize::MAX, 0),
                    n => (n as usize, 2),
                };
                if len != usize::MAX && self.buf.len() >= at + len {
                    let op = self.buf[0] & 0x0f;
                    let payload = self.buf[at..at + len].to_vec();
                    self.buf.drain(..at + len);
                    return In::Frame(op, payload);
                }
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return In::Timeout;
            }
            self.stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .unwrap();
            match self.stream.read(&mut chunk) {
                Ok(0) => return In::Eof,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return In::Timeout
                }
                Err(_) => return In::Eof,
            }
        }
    }

    /// The next text message, answering pings on the way.
    fn event(&mut self) -> Value {
        loop {
            match self.read(WAIT) {
                In::Frame(1, t) => return serde_json::from_slice(&t).unwrap(),
                In::Frame(9, p) => self.send(0xA, &p).unwrap(),
                other => panic!("expected an event, got {other:?}"),
            }
        }
    }
}

fn listen_key(server: &Server) -> String {
    let mut c = Client::connect(server.addr());
    let r = c
        .send("POST", "/api/v3/userDataStream", Some(DEFAULT_API_KEY), "")
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["listenKey"].as_str().unwrap().to_string()
}

const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

fn stream(server: &Server) -> (String, Ws) {
    let k = listen_key(server);
    let (code, ws) = upgrade(server.addr(), &format!("/ws/{k}"), Some(KEY));
    assert_eq!(code, 101);
    (k, ws.unwrap())
}

#[test]
fn events_arrive_for_placed_canceled_and_filled_orders() {
    let server = Server::start(legacy()).unwrap();
    let (k, mut ws) = stream(&server);
    assert_eq!(listen_key(&server), k, "one active key per account");
    let mut c = Client::connect(server.addr());

    let r = c
        .signed(&server, "POST", "/api/v3/order", &order_params("ws-1"))
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let ev = ws.event();
    for f in [
        "e", "E", "s", "c", "S", "o", "f", "q", "p", "P", "F", "g", "C", "x", "X", "r", "i", "l",
        "z", "L", "n", "N", "T", "t", "I", "w", "m", "M", "O", "Z", "Y", "Q", "W", "V",
    ] {
        assert!(ev.get(f).is_some(), "executionReport lacks {f}: {ev}");
    }
    assert_eq!(ev["e"], "executionReport");
    assert_eq!(
        (ev["c"].as_str(), ev["x"].as_str()),
        (Some("ws-1"), Some("NEW"))
    );
    assert_eq!(ev["X"], "NEW");
    assert_eq!(ev["i"], r.json()["orderId"]);

    let r = c
        .signed(
            &server,
            "DELETE",
            "/api/v3/order",
            "symbol=BTCUSDT&origClientOrderId=ws-1&newClientOrderId=ws-1-cancel",
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let ev = ws.event();
    assert_eq!(ev["x"], "CANCELED");
    assert_eq!(ev["X"], "CANCELED");
    assert_eq!(ev["c"], "ws-1-cancel", "c: the cancel's id");
    assert_eq!(ev["C"], "ws-1", "C: the canceled order's id");

    let market = "symbol=BTCUSDT&side=SELL&type=MARKET&quantity=0.5&newClientOrderId=ws-2";
    let r = c.signed(&server, "POST", "/api/v3/order", market).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let new = ws.event();
    assert_eq!(
        (new["x"].as_str(), new["X"].as_str()),
        (Some("NEW"), Some("NEW"))
    );
    let fill = ws.event();
    assert_eq!(fill["c"], "ws-2");
    assert_eq!(
        (fill["x"].as_str(), fill["X"].as_str()),
        (Some("TRADE"), Some("FILLED"))
    );
    assert_eq!(fill["l"], "0.50000000");
    assert_eq!(fill["z"], "0.50000000");
    assert!(fill["t"].as_i64().unwrap() >= 0, "a trade id");

    // Keepalive, then close: the stream ends with a close frame.
    let q = format!("listenKey={k}");
    let r = c
        .send(
            "PUT",
            &format!("/api/v3/userDataStream?{q}"),
            Some(DEFAULT_API_KEY),
            "",
        )
        .unwrap();
    assert_eq!((r.status, r.body.as_str()), (200, "{}"));
    let r = c
        .send(
            "PUT",
            "/api/v3/userDataStream?listenKey=nope",
            Some(DEFAULT_API_KEY),
            "",
        )
        .unwrap();
    assert_eq!((r.status, r.code()), (400, -1125));
    let r = c
        .send(
            "DELETE",
            &format!("/api/v3/userDataStream?{q}"),
            Some(DEFAULT_API_KEY),
            "",
        )
        .unwrap();
    assert_eq!(r.status, 200);
    // A place after the close reaches no stream; the connection gets a close.
    let _ = c.signed(&server, "POST", "/api/v3/order", &order_params("ws-3"));
    match ws.read(WAIT) {
        In::Frame(8, p) => assert_eq!(p, 1000u16.to_be_bytes()),
        other => panic!("expected a close, got {other:?}"),
    }
    let rep = server.stop();
    assert_eq!(rep.ws.events, 4);
    assert_eq!(rep.ws.connects, 1);
    assert_eq!(rep.ws.listen_keys, 1);
    assert_eq!(rep.ws.cuts(), 0);
}

#[test]
fn bad_upgrades_are_refused() {
    let server = Server::start(legacy()).unwrap();
    let (code, _) = upgrade(server.addr(), "/ws/not-a-key", Some(KEY));
    assert_eq!(code, 400, "unknown listenKey");
    let k = listen_key(&server);
    let (code, _) = upgrade(server.addr(), &format!("/ws/{k}"), None);
    assert_eq!(code, 400, "no Sec-WebSocket-Key");
    let (code, _) = upgrade(server.addr(), &format!("/ws/{k}"), Some("c2hvcnQ="));
    assert_eq!(code, 400, "a key that is not 16 bytes");
    let mut c = Client::connect(server.addr());
    let r = c.send("POST", "/api/v3/userDataStream", None, "").unwrap();
    assert_eq!(
        (r.status, r.code()),
        (401, -2014),
        "listenKey needs an API key"
    );
    // An unmasked frame from a client is a protocol error: close 1002.
    let (_, ws) = upgrade(server.addr(), &format!("/ws/{k}"), Some(KEY));
    let mut ws = ws.unwrap();
    ws.stream.write_all(&[0x89, 0x00]).unwrap();
    match ws.read(WAIT) {
        In::Frame(8, p) => assert_eq!(p, 1002u16.to_be_bytes()),
        other => panic!("expected close 1002, got {other:?}"),
    }
    assert_eq!(server.stop().ws.protocol_errors, 1);
}

#[test]
fn more_than_five_messages_a_second_cut_the_connection() {
    let server = Server::start(legacy()).unwrap();
    // Four a second, for two seconds: under the limit, every ping answered.
    let (_, mut ws) = stream(&server);
    for round in 0..2 {
        let t0 = Instant::now();
        for i in 0..4u8 {
            ws.send(0x9, &[round, i]).unwrap();
            assert_eq!(ws.read(WAIT), In::Frame(0xA, vec![round, i]));
        }
        thread::sleep(Duration::from_millis(1_100).saturating_sub(t0.elapsed()));
    }
    assert_eq!(server.report().ws.cuts(), 0);
    // Six at once: the sixth cuts the connection, no close frame.
    let (_, mut ws) = stream(&server);
    for i in 0..6u8 {
        ws.send(0x9, &[i]).unwrap();
    }
    let mut pongs = 0;
    loop {
        match ws.read(WAIT) {
            In::Frame(0xA, _) => pongs += 1,
            In::Eof => break,
            other => panic!("expected pongs then a cut, got {other:?}"),
        }
    }
    assert_eq!(pongs, 5, "the five within the limit were answered");
    let r = server.stop();
    assert_eq!(r.ws.cut_rate, 1);
    assert_eq!(r.ws.messages_peak, 6);
    assert_eq!(r.ws.connects, 2);
}

#[test]
fn a_connect_storm_is_refused_then_the_ip_is_banned() {
    let mut cfg = legacy();
    cfg.ws.connects = 5;
    cfg.ws.connect_window_ms = 60_000;
    cfg.ws.ban_after_refused = 3;
    let server = Server::start(cfg).unwrap();
    let k = listen_key(&server);
    let path = format!("/ws/{k}");
    let mut open = Vec::new();
    for _ in 0..5 {
        let (code, ws) = upgrade(server.addr(), &path, Some(KEY));
        assert_eq!(code, 101);
        open.push(ws);
    }
    let codes: Vec<u16> = (0..3)
        .map(|_| upgrade(server.addr(), &path, Some(KEY)).0)
        .collect();
    assert_eq!(codes, [429, 429, 418], "refused, then banned");
    let (code, _) = upgrade(server.addr(), &path, Some(KEY));
    assert_eq!(code, 418, "a banned IP cannot connect");
    let mut c = Client::connect(server.addr());
    assert_eq!(c.get("/api/v3/ping").status, 418, "nor send REST requests");
    let r = server.stop();
    assert_eq!(r.ws.connects, 5);
    assert_eq!(r.ws.connects_refused, 4);
    assert_eq!(r.bans, 1);
}

#[test]
fn the_server_pings_and_cuts_a_client_that_does_not_pong() {
    let mut cfg = legacy();
    // Under 5 a second: the pongs count against the client's message limit.
    cfg.ws.ping_interval_ms = 250;
    cfg.ws.pong_timeout_ms = 500;
    let server = Server::start(cfg).unwrap();
    // One that answers stays open.
    let (_, mut good) = stream(&server);
    let (_, mut mute) = stream(&server);
    let t0 = Instant::now();
    let mut answered = 0;
    while t0.elapsed() < Duration::from_millis(1_500) {
        match good.read(Duration::from_millis(50)) {
            In::Frame(9, p) => {
                good.send(0xA, &p).unwrap();
                answered += 1;
            }
            In::Timeout => {}
            other => panic!("the answering client got {other:?}"),
        }
    }
    assert!(answered >= 4, "pings every 250 ms: {answered}");
    // The mute one got pings and was cut without a close frame.
    let mut pings = 0;
    loop {
        match mute.read(WAIT) {
            In::Frame(9, _) => pings += 1,
            In::Eof => break,
            other => panic!("expected pings then a cut, got {other:?}"),
        }
    }
    assert!(pings >= 1);
    let r = server.stop();
    assert_eq!(r.ws.cut_pong, 1, "only the mute client: {:?}", r.ws);
}
