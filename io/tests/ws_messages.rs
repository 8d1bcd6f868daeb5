//! Messages over a loopback server: text and binary, fragmentation with control
//! frames in between, ping/pong, close codes, and every way a server can break the
//! protocol (oversize frames, invalid UTF-8, reserved bits ...), each of which must
//! close the connection with the right code and never panic.

mod ws_common;

use ergon_io::core::{Budget, Class, Part, Spec, MAX_PARTS};
use ergon_io::ws::{Cause, ProtocolError, SendError, WsConfig};
use ws_common::*;

#[test]
fn text_and_binary_round_trip_masked() {
    let big: Vec<u8> = (0..70_000u32).map(|i| (i * 7) as u8).collect();
    let big2 = big.clone();
    let (addr, server) = serve(move |l| {
        let mut p = Peer::accept(&l);
        p.handshake();
        let frames: Vec<Frame> = (0..3).map(|_| p.read_frame().unwrap()).collect();
        for f in &frames {
            p.write_frame(true, f.opcode, &f.payload);
        }
        p.write_frame(true, 0x8, &1000u16.to_be_bytes());
        let (code, _) = p.read_until_close();
        assert_eq!(code, Some(1000));
        frames
    });
    let config = WsConfig {
        tx_capacity: 128 << 10,
        ..WsConfig::default()
    };
    let (mut d, limits) = driver_with(config, 10, 10);
    d.connect(addr, &REQ).unwrap();
    d.run_until(IO_TIMEOUT, |e| *e == Ev::Open);
    let now = d.now();
    let s = &mut d.session;
    assert_eq!(
        s.send_binary(&[0; 200 << 10], Class::Normal, &mut d.budget, now),
        Err(SendError::TooBig)
    );
    s.send_text("hi ✓", Class::Normal, &mut d.budget, now)
        .unwrap();
    s.send_binary(&[0, 1, 2, 255], Class::Normal, &mut d.budget, now)
        .unwrap();
    s.send_binary(&big2, Class::Bulk, &mut d.budget, now)
        .unwrap();
    let evs = d.run_until_closed();
    assert_eq!(
        evs,
        vec![
            Ev::Text("hi ✓".into()),
            Ev::Binary(vec![0, 1, 2, 255]),
            Ev::Binary(big),
            Ev::Closed(Cause::Peer, Some(1000), String::new()),
        ]
    );
    let frames = server.join().unwrap();
    assert_eq!(
        frames.iter().map(|f| (f.fin, f.opcode)).collect::<Vec<_>>(),
        vec![(true, 1), (true, 2), (true, 2)]
    );
    assert_ne!(frames[0].mask, frames[1].mask, "a fresh mask per frame");
    // Three messages and the close echo, each charged once.
    assert_eq!(d.budget.stats(limits.messages).unwrap().admitted, 4);
    assert_eq!(d.session.stats().frames_sent, 4);
}

#[test]
fn fragmented_messages_with_control_frames_between() {
    let (addr, server) = serve(|l| {
        let mut p = Peer::accept(&l);
        p.handshake();
        let text = "Hello wörld".as_bytes();
        // The 'ö' (2 bytes) is cut across two fragments: only the whole message
        // must be UTF-8.
        let cut = text.iter().position(|&b| b >= 0x80).unwrap() + 1;
        p.write_frame(false, 0x1, &text[..3]);
        p.write_frame(true, 0x9, b"p1");
        p.write_frame(false, 0x0, &text[3..cut]);
        p.write_frame(true, 0xA, b"unsolicited");
        p.write_frame(true, 0x0, &text[cut..]);
        p.write_frame(false, 0x2, &[1, 2]);
        p.write_frame(false, 0x0, &[]);
        p.write_frame(true, 0x9, b"p2");
        p.write_frame(true, 0x0, &[3]);
        let pongs: Vec<Frame> = (0..2).map(|_| p.read_frame().unwrap()).collect();
        p.write_frame(true, 0x8, &1000u16.to_be_bytes());
        p.read_until_close();
        pongs
    });
    let (mut d, limits) = driver();
    d.connect(addr, &REQ).unwrap();
    let evs = d.run_until_closed();
    assert_eq!(
        evs,
        vec![
            Ev::Open,
            Ev::Pong(b"unsolicited".to_vec()),
            Ev::Text("Hello wörld".into()),
            Ev::Binary(vec![1, 2, 3]),
            Ev::Closed(Cause::Peer, Some(1000), String::new()),
        ]
    );
    let pongs = server.join().unwrap();
    assert_eq!(
        pongs
            .iter()
            .map(|f| (f.opcode, f.payload.clone()))
            .collect::<Vec<_>>(),
        vec![(0xA, b"p1".to_vec()), (0xA, b"p2".to_vec())]
    );
    let st = d.session.stats();
    assert_eq!(
        (st.pings_received, st.pongs_sent, st.pongs_delayed),
        (2, 2, 0)
    );
    // Two pongs and the close echo charged.
    assert_eq!(d.budget.stats(limits.messages).unwrap().admitted, 3);
}

#[test]
fn our_ping_gets_its_pong() {
    let (addr, server) = serve(|l| {
        let mut p = Peer::accept(&l);
        p.handshake();
        let ping = p.read_frame().unwrap();
        assert_eq!(ping.opcode, 0x9);
        p.write_frame(true, 0xA, &ping.payload);
        p.write_frame(true, 0x8, &[]);
        let (code, _) = p.read_until_close();
        code
    });
    let (mut d, _) = driver();
    d.connect(addr, &REQ).unwrap();
    d.run_until(IO_TIMEOUT, |e| *e == Ev::Open);
    let now = d.now();
    d.session
        .send_ping(b"abc", Class::Normal, &mut d.budget, now)
        .unwrap();
    assert_eq!(
        d.session
            .send_ping(&[0; 126], Class::Normal, &mut d.budget, now),
        Err(SendError::TooBig)
    );
    let evs = d.run_until_closed();
    assert_eq!(
        evs,
        vec![
            Ev::Pong(b"abc".to_vec()),
            Ev::Closed(Cause::Peer, None, String::new())
        ]
    );
    // An empty close is echoed empty.
    assert_eq!(server.join().unwrap(), None);
}

#[test]
fn close_codes_are_echoed_and_checked() {
    let (addr, server) = serve(|l| {
        let mut seen = Vec::new();
        let mut p = Peer::accept(&l);
        p.handshake();
        let mut close = 4000u16.to_be_bytes().to_vec();
        close.extend_from_slice(b"custom reason");
        p.write_frame(true, 0x8, &close);
        seen.push(p.read_until_close().0);
        p.expect_eof();
        // 1005 may never be sent on the wire.
        let mut p = Peer::accept(&l);
        p.handshake();
        p.write_frame(true, 0x8, &1005u16.to_be_bytes());
        seen.push(p.read_until_close().0);
        p.expect_eof();
        seen
    });
    let (mut d, _) = driver();
    d.connect(addr, &REQ).unwrap();
    assert_eq!(
        d.run_until_closed(),
        vec![
            Ev::Open,
            Ev::Closed(Cause::Peer, Some(4000), "custom reason".into())
        ]
    );
    d.connect(addr, &REQ).unwrap();
    assert_eq!(
        d.run_until_closed(),
        vec![
            Ev::Open,
            Ev::Closed(
                Cause::Protocol(ProtocolError::BadCloseCode(1005)),
                Some(1002),
                String::new()
            )
        ]
    );
    assert_eq!(server.join().unwrap(), vec![Some(4000), Some(1002)]);
}

#[test]
fn our_close_code_is_checked_and_a_silent_server_times_out() {
    let (addr, server) = serve(|l| {
        let mut p = Peer::accept(&l);
        p.handshake();
        let (code, _) = p.read_until_close();
        // Never answers the close.
        p.expect_eof();
        code
    });
    let config = WsConfig {
        close_timeout_ns: 200_000_000,
        ..WsConfig::default()
    };
    let (mut d, _) = driver_with(config, 10, 10);
    d.connect(addr, &REQ).unwrap();
    d.run_until(IO_TIMEOUT, |e| *e == Ev::Open);
    let now = d.now();
    let s = &mut d.session;
    assert_eq!(
        s.close(1006, "", Class::Normal, &mut d.budget, now),
        Err(SendError::BadCloseCode(1006))
    );
    assert_eq!(
        s.close(1000, &"x".repeat(124), Class::Normal, &mut d.budget, now),
        Err(SendError::TooBig)
    );
    s.close(3001, "bye", Class::Normal, &mut d.budget, now)
        .unwrap();
    assert_eq!(
        s.send_text("late", Class::Normal, &mut d.budget, now),
        Err(SendError::NotOpen)
    );
    assert_eq!(
        d.run_until_closed(),
        vec![Ev::Closed(Cause::Timeout, None, String::new())]
    );
    d.stream = None;
    assert_eq!(server.join().unwrap(), Some(3001));
}

/// Connects, lets the server write `bytes` after the handshake, returns the events
/// and the close code the server then read.
fn server_sends(config: WsConfig, bytes: Vec<u8>) -> (Vec<Ev>, Option<u16>) {
    let (addr, server) = serve(move |l| {
        let mut p = Peer::accept(&l);
        p.handshake();
        p.write_raw(&bytes);
        let (code, _) = p.read_until_close();
        p.expect_eof();
        code
    });
    let (mut d, _) = driver_with(config, 10, 10);
    d.connect(addr, &REQ).unwrap();
    let evs = d.run_until_closed();
    // The close frame is flushed and the socket dropped once finished.
    assert!(d.session.is_finished(), "{evs:?}");
    assert!(d.stream.is_none());
    (evs, server.join().unwrap())
}

fn expect_failure(config: WsConfig, bytes: Vec<u8>, e: ProtocolError) {
    let (evs, code) = server_sends(config, bytes.clone());
    let want = e.close_code();
    assert_eq!(
        evs.last(),
        Some(&Ev::Closed(Cause::Protocol(e), Some(want), String::new())),
        "bytes {bytes:02x?}: {evs:?}"
    );
    assert_eq!(code, Some(want), "the server reads close {want}");
}

#[test]
fn oversize_frames_and_messages_close_with_1009() {
    let config = WsConfig {
        max_message: 1024,
        ..WsConfig::default()
    };
    expect_failure(
        config,
        server_frame(true, 0x2, &[0; 1025]),
        ProtocolError::FrameTooBig,
    );
    let mut frags = server_frame(false, 0x2, &[0; 600]);
    frags.extend(server_frame(true, 0x0, &[0; 600]));
    expect_failure(config, frags, ProtocolError::MessageTooBig);
    // Exactly the bound passes.
    let (evs, code) = server_sends(config, {
        let mut b = server_frame(true, 0x2, &[7; 1024]);
        b.extend(server_frame(true, 0x8, &1000u16.to_be_bytes()));
        b
    });
    assert_eq!(evs[1], Ev::Binary(vec![7; 1024]));
    assert_eq!(code, Some(1000));
}

#[test]
fn invalid_utf8_closes_with_1007() {
    let config = WsConfig::default();
    expect_failure(
        config,
        server_frame(true, 0x1, b"ok\xFF"),
        ProtocolError::InvalidUtf8,
    );
    // Cut in the middle of a character, and never completed.
    let mut frags = server_frame(false, 0x1, "é".as_bytes().split_at(1).0);
    frags.extend(server_frame(true, 0x0, b"x"));
    expect_failure(config, frags, ProtocolError::InvalidUtf8);
    let mut close = 1000u16.to_be_bytes().to_vec();
    close.extend_from_slice(b"\xC3\x28");
    expect_failure(
        config,
        server_frame(true, 0x8, &close),
        ProtocolError::InvalidUtf8,
    );
}

#[test]
fn protocol_errors_close_with_1002() {
    let c = WsConfig::default();
    let mut rsv = server_frame(true, 0x1, b"x");
    rsv[0] |= 0x40;
    expect_failure(c, rsv, ProtocolError::ReservedBits);
    expect_failure(
        c,
        server_frame(true, 0x3, b"x"),
        ProtocolError::BadOpcode(3),
    );
    expect_failure(
        c,
        server_frame(true, 0xB, b""),
        ProtocolError::BadOpcode(0xB),
    );
    // A masked frame from the server.
    expect_failure(
        c,
        vec![0x81, 0x81, 1, 2, 3, 4, b'x' ^ 1],
        ProtocolError::MaskedFrame,
    );
    expect_failure(
        c,
        server_frame(true, 0x9, &[0; 126]),
        ProtocolError::ControlTooLong,
    );
    expect_failure(
        c,
        server_frame(false, 0x9, b"x"),
        ProtocolError::ControlFragmented,
    );
    expect_failure(
        c,
        server_frame(true, 0x0, b"x"),
        ProtocolError::UnexpectedContinuation,
    );
    let mut two = server_frame(false, 0x1, b"a");
    two.extend(server_frame(true, 0x1, b"b"));
    expect_failure(c, two, ProtocolError::UnfinishedMessage);
    expect_failure(c, vec![0x88, 1, 3], ProtocolError::BadClosePayload);
    expect_failure(
        c,
        vec![0x82, 126, 0, 5, 1, 2, 3, 4, 5],
        ProtocolError::NonMinimalLength,
    );
}

#[test]
fn a_request_with_more_parts_than_a_ticket_holds_is_refused_not_a_panic() {
    let mut b = Budget::builder();
    let buckets: Vec<_> = (0..2 * MAX_PARTS + 1)
        .map(|i| b.add(&format!("b{i}"), Spec::sliding(100, SEC, 4)).unwrap())
        .collect();
    let mut budget = b.build(0).unwrap();
    let message: Vec<Part> = buckets[..MAX_PARTS]
        .iter()
        .map(|&k| Part::new(k, 1))
        .collect();
    let mut s = open_in_memory_with(WsConfig::default(), &mut budget, &[], &message);
    let used = |budget: &Budget| -> Vec<u64> {
        buckets
            .iter()
            .map(|&k| budget.stats(k).unwrap().used)
            .collect()
    };
    let before = used(&budget);
    // 8 message parts and 9 more of the request's own: 17, where the old code
    // pushed into an array of 16 and panicked on the loop thread.
    let extra: Vec<Part> = buckets[MAX_PARTS..]
        .iter()
        .map(|&k| Part::new(k, 1))
        .collect();
    for n in [1, MAX_PARTS, MAX_PARTS + 1] {
        assert_eq!(
            s.send_request(7, "{}", &extra[..n], Class::Normal, &mut budget, 0),
            Err(SendError::TooManyParts),
            "{n} extra parts"
        );
    }
    // Nothing charged, nothing queued, the session still works.
    assert_eq!(used(&budget), before);
    assert!(s.poll_transmit().is_none());
    s.send_request(7, "{}", &[], Class::Normal, &mut budget, 0)
        .unwrap();
    assert!(s.poll_transmit().is_some());
}
