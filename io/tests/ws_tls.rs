//! `wss://`: the WebSocket shell ([`WsClient::add_tls`]) over rustls, against a
//! loopback rustls server thread with certificates made in the test (rcgen).
//!
//! - the handshake and an echo, a message crossing many TLS records included, on
//!   the event loop;
//! - ping/pong both ways and a close we start;
//! - a wrong server name and an untrusted CA fail in the TLS handshake: the server
//!   never completes its handshake (so never reads a byte of the upgrade), the
//!   session ends with `Cause::Tls`, and the connect charge is refunded;
//! - a server that never answers the ClientHello: the handshake timeout ends it,
//!   refunded too;
//! - only a verifier the caller built on purpose (`TlsConfig::from_client_config`
//!   with rustls's `dangerous()` API) accepts a name the certificate lacks;
//! - allocations per echoed message in steady state over TLS, counted and stated:
//!   rustls's buffered API allocates one buffer per record written and one per
//!   record read, 2 per echoed message; plain TCP is 0 (`ws_alloc.rs`).
#![cfg(feature = "tls")]

#[path = "common/alloc.rs"]
mod alloc;
mod ws_common;

#[allow(dead_code)]
#[path = "common/tls.rs"]
mod pki;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

use alloc::Counting;
use ergon_io::core::Class;
use ergon_io::event_loop::{Context, EventLoop};
use ergon_io::tls::{TlsConfig, TlsError};
use ergon_io::ws::{Cause, Session, Upgrade, WsClient, WsConfig};
use pki::Pki;
use rustls::{ServerConnection, StreamOwned};
use ws_common::app::{on_loop, App, React};
use ws_common::*;

#[global_allocator]
static GLOBAL: Counting = Counting::new();

const REQ_WSS: Upgrade<'static> = Upgrade {
    host: "localhost",
    path: "/wss",
    headers: &[],
};

/// One TLS connection, server side: the same framing as `ws_common::Peer`.
struct TlsPeer {
    stream: StreamOwned<ServerConnection, TcpStream>,
    buf: Vec<u8>,
    request: String,
}

/// Accepts one connection and runs the server's TLS handshake. `Err` says how
/// the handshake failed; no application byte can have been read then.
fn tls_accept(l: &TcpListener, cfg: Arc<rustls::ServerConfig>) -> Result<TlsPeer, String> {
    let (mut tcp, _) = l.accept().expect("accept");
    tcp.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    tcp.set_nodelay(true).unwrap();
    let mut conn = ServerConnection::new(cfg).unwrap();
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut tcp) {
            return Err(e.to_string());
        }
    }
    Ok(TlsPeer {
        stream: StreamOwned::new(conn, tcp),
        buf: Vec::new(),
        request: String::new(),
    })
}

impl TlsPeer {
    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 16384];
        match self.stream.read(&mut chunk) {
            Ok(0) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
            // The client closed without close_notify.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => false,
            Err(e) => panic!("server read: {e}"),
        }
    }

    /// Reads the upgrade request and answers 101.
    fn handshake(&mut self) {
        loop {
            if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head: Vec<u8> = self.buf.drain(..end + 4).collect();
                self.request = String::from_utf8(head).unwrap();
                break;
            }
            assert!(self.fill(), "client closed before its request");
        }
        let key = self
            .request
            .lines()
            .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
            .expect("a key")
            .to_string();
        let answer = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
            accept_key(&key)
        );
        self.write_raw(answer.as_bytes());
    }

    fn write_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
        self.stream.flush().unwrap();
    }

    fn write_frame(&mut self, opcode: u8, payload: &[u8]) {
        self.write_raw(&server_frame(true, opcode, payload));
    }

    fn read_frame(&mut self) -> Option<Frame> {
        loop {
            if let Some(f) = parse_client_frame(&mut self.buf) {
                return Some(f);
            }
            if !self.fill() {
                return None;
            }
        }
    }

    /// Waits for the client to end the connection; `true` if it sent close_notify.
    fn expect_end(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                // rustls reads 0 only after close_notify.
                Ok(0) => return true,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return false,
                Err(e) => panic!("server read: {e}"),
            }
        }
    }
}

/// What the test app does on an event; runs after `drive` returns.
enum Then {
    Nothing,
    Echo(Vec<u8>, bool),
    Ping,
    Close,
    Stop,
}

impl React for Then {
    fn run(self, app: &mut App<Then>, cx: &mut Context<'_>, now: i64) {
        let s = app.ws.session_mut(app.id).unwrap();
        match self {
            Then::Nothing => {}
            Then::Echo(bytes, text) => {
                if text {
                    let t = String::from_utf8(bytes).unwrap();
                    s.send_text(&t, Class::Normal, cx.budget(), now).unwrap();
                } else {
                    s.send_binary(&bytes, Class::Normal, cx.budget(), now)
                        .unwrap();
                }
            }
            Then::Ping => s
                .send_ping(b"client ping", Class::Normal, cx.budget(), now)
                .unwrap(),
            Then::Close => s
                .close(1000, "bye", Class::Normal, cx.budget(), now)
                .unwrap(),
            Then::Stop => cx.stop(),
        }
        app.ws.flush(app.id, cx.budget(), now);
    }
}

/// A loop with one `wss://` session to `addr`, connected.
fn setup(
    addr: std::net::SocketAddr,
    tls: TlsConfig,
    config: WsConfig,
    react: fn(&Ev) -> Then,
) -> (EventLoop, App<Then>, Limits) {
    on_loop(
        config,
        (10, 100),
        &REQ_WSS,
        |ws, session| ws.add_tls(session, addr, tls),
        react,
    )
}

/// 60,000 bytes: four TLS records each way.
fn big_text() -> String {
    (0..60_000u32)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect()
}

#[test]
fn handshake_and_echo_over_wss_on_the_event_loop() {
    let pki = Pki::new();
    let server_cfg = pki.server.clone();
    let (addr, server) = serve(move |l| {
        let mut p = tls_accept(&l, server_cfg).expect("TLS handshake");
        p.handshake();
        let request = p.request.clone();
        p.write_frame(0x1, b"hello over tls");
        p.write_frame(0x2, &[0, 1, 2, 255]);
        p.write_frame(0x1, big_text().as_bytes());
        let mut got = Vec::new();
        for _ in 0..3 {
            let f = p.read_frame().expect("an echo");
            got.push((f.opcode, f.payload));
        }
        p.write_frame(0x8, &1000u16.to_be_bytes());
        let close = p.read_frame().expect("the close echo");
        let notify = p.expect_end();
        (request, got, close.opcode, close.payload, notify)
    });
    let (mut lp, mut app, limits) = setup(
        addr,
        pki.client("localhost"),
        WsConfig::default(),
        |ev| match ev {
            Ev::Text(t) => Then::Echo(t.clone().into_bytes(), true),
            Ev::Binary(b) => Then::Echo(b.clone(), false),
            Ev::Closed(..) => Then::Stop,
            _ => Then::Nothing,
        },
    );
    lp.run(&mut app).unwrap();
    let big = big_text();
    assert_eq!(
        app.events,
        vec![
            Ev::Open,
            Ev::Text("hello over tls".into()),
            Ev::Binary(vec![0, 1, 2, 255]),
            Ev::Text(big.clone()),
            Ev::Closed(Cause::Peer, Some(1000), String::new())
        ]
    );
    let (request, got, close_op, close_payload, notify) = server.join().unwrap();
    assert!(request.starts_with("GET /wss HTTP/1.1\r\n"), "{request}");
    assert!(request.contains("\r\nHost: localhost\r\n"), "{request}");
    assert_eq!(
        got,
        vec![
            (0x1, b"hello over tls".to_vec()),
            (0x2, vec![0, 1, 2, 255]),
            (0x1, big.into_bytes())
        ]
    );
    assert_eq!(
        (close_op, close_payload),
        (0x8, 1000u16.to_be_bytes().to_vec())
    );
    assert!(notify, "the client ends TLS with close_notify");
    // Three echoes and the close echo charged; one connect, kept.
    assert_eq!(lp.budget().stats(limits.messages).unwrap().admitted, 4);
    let c = lp.budget().stats(limits.connects).unwrap();
    assert_eq!((c.admitted, c.refunds, c.used), (1, 0, 1));
}

#[test]
fn ping_pong_and_our_close_over_wss() {
    let pki = Pki::new();
    let server_cfg = pki.server.clone();
    let (addr, server) = serve(move |l| {
        let mut p = tls_accept(&l, server_cfg).expect("TLS handshake");
        p.handshake();
        p.write_frame(0x9, b"server ping");
        let mut frames = Vec::new();
        // The automatic pong, then the client's ping, answered.
        while let Some(f) = p.read_frame() {
            let op = f.opcode;
            if op == 0x9 {
                p.write_frame(0xA, &f.payload);
            }
            frames.push((op, f.payload));
            if op == 0x8 {
                break;
            }
        }
        // Echo the client's close.
        p.write_frame(0x8, &1000u16.to_be_bytes());
        p.expect_end();
        frames
    });
    let (mut lp, mut app, limits) = setup(
        addr,
        pki.client("127.0.0.1"),
        WsConfig::default(),
        |ev| match ev {
            Ev::Open => Then::Ping,
            Ev::Pong(_) => Then::Close,
            Ev::Closed(..) => Then::Stop,
            _ => Then::Nothing,
        },
    );
    lp.run(&mut app).unwrap();
    assert_eq!(
        app.events,
        vec![
            Ev::Open,
            Ev::Pong(b"client ping".to_vec()),
            Ev::Closed(Cause::Local, Some(1000), String::new())
        ]
    );
    let mut frames = server.join().unwrap();
    let close = frames.pop().unwrap();
    assert_eq!(close, (0x8, [&1000u16.to_be_bytes()[..], b"bye"].concat()));
    frames.sort();
    assert_eq!(
        frames,
        vec![
            (0x9, b"client ping".to_vec()),
            (0xA, b"server ping".to_vec())
        ]
    );
    let st = app.ws.session(app.id).unwrap().stats();
    assert_eq!((st.pings_received, st.pongs_sent), (1, 1));
    // Ping, pong and close: every frame charged, the automatic pong included.
    assert_eq!(lp.budget().stats(limits.messages).unwrap().admitted, 3);
    assert_eq!(st.frames_sent, 3);
}

/// Runs a `wss://` connect with `tls` against a server with `pki`'s certificate
/// and expects it to fail in the TLS handshake with `want`.
fn fails_before_any_websocket_byte(tls: TlsConfig, pki: &Pki, want: TlsError) {
    let server_cfg = pki.server.clone();
    let (addr, server) = serve(move |l| match tls_accept(&l, server_cfg) {
        Ok(mut p) => {
            // Only reached if the client accepted the server: say what it sent.
            let mut buf = [0u8; 4096];
            let n = p.stream.read(&mut buf).unwrap_or(0);
            Ok(n)
        }
        Err(e) => Err(e),
    });
    let (mut lp, mut app, limits) = setup(addr, tls, WsConfig::default(), |ev| match ev {
        Ev::Closed(..) => Then::Stop,
        _ => Then::Nothing,
    });
    lp.run(&mut app).unwrap();
    assert_eq!(
        app.events,
        vec![Ev::Closed(Cause::Tls(want), None, String::new())]
    );
    // The server's handshake failed: the client's alert ended it before the
    // client could have written an application byte.
    let refused = server.join().unwrap();
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("alert")),
        "{refused:?}"
    );
    let c = lp.budget().stats(limits.connects).unwrap();
    assert_eq!((c.admitted, c.refunds, c.used), (1, 1, 0), "{c:?}");
    assert_eq!(lp.budget().stats(limits.messages).unwrap().admitted, 0);
    let st = app.ws.session(app.id).unwrap().stats();
    assert_eq!((st.connects, st.frames_sent), (1, 0));
}

#[test]
fn wrong_hostname_fails_before_any_websocket_byte_and_refunds() {
    let pki = Pki::new();
    let tls = pki.client("venue.example");
    fails_before_any_websocket_byte(tls, &pki, TlsError::NotValidForName);
}

#[test]
fn untrusted_ca_fails_before_any_websocket_byte_and_refunds() {
    let pki = Pki::new();
    fails_before_any_websocket_byte(Pki::stranger("localhost"), &pki, TlsError::UnknownIssuer);
}

#[test]
fn a_silent_tls_server_times_out_the_handshake_refunded() {
    let pki = Pki::new();
    let (addr, server) = serve(|l| {
        // Accepts, reads the ClientHello, never answers.
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let mut buf = [0u8; 4096];
        let hello = s.read(&mut buf).unwrap();
        // Then waits for the client to give up.
        let mut rest = 0;
        while let Ok(n @ 1..) = s.read(&mut buf) {
            rest += n;
        }
        (hello > 0 && buf[0] == 0x16, rest)
    });
    let config = WsConfig {
        handshake_timeout_ns: 300_000_000,
        ..WsConfig::default()
    };
    let (mut lp, mut app, limits) = setup(addr, pki.client("localhost"), config, |ev| match ev {
        Ev::Closed(..) => Then::Stop,
        _ => Then::Nothing,
    });
    lp.run(&mut app).unwrap();
    assert_eq!(
        app.events,
        vec![Ev::Closed(Cause::Timeout, None, String::new())]
    );
    let (hello, rest) = server.join().unwrap();
    assert!(hello, "a TLS handshake record came first");
    assert_eq!(rest, 0, "nothing after the ClientHello");
    let c = lp.budget().stats(limits.connects).unwrap();
    assert_eq!((c.admitted, c.refunds, c.used), (1, 1, 0), "{c:?}");
}

#[test]
fn allocations_per_message_over_wss_are_counted() {
    let pki = Pki::new();
    let server_cfg = pki.server.clone();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // An echo server: the client thread is the one counted.
    let server = std::thread::spawn(move || {
        let mut p = tls_accept(&listener, server_cfg).expect("TLS handshake");
        p.handshake();
        let mut echoed = 0u64;
        while let Some(f) = p.read_frame() {
            if f.opcode == 0x8 {
                break;
            }
            p.write_frame(f.opcode, &f.payload);
            echoed += 1;
        }
        echoed
    });
    let (budget, limits) = budget_at(10, 1 << 40, ergon_io::clock::now_ns());
    let session = Session::new(
        WsConfig::default(),
        &budget,
        &limits.connect_parts(),
        &limits.message_parts(),
        9,
    )
    .unwrap();
    let mut ws = WsClient::new(1);
    let id = ws.add_tls(session, addr, pki.client("localhost"));
    let mut lp = echo_loop(budget, &mut ws, id, &REQ_WSS);
    let msg = "{\"method\":\"order.place\"}";
    let rounds = 2_000u64;
    // Session tickets and the first buffers' growth happen in the warm-up.
    let warmup = 50u64;
    let echoed = open_and_echo(&mut lp, &mut ws, id, msg, (warmup, rounds), alloc::watch);
    let allocs = alloc::here();
    eprintln!(
        "wss: {rounds} echoed messages, {allocs} allocations ({:.2} per message)",
        allocs as f64 / rounds as f64
    );
    assert_eq!(echoed, rounds + warmup);
    // One record written (rustls encrypts into a new buffer) and one read (rustls
    // copies the plaintext out into a new buffer) per echoed message.
    assert_eq!(
        allocs,
        2 * rounds,
        "allocations per echoed message over TLS"
    );
    let t = lp.now();
    ws.session_mut(id)
        .unwrap()
        .close(1000, "", Class::Normal, lp.budget_mut(), t)
        .unwrap();
    ws.flush(id, lp.budget_mut(), t);
    assert_eq!(server.join().unwrap(), rounds + warmup);
    assert_eq!(
        lp.budget().stats(limits.messages).unwrap().admitted,
        rounds + warmup + 1
    );
}

/// A caller's own verifier, built on purpose through rustls's `dangerous()` API:
/// it ignores the name and accepts any chain that carries the pinned CA.
#[derive(Debug)]
struct PinnedCa {
    ca: rustls::pki_types::CertificateDer<'static>,
    algs: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl rustls::client::danger::ServerCertVerifier for PinnedCa {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        if intermediates.iter().any(|c| c.as_ref() == self.ca.as_ref()) {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algs.supported_schemes()
    }
}

#[test]
fn only_a_callers_own_verifier_accepts_another_name() {
    let pki = Pki::new();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(PinnedCa {
        ca: pki.ca_der.clone(),
        algs: provider.signature_verification_algorithms,
    });
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    // The same name the default verification refuses (see above).
    let tls = TlsConfig::from_client_config(Arc::new(config), "venue.example").unwrap();
    let server_cfg = pki.server.clone();
    let (addr, server) = serve(move |l| {
        let mut p = tls_accept(&l, server_cfg).expect("TLS handshake");
        p.handshake();
        let close = p.read_frame().expect("the client's close");
        p.write_frame(0x8, &1000u16.to_be_bytes());
        p.expect_end();
        close.opcode
    });
    let (mut lp, mut app, limits) = setup(addr, tls, WsConfig::default(), |ev| match ev {
        Ev::Open => Then::Close,
        Ev::Closed(..) => Then::Stop,
        _ => Then::Nothing,
    });
    lp.run(&mut app).unwrap();
    assert_eq!(
        app.events,
        vec![
            Ev::Open,
            Ev::Closed(Cause::Local, Some(1000), String::new())
        ]
    );
    assert_eq!(server.join().unwrap(), 0x8);
    let c = lp.budget().stats(limits.connects).unwrap();
    assert_eq!((c.admitted, c.refunds, c.used), (1, 0, 1));
}
