//! One connection to Hyperliquid's WebSocket (`/ws`): each text frame answered
//! under the venue lock, WebSocket pings answered, and the end handed to the
//! venue (which frees the users it tracked). The rules are
//! `profiles::hyperliquid::ws`'s; this is the thin I/O shell around them.
//! Fragmented frames are not reassembled (continuations and binary frames are
//! ignored).

use std::collections::VecDeque;
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::profiles::hyperliquid::ws::HlWsSession;
use crate::server::shared::Shared;
use crate::server::ws_control::{control, read_more, Step};
use crate::ws::frame::{encode, parse, Parsed, OP_CLOSE, OP_TEXT};

/// How long a read waits before the loop looks at the stop flag.
const TICK: Duration = Duration::from_millis(2);
/// Longest a write to a client may block.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves one upgraded connection until it ends. `rest` holds the bytes read
/// after the upgrade request.
pub(crate) fn serve(
    mut stream: TcpStream,
    rest: Vec<u8>,
    mut session: HlWsSession,
    shared: &Shared,
) {
    let _ = stream.set_read_timeout(Some(TICK));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let mut buf = rest;
    let mut chunk = [0u8; 8192];
    // The server sends no WebSocket pings, so no pong is awaited.
    let mut awaiting: VecDeque<(Vec<u8>, i64)> = VecDeque::new();
    'conn: loop {
        if shared.stop.load(Ordering::SeqCst) {
            let _ = stream.write_all(&encode(OP_CLOSE, &1001u16.to_be_bytes()));
            break;
        }
        loop {
            match parse(&buf) {
                Parsed::Partial => break,
                Parsed::Bad(code) => {
                    let _ = stream.write_all(&encode(OP_CLOSE, &code.to_be_bytes()));
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
                    if stream.write_all(&encode(OP_TEXT, text.as_bytes())).is_err() {
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
