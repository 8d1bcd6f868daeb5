//! Test support for the WebSocket tests: a loopback server written for the tests
//! (std threads and sockets, its own frame code, an independent SHA-1), and a
//! blocking driver that runs a [`Session`] over a real TCP socket following the
//! session's drive order, and ([`app`]) a client of one session run
//! on the event loop.
//!
//! The server's framing is written here on purpose, not taken from `ergon_io::ws`:
//! a shared bug would pass both sides.

#![allow(dead_code)]

pub mod app;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use base64::Engine;
use ergon_io::client::{ClientHandler, Error, RequestId, Sent};
use ergon_io::core::{BucketId, Budget, Class, Flight, Part, Spec, Verdict};
use ergon_io::event_loop::{Context, EventLoop, LoopConfig, Readiness};
use ergon_io::ws::{Cause, ConnectError, Session, Upgrade, WsClient, WsConfig, WsEvent, WsId};
use ergon_venues::response::Response;
use sha1::{Digest, Sha1};

/// Generous: the machine is shared and loaded.
pub const IO_TIMEOUT: Duration = Duration::from_secs(20);

pub const SEC: i64 = 1_000_000_000;

/// Starts a server thread on an ephemeral loopback port running `f`.
pub fn serve<T: Send + 'static>(
    f: impl FnOnce(TcpListener) -> T + Send + 'static,
) -> (SocketAddr, JoinHandle<T>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    (addr, std::thread::spawn(move || f(listener)))
}

/// The accept key a server answers to `key`, computed with the sha1 crate.
pub fn accept_key(key: &str) -> String {
    let mut h = Sha1::new();
    h.update(key.as_bytes());
    h.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    base64::engine::general_purpose::STANDARD.encode(h.finalize())
}

/// A frame as the server read it (unmasked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub fin: bool,
    pub opcode: u8,
    pub payload: Vec<u8>,
    pub mask: [u8; 4],
    pub at: Instant,
}

/// One accepted connection, server side.
pub struct Peer {
    pub stream: TcpStream,
    buf: Vec<u8>,
    pub request: String,
}

impl Peer {
    pub fn accept(listener: &TcpListener) -> Peer {
        let (stream, _) = listener.accept().expect("accept");
        Peer::from_stream(stream)
    }

    /// A thread reading the client's frames on a clone of this connection, up to
    /// and including the first that `last` accepts (or the end of the stream).
    pub fn record_frames(
        &self,
        last: impl Fn(&Frame) -> bool + Send + 'static,
    ) -> JoinHandle<Vec<Frame>> {
        let mut reader = Peer::from_stream(self.stream.try_clone().unwrap());
        std::thread::spawn(move || {
            let mut frames = Vec::new();
            while let Some(f) = reader.read_frame() {
                let done = last(&f);
                frames.push(f);
                if done {
                    break;
                }
            }
            frames
        })
    }

    /// Writes `n` pings (`ping-0`, `ping-1`, ...), one every 20 ms: 50 a second.
    pub fn ping_every_20ms(&mut self, n: usize) {
        let start = Instant::now();
        for i in 0..n {
            let at = start + Duration::from_millis(20 * i as u64);
            // Pacing on the wall clock is the point: a venue's ping rate.
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            self.write_frame(true, 0x9, format!("ping-{i}").as_bytes());
        }
    }

    pub fn from_stream(stream: TcpStream) -> Peer {
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Peer {
            stream,
            buf: Vec::new(),
            request: String::new(),
        }
    }

    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        match self.stream.read(&mut chunk) {
            Ok(0) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
            Err(e) => panic!("server read: {e}"),
        }
    }

    /// Reads the upgrade request; returns its Sec-WebSocket-Key.
    pub fn read_request(&mut self) -> String {
        loop {
            if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head: Vec<u8> = self.buf.drain(..end + 4).collect();
                self.request = String::from_utf8(head).expect("request is text");
                break;
            }
            assert!(self.fill(), "client closed before its request");
        }
        assert!(self.request.starts_with("GET "), "{}", self.request);
        self.request
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("sec-websocket-key")
                    .then(|| value.trim().to_string())
            })
            .expect("a Sec-WebSocket-Key")
    }

    /// Reads the request and answers 101 with the right accept key.
    pub fn handshake(&mut self) {
        let key = self.read_request();
        self.answer(&key);
    }

    /// Answers 101 to a request whose key was `key`.
    pub fn answer(&mut self, key: &str) {
        let accept = accept_key(key);
        self.write_raw(
            format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                 Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
            )
            .as_bytes(),
        );
    }

    pub fn write_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("server write");
    }

    /// Writes an unmasked frame.
    pub fn write_frame(&mut self, fin: bool, opcode: u8, payload: &[u8]) {
        self.write_raw(&server_frame(fin, opcode, payload));
    }

    /// Reads one client frame; checks it is masked. `None` on EOF.
    pub fn read_frame(&mut self) -> Option<Frame> {
        loop {
            if let Some(f) = self.try_parse() {
                return Some(f);
            }
            if !self.fill() {
                return None;
            }
        }
    }

    fn try_parse(&mut self) -> Option<Frame> {
        parse_client_frame(&mut self.buf)
    }

    /// Reads frames until a close; returns its code (None for an empty close) and
    /// the frames before it.
    pub fn read_until_close(&mut self) -> (Option<u16>, Vec<Frame>) {
        let mut before = Vec::new();
        while let Some(f) = self.read_frame() {
            if f.opcode == 0x8 {
                let code = (f.payload.len() >= 2)
                    .then(|| u16::from_be_bytes([f.payload[0], f.payload[1]]));
                return (code, before);
            }
            before.push(f);
        }
        panic!("EOF before a close frame; frames: {before:?}");
    }

    /// Waits for the client to close the socket.
    pub fn expect_eof(&mut self) {
        while self.fill() {}
    }
}

/// Takes one whole client frame off the front of `buf`; checks it is masked.
pub fn parse_client_frame(buf: &mut Vec<u8>) -> Option<Frame> {
    let b = &*buf;
    if b.len() < 2 {
        return None;
    }
    let fin = b[0] & 0x80 != 0;
    assert_eq!(b[0] & 0x70, 0, "client set reserved bits");
    let opcode = b[0] & 0x0F;
    assert!(b[1] & 0x80 != 0, "client frame not masked");
    let (len, mut at) = match b[1] & 0x7F {
        126 if b.len() >= 4 => (u16::from_be_bytes([b[2], b[3]]) as usize, 4),
        127 if b.len() >= 10 => (
            u64::from_be_bytes(b[2..10].try_into().unwrap()) as usize,
            10,
        ),
        126 | 127 => return None,
        n => (n as usize, 2),
    };
    if b.len() < at + 4 + len {
        return None;
    }
    let mask = [b[at], b[at + 1], b[at + 2], b[at + 3]];
    at += 4;
    let payload: Vec<u8> = b[at..at + len]
        .iter()
        .enumerate()
        .map(|(i, x)| x ^ mask[i % 4])
        .collect();
    buf.drain(..at + len);
    Some(Frame {
        fin,
        opcode,
        payload,
        mask,
        at: Instant::now(),
    })
}

/// An unmasked frame as a server writes it.
pub fn server_frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![(if fin { 0x80 } else { 0 }) | opcode];
    let len = payload.len();
    if len < 126 {
        out.push(len as u8);
    } else if len <= 0xFFFF {
        out.push(126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(payload);
    out
}

/// An event with owned payloads, for asserting on.
#[derive(Debug, PartialEq, Eq)]
pub enum Ev {
    Open,
    Text(String),
    Binary(Vec<u8>),
    Pong(Vec<u8>),
    Outcome(u64, Verdict),
    Closed(Cause, Option<u16>, String),
}

impl Ev {
    /// Copies an event out of the session.
    pub fn of(ev: WsEvent<'_>) -> Ev {
        match ev {
            WsEvent::Open => Ev::Open,
            WsEvent::Text(t) => Ev::Text(t.to_string()),
            WsEvent::Binary(b) => Ev::Binary(b.to_vec()),
            WsEvent::Pong(p) => Ev::Pong(p.to_vec()),
            WsEvent::Outcome(o) => Ev::Outcome(o.id, o.verdict),
            WsEvent::Closed(c) => Ev::Closed(c.cause, c.code, c.reason.to_string()),
        }
    }

    pub fn is_closed(&self) -> bool {
        matches!(self, Ev::Closed(..))
    }
}

/// A [`Session`] run over a real TCP socket by a blocking loop that follows the
/// session's drive order. Time is the nanoseconds since the driver was made.
pub struct Driver {
    pub session: Session,
    pub budget: Budget,
    pub stream: Option<TcpStream>,
    t0: Instant,
}

impl Driver {
    pub fn new(session: Session, budget: Budget) -> Driver {
        Driver {
            session,
            budget,
            stream: None,
            t0: Instant::now(),
        }
    }

    pub fn now(&self) -> i64 {
        self.t0.elapsed().as_nanos() as i64
    }

    /// Charges the connect parts; only if the budget admits it, opens the socket.
    pub fn connect(&mut self, addr: SocketAddr, req: &Upgrade<'_>) -> Result<(), ConnectError> {
        let now = self.now();
        self.session
            .connect(req, Class::Normal, &mut self.budget, now)?;
        match TcpStream::connect(addr) {
            Ok(s) => {
                s.set_nodelay(true).unwrap();
                self.stream = Some(s);
            }
            Err(_) => {
                let now = self.now();
                self.session.handle_transport_closed(&mut self.budget, now);
            }
        }
        Ok(())
    }

    /// Writes what the session has to send.
    pub fn flush(&mut self) {
        let Some(stream) = self.stream.as_mut() else {
            return;
        };
        while let Some(bytes) = self.session.poll_transmit() {
            match stream.write(bytes) {
                Ok(n) => {
                    let now = self.t0.elapsed().as_nanos() as i64;
                    self.session.handle_written(n, &mut self.budget, now);
                }
                Err(_) => {
                    self.drop_transport();
                    return;
                }
            }
        }
        if self.session.is_finished() {
            self.stream = None;
        }
    }

    fn drop_transport(&mut self) {
        self.stream = None;
        let now = self.now();
        self.session.handle_transport_closed(&mut self.budget, now);
    }

    /// Runs the loop, collecting events, until `stop` says so for one of them (it
    /// sees each event) or `limit` passes (a failure).
    pub fn run_until(&mut self, limit: Duration, mut stop: impl FnMut(&Ev) -> bool) -> Vec<Ev> {
        let end = Instant::now() + limit;
        let mut out = Vec::new();
        loop {
            assert!(Instant::now() < end, "driver timed out; events: {out:?}");
            let now = self.now();
            if self.session.poll_timeout().is_some_and(|t| now >= t) {
                self.session.handle_timeout(&mut self.budget, now);
            }
            let mut done = self.drain(&mut out, &mut stop);
            self.flush();
            if done {
                return out;
            }
            let now = self.now();
            let wait = self
                .session
                .poll_timeout()
                .map_or(20_000_000, |t| (t - now).clamp(1_000_000, 20_000_000));
            if let Some(stream) = self.stream.as_mut() {
                stream
                    .set_read_timeout(Some(Duration::from_nanos(wait as u64)))
                    .unwrap();
                let buf = self.session.read_buf();
                match stream.read(buf) {
                    Ok(0) => self.drop_transport(),
                    Ok(n) => self.session.handle_read(n),
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                    Err(_) => self.drop_transport(),
                }
            } else {
                // No socket to block on: wait for the session's next deadline,
                // which is on this driver's real clock.
                std::thread::sleep(Duration::from_nanos(wait as u64));
            }
            done = self.drain(&mut out, &mut stop);
            self.flush();
            if done {
                return out;
            }
        }
    }

    fn drain(&mut self, out: &mut Vec<Ev>, stop: &mut impl FnMut(&Ev) -> bool) -> bool {
        let now = self.now();
        let mut done = false;
        while let Some(ev) = self.session.poll_event(&mut self.budget, now) {
            let ev = Ev::of(ev);
            done |= stop(&ev);
            out.push(ev);
        }
        done
    }

    /// Runs until the connection is over (a Closed event).
    pub fn run_until_closed(&mut self) -> Vec<Ev> {
        self.run_until(IO_TIMEOUT, Ev::is_closed)
    }
}

pub const REQ: Upgrade<'static> = Upgrade {
    host: "127.0.0.1",
    path: "/ws",
    headers: &[],
};

/// The buckets of a venue's WebSocket limits, Binance-like: an IP gate, connects
/// per window per IP, messages per second per connection.
pub struct Limits {
    pub ip: BucketId,
    pub connects: BucketId,
    pub messages: BucketId,
}

impl Limits {
    pub fn connect_parts(&self) -> [Part; 2] {
        [Part::new(self.ip, 0), Part::new(self.connects, 1)]
    }

    pub fn message_parts(&self) -> [Part; 2] {
        [Part::new(self.ip, 0), Part::new(self.messages, 1)]
    }
}

/// A budget with `connects` connects per minute and `messages` messages per second
/// (a sliding window of 4 slots: conservative by at most 250 ms).
pub fn budget(connects: u64, messages: u64) -> (Budget, Limits) {
    budget_at(connects, messages, 0)
}

/// [`budget`], built at `now` (the event loop's clock).
pub fn budget_at(connects: u64, messages: u64, now: i64) -> (Budget, Limits) {
    let mut b = Budget::builder();
    let ip = b.add("ip", Spec::gate()).unwrap();
    let connects = b
        .add("ws_connects", Spec::sliding(connects, 60 * SEC, 60))
        .unwrap();
    let messages = b
        .add("ws_messages", Spec::sliding(messages, SEC, 4))
        .unwrap();
    (
        b.build(now).unwrap(),
        Limits {
            ip,
            connects,
            messages,
        },
    )
}

/// A driver with the default config, generous limits and a fixed seed.
pub fn driver_with(config: WsConfig, connects: u64, messages: u64) -> (Driver, Limits) {
    let (budget, limits) = budget(connects, messages);
    let session = Session::new(
        config,
        &budget,
        &limits.connect_parts(),
        &limits.message_parts(),
        0x5EED,
    )
    .unwrap();
    (Driver::new(session, budget), limits)
}

pub fn driver() -> (Driver, Limits) {
    driver_with(WsConfig::default(), 100, 1000)
}

/// The server's 101 answer to the upgrade `request` (with its key's accept
/// key).
pub fn switching(request: &str) -> String {
    let key = request
        .lines()
        .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
        .unwrap();
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        accept_key(key)
    )
}

/// A session past a good handshake, all in memory (no socket), at time 0.
pub fn open_in_memory(config: WsConfig, budget: &mut Budget, limits: &Limits) -> Session {
    open_in_memory_with(
        config,
        budget,
        &limits.connect_parts(),
        &limits.message_parts(),
    )
}

/// [`open_in_memory`] with the session's connect and message parts given.
pub fn open_in_memory_with(
    config: WsConfig,
    budget: &mut Budget,
    connect_parts: &[Part],
    message_parts: &[Part],
) -> Session {
    let mut s = Session::new(config, budget, connect_parts, message_parts, 3).unwrap();
    s.connect(&REQ, Class::Normal, budget, 0).unwrap();
    let request = String::from_utf8(s.poll_transmit().unwrap().to_vec()).unwrap();
    s.handle_written(request.len(), budget, 0);
    let answer = switching(&request);
    assert_eq!(s.handle_input(answer.as_bytes()), answer.len());
    assert_eq!(s.poll_event(budget, 0), Some(WsEvent::Open));
    s
}

/// Takes what the session wants to write, as (opcode, unmasked payload) frames.
pub fn take_frames(s: &mut Session, budget: &mut Budget, now: i64) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(bytes) = s.poll_transmit() {
        let n = bytes.len();
        let mut buf = bytes.to_vec();
        while let Some(f) = parse_client_frame(&mut buf) {
            out.push((f.opcode, f.payload));
        }
        assert!(buf.is_empty(), "a partial frame queued");
        s.handle_written(n, budget, now);
    }
    out
}

/// The loop token [`open_and_echo`] gives its client's session.
pub const ECHO_TOKEN: u64 = 11;

/// Drives the client of [`open_and_echo`] on the loop; counts opens and echoes.
struct Echo<'a> {
    ws: &'a mut WsClient,
    msg: &'a str,
    opened: bool,
    echoed: u64,
}

impl Echo<'_> {
    fn on_ws(&mut self, ready: Option<(u64, Readiness)>, cx: &mut Context<'_>) {
        let now = cx.now();
        let (opened, echoed, msg) = (&mut self.opened, &mut self.echoed, self.msg);
        let on: &mut dyn FnMut(WsId, WsEvent<'_>, &mut Budget) = &mut |_, ev, _| match ev {
            WsEvent::Open => *opened = true,
            WsEvent::Text(t) => {
                assert_eq!(t, msg);
                *echoed += 1;
            }
            _ => {}
        };
        match ready {
            Some((token, ready)) => {
                assert!(self.ws.handle_ready(token, ready, cx.budget(), now, on));
            }
            None => self.ws.handle_timeout(cx.budget(), now, on),
        }
    }
}

impl ClientHandler for Echo<'_> {
    fn on_response(&mut self, _: &mut Context<'_>, _: RequestId, _: Response<'_>, _: Flight) {
        unreachable!("no HTTP here");
    }
    fn on_error(&mut self, _: &mut Context<'_>, _: RequestId, _: Sent, _: Error) {
        unreachable!("no HTTP here");
    }
    fn on_fd(&mut self, cx: &mut Context<'_>, token: u64, ready: Readiness) {
        self.on_ws(Some((token, ready)), cx);
    }
    fn on_turn(&mut self, cx: &mut Context<'_>) {
        self.on_ws(None, cx);
    }
}

/// A loop on `budget` and `ws` attached to it under [`ECHO_TOKEN`], session `id`
/// connecting with `req`.
pub fn echo_loop(budget: Budget, ws: &mut WsClient, id: WsId, req: &Upgrade<'_>) -> EventLoop {
    let mut lp = EventLoop::new(LoopConfig::default(), budget).unwrap();
    ws.attach(lp.registry().unwrap(), ECHO_TOKEN);
    let now = lp.now();
    ws.connect(id, req, Class::Normal, lp.budget_mut(), now)
        .unwrap();
    lp
}

/// Waits for `ws`'s session `id` to open on the loop `lp` (see [`echo_loop`]),
/// then sends `msg` and waits for its echo, `warmup + rounds` times; calls
/// `watch(true)` after the warm-up and `watch(false)` at the end (or before it
/// panics). One deadline, [`IO_TIMEOUT`], for all of it. Returns the echoes
/// seen.
pub fn open_and_echo(
    lp: &mut EventLoop,
    ws: &mut WsClient,
    id: WsId,
    msg: &str,
    (warmup, rounds): (u64, u64),
    watch: fn(bool),
) -> u64 {
    let deadline = Instant::now() + IO_TIMEOUT;
    let mut h = Echo {
        ws,
        msg,
        opened: false,
        echoed: 0,
    };
    while !h.opened {
        assert!(Instant::now() < deadline, "no handshake");
        lp.turn(&mut h).unwrap();
    }
    for round in 0..rounds + warmup {
        if round == warmup {
            watch(true);
        }
        let t = lp.now();
        h.ws.session_mut(id)
            .unwrap()
            .send_text(msg, Class::Normal, lp.budget_mut(), t)
            .unwrap();
        h.ws.flush(id, lp.budget_mut(), t);
        let before = h.echoed;
        while h.echoed == before {
            if Instant::now() > deadline {
                watch(false);
                panic!("echo {round} never came");
            }
            lp.turn(&mut h).unwrap();
        }
    }
    watch(false);
    h.echoed
}
