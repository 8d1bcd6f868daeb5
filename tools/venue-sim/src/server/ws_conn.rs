//! The WebSocket connections: Binance Spot's user data stream, with the limits Binance
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
//! Frames are `crate::ws::frame`'s. It never panics on bytes from a client: a bad
//! frame closes the connection with 1002.

use std::collections::VecDeque;
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Duration;

use crate::server::shared::Shared;
use crate::server::ws_control::{control, read_more, Step};
use crate::ws::frame::{encode, parse, Parsed, OP_CLOSE, OP_PING, OP_TEXT};

/// How long a read waits before the loop looks at events, pings and the stop flag.
const TICK: Duration = Duration::from_millis(2);
/// Longest a write to a client may block.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

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
                    // The stream takes no commands: data frames are counted and
                    // ignored, control frames answered.
                    match control(&mut stream, f.opcode, &f.payload, &mut awaiting) {
                        Step::Open => {}
                        Step::Closed => break 'conn End::Normal,
                        Step::Failed => break 'conn End::Io,
                    }
                }
            }
        }
        match read_more(&mut stream, &mut chunk, &mut buf) {
            Step::Open => {}
            Step::Closed => break End::Normal,
            Step::Failed => break End::Io,
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
