//! Zero allocation per message in steady state: a counting allocator watches a
//! session send and receive text, binary, fragmented messages with a ping in
//! between (the pong charged and queued) and requests, 10,000 rounds, all in
//! memory; then the TCP shell ([`WsClient`]) over a loopback socket, 2,000 echoed
//! messages. Run in release by CI (`cargo test --workspace --release`); it holds
//! in debug too.

#[path = "common/alloc.rs"]
mod alloc;
mod ws_common;

use alloc::Counting;
use base64::Engine;
use ergon_io::core::{Budget, Builder, Class, Part, Spec};
use ergon_io::ws::{Session, Upgrade, WsClient, WsConfig, WsEvent};
use sha1::{Digest, Sha1};
use ws_common::{echo_loop, open_and_echo};

#[global_allocator]
static GLOBAL: Counting = Counting::new();

fn frame(fin: bool, opcode: u8, payload: &[u8], out: &mut Vec<u8>) {
    out.push((if fin { 0x80 } else { 0 }) | opcode);
    assert!(payload.len() < 126);
    out.push(payload.len() as u8);
    out.extend_from_slice(payload);
}

/// Writes everything the session has to send; returns the byte count.
fn drain_tx(s: &mut Session, budget: &mut Budget, now: i64) -> usize {
    let mut total = 0;
    while let Some(b) = s.poll_transmit() {
        // Write in two pieces, as a socket may.
        let n = b.len().div_ceil(2);
        total += n;
        s.handle_written(n, budget, now);
    }
    total
}

/// The session's buckets in both tests: an IP gate, 10 connects a minute,
/// messages without a practical limit. Returns the connect and message parts.
fn ws_buckets(b: &mut Builder) -> ([Part; 2], [Part; 2]) {
    let ip = b.add("ip", Spec::gate()).unwrap();
    let connects = b
        .add("connects", Spec::sliding(10, 60_000_000_000, 60))
        .unwrap();
    let messages = b
        .add("messages", Spec::sliding(1 << 40, 1_000_000_000, 10))
        .unwrap();
    (
        [Part::new(ip, 0), Part::new(connects, 1)],
        [Part::new(ip, 0), Part::new(messages, 1)],
    )
}

#[test]
fn steady_state_allocates_nothing() {
    let mut b = Budget::builder();
    let (connect, message) = ws_buckets(&mut b);
    let orders = b.add("orders", Spec::in_flight(8)).unwrap();
    let mut budget = b.build(0).unwrap();
    let mut s = Session::new(WsConfig::default(), &budget, &connect, &message, 42).unwrap();
    let req = Upgrade {
        host: "venue",
        path: "/ws",
        headers: &[],
    };
    s.connect(&req, Class::Normal, &mut budget, 0).unwrap();
    let request = String::from_utf8(s.poll_transmit().unwrap().to_vec()).unwrap();
    drain_tx(&mut s, &mut budget, 0);
    let key = request
        .lines()
        .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
        .unwrap();
    let mut h = Sha1::new();
    h.update(key.as_bytes());
    h.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    let accept = base64::engine::general_purpose::STANDARD.encode(h.finalize());
    let answer = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    assert_eq!(s.handle_input(answer.as_bytes()), answer.len());
    assert_eq!(s.poll_event(&mut budget, 0), Some(WsEvent::Open));

    // What the server sends each round, prepared outside the counted region.
    let mut incoming = Vec::new();
    frame(
        true,
        0x1,
        b"{\"e\":\"executionReport\",\"s\":\"BTCUSDT\"}",
        &mut incoming,
    );
    frame(false, 0x2, &[1; 100], &mut incoming);
    frame(true, 0x9, b"keepalive", &mut incoming);
    frame(true, 0x0, &[2; 100], &mut incoming);
    frame(true, 0x1, b"{\"id\":1,\"status\":200}", &mut incoming);

    let order = [Part::new(orders, 1)];
    let rounds = 10_000u64;
    let warmup = 10u64;
    let (mut texts, mut binaries, mut written) = (0u64, 0u64, 0usize);
    let mut now = 0i64;
    for round in 0..rounds + warmup {
        if round == warmup {
            alloc::watch(true);
        }
        now += 1_000_000;
        s.send_text("{\"method\":\"ping\"}", Class::Normal, &mut budget, now)
            .unwrap();
        s.send_request(
            round,
            "{\"method\":\"order.place\"}",
            &order,
            Class::Normal,
            &mut budget,
            now,
        )
        .unwrap();
        written += drain_tx(&mut s, &mut budget, now);
        let mut fed = 0;
        while fed < incoming.len() {
            fed += s.handle_input(&incoming[fed..]);
            while let Some(ev) = s.poll_event(&mut budget, now) {
                match ev {
                    WsEvent::Text(t) => texts += t.len() as u64,
                    WsEvent::Binary(b) => binaries += b.len() as u64,
                    other => panic!("{other:?}"),
                }
            }
        }
        written += drain_tx(&mut s, &mut budget, now);
        assert!(s.resolve(round, &mut budget, now));
    }
    alloc::watch(false);
    let allocs = alloc::here();
    let total = rounds + warmup;
    let st = s.stats();
    eprintln!(
        "{rounds} rounds: {allocs} allocations; {} frames sent, {} pongs, {written} bytes written",
        st.frames_sent, st.pongs_sent
    );
    assert_eq!(allocs, 0, "allocations in steady state");
    // The work was done: every round's messages and pong.
    assert_eq!(texts, total * (37 + 21));
    assert_eq!(binaries, total * 200);
    assert_eq!(st.pongs_sent, total);
    assert_eq!(st.frames_sent, total * 3);
    assert_eq!(budget.stats(orders).unwrap().used, 0);

    // The counter sees allocations at all.
    alloc::watch(true);
    let v = std::hint::black_box(vec![0u8; 64]);
    alloc::watch(false);
    drop(v);
    assert_eq!(alloc::here(), 1, "the counting allocator counts");
}

#[test]
fn tcp_shell_steady_state_allocates_nothing() {
    use std::io::{Read, Write};
    use std::time::Duration;

    // An echo server: the client thread is the one counted.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut sock, _) = listener.accept().unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let head_end = loop {
            let n = sock.read(&mut chunk).unwrap();
            buf.extend_from_slice(&chunk[..n]);
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
        };
        let head = String::from_utf8(buf[..head_end].to_vec()).unwrap();
        buf.drain(..head_end);
        let key = head
            .lines()
            .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
            .unwrap();
        let mut h = Sha1::new();
        h.update(key.as_bytes());
        h.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
        let accept = base64::engine::general_purpose::STANDARD.encode(h.finalize());
        write!(
            sock,
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
        )
        .unwrap();
        let mut echoed = 0;
        loop {
            // Client frames: short, masked; echo the payload unmasked.
            while buf.len() >= 6 && buf.len() >= 6 + usize::from(buf[1] & 0x7F) {
                let len = usize::from(buf[1] & 0x7F);
                let op = buf[0] & 0x0F;
                let mask = [buf[2], buf[3], buf[4], buf[5]];
                let payload: Vec<u8> = buf[6..6 + len]
                    .iter()
                    .enumerate()
                    .map(|(i, b)| b ^ mask[i % 4])
                    .collect();
                buf.drain(..6 + len);
                if op == 0x8 {
                    return echoed;
                }
                let mut out = vec![0x80 | op, len as u8];
                out.extend_from_slice(&payload);
                sock.write_all(&out).unwrap();
                echoed += 1;
            }
            let n = sock.read(&mut chunk).unwrap();
            if n == 0 {
                return echoed;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    });

    let mut b = Budget::builder();
    let (connect, message) = ws_buckets(&mut b);
    let budget = b.build(ergon_io::clock::now_ns()).unwrap();
    let session = Session::new(WsConfig::default(), &budget, &connect, &message, 9).unwrap();
    let mut ws = WsClient::new(1);
    let id = ws.add(session, addr);
    let req = Upgrade {
        host: "127.0.0.1",
        path: "/echo",
        headers: &[],
    };
    // The loop watches the socket: no epoll of the client's own.
    let mut lp = echo_loop(budget, &mut ws, id, &req);
    let rounds = 2_000u64;
    let warmup = 10u64;
    let echoed = open_and_echo(
        &mut lp,
        &mut ws,
        id,
        "{\"method\":\"order.place\"}",
        (warmup, rounds),
        alloc::watch,
    );
    let allocs = alloc::here();
    eprintln!("tcp shell: {rounds} echoed messages, {allocs} allocations");
    assert_eq!(allocs, 0, "allocations in steady state");
    assert_eq!(echoed, rounds + warmup);
    let t = lp.now();
    ws.session_mut(id)
        .unwrap()
        .close(1000, "", Class::Normal, lp.budget_mut(), t)
        .unwrap();
    ws.flush(id, lp.budget_mut(), t);
    assert_eq!(server.join().unwrap(), rounds + warmup);
}
