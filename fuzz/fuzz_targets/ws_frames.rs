//! WebSocket bytes from a server into the sans-IO session, in pieces whose sizes
//! the input chooses, under a small message bound so every limit is reachable; the
//! same bytes into the bare header parser for both roles. Must never panic; the
//! session's own output must always be valid masked client frames; a connection
//! ends at most once, with Closed as its last event.
//!
//! The first byte steers: bits 0-3 the piece size, bit 4 the message bound, bit 5
//! whether the bytes are the upgrade response itself (the handshake parser) or
//! frames after a good one (a non-101 answer is then kept and read back through
//! `Session::rejection`). `io/tests/ws_codec_props.rs` is its cargo-test twin.
#![no_main]

use base64::Engine;
use ergon_io::core::{Budget, Class, Part, Spec};
use ergon_io::ws::frame::{self, Role};
use ergon_io::ws::{Session, State, Upgrade, WsConfig, WsEvent};
use ergon_venues::response::Header;
use libfuzzer_sys::fuzz_target;
use sha1::{Digest, Sha1};

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, bytes)) = data.split_first() else {
        return;
    };
    for role in [Role::Client, Role::Server] {
        for max in [0, 125, 1 << 16, u64::MAX] {
            if let Ok(Some((h, n))) = frame::parse_header(bytes, role, max) {
                assert!(n <= bytes.len() && n <= frame::MAX_HEADER && h.len <= max);
                assert!(!h.opcode.is_control() || (h.fin && h.len <= 125));
            }
        }
    }

    let step = 1 + usize::from(ctl & 0x0f);
    let max_message = if ctl & 0x10 != 0 { 125 } else { 4096 };
    let mut b = Budget::builder();
    let ip = b.add("ip", Spec::gate()).unwrap();
    // Tight enough that pongs get delayed and coalesced.
    let msgs = b.add("messages", Spec::sliding(3, 1_000_000, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    let config = WsConfig {
        max_message,
        max_handshake: 512,
        tx_capacity: 1024,
        ..WsConfig::default()
    };
    let parts = [Part::new(ip, 0), Part::new(msgs, 1)];
    let mut s = Session::new(config, &budget, &parts, &parts, 1).unwrap();
    let req = Upgrade {
        host: "h",
        path: "/",
        headers: &[],
    };
    s.connect(&req, Class::Normal, &mut budget, 0).unwrap();
    let request = s.poll_transmit().unwrap().to_vec();
    s.handle_written(request.len(), &mut budget, 0);
    if ctl & 0x20 == 0 {
        let text = String::from_utf8(request).unwrap();
        let key = text
            .lines()
            .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
            .unwrap();
        let mut h = Sha1::new();
        h.update(key.as_bytes());
        h.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
        let accept = base64::engine::general_purpose::STANDARD.encode(h.finalize());
        let answer = format!(
            "HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Accept: {accept}\r\n\r\n"
        );
        assert_eq!(s.handle_input(answer.as_bytes()), answer.len());
        assert_eq!(s.poll_event(&mut budget, 0), Some(WsEvent::Open));
    }

    let mut at = 0;
    let mut now = 0i64;
    let mut closed = 0;
    while at < bytes.len() {
        now += 100_000;
        let end = (at + step).min(bytes.len());
        let n = s.handle_input(&bytes[at..end]);
        at += n;
        while let Some(ev) = s.poll_event(&mut budget, now) {
            assert_eq!(closed, 0, "an event after Closed: {ev:?}");
            if let WsEvent::Closed(_) = ev {
                closed += 1;
            }
        }
        if s.poll_timeout().is_some_and(|t| t <= now) {
            s.handle_timeout(&mut budget, now);
        }
        while let Some(out) = s.poll_transmit() {
            let len = out.len();
            let mut rest = out;
            while !rest.is_empty() {
                let (h, hl) = frame::parse_header(rest, Role::Server, u64::MAX)
                    .expect("our frames are valid")
                    .expect("our frames are whole");
                rest = &rest[hl + h.len as usize..];
            }
            s.handle_written(len, &mut budget, now);
        }
        if s.state() == State::Closed || n == 0 {
            break;
        }
    }
    // The end of the connection: a non-101 upgrade answer with an unframed body
    // ends here, and is then kept whole for the venue adapter.
    s.handle_transport_closed(&mut budget, now);
    while let Some(ev) = s.poll_event(&mut budget, now) {
        assert_eq!(closed, 0, "an event after Closed: {ev:?}");
        if let WsEvent::Closed(_) = ev {
            closed += 1;
        }
    }
    let mut headers = [Header {
        name: &[],
        value: &[],
    }; 32];
    if let Some(r) = s.rejection(&mut headers) {
        assert_ne!(r.status, 101);
        assert!(r.body.len() <= config.max_handshake);
    }
    // Every ping is answered, coalesced into a later answer or counted abandoned;
    // only an open connection may still owe one pong.
    let st = s.stats();
    let settled = st.pongs_sent + st.pongs_coalesced + st.pongs_abandoned;
    let owed = st.pings_received - settled;
    assert!(
        owed == 0 || (owed == 1 && s.state() == State::Open),
        "{st:?}"
    );
});
