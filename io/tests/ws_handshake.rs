//! The opening handshake against a loopback server: the request we write, the
//! accept-key check, bad answers, timeouts, and what a connect attempt charges.

mod ws_common;

use std::time::Duration;

use base64::Engine;
use ergon_io::core::Why;
use ergon_io::ws::{Cause, ConnectError, HandshakeError, Upgrade, WsConfig};
use ergon_venues::response::Header;
use ws_common::*;

#[test]
fn good_accept_key_opens_and_close_handshake_completes() {
    let (addr, server) = serve(|l| {
        let mut p = Peer::accept(&l);
        let key = p.read_request();
        let accept = accept_key(&key);
        // A frame in the same write as the 101: it must not be lost.
        let mut answer = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
        )
        .into_bytes();
        answer.extend(server_frame(true, 0x1, b"hello"));
        p.write_raw(&answer);
        let (code, _) = p.read_until_close();
        p.write_frame(true, 0x8, &1000u16.to_be_bytes());
        p.expect_eof();
        (p.request, key, code)
    });
    let (mut d, limits) = driver();
    let req = Upgrade {
        host: "127.0.0.1",
        path: "/stream?x=1",
        headers: &[("X-Api-Key", "k")],
    };
    d.connect(addr, &req).unwrap();
    let evs = d.run_until(IO_TIMEOUT, |e| matches!(e, Ev::Text(_)));
    assert_eq!(evs, vec![Ev::Open, Ev::Text("hello".into())]);
    let now = d.now();
    d.session
        .close(
            1000,
            "done",
            ergon_io::core::Class::Normal,
            &mut d.budget,
            now,
        )
        .unwrap();
    let evs = d.run_until_closed();
    assert_eq!(
        evs,
        vec![Ev::Closed(Cause::Local, Some(1000), String::new())]
    );
    let (request, key, code) = server.join().unwrap();
    assert_eq!(code, Some(1000));
    assert!(
        request.starts_with("GET /stream?x=1 HTTP/1.1\r\n"),
        "{request}"
    );
    for line in [
        "Host: 127.0.0.1\r\n",
        "Upgrade: websocket\r\n",
        "Connection: Upgrade\r\n",
        "Sec-WebSocket-Version: 13\r\n",
        "X-Api-Key: k\r\n",
    ] {
        assert!(request.contains(line), "{line:?} missing in {request}");
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&key)
        .unwrap();
    assert_eq!(raw.len(), 16, "the key is 16 random bytes");
    // One connect charged, and two frames (the close) on the message bucket.
    assert_eq!(d.budget.stats(limits.connects).unwrap().admitted, 1);
    assert_eq!(d.budget.stats(limits.messages).unwrap().admitted, 1);
    assert_eq!(d.session.stats().connects, 1);
}

fn refused_answer(answer: fn(&str) -> String) -> Vec<Ev> {
    let (addr, server) = serve(move |l| {
        let mut p = Peer::accept(&l);
        let key = p.read_request();
        p.write_raw(answer(&key).as_bytes());
        p.expect_eof();
    });
    let (mut d, _) = driver();
    d.connect(addr, &REQ).unwrap();
    let evs = d.run_until_closed();
    // The client closes the socket after a failed handshake.
    assert!(d.stream.is_none() || d.session.is_finished());
    d.stream = None;
    server.join().unwrap();
    evs
}

#[test]
fn bad_accept_key_fails_the_connection() {
    let evs = refused_answer(|key| {
        let wrong = accept_key(&format!("{key}x"));
        format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Accept: {wrong}\r\n\r\n"
        )
    });
    assert_eq!(
        evs,
        vec![Ev::Closed(
            Cause::Handshake(HandshakeError::BadAccept),
            None,
            String::new()
        )]
    );
}

#[test]
fn missing_upgrade_and_status_are_refused() {
    let evs = refused_answer(|key| {
        format!(
            "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Accept: {}\r\n\r\n",
            accept_key(key)
        )
    });
    assert_eq!(
        evs,
        vec![Ev::Closed(
            Cause::Handshake(HandshakeError::MissingUpgrade),
            None,
            String::new()
        )]
    );
    // Content-Length: 0: the body is over with the head (without it, the body
    // would run until the close, and this server waits for ours).
    let evs = refused_answer(|_| {
        "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 0\r\n\r\n".into()
    });
    assert_eq!(
        evs,
        vec![Ev::Closed(
            Cause::Handshake(HandshakeError::Status(429)),
            None,
            String::new()
        )]
    );
}

const BAN_BODY: &str =
    r#"{"code":-1003,"msg":"Way too many requests; IP(127.0.0.1) banned until 1700000000000."}"#;

/// A server that answers the upgrade 418 with Retry-After and Binance's JSON
/// body, framed by `framing` ("length", or "chunked" and then a close).
fn banned_upgrade(framing: &'static str) {
    let (addr, server) = serve(move |l| {
        let mut p = Peer::accept(&l);
        p.read_request();
        let head = "HTTP/1.1 418 I'm a teapot\r\nRetry-After: 120\r\n\
                    Content-Type: application/json;charset=UTF-8\r\n";
        let answer = match framing {
            "length" => format!("{head}Content-Length: {}\r\n\r\n{BAN_BODY}", BAN_BODY.len()),
            _ => {
                let (a, b) = BAN_BODY.split_at(10);
                format!(
                    "{head}Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
                    a.len(),
                    b.len()
                )
            }
        };
        p.write_raw(answer.as_bytes());
        if framing == "length" {
            p.expect_eof();
        }
    });
    let (mut d, limits) = driver();
    d.connect(addr, &REQ).unwrap();
    let evs = d.run_until_closed();
    assert_eq!(
        evs,
        vec![Ev::Closed(
            Cause::Handshake(HandshakeError::Status(418)),
            None,
            String::new()
        )]
    );
    // The venue's whole word: status, headers and body, for the venue adapter.
    let mut headers = [Header {
        name: &[],
        value: &[],
    }; 32];
    let r = d.session.rejection(&mut headers).expect("the 418 is kept");
    assert_eq!(r.status, 418);
    assert_eq!(r.header("retry-after"), Some(&b"120"[..]), "{framing}");
    assert_eq!(r.body, BAN_BODY.as_bytes(), "{framing}");
    // What the adapter does with a ban (halts the IP gate): the reconnect then
    // waits for the budget instead of knocking on a banned IP.
    let now = d.now();
    d.budget.banned(limits.ip, now + 120 * SEC, now).unwrap();
    d.stream = None;
    match d.connect(addr, &REQ) {
        Err(ConnectError::Limited(l)) => assert_eq!((l.bucket, l.why), (limits.ip, Why::Halted)),
        other => panic!("a reconnect into a ban: {other:?}"),
    }
    assert_eq!(d.budget.stats(limits.connects).unwrap().admitted, 1);
    server.join().unwrap();
}

#[test]
fn a_418_upgrade_hands_over_status_headers_and_body() {
    banned_upgrade("length");
}

#[test]
fn a_chunked_418_upgrade_ended_by_the_close_hands_over_the_body_dechunked() {
    banned_upgrade("chunked");
}

#[test]
fn silent_server_times_the_handshake_out() {
    let (addr, server) = serve(|l| {
        let mut p = Peer::accept(&l);
        p.read_request();
        p.expect_eof();
    });
    let config = WsConfig {
        handshake_timeout_ns: 200_000_000,
        ..WsConfig::default()
    };
    let (mut d, _) = driver_with(config, 10, 10);
    d.connect(addr, &REQ).unwrap();
    let start = std::time::Instant::now();
    let evs = d.run_until_closed();
    assert_eq!(evs, vec![Ev::Closed(Cause::Timeout, None, String::new())]);
    assert!(start.elapsed() >= Duration::from_millis(190));
    d.stream = None;
    server.join().unwrap();
}

#[test]
fn failed_tcp_connect_refunds_the_connect_charge() {
    // Port 1 (tcpmux): nobody listens there, and an ephemeral port of another
    // test's server can never be it.
    let addr: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
    let (mut d, limits) = driver();
    d.connect(addr, &REQ).unwrap();
    let evs = d.run_until_closed();
    assert_eq!(evs, vec![Ev::Closed(Cause::Transport, None, String::new())]);
    let stats = d.budget.stats(limits.connects).unwrap();
    assert_eq!((stats.admitted, stats.refunds, stats.used), (1, 1, 0));
}

#[test]
fn each_connect_sends_a_fresh_key() {
    let (addr, server) = serve(|l| {
        let mut keys = Vec::new();
        for _ in 0..2 {
            let mut p = Peer::accept(&l);
            let key = p.read_request();
            p.answer(&key);
            keys.push(key);
            p.write_frame(true, 0x8, &1001u16.to_be_bytes());
            let (code, _) = p.read_until_close();
            assert_eq!(code, Some(1001), "the client echoes the close code");
            p.expect_eof();
        }
        keys
    });
    let (mut d, limits) = driver();
    for _ in 0..2 {
        d.connect(addr, &REQ).unwrap();
        let evs = d.run_until_closed();
        assert_eq!(
            evs,
            vec![Ev::Open, Ev::Closed(Cause::Peer, Some(1001), String::new())]
        );
        // The echo was written and the socket dropped once the session finished.
        assert!(d.session.is_finished());
        assert!(d.stream.is_none());
    }
    let keys = server.join().unwrap();
    assert_ne!(keys[0], keys[1]);
    assert_eq!(d.budget.stats(limits.connects).unwrap().admitted, 2);
}
