//! One WebSocket API connection (`/ws-api/v3`): requests read one text frame at a
//! time, each admitted and run under the venue lock like a REST request, with the
//! same faults (close before executing, execute then close without answering,
//! delay, 5xx after or without executing); events of its subscriptions pushed on
//! the same connection; server pings every
//! [`WsLimits::api_ping_interval_ms`](crate::WsLimits::api_ping_interval_ms) (the
//! docs: 20 s), and the connection dropped when a pong is
//! [`WsLimits::api_pong_timeout_ms`](crate::WsLimits::api_pong_timeout_ms) late
//! (a minute). The WebSocket API has no per-connection message limit of its own:
//! requests are limited by their weight. A 418 (ban) answer ends the connection,
//! as documented ("you will be disconnected"). Fragmented frames are not
//! reassembled (continuations are ignored); no Binance client sends them.

use std::collections::VecDeque;
use std::io::Write;
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

use crate::config::Fault;
use crate::engine::state::Venue;
use crate::http::Response;
use crate::profiles::binance::ws_api::{ApiAdmission, ApiSession};
use crate::server::shared::{sleep_unless_stopped, Shared};
use crate::server::ws_control::{close, control, read_more, send_text, set_timeouts, Step};
use crate::ws::frame::{encode, parse, Parsed, OP_PING, OP_TEXT};

/// Why a connection ended (for the report).
enum End {
    /// Stopped, closed by either side, a fault or a ban.
    Normal,
    /// A ping left unanswered.
    Pong,
    /// A bad frame.
    Protocol,
    /// The socket failed.
    Io,
}

/// Serves one upgraded WebSocket API connection until it ends. `rest` holds the
/// bytes read after the upgrade request; `rate_limits` is the URL's
/// `returnRateLimits` (default true).
pub(crate) fn serve(
    mut stream: TcpStream,
    rest: Vec<u8>,
    ip: IpAddr,
    rate_limits: bool,
    shared: &Shared,
) {
    let lim = shared.venue().config().ws;
    set_timeouts(&stream);
    let (tx, events) = mpsc::channel();
    let mut session = ApiSession::new(tx, rate_limits, shared.now_ms());
    let mut buf = rest;
    let mut chunk = [0u8; 8192];
    let mut next_ping = shared.now_ms() + lim.api_ping_interval_ms;
    let mut awaiting: VecDeque<(Vec<u8>, i64)> = VecDeque::new();
    let end = 'conn: loop {
        if shared.stop.load(Ordering::SeqCst) {
            close(&mut stream, 1001);
            break End::Normal;
        }
        // The session holds a sender, so the channel never disconnects.
        while let Ok(ev) = events.try_recv() {
            if !send_text(&mut stream, &ev) {
                break 'conn End::Io;
            }
        }
        let now = shared.now_ms();
        if now >= next_ping {
            next_ping = now + lim.api_ping_interval_ms;
            let payload = now.to_string().into_bytes();
            if stream.write_all(&encode(OP_PING, &payload)).is_err() {
                break End::Io;
            }
            shared.venue().ws_note(|w| w.pings += 1);
            awaiting.push_back((payload, now));
        }
        if awaiting
            .front()
            .is_some_and(|(_, at)| now - at > lim.api_pong_timeout_ms)
        {
            break End::Pong;
        }
        loop {
            match parse(&buf) {
                Parsed::Partial => break,
                Parsed::Bad(code) => {
                    close(&mut stream, code);
                    break 'conn End::Protocol;
                }
                Parsed::Frame(f, used) => {
                    buf.drain(..used);
                    shared.venue().ws_note(|w| w.messages += 1);
                    match f.opcode {
                        OP_TEXT => match request(&mut stream, &f.payload, ip, &mut session, shared)
                        {
                            Keep::Open => {}
                            Keep::Close => break 'conn End::Normal,
                            Keep::Failed => break 'conn End::Io,
                        },
                        op => match control(&mut stream, op, &f.payload, &mut awaiting) {
                            Step::Open => {}
                            Step::Closed => break 'conn End::Normal,
                            Step::Failed => break 'conn End::Io,
                        },
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
    venue.ws_api_end(&mut session);
    venue.ws_note(|w| match end {
        End::Pong => w.cut_pong += 1,
        End::Protocol => w.protocol_errors += 1,
        End::Normal | End::Io => {}
    });
}

/// What happens to the connection after a request.
enum Keep {
    Open,
    /// Closed on purpose: a fault or a ban.
    Close,
    /// The answer could not be written.
    Failed,
}

/// Handles one request frame, faults included.
fn request(
    stream: &mut TcpStream,
    text: &[u8],
    ip: IpAddr,
    session: &mut ApiSession,
    shared: &Shared,
) -> Keep {
    let now = shared.now_ms();
    let mut venue = shared.venue();
    let run = match venue.ws_api_admit(text, ip, now, session) {
        ApiAdmission::Answer { text, close } => {
            drop(venue);
            return send(stream, &text, close);
        }
        ApiAdmission::Run(run) => run,
    };
    let answer = |venue: &Venue, r: &Response, at: i64| {
        venue.ws_api_answer(
            &run.id,
            r,
            ip,
            Some(run.account),
            run.limits,
            run.orders,
            at,
        )
    };
    let Some(fault) = run.fault else {
        let r = venue.ws_api_run(&run, session, now, now);
        let text = answer(&venue, &r, now);
        drop(venue);
        return send(stream, &text, false);
    };
    venue.note_fault(fault);
    match fault {
        Fault::CloseBeforeExecute => {
            venue.binance_not_executed(&run.op, run.account, now);
            Keep::Close
        }
        Fault::ExecuteThenClose => {
            venue.ws_api_run(&run, session, now, now);
            Keep::Close
        }
        Fault::ServerErrorAfterExecute | Fault::ServerErrorNoExecute => {
            let executed = fault == Fault::ServerErrorAfterExecute;
            if executed {
                venue.ws_api_run(&run, session, now, now);
            } else {
                venue.binance_not_executed(&run.op, run.account, now);
            }
            let r = venue.binance_server_error(executed);
            let text = answer(&venue, &r, now);
            drop(venue);
            send(stream, &text, false)
        }
        Fault::Delay => {
            let delay = Duration::from_millis(venue.config().faults.delay_ms);
            drop(venue);
            sleep_unless_stopped(delay, shared);
            let later = shared.now_ms();
            let mut venue = shared.venue();
            venue.note_delay_settled();
            // The matching engine refuses a request past its recvWindow, over the
            // WebSocket API as over REST ("Timing security",
            // https://developers.binance.com/docs/binance-spot-api-docs/websocket-api/request-security).
            let r = if run.valid_until.is_some_and(|t| later > t) {
                venue.binance_not_executed(&run.op, run.account, now);
                Response::error(
                    400,
                    -1021,
                    "Timestamp for this request is outside of the recvWindow.",
                )
            } else {
                venue.ws_api_run(&run, session, later, now)
            };
            let text = answer(&venue, &r, later);
            drop(venue);
            send(stream, &text, false)
        }
    }
}

fn send(stream: &mut TcpStream, text: &str, then_close: bool) -> Keep {
    if !send_text(stream, text) {
        return Keep::Failed;
    }
    if then_close {
        close(stream, 1008);
        return Keep::Close;
    }
    Keep::Open
}
