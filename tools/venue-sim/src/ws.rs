//! The WebSocket endpoint: Binance Spot's user data stream, with the limits Binance
//! documents for its WebSocket connections enforced strictly.
//!
//! - `POST /api/v3/userDataStream` (API key only) answers `{"listenKey": ...}`;
//!   `PUT` with `listenKey` keeps it alive, `DELETE` closes it (its connections are
//!   closed with 1000). The stream is at `GET /ws/<listenKey>` (RFC 6455 upgrade).
//! - Order changes of the account are pushed as `executionReport` events with the
//!   documented field names (`e E s c S o f q p P F g C x X r i l z L n N T t I w m
//!   M O Z Y Q W V`): `NEW` on placement, `CANCELED` on cancel (`c` the cancel's
//!   client order id, `C` the original one), `TRADE` on a fill.
//! - Incoming messages are limited per connection: at most
//!   [`WsLimits::messages_per_s`](crate::WsLimits::messages_per_s) frames (pings, pongs and closes included) in any
//!   rolling second; the frame over it cuts the connection (TCP closed, no close
//!   frame).
//! - Connects are limited per IP: at most [`WsLimits::connects`](crate::WsLimits::connects) attempts in any
//!   rolling [`WsLimits::connect_window_ms`](crate::WsLimits::connect_window_ms); over it the upgrade is answered 429,
//!   and an IP refused [`WsLimits::ban_after_refused`](crate::WsLimits::ban_after_refused) times inside one window is
//!   banned (418 to every request and connect, as a REST ban).
//! - The server pings every [`WsLimits::ping_interval_ms`](crate::WsLimits::ping_interval_ms) and cuts a connection
//!   that leaves a ping unanswered for [`WsLimits::pong_timeout_ms`](crate::WsLimits::pong_timeout_ms); a pong
//!   carries its ping's payload and answers that ping and every older one (a
//!   client may answer only the latest of several, RFC 6455 §5.5.3).
//!
//! Binance has since moved Spot user data to a subscription on its WebSocket API;
//! the listenKey flow played here is the one documented for `/ws/<listenKey>`.
//! Simplifications: listenKeys do not expire (Binance: 60 minutes without a
//! keepalive; a run is shorter), connections are not closed at 24 hours, and only
//! `executionReport` is sent (no `outboundAccountPosition`: balances are fixed).
//!
//! Sources:
//! - user data stream, listenKey endpoints, `executionReport` fields:
//!   <https://developers.binance.com/docs/binance-spot-api-docs/user-data-stream>,
//!   <https://raw.githubusercontent.com/binance/binance-spot-api-docs/master/user-data-stream.md>,
//!   <https://github.com/ldmax/binance-spot-api-docs/blob/master/user-data-stream.md>
//!   (the listenKey version);
//! - WebSocket limits (5 incoming messages a second per connection, pings and pongs
//!   included, a disconnect over it; 300 connects per 5 minutes per IP; a ping every
//!   3 minutes, a pong due within 10):
//!   <https://developers.binance.com/docs/binance-spot-api-docs/web-socket-streams>,
//!   <https://academy.binance.com/en/articles/what-are-binance-websocket-limits>,
//!   and the per-connection reading of the message limit by Binance staff:
//!   <https://dev.binance.vision/t/a-couple-of-questions-about-websocket-limits/2777>.
//!
//! The frame code here is the emulator's own (server side: masked frames in,
//! unmasked out), not `ergon_io::ws`: a shared bug would pass both sides. It never
//! panics on bytes from a client: a bad frame closes the connection with 1002.

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::time::Duration;

use base64::Engine;
use sha1::{Digest, Sha1};

use crate::http::{Request, Response};
use crate::server::Shared;

/// Largest frame accepted from a client (the stream takes no commands).
const MAX_FRAME: usize = 16 * 1024;
/// How long a read waits before the loop looks at events, pings and the stop flag.
const TICK: Duration = Duration::from_millis(2);
/// Longest a write to a client may block.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

const OP_TEXT: u8 = 0x1;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;

/// One subscriber: a connection on a listenKey.
struct Sub {
    id: u64,
    account: usize,
    key: String,
    tx: Sender<String>,
}

/// Listen keys, subscribers and per-IP connect records; lives in the venue state.
#[derive(Default)]
pub(crate) struct WsHub {
    keys: HashMap<String, usize>,
    next: u64,
    subs: Vec<Sub>,
    attempts: HashMap<IpAddr, VecDeque<i64>>,
    refused: HashMap<IpAddr, VecDeque<i64>>,
}

/// What [`WsHub::attempt`] decided about a connect.
pub(crate) enum Attempt {
    /// Within the limit.
    Ok,
    /// Over the limit: refuse; the oldest attempt leaves the window at this time.
    Refused { retry_at: i64 },
    /// Over the limit too often: ban the IP.
    Ban,
}

impl WsHub {
    /// A new listenKey for `account`; an account with one gets the same one back,
    /// as Binance does.
    pub(crate) fn listen_key(&mut self, account: usize, now: i64) -> (String, bool) {
        if let Some((k, _)) = self.keys.iter().find(|(_, &a)| a == account) {
            return (k.clone(), false);
        }
        self.next += 1;
        // 60 characters like Binance's; unique per emulator run.
        let k = format!(
            "{:0>20}{:0>20}{:0>20}",
            self.next,
            now.unsigned_abs(),
            account
        );
        self.keys.insert(k.clone(), account);
        (k, true)
    }

    /// The account of a live listenKey.
    pub(crate) fn account_of(&self, key: &str) -> Option<usize> {
        self.keys.get(key).copied()
    }

    /// Closes a listenKey: its connections are told to close.
    pub(crate) fn close_key(&mut self, key: &str) -> bool {
        let had = self.keys.remove(key).is_some();
        self.subs.retain(|s| s.key != key);
        had
    }

    /// Records a connect attempt from `ip` at `now` and says whether it may go on.
    pub(crate) fn attempt(
        &mut self,
        ip: IpAddr,
        lim: &crate::config::WsLimits,
        now: i64,
    ) -> Attempt {
        let from = now - lim.connect_window_ms;
        let a = self.attempts.entry(ip).or_default();
        while a.front().is_some_and(|&t| t <= from) {
            a.pop_front();
        }
        a.push_back(now);
        if a.len() <= lim.connects as usize {
            return Attempt::Ok;
        }
        let retry_at = a.front().map_or(now, |&t| t + lim.connect_window_ms);
        let r = self.refused.entry(ip).or_default();
        while r.front().is_some_and(|&t| t <= from) {
            r.pop_front();
        }
        r.push_back(now);
        if r.len() >= lim.ban_after_refused as usize {
            r.clear();
            return Attempt::Ban;
        }
        Attempt::Refused { retry_at }
    }

    /// Subscribes a connection to `key`'s events.
    pub(crate) fn subscribe(&mut self, account: usize, key: &str) -> (u64, Receiver<String>) {
        let (tx, rx) = mpsc::channel();
        self.next += 1;
        self.subs.push(Sub {
            id: self.next,
            account,
            key: key.to_string(),
            tx,
        });
        (self.next, rx)
    }

    /// Ends every connection (each gets a close 1000); the listenKeys stay valid.
    pub(crate) fn close_all(&mut self) -> usize {
        let n = self.subs.len();
        self.subs.clear();
        n
    }

    pub(crate) fn unsubscribe(&mut self, id: u64) {
        self.subs.retain(|s| s.id != id);
    }

    /// Sends `event` to every connection of `account`; returns how many took it.
    pub(crate) fn publish(&mut self, account: usize, event: &str) -> u64 {
        let mut n = 0;
        self.subs.retain(|s| {
            if s.account != account {
                return true;
            }
            let ok = s.tx.send(event.to_string()).is_ok();
            n += u64::from(ok);
            ok
        });
        n
    }
}

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

/// Why a connection ended (for the report).
enum End {
    /// Stopped, closed by either side, or the listenKey was closed.
    Normal,
    /// Over the message limit.
    Rate,
    /// A ping left unanswered.
    Pong,
    /// A bad frame.
    Protocol,
    /// The socket failed.
    Io,
}

/// Serves one upgraded connection until it ends. `rest` holds bytes read after
/// the upgrade request.
pub(crate) fn serve(
    mut stream: TcpStream,
    rest: Vec<u8>,
    sub: u64,
    events: Receiver<String>,
    shared: &Shared,
) {
    let lim = shared.venue().config().ws;
    let _ = stream.set_read_timeout(Some(TICK));
    // A client that stops reading must not hold this thread (and the stop) forever.
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let mut buf = rest;
    let mut chunk = [0u8; 4096];
    let mut recent: VecDeque<i64> = VecDeque::new();
    let start = shared.clock.now_ms();
    let mut next_ping = start + lim.ping_interval_ms;
    // Pings not answered yet, oldest first.
    let mut awaiting: VecDeque<(Vec<u8>, i64)> = VecDeque::new();
    let end = 'conn: loop {
        if shared.stop.load(Ordering::SeqCst) {
            let _ = stream.write_all(&encode(OP_CLOSE, &1001u16.to_be_bytes()));
            break End::Normal;
        }
        loop {
            match events.try_recv() {
                Ok(ev) => {
                    if stream.write_all(&encode(OP_TEXT, ev.as_bytes())).is_err() {
                        break 'conn End::Io;
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    // The listenKey was closed.
                    let _ = stream.write_all(&encode(OP_CLOSE, &1000u16.to_be_bytes()));
                    break 'conn End::Normal;
                }
            }
        }
        let now = shared.clock.now_ms();
        if now >= next_ping {
            next_ping = now + lim.ping_interval_ms;
            let payload = now.to_string().into_bytes();
            if stream.write_all(&encode(OP_PING, &payload)).is_err() {
                break End::Io;
            }
            shared.venue().ws_note(|w| w.pings += 1);
            awaiting.push_back((payload, now));
        }
        if awaiting
            .front()
            .is_some_and(|(_, at)| now - at > lim.pong_timeout_ms)
        {
            break End::Pong;
        }
        loop {
            match parse(&buf) {
                Parsed::Partial => break,
                Parsed::Bad(code) => {
                    let _ = stream.write_all(&encode(OP_CLOSE, &code.to_be_bytes()));
                    break 'conn End::Protocol;
                }
                Parsed::Frame(f, used) => {
                    buf.drain(..used);
                    let now = shared.clock.now_ms();
                    while recent.front().is_some_and(|&t| t <= now - 1_000) {
                        recent.pop_front();
                    }
                    recent.push_back(now);
                    let in_window = recent.len() as u64;
                    shared.venue().ws_note(|w| {
                        w.messages += 1;
                        w.messages_peak = w.messages_peak.max(in_window);
                    });
                    if in_window > u64::from(lim.messages_per_s) {
                        break 'conn End::Rate;
                    }
                    match f.opcode {
                        OP_PING if stream.write_all(&encode(OP_PONG, &f.payload)).is_err() => {
                            break 'conn End::Io;
                        }
                        // A pong answers its ping and every older one (RFC 6455
                        // §5.5.3 lets a client answer only the latest ping).
                        OP_PONG => {
                            if let Some(i) = awaiting.iter().position(|(p, _)| *p == f.payload) {
                                awaiting.drain(..=i);
                            }
                        }
                        OP_CLOSE => {
                            let code = f
                                .payload
                                .get(..2)
                                .map_or(1000, |c| u16::from_be_bytes([c[0], c[1]]));
                            let _ = stream.write_all(&encode(OP_CLOSE, &code.to_be_bytes()));
                            break 'conn End::Normal;
                        }
                        // The stream takes no commands; data frames are counted
                        // and ignored.
                        _ => {}
                    }
                }
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) => break End::Normal,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break End::Io,
        }
    };
    let _ = stream.shutdown(Shutdown::Both);
    let mut venue = shared.venue();
    venue.ws_unsubscribe(sub);
    venue.ws_note(|w| match end {
        End::Rate => w.cut_rate += 1,
        End::Pong => w.cut_pong += 1,
        End::Protocol => w.protocol_errors += 1,
        End::Normal | End::Io => {}
    });
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
