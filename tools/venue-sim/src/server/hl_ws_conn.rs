//! One connection to Hyperliquid's WebSocket (`/ws`): each text frame answered
//! under the venue lock, WebSocket pings answered, and the end handed to the
//! venue (which frees the users it tracked). The rules are
//! `profiles::hyperliquid::ws`'s; this is the thin I/O shell around them.
//! Fragmented frames are not reassembled (continuations and binary frames are
//! ignored).

use std::collections::VecDeque;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;

use crate::profiles::hyperliquid::ws::HlWsSession;
use crate::server::shared::Shared;
use crate::server::ws_control::{close, control, read_more, send_text, set_timeouts, Step};
use crate::ws::frame::{parse, Parsed, OP_TEXT};

/// Serves one upgraded connection until it ends. `rest` holds the bytes read
/// after the upgrade request.
pub(crate) fn serve(
    mut stream: TcpStream,
    rest: Vec<u8>,
    mut session: HlWsSession,
    shared: &Shared,
) {
    set_timeouts(&stream);
    let mut buf = rest;
    let mut chunk = [0u8; 8192];
    // The server sends no WebSocket pings, so no pong is awaited.
    let mut awaiting: VecDeque<(Vec<u8>, i64)> = VecDeque::new();
    'conn: loop {
        if shared.stop.load(Ordering::SeqCst) {
            close(&mut stream, 1001);
            break;
        }
        loop {
            match parse(&buf) {
                Parsed::Partial => break,
                Parsed::Bad(code) => {
                    close(&mut stream, code);
                    break 'conn;
                }
                Parsed::Frame(f, used) => {
                    buf.drain(..used);
                    if f.opcode != OP_TEXT {
                        match control(&mut stream, f.opcode, &f.payload, &mut awaiting) {
                            Step::Open => continue,
                            Step::Closed | Step::Failed => break 'conn,
                        }
                    }
                    let now = shared.now_ms();
                    let text = shared.venue().hl_ws_text(&mut session, &f.payload, now);
                    if !send_text(&mut stream, &text) {
                        break 'conn;
                    }
                }
            }
        }
        match read_more(&mut stream, &mut chunk, &mut buf) {
            Step::Open => {}
            Step::Closed | Step::Failed => break,
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
    let now = shared.now_ms();
    shared.venue().hl_ws_end(&mut session, now);
}
