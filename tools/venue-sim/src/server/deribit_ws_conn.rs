//! One connection to Deribit's JSON-RPC WebSocket (`/ws/api/v2`): text frames
//! answered one at a time under the venue lock, WebSocket pings answered, the
//! venue's heartbeats and closes when its timers say so, and the end handed to
//! the venue (which applies cancel-on-disconnect). The rules are
//! `profiles::deribit::ws`'s; this is the thin I/O shell around them.
//! Fragmented frames are not reassembled (continuations and binary frames are
//! ignored).

use std::collections::VecDeque;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::profiles::deribit::ws::{DeribitSession, End, WsPoll, WsStep};
use crate::server::shared::{sleep_unless_stopped, Shared};
use crate::server::ws_control::{close, control, read_more, send_text, set_timeouts, Step};
use crate::ws::frame::{parse, Parsed, OP_TEXT};

/// Serves one upgraded connection until it ends. `rest` holds the bytes read
/// after the upgrade request.
pub(crate) fn serve(
    mut stream: TcpStream,
    rest: Vec<u8>,
    mut session: DeribitSession,
    shared: &Shared,
) {
    set_timeouts(&stream);
    let mut buf = rest;
    let mut chunk = [0u8; 8192];
    // The server never sends WebSocket pings here, so no pong is awaited.
    let mut awaiting: VecDeque<(Vec<u8>, i64)> = VecDeque::new();
    let cuts = shared.deribit_cuts.load(Ordering::SeqCst);
    let (end, at) = 'conn: loop {
        if shared.deribit_cuts.load(Ordering::SeqCst) != cuts {
            break (End::Closed, shared.now_ms());
        }
        if shared.stop.load(Ordering::SeqCst) {
            close(&mut stream, 1001);
            break (End::Stopped, shared.now_ms());
        }
        let now = shared.now_ms();
        if now >= session.poll_timeout() {
            loop {
                let polled = shared.venue().deribit_ws_poll(&mut session, now);
                match polled {
                    WsPoll::Wait => break,
                    WsPoll::Send(text) => {
                        if !send_text(&mut stream, &text) {
                            break 'conn (End::Closed, now);
                        }
                    }
                    WsPoll::End(end, at) => {
                        close(&mut stream, 1000);
                        break 'conn (end, at);
                    }
                }
            }
        }
        loop {
            match parse(&buf) {
                Parsed::Partial => break,
                Parsed::Bad(code) => {
                    close(&mut stream, code);
                    break 'conn (End::Closed, now);
                }
                Parsed::Frame(f, used) => {
                    buf.drain(..used);
                    let now = shared.now_ms();
                    session.heard(now);
                    if f.opcode != OP_TEXT {
                        match control(&mut stream, f.opcode, &f.payload, &mut awaiting) {
                            Step::Open => continue,
                            Step::Closed | Step::Failed => break 'conn (End::Closed, now),
                        }
                    }
                    let step = shared
                        .venue()
                        .deribit_ws_text(&mut session, &f.payload, now);
                    let text = match step {
                        WsStep::Answer(text) => text,
                        WsStep::AnswerThenEnd(text, end) => {
                            send_text(&mut stream, &text);
                            close(&mut stream, 1008);
                            break 'conn (end, now);
                        }
                        WsStep::End(end) => {
                            close(&mut stream, 1000);
                            break 'conn (end, now);
                        }
                        WsStep::Delay { op, account, ms } => {
                            sleep_unless_stopped(Duration::from_millis(ms), shared);
                            let later = shared.now_ms();
                            shared.venue().deribit_ws_delayed(op, account, later)
                        }
                    };
                    if !send_text(&mut stream, &text) {
                        break 'conn (End::Closed, now);
                    }
                }
            }
        }
        match read_more(&mut stream, &mut chunk, &mut buf) {
            Step::Open => {}
            Step::Closed | Step::Failed => break (End::Closed, shared.now_ms()),
        }
    };
    let _ = stream.shutdown(Shutdown::Both);
    shared.venue().deribit_ws_end(&mut session, at, end);
}
