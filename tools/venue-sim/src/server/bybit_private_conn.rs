//! One connection to Bybit's private WebSocket (`/v5/private`): text frames
//! answered one at a time under the venue lock, WebSocket pings answered, the
//! idle cut at the session's `max_active_time`, and the end handed to the venue
//! (which arms DCP). The rules are `profiles::bybit::private`'s; this is the
//! thin I/O shell around them. Fragmented frames are not reassembled
//! (continuations and binary frames are ignored).

use std::collections::VecDeque;
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::profiles::bybit::private::{End, PrivateSession};
use crate::server::shared::Shared;
use crate::server::ws_control::{control, read_more, Step};
use crate::ws::frame::{encode, parse, Parsed, OP_CLOSE, OP_PING, OP_TEXT};

/// How long a read waits before the loop looks at the clock and the stop flag.
const TICK: Duration = Duration::from_millis(2);
/// Longest a write to a client may block.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves one upgraded private connection until it ends. `rest` holds the bytes
/// read after the upgrade request.
pub(crate) fn serve(
    mut stream: TcpStream,
    rest: Vec<u8>,
    mut session: PrivateSession,
    shared: &Shared,
) {
    let _ = stream.set_read_timeout(Some(TICK));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
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
            let _ = stream.write_all(&encode(OP_CLOSE, &1001u16.to_be_bytes()));
            break (End::Stopped, shared.now_ms());
        }
        let now = shared.now_ms();
        if now >= session.cut_at() {
            let _ = stream.write_all(&encode(OP_CLOSE, &1000u16.to_be_bytes()));
            break (End::Idle, session.cut_at());
        }
        loop {
            match parse(&buf) {
                Parsed::Partial => break,
                Parsed::Bad(code) => {
                    let _ = stream.write_all(&encode(OP_CLOSE, &code.to_be_bytes()));
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
                            match stream.write_all(&encode(OP_TEXT, text.as_bytes())) {
                                Ok(()) => Step::Open,
                                Err(_) => Step::Failed,
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
