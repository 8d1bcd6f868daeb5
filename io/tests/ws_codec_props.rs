//! Property tests of the frame codec and the session over arbitrary bytes: the
//! in-`cargo test` twin of the fuzz target `fuzz/fuzz_targets/ws_frames.rs`
//! (bounded: a few seconds). Never a panic; a header parse on a prefix never
//! contradicts the parse of the whole; encode/parse round-trips; a fragmented
//! message with control frames in between comes out whole.

use base64::Engine;
use ergon_io::core::{Budget, Class, Part, Spec};
use ergon_io::ws::frame::{self, apply_mask, Opcode, Role};
use ergon_io::ws::{Session, State, Upgrade, WsConfig, WsEvent};
use proptest::prelude::*;
use sha1::{Digest, Sha1};

/// A session past a good handshake, with a small message bound.
fn open_session(max_message: usize) -> (Session, Budget) {
    let mut b = Budget::builder();
    let ip = b.add("ip", Spec::gate()).unwrap();
    let msgs = b
        .add("messages", Spec::sliding(1 << 30, 1_000_000_000, 10))
        .unwrap();
    let mut budget = b.build(0).unwrap();
    let config = WsConfig {
        max_message,
        tx_capacity: 4096,
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
    let text = String::from_utf8(s.poll_transmit().unwrap().to_vec()).unwrap();
    let n = text.len();
    s.handle_written(n, &mut budget, 0);
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
    s.handle_input(answer.as_bytes());
    assert_eq!(s.poll_event(&mut budget, 0), Some(WsEvent::Open));
    (s, budget)
}

#[derive(Debug, PartialEq)]
enum Got {
    Text(String),
    Binary(Vec<u8>),
    Pong(Vec<u8>),
    Closed,
}

/// Feeds `bytes` in chunks of `chunk` bytes, draining events and writes.
fn feed(s: &mut Session, budget: &mut Budget, bytes: &[u8], chunk: usize) -> Vec<Got> {
    let mut got = Vec::new();
    let mut at = 0;
    let mut now = 0;
    let mut stalls = 0;
    while at < bytes.len() && stalls < 3 {
        now += 1_000;
        let end = (at + chunk).min(bytes.len());
        let n = s.handle_input(&bytes[at..end]);
        stalls = if n == 0 { stalls + 1 } else { 0 };
        at += n;
        while let Some(ev) = s.poll_event(budget, now) {
            got.push(match ev {
                WsEvent::Text(t) => Got::Text(t.to_string()),
                WsEvent::Binary(b) => Got::Binary(b.to_vec()),
                WsEvent::Pong(p) => Got::Pong(p.to_vec()),
                WsEvent::Closed(_) => Got::Closed,
                other => panic!("unexpected {other:?}"),
            });
        }
        while let Some(out) = s.poll_transmit() {
            let n = out.len();
            // Every frame we write is a valid masked client frame.
            let mut rest = out;
            while !rest.is_empty() {
                let (h, hl) = frame::parse_header(rest, Role::Server, 1 << 20)
                    .expect("our frames are valid")
                    .expect("our frames are whole");
                rest = &rest[hl + h.len as usize..];
            }
            s.handle_written(n, budget, now);
        }
        if s.state() == State::Closed {
            break;
        }
    }
    got
}

fn server_frame(fin: bool, op: Opcode, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; frame::frame_len(payload.len(), false)];
    frame::encode(&mut out, fin, op, payload, None).unwrap();
    out
}

proptest! {
    #![proptest_config(fixed_seed(256))]

    #[test]
    fn header_parse_never_panics_and_prefixes_agree(
        bytes in proptest::collection::vec(any::<u8>(), 0..24),
        server in any::<bool>(),
        max in prop_oneof![Just(u64::MAX), 0u64..100_000],
    ) {
        let role = if server { Role::Server } else { Role::Client };
        let whole = frame::parse_header(&bytes, role, max);
        if let Ok(Some((h, n))) = whole {
            prop_assert!(n <= bytes.len() && n <= frame::MAX_HEADER);
            prop_assert!(h.len <= max);
            prop_assert!(!h.opcode.is_control() || (h.fin && h.len <= 125));
            prop_assert_eq!(h.mask.is_some(), server);
        }
        for cut in 0..bytes.len() {
            let part = frame::parse_header(&bytes[..cut], role, max);
            prop_assert!(part == Ok(None) || part == whole, "prefix {} gave {:?}, whole {:?}", cut, part, whole);
        }
    }

    #[test]
    fn encode_then_parse_round_trips(
        payload in prop_oneof![
            8 => proptest::collection::vec(any::<u8>(), 0..300),
            1 => proptest::collection::vec(any::<u8>(), 65_530..65_540),
        ],
        op in prop_oneof![Just(Opcode::Text), Just(Opcode::Binary), Just(Opcode::Continuation)],
        fin in any::<bool>(),
        mask in any::<[u8; 4]>(),
    ) {
        let mut out = vec![0u8; frame::frame_len(payload.len(), true)];
        let n = frame::encode(&mut out, fin, op, &payload, Some(mask)).unwrap();
        prop_assert_eq!(n, out.len());
        let (h, hl) = frame::parse_header(&out, Role::Server, u64::MAX).unwrap().unwrap();
        prop_assert_eq!((h.fin, h.opcode, h.mask, h.len), (fin, op, Some(mask), payload.len() as u64));
        let mut body = out[hl..].to_vec();
        apply_mask(&mut body, mask);
        prop_assert_eq!(body, payload);
    }

    #[test]
    fn session_survives_arbitrary_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
        chunk in 1usize..64,
    ) {
        let (mut s, mut budget) = open_session(256);
        let got = feed(&mut s, &mut budget, &bytes, chunk);
        // At most one Closed, and it is the last event.
        let closed = got.iter().filter(|g| **g == Got::Closed).count();
        prop_assert!(closed <= 1);
        if closed == 1 {
            prop_assert_eq!(got.last(), Some(&Got::Closed));
            prop_assert_eq!(s.state(), State::Closed);
        }
    }

    #[test]
    fn fragmented_messages_come_out_whole(
        msgs in proptest::collection::vec(
            (any::<bool>(), proptest::collection::vec(any::<u8>(), 0..300), 1usize..5, any::<bool>()),
            1..6,
        ),
        chunk in 1usize..200,
    ) {
        let (mut s, mut budget) = open_session(1024);
        let mut wire = Vec::new();
        let mut want = Vec::new();
        for (text, data, pieces, ping) in &msgs {
            let data: Vec<u8> = if *text {
                String::from_utf8_lossy(data).into_owned().into_bytes()
            } else {
                data.clone()
            };
            if data.len() > 1024 {
                continue;
            }
            let op = if *text { Opcode::Text } else { Opcode::Binary };
            let size = data.len().div_ceil(*pieces).max(1);
            let parts: Vec<&[u8]> = if data.is_empty() { vec![&[][..]] } else { data.chunks(size).collect() };
            for (i, p) in parts.iter().enumerate() {
                let first = i == 0;
                let last = i + 1 == parts.len();
                wire.extend(server_frame(last, if first { op } else { Opcode::Continuation }, p));
                if *ping && !last {
                    wire.extend(server_frame(true, Opcode::Ping, b"hb"));
                    wire.extend(server_frame(true, Opcode::Pong, b"pg"));
                    want.push(Got::Pong(b"pg".to_vec()));
                }
            }
            want.push(if *text {
                Got::Text(String::from_utf8(data).unwrap())
            } else {
                Got::Binary(data)
            });
        }
        let got = feed(&mut s, &mut budget, &wire, chunk);
        prop_assert_eq!(got, want);
        prop_assert_eq!(s.state(), State::Open);
    }
}

/// `cases` cases from a fixed seed, so every run checks the same inputs (determinism is
/// a rule of the house); set `PROPTEST_RNG_SEED` to explore others.
fn fixed_seed(cases: u32) -> ProptestConfig {
    let default = ProptestConfig::default();
    let rng_seed = match default.rng_seed {
        proptest::test_runner::RngSeed::Random => {
            proptest::test_runner::RngSeed::Fixed(0x0065_7267_6f6e)
        }
        seed => seed,
    };
    ProptestConfig {
        cases,
        rng_seed,
        ..default
    }
}
