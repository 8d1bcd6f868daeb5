//! One connection to Bybit's private WebSocket (`/v5/private`): text frames
//! answered one at a time under the venue lock, WebSocket pings answered, the
//! idle cut at the session's `max_active_time`, and the end handed to the venue
//! (which arms DCP). The rules are `profiles::bybit::private`'s; this is the
//! thin I/O shell around them. Fragmented frames are not reassembled
//! (continuations and binary frames are ignored).

use std::collections::VecDeque;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;

use crate::profiles::bybit::private::{End, PrivateSession};
use crate::server::shared::Shared;
use crate::server::ws_control::{close, control, read_more, send_text, set_timeouts, Step};
use crate::ws::frame::{parse, Parsed, OP_PING, OP_TEXT};

/// Serves one upgraded private connection until it ends. `rest` holds the bytes
/// read after the upgrade request.
pub(crate) fn serve(
    mut stream: TcpStream,
    rest: Vec<u8>,
    mut session: PrivateSession,
    shared: &Shared,
) {
    set_timeouts(&stream);
    let mut buf = rest;
    let mut chunk = [0u8; 8192];
    // The server never pings here, so no pong is ever awaited.
    let mut awaiting: VecDeque<(Vec<u8>, i64)> = VecDeque::new();
    let cuts = shared.private_cuts.load(Ordering::SeqCst);
    let (end, at) = 'conn: loop {
        if shared.private_cuts.load(Ordering::SeqCst) != cuts {
            break (End::Closed, shared.now_ms());
        }
        if shared.stop.load(Ordering::SeqCst) {
            close(&mut stream, 1001);
            break (End::Stopped, shared.now_ms());
        }
        let now = shared.now_ms();
        if now >= session.cut_at() {
            close(&mut stream, 1000);
            break (End::Idle, session.cut_at());
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
                    let step = match f.opcode {
                        OP_TEXT => {
                            let text =
                                shared
                                    .venue()
                                    .bybit_private_text(&mut session, &f.payload, now);
                            match send_text(&mut stream, &text) {
                                true => Step::Open,
                                false => Step::Failed,
                            }
                        }
                        op => {
                            if op == OP_PING {
                                shared.venue().bybit_private_ping(&mut session, now);
                            }
                            control(&mut stream, op, &f.payload, &mut awaiting)
                        }
                    };
                    match step {
                        Step::Open => {}
                        Step::Closed | Step::Failed => break 'conn (End::Closed, now),
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
    shared.venue().bybit_private_end(&mut session, at, end);
}
